//! Protocol-level tests of `kcl lsp`: every capability through JSON-RPC messages, against a
//! fixture workspace written to a temporary folder and the repository's Konfig example.
//!
//! Over 800 lines: one protocol suite over one fixture workspace, a test per capability.

mod lsp_common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use lsp_common::{Client, at, find, uri};
use serde_json::{Value, json};

const PERSON: &str = r#"schema Person:
    """A person.

    Attributes
    ----------
    name : str, required
        The person's name.
    age : int, optional
        Years.
    """
    name: str
    age?: int = 18
    labels: {str:str} = {}

schema Employee(Person):
    company: str

double = lambda x: int -> int {
    x * 2
}
"#;

const MAIN: &str = r#"import models
import math
import models as again

alice = models.Person {
    name = "alice"
}
n = models.double(2)
s = "abc"
up = s.upper()
r = math.ceil(1.5)
"#;

struct Ws {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl Ws {
    fn new(files: &[(&str, &str)]) -> Ws {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().canonicalize().expect("canonical");
        for (p, t) in files {
            let path = root.join(p);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(path, t).expect("write");
        }
        Ws { _dir: dir, root }
    }
    fn path(&self, p: &str) -> PathBuf {
        self.root.join(p)
    }
}

fn fixture() -> Ws {
    Ws::new(&[
        ("kcl.mod", "[package]\nname = \"app\"\n"),
        ("models/person.k", PERSON),
        ("main.k", MAIN),
    ])
}

const WAIT: Duration = Duration::from_secs(60);

fn labels(v: &Value) -> Vec<String> {
    let items = v.get("items").unwrap_or(v);
    items
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|i| i["label"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn item<'a>(v: &'a Value, label: &str) -> &'a Value {
    let items = v.get("items").unwrap_or(v);
    items
        .as_array()
        .and_then(|a| a.iter().find(|i| i["label"] == label))
        .unwrap_or_else(|| panic!("no completion item {label} in {:?}", labels(v)))
}

fn messages(diags: &[Value]) -> Vec<String> {
    diags
        .iter()
        .map(|d| d["message"].as_str().unwrap_or("").to_string())
        .collect()
}

/// The text with one edit applied, for the positions of later edits.
fn opened(c: &Client, path: &Path, text: &str) {
    c.open(path, text);
}

#[test]
fn diagnostics_follow_edits_in_the_file_and_its_dependents() {
    let ws = fixture();
    let mut c = Client::start(&[&ws.root]);
    c.wait_idle();
    let main = ws.path("main.k");
    let person = ws.path("models/person.k");
    let main_uri = uri(&main);
    // the initial analysis published main.k's lint findings: a repeated, unused import
    let d = c
        .diagnostics(&main_uri, WAIT)
        .expect("diagnostics of main.k");
    let m = messages(&d);
    assert!(
        m.iter().any(|x| x.contains("reimported multiple times")),
        "{m:?}"
    );
    assert!(d.iter().all(|x| x["severity"] == 2), "warnings only: {d:?}");

    // typing an error: a string where the attribute is an int
    opened(&c, &main, MAIN);
    let (l, ch) = find(MAIN, "    name = \"alice\"", 0);
    c.edit(&main, 2, [l, ch, l, ch], "    age = \"x\"\n");
    let d = c
        .diagnostics(&main_uri, WAIT)
        .expect("diagnostics after the edit");
    let errs: Vec<&Value> = d.iter().filter(|x| x["severity"] == 1).collect();
    assert_eq!(errs.len(), 1, "{d:?}");
    assert!(
        errs[0]["message"]
            .as_str()
            .unwrap_or("")
            .contains("expected int"),
        "{errs:?}"
    );
    assert_eq!(errs[0]["range"]["start"]["line"], l);
    // undo: the error goes away
    c.edit(&main, 3, [l, 0, l + 1, 0], "");
    let d = c
        .diagnostics(&main_uri, WAIT)
        .expect("diagnostics after the undo");
    assert!(d.iter().all(|x| x["severity"] != 1), "{d:?}");

    // an edit of the model file changes the result of main.k, which is published too
    opened(&c, &person, PERSON);
    let (l, _) = find(PERSON, "    name: str", 0);
    c.edit(&person, 2, [l, 4, l, 8], "fullname");
    let d = c.diagnostics(&main_uri, WAIT).expect("main.k re-checked");
    let m = messages(&d);
    assert!(
        m.iter().any(|x| x.contains("name") && x.contains("Person")),
        "{m:?}"
    );
    c.shutdown();
}

#[test]
fn syntax_errors_are_reported_while_typing() {
    let ws = fixture();
    let mut c = Client::start(&[&ws.root]);
    c.wait_idle();
    let main = ws.path("main.k");
    c.clear();
    opened(&c, &main, MAIN);
    let end = MAIN.lines().count() as u32;
    c.edit(&main, 2, [end, 0, end, 0], "x = (1 +\n");
    let d = c.diagnostics(&uri(&main), WAIT).expect("diagnostics");
    assert!(
        d.iter().any(|x| x["severity"] == 1 && x["code"] == "E1001"),
        "{d:?}"
    );
    c.shutdown();
}

#[test]
fn hover_shows_types_docs_and_defaults() {
    let ws = fixture();
    let mut c = Client::start(&[&ws.root]);
    let main = ws.path("main.k");
    let (l, ch) = find(MAIN, "Person {", 1);
    let h = c.call("textDocument/hover", at(&main, l, ch));
    let v = h["contents"]["value"].as_str().unwrap_or("");
    assert!(v.contains("schema Person"), "{v}");
    assert!(v.contains("A person."), "{v}");
    assert!(v.contains("name: str` (required)"), "{v}");

    let (l, ch) = find(MAIN, "name = ", 1);
    let h = c.call("textDocument/hover", at(&main, l, ch));
    let v = h["contents"]["value"].as_str().unwrap_or("");
    assert!(v.contains("name: str"), "{v}");
    assert!(v.contains("The person's name."), "{v}");
    assert!(v.contains("(required)"), "{v}");

    let person = ws.path("models/person.k");
    let (l, ch) = find(PERSON, "age?: int", 1);
    let h = c.call("textDocument/hover", at(&person, l, ch));
    let v = h["contents"]["value"].as_str().unwrap_or("");
    assert!(v.contains("age?: int = 18"), "{v}");
    assert!(v.contains("Years."), "{v}");

    let (l, ch) = find(MAIN, "up = ", 0);
    let h = c.call("textDocument/hover", at(&main, l, ch));
    assert!(
        h["contents"]["value"]
            .as_str()
            .unwrap_or("")
            .contains("up: str"),
        "{h}"
    );

    let (l, ch) = find(MAIN, "ceil", 1);
    let h = c.call("textDocument/hover", at(&main, l, ch));
    let v = h["contents"]["value"].as_str().unwrap_or("");
    assert!(v.contains("math.ceil(x: int | float) -> int"), "{v}");
    c.shutdown();
}

#[test]
fn completion_of_attributes_members_names_builtins_and_imports() {
    let ws = fixture();
    let mut c = Client::start(&[&ws.root]);
    let main = ws.path("main.k");
    // inside the config: the attributes not set yet, with types and required markers
    let text = MAIN.replace("    name = \"alice\"\n", "    name = \"alice\"\n    \n");
    opened(&c, &main, &text);
    let (l, _) = find(&text, "    \n", 0);
    let r = c.call("textDocument/completion", at(&main, l, 4));
    let ls = labels(&r);
    assert!(
        ls.contains(&"age".to_string()) && ls.contains(&"labels".to_string()),
        "{ls:?}"
    );
    assert!(!ls.contains(&"name".to_string()), "already set: {ls:?}");
    assert!(
        !ls.contains(&"alice".to_string()),
        "no variables in key position: {ls:?}"
    );
    assert_eq!(item(&r, "age")["detail"], "age?: int");
    let ws2 = Ws::new(&[
        ("kcl.mod", "[package]\nname = \"app\"\n"),
        ("models/person.k", PERSON),
        (
            "main.k",
            "import models\n\nbob = models.Employee {\n    \n}\n",
        ),
    ]);
    let mut c2 = Client::start(&[&ws2.root]);
    let m2 = ws2.path("main.k");
    let r = c2.call("textDocument/completion", at(&m2, 3, 4));
    let name = item(&r, "name");
    assert_eq!(name["labelDetails"]["description"], "required");
    assert_eq!(
        item(&r, "company")["labelDetails"]["description"],
        "required"
    );
    assert!(item(&r, "age")["labelDetails"]["description"].is_null());
    assert!(
        name["documentation"]["value"]
            .as_str()
            .unwrap_or("")
            .contains("The person's name."),
        "{name}"
    );
    c2.shutdown();

    // members after `.`: a package's names and a schema instantiation snippet
    let text = format!("{MAIN}x = models.\n");
    c.edit(&main, 2, [0, 0, 999, 0], &text);
    let l = text.lines().count() as u32 - 1;
    let r = c.call("textDocument/completion", at(&main, l, 11));
    let ls = labels(&r);
    for want in ["Person", "Employee", "double", "Person{}"] {
        assert!(ls.contains(&want.to_string()), "{want} missing: {ls:?}");
    }
    let snip = item(&r, "Person{}");
    assert_eq!(snip["insertTextFormat"], 2);
    assert_eq!(snip["insertText"], "Person {\n\tname = ${1}\n\t$0\n}");

    // a system module's functions with signatures
    let text = format!("{MAIN}x = math.\n");
    c.edit(&main, 3, [0, 0, 999, 0], &text);
    let r = c.call("textDocument/completion", at(&main, l, 9));
    assert_eq!(
        item(&r, "ceil")["detail"],
        "math.ceil(x: int | float) -> int"
    );

    // string methods on a str variable
    let text = format!("{MAIN}x = s.\n");
    c.edit(&main, 4, [0, 0, 999, 0], &text);
    let r = c.call("textDocument/completion", at(&main, l, 6));
    assert!(labels(&r).contains(&"upper".to_string()));

    // names in scope: variables, imports, builtins
    let text = format!("{MAIN}x = \n");
    c.edit(&main, 5, [0, 0, 999, 0], &text);
    let r = c.call("textDocument/completion", at(&main, l, 4));
    let ls = labels(&r);
    for want in ["alice", "models", "math", "len", "typeof"] {
        assert!(ls.contains(&want.to_string()), "{want} missing: {ls:?}");
    }
    assert_eq!(
        item(&r, "len")["detail"],
        "len(inval: str | [] | {:}) -> int"
    );

    // import paths: the package's folders and the system modules
    let text = format!("import \n{MAIN}");
    c.edit(&main, 6, [0, 0, 999, 0], &text);
    let r = c.call("textDocument/completion", at(&main, 0, 7));
    let ls = labels(&r);
    assert!(
        ls.contains(&"models".to_string()) && ls.contains(&"yaml".to_string()),
        "{ls:?}"
    );
    c.shutdown();
}

#[test]
fn import_completion_offers_kcl_mod_dependencies() {
    let ws = Ws::new(&[
        (
            "app/kcl.mod",
            "[package]\nname = \"app\"\n\n[dependencies]\nlib = { path = \"../lib\" }\n",
        ),
        ("app/main.k", "import lib.sub\n\nx = sub.V {}\n"),
        ("lib/kcl.mod", "[package]\nname = \"lib\"\n"),
        ("lib/sub/v.k", "schema V:\n    a: int = 1\n"),
    ]);
    let mut c = Client::start(&[&ws.root.join("app")]);
    let main = ws.path("app/main.k");
    let text = "import \nimport lib.\n";
    c.open(&main, text);
    let r = c.call("textDocument/completion", at(&main, 0, 7));
    assert!(labels(&r).contains(&"lib".to_string()), "{:?}", labels(&r));
    let r = c.call("textDocument/completion", at(&main, 1, 11));
    assert!(labels(&r).contains(&"sub".to_string()), "{:?}", labels(&r));
    // the dependency's schema resolves through kcl.mod: definition jumps into it
    c.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": uri(&main), "version": 2},
               "contentChanges": [{"text": "import lib.sub\n\nx = sub.V {}\n"}]}),
    );
    let d = c.call("textDocument/definition", at(&main, 2, 9));
    assert_eq!(d["uri"], uri(&ws.path("lib/sub/v.k")), "{d}");
    c.shutdown();
}

#[test]
fn definition_and_references_across_files() {
    let ws = fixture();
    let mut c = Client::start(&[&ws.root]);
    let main = ws.path("main.k");
    let person = ws.path("models/person.k");
    let (l, ch) = find(MAIN, "Person {", 1);
    let d = c.call("textDocument/definition", at(&main, l, ch));
    assert_eq!(d["uri"], uri(&person));
    assert_eq!(d["range"]["start"]["line"], 0);
    assert_eq!(d["range"]["start"]["character"], 7);
    // a config key jumps to the attribute
    let (l, ch) = find(MAIN, "name = ", 1);
    let d = c.call("textDocument/definition", at(&main, l, ch));
    let (pl, pc) = find(PERSON, "    name: str", 4);
    assert_eq!(d["range"]["start"], json!({"line": pl, "character": pc}));
    // the import path jumps to the package
    let (l, ch) = find(MAIN, "models", 2);
    let d = c.call("textDocument/definition", at(&main, l, ch));
    assert_eq!(d["uri"], uri(&person));

    // references of the attribute: its declaration and the key in main.k
    let mut p = at(&person, pl, pc + 1);
    p["context"] = json!({"includeDeclaration": true});
    let refs = c.call("textDocument/references", p.clone());
    let refs = refs.as_array().cloned().unwrap_or_default();
    let uris: Vec<&str> = refs.iter().filter_map(|r| r["uri"].as_str()).collect();
    assert_eq!(refs.len(), 2, "{refs:?}");
    assert!(uris.contains(&uri(&main).as_str()));
    p["context"] = json!({"includeDeclaration": false});
    let refs = c.call("textDocument/references", p);
    assert_eq!(refs.as_array().map(Vec::len), Some(1));
    c.shutdown();
}

#[test]
fn rename_is_workspace_wide_and_refuses_unsafe_names() {
    let ws = fixture();
    let mut c = Client::start(&[&ws.root]);
    let main = ws.path("main.k");
    let person = ws.path("models/person.k");
    let (l, ch) = find(PERSON, "Person:", 1);
    let prep = c.call("textDocument/prepareRename", at(&person, l, ch));
    assert_eq!(prep["start"], json!({"line": 0, "character": 7}));
    let mut p = at(&person, l, ch);
    p["newName"] = json!("Human");
    let e = c.call("textDocument/rename", p.clone());
    let changes = e["changes"].as_object().cloned().unwrap_or_default();
    // the definition, the parent of Employee, and the instantiation in main.k
    let n: usize = changes
        .values()
        .map(|v| v.as_array().map_or(0, Vec::len))
        .sum();
    assert_eq!(n, 3, "{e}");
    assert!(changes.contains_key(&uri(&main)));
    // refused: an existing name, a keyword, a builtin
    p["newName"] = json!("Employee");
    let err = c
        .request("textDocument/rename", p.clone())
        .expect_err("clash");
    assert!(err.message.contains("already defined"), "{}", err.message);
    p["newName"] = json!("lambda");
    assert!(c.request("textDocument/rename", p.clone()).is_err());
    let (l, ch) = find(MAIN, "upper", 1);
    let mut q = at(&main, l, ch);
    q["newName"] = json!("x");
    let err = c.request("textDocument/rename", q).expect_err("builtin");
    assert!(err.message.contains("cannot be renamed"), "{}", err.message);
    // an attribute: the declaration and the config key
    let (l, ch) = find(PERSON, "    name: str", 5);
    let mut p = at(&person, l, ch);
    p["newName"] = json!("fullname");
    let e = c.call("textDocument/rename", p.clone());
    let edits = e["changes"][uri(&main)]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(edits.len(), 1, "{e}");
    p["newName"] = json!("age");
    let err = c
        .request("textDocument/rename", p)
        .expect_err("attribute clash");
    assert!(
        err.message.contains("already has an attribute"),
        "{}",
        err.message
    );
    c.shutdown();
}

#[test]
fn rename_refuses_definitions_in_dependencies() {
    let ws = Ws::new(&[
        ("kcl.mod", "[package]\nname = \"app\"\n"),
        ("vendor/lib/kcl.mod", "[package]\nname = \"lib\"\n"),
        ("vendor/lib/v.k", "schema V:\n    a: int = 1\n"),
        ("main.k", "import vendor.lib\n\nx = lib.V {a = 2}\n"),
    ]);
    let mut c = Client::start(&[&ws.root]);
    let main = ws.path("main.k");
    let mut p = at(&main, 2, 9);
    p["newName"] = json!("W");
    let err = c.request("textDocument/rename", p).expect_err("vendored");
    assert!(err.message.contains("dependency"), "{}", err.message);
    c.shutdown();
}

#[test]
fn document_and_workspace_symbols() {
    let ws = fixture();
    let mut c = Client::start(&[&ws.root]);
    let person = ws.path("models/person.k");
    let s = c.call(
        "textDocument/documentSymbol",
        json!({"textDocument": {"uri": uri(&person)}}),
    );
    let s = s.as_array().cloned().unwrap_or_default();
    let names: Vec<&str> = s.iter().filter_map(|x| x["name"].as_str()).collect();
    assert_eq!(names, ["Person", "Employee", "double"]);
    let kids: Vec<&str> = s[0]["children"]
        .as_array()
        .map(|a| a.iter().filter_map(|x| x["name"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(kids, ["name", "age", "labels"]);
    assert_eq!(s[0]["kind"], 23); // struct
    assert_eq!(s[2]["kind"], 12); // function

    let w = c.call("workspace/symbol", json!({"query": "empl"}));
    let w = w.as_array().cloned().unwrap_or_default();
    assert_eq!(w.len(), 1, "{w:?}");
    assert_eq!(w[0]["name"], "Employee");
    assert_eq!(w[0]["location"]["uri"], uri(&person));
    c.shutdown();
}

#[test]
fn formatting_is_kcl_fmt() {
    let ws = fixture();
    let mut c = Client::start(&[&ws.root]);
    let main = ws.path("main.k");
    let ugly = "a=1\nb  =   [1,2 ,3]\n";
    c.open(&main, ugly);
    let e = c.call(
        "textDocument/formatting",
        json!({"textDocument": {"uri": uri(&main)}, "options": {"tabSize": 4, "insertSpaces": true}}),
    );
    let edits = e.as_array().cloned().unwrap_or_default();
    assert_eq!(edits.len(), 1);
    let want = kusion_kcl::format_source("main.k", ugly).expect("formats");
    assert_eq!(edits[0]["newText"], want.as_str());
    // a formatted buffer needs no edit
    c.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": uri(&main), "version": 2}, "contentChanges": [{"text": want}]}),
    );
    let e = c.call(
        "textDocument/formatting",
        json!({"textDocument": {"uri": uri(&main)}, "options": {"tabSize": 4, "insertSpaces": true}}),
    );
    assert_eq!(e, json!([]));
    c.shutdown();
}

/// Decodes semantic tokens into (line, col, len, type).
fn decode(data: &[Value]) -> Vec<(u32, u32, u32, u32)> {
    let mut out = Vec::new();
    let (mut line, mut col) = (0u32, 0u32);
    for t in data.chunks(5) {
        let n: Vec<u32> = t.iter().map(|x| x.as_u64().unwrap_or(0) as u32).collect();
        if n[0] > 0 {
            line += n[0];
            col = n[1];
        } else {
            col += n[1];
        }
        out.push((line, col, n[2], n[3]));
    }
    out
}

#[test]
fn semantic_tokens_classify_names_by_what_they_are() {
    let ws = fixture();
    let mut c = Client::start(&[&ws.root]);
    let main = ws.path("main.k");
    let t = c.call(
        "textDocument/semanticTokens/full",
        json!({"textDocument": {"uri": uri(&main)}}),
    );
    let toks = decode(t["data"].as_array().map(Vec::as_slice).unwrap_or(&[]));
    let kind = |needle: &str, d: usize| {
        let (l, ch) = find(MAIN, needle, d);
        toks.iter()
            .find(|x| x.0 == l && x.1 == ch)
            .map(|x| x.3)
            .unwrap_or_else(|| panic!("no token at {needle}"))
    };
    // legend: namespace 0, struct 2, variable 4, property 5, function 6, method 7, keyword 8,
    // string 10, number 11
    assert_eq!(kind("import models", 0), 8);
    assert_eq!(kind("models.Person", 0), 0);
    assert_eq!(kind("Person {", 0), 2);
    assert_eq!(kind("name = ", 0), 5);
    assert_eq!(kind("\"alice\"", 0), 10);
    assert_eq!(kind("double(2)", 0), 6);
    assert_eq!(kind("upper", 0), 7);
    assert_eq!(kind("1.5", 0), 11);
    c.shutdown();
}

#[test]
fn inlay_hints_show_inferred_types() {
    let ws = fixture();
    let mut c = Client::start(&[&ws.root]);
    let main = ws.path("main.k");
    let h = c.call(
        "textDocument/inlayHint",
        json!({"textDocument": {"uri": uri(&main)},
               "range": {"start": {"line": 0, "character": 0}, "end": {"line": 99, "character": 0}}}),
    );
    let hints: Vec<(u64, String)> = h
        .as_array()
        .map(|a| {
            a.iter()
                .map(|x| {
                    (
                        x["position"]["line"].as_u64().unwrap_or(0),
                        x["label"].as_str().unwrap_or("").to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let line = |n: &str| find(MAIN, n, 0).0 as u64;
    assert!(hints.contains(&(line("n = "), ": int".into())), "{hints:?}");
    assert!(hints.contains(&(line("s = "), ": str".into())), "{hints:?}");
    assert!(
        hints.contains(&(line("up = "), ": str".into())),
        "{hints:?}"
    );
    assert!(hints.contains(&(line("r = "), ": int".into())), "{hints:?}");
    // a schema instance shows its schema in the code already: no hint
    assert!(!hints.iter().any(|h| h.0 == line("alice")), "{hints:?}");
    c.shutdown();
}

#[test]
fn signature_help_for_builtins_system_functions_and_lambdas() {
    let ws = fixture();
    let mut c = Client::start(&[&ws.root]);
    let main = ws.path("main.k");
    let text = format!("{MAIN}a = math.pow(2, \nb = models.double(\nc = len(\n");
    c.open(&main, &text);
    let base = MAIN.lines().count() as u32;
    let s = c.call("textDocument/signatureHelp", at(&main, base, 16));
    assert_eq!(
        s["signatures"][0]["label"],
        "math.pow(x: int | float, y: int | float) -> float"
    );
    assert_eq!(s["activeParameter"], 1);
    let s = c.call("textDocument/signatureHelp", at(&main, base + 1, 18));
    assert_eq!(s["signatures"][0]["label"], "models.double(x: int) -> int");
    assert_eq!(s["activeParameter"], 0);
    let s = c.call("textDocument/signatureHelp", at(&main, base + 2, 8));
    assert_eq!(
        s["signatures"][0]["label"],
        "len(inval: str | [] | {:}) -> int"
    );
    c.shutdown();
}

#[test]
fn quick_fix_removes_an_unused_import() {
    let ws = fixture();
    let mut c = Client::start(&[&ws.root]);
    let main = ws.path("main.k");
    let (l, _) = find(MAIN, "import models as again", 0);
    let r = c.call(
        "textDocument/codeAction",
        json!({"textDocument": {"uri": uri(&main)},
               "range": {"start": {"line": l, "character": 0}, "end": {"line": l, "character": 5}},
               "context": {"diagnostics": []}}),
    );
    let acts = r.as_array().cloned().unwrap_or_default();
    assert!(!acts.is_empty(), "{r}");
    let a = &acts[0];
    assert_eq!(a["kind"], "quickfix");
    let edit = &a["edit"]["changes"][uri(&main)][0];
    assert_eq!(edit["newText"], "");
    assert_eq!(edit["range"]["start"], json!({"line": l, "character": 0}));
    assert_eq!(edit["range"]["end"], json!({"line": l + 1, "character": 0}));
    c.shutdown();
}

#[test]
fn cancellation_and_panics_do_not_take_the_server_down() {
    let ws = fixture();
    let mut c = Client::start(&[&ws.root]);
    let id = c.send_request("kcl/debug/sleep", Value::Null);
    let n = serde_json::to_value(&id).expect("id");
    c.notify("$/cancelRequest", json!({"id": n}));
    let r = c.response(id);
    assert_eq!(
        r.response_result.err().map(|e| e.code),
        Some(-32800),
        "RequestCancelled"
    );

    let before = kusion_kcl::lsp::PANICS.load(std::sync::atomic::Ordering::SeqCst);
    let err = c
        .request("kcl/debug/panic", Value::Null)
        .expect_err("panics");
    assert_eq!(err.code, -32603);
    assert!(err.message.contains("asked for a panic"), "{}", err.message);
    assert!(kusion_kcl::lsp::PANICS.load(std::sync::atomic::Ordering::SeqCst) > before);
    // still serving
    let main = ws.path("main.k");
    let (l, ch) = find(MAIN, "Person {", 1);
    let h = c.call("textDocument/hover", at(&main, l, ch));
    assert!(
        h["contents"]["value"]
            .as_str()
            .unwrap_or("")
            .contains("schema Person")
    );
    let e = c
        .request("no/such/method", Value::Null)
        .expect_err("unknown");
    assert_eq!(e.code, -32601);
    c.shutdown();
}

#[test]
fn multi_root_workspaces_and_utf8_positions() {
    let a = Ws::new(&[("a.k", "x = 1\n"), ("bad.k", "y: int = \"é\"\n")]);
    let b = Ws::new(&[
        ("kcl.mod", "[package]\nname = \"b\"\n"),
        ("b.k", "é = 1\nz: str = 2\n"),
    ]);
    let mut c = Client::start_with(
        &[&a.root, &b.root],
        json!({"positionEncodings": ["utf-8", "utf-16"]}),
    );
    let da = c.diagnostics(&uri(&a.path("bad.k")), WAIT).expect("root a");
    assert_eq!(da.len(), 1, "{da:?}");
    let db = c.diagnostics(&uri(&b.path("b.k")), WAIT).expect("root b");
    assert_eq!(db.len(), 1, "{db:?}");
    // UTF-8 columns: `é` is two bytes
    let h = c.call("textDocument/hover", at(&b.path("b.k"), 1, 0));
    assert_eq!(h["range"]["end"]["character"], 1);
    let h = c.call("textDocument/hover", at(&b.path("b.k"), 0, 1));
    assert_eq!(h["range"]["end"]["character"], 2, "{h}");
    // a folder added later is analysed
    let extra = Ws::new(&[("c.k", "w: int = \"no\"\n")]);
    c.notify(
        "workspace/didChangeWorkspaceFolders",
        json!({"event": {"added": [{"uri": uri(&extra.root), "name": "c"}], "removed": []}}),
    );
    let dc = c
        .diagnostics(&uri(&extra.path("c.k")), WAIT)
        .expect("added root");
    assert_eq!(dc.len(), 1, "{dc:?}");
    c.shutdown();
}

#[test]
fn edits_reanalyse_only_what_they_affect() {
    let ws = Ws::new(&[
        ("kcl.mod", "[package]\nname = \"app\"\n"),
        ("models/person.k", PERSON),
        ("main.k", MAIN),
        ("other/o.k", "o = 1\n"),
        ("other/p.k", "p = 2\n"),
    ]);
    let mut c = Client::start(&[&ws.root]);
    c.wait_idle();
    let stats = |c: &mut Client| {
        let s = c.call("kcl/debug/stats", Value::Null);
        (
            s["parsed"].as_u64().unwrap_or(0),
            s["loaded"].as_u64().unwrap_or(0),
            s["checked"].as_u64().unwrap_or(0),
        )
    };
    let main = ws.path("main.k");
    let (l, ch) = find(MAIN, "Person {", 1);
    c.call("textDocument/hover", at(&main, l, ch));
    let before = stats(&mut c);
    // queries on an unchanged workspace: no parse, no load, no check
    for _ in 0..5 {
        c.call("textDocument/hover", at(&main, l, ch));
        c.call("textDocument/completion", at(&main, l, ch));
        c.call(
            "textDocument/semanticTokens/full",
            json!({"textDocument": {"uri": uri(&main)}}),
        );
    }
    assert_eq!(stats(&mut c), before);
    // an edit of main.k: that file parsed again, its unit loaded and checked again, not the
    // units of models/ or other/
    c.clear();
    c.open(&main, MAIN);
    let (el, ech) = find(MAIN, "    name = \"alice\"", 0);
    c.edit(&main, 2, [el, ech, el, ech], "    age = \"x\"\n");
    c.diagnostics(&uri(&main), WAIT).expect("diagnostics");
    c.wait_idle();
    let after = stats(&mut c);
    assert_eq!(
        after.0 - before.0,
        2,
        "didOpen and didChange parse main.k only"
    );
    // opening with the disk's text changes nothing: only the edit re-analyses
    assert_eq!(after.1 - before.1, 1, "the unit of main.k, once");
    assert_eq!(after.2 - before.2, 1, "checked once");
    // an edit of the model: its own unit and the unit of main.k, not other/
    let person = ws.path("models/person.k");
    c.open(&person, PERSON);
    c.wait_idle();
    let before = stats(&mut c);
    c.edit(&person, 2, [0, 0, 0, 0], "# a comment\n");
    // A `kcl/status` still queued from the earlier analyses can end `wait_idle` before this
    // edit's analysis runs (seen under load): wait for the counters to move, then let anything
    // else the edit would wrongly cause arrive before comparing.
    let deadline = std::time::Instant::now() + WAIT;
    while stats(&mut c).2 < before.2 + 2 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    let after = stats(&mut c);
    assert_eq!(after.0 - before.0, 1);
    assert_eq!(after.1 - before.1, 2, "models/ and the unit importing it");
    assert_eq!(after.2 - before.2, 2);
    c.shutdown();
}

// ------------------------------------------------------------------- Konfig ----

fn konfig() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/konfig")
        .canonicalize()
        .expect("examples/konfig")
}

#[test]
fn konfig_stack_completion_and_definition_into_k8s() {
    let root = konfig();
    let mut c = Client::start(&[&root]);
    let main = root.join("projects/guestbook/dev/main.k");
    let text = std::fs::read_to_string(&main).expect("main.k");
    let (l, _) = find(&text, "    replicas = 2", 0);
    let edited = text.replace("    replicas = 2\n", "    replicas = 2\n    ima\n");
    c.open(&main, &edited);
    let r = c.call("textDocument/completion", at(&main, l + 1, 7));
    let ls = labels(&r);
    assert!(ls.contains(&"image".to_string()), "{ls:?}");
    assert!(ls.contains(&"mainContainer".to_string()), "{ls:?}");
    // the backend model uses the k8s package: definition jumps into it
    let backend = root.join("models/backend");
    let mut found = false;
    for e in std::fs::read_dir(&backend).expect("backend").flatten() {
        let p = e.path();
        let t = std::fs::read_to_string(&p).unwrap_or_default();
        if t.contains("appsv1.Deployment") {
            let (l, ch) = find(&t, "appsv1.Deployment", 8);
            let d = c.call("textDocument/definition", at(&p, l, ch));
            let u = d["uri"].as_str().unwrap_or("");
            assert!(u.contains("/k8s/api/apps/v1/deployment.k"), "{d}");
            found = true;
            break;
        }
    }
    assert!(found, "no apps.Deployment in the backend models");
    c.shutdown();
}

#[test]
fn files_changed_on_disk_are_picked_up() {
    let ws = Ws::new(&[
        ("kcl.mod", "[package]\nname = \"app\"\n"),
        ("main.k", "import lib\n\nx = lib.V {a = 1}\n"),
    ]);
    let mut c = Client::start(&[&ws.root]);
    let main = ws.path("main.k");
    let d = c.diagnostics(&uri(&main), WAIT).expect("diagnostics");
    assert!(
        messages(&d)
            .iter()
            .any(|m| m.contains("Cannot find the module")),
        "{d:?}"
    );
    // the package appears (written by another program), the client reports it
    std::fs::create_dir_all(ws.path("lib")).expect("mkdir");
    std::fs::write(ws.path("lib/v.k"), "schema V:\n    a: int\n").expect("write");
    c.notify(
        "workspace/didChangeWatchedFiles",
        json!({"changes": [{"uri": uri(&ws.path("lib/v.k")), "type": 1}]}),
    );
    let d = c
        .diagnostics(&uri(&main), WAIT)
        .expect("diagnostics after the new file");
    assert!(d.is_empty(), "{d:?}");
    // a change on disk: `a` becomes a str, main.k's int no longer fits
    std::fs::write(ws.path("lib/v.k"), "schema V:\n    a: str\n").expect("write");
    c.notify(
        "workspace/didChangeWatchedFiles",
        json!({"changes": [{"uri": uri(&ws.path("lib/v.k")), "type": 2}]}),
    );
    let d = c
        .diagnostics(&uri(&main), WAIT)
        .expect("diagnostics after the change");
    assert!(
        messages(&d).iter().any(|m| m.contains("expected str")),
        "{d:?}"
    );
    c.shutdown();
}

/// Reads one `Content-Length` framed message.
fn read_frame(r: &mut impl std::io::BufRead) -> Option<Value> {
    let mut len = 0usize;
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some(v) = line.strip_prefix("Content-Length: ") {
            len = v.parse().ok()?;
        }
    }
    let mut buf = vec![0u8; len];
    std::io::Read::read_exact(r, &mut buf).ok()?;
    serde_json::from_slice(&buf).ok()
}

/// `kcl lsp` as a child process, spoken to over its standard input and output.
struct Proc {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    out: std::io::BufReader<std::process::ChildStdout>,
}

impl Proc {
    fn start(envs: &[(&str, &Path)]) -> Proc {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_kcl"));
        cmd.arg("lsp")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null());
        for (k, v) in envs {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("kcl lsp");
        let stdin = child.stdin.take().expect("stdin");
        let out = std::io::BufReader::new(child.stdout.take().expect("stdout"));
        Proc { child, stdin, out }
    }
    fn send(&mut self, v: Value) {
        use std::io::Write;
        let body = v.to_string();
        write!(self.stdin, "Content-Length: {}\r\n\r\n{body}", body.len()).expect("write");
        self.stdin.flush().expect("flush");
    }
    /// The response to request `id` (notifications before it are checked and skipped).
    fn response(&mut self, id: i64) -> Value {
        loop {
            let m = read_frame(&mut self.out).expect("a message");
            if m["id"] == id {
                return m;
            }
            assert!(m.get("method").is_some(), "{m}");
        }
    }
    fn initialize(&mut self, root: &Path) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                         "params": {"capabilities": {}, "rootUri": uri(root), "processId": null}}));
        let r = self.response(1);
        self.send(json!({"jsonrpc": "2.0", "method": "initialized", "params": {}}));
        r
    }
    fn finish(mut self) {
        self.send(json!({"jsonrpc": "2.0", "id": 999, "method": "shutdown"}));
        self.response(999);
        self.send(json!({"jsonrpc": "2.0", "method": "exit"}));
        let status = self.child.wait().expect("wait");
        assert!(status.success(), "{status}");
    }
}

#[test]
fn registry_dependencies_resolve_from_the_package_cache() {
    let ws = Ws::new(&[
        (
            "app/kcl.mod",
            "[package]\nname = \"app\"\n\n[dependencies]\nhelloworld = \"0.1.0\"\n",
        ),
        (
            "app/main.k",
            "import helloworld\n\nx = helloworld.Greeting {msg = 1}\n",
        ),
        (
            "cache/helloworld_0.1.0/kcl.mod",
            "[package]\nname = \"helloworld\"\nversion = \"0.1.0\"\n",
        ),
        (
            "cache/helloworld_0.1.0/main.k",
            "schema Greeting:\n    msg: str\n",
        ),
    ]);
    let cache = ws.path("cache");
    let mut p = Proc::start(&[("KCL_PKG_PATH", &cache), ("HOME", &ws.root)]);
    p.initialize(&ws.path("app"));
    // the cached package's schema types the config: its `msg` wants a str
    let main = ws.path("app/main.k");
    let d = loop {
        let m = read_frame(&mut p.out).expect("diagnostics");
        if m["method"] == "textDocument/publishDiagnostics" && m["params"]["uri"] == uri(&main) {
            break m;
        }
    };
    let msgs = d["params"]["diagnostics"].to_string();
    assert!(msgs.contains("expected str"), "{msgs}");
    p.send(
        json!({"jsonrpc": "2.0", "id": 2, "method": "textDocument/definition",
                  "params": at(&main, 2, 17)}),
    );
    let r = p.response(2);
    assert_eq!(
        r["result"]["uri"],
        uri(&ws.path("cache/helloworld_0.1.0/main.k")),
        "{r}"
    );
    p.finish();
}

#[test]
fn the_binary_speaks_lsp_on_stdio() {
    let ws = fixture();
    let mut p = Proc::start(&[]);
    let init = p.initialize(&ws.root);
    assert_eq!(init["result"]["capabilities"]["positionEncoding"], "utf-16");
    assert_eq!(init["result"]["capabilities"]["hoverProvider"], true);
    let main = ws.path("main.k");
    let (l, ch) = find(MAIN, "Person {", 1);
    p.send(
        json!({"jsonrpc": "2.0", "id": 2, "method": "textDocument/hover",
                  "params": at(&main, l, ch)}),
    );
    // only framed protocol messages on stdout: diagnostics may come before the answer
    let hover = p.response(2);
    assert!(
        hover["result"]["contents"]["value"]
            .as_str()
            .unwrap_or("")
            .contains("schema Person"),
        "{hover}"
    );
    p.finish();
}
