//! Language server benchmark on the Konfig corpus (`$KUSION_SHARED/conformance/konfig`, default
//! `../shared/conformance/konfig`): initial workspace analysis, diagnostics after a
//! one-character edit of a stack's `main.k`, completion, and resident memory. Prints figures;
//! asserts nothing (`cargo bench -p kusion-kcl --bench lsp`).

#[path = "../tests/lsp_common/mod.rs"]
mod lsp_common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use lsp_common::{Client, at, find, uri};

fn corpus() -> PathBuf {
    let shared = std::env::var_os("KUSION_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared"));
    shared.join("conformance/konfig")
}

fn rss_mib(field: &str) -> f64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|k| k.parse::<f64>().ok())
        .map_or(0.0, |k| k / 1024.0)
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v.get(i).copied().unwrap_or(0.0)
}

fn main() {
    let root = match corpus().canonicalize() {
        Ok(r) => r,
        Err(_) => {
            eprintln!(
                "lsp bench: no Konfig corpus at {} (set KUSION_SHARED)",
                corpus().display()
            );
            return;
        }
    };
    let files = walk(&root);
    println!("corpus: {} ({} .k files)", root.display(), files.len());
    let rounds: usize = std::env::var("LSP_BENCH_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);

    // initial analysis: initialize -> every unit loaded, checked, linted, published
    let t = Instant::now();
    let mut c = Client::start(&[&root]);
    let idle = c.wait_idle();
    let initial = t.elapsed();
    println!(
        "initial analysis: {:.0} ms ({} units; the server's own count: {:.0} ms)",
        initial.as_secs_f64() * 1e3,
        idle["units"],
        idle["ms"].as_f64().unwrap_or(0.0)
    );
    // what the initial analysis published: files with errors, and with warnings only
    let (mut with_errors, mut with_warnings) = (Vec::new(), 0);
    for n in &c.inbox {
        if n.method != "textDocument/publishDiagnostics" {
            continue;
        }
        let d = n.params["diagnostics"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if d.iter().any(|x| x["severity"] == 1) {
            with_errors.push(format!(
                "{} ({})",
                n.params["uri"].as_str().unwrap_or(""),
                d.iter()
                    .find(|x| x["severity"] == 1)
                    .map(|x| x["message"].to_string())
                    .unwrap_or_default()
            ));
        } else if !d.is_empty() {
            with_warnings += 1;
        }
    }
    println!(
        "initial diagnostics: {} files with errors, {with_warnings} with warnings only",
        with_errors.len()
    );
    for e in with_errors.iter().take(5) {
        println!("  {e}");
    }
    println!(
        "resident memory after the initial analysis: {:.1} MiB (peak {:.1} MiB)",
        rss_mib("VmRSS:"),
        rss_mib("VmHWM:")
    );

    // a stack's main.k: `image` <-> `imagex` (an attribute Server does not have), one
    // character each way, so every edit changes the file's diagnostics
    let main = root.join("examples/appops/guestbook/dev/main.k");
    let text = std::fs::read_to_string(&main).expect("main.k");
    let (l, ch) = find(&text, "image = ", 5);
    c.clear();
    c.open(&main, &text);
    c.diagnostics(&uri(&main), Duration::from_secs(60));
    let mut diag_ms = Vec::new();
    let mut comp_after_edit = Vec::new();
    let mut version = 1;
    // a line to complete on: a new key inside the Server config
    let with_line = text.replacen("    image = ", "    \n    image = ", 1);
    version += 1;
    c.notify(
        "textDocument/didChange",
        serde_json::json!({"textDocument": {"uri": uri(&main), "version": version},
                           "contentChanges": [{"text": with_line}]}),
    );
    c.wait_idle();
    let (cl, cc) = (l, 4);
    let (l, ch) = (l + 1, ch);
    let mut n_items = 0;
    for i in 0..rounds {
        version += 1;
        c.clear();
        let t = Instant::now();
        if i % 2 == 0 {
            c.edit(&main, version, [l, ch, l, ch], "x");
        } else {
            c.edit(&main, version, [l, ch, l, ch + 1], "");
        }
        let d = c.diagnostics(&uri(&main), Duration::from_secs(60));
        diag_ms.push(t.elapsed().as_secs_f64() * 1e3);
        assert!(d.is_some(), "no diagnostics after edit {i}");
        let t = Instant::now();
        let r = c.call("textDocument/completion", at(&main, cl, cc));
        comp_after_edit.push(t.elapsed().as_secs_f64() * 1e3);
        n_items = r["items"].as_array().map_or(0, Vec::len);
    }
    let mut comp = Vec::new();
    for _ in 0..rounds {
        let t = Instant::now();
        c.call("textDocument/completion", at(&main, cl, cc));
        comp.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let mut hover = Vec::new();
    let (hl, hc) = find(&with_line, "Server", 2);
    for _ in 0..rounds {
        let t = Instant::now();
        c.call("textDocument/hover", at(&main, hl, hc));
        hover.push(t.elapsed().as_secs_f64() * 1e3);
    }
    // references of a k8s attribute across the workspace (cold, then cached)
    let meta = root.join("vendor/k8s/apimachinery/pkg/apis/meta/v1/object_meta.k");
    let mt = std::fs::read_to_string(&meta).unwrap_or_default();
    let mut refs = Vec::new();
    if mt.contains("    labels?:") {
        let (rl, rc) = find(&mt, "    labels?:", 5);
        for _ in 0..5 {
            let mut p = at(&meta, rl, rc);
            p["context"] = serde_json::json!({"includeDeclaration": true});
            let t = Instant::now();
            let r = c.call("textDocument/references", p);
            refs.push((
                t.elapsed().as_secs_f64() * 1e3,
                r.as_array().map_or(0, Vec::len),
            ));
        }
    }
    println!(
        "diagnostics after a one-character edit of {}: p50 {:.1} ms, p95 {:.1} ms, max {:.1} ms ({} edits)",
        main.strip_prefix(&root).unwrap_or(&main).display(),
        pct(&mut diag_ms.clone(), 0.5),
        pct(&mut diag_ms.clone(), 0.95),
        pct(&mut diag_ms, 1.0),
        rounds
    );
    println!(
        "completion right after the edit: p50 {:.1} ms, p95 {:.1} ms ({n_items} items)",
        pct(&mut comp_after_edit.clone(), 0.5),
        pct(&mut comp_after_edit, 0.95)
    );
    println!(
        "completion, unchanged buffer: p50 {:.2} ms, p95 {:.2} ms",
        pct(&mut comp.clone(), 0.5),
        pct(&mut comp, 0.95)
    );
    println!(
        "hover, unchanged buffer: p50 {:.2} ms, p95 {:.2} ms",
        pct(&mut hover.clone(), 0.5),
        pct(&mut hover, 0.95)
    );
    for (i, (ms, n)) in refs.iter().enumerate() {
        println!(
            "references of ObjectMeta.labels ({}): {ms:.1} ms, {n} locations",
            if i == 0 { "cold" } else { "cached" }
        );
    }
    println!(
        "resident memory at the end: {:.1} MiB (peak {:.1} MiB)",
        rss_mib("VmRSS:"),
        rss_mib("VmHWM:")
    );
    c.shutdown();
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(walk(&p));
            } else if p.extension().is_some_and(|x| x == "k") {
                out.push(p);
            }
        }
    }
    out
}
