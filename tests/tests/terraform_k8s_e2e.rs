//! One spec mixing a Terraform resource (an S3 bucket through the real terraform-provider-aws
//! against moto) and a Kubernetes ConfigMap (on a real control plane) that holds the bucket's
//! computed ARN through `$kusion_path`: applied, previewed and destroyed by the shipped
//! `kusionctl` binary with both runtimes loaded as native plugins from this checkout's build.

#[path = "../../runtimes/terraform/tests/common/mod.rs"]
mod tf;

use std::path::Path;
use std::process::Output;

use kusion_tests::cli::{built, kusionctl_in, text};

use kusion_k8s_harness::{ControlPlane, Options};
use serde_json::{Value, json};

const BUCKET_ID: &str = "hashicorp:aws:aws_s3_bucket:artifacts";
const CONFIGMAP_ID: &str = "v1:ConfigMap:default:bucket-ref";
/// A data source (`extensions.mode: data`): read, not managed.
const IDENTITY_ID: &str = "hashicorp:aws:aws_caller_identity:me";

/// `kusionctl` in `dir` with its state, runtime settings and home there; both runtime plugins
/// must have been built next to it (`scripts/test.sh` builds the whole workspace first).
fn run(dir: &Path, args: &[&str]) -> Output {
    built("libkusion_runtime_terraform.so");
    built("libkusion_runtime_kubernetes.so");
    kusionctl_in(dir, dir)
        .env("KUSION_STATE_DIR", dir.join("state"))
        .env("KUSION_RUNTIME_CONFIG", dir.join("runtimes.json"))
        .args(args)
        .output()
        .expect("running kusionctl")
}

/// Position of the progress line reporting `action id` as done (lines come in finishing order).
fn finished_at(out: &str, action: &str, id: &str) -> usize {
    out.lines()
        .position(|l| l.starts_with('✔') && l.contains(&format!("{action} {id}")))
        .unwrap_or_else(|| panic!("no finished `{action} {id}` line in:\n{out}"))
}

fn bucket_exists(moto: &tf::Moto, name: &str) -> bool {
    ureq::head(&moto.url(&format!("/{name}"))).call().is_ok()
}

#[test]
fn terraform_bucket_arn_flows_into_a_kubernetes_configmap() {
    let moto = tf::Moto::start();
    let cp = ControlPlane::start_with(Options {
        controller_manager: false,
        fake_kubelet: false,
        ..Default::default()
    })
    .expect("a control plane");
    let dir = tempfile::tempdir().unwrap();
    let runtimes = json!({
        "terraform": tf::runtime_config(dir.path()),
        "kubernetes": {"kubeconfig": cp.kubeconfig_path()},
    });
    std::fs::write(dir.path().join("runtimes.json"), runtimes.to_string()).unwrap();
    let bucket = "kusion-e2e-artifacts";
    let spec = json!({"resources": [
        {
            "id": BUCKET_ID,
            "type": "Terraform",
            "attributes": {"bucket": bucket, "tags": {"team": "platform"}},
            "extensions": {
                "provider": tf::AWS_PROVIDER,
                "resourceType": "aws_s3_bucket",
                "providerMeta": moto.provider_meta(),
            },
        },
        {
            "id": IDENTITY_ID,
            "type": "Terraform",
            "attributes": {},
            "extensions": {
                "provider": tf::AWS_PROVIDER,
                "resourceType": "aws_caller_identity",
                "mode": "data",
                "providerMeta": moto.provider_meta(),
            },
        },
        {
            "id": CONFIGMAP_ID,
            "type": "Kubernetes",
            "attributes": {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "bucket-ref", "namespace": "default"},
                "data": {
                    "arn": format!("$kusion_path[{BUCKET_ID}].arn"),
                    "url": format!("s3://$kusion_path[{BUCKET_ID}].bucket"),
                    "account": format!("$kusion_path[{IDENTITY_ID}].account_id"),
                },
            },
        },
    ]});
    std::fs::write(dir.path().join("spec.json"), spec.to_string()).unwrap();

    let list = run(dir.path(), &["plugin", "list", "-o", "json"]);
    assert!(list.status.success(), "{}", text(&list));
    let entries: Value = serde_json::from_slice(&list.stdout).unwrap();
    for name in ["terraform", "kubernetes"] {
        let entry = entries
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name)
            .unwrap_or_else(|| panic!("the {name} runtime plugin is listed: {entries}"));
        assert_eq!(entry["status"]["state"], "loaded", "{entry}");
    }

    let out = run(
        dir.path(),
        &["apply", "-f", "spec.json", "--yes", "--watch"],
    );
    let shown = text(&out);
    assert!(out.status.success(), "{shown}");
    assert!(
        shown.contains("Resources: 3 created, 0 updated, 0 deleted."),
        "{shown}"
    );
    // The ConfigMap waits for the bucket: its value exists only once the bucket is applied.
    assert!(
        finished_at(&shown, "Create", BUCKET_ID) < finished_at(&shown, "Create", CONFIGMAP_ID),
        "{shown}"
    );
    assert!(bucket_exists(&moto, bucket), "the bucket exists in moto");

    // The ARN moto assigned, as recorded in state, is what the ConfigMap on the cluster holds.
    let state = run(dir.path(), &["state", "show", BUCKET_ID, "-o", "json"]);
    assert!(state.status.success(), "{}", text(&state));
    let state: Value = serde_json::from_slice(&state.stdout).unwrap();
    let arn = state["attributes"]["arn"].as_str().unwrap_or_default();
    assert_eq!(arn, format!("arn:aws:s3:::{bucket}"), "{state}");
    let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(cp.client().unwrap(), "default");
    let cm = cp
        .block_on(api.get_opt("bucket-ref"))
        .unwrap()
        .expect("the ConfigMap exists on the cluster");
    let data = cm.data.unwrap_or_default();
    assert_eq!(data.get("arn").map(String::as_str), Some(arn), "{data:?}");
    assert_eq!(
        data.get("url").map(String::as_str),
        Some(format!("s3://{bucket}").as_str()),
        "{data:?}"
    );
    // moto's account, read through the aws_caller_identity data source.
    assert_eq!(
        data.get("account").map(String::as_str),
        Some("123456789012"),
        "{data:?}"
    );

    let out = run(dir.path(), &["preview", "-f", "spec.json"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("No changes."), "{}", text(&out));

    // Drift: the bucket's tags changed behind kusion's back. The preview shows it, the apply
    // writes the spec's tags back (planned from the live object, not from state), state records
    // what the cloud holds, and the next preview has nothing to do.
    let tagging =
        r#"<Tagging><TagSet><Tag><Key>team</Key><Value>drifted</Value></Tag></TagSet></Tagging>"#;
    ureq::put(&moto.url(&format!("/{bucket}?tagging")))
        .send(tagging)
        .expect("tagging the bucket through moto");
    let out = run(dir.path(), &["preview", "-f", "spec.json", "-d"]);
    let shown = text(&out);
    assert!(out.status.success(), "{shown}");
    assert!(
        shown.contains("drifted") && !shown.contains("No changes."),
        "{shown}"
    );
    let out = run(dir.path(), &["apply", "-f", "spec.json", "--yes"]);
    let shown = text(&out);
    assert!(out.status.success(), "{shown}");
    assert!(shown.contains("1 updated"), "{shown}");
    let live_tags = ureq::get(&moto.url(&format!("/{bucket}?tagging")))
        .call()
        .expect("reading the bucket's tags")
        .into_body()
        .read_to_string()
        .unwrap();
    assert!(
        live_tags.contains("<Value>platform</Value>") && !live_tags.contains("drifted"),
        "{live_tags}"
    );
    let state = run(dir.path(), &["state", "show", BUCKET_ID, "-o", "json"]);
    let state: Value = serde_json::from_slice(&state.stdout).unwrap();
    assert_eq!(
        state["attributes"]["tags"],
        json!({"team": "platform"}),
        "{state}"
    );
    let out = run(dir.path(), &["preview", "-f", "spec.json"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("No changes."), "{}", text(&out));

    let out = run(dir.path(), &["destroy", "--yes"]);
    let shown = text(&out);
    assert!(out.status.success(), "{shown}");
    assert!(shown.contains("3 deleted"), "{shown}");
    // Reverse dependency order: the referencing ConfigMap goes first.
    assert!(
        finished_at(&shown, "Delete", CONFIGMAP_ID) < finished_at(&shown, "Delete", BUCKET_ID),
        "{shown}"
    );
    assert!(
        !bucket_exists(&moto, bucket),
        "the bucket is gone from moto"
    );
    assert!(
        cp.block_on(api.get_opt("bucket-ref")).unwrap().is_none(),
        "the ConfigMap is gone from the cluster"
    );
}
