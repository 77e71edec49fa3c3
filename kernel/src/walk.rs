//! A bounded-concurrency walk over a DAG on a pool of worker threads: a node starts when all its
//! dependencies succeeded; a failed node skips its descendants while independent branches go on;
//! after cancellation no new node starts and running ones finish.
//!
//! Runtime calls are synchronous, so each worker simply calls them: no per-call thread hand-off,
//! which is what makes planning 100,000 resources cheap.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};

/// What became of one node.
#[derive(Debug, Clone, PartialEq)]
pub enum NodeResult<T> {
    /// It ran, with its result.
    Done(T),
    /// It ran and failed (its message).
    Failed(String),
    /// Not run because the dependency with this index failed or was skipped.
    Skipped(usize),
    /// Not run because the walk was cancelled first.
    Cancelled,
}

struct Shared<T> {
    ready: VecDeque<usize>,
    waiting: Vec<usize>,
    results: Vec<Option<NodeResult<T>>>,
    running: usize,
    /// Nodes not yet decided (done, failed, skipped).
    open: usize,
}

/// Walk nodes `0..deps.len()`; `deps[i]` lists the nodes `i` waits for. `run` is called on up to
/// `concurrency` threads at once.
pub fn walk<T, F>(
    deps: &[Vec<usize>],
    concurrency: usize,
    cancel: &AtomicBool,
    run: F,
) -> Vec<NodeResult<T>>
where
    T: Send,
    F: Fn(usize) -> Result<T, String> + Sync,
{
    let n = deps.len();
    let mut dependents = vec![Vec::new(); n];
    let mut waiting = vec![0usize; n];
    for (i, ds) in deps.iter().enumerate() {
        waiting[i] = ds.len();
        for &d in ds {
            dependents[d].push(i);
        }
    }
    let shared = Mutex::new(Shared {
        ready: (0..n).filter(|&i| waiting[i] == 0).collect(),
        waiting,
        results: (0..n).map(|_| None).collect(),
        running: 0,
        open: n,
    });
    let wake = Condvar::new();
    let workers = concurrency.max(1).min(n.max(1));
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                loop {
                    let next = {
                        let mut s = shared.lock().unwrap_or_else(|p| p.into_inner());
                        loop {
                            if cancel.load(Ordering::SeqCst) || s.open == 0 {
                                break None;
                            }
                            if let Some(i) = s.ready.pop_front() {
                                s.running += 1;
                                break Some(i);
                            }
                            if s.running == 0 {
                                // Nothing ready, nothing running: the rest can never start.
                                break None;
                            }
                            s = wake.wait(s).unwrap_or_else(|p| p.into_inner());
                        }
                    };
                    let Some(i) = next else {
                        // Whatever ended this worker (done, stuck, cancelled) ends the others.
                        wake.notify_all();
                        return;
                    };
                    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(i)))
                        .unwrap_or_else(|_| Err("the step panicked (a bug in kusion)".to_string()));
                    let mut s = shared.lock().unwrap_or_else(|p| p.into_inner());
                    s.running -= 1;
                    s.open -= 1;
                    let mut released = 0;
                    match outcome {
                        Ok(value) => {
                            s.results[i] = Some(NodeResult::Done(value));
                            for &d in &dependents[i] {
                                s.waiting[d] -= 1;
                                if s.waiting[d] == 0 {
                                    s.ready.push_back(d);
                                    released += 1;
                                }
                            }
                        }
                        Err(message) => {
                            s.results[i] = Some(NodeResult::Failed(message));
                            let mut stack = vec![i];
                            while let Some(f) = stack.pop() {
                                for &d in &dependents[f] {
                                    if s.results[d].is_none() {
                                        s.results[d] = Some(NodeResult::Skipped(f));
                                        s.open -= 1;
                                        stack.push(d);
                                    }
                                }
                            }
                        }
                    }
                    // Waking every idle worker for each finished node costs more than the node
                    // itself on large plans: wake one per node released beyond the one this
                    // worker takes next, and everyone only when the walk can end.
                    let finished = s.open == 0 || (s.running == 0 && s.ready.is_empty());
                    drop(s);
                    if finished {
                        wake.notify_all();
                    } else {
                        for _ in 1..released {
                            wake.notify_one();
                        }
                    }
                }
            });
        }
    });
    let s = shared.into_inner().unwrap_or_else(|p| p.into_inner());
    s.results
        .into_iter()
        .map(|r| r.unwrap_or(NodeResult::Cancelled))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn failure_skips_descendants_only() {
        // 0 -> 1 -> 2 ; 3 independent
        let deps = vec![vec![], vec![0], vec![1], vec![]];
        let r = walk(&deps, 4, &AtomicBool::new(false), |i| {
            if i == 1 {
                Err("boom".to_string())
            } else {
                Ok(i)
            }
        });
        assert_eq!(
            r,
            vec![
                NodeResult::Done(0),
                NodeResult::Failed("boom".into()),
                NodeResult::Skipped(1),
                NodeResult::Done(3)
            ]
        );
    }

    #[test]
    fn concurrency_is_bounded_and_order_respected() {
        let deps: Vec<Vec<usize>> = (0..40)
            .map(|i| if i >= 20 { vec![i - 20] } else { vec![] })
            .collect();
        let live = AtomicUsize::new(0);
        let peak = AtomicUsize::new(0);
        let finished: Vec<AtomicBool> = (0..40).map(|_| AtomicBool::new(false)).collect();
        let r = walk(&deps, 3, &AtomicBool::new(false), |i| {
            if i >= 20 {
                assert!(finished[i - 20].load(Ordering::SeqCst));
            }
            let now = live.fetch_add(1, Ordering::SeqCst) + 1;
            peak.fetch_max(now, Ordering::SeqCst);
            std::thread::sleep(std::time::Duration::from_millis(2));
            live.fetch_sub(1, Ordering::SeqCst);
            finished[i].store(true, Ordering::SeqCst);
            Ok(())
        });
        assert!(r.iter().all(|x| *x == NodeResult::Done(())));
        assert_eq!(peak.load(Ordering::SeqCst), 3);
    }

    #[test]
    fn cancel_stops_new_work() {
        let deps = vec![vec![], vec![0], vec![1]];
        let cancel = AtomicBool::new(false);
        let r = walk(&deps, 1, &cancel, |i| {
            cancel.store(true, Ordering::SeqCst);
            Ok(i)
        });
        assert_eq!(
            r,
            vec![
                NodeResult::Done(0),
                NodeResult::Cancelled,
                NodeResult::Cancelled
            ]
        );
    }

    #[test]
    fn a_panicking_step_fails_only_its_branch() {
        let deps = vec![vec![], vec![0], vec![]];
        let r = walk(&deps, 2, &AtomicBool::new(false), |i| {
            if i == 0 { panic!("bug") } else { Ok(i) }
        });
        assert!(matches!(r[0], NodeResult::Failed(_)));
        assert_eq!(r[1], NodeResult::Skipped(0));
        assert_eq!(r[2], NodeResult::Done(2));
    }
}
