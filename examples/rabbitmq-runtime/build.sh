#!/usr/bin/env bash
# Build the RabbitMQ runtime (app.py) into a WebAssembly component with componentize-py.
# Usage: examples/rabbitmq-runtime/build.sh [OUT.wasm]
# The default output is where a kusionctl built from this checkout looks for in-repo WASM plugins:
# ${CARGO_TARGET_DIR:-target}/wasm32-wasip2/release/rabbitmq_runtime.wasm.
# The world is wit/world.wit: kusion's runtime-plugin world plus wasi:http/outgoing-handler.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${1:-${CARGO_TARGET_DIR:-$root/target}/wasm32-wasip2/release/rabbitmq_runtime.wasm}"
bash "$root/scripts/setup.d/80-componentize-py.sh"
mkdir -p "$(dirname "$out")"
cd "$here"
componentize-py --quiet -d wit -w rabbitmq-runtime componentize app -o "$out.tmp"
mv "$out.tmp" "$out"
echo "$out"
