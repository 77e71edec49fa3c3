//! Fuzz driver for the language server: random edit sequences (insertions of random text and
//! deletions at random positions) on random files of the Konfig corpus, interleaved with
//! random requests at random positions, for `LSP_FUZZ_SECS` seconds (default 600). Reports
//! edits, requests, error answers by code, panics caught and memory; exits non-zero when a
//! panic was caught or the server stopped answering.
//!
//! `LSP_FUZZ_SECS=600 cargo bench -p kusion-kcl --bench lsp_fuzz` (`LSP_FUZZ_SEED` fixes the
//! seed; `KUSION_SHARED` points at the shared corpus).

#[path = "../tests/lsp_common/mod.rs"]
mod lsp_common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use lsp_common::{Client, uri};
use serde_json::json;

/// xorshift64*: reproducible without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

const SNIPPETS: &[&str] = &[
    "a",
    "_",
    "x",
    " ",
    "\n",
    "\n    ",
    ":",
    "=",
    "{",
    "}",
    "[",
    "]",
    "(",
    ")",
    ".",
    ",",
    "\"",
    "'",
    "\"\"\"",
    "#",
    "$",
    "@",
    "?",
    "|",
    "+",
    "-",
    "*",
    "**",
    "/",
    "//",
    "%",
    "<",
    ">",
    "!",
    "schema ",
    "lambda",
    "import ",
    "if ",
    "else:",
    "for ",
    " in ",
    "1",
    "0x",
    "1.5e",
    "Ki",
    "None",
    "True",
    "check:",
    "mixin ",
    "rule ",
    "assert ",
    "all x in ",
    "${",
    "}\"",
    "\t",
    "é",
    "😀",
    "\\",
    "frontend.",
    "Server {",
    "k8s.api.core.v1",
    "**base",
    "?.",
    "?[",
    "->",
];

fn corpus() -> PathBuf {
    let shared = std::env::var_os("KUSION_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared"));
    shared.join("conformance/konfig")
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "k") {
                out.push(p);
            }
        }
    }
}

fn rss_mib(field: &str) -> f64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|k| k.parse::<f64>().ok())
        .map_or(0.0, |k| k / 1024.0)
}

/// (line, UTF-16 character) of a byte offset (moved back to a character boundary).
fn position(text: &str, mut off: usize) -> (u32, u32) {
    off = off.min(text.len());
    while !text.is_char_boundary(off) {
        off -= 1;
    }
    let line = text[..off].matches('\n').count() as u32;
    let start = text[..off].rfind('\n').map_or(0, |i| i + 1);
    (line, text[start..off].encode_utf16().count() as u32)
}

fn main() {
    let Ok(root) = corpus().canonicalize() else {
        eprintln!(
            "lsp_fuzz: no Konfig corpus at {} (set KUSION_SHARED)",
            corpus().display()
        );
        std::process::exit(2);
    };
    let secs: u64 = std::env::var("LSP_FUZZ_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(600);
    let seed: u64 = std::env::var("LSP_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
                | 1
        });
    let mut rng = Rng(seed);
    let mut files = Vec::new();
    walk(&root, &mut files);
    files.sort();
    println!(
        "lsp_fuzz: seed {seed}, {secs} s, {} files under {}",
        files.len(),
        root.display()
    );
    let panics_before = kusion_kcl::lsp::PANICS.load(Ordering::SeqCst);
    let mut c = Client::start(&[&root]);
    c.wait_idle();
    // a few documents are kept open at once; each gets random edits
    let mut open: Vec<(PathBuf, String, i32)> = Vec::new();
    let mut edits = 0u64;
    let mut requests = 0u64;
    let mut errors: BTreeMap<i32, u64> = BTreeMap::new();
    let mut slowest = (Duration::ZERO, String::new());
    let deadline = Instant::now() + Duration::from_secs(secs);
    let methods = [
        "textDocument/hover",
        "textDocument/completion",
        "textDocument/definition",
        "textDocument/references",
        "textDocument/signatureHelp",
        "textDocument/documentSymbol",
        "textDocument/semanticTokens/full",
        "textDocument/inlayHint",
        "textDocument/formatting",
        "textDocument/codeAction",
        "textDocument/prepareRename",
        "textDocument/rename",
        "workspace/symbol",
    ];
    let mut last_report = Instant::now();
    while Instant::now() < deadline {
        // open or close documents now and then
        if open.len() < 3 || rng.below(50) == 0 {
            let p = files[rng.below(files.len())].clone();
            if !open.iter().any(|(q, _, _)| *q == p) {
                let text = std::fs::read_to_string(&p).unwrap_or_default();
                c.open(&p, &text);
                open.push((p, text, 1));
            }
        }
        if open.len() > 6 || (open.len() > 1 && rng.below(80) == 0) {
            let (p, _, _) = open.remove(rng.below(open.len()));
            c.notify(
                "textDocument/didClose",
                json!({"textDocument": {"uri": uri(&p)}}),
            );
        }
        let i = rng.below(open.len());
        // a burst of edits (typing), then some requests
        for _ in 0..1 + rng.below(8) {
            let (p, text, version) = &mut open[i];
            *version += 1;
            let len = text.len();
            let lo = rng.below(len + 1);
            let (l1, c1) = position(text, lo);
            if rng.below(3) == 0 && len > 0 {
                // delete up to 20 bytes
                let hi = (lo + 1 + rng.below(20)).min(len);
                let (l2, c2) = position(text, hi);
                let mut a = lo.min(len);
                while !text.is_char_boundary(a) {
                    a -= 1;
                }
                let mut b = hi;
                while !text.is_char_boundary(b) {
                    b -= 1;
                }
                c.edit(p, *version, [l1, c1, l2, c2], "");
                text.replace_range(a..b.max(a), "");
            } else {
                let s = SNIPPETS[rng.below(SNIPPETS.len())];
                c.edit(p, *version, [l1, c1, l1, c1], s);
                let mut a = lo;
                while !text.is_char_boundary(a) {
                    a -= 1;
                }
                text.insert_str(a, s);
            }
            edits += 1;
        }
        for _ in 0..rng.below(4) {
            let (p, text, _) = &open[rng.below(open.len())];
            let (l, ch) = position(text, rng.below(text.len() + 1));
            let m = methods[rng.below(methods.len())];
            let params = match m {
                "workspace/symbol" => json!({"query": SNIPPETS[rng.below(SNIPPETS.len())].trim()}),
                "textDocument/documentSymbol" | "textDocument/semanticTokens/full" => {
                    json!({"textDocument": {"uri": uri(p)}})
                }
                "textDocument/formatting" => json!({"textDocument": {"uri": uri(p)},
                    "options": {"tabSize": 4, "insertSpaces": true}}),
                "textDocument/inlayHint" | "textDocument/codeAction" => json!({
                    "textDocument": {"uri": uri(p)},
                    "range": {"start": {"line": 0, "character": 0}, "end": {"line": l, "character": ch}},
                    "context": {"diagnostics": []}}),
                "textDocument/references" => json!({"textDocument": {"uri": uri(p)},
                    "position": {"line": l, "character": ch},
                    "context": {"includeDeclaration": true}}),
                _ => json!({"textDocument": {"uri": uri(p)},
                    "position": {"line": l, "character": ch},
                    "newName": "renamed_x"}),
            };
            let t = Instant::now();
            // a stale request is cancelled now and then, as editors do
            let id = c.send_request(m, params);
            if rng.below(10) == 0 {
                c.notify(
                    "$/cancelRequest",
                    json!({"id": serde_json::to_value(&id).unwrap_or_default()}),
                );
            }
            let r = c.response(id);
            let took = t.elapsed();
            if took > slowest.0 {
                slowest = (took, m.to_string());
            }
            requests += 1;
            if let Err(e) = r.response_result {
                *errors.entry(e.code).or_default() += 1;
                if e.code == -32603 || (e.code == -32602 && errors[&e.code] <= 3) {
                    eprintln!("{m}: error {}: {}", e.code, e.message);
                }
            }
        }
        c.inbox.clear();
        if last_report.elapsed() > Duration::from_secs(60) {
            last_report = Instant::now();
            println!(
                "  {} s: {edits} edits, {requests} requests, RSS {:.0} MiB",
                secs - deadline.saturating_duration_since(Instant::now()).as_secs(),
                rss_mib("VmRSS:")
            );
        }
    }
    // still answering after everything
    let (p, _, _) = &open[0];
    let alive = c
        .request(
            "textDocument/documentSymbol",
            json!({"textDocument": {"uri": uri(p)}}),
        )
        .is_ok();
    let panics = kusion_kcl::lsp::PANICS.load(Ordering::SeqCst) - panics_before;
    println!(
        "lsp_fuzz: {edits} edits, {requests} requests in {secs} s; error answers by code: {errors:?}; \
         panics caught: {panics}; slowest request: {:.0} ms ({}); RSS {:.0} MiB (peak {:.0} MiB); \
         server answering at the end: {alive}",
        slowest.0.as_secs_f64() * 1e3,
        slowest.1,
        rss_mib("VmRSS:"),
        rss_mib("VmHWM:")
    );
    c.shutdown();
    if panics > 0 || !alive {
        std::process::exit(1);
    }
}
