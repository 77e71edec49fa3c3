#!/usr/bin/env bash
# Focused differential sweeps against upstream KCL: a seeded generator of one area of the
# language (scripts/kcl-sweeps/AREA.py) writes N small programs, and scripts/kcl-probe.py runs
# each with upstream (kcl-lib) and ours and prints those that differ.
#
#   scripts/kcl-sweep.sh AREA N [SEED]    AREA: a file name in scripts/kcl-sweeps/ (no .py);
#                                         SEED: default a fresh one, printed
#   scripts/kcl-sweep.sh list             the areas
#
# KCL_PROBE_ALL=1 compares whole error outputs (default: upstream's key mode, the first
# message); KCL_BIN names our binary (default target/debug/kcl, built here if missing).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
if [ "${1:-}" = "list" ]; then
  for f in scripts/kcl-sweeps/*.py; do basename "$f" .py; done
  exit 0
fi
area="${1:?usage: $0 AREA N [SEED] | list}"
n="${2:?usage: $0 AREA N [SEED]}"
seed="${3:-$(( $(date +%s%N) % 1000000007 ))}"
gen="scripts/kcl-sweeps/$area.py"
[ -f "$gen" ] || { echo "kcl-sweep: no area '$area' (try: $0 list)" >&2; exit 2; }
bash scripts/setup.d/40-kcl-oracle.sh
[ -n "${KCL_BIN:-}" ] || [ -x target/debug/kcl ] || cargo build -q -p kusion-kcl --bin kcl
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "kcl-sweep: $area, $n programs from seed $seed"
python3 "$gen" "$seed" "$n" > "$work/probes.k"
TMPDIR="$work" python3 scripts/kcl-probe.py "$work/probes.k"
