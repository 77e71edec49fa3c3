//! Progress while a plan is applied: a bar on a terminal, plain lines elsewhere, and with
//! `--watch` a live row per watched object, fed by the kernel's apply events.

use std::collections::HashMap;
use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use kusion_kernel::execute::{Event, Outcome};
use kusion_sdk::runtime::Health;
use tokio::sync::mpsc;

use crate::render::Styles;

/// One row of the watch table: (kind, name) and its line.
type WatchRow = ((String, String), ProgressBar);

/// Progress during apply: a bar on a terminal, plain lines elsewhere; with --watch a live row per
/// watched object (`Type Kind Name Detail`).
///
/// The bar appears with the first step that changes something, so nothing redraws over the
/// confirmation prompt. Its label names a step in flight (the latest started), never one that
/// changes nothing. A watched resource's rows are its current objects: objects gone since the
/// last event (pods of a finished rollout) leave the table.
pub(crate) async fn show_progress(
    mut rx: mpsc::UnboundedReceiver<Event>,
    human: bool,
    color: bool,
    total: Arc<std::sync::atomic::AtomicUsize>,
) {
    let tty = human && std::io::stderr().is_terminal();
    let multi = MultiProgress::new();
    let mut bar: Option<ProgressBar> = None;
    let styles = Styles { color };
    // Rows per watched resource, by (kind, name).
    let mut rows: HashMap<String, Vec<WatchRow>> = HashMap::new();
    let mut last_detail: HashMap<(String, String, String), String> = HashMap::new();
    let mut started = HashMap::new();
    // Changing steps started and not finished, oldest first; `waiting`: those being watched.
    let mut in_flight: Vec<(String, kusion_kernel::plan::Action)> = Vec::new();
    let mut waiting: std::collections::HashSet<String> = std::collections::HashSet::new();
    let label = |in_flight: &[(String, kusion_kernel::plan::Action)],
                 waiting: &std::collections::HashSet<String>| {
        let Some((id, action)) = in_flight.last() else {
            return String::new();
        };
        let what = if waiting.contains(id) {
            format!("{action} {id}: waiting until ready")
        } else {
            format!("{action} {id}")
        };
        match in_flight.len() {
            1 => what,
            n => format!("{what} (+{} more)", n - 1),
        }
    };
    while let Some(event) = rx.recv().await {
        match event {
            Event::Started { id, action } => {
                if !action.changes_something() {
                    continue;
                }
                started.insert(id.clone(), std::time::Instant::now());
                in_flight.push((id, action));
                if tty {
                    let bar = bar.get_or_insert_with(|| {
                        let bar = multi.add(ProgressBar::new(0));
                        bar.set_style(
                            ProgressStyle::with_template(
                                "{spinner} {msg} [{bar:30}] {pos}/{len} {elapsed}",
                            )
                            .unwrap_or_else(|_| ProgressStyle::default_bar())
                            .progress_chars("=> "),
                        );
                        bar.enable_steady_tick(std::time::Duration::from_millis(120));
                        bar
                    });
                    bar.set_length(total.load(Ordering::SeqCst) as u64);
                    bar.set_message(label(&in_flight, &waiting));
                }
            }
            Event::Finished {
                id,
                action,
                outcome,
            } => {
                if !action.changes_something() {
                    continue;
                }
                in_flight.retain(|(i, _)| *i != id);
                waiting.remove(&id);
                let took = started
                    .get(&id)
                    .map(|t: &std::time::Instant| format!(" ({:.1}s)", t.elapsed().as_secs_f64()))
                    .unwrap_or_default();
                let line = match &outcome {
                    Outcome::Succeeded => {
                        format!("{} {action} {id}{took}", styles.green().apply_to("✔"))
                    }
                    Outcome::Failed(e) => {
                        format!("{} {action} {id}: {e}", styles.red().apply_to("✘"))
                    }
                    Outcome::Skipped(e) => format!(
                        "{} {action} {id}: skipped, {e}",
                        styles.yellow().apply_to("-")
                    ),
                    Outcome::Cancelled => {
                        format!("{} {action} {id}: not started", styles.dim().apply_to("-"))
                    }
                };
                if !human {
                    continue;
                }
                match &bar {
                    Some(bar) => {
                        bar.inc(1);
                        bar.set_message(label(&in_flight, &waiting));
                        multi.println(line).ok();
                    }
                    None => eprintln!("{line}"),
                }
            }
            Event::Watch {
                id,
                resource_type,
                event,
            } => {
                if !human {
                    continue;
                }
                if waiting.insert(id.clone())
                    && let Some(bar) = &bar
                {
                    bar.set_message(label(&in_flight, &waiting));
                }
                let current: Vec<(String, String)> = event
                    .objects
                    .iter()
                    .map(|o| (o.kind.clone(), o.name.clone()))
                    .collect();
                if tty {
                    let shown = rows.entry(id.clone()).or_default();
                    // Objects the resource no longer has (deleted pods, old ReplicaSets).
                    shown.retain(|(key, row)| {
                        let keep = current.contains(key);
                        if !keep {
                            row.finish_and_clear();
                            multi.remove(row);
                        }
                        keep
                    });
                } else {
                    last_detail.retain(|(i, kind, name), _| {
                        *i != id || current.contains(&(kind.clone(), name.clone()))
                    });
                }
                for object in event.objects {
                    let mark = match object.health {
                        Health::Ready => styles.green().apply_to("ready").to_string(),
                        Health::Failed => styles.red().apply_to("failed").to_string(),
                        Health::Progressing => styles.yellow().apply_to("waiting").to_string(),
                    };
                    let text = format!(
                        "{:<12} {:<14} {:<40} {mark} {}",
                        resource_type, object.kind, object.name, object.detail
                    );
                    let key = (object.kind.clone(), object.name.clone());
                    if tty {
                        let shown = rows.entry(id.clone()).or_default();
                        let row = match shown.iter().position(|(k, _)| *k == key) {
                            Some(i) => shown[i].1.clone(),
                            None => {
                                let row = multi.add(ProgressBar::new_spinner());
                                shown.push((key, row.clone()));
                                row
                            }
                        };
                        row.set_message(text);
                        if object.health == Health::Progressing {
                            row.enable_steady_tick(std::time::Duration::from_millis(120));
                        } else {
                            row.disable_steady_tick();
                            row.tick();
                        }
                    } else {
                        let key = (id.clone(), key.0, key.1);
                        if last_detail.get(&key) != Some(&text) {
                            eprintln!("{text}");
                            last_detail.insert(key, text);
                        }
                    }
                }
            }
        }
    }
    for row in rows.values().flatten() {
        row.1.finish();
    }
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
}
