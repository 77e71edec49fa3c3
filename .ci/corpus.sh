#!/usr/bin/env bash
# Corpus runs (need ../shared beside the clone): each must pass at least the count recorded in
# .ci/ratchet.env. Raise the recorded counts as conformance improves.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
shared="${KUSION_SHARED:-$root/../shared}"
[ -d "$shared" ] || { echo "corpus: $shared not found" >&2; exit 1; }
# shellcheck disable=SC1091
source .ci/ratchet.env
status=0
check() { # name passed minimum
  if [ "$2" -lt "$3" ]; then echo "ratchet: $1 passed $2 < recorded $3" >&2; status=1; else echo "ratchet: $1 passed $2 (recorded $3)"; fi
}
if [ -x target/release/kcl ] || [ "${KCL_GRAMMAR_MIN:-0}" -gt 0 ]; then
  cargo build --release --locked -p kusion-kcl --bin kcl
  out=$(KCL="$root/target/release/kcl run" bash "$shared/conformance/run-kcl-conformance.sh" "$shared/conformance/kcl-grammar" || true)
  passed=$(echo "$out" | tail -n1 | sed -E 's/^([0-9]+) passed.*/\1/')
  check kcl-grammar "${passed:-0}" "$KCL_GRAMMAR_MIN"
  out=$(cd "$shared/conformance/konfig" && KCL="$root/target/release/kcl run" bash ./run.sh || true)
  passed=$(echo "$out" | tail -n1 | sed -E 's/^([0-9]+) passed.*/\1/')
  check kcl-konfig "${passed:-0}" "${KCL_KONFIG_MIN:-0}"
fi
exit $status
