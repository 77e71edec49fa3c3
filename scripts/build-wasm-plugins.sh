#!/usr/bin/env bash
# Build the in-repo WASM plugins (components for wasm32-wasip2) into target/wasm32-wasip2/<profile>/:
# the Rust ones with cargo, the Python RabbitMQ runtime (examples/rabbitmq-runtime) with
# componentize-py.
# Usage: scripts/build-wasm-plugins.sh [--release] [extra cargo args]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup.d/10-wasm.sh
cargo build --locked --target wasm32-wasip2 -p wasm-policy -p kusion-wasm-fixture "$@"
profile=debug
for arg in "$@"; do [ "$arg" = "--release" ] && profile=release; done
bash examples/rabbitmq-runtime/build.sh \
  "${CARGO_TARGET_DIR:-$root/target}/wasm32-wasip2/$profile/rabbitmq_runtime.wasm" >/dev/null
