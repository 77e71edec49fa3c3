//! `kusionctl plugin test PATH --sample FILE`: load one runtime plugin (native or WASM) and run
//! the kernel's conformance suite against it, one line per check.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use kusion_kernel::plugin::conformance::{self, Sample, Verdict};
use kusion_kernel::plugin::{WasmGrants, WasmHost, WasmLimits, load_native_runtime};
use kusion_sdk::runtime::Runtime;

use crate::{UsageError, exit};

pub(crate) struct TestArgs {
    pub path: PathBuf,
    pub sample: PathBuf,
    pub dirs: Vec<String>,
    pub writable: bool,
    pub network: bool,
    pub http: Vec<String>,
    pub wall_clock_ms: Option<u64>,
}

pub(crate) fn run(args: &TestArgs) -> Result<u8> {
    let text = std::fs::read_to_string(&args.sample)
        .with_context(|| format!("reading the sample {}", args.sample.display()))?;
    // YAML is a superset of JSON: one parser takes both.
    let sample: Sample = serde_yaml_ng::from_str(&text)
        .with_context(|| format!("{}: not a conformance sample", args.sample.display()))?;
    let runtime = load(args)?;
    let info = runtime.describe();
    println!(
        "Testing runtime {} {} (ABI {}) from {}",
        info.name,
        info.version,
        info.abi,
        args.path.display()
    );
    let report = conformance::run(runtime, &sample);
    let (mut passed, mut failed, mut skipped) = (0, 0, 0);
    for check in &report.checks {
        match &check.verdict {
            Verdict::Passed => {
                passed += 1;
                println!("ok    {:<14} {}", check.name, check.expects);
            }
            Verdict::Failed(why) => {
                failed += 1;
                println!("FAIL  {:<14} {}\n      {why}", check.name, check.expects);
            }
            Verdict::Skipped(why) => {
                skipped += 1;
                println!("skip  {:<14} {why}", check.name);
            }
        }
    }
    println!("{passed} passed, {failed} failed, {skipped} skipped");
    Ok(if report.passed() {
        exit::OK
    } else {
        exit::FAILED
    })
}

fn load(args: &TestArgs) -> Result<Arc<dyn Runtime>> {
    let is_wasm = args.path.extension().is_some_and(|e| e == "wasm");
    if !is_wasm {
        if !args.dirs.is_empty()
            || args.writable
            || args.network
            || !args.http.is_empty()
            || args.wall_clock_ms.is_some()
        {
            return Err(UsageError(
                "--dir, --writable, --network, --http and --wall-clock-ms apply to WASM plugins only"
                    .into(),
            )
            .into());
        }
        return Ok(load_native_runtime(&args.path)?);
    }
    let mut grants = WasmGrants {
        writable: args.writable,
        network: args.network,
        hosts: args.http.clone(),
        ..WasmGrants::default()
    };
    for dir in &args.dirs {
        let Some((guest, host)) = dir.split_once('=') else {
            return Err(UsageError(format!("--dir {dir}: expected GUEST=HOST")).into());
        };
        grants.dirs.insert(guest.to_string(), PathBuf::from(host));
    }
    let mut limits = WasmLimits::default();
    if let Some(ms) = args.wall_clock_ms {
        limits.wall_clock_ms = ms;
    }
    // The author testing a plugin is also the operator granting it: what the flags grant is
    // what the plugin gets.
    let module = WasmHost::new()?.compile(&args.path)?;
    Ok(module.runtime(grants, limits)?)
}
