//! `kusion-server`: the API front end of `kusionctl server`. A REST API (axum, with an OpenAPI 3
//! document generated from the handlers at `/openapi.json`) over the stacks of one Konfig
//! checkout: list and compile stacks, queue previews, applies and destroys as operations (with a
//! second person's approval where the stack asks for it), stream their progress as Server-Sent
//! Events, read release history. Bearer tokens (hashed at rest, scoped per project, expiring)
//! decide who may do what ([`auth`]); every mutating or refused call lands in an append-only
//! audit log ([`audit`]); errors are RFC 9457 problem documents ([`problem`]) and every response
//! carries `x-request-id`.
//!
//! The stacks come in through a [`StackSource`] the front end implements (`kusionctl server`
//! with the code `kusionctl apply` runs); operations wait in an [`OperationQueue`] and a
//! [`worker`] runs them through the kernel's policy-guarded preview and apply. The GitOps
//! controller's Stacks, and approval of the plans they wait on, come in through a
//! [`ClusterStacks`] when the server is given a cluster ([`cluster`]).

pub mod api;
pub mod audit;
pub mod auth;
pub mod cache;
pub mod cluster;
pub mod console;
mod day2;
pub mod limit;
pub mod oidc;
pub mod ops;
pub mod pgconn;
pub mod pgqueue;
pub mod problem;
pub mod source;
pub mod worker;

use std::future::IntoFuture;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use cluster::{ClusterError, ClusterStack, ClusterStacks};
pub use ops::{InProcessQueue, Operation, OperationQueue};
pub use pgqueue::{PostgresQueue, QueueOptions};
pub use source::{Prepared, PreparedRun, SourceError, StackRef, StackSource};

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("{0}")]
    Io(String),
    #[error("{0} not found")]
    NotFound(String),
}

/// Everything a request handler reaches.
pub struct AppState {
    pub source: Arc<dyn StackSource>,
    pub queue: Arc<dyn OperationQueue>,
    /// The GitOps controller's Stacks, when the server was given a cluster.
    pub cluster: Option<Arc<dyn ClusterStacks>>,
    /// The checkout's stacks, and each stack's release history, read at most once per TTL.
    pub listing: cache::ReadCache<(), Vec<StackRef>>,
    pub histories: cache::ReadCache<PathBuf, Vec<api::ReleaseSummary>>,
    pub tokens: auth::TokenStore,
    /// Bearer JWTs of a configured OIDC issuer, beside the server's own tokens.
    pub oidc: Option<oidc::OidcVerifier>,
    pub audit: audit::AuditLog,
    pub metrics: api::Metrics,
    /// Client addresses that keep presenting unknown tokens.
    pub auth_failures: limit::AuthFailures,
    /// Raised once the server is shutting down and its workers have stopped: event streams end.
    pub shutdown: tokio::sync::watch::Sender<bool>,
}

impl AppState {
    /// The state kept in `data_dir` (created): `tokens.json` and `audit.jsonl`.
    pub fn open(
        data_dir: &Path,
        source: Arc<dyn StackSource>,
        queue: Arc<dyn OperationQueue>,
        cluster: Option<Arc<dyn ClusterStacks>>,
        cache_ttl: std::time::Duration,
    ) -> Result<Arc<AppState>, ServerError> {
        Self::open_with_oidc(data_dir, source, queue, cluster, cache_ttl, None)
    }

    /// [`AppState::open`], also accepting the JWTs `oidc` verifies.
    pub fn open_with_oidc(
        data_dir: &Path,
        source: Arc<dyn StackSource>,
        queue: Arc<dyn OperationQueue>,
        cluster: Option<Arc<dyn ClusterStacks>>,
        cache_ttl: std::time::Duration,
        oidc: Option<oidc::OidcVerifier>,
    ) -> Result<Arc<AppState>, ServerError> {
        std::fs::create_dir_all(data_dir)
            .map_err(|e| ServerError::Io(format!("creating {}: {e}", data_dir.display())))?;
        let tokens = auth::TokenStore::open(&data_dir.join("tokens.json"))?;
        let audit = audit::AuditLog::open(&data_dir.join("audit.jsonl"))?;
        Ok(Self::with_stores(
            tokens, audit, source, queue, cluster, cache_ttl, oidc,
        ))
    }

    /// The state with the given token store and audit log (files or PostgreSQL).
    pub fn with_stores(
        tokens: auth::TokenStore,
        audit: audit::AuditLog,
        source: Arc<dyn StackSource>,
        queue: Arc<dyn OperationQueue>,
        cluster: Option<Arc<dyn ClusterStacks>>,
        cache_ttl: std::time::Duration,
        oidc: Option<oidc::OidcVerifier>,
    ) -> Arc<AppState> {
        Arc::new(AppState {
            source,
            queue,
            cluster,
            listing: cache::ReadCache::new(cache_ttl),
            histories: cache::ReadCache::new(cache_ttl),
            tokens,
            oidc,
            audit,
            metrics: api::Metrics::default(),
            auth_failures: limit::AuthFailures::default(),
            shutdown: tokio::sync::watch::channel(false).0,
        })
    }
}

/// How `kusionctl server` runs.
pub struct ServeOptions {
    pub listen: SocketAddr,
    pub data_dir: PathBuf,
    /// In-process workers to start (the embedded default runs one).
    pub workers: usize,
    /// How long stack listings and release histories are served from memory
    /// ([`cache::DEFAULT_TTL`]; zero reads every time).
    pub cache_ttl: std::time::Duration,
    /// Also accept bearer JWTs of this OIDC issuer.
    pub oidc: Option<oidc::OidcConfig>,
    /// Keep tokens and the audit log in this PostgreSQL (the operation queue's) instead of
    /// `data_dir`, shared by every server on it.
    pub postgres: Option<Arc<pgconn::PgPool>>,
    /// On shutdown, how long in-flight steps and requests may take to finish.
    pub shutdown_timeout: std::time::Duration,
}

/// The subject of the admin token minted at each start of the embedded server. With tokens in
/// PostgreSQL each server mints its own, `bootstrap-admin@<host>-<pid>` ([`bootstrap_subject`]).
pub const BOOTSTRAP_SUBJECT: &str = "bootstrap-admin";

/// The start-up admin token's subject: with files, one subject (a start replaces the token the
/// previous start printed); with tokens shared in PostgreSQL, one per server process, so a
/// server's start never revokes the token another running server printed. That one is revoked
/// when its server shuts down cleanly (after a crash an admin revokes it: it is listed under
/// its subject).
pub fn bootstrap_subject(shared: bool) -> String {
    if shared {
        format!(
            "{BOOTSTRAP_SUBJECT}@{}-{}",
            kusion_kernel::state::hostname(),
            std::process::id()
        )
    } else {
        BOOTSTRAP_SUBJECT.to_string()
    }
}

/// A bound server, ready to serve.
pub struct Bound {
    pub listener: tokio::net::TcpListener,
    pub state: Arc<AppState>,
    pub address: SocketAddr,
    /// The start-up admin token: shown once, stored only as its hash.
    pub admin_token: String,
    /// Its subject ([`bootstrap_subject`]).
    pub admin_subject: String,
    pub shutdown_timeout: std::time::Duration,
}

/// Binds the listener, opens the token store and audit log (the data folder, or PostgreSQL)
/// and mints a fresh admin token (revoking the one a previous start of the same subject
/// printed, see [`bootstrap_subject`]).
pub async fn bind(
    options: &ServeOptions,
    source: Arc<dyn StackSource>,
    queue: Arc<dyn OperationQueue>,
    cluster: Option<Arc<dyn ClusterStacks>>,
) -> Result<Bound, ServerError> {
    let oidc = match &options.oidc {
        Some(config) => Some(
            oidc::OidcVerifier::discover(config.clone())
                .await
                .map_err(|e| ServerError::Io(e.to_string()))?,
        ),
        None => None,
    };
    let state = match &options.postgres {
        None => AppState::open_with_oidc(
            &options.data_dir,
            source,
            queue,
            cluster,
            options.cache_ttl,
            oidc,
        )?,
        Some(pool) => AppState::with_stores(
            auth::TokenStore::Postgres(auth::PgTokens::open(pool.clone(), auth::TOKEN_CACHE_TTL)?),
            audit::AuditLog::postgres(pool.clone())?,
            source,
            queue,
            cluster,
            options.cache_ttl,
            oidc,
        ),
    };
    let subject = bootstrap_subject(state.tokens.is_shared());
    state.tokens.revoke_subject(&subject)?;
    let minted = state.tokens.mint(
        &subject,
        [(auth::ALL_PROJECTS.to_string(), auth::Role::Admin)].into(),
        None,
    )?;
    let listener = tokio::net::TcpListener::bind(options.listen)
        .await
        .map_err(|e| ServerError::Io(format!("listening on {}: {e}", options.listen)))?;
    let address = listener
        .local_addr()
        .map_err(|e| ServerError::Io(e.to_string()))?;
    Ok(Bound {
        listener,
        state,
        address,
        admin_token: minted.token,
        admin_subject: subject,
        shutdown_timeout: options.shutdown_timeout,
    })
}

/// Resolves when `stop` is raised; never when its sender is gone without raising it.
pub async fn stopped(stop: &mut tokio::sync::watch::Receiver<bool>) {
    if stop.wait_for(|s| *s).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Serves with `workers` in-process workers until `shutdown` resolves (SIGTERM or Ctrl-C in
/// `kusionctl server`), then shuts down gracefully: no new connection or claim is accepted,
/// the workers' operations stop starting steps and are recorded once the steps under way end
/// ([`worker::run_until`]), event streams end, and requests in flight finish. An error when
/// that took longer than the bound's `shutdown_timeout` (the caller should exit at once: a
/// step may still be running on a blocking thread).
pub async fn serve(
    bound: Bound,
    workers: usize,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), ServerError> {
    let (stop_tx, stop) = tokio::sync::watch::channel(false);
    let handles = spawn_workers(
        &bound.state.queue,
        &bound.state.source,
        workers,
        stop.clone(),
    )
    .1;
    let state = bound.state.clone();
    let app = api::router(bound.state);
    let mut http_stop = stop.clone();
    let mut server = tokio::spawn(
        axum::serve(
            bound.listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .with_graceful_shutdown(async move { stopped(&mut http_stop).await })
        .into_future(),
    );
    tokio::select! {
        done = &mut server => {
            return match done {
                Ok(Ok(())) => Ok(()),
                Ok(Err(e)) => Err(ServerError::Io(format!("serving: {e}"))),
                Err(e) => Err(ServerError::Io(format!("the server's task: {e}"))),
            };
        }
        () = shutdown => {}
    }
    tracing::info!("shutting down: no new requests or claims; waiting for the steps under way");
    let _ = stop_tx.send(true);
    let deadline = tokio::time::Instant::now() + bound.shutdown_timeout;
    let workers_done = tokio::time::timeout_at(deadline, futures::future::join_all(handles))
        .await
        .is_ok();
    // The workers have recorded where their operations are: the streams may end now.
    state.shutdown.send_replace(true);
    let http_done = tokio::time::timeout_at(deadline, &mut server).await.is_ok();
    if state.tokens.is_shared()
        && let Err(e) = state.tokens.revoke_subject(&bound.admin_subject)
    {
        tracing::warn!("revoking this server's start-up admin token: {e}");
    }
    if !workers_done {
        return Err(ServerError::Io(format!(
            "the steps under way did not finish within the shutdown timeout ({}s); their \
             operations stay running until the queue re-queues them (PostgreSQL) or are lost \
             with this process (in-process queue)",
            bound.shutdown_timeout.as_secs()
        )));
    }
    if !http_done {
        return Err(ServerError::Io(format!(
            "requests in flight did not finish within the shutdown timeout ({}s)",
            bound.shutdown_timeout.as_secs()
        )));
    }
    tracing::info!("shut down cleanly");
    Ok(())
}

/// Starts `count` workers on the async runtime, named `<host>-<pid>-<n>` (unique across the
/// machines sharing a queue), each stopping once `stop` is raised; returns their names and
/// tasks.
pub fn spawn_workers(
    queue: &Arc<dyn OperationQueue>,
    source: &Arc<dyn StackSource>,
    count: usize,
    stop: tokio::sync::watch::Receiver<bool>,
) -> (Vec<String>, Vec<tokio::task::JoinHandle<()>>) {
    (0..count)
        .map(|n| {
            let name = format!(
                "{}-{}-{n}",
                kusion_kernel::state::hostname(),
                std::process::id()
            );
            let task = tokio::spawn(worker::run_until(
                queue.clone(),
                source.clone(),
                name.clone(),
                stop.clone(),
            ));
            (name, task)
        })
        .unzip()
}
