//! The operations a program declares (`operations:` in its output, written with the `kusion.ops`
//! KCL package), checked and cut into batches: the run plan.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::time::Duration;

use kusion_sdk::Resource;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::graph::{Dag, GraphError};
use crate::id::{KUBERNETES, ResourceId};

/// Why a program's operations cannot be run.
#[derive(Debug, thiserror::Error)]
pub enum OpsError {
    /// The program's output is not what `kusion.ops` writes.
    #[error("the program's output is not a mapping with an `operations` list: {0}")]
    Shape(String),
    /// An operation is malformed.
    #[error("operation {name:?}: {message}")]
    Operation {
        /// The operation's name.
        name: String,
        /// What is wrong.
        message: String,
    },
    #[error(
        "target {target:?} (operation {operation:?}): cluster {cluster:?} has no kubeconfig configured \
         (configured clusters: {known}); add it under [clusters.{cluster}] in ~/.kusion/config.toml or \
         `clusters:` in the runtime configuration"
    )]
    /// A target names a cluster that is not configured.
    UnknownCluster {
        /// The target.
        target: String,
        /// Its operation.
        operation: String,
        /// The cluster it names.
        cluster: String,
        /// The clusters configured.
        known: String,
    },
    /// A cluster's configuration is unusable.
    #[error("cluster {cluster:?}: {message}")]
    Cluster {
        /// The cluster.
        cluster: String,
        /// What is wrong.
        message: String,
    },
    /// The operations' `dependsOn` do not form a DAG.
    #[error("operations: {0}")]
    Graph(#[from] GraphError),
}

fn op_err(name: &str, message: impl Into<String>) -> OpsError {
    OpsError::Operation {
        name: name.to_string(),
        message: message.into(),
    }
}

/// Where one named cluster is: the runtime type serving it and the kubeconfig to reach it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterConfig {
    /// The kubeconfig file (None: as kubectl finds one).
    #[serde(default)]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context (None: its current one).
    #[serde(default)]
    pub context: Option<String>,
    /// The resource type of objects in this cluster (`Kubernetes` unless a third-party runtime
    /// serves it).
    #[serde(default = "kubernetes", rename = "type")]
    pub resource_type: String,
}

fn kubernetes() -> String {
    KUBERNETES.to_string()
}

/// The operation kinds of the `kusion.ops` package and the runtime operation each maps to.
pub const KINDS: &[(&str, &str)] = &[
    ("Restart", "restart"),
    ("Scale", "scale"),
    ("Rollback", "rollback"),
];

/// When a batch counts as done.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Condition {
    /// The watched workload is healthy again by the runtime's health rules.
    Healthy,
    /// Do not wait: the batch is done once the runtime accepted the operation.
    None,
}

/// One target: `cluster/apiVersion:Kind:namespace:name`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Target {
    /// As written in the program.
    pub name: String,
    /// The cluster's name in the run's configuration.
    pub cluster: String,
    /// The resource ID the runtime acts on.
    pub id: String,
}

impl Target {
    /// Reads a target as `ops.pod(...)` and its kin write it: `<cluster>/<resource id>`.
    pub fn parse(text: &str) -> Result<Target, String> {
        let Some((cluster, id)) = text.split_once('/') else {
            return Err(format!(
                "target {text:?} is not cluster-qualified: write cluster/apiVersion:Kind:namespace:name"
            ));
        };
        if cluster.is_empty() || cluster.contains(':') {
            return Err(format!(
                "target {text:?}: the part before the first '/' must be a cluster name"
            ));
        }
        ResourceId::parse(id, KUBERNETES).map_err(|e| format!("target {text:?}: {}", e.reason))?;
        Ok(Target {
            name: text.to_string(),
            cluster: cluster.to_string(),
            id: id.to_string(),
        })
    }

    /// The resource handed to the runtime: identifying attributes plus where the cluster is.
    pub fn resource(&self, cluster: &ClusterConfig) -> Resource {
        let mut attrs = Map::new();
        if let Ok(ResourceId::Kubernetes {
            api_version,
            kind,
            namespace,
            name,
        }) = ResourceId::parse(&self.id, KUBERNETES)
        {
            let mut metadata = json!({"name": name});
            if let Some(ns) = namespace {
                metadata["namespace"] = json!(ns);
            }
            attrs.insert("apiVersion".into(), json!(api_version));
            attrs.insert("kind".into(), json!(kind));
            attrs.insert("metadata".into(), metadata);
        }
        let mut resource = Resource::new(self.id.clone(), cluster.resource_type.clone(), attrs);
        if let Some(k) = &cluster.kubeconfig {
            resource
                .extensions
                .insert("kubeconfig".into(), json!(k.display().to_string()));
        }
        if let Some(c) = &cluster.context {
            resource.extensions.insert("kubeContext".into(), json!(c));
        }
        resource
    }
}

/// A subject the program could not turn into a target (an unknown host), with why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unresolved {
    /// What could not be resolved (a host name, an app).
    pub subject: String,
    /// Why.
    pub reason: String,
}

/// One declared operation, checked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Operation {
    /// The operation's name, unique in the program.
    pub name: String,
    /// `Restart`, `Scale` or `Rollback`.
    pub kind: String,
    /// The runtime operation (`restart`, ...).
    pub verb: String,
    /// Batch limits are per app (defaults to the operation name).
    pub app: String,
    /// The resources acted on.
    pub targets: Vec<Target>,
    /// Targets acted on together per app and cluster.
    pub batch_size: usize,
    /// The app's in-flight cap as a count (a percentage already resolved against the targets).
    pub max_unavailable: Option<usize>,
    /// The percentage `max_unavailable` came from, when the program wrote one (`"25%"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable_percent: Option<u32>,
    /// The wait between batches.
    #[serde(with = "ms")]
    pub pause: Duration,
    /// How long a batch may take to recover.
    #[serde(with = "ms")]
    pub timeout: Duration,
    /// When a target counts as recovered.
    pub condition: Condition,
    /// How long a target must stay healthy to count as recovered.
    #[serde(with = "ms")]
    pub stable_for: Duration,
    /// Operations that must succeed first.
    pub depends_on: Vec<String>,
    /// The operation's own parameters for the runtime (`replicas`, `toRevision`, `gracePeriodSeconds`).
    pub params: Value,
}

mod ms {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;
    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_millis() as u64)
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        Ok(Duration::from_millis(u64::deserialize(d)?))
    }
}

/// The batches of one operation in one cluster.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Group {
    /// The cluster.
    pub cluster: String,
    /// The targets in batches, in order.
    pub batches: Vec<Vec<Target>>,
}

impl Operation {
    /// Targets split by cluster (clusters run in parallel), each cut into batches.
    pub fn groups(&self) -> Vec<Group> {
        let size = self
            .max_unavailable
            .map_or(self.batch_size, |m| m.min(self.batch_size))
            .max(1);
        let mut by_cluster: BTreeMap<&str, Vec<Target>> = BTreeMap::new();
        for t in &self.targets {
            by_cluster.entry(&t.cluster).or_default().push(t.clone());
        }
        by_cluster
            .into_iter()
            .map(|(cluster, targets)| Group {
                cluster: cluster.to_string(),
                batches: targets.chunks(size).map(<[Target]>::to_vec).collect(),
            })
            .collect()
    }
}

/// Everything a program asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpsSpec {
    /// The operations declared.
    pub operations: Vec<Operation>,
    /// Subjects the program could not resolve to targets.
    pub unresolved: Vec<Unresolved>,
}

fn duration(
    name: &str,
    field: &str,
    v: Option<&Value>,
    default: Duration,
) -> Result<Duration, OpsError> {
    match v {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Number(n)) => n
            .as_f64()
            .filter(|s| *s >= 0.0)
            .map(Duration::from_secs_f64)
            .ok_or_else(|| op_err(name, format!("{field} must not be negative"))),
        Some(Value::String(s)) => humantime::parse_duration(s.trim()).map_err(|e| {
            op_err(
                name,
                format!("{field} {s:?} is not a duration like 30s or 2m: {e}"),
            )
        }),
        Some(other) => Err(op_err(
            name,
            format!("{field} must be a duration like \"30s\", not {other}"),
        )),
    }
}

fn count(name: &str, field: &str, v: Option<&Value>) -> Result<Option<usize>, OpsError> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_u64() {
            Some(n) if n >= 1 => Ok(Some(n as usize)),
            _ => Err(op_err(
                name,
                format!("{field} must be a whole number >= 1, not {v}"),
            )),
        },
    }
}

/// `maxUnavailable`: a whole number >= 1, or a percentage (`"25%"`, 1-100) of the operation's
/// targets, rounded down as Kubernetes rounds a Deployment's maxUnavailable, but never below 1
/// (an operation that may not touch any target could never finish). Returns (count, percent).
fn max_unavailable(
    name: &str,
    v: Option<&Value>,
    targets: usize,
) -> Result<(Option<usize>, Option<u32>), OpsError> {
    let bad = |v: &Value| {
        op_err(
            name,
            format!(
                "maxUnavailable must be a whole number >= 1 or a percentage such as \"25%\" (1% to 100%), not {v}"
            ),
        )
    };
    match v {
        Some(Value::String(text)) => {
            let percent = text
                .trim()
                .strip_suffix('%')
                .and_then(|n| n.trim().parse::<u32>().ok())
                .filter(|p| (1..=100).contains(p))
                .ok_or_else(|| bad(&Value::String(text.clone())))?;
            let count = (targets * percent as usize / 100).max(1);
            Ok((Some(count), Some(percent)))
        }
        Some(Value::Number(_)) => match count(name, "maxUnavailable", v) {
            Ok(c) => Ok((c, None)),
            Err(_) => Err(bad(v.unwrap_or(&Value::Null))),
        },
        None | Some(Value::Null) => Ok((None, None)),
        Some(other) => Err(bad(other)),
    }
}

impl OpsSpec {
    /// Read the output of a program (its JSON value).
    pub fn from_output(output: &Value) -> Result<OpsSpec, OpsError> {
        let Some(map) = output.as_object() else {
            return Err(OpsError::Shape(format!("got {}", kind_of(output))));
        };
        let list = match map.get("operations") {
            Some(Value::Array(l)) => l.clone(),
            Some(Value::Null) | None => Vec::new(),
            Some(other) => {
                return Err(OpsError::Shape(format!(
                    "`operations` is {}, not a list",
                    kind_of(other)
                )));
            }
        };
        let mut unresolved = Vec::new();
        if let Some(u) = map.get("unresolved").filter(|u| !u.is_null()) {
            let items = u
                .as_array()
                .ok_or_else(|| OpsError::Shape("`unresolved` must be a list".into()))?;
            for item in items {
                let subject = item.get("subject").and_then(Value::as_str);
                let reason = item.get("reason").and_then(Value::as_str);
                match (subject, reason) {
                    (Some(s), r) => unresolved.push(Unresolved {
                        subject: s.to_string(),
                        reason: r.unwrap_or("unresolved").to_string(),
                    }),
                    _ => {
                        return Err(OpsError::Shape(format!(
                            "`unresolved` items need a `subject` string: got {item}"
                        )));
                    }
                }
            }
        }
        let mut operations = Vec::new();
        let mut seen = HashSet::new();
        for (i, raw) in list.iter().enumerate() {
            let op = parse_operation(i, raw)?;
            if !seen.insert(op.name.clone()) {
                return Err(op_err(&op.name, "the name is used by two operations"));
            }
            operations.push(op);
        }
        let spec = OpsSpec {
            operations,
            unresolved,
        };
        spec.order()?;
        Ok(spec)
    }

    /// Each operation's index by its name (what `dependsOn` names).
    pub(crate) fn positions(&self) -> HashMap<&str, usize> {
        self.operations
            .iter()
            .enumerate()
            .map(|(i, o)| (o.name.as_str(), i))
            .collect()
    }

    /// Operation indices in an order that respects `dependsOn` (checked for cycles).
    pub fn order(&self) -> Result<Dag, OpsError> {
        let position = self.positions();
        let mut edges = Vec::new();
        for (i, op) in self.operations.iter().enumerate() {
            for dep in &op.depends_on {
                let from = *position.get(dep.as_str()).ok_or_else(|| {
                    op_err(
                        &op.name,
                        format!(
                            "dependsOn names {dep:?}, which is not an operation of this program"
                        ),
                    )
                })?;
                edges.push((from, i));
            }
        }
        let names = self.operations.iter().map(|o| o.name.clone()).collect();
        Ok(Dag::from_edges(names, edges)?)
    }

    /// Every target's cluster must be configured (and its kubeconfig readable) before anything runs.
    pub fn check_clusters(
        &self,
        clusters: &BTreeMap<String, ClusterConfig>,
    ) -> Result<(), OpsError> {
        let known = if clusters.is_empty() {
            "none".to_string()
        } else {
            clusters.keys().cloned().collect::<Vec<_>>().join(", ")
        };
        for op in &self.operations {
            for t in &op.targets {
                let Some(c) = clusters.get(&t.cluster) else {
                    return Err(OpsError::UnknownCluster {
                        target: t.name.clone(),
                        operation: op.name.clone(),
                        cluster: t.cluster.clone(),
                        known,
                    });
                };
                if let Some(k) = &c.kubeconfig
                    && !k.is_file()
                {
                    return Err(OpsError::Cluster {
                        cluster: t.cluster.clone(),
                        message: format!("kubeconfig {} does not exist", k.display()),
                    });
                }
            }
        }
        Ok(())
    }

    /// The targets of every operation.
    pub fn target_count(&self) -> usize {
        self.operations.iter().map(|o| o.targets.len()).sum()
    }
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "None",
        Value::Bool(_) => "a bool",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

fn parse_operation(i: usize, raw: &Value) -> Result<Operation, OpsError> {
    let fallback = format!("operations[{i}]");
    let Some(m) = raw.as_object() else {
        return Err(op_err(
            &fallback,
            format!("must be a mapping, not {}", kind_of(raw)),
        ));
    };
    let name = match m.get("name") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        None | Some(Value::Null) => fallback,
        Some(other) => {
            return Err(op_err(
                &fallback,
                format!("name must be a non-empty string, not {other}"),
            ));
        }
    };
    let kind = m
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let Some((_, verb)) = KINDS.iter().find(|(k, _)| *k == kind) else {
        return Err(op_err(
            &name,
            format!(
                "kind {kind:?} is not one of {} (use the schemas of `import kusion.ops`)",
                KINDS.iter().map(|(k, _)| *k).collect::<Vec<_>>().join(", ")
            ),
        ));
    };
    let targets_raw = m.get("targets").and_then(Value::as_array).ok_or_else(|| {
        op_err(
            &name,
            "targets must be a list of cluster/apiVersion:Kind:namespace:name",
        )
    })?;
    let mut targets = Vec::new();
    let mut seen = HashSet::new();
    for t in targets_raw {
        let text = t
            .as_str()
            .ok_or_else(|| op_err(&name, format!("targets must be strings, not {t}")))?;
        let target = Target::parse(text).map_err(|e| op_err(&name, e))?;
        if seen.insert(target.name.clone()) {
            targets.push(target);
        }
    }
    let batch_size = count(&name, "batchSize", m.get("batchSize"))?.unwrap_or(1);
    let (max_unavailable, max_unavailable_percent) =
        max_unavailable(&name, m.get("maxUnavailable"), targets.len())?;
    let pause = duration(&name, "pause", m.get("pause"), Duration::ZERO)?;
    let timeout = duration(&name, "timeout", m.get("timeout"), Duration::from_secs(300))?;
    if timeout.is_zero() {
        return Err(op_err(&name, "timeout must be longer than 0s"));
    }
    let recovery = m.get("recovery").cloned().unwrap_or(Value::Null);
    let condition = match recovery.get("condition").and_then(Value::as_str) {
        None | Some("Healthy") => Condition::Healthy,
        Some("None") => Condition::None,
        Some(other) => {
            return Err(op_err(
                &name,
                format!("recovery.condition {other:?} is not Healthy or None"),
            ));
        }
    };
    let stable_for = duration(
        &name,
        "recovery.stableFor",
        recovery.get("stableFor"),
        Duration::ZERO,
    )?;
    let depends_on = match m.get("dependsOn") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(l)) => l
            .iter()
            .map(|d| {
                d.as_str().map(str::to_string).ok_or_else(|| {
                    op_err(
                        &name,
                        format!("dependsOn must list operation names, not {d}"),
                    )
                })
            })
            .collect::<Result<_, _>>()?,
        Some(other) => {
            return Err(op_err(
                &name,
                format!("dependsOn must be a list, not {other}"),
            ));
        }
    };
    let mut params = match m.get("params") {
        Some(Value::Object(p)) => p.clone(),
        _ => Map::new(),
    };
    match kind.as_str() {
        "Scale" => match m.get("replicas").and_then(Value::as_u64) {
            Some(r) => {
                params.insert("replicas".into(), json!(r));
            }
            None => return Err(op_err(&name, "a Scale needs replicas, a whole number >= 0")),
        },
        "Rollback" => {
            if let Some(r) = m.get("toRevision").filter(|v| !v.is_null()) {
                params.insert("toRevision".into(), r.clone());
            }
        }
        _ => {}
    }
    if let Some(g) = m.get("gracePeriodSeconds").filter(|v| !v.is_null()) {
        params.insert("gracePeriodSeconds".into(), g.clone());
    }
    let app = m
        .get("app")
        .and_then(Value::as_str)
        .filter(|a| !a.is_empty())
        .unwrap_or(&name)
        .to_string();
    Ok(Operation {
        name,
        kind,
        verb: verb.to_string(),
        app,
        targets,
        batch_size,
        max_unavailable,
        max_unavailable_percent,
        pause,
        timeout,
        condition,
        stable_for,
        depends_on,
        params: Value::Object(params),
    })
}

/// A program's arguments, `KEY=VALUE` as `-D` gives them, split (the key trimmed); the error
/// quotes the first that is not one.
pub fn parse_args(args: &[String]) -> Result<Vec<(String, String)>, String> {
    args.iter()
        .map(|kv| {
            kv.split_once('=')
                .map(|(k, v)| (k.trim().to_string(), v.to_string()))
                .filter(|(k, _)| !k.is_empty())
                .ok_or_else(|| format!("{kv:?}: expected KEY=VALUE"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(v: Value) -> Result<OpsSpec, OpsError> {
        OpsSpec::from_output(&v)
    }

    #[test]
    fn batches_per_cluster() {
        let s = spec(json!({"operations": [{"name": "r", "kind": "Restart", "batchSize": 2,
            "targets": ["a/v1:Pod:ns:p1", "b/v1:Pod:ns:p2", "a/v1:Pod:ns:p3", "a/v1:Pod:ns:p4", "a/v1:Pod:ns:p1"]}]}))
        .unwrap();
        let groups = s.operations[0].groups();
        assert_eq!(groups.len(), 2);
        assert_eq!(groups[0].cluster, "a");
        let sizes: Vec<usize> = groups[0].batches.iter().map(Vec::len).collect();
        assert_eq!(sizes, vec![2, 1]);
        assert_eq!(groups[1].batches.len(), 1);
    }

    #[test]
    fn max_unavailable_caps_the_batch() {
        let s = spec(
            json!({"operations": [{"kind": "Restart", "batchSize": 5, "maxUnavailable": 2,
            "targets": ["a/v1:Pod:ns:p1", "a/v1:Pod:ns:p2", "a/v1:Pod:ns:p3"]}]}),
        )
        .unwrap();
        assert_eq!(s.operations[0].name, "operations[0]");
        let sizes: Vec<usize> = s.operations[0].groups()[0]
            .batches
            .iter()
            .map(Vec::len)
            .collect();
        assert_eq!(sizes, vec![2, 1]);
    }

    fn targets(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("a/v1:Pod:ns:p{i}")).collect()
    }

    fn resolved(max: Value, n: usize) -> Result<(Option<usize>, Option<u32>), OpsError> {
        let s = spec(
            json!({"operations": [{"name": "r", "kind": "Restart", "batchSize": 100,
            "maxUnavailable": max, "targets": targets(n)}]}),
        )?;
        let op = &s.operations[0];
        Ok((op.max_unavailable, op.max_unavailable_percent))
    }

    #[test]
    fn max_unavailable_percentages_round_down_with_a_minimum_of_one() {
        // (percentage, targets, expected count): floor(targets * p / 100), at least 1.
        for (p, n, want) in [
            ("25%", 8, 2),
            ("25%", 10, 2),
            ("25%", 11, 2),
            ("25%", 12, 3),
            ("50%", 3, 1),
            ("10%", 5, 1),
            ("1%", 1, 1),
            ("100%", 7, 7),
            ("33%", 200, 66),
            (" 20 % ", 200, 40),
        ] {
            assert_eq!(
                resolved(json!(p), n).unwrap(),
                (
                    Some(want),
                    Some(p.trim().trim_end_matches('%').trim().parse().unwrap())
                ),
                "{p} of {n}"
            );
        }
        // The count also caps the batch: 25% of 8 targets in one cluster is batches of 2.
        let s = spec(
            json!({"operations": [{"name": "r", "kind": "Restart", "batchSize": 5,
            "maxUnavailable": "25%", "targets": targets(8)}]}),
        )
        .unwrap();
        let sizes: Vec<usize> = s.operations[0].groups()[0]
            .batches
            .iter()
            .map(Vec::len)
            .collect();
        assert_eq!(sizes, vec![2, 2, 2, 2]);
        // Duplicated targets count once.
        let s = spec(json!({"operations": [{"name": "r", "kind": "Restart",
            "maxUnavailable": "50%", "targets": ["a/v1:Pod:ns:p", "a/v1:Pod:ns:p", "a/v1:Pod:ns:q", "a/v1:Pod:ns:r", "a/v1:Pod:ns:s"]}]}))
        .unwrap();
        assert_eq!(s.operations[0].max_unavailable, Some(2));
        assert_eq!(resolved(json!(3), 10).unwrap(), (Some(3), None));
        assert_eq!(resolved(Value::Null, 10).unwrap(), (None, None));
        for bad in [
            json!("0%"),
            json!("101%"),
            json!("25"),
            json!("%"),
            json!("2.5%"),
            json!("-5%"),
            json!(0),
            json!(1.5),
            json!(true),
        ] {
            let e = resolved(bad.clone(), 4).unwrap_err().to_string();
            assert!(
                e.contains(
                    "operation \"r\": maxUnavailable must be a whole number >= 1 or a percentage"
                ),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn bad_input_names_the_operation() {
        let e = spec(json!({"operations": [{"name": "x", "kind": "Reboot", "targets": []}]}))
            .unwrap_err();
        assert!(
            e.to_string().contains("operation \"x\": kind \"Reboot\""),
            "{e}"
        );
        let e = spec(
            json!({"operations": [{"name": "x", "kind": "Restart", "targets": ["v1:Pod:ns:p"]}]}),
        )
        .unwrap_err();
        assert!(e.to_string().contains("not cluster-qualified"), "{e}");
        let e = spec(json!({"operations": [{"name": "x", "kind": "Restart", "targets": [], "timeout": "soon"}]}))
            .unwrap_err();
        assert!(e.to_string().contains("timeout \"soon\""), "{e}");
        let e = spec(json!({"operations": [
            {"name": "a", "kind": "Restart", "targets": [], "dependsOn": ["b"]},
            {"name": "b", "kind": "Restart", "targets": [], "dependsOn": ["a"]}]}))
        .unwrap_err();
        assert!(e.to_string().contains("cycle"), "{e}");
        let e = spec(json!({"operations": [{"name": "a", "kind": "Restart", "targets": [], "dependsOn": ["zz"]}]}))
            .unwrap_err();
        assert!(e.to_string().contains("\"zz\""), "{e}");
        let e = spec(json!({"operations": [{"name": "s", "kind": "Scale", "targets": []}]}))
            .unwrap_err();
        assert!(e.to_string().contains("replicas"), "{e}");
        assert!(spec(json!([1])).is_err());
    }

    #[test]
    fn unknown_cluster_is_refused() {
        let s = spec(json!({"operations": [{"name": "r", "kind": "Restart", "targets": ["east/v1:Pod:ns:p"]}]}))
            .unwrap();
        let mut clusters = BTreeMap::new();
        clusters.insert(
            "west".to_string(),
            ClusterConfig {
                kubeconfig: None,
                context: None,
                resource_type: kubernetes(),
            },
        );
        let e = s.check_clusters(&clusters).unwrap_err().to_string();
        assert!(
            e.contains("cluster \"east\" has no kubeconfig") && e.contains("west"),
            "{e}"
        );
    }
}
