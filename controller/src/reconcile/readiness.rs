//! Readiness again for a revision already applied: the kernel's apply watches what it changes,
//! but a resource applied by a reconcile that then timed out waiting is recorded in state, so
//! the next plan finds nothing to do. Until the Stack has been ready once, a `wait` Stack asks
//! the runtimes again (with the resource's own readiness rule when it has one, as apply does).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use kusion_kernel::operation::Stack as EngineStack;
use kusion_kernel::readiness::{self, Verdict};
use kusion_kernel::spec::Spec;
use kusion_sdk::runtime::{Health, WatchPoll, WatchRequest};

/// `id: why` for every resource of `spec` that is not ready by `timeout` (one deadline for
/// all); resources whose runtime cannot watch are taken as ready, as apply takes them.
pub(super) fn not_ready(
    spec: &Spec,
    stack: &EngineStack,
    timeout: Duration,
    cancel: &AtomicBool,
) -> Vec<String> {
    let deadline = Instant::now() + timeout;
    let mut out = Vec::new();
    for resource in &spec.resources {
        let watches = stack
            .registry
            .info(&resource.resource_type)
            .is_some_and(|i| i.capabilities.watch);
        let Some(runtime) = stack.registry.get(&resource.resource_type) else {
            continue;
        };
        if !watches {
            continue;
        }
        let rule = match readiness::rule_of(resource) {
            Ok(rule) => rule,
            Err(e) => {
                out.push(format!("{}: {e}", resource.id));
                continue;
            }
        };
        let hook = stack.registry.readiness();
        if let (Some(expression), None) = (rule, &hook) {
            out.push(format!(
                "{}: {}",
                resource.id,
                readiness::unsupported(expression)
            ));
            continue;
        }
        let request = WatchRequest {
            resource: resource.clone(),
        };
        let mut watch = match runtime.watch(&request) {
            Ok(w) => w,
            Err(e) => {
                out.push(format!("{}: watching: {}", resource.id, e.message));
                continue;
            }
        };
        let mut last = String::from("no status reported");
        let verdict = loop {
            if cancel.load(Ordering::SeqCst) {
                break Err(format!("interrupted while waiting for readiness ({last})"));
            }
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                break Err(format!(
                    "not ready after {}: {last}",
                    humantime::format_duration(timeout)
                ));
            }
            match watch.poll(remaining.min(Duration::from_millis(500))) {
                Err(e) => break Err(e.message),
                Ok(WatchPoll::Pending) => {}
                Ok(WatchPoll::Closed) => {
                    break Err(format!(
                        "the watch ended before the resource was ready: {last}"
                    ));
                }
                Ok(WatchPoll::Event(event)) => {
                    last = event.detail.clone();
                    let health = match (rule, &hook, &event.object) {
                        _ if event.health == Health::Failed => Health::Failed,
                        (Some(expression), Some(hook), Some(live)) => {
                            match hook.judge(&resource.id, expression, live) {
                                Ok(Verdict::Ready) => Health::Ready,
                                Ok(Verdict::NotReady(why)) => {
                                    last = why;
                                    Health::Progressing
                                }
                                Err(e) => break Err(format!("readiness rule {expression:?}: {e}")),
                            }
                        }
                        (Some(expression), _, None) => {
                            break Err(format!(
                                "readiness rule {expression:?}: the runtime's watch reports no live object to judge"
                            ));
                        }
                        _ => event.health,
                    };
                    match health {
                        Health::Ready => break Ok(()),
                        Health::Failed => break Err(format!("failed: {last}")),
                        Health::Progressing => {}
                    }
                }
            }
        };
        if let Err(why) = verdict {
            out.push(format!("{}: {why}", resource.id));
        }
    }
    out
}
