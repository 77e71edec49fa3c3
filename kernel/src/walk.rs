//! A bounded-concurrency walk over a DAG: a node starts when all its dependencies succeeded; a
//! failed node skips its descendants while independent branches go on; after cancellation no
//! new node starts and running ones finish.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::task::JoinSet;

/// What became of one node.
#[derive(Debug, Clone, PartialEq)]
pub enum NodeResult<T> {
    Done(T),
    Failed(String),
    /// Not run because the dependency with this index failed or was skipped.
    Skipped(usize),
    /// Not run because the walk was cancelled first.
    Cancelled,
}

/// Walk nodes `0..deps.len()`; `deps[i]` lists the nodes `i` waits for.
pub async fn walk<T, F, Fut>(
    deps: &[Vec<usize>],
    concurrency: usize,
    cancel: Arc<AtomicBool>,
    run: F,
) -> Vec<NodeResult<T>>
where
    T: Send + 'static,
    F: Fn(usize) -> Fut,
    Fut: Future<Output = Result<T, String>> + Send + 'static,
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
    let mut results: Vec<Option<NodeResult<T>>> = (0..n).map(|_| None).collect();
    let mut ready: std::collections::VecDeque<usize> =
        (0..n).filter(|&i| waiting[i] == 0).collect();
    let mut running = JoinSet::new();
    let concurrency = concurrency.max(1);
    loop {
        while running.len() < concurrency && !cancel.load(Ordering::SeqCst) {
            let Some(i) = ready.pop_front() else { break };
            let fut = run(i);
            running.spawn(async move { (i, fut.await) });
        }
        let Some(joined) = running.join_next().await else {
            break;
        };
        let (i, outcome) = match joined {
            Ok(pair) => pair,
            Err(e) => {
                // A panicking step is a bug; the walk itself goes on without that branch.
                tracing::error!("a step panicked: {e}");
                continue;
            }
        };
        match outcome {
            Ok(value) => {
                results[i] = Some(NodeResult::Done(value));
                for &d in &dependents[i] {
                    waiting[d] -= 1;
                    if waiting[d] == 0 {
                        ready.push_back(d);
                    }
                }
            }
            Err(message) => {
                results[i] = Some(NodeResult::Failed(message));
                let mut stack = vec![i];
                while let Some(f) = stack.pop() {
                    for &d in &dependents[f] {
                        if results[d].is_none() {
                            results[d] = Some(NodeResult::Skipped(f));
                            stack.push(d);
                        }
                    }
                }
            }
        }
    }
    results
        .into_iter()
        .map(|r| r.unwrap_or(NodeResult::Cancelled))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[tokio::test]
    async fn failure_skips_descendants_only() {
        // 0 -> 1 -> 2 ; 3 independent
        let deps = vec![vec![], vec![0], vec![1], vec![]];
        let r = walk(&deps, 4, Arc::new(AtomicBool::new(false)), |i| async move {
            if i == 1 {
                Err("boom".to_string())
            } else {
                Ok(i)
            }
        })
        .await;
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

    #[tokio::test]
    async fn concurrency_is_bounded() {
        let deps = vec![vec![]; 20];
        let live = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        walk(&deps, 3, Arc::new(AtomicBool::new(false)), |_| {
            let (live, peak) = (live.clone(), peak.clone());
            async move {
                let now = live.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(std::time::Duration::from_millis(2)).await;
                live.fetch_sub(1, Ordering::SeqCst);
                Ok(())
            }
        })
        .await;
        assert_eq!(peak.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn cancel_stops_new_work() {
        let deps = vec![vec![], vec![0], vec![1]];
        let cancel = Arc::new(AtomicBool::new(false));
        let c = cancel.clone();
        let r = walk(&deps, 1, cancel, move |i| {
            let c = c.clone();
            async move {
                c.store(true, Ordering::SeqCst);
                Ok(i)
            }
        })
        .await;
        assert_eq!(
            r,
            vec![
                NodeResult::Done(0),
                NodeResult::Cancelled,
                NodeResult::Cancelled
            ]
        );
    }
}
