#!/usr/bin/env bash
# Generated Konfig fleet against upstream KCL (kcl-lib, scripts/setup.d/40-kcl-oracle.sh): N
# guestbook-style stacks from the shared corpus's gen-fleet.sh, their expected output made by
# upstream, then checked with our kcl.
#
#   scripts/konfig-fleet-differential.sh [N] [KCL_BINARY]     (default 500, target/debug/kcl)
#
# kcl-lib's API returns a program's YAML, not the stream `manifests.yaml_stream` prints, so the
# work copy's render.k publishes the rendered resources as `rendered` instead: every stack is
# compared on the values it evaluates to (documents, env order, defaults), in both engines.
# The corpus is linked into a temporary folder, never copied into the repository.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
n="${1:-500}"
kcl="${2:-$root/target/debug/kcl}"
shared="${KUSION_SHARED:-$root/../shared}"
corpus="$shared/conformance/konfig"
[ -d "$corpus" ] || { echo "fleet: $corpus not found" >&2; exit 1; }
[ -x "$kcl" ] || { echo "fleet: $kcl not built (cargo build -p kusion-kcl --bin kcl)" >&2; exit 1; }
bash "$root/scripts/setup.d/40-kcl-oracle.sh" >/dev/null
# the Konfig goldens come from kcl-lib 0.12.4, which setup keeps in the cache
export KCL_ORACLE_PATH="${KCL_ORACLE_PATH:-${KUSION_CACHE:-$HOME/.cache/kusion-rs}/kcl-lib-0.12.4}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
for f in "$corpus"/*; do
  case "$(basename "$f")" in
    fleet | models | gen-fleet.sh | run.sh) ;;
    *) ln -s "$f" "$work/" ;;
  esac
done
cp "$corpus/gen-fleet.sh" "$corpus/run.sh" "$work/"
cp -r "$corpus/models" "$work/models"
chmod -R u+w "$work"
render="$work/models/kube/render/render.k"
grep -q '^manifestsResourceMap(_output)$' "$render" \
  || { echo "fleet: render.k no longer ends with manifestsResourceMap(_output)" >&2; exit 1; }
sed -i 's/^manifestsResourceMap(_output)$/rendered = sum([res_list for _, res_list in _output], [])/' "$render"
cd "$work"
KCL="python3 $root/scripts/kcl-oracle.py run" bash ./gen-fleet.sh "$n" --expected >/dev/null
env -u YAML_DOC_ORDER KCL="$kcl run" bash ./run.sh --fleet | tee "$work/result.txt" | grep -v '^PASS' || true
grep -q ' 0 failed' "$work/result.txt"
