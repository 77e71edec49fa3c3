//! Migrating from Terraform: the terraform CLI creates 20 resources of 5 AWS types against moto
//! (with `count` and `for_each`); `kusionctl import --terraform-state` adopts them from
//! terraform's state file and writes the spec; `kusionctl preview` of that spec then plans no
//! change, and `kusionctl destroy` leaves nothing behind (terraform's own refresh finds every
//! object gone).
//!
//! Minutes of terraform commands: `#[ignore]`d, run by `.ci/corpus.sh` beside the Terraform
//! differentials.

#[path = "../../runtimes/terraform/tests/common/mod.rs"]
mod tf;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use kusion_tests::cli::{built, kusionctl_in, text};
use serde_json::{Value, json};

const ASSUME: &str = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"sts:AssumeRole","Principal":{"Service":"ec2.amazonaws.com"}}]}"#;
const POLICY: &str = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:GetObject","Resource":"*"}]}"#;

fn terraform(dir: &Path, args: &[&str]) -> Output {
    let out = Command::new("terraform")
        .args(args)
        .current_dir(dir)
        .env("TF_CLI_CONFIG_FILE", dir.join("terraformrc"))
        .env("TF_IN_AUTOMATION", "1")
        .output()
        .unwrap_or_else(|e| {
            panic!("terraform is not on PATH (the machine image provides 1.11.4): {e}")
        });
    assert!(out.status.success(), "terraform {args:?}: {}", text(&out));
    out
}

/// Five types, four of each: buckets and tables by `count`, roles and policies by `for_each` (a
/// map),
/// security groups one by one (with ingress rules).
fn configuration(provider: &Value) -> Value {
    let names = json!({"alpha": 1, "beta": 2, "gamma": 3, "delta": 4});
    let mut groups = serde_json::Map::new();
    for (i, port) in [22, 80, 443, 8080].into_iter().enumerate() {
        groups.insert(
            format!("sg{i}"),
            json!({
                "name": format!("migrate-sg-{i}"),
                "description": format!("group {i}"),
                "ingress": [{"from_port": port, "to_port": port, "protocol": "tcp",
                             "cidr_blocks": ["10.0.0.0/8"], "description": "in",
                             "ipv6_cidr_blocks": [], "prefix_list_ids": [], "security_groups": [], "self": false}],
                "tags": {"team": "web"}
            }),
        );
    }
    json!({
        "terraform": {"required_providers": {"aws": {"source": "hashicorp/aws", "version": "5.100.0"}}},
        "provider": {"aws": provider},
        "resource": {
            "aws_s3_bucket": {"logs": {
                "count": 4,
                "bucket": "migrate-logs-${count.index}",
                "force_destroy": true,
                "tags": {"env": "prod", "n": "${count.index}"}
            }},
            "aws_dynamodb_table": {"table": {
                "count": 4,
                "name": "migrate-table-${count.index}",
                "billing_mode": "PAY_PER_REQUEST",
                "hash_key": "id",
                "attribute": [{"name": "id", "type": "S"}],
                "tags": {"env": "prod"}
            }},
            "aws_iam_role": {"svc": {
                "for_each": names,
                "name": "migrate-role-${each.key}",
                "path": "/svc/",
                "assume_role_policy": ASSUME,
                "max_session_duration": 7200,
                "tags": {"svc": "${each.key}"}
            }},
            "aws_iam_policy": {"read": {
                "for_each": names,
                "name": "migrate-policy-${each.key}",
                "description": "read for ${each.key}",
                "policy": POLICY
            }},
            "aws_security_group": groups
        }
    })
}

#[test]
#[ignore = "minutes of terraform CLI runs: .ci/corpus.sh runs it"]
fn terraform_state_is_adopted_and_planned_with_no_changes() {
    built("libkusion_runtime_terraform.so");
    let moto = tf::Moto::start();
    let dir = tempfile::tempdir().unwrap();
    let tf_dir: PathBuf = dir.path().join("tf");
    std::fs::create_dir_all(&tf_dir).unwrap();
    std::fs::write(
        tf_dir.join("terraformrc"),
        format!(
            "provider_installation {{\n  filesystem_mirror {{\n    path = \"{}\"\n  }}\n}}\n",
            tf::AWS_MIRROR
        ),
    )
    .unwrap();
    let meta = moto.provider_meta();
    let mut provider = meta.clone();
    provider["endpoints"] = meta["endpoints"][0].clone();
    std::fs::write(
        tf_dir.join("main.tf.json"),
        serde_json::to_vec_pretty(&configuration(&provider)).unwrap(),
    )
    .unwrap();
    terraform(&tf_dir, &["init", "-input=false"]);
    terraform(&tf_dir, &["apply", "-input=false", "-auto-approve"]);

    let k = dir.path().join("kusion");
    std::fs::create_dir_all(&k).unwrap();
    std::fs::write(
        k.join("runtimes.json"),
        json!({ "terraform": tf::runtime_config(&k) }).to_string(),
    )
    .unwrap();
    std::fs::write(k.join("providers.json"), json!({ "aws": meta }).to_string()).unwrap();
    let kusion = |args: &[&str]| {
        kusionctl_in(&k, &k)
            .env("KUSION_STATE_DIR", k.join("state"))
            .env("KUSION_RUNTIME_CONFIG", k.join("runtimes.json"))
            .env("NO_COLOR", "1")
            .args(args)
            .output()
            .expect("running kusionctl")
    };
    let state_file = tf_dir.join("terraform.tfstate");
    let out = kusion(&[
        "import",
        "--terraform-state",
        state_file.to_str().unwrap(),
        "--provider-config",
        "providers.json",
        "--spec-out",
        "spec.yaml",
    ]);
    assert!(out.status.success(), "import: {}", text(&out));
    assert!(
        text(&out).contains("Imported 20 resource(s)"),
        "{}",
        text(&out)
    );
    let spec = std::fs::read_to_string(k.join("spec.yaml")).unwrap();
    assert!(
        spec.contains("hashicorp:aws:aws_s3_bucket:logs-0"),
        "{spec}"
    );
    assert!(
        spec.contains("hashicorp:aws:aws_iam_role:svc-alpha"),
        "{spec}"
    );
    assert!(
        !spec.contains("arn:aws"),
        "computed attributes stay out of the spec:\n{spec}"
    );

    // Nothing to do: every resource is UnChanged, nothing is created.
    let out = kusion(&["preview", "-f", "spec.yaml", "-o", "json"]);
    assert!(out.status.success(), "preview: {}", text(&out));
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    let steps = plan["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 20, "{plan}");
    let changing: Vec<String> = steps
        .iter()
        .filter(|s| s["action"] != "UnChanged")
        .map(|s| format!("{} {} {}", s["id"], s["action"], s["changes"]))
        .collect();
    assert!(
        changing.is_empty(),
        "the migrated stack plans changes:\n{}",
        changing.join("\n")
    );
    let out = kusion(&["preview", "-f", "spec.yaml", "--detailed-exitcode"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    // Adopting twice is refused.
    let out = kusion(&[
        "import",
        "--terraform-state",
        state_file.to_str().unwrap(),
        "--provider-config",
        "providers.json",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("already managed"), "{}", text(&out));

    // kusion now owns them: a destroy deletes all 20, and terraform finds none left.
    let out = kusion(&["destroy", "--yes", "-f", "spec.yaml"]);
    assert!(out.status.success(), "destroy: {}", text(&out));
    assert!(text(&out).contains("20 deleted"), "{}", text(&out));
    terraform(
        &tf_dir,
        &["apply", "-input=false", "-refresh-only", "-auto-approve"],
    );
    let left = terraform(&tf_dir, &["state", "list"]);
    assert_eq!(
        String::from_utf8_lossy(&left.stdout).trim(),
        "",
        "objects terraform still finds in moto"
    );
}

/// Terraform's remote backends written by terraform itself: the S3 backend's object (on moto)
/// and the PostgreSQL backend's row are read by `import --terraform-state` like a file.
#[test]
#[ignore = "minutes of terraform CLI runs: .ci/corpus.sh runs it"]
fn states_in_terraforms_s3_and_postgresql_backends_are_read() {
    built("libkusion_runtime_terraform.so");
    let moto = tf::Moto::start();
    let pg = kusion_pg_harness::PgServer::start().expect("starting PostgreSQL for the pg backend");
    let database = pg.create_database("tfstate").unwrap();
    let meta = moto.provider_meta();
    let mut provider = meta.clone();
    provider["endpoints"] = meta["endpoints"][0].clone();
    let dir = tempfile::tempdir().unwrap();
    let k = dir.path().join("kusion");
    std::fs::create_dir_all(&k).unwrap();
    std::fs::write(
        k.join("runtimes.json"),
        json!({ "terraform": tf::runtime_config(&k) }).to_string(),
    )
    .unwrap();
    std::fs::write(k.join("providers.json"), json!({ "aws": meta }).to_string()).unwrap();
    let endpoint = moto.url("");
    for (name, backend, source) in [
        (
            "s3",
            json!({"s3": {"bucket": "tfstate", "key": "stacks/app.tfstate", "region": "us-east-1",
                "access_key": "testing", "secret_key": "testing", "use_path_style": true,
                "skip_credentials_validation": true, "skip_requesting_account_id": true,
                "skip_metadata_api_check": true, "skip_region_validation": true,
                "skip_s3_checksum": true, "endpoints": {"s3": endpoint}}}),
            format!("s3://tfstate/stacks/app.tfstate?endpoint={endpoint}"),
        ),
        (
            "pg",
            // lib/pq asks for TLS unless told not to; the test server has none.
            json!({"pg": {"conn_str": format!("{database}?sslmode=disable")}}),
            format!("{database}?sslmode=disable&workspace=default"),
        ),
    ] {
        let tf_dir = dir.path().join(name);
        std::fs::create_dir_all(&tf_dir).unwrap();
        std::fs::write(
            tf_dir.join("terraformrc"),
            format!(
                "provider_installation {{\n  filesystem_mirror {{\n    path = \"{}\"\n  }}\n}}\n",
                tf::AWS_MIRROR
            ),
        )
        .unwrap();
        if name == "s3" {
            // The backend's bucket, made through the provider like any other bucket.
            let setup = dir.path().join("s3-bucket");
            std::fs::create_dir_all(&setup).unwrap();
            std::fs::copy(tf_dir.join("terraformrc"), setup.join("terraformrc")).unwrap();
            std::fs::write(
                setup.join("main.tf.json"),
                json!({"terraform": {"required_providers": {"aws": {"source": "hashicorp/aws", "version": "5.100.0"}}},
                       "provider": {"aws": provider},
                       "resource": {"aws_s3_bucket": {"state": {"bucket": "tfstate"}}}})
                .to_string(),
            )
            .unwrap();
            terraform(&setup, &["init", "-input=false"]);
            terraform(&setup, &["apply", "-input=false", "-auto-approve"]);
        }
        std::fs::write(
            tf_dir.join("main.tf.json"),
            json!({
                "terraform": {"required_providers": {"aws": {"source": "hashicorp/aws", "version": "5.100.0"}},
                              "backend": backend},
                "provider": {"aws": provider},
                "resource": {"aws_s3_bucket": {"b": {"count": 2, "bucket": format!("{name}-backend-${{count.index}}"),
                                                     "force_destroy": true}}}
            })
            .to_string(),
        )
        .unwrap();
        terraform(&tf_dir, &["init", "-input=false"]);
        terraform(&tf_dir, &["apply", "-input=false", "-auto-approve"]);
        assert!(
            !tf_dir.join("terraform.tfstate").exists(),
            "the {name} backend keeps the state remotely"
        );
        let state_dir = k.join(format!("state-{name}"));
        let kusion = |args: &[&str]| {
            kusionctl_in(&k, &k)
                .env("KUSION_STATE_DIR", &state_dir)
                .env("KUSION_RUNTIME_CONFIG", k.join("runtimes.json"))
                .env("AWS_ACCESS_KEY_ID", "testing")
                .env("AWS_SECRET_ACCESS_KEY", "testing")
                .env("NO_COLOR", "1")
                .args(args)
                .output()
                .expect("running kusionctl")
        };
        let spec = format!("spec-{name}.yaml");
        // No lock file beside a remote state: the version is given.
        let out = kusion(&[
            "import",
            "--terraform-state",
            &source,
            "--provider-config",
            "providers.json",
            "--provider-version",
            "hashicorp/aws=5.100.0",
            "--spec-out",
            &spec,
        ]);
        assert!(out.status.success(), "{name}: import: {}", text(&out));
        assert!(
            text(&out).contains("Imported 2 resource(s)"),
            "{}",
            text(&out)
        );
        let out = kusion(&["preview", "-f", &spec, "--detailed-exitcode"]);
        assert_eq!(out.status.code(), Some(0), "{name}: {}", text(&out));
        let out = kusion(&["destroy", "--yes", "-f", &spec]);
        assert!(out.status.success(), "{name}: destroy: {}", text(&out));
    }
}
