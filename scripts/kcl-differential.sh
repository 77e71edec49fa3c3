#!/usr/bin/env bash
# Differential campaign against upstream KCL (kcl-lib, see scripts/setup.d/40-kcl-oracle.sh).
#
#   scripts/kcl-differential.sh N [SEED]     N programs of each kind (generated, mutated corpus
#                                            files, Konfig stacks when ../shared is there) from
#                                            SEED (default: a fresh one, printed)
#   scripts/kcl-differential.sh record DIR [NAME]
#                                            keep the program in DIR (files + args.txt) as a
#                                            regression with upstream's output (without NAME:
#                                            every subfolder of DIR, named after it)
#
# Environment: KCL_DIFF_KINDS=gen,mutate,konfig (default all), KCL_DIFF_RECORD=1 (record every
# shrunk difference under kcl/tests/differential/regressions), KCL_DIFF_REPORT=FILE,
# KCL_DIFF_SHRINK_BUDGET=N (oracle calls per shrink), KUSION_SHARED (the shared corpora).
# Builds the kcl binary in release mode (the test runs it as a subprocess).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup.d/40-kcl-oracle.sh
if [ "${1:-}" = "record" ]; then
  [ $# -ge 2 ] || { echo "usage: $0 record DIR [NAME]" >&2; exit 2; }
  KCL_DIFF_RECORD_DIR="$(cd "$2" && pwd)" KCL_DIFF_RECORD_NAME="${3:-}" \
    cargo test --release -p kusion-kcl --test differential -- --ignored --exact record --nocapture
  exit 0
fi
n="${1:?usage: $0 N [SEED] | record DIR NAME}"
seed="${2:-$(( $(date +%s%N) % 1000000007 ))}"
echo "kcl-differential: $n programs per kind from seed $seed"
shared="${KUSION_SHARED:-$root/../shared}"
[ -d "$shared" ] && export KUSION_SHARED="$(cd "$shared" && pwd)"
KCL_DIFF_N="$n" KCL_DIFF_SEED="$seed" \
  cargo test --release -p kusion-kcl --test differential -- --ignored --exact campaign --nocapture
