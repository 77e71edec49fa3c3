//! Mutation of existing KCL files (the repository's fixtures, the shared grammar suite): small
//! edits that keep most of a real program while reaching the error paths and the corners the
//! generator does not (operators swapped, literals changed, lines dropped, duplicated or
//! swapped, names misspelt, annotations changed or reshaped, values wrapped in a list,
//! converted with `as`, unpacked or made conditional, augmented assignments added).

use super::gen_::Rng;

const WORDS: &[&str] = &["x", "web", "", "1", "None", "a.b", "True", "100Mi"];

pub fn mutate(src: &str, rng: &mut Rng) -> String {
    let mut lines: Vec<String> = src.lines().map(String::from).collect();
    if lines.is_empty() {
        return src.to_string();
    }
    for _ in 0..1 + rng.below(2) {
        let i = rng.below(lines.len());
        let l = lines[i].clone();
        match rng.below(13) {
            0 => {
                // config / assignment operator
                let swaps = [
                    (" = ", ": "),
                    (": ", " = "),
                    (" = ", " += "),
                    (" += ", " = "),
                ];
                let (a, b) = *rng.pick(&swaps);
                if let Some(p) = l.find(a) {
                    lines[i] = format!("{}{b}{}", &l[..p], &l[p + a.len()..]);
                }
            }
            1 => {
                // an integer literal
                if let Some((s, e)) = find_number(&l) {
                    let n = *rng.pick(&["0", "-1", "2", "999999999999", "3"]);
                    lines[i] = format!("{}{n}{}", &l[..s], &l[e..]);
                }
            }
            2 if lines.len() > 1 => {
                lines.remove(i);
            }
            3 => lines.insert(i, l),
            4 if i + 1 < lines.len() => {
                let ind = |s: &str| s.len() - s.trim_start().len();
                if ind(&lines[i]) == ind(&lines[i + 1]) {
                    lines.swap(i, i + 1);
                }
            }
            5 => {
                // misspell an identifier
                if let Some((s, e)) = find_ident(&l) {
                    lines[i] = format!("{}{}x{}", &l[..s], &l[s..e], &l[e..]);
                }
            }
            6 => {
                // a string literal
                if let Some(s) = l.find('"')
                    && let Some(e) = l[s + 1..].find('"')
                {
                    let w = *rng.pick(WORDS);
                    lines[i] = format!("{}\"{w}\"{}", &l[..s], &l[s + 2 + e..]);
                }
            }
            7 => {
                let swaps = [
                    (": int", ": str"),
                    (": str", ": int"),
                    ("[str]", "[int]"),
                    (": bool", ": int"),
                ];
                let (a, b) = *rng.pick(&swaps);
                lines[i] = l.replacen(a, b, 1);
            }
            9 => {
                // a value wrapped in a list (a config where a list of them is wanted, ...)
                if let Some((p, v)) = one_line_value(&l) {
                    lines[i] = format!("{} = [{v}]", &l[..p]);
                }
            }
            10 => {
                // a declared type widened or reshaped: a list, a dict, a union, optional
                let swaps = [
                    (": int", ": [int]"),
                    (": str", ": {str:str}"),
                    (": str", ": str | int"),
                    (": int", ": float"),
                    (": ", "?: "),
                    ("?: ", ": "),
                ];
                let (a, b) = *rng.pick(&swaps);
                lines[i] = l.replacen(a, b, 1);
            }
            11 => {
                // a value converted or unpacked
                if let Some((p, v)) = one_line_value(&l) {
                    let w = match rng.below(3) {
                        0 => format!("{v} as int"),
                        1 => format!("{{**{v}}}"),
                        _ => format!("{v} if True else None"),
                    };
                    lines[i] = format!("{} = {w}", &l[..p]);
                }
            }
            12 => {
                // an augmented assignment of the line's value to its own target
                if let Some(p) = l.find(" = ")
                    && !l.trim_start().starts_with('#')
                    && !l.trim_end().ends_with(['{', '[', '('])
                {
                    let ind = &l[..l.len() - l.trim_start().len()];
                    let target = l[..p].trim();
                    if !target.is_empty() && !target.contains([':', ' ']) {
                        let v = l[p + 3..].trim_end();
                        lines.insert(i + 1, format!("{ind}{target} += {v}"));
                    }
                }
            }
            _ => {
                let swaps = [
                    (" + ", " - "),
                    (" and ", " or "),
                    (" < ", " >= "),
                    ("True", "False"),
                    (" | ", " + "),
                ];
                let (a, b) = *rng.pick(&swaps);
                lines[i] = l.replacen(a, b, 1);
            }
        }
    }
    lines.join("\n") + "\n"
}

/// Where `l`'s ` = ` is and the value after it, when the value is on that line (not the
/// opening bracket of a longer one).
fn one_line_value(l: &str) -> Option<(usize, &str)> {
    let p = l.find(" = ")?;
    let v = l[p + 3..].trim_end();
    (!v.trim().is_empty() && !v.ends_with(['{', '[', '('])).then_some((p, v))
}

fn find_number(l: &str) -> Option<(usize, usize)> {
    let b = l.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_digit()
            && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_'))
        {
            let s = i;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            return Some((s, i));
        }
        i += 1;
    }
    None
}

fn find_ident(l: &str) -> Option<(usize, usize)> {
    let b = l.as_bytes();
    let mut found = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_alphabetic() || b[i] == b'_' {
            let s = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            let w = &l[s..i];
            if ![
                "schema", "import", "if", "else", "for", "in", "lambda", "check", "and", "or",
                "not", "True", "False", "None",
            ]
            .contains(&w)
            {
                found.push((s, i));
            }
        } else {
            i += 1;
        }
    }
    found.last().copied()
}
