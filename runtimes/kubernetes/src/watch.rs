//! Watching one applied object to readiness: its own state and its owner chain's, re-judged on
//! every change the watch caches see, handed to the kernel through [`KubeWatch`].

use super::*;

/// Follows `target` to readiness: a first snapshot answers at once (most kinds are ready as soon
/// as they exist, and need no watch at all); otherwise watch caches of the object and of its
/// owner chain's kinds are re-judged on every change they see, with the same rules.
/// With `host_judges` (the resource has its own readiness rule, [`EXT_READINESS`]) a built-in
/// "ready" does not end the watch: the host decides, and drops the watch when satisfied.
pub(crate) async fn follow(
    cluster: Arc<cluster::Cluster>,
    target: Target,
    interval: Duration,
    host_judges: bool,
    tx: std::sync::mpsc::Sender<PluginResult<WatchEvent>>,
) {
    let mut last: Option<WatchEvent> = None;
    // Sends `event` when it differs from the last one; true when watching should stop.
    let mut report = |event: WatchEvent| -> bool {
        let done = match event.health {
            Health::Failed => true,
            Health::Ready => !host_judges,
            Health::Progressing => false,
        };
        if last.as_ref() != Some(&event) {
            last = Some(event.clone());
            if tx.send(Ok(event)).is_err() {
                return true; // nobody listens any more
            }
        }
        done
    };
    // The kind may not be served yet (its CRD is being established): ask again until it is.
    let kind = loop {
        match health::evaluate(&cluster, &target).await {
            Ok(event) => {
                if report(event) {
                    return;
                }
                if let Ok(Some(kind)) = cluster.checked_kind(&target).await {
                    break kind;
                }
            }
            // Transient trouble (server restarting): keep trying until the caller's timeout.
            Err(e) if e.retryable => tracing::debug!("{}: watch: {}", target.id, e.message),
            Err(e) => {
                let _ = tx.send(Err(e));
                return;
            }
        }
        tokio::time::sleep(interval).await;
    };
    let ns = target.namespace.as_deref().filter(|_| kind.namespaced);
    let own = cluster.informer(
        ns,
        &kind.resource,
        Some(&format!("metadata.name={}", target.name)),
    );
    let children: Vec<(&str, Arc<cluster::Informer>)> =
        health::children_of(target.group(), &target.kind)
            .iter()
            .map(|child| {
                let informer = cluster.informer(ns, &health::child_resource(child), None);
                (child.3, informer)
            })
            .collect();
    let mut changed: Vec<tokio::sync::watch::Receiver<u64>> = std::iter::once(&own)
        .chain(children.iter().map(|(_, i)| i))
        .map(|i| i.changed.clone())
        .collect();
    for informer in std::iter::once(&own).chain(children.iter().map(|(_, i)| i)) {
        if !informer.wait_until_listed().await {
            let _ = tx.send(Err(PluginError::internal(format!(
                "{}: a watch stream stopped before listing",
                target.id
            ))));
            return;
        }
    }
    let to_json = |o: &Arc<kube::api::DynamicObject>| serde_json::to_value(o.as_ref()).ok();
    loop {
        // Mark every change seen before reading the caches, so none slips in between.
        for rx in changed.iter_mut() {
            rx.borrow_and_update();
        }
        let judged_at = std::time::Instant::now();
        let mut event = match own.store.state().first().and_then(to_json) {
            None => health::progressing(&target, "waiting for the object to exist"),
            Some(obj) => {
                let lists: Vec<(&str, Vec<Value>)> = children
                    .iter()
                    .map(|(plural, i)| {
                        (
                            *plural,
                            i.store.state().iter().filter_map(to_json).collect(),
                        )
                    })
                    .collect();
                health::judge(&target, &obj, &lists)
            }
        };
        // Each kind has its own watch stream, so the object's cache can turn Ready or Failed
        // before the pod cache holds the pods that made it so. A verdict that may end the
        // watch is judged again from reads made after it, so its rows describe one moment.
        if event.health != Health::Progressing {
            match health::evaluate_since(&cluster, &target, Some(judged_at)).await {
                Ok(fresh) => event = fresh,
                Err(e) if e.retryable => tracing::debug!("{}: watch: {}", target.id, e.message),
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return;
                }
            }
        }
        if report(event) {
            return;
        }
        let waits: Vec<_> = changed
            .iter_mut()
            .map(|rx| Box::pin(rx.changed()))
            .collect();
        match tokio::time::timeout(RESYNC, futures::future::select_all(waits)).await {
            Ok((Ok(()), _, _)) => {}
            Ok((Err(_), _, _)) => {
                let _ = tx.send(Err(PluginError::internal(format!(
                    "{}: a watch stream stopped",
                    target.id
                ))));
                return;
            }
            // Nothing changed for a while: judge from fresh reads, so a cache that missed an
            // event (a watch reconnecting) cannot hold a verdict.
            Err(_) => match health::evaluate_since(&cluster, &target, None).await {
                Ok(fresh) => {
                    if report(fresh) {
                        return;
                    }
                }
                Err(e) if e.retryable => tracing::debug!("{}: watch: {}", target.id, e.message),
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return;
                }
            },
        }
    }
}

pub(crate) struct KubeWatch {
    pub(crate) rx: std::sync::mpsc::Receiver<PluginResult<WatchEvent>>,
    pub(crate) task: tokio::task::JoinHandle<()>,
}

impl Watch for KubeWatch {
    fn poll(&mut self, timeout: Duration) -> PluginResult<WatchPoll> {
        use std::sync::mpsc::RecvTimeoutError;
        match self.rx.recv_timeout(timeout) {
            Ok(Ok(event)) => Ok(WatchPoll::Event(event)),
            Ok(Err(e)) => Err(e),
            Err(RecvTimeoutError::Timeout) => Ok(WatchPoll::Pending),
            Err(RecvTimeoutError::Disconnected) => Ok(WatchPoll::Closed),
        }
    }
}

impl Drop for KubeWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}
