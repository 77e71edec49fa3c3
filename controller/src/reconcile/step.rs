//! One reconcile of a Stack: suspend and interval checks, fetch its revision, run the pipeline,
//! and turn the outcome (or the failure, with its backoff) into `status` and Events; and the
//! finalizer's cleanup, which honours `deletionPolicy`.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Secret;
use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};
use tokio::sync::OwnedSemaphorePermit;

use super::pipeline::{Job, Outcome, pipeline};
use super::status::{findings, summarize};
use super::{Ctx, Gate, ReconcileError, backoff, trigger};
use crate::crd::{
    APPROVE_ANNOTATION, APPROVED_BY_ANNOTATION, DeletionPolicy, Mode, Stack, now_rfc3339,
};
use crate::git::Credentials;

impl Ctx {
    pub(super) fn set_gate(&self, stack: &Stack, due: Instant, failures: u32) {
        self.gates.lock().unwrap_or_else(|p| p.into_inner()).insert(
            stack.key(),
            Gate {
                trigger: trigger(stack),
                due,
                failures,
            },
        );
    }

    fn failures(&self, stack: &Stack) -> u32 {
        self.gates
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&stack.key())
            .map_or(0, |g| g.failures)
    }

    async fn credentials(&self, stack: &Stack) -> Result<Option<Credentials>, ReconcileError> {
        let Some(secret) = &stack.spec.source.secret_ref else {
            return Ok(None);
        };
        let api: Api<Secret> = Api::namespaced(
            self.client.clone(),
            stack.metadata.namespace.as_deref().unwrap_or_default(),
        );
        let found = api
            .get_opt(&secret.name)
            .await
            .map_err(|source| ReconcileError::Secret {
                stack: stack.key(),
                secret: secret.name.clone(),
                source,
            })?;
        let missing = |message: &str| ReconcileError::SecretMissing {
            stack: stack.key(),
            secret: secret.name.clone(),
            message: message.to_string(),
        };
        let Some(found) = found else {
            return Err(missing("not found in the Stack's namespace"));
        };
        let data = found.data.unwrap_or_default();
        let usable = (data.contains_key("username") && data.contains_key("password"))
            || data.contains_key("identity");
        if !usable {
            // Names the keys looked for, never what the Secret holds.
            return Err(missing(
                "holds neither `username` and `password` nor `identity`",
            ));
        }
        let text = |k: &str| {
            data.get(k)
                .map(|b| String::from_utf8_lossy(&b.0).trim_end().to_string())
        };
        Ok(Some(Credentials {
            username: text("username"),
            password: text("password"),
            identity: data.get("identity").map(|b| b.0.clone()),
            known_hosts: data.get("known_hosts").map(|b| b.0.clone()),
        }))
    }

    /// Fetch the Stack's revision and run the pipeline on it.
    /// `turn` is this Stack's turn at the pipeline (`Ctx::work`); it goes with the pipeline
    /// onto its blocking thread.
    async fn run_job(
        &self,
        stack: &Stack,
        destroy: bool,
        turn: Option<OwnedSemaphorePermit>,
    ) -> Result<(String, Outcome), ReconcileError> {
        let key = stack.key();
        let spec = &stack.spec;
        let wait_timeout = match &spec.wait_timeout {
            None => Duration::from_secs(300),
            Some(t) => {
                humantime::parse_duration(t.trim()).map_err(|e| ReconcileError::Invalid {
                    stack: key.clone(),
                    message: format!("spec.waitTimeout {t:?}: {e}"),
                })?
            }
        };
        let relative = std::path::Path::new(&spec.source.path);
        if relative.is_absolute()
            || relative
                .components()
                .any(|c| matches!(c, std::path::Component::ParentDir))
        {
            return Err(ReconcileError::Invalid {
                stack: key,
                message: format!(
                    "spec.source.path {:?} must be a relative path inside the repository",
                    spec.source.path
                ),
            });
        }
        let started = Instant::now();
        let credentials = self.credentials(stack).await?;
        let git = self.git.clone();
        let (url, reference) = (spec.source.url.clone(), spec.source.reference().to_string());
        let fetched = {
            let (url, reference) = (url.clone(), reference.clone());
            tokio::task::spawn_blocking(move || git.fetch(&url, &reference, credentials.as_ref()))
                .await
                .map_err(|e| ReconcileError::Invalid {
                    stack: key.clone(),
                    message: format!("the fetch task failed: {e}"),
                })?
        };
        let checkout = fetched.map_err(|source| ReconcileError::Git {
            stack: key.clone(),
            url,
            reference,
            source,
        })?;
        tracing::debug!(stack = %key, revision = %checkout.revision, took = ?started.elapsed(), "fetched");
        let dir = checkout.dir.join(relative);
        if !dir.is_dir() {
            return Err(ReconcileError::Pipeline {
                stack: key,
                revision: checkout.revision,
                message: format!(
                    "spec.source.path {:?} is not a folder in the repository",
                    spec.source.path
                ),
            });
        }
        let ns = stack.metadata.namespace.clone().unwrap_or_default();
        let job = Job {
            stack: key.clone(),
            revision: checkout.revision.clone(),
            dir,
            state_dir: self.state_root.join(&ns).join(stack.name_any()),
            backend: spec
                .state
                .as_ref()
                .and_then(|s| s.backend.clone())
                .unwrap_or_else(|| "local".into()),
            exemptions: spec
                .policy
                .as_ref()
                .map(|p| p.exempt.clone())
                .unwrap_or_default(),
            mode: spec.mode,
            require_approval: spec.require_approval,
            approved: stack.annotations().get(APPROVE_ANNOTATION).cloned(),
            destroy,
            wait: spec.wait,
            wait_timeout,
            recheck_readiness: spec.wait
                && !destroy
                && (self.failures(stack) > 0
                    || stack.status.as_ref().is_some_and(|s| s.failures > 0)),
            cancel: self.cancel.clone(),
        };
        let loader = self.loader.clone();
        let started = Instant::now();
        let outcome = tokio::task::spawn_blocking(move || {
            let _turn = turn;
            pipeline(&*loader, job)
        })
        .await
        .map_err(|e| ReconcileError::Invalid {
            stack: key.clone(),
            message: format!("the pipeline task failed: {e}"),
        })??;
        tracing::debug!(stack = %key, took = ?started.elapsed(), "pipeline");
        Ok((checkout.revision, outcome))
    }

    pub(super) async fn apply(&self, stack: &Stack) -> Result<Action, ReconcileError> {
        let key = stack.key();
        let turn = self.work.clone().acquire_owned().await.ok();
        let mut status = stack.status.clone().unwrap_or_default();
        status.observed_generation = stack.metadata.generation;
        if stack.spec.suspend {
            status.set_condition("Reconciling", false, "Suspended", "spec.suspend is set");
            self.patch_status(stack, &status).await?;
            self.set_gate(stack, Instant::now() + Duration::from_secs(86400 * 365), 0);
            return Ok(Action::await_change());
        }
        let interval = match stack.spec.interval() {
            Ok(i) => i,
            Err(message) => {
                status.set_condition("Stalled", true, "InvalidSpec", &message);
                status.set_condition("Ready", false, "InvalidSpec", &message);
                self.patch_status(stack, &status).await?;
                self.set_gate(stack, Instant::now() + Duration::from_secs(86400 * 365), 0);
                return Ok(Action::await_change());
            }
        };
        status.set_condition(
            "Reconciling",
            true,
            "Progressing",
            &format!(
                "fetching {} {}",
                stack.spec.source.url,
                stack.spec.source.reference()
            ),
        );
        // Said up front only for a new or changed Stack: a periodic reconcile reports once, at
        // its end, which halves the API writes of a controller serving many Stacks.
        let changed =
            stack.status.as_ref().and_then(|s| s.observed_generation) != stack.metadata.generation;
        if changed {
            self.patch_status(stack, &status).await?;
        }
        let started = Instant::now();
        let result = self.run_job(stack, false, turn).await;
        status.last_reconcile_time = Some(now_rfc3339());
        let (revision, outcome) = match result {
            Ok(done) => done,
            Err(e) => {
                let failures = self.failures(stack) + 1;
                let wait = backoff(failures, interval);
                if let ReconcileError::Pipeline { revision, .. }
                | ReconcileError::ApplyFailed { revision, .. } = &e
                {
                    status.last_attempted_revision = Some(revision.clone());
                }
                status.failures = failures;
                let message = format!("{e} (retrying in {})", humantime::format_duration(wait));
                status.set_condition("Ready", false, e.reason(), &message);
                status.set_condition("Reconciling", false, e.reason(), &message);
                if e.stalls() {
                    status.set_condition("Stalled", true, e.reason(), &message);
                } else {
                    status.set_condition("Stalled", false, e.reason(), "");
                }
                tracing::warn!("{message}");
                self.event(stack, true, e.reason(), message).await;
                self.set_gate(stack, Instant::now() + wait, failures);
                self.patch_status(stack, &status).await?;
                return Err(e);
            }
        };
        status.failures = 0;
        status.set_condition("Stalled", false, "Converging", "");
        let next = Instant::now() + interval;
        let plan = match &outcome {
            Outcome::Blocked { plan, .. }
            | Outcome::Previewed { plan, .. }
            | Outcome::NothingToDo { plan, .. }
            | Outcome::AwaitingApproval { plan, .. }
            | Outcome::Applied { plan, .. } => plan,
        };
        let summary = summarize(&revision, plan);
        // Live state drifted when the revision last applied, planned again, changes something.
        let drifted = plan.has_changes()
            && (stack.spec.mode == Mode::PreviewOnly
                || status.last_applied_revision.as_deref() == Some(revision.as_str()));
        if drifted {
            status.drift = summary.changes.clone();
            status.drift_detected_at = Some(now_rfc3339());
        } else {
            status.drift.clear();
            status.drift_detected_at = None;
        }
        status.plan = Some(summary.clone());
        status.last_attempted_revision = Some(revision.clone());
        let took = started.elapsed();
        match outcome {
            Outcome::Blocked { report, .. } => {
                let lines = findings(Some(&report));
                let message = format!("blocked by policy at {revision}: {}", lines.join("; "));
                status.policy = lines;
                status.set_condition("Stalled", true, "PolicyDenied", &message);
                status.set_condition("Ready", false, "PolicyDenied", &message);
                self.event(stack, true, "PolicyDenied", message).await;
            }
            Outcome::Previewed { report, .. } => {
                status.policy = findings(Some(&report));
                if drifted {
                    let message = format!(
                        "live state differs from {revision}: {}",
                        summary.changes.join(", ")
                    );
                    status.set_condition("Ready", false, "DriftDetected", &message);
                    self.event(stack, true, "DriftDetected", message).await;
                } else {
                    status.set_condition(
                        "Ready",
                        true,
                        "UpToDate",
                        &format!("live state matches {revision}"),
                    );
                }
            }
            Outcome::NothingToDo { report, .. } => {
                status.policy = findings(report.as_ref());
                status.pending_plan = None;
                status.last_applied_revision = Some(revision.clone());
                status.set_condition(
                    "Ready",
                    true,
                    "UpToDate",
                    &format!("live state matches {revision}"),
                );
            }
            Outcome::AwaitingApproval { hash, .. } => {
                let message = format!(
                    "a plan for {revision} changes {}: approve it with `kubectl annotate stack {} {APPROVE_ANNOTATION}={hash}` or through `kusionctl server`",
                    summary.changes.join(", "),
                    stack.name_any()
                );
                let new = status.pending_plan.as_deref() != Some(hash.as_str());
                status.pending_plan = Some(hash);
                status.set_condition("Ready", false, "AwaitingApproval", &message);
                if new {
                    self.event(stack, false, "PlanRecorded", message).await;
                }
            }
            Outcome::Applied {
                release,
                summary: line,
                report,
                ..
            } => {
                status.policy = findings(report.as_ref());
                status.pending_plan = None;
                status.last_applied_revision = Some(revision.clone());
                status.last_release = Some(release);
                let approval = if stack.spec.require_approval {
                    let by = stack
                        .annotations()
                        .get(APPROVED_BY_ANNOTATION)
                        .map(String::as_str)
                        .unwrap_or("annotation");
                    format!(", approved by {by}")
                } else {
                    String::new()
                };
                let message = format!(
                    "{line} (revision {revision}, release {release}{approval}, {:.1}s)",
                    took.as_secs_f64()
                );
                let reason = if drifted { "DriftCorrected" } else { "Applied" };
                status.set_condition("Ready", true, reason, &message);
                tracing::info!(stack = %key, "{message}");
                self.event(stack, false, reason, message).await;
            }
        }
        status.set_condition(
            "Reconciling",
            false,
            "Idle",
            &format!("next in {}", humantime::format_duration(interval)),
        );
        self.set_gate(stack, next, 0);
        self.patch_status(stack, &status).await?;
        Ok(Action::requeue(interval))
    }

    pub(super) async fn cleanup(&self, stack: &Stack) -> Result<Action, ReconcileError> {
        let turn = self.work.clone().acquire_owned().await.ok();
        match stack.spec.deletion_policy {
            DeletionPolicy::Orphan => {
                self.event(
                    stack,
                    false,
                    "Orphaned",
                    "deletionPolicy orphan: resources and state left in place".into(),
                )
                .await;
                Ok(Action::await_change())
            }
            DeletionPolicy::Destroy => match self.run_job(stack, true, turn).await {
                Ok((_, Outcome::Applied { summary, .. })) => {
                    self.event(stack, false, "Destroyed", summary).await;
                    Ok(Action::await_change())
                }
                Ok(_) => Ok(Action::await_change()),
                Err(e) => {
                    let failures = self.failures(stack) + 1;
                    self.set_gate(
                        stack,
                        Instant::now() + backoff(failures, Duration::from_secs(300)),
                        failures,
                    );
                    self.event(stack, true, "DestroyFailed", e.to_string())
                        .await;
                    Err(e)
                }
            },
        }
    }
}
