//! Benchmark: N `aws_s3_bucket`s against moto, through this runtime and (with `--terraform`)
//! through the terraform CLI on PATH, same provider binary, same moto, same machine.
//!
//! `cargo bench -p kusion-runtime-terraform --bench s3_buckets -- [--terraform] [--parallelism=P]
//! [--profile] [--always-plan] [N ...]`
//! (default N: 10 100 500). Each phase is a separate operation: the runtime is reconfigured
//! (its provider processes stopped) between phases, as a new `kusionctl` run would. Phases:
//! apply (create all), no-change preview (read + dry-run each, like terraform's refresh + plan),
//! destroy. Peak memory sums the RSS of every process involved except moto, sampled every 50 ms.

#[path = "../tests/common/mod.rs"]
mod common;

use std::collections::VecDeque;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use kusion_runtime_terraform::TerraformRuntime;
use kusion_sdk::Resource;
use kusion_sdk::runtime::{ApplyRequest, DeleteRequest, ReadRequest, Runtime};
use serde_json::{Value, json};

/// Concurrent resource operations, like terraform's `-parallelism` (default 10 in both);
/// `--parallelism=N` changes it for both tools.
static PARALLELISM: AtomicUsize = AtomicUsize::new(10);
/// `--profile`: print where the no-change preview's time goes (summed call times, CPU seconds).
static PROFILE: AtomicBool = AtomicBool::new(false);
/// `--always-plan`: the runtime plans every resource in the preview (no unchanged shortcut).
static ALWAYS_PLAN: AtomicBool = AtomicBool::new(false);

/// CPU seconds of every child process waited for so far (terraform and the providers it ran).
fn children_cpu_seconds() -> f64 {
    // SAFETY: getrusage only writes the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

/// CPU seconds this process used so far (its provider children are counted separately).
fn own_cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let num = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    (num(11) + num(12)) as f64 / 100.0
}

/// CPU seconds (user + system) used so far by a process and all its descendants.
fn tree_cpu(root: u32) -> f64 {
    let mut children: std::collections::HashMap<u32, Vec<u32>> = Default::default();
    let mut cpu: std::collections::HashMap<u32, u64> = Default::default();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // Fields after the parenthesised command name: state ppid ... utime(14) stime(15).
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let num = |i: usize| {
            fields
                .get(i)
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        children.entry(num(1) as u32).or_default().push(pid);
        cpu.insert(pid, num(11) + num(12));
    }
    let mut ticks = 0;
    let mut stack = vec![root];
    while let Some(pid) = stack.pop() {
        ticks += cpu.get(&pid).copied().unwrap_or(0);
        stack.extend(children.get(&pid).into_iter().flatten());
    }
    // Clock ticks are 100 per second on Linux.
    ticks as f64 / 100.0
}

/// RSS (KiB) of a process and all its descendants, leaving out `exclude`.
fn tree_rss(root: u32, exclude: u32) -> u64 {
    let mut children: std::collections::HashMap<u32, Vec<u32>> = Default::default();
    let mut rss: std::collections::HashMap<u32, u64> = Default::default();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(status) = std::fs::read_to_string(entry.path().join("status")) else {
            continue;
        };
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse::<u64>().ok())
        };
        if let Some(ppid) = field("PPid:") {
            children.entry(ppid as u32).or_default().push(pid);
        }
        rss.insert(pid, field("VmRSS:").unwrap_or(0));
    }
    let mut total = 0;
    let mut stack = vec![root];
    while let Some(pid) = stack.pop() {
        if pid == exclude {
            continue;
        }
        total += rss.get(&pid).copied().unwrap_or(0);
        stack.extend(children.get(&pid).into_iter().flatten());
    }
    total
}

/// Samples the memory of a process tree until dropped; `peak()` in MiB.
struct Sampler {
    peak: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
}

impl Sampler {
    fn start(root: Arc<Mutex<u32>>, exclude: u32) -> Sampler {
        let peak = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (p, s) = (peak.clone(), stop.clone());
        std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                let pid = *root.lock().unwrap();
                p.fetch_max(tree_rss(pid, exclude), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        Sampler { peak, stop }
    }
    fn peak_mib(&self) -> u64 {
        self.peak.load(Ordering::Relaxed) / 1024
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Run `job` over `items` with PARALLELISM threads.
fn parallel<T: Send, R: Send>(items: Vec<T>, job: impl Fn(T) -> R + Sync) -> Vec<R> {
    let queue = Mutex::new(items.into_iter().enumerate().collect::<VecDeque<_>>());
    let results = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..PARALLELISM.load(Ordering::Relaxed) {
            s.spawn(|| {
                loop {
                    let Some((i, item)) = queue.lock().unwrap().pop_front() else {
                        break;
                    };
                    let r = job(item);
                    results.lock().unwrap().push((i, r));
                }
            });
        }
    });
    let mut results = results.into_inner().unwrap();
    results.sort_by_key(|(i, _)| *i);
    results.into_iter().map(|(_, r)| r).collect()
}

struct Row {
    apply: Duration,
    preview: Duration,
    destroy: Duration,
    peak_mib: u64,
}

fn bench_runtime(moto: &Moto, dir: &Path, n: usize) -> Row {
    let meta = moto.provider_meta();
    let rt = TerraformRuntime::new().unwrap();
    let mut config = runtime_config(dir);
    config["alwaysPlan"] = json!(ALWAYS_PLAN.load(Ordering::Relaxed));
    let sampler = Sampler::start(Arc::new(Mutex::new(std::process::id())), moto_pid(moto));
    let specs: Vec<Resource> = (0..n)
        .map(|i| {
            resource(
                AWS_PROVIDER,
                &meta,
                "aws_s3_bucket",
                &format!("b{i}"),
                json!({"bucket": format!("kusion-bench-{n}-{i}"), "tags": {"n": n.to_string()}}),
            )
        })
        .collect();

    rt.configure(&config).unwrap();
    let moto_before = tree_cpu(moto_pid(moto));
    let t = Instant::now();
    let stored: Vec<(Resource, Option<String>)> = parallel(specs.clone(), |spec| {
        let r = rt
            .apply(&ApplyRequest {
                prior: None,
                prior_private: None,
                planned: spec.clone(),
                dry_run: false,
                timeout: None,
            })
            .unwrap_or_else(|e| panic!("{e}"));
        (r.resource, r.private)
    });
    let apply = t.elapsed();
    profile_phase(
        "kusion",
        "apply",
        n,
        apply,
        tree_cpu(moto_pid(moto)) - moto_before,
    );

    rt.configure(&config).unwrap();
    let (read_ns, plan_ns) = (AtomicU64::new(0), AtomicU64::new(0));
    let moto_cpu = tree_cpu(moto_pid(moto));
    let own_cpu = own_cpu_seconds();
    let t = Instant::now();
    let changes: Vec<usize> = parallel(
        specs.iter().zip(&stored).collect(),
        |(spec, (state, private))| {
            let started = Instant::now();
            let live = rt
                .read(&ReadRequest {
                    prior: Some(state.clone()),
                    prior_private: private.clone(),
                    planned: None,
                    timeout: None,
                })
                .unwrap_or_else(|e| panic!("{e}"))
                .resource
                .expect("bucket exists");
            read_ns.fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
            let started = Instant::now();
            let plan = rt
                .apply(&ApplyRequest {
                    prior: Some(live.clone()),
                    prior_private: private.clone(),
                    planned: spec.clone(),
                    dry_run: true,
                    timeout: None,
                })
                .unwrap_or_else(|e| panic!("{e}"));
            plan_ns.fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
            diff_paths(
                &Value::Object(live.attributes),
                &Value::Object(plan.resource.attributes),
            )
            .len()
        },
    );
    let preview = t.elapsed();
    if PROFILE.load(Ordering::Relaxed) {
        let provider_cpu: f64 = rt
            .provider_processes()
            .iter()
            .map(|(_, pid)| tree_cpu(*pid))
            .sum();
        println!(
            "  profile N={n}: preview {:.1} s; summed call time: read {:.1} s, dry-run {:.1} s; CPU: moto {:.1} s, provider {:.1} s (incl. start-up), runtime {:.1} s",
            preview.as_secs_f64(),
            read_ns.load(Ordering::Relaxed) as f64 / 1e9,
            plan_ns.load(Ordering::Relaxed) as f64 / 1e9,
            tree_cpu(moto_pid(moto)) - moto_cpu,
            provider_cpu,
            own_cpu_seconds() - own_cpu,
        );
    }
    assert!(
        changes.iter().all(|c| *c == 0),
        "no-change preview found changes"
    );

    rt.configure(&config).unwrap();
    let moto_before = tree_cpu(moto_pid(moto));
    let t = Instant::now();
    parallel(stored, |(state, private)| {
        rt.delete(&DeleteRequest {
            resource: state,
            private,
            timeout: None,
        })
        .unwrap_or_else(|e| panic!("{e}"));
    });
    let destroy = t.elapsed();
    profile_phase(
        "kusion",
        "destroy",
        n,
        destroy,
        tree_cpu(moto_pid(moto)) - moto_before,
    );
    rt.shutdown();
    Row {
        apply,
        preview,
        destroy,
        peak_mib: sampler.peak_mib(),
    }
}

/// With `--profile`: how much of a phase the AWS stand-in itself spent answering (moto is one
/// Python process, so its CPU time is a floor under the phase's wall time for any client).
fn profile_phase(tool: &str, phase: &str, n: usize, wall: Duration, moto_cpu: f64) {
    if PROFILE.load(Ordering::Relaxed) {
        println!(
            "  profile N={n}: {tool} {phase} {:.1} s; CPU: moto {moto_cpu:.1} s",
            wall.as_secs_f64()
        );
    }
}

fn moto_pid(moto: &Moto) -> u32 {
    moto.pid()
}

fn bench_terraform(moto: &Moto, dir: &Path, n: usize) -> Row {
    let work = dir.join(format!("tf-{n}"));
    std::fs::create_dir_all(&work).unwrap();
    let meta = moto.provider_meta();
    let mut provider = meta.clone();
    provider["endpoints"] = meta["endpoints"][0].clone();
    let buckets: serde_json::Map<String, Value> = (0..n)
        .map(|i| {
            (
                format!("b{i}"),
                json!({"bucket": format!("kusion-tfbench-{n}-{i}"), "tags": {"n": n.to_string()}}),
            )
        })
        .collect();
    let main = json!({
        "terraform": {"required_providers": {"aws": {"source": "hashicorp/aws", "version": "5.100.0"}}},
        "provider": {"aws": provider},
        "resource": {"aws_s3_bucket": buckets},
    });
    std::fs::write(
        work.join("main.tf.json"),
        serde_json::to_vec_pretty(&main).unwrap(),
    )
    .unwrap();
    let cli_config = work.join("terraformrc");
    std::fs::write(&cli_config, format!("provider_installation {{\n  filesystem_mirror {{\n    path = \"{AWS_MIRROR}\"\n  }}\n}}\n")).unwrap();
    let tf = |args: &[&str], root: &Arc<Mutex<u32>>| {
        let mut child = Command::new("terraform")
            .args(args)
            .current_dir(&work)
            .env("TF_CLI_CONFIG_FILE", &cli_config)
            .env("TF_IN_AUTOMATION", "1")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("terraform on PATH");
        *root.lock().unwrap() = child.id();
        let t = Instant::now();
        let status = child.wait().unwrap();
        assert!(status.success(), "terraform {args:?} failed");
        t.elapsed()
    };
    let root = Arc::new(Mutex::new(0));
    tf(&["init", "-input=false"], &root);
    let sampler = Sampler::start(root.clone(), moto_pid(moto));
    let parallelism = format!("-parallelism={}", PARALLELISM.load(Ordering::Relaxed));
    let moto_before = tree_cpu(moto_pid(moto));
    let apply = tf(
        &["apply", "-auto-approve", "-input=false", &parallelism],
        &root,
    );
    profile_phase(
        "terraform",
        "apply",
        n,
        apply,
        tree_cpu(moto_pid(moto)) - moto_before,
    );
    let (moto_cpu, tf_cpu) = (tree_cpu(moto_pid(moto)), children_cpu_seconds());
    let preview = tf(
        &["plan", "-input=false", "-detailed-exitcode", &parallelism],
        &root,
    );
    if PROFILE.load(Ordering::Relaxed) {
        println!(
            "  profile N={n}: terraform plan {:.1} s; CPU: moto {:.1} s, terraform + providers {:.1} s",
            preview.as_secs_f64(),
            tree_cpu(moto_pid(moto)) - moto_cpu,
            children_cpu_seconds() - tf_cpu,
        );
    }
    let moto_before = tree_cpu(moto_pid(moto));
    let destroy = tf(
        &["destroy", "-auto-approve", "-input=false", &parallelism],
        &root,
    );
    profile_phase(
        "terraform",
        "destroy",
        n,
        destroy,
        tree_cpu(moto_pid(moto)) - moto_before,
    );
    Row {
        apply,
        preview,
        destroy,
        peak_mib: sampler.peak_mib(),
    }
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let with_terraform = args.iter().any(|a| a == "--terraform");
    PROFILE.store(args.iter().any(|a| a == "--profile"), Ordering::Relaxed);
    ALWAYS_PLAN.store(args.iter().any(|a| a == "--always-plan"), Ordering::Relaxed);
    if let Some(p) = args.iter().find_map(|a| a.strip_prefix("--parallelism=")) {
        PARALLELISM.store(p.parse().expect("--parallelism=N"), Ordering::Relaxed);
    }
    let mut sizes: Vec<usize> = args.iter().filter_map(|a| a.parse().ok()).collect();
    if sizes.is_empty() {
        sizes = vec![10, 100, 500];
    }
    let moto = Moto::start();
    let dir = tempfile::tempdir().unwrap();
    // Warm the schema and provider-configuration caches once (first-ever run of a binary or a
    // configuration); reported separately, not counted in the rows.
    let t = Instant::now();
    {
        let rt = TerraformRuntime::new().unwrap();
        rt.configure(&runtime_config(dir.path())).unwrap();
        let spec = resource(
            AWS_PROVIDER,
            &moto.provider_meta(),
            "aws_s3_bucket",
            "warm",
            json!({"bucket": "kusion-warm"}),
        );
        rt.apply(&ApplyRequest {
            prior: None,
            prior_private: None,
            planned: spec,
            dry_run: true,
            timeout: None,
        })
        .unwrap();
    }
    println!(
        "cache warm-up (schema + provider config validation, once per binary/config): {:.1} s",
        t.elapsed().as_secs_f64()
    );
    println!(
        "parallelism {}; times in seconds; peak = RSS of all processes but moto",
        PARALLELISM.load(Ordering::Relaxed)
    );
    println!("| tool | N | apply | no-change preview | destroy | peak MiB |");
    println!("|---|---|---|---|---|---|");
    for n in sizes {
        let _ = ureq::post(&moto.url("/moto-api/reset")).send_empty();
        let row = bench_runtime(&moto, dir.path(), n);
        println!(
            "| kusion | {n} | {:.1} | {:.1} | {:.1} | {} |",
            row.apply.as_secs_f64(),
            row.preview.as_secs_f64(),
            row.destroy.as_secs_f64(),
            row.peak_mib
        );
        if with_terraform {
            let _ = ureq::post(&moto.url("/moto-api/reset")).send_empty();
            let row = bench_terraform(&moto, dir.path(), n);
            println!(
                "| terraform | {n} | {:.1} | {:.1} | {:.1} | {} |",
                row.apply.as_secs_f64(),
                row.preview.as_secs_f64(),
                row.destroy.as_secs_f64(),
                row.peak_mib
            );
        }
    }
}
