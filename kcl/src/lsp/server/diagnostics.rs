//! Diagnostics: the thread that re-analyses dirty units (the edited file's first, every
//! pending change taken before each unit) and publishes what changed, and lint findings as
//! protocol diagnostics.

use std::collections::{HashMap, VecDeque};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender};
use lsp_server::{Message, Notification};
use lsp_types::notification::Notification as _;
use lsp_types::{self as lt, Url};
use serde_json::json;

use super::super::db::{Db, Unit, findings_by_file};
use super::super::pos::{self, Encoding};
use super::{DiagMsg, PANICS, panic_text};

/// A lint finding as a protocol diagnostic at `range`.
pub(crate) fn to_diagnostic_at(f: &crate::cli::lint::Finding, range: lt::Range) -> lt::Diagnostic {
    let tags = match f.code.as_str() {
        "unused-import" | "unused-variable" | "unreachable" => {
            Some(vec![lt::DiagnosticTag::UNNECESSARY])
        }
        "deprecated" => Some(vec![lt::DiagnosticTag::DEPRECATED]),
        _ => None,
    };
    lt::Diagnostic {
        range,
        severity: Some(if f.error {
            lt::DiagnosticSeverity::ERROR
        } else {
            lt::DiagnosticSeverity::WARNING
        }),
        code: (!f.code.is_empty()).then(|| lt::NumberOrString::String(f.code.clone())),
        code_description: None,
        source: Some("kcl".into()),
        message: if f.title.is_empty() {
            f.message.clone()
        } else {
            format!("{}: {}", f.title, f.message)
        },
        related_information: None,
        tags,
        data: f.delete.map(|_| json!({"fixable": true})),
    }
}

/// A finding's range: its span, widened to the word there when it is a point.
fn finding_range(text: &str, starts: &[u32], lo: u32, hi: u32, enc: Encoding) -> lt::Range {
    let mut hi = hi.max(lo);
    if hi == lo {
        let rest = text.get(lo as usize..).unwrap_or("");
        let word: usize = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .map(char::len_utf8)
            .sum();
        hi = lo + word.max(rest.chars().next().map_or(0, |c| c.len_utf8())) as u32;
    }
    pos::range(text, starts, lo, hi, enc)
}

/// Re-analyses dirty units and publishes the diagnostics that changed.
pub(super) fn diagnostics_loop(
    db: Arc<Db>,
    sender: Sender<Message>,
    rx: Receiver<DiagMsg>,
    enc: Encoding,
    status: bool,
) {
    let mut queue: VecDeque<Arc<Unit>> = VecDeque::new();
    let mut published: HashMap<PathBuf, Vec<lt::Diagnostic>> = HashMap::new();
    let mut batch_start: Option<Instant> = None;
    let mut done = 0usize;
    let take = |m: DiagMsg, queue: &mut VecDeque<Arc<Unit>>| -> bool {
        match m {
            DiagMsg::Stop => false,
            DiagMsg::Dirty(units) => {
                // newest first: the edited file's unit jumps the queue
                for u in units.into_iter().rev() {
                    queue.retain(|x| x.key != u.key);
                    queue.push_front(u);
                }
                true
            }
        }
    };
    loop {
        if queue.is_empty() {
            if let Some(t) = batch_start.take()
                && status
            {
                let _ = sender.send(
                    Notification::new(
                        "kcl/status".into(),
                        json!({"state": "idle", "units": done, "ms": t.elapsed().as_secs_f64() * 1e3}),
                    )
                    .into(),
                );
            }
            done = 0;
            match rx.recv() {
                Ok(m) => {
                    if !take(m, &mut queue) {
                        return;
                    }
                }
                Err(_) => return,
            }
            batch_start.get_or_insert_with(Instant::now);
        }
        while let Ok(m) = rx.try_recv() {
            if !take(m, &mut queue) {
                return;
            }
        }
        let Some(unit) = queue.pop_front() else {
            continue;
        };
        let db2 = db.clone();
        let computed = catch_unwind(AssertUnwindSafe(|| {
            let r = db2.result(&unit);
            let _ = r.findings(&db2);
            r
        }));
        let r = match computed {
            Ok(r) => r,
            Err(e) => {
                PANICS.fetch_add(1, Ordering::SeqCst);
                tracing::error!(unit = %unit.key.display(), panic = panic_text(&e), "analysis panicked");
                continue;
            }
        };
        done += 1;
        let units = db.units();
        let own = units.units.iter().position(|u| u.key == unit.key);
        for (path, findings) in findings_by_file(&r, &db) {
            // a file reports through its primary unit only
            match (units.primary.get(&path), own) {
                (Some(p), Some(o)) if *p != o => continue,
                (Some(_), None) => continue,
                _ => {}
            }
            let Some(fd) = r.file_by_path(&path) else {
                continue;
            };
            let text = fd.text();
            let starts = fd.src.line_starts();
            let mut diags: Vec<lt::Diagnostic> = findings
                .iter()
                .map(|f| {
                    let range = match f.span {
                        Some(s) => finding_range(text, starts, s.lo, s.hi, enc),
                        None => lt::Range::default(),
                    };
                    to_diagnostic_at(f, range)
                })
                .collect();
            diags.dedup();
            if published.get(&path) == Some(&diags) {
                continue;
            }
            let Ok(uri) = Url::from_file_path(&path) else {
                continue;
            };
            let version = db.overlay(&path).map(|(_, v)| v);
            published.insert(path.clone(), diags.clone());
            let params = lt::PublishDiagnosticsParams {
                uri,
                diagnostics: diags,
                version,
            };
            let _ = sender.send(
                Notification::new(lt::notification::PublishDiagnostics::METHOD.into(), params)
                    .into(),
            );
        }
    }
}
