//! Command-line arguments.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(
    name = "kusionctl",
    version,
    about = "Preview, apply, watch and destroy a stack's resources"
)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    Human,
    Json,
    /// YAML (for `compile`; other commands treat it as human).
    Yaml,
}

#[derive(Debug, Args)]
pub struct Global {
    /// Work in this directory (a stack folder) instead of the current one.
    #[arg(short = 'C', long = "workdir", global = true)]
    pub workdir: Option<PathBuf>,
    /// Where the stack's state lives (default: <workdir>/.kusion/state).
    #[arg(long, global = true, env = "KUSION_STATE_DIR")]
    pub state_dir: Option<PathBuf>,
    /// Where state lives: `local` (the state dir), `postgres://...[?stack=NAME]` or
    /// `s3://bucket/prefix[?endpoint=URL&region=R&stack=NAME]`. Remote stacks are named
    /// <project>/<stack> after the stack folder unless `stack=` says otherwise.
    #[arg(
        long,
        global = true,
        env = "KUSION_STATE_BACKEND",
        default_value = "local"
    )]
    pub state_backend: String,
    /// Output format.
    #[arg(short = 'o', long, global = true, value_enum, default_value = "human")]
    pub output: Output,
    /// Runtime configuration: a YAML or JSON mapping from runtime name to its settings.
    #[arg(long, global = true, env = "KUSION_RUNTIME_CONFIG")]
    pub runtime_config: Option<PathBuf>,
    /// The kusion configuration file (TOML; default ~/.kusion/config.toml when it exists).
    #[arg(long, global = true, env = "KUSION_CONFIG")]
    pub config: Option<PathBuf>,
    /// Override one configuration key, e.g. --set plugins.workspace=/src/kusion-rs.
    #[arg(long = "set", global = true, value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// More log output (-v, -vv, -vvv).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Never use colour.
    #[arg(long, global = true)]
    pub no_color: bool,
}

#[derive(Debug, Args, Clone)]
pub struct PlanArgs {
    /// The spec file (YAML or JSON; `resources:` or a bare list).
    #[arg(long = "spec", short = 'f')]
    pub spec: Option<PathBuf>,
    /// Fields never compared and, on update, kept at their live value (e.g. spec.replicas).
    #[arg(long = "ignore-fields", value_delimiter = ',')]
    pub ignore_fields: Vec<String>,
    /// How many resources are worked on at once.
    #[arg(long, env = "KUSION_EXEC_MAX_CONCURRENT", default_value_t = 10)]
    pub concurrency: usize,
    /// Time limit per runtime call (e.g. 30s, 2m).
    #[arg(long, value_parser = humantime::parse_duration)]
    pub timeout: Option<std::time::Duration>,
    /// Let deny findings of RULE (`set/Rule` or `Rule`) through, with a reason that is recorded
    /// in the release history: --policy-exempt no-latest-tag/NoLatestTag="hotfix, ticket 42".
    #[arg(long = "policy-exempt", value_name = "RULE=REASON")]
    pub policy_exempt: Vec<String>,
    /// Take ownership of Kubernetes fields another field manager owns instead of stopping with
    /// a conflict naming it (as `kubectl apply --server-side --force-conflicts`).
    #[arg(long = "force-conflicts")]
    pub force_conflicts: bool,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// The KCL tool: `kusionctl kcl run|fmt|parse|import ...` (same flags as `kcl`).
    #[command(disable_help_flag = true)]
    Kcl {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
        args: Vec<String>,
    },
    /// Show what apply would change.
    Preview {
        #[command(flatten)]
        plan: PlanArgs,
        /// Show the field-level diff of every changed resource.
        #[arg(short = 'd', long)]
        detail: bool,
    },
    /// Converge the live resources to the spec.
    Apply {
        #[command(flatten)]
        plan: PlanArgs,
        /// Do not ask for confirmation.
        #[arg(short = 'y', long)]
        yes: bool,
        /// Only show the plan.
        #[arg(long)]
        dry_run: bool,
        /// Wait until every applied resource is ready, showing a live table.
        #[arg(short = 'w', long)]
        watch: bool,
        /// How long to wait for readiness per resource with --watch.
        #[arg(long, value_parser = humantime::parse_duration, default_value = "5m")]
        watch_timeout: std::time::Duration,
        /// Show the field-level diff of every changed resource.
        #[arg(short = 'd', long)]
        detail: bool,
    },
    /// Delete every resource recorded in state.
    Destroy {
        #[command(flatten)]
        plan: PlanArgs,
        #[arg(short = 'y', long)]
        yes: bool,
    },
    /// Print the dependency graph.
    Graph {
        #[arg(long = "spec", short = 'f')]
        spec: Option<PathBuf>,
        #[arg(long, value_enum, default_value = "text")]
        format: GraphFormat,
    },
    /// Inspect or repair the stack's state.
    State {
        #[command(subcommand)]
        command: StateCommand,
    },
    /// Run a day-2 operations program (restart, scale, rollback in batches; see `kusion.ops`).
    Run(RunArgs),
    /// Compile the stack (in a stack folder or with -C) into a spec and print it; with --all,
    /// every stack under a Konfig root.
    Compile {
        /// Compile every stack under ROOT (default: the working directory).
        #[arg(long)]
        all: bool,
        /// The Konfig root for --all.
        #[arg(requires = "all")]
        root: Option<PathBuf>,
        /// Worker threads for --all (default: one per core).
        #[arg(long, short = 'j', default_value_t = 0)]
        jobs: usize,
        /// With --all: ignore the compile cache and compile every stack.
        #[arg(long)]
        force: bool,
    },
    /// Create a project and its stacks from a built-in template.
    Init {
        /// The template (`--template list` shows them).
        #[arg(long, short = 't', default_value = "app")]
        template: String,
        /// The project name (also its folder).
        project: Option<String>,
        /// Stacks to create (default: dev).
        stacks: Vec<String>,
    },
    /// Inspect plugins.
    Plugin {
        #[command(subcommand)]
        command: PluginCommand,
    },
    /// Load and query the CMDB that KCL programs read through `kcl_plugin.cmdb`.
    Cmdb {
        #[command(subcommand)]
        command: crate::cmdb::CmdbCommand,
    },
}

#[derive(Debug, Subcommand)]
pub enum PluginCommand {
    /// Show every plugin found: kind, version, ABI, capabilities, and why any was refused.
    List,
    /// Make a publisher key pair: the private key (PKCS#8) goes to KEY_FILE (mode 0600); the
    /// public key to give operators for `[plugins.trusted_keys]` is printed.
    Keygen { key_file: PathBuf },
    /// Sign a plugin as PUBLISHER: sets `sha256`, `publisher` and `signature` in its manifest.
    Sign {
        /// The plugin's `plugin.toml`.
        manifest: PathBuf,
        /// The private key made by `kusionctl plugin keygen`.
        #[arg(long)]
        key: PathBuf,
        /// The name operators trust the key under.
        #[arg(long)]
        publisher: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GraphFormat {
    Text,
    Dot,
}

#[derive(Debug, Subcommand)]
pub enum StateCommand {
    /// List the resources in state.
    List,
    /// Show one resource (or all) as recorded, secrets masked.
    Show { id: Option<String> },
    /// List past applies and destroys, or show one.
    History { revision: Option<u64> },
    /// Remove the stack's lease, whoever holds it (an unreadable one too).
    Unlock,
    /// Verify the stored state: journal, snapshot, lease, history and file permissions.
    /// Exit 1 when something stops commands from working.
    Check,
    /// Fix what `state check` reports as repairable, without guessing; says what it dropped.
    Repair,
}

#[derive(Debug, Args, Clone)]
pub struct RunArgs {
    /// The KCL program declaring the operations (`import kusion.ops`).
    pub file: Option<PathBuf>,
    /// A program argument, read with option("key") (repeatable).
    #[arg(short = 'D', long = "argument", value_name = "KEY=VALUE")]
    pub args: Vec<String>,
    /// Do not ask for confirmation.
    #[arg(short = 'y', long)]
    pub yes: bool,
    /// Show the plan (checked against the clusters) and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Run the resolved targets even when the program reports unresolved subjects.
    #[arg(long)]
    pub partial: bool,
    /// List the recorded runs instead.
    #[arg(long, conflicts_with_all = ["file", "dry_run"])]
    pub history: bool,
    /// How many targets are checked at once before the run.
    #[arg(long, default_value_t = 16)]
    pub concurrency: usize,
    /// Let a run through a denying policy rule: `RULE=reason` (the reason is recorded).
    #[arg(long = "policy-exempt", value_name = "RULE=REASON")]
    pub policy_exempt: Vec<String>,
    /// When another run or an apply holds the stack, wait up to this long for it (e.g. `2m`)
    /// instead of refusing at once (exit code 3).
    #[arg(long, value_parser = humantime::parse_duration, value_name = "DURATION")]
    pub wait_lock: Option<std::time::Duration>,
}
