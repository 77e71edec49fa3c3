//! Reduce a program on which the two implementations differ to a few lines that still differ
//! the same way: drop whole files, then blocks (a line with the lines indented under it), then
//! single lines, then `kcl run` options, while the difference keeps its kind.

use super::oracle::{Diff, Outcome, Program, Upstream, Verdict, compare, run_ours};

/// The difference of `p` written to `dir`, with both outcomes.
pub fn differ_in(
    oracle: &mut Upstream,
    p: &Program,
    dir: &std::path::Path,
) -> Option<(Diff, Outcome, Outcome)> {
    p.write(dir);
    let Verdict::Agreed(up) = oracle.run(p, dir) else {
        return None;
    };
    let ours = run_ours(p, dir)?;
    compare(&up, &ours, dir).map(|d| (d, up, ours))
}

/// The smallest program found that differs like `p` does (`budget` bounds the oracle calls).
pub fn shrink(oracle: &mut Upstream, p: &Program, want: &Diff, budget: usize) -> Program {
    let mut cur = p.clone();
    let mut calls = 0;
    // a failing program keeps upstream's error (else it would shrink to another difference)
    let dir = tempfile::tempdir().unwrap();
    let key = |o: &Outcome, d: &std::path::Path| (!o.ok()).then(|| o.error_key(d));
    let want_key = match differ_in(oracle, p, dir.path()) {
        Some((_, u, _)) => key(&u, dir.path()),
        None => return cur,
    };
    let mut still = |q: &Program, calls: &mut usize| -> bool {
        if *calls >= budget {
            return false;
        }
        *calls += 1;
        let d = tempfile::tempdir().unwrap();
        matches!(differ_in(oracle, q, d.path()), Some((x, u, _)) if &x == want && key(&u, d.path()) == want_key)
    };
    loop {
        let mut progress = false;
        // whole files not named on the command line (packages) or extra main files
        for i in (0..cur.files.len()).rev() {
            let mut q = cur.clone();
            let (name, _) = q.files.remove(i);
            if name == "kcl.mod" {
                continue;
            }
            q.args.retain(|a| a != &name);
            if q.args.iter().any(|a| a.ends_with(".k")) && still(&q, &mut calls) {
                cur = q;
                progress = true;
            }
        }
        // blocks and lines, largest first
        for fi in 0..cur.files.len() {
            let mut chunk = 8usize;
            while chunk >= 1 {
                let mut start = 0;
                loop {
                    let lines: Vec<&str> = cur.files[fi].1.lines().collect();
                    if start >= lines.len() {
                        break;
                    }
                    let end = block_end(&lines, start, chunk);
                    let mut q = cur.clone();
                    let text: Vec<&str> = lines[..start]
                        .iter()
                        .chain(lines[end..].iter())
                        .copied()
                        .collect();
                    q.files[fi].1 = text.join("\n") + "\n";
                    if end > start && still(&q, &mut calls) {
                        cur = q;
                        progress = true;
                    } else {
                        start += 1;
                    }
                }
                chunk /= 2;
            }
        }
        // options
        let mut i = 0;
        while i < cur.args.len() {
            let a = cur.args[i].clone();
            if a.starts_with('-') && !a.ends_with(".k") {
                let mut q = cur.clone();
                let n = if matches!(a.as_str(), "-D" | "-E" | "-Y" | "-O" | "-S") {
                    2
                } else {
                    1
                };
                q.args.drain(i..(i + n).min(q.args.len()));
                if still(&q, &mut calls) {
                    cur = q;
                    progress = true;
                    continue;
                }
            }
            i += 1;
        }
        if !progress || calls >= budget {
            return cur;
        }
    }
}

/// The end (exclusive) of `count` statements starting at line `start`: each with the lines
/// indented deeper than it (its body) and blank lines.
fn block_end(lines: &[&str], start: usize, count: usize) -> usize {
    let indent = |l: &str| l.len() - l.trim_start().len();
    let mut i = start;
    for _ in 0..count {
        if i >= lines.len() {
            break;
        }
        let base = indent(lines[i]);
        i += 1;
        while i < lines.len() && (lines[i].trim().is_empty() || indent(lines[i]) > base) {
            i += 1;
        }
        // the closing bracket of a multi-line literal belongs to it
        if i < lines.len()
            && indent(lines[i]) == base
            && lines[i].trim_start().starts_with(['}', ']', ')'])
        {
            i += 1;
        }
    }
    i
}
