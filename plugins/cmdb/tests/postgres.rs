//! The cmdb plugin against a real PostgreSQL server (a throwaway cluster started by the test).

use kusion_cmdb::{Cmdb, HostRecord, UpsertCounts};
use kusion_pg_harness::PgServer;
use kusion_sdk::function::FunctionPlugin;
use kusion_sdk::{ErrorKind, Map};
use serde_json::json;

fn rec(host: &str, cluster: &str) -> HostRecord {
    HostRecord {
        host: host.into(),
        cluster: cluster.into(),
        namespace: "shop".into(),
        pod: Some(host.into()),
        workload: Some("web".into()),
        workload_kind: Some("Deployment".into()),
        app: None,
    }
}

fn server() -> PgServer {
    PgServer::start().unwrap_or_else(|e| panic!("the PostgreSQL test server must start: {e}"))
}

#[test]
fn postgres_backend_upserts_and_looks_up() {
    let pg = server();
    let url = pg.create_database("cmdb").unwrap();
    let cmdb = Cmdb::with_url(&url).unwrap();
    // The table is created on first use.
    let counts = cmdb
        .upsert_hosts(&[rec("web-1", "east"), rec("web-2", "east")])
        .unwrap();
    assert_eq!(counts.inserted, 2);
    let counts = cmdb
        .upsert_hosts(&[
            rec("web-1", "east"),
            rec("web-2", "west"),
            rec("web-3", "west"),
        ])
        .unwrap();
    assert_eq!(
        counts,
        UpsertCounts {
            inserted: 1,
            updated: 1,
            unchanged: 1
        }
    );
    let out = cmdb
        .call(
            "lookup_hosts",
            &[json!(["web-2", "nope", "web-1"])],
            &Map::new(),
        )
        .unwrap();
    assert_eq!(
        out,
        json!([
            {"host": "web-2", "found": true, "cluster": "west", "namespace": "shop", "pod": "web-2",
             "workload": "web", "workload_kind": "Deployment", "app": null},
            {"host": "nope", "found": false, "reason": "not found"},
            {"host": "web-1", "found": true, "cluster": "east", "namespace": "shop", "pod": "web-1",
             "workload": "web", "workload_kind": "Deployment", "app": null},
        ])
    );
    let info = cmdb.call("info", &[], &Map::new()).unwrap();
    assert_eq!(info["backend"], "postgres");
    assert_eq!(info["hosts"], 3);

    // The same host twice in one import: one statement may not touch a row twice; the last wins.
    let counts = cmdb
        .upsert_hosts(&[rec("web-9", "east"), rec("web-9", "west")])
        .unwrap();
    assert_eq!((counts.inserted, counts.updated), (1, 1));
    assert_eq!(
        cmdb.lookup_hosts(&["web-9".into()]).unwrap()[0]["cluster"],
        "west"
    );

    // More hosts than one query chunk: every answer still lines up with its input.
    let many: Vec<HostRecord> = (0..1200)
        .map(|i| rec(&format!("h-{i}"), if i % 2 == 0 { "east" } else { "west" }))
        .collect();
    assert_eq!(cmdb.upsert_hosts(&many).unwrap().inserted, 1200);
    let hosts: Vec<String> = (0..1300).map(|i| format!("h-{i}")).collect();
    let out = cmdb.lookup_hosts(&hosts).unwrap();
    assert_eq!(out.len(), 1300);
    assert_eq!(out[7]["cluster"], "west");
    assert_eq!(out[1199]["found"], true);
    assert_eq!(out[1200]["found"], false);
    // More rows than one statement chunk, with NULLs in optional columns.
    let big: Vec<HostRecord> = (0..12_000)
        .map(|i| HostRecord {
            pod: None,
            ..rec(&format!("b-{i}"), "east")
        })
        .collect();
    assert_eq!(cmdb.upsert_hosts(&big).unwrap().inserted, 12_000);
    let out = cmdb.lookup_hosts(&["b-11999".into()]).unwrap();
    assert_eq!(out[0]["pod"], serde_json::Value::Null);
    assert_eq!(out[0]["workload"], "web");
}

#[test]
fn unreachable_postgres_is_an_error_and_recovers_when_back() {
    let pg = server();
    let url = pg.url();
    let cmdb = Cmdb::with_url(&url).unwrap();
    cmdb.upsert_hosts(&[rec("a", "east")]).unwrap();
    let port = pg.port();
    drop(pg);
    let err = cmdb
        .call("lookup_hosts", &[json!(["a"])], &Map::new())
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Unavailable, "{err}");
    assert!(err.retryable);
    assert!(
        err.message.contains(&format!("127.0.0.1:{port}")) && err.message.contains("unreachable"),
        "{err}"
    );

    // A fresh client to the stopped server: connecting fails fast and hides the password.
    let closed = Cmdb::with_url(&format!("postgres://kusion:hunter2@127.0.0.1:{port}/x")).unwrap();
    let err = closed.lookup_hosts(&["a".into()]).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Unavailable, "{err}");
    assert!(!err.message.contains("hunter2"), "password leaked: {err}");
    assert!(err.message.contains("kusion:***@"), "{err}");

    // A new server (new data): the same plugin instance reconnects on the next call.
    let pg2 = server();
    cmdb.configure(&json!({"url": pg2.url()})).unwrap();
    let out = cmdb.lookup_hosts(&["a".into()]).unwrap();
    assert_eq!(out[0]["found"], false);
}

#[test]
fn lookups_work_from_inside_an_async_runtime() {
    // kusionctl evaluates KCL on a tokio worker; the sync client must not trip over it.
    let pg = server();
    let cmdb = Cmdb::with_url(&pg.url()).unwrap();
    cmdb.upsert_hosts(&[rec("a", "east")]).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let out = rt.block_on(async { cmdb.lookup_hosts(&["a".into()]) });
    assert_eq!(out.unwrap()[0]["cluster"], "east");
}

#[test]
fn a_server_that_does_not_answer_ends_in_an_error_not_a_hang() {
    let pg = server();
    let url = pg.url();
    Cmdb::with_url(&url)
        .unwrap()
        .upsert_hosts(&[rec("a", "east")])
        .unwrap();
    // Another session holds the table: every read of it waits until the statement times out.
    let mut locker = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let mut tx = locker.transaction().unwrap();
    tx.batch_execute("LOCK TABLE hosts IN ACCESS EXCLUSIVE MODE")
        .unwrap();
    let cmdb = Cmdb::with_url(&format!("{url}?options=-c%20statement_timeout%3D300")).unwrap();
    let started = std::time::Instant::now();
    let err = cmdb.lookup_hosts(&["a".into()]).unwrap_err();
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    assert!(err.message.contains("statement timeout"), "{err}");
    tx.rollback().unwrap();
    assert_eq!(cmdb.lookup_hosts(&["a".into()]).unwrap()[0]["found"], true);
}
