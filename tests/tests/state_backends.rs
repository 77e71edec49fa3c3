//! One conformance suite, run over every state backend: the local directory, PostgreSQL (a
//! throwaway server started here) and S3 (moto started here). Each backend must give the same
//! guarantees: journal replay and atomic checkpoints, a crash (a store dropped mid-operation
//! without a checkpoint) leaving pending entries, one lease winner among racing processes,
//! expiry takeover, and gap-free release numbering under contention.
//! The SIGKILL crash test over the same backends is in `crash.rs`.

use std::sync::Barrier;

use kusion_kernel::state::{
    self, IntentKind, JournalRecord, Lease, LeaseHolder, Release, ReleaseStatus, State, StateEntry,
    StateError, StateStore, now_ms,
};
use kusion_pg_harness::PgServer;
use kusion_sdk::Resource;
use kusion_tests::servers::MotoServer;

use kusion_tests::stores::{self, Opener};

fn entry(id: &str, n: i64) -> StateEntry {
    let mut attributes = serde_json::Map::new();
    attributes.insert("n".into(), n.into());
    StateEntry {
        resource: Resource::new(id, "Test", attributes),
        private: None,
        sensitive_paths: vec![],
        pending: false,
        updated_at: 1,
        target: None,
    }
}

fn intent(id: &str) -> JournalRecord {
    JournalRecord::Intent {
        kind: IntentKind::Create,
        resource: entry(id, 0).resource,
        target: None,
        sensitive_paths: vec![],
    }
}

/// A lease for a writer that tests treat as gone when they drop it (its pid does not exist),
/// so the next "process" may take the stack over.
fn lease(store: &dyn StateStore) -> Lease {
    let mut me = LeaseHolder::current("test");
    me.pid = u32::MAX - 1;
    store.acquire_lease(&me, 600_000).unwrap()
}

fn release() -> Release {
    Release {
        revision: 0,
        operation: "apply".into(),
        holder: LeaseHolder::current("apply"),
        started_at: now_ms(),
        finished_at: None,
        status: ReleaseStatus::Running,
        spec: Default::default(),
        steps: vec![],
        notes: vec![],
        rollback_of: None,
    }
}

fn ids(state: &State) -> Vec<&str> {
    state.resources.keys().map(String::as_str).collect()
}

fn journal_and_checkpoint(open: &Opener<'_>) {
    let store = open("journal");
    assert!(store.load().unwrap().resources.is_empty());
    let lease = lease(&*store);
    store
        .append(
            &lease,
            &[
                intent("a"),
                intent("b"),
                JournalRecord::Applied {
                    entry: entry("a", 1),
                },
            ],
        )
        .unwrap();
    store
        .append(
            &lease,
            &[JournalRecord::Applied {
                entry: entry("c", 3),
            }],
        )
        .unwrap();
    assert!(store.journal_len().unwrap() > 0);
    // Another process sees the same replay.
    let state = open("journal").load().unwrap();
    assert_eq!(ids(&state), ["a", "b", "c"]);
    assert!(!state.resources["a"].pending);
    assert!(
        state.resources["b"].pending,
        "an intent without outcome is pending"
    );

    let mut state = store.load().unwrap();
    state.serial += 1;
    store.checkpoint(&lease, &state).unwrap();
    assert_eq!(store.journal_len().unwrap(), 0);
    let reloaded = open("journal").load().unwrap();
    assert_eq!(ids(&reloaded), ["a", "b", "c"]);
    assert_eq!(reloaded.resources["c"].resource.attributes["n"], 3);

    // After a checkpoint the journal continues on top of the new snapshot.
    store
        .append(
            &lease,
            &[
                JournalRecord::Deleted { id: "a".into() },
                JournalRecord::Revert {
                    id: "b".into(),
                    previous: None,
                },
                JournalRecord::Applied {
                    entry: entry("c", 4),
                },
            ],
        )
        .unwrap();
    let state = open("journal").load().unwrap();
    assert_eq!(ids(&state), ["c"]);
    assert_eq!(state.resources["c"].resource.attributes["n"], 4);
    // Checkpoints repeat without losing anything.
    for _ in 0..3 {
        let mut s = store.load().unwrap();
        s.serial += 1;
        store.checkpoint(&lease, &s).unwrap();
        store.append(&lease, &[intent("d")]).unwrap();
    }
    let state = open("journal").load().unwrap();
    assert_eq!(ids(&state), ["c", "d"]);
    assert!(state.resources["d"].pending);
    store.release_lease(&lease).unwrap();
}

/// A writer that dies without a checkpoint: every journaled intent is named on reload, and a
/// new writer can continue the journal and checkpoint.
fn crash_leaves_pending(open: &Opener<'_>) {
    {
        let store = open("crash");
        store.load().unwrap();
        let lease = lease(&*store);
        let intents: Vec<_> = (0..50).map(|i| intent(&format!("r{i:02}"))).collect();
        store.append(&lease, &intents).unwrap();
        for i in 0..20 {
            store
                .append(
                    &lease,
                    &[JournalRecord::Applied {
                        entry: entry(&format!("r{i:02}"), i),
                    }],
                )
                .unwrap();
        }
        // Dropped here: no checkpoint, no goodbye.
    }
    let next = open("crash");
    let state = next.load().unwrap();
    assert_eq!(state.resources.len(), 50);
    assert_eq!(state.resources.values().filter(|e| e.pending).count(), 30);
    let lease = lease(&*next);
    next.append(
        &lease,
        &[JournalRecord::Applied {
            entry: entry("r20", 20),
        }],
    )
    .unwrap();
    let mut s = next.load().unwrap();
    assert_eq!(s.resources.values().filter(|e| e.pending).count(), 29);
    s.serial += 1;
    next.checkpoint(&lease, &s).unwrap();
    assert_eq!(open("crash").load().unwrap(), s);
    next.release_lease(&lease).unwrap();
}

/// Fencing: once the stack's lease is not the writer's (removed by `state unlock`, or taken
/// over by another process), the writer's journal and snapshot writes are refused, and the
/// fencing numbers only grow.
fn fencing(open: &Opener<'_>) {
    let first = open("fencing");
    let old = lease(&*first);
    first.append(&old, &[intent("x")]).unwrap();
    assert!(first.force_unlock().unwrap().is_some());
    let e = first.append(&old, &[intent("y")]).unwrap_err();
    assert!(matches!(e, StateError::Fenced { .. }), "{e}");
    let second = open("fencing");
    let new = lease(&*second);
    assert!(new.fence > old.fence, "{} > {}", new.fence, old.fence);
    for e in [
        first.append(&old, &[intent("y")]).unwrap_err(),
        first.checkpoint(&old, &State::default()).unwrap_err(),
    ] {
        assert!(
            matches!(&e, StateError::Fenced { now, .. } if now.contains(&format!("lease #{}", new.fence))),
            "{e}"
        );
    }
    second.append(&new, &[intent("z")]).unwrap();
    assert_eq!(ids(&open("fencing").load().unwrap()), ["x", "z"]);
    second.release_lease(&new).unwrap();
    let third = lease(&*open("fencing"));
    assert!(third.fence > new.fence, "released leases keep their number");
}

/// Eight "processes" race for the lease: exactly one wins, the rest are told who holds it.
fn lease_contention(open: &Opener<'_>) {
    const RACERS: usize = 8;
    let barrier = Barrier::new(RACERS);
    let results: Vec<Result<_, StateError>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..RACERS)
            .map(|i| {
                let barrier = &barrier;
                s.spawn(move || {
                    let store = open("lease");
                    let mut me = LeaseHolder::current("apply");
                    me.owner = format!("racer-{i}");
                    barrier.wait();
                    store.acquire_lease(&me, 60_000)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let winners: Vec<_> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
    assert_eq!(winners.len(), 1, "exactly one winner: {results:?}");
    let winner = winners[0].clone();
    for r in &results {
        if let Err(e) = r {
            match e {
                StateError::Locked { holder, .. } => assert_eq!(holder, &winner.holder),
                other => panic!("a loser got {other}"),
            }
        }
    }
    let store = open("lease");
    assert_eq!(store.current_lease().unwrap().unwrap().token, winner.token);
    let renewed = store.renew_lease(&winner, 60_000).unwrap();
    assert!(renewed.expires_at >= winner.expires_at);

    // Expiry: a lease renewed with no time left is taken over, and the old holder learns it.
    let expired = store.renew_lease(&renewed, 0).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    let taker = open("lease")
        .acquire_lease(&LeaseHolder::current("destroy"), 60_000)
        .unwrap();
    assert!(matches!(
        store.renew_lease(&expired, 60_000),
        Err(StateError::LeaseLost)
    ));
    store.release_lease(&expired).unwrap();
    assert_eq!(
        store.current_lease().unwrap().unwrap().token,
        taker.token,
        "releasing a lost lease leaves the new holder alone"
    );
    // A dead process on this host does not block the stack.
    let unlocked = store.force_unlock().unwrap().unwrap();
    assert_eq!(unlocked.token, taker.token);
    assert!(store.current_lease().unwrap().is_none());
    let mut ghost = LeaseHolder::current("apply");
    ghost.pid = u32::MAX - 1;
    store.acquire_lease(&ghost, 600_000).unwrap();
    let mine = open("lease")
        .acquire_lease(&LeaseHolder::current("apply"), 600_000)
        .unwrap();
    store.release_lease(&mine).unwrap();
    assert!(store.current_lease().unwrap().is_none());
}

/// Releases from racing processes get distinct, gap-free numbers and keep their content.
fn history(open: &Opener<'_>) {
    const WRITERS: usize = 6;
    let barrier = Barrier::new(WRITERS);
    let mut numbers: Vec<u64> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..WRITERS)
            .map(|i| {
                let barrier = &barrier;
                s.spawn(move || {
                    let store = open("history");
                    let mut r = release();
                    r.notes = vec![format!("writer {i}")];
                    barrier.wait();
                    let n = store.create_release(&mut r).unwrap();
                    assert_eq!(r.revision, n);
                    r.status = ReleaseStatus::Succeeded;
                    r.finished_at = Some(now_ms());
                    store.update_release(&r).unwrap();
                    n
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    numbers.sort_unstable();
    assert_eq!(numbers, (1..=WRITERS as u64).collect::<Vec<_>>());
    let store = open("history");
    let all = store.releases().unwrap();
    assert_eq!(all.iter().map(|r| r.revision).collect::<Vec<_>>(), numbers);
    assert!(all.iter().all(|r| r.status == ReleaseStatus::Succeeded));
    let mut notes: Vec<_> = all.iter().map(|r| r.notes[0].clone()).collect();
    notes.sort();
    assert_eq!(notes.len(), WRITERS);
    notes.dedup();
    assert_eq!(notes.len(), WRITERS, "every writer's release kept");
    assert_eq!(store.release(3).unwrap(), all[2]);
    assert!(matches!(
        store.release(99),
        Err(StateError::NoSuchRelease(99))
    ));
    // Stacks do not see each other's history.
    assert!(open("other-stack").releases().unwrap().is_empty());
}

fn conformance(open: &Opener<'_>) {
    journal_and_checkpoint(open);
    crash_leaves_pending(open);
    fencing(open);
    lease_contention(open);
    history(open);
}

#[test]
fn conformance_local() {
    let dir = tempfile::tempdir().unwrap();
    conformance(&stores::local(dir.path()));
}

#[test]
fn conformance_postgres() {
    let pg =
        PgServer::start().unwrap_or_else(|e| panic!("the PostgreSQL test server must start: {e}"));
    let url = pg.url();
    conformance(&stores::postgres(&url));
    // The server going away is an error naming the store, not a panic or a hang.
    let store = state::open(&url, "unused".into(), "gone").unwrap();
    drop(pg);
    let e = store.load().unwrap_err();
    assert!(e.to_string().contains("stack gone"), "{e}");
}

#[test]
fn conformance_s3() {
    let moto = MotoServer::start();
    moto.create_bucket("kusion-conformance");
    conformance(&stores::s3(&moto, "kusion-conformance"));
    // A missing bucket is a clear error.
    let mut missing = stores::s3_config(&moto, "kusion-conformance", "x");
    missing.bucket = "no-such-bucket".into();
    let store = state::S3Store::new(&missing).unwrap();
    let fake = Lease {
        holder: LeaseHolder::current("test"),
        token: "t".into(),
        acquired_at: 0,
        expires_at: 0,
        fence: 1,
    };
    let e = store.append(&fake, &[intent("a")]).unwrap_err();
    assert!(e.to_string().contains("no-such-bucket"), "{e}");
}
