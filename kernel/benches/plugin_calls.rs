//! Per-call overhead of the plugin host: one `FunctionPlugin::call("echo", [payload])` through a
//! native `cdylib` and through a WASM component, with ~1 KiB and ~100 KiB JSON payloads, next to
//! the same call on an in-process trait object (no boundary) as the baseline.
//!
//! Run: `cargo bench -p kusion-kernel --bench plugin_calls` (builds optimised fixtures first).

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use kusion_kernel::plugin::fixtures::{self, Fixture};
use kusion_kernel::plugin::{NativeLibrary, WasmGrants, WasmHost, WasmLimits};
use kusion_sdk::function::{FunctionPlugin, FunctionPluginInfo};
use kusion_sdk::{ABI_VERSION, Map, PluginResult, Value};
use serde_json::json;

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
        }
    }
    fn configure(&self, _: &Value) -> PluginResult<()> {
        Ok(())
    }
    fn call(&self, _: &str, args: &[Value], _: &Map<String, Value>) -> PluginResult<Value> {
        Ok(args.first().cloned().unwrap_or(Value::Null))
    }
}

fn bench(c: &mut Criterion) {
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

criterion_group!(benches, bench);
criterion_main!(benches);
