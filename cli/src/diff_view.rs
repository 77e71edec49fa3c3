//! Changes shown as an indented YAML-style tree: one line per leaf, marked `+` (added), `-`
//! (removed) or `~` (changed) in a gutter, unchanged parents as context, list items aligned by
//! their key field (`name`, `port`, ...) the way `kubectl diff` and terraform's plan show them,
//! and long or multi-line values folded.

use console::Style;
use serde_json::{Map, Value};

use crate::render::Styles;

/// Strings longer than this are folded over several lines.
const FOLD_AT: usize = 72;
/// A folded value shows at most this many lines, then says how much is left out.
const MAX_LINES: usize = 12;
/// Fields that identify an item of a list of objects, in order of preference.
const ITEM_KEYS: &[&str] = &[
    "name",
    "key",
    "mountPath",
    "containerPort",
    "port",
    "devicePath",
    "ip",
    "type",
    "id",
];

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    Added,
    Removed,
    Changed,
    Same,
}

impl Mark {
    fn gutter(self) -> char {
        match self {
            Mark::Added => '+',
            Mark::Removed => '-',
            Mark::Changed => '~',
            Mark::Same => ' ',
        }
    }
}

/// Lines of the tree: (mark, indentation level, text).
pub struct Tree {
    lines: Vec<(Mark, usize, String)>,
    /// Paths (as `a.b[0]` text) to mark as forcing a replacement.
    forcing: Vec<String>,
}

impl Tree {
    fn new(forcing: &[String]) -> Tree {
        Tree {
            lines: Vec::new(),
            forcing: forcing.to_vec(),
        }
    }

    fn push(&mut self, mark: Mark, depth: usize, text: String) {
        self.lines.push((mark, depth, text));
    }

    /// The tree as text, each line starting with `indent`.
    pub fn render(&self, indent: &str, styles: &Styles) -> String {
        let mut out = String::new();
        for (mark, depth, text) in &self.lines {
            let style = match mark {
                Mark::Added => styles.green(),
                Mark::Removed => styles.red(),
                Mark::Changed => styles.yellow(),
                Mark::Same => Style::new(),
            };
            let line = format!("{indent}{} {}{text}", mark.gutter(), "  ".repeat(*depth));
            out.push_str(&style.apply_to(line).to_string());
            out.push('\n');
        }
        out
    }

    #[cfg(test)]
    fn plain(&self) -> String {
        self.render("", &Styles { color: false })
    }
}

/// The tree of a whole object being created (`Added`) or deleted (`Removed`).
pub fn whole(value: &Map<String, Value>, mark: Mark) -> Tree {
    let mut tree = Tree::new(&[]);
    for (k, v) in value {
        entry(&mut tree, mark, 0, k, v);
    }
    tree
}

/// The tree of what changes from `before` to `after`; `forcing` lists the paths whose change
/// forces a replacement (marked on their lines).
pub fn changes(before: &Value, after: &Value, forcing: &[String]) -> Tree {
    let mut tree = Tree::new(forcing);
    if let (Value::Object(a), Value::Object(b)) = (before, after) {
        map_diff(&mut tree, 0, a, b, "");
    } else {
        changed_scalar(&mut tree, 0, None, before, after, "");
    }
    tree
}

fn child_path(path: &str, key: &str) -> String {
    let plain = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    let seg = if plain {
        key.to_string()
    } else {
        format!("[{}]", serde_json::to_string(key).unwrap_or_default())
    };
    match (path.is_empty(), plain) {
        (true, true) => seg,
        (false, true) => format!("{path}.{seg}"),
        (_, false) => format!("{path}{seg}"),
    }
}

fn forces(tree: &Tree, path: &str) -> &'static str {
    if tree.forcing.iter().any(|f| f == path) {
        "   # forces replacement"
    } else {
        ""
    }
}

fn map_diff(
    tree: &mut Tree,
    depth: usize,
    a: &Map<String, Value>,
    b: &Map<String, Value>,
    path: &str,
) {
    for (k, va) in a {
        let p = child_path(path, k);
        match b.get(k) {
            Some(vb) => value_diff(tree, depth, Some(k), va, vb, &p),
            None => entry(tree, Mark::Removed, depth, k, va),
        }
    }
    for (k, vb) in b {
        if !a.contains_key(k) {
            entry(tree, Mark::Added, depth, k, vb);
        }
    }
}

/// The difference of one field (`key`) or list item (`key: None`).
fn value_diff(tree: &mut Tree, depth: usize, key: Option<&str>, a: &Value, b: &Value, path: &str) {
    if same(a, b) {
        return;
    }
    let head = |k: Option<&str>| k.map_or_else(|| "-".to_string(), |k| format!("{}:", key_text(k)));
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            tree.push(Mark::Same, depth, head(key) + forces(tree, path));
            map_diff(tree, depth + 1, x, y, path);
        }
        (Value::Array(x), Value::Array(y)) => {
            tree.push(Mark::Same, depth, head(key) + forces(tree, path));
            list_diff(tree, depth + 1, x, y, path);
        }
        _ => changed_scalar(tree, depth, key, a, b, path),
    }
}

fn changed_scalar(
    tree: &mut Tree,
    depth: usize,
    key: Option<&str>,
    a: &Value,
    b: &Value,
    path: &str,
) {
    let lead = key.map_or_else(|| "- ".to_string(), |k| format!("{}: ", key_text(k)));
    let note = forces(tree, path);
    let (fa, fb) = (folded(a), folded(b));
    if fa.len() == 1
        && fb.len() == 1
        && !a.is_object()
        && !a.is_array()
        && !b.is_object()
        && !b.is_array()
    {
        tree.push(
            Mark::Changed,
            depth,
            format!("{lead}{} => {}{note}", fa[0], fb[0]),
        );
        return;
    }
    let name = key.map_or_else(|| "-".to_string(), key_text);
    // Multi-line text on both sides: changed lines only, between unchanged ones.
    if let (Value::String(x), Value::String(y)) = (a, b)
        && (x.contains('\n') || y.contains('\n'))
    {
        tree.push(Mark::Changed, depth, format!("{name}: |{note}"));
        let (xl, yl): (Vec<Value>, Vec<Value>) = (text_lines(x), text_lines(y));
        let changed = align_scalars(&xl, &yl);
        let (mut i, mut j) = (0, 0);
        let mut pending = changed.into_iter().peekable();
        while i < xl.len() || j < yl.len() {
            match pending.peek() {
                Some((Mark::Removed, v)) if i < xl.len() && std::ptr::eq(*v, &xl[i]) => {
                    tree.push(Mark::Removed, depth + 1, line_of(&xl[i]));
                    i += 1;
                    pending.next();
                }
                Some((Mark::Added, v)) if j < yl.len() && std::ptr::eq(*v, &yl[j]) => {
                    tree.push(Mark::Added, depth + 1, line_of(&yl[j]));
                    j += 1;
                    pending.next();
                }
                _ => {
                    let Some(same) = xl.get(i) else { break };
                    tree.push(Mark::Same, depth + 1, line_of(same));
                    i += 1;
                    j += 1;
                }
            }
        }
        return;
    }
    // Long or compound on either side: old then new, each in full.
    tree.push(Mark::Changed, depth, format!("{name}:{note}"));
    one_side(tree, Mark::Removed, depth + 1, a);
    one_side(tree, Mark::Added, depth + 1, b);
}

/// A whole value on one side of a change, below its key.
fn one_side(tree: &mut Tree, mark: Mark, depth: usize, v: &Value) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, v) in m {
                entry(tree, mark, depth, k, v);
            }
        }
        Value::Array(items) if !items.is_empty() => {
            for item in items {
                item_entry(tree, mark, depth, item);
            }
        }
        _ => {
            for line in folded(v) {
                tree.push(mark, depth, line);
            }
        }
    }
}

/// `key: value` with every leaf of `value` marked `mark`.
fn entry(tree: &mut Tree, mark: Mark, depth: usize, key: &str, v: &Value) {
    let k = key_text(key);
    match v {
        Value::Object(m) if !m.is_empty() => {
            tree.push(mark, depth, format!("{k}:"));
            for (ck, cv) in m {
                entry(tree, mark, depth + 1, ck, cv);
            }
        }
        Value::Array(items) if !items.is_empty() => {
            tree.push(mark, depth, format!("{k}:"));
            for item in items {
                item_entry(tree, mark, depth + 1, item);
            }
        }
        _ => leaf(tree, mark, depth, &format!("{k}:"), v),
    }
}

/// `- item` of a list, every leaf marked `mark`; an object item's first field shares the dash.
fn item_entry(tree: &mut Tree, mark: Mark, depth: usize, item: &Value) {
    match item {
        Value::Object(m) if !m.is_empty() => {
            let mut fields = ordered_fields(m);
            let (k, v) = fields.remove(0);
            let start = tree.lines.len();
            entry(tree, mark, depth + 1, k, v);
            // The first line of the first field becomes the item's line: `- name: x`.
            if let Some(line) = tree.lines.get_mut(start) {
                line.1 = depth;
                line.2 = format!("- {}", line.2);
            }
            for (k, v) in fields {
                entry(tree, mark, depth + 1, k, v);
            }
        }
        Value::Array(items) if !items.is_empty() => {
            tree.push(mark, depth, "-".into());
            for i in items {
                item_entry(tree, mark, depth + 1, i);
            }
        }
        _ => leaf(tree, mark, depth, "-", item),
    }
}

/// A scalar (or empty) value after `head` (`key:` or `-`): on the same line, or as a `|` block
/// when it folds to several lines.
fn leaf(tree: &mut Tree, mark: Mark, depth: usize, head: &str, v: &Value) {
    let lines = folded(v);
    if lines.len() == 1 {
        tree.push(mark, depth, format!("{head} {}", lines[0]));
    } else {
        tree.push(mark, depth, format!("{head} |"));
        for line in lines {
            tree.push(mark, depth + 1, line);
        }
    }
}

/// An object's fields with its identifying key (if any) first.
fn ordered_fields(m: &Map<String, Value>) -> Vec<(&str, &Value)> {
    let mut fields: Vec<(&str, &Value)> = m.iter().map(|(k, v)| (k.as_str(), v)).collect();
    if let Some(pos) = ITEM_KEYS
        .iter()
        .find_map(|key| fields.iter().position(|(k, _)| k == key))
    {
        let f = fields.remove(pos);
        fields.insert(0, f);
    }
    fields
}

/// The key field that identifies every item of both lists (values unique within each).
fn item_key(a: &[Value], b: &[Value]) -> Option<&'static str> {
    let all: Vec<&Value> = a.iter().chain(b).collect();
    if all.is_empty() || !all.iter().all(|v| v.is_object()) {
        return None;
    }
    let unique = |list: &[Value], key: &str| {
        let mut seen: Vec<&Value> = Vec::new();
        list.iter().all(|i| match i.get(key) {
            Some(v) if !v.is_object() && !v.is_array() && !seen.contains(&v) => {
                seen.push(v);
                true
            }
            _ => false,
        })
    };
    ITEM_KEYS
        .iter()
        .copied()
        .find(|k| unique(a, k) && unique(b, k))
}

fn list_diff(tree: &mut Tree, depth: usize, a: &[Value], b: &[Value], path: &str) {
    let item_path = |i: usize| format!("{path}[{i}]");
    if let Some(key) = item_key(a, b) {
        // Items matched by key, in the new list's order; removed ones where they stood.
        let find = |list: &[Value], v: &Value| list.iter().position(|i| i.get(key) == Some(v));
        let mut ai = 0;
        for (bi, item) in b.iter().enumerate() {
            let k = item.get(key).expect("item_key checked");
            match find(a, k) {
                Some(pos) => {
                    // Old items before this one that the new list no longer has.
                    while ai <= pos {
                        if find(b, a[ai].get(key).expect("checked")).is_none() {
                            item_entry(tree, Mark::Removed, depth, &a[ai]);
                        }
                        ai += 1;
                    }
                    let old = &a[pos];
                    if !same(old, item) {
                        let (Value::Object(x), Value::Object(y)) = (old, item) else {
                            continue;
                        };
                        tree.push(
                            Mark::Same,
                            depth,
                            format!("- {}: {}", key_text(key), folded(k).join(" ")),
                        );
                        let mut x = x.clone();
                        let mut y = y.clone();
                        x.shift_remove(key);
                        y.shift_remove(key);
                        map_diff(tree, depth + 1, &x, &y, &item_path(bi));
                    }
                }
                None => {
                    // Old items the new list dropped, where this one now stands.
                    while ai < a.len() && find(b, a[ai].get(key).expect("checked")).is_none() {
                        item_entry(tree, Mark::Removed, depth, &a[ai]);
                        ai += 1;
                    }
                    item_entry(tree, Mark::Added, depth, item)
                }
            }
        }
        for old in &a[ai.min(a.len())..] {
            if find(b, old.get(key).expect("checked")).is_none() {
                item_entry(tree, Mark::Removed, depth, old);
            }
        }
        return;
    }
    if a.iter().chain(b).all(|v| !v.is_object() && !v.is_array()) {
        // Scalars: aligned by value (longest common subsequence), as a text diff would.
        for (mark, v) in align_scalars(a, b) {
            item_entry(tree, mark, depth, v);
        }
        return;
    }
    // No key: by position.
    for i in 0..a.len().max(b.len()) {
        match (a.get(i), b.get(i)) {
            (Some(x), Some(y)) if !same(x, y) => match (x, y) {
                (Value::Object(mx), Value::Object(my)) => {
                    tree.push(Mark::Same, depth, "-".into());
                    map_diff(tree, depth + 1, mx, my, &item_path(i));
                }
                _ => {
                    item_entry(tree, Mark::Removed, depth, x);
                    item_entry(tree, Mark::Added, depth, y);
                }
            },
            (Some(x), None) => item_entry(tree, Mark::Removed, depth, x),
            (None, Some(y)) => item_entry(tree, Mark::Added, depth, y),
            _ => {}
        }
    }
}

/// The changed items of two scalar lists, aligned on their longest common subsequence.
fn align_scalars<'a>(a: &'a [Value], b: &'a [Value]) -> Vec<(Mark, &'a Value)> {
    if a.len() * b.len() > 250_000 {
        let mut out: Vec<(Mark, &Value)> = a.iter().map(|v| (Mark::Removed, v)).collect();
        out.extend(b.iter().map(|v| (Mark::Added, v)));
        return out;
    }
    let (n, m) = (a.len(), b.len());
    let mut lcs = vec![vec![0usize; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if same(&a[i], &b[j]) {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < n || j < m {
        if i < n && j < m && same(&a[i], &b[j]) {
            i += 1;
            j += 1;
        } else if i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1]) {
            // At a tie the removal comes first, as in diff and git.
            out.push((Mark::Removed, &a[i]));
            i += 1;
        } else {
            out.push((Mark::Added, &b[j]));
            j += 1;
        }
    }
    out
}

/// The lines of a text (a final newline ends the last line, it does not start another).
fn text_lines(text: &str) -> Vec<Value> {
    let body = text.strip_suffix('\n').unwrap_or(text);
    body.split('\n')
        .map(|l| Value::String(l.to_string()))
        .collect()
}

fn line_of(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_string()
}

/// Equal as values (`1` and `1.0` alike).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x == y || x.as_f64() == y.as_f64(),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(v, w)| same(v, w))
        }
        _ => a == b,
    }
}

fn key_text(key: &str) -> String {
    scalar_text(key)
}

/// A string as YAML would print it: plain when unambiguous, quoted otherwise.
fn scalar_text(s: &str) -> String {
    let needs_quotes = s.is_empty()
        || s.trim() != s
        || s.parse::<f64>().is_ok()
        || matches!(
            s.to_ascii_lowercase().as_str(),
            "true" | "false" | "null" | "yes" | "no" | "on" | "off" | "~"
        )
        || s.contains(": ")
        || s.contains(" #")
        || s.ends_with(':')
        || s.starts_with(|c: char| "?:,[]{}#&*!|>'\"%@`".contains(c))
        || s == "-"
        || s.starts_with("- ")
        || s.chars().any(char::is_control);
    if needs_quotes {
        serde_json::to_string(s).unwrap_or_default()
    } else {
        s.to_string()
    }
}

/// A scalar (or an empty compound) as one or more lines: multi-line strings one line each,
/// long strings wrapped at [`FOLD_AT`] characters, at most [`MAX_LINES`] lines.
fn folded(v: &Value) -> Vec<String> {
    let text = match v {
        Value::String(s) => s,
        Value::Object(m) if m.is_empty() => return vec!["{}".into()],
        Value::Array(a) if a.is_empty() => return vec!["[]".into()],
        Value::Object(_) | Value::Array(_) => {
            return vec![serde_json::to_string(v).unwrap_or_default()];
        }
        other => return vec![other.to_string()],
    };
    if !text.contains('\n') && text.chars().count() <= FOLD_AT {
        return vec![scalar_text(text)];
    }
    let mut lines = Vec::new();
    for raw in text.strip_suffix('\n').unwrap_or(text).split('\n') {
        let chars: Vec<char> = raw.chars().collect();
        if chars.is_empty() {
            lines.push(String::new());
        }
        for chunk in chars.chunks(FOLD_AT) {
            lines.push(chunk.iter().collect());
        }
    }
    if lines.len() > MAX_LINES {
        let shown: usize = lines[..MAX_LINES - 1]
            .iter()
            .map(|l| l.chars().count())
            .sum();
        let total = text.chars().count();
        lines.truncate(MAX_LINES - 1);
        lines.push(format!(
            "… ({} more characters)",
            total.saturating_sub(shown)
        ));
    }
    if lines.len() == 1 {
        return vec![scalar_text(&lines[0])];
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_created_object_is_an_indented_tree() {
        let obj = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "labels": {"app.kubernetes.io/name": "web"}},
            "spec": {"replicas": 2, "template": {"spec": {"containers": [
                {"image": "nginx:1.25", "name": "main", "ports": [{"containerPort": 80}]},
                {"name": "side", "args": ["--port", "9000"]}]}}}});
        let text = whole(obj.as_object().unwrap(), Mark::Added).plain();
        assert_eq!(
            text,
            "+ apiVersion: apps/v1
+ kind: Deployment
+ metadata:
+   name: web
+   labels:
+     app.kubernetes.io/name: web
+ spec:
+   replicas: 2
+   template:
+     spec:
+       containers:
+         - name: main
+           image: nginx:1.25
+           ports:
+             - containerPort: 80
+         - name: side
+           args:
+             - --port
+             - \"9000\"
"
        );
    }

    #[test]
    fn nested_changes_align_list_items_by_key() {
        let before = json!({"spec": {"containers": [
            {"name": "main", "image": "app:1", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]},
            {"name": "side", "image": "proxy:1"}], "replicas": 1}});
        let after = json!({"spec": {"containers": [
            {"name": "main", "image": "app:2", "env": [{"name": "A", "value": "1"}, {"name": "C", "value": "3"}]}],
            "replicas": 1}});
        let text = changes(&before, &after, &[]).plain();
        assert_eq!(
            text,
            "  spec:
    containers:
      - name: main
~       image: app:1 => app:2
        env:
-         - name: B
-           value: \"2\"
+         - name: C
+           value: \"3\"
-     - name: side
-       image: proxy:1
"
        );
    }

    #[test]
    fn a_field_added_inside_an_item_is_one_line_and_forcing_fields_are_marked() {
        let before = json!({"spec": {"selector": {"app": "a"}, "ports": [{"port": 80, "targetPort": 8080}]}});
        let after = json!({"spec": {"selector": {"app": "b"}, "ports": [{"port": 80, "targetPort": 8080, "name": "http"}]}});
        let text = changes(&before, &after, &["spec.selector".to_string()]).plain();
        assert_eq!(
            text,
            "  spec:
    selector:   # forces replacement
~     app: a => b
    ports:
      - port: 80
+       name: http
"
        );
    }

    #[test]
    fn long_and_multi_line_values_are_folded() {
        let long = "x".repeat(200);
        let text = whole(
            json!({"data": {"big": long, "script": "a\nb"}})
                .as_object()
                .unwrap(),
            Mark::Added,
        )
        .plain();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines.iter().all(|l| l.chars().count() < 100), "{text}");
        assert_eq!(lines[1], "+   big: |");
        assert_eq!(lines.len(), 1 + 1 + 3 + 1 + 2, "{text}");
        let huge = "y".repeat(5000);
        let text = changes(&json!({"v": "short"}), &json!({"v": huge}), &[]).plain();
        assert!(text.contains("more characters"), "{text}");
        assert!(text.lines().count() < 20, "{text}");
        assert!(text.starts_with("~ v:\n-   short\n+   yyyy"), "{text}");
    }

    #[test]
    fn multi_line_text_shows_the_changed_lines() {
        let text = changes(
            &json!({"script": "one\ntwo\nthree\n"}),
            &json!({"script": "one\n2\nthree\n"}),
            &[],
        )
        .plain();
        assert_eq!(text, "~ script: |\n    one\n-   two\n+   2\n    three\n");
    }

    #[test]
    fn scalar_lists_align_by_value() {
        let text = changes(
            &json!({"args": ["a", "b", "c"]}),
            &json!({"args": ["a", "c", "d"]}),
            &[],
        )
        .plain();
        assert_eq!(text, "  args:\n-   - b\n+   - d\n");
    }
}
