//! One CMDB row and what a look-up returns for it: shared by the `cmdb` plugin and
//! `kusionctl cmdb import`, so both check a record the same way.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// A row of the `hosts` table: where a container host name lives.
///
/// `host`, `cluster` and `namespace` are required; the rest may be unknown to the CMDB.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostRecord {
    pub host: String,
    pub cluster: String,
    pub namespace: String,
    #[serde(default)]
    pub pod: Option<String>,
    #[serde(default)]
    pub workload: Option<String>,
    #[serde(default)]
    pub workload_kind: Option<String>,
    #[serde(default)]
    pub app: Option<String>,
}

/// The columns of `hosts`, in table order.
pub const COLUMNS: [&str; 7] = [
    "host",
    "cluster",
    "namespace",
    "pod",
    "workload",
    "workload_kind",
    "app",
];

impl HostRecord {
    /// Trim every field, turn empty optional fields into `None`, and check the required ones.
    /// The error says which field is wrong, for the caller to prefix with where the record came from.
    pub fn normalized(mut self) -> Result<HostRecord, String> {
        for (name, value) in [
            ("host", &mut self.host),
            ("cluster", &mut self.cluster),
            ("namespace", &mut self.namespace),
        ] {
            let trimmed = value.trim();
            if trimmed.is_empty() {
                return Err(format!("`{name}` is empty"));
            }
            if trimmed.len() != value.len() {
                *value = trimmed.to_string();
            }
        }
        for value in [
            &mut self.pod,
            &mut self.workload,
            &mut self.workload_kind,
            &mut self.app,
        ] {
            *value = value
                .take()
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty());
        }
        Ok(self)
    }

    /// What `lookup_host` returns for a known host: every column plus `found: true`, unknown
    /// optional columns as `None`, so KCL code can read any field without a missing-key check.
    pub fn found(&self) -> Value {
        json!({
            "host": self.host,
            "found": true,
            "cluster": self.cluster,
            "namespace": self.namespace,
            "pod": self.pod,
            "workload": self.workload,
            "workload_kind": self.workload_kind,
            "app": self.app,
        })
    }
}

/// What `lookup_host` returns for a host the CMDB does not know.
pub fn not_found(host: &str) -> Value {
    let mut m = Map::new();
    m.insert("host".into(), Value::String(host.to_string()));
    m.insert("found".into(), Value::Bool(false));
    m.insert("reason".into(), Value::String("not found".into()));
    Value::Object(m)
}

/// Counts reported by an upsert.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpsertCounts {
    /// Hosts that were not in the table.
    pub inserted: u64,
    /// Hosts whose row changed.
    pub updated: u64,
    /// Hosts whose row was already identical.
    pub unchanged: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizing_trims_and_rejects_empty_required_fields() {
        let r = HostRecord {
            host: " web-1 ".into(),
            cluster: "c1".into(),
            namespace: "ns".into(),
            pod: Some("  ".into()),
            workload: Some(" web ".into()),
            workload_kind: None,
            app: None,
        };
        let n = r.clone().normalized().unwrap();
        assert_eq!(n.host, "web-1");
        assert_eq!(n.pod, None);
        assert_eq!(n.workload.as_deref(), Some("web"));
        let bad = HostRecord {
            cluster: " ".into(),
            ..r
        };
        assert_eq!(bad.normalized().unwrap_err(), "`cluster` is empty");
    }

    #[test]
    fn unknown_fields_are_refused() {
        let err = serde_json::from_value::<HostRecord>(
            json!({"host": "a", "cluster": "c", "namespace": "n", "clustr": "x"}),
        )
        .unwrap_err();
        assert!(err.to_string().contains("clustr"), "{err}");
    }
}
