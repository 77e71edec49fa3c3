//! Plugin behaviour against a real SQLite file.

use super::*;
use serde_json::json;

fn rec(host: &str, cluster: &str, app: &str) -> HostRecord {
    HostRecord {
        host: host.into(),
        cluster: cluster.into(),
        namespace: "shop".into(),
        pod: Some(host.into()),
        workload: Some(format!("{app}-deploy")),
        workload_kind: Some("Deployment".into()),
        app: Some(app.into()),
    }
}

fn sqlite_cmdb(dir: &tempfile::TempDir) -> Cmdb {
    let url = format!("sqlite://{}", dir.path().join("cmdb.db").display());
    Cmdb::with_url(&url).unwrap()
}

fn call(c: &Cmdb, f: &str, args: Value) -> PluginResult<Value> {
    let args = match args {
        Value::Array(a) => a,
        other => vec![other],
    };
    c.call(f, &args, &Map::new())
}

#[test]
fn lookup_returns_found_and_not_found_records_in_input_order() {
    let dir = tempfile::tempdir().unwrap();
    let c = sqlite_cmdb(&dir);
    let counts = c
        .upsert_hosts(&[rec("web-1", "east", "web"), rec("api-1", "west", "api")])
        .unwrap();
    assert_eq!(
        counts,
        UpsertCounts {
            inserted: 2,
            updated: 0,
            unchanged: 0
        }
    );
    let out = call(
        &c,
        "lookup_hosts",
        json!([["api-1", "nope", "web-1", "api-1"]]),
    )
    .unwrap();
    assert_eq!(
        out,
        json!([
            {"host": "api-1", "found": true, "cluster": "west", "namespace": "shop", "pod": "api-1",
             "workload": "api-deploy", "workload_kind": "Deployment", "app": "api"},
            {"host": "nope", "found": false, "reason": "not found"},
            {"host": "web-1", "found": true, "cluster": "east", "namespace": "shop", "pod": "web-1",
             "workload": "web-deploy", "workload_kind": "Deployment", "app": "web"},
            {"host": "api-1", "found": true, "cluster": "west", "namespace": "shop", "pod": "api-1",
             "workload": "api-deploy", "workload_kind": "Deployment", "app": "api"},
        ])
    );
    let one = c
        .call(
            "lookup_host",
            &[],
            &Map::from_iter([("host".to_string(), json!(" web-1 "))]),
        )
        .unwrap();
    assert_eq!(one["cluster"], "east");
    assert_eq!(
        call(&c, "lookup_host", json!("ghost")).unwrap(),
        json!({"host": "ghost", "found": false, "reason": "not found"})
    );
    assert_eq!(call(&c, "lookup_hosts", json!([[]])).unwrap(), json!([]));
}

#[test]
fn optional_columns_come_back_as_none() {
    let dir = tempfile::tempdir().unwrap();
    let c = sqlite_cmdb(&dir);
    let counts = call(
        &c,
        "upsert_hosts",
        json!([[{"host": "h", "cluster": "c", "namespace": "n"}]]),
    )
    .unwrap();
    assert_eq!(counts, json!({"inserted": 1, "updated": 0, "unchanged": 0}));
    let r = call(&c, "lookup_host", json!("h")).unwrap();
    assert_eq!(r["found"], true);
    assert_eq!(r["pod"], Value::Null);
    assert_eq!(r["app"], Value::Null);
}

#[test]
fn upsert_counts_inserted_updated_unchanged_and_persists() {
    let dir = tempfile::tempdir().unwrap();
    let c = sqlite_cmdb(&dir);
    c.upsert_hosts(&[rec("a", "east", "web"), rec("b", "east", "web")])
        .unwrap();
    let counts = c
        .upsert_hosts(&[
            rec("a", "east", "web"),
            rec("b", "west", "web"),
            rec("c", "east", "api"),
            // the same host twice in one import: the later row wins and counts as an update
            rec("c", "west", "api"),
        ])
        .unwrap();
    assert_eq!(
        counts,
        UpsertCounts {
            inserted: 1,
            updated: 2,
            unchanged: 1
        }
    );
    // A new instance (a new process, in effect) reads what was written.
    let again = sqlite_cmdb(&dir);
    let out = again
        .lookup_hosts(&["b".to_string(), "c".to_string()])
        .unwrap();
    assert_eq!(out[0]["cluster"], "west");
    assert_eq!(out[1]["cluster"], "west");
    assert_eq!(call(&again, "info", json!([])).unwrap()["hosts"], 3);
}

#[test]
fn a_missing_sqlite_file_is_an_error_not_an_empty_answer() {
    let dir = tempfile::tempdir().unwrap();
    let c = sqlite_cmdb(&dir);
    let err = call(&c, "lookup_hosts", json!([["a"]])).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Unavailable);
    assert!(
        err.message.contains("cmdb.db") && err.message.contains("does not exist"),
        "{err}"
    );
    assert!(
        !dir.path().join("cmdb.db").exists(),
        "a look-up created the file"
    );
}

#[test]
fn a_file_that_is_not_a_database_is_unreachable() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("cmdb.db"),
        "this is not sqlite, just text ".repeat(40),
    )
    .unwrap();
    let c = sqlite_cmdb(&dir);
    let err = call(&c, "lookup_hosts", json!([["a"]])).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Unavailable, "{err}");
    assert!(err.message.contains("not a database"), "{err}");
}

#[test]
fn a_table_with_the_wrong_shape_is_a_query_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cmdb.db");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch("CREATE TABLE hosts (host TEXT PRIMARY KEY, where_it_is TEXT)")
        .unwrap();
    drop(conn);
    let c = sqlite_cmdb(&dir);
    let err = call(&c, "lookup_hosts", json!([["a"]])).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Rejected, "{err}");
    assert!(err.message.contains("no such column"), "{err}");
}

#[test]
fn bad_arguments_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let c = sqlite_cmdb(&dir);
    let err = |f: &str, args: Value| call(&c, f, args).unwrap_err().message;
    assert!(err("lookup_hosts", json!("a,b")).contains("expected a list of host names, got str"));
    assert!(err("lookup_hosts", json!([["a", 3]])).contains("hosts[1]: expected a host name"));
    assert!(err("lookup_hosts", json!([["a", " "]])).contains("hosts[1] is an empty host name"));
    assert!(err("lookup_hosts", json!([])).contains("missing argument `hosts`"));
    assert!(err("lookup_hosts", json!([["a"], ["b"]])).contains("takes 1 argument"));
    assert!(
        err("lookup_host", json!([["a"]])).contains("host: expected a host name (str), got list")
    );
    assert!(err("restart", json!([])).contains("no function `restart`"));
    let bad = err(
        "upsert_hosts",
        json!([[{"host": "a", "cluster": "c", "namespace": "n"}, {"host": "b", "cluster": ""}]]),
    );
    assert!(bad.contains("records[1]"), "{bad}");
    let bad = err(
        "upsert_hosts",
        json!([[{"host": "a", "cluster": " ", "namespace": "n"}]]),
    );
    assert_eq!(bad, "records[0]: `cluster` is empty");
    let kw = c
        .call(
            "lookup_hosts",
            &[],
            &Map::from_iter([("host".to_string(), json!(["a"]))]),
        )
        .unwrap_err();
    assert!(
        kw.message.contains("unexpected keyword argument `host`"),
        "{kw}"
    );
}

#[test]
fn configuration_is_checked_and_wins_over_the_environment() {
    let c = Cmdb::new();
    let err = c.configure(&json!({"uri": "sqlite:///x"})).unwrap_err();
    assert!(err.message.contains("unknown key `uri`"), "{err}");
    let err = c.configure(&json!({"url": "mysql://db"})).unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidInput);
    let err = c.configure(&json!("sqlite:///x")).unwrap_err();
    assert!(err.message.contains("must be a table"), "{err}");
    c.configure(&json!({"url": "sqlite:///srv/cmdb.db"}))
        .unwrap();
    assert_eq!(
        c.location().unwrap(),
        Location::Sqlite("/srv/cmdb.db".into())
    );
    c.configure(&Value::Null).unwrap();
    // Without configuration: $KUSION_CMDB_URL or ~/.kusion/cmdb.db, depending on the caller's
    // environment; either way a location, never a panic.
    assert!(c.location().is_ok());
}

#[test]
fn describe_lists_the_functions() {
    let info = Cmdb::new().describe();
    assert_eq!(info.module, "cmdb");
    assert!(info.functions.contains(&"lookup_hosts".to_string()));
    assert!(info.functions.contains(&"lookup_host".to_string()));
}
