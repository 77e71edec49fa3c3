//! The CMDB end to end: records loaded with the real `kusionctl cmdb import`, then a KCL program
//! calling `cmdb.lookup_hosts([...])` evaluated with kusionctl's plugin adapter over the `cmdb`
//! plugin as the plugin host loads it when installed from this checkout's build (the cdylib, not
//! the crate linked in).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use kusion_kernel::plugin::manifest::{self, Manifest};
use kusion_kernel::plugin::{LoadedPlugins, PluginConfig, PluginSettings, Source, Status};
use serde_json::{Value, json};

/// `target/<profile>/`, holding `kusionctl` and the plugin cdylibs (built by `cargo build
/// --workspace`, which `scripts/test.sh` runs before the tests).
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().parent().unwrap().to_path_buf();
    for file in ["kusionctl", "libkusion_cmdb.so"] {
        assert!(
            dir.join(file).is_file(),
            "{} is missing: build the workspace first (cargo build --workspace)",
            dir.join(file).display()
        );
    }
    dir
}

fn kusionctl(home: &Path, args: &[&str]) -> Output {
    kusionctl_env(home, args, &[])
}

fn kusionctl_env(home: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(profile_dir().join("kusionctl"));
    cmd.args(args)
        .current_dir(home)
        .env("HOME", home)
        .env_remove("KUSION_PLUGIN_PATH")
        .env_remove("KUSION_CONFIG")
        .env_remove("KUSION_CMDB_URL")
        .stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The plugins as kusionctl loads them from this checkout, with the cmdb plugin pointed at `url`.
fn load_cmdb(url: &str) -> LoadedPlugins {
    load("cmdb", json!({ "url": url }), "libkusion_cmdb.so")
}

/// Only plugin `name`, installed from its in-repo manifest and this checkout's build of `file`
/// into a plugin folder, configured with `config`.
fn load(name: &str, plugin_config: Value, file: &str) -> LoadedPlugins {
    let checkout = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let manifest_path = ["plugins/cmdb", "examples/cmdb-csv-lookup"]
        .iter()
        .map(|dir| checkout.join(dir).join(manifest::MANIFEST_FILE))
        .find(|m| Manifest::load(m).is_ok_and(|m| m.name == name))
        .unwrap_or_else(|| panic!("no in-repo manifest of plugin {name}"));
    let manifest = Manifest::load(&manifest_path).unwrap();
    let dir = tempfile::tempdir().unwrap();
    manifest::install(dir.path(), &manifest, &profile_dir().join(file)).unwrap();
    let mut config = PluginConfig {
        path: vec![dir.path().to_path_buf()],
        default_dirs: false,
        only: Some(vec![name.into()]),
        ..Default::default()
    };
    config.settings.insert(
        name.into(),
        PluginSettings {
            config: plugin_config,
            ..Default::default()
        },
    );
    let plugins = kusion_kernel::plugin::load_plugins(&config);
    let entry = plugins
        .entries
        .iter()
        .find(|e| e.name == name)
        .unwrap_or_else(|| panic!("the {name} plugin's manifest is discovered"));
    assert_eq!(entry.status, Status::Loaded, "{entry:?}");
    assert_eq!(entry.source, Source::Configured);
    assert!(
        entry.file.as_ref().is_some_and(|f| f.ends_with(file)),
        "{entry:?}"
    );
    // Loaded: the library stays mapped after its folder is gone.
    plugins
}

const PROGRAM: &str = r#"import kcl_plugin.cmdb

_hosts = option("hosts", type="str", required=True).split(",")
_records = cmdb.lookup_hosts(_hosts)

targets = [{
    cluster = r.cluster
    id = "v1:Pod:${r.namespace}:${r.pod}"
    app = r.app
} for r in _records if r.found]
unknown = [r.host for r in _records if not r.found]
"#;

fn eval(dir: &Path, plugins: &LoadedPlugins, hosts: &str) -> Result<Value, String> {
    let file = dir.join("AppRecovery.k");
    std::fs::write(&file, PROGRAM).unwrap();
    let options = kusion_kcl::RunOptions {
        work_dir: Some(dir.to_path_buf()),
        args: vec![("hosts".into(), hosts.into())],
        plugin: Some(kusionctl::kcl_plugins::plugin_hook(plugins)),
        json: true,
        ..Default::default()
    };
    kusion_kcl::run_full(&[file], &options)
        .map(|o| serde_json::from_str(&o.text).unwrap())
        .map_err(|e| e.to_string())
}

const RECORDS: &str = r#"[
  {"host": "web-7d9f-a", "cluster": "east", "namespace": "shop", "pod": "web-7d9f-a",
   "workload": "web", "workload_kind": "Deployment", "app": "web"},
  {"host": "api-5c4b-b", "cluster": "west", "namespace": "pay", "pod": "api-5c4b-b",
   "workload": "api", "workload_kind": "Deployment", "app": "api"}
]"#;

fn import_and_lookup(url: &str) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("hosts.json"), RECORDS).unwrap();
    let out = kusionctl(
        dir.path(),
        &["cmdb", "import", "hosts.json", "--cmdb", url, "-o", "json"],
    );
    assert!(out.status.success(), "{}", text(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["inserted"], 2, "{report}");
    assert_eq!(report["hosts"], 2, "{report}");

    let plugins = load_cmdb(url);
    let v = eval(dir.path(), &plugins, "web-7d9f-a,ghost-1,api-5c4b-b").unwrap();
    assert_eq!(
        v["targets"],
        json!([
            {"cluster": "east", "id": "v1:Pod:shop:web-7d9f-a", "app": "web"},
            {"cluster": "west", "id": "v1:Pod:pay:api-5c4b-b", "app": "api"},
        ])
    );
    assert_eq!(v["unknown"], json!(["ghost-1"]));

    // The same look-up from the command line, as an operator would check it.
    let out = kusionctl(
        dir.path(),
        &["cmdb", "lookup", "api-5c4b-b", "ghost-1", "--cmdb", url],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("no: not found"), "{}", text(&out));
}

#[test]
fn kcl_program_looks_up_hosts_in_a_sqlite_cmdb_through_the_loaded_plugin() {
    let dir = tempfile::tempdir().unwrap();
    import_and_lookup(&format!(
        "sqlite://{}",
        dir.path().join("cmdb.db").display()
    ));
}

#[test]
fn kcl_program_looks_up_hosts_in_a_postgres_cmdb_through_the_loaded_plugin() {
    let pg = kusion_pg_harness::PgServer::start()
        .unwrap_or_else(|e| panic!("the PostgreSQL test server must start: {e}"));
    import_and_lookup(&pg.create_database("cmdb").unwrap());
}

#[test]
fn an_unreachable_cmdb_fails_the_program_at_the_call() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = load_cmdb(&format!(
        "sqlite://{}",
        dir.path().join("never-imported.db").display()
    ));
    let err = eval(dir.path(), &plugins, "web-7d9f-a").unwrap_err();
    assert!(err.contains("AppRecovery.k:4:"), "{err}");
    assert!(
        err.contains("kcl_plugin.cmdb.lookup_hosts")
            && err.contains("plugin `cmdb` failed (Unavailable")
            && err.contains("never-imported.db")
            && err.contains("does not exist"),
        "{err}"
    );

    let out = kusionctl(
        dir.path(),
        &["cmdb", "import", "missing.csv", "--cmdb", "mysql://db"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("missing.csv"), "{}", text(&out));
}

#[test]
fn the_sdk_guide_example_backend_serves_the_same_program() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("hosts.csv");
    std::fs::write(
        &csv,
        "host,cluster,namespace,pod,app\nweb-7d9f-a,east,shop,web-7d9f-a,web\napi-5c4b-b,west,pay,api-5c4b-b,api\n",
    )
    .unwrap();
    assert!(profile_dir().join("libcmdb_csv_lookup.so").is_file());
    let plugins = load("cmdb_csv", json!({ "path": csv }), "libcmdb_csv_lookup.so");
    let file = dir.path().join("main.k");
    std::fs::write(
        &file,
        "import kcl_plugin.cmdb_csv as cmdb\n\n_r = cmdb.lookup_hosts([\"api-5c4b-b\", \"ghost-1\"])\nfound = [r.cluster for r in _r if r.found]\nunknown = [r.host for r in _r if not r.found]\nweb = cmdb.hosts_of_app(\"web\")\n",
    )
    .unwrap();
    let options = kusion_kcl::RunOptions {
        work_dir: Some(dir.path().to_path_buf()),
        plugin: Some(kusionctl::kcl_plugins::plugin_hook(&plugins)),
        json: true,
        ..Default::default()
    };
    let out = kusion_kcl::run_full(&[file], &options).unwrap_or_else(|e| panic!("{e}"));
    let v: Value = serde_json::from_str(&out.text).unwrap();
    assert_eq!(v["found"], json!(["west"]));
    assert_eq!(v["unknown"], json!(["ghost-1"]));
    assert_eq!(v["web"], json!(["web-7d9f-a"]));
}

#[test]
fn the_cmdb_is_chosen_by_flag_config_file_environment_then_default() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    let db = |name: &str| format!("sqlite://{}", home.join(name).display());
    std::fs::write(
        home.join("hosts.csv"),
        "host,cluster,namespace\nweb-1,east,shop\n",
    )
    .unwrap();
    let where_ = |o: &Output| -> String {
        assert!(o.status.success(), "{}", text(o));
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        v["cmdb"].as_str().unwrap().to_string()
    };
    // Default: ~/.kusion/cmdb.db.
    let out = kusionctl(home, &["cmdb", "import", "hosts.csv", "-o", "json"]);
    assert_eq!(
        where_(&out),
        format!("sqlite://{}", home.join(".kusion/cmdb.db").display())
    );
    // The environment beats the default.
    let out = kusionctl_env(
        home,
        &["cmdb", "import", "hosts.csv", "-o", "json"],
        &[("KUSION_CMDB_URL", &db("env.db"))],
    );
    assert_eq!(where_(&out), db("env.db"));
    // The configuration file beats the environment.
    std::fs::write(
        home.join(".kusion/config.toml"),
        format!(
            "[plugins.settings.cmdb]\nconfig = {{ url = \"{}\" }}\n",
            db("file.db")
        ),
    )
    .unwrap();
    let out = kusionctl_env(
        home,
        &["cmdb", "import", "hosts.csv", "-o", "json"],
        &[("KUSION_CMDB_URL", &db("env.db"))],
    );
    assert_eq!(where_(&out), db("file.db"));
    // The flag beats everything.
    let out = kusionctl(
        home,
        &[
            "cmdb",
            "import",
            "hosts.csv",
            "--cmdb",
            &db("flag.db"),
            "-o",
            "json",
        ],
    );
    assert_eq!(where_(&out), db("flag.db"));
    // A bad URL in the configuration refuses the plugin, and the command says why.
    std::fs::write(
        home.join(".kusion/config.toml"),
        "[plugins.settings.cmdb]\nconfig = { url = \"mysql://db\" }\n",
    )
    .unwrap();
    let out = kusionctl(home, &["cmdb", "lookup", "web-1"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("found but not loaded") && text(&out).contains("mysql://db"),
        "{}",
        text(&out)
    );
}
