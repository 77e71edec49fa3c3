#!/usr/bin/env bash
# Benchmark of `kusionctl run`: 200 pods restarted across 2 clusters in batches of 20 on real
# control planes (tests/k8s-harness). Prints total time, kusionctl's overhead and readiness wait.
# Needs the control-plane build of scripts/setup.d/20-k8s.sh.
#
#   bash scripts/bench-ops-run.sh              # optimised build (cargo's bench profile)
#   PROFILE=dev bash scripts/bench-ops-run.sh  # debug build: quicker to build, slower to run
set -euo pipefail
cd "$(dirname "$0")/.."
profile="${PROFILE:-bench}"
# kusionctl loads the kubernetes runtime and CMDB plugins from the same build, staged beside it
# (<target>/lib/kusion/plugins) by the benchmark.
if [ "$profile" = dev ]; then
  cargo build -p kusion-runtime-kubernetes -p kusion-cmdb
else
  cargo build --release -p kusion-runtime-kubernetes -p kusion-cmdb
fi
cargo bench --profile "$profile" -p kusion-tests --bench ops_restart_200
