//! `kusionctl controller`: the GitOps controller of `kusion-controller`, with this command
//! line's way of opening a stack folder (settings, plugins, compile, policies), the same code
//! `kusionctl apply -C <stack>` runs.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use kusion_controller::{LoadError, LoadRequest, Prepared, StackLoader};
use kusion_sdk::runtime::Runtime;
use serde_json::{Value, json};

use crate::args::{ConfigArgs, Global};
use crate::exit;
use crate::opener::{StackOpener, StateChoice};

#[derive(Debug, Args)]
pub struct ControllerArgs {
    #[command(subcommand)]
    pub command: Option<ControllerCommand>,
    /// The kubeconfig the controller watches Stacks with; the Kubernetes runtime applies to the
    /// same cluster unless the runtime configuration or a stack.yaml names another (default:
    /// $KUBECONFIG, ~/.kube/config, then the in-cluster service account).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context.
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// Serve Stacks in this namespace only (default: all namespaces).
    #[arg(long, short = 'n', value_name = "NS")]
    pub namespace: Option<String>,
    /// Git mirrors and checked-out revisions (default: ~/.kusion/controller/cache).
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Where `local` state backends keep each Stack's state, in <DIR>/<namespace>/<name>
    /// (default: ~/.kusion/controller/state).
    #[arg(long, value_name = "DIR")]
    pub state_root: Option<PathBuf>,
    /// Create or update the Stack CRD before starting.
    #[arg(long)]
    pub install_crd: bool,
    /// Run only while holding a coordination.k8s.io Lease, so several replicas can run.
    #[arg(long)]
    pub leader_elect: bool,
    /// The Lease's name.
    #[arg(long, default_value = "kusion-controller", value_name = "NAME")]
    pub lease_name: String,
    /// The Lease's namespace (default: --namespace, else `default`).
    #[arg(long, value_name = "NS")]
    pub lease_namespace: Option<String>,
    /// How long a leader's Lease holds without renewal.
    #[arg(long, default_value = "15s", value_parser = humantime::parse_duration, value_name = "DURATION")]
    pub lease_duration: Duration,
    /// This replica's name in the Lease and in Events (default: <host>-<pid>).
    #[arg(long, value_name = "NAME")]
    pub identity: Option<String>,
    /// Runtime configuration: a YAML or JSON mapping from runtime name to its settings.
    #[arg(long, env = "KUSION_RUNTIME_CONFIG", value_name = "FILE")]
    pub runtime_config: Option<PathBuf>,
    #[command(flatten)]
    pub config: ConfigArgs,
}

#[derive(Debug, Subcommand)]
pub enum ControllerCommand {
    /// Print the Stack CustomResourceDefinition: `kusionctl controller crd | kubectl apply -f -`.
    Crd,
}

/// Opens checked-out stack folders the way `kusionctl apply -C <stack>` does.
struct Loader(StackOpener);

impl StackLoader for Loader {
    fn load(&self, request: &LoadRequest<'_>) -> Result<Prepared, LoadError> {
        self.0
            .open(
                request.dir,
                StateChoice {
                    state_dir: Some(request.state_dir.clone()),
                    backend: request.state_backend,
                },
                request.exemptions,
                request.force_conflicts,
            )
            .map(|(spec, stack, guard)| Prepared { spec, stack, guard })
            .map_err(|e| LoadError(format!("{e:#}")))
    }
}

pub(crate) async fn run(
    args: &ControllerArgs,
    global: &Global,
    runtimes: Vec<Arc<dyn Runtime>>,
) -> Result<u8> {
    if let Some(ControllerCommand::Crd) = args.command {
        print!(
            "{}",
            kusion_kernel::spec::json_to_yaml(&kusion_controller::crd::crd())
        );
        return Ok(exit::OK);
    }
    let client = kube_client(args.kubeconfig.as_deref(), args.context.as_deref()).await?;
    let mut runtime_config = match &global.runtime_config {
        Some(path) => crate::config::read_runtime_config(path)?,
        None => Value::Null,
    };
    if let Some(path) = &args.kubeconfig {
        // Stacks land in the cluster the controller serves unless configured otherwise.
        let path = std::path::absolute(path).unwrap_or_else(|_| path.clone());
        let mut defaults = serde_json::Map::new();
        defaults.insert("kubeconfig".into(), json!(path.display().to_string()));
        if let Some(c) = &args.context {
            defaults.insert("context".into(), json!(c));
        }
        crate::cmd::compile::default_kubernetes_settings(&mut runtime_config, defaults)?;
    }
    let plugin_config = crate::config::plugin_config_from(global.config.clone(), &global.set)?;
    let plugins = kusion_kernel::plugin::load_plugins(&plugin_config);
    let loader = Loader(StackOpener {
        plugins,
        runtimes,
        config_file: crate::config::config_file(global.config.clone()),
        set: global.set.clone(),
        runtime_config,
    });
    let home = || {
        std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("."))
            .join(".kusion")
            .join("controller")
    };
    let identity = args.identity.clone().unwrap_or_else(|| {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_else(|_| "host".into());
        format!("{host}-{}", std::process::id())
    });
    let leader = args.leader_elect.then(|| {
        (
            args.lease_namespace
                .clone()
                .or_else(|| args.namespace.clone())
                .unwrap_or_else(|| "default".into()),
            args.lease_name.clone(),
            args.lease_duration,
        )
    });
    let options = kusion_controller::ControllerOptions {
        client,
        namespace: args.namespace.clone(),
        cache_dir: args
            .cache_dir
            .clone()
            .unwrap_or_else(|| home().join("cache")),
        state_root: args
            .state_root
            .clone()
            .unwrap_or_else(|| home().join("state")),
        install_crd: args.install_crd,
        identity,
        leader,
    };
    kusion_controller::run(options, Arc::new(loader)).await?;
    Ok(exit::OK)
}

/// A client for the kubeconfig file and context given, else the usual places ($KUBECONFIG,
/// ~/.kube/config, then the in-cluster service account).
pub(crate) async fn kube_client(
    kubeconfig: Option<&std::path::Path>,
    context: Option<&str>,
) -> Result<kube::Client> {
    let options = kube::config::KubeConfigOptions {
        context: context.map(str::to_string),
        ..Default::default()
    };
    let kube_config = match kubeconfig {
        Some(path) => {
            let file = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(file, &options).await?
        }
        None if context.is_some() => kube::Config::from_kubeconfig(&options).await?,
        None => kube::Config::infer().await?,
    };
    kube::Client::try_from(kube_config).context("creating the Kubernetes client")
}
