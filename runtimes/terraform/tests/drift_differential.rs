//! Drift, differentially against the terraform CLI: the same objects made by kusion's runtime
//! and by `terraform apply`, changed behind both backs through the AWS API (moto), then planned
//! and applied by both. The kernel's flow is followed exactly: the runtime is handed the
//! *recorded* state as the prior, never the live object. Both must plan the same fields and
//! leave the cloud as configured, and the next plan of both must be empty.

mod calls;
mod common;

use std::path::Path;
use std::process::Command;

use calls::*;
use common::*;
use kusion_runtime_terraform::TerraformRuntime;
use kusion_sdk::Resource;
use kusion_sdk::runtime::Runtime;
use serde_json::{Value, json};

fn read_live(rt: &TerraformRuntime, stored: &Stored) -> Resource {
    read(rt, stored).unwrap_or_else(|| panic!("{} is gone", stored.resource.id))
}

/// The kernel's preview: read the live object from the recorded state, dry-run the
/// configuration from the recorded state, and compare live with the dry-run's result.
fn kusion_changes(rt: &TerraformRuntime, recorded: &Stored, planned: &Resource) -> Vec<String> {
    let live = read_live(rt, recorded);
    let plan = call_apply(rt, Some(recorded), planned, true);
    let mut paths = diff_paths(
        &Value::Object(live.attributes),
        &Value::Object(plan.resource.attributes),
    );
    paths.retain(|p| !plan.unknown_paths.iter().any(|u| p.starts_with(u.as_str())));
    paths
}

/// An AWS query-protocol call to moto's `service`.
fn query(moto: &Moto, service: &str, version: &str, form: &str) {
    // moto routes by the credential scope of the Authorization header; it checks no signature.
    ureq::post(&moto.url("/"))
        .header("Content-Type", "application/x-www-form-urlencoded")
        .header(
            "Authorization",
            &format!("AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/{service}/aws4_request, SignedHeaders=host, Signature=0"),
        )
        .send(format!("{form}&Version={version}"))
        .unwrap_or_else(|e| panic!("{service} call {form}: {e}"));
}

fn iam(moto: &Moto, form: &str) {
    query(moto, "iam", "2010-05-08", form);
}

/// Change the objects of one side behind its back: the bucket's tags, the role's
/// `max_session_duration` and tags, the VPC's tags and `enable_dns_hostnames`.
fn drift(moto: &Moto, name: &str, vpc_id: &str) {
    query(
        moto,
        "ec2",
        "2016-11-15",
        &format!("Action=CreateTags&ResourceId.1={vpc_id}&Tag.1.Key=env&Tag.1.Value=drifted"),
    );
    query(
        moto,
        "ec2",
        "2016-11-15",
        &format!("Action=ModifyVpcAttribute&VpcId={vpc_id}&EnableDnsHostnames.Value=true"),
    );
    let tagging = r#"<Tagging><TagSet><Tag><Key>env</Key><Value>drifted</Value></Tag><Tag><Key>extra</Key><Value>x</Value></Tag></TagSet></Tagging>"#;
    ureq::put(&moto.url(&format!("/{name}?tagging")))
        .send(tagging)
        .expect("tagging the bucket through moto");
    iam(
        moto,
        &format!("Action=UpdateRole&RoleName={name}&MaxSessionDuration=7200"),
    );
    iam(
        moto,
        &format!(
            "Action=TagRole&RoleName={name}&Tags.member.1.Key=env&Tags.member.1.Value=drifted"
        ),
    );
}

const POLICY: &str = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"sts:AssumeRole","Principal":{"Service":"ec2.amazonaws.com"}}]}"#;

fn bucket_attrs(name: &str) -> Value {
    json!({"bucket": name, "force_destroy": true, "tags": {"env": "test", "team": "a"}})
}

fn vpc_attrs(name: &str) -> Value {
    json!({"cidr_block": "10.0.0.0/16", "enable_dns_hostnames": false, "tags": {"Name": name, "env": "test"}})
}

fn role_attrs(name: &str) -> Value {
    json!({"name": name, "assume_role_policy": POLICY, "max_session_duration": 3600, "tags": {"env": "test"}})
}

struct Terraform {
    dir: std::path::PathBuf,
}

impl Terraform {
    fn new(dir: &Path, moto: &Moto, name: &str) -> Terraform {
        let dir = dir.join("tf");
        std::fs::create_dir_all(&dir).unwrap();
        let meta = moto.provider_meta();
        let mut provider = meta.clone();
        provider["endpoints"] = meta["endpoints"][0].clone();
        let main = json!({
            "terraform": {"required_providers": {"aws": {"source": "hashicorp/aws", "version": "5.100.0"}}},
            "provider": {"aws": provider},
            "resource": {
                "aws_s3_bucket": {"b": bucket_attrs(name)},
                "aws_iam_role": {"r": role_attrs(name)},
                "aws_vpc": {"v": vpc_attrs(name)},
            },
        });
        std::fs::write(
            dir.join("main.tf.json"),
            serde_json::to_vec_pretty(&main).unwrap(),
        )
        .unwrap();
        std::fs::write(
            dir.join("terraformrc"),
            format!("provider_installation {{\n  filesystem_mirror {{\n    path = \"{AWS_MIRROR}\"\n  }}\n}}\n"),
        )
        .unwrap();
        let tf = Terraform { dir };
        tf.run(&["init", "-input=false"]);
        tf
    }

    fn run(&self, args: &[&str]) -> std::process::Output {
        Command::new("terraform")
            .args(args)
            .current_dir(&self.dir)
            .env("TF_CLI_CONFIG_FILE", self.dir.join("terraformrc"))
            .env("TF_IN_AUTOMATION", "1")
            .output()
            .unwrap_or_else(|e| {
                panic!("terraform is not on PATH (the machine image provides 1.11.4): {e}")
            })
    }

    fn ok(&self, args: &[&str]) -> std::process::Output {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "terraform {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    /// The ID of the VPC terraform made.
    fn vpc_id(&self) -> String {
        let shown = self.ok(&["show", "-json"]);
        let state: Value = serde_json::from_slice(&shown.stdout).unwrap();
        state["values"]["root_module"]["resources"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|r| r["type"] == "aws_vpc")
            .and_then(|r| r["values"]["id"].as_str())
            .expect("terraform's state has the VPC")
            .to_string()
    }

    /// The fields each planned change touches, by resource type.
    fn changes(&self) -> Vec<(String, Vec<String>)> {
        self.ok(&["plan", "-input=false", "-out=plan.out"]);
        let shown = self.ok(&["show", "-json", "plan.out"]);
        let plan: Value = serde_json::from_slice(&shown.stdout).unwrap();
        let mut out = Vec::new();
        for rc in plan["resource_changes"].as_array().into_iter().flatten() {
            let change = &rc["change"];
            let mut paths = diff_paths(&change["before"], &change["after"]);
            // Values known only after apply are left out on both sides.
            let unknown = unknown_paths(&change["after_unknown"], String::new());
            paths.retain(|p| !unknown.iter().any(|u| p.starts_with(u.as_str())));
            out.push((rc["type"].as_str().unwrap().to_string(), paths));
        }
        out.sort();
        out
    }
}

fn unknown_paths(v: &Value, path: String) -> Vec<String> {
    match v {
        Value::Bool(true) => vec![path],
        Value::Object(m) => m
            .iter()
            .flat_map(|(k, v)| {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                unknown_paths(v, p)
            })
            .collect(),
        Value::Array(a) => a
            .iter()
            .enumerate()
            .flat_map(|(i, v)| unknown_paths(v, format!("{path}.{i}")))
            .collect(),
        _ => Vec::new(),
    }
}

/// Drift planned away from the live object, corrected, recorded as the cloud holds it (the
/// default test run; terraform's own commands cost minutes on a loaded machine).
#[test]
fn drift_is_planned_from_the_live_object_and_corrected() {
    drift_campaign(false);
}

/// The same against the terraform CLI: the same fields planned, the same end state (run by
/// `.ci/corpus.sh` and `scripts/tf-differential.sh`).
#[test]
#[ignore = "minutes of terraform CLI runs: .ci/corpus.sh runs it"]
fn drift_is_planned_and_corrected_as_terraform_does() {
    drift_campaign(true);
}

fn drift_campaign(with_terraform: bool) {
    let moto = Moto::start();
    let dir = tempfile::tempdir().unwrap();
    let rt = TerraformRuntime::new().unwrap();
    rt.configure(&runtime_config(dir.path())).unwrap();
    let meta = moto.provider_meta();
    let (ours, theirs) = ("kusion-drift-k", "kusion-drift-t");
    let planned = [
        resource(AWS_PROVIDER, &meta, "aws_iam_role", "r", role_attrs(ours)),
        resource(
            AWS_PROVIDER,
            &meta,
            "aws_s3_bucket",
            "b",
            bucket_attrs(ours),
        ),
        resource(AWS_PROVIDER, &meta, "aws_vpc", "v", vpc_attrs(ours)),
    ];

    // Both sides create their objects.
    let mut recorded: Vec<Stored> = planned.iter().map(|p| apply(&rt, None, p)).collect();
    let tf = with_terraform.then(|| {
        let tf = Terraform::new(dir.path(), &moto, theirs);
        tf.ok(&["apply", "-auto-approve", "-input=false"]);
        tf
    });
    let our_vpc = recorded[2].resource.attributes["id"]
        .as_str()
        .unwrap()
        .to_string();
    let their_vpc = tf.as_ref().map(Terraform::vpc_id);

    // Terraform runs in the first round only (each of its commands costs seconds); the second
    // round's drift is the same, so is its plan.
    let mut expected = Vec::new();
    for round in [
        "with this operation's read",
        "in a new operation, with no read first",
    ] {
        let first = expected.is_empty();
        let tf = tf.as_ref().filter(|_| first);
        drift(&moto, ours, &our_vpc);
        if let (Some(_), Some(vpc)) = (tf, &their_vpc) {
            drift(&moto, theirs, vpc);
        }
        rt.configure(&runtime_config(dir.path())).unwrap();

        // The same fields are planned by both.
        if let Some(tf) = tf {
            expected = tf.changes();
        }
        let mut got: Vec<(String, Vec<String>)> = planned
            .iter()
            .zip(&recorded)
            .map(|(p, r)| {
                let t = p.extensions["resourceType"].as_str().unwrap().to_string();
                (t, kusion_changes(&rt, r, p))
            })
            .collect();
        got.sort();
        if first && !with_terraform {
            expected = got.clone();
        } else {
            // Against terraform's plan; in the second round, the same drift planned the same.
            assert_eq!(
                got, expected,
                "{round}: kusion plans (left) against the expected (right)"
            );
        }
        assert!(
            got.iter().all(|c| !c.1.is_empty()),
            "{round}: drift must show: {got:?}"
        );

        // Both apply; the cloud then holds what is configured.
        if round.contains("no read") {
            rt.configure(&runtime_config(dir.path())).unwrap();
        }
        recorded = planned
            .iter()
            .zip(&recorded)
            .map(|(p, r)| apply(&rt, Some(r), p))
            .collect();
        if let Some(tf) = tf {
            tf.ok(&["apply", "-auto-approve", "-input=false"]);
        }
        for (p, r) in planned.iter().zip(&recorded) {
            let live = read_live(&rt, r);
            assert_eq!(
                live.attributes["tags"], p.attributes["tags"],
                "{round}: {}",
                p.id
            );
            for field in ["max_session_duration", "enable_dns_hostnames"] {
                if let Some(d) = p.attributes.get(field) {
                    assert_eq!(&live.attributes[field], d, "{round}: {}", p.id);
                }
            }
            // State records what the cloud holds.
            assert_eq!(
                diff_paths(
                    &Value::Object(live.attributes.clone()),
                    &Value::Object(r.resource.attributes.clone())
                ),
                Vec::<String>::new(),
                "{round}: recorded state of {}",
                p.id
            );
        }

        // And neither plans anything more.
        rt.configure(&runtime_config(dir.path())).unwrap();
        for (p, r) in planned.iter().zip(&recorded) {
            assert_eq!(
                kusion_changes(&rt, r, p),
                Vec::<String>::new(),
                "{round}: {}",
                p.id
            );
        }
        if let Some(tf) = tf {
            assert!(
                tf.changes().iter().all(|c| c.1.is_empty()),
                "{round}: terraform still plans changes"
            );
        }
    }
}
