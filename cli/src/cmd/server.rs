//! `kusionctl server`: the REST API of `kusion-server` over the Konfig checkout in the current
//! folder, with this command line's way of opening a stack (the code `kusionctl apply -C
//! <stack>` runs) behind the server's `StackSource`, and `kusionctl worker`, which shares its
//! flags and checkout.
//!
//! Over 800 lines: the two commands share one checkout and one set of flags, spelled out here
//! for clap; its tests take the last fifteen lines.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Args;
use futures::FutureExt;
use futures::future::BoxFuture;
use kusion_controller::approval::ApprovalError;
use kusion_controller::crd::{APPROVED_BY_ANNOTATION, Mode, Stack};
use kusion_kernel::ops::ClusterConfig;
use kusion_kernel::spec::Spec;
use kusion_kernel::state::StateStore;
use kusion_sdk::runtime::Runtime;
use kusion_server::cluster::{ClusterCondition, ClusterPlan};
use kusion_server::{
    ClusterError, ClusterStack, ClusterStacks, OperationQueue, Prepared, PreparedRun, SourceError,
    StackRef, StackSource,
};
use serde_json::Value;

use crate::args::{ConfigArgs, Global};
use crate::exit;
use crate::opener::{StackOpener, StateChoice};

#[derive(Debug, Args)]
pub struct ServerArgs {
    /// The address to listen on (port 0: any free port, printed at start).
    #[arg(long, default_value = "127.0.0.1:8080", value_name = "ADDR:PORT")]
    pub listen: SocketAddr,
    /// Where the server keeps its tokens (hashed) and audit log (default:
    /// <checkout>/.kusion/server). Unused with --queue: they are kept in that PostgreSQL.
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Serve the GitOps controller's Stacks of the cluster this kubeconfig reaches: list them and
    /// approve the plans they wait on.
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context (implies serving a cluster).
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// Serve the controller's Stacks of the cluster found as kubectl finds it ($KUBECONFIG,
    /// ~/.kube/config, the in-cluster service account).
    #[arg(long)]
    pub cluster: bool,
    #[command(flatten)]
    pub queue: QueueArgs,
    #[command(flatten)]
    pub oidc: OidcArgs,
    #[command(flatten)]
    pub git: GitArgs,
    /// Workers to run in this process (0: only serve the API; `kusionctl worker` processes
    /// sharing `--queue` run the operations).
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub workers: usize,
    /// How long the list of stacks and each stack's release history are served from memory
    /// before the checkout and state are read again (`0s`: every request reads them). An
    /// operation finishing in this server refreshes the histories at once.
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = humantime::parse_duration)]
    pub cache_ttl: std::time::Duration,
    /// On SIGTERM or Ctrl-C, how long the steps under way and the requests in flight may take
    /// to finish (no new request, claim or step starts meanwhile).
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = humantime::parse_duration)]
    pub shutdown_timeout: std::time::Duration,
    /// Runtime configuration: a YAML or JSON mapping from runtime name to its settings.
    #[arg(long, env = "KUSION_RUNTIME_CONFIG", value_name = "FILE")]
    pub runtime_config: Option<PathBuf>,
    #[command(flatten)]
    pub config: ConfigArgs,
}

/// Where operations wait: in this process, or in PostgreSQL shared with other servers and
/// workers.
#[derive(Debug, Args)]
pub struct QueueArgs {
    /// Keep operations in PostgreSQL (`postgres://user:password@host/db`), shared by every
    /// `kusionctl server` and `kusionctl worker` given the same URL (default: in memory, this
    /// process only). A server's tokens and audit log are kept there too.
    #[arg(long, env = "KUSION_QUEUE", value_name = "URL")]
    pub queue: Option<String>,
    /// With --queue: a running operation whose worker has not heartbeaten for this long is
    /// re-queued by the next claim (failed after 3 attempts) [default: the stack lease's TTL +
    /// 15s, so the dead worker's stack lease has expired first].
    #[arg(long, value_parser = humantime::parse_duration, value_name = "DURATION")]
    pub heartbeat_timeout: Option<std::time::Duration>,
}

type Opened = (
    Arc<dyn OperationQueue>,
    Option<Arc<kusion_server::pgconn::PgPool>>,
);

impl QueueArgs {
    /// The queue, and its PostgreSQL connections when it is shared there.
    fn open(&self) -> Result<Opened> {
        let Some(url) = &self.queue else {
            return Ok((Arc::new(kusion_server::InProcessQueue::default()), None));
        };
        let mut options = kusion_server::QueueOptions::default();
        if let Some(timeout) = self.heartbeat_timeout {
            options.heartbeat_timeout = timeout;
        }
        let queue = kusion_server::PostgresQueue::connect(url, options).with_context(|| {
            format!(
                "opening the operation queue at {}",
                kusion_server::pgqueue::redact(url)
            )
        })?;
        let pool = queue.pool();
        Ok((Arc::new(queue), Some(pool)))
    }
}

/// Single sign-on: bearer JWTs of an OIDC issuer, beside the server's own tokens.
#[derive(Debug, Args)]
pub struct OidcArgs {
    /// Accept JWTs this issuer signs (its `iss`, e.g. https://login.example.com/realms/ops); the
    /// keys come from its `/.well-known/openid-configuration`, read at start.
    #[arg(
        long,
        env = "KUSION_OIDC_ISSUER",
        value_name = "URL",
        requires = "oidc_audience"
    )]
    pub oidc_issuer: Option<String>,
    /// The audience (`aud`) the tokens must be meant for, usually the client ID.
    #[arg(
        long,
        env = "KUSION_OIDC_AUDIENCE",
        value_name = "AUD",
        requires = "oidc_issuer"
    )]
    pub oidc_audience: Option<String>,
    /// A group's role on a project, repeatable: `sre=*:operator`, `shop-leads=shop:approver`.
    /// A caller's role on a project is the highest of its groups'; a caller in no mapped group
    /// may do nothing.
    #[arg(
        long = "oidc-role",
        value_name = "GROUP=PROJECT:ROLE",
        requires = "oidc_issuer"
    )]
    pub oidc_roles: Vec<kusion_server::oidc::RoleMapping>,
    /// The claim naming the caller in approvals and the audit log.
    #[arg(long, default_value = "sub", value_name = "CLAIM")]
    pub oidc_subject_claim: String,
    /// The claim listing the caller's groups.
    #[arg(long, default_value = "groups", value_name = "CLAIM")]
    pub oidc_groups_claim: String,
}

impl OidcArgs {
    fn config(&self) -> Option<kusion_server::oidc::OidcConfig> {
        let (issuer, audience) = (self.oidc_issuer.as_ref()?, self.oidc_audience.as_ref()?);
        let mut config = kusion_server::oidc::OidcConfig::new(issuer, audience);
        config.roles = self.oidc_roles.clone();
        config.subject_claim = self.oidc_subject_claim.clone();
        config.groups_claim = self.oidc_groups_claim.clone();
        Some(config)
    }
}

/// Serve a Konfig repository fetched from Git instead of the folder the command runs in.
#[derive(Debug, Args)]
pub struct GitArgs {
    /// The repository (https://, ssh:// or file://), fetched at start and every --git-poll.
    /// Each revision is a fresh tree, so stacks keeping local state keep it in the data folder
    /// (`<data-dir>/state/<project>/<stack>`); credentials come from git's own configuration
    /// (credential helper, SSH agent or keys).
    #[arg(long, env = "KUSION_GIT_URL", value_name = "URL")]
    pub git: Option<String>,
    /// The branch, tag or commit to serve.
    #[arg(long, default_value = "main", value_name = "REF")]
    pub git_ref: String,
    /// The Konfig root (the folder with `kcl.mod`) inside the repository.
    #[arg(long, default_value = ".", value_name = "PATH")]
    pub git_path: PathBuf,
    /// How often the ref is fetched again.
    #[arg(long, default_value = "30s", value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub git_poll: std::time::Duration,
}

#[derive(Debug, Args)]
pub struct WorkerArgs {
    #[command(flatten)]
    pub queue: QueueArgs,
    #[command(flatten)]
    pub git: GitArgs,
    /// Where a Git source's fetched trees and stacks' local state are kept (default:
    /// <folder>/.kusion/server, as the server's).
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Workers to run in this process.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub workers: usize,
    /// On SIGTERM or Ctrl-C, how long the steps under way may take to finish (no new claim or
    /// step starts meanwhile; the operations are then re-queued for other workers).
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = humantime::parse_duration)]
    pub shutdown_timeout: std::time::Duration,
    /// Runtime configuration: a YAML or JSON mapping from runtime name to its settings.
    #[arg(long, env = "KUSION_RUNTIME_CONFIG", value_name = "FILE")]
    pub runtime_config: Option<PathBuf>,
    #[command(flatten)]
    pub config: ConfigArgs,
}

/// The stacks below the checkout's root, opened as `kusionctl apply -C <stack>` opens them,
/// with each stack's own state (its `stack.yaml`, else `<stack>/.kusion/state`). For a Git
/// source the root moves to each new revision's tree, and local state lives outside the trees.
struct Checkout {
    served: std::sync::RwLock<Served>,
    /// A Git source's folder for stacks' local state.
    state_root: Option<PathBuf>,
    opener: StackOpener,
    /// The clusters day-2 programs may name (the kusion config file's and the runtime
    /// configuration's, as `kusionctl run` reads them).
    clusters: BTreeMap<String, ClusterConfig>,
}

/// The tree served now: its root (the folder with `kcl.mod`) and, for a Git source, the commit
/// it is of. Read together, so an operation records the commit of the files it compiled.
#[derive(Clone)]
struct Served {
    root: PathBuf,
    revision: Option<String>,
}

impl Checkout {
    fn served(&self) -> Served {
        self.served
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The stack's folder in the tree `served`: a Git source's listing may be from the tree of
    /// an earlier revision (listings are cached, trees replaced), so it is looked up again.
    fn dir(&self, served: &Served, stack: &StackRef) -> Result<PathBuf, SourceError> {
        if self.state_root.is_none() {
            return Ok(stack.dir.clone());
        }
        self.stacks_in(&served.root)?
            .into_iter()
            .find(|s| s.project == stack.project && s.stack == stack.stack)
            .map(|s| s.dir)
            .ok_or_else(|| {
                SourceError(format!(
                    "stack {}/{} is not in the revision served now",
                    stack.project, stack.stack
                ))
            })
    }

    fn state_choice(&self, stack: &StackRef) -> StateChoice<'static> {
        match &self.state_root {
            // By name, not folder: the folder changes with every revision.
            Some(root) => StateChoice {
                state_dir: Some(root.join(&stack.project).join(&stack.stack)),
                backend: "local",
            },
            None => local(),
        }
    }
}

fn local() -> StateChoice<'static> {
    StateChoice {
        state_dir: None,
        backend: "local",
    }
}

fn source_error(e: anyhow::Error) -> SourceError {
    SourceError(format!("{e:#}"))
}

impl Checkout {
    fn stacks_in(&self, root: &Path) -> Result<Vec<StackRef>, SourceError> {
        let dirs = crate::project::discover_stacks(root).map_err(source_error)?;
        let mut out = Vec::new();
        for dir in dirs {
            match crate::project::open_stack(&dir) {
                Ok(s) => out.push(StackRef {
                    project: s.project.name,
                    stack: s.config.name,
                    dir: s.dir,
                    description: s.config.description,
                    require_approval: s.config.require_approval,
                }),
                // One broken stack.yaml must not hide the others.
                Err(e) => tracing::warn!("skipping {}: {e:#}", dir.display()),
            }
        }
        Ok(out)
    }
}

impl StackSource for Checkout {
    fn stacks(&self) -> Result<Vec<StackRef>, SourceError> {
        self.stacks_in(&self.served().root)
    }

    fn compile(&self, stack: &StackRef) -> Result<Spec, SourceError> {
        let served = self.served();
        self.opener
            .compile(&self.dir(&served, stack)?)
            .map_err(source_error)
    }

    fn state(&self, stack: &StackRef) -> Result<Arc<dyn StateStore>, SourceError> {
        let served = self.served();
        self.opener
            .state_store(&self.dir(&served, stack)?, self.state_choice(stack))
            .map_err(source_error)
    }

    fn open(&self, stack: &StackRef) -> Result<Prepared, SourceError> {
        let served = self.served();
        self.opener
            .open(
                &self.dir(&served, stack)?,
                self.state_choice(stack),
                &[],
                false,
            )
            .map(|(spec, stack, guard)| Prepared {
                spec,
                stack,
                guard,
                revision: served.revision.clone(),
            })
            .map_err(source_error)
    }

    fn open_run(
        &self,
        stack: &StackRef,
        program: &str,
        args: &[(String, String)],
    ) -> Result<PreparedRun, SourceError> {
        let served = self.served();
        let file = program_in(&served.root, program)?;
        let (engine, guard) = self
            .opener
            .open_engine(
                &self.dir(&served, stack)?,
                self.state_choice(stack),
                &[],
                false,
            )
            .map_err(source_error)?;
        let hook = crate::kcl_plugins::plugin_hook(&self.opener.plugins);
        let spec =
            crate::cmd::run::compile_program(&file, args, Some(hook)).map_err(source_error)?;
        Ok(PreparedRun {
            spec,
            stack: engine,
            guard,
            clusters: self.clusters.clone(),
            revision: served.revision,
        })
    }
}

/// The program file `program` names inside the checkout at `root`. An API caller may only run
/// the checkout's own programs: a path that leaves it (through `..` or a symbolic link) is
/// refused.
fn program_in(root: &Path, program: &str) -> Result<PathBuf, SourceError> {
    let refuse = |why: &str| SourceError(format!("program {program}: {why}"));
    let root = root
        .canonicalize()
        .map_err(|e| refuse(&format!("reading the checkout {}: {e}", root.display())))?;
    let file = root
        .join(program)
        .canonicalize()
        .map_err(|_| refuse("no such file in the checkout"))?;
    if !file.starts_with(&root) {
        return Err(refuse("not inside the checkout"));
    }
    if !file.is_file() || file.extension().is_none_or(|e| e != "k") {
        return Err(refuse("not a .k file"));
    }
    Ok(file)
}

/// The controller's Stacks, read and approved through the controller's own types.
struct Cluster {
    client: kube::Client,
}

fn unavailable(e: kube::Error) -> ClusterError {
    ClusterError::Unavailable(format!("the Kubernetes API: {e}"))
}

/// `https://user:secret@host/x` → `https://***@host/x`: credentials belong in the secretRef,
/// and must not leak through the API if someone put them in the URL anyway.
fn redact_url(url: &str) -> String {
    if let Some((scheme, rest)) = url.split_once("://") {
        let host_end = rest.find('/').unwrap_or(rest.len());
        if let Some(at) = rest[..host_end].rfind('@') {
            return format!("{scheme}://***@{}", &rest[at + 1..]);
        }
    }
    url.to_string()
}

fn cluster_stack(stack: Stack) -> ClusterStack {
    let status = stack.status.unwrap_or_default();
    let source = &stack.spec.source;
    ClusterStack {
        namespace: stack.metadata.namespace.clone().unwrap_or_default(),
        name: stack.metadata.name.clone().unwrap_or_default(),
        source: format!(
            "{} {} {}",
            redact_url(&source.url),
            source.reference(),
            source.path
        ),
        mode: match stack.spec.mode {
            Mode::Apply => "apply",
            Mode::PreviewOnly => "preview-only",
        }
        .into(),
        require_approval: stack.spec.require_approval,
        suspended: stack.spec.suspend,
        last_applied_revision: status.last_applied_revision,
        plan: status.plan.map(|p| ClusterPlan {
            revision: p.revision,
            hash: p.hash,
            create: p.create,
            update: p.update,
            replace: p.replace,
            delete: p.delete,
            unchanged: p.unchanged,
            changes: p.changes,
        }),
        pending_plan: status.pending_plan,
        approved_by: stack
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(APPROVED_BY_ANNOTATION).cloned()),
        drift: status.drift,
        conditions: status
            .conditions
            .into_iter()
            .map(|c| ClusterCondition {
                type_: c.type_,
                status: c.status,
                reason: c.reason,
                message: c.message,
            })
            .collect(),
    }
}

impl ClusterStacks for Cluster {
    fn list(&self) -> BoxFuture<'_, Result<Vec<ClusterStack>, ClusterError>> {
        async move {
            let stacks = kusion_controller::approval::list_stacks(self.client.clone())
                .await
                .map_err(unavailable)?;
            Ok(stacks.into_iter().map(cluster_stack).collect())
        }
        .boxed()
    }

    fn get<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<ClusterStack, ClusterError>> {
        async move {
            kusion_controller::approval::get_stack(self.client.clone(), namespace, name)
                .await
                .map_err(unavailable)?
                .map(cluster_stack)
                .ok_or_else(|| ClusterError::NotFound(format!("no Stack {namespace}/{name}")))
        }
        .boxed()
    }

    fn approve<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
        hash: &'a str,
        approver: &'a str,
    ) -> BoxFuture<'a, Result<ClusterStack, ClusterError>> {
        async move {
            kusion_controller::approval::approve_plan(
                self.client.clone(),
                namespace,
                name,
                hash,
                approver,
            )
            .await
            .map(cluster_stack)
            .map_err(|e| match e {
                ApprovalError::NotFound { .. } => ClusterError::NotFound(e.to_string()),
                ApprovalError::Conflict(m) => ClusterError::Conflict(m),
                ApprovalError::Kube { .. } => ClusterError::Unavailable(e.to_string()),
            })
        }
        .boxed()
    }
}

/// The checkout `kusionctl server` and `kusionctl worker` serve: the working folder's.
/// The folder the command runs in (`-C`, else the current one).
fn folder(global: &Global) -> Result<PathBuf> {
    let root = match &global.workdir {
        Some(d) => d.clone(),
        None => std::env::current_dir().context("reading the current directory")?,
    };
    Ok(std::path::absolute(&root).unwrap_or(root))
}

/// What the banner names as served: the folder, or the repository, ref and revision.
fn served(root: &Path, git: &GitArgs, revision: Option<&str>) -> String {
    match (&git.git, revision) {
        (Some(url), Some(rev)) => format!(
            "{} {} ({rev}), every {}",
            redact_url(url),
            git.git_ref,
            humantime::format_duration(git.git_poll)
        ),
        _ => root.display().to_string(),
    }
}

/// The stacks to serve: the folder's, or a Git source fetched now (and again every poll by a
/// thread that moves the checkout's root to each new revision).
fn checkout(
    global: &Global,
    runtimes: Vec<Arc<dyn Runtime>>,
    git: &GitArgs,
    data_dir: &Path,
) -> Result<(String, Checkout)> {
    let folder = folder(global)?;
    let (root, state_root, revision) = match &git.git {
        None => (folder.clone(), None, None),
        Some(url) => {
            if git.git_path.is_absolute()
                || git
                    .git_path
                    .components()
                    .any(|c| matches!(c, std::path::Component::ParentDir))
            {
                anyhow::bail!(
                    "--git-path {} must be a folder inside the repository",
                    git.git_path.display()
                );
            }
            let fetched = kusion_controller::git::GitCache::new(data_dir.join("git"))
                .fetch_now(url, &git.git_ref, None)
                .with_context(|| format!("fetching {} {}", redact_url(url), git.git_ref))?;
            (
                fetched.dir.join(&git.git_path),
                Some(data_dir.join("state")),
                Some(fetched.revision),
            )
        }
    };
    let served = served(&folder, git, revision.as_deref());
    let runtime_config = match &global.runtime_config {
        Some(path) => crate::config::read_runtime_config(path)?,
        None => Value::Null,
    };
    let plugin_config = crate::config::plugin_config_from(global.config.clone(), &global.set)?;
    let plugins = kusion_kernel::plugin::load_plugins(&plugin_config);
    let checkout = Checkout {
        served: std::sync::RwLock::new(Served {
            root,
            revision: revision.clone(),
        }),
        state_root,
        opener: StackOpener {
            plugins,
            runtimes,
            config_file: crate::config::config_file(global.config.clone()),
            set: global.set.clone(),
            runtime_config,
        },
        clusters: crate::cmd::run::load_clusters(
            global.config.as_deref(),
            global.runtime_config.as_deref(),
        )?,
    };
    Ok((served, checkout))
}

/// Fetches the Git source every poll and points the checkout at each new revision's tree. A
/// failed fetch keeps serving the revision last fetched.
fn follow(checkout: &Arc<Checkout>, git: &GitArgs, data_dir: &Path) {
    let Some(url) = git.git.clone() else {
        return;
    };
    let checkout = Arc::downgrade(checkout);
    let cache = kusion_controller::git::GitCache::new(data_dir.join("git"));
    let (reference, path, every) = (git.git_ref.clone(), git.git_path.clone(), git.git_poll);
    std::thread::spawn(move || {
        let mut last = None;
        loop {
            std::thread::sleep(every);
            let Some(checkout) = checkout.upgrade() else {
                return;
            };
            match cache.fetch_now(&url, &reference, None) {
                Ok(fetched) => {
                    if last.as_ref() != Some(&fetched.revision) {
                        tracing::info!(revision = %fetched.revision, "serving a new revision");
                        *checkout.served.write().unwrap_or_else(|p| p.into_inner()) = Served {
                            root: fetched.dir.join(&path),
                            revision: Some(fetched.revision.clone()),
                        };
                        last = Some(fetched.revision);
                    }
                }
                Err(e) => tracing::warn!(
                    "fetching {}: {e}; still serving the last revision",
                    redact_url(&url)
                ),
            }
        }
    });
}

pub(crate) async fn run(
    args: &ServerArgs,
    global: &Global,
    runtimes: Vec<Arc<dyn Runtime>>,
) -> Result<u8> {
    let data_dir = args.data_dir.clone().map_or_else(
        || folder(global).map(|f| f.join(".kusion").join("server")),
        Ok,
    )?;
    let (served, checkout) = checkout(global, runtimes, &args.git, &data_dir)?;
    let checkout = Arc::new(checkout);
    follow(&checkout, &args.git, &data_dir);
    let options = kusion_server::ServeOptions {
        listen: args.listen,
        data_dir,
        workers: args.workers,
        cache_ttl: args.cache_ttl,
        oidc: args.oidc.config(),
        postgres: None,
        shutdown_timeout: args.shutdown_timeout,
    };
    let (queue, pool) = args.queue.open()?;
    let options = kusion_server::ServeOptions {
        postgres: pool,
        ..options
    };
    let cluster: Option<Arc<dyn ClusterStacks>> =
        if args.cluster || args.kubeconfig.is_some() || args.context.is_some() {
            let client =
                super::controller::kube_client(args.kubeconfig.as_deref(), args.context.as_deref())
                    .await?;
            Some(Arc::new(Cluster { client }))
        } else {
            None
        };
    let bound = kusion_server::bind(&options, checkout, queue, cluster).await?;
    print_banner(&served, &bound);
    if let Err(e) = kusion_server::serve(bound, options.workers, terminated_once()).await {
        // A step may still run on a blocking thread, which would hold the runtime's exit.
        eprintln!("error: {e}");
        std::process::exit(exit::FAILED.into());
    }
    Ok(exit::OK)
}

/// Resolves on the first SIGTERM or Ctrl-C; a second one ends the process at once (exit 130),
/// as a second Ctrl-C does for `kusionctl apply`.
async fn terminated_once() {
    terminated().await;
    eprintln!("shutting down gracefully; interrupt again to exit now");
    tokio::spawn(async {
        terminated().await;
        eprintln!("interrupted again: exiting now");
        std::process::exit(130);
    });
}

/// Resolves on SIGTERM or Ctrl-C (SIGINT).
async fn terminated() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
                return;
            }
            Err(e) => tracing::warn!("cannot watch for SIGTERM: {e}"),
        }
    }
    if tokio::signal::ctrl_c().await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// `kusionctl worker`: only workers, claiming from the shared queue, running operations on
/// the checkout in the current folder (the same one the servers serve).
pub(crate) async fn run_worker(
    args: &WorkerArgs,
    global: &Global,
    runtimes: Vec<Arc<dyn Runtime>>,
) -> Result<u8> {
    let Some(url) = &args.queue.queue else {
        anyhow::bail!(
            "kusionctl worker needs --queue postgres://... (the queue the servers share)"
        );
    };
    if args.workers == 0 {
        anyhow::bail!("--workers must be at least 1");
    }
    let data_dir = args.data_dir.clone().map_or_else(
        || folder(global).map(|f| f.join(".kusion").join("server")),
        Ok,
    )?;
    let (served, checkout) = checkout(global, runtimes, &args.git, &data_dir)?;
    let checkout = Arc::new(checkout);
    follow(&checkout, &args.git, &data_dir);
    let (queue, _pool) = args.queue.open()?;
    let source: Arc<dyn StackSource> = checkout;
    let (stop_tx, stop) = tokio::sync::watch::channel(false);
    let (names, tasks) = kusion_server::spawn_workers(&queue, &source, args.workers, stop);
    {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        let _ = writeln!(
            out,
            "kusion worker {} claiming from {} for {}",
            names.join(", "),
            kusion_server::pgqueue::redact(url),
            served
        );
        let _ = out.flush();
    }
    // The workers run until SIGTERM or Ctrl-C; then no new claim or step starts, and each
    // running operation is re-queued once its steps under way finish. Past the timeout (or
    // after SIGKILL) the next claim re-queues it once its heartbeats stop.
    terminated_once().await;
    tracing::info!("shutting down: no new claims; waiting for the steps under way");
    let _ = stop_tx.send(true);
    let all = futures::future::join_all(tasks);
    if tokio::time::timeout(args.shutdown_timeout, all)
        .await
        .is_err()
    {
        eprintln!(
            "error: the steps under way did not finish within the shutdown timeout ({}s); their \
             operations are re-queued once their heartbeats stop",
            args.shutdown_timeout.as_secs()
        );
        std::process::exit(exit::FAILED.into());
    }
    Ok(exit::OK)
}

fn print_banner(served: &str, bound: &kusion_server::Bound) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    // Printed here only: the token is stored as its hash and never logged.
    let _ = writeln!(
        out,
        "kusion server listening on http://{} serving {}",
        bound.address, served
    );
    let valid = if bound.admin_subject == kusion_server::BOOTSTRAP_SUBJECT {
        "valid until the next start".to_string()
    } else {
        format!("{}; valid until this server stops", bound.admin_subject)
    };
    let _ = writeln!(
        out,
        "admin token (shown once; {valid}): {}",
        bound.admin_token
    );
    let _ = out.flush();
}

#[cfg(test)]
mod tests {
    use super::redact_url;

    #[test]
    fn credentials_in_a_source_url_are_not_shown() {
        assert_eq!(
            redact_url("https://bob:s3cret@git.example.com/konfig.git"),
            "https://***@git.example.com/konfig.git"
        );
        assert_eq!(redact_url("ssh://git@host:22/x@y"), "ssh://***@host:22/x@y");
        assert_eq!(redact_url("git://127.0.0.1/k"), "git://127.0.0.1/k");
        assert_eq!(redact_url("/srv/git/k"), "/srv/git/k");
    }
}
