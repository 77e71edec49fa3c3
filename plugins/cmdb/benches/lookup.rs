//! Look-up and import throughput of the cmdb plugin on both backends. Prints figures; run with
//! `cargo bench -p kusion-cmdb --bench lookup` (PostgreSQL: a throwaway server via pg-harness).

use std::time::{Duration, Instant};

use kusion_cmdb::{Cmdb, HostRecord};
use kusion_sdk::function::FunctionPlugin;
use kusion_sdk::{Map, Value};

const TABLE: usize = 100_000;

fn records(n: usize) -> Vec<HostRecord> {
    (0..n)
        .map(|i| HostRecord {
            host: format!("app{}-{:06}", i % 50, i),
            cluster: if i % 2 == 0 { "east" } else { "west" }.into(),
            namespace: format!("ns-{}", i % 20),
            pod: Some(format!("app{}-{:06}", i % 50, i)),
            workload: Some(format!("app{}", i % 50)),
            workload_kind: Some("Deployment".into()),
            app: Some(format!("app{}", i % 50)),
        })
        .collect()
}

fn time<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let start = Instant::now();
    let v = f();
    (v, start.elapsed())
}

fn bench(label: &str, cmdb: &Cmdb) {
    let all = records(TABLE);
    let (counts, import) = time(|| cmdb.upsert_hosts(&all).unwrap());
    assert_eq!(counts.inserted as usize, TABLE);
    let (_, reimport) = time(|| cmdb.upsert_hosts(&all).unwrap());
    println!(
        "{label}: import {TABLE} new hosts {:>8.1} ms; re-import unchanged {:>8.1} ms",
        import.as_secs_f64() * 1e3,
        reimport.as_secs_f64() * 1e3
    );
    for batch in [1usize, 200, 10_000] {
        // Every 7th host is unknown: found and not-found answers both cost something.
        let hosts: Vec<Value> = (0..batch)
            .map(|i| {
                if i % 7 == 6 {
                    Value::String(format!("ghost-{i}"))
                } else {
                    Value::String(all[(i * 37) % TABLE].host.clone())
                }
            })
            .collect();
        let args = [Value::Array(hosts)];
        let rounds = (20_000 / batch).clamp(5, 2_000);
        let (_, spent) = time(|| {
            for _ in 0..rounds {
                let out = cmdb.call("lookup_hosts", &args, &Map::new()).unwrap();
                assert_eq!(out.as_array().unwrap().len(), batch);
            }
        });
        let per_call = spent / rounds as u32;
        println!(
            "{label}: lookup_hosts of {batch:>6} hosts: {:>9.3} ms per call, {:>7.2} µs per host",
            per_call.as_secs_f64() * 1e3,
            per_call.as_secs_f64() * 1e6 / batch as f64
        );
    }
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = Cmdb::with_url(&format!(
        "sqlite://{}",
        dir.path().join("cmdb.db").display()
    ))
    .unwrap();
    bench("sqlite  ", &sqlite);
    let pg = kusion_pg_harness::PgServer::start()
        .unwrap_or_else(|e| panic!("the PostgreSQL bench server must start: {e}"));
    let postgres = Cmdb::with_url(&pg.url()).unwrap();
    bench("postgres", &postgres);
}
