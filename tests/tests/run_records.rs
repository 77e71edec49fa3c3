//! `kusionctl run` records over every state backend: the local directory, PostgreSQL (a
//! throwaway server started here) and S3 (moto started here). Each must give the guarantees of
//! the local store: concurrent runs get distinct, gap-free ids and keep their own content; a run
//! that dies between creating and finishing its record leaves a readable record (status
//! `running`); stacks do not see each other's runs; an update of a run that was never created
//! is refused. A `kusionctl run` that is SIGKILLed midway on a real control plane is in
//! `ops_run.rs`.

use std::sync::Barrier;

use kusion_kernel::state::{
    self, LeaseHolder, ReleaseStatus, RunRecord, RunTargetRecord, StateError, StateStore, now_ms,
};
use kusion_pg_harness::PgServer;
use kusion_tests::servers::MotoServer;

use kusion_tests::stores::{self, Opener};

fn run(program: &str) -> RunRecord {
    RunRecord {
        id: 0,
        holder: LeaseHolder::current("run"),
        program: program.into(),
        args: vec!["hosts=a,b".into()],
        started_at: now_ms(),
        finished_at: None,
        status: ReleaseStatus::Running,
        operations: vec!["Restart restart-web: 2 target(s) in 1 batch(es)".into()],
        targets: vec![],
        notes: vec![],
    }
}

/// Runs from racing processes get distinct, gap-free ids and each keeps its own outcome.
fn concurrent_runs(open: &Opener<'_>) {
    const WRITERS: usize = 8;
    let barrier = Barrier::new(WRITERS);
    let mut ids: Vec<u64> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..WRITERS)
            .map(|i| {
                let barrier = &barrier;
                s.spawn(move || {
                    let store = open("runs");
                    let mut r = run(&format!("writer-{i}.k"));
                    barrier.wait();
                    let id = store.create_run(&mut r).unwrap();
                    assert_eq!(r.id, id);
                    r.targets = vec![RunTargetRecord {
                        target: format!("east/v1:Pod:shop:web-{i}"),
                        operation: "restart-web".into(),
                        outcome: "recovered".into(),
                        reason: None,
                    }];
                    r.status = ReleaseStatus::Succeeded;
                    r.finished_at = Some(now_ms());
                    store.update_run(&r).unwrap();
                    id
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    ids.sort_unstable();
    assert_eq!(ids, (1..=WRITERS as u64).collect::<Vec<_>>());
    let all = open("runs").runs().unwrap();
    assert_eq!(
        all.iter().map(|r| r.id).collect::<Vec<_>>(),
        ids,
        "oldest first"
    );
    for r in &all {
        assert_eq!(r.status, ReleaseStatus::Succeeded, "{r:?}");
        // The record under each id is the one its writer created and finished.
        let writer = r
            .program
            .strip_prefix("writer-")
            .unwrap()
            .strip_suffix(".k")
            .unwrap();
        assert_eq!(
            r.targets[0].target,
            format!("east/v1:Pod:shop:web-{writer}")
        );
    }
    let mut programs: Vec<_> = all.iter().map(|r| r.program.clone()).collect();
    programs.sort();
    programs.dedup();
    assert_eq!(programs.len(), WRITERS, "every writer's run kept");
}

/// A process that dies after creating its record: the record is whole and says `running`, and
/// later runs number after it.
fn crash_leaves_a_readable_record(open: &Opener<'_>) {
    {
        let store = open("crash");
        let mut r = run("dies.k");
        assert_eq!(store.create_run(&mut r).unwrap(), 1);
        // Dropped here: no update, no goodbye.
    }
    let store = open("crash");
    let runs = store.runs().unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].status, ReleaseStatus::Running);
    assert_eq!(runs[0].finished_at, None);
    assert_eq!(runs[0].program, "dies.k");
    assert_eq!(runs[0].args, ["hosts=a,b"]);
    let mut next = run("next.k");
    assert_eq!(store.create_run(&mut next).unwrap(), 2);
    // Updating a record twice keeps the last version.
    next.notes.push("first".into());
    store.update_run(&next).unwrap();
    next.notes.push("second".into());
    next.status = ReleaseStatus::Failed;
    store.update_run(&next).unwrap();
    let runs = open("crash").runs().unwrap();
    assert_eq!(runs[1], next);
    assert_eq!(
        runs[0].status,
        ReleaseStatus::Running,
        "the dead run is untouched"
    );
}

fn isolation_and_bad_updates(open: &Opener<'_>) {
    assert!(open("no-runs-here").runs().unwrap().is_empty());
    let mut r = run("other.k");
    open("other-stack").create_run(&mut r).unwrap();
    assert_eq!(r.id, 1, "numbering is per stack");
    assert_eq!(open("other-stack").runs().unwrap().len(), 1);
    let mut ghost = run("ghost.k");
    ghost.id = 99;
    match open("other-stack").update_run(&ghost) {
        Err(StateError::NoSuchRun(99)) => {}
        other => panic!("updating a run never created: {other:?}"),
    }
    assert_eq!(open("other-stack").runs().unwrap().len(), 1);
}

fn conformance(open: &Opener<'_>) {
    concurrent_runs(open);
    crash_leaves_a_readable_record(open);
    isolation_and_bad_updates(open);
}

#[test]
fn run_records_local() {
    let dir = tempfile::tempdir().unwrap();
    conformance(&stores::local(dir.path()));
}

#[test]
fn run_records_postgres() {
    let pg =
        PgServer::start().unwrap_or_else(|e| panic!("the PostgreSQL test server must start: {e}"));
    let url = pg.url();
    conformance(&stores::postgres(&url));
    // The server going away is an error naming the store, not a panic or a hang.
    let store = state::open(&url, "unused".into(), "gone").unwrap();
    drop(pg);
    let e = store.create_run(&mut run("late.k")).unwrap_err();
    assert!(e.to_string().contains("stack gone"), "{e}");
}

#[test]
fn run_records_s3() {
    let moto = MotoServer::start();
    moto.create_bucket("kusion-runs");
    conformance(&stores::s3(&moto, "kusion-runs"));
    // A missing bucket is a clear error.
    let mut missing = stores::s3_config(&moto, "kusion-runs", "x");
    missing.bucket = "no-such-bucket".into();
    let store = state::S3Store::new(&missing).unwrap();
    let e = store.create_run(&mut run("late.k")).unwrap_err();
    assert!(e.to_string().contains("no-such-bucket"), "{e}");
}
