//! The Terraform runtime against the real terraform-provider-aws 5.100.0 (from the machine's
//! filesystem mirror) and a moto server started here.

mod calls;
mod common;

use std::time::{Duration, Instant};

use calls::*;
use common::*;
use kusion_runtime_terraform::TerraformRuntime;
use kusion_runtime_terraform::runtime::DEPOSED_ATTRIBUTE;
use kusion_sdk::runtime::{ApplyRequest, DeleteRequest, ImportRequest, ReadRequest, Runtime};
use kusion_sdk::{ErrorKind, Resource};
use serde_json::{Value, json};

fn attrs(r: &Resource) -> Value {
    Value::Object(r.attributes.clone())
}

fn setup() -> (Moto, tempfile::TempDir, TerraformRuntime, Value) {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let moto = Moto::start();
    let dir = tempfile::tempdir().unwrap();
    let rt = TerraformRuntime::new().unwrap();
    rt.configure(&runtime_config(dir.path())).unwrap();
    let meta = moto.provider_meta();
    (moto, dir, rt, meta)
}

#[test]
fn aws_resources_lifecycle_against_moto() {
    let (moto, _dir, rt, meta) = setup();
    let bucket = resource(
        AWS_PROVIDER,
        &meta,
        "aws_s3_bucket",
        "logs",
        json!({"bucket": "kusion-logs", "force_destroy": true, "tags": {"env": "test"}}),
    );
    let role = resource(
        AWS_PROVIDER,
        &meta,
        "aws_iam_role",
        "app",
        json!({
            "name": "kusion-app",
            "assume_role_policy": json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole", "Principal": {"Service": "ec2.amazonaws.com"}}]}).to_string(),
        }),
    );
    let vpc = resource(
        AWS_PROVIDER,
        &meta,
        "aws_vpc",
        "main",
        json!({"cidr_block": "10.0.0.0/16", "tags": {"Name": "main"}}),
    );
    let table = resource(
        AWS_PROVIDER,
        &meta,
        "aws_dynamodb_table",
        "items",
        json!({"name": "kusion-items", "billing_mode": "PAY_PER_REQUEST", "hash_key": "id", "attribute": [{"name": "id", "type": "S"}]}),
    );
    let subnet_with_ref = resource(
        AWS_PROVIDER,
        &meta,
        "aws_subnet",
        "a",
        json!({"vpc_id": "$kusion_path.hashicorp:aws:aws_vpc:main.id", "cidr_block": "10.0.1.0/24"}),
    );

    // Dry-run of creates: computed values are unknown, the unresolved reference too.
    let started = Instant::now();
    let plan = dry_run(&rt, None, &bucket);
    eprintln!(
        "first dry-run (provider start, schema, configure, plan): {:?}",
        started.elapsed()
    );
    assert!(
        plan.unknown_paths.contains(&"arn".to_string()),
        "{:?}",
        plan.unknown_paths
    );
    assert_eq!(plan.resource.attributes["bucket"], json!("kusion-logs"));
    assert!(plan.requires_replace.is_empty());
    let plan = dry_run(&rt, None, &subnet_with_ref);
    assert!(
        plan.unknown_paths.contains(&"vpc_id".to_string()),
        "{:?}",
        plan.unknown_paths
    );
    assert!(plan.unknown_paths.contains(&"id".to_string()));

    // One provider process serves every resource, and resources apply concurrently over it.
    let started = Instant::now();
    let (bucket_s, role_s, vpc_s, table_s) = std::thread::scope(|s| {
        let b = s.spawn(|| apply(&rt, None, &bucket));
        let r = s.spawn(|| apply(&rt, None, &role));
        let v = s.spawn(|| apply(&rt, None, &vpc));
        let t = s.spawn(|| apply(&rt, None, &table));
        (
            b.join().unwrap(),
            r.join().unwrap(),
            v.join().unwrap(),
            t.join().unwrap(),
        )
    });
    eprintln!("4 concurrent creates: {:?}", started.elapsed());
    assert_eq!(
        rt.provider_processes().len(),
        1,
        "{:?}",
        rt.provider_processes()
    );
    assert_eq!(
        bucket_s.resource.attributes["arn"],
        json!("arn:aws:s3:::kusion-logs")
    );
    assert!(
        role_s.resource.attributes["arn"]
            .as_str()
            .unwrap()
            .ends_with(":role/kusion-app")
    );
    assert_eq!(table_s.resource.attributes["hash_key"], json!("id"));
    let vpc_id = vpc_s.resource.attributes["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(vpc_id.starts_with("vpc-"), "{vpc_id}");

    // The subnet's vpc_id, resolved from the VPC's apply result.
    let mut subnet = subnet_with_ref.clone();
    subnet.attributes.insert("vpc_id".into(), json!(vpc_id));
    let subnet_s = apply(&rt, None, &subnet);
    assert_eq!(subnet_s.resource.attributes["vpc_id"], json!(vpc_id));
    assert!(
        subnet_s.resource.attributes["id"]
            .as_str()
            .unwrap()
            .starts_with("subnet-")
    );

    // No-change plans, as the kernel makes them: the object the provider plans from the
    // recorded state equals the live object exactly (a provider may normalise what it recorded
    // on a read, e.g. absent tags read back as an empty map: that is no change).
    for (stored, spec) in [
        (&bucket_s, &bucket),
        (&role_s, &role),
        (&vpc_s, &vpc),
        (&table_s, &table),
        (&subnet_s, &subnet),
    ] {
        let live = read(&rt, stored).expect("exists");
        let plan = dry_run(&rt, Some(stored), spec);
        assert_eq!(
            diff_paths(&attrs(&live), &attrs(&plan.resource)),
            Vec::<String>::new(),
            "{} should be unchanged",
            spec.id
        );
        assert!(
            plan.unknown_paths.is_empty(),
            "{}: {:?}",
            spec.id,
            plan.unknown_paths
        );
        assert!(plan.requires_replace.is_empty());
    }

    // A tag change shows exactly that field (tags and the provider's merged tags_all).
    let mut retagged = bucket.clone();
    retagged
        .attributes
        .insert("tags".into(), json!({"env": "prod"}));
    let plan = dry_run(&rt, Some(&bucket_s), &retagged);
    assert_eq!(
        diff_paths(&attrs(&bucket_s.resource), &attrs(&plan.resource)),
        vec!["tags.env", "tags_all.env"]
    );
    assert!(plan.requires_replace.is_empty());

    // Renaming the bucket forces a replacement.
    let mut renamed = bucket.clone();
    renamed
        .attributes
        .insert("bucket".into(), json!("kusion-logs-2"));
    let plan = dry_run(&rt, Some(&bucket_s), &renamed);
    assert!(
        plan.requires_replace.contains(&"bucket".to_string()),
        "{:?}",
        plan.requires_replace
    );

    // Drift made directly through moto's API shows in read.
    let tagging =
        r#"<Tagging><TagSet><Tag><Key>env</Key><Value>drifted</Value></Tag></TagSet></Tagging>"#;
    ureq::put(&moto.url("/kusion-logs?tagging"))
        .send(tagging)
        .expect("tagging the bucket through moto");
    let live = read(&rt, &bucket_s).expect("bucket exists");
    assert_eq!(live.attributes["tags"], json!({"env": "drifted"}));
    let drifted = Stored {
        resource: live,
        private: bucket_s.private.clone(),
    };
    let plan = dry_run(&rt, Some(&drifted), &bucket);
    assert_eq!(
        diff_paths(&attrs(&drifted.resource), &attrs(&plan.resource)),
        vec!["tags.env", "tags_all.env"]
    );
    let bucket_s = apply(&rt, Some(&drifted), &retagged);
    assert_eq!(bucket_s.resource.attributes["tags"], json!({"env": "prod"}));
    assert_eq!(
        read(&rt, &bucket_s).unwrap().attributes["tags"],
        json!({"env": "prod"})
    );

    // Import adopts the existing bucket by its ID.
    let mut adopt = retagged.clone();
    adopt
        .extensions
        .insert("kusionstack.io/import-id".into(), json!("kusion-logs"));
    let imported = rt
        .import(&ImportRequest {
            planned: adopt.clone(),
            import_id: None,
            timeout: None,
        })
        .unwrap();
    let imported = imported.resource.expect("imported bucket");
    assert_eq!(
        imported.attributes["arn"],
        json!("arn:aws:s3:::kusion-logs")
    );
    assert_eq!(imported.attributes["tags"], json!({"env": "prod"}));
    // The kernel's flow for adoption: read with nothing recorded finds the object by its import
    // ID, and a dry-run plans from that object: the only change is `force_destroy`, which
    // lives in configuration only (an import cannot know it), as with terraform import.
    let live = rt
        .read(&ReadRequest {
            prior: None,
            prior_private: None,
            planned: Some(adopt.clone()),
            timeout: None,
        })
        .unwrap()
        .resource
        .expect("found by import id");
    assert_eq!(live.attributes, imported.attributes);
    let plan = dry_run(&rt, None, &adopt);
    assert_eq!(
        diff_paths(&attrs(&live), &attrs(&plan.resource)),
        vec!["force_destroy"]
    );
    assert!(plan.unknown_paths.is_empty(), "{:?}", plan.unknown_paths);
    // Applying it updates the adopted bucket in place (no second CreateBucket).
    let adopted = apply(&rt, None, &adopt);
    assert_eq!(adopted.resource.attributes["force_destroy"], json!(true));
    assert_eq!(
        adopted.resource.attributes["arn"],
        json!("arn:aws:s3:::kusion-logs")
    );

    // Applying the rename replaces the bucket: the old one is gone, the new one exists.
    let mut renamed = retagged.clone();
    renamed
        .attributes
        .insert("bucket".into(), json!("kusion-logs-2"));
    let renamed_s = apply(&rt, Some(&bucket_s), &renamed);
    assert_eq!(
        renamed_s.resource.attributes["arn"],
        json!("arn:aws:s3:::kusion-logs-2")
    );
    assert_eq!(
        read(&rt, &bucket_s),
        None,
        "the replaced bucket must be deleted"
    );

    // Delete everything (dependents first); afterwards reads find nothing.
    let all = [subnet_s, vpc_s, table_s, role_s, renamed_s];
    for stored in &all {
        rt.delete(&DeleteRequest {
            resource: stored.resource.clone(),
            private: stored.private.clone(),
            timeout: None,
        })
        .unwrap_or_else(|e| panic!("delete of {} failed: {e}", stored.resource.id));
    }
    for stored in &all {
        assert_eq!(
            read(&rt, stored),
            None,
            "{} still exists",
            stored.resource.id
        );
    }
    // Deleting an absent object succeeds.
    rt.delete(&DeleteRequest {
        resource: all[4].resource.clone(),
        private: all[4].private.clone(),
        timeout: None,
    })
    .unwrap();
    rt.shutdown();
    assert!(rt.provider_processes().is_empty());
}

#[test]
fn provider_killed_mid_apply_leaves_a_state_a_rerun_converges_from() {
    let (moto, _dir, rt, mut meta) = setup();
    // S3 calls go through a proxy that kills the provider when the apply reaches AWS.
    let proxy = KillProxy::start(moto.port);
    meta["endpoints"][0]["s3"] = json!(format!("http://127.0.0.1:{}", proxy.port));
    let try_apply = |prior: Option<&Stored>, planned: &Resource| {
        rt.apply(&ApplyRequest {
            prior: prior.map(|p| p.resource.clone()),
            prior_private: prior.and_then(|p| p.private.clone()),
            planned: planned.clone(),
            dry_run: false,
            timeout: Some(Duration::from_secs(120)),
        })
    };
    let pid = |rt: &TerraformRuntime| {
        // Start the provider (a dry-run) so there is a process to kill.
        rt.provider_processes().first().map(|p| p.1)
    };

    // 1. Killed during a create (at CreateBucket): nothing is recorded; the re-run creates.
    let bucket = resource(
        AWS_PROVIDER,
        &meta,
        "aws_s3_bucket",
        "crash",
        json!({"bucket": "kusion-crash", "tags": {"round": "0"}}),
    );
    dry_run(&rt, None, &bucket);
    let first_pid = pid(&rt).unwrap();
    proxy.arm("PUT /kusion-crash ", first_pid);
    let e = try_apply(None, &bucket).unwrap_err();
    assert!(proxy.fired(), "the kill trigger did not fire");
    assert_eq!(e.kind, ErrorKind::Unavailable, "{e}");
    assert!(e.message.contains("ApplyResourceChange"), "{e}");
    let stored = apply(&rt, None, &bucket);
    let second_pid = pid(&rt).unwrap();
    assert_ne!(
        second_pid, first_pid,
        "a new provider process serves the re-run"
    );
    assert_eq!(stored.resource.attributes["tags"], json!({"round": "0"}));

    // 2. Killed during an update (at PutBucketTagging): the recorded state is the old one; the
    // re-run from it converges.
    let mut changed = bucket.clone();
    changed
        .attributes
        .insert("tags".into(), json!({"round": "1"}));
    proxy.arm("PUT /kusion-crash?tagging", second_pid);
    let e = try_apply(Some(&stored), &changed).unwrap_err();
    assert!(proxy.fired(), "the kill trigger did not fire");
    assert_eq!(e.kind, ErrorKind::Unavailable, "{e}");
    let rerun = apply(&rt, Some(&stored), &changed);
    assert_eq!(rerun.resource.attributes["tags"], json!({"round": "1"}));
    let plan = dry_run(&rt, Some(&rerun), &changed);
    assert_eq!(
        diff_paths(&attrs(&rerun.resource), &attrs(&plan.resource)),
        Vec::<String>::new()
    );
    assert_eq!(
        read(&rt, &rerun).unwrap().attributes["tags"],
        json!({"round": "1"})
    );
    rt.delete(&DeleteRequest {
        resource: rerun.resource.clone(),
        private: rerun.private.clone(),
        timeout: None,
    })
    .unwrap();
}

#[test]
fn missing_provider_names_the_address_and_every_place_searched() {
    let dir = tempfile::tempdir().unwrap();
    let rt = TerraformRuntime::new().unwrap();
    rt.configure(&runtime_config(dir.path())).unwrap();
    let r = resource(
        "registry.terraform.io/acme/nothing/9.9.9",
        &json!({}),
        "nothing_thing",
        "x",
        json!({}),
    );
    let e = rt
        .apply(&ApplyRequest {
            prior: None,
            prior_private: None,
            planned: r,
            dry_run: true,
            timeout: None,
        })
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidInput);
    assert!(
        e.message.starts_with(
            "acme:nothing:nothing_thing:x: provider registry.terraform.io/acme/nothing/9.9.9"
        ),
        "{}",
        e.message
    );
    assert!(
        e.message
            .contains("/opt/tf-plugins/registry.terraform.io/acme/nothing/9.9.9/linux_amd64"),
        "{}",
        e.message
    );
    assert!(
        e.message
            .contains(&dir.path().join("plugins").display().to_string()),
        "{}",
        e.message
    );
}

/// Replacements delete the old object first by default; with `createBeforeDestroy` the new
/// object is created before the old one is deleted (seen in the order of S3 requests).
#[test]
fn create_before_destroy_creates_the_replacement_first() {
    let (moto, _dir, rt, mut meta) = setup();
    let proxy = KillProxy::start(moto.port);
    meta["endpoints"][0]["s3"] = json!(format!("http://127.0.0.1:{}", proxy.port));
    let exists = |name: &str| ureq::head(&moto.url(&format!("/{name}"))).call().is_ok();
    for (name, cbd) in [("cbd", true), ("dbc", false)] {
        let mut bucket = resource(
            AWS_PROVIDER,
            &meta,
            "aws_s3_bucket",
            name,
            json!({"bucket": format!("kusion-{name}-old")}),
        );
        if cbd {
            bucket
                .extensions
                .insert("createBeforeDestroy".into(), json!(true));
        }
        let stored = apply(&rt, None, &bucket);
        let mut renamed = bucket.clone();
        renamed
            .attributes
            .insert("bucket".into(), json!(format!("kusion-{name}-new")));
        let plan = dry_run(&rt, Some(&stored), &renamed);
        assert!(
            plan.requires_replace.contains(&"bucket".to_string()),
            "{:?}",
            plan.requires_replace
        );
        let replaced = apply(&rt, Some(&stored), &renamed);
        assert_eq!(
            replaced.resource.attributes["arn"],
            json!(format!("arn:aws:s3:::kusion-{name}-new"))
        );
        assert!(exists(&format!("kusion-{name}-new")) && !exists(&format!("kusion-{name}-old")));
        let requests = proxy.requests();
        let at = |line: String| {
            requests
                .iter()
                .position(|r| *r == line)
                .unwrap_or_else(|| panic!("no {line:?} among {requests:#?}"))
        };
        let created = at(format!("PUT /kusion-{name}-new HTTP/1.1"));
        let deleted = at(format!("DELETE /kusion-{name}-old HTTP/1.1"));
        assert_eq!(created < deleted, cbd, "{requests:#?}");
        rt.delete(&DeleteRequest {
            resource: replaced.resource.clone(),
            private: replaced.private.clone(),
            timeout: None,
        })
        .unwrap();
    }
}

/// `extensions.mode: data` reads a data source through ReadDataSource: in dry-runs and applies
/// alike, with computed attributes unknown while the configuration waits on references; a
/// delete leaves the object read alone.
#[test]
fn data_sources_are_read_through_read_data_source() {
    let (moto, _dir, rt, meta) = setup();
    // An object made outside kusion, for the data source to find.
    ureq::put(&moto.url("/kusion-existing"))
        .send_empty()
        .expect("creating a bucket in moto");
    let data = |resource_type: &str, name: &str, attributes: Value| {
        let mut r = resource(AWS_PROVIDER, &meta, resource_type, name, attributes);
        r.extensions.insert("mode".into(), json!("data"));
        r
    };
    let bucket = data(
        "aws_s3_bucket",
        "existing",
        json!({"bucket": "kusion-existing"}),
    );
    let planned = dry_run(&rt, None, &bucket);
    assert_eq!(
        planned.resource.attributes["arn"],
        json!("arn:aws:s3:::kusion-existing")
    );
    let stored = apply(&rt, None, &bucket);
    assert_eq!(
        stored.resource.attributes["arn"],
        json!("arn:aws:s3:::kusion-existing")
    );
    assert_eq!(stored.resource.attributes["region"], json!("us-east-1"));
    let again = rt
        .read(&ReadRequest {
            prior: Some(stored.resource.clone()),
            prior_private: stored.private.clone(),
            planned: Some(bucket.clone()),
            timeout: None,
        })
        .unwrap()
        .resource
        .expect("the data source reads again");
    assert_eq!(
        diff_paths(&attrs(&stored.resource), &attrs(&again)),
        Vec::<String>::new()
    );
    // Without the planned resource, the recorded one (minus computed attributes) is the config.
    let refreshed = read(&rt, &stored).expect("the data source reads from state");
    assert_eq!(
        refreshed.attributes["arn"],
        stored.resource.attributes["arn"]
    );

    let identity = apply(&rt, None, &data("aws_caller_identity", "me", json!({})));
    assert_eq!(
        identity.resource.attributes["account_id"],
        json!("123456789012")
    );

    // Configuration still waiting on another resource: computed attributes are unknown.
    let pending = data(
        "aws_s3_bucket",
        "pending",
        json!({"bucket": "$kusion_path.hashicorp:aws:aws_s3_bucket:other.bucket"}),
    );
    let planned = dry_run(&rt, None, &pending);
    assert!(
        planned.unknown_paths.contains(&"arn".to_string()),
        "{:?}",
        planned.unknown_paths
    );

    // A data source of something missing fails, naming the resource.
    let missing = data("aws_s3_bucket", "missing", json!({"bucket": "kusion-nope"}));
    let e = rt
        .apply(&ApplyRequest {
            prior: None,
            prior_private: None,
            planned: missing.clone(),
            dry_run: false,
            timeout: None,
        })
        .unwrap_err();
    assert!(e.message.contains(&missing.id), "{e}");
    let e = rt
        .import(&ImportRequest {
            planned: bucket.clone(),
            import_id: Some("kusion-existing".into()),
            timeout: None,
        })
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidInput, "{e}");

    // Deleting a data source forgets it; the bucket stays.
    rt.delete(&DeleteRequest {
        resource: stored.resource.clone(),
        private: stored.private.clone(),
        timeout: None,
    })
    .unwrap();
    assert!(ureq::head(&moto.url("/kusion-existing")).call().is_ok());
}

/// Create-before-destroy whose delete of the old object fails (an S3 bucket that is not empty):
/// the replacement is recorded and the old bucket stays recorded as a deposed object, a preview
/// shows it going away, an apply retries (and fails while the cause remains), and once the
/// cause is gone the next apply, or a destroy, deletes it.
#[test]
fn deposed_objects_are_recorded_shown_and_retried() {
    let (moto, _dir, rt, meta) = setup();
    let exists = |name: &str| ureq::head(&moto.url(&format!("/{name}"))).call().is_ok();
    let object = |bucket: &str| moto.url(&format!("/{bucket}/keep.txt"));
    // Two rounds: the retry comes from an apply, then from a destroy.
    for (name, by_destroy) in [("dpa", false), ("dpd", true)] {
        let mut bucket = resource(
            AWS_PROVIDER,
            &meta,
            "aws_s3_bucket",
            name,
            // Tagged: an untagged bucket reads back `tags: {}` where its plan has none.
            json!({"bucket": format!("kusion-{name}-old"), "tags": {"round": name}}),
        );
        bucket
            .extensions
            .insert("createBeforeDestroy".into(), json!(true));
        let stored = apply(&rt, None, &bucket);
        let old = format!("kusion-{name}-old");
        ureq::put(&object(&old))
            .send("the bucket is not empty")
            .expect("put an object through moto's S3 API");

        let mut renamed = bucket.clone();
        renamed
            .attributes
            .insert("bucket".into(), json!(format!("kusion-{name}-new")));
        let replaced = apply(&rt, Some(&stored), &renamed);
        assert!(exists(&format!("kusion-{name}-new")) && exists(&old));
        assert_eq!(
            replaced.resource.attributes["arn"],
            json!(format!("arn:aws:s3:::kusion-{name}-new"))
        );
        assert_eq!(
            replaced.resource.attributes[DEPOSED_ATTRIBUTE],
            json!([old.clone()]),
            "the old bucket is recorded as deposed"
        );
        let envelope: Value =
            serde_json::from_str(replaced.private.as_deref().expect("private")).unwrap();
        assert_eq!(envelope["deposed"][0]["state"]["bucket"], json!(old));

        // Preview: the live object carries the deposed marker, the plan does not: a change.
        let live = read(&rt, &replaced).expect("the replacement exists");
        assert_eq!(live.attributes[DEPOSED_ATTRIBUTE], json!([old.clone()]));
        let plan = dry_run(&rt, Some(&replaced), &renamed);
        assert_eq!(
            diff_paths(&attrs(&live), &attrs(&plan.resource)),
            vec![DEPOSED_ATTRIBUTE.to_string()],
            "only the deposed object's deletion is planned"
        );

        // While the bucket still holds an object, the retry fails and names it.
        let e = rt
            .apply(&ApplyRequest {
                prior: Some(replaced.resource.clone()),
                prior_private: replaced.private.clone(),
                planned: renamed.clone(),
                dry_run: false,
                timeout: Some(Duration::from_secs(300)),
            })
            .expect_err("the deposed bucket cannot be deleted yet");
        assert!(
            e.message.contains("deposed") && e.message.contains(&old),
            "{}",
            e.message
        );
        assert!(exists(&old));

        // Fix the cause; the next apply (or a destroy) deletes the deposed bucket.
        // moto treats unsigned deletes as anonymous (denied); it does not check signatures.
        ureq::delete(&object(&old))
            .header(
                "Authorization",
                "AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=0",
            )
            .call()
            .expect("delete the object");
        if by_destroy {
            rt.delete(&DeleteRequest {
                resource: replaced.resource.clone(),
                private: replaced.private.clone(),
                timeout: None,
            })
            .unwrap_or_else(|e| panic!("{e}"));
            assert!(!exists(&old) && !exists(&format!("kusion-{name}-new")));
        } else {
            let converged = apply(&rt, Some(&replaced), &renamed);
            assert!(!exists(&old) && exists(&format!("kusion-{name}-new")));
            assert!(
                !converged
                    .resource
                    .attributes
                    .contains_key(DEPOSED_ATTRIBUTE),
                "{:?}",
                converged.resource.attributes
            );
            let envelope: Value =
                serde_json::from_str(converged.private.as_deref().unwrap()).unwrap();
            assert!(envelope.get("deposed").is_none(), "{envelope}");
            let plan = dry_run(&rt, Some(&converged), &renamed);
            let live = read(&rt, &converged).unwrap();
            assert!(diff_paths(&attrs(&live), &attrs(&plan.resource)).is_empty());
            rt.delete(&DeleteRequest {
                resource: converged.resource.clone(),
                private: converged.private.clone(),
                timeout: None,
            })
            .unwrap();
        }
    }
}

/// moto's UpdateRole drops a role's description when only the session length changes, so the
/// apply of that change returns an object without the configured description. terraform plans
/// the description again on the next plan; so must a dry-run here (found by the random-edit
/// differential, tests/tests/terraform_edit_differential.rs), instead of answering "no change"
/// because the configuration is the one last applied.
#[test]
fn an_apply_that_does_not_converge_is_planned_again() {
    let (_moto, _dir, rt, meta) = setup();
    let policy = json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole", "Principal": {"Service": "ec2.amazonaws.com"}}]}).to_string();
    let role = |max: u32| {
        resource(
            AWS_PROVIDER,
            &meta,
            "aws_iam_role",
            "lossy",
            json!({"name": "kusion-lossy", "assume_role_policy": policy, "description": "kept", "max_session_duration": max}),
        )
    };
    let created = apply(&rt, None, &role(3600));
    assert_eq!(created.resource.attributes["description"], "kept");
    let updated = apply(&rt, Some(&created), &role(7200));
    let live = read(&rt, &updated).expect("the role exists");
    assert_eq!(
        live.attributes["description"], "",
        "moto still drops the description on UpdateRole; this test relies on it"
    );
    // The kernel's preview: read, then dry-run from the recorded state.
    let plan = dry_run(&rt, Some(&updated), &role(7200));
    assert_eq!(
        plan.resource.attributes["description"], "kept",
        "the dry-run must plan the description back, as terraform does"
    );
    // Applying it converges, and then the shortcut may answer again.
    let fixed = apply(&rt, Some(&updated), &role(7200));
    assert_eq!(fixed.resource.attributes["description"], "kept");
    read(&rt, &fixed).expect("the role exists");
    let plan = dry_run(&rt, Some(&fixed), &role(7200));
    assert_eq!(plan.resource.attributes["description"], "kept");
}
