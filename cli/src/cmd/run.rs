//! `kusionctl run FILE.k`: compile a day-2 operations program (written with the shipped
//! `kusion.ops` KCL package), show the plan, confirm, execute through the runtimes, stream
//! progress, wait for recovery, record the run in the state backend, and report per target.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use anyhow::{Context, Result, anyhow};
use kusion_kernel::ops::check::{self, CheckError, CheckedRun};
use kusion_kernel::ops::exec::{self, RunEvent, TargetStatus};
use kusion_kernel::ops::record::{self, RecordedRun, outcome_word};
use kusion_kernel::ops::{ClusterConfig, OpsSpec};
use kusion_kernel::registry::Registry;
use kusion_kernel::state::{LeaseHolder, ReleaseStatus, StateStore, format_time, now_ms};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::args::RunArgs;
use crate::render::Styles;
use crate::{UsageError, exit};

/// The `kusion` KCL package shipped inside the binary: (path below the package root, source).
const KCL_PACKAGE: &[(&str, &str)] = &[("ops/ops.k", include_str!("../../kcl/kusion/ops/ops.k"))];

/// What `run` needs from the command context.
pub struct RunEnv<'a> {
    /// The configured policies, checked over the run's targets before anything is touched.
    pub policy: kusion_kernel::policy::PolicyGuard,
    pub registry: &'a Registry,
    pub store: Arc<dyn StateStore>,
    pub workdir: &'a Path,
    pub json: bool,
    pub styles: Styles,
    pub config_file: Option<PathBuf>,
    pub runtime_config: Option<PathBuf>,
    pub plugin: Option<Rc<dyn kusion_kcl::PluginHook>>,
}

/// Show the policies' findings over the run's targets (a denial has already stopped it).
fn show_policy(env: &RunEnv<'_>, report: &kusion_kernel::policy::PolicyReport) {
    let text = crate::policy::render(report, &env.styles);
    if !text.is_empty() && !env.json {
        eprint!("{text}");
    }
}

/// Write the shipped package to a cache folder once per content and return the folder that
/// `-E kusion=<folder>` names. Files on disk (rather than in memory) keep KCL's error messages
/// pointing at real `file:line:col`s a user can open.
pub fn kcl_package_dir() -> Result<PathBuf> {
    // FNV-1a over the sources: a stable name per content, so versions never overwrite each other.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for (path, text) in KCL_PACKAGE {
        for b in path.bytes().chain(text.bytes()) {
            hash = (hash ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    let root = base
        .join("kusion")
        .join("kcl-packages")
        .join(format!("{hash:016x}"))
        .join("kusion");
    for (path, text) in KCL_PACKAGE {
        let file = root.join(path);
        if std::fs::read_to_string(&file).is_ok_and(|t| t == *text) {
            continue;
        }
        let dir = file.parent().unwrap_or(&root);
        std::fs::create_dir_all(dir)
            .with_context(|| format!("creating the KCL package folder {}", dir.display()))?;
        // Written next to the target and renamed, so a concurrent run never reads half a file.
        let tmp = file.with_extension(format!("k.tmp-{}", std::process::id()));
        std::fs::write(&tmp, text).with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, &file).with_context(|| format!("writing {}", file.display()))?;
    }
    Ok(root)
}

fn expand_home(p: &str, base: &Path) -> PathBuf {
    if let Some(rest) = p.strip_prefix("~/")
        && let Some(home) = std::env::var_os("HOME")
    {
        return PathBuf::from(home).join(rest);
    }
    let path = PathBuf::from(p);
    if path.is_absolute() {
        path
    } else {
        base.join(path)
    }
}

fn parse_clusters(
    value: &Value,
    base: &Path,
    source: &str,
    out: &mut BTreeMap<String, ClusterConfig>,
) -> Result<()> {
    let Some(map) = value.as_object() else {
        return Err(anyhow!(
            "{source}: `clusters` must map cluster names to {{kubeconfig, context}}"
        ));
    };
    for (name, v) in map {
        let mut c: ClusterConfig = serde_json::from_value(v.clone())
            .map_err(|e| anyhow!("{source}: clusters.{name}: {e}"))?;
        if let Some(k) = &c.kubeconfig {
            c.kubeconfig = Some(expand_home(&k.to_string_lossy(), base));
        }
        out.insert(name.clone(), c);
    }
    Ok(())
}

/// Clusters from `[clusters.<name>]` in the kusion config file, then `clusters:` in the runtime
/// configuration (which wins for a name in both).
pub fn load_clusters(
    config_file: Option<&Path>,
    runtime_config: Option<&Path>,
) -> Result<BTreeMap<String, ClusterConfig>> {
    let mut out = BTreeMap::new();
    if let Some(file) = crate::config::config_file(config_file.map(Path::to_path_buf)) {
        let text = std::fs::read_to_string(&file)
            .with_context(|| format!("reading {}", file.display()))?;
        let doc: toml::Table =
            toml::from_str(&text).with_context(|| format!("parsing {}", file.display()))?;
        if let Some(c) = doc.get("clusters") {
            let v = serde_json::to_value(c)?;
            let base = file.parent().unwrap_or(Path::new("."));
            parse_clusters(&v, base, &file.display().to_string(), &mut out)?;
        }
    }
    if let Some(rc) = runtime_config {
        let text =
            std::fs::read_to_string(rc).with_context(|| format!("reading {}", rc.display()))?;
        let v = kusion_kernel::spec::yaml_to_json(&text)
            .with_context(|| format!("parsing {}", rc.display()))?;
        if let Some(c) = v.get("clusters") {
            let base = rc.parent().unwrap_or(Path::new("."));
            parse_clusters(c, base, &rc.display().to_string(), &mut out)?;
        }
    }
    Ok(out)
}

/// Compile the program (the shipped `kusion` package beside it) into the operations it declares.
/// Its imports are resolved from its own folder.
pub(crate) fn compile_program(
    file: &Path,
    args: &[(String, String)],
    plugin: Option<Rc<dyn kusion_kcl::PluginHook>>,
) -> Result<OpsSpec> {
    let package = kcl_package_dir()?;
    let options = kusion_kcl::RunOptions {
        work_dir: file.parent().map(Path::to_path_buf),
        args: args.to_vec(),
        external: vec![("kusion".to_string(), package)],
        json: true,
        plugin,
        note_instances: true,
        ..Default::default()
    };
    let out = kusion_kcl::run_full(&[file.to_path_buf()], &options).map_err(|e| {
        crate::compile::KclProgramFailure {
            file: file.to_path_buf(),
            rendered: e.to_string(),
        }
    })?;
    let output: Value = serde_json::from_str(&out.text)
        .with_context(|| format!("reading the output of {}", file.display()))?;
    OpsSpec::from_output(&output).with_context(|| format!("{}", file.display()))
}

fn print_plan(
    file: &Path,
    spec: &OpsSpec,
    preflight: &BTreeMap<(String, String), Result<String, String>>,
    styles: &Styles,
) {
    println!(
        "Run plan for {}: {} operation(s), {} target(s)",
        file.display(),
        spec.operations.len(),
        spec.target_count()
    );
    for op in &spec.operations {
        let mut limits = format!("batch size {}", op.batch_size);
        match (op.max_unavailable, op.max_unavailable_percent) {
            (Some(m), Some(p)) => limits.push_str(&format!(
                ", max unavailable {m} ({p}% of {} target(s))",
                op.targets.len()
            )),
            (Some(m), None) => limits.push_str(&format!(", max unavailable {m}")),
            _ => {}
        }
        if !op.pause.is_zero() {
            limits.push_str(&format!(", pause {}", humantime::format_duration(op.pause)));
        }
        limits.push_str(&format!(
            ", timeout {}",
            humantime::format_duration(op.timeout)
        ));
        let deps = if op.depends_on.is_empty() {
            String::new()
        } else {
            format!(", after {}", op.depends_on.join(", "))
        };
        println!(
            "\n{} {} (app {}; {limits}{deps})",
            styles.bold().apply_to(&op.kind),
            op.name,
            op.app
        );
        for g in op.groups() {
            for (i, batch) in g.batches.iter().enumerate() {
                println!(
                    "  cluster {} batch {}/{}:",
                    g.cluster,
                    i + 1,
                    g.batches.len()
                );
                for t in batch {
                    match preflight.get(&(op.name.clone(), t.name.clone())) {
                        Some(Ok(what)) => println!(
                            "    {} {}",
                            t.name,
                            styles.dim().apply_to(format!("— {what}"))
                        ),
                        Some(Err(e)) if op.depends_on.is_empty() => println!(
                            "    {} {}",
                            t.name,
                            styles.red().apply_to(format!("— cannot: {e}"))
                        ),
                        Some(Err(e)) => println!(
                            "    {} {}",
                            t.name,
                            styles.yellow().apply_to(format!(
                                "— not possible yet (before {}): {e}",
                                op.depends_on.join(", ")
                            ))
                        ),
                        None => println!("    {}", t.name),
                    }
                }
            }
        }
    }
    if !spec.unresolved.is_empty() {
        println!(
            "\n{}",
            styles.red().apply_to("Unresolved (not part of the run):")
        );
        for u in &spec.unresolved {
            println!("  {}: {}", u.subject, u.reason);
        }
    }
    println!();
}

fn show_event(event: &RunEvent, run: u64, json: bool, styles: &Styles) {
    if json {
        // Progress for a calling platform: one JSON object per line on stderr, each saying
        // when and for which run.
        if let Ok(Value::Object(mut line)) = serde_json::to_value(event) {
            line.insert("run".into(), json!(run));
            line.insert("time".into(), json!(crate::render::now_rfc3339()));
            eprintln!("{}", Value::Object(line));
        }
        return;
    }
    let line = match event {
        RunEvent::BatchStarted {
            operation,
            cluster,
            batch,
            batches,
            targets,
        } => format!(
            "{} {operation}: cluster {cluster} batch {batch}/{batches} ({} target(s))",
            styles.bold().apply_to("▶"),
            targets.len()
        ),
        RunEvent::Acted { target, result, .. } => match result {
            Ok(summary) => format!("  {} {target}: {summary}", styles.green().apply_to("✔")),
            Err(e) => format!("  {} {target}: {e}", styles.red().apply_to("✘")),
        },
        RunEvent::Waiting {
            operation,
            cluster,
            batch,
            detail,
        } => format!(
            "  {} {operation} {cluster} batch {batch}: {detail}",
            styles.yellow().apply_to("…")
        ),
        RunEvent::BatchDone {
            operation,
            cluster,
            batch,
            recovered,
            failed,
            took_ms,
        } => {
            let took = *took_ms as f64 / 1000.0;
            if *failed == 0 {
                format!(
                    "{} {operation}: cluster {cluster} batch {batch}: {recovered} recovered ({took:.1}s)",
                    styles.green().apply_to("✔")
                )
            } else {
                format!(
                    "{} {operation}: cluster {cluster} batch {batch}: {failed} not recovered, {recovered} recovered ({took:.1}s)",
                    styles.red().apply_to("✘")
                )
            }
        }
        RunEvent::OperationSkipped { operation, reason } => format!(
            "{} {operation}: skipped, {reason}",
            styles.yellow().apply_to("-")
        ),
    };
    eprintln!("{line}");
}

fn history(env: &RunEnv<'_>) -> Result<u8> {
    let runs = env.store.runs()?;
    if env.json {
        let mut value = serde_json::to_value(&runs)?;
        crate::render::iso_times(&mut value);
        println!("{value}");
        return Ok(exit::OK);
    }
    if runs.is_empty() {
        println!("No runs recorded in {}.", env.store.location());
        return Ok(exit::OK);
    }
    let mut table = crate::render::plain_table(vec![
        "Run", "Started", "By", "Program", "Status", "Targets", "Took",
    ]);
    for r in &runs {
        let recovered = r
            .targets
            .iter()
            .filter(|t| t.outcome == "recovered")
            .count();
        let took = r
            .finished_at
            .map(|f| format!("{:.1}s", f.saturating_sub(r.started_at) as f64 / 1000.0))
            .unwrap_or_else(|| "-".into());
        let mut program = r.program.clone();
        if !r.args.is_empty() {
            program.push_str(&format!(" -D {}", r.args.join(" -D ")));
        }
        table.add_row(vec![
            r.id.to_string(),
            format_time(r.started_at),
            format!("{}@{}", r.holder.owner, r.holder.host),
            program,
            format!("{:?}", r.status).to_lowercase(),
            format!("{recovered}/{} recovered", r.targets.len()),
            took,
        ]);
    }
    println!("{table}");
    for r in runs.iter().filter(|r| r.status != ReleaseStatus::Succeeded) {
        for t in r.targets.iter().filter(|t| t.outcome != "recovered") {
            println!(
                "  run {}: {} ({}): {} {}",
                r.id,
                t.target,
                t.operation,
                t.outcome,
                t.reason.as_deref().unwrap_or("")
            );
        }
        for n in &r.notes {
            println!("  run {}: {n}", r.id);
        }
    }
    Ok(exit::OK)
}

pub async fn run(env: RunEnv<'_>, args: RunArgs, cancel: Arc<AtomicBool>) -> Result<u8> {
    let started = Instant::now();
    if args.history {
        return history(&env);
    }
    let Some(file) = args.file.clone() else {
        return Err(UsageError(
            "kusionctl run needs a program: kusionctl run FILE.k [-D key=value ...]".into(),
        )
        .into());
    };
    let file = if file.is_absolute() {
        file
    } else {
        env.workdir.join(file)
    };
    if !file.is_file() {
        return Err(UsageError(format!("{}: no such file", file.display())).into());
    }
    let kv = kusion_kernel::ops::spec::parse_args(&args.args)
        .map_err(|e| anyhow::Error::new(UsageError(format!("-D {e}"))))?;
    if !args.yes && !args.dry_run && !std::io::stdin().is_terminal() {
        return Err(UsageError(
            "standard input is not a terminal: pass --yes to run without confirmation (or --dry-run)".into(),
        )
        .into());
    }
    let clusters = load_clusters(env.config_file.as_deref(), env.runtime_config.as_deref())?;

    // 1. Compile and check: nothing remote happens until every check passed.
    let spec = tokio::task::block_in_place(|| compile_program(&file, &kv, env.plugin.clone()))?;
    let compile_ms = started.elapsed().as_millis() as u64;
    let report =
        tokio::task::block_in_place(|| check::check(&spec, env.registry, &clusters, &env.policy))
            .map_err(|e| match e {
            // Kept as itself: it maps to the policy exit code.
            CheckError::Blocked(b) => anyhow::Error::new(b),
            e => anyhow!(e),
        })?;
    show_policy(&env, &report);

    // 2. Preflight: every target exists and the runtime accepts the operation.
    let preflight_start = Instant::now();
    let checks = exec::preflight(&spec, env.registry, &clusters, args.concurrency).await;
    let preflight_ms = preflight_start.elapsed().as_millis() as u64;
    let CheckedRun {
        checked,
        plan,
        problem,
        refused,
    } = CheckedRun::new(&spec, checks, args.partial);
    if !env.json {
        print_plan(&file, &spec, &checked, &env.styles);
    }
    let arg_texts: Vec<String> = args.args.clone();
    let holder = LeaseHolder::current("run");
    if spec.operations.is_empty() && spec.unresolved.is_empty() {
        if env.json {
            println!("{}", json!({"status": "nothing", "plan": plan}));
        } else {
            println!("The program declares no operations: nothing to do.");
        }
        return Ok(exit::OK);
    }
    if args.dry_run {
        if env.json {
            println!(
                "{}",
                json!({"status": if problem.is_some() {"refused"} else {"dryRun"}, "plan": plan, "problem": problem})
            );
        } else if let Some(p) = &problem {
            eprintln!(
                "{}",
                env.styles
                    .red()
                    .apply_to(format!("A real run would be refused: {p}"))
            );
        } else {
            println!("Dry run: nothing was changed.");
        }
        return Ok(if problem.is_some() {
            exit::FAILED
        } else {
            exit::OK
        });
    }
    let mut record = record::new_record(&spec, &file.display().to_string(), arg_texts, holder);
    if let Some(p) = problem {
        // Refused before acting: recorded too, so the platform's attempt is in the history.
        let id = record::record_refused(env.store.as_ref(), &mut record, &spec, &p, &refused)?;
        if env.json {
            // The same target shape as a run that acted (`status`, not the record's `outcome`).
            let targets: Vec<Value> = record
                .targets
                .iter()
                .map(|t| json!({"target": t.target, "operation": t.operation, "status": t.outcome, "reason": t.reason}))
                .collect();
            println!(
                "{}",
                json!({"run": id, "status": "refused", "error": p, "plan": plan, "targets": targets})
            );
        } else {
            eprintln!(
                "{}",
                env.styles
                    .red()
                    .apply_to(format!("error: {p}; nothing was run (run {id})"))
            );
        }
        return Ok(exit::FAILED);
    }
    if !args.yes && !crate::render::confirm("Do you want to run these operations?", None) {
        if env.json {
            println!(
                "{}",
                json!({"status": "declined", "plan": plan, "exitCode": exit::FAILED})
            );
        } else {
            println!("Run cancelled; nothing changed.");
        }
        // Not what was asked for: as for apply and destroy, a script must not take it as done.
        return Ok(exit::FAILED);
    }

    // 3. Take the stack (runs and applies of one stack exclude each other, so one app's
    //    maxUnavailable holds across them), execute, streaming progress, and record.
    let store = env.store.clone();
    let run = RecordedRun::start(
        store.clone(),
        record,
        args.wait_lock.unwrap_or_default(),
        cancel.clone(),
    )
    .await?;
    let id = run.id;
    if !env.json {
        eprintln!("Run {id} started.");
    }
    {
        // A second Ctrl-C leaves at once, but first closes the record (each target's intent
        // is already durable, so the record says what may have been changed).
        let (store, shared) = (store.clone(), run.shared_record());
        crate::interrupt::on_forced_exit(Box::new(move || {
            let mut r = shared.lock().unwrap_or_else(|p| p.into_inner());
            r.status = ReleaseStatus::Interrupted;
            r.finished_at = Some(now_ms());
            r.notes.push(
                "interrupted twice: left at once; targets recorded as `acting` may have been changed"
                    .into(),
            );
            let _ = store.update_run(&r);
        }));
    }
    let (tx, mut rx) = mpsc::unbounded_channel();
    let (json_out, color) = (env.json, env.styles.color);
    let printer = tokio::spawn(async move {
        let styles = Styles { color };
        while let Some(e) = rx.recv().await {
            show_event(&e, id, json_out, &styles);
        }
    });
    let exec_start = Instant::now();
    let (record, report) = run
        .execute(&spec, env.registry, &clusters, Some(tx), cancel.clone())
        .await?;
    let _ = printer.await;
    let exec_ms = exec_start.elapsed().as_millis() as u64;
    let ok = report.succeeded() && spec.unresolved.is_empty();

    // kusionctl's own time: everything except waiting for workloads and declared pauses, on the
    // slowest (operation, cluster) path.
    let waited = report
        .groups
        .iter()
        .map(|g| g.wait_ms + g.pause_ms + g.queued_ms)
        .max()
        .unwrap_or(0);
    let total_ms = started.elapsed().as_millis() as u64;
    let timing = json!({
        "totalMs": total_ms, "compileMs": compile_ms, "preflightMs": preflight_ms,
        "executeMs": exec_ms, "waitMs": waited, "overheadMs": total_ms.saturating_sub(waited),
        "groups": report.groups,
    });
    let recovered = report
        .targets
        .iter()
        .filter(|t| t.status == TargetStatus::Recovered)
        .count();
    if env.json {
        println!(
            "{}",
            json!({"run": id, "status": format!("{:?}", record.status).to_lowercase(), "plan": plan,
                   "targets": report.targets, "unresolved": spec.unresolved, "timing": timing})
        );
    } else {
        for t in report
            .targets
            .iter()
            .filter(|t| t.status != TargetStatus::Recovered)
        {
            println!(
                "{} {} (operation {}, app {}, cluster {}, batch {}): {}: {}",
                env.styles.red().apply_to("✘"),
                t.target,
                t.operation,
                t.app,
                t.cluster,
                t.batch,
                outcome_word(t.status),
                t.reason.as_deref().unwrap_or("")
            );
        }
        for u in &spec.unresolved {
            println!(
                "{} {}: {}",
                env.styles.red().apply_to("✘"),
                u.subject,
                u.reason
            );
        }
        let line = format!(
            "Run {id} {}: {recovered}/{} target(s) recovered in {:.1}s (kusionctl {:.1}s, waiting for workloads {:.1}s).",
            format!("{:?}", record.status).to_lowercase(),
            report.targets.len() + spec.unresolved.len(),
            total_ms as f64 / 1000.0,
            total_ms.saturating_sub(waited) as f64 / 1000.0,
            waited as f64 / 1000.0
        );
        let style = if ok {
            env.styles.green()
        } else {
            env.styles.red()
        };
        println!("{}", style.apply_to(line));
    }
    Ok(if ok { exit::OK } else { exit::FAILED })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clusters_from_config_file_and_runtime_config() {
        let dir = std::env::temp_dir().join(format!("kusion-clusters-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let toml_file = dir.join("config.toml");
        std::fs::write(
            &toml_file,
            "[plugins]\ndefault_dirs = false\n\n[clusters.east]\nkubeconfig = \"east.yaml\"\n\n\
             [clusters.west]\nkubeconfig = \"/etc/west.yaml\"\ncontext = \"w\"\n",
        )
        .unwrap();
        let rc = dir.join("runtime.yaml");
        std::fs::write(
            &rc,
            "clusters:\n  west: {kubeconfig: /srv/west.yaml}\nkubernetes: {}\n",
        )
        .unwrap();
        let clusters = load_clusters(Some(&toml_file), Some(&rc)).unwrap();
        assert_eq!(
            clusters["east"].kubeconfig.as_deref(),
            Some(dir.join("east.yaml").as_path())
        );
        // The runtime configuration wins for a name in both.
        assert_eq!(
            clusters["west"].kubeconfig.as_deref(),
            Some(Path::new("/srv/west.yaml"))
        );
        assert_eq!(clusters["west"].context, None);
        assert_eq!(clusters["east"].resource_type, "Kubernetes");
        std::fs::write(&rc, "clusters:\n  west: {kubeconfig: /x, server: y}\n").unwrap();
        let e = load_clusters(None, Some(&rc)).unwrap_err().to_string();
        assert!(e.contains("clusters.west") && e.contains("server"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
