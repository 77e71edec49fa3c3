//! Per-call overhead of the plugin host: one `FunctionPlugin::call("echo", [payload])` through a
//! native `cdylib` and through a WASM component, with ~1 KiB and ~100 KiB JSON payloads, next to
//! the same call on an in-process trait object (no boundary) as the baseline; and one warm
//! runtime call (a dry-run `apply` of a ~1 KiB resource, which touches nothing outside the
//! plugin) through the native example runtime and through the WASM runtime fixture; and the
//! start-up of a runtime, from its file to the first call (native `dlopen` against a WASM
//! component taken from the on-disk compiled cache), printed as a table after the benchmarks.
//!
//! Run: `cargo bench -p kusion-kernel --bench plugin_calls` (builds optimised fixtures first).
//! With `KUSION_BENCH_PYTHON_RUNTIME=<path of rabbitmq_runtime.wasm>` (built by
//! examples/rabbitmq-runtime/build.sh) the Python example runtime is measured too.
//! Times are the calling thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`), not wall time, so a busy
//! machine does not inflate them with time spent waiting for a core; every call runs on the
//! calling thread, so nothing is missed. The start-up table shows wall time next to it.

use std::hint::black_box;

use criterion::measurement::{Measurement, ValueFormatter};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use kusion_dev_plugins::fixtures::{self, Fixture};
use kusion_kernel::plugin::{NativeLibrary, WasmGrants, WasmHost, WasmLimits};
use kusion_sdk::function::{FunctionPlugin, FunctionPluginInfo};
use kusion_sdk::{ABI_VERSION, Map, PluginResult, Value};
use serde_json::json;

/// CPU time consumed by the calling thread.
struct ThreadCpu;

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec out-pointer and a clock every Linux kernel has.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

impl Measurement for ThreadCpu {
    type Intermediate = u64;
    type Value = u64;
    fn start(&self) -> u64 {
        thread_cpu_ns()
    }
    fn end(&self, started: u64) -> u64 {
        thread_cpu_ns().saturating_sub(started)
    }
    fn add(&self, a: &u64, b: &u64) -> u64 {
        a + b
    }
    fn zero(&self) -> u64 {
        0
    }
    fn to_f64(&self, value: &u64) -> f64 {
        *value as f64
    }
    fn formatter(&self) -> &dyn ValueFormatter {
        &CpuFormatter
    }
}

/// Prints nanoseconds of CPU time in the most readable unit.
struct CpuFormatter;

impl CpuFormatter {
    fn unit(typical: f64) -> (f64, &'static str) {
        match typical {
            t if t < 1e3 => (1.0, "ns cpu"),
            t if t < 1e6 => (1e-3, "µs cpu"),
            t if t < 1e9 => (1e-6, "ms cpu"),
            _ => (1e-9, "s cpu"),
        }
    }
}

impl ValueFormatter for CpuFormatter {
    fn scale_values(&self, typical: f64, values: &mut [f64]) -> &'static str {
        let (factor, unit) = Self::unit(typical);
        values.iter_mut().for_each(|v| *v *= factor);
        unit
    }
    fn scale_throughputs(
        &self,
        _: f64,
        throughput: &Throughput,
        values: &mut [f64],
    ) -> &'static str {
        match throughput {
            Throughput::Bytes(bytes) | Throughput::BytesDecimal(bytes) => {
                values
                    .iter_mut()
                    .for_each(|v| *v = *bytes as f64 / (*v / 1e9) / 1e6);
                "MB/s cpu"
            }
            Throughput::Elements(n) => {
                values.iter_mut().for_each(|v| *v = *n as f64 / (*v / 1e9));
                "elem/s cpu"
            }
        }
    }
    fn scale_for_machines(&self, _: &mut [f64]) -> &'static str {
        "ns"
    }
}

/// A JSON object of about `bytes` bytes when encoded: 64-character strings in an array.
fn payload(bytes: usize) -> Value {
    let item = "x".repeat(64);
    let items: Vec<Value> = (0..bytes / 67)
        .map(|_| Value::String(item.clone()))
        .collect();
    json!({ "items": items })
}

/// The baseline: the same echo as a plain trait object in this process.
struct InProcess;

impl FunctionPlugin for InProcess {
    fn describe(&self) -> FunctionPluginInfo {
        FunctionPluginInfo {
            module: "inproc".into(),
            version: "0".into(),
            abi: ABI_VERSION,
            functions: vec![],
            secret_stores: Vec::new(),
        }
    }
    fn configure(&self, _: &Value) -> PluginResult<()> {
        Ok(())
    }
    fn call(&self, _: &str, args: &[Value], _: &Map<String, Value>) -> PluginResult<Value> {
        Ok(args.first().cloned().unwrap_or(Value::Null))
    }
}

fn bench(c: &mut Criterion<ThreadCpu>) {
    let native = NativeLibrary::open(&fixtures::build_release(Fixture::NativeFunction))
        .unwrap()
        .function()
        .unwrap();
    let wasm = WasmHost::new()
        .unwrap()
        .compile(&fixtures::build_release(Fixture::WasmFunction))
        .unwrap()
        .function(WasmGrants::default(), WasmLimits::default())
        .unwrap();
    let inproc: std::sync::Arc<dyn FunctionPlugin> = std::sync::Arc::new(InProcess);
    let kwargs = Map::new();
    let mut group = c.benchmark_group("plugin_call_echo");
    for (label, size) in [("1KiB", 1024), ("100KiB", 100 * 1024)] {
        let args = vec![payload(size)];
        let encoded = serde_json::to_string(&args[0]).unwrap().len();
        group.throughput(Throughput::Bytes(encoded as u64));
        // What the JSON wire format alone costs: encode the call, decode it, encode the answer,
        // decode it, with no boundary in between.
        group.bench_with_input(
            BenchmarkId::new("json-wire-only", label),
            &args,
            |b, args| {
                b.iter(|| {
                    let call = kusion_sdk::abi::wire::CallRef {
                        function: "echo",
                        args,
                        kwargs: &kwargs,
                    };
                    let text = serde_json::to_string(black_box(&call)).unwrap();
                    let decoded: kusion_sdk::abi::wire::CallPayload =
                        serde_json::from_str(&text).unwrap();
                    let answer = serde_json::to_string(&decoded.args[0]).unwrap();
                    black_box(serde_json::from_str::<Value>(&answer).unwrap())
                })
            },
        );
        // The same trip in MessagePack, the encoding native plugins of ABI 1.1 use.
        group.bench_with_input(
            BenchmarkId::new("msgpack-wire-only", label),
            &args,
            |b, args| {
                b.iter(|| {
                    let call = kusion_sdk::abi::wire::CallRef {
                        function: "echo",
                        args,
                        kwargs: &kwargs,
                    };
                    let bytes = rmp_serde::to_vec_named(black_box(&call)).unwrap();
                    let decoded: kusion_sdk::abi::wire::CallPayload =
                        rmp_serde::from_slice(&bytes).unwrap();
                    let answer = rmp_serde::to_vec_named(&decoded.args[0]).unwrap();
                    black_box(rmp_serde::from_slice::<Value>(&answer).unwrap())
                })
            },
        );
        for (host, plugin) in [
            ("in-process", &inproc),
            ("native", &native),
            ("wasm", &wasm),
        ] {
            assert_eq!(plugin.call("echo", &args, &kwargs).unwrap(), args[0]);
            group.bench_with_input(BenchmarkId::new(host, label), &args, |b, args| {
                b.iter(|| black_box(plugin.call("echo", black_box(args), &kwargs).unwrap()))
            });
        }
    }
    group.finish();
}

/// A warm runtime call with a ~1 KiB resource: native `localfile` against the WASM `wasm-kv`.
/// A dry-run apply validates and answers the planned resource in both, without I/O, so the
/// difference is the boundary (JSON both ways, plus the sandbox's per-call budget for WASM).
fn runtime_call(c: &mut Criterion<ThreadCpu>) {
    use kusion_sdk::Resource;
    use kusion_sdk::runtime::{ApplyRequest, Runtime};

    let dir = tempfile::tempdir().unwrap();
    let native = NativeLibrary::open(&fixtures::build_release(Fixture::LocalFile))
        .unwrap()
        .runtime()
        .unwrap();
    native.configure(&json!({"root": dir.path()})).unwrap();
    let grants = WasmGrants {
        dirs: [("/data".to_string(), dir.path().to_path_buf())].into(),
        ..WasmGrants::default()
    };
    let wasm = WasmHost::new()
        .unwrap()
        .compile(&fixtures::build_release(Fixture::WasmRuntime))
        .unwrap()
        .runtime(grants, WasmLimits::default())
        .unwrap();
    let body = "x".repeat(1000);
    let request = |resource: Resource| ApplyRequest {
        prior: None,
        prior_private: None,
        planned: resource,
        dry_run: true,
        timeout: None,
    };
    let file = request(Resource::new(
        "file:a",
        "LocalFile",
        json!({"path": "a.txt", "content": body})
            .as_object()
            .cloned()
            .unwrap_or_default(),
    ));
    let kv = request(Resource::new(
        "kv:a",
        "WasmKv",
        json!({"key": "a", "value": body})
            .as_object()
            .cloned()
            .unwrap_or_default(),
    ));
    let mut runtimes = vec![("native", native, file), ("wasm", wasm, kv)];
    if let Some(python) = python_runtime() {
        // The Python example's dry-run validates and answers the plan without calling the API.
        let vhost = request(Resource::new(
            "rabbitmq:vhost:bench",
            "RabbitMQVhost",
            json!({"name": "bench", "description": body})
                .as_object()
                .cloned()
                .unwrap_or_default(),
        ));
        let runtime = WasmHost::new()
            .unwrap()
            .compile(&python)
            .unwrap()
            .runtime(WasmGrants::default(), WasmLimits::default())
            .unwrap();
        runtime.configure(&python_config()).unwrap();
        runtimes.push(("wasm-python", runtime, vhost));
    }
    let mut group = c.benchmark_group("runtime_apply_dry_run_1KiB");
    for (host, runtime, request) in &runtimes {
        let runtime: &dyn Runtime = runtime.as_ref();
        assert_eq!(runtime.apply(request).unwrap().resource, request.planned);
        group.bench_function(*host, |b| {
            b.iter(|| black_box(runtime.apply(black_box(request)).unwrap()))
        });
    }
    group.finish();
}

/// The Python example runtime, when `KUSION_BENCH_PYTHON_RUNTIME` names it.
fn python_runtime() -> Option<std::path::PathBuf> {
    let path = std::path::PathBuf::from(std::env::var_os("KUSION_BENCH_PYTHON_RUNTIME")?);
    assert!(
        path.is_file(),
        "KUSION_BENCH_PYTHON_RUNTIME={}: no such file",
        path.display()
    );
    Some(path)
}

/// Its configuration: an endpoint it never reaches (dry-runs and start-up make no request).
fn python_config() -> Value {
    json!({"endpoint": "http://127.0.0.1:1", "username": "guest", "password": "guest"})
}

/// Loading a WASM plugin: compiling the component versus taking it from the compiled cache.
fn wasm_load(c: &mut Criterion<ThreadCpu>) {
    let path = fixtures::build_release(Fixture::WasmFunction);
    let cache = tempfile::tempdir().unwrap();
    let uncached = WasmHost::with_cache(None).unwrap();
    let cached = WasmHost::with_cache(Some(cache.path().to_path_buf())).unwrap();
    assert!(!cached.compile_reporting_cache(&path).unwrap().1);
    let mut group = c.benchmark_group("wasm_load");
    group.sample_size(10);
    group.bench_function("compile", |b| {
        b.iter(|| black_box(uncached.compile(&path).unwrap()))
    });
    group.bench_function("from-cache", |b| {
        b.iter(|| black_box(cached.compile_reporting_cache(&path).unwrap()))
    });
    group.finish();
}

/// Wall and thread-CPU time of `f`.
fn timed<T>(f: impl FnOnce() -> T) -> (T, std::time::Duration, std::time::Duration) {
    let wall = std::time::Instant::now();
    let cpu = thread_cpu_ns();
    let out = f();
    let cpu = std::time::Duration::from_nanos(thread_cpu_ns() - cpu);
    (out, wall.elapsed(), cpu)
}

/// Median and minimum of some durations, for the table.
fn summary(mut times: Vec<std::time::Duration>) -> String {
    times.sort();
    format!(
        "median {:>9.3?}  min {:>9.3?}",
        times[times.len() / 2],
        times[0]
    )
}

/// Start-up of a runtime until its first call can be made, as `kusionctl` does it once per run:
/// load, instantiate (the plugin's `describe` included) and configure. Native: `dlopen` of a copy
/// of the library at a path of its own each time (a path loaded before would only bump the
/// loader's reference count). WASM: the compiled component taken from the on-disk cache,
/// through a host whose engine exists already, and (the whole cost of a run's first WASM
/// plugin) through a new host. Not a criterion group: each native sample leaves a library
/// mapped, so the runs are counted here.
fn start_up() {
    const RUNS: usize = 25;
    let files = tempfile::tempdir().unwrap();
    let copies = tempfile::tempdir().unwrap();
    let native = fixtures::build_release(Fixture::LocalFile);
    let (mut native_wall, mut native_cpu) = (Vec::new(), Vec::new());
    for i in 0..RUNS {
        let copy = copies.path().join(format!(
            "{i}-{}",
            native.file_name().unwrap().to_string_lossy()
        ));
        std::fs::copy(&native, &copy).unwrap();
        let (_runtime, wall, cpu) = timed(|| {
            let runtime = NativeLibrary::open(&copy).unwrap().runtime().unwrap();
            runtime.configure(&json!({"root": files.path()})).unwrap();
            runtime
        });
        native_wall.push(wall);
        native_cpu.push(cpu);
    }
    println!("start-up until the first call can be made ({RUNS} runs each):");
    println!(
        "  {:<42} wall {}  cpu {}",
        "native localfile",
        summary(native_wall),
        summary(native_cpu)
    );

    let mut components = vec![(
        "wasm fixture",
        fixtures::build_release(Fixture::WasmRuntime),
        json!({}),
    )];
    if let Some(python) = python_runtime() {
        components.push(("wasm python (rabbitmq)", python, python_config()));
    }
    for (label, path, config) in components {
        let cache = tempfile::tempdir().unwrap();
        let host = WasmHost::with_cache(Some(cache.path().to_path_buf())).unwrap();
        // Fill the cache (a compile, not measured).
        assert!(!host.compile_reporting_cache(&path).unwrap().1);
        let load = |host: &WasmHost| {
            let (module, cached) = host.compile_reporting_cache(&path).unwrap();
            assert!(cached, "{label}: not taken from the compiled cache");
            let runtime = module
                .runtime(WasmGrants::default(), WasmLimits::default())
                .unwrap();
            runtime.configure(&config).unwrap();
            runtime
        };
        for fresh_engine in [false, true] {
            let (mut walls, mut cpus) = (Vec::new(), Vec::new());
            for _ in 0..RUNS {
                let (_runtime, wall, cpu) = timed(|| {
                    if fresh_engine {
                        load(&WasmHost::with_cache(Some(cache.path().to_path_buf())).unwrap())
                    } else {
                        load(&host)
                    }
                });
                walls.push(wall);
                cpus.push(cpu);
            }
            let what = if fresh_engine {
                "cached, new engine"
            } else {
                "cached"
            };
            println!(
                "  {:<42} wall {}  cpu {}",
                format!("{label}, {what}"),
                summary(walls),
                summary(cpus)
            );
        }
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().with_measurement(ThreadCpu);
    targets = bench, runtime_call, wasm_load
}
criterion_main!(benches, start_up);
