//! Benchmark: 20 policy rules over a 10,000-resource spec in one `evaluate` call.
//!
//! The 8 rules of the shipped sets (examples/policies, run as a `prod` stack so every rule
//! applies) plus a generated set of 12 label/metadata rules; the spec holds 8,000 Deployments,
//! 1,000 Services and 500 S3 buckets each with its public access block. Prints the median of
//! several runs. `cargo bench -p kusion-policy-kcl --bench evaluate` (RESOURCES=N to resize).

use std::path::Path;
use std::time::{Duration, Instant};

use kusion_policy_kcl::KclPolicy;
use serde_json::{Value, json};

fn spec(n: usize) -> Value {
    let buckets = n / 20;
    let services = n / 10;
    let deployments = n - services - 2 * buckets;
    let mut resources = Vec::with_capacity(n);
    for i in 0..deployments {
        // Every 10th one breaks a rule or two, so findings are produced and messages built.
        let image = if i % 10 == 0 {
            format!("docker.io/library/app{i}:latest")
        } else {
            format!("ghcr.io/acme/app{i}:1.{i}")
        };
        resources.push(json!({
            "id": format!("apps/v1:Deployment:ns{}:app{i}", i % 50),
            "type": "Kubernetes",
            "attributes": {
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": format!("app{i}"), "namespace": format!("ns{}", i % 50),
                             "labels": {"app": format!("app{i}"), "team": "core", "tier": "web"}},
                "spec": {"replicas": 2 + i % 3,
                    "selector": {"matchLabels": {"app": format!("app{i}")}},
                    "template": {"metadata": {"labels": {"app": format!("app{i}")}},
                        "spec": {"containers": [{
                            "name": "main", "image": image,
                            "ports": [{"containerPort": 8080}],
                            "env": [{"name": "LOG_LEVEL", "value": "info"},
                                    {"name": "DB_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "db", "key": "pw"}}}],
                            "resources": {"limits": {"cpu": "500m", "memory": "512Mi"}}}],
                            "volumes": [{"name": "tmp", "emptyDir": {}}]}}}
            }
        }));
    }
    for i in 0..services {
        resources.push(json!({
            "id": format!("v1:Service:ns{}:svc{i}", i % 50),
            "type": "Kubernetes",
            "attributes": {"apiVersion": "v1", "kind": "Service",
                "metadata": {"name": format!("svc{i}"), "labels": {"app": format!("svc{i}"), "team": "core"}},
                "spec": {"ports": [{"port": 80}]}}
        }));
    }
    for i in 0..buckets {
        let id = format!("hashicorp:aws:aws_s3_bucket:b{i}");
        let ext = |t: &str| json!({"provider": "registry.terraform.io/hashicorp/aws/5.0.0", "resourceType": t});
        resources.push(json!({"id": id, "type": "Terraform",
            "attributes": {"bucket": format!("bucket-{i}")}, "extensions": ext("aws_s3_bucket")}));
        resources.push(json!({"id": format!("hashicorp:aws:aws_s3_bucket_public_access_block:b{i}"),
            "type": "Terraform",
            "attributes": {"bucket": format!("$kusion_path.{id}.id"), "block_public_acls": true,
                "block_public_policy": true, "ignore_public_acls": true, "restrict_public_buckets": i % 7 != 0},
            "extensions": ext("aws_s3_bucket_public_access_block")}));
    }
    json!({ "resources": resources })
}

/// A set of `n` simple metadata rules, written to `dir`.
fn generated_set(dir: &Path, n: usize) {
    let mut toml = String::from("name = \"generated\"\nversion = \"0.1.0\"\n");
    let mut k = String::new();
    for i in 0..n {
        let (kinds, check) = match i % 4 {
            0 => (
                "[\"Deployment\", \"Service\"]",
                format!("resource.attributes?.metadata?.labels?.app, \"rule {i}: no app label\""),
            ),
            1 => (
                "[\"Deployment\"]",
                format!(
                    "resource.attributes?.metadata?.labels?.team in [\"core\", \"edge\"], \"rule {i}: unknown team\""
                ),
            ),
            2 => (
                "[\"Deployment\"]",
                format!(
                    "len(resource.attributes?.spec?.template?.spec?.containers or []) <= 5, \"rule {i}: too many containers\""
                ),
            ),
            _ => (
                "[\"Service\"]",
                format!(
                    "all p in resource.attributes?.spec?.ports or [] {{ p?.port > 0 }}, \"rule {i}: bad port\""
                ),
            ),
        };
        toml.push_str(&format!(
            "\n[rules.Generated{i}]\nseverity = \"warn\"\nkinds = {kinds}\n"
        ));
        k.push_str(&format!("rule Generated{i}:\n    {check}\n\n"));
    }
    std::fs::write(dir.join("policy.toml"), toml).unwrap();
    std::fs::write(dir.join("rules.k"), k).unwrap();
}

/// CPU time of this thread: the machine running the benchmark may be shared, and wall time then
/// measures the neighbours too.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn main() {
    let n: usize = std::env::var("RESOURCES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/policies");
    let tmp = tempfile::tempdir().unwrap();
    generated_set(tmp.path(), 12);
    let mut dirs: Vec<std::path::PathBuf> = [
        "allowed-registries",
        "no-latest-tag",
        "resource-limits",
        "pod-security",
        "prod-replicas",
        "s3-public-access",
        "no-plain-secrets",
    ]
    .iter()
    .map(|s| shipped.join(s))
    .collect();
    dirs.push(tmp.path().to_path_buf());
    let refs: Vec<&Path> = dirs.iter().map(|d| d.as_path()).collect();
    let plugin = KclPolicy::with_sets(&refs).unwrap();
    let spec = spec(n);
    let context = json!({"operation": "apply", "stack": {"name": "prod"}});
    let mut times: Vec<Duration> = Vec::new();
    let mut cpu: Vec<Duration> = Vec::new();
    let mut findings = 0;
    for _ in 0..5 {
        let (t, c) = (Instant::now(), thread_cpu());
        findings = plugin.evaluate_sets(&spec, &context).unwrap().len();
        times.push(t.elapsed());
        cpu.push(thread_cpu() - c);
    }
    times.sort();
    cpu.sort();
    if std::env::var_os("BREAKDOWN").is_some() {
        let t = Instant::now();
        let prepared = kusion_policy_kcl::engine::prepare(&spec, &context).unwrap();
        println!("  prepare: {:.1} ms", t.elapsed().as_secs_f64() * 1e3);
        for d in &refs {
            let set = kusion_policy_kcl::PolicySet::load(d).unwrap();
            let t = Instant::now();
            let n = kusion_policy_kcl::engine::evaluate_set(&set, &|_| None, &prepared)
                .unwrap()
                .len();
            println!(
                "  {}: {:.1} ms ({n} findings)",
                set.name,
                t.elapsed().as_secs_f64() * 1e3
            );
        }
    }
    println!(
        "policy evaluate: {} rules over {n} resources: median {:.1} ms wall (min {:.1} ms), \
         median {:.1} ms CPU; {findings} findings",
        plugin.rule_count(),
        times[times.len() / 2].as_secs_f64() * 1e3,
        times[0].as_secs_f64() * 1e3,
        cpu[cpu.len() / 2].as_secs_f64() * 1e3,
    );
}
