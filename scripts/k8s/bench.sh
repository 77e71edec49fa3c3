#!/usr/bin/env bash
# Benchmark: 200 objects applied by the Kubernetes runtime vs `kubectl apply --server-side`, and a
# no-change preview vs `kubectl diff --server-side`, on one local control plane. Prints figures.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
bash scripts/k8s/build-control-plane.sh >/dev/null
command -v kubectl >/dev/null || { echo "kubectl is needed for the comparison" >&2; exit 1; }
cargo bench -p kusion-runtime-kubernetes --bench apply_200 "$@"
