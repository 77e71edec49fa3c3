//! A CMDB backend as a KCL function plugin, answering from a CSV file.
//!
//! ```kcl
//! import kcl_plugin.cmdb_csv as cmdb
//!
//! records = cmdb.lookup_hosts(["web-1", "ghost"])   # same records as the shipped `cmdb`
//! web_hosts = cmdb.hosts_of_app("web")              # a look-up of this plugin's own
//! ```
//!
//! Configuration: `[plugins.settings.cmdb_csv] config = { path = "/srv/hosts.csv" }`. The file
//! has a header row with `host,cluster,namespace` and optionally `pod,workload,workload_kind,app`;
//! it is re-read when it changes, so a sync job can rewrite it while kusionctl runs.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::SystemTime;

use kusion_sdk::function::{FunctionPlugin, FunctionPluginInfo};
use kusion_sdk::{ABI_VERSION, ErrorKind, Map, PluginError, PluginResult, Value};
use serde_json::json;

const OPTIONAL: [&str; 4] = ["pod", "workload", "workload_kind", "app"];

#[derive(Default)]
struct Loaded {
    path: Option<PathBuf>,
    /// Modification time of the file the rows came from; a newer file is read again.
    stamp: Option<SystemTime>,
    /// host -> the record KCL gets.
    rows: BTreeMap<String, Value>,
}

/// Calls may arrive from several threads: state sits behind a lock.
#[derive(Default)]
pub struct CsvCmdb {
    state: Mutex<Loaded>,
}

impl CsvCmdb {
    pub fn new() -> CsvCmdb {
        CsvCmdb::default()
    }

    /// Run `f` over the current rows, reading the file first if it is new or changed.
    fn with_rows<T>(&self, f: impl FnOnce(&BTreeMap<String, Value>) -> T) -> PluginResult<T> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let Some(path) = state.path.clone() else {
            return Err(PluginError::invalid(
                "cmdb_csv is not configured: set [plugins.settings.cmdb_csv] config = { path = \"...\" }",
            ));
        };
        // A missing or unreadable file is an error, never an empty CMDB.
        let unavailable = |e: &dyn std::fmt::Display| {
            PluginError::new(ErrorKind::Unavailable, format!("{}: {e}", path.display()))
        };
        let stamp = std::fs::metadata(&path)
            .and_then(|m| m.modified())
            .map_err(|e| unavailable(&e))?;
        if state.stamp != Some(stamp) {
            state.rows = read_csv(&path)?;
            state.stamp = Some(stamp);
        }
        Ok(f(&state.rows))
    }

    fn lookup(&self, hosts: &[String]) -> PluginResult<Value> {
        self.with_rows(|rows| {
            hosts
                .iter()
                .map(|h| {
                    rows.get(h).cloned().unwrap_or_else(
                        || json!({"host": h, "found": false, "reason": "not found"}),
                    )
                })
                .collect()
        })
    }
}

fn read_csv(path: &std::path::Path) -> PluginResult<BTreeMap<String, Value>> {
    let bad =
        |line: u64, msg: String| PluginError::invalid(format!("{}:{line}: {msg}", path.display()));
    let mut reader = csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .from_path(path)
        .map_err(|e| {
            PluginError::new(ErrorKind::Unavailable, format!("{}: {e}", path.display()))
        })?;
    let headers = reader.headers().map_err(|e| bad(1, e.to_string()))?.clone();
    let col = |name: &str| headers.iter().position(|h| h == name);
    let (Some(host), Some(cluster), Some(namespace)) =
        (col("host"), col("cluster"), col("namespace"))
    else {
        return Err(bad(
            1,
            "the header needs host, cluster and namespace".into(),
        ));
    };
    let mut rows = BTreeMap::new();
    for record in reader.records() {
        let record =
            record.map_err(|e| bad(e.position().map_or(0, |p| p.line()), e.to_string()))?;
        let line = record.position().map_or(0, |p| p.line());
        let cell = |i: usize| record.get(i).filter(|s| !s.is_empty());
        let (Some(h), Some(c), Some(ns)) = (cell(host), cell(cluster), cell(namespace)) else {
            return Err(bad(
                line,
                "host, cluster and namespace must not be empty".into(),
            ));
        };
        let mut value = json!({"host": h, "found": true, "cluster": c, "namespace": ns});
        for name in OPTIONAL {
            value[name] = col(name).and_then(cell).map_or(Value::Null, |s| json!(s));
        }
        rows.insert(h.to_string(), value);
    }
    Ok(rows)
}

/// The single argument `name`, positional or keyword, as a string or list of strings.
fn arg<'a>(
    args: &'a [Value],
    kwargs: &'a Map<String, Value>,
    name: &str,
) -> PluginResult<&'a Value> {
    args.first()
        .or_else(|| kwargs.get(name))
        .ok_or_else(|| PluginError::invalid(format!("missing argument `{name}`")))
}

fn strings(v: &Value, name: &str) -> PluginResult<Vec<String>> {
    v.as_array()
        .and_then(|a| a.iter().map(|x| x.as_str().map(str::to_string)).collect())
        .ok_or_else(|| PluginError::invalid(format!("`{name}` must be a list of strings")))
}

fn string(v: &Value, name: &str) -> PluginResult<String> {
    v.as_str()
        .map(str::to_string)
        .ok_or_else(|| PluginError::invalid(format!("`{name}` must be a string")))
}

impl FunctionPlugin for CsvCmdb {
    fn describe(&self) -> FunctionPluginInfo {
        FunctionPluginInfo {
            module: "cmdb_csv".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            abi: ABI_VERSION,
            functions: vec![
                "lookup_hosts".into(),
                "lookup_host".into(),
                "hosts_of_app".into(),
            ],
            secret_stores: Vec::new(),
        }
    }

    fn configure(&self, config: &Value) -> PluginResult<()> {
        let path = config
            .get("path")
            .and_then(Value::as_str)
            .ok_or_else(|| PluginError::invalid("cmdb_csv: config needs `path` (a CSV file)"))?;
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        *state = Loaded {
            path: Some(PathBuf::from(path)),
            ..Loaded::default()
        };
        Ok(())
    }

    fn call(
        &self,
        function: &str,
        args: &[Value],
        kwargs: &Map<String, Value>,
    ) -> PluginResult<Value> {
        match function {
            "lookup_hosts" => self.lookup(&strings(arg(args, kwargs, "hosts")?, "hosts")?),
            "lookup_host" => {
                let host = string(arg(args, kwargs, "host")?, "host")?;
                let mut found = self.lookup(&[host])?;
                Ok(found[0].take())
            }
            // A look-up the shipped plugin does not have: every host of one application.
            "hosts_of_app" => {
                let app = string(arg(args, kwargs, "app")?, "app")?;
                self.with_rows(|rows| {
                    rows.values()
                        .filter(|r| r["app"] == app.as_str())
                        .map(|r| r["host"].clone())
                        .collect()
                })
            }
            other => Err(PluginError::unsupported(format!(
                "cmdb_csv has no function `{other}`"
            ))),
        }
    }
}

kusion_sdk::export_function_plugin!(CsvCmdb::new);

#[cfg(test)]
mod tests {
    use super::*;

    fn plugin(csv: &str) -> (tempfile::TempDir, CsvCmdb) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hosts.csv");
        std::fs::write(&path, csv).unwrap();
        let p = CsvCmdb::new();
        p.configure(&json!({"path": path})).unwrap();
        (dir, p)
    }

    #[test]
    fn answers_like_the_shipped_cmdb_plugin() {
        let (_dir, p) = plugin(
            "host,cluster,namespace,app\nweb-1,east,shop,web\nweb-2,west,shop,web\napi-1,east,pay,api\n",
        );
        let out = p
            .call("lookup_hosts", &[json!(["web-2", "nope"])], &Map::new())
            .unwrap();
        assert_eq!(
            out,
            json!([
                {"host": "web-2", "found": true, "cluster": "west", "namespace": "shop",
                 "pod": null, "workload": null, "workload_kind": null, "app": "web"},
                {"host": "nope", "found": false, "reason": "not found"},
            ])
        );
        let web = p
            .call("hosts_of_app", &[json!("web")], &Map::new())
            .unwrap();
        assert_eq!(web, json!(["web-1", "web-2"]));
    }

    #[test]
    fn a_changed_file_is_read_again_and_a_missing_one_is_an_error() {
        let (dir, p) = plugin("host,cluster,namespace\na,east,shop\n");
        assert_eq!(
            p.call("lookup_host", &[json!("a")], &Map::new()).unwrap()["cluster"],
            "east"
        );
        let path = dir.path().join("hosts.csv");
        std::fs::write(&path, "host,cluster,namespace\na,west,shop\n").unwrap();
        // Make the change visible even on filesystems with coarse timestamps.
        let later = SystemTime::now() + std::time::Duration::from_secs(5);
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(later)
            .unwrap();
        assert_eq!(
            p.call("lookup_host", &[json!("a")], &Map::new()).unwrap()["cluster"],
            "west"
        );
        std::fs::remove_file(&path).unwrap();
        let err = p
            .call("lookup_host", &[json!("a")], &Map::new())
            .unwrap_err();
        assert_eq!(err.kind, ErrorKind::Unavailable);
    }

    #[test]
    fn bad_rows_name_the_line() {
        let (_dir, p) = plugin("host,cluster,namespace\na,east,shop\nb,,shop\n");
        let err = p
            .call("lookup_host", &[json!("a")], &Map::new())
            .unwrap_err();
        assert!(
            err.message
                .ends_with("hosts.csv:3: host, cluster and namespace must not be empty"),
            "{err}"
        );
    }
}
