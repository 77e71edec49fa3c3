//! Command-line arguments.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(
    name = "kusionctl",
    version = crate::version::SHORT,
    about = "Preview, apply, watch and destroy a stack's resources"
)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// Tables and text for people.
    #[default]
    Human,
    /// One JSON document (camelCase keys, ISO 8601 times).
    Json,
    /// YAML (where the human output is YAML already: `compile`, `state show`, `state history N`).
    Yaml,
}

/// Options of every command, and the per-command ones copied here after parsing (see
/// [`Cli::resolve`]) so command code reads one place.
#[derive(Debug, Args)]
pub struct Global {
    /// Work in this directory (a stack folder) instead of the current one.
    #[arg(short = 'C', long = "workdir", global = true, value_name = "DIR")]
    pub workdir: Option<PathBuf>,
    /// More log output (-v, -vv, -vvv).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Never use colour.
    #[arg(long, global = true)]
    pub no_color: bool,
    #[arg(skip)]
    pub config: Option<PathBuf>,
    #[arg(skip)]
    pub set: Vec<String>,
    #[arg(skip)]
    pub state_dir: Option<PathBuf>,
    #[arg(skip = String::from("local"))]
    pub state_backend: String,
    #[arg(skip)]
    pub output: Output,
    #[arg(skip)]
    pub runtime_config: Option<PathBuf>,
}

/// `-o`: on commands that print a result.
#[derive(Debug, Args, Clone, Default)]
pub struct OutputArg {
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value = "human")]
    pub output: Output,
}

/// `-o` for a command group (`state`, `plugin`, `cmdb`): given before or after the subcommand.
#[derive(Debug, Args, Clone, Default)]
pub struct GroupOutputArg {
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value = "human", global = true)]
    pub output: Output,
}

/// Where the kusion configuration comes from: for commands that load plugins or policies.
#[derive(Debug, Args, Clone, Default)]
pub struct ConfigArgs {
    /// The kusion configuration file (TOML; default ~/.kusion/config.toml when it exists).
    #[arg(long, env = "KUSION_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Override one configuration key, e.g. --set plugins.default_dirs=false.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
}

/// [`ConfigArgs`] for a command group.
#[derive(Debug, Args, Clone, Default)]
pub struct GroupConfigArgs {
    /// The kusion configuration file (TOML; default ~/.kusion/config.toml when it exists).
    #[arg(long, env = "KUSION_CONFIG", value_name = "FILE", global = true)]
    pub config: Option<PathBuf>,
    /// Override one configuration key, e.g. --set plugins.default_dirs=false.
    #[arg(long = "set", value_name = "KEY=VALUE", global = true)]
    pub set: Vec<String>,
}

/// Where a stack's state lives and how its runtimes are set up: for commands that plan or change.
#[derive(Debug, Args, Clone)]
pub struct StackArgs {
    /// Where the stack's state lives (default: <workdir>/.kusion/state).
    #[arg(long, env = "KUSION_STATE_DIR", value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Where state lives: `local` (the state dir), `postgres://...[?stack=NAME]` or
    /// `s3://bucket/prefix[?endpoint=URL&region=R&stack=NAME]`. Remote stacks are named
    /// <project>/<stack> after the stack folder unless `stack=` says otherwise.
    #[arg(
        long,
        env = "KUSION_STATE_BACKEND",
        default_value = "local",
        value_name = "URL"
    )]
    pub state_backend: String,
    /// Runtime configuration: a YAML or JSON mapping from runtime name to its settings.
    #[arg(long, env = "KUSION_RUNTIME_CONFIG", value_name = "FILE")]
    pub runtime_config: Option<PathBuf>,
    #[command(flatten)]
    pub config: ConfigArgs,
    #[command(flatten)]
    pub output: OutputArg,
}

/// Where the state lives, for `state`'s subcommands.
#[derive(Debug, Args, Clone)]
pub struct StateArgs {
    /// Where the stack's state lives (default: <workdir>/.kusion/state).
    #[arg(long, env = "KUSION_STATE_DIR", value_name = "DIR", global = true)]
    pub state_dir: Option<PathBuf>,
    /// Where state lives: `local` (the state dir), `postgres://...[?stack=NAME]` or
    /// `s3://bucket/prefix[?endpoint=URL&region=R&stack=NAME]`.
    #[arg(
        long,
        env = "KUSION_STATE_BACKEND",
        default_value = "local",
        value_name = "URL",
        global = true
    )]
    pub state_backend: String,
    #[command(flatten)]
    pub output: GroupOutputArg,
}

impl Cli {
    /// Copy the chosen command's options into [`Global`] and check that its `-o` is one it can
    /// print; a format it cannot print is a usage error (exit 2), never a silent fallback.
    pub fn resolve(&mut self) -> Result<(), String> {
        use Output::{Human, Json, Yaml};
        let g = &mut self.global;
        let config_output = |g: &mut Global, c: &ConfigArgs, output: Output| {
            g.config = c.config.clone();
            g.set = c.set.clone();
            g.output = output;
        };
        let stack = |g: &mut Global, s: &StackArgs| {
            g.state_dir = s.state_dir.clone();
            g.state_backend = s.state_backend.clone();
            g.runtime_config = s.runtime_config.clone();
            config_output(g, &s.config, s.output.output);
        };
        // The long-running front ends: plugin settings and runtime configuration, no `-o`.
        #[cfg(feature = "controller")]
        let front_end = |g: &mut Global, config: &ConfigArgs, runtime_config: &Option<PathBuf>| {
            g.config = config.config.clone();
            g.set = config.set.clone();
            g.runtime_config = runtime_config.clone();
            &[] as &[Output]
        };
        let allowed: &[Output] = match &self.command {
            Command::Kcl { .. } | Command::Completion { .. } | Command::Manpages { .. } => &[],
            Command::Preview { stack: s, .. }
            | Command::Apply { stack: s, .. }
            | Command::Destroy { stack: s, .. } => {
                stack(g, s);
                &[Human, Json]
            }
            Command::Run(args) => {
                stack(g, &args.stack);
                &[Human, Json]
            }
            Command::Rollback { stack: s, .. }
            | Command::Drift { stack: s, .. }
            | Command::Import { stack: s, .. } => {
                stack(g, s);
                &[Human, Json]
            }
            Command::Graph { config, output, .. } => {
                config_output(g, config, output.output);
                &[Human, Json]
            }
            Command::State { state, command } => {
                g.state_dir = state.state_dir.clone();
                g.state_backend = state.state_backend.clone();
                g.output = state.output.output;
                match command {
                    StateCommand::Show { .. } | StateCommand::History { revision: Some(_) } => {
                        &[Human, Json, Yaml]
                    }
                    StateCommand::Unlock => &[Human],
                    _ => &[Human, Json],
                }
            }
            Command::Compile { config, output, .. } => {
                config_output(g, config, output.output);
                &[Human, Json, Yaml]
            }
            Command::Init { output, .. } => {
                g.output = output.output;
                &[Human, Json]
            }
            Command::Plugin { command } => match command {
                PluginCommand::List { config, output } => {
                    config_output(g, config, output.output);
                    &[Human, Json]
                }
                _ => &[],
            },
            Command::Cmdb { config, output, .. } => {
                g.config = config.config.clone();
                g.set = config.set.clone();
                g.output = output.output;
                &[Human, Json]
            }
            Command::Version { config, output } => {
                config_output(g, config, output.output);
                &[Human, Json]
            }
            #[cfg(feature = "controller")]
            Command::Controller(args) => front_end(g, &args.config, &args.runtime_config),
            #[cfg(feature = "server")]
            Command::Server(args) => front_end(g, &args.config, &args.runtime_config),
            #[cfg(feature = "server")]
            Command::Worker(args) => front_end(g, &args.config, &args.runtime_config),
        };
        let output = self.global.output;
        if output != Human && !allowed.contains(&output) {
            let name = |o: &Output| {
                o.to_possible_value()
                    .map(|v| v.get_name().to_string())
                    .unwrap_or_default()
            };
            let formats: Vec<String> = allowed.iter().map(name).collect();
            return Err(if formats.is_empty() {
                format!("-o {}: this command has no output formats", name(&output))
            } else {
                format!(
                    "-o {}: this command prints {}",
                    name(&output),
                    formats.join(" or ")
                )
            });
        }
        Ok(())
    }
}

/// `-f`: the spec of a command that plans from one.
#[derive(Debug, Args, Clone)]
pub struct SpecArg {
    /// The spec file (YAML or JSON; `resources:` or a bare list); in a stack folder the stack
    /// is compiled instead.
    #[arg(long = "spec", short = 'f')]
    pub spec: Option<PathBuf>,
}

#[derive(Debug, Args, Clone)]
pub struct PlanArgs {
    /// Plan only this resource and what it needs (repeatable; `*` and `?` match any ID part):
    /// on preview and apply what it depends on, on destroy what depends on it. The rest is not
    /// planned, and not compared with what is live.
    #[arg(long = "target", value_name = "ID")]
    pub target: Vec<String>,
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

/// The flags `apply` and `rollback` share: confirmation, dry run, readiness watch, detail.
#[derive(Debug, Args, Clone)]
pub struct ApplyFlags {
    /// Do not ask for confirmation.
    #[arg(short = 'y', long)]
    pub yes: bool,
    /// Only show the plan.
    #[arg(long)]
    pub dry_run: bool,
    /// Wait until every applied resource is ready, showing a live table.
    #[arg(short = 'w', long)]
    pub watch: bool,
    /// How long to wait for readiness per resource with --watch.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "5m")]
    pub watch_timeout: std::time::Duration,
    /// Show the field-level diff of every changed resource.
    #[arg(short = 'd', long)]
    pub detail: bool,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// The KCL tool: `kusionctl kcl run|fmt|parse|import ...` (same flags as `kcl`).
    #[command(disable_help_flag = true)]
    Kcl {
        /// Arguments of the `kcl` tool (`kusionctl kcl --help` shows them).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
        args: Vec<String>,
    },
    /// Show what apply would change.
    Preview {
        #[command(flatten)]
        spec: SpecArg,
        #[command(flatten)]
        plan: PlanArgs,
        #[command(flatten)]
        stack: StackArgs,
        /// Show the field-level diff of every changed resource.
        #[arg(short = 'd', long)]
        detail: bool,
        /// Exit 0 when nothing would change, 2 when something would, 1 on an error (as
        /// terraform's plan); 4 still means blocked by policy.
        #[arg(long)]
        detailed_exitcode: bool,
    },
    /// Converge the live resources to the spec.
    Apply {
        #[command(flatten)]
        spec: SpecArg,
        #[command(flatten)]
        plan: PlanArgs,
        #[command(flatten)]
        stack: StackArgs,
        #[command(flatten)]
        apply: ApplyFlags,
    },
    /// Delete every resource recorded in state (with --target, those named and their dependents).
    Destroy {
        #[command(flatten)]
        spec: SpecArg,
        #[command(flatten)]
        plan: PlanArgs,
        #[command(flatten)]
        stack: StackArgs,
        /// Do not ask for confirmation.
        #[arg(short = 'y', long)]
        yes: bool,
    },
    /// Return to the spec an earlier release applied: a normal plan of that spec against what
    /// is live, previewed and confirmed like apply, recorded as a new release naming its source.
    Rollback {
        /// The release to return to (`kusionctl state history` lists them); default: the last
        /// successful apply before the latest change.
        #[arg(long, value_name = "REVISION")]
        to: Option<u64>,
        #[command(flatten)]
        plan: PlanArgs,
        #[command(flatten)]
        stack: StackArgs,
        #[command(flatten)]
        apply: ApplyFlags,
    },
    /// Compare what state recorded with what is live, without the spec: field-level drift per
    /// resource. Exit 0 in sync, 2 drifted or missing, 1 on an error. In a project folder or
    /// Konfig root, every stack below with its drift status.
    Drift {
        /// Fields never compared (e.g. spec.replicas).
        #[arg(long = "ignore-fields", value_delimiter = ',')]
        ignore_fields: Vec<String>,
        /// How many resources are read at once.
        #[arg(long, env = "KUSION_EXEC_MAX_CONCURRENT", default_value_t = 10)]
        concurrency: usize,
        /// Time limit per runtime call (e.g. 30s, 2m).
        #[arg(long, value_parser = humantime::parse_duration)]
        timeout: Option<std::time::Duration>,
        #[command(flatten)]
        stack: StackArgs,
    },
    /// Adopt an existing live object into state as the spec's resource ID, without changing
    /// it; `preview` then shows what the next apply would change. With --terraform-state,
    /// adopt everything a Terraform state records and write the equivalent spec.
    Import {
        /// The resource's ID in the stack's spec.
        #[arg(required_unless_present = "terraform_state")]
        id: Option<String>,
        /// The runtime's identifier of the live object when the ID does not name it (a
        /// Terraform import ID such as a bucket name or `sg-0123`).
        #[arg(long, value_name = "X", conflicts_with = "terraform_state")]
        live_id: Option<String>,
        /// Migrate from Terraform: a state file (format v4), `s3://BUCKET/KEY[?endpoint=URL&
        /// region=R]` (the S3 backend's object) or `postgres://...` (the pg backend; `?workspace=`
        /// default `default`, `&schema=` default `terraform_remote_state`).
        #[arg(long, value_name = "SOURCE", conflicts_with = "id")]
        terraform_state: Option<String>,
        /// With --terraform-state: provider configuration blocks, a YAML or JSON mapping from a
        /// provider's local name (`aws`, or `aws.west` for an alias) to its block (region,
        /// credentials, endpoints), kept as each resource's `providerMeta`.
        #[arg(long, value_name = "FILE", requires = "terraform_state")]
        provider_config: Option<PathBuf>,
        /// With --terraform-state: a provider's version when no `.terraform.lock.hcl` beside the
        /// state names it: `hashicorp/aws=5.100.0` (repeatable).
        #[arg(long, value_name = "SOURCE=VERSION", requires = "terraform_state")]
        provider_version: Vec<String>,
        /// With --terraform-state: where to write the spec of the adopted resources (default:
        /// standard output).
        #[arg(long, value_name = "FILE", requires = "terraform_state")]
        spec_out: Option<PathBuf>,
        /// With --terraform-state: the spec's format.
        #[arg(long, value_enum, default_value = "yaml", requires = "terraform_state")]
        spec_format: SpecFormat,
        #[command(flatten)]
        spec: SpecArg,
        /// Time limit per runtime call (e.g. 30s, 2m).
        #[arg(long, value_parser = humantime::parse_duration)]
        timeout: Option<std::time::Duration>,
        #[command(flatten)]
        stack: StackArgs,
    },
    /// Print the dependency graph.
    Graph {
        /// The spec file (YAML or JSON); in a stack folder the stack is compiled instead.
        #[arg(long = "spec", short = 'f')]
        spec: Option<PathBuf>,
        /// How to draw the graph: `text` (indented) or `dot` (Graphviz). `-o json` prints nodes
        /// and edges instead.
        #[arg(long, value_enum, default_value = "text")]
        format: GraphFormat,
        #[command(flatten)]
        config: ConfigArgs,
        #[command(flatten)]
        output: OutputArg,
    },
    /// Inspect or repair the stack's state.
    State {
        #[command(flatten)]
        state: StateArgs,
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
        #[command(flatten)]
        config: ConfigArgs,
        #[command(flatten)]
        output: OutputArg,
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
        #[command(flatten)]
        output: OutputArg,
    },
    /// Inspect plugins.
    Plugin {
        #[command(subcommand)]
        command: PluginCommand,
    },
    /// Load and query the CMDB that KCL programs read through `kcl_plugin.cmdb`.
    Cmdb {
        #[command(flatten)]
        config: GroupConfigArgs,
        #[command(flatten)]
        output: GroupOutputArg,
        #[command(subcommand)]
        command: crate::cmdb::CmdbCommand,
    },
    /// Show kusionctl's version and commit, the plugin ABI and WIT versions it speaks, and the
    /// version and ABI of every plugin found.
    Version {
        #[command(flatten)]
        config: ConfigArgs,
        #[command(flatten)]
        output: OutputArg,
    },
    /// GitOps: keep `Stack` objects (stacks.kusion.io) converged to what Git says; `controller
    /// crd` prints the CustomResourceDefinition.
    #[cfg(feature = "controller")]
    Controller(crate::cmd::controller::ControllerArgs),
    /// Serve the Konfig checkout in the current folder over a REST API: stacks, compile,
    /// previews, applies and destroys with approval, progress events, history. With no options:
    /// 127.0.0.1, the stacks' own state, an in-process worker and a one-time admin token.
    #[cfg(feature = "server")]
    Server(crate::cmd::server::ServerArgs),
    /// Run operations queued by `kusionctl server --queue postgres://...` (any number of
    /// workers on any number of machines share one queue), on the Konfig checkout in the current
    /// folder.
    #[cfg(feature = "server")]
    Worker(crate::cmd::server::WorkerArgs),
    /// Print a shell completion script: `source <(kusionctl completion bash)`.
    Completion {
        /// The shell to complete for.
        shell: clap_complete::Shell,
    },
    /// Write the man pages of kusionctl and kcl into DIR (scripts/install.sh uses this).
    #[command(hide = true)]
    Manpages {
        /// The folder for the `*.1` pages (created if missing).
        dir: PathBuf,
    },
}

#[derive(Debug, Subcommand)]
pub enum PluginCommand {
    /// Show every plugin found: kind, version, ABI, capabilities, and why any was refused.
    List {
        #[command(flatten)]
        config: ConfigArgs,
        #[command(flatten)]
        output: OutputArg,
    },
    /// Make a publisher key pair: the private key (PKCS#8) goes to KEY_FILE (mode 0600); the
    /// public key to give operators for `[plugins.trusted_keys]` is printed.
    Keygen {
        /// Where to write the private key (must not exist yet).
        key_file: PathBuf,
    },
    /// Run the runtime conformance suite against a runtime plugin (a native library or a `.wasm`
    /// component): create, read, update, delete, absent, error and timeout behaviour checked
    /// against the contract. It changes things for real: point its configuration at a scratch
    /// target. Exit 1 when a check fails.
    Test {
        /// The plugin file: `lib<name>.so` (native) or `<name>.wasm` (WASM component).
        path: PathBuf,
        /// The sample (YAML or JSON): `config`, and the `create`, `update` and `invalid`
        /// resources (see `sdk/README.md`).
        #[arg(long)]
        sample: PathBuf,
        /// WASM: map the guest directory GUEST to the host directory HOST (repeatable).
        #[arg(long = "dir", value_name = "GUEST=HOST")]
        dirs: Vec<String>,
        /// WASM: granted directories are writable.
        #[arg(long)]
        writable: bool,
        /// WASM: allow outbound network connections.
        #[arg(long)]
        network: bool,
        /// WASM: allow outgoing HTTP (wasi:http) to HOST:PORT (repeatable); requests to any
        /// other host are denied.
        #[arg(long = "http", value_name = "HOST:PORT")]
        http: Vec<String>,
        /// WASM: the wall-clock limit per call, in milliseconds.
        #[arg(long, value_name = "MS")]
        wall_clock_ms: Option<u64>,
    },
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

/// How `import --terraform-state` writes the spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SpecFormat {
    /// `resources:` as `kusionctl preview -f` reads it.
    Yaml,
    /// A KCL file whose output is that spec (`resources = [...]`), to keep in a stack.
    Kcl,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GraphFormat {
    /// An indented tree of dependencies.
    Text,
    /// Graphviz `dot` source.
    Dot,
}

#[derive(Debug, Subcommand)]
pub enum StateCommand {
    /// List the resources in state.
    List,
    /// Show one resource (or all) as recorded, secrets masked.
    Show {
        /// The resource ID (e.g. `apps/v1:Deployment:demo:web`); all resources when omitted.
        id: Option<String>,
    },
    /// List past releases (applies, rollbacks, destroys, imports and state edits), or show one.
    History {
        /// The release to show in full; the list of releases when omitted.
        revision: Option<u64>,
    },
    /// Remove the stack's lease, whoever holds it (an unreadable one too).
    Unlock,
    /// Verify the stored state: journal, snapshot, lease, history and file permissions.
    /// Exit 1 when something stops commands from working.
    Check,
    /// Fix what `state check` reports as repairable, without guessing; says what it dropped.
    Repair,
    /// Forget resources without deleting them: they stay live, and kusion no longer manages
    /// them (an apply whose spec still holds one adopts or recreates it).
    Rm {
        /// Resource IDs (or state keys `id@target`).
        #[arg(required = true)]
        ids: Vec<String>,
    },
    /// Rename a resource in state (the live object is untouched), in one journaled step; with
    /// --to-stack, hand it to another stack on the same kind of backend.
    Mv {
        /// The resource's ID (or state key) now.
        from: String,
        /// Its new ID (the same ID, for a plain move to another stack).
        to: String,
        /// The stack folder to move it to (its own state settings apply). Both stacks are
        /// locked while it moves; an interrupted move is finished by running it again.
        #[arg(long, value_name = "DIR")]
        to_stack: Option<PathBuf>,
    },
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
    #[command(flatten)]
    pub stack: StackArgs,
}
