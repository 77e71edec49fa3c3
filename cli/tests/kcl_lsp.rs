//! `kusionctl kcl lsp` is the kcl tool's language server: it answers `initialize` over stdio
//! and exits cleanly on `shutdown` + `exit`.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

fn frame(v: &serde_json::Value) -> String {
    let body = v.to_string();
    format!("Content-Length: {}\r\n\r\n{body}", body.len())
}

fn read_frame(r: &mut impl BufRead) -> serde_json::Value {
    let mut len = 0usize;
    loop {
        let mut line = String::new();
        assert!(
            r.read_line(&mut line).expect("read") > 0,
            "server closed stdout"
        );
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some(v) = line.strip_prefix("Content-Length: ") {
            len = v.parse().expect("length");
        }
    }
    let mut buf = vec![0u8; len];
    r.read_exact(&mut buf).expect("body");
    serde_json::from_slice(&buf).expect("json")
}

#[test]
fn kusionctl_kcl_lsp_serves_the_protocol() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("main.k"), "a = 1\n").expect("write");
    let mut child = Command::new(env!("CARGO_BIN_EXE_kusionctl"))
        .args(["kcl", "lsp"])
        .current_dir(dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("kusionctl kcl lsp");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let root = url_of(dir.path());
    let init = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"processId": null, "rootUri": root, "capabilities": {}}});
    stdin.write_all(frame(&init).as_bytes()).expect("write");
    stdin.flush().expect("flush");
    let r = read_frame(&mut out);
    assert_eq!(r["id"], 1);
    assert_eq!(r["result"]["capabilities"]["definitionProvider"], true);
    for m in [
        serde_json::json!({"jsonrpc": "2.0", "method": "initialized", "params": {}}),
        serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "shutdown"}),
    ] {
        stdin.write_all(frame(&m).as_bytes()).expect("write");
    }
    stdin.flush().expect("flush");
    loop {
        let m = read_frame(&mut out);
        if m["id"] == 2 {
            break;
        }
    }
    let exit = serde_json::json!({"jsonrpc": "2.0", "method": "exit"});
    stdin.write_all(frame(&exit).as_bytes()).expect("write");
    drop(stdin);
    assert!(child.wait().expect("wait").success());
}

fn url_of(p: &std::path::Path) -> String {
    let p = p.canonicalize().expect("canonical");
    format!("file://{}", p.display())
}
