//! Schema docstrings as hover and completion show them: the numpy-style `Attributes` entry of
//! one attribute, and the summary line.

/// The attribute documentation in a schema docstring's numpy-style `Attributes` section:
/// `name : type, default is ..., required` then indented text.
pub fn attr_doc(doc: &str, attr: &str) -> Option<String> {
    let lines: Vec<&str> = doc.lines().collect();
    let start = lines.iter().position(|l| l.trim() == "Attributes")?;
    let mut i = start + 1;
    if lines.get(i).is_some_and(|l| l.trim().starts_with("---")) {
        i += 1;
    }
    let indent = |l: &str| l.len() - l.trim_start().len();
    let mut base: Option<usize> = None;
    while i < lines.len() {
        let l = lines[i];
        if l.trim().is_empty() {
            i += 1;
            continue;
        }
        let ind = indent(l);
        let b = *base.get_or_insert(ind);
        if ind < b {
            break;
        }
        if ind == b {
            // a new section (`Examples` + dashes) ends the attributes
            if lines
                .get(i + 1)
                .is_some_and(|n| n.trim().starts_with("---"))
            {
                break;
            }
            let head = l.trim();
            let name = head.split(':').next().unwrap_or("").trim();
            if name == attr {
                let mut out = vec![head.to_string()];
                let mut j = i + 1;
                while j < lines.len() && (lines[j].trim().is_empty() || indent(lines[j]) > b) {
                    out.push(lines[j].trim().to_string());
                    j += 1;
                }
                while out.last().is_some_and(|s| s.is_empty()) {
                    out.pop();
                }
                return Some(out.join("\n"));
            }
        }
        i += 1;
    }
    None
}

/// A schema docstring without its `Attributes` section (the summary shown on hover).
pub fn doc_summary(doc: &str) -> String {
    let mut out = Vec::new();
    let lines: Vec<&str> = doc.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let l = lines[i].trim();
        if l == "Attributes"
            && lines
                .get(i + 1)
                .is_some_and(|n| n.trim().starts_with("---"))
        {
            break;
        }
        out.push(l);
        i += 1;
    }
    while out.last().is_some_and(|s| s.is_empty()) {
        out.pop();
    }
    while out.first().is_some_and(|s| s.is_empty()) {
        out.remove(0);
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attribute_docs_from_numpy_docstrings() {
        let doc = "Server is the abstraction.\n\n    Attributes\n    ----------\n    name : str, default is Undefined, required\n        The name.\n        More.\n    image : str\n        The image.\n\n    Examples\n    --------\n    x\n";
        assert_eq!(
            attr_doc(doc, "name").as_deref(),
            Some("name : str, default is Undefined, required\nThe name.\nMore.")
        );
        assert_eq!(
            attr_doc(doc, "image").as_deref(),
            Some("image : str\nThe image.")
        );
        assert_eq!(attr_doc(doc, "x"), None);
        assert_eq!(doc_summary(doc), "Server is the abstraction.");
    }
}
