#!/usr/bin/env bash
# The WASM target for the example and fixture WASM plugins (idempotent).
set -euo pipefail
if ! rustup target list --installed | grep -qx wasm32-wasip2; then
  rustup target add wasm32-wasip2
fi
