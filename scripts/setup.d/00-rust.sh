#!/usr/bin/env bash
# Rust toolchain components the build and checks use.
set -euo pipefail
command -v cargo >/dev/null || { echo "cargo is not installed: install Rust with rustup first" >&2; exit 1; }
