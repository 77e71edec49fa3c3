#!/usr/bin/env bash
# The main job on a fresh machine: install what is needed, build kusionctl, and apply an example
# stack end to end (preview, apply with --watch, a no-change preview, destroy).
#
# Until the Kubernetes runtime is wired in, the stack is applied through the fake-cloud TEST
# runtime (`kusionctl-testbed`, type `Test`): objects land as JSON files in a local directory.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
export KUSION_CACHE="${KUSION_CACHE:-$HOME/.cache/kusion-rs}"
bash scripts/setup.d/00-rust.sh
cargo build --release --locked -p kusionctl -p kusion-tests --bin kusionctl --bin kusionctl-testbed
work="$(mktemp -d)"
export KUSION_TEST_CLOUD="$work/cloud" KUSION_STATE_DIR="$work/state"
bin="$root/target/release/kusionctl-testbed"
spec="$root/examples/test-cloud/spec.yaml"
echo "== [test runtime] preview"
"$bin" preview -f "$spec" -d
echo "== [test runtime] apply --watch"
"$bin" apply -f "$spec" --yes --watch
echo "== [test runtime] preview after apply (expect no changes)"
"$bin" preview -f "$spec"
echo "== [test runtime] state and history"
"$bin" state list
"$bin" state history
echo "== [test runtime] destroy"
"$bin" destroy --yes
rm -rf "$work"
