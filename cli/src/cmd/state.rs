//! `kusionctl state`: show, history, check, repair and the other reads and edits of a stack's
//! state.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use anyhow::{Result, anyhow};
use serde_json::{Value, json};

use crate::args::{Output, StateCommand};
use crate::context::CommandContext;
use crate::exit;
use crate::render;
use kusion_kernel::state::format_time;

pub(crate) fn run(
    ctx: &CommandContext,
    global: &crate::args::Global,
    command: StateCommand,
    cancel: Arc<AtomicBool>,
) -> Result<u8> {
    let store = &ctx.stack.store;
    match command {
        StateCommand::List => {
            let state = store.load()?;
            if ctx.output == Output::Json {
                let list: Vec<Value> = state.resources.values().map(|e| json!({"id": e.resource.id, "type": e.resource.resource_type, "pending": e.pending, "updatedAt": format_time(e.updated_at)})).collect();
                println!("{}", json!({"serial": state.serial, "resources": list}));
            } else {
                let mut table = crate::render::plain_table(vec!["ID", "Type", "Status", "Updated"]);
                for e in state.resources.values() {
                    table.add_row(vec![
                        e.resource.id.clone(),
                        e.resource.resource_type.clone(),
                        if e.pending {
                            "pending (outcome unknown)".to_string()
                        } else {
                            "applied".to_string()
                        },
                        format_time(e.updated_at),
                    ]);
                }
                println!("{table}");
                println!(
                    "{} resource(s) in {}",
                    state.resources.len(),
                    store.location()
                );
            }
            Ok(exit::OK)
        }
        StateCommand::Show { id } => {
            let state = store.load()?;
            let entries: Vec<Value> = match &id {
                Some(id) => vec![render::masked_entry(state.resources.get(id).ok_or_else(
                    || {
                        anyhow!(
                            "resource {id:?} is not in the state at {}",
                            store.location()
                        )
                    },
                )?)],
                None => state.resources.values().map(render::masked_entry).collect(),
            };
            let value = if id.is_some() {
                entries.into_iter().next().unwrap_or(Value::Null)
            } else {
                Value::Array(entries)
            };
            if ctx.output == Output::Json {
                println!("{value}");
            } else {
                print!("{}", kusion_kernel::spec::json_to_yaml(&value));
            }
            Ok(exit::OK)
        }
        StateCommand::History { revision } => {
            match revision {
                Some(n) => {
                    let release = store.release(n)?;
                    let mut value = serde_json::to_value(&release)?;
                    render::iso_times(&mut value);
                    render::mask_sealed(&mut value);
                    if ctx.output == Output::Json {
                        println!("{value}");
                    } else {
                        print!("{}", kusion_kernel::spec::json_to_yaml(&value));
                    }
                }
                None => {
                    let releases = store.releases()?;
                    if ctx.output == Output::Json {
                        let list: Vec<Value> = releases
                            .iter()
                            .map(|r| json!({"revision": r.revision, "operation": r.operation, "status": r.status, "holder": r.holder, "startedAt": format_time(r.started_at), "finishedAt": r.finished_at.map(format_time), "steps": r.steps.len(), "rollbackOf": r.rollback_of}))
                            .collect();
                        println!("{}", Value::Array(list));
                    } else {
                        let mut table = crate::render::plain_table(vec![
                            "Revision",
                            "Operation",
                            "Status",
                            "Started",
                            "Finished",
                            "By",
                            "Steps",
                        ]);
                        for r in &releases {
                            table.add_row(vec![
                                r.revision.to_string(),
                                match r.rollback_of {
                                    Some(n) => format!("{} (to {n})", r.operation),
                                    None => r.operation.clone(),
                                },
                                format!("{:?}", r.status).to_lowercase(),
                                format_time(r.started_at),
                                r.finished_at.map(format_time).unwrap_or_else(|| "-".into()),
                                format!("{}@{}", r.holder.owner, r.holder.host),
                                r.steps.len().to_string(),
                            ]);
                        }
                        println!("{table}");
                    }
                }
            }
            Ok(exit::OK)
        }
        StateCommand::Unlock => {
            match store.force_unlock()? {
                Some(lease) => {
                    eprintln!(
                        "warning: removed lease #{} held by {} (acquired {}, expiring {}). If that process is still running, its next state write is refused and it stops without starting anything new; a step it is running at that moment may still finish in the cluster or cloud, and is then recorded as pending and read live by the next plan.",
                        lease.fence,
                        lease.holder,
                        format_time(lease.acquired_at),
                        format_time(lease.expires_at)
                    );
                }
                None => eprintln!("The stack holds no readable lease now."),
            }
            Ok(exit::OK)
        }
        StateCommand::Check => {
            let report = kusion_kernel::state::check::check(&**store);
            if ctx.output == Output::Json {
                println!("{}", serde_json::to_string(&report)?);
            } else {
                println!("State at {}:", report.location);
                for f in &report.findings {
                    let tag = match f.severity {
                        kusion_kernel::state::check::Severity::Error => "error",
                        kusion_kernel::state::check::Severity::Warning => "warning",
                        kusion_kernel::state::check::Severity::Note => "note",
                    };
                    let fix = if f.repairable {
                        " [state repair fixes this]"
                    } else {
                        ""
                    };
                    println!("  {tag}: {}{fix}", f.message);
                }
                if !report.has_errors() {
                    println!("No errors.");
                }
            }
            Ok(if report.has_errors() {
                exit::FAILED
            } else {
                exit::OK
            })
        }
        StateCommand::Rm { ids } => crate::cmd::import::forget(ctx, &ids, cancel),
        StateCommand::Mv {
            from,
            to,
            to_stack: None,
        } => crate::cmd::import::rename(ctx, &from, &to, cancel),
        StateCommand::Mv {
            from,
            to,
            to_stack: Some(dir),
        } => crate::cmd::import::move_to(ctx, global, &dir, &from, &to, cancel),
        StateCommand::Repair => {
            let done = kusion_kernel::state::check::repair(store.clone())?;
            if ctx.output == Output::Json {
                println!("{}", json!({"repaired": done}));
            } else if done.is_empty() {
                println!("Nothing needed repair; the state was compacted into a fresh snapshot.");
            } else {
                for line in &done {
                    println!("  {line}");
                }
                println!(
                    "Repaired {} problem(s) in {}.",
                    done.len(),
                    store.location()
                );
            }
            Ok(exit::OK)
        }
    }
}
