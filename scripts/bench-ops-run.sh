#!/usr/bin/env bash
# Benchmark of `kusionctl run`: 200 pods restarted across 2 clusters in batches of 20 on real
# control planes (tests/k8s-harness). Prints total time, kusionctl's overhead and readiness wait.
# Needs the control-plane build of scripts/setup.d/20-k8s.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
# The kubernetes runtime and CMDB plugins are loaded from the build output of the same profile.
cargo build --release -p kusion-runtime-kubernetes -p kusion-cmdb
cargo bench -p kusion-tests --bench ops_restart_200
