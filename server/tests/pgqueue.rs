//! `PostgresQueue` on a real PostgreSQL (kusion-pg-harness): claims are exclusive under
//! concurrency across connections (as across processes), updates compare and set, event
//! numbers are dense and ordered under concurrent writers, a silent worker's operation is
//! re-queued and then given up, and writes from one queue wake another's `changes()`.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kusion_pg_harness::PgServer;
use kusion_server::ops::{EventKind, OperationKind, OperationStatus, new_operation};
use kusion_server::source::StackRef;
use kusion_server::{Operation, OperationQueue, PostgresQueue, QueueOptions};

fn server() -> PgServer {
    PgServer::start().unwrap_or_else(|e| panic!("PostgreSQL must start: {e}"))
}

fn queue(url: &str, heartbeat_timeout: Duration, max_attempts: u32) -> PostgresQueue {
    PostgresQueue::connect(
        url,
        QueueOptions {
            heartbeat_timeout,
            max_attempts,
            connections: 2,
        },
    )
    .unwrap()
}

fn op(kind: OperationKind) -> Operation {
    let stack = StackRef {
        project: "p".into(),
        stack: "s".into(),
        dir: ".".into(),
        description: None,
        require_approval: false,
    };
    new_operation(kind, &stack, "alice")
}

const LONG: Duration = Duration::from_secs(600);

#[test]
fn concurrent_claims_take_each_operation_once_in_order() {
    let pg = server();
    let url = pg.url();
    let q = queue(&url, LONG, 3);
    let mut created = Vec::new();
    for _ in 0..200 {
        let o = op(OperationKind::Preview);
        q.create(&o).unwrap();
        created.push(o.id);
    }
    // Eight claimers, each with its own connections, as eight worker processes would be.
    let claimed: Vec<Vec<String>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|n| {
                let url = url.clone();
                s.spawn(move || {
                    let q = queue(&url, LONG, 3);
                    let mut mine = Vec::new();
                    while let Some(o) = q.claim(&format!("w{n}")).unwrap() {
                        assert_eq!(o.status, OperationStatus::Running);
                        assert_eq!(o.worker.as_deref(), Some(format!("w{n}").as_str()));
                        mine.push(o.id);
                    }
                    mine
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let all: Vec<&String> = claimed.iter().flatten().collect();
    let unique: HashSet<&String> = all.iter().copied().collect();
    assert_eq!(all.len(), 200, "claimed {} times", all.len());
    assert_eq!(unique.len(), 200);
    // Each claimer took them oldest first.
    for mine in &claimed {
        let positions: Vec<usize> = mine
            .iter()
            .map(|id| created.iter().position(|c| c == id).unwrap())
            .collect();
        assert!(positions.windows(2).all(|w| w[0] < w[1]), "{positions:?}");
    }
    assert!(
        q.list()
            .unwrap()
            .iter()
            .all(|o| o.status == OperationStatus::Running)
    );
    assert_eq!(
        q.list().unwrap().iter().map(|o| &o.id).collect::<Vec<_>>(),
        created.iter().collect::<Vec<_>>()
    );
}

#[test]
fn updates_compare_status_and_the_claiming_worker() {
    let pg = server();
    let q = queue(&pg.url(), LONG, 3);
    let other = queue(&pg.url(), LONG, 3);
    let o = op(OperationKind::Apply);
    q.create(&o).unwrap();
    let mut running = other.claim("w1").unwrap().unwrap();
    assert_eq!(
        q.get(&o.id).unwrap().unwrap().status,
        OperationStatus::Running
    );

    // Wrong expected status: refused.
    running.status = OperationStatus::AwaitingApproval;
    assert!(!q.update(&running, OperationStatus::Queued).unwrap());
    // Another worker's copy of a running operation: refused.
    let mut stranger = running.clone();
    stranger.worker = Some("w2".into());
    assert!(!q.update(&stranger, OperationStatus::Running).unwrap());
    assert!(q.update(&running, OperationStatus::Running).unwrap());
    assert_eq!(
        q.get(&o.id).unwrap().unwrap().status,
        OperationStatus::AwaitingApproval
    );

    // Two approvals racing from two servers: exactly one wins.
    let wins: usize = std::thread::scope(|s| {
        let handles: Vec<_> = [&q, &other]
            .into_iter()
            .enumerate()
            .map(|(n, queue)| {
                let mut approved = running.clone();
                s.spawn(move || {
                    approved.status = OperationStatus::Queued;
                    approved.approved_by = Some(format!("approver{n}"));
                    queue
                        .update(&approved, OperationStatus::AwaitingApproval)
                        .unwrap() as usize
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    assert_eq!(wins, 1);
    let stored = q.get(&o.id).unwrap().unwrap();
    assert_eq!(stored.status, OperationStatus::Queued);
    assert!(stored.approved_by.is_some());
    assert!(q.get("nope").unwrap().is_none());
}

#[test]
fn event_numbers_are_dense_and_ordered_under_concurrent_writers() {
    let pg = server();
    let url = pg.url();
    let q = queue(&url, LONG, 3);
    let o = op(OperationKind::Apply);
    q.create(&o).unwrap();
    std::thread::scope(|s| {
        for n in 0..4 {
            let (url, id) = (url.clone(), o.id.clone());
            s.spawn(move || {
                let q = queue(&url, LONG, 3);
                for i in 0..50 {
                    q.push_event(
                        &id,
                        EventKind::StepStarted {
                            id: format!("{n}"),
                            action: format!("{i}"),
                        },
                    )
                    .unwrap();
                }
            });
        }
    });
    let events = q.events(&o.id, 0).unwrap();
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    // 1 is the queued event `create` records.
    assert_eq!(seqs, (1..=201).collect::<Vec<u64>>());
    // Each writer's events are in the order it wrote them.
    for n in 0..4 {
        let mine: Vec<usize> = events
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::StepStarted { id, action } if *id == n.to_string() => {
                    action.parse().ok()
                }
                _ => None,
            })
            .collect();
        assert_eq!(mine, (0..50).collect::<Vec<usize>>());
    }
    assert_eq!(q.events(&o.id, 151).unwrap().len(), 50);
    assert!(
        q.push_event(
            "missing",
            EventKind::Status {
                status: OperationStatus::Failed,
                message: None
            }
        )
        .is_err()
    );
}

fn status_messages(q: &PostgresQueue, id: &str) -> Vec<(OperationStatus, String)> {
    q.events(id, 0)
        .unwrap()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::Status { status, message } => Some((status, message.unwrap_or_default())),
            _ => None,
        })
        .collect()
}

#[test]
fn a_silent_workers_operation_is_requeued_then_given_up() {
    let pg = server();
    let q = queue(&pg.url(), Duration::from_secs(1), 2);
    assert_eq!(q.heartbeat_every(), Some(Duration::from_millis(200)));
    let o = op(OperationKind::Apply);
    q.create(&o).unwrap();
    let first = q.claim("w1").unwrap().unwrap();
    // A worker that heartbeats keeps its operation.
    for _ in 0..4 {
        std::thread::sleep(Duration::from_millis(400));
        assert!(q.heartbeat(&o.id, "w1").unwrap());
        assert!(q.claim("w2").unwrap().is_none());
    }
    // w1 goes silent: the next claim re-queues the operation and takes it.
    std::thread::sleep(Duration::from_millis(1500));
    let second = q.claim("w2").unwrap().unwrap();
    assert_eq!(second.id, o.id);
    assert_eq!(second.worker.as_deref(), Some("w2"));
    let messages = status_messages(&q, &o.id);
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert_eq!(messages[0], (OperationStatus::Queued, String::new()));
    assert_eq!(messages[1].0, OperationStatus::Queued);
    assert!(
        messages[1].1.contains("worker w1 stopped heartbeating")
            && messages[1].1.contains("attempt 2 of 2"),
        "{messages:?}"
    );
    // The old worker lost it: no heartbeat, no overwrite of the new run.
    assert!(!q.heartbeat(&o.id, "w1").unwrap());
    let mut stale = first.clone();
    stale.status = OperationStatus::Succeeded;
    assert!(!q.update(&stale, OperationStatus::Running).unwrap());
    // w2 dies too: after max_attempts claims the operation ends failed, saying why.
    std::thread::sleep(Duration::from_millis(1500));
    assert!(q.claim("w3").unwrap().is_none());
    let failed = q.get(&o.id).unwrap().unwrap();
    assert_eq!(failed.status, OperationStatus::Failed);
    let error = failed.error.unwrap_or_default();
    assert!(
        error.contains("worker w2 stopped heartbeating") && error.contains("died 2 times"),
        "{error}"
    );
    let messages = status_messages(&q, &o.id);
    assert_eq!(messages.last().unwrap().0, OperationStatus::Failed);
}

#[test]
fn a_normal_end_resets_attempts_and_writes_wake_other_queues() {
    let pg = server();
    let q = Arc::new(queue(&pg.url(), Duration::from_secs(1), 2));
    let watcher = queue(&pg.url(), LONG, 2);
    let mut changes = watcher.changes();
    changes.borrow_and_update();
    let o = op(OperationKind::Apply);
    q.create(&o).unwrap();
    // The notification reaches the other queue's listener well before its one-second tick.
    let started = Instant::now();
    while !changes.has_changed().unwrap() {
        assert!(started.elapsed() < Duration::from_secs(5));
        std::thread::sleep(Duration::from_millis(10));
    }
    // Claimed, planned, awaiting approval, approved, claimed again: a normal end in between
    // means the second claim is a first attempt, not the operation's second death.
    let mut running = q.claim("w1").unwrap().unwrap();
    running.status = OperationStatus::AwaitingApproval;
    assert!(q.update(&running, OperationStatus::Running).unwrap());
    running.status = OperationStatus::Queued;
    assert!(
        q.update(&running, OperationStatus::AwaitingApproval)
            .unwrap()
    );
    assert!(q.claim("w1").unwrap().is_some());
    std::thread::sleep(Duration::from_millis(1500));
    // max_attempts 2: counted from the normal end, this death is the first, so it runs again.
    let again = q.claim("w2").unwrap().unwrap();
    assert_eq!(again.id, o.id);
}
