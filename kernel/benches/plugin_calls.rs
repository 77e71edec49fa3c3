//! Per-call overhead of the plugin host: one `FunctionPlugin::call("echo", [payload])` through a
//! native `cdylib` and through a WASM component, with ~1 KiB and ~100 KiB JSON payloads, next to
//! the same call on an in-process trait object (no boundary) as the baseline; and one warm
//! runtime call (a dry-run `apply` of a ~1 KiB resource, which touches nothing outside the
//! plugin) through the native example runtime and through the WASM runtime fixture.
//!
//! Run: `cargo bench -p kusion-kernel --bench plugin_calls` (builds optimised fixtures first).
//! Times are the calling thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`), not wall time, so a busy
//! machine does not inflate them with time spent waiting for a core; every call runs on the
//! calling thread, so nothing is missed.

use std::hint::black_box;

use criterion::measurement::{Measurement, ValueFormatter};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use kusion_kernel::plugin::fixtures::{self, Fixture};
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
    let mut group = c.benchmark_group("runtime_apply_dry_run_1KiB");
    for (host, runtime, request) in [("native", &native, &file), ("wasm", &wasm, &kv)] {
        let runtime: &dyn Runtime = runtime.as_ref();
        assert_eq!(runtime.apply(request).unwrap().resource, request.planned);
        group.bench_function(host, |b| {
            b.iter(|| black_box(runtime.apply(black_box(request)).unwrap()))
        });
    }
    group.finish();
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

criterion_group! {
    name = benches;
    config = Criterion::default().with_measurement(ThreadCpu);
    targets = bench, runtime_call, wasm_load
}
criterion_main!(benches);
