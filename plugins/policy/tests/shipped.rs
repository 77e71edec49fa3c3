//! The shipped policy sets (examples/policies): each one fires on a bad resource and stays quiet
//! on a good one.

use std::path::{Path, PathBuf};

use kusion_policy_kcl::KclPolicy;
use kusion_sdk::policy::{Finding, Severity};
use serde_json::{Value, json};

fn policies() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/policies")
}

fn eval_in(set: &str, stack: &str, resources: Vec<Value>) -> Vec<Finding> {
    let dir = policies().join(set);
    let plugin = KclPolicy::with_sets(&[&dir]).unwrap_or_else(|e| panic!("{set}: {e}"));
    plugin
        .evaluate_sets(
            &json!({ "resources": resources }),
            &json!({"operation": "apply", "stack": {"name": stack}}),
        )
        .unwrap_or_else(|e| panic!("{set}: {e}"))
}

fn eval(set: &str, resources: Vec<Value>) -> Vec<Finding> {
    eval_in(set, "dev", resources)
}

fn container(image: &str) -> Value {
    json!({"name": "app", "image": image,
           "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}})
}

fn workload(kind: &str, name: &str, containers: Vec<Value>, extra_pod: Value) -> Value {
    let mut pod = json!({ "containers": containers });
    if let (Some(p), Some(e)) = (pod.as_object_mut(), extra_pod.as_object()) {
        p.extend(e.clone());
    }
    let spec = match kind {
        "Pod" => pod,
        "CronJob" => json!({"jobTemplate": {"spec": {"template": {"spec": pod}}}}),
        _ => json!({"replicas": 1, "template": {"spec": pod}}),
    };
    json!({
        "id": format!("apps/v1:{kind}:default:{name}"),
        "type": "Kubernetes",
        "attributes": {"apiVersion": "apps/v1", "kind": kind,
                       "metadata": {"name": name, "namespace": "default"}, "spec": spec}
    })
}

fn deployment(name: &str, containers: Vec<Value>) -> Value {
    workload("Deployment", name, containers, json!({}))
}

fn ids(findings: &[Finding]) -> Vec<&str> {
    findings
        .iter()
        .map(|f| f.resource_id.as_deref().unwrap_or("-"))
        .collect()
}

const GOOD_IMAGE: &str = "ghcr.io/acme/app:1.4.2";

#[test]
fn allowed_registries_fires_and_passes() {
    let f = eval(
        "allowed-registries",
        vec![
            deployment("good", vec![container(GOOD_IMAGE)]),
            deployment("bad", vec![container("docker.io/library/nginx:1.25")]),
            workload(
                "CronJob",
                "cron",
                vec![container("quay.io/x/y:1")],
                json!({}),
            ),
        ],
    );
    assert_eq!(
        ids(&f),
        vec![
            "apps/v1:Deployment:default:bad",
            "apps/v1:CronJob:default:cron"
        ]
    );
    assert_eq!(f[0].rule, "allowed-registries/AllowedRegistry");
    assert_eq!(f[0].severity, Severity::Deny);
    assert!(
        f[0].message.contains("docker.io/library/nginx:1.25"),
        "{}",
        f[0].message
    );
}

#[test]
fn no_latest_tag_fires_and_passes() {
    let f = eval(
        "no-latest-tag",
        vec![
            deployment("pinned", vec![container(GOOD_IMAGE)]),
            deployment(
                "digest",
                vec![container("ghcr.io/acme/app@sha256:0123456789abcdef")],
            ),
            deployment("port-in-registry", vec![container("registry:5000/app:2")]),
            deployment("latest", vec![container("ghcr.io/acme/app:latest")]),
            deployment("untagged", vec![container("registry:5000/app")]),
        ],
    );
    assert_eq!(
        ids(&f),
        vec![
            "apps/v1:Deployment:default:latest",
            "apps/v1:Deployment:default:untagged"
        ]
    );
    assert!(
        f[0].message.contains("ghcr.io/acme/app:latest"),
        "{}",
        f[0].message
    );
}

#[test]
fn resource_limits_fire_and_pass() {
    let mut no_mem = container(GOOD_IMAGE);
    no_mem["name"] = json!("sidecar");
    no_mem["resources"] = json!({"limits": {"cpu": "1"}});
    let mut none = container(GOOD_IMAGE);
    none["resources"] = json!({});
    let f = eval(
        "resource-limits",
        vec![
            deployment("ok", vec![container(GOOD_IMAGE)]),
            deployment("half", vec![container(GOOD_IMAGE), no_mem]),
            workload("Pod", "bare", vec![none], json!({})),
            json!({"id": "v1:Service:default:svc", "type": "Kubernetes",
                   "attributes": {"kind": "Service", "spec": {}}}),
        ],
    );
    assert_eq!(
        ids(&f),
        vec![
            "apps/v1:Deployment:default:half",
            "apps/v1:Pod:default:bare"
        ]
    );
    assert!(f[0].message.contains("sidecar"), "{}", f[0].message);
}

#[test]
fn pod_security_fires_and_passes() {
    let mut privileged = container(GOOD_IMAGE);
    privileged["securityContext"] = json!({"privileged": true});
    let mut unprivileged = container(GOOD_IMAGE);
    unprivileged["securityContext"] = json!({"privileged": false});
    let f = eval(
        "pod-security",
        vec![
            deployment("ok", vec![unprivileged]),
            deployment("priv", vec![privileged]),
            workload(
                "DaemonSet",
                "hostpath",
                vec![container(GOOD_IMAGE)],
                json!({"volumes": [{"name": "root", "hostPath": {"path": "/"}},
                                   {"name": "tmp", "emptyDir": {}}]}),
            ),
            workload(
                "StatefulSet",
                "emptydir",
                vec![container(GOOD_IMAGE)],
                json!({"volumes": [{"name": "tmp", "emptyDir": {}}]}),
            ),
        ],
    );
    let got: Vec<(&str, &str)> = f
        .iter()
        .map(|f| (f.rule.as_str(), f.resource_id.as_deref().unwrap_or("-")))
        .collect();
    assert_eq!(
        got,
        vec![
            (
                "pod-security/NoHostPath",
                "apps/v1:DaemonSet:default:hostpath"
            ),
            (
                "pod-security/NoPrivileged",
                "apps/v1:Deployment:default:priv"
            ),
        ]
    );
    assert!(f[0].message.contains("root"), "{}", f[0].message);
}

#[test]
fn prod_replicas_fire_only_in_prod_stacks() {
    let mut two = deployment("two", vec![container(GOOD_IMAGE)]);
    two["attributes"]["spec"]["replicas"] = json!(2);
    let mut unset = deployment("unset", vec![container(GOOD_IMAGE)]);
    unset["attributes"]["spec"]
        .as_object_mut()
        .unwrap()
        .remove("replicas");
    let one = deployment("one", vec![container(GOOD_IMAGE)]);
    let all = vec![two, unset, one];
    let prod = eval_in("prod-replicas", "prod", all.clone());
    assert_eq!(
        ids(&prod),
        vec![
            "apps/v1:Deployment:default:unset",
            "apps/v1:Deployment:default:one"
        ]
    );
    assert!(prod[1].message.contains("1 replica"), "{}", prod[1].message);
    assert!(eval_in("prod-replicas", "dev", all).is_empty());
}

fn tf(kind: &str, name: &str, attrs: Value) -> Value {
    json!({
        "id": format!("hashicorp:aws:{kind}:{name}"),
        "type": "Terraform",
        "attributes": attrs,
        "extensions": {"provider": "registry.terraform.io/hashicorp/aws/5.0.0",
                       "resourceType": kind}
    })
}

fn block(name: &str, bucket: &str, all_true: bool) -> Value {
    tf(
        "aws_s3_bucket_public_access_block",
        name,
        json!({"bucket": bucket, "block_public_acls": true, "block_public_policy": true,
               "ignore_public_acls": true, "restrict_public_buckets": all_true}),
    )
}

#[test]
fn s3_public_access_fires_and_passes() {
    let f = eval(
        "s3-public-access",
        vec![
            tf("aws_s3_bucket", "by_ref", json!({"bucket": "by-ref"})),
            block(
                "by_ref",
                "$kusion_path.hashicorp:aws:aws_s3_bucket:by_ref.id",
                true,
            ),
            tf("aws_s3_bucket", "bracket", json!({"bucket": "bracket"})),
            block(
                "bracket",
                "$kusion_path[hashicorp:aws:aws_s3_bucket:bracket].bucket",
                true,
            ),
            tf("aws_s3_bucket", "by_name", json!({"bucket": "by-name"})),
            block("by_name", "by-name", true),
            tf("aws_s3_bucket", "weak", json!({"bucket": "weak"})),
            block("weak", "weak", false),
            tf("aws_s3_bucket", "naked", json!({"bucket": "naked"})),
        ],
    );
    assert_eq!(
        ids(&f),
        vec![
            "hashicorp:aws:aws_s3_bucket:weak",
            "hashicorp:aws:aws_s3_bucket:naked"
        ]
    );
    assert!(
        f[0].message.contains("restrict_public_buckets"),
        "{}",
        f[0].message
    );
    assert!(
        f[1].message
            .contains("no aws_s3_bucket_public_access_block"),
        "{}",
        f[1].message
    );
}

#[test]
fn no_plain_secrets_fires_and_passes() {
    let mut plain = container(GOOD_IMAGE);
    plain["env"] = json!([{"name": "LOG_LEVEL", "value": "info"},
                          {"name": "DB_PASSWORD", "value": "hunter2"}]);
    let mut from_secret = container(GOOD_IMAGE);
    from_secret["env"] = json!([{"name": "DB_PASSWORD",
        "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}},
        {"name": "API_TOKEN", "value": ""}]);
    let f = eval(
        "no-plain-secrets",
        vec![
            deployment("ok", vec![from_secret]),
            deployment("leaky", vec![plain]),
        ],
    );
    assert_eq!(ids(&f), vec!["apps/v1:Deployment:default:leaky"]);
    assert!(f[0].message.contains("app.DB_PASSWORD"), "{}", f[0].message);
    assert!(!f[0].message.contains("hunter2"), "{}", f[0].message);
}
