//! `kusionctl cmdb import FILE` and `kusionctl cmdb lookup HOST...`: operate the CMDB that KCL
//! programs query through the `cmdb` function plugin.
//!
//! The plugin owns the store (SQLite or PostgreSQL); this module reads and checks the input file
//! so every bad row is reported as `file:line[:col]` before anything is written, then hands all
//! records to the plugin's `upsert_hosts` in one call (one transaction).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, anyhow, bail};
use clap::Subcommand;
use kusion_kernel::plugin::{LoadedPlugins, Status};
use kusion_sdk::function::FunctionPlugin;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use kusion_cmdb_record::{COLUMNS, HostRecord};

use crate::UsageError;
use crate::exit;

#[derive(Debug, Subcommand)]
pub enum CmdbCommand {
    /// Load host records from a CSV (header row) or JSON file (a list of objects, or
    /// `{"hosts": [...]}`; `.jsonl` one object per line): new hosts are inserted, changed ones
    /// updated. Columns: host, cluster, namespace (required), pod, workload, workload_kind, app.
    Import {
        /// The CSV, JSON or JSON Lines file of host records.
        file: PathBuf,
        /// The CMDB to write (`sqlite:///path.db` or `postgres://...`); default: the cmdb
        /// plugin's configuration, then $KUSION_CMDB_URL, then ~/.kusion/cmdb.db.
        #[arg(long, value_name = "URL")]
        cmdb: Option<String>,
    },
    /// Look host names up as a KCL program would; exits 1 if any host is unknown.
    Lookup {
        /// The host names to look up.
        #[arg(required = true)]
        hosts: Vec<String>,
        /// The CMDB to read (`sqlite:///path.db` or `postgres://...`); default: the cmdb
        /// plugin's configuration, then $KUSION_CMDB_URL, then ~/.kusion/cmdb.db.
        #[arg(long, value_name = "URL")]
        cmdb: Option<String>,
    },
}

const REQUIRED: [&str; 3] = ["host", "cluster", "namespace"];
/// Bad rows listed before "... and N more".
const MAX_ERRORS: usize = 20;

pub fn run(
    plugins: &LoadedPlugins,
    workdir: &Path,
    command: CmdbCommand,
    json: bool,
) -> Result<u8> {
    match command {
        CmdbCommand::Import { file, cmdb } => {
            let path = if file.is_absolute() {
                file
            } else {
                workdir.join(file)
            };
            let rows = read_rows(&path)?;
            let plugin = cmdb_plugin(plugins, cmdb.as_deref())?;
            let records = serde_json::to_value(&rows)?;
            let counts = plugin
                .call("upsert_hosts", &[records], &Map::new())
                .map_err(|e| anyhow!("importing {}: {}", path.display(), e.message))?;
            let info = plugin
                .call("info", &[], &Map::new())
                .map_err(|e| anyhow!("reading the CMDB after the import: {}", e.message))?;
            let n = |k: &str| counts.get(k).and_then(Value::as_u64).unwrap_or(0);
            if json {
                println!(
                    "{}",
                    json!({
                        "file": path,
                        "records": rows.len(),
                        "inserted": n("inserted"),
                        "updated": n("updated"),
                        "unchanged": n("unchanged"),
                        "cmdb": info["location"],
                        "hosts": info["hosts"],
                    })
                );
            } else {
                println!(
                    "Imported {} records from {} into {}: {} inserted, {} updated, {} unchanged; the CMDB now holds {} hosts.",
                    rows.len(),
                    path.display(),
                    info["location"].as_str().unwrap_or("the CMDB"),
                    n("inserted"),
                    n("updated"),
                    n("unchanged"),
                    info["hosts"]
                );
            }
            Ok(exit::OK)
        }
        CmdbCommand::Lookup { hosts, cmdb } => {
            let plugin = cmdb_plugin(plugins, cmdb.as_deref())?;
            let records = plugin
                .call("lookup_hosts", &[json!(hosts)], &Map::new())
                .map_err(|e| anyhow!("{}", e.message))?;
            let records = records.as_array().cloned().unwrap_or_default();
            let all_found = records.iter().all(|r| r["found"] == true);
            if json {
                println!("{}", Value::Array(records));
            } else {
                let mut table = crate::render::plain_table(vec![
                    "Host",
                    "Found",
                    "Cluster",
                    "Namespace",
                    "Pod",
                    "Workload",
                    "App",
                ]);
                for r in &records {
                    let s = |k: &str| r[k].as_str().unwrap_or("-").to_string();
                    let workload = match (r["workload_kind"].as_str(), r["workload"].as_str()) {
                        (Some(k), Some(w)) => format!("{k}/{w}"),
                        (None, Some(w)) => w.to_string(),
                        _ => "-".into(),
                    };
                    let found = if r["found"] == true {
                        "yes".to_string()
                    } else {
                        format!("no: {}", s("reason"))
                    };
                    table.add_row(vec![
                        s("host"),
                        found,
                        s("cluster"),
                        s("namespace"),
                        s("pod"),
                        workload,
                        s("app"),
                    ]);
                }
                println!("{table}");
            }
            Ok(if all_found { exit::OK } else { exit::FAILED })
        }
    }
}

/// The loaded `cmdb` function plugin, pointed at `url` when given.
fn cmdb_plugin(plugins: &LoadedPlugins, url: Option<&str>) -> Result<Arc<dyn FunctionPlugin>> {
    let plugin = plugins
        .functions
        .iter()
        .find(|(_, p)| p.describe().module == "cmdb")
        .or_else(|| plugins.functions.get_key_value("cmdb"))
        .map(|(_, p)| Arc::clone(p));
    let Some(plugin) = plugin else {
        let why = plugins
            .entries
            .iter()
            .find(|e| e.name == "cmdb")
            .and_then(|e| match &e.status {
                Status::Loaded => None,
                Status::Disabled(w) | Status::Refused(w) => {
                    Some(format!("{} ({}): {w}", e.name, e.manifest.display()))
                }
            });
        return Err(match why {
            Some(why) => anyhow!("the cmdb plugin was found but not loaded: {why}"),
            None => anyhow!(
                "the cmdb plugin is not available: install it (under ~/.kusion/plugins/cmdb/, on $KUSION_PLUGIN_PATH, or beside kusionctl in <prefix>/lib/kusion/plugins; see `kusionctl plugin list`)"
            ),
        });
    };
    if let Some(url) = url {
        plugin
            .configure(&json!({ "url": url }))
            .map_err(|e| anyhow::Error::new(UsageError(format!("--cmdb: {}", e.message))))?;
    }
    Ok(plugin)
}

/// Read and check every record of `path`; all bad rows are reported together, nothing partial.
fn read_rows(path: &Path) -> Result<Vec<HostRecord>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    let shown = path.display().to_string();
    let (rows, errors) = match ext.as_str() {
        "csv" => read_csv(&shown, &text)?,
        "json" => read_json(&shown, &text)?,
        "jsonl" | "ndjson" => read_json_lines(&shown, &text),
        _ => {
            return Err(UsageError(format!(
                "{shown}: unknown file type: expected .csv, .json or .jsonl"
            ))
            .into());
        }
    };
    if !errors.is_empty() {
        let mut msg = format!(
            "{} bad record(s) in {shown}; nothing was imported:",
            errors.len()
        );
        for e in errors.iter().take(MAX_ERRORS) {
            msg.push_str("\n  ");
            msg.push_str(e);
        }
        if errors.len() > MAX_ERRORS {
            msg.push_str(&format!("\n  ... and {} more", errors.len() - MAX_ERRORS));
        }
        bail!(msg);
    }
    if rows.is_empty() {
        bail!("{shown}: no records found");
    }
    Ok(rows)
}

type Parsed = (Vec<HostRecord>, Vec<String>);

fn read_csv(shown: &str, text: &str) -> Result<Parsed> {
    let mut reader = csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .comment(Some(b'#'))
        .from_reader(text.as_bytes());
    let headers = reader
        .headers()
        .map_err(|e| anyhow!("{shown}:{}", csv_error(&e)))?
        .clone();
    let mut index: Vec<Option<usize>> = vec![None; COLUMNS.len()];
    for (i, h) in headers.iter().enumerate() {
        let Some(c) = COLUMNS.iter().position(|c| c.eq_ignore_ascii_case(h)) else {
            bail!(
                "{shown}:1: unknown column `{h}` (the columns are: {})",
                COLUMNS.join(", ")
            );
        };
        if index[c].replace(i).is_some() {
            bail!("{shown}:1: column `{h}` appears twice");
        }
    }
    for (c, name) in COLUMNS.iter().enumerate() {
        if REQUIRED.contains(name) && index[c].is_none() {
            bail!(
                "{shown}:1: missing column `{name}` (required: {})",
                REQUIRED.join(", ")
            );
        }
    }
    let mut rows = Vec::new();
    let mut errors = Vec::new();
    for record in reader.records() {
        let record = match record {
            Ok(r) => r,
            Err(e) => {
                errors.push(format!("{shown}:{}", csv_error(&e)));
                continue;
            }
        };
        let line = record.position().map_or(0, |p| p.line());
        let cell = |c: usize| -> Option<String> {
            index[c].and_then(|i| record.get(i)).map(str::to_string)
        };
        let row = HostRecord {
            host: cell(0).unwrap_or_default(),
            cluster: cell(1).unwrap_or_default(),
            namespace: cell(2).unwrap_or_default(),
            pod: cell(3),
            workload: cell(4),
            workload_kind: cell(5),
            app: cell(6),
        };
        match row.normalized() {
            Ok(r) => rows.push(r),
            Err(e) => errors.push(format!("{shown}:{line}: {e}")),
        }
    }
    Ok((rows, errors))
}

/// `line: message` of a CSV error (the crate's own text repeats the position less readably).
fn csv_error(e: &csv::Error) -> String {
    let line = e.position().map_or(0, |p| p.line());
    match e.kind() {
        csv::ErrorKind::UnequalLengths {
            expected_len, len, ..
        } => format!("{line}: expected {expected_len} fields like the header, found {len}"),
        csv::ErrorKind::Utf8 { .. } => format!("{line}: not valid UTF-8"),
        _ => format!("{line}: {e}"),
    }
}

/// 1-based line and column of a byte offset.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.rfind('\n').map_or(offset, |nl| offset - nl - 1) + 1;
    (line, col)
}

/// serde_json's message without its trailing " at line L column C".
fn json_message(e: &serde_json::Error) -> String {
    let text = e.to_string();
    match text.rfind(" at line ") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
}

fn read_json(shown: &str, text: &str) -> Result<Parsed> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Wrapped<'a> {
        #[serde(borrow)]
        hosts: Vec<&'a RawValue>,
    }
    let at = |e: &serde_json::Error| format!("{shown}:{}:{}", e.line(), e.column());
    let items: Vec<&RawValue> = match text.trim_start().chars().next() {
        Some('[') => {
            serde_json::from_str(text).map_err(|e| anyhow!("{}: {}", at(&e), json_message(&e)))?
        }
        Some('{') => {
            serde_json::from_str::<Wrapped>(text)
                .map_err(|e| anyhow!("{}: {}", at(&e), json_message(&e)))?
                .hosts
        }
        _ => bail!(
            "{shown}:1:1: expected a JSON list of host records or an object {{\"hosts\": [...]}}"
        ),
    };
    let mut rows = Vec::new();
    let mut errors = Vec::new();
    for raw in items {
        // Borrowed raw values point into `text`: their address gives the record's position.
        let offset = raw.get().as_ptr() as usize - text.as_ptr() as usize;
        let (line, col) = line_col(text, offset);
        match serde_json::from_str::<HostRecord>(raw.get()) {
            Ok(row) => match row.normalized() {
                Ok(r) => rows.push(r),
                Err(e) => errors.push(format!("{shown}:{line}:{col}: {e}")),
            },
            Err(e) => {
                let (l, c) = if e.line() <= 1 {
                    (line, col + e.column().saturating_sub(1))
                } else {
                    (line + e.line() - 1, e.column())
                };
                errors.push(format!("{shown}:{l}:{c}: {}", json_message(&e)));
            }
        }
    }
    Ok((rows, errors))
}

fn read_json_lines(shown: &str, text: &str) -> Parsed {
    let mut rows = Vec::new();
    let mut errors = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<HostRecord>(line) {
            Ok(row) => match row.normalized() {
                Ok(r) => rows.push(r),
                Err(e) => errors.push(format!("{shown}:{}: {e}", i + 1)),
            },
            Err(e) => errors.push(format!(
                "{shown}:{}:{}: {}",
                i + 1,
                e.column(),
                json_message(&e)
            )),
        }
    }
    (rows, errors)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> PathBuf {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn csv_rows_in_any_column_order_with_optional_columns() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(
            &dir,
            "hosts.csv",
            "# exported from the inventory\nnamespace,host,cluster,app\nshop, web-1 ,east,web\nshop,web-2,east,\n",
        );
        let rows = read_rows(&p).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].host, "web-1");
        assert_eq!(rows[0].app.as_deref(), Some("web"));
        assert_eq!(rows[1].app, None);
        assert_eq!(rows[1].pod, None);
    }

    #[test]
    fn bad_csv_rows_are_all_reported_with_lines() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(
            &dir,
            "hosts.csv",
            "host,cluster,namespace\nweb-1,east,shop\n,east,shop\nweb-3,east\nweb-4, ,shop\n",
        );
        let err = read_rows(&p).unwrap_err().to_string();
        assert!(err.contains("3 bad record(s)"), "{err}");
        assert!(err.contains("hosts.csv:3: `host` is empty"), "{err}");
        assert!(
            err.contains("hosts.csv:4: expected 3 fields like the header, found 2"),
            "{err}"
        );
        assert!(err.contains("hosts.csv:5: `cluster` is empty"), "{err}");
        assert!(err.contains("nothing was imported"), "{err}");

        let p = write(&dir, "cols.csv", "host,cluster,namespce\na,b,c\n");
        let err = read_rows(&p).unwrap_err().to_string();
        assert!(
            err.contains("cols.csv:1: unknown column `namespce`"),
            "{err}"
        );
        let p = write(&dir, "req.csv", "host,cluster\na,b\n");
        let err = read_rows(&p).unwrap_err().to_string();
        assert!(
            err.contains("req.csv:1: missing column `namespace`"),
            "{err}"
        );
    }

    #[test]
    fn json_records_and_their_errors_carry_positions() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(
            &dir,
            "hosts.json",
            "{\"hosts\": [\n  {\"host\": \"a\", \"cluster\": \"c\", \"namespace\": \"n\", \"pod\": \"a\"},\n  {\"host\": \"b\", \"clustr\": \"c\", \"namespace\": \"n\"},\n  {\"host\": \"\", \"cluster\": \"c\", \"namespace\": \"n\"}\n]}\n",
        );
        let err = read_rows(&p).unwrap_err().to_string();
        assert!(
            err.contains("hosts.json:3:") && err.contains("unknown field `clustr`"),
            "{err}"
        );
        assert!(err.contains("hosts.json:4:3: `host` is empty"), "{err}");

        let p = write(
            &dir,
            "list.json",
            "[{\"host\": \"a\", \"cluster\": \"c\", \"namespace\": \"n\"}]",
        );
        assert_eq!(read_rows(&p).unwrap()[0].cluster, "c");
        let p = write(&dir, "broken.json", "[\n{\"host\": \"a\",,}]");
        let err = read_rows(&p).unwrap_err().to_string();
        assert!(err.starts_with(&format!("{}:2:", p.display())), "{err}");
        let p = write(
            &dir,
            "lines.jsonl",
            "{\"host\": \"a\", \"cluster\": \"c\", \"namespace\": \"n\"}\n\n{\"host\": 1}\n",
        );
        let err = read_rows(&p).unwrap_err().to_string();
        assert!(err.contains("lines.jsonl:3:"), "{err}");
        let p = write(&dir, "hosts.yaml", "- host: a\n");
        assert!(
            read_rows(&p)
                .unwrap_err()
                .to_string()
                .contains("unknown file type")
        );
        let p = write(&dir, "empty.csv", "host,cluster,namespace\n");
        assert!(
            read_rows(&p)
                .unwrap_err()
                .to_string()
                .contains("no records")
        );
    }
}
