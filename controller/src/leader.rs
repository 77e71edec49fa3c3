//! Leader election through a `coordination.k8s.io/v1` Lease, as client-go does it: a lease is
//! taken when it is free or when its record has not changed for a whole lease duration as seen
//! by this process's own clock (so clock skew between replicas does not matter), and updates go
//! through the API server's optimistic concurrency (resourceVersion), so two candidates never
//! both win. The stacks' state backend lease still fences writers behind this.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Api;
use kube::api::PostParams;

#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    #[error("lease {namespace}/{name}: {source}")]
    Api {
        namespace: String,
        name: String,
        source: kube::Error,
    },
    #[error(
        "lease {namespace}/{name}: leadership lost (not renewed within {deadline:?}); stopping so no two replicas reconcile at once"
    )]
    Lost {
        namespace: String,
        name: String,
        deadline: Duration,
    },
}

pub struct LeaderElector {
    api: Api<Lease>,
    namespace: String,
    name: String,
    identity: String,
    duration: Duration,
    /// The last record seen (holder, renew time) and when this process first saw it.
    observed: Option<(String, Option<MicroTime>, Instant)>,
}

impl LeaderElector {
    pub fn new(
        client: kube::Client,
        namespace: &str,
        name: &str,
        identity: &str,
        duration: Duration,
    ) -> LeaderElector {
        LeaderElector {
            api: Api::namespaced(client, namespace),
            namespace: namespace.to_string(),
            name: name.to_string(),
            identity: identity.to_string(),
            duration: duration.max(Duration::from_secs(2)),
            observed: None,
        }
    }

    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// How often a candidate retries and a leader renews.
    pub fn retry_period(&self) -> Duration {
        self.duration / 4
    }

    fn api_error(&self, source: kube::Error) -> LeaderError {
        LeaderError::Api {
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            source,
        }
    }

    /// Wait until this process holds the lease.
    pub async fn acquire(&mut self) -> Result<(), LeaderError> {
        let mut logged = false;
        loop {
            match self.try_acquire_or_renew().await {
                Ok(true) => {
                    tracing::info!(identity = %self.identity, lease = %self.name, "became leader");
                    return Ok(());
                }
                Ok(false) => {
                    if !logged {
                        tracing::info!(identity = %self.identity, lease = %self.name, "waiting for the lease held by another replica");
                        logged = true;
                    }
                }
                Err(e) => tracing::warn!("{e}"),
            }
            tokio::time::sleep(self.retry_period()).await;
        }
    }

    /// Renew the lease until a renewal cannot be made within the renew deadline; returns the
    /// reason leadership is lost.
    pub async fn hold(&mut self) -> LeaderError {
        // Give up a little before the lease could be seen as expired by the others.
        let deadline = self.duration * 2 / 3;
        let mut last_renewed = Instant::now();
        loop {
            tokio::time::sleep(self.retry_period()).await;
            match self.try_acquire_or_renew().await {
                Ok(true) => last_renewed = Instant::now(),
                Ok(false) => {
                    return LeaderError::Lost {
                        namespace: self.namespace.clone(),
                        name: self.name.clone(),
                        deadline,
                    };
                }
                Err(e) => tracing::warn!("renewing: {e}"),
            }
            if last_renewed.elapsed() > deadline {
                return LeaderError::Lost {
                    namespace: self.namespace.clone(),
                    name: self.name.clone(),
                    deadline,
                };
            }
        }
    }

    /// Give the lease up (on a clean shutdown), so another replica takes over at once.
    pub async fn release(&mut self) {
        if let Ok(Some(mut lease)) = self.api.get_opt(&self.name).await {
            let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
            if spec.holder_identity.as_deref() == Some(self.identity.as_str()) {
                spec.holder_identity = None;
                spec.lease_duration_seconds = Some(1);
                if let Err(e) = self
                    .api
                    .replace(&self.name, &PostParams::default(), &lease)
                    .await
                {
                    tracing::warn!("releasing lease {}: {e}", self.name);
                }
            }
        }
    }

    /// One attempt: true when this process holds the lease afterwards.
    pub async fn try_acquire_or_renew(&mut self) -> Result<bool, LeaderError> {
        let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
        let seconds = i32::try_from(self.duration.as_secs()).unwrap_or(i32::MAX);
        let existing = self
            .api
            .get_opt(&self.name)
            .await
            .map_err(|e| self.api_error(e))?;
        let Some(mut lease) = existing else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.name.clone()),
                    namespace: Some(self.namespace.clone()),
                    ..Default::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(self.identity.clone()),
                    lease_duration_seconds: Some(seconds),
                    acquire_time: Some(now.clone()),
                    renew_time: Some(now),
                    lease_transitions: Some(0),
                    ..Default::default()
                }),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                Err(e) => Err(self.api_error(e)),
            };
        };
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        let holder = spec.holder_identity.clone().unwrap_or_default();
        let renewed = spec.renew_time.clone();
        let record_changed = match &self.observed {
            Some((h, r, _)) => *h != holder || *r != renewed,
            None => true,
        };
        if record_changed {
            self.observed = Some((holder.clone(), renewed, Instant::now()));
        }
        let held_for = spec
            .lease_duration_seconds
            .map_or(self.duration, |s| Duration::from_secs(s.max(0) as u64));
        let seen_at = self
            .observed
            .as_ref()
            .map(|o| o.2)
            .unwrap_or_else(Instant::now);
        let mine = holder == self.identity;
        if !mine && !holder.is_empty() && seen_at.elapsed() < held_for {
            return Ok(false);
        }
        if !mine {
            spec.acquire_time = Some(now.clone());
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        }
        spec.holder_identity = Some(self.identity.clone());
        spec.lease_duration_seconds = Some(seconds);
        spec.renew_time = Some(now);
        // resourceVersion stays set: a concurrent update by another candidate makes this fail.
        match self
            .api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
        {
            Ok(updated) => {
                let spec = updated.spec.unwrap_or_default();
                self.observed = Some((
                    spec.holder_identity.unwrap_or_default(),
                    spec.renew_time,
                    Instant::now(),
                ));
                Ok(true)
            }
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
            Err(e) => Err(self.api_error(e)),
        }
    }
}
