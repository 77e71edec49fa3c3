#!/usr/bin/env bash
# Build the in-repo WASM plugins (components for wasm32-wasip2) into target/wasm32-wasip2/<profile>/.
# Usage: scripts/build-wasm-plugins.sh [--release] [extra cargo args]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup.d/10-wasm.sh
cargo build --locked --target wasm32-wasip2 -p wasm-policy -p kusion-wasm-fixture "$@"
