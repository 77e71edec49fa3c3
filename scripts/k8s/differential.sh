#!/usr/bin/env bash
# The long differential campaign: N seeded edit sequences, each applied by `kusionctl apply` and
# by `kubectl apply --server-side` (built from the same source as the server) on a local control
# plane, checked after every step (tests/tests/k8s_differential.rs says what is compared).
# Usage: scripts/k8s/differential.sh N [SEED]
#   N       how many sequences (default 20)
#   SEED    the first sequence's seed (default: from the clock, printed); a failure prints the
#           seed and step that found it: re-run with that seed and N=1 to see it again.
#   KUSION_DIFF_STEPS=S     steps per sequence (default 8)
#   KUSION_DIFF_PROFILE=release   build and run with the release profile (default debug)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
n="${1:-20}"
seed="${2:-$(( $(date +%s%N) % 4294967296 ))}"
steps="${KUSION_DIFF_STEPS:-8}"
profile=()
[[ "${KUSION_DIFF_PROFILE:-debug}" == release ]] && profile=(--release)
bash scripts/k8s/build-control-plane.sh >/dev/null
# kusionctl and the Kubernetes runtime plugin are run as built binaries by the test.
cargo build -q "${profile[@]}" -p kusionctl -p kusion-runtime-kubernetes
echo "differential campaign: $n sequences of $steps steps from seed $seed"
start=$(date +%s)
KUSION_DIFF_SEQUENCES="$n" KUSION_DIFF_SEED="$seed" KUSION_DIFF_STEPS="$steps" \
  cargo test -q "${profile[@]}" -p kusion-tests --test k8s_differential -- --nocapture
echo "campaign passed: $n sequences x $steps steps in $(( $(date +%s) - start )) s (seed $seed)"
