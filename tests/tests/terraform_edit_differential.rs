//! Random attribute edits of real AWS resources (an S3 bucket, an IAM role, a security group with
//! rules, a DynamoDB table) against moto, differentially against the terraform CLI: each step
//! applies one seeded edit to the same configuration, given to the shipped `kusionctl` (with the
//! Terraform runtime plugin) for one copy of the objects and to `terraform` for a twin copy. After
//! every step: the action kusion previews for each resource (create / update / replace / no-op)
//! and the attributes it says change equal terraform's plan, and the state each records after
//! apply holds the same values. A second preview then has nothing to do.
//!
//! Minutes of terraform commands: `#[ignore]`d, run by `.ci/corpus.sh` and
//! `scripts/tf-differential.sh`. `TF_EDIT_STEPS` (default 12) and `TF_EDIT_SEED` (printed) choose
//! the sequence.

#[path = "../../runtimes/terraform/tests/common/mod.rs"]
mod tf;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use kusion_tests::cli::{built, kusionctl_in, text};
use serde_json::{Value, json};

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn coin(&mut self) -> bool {
        self.next() & 1 == 1
    }
}

const POLICY_EC2: &str = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"sts:AssumeRole","Principal":{"Service":"ec2.amazonaws.com"}}]}"#;
const POLICY_LAMBDA: &str = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"sts:AssumeRole","Principal":{"Service":"lambda.amazonaws.com"}}]}"#;

/// One inbound rule of the security group.
#[derive(Clone, Debug, PartialEq)]
struct Rule {
    port: u16,
    cidr: &'static str,
    description: &'static str,
}

/// The configuration both tools are given; names carry the side (`kside` or `tside`) so the two
/// copies do not collide, and comparisons map one onto the other.
#[derive(Clone, Debug)]
struct Config {
    bucket_name: u8,
    bucket_force_destroy: bool,
    bucket_tags: BTreeMap<String, String>,
    role_name: u8,
    role_path: &'static str,
    role_policy: &'static str,
    role_max_session: u32,
    role_description: &'static str,
    role_tags: BTreeMap<String, String>,
    sg_name: u8,
    sg_description: &'static str,
    sg_rules: Vec<Rule>,
    sg_tags: BTreeMap<String, String>,
    table_name: u8,
    table_hash_key: &'static str,
    table_provisioned: Option<(u32, u32)>,
    table_tags: BTreeMap<String, String>,
}

fn tags(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

impl Config {
    fn initial() -> Config {
        Config {
            bucket_name: 0,
            bucket_force_destroy: true,
            bucket_tags: tags(&[("env", "test")]),
            role_name: 0,
            role_path: "/",
            role_policy: POLICY_EC2,
            role_max_session: 3600,
            role_description: "first",
            role_tags: tags(&[("env", "test")]),
            sg_name: 0,
            sg_description: "web tier",
            sg_rules: vec![Rule {
                port: 443,
                cidr: "10.0.0.0/8",
                description: "https",
            }],
            sg_tags: tags(&[("env", "test")]),
            table_name: 0,
            table_hash_key: "id",
            table_provisioned: None,
            table_tags: tags(&[("env", "test")]),
        }
    }

    /// One random edit; returns what it did, for the failure message.
    fn edit(&mut self, rng: &mut Rng) -> String {
        fn edit_tags(t: &mut BTreeMap<String, String>, rng: &mut Rng) -> String {
            let keys = ["env", "team", "cost", "owner"];
            let values = ["test", "prod", "a", "b", ""];
            let k = keys[rng.below(keys.len())];
            if t.contains_key(k) && rng.below(3) == 0 {
                t.remove(k);
                format!("remove tag {k}")
            } else {
                let v = values[rng.below(values.len())];
                t.insert(k.to_string(), v.to_string());
                format!("tag {k}={v:?}")
            }
        }
        match rng.below(17) {
            0 => {
                self.bucket_name += 1;
                format!("bucket renamed ({})", self.bucket_name)
            }
            1 => {
                self.bucket_force_destroy = !self.bucket_force_destroy;
                format!("bucket force_destroy={}", self.bucket_force_destroy)
            }
            2 => format!("bucket {}", edit_tags(&mut self.bucket_tags, rng)),
            3 => {
                self.role_name += 1;
                format!("role renamed ({})", self.role_name)
            }
            4 => {
                self.role_path = if self.role_path == "/" { "/svc/" } else { "/" };
                format!("role path {}", self.role_path)
            }
            5 => {
                self.role_policy = if self.role_policy == POLICY_EC2 {
                    POLICY_LAMBDA
                } else {
                    POLICY_EC2
                };
                "role assume_role_policy swapped".into()
            }
            6 => {
                self.role_max_session = [3600, 7200, 14400][rng.below(3)];
                format!("role max_session_duration={}", self.role_max_session)
            }
            7 => {
                self.role_description = ["first", "second", ""][rng.below(3)];
                format!("role description={:?}", self.role_description)
            }
            8 => format!("role {}", edit_tags(&mut self.role_tags, rng)),
            9 => {
                self.sg_name += 1;
                format!("security group renamed ({})", self.sg_name)
            }
            10 => {
                self.sg_description = if self.sg_description == "web tier" {
                    "api tier"
                } else {
                    "web tier"
                };
                format!("security group description={}", self.sg_description)
            }
            11 => {
                let ports = [22, 80, 443, 5432, 8080];
                let cidrs = ["10.0.0.0/8", "192.168.0.0/16", "0.0.0.0/0"];
                let descriptions = ["https", "admin", ""];
                if !self.sg_rules.is_empty() && rng.below(3) == 0 {
                    let i = rng.below(self.sg_rules.len());
                    let r = self.sg_rules.remove(i);
                    format!("security group rule {} removed", r.port)
                } else if !self.sg_rules.is_empty() && rng.coin() {
                    let i = rng.below(self.sg_rules.len());
                    self.sg_rules[i].cidr = cidrs[rng.below(cidrs.len())];
                    self.sg_rules[i].description = descriptions[rng.below(descriptions.len())];
                    format!("security group rule {} changed: {:?}", i, self.sg_rules[i])
                } else {
                    let rule = Rule {
                        port: ports[rng.below(ports.len())],
                        cidr: cidrs[rng.below(cidrs.len())],
                        description: descriptions[rng.below(descriptions.len())],
                    };
                    let said = format!("security group rule added: {rule:?}");
                    if !self.sg_rules.contains(&rule) {
                        self.sg_rules.push(rule);
                    }
                    said
                }
            }
            12 => format!("security group {}", edit_tags(&mut self.sg_tags, rng)),
            13 => {
                self.table_name += 1;
                format!("table renamed ({})", self.table_name)
            }
            14 => {
                self.table_hash_key = if self.table_hash_key == "id" {
                    "pk"
                } else {
                    "id"
                };
                format!("table hash_key={}", self.table_hash_key)
            }
            15 => {
                self.table_provisioned = match rng.below(3) {
                    0 => None,
                    1 => Some((5, 5)),
                    _ => Some((10, 2)),
                };
                format!("table capacity {:?}", self.table_provisioned)
            }
            _ => format!("table {}", edit_tags(&mut self.table_tags, rng)),
        }
    }

    /// `(resource type, local name, attributes)` for side `side`.
    fn render(&self, side: &str) -> Vec<(&'static str, &'static str, Value)> {
        let name = |kind: &str, n: u8| format!("ked-{side}-{kind}-{n}");
        let rules: Vec<Value> = self
            .sg_rules
            .iter()
            .map(|r| {
                json!({
                    "from_port": r.port, "to_port": r.port, "protocol": "tcp",
                    "cidr_blocks": [r.cidr], "description": r.description,
                    "ipv6_cidr_blocks": [], "prefix_list_ids": [], "security_groups": [],
                    "self": false,
                })
            })
            .collect();
        let mut table = json!({
            "name": name("table", self.table_name),
            "hash_key": self.table_hash_key,
            "attribute": [{"name": self.table_hash_key, "type": "S"}],
            "tags": self.table_tags,
        });
        match self.table_provisioned {
            None => table["billing_mode"] = json!("PAY_PER_REQUEST"),
            Some((r, w)) => {
                table["billing_mode"] = json!("PROVISIONED");
                table["read_capacity"] = json!(r);
                table["write_capacity"] = json!(w);
            }
        }
        vec![
            (
                "aws_s3_bucket",
                "b",
                json!({
                    "bucket": name("bucket", self.bucket_name),
                    "force_destroy": self.bucket_force_destroy,
                    "tags": self.bucket_tags,
                }),
            ),
            (
                "aws_iam_role",
                "r",
                json!({
                    "name": name("role", self.role_name),
                    "path": self.role_path,
                    "assume_role_policy": self.role_policy,
                    "max_session_duration": self.role_max_session,
                    "description": self.role_description,
                    "tags": self.role_tags,
                }),
            ),
            (
                "aws_security_group",
                "g",
                json!({
                    "name": name("sg", self.sg_name),
                    "description": self.sg_description,
                    "ingress": rules,
                    "tags": self.sg_tags,
                }),
            ),
            ("aws_dynamodb_table", "t", table),
        ]
    }
}

fn kusion_id(resource_type: &str, local: &str) -> String {
    format!("hashicorp:aws:{resource_type}:{local}")
}

/// Values the cloud assigns each copy differently (identifiers, times); left out of the
/// comparison of the two states.
fn assigned(resource_type: &str, attribute: &str) -> bool {
    matches!(
        (resource_type, attribute),
        ("aws_security_group", "id" | "arn")
            | ("aws_iam_role", "unique_id" | "create_date")
            | (_, "timeouts")
    )
}

/// Map the terraform copy's names onto the kusion copy's.
fn as_kusion(v: &Value) -> Value {
    match v {
        Value::String(s) => Value::String(s.replace("-tside-", "-kside-")),
        Value::Array(a) => Value::Array(a.iter().map(as_kusion).collect()),
        Value::Object(m) => {
            Value::Object(m.iter().map(|(k, v)| (k.clone(), as_kusion(v))).collect())
        }
        other => other.clone(),
    }
}

/// The attributes a change touches, by top-level name (both tools name nested paths in their
/// own way; the first segment is what a reader checks against).
fn top_level(paths: impl IntoIterator<Item = String>) -> BTreeSet<String> {
    paths
        .into_iter()
        .map(|p| p.split(['.', '[']).next().unwrap_or_default().to_string())
        .collect()
}

struct Kusion {
    dir: PathBuf,
    meta: Value,
}

impl Kusion {
    fn run(&self, args: &[&str]) -> Output {
        kusionctl_in(&self.dir, &self.dir)
            .env("KUSION_STATE_DIR", self.dir.join("state"))
            .env("KUSION_RUNTIME_CONFIG", self.dir.join("runtimes.json"))
            .args(args)
            .output()
            .expect("running kusionctl")
    }
    fn ok(&self, args: &[&str]) -> Output {
        let out = self.run(args);
        assert!(out.status.success(), "kusionctl {args:?}: {}", text(&out));
        out
    }
    fn write(&self, config: &Config) {
        let resources: Vec<Value> = config
            .render("kside")
            .into_iter()
            .map(|(ty, local, attributes)| {
                json!({
                    "id": kusion_id(ty, local),
                    "type": "Terraform",
                    "attributes": attributes,
                    "extensions": {
                        "provider": tf::AWS_PROVIDER,
                        "resourceType": ty,
                        "providerMeta": self.meta,
                    },
                })
            })
            .collect();
        std::fs::write(
            self.dir.join("spec.json"),
            json!({ "resources": resources }).to_string(),
        )
        .unwrap();
    }
    /// Action and changed attributes per resource type.
    fn plan(&self) -> Plan {
        let out = self.ok(&["preview", "-f", "spec.json", "-o", "json"]);
        let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
        plan["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                let ty = s["id"]
                    .as_str()
                    .unwrap()
                    .split(':')
                    .nth(2)
                    .unwrap()
                    .to_string();
                let action = match s["action"].as_str().unwrap() {
                    "UnChanged" => "no-op",
                    "Create" => "create",
                    "Update" => "update",
                    "Replace" => "replace",
                    other => panic!("unexpected action {other} in {s}"),
                };
                let changed = if action == "create" {
                    BTreeSet::new()
                } else {
                    top_level(
                        s["changes"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .map(|c| c["path"].as_str().unwrap_or_default().to_string()),
                    )
                };
                (ty, (action.to_string(), changed))
            })
            .collect()
    }
    fn state(&self, resource_type: &str, local: &str) -> Value {
        let out = self.ok(&[
            "state",
            "show",
            &kusion_id(resource_type, local),
            "-o",
            "json",
        ]);
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        v["attributes"].clone()
    }
}

struct Terraform {
    dir: PathBuf,
    provider: Value,
}

impl Terraform {
    fn new(dir: &Path, moto: &tf::Moto) -> Terraform {
        let dir = dir.join("tf");
        std::fs::create_dir_all(&dir).unwrap();
        let meta = moto.provider_meta();
        let mut provider = meta.clone();
        provider["endpoints"] = meta["endpoints"][0].clone();
        std::fs::write(
            dir.join("terraformrc"),
            format!(
                "provider_installation {{\n  filesystem_mirror {{\n    path = \"{}\"\n  }}\n}}\n",
                tf::AWS_MIRROR
            ),
        )
        .unwrap();
        let t = Terraform { dir, provider };
        t.write(&Config::initial());
        t.ok(&["init", "-input=false"]);
        t
    }
    fn write(&self, config: &Config) {
        let mut resources = serde_json::Map::new();
        for (ty, local, attributes) in config.render("tside") {
            resources
                .entry(ty.to_string())
                .or_insert_with(|| json!({}))
                .as_object_mut()
                .unwrap()
                .insert(local.to_string(), attributes);
        }
        let main = json!({
            "terraform": {"required_providers": {"aws": {"source": "hashicorp/aws", "version": "5.100.0"}}},
            "provider": {"aws": self.provider},
            "resource": resources,
        });
        std::fs::write(
            self.dir.join("main.tf.json"),
            serde_json::to_vec_pretty(&main).unwrap(),
        )
        .unwrap();
    }
    fn ok(&self, args: &[&str]) -> Output {
        let out = Command::new("terraform")
            .args(args)
            .current_dir(&self.dir)
            .env("TF_CLI_CONFIG_FILE", self.dir.join("terraformrc"))
            .env("TF_IN_AUTOMATION", "1")
            .output()
            .unwrap_or_else(|e| {
                panic!("terraform is not on PATH (the machine image provides 1.11.4): {e}")
            });
        assert!(out.status.success(), "terraform {args:?}: {}", text(&out));
        out
    }
    fn plan(&self) -> Plan {
        self.ok(&["plan", "-input=false", "-out=plan.out"]);
        let shown = self.ok(&["show", "-json", "plan.out"]);
        let plan: Value = serde_json::from_slice(&shown.stdout).unwrap();
        plan["resource_changes"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|rc| {
                let change = &rc["change"];
                let actions: Vec<&str> = change["actions"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|a| a.as_str().unwrap())
                    .collect();
                let action = match actions.as_slice() {
                    ["no-op"] => "no-op",
                    ["create"] => "create",
                    ["update"] => "update",
                    ["delete", "create"] | ["create", "delete"] => "replace",
                    other => panic!("unexpected terraform actions {other:?}"),
                };
                let changed = if action == "create" {
                    BTreeSet::new()
                } else {
                    let mut paths = tf::diff_paths(&change["before"], &change["after"]);
                    let unknown = unknown_paths(&change["after_unknown"], String::new());
                    // Values known only after apply are left out, as kusion leaves them out.
                    paths.retain(|p| !unknown.iter().any(|u| p.starts_with(u.as_str())));
                    top_level(paths)
                };
                (
                    rc["type"].as_str().unwrap().to_string(),
                    (action.to_string(), changed),
                )
            })
            .collect()
    }
    fn apply(&self) {
        self.ok(&["apply", "-input=false", "plan.out"]);
    }
    fn states(&self) -> BTreeMap<String, Value> {
        let shown = self.ok(&["show", "-json"]);
        let state: Value = serde_json::from_slice(&shown.stdout).unwrap();
        state["values"]["root_module"]["resources"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| (r["type"].as_str().unwrap().to_string(), r["values"].clone()))
            .collect()
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

type Plan = BTreeMap<String, (String, BTreeSet<String>)>;

/// The same action for every resource and the same attributes changed. Terraform plans a
/// replacement as a new object, so its changes include every default the new object gets;
/// kusion shows what differs from the live object, which must be among terraform's.
fn agree(ours: &Plan, theirs: &Plan) -> bool {
    ours.len() == theirs.len()
        && ours.iter().all(|(ty, (action, changed))| {
            theirs.get(ty).is_some_and(|(t_action, t_changed)| {
                action == t_action
                    && if action == "replace" {
                        changed.is_subset(t_changed)
                    } else {
                        changed == t_changed
                    }
            })
        })
}

#[test]
#[ignore = "minutes of terraform CLI runs: .ci/corpus.sh and scripts/tf-differential.sh run it"]
fn random_attribute_edits_are_planned_and_recorded_as_terraform_does() {
    built("libkusion_runtime_terraform.so");
    let moto = tf::Moto::start();
    let dir = tempfile::tempdir().unwrap();
    let kusion_dir = dir.path().join("kusion");
    std::fs::create_dir_all(&kusion_dir).unwrap();
    std::fs::write(
        kusion_dir.join("runtimes.json"),
        json!({ "terraform": tf::runtime_config(&kusion_dir) }).to_string(),
    )
    .unwrap();
    let kusion = Kusion {
        dir: kusion_dir,
        meta: moto.provider_meta(),
    };
    let terraform = Terraform::new(dir.path(), &moto);
    let steps: usize = std::env::var("TF_EDIT_STEPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(12);
    let seed = std::env::var("TF_EDIT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        });
    eprintln!("TF_EDIT_SEED={seed} TF_EDIT_STEPS={steps}");
    let mut rng = Rng(seed);
    let mut config = Config::initial();
    let mut history = vec!["create everything".to_string()];
    let mut actions_seen: BTreeMap<String, usize> = BTreeMap::new();
    for step in 0..=steps {
        if step > 0 {
            history.push(config.edit(&mut rng));
        }
        let label = format!("seed {seed}, step {step} ({})", history.join("; "));
        kusion.write(&config);
        terraform.write(&config);

        let ours = kusion.plan();
        let theirs = terraform.plan();
        assert!(
            agree(&ours, &theirs),
            "{label}: kusion's preview against terraform's plan:\n  kusion:    {ours:?}\n  terraform: {theirs:?}"
        );
        for (action, _) in ours.values() {
            *actions_seen.entry(action.clone()).or_default() += 1;
        }
        let planned: Vec<String> = ours
            .iter()
            .filter(|(_, (a, _))| a != "no-op")
            .map(|(t, (a, c))| format!("{a} {t} {c:?}"))
            .collect();
        eprintln!(
            "step {step}: {} -> {}",
            history.last().unwrap(),
            planned.join(", ")
        );

        kusion.ok(&["apply", "-f", "spec.json", "--yes"]);
        terraform.apply();
        let recorded = terraform.states();
        for (ty, local, _) in config.render("kside") {
            let ours = kusion.state(ty, local);
            let theirs = as_kusion(&recorded[ty]);
            let keys: BTreeSet<&String> = ours
                .as_object()
                .unwrap()
                .keys()
                .chain(theirs.as_object().unwrap().keys())
                .filter(|k| !assigned(ty, k))
                .collect();
            let differ: Vec<String> = keys
                .into_iter()
                // An attribute kusion leaves out is null, as terraform shows it.
                .filter(|k| {
                    ours.get(*k).unwrap_or(&Value::Null) != theirs.get(*k).unwrap_or(&Value::Null)
                })
                .map(|k| {
                    format!(
                        "{k}: kusion {} / terraform {}",
                        ours.get(k).unwrap_or(&Value::Null),
                        theirs.get(k).unwrap_or(&Value::Null)
                    )
                })
                .collect();
            assert!(
                differ.is_empty(),
                "{label}: {ty} recorded differently:\n  {}",
                differ.join("\n  ")
            );
        }
        // Usually nothing is left to do; where the cloud did not keep what was applied (moto
        // drops a role's description on UpdateRole), both must plan it again.
        let (ours, theirs) = (kusion.plan(), terraform.plan());
        assert!(
            agree(&ours, &theirs),
            "{label}: after applying, kusion's preview against terraform's plan:\n  kusion:    {ours:?}\n  terraform: {theirs:?}"
        );
        if ours.values().any(|(a, _)| a != "no-op") {
            eprintln!("step {step}: after applying, both still plan {ours:?}");
        }
    }
    eprintln!(
        "{steps} edit steps; kusion and terraform agreed on every plan and state: {actions_seen:?}"
    );
}
