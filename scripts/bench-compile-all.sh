#!/usr/bin/env bash
# Whole-monorepo compile benchmark: `kusionctl compile --all` over the generated Konfig fleet.
#
# Usage: bash scripts/bench-compile-all.sh [N]     (default 1500 stacks)
#   KONFIG_CORPUS=<path>   the Konfig acceptance corpus (default: conformance/konfig in
#                          $KUSION_SHARED, else the shared/ folder beside this checkout)
#   SAMPLE=<k>             check every k-th stack against `kcl run` (default 25)
#   PROFILE=debug          use debug builds (a quick functional run, not a figure)
#
# Steps: copy the corpus's models/vendor/kcl.mod and gen-fleet.sh into a temp folder named
# `konfig` (the fleet's kcl.mod files point at ../../../../konfig), generate N stacks, give each
# app folder a project.yaml and each stack a stack.yaml, and a kcl.yaml derived from its
# command.txt where it has none (same files, `-D` options as kcl_options). Then time:
#   1. cold:       compile --all with an empty cache
#   2. unchanged:  compile --all again (every stack from the cache)
#   3. one edit:   change one app's base.k and compile --all (only that app's stack compiles)
# and check a sample: each sampled spec's resources equal, object by object, what
# `target/release/kcl run <command.txt>` prints for the stack, and `kusionctl compile` in the
# stack folder prints exactly the spec compile --all wrote.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
n="${1:-1500}"
corpus="${KONFIG_CORPUS:-${KUSION_SHARED:-$root/../shared}/conformance/konfig}"
sample="${SAMPLE:-25}"
[ -f "$corpus/gen-fleet.sh" ] || { echo "error: no Konfig corpus at $corpus (set KONFIG_CORPUS)" >&2; exit 1; }
python3 -c 'import yaml' 2>/dev/null || python3 -m pip install --quiet --user pyyaml

cd "$root"
profile="${PROFILE:-release}"   # PROFILE=debug for a quick functional run
if [ "$profile" = release ]; then
    cargo build --release --locked -q -p kusionctl -p kusion-kcl --bin kusionctl --bin kcl
else
    cargo build --locked -q -p kusionctl -p kusion-kcl --bin kusionctl --bin kcl
fi
ctl="$root/target/$profile/kusionctl"
kcl="$root/target/$profile/kcl"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
k="$work/konfig"
mkdir -p "$k"
cp -r "$corpus/models" "$corpus/vendor" "$corpus/kcl.mod" "$corpus/gen-fleet.sh" "$k/"
chmod -R u+w "$k"
(cd "$k" && bash gen-fleet.sh "$n" >/dev/null)

python3 - "$k" <<'PY'
import os, shlex, sys
k = sys.argv[1]
stacks = [l.strip() for l in open(os.path.join(k, "fleet", "STACKS.txt")) if l.strip()]
for st in stacks:
    app_dir = os.path.dirname(st)
    with open(os.path.join(k, app_dir, "project.yaml"), "w") as f:
        f.write("name: %s\n" % os.path.basename(app_dir))
    with open(os.path.join(k, st, "stack.yaml"), "w") as f:
        f.write("name: %s\n" % os.path.basename(st))
    if os.path.exists(os.path.join(k, st, "kcl.yaml")):
        continue
    words = shlex.split(open(os.path.join(k, st, "command.txt")).read())[1:]
    files, opts, i = [], [], 0
    while i < len(words):
        w = words[i]
        if w in ("-E", "-D"):
            if w == "-D":
                key, _, val = words[i + 1].partition("=")
                opts.append((key, val))
            i += 2
            continue
        files.append(w if w.startswith("${") else os.path.relpath(w, st))
        i += 1
    with open(os.path.join(k, st, "kcl.yaml"), "w") as f:
        f.write("kcl_cli_configs:\n  files:\n")
        for p in files:
            f.write("    - %s\n" % p)
        f.write("kcl_options:\n")
        for key, val in opts:
            f.write("  - key: %s\n    value: %s\n" % (key, val))
PY

secs() { date +%s.%N; }
run_all() {  # run_all LABEL -> prints the summary line, sets $took and $line
    local t0 t1
    t0="$(secs)"
    line="$("$ctl" compile --all "$k")"
    t1="$(secs)"
    took="$(python3 -c "print('%.2f' % ($t1 - $t0))")"
    printf '%-28s %8s s   %s\n' "$1" "$took" "$line"
}

echo "== kusionctl compile --all on $n fleet stacks ($(nproc) cores)"
run_all "cold (empty cache)"; cold="$took"
run_all "unchanged (all cached)"; warm="$took"
first_app="$(dirname "$(head -1 "$k/fleet/STACKS.txt")")"
sed -i 's/gb-redis-follower:v2/gb-redis-follower:v3/' "$k/$first_app/base/base.k"
run_all "after editing one base.k"; edit="$took"
case "$line" in
    *" 1 compiled, $((n - 1)) unchanged"*) echo "incremental: only the edited app's stack was compiled" ;;
    *) echo "error: expected exactly 1 stack recompiled after a one-file edit" >&2; exit 1 ;;
esac

echo "== checking every ${sample}th stack against kcl run and per-stack compile"
checked=0
i=0
while IFS= read -r st; do
    i=$((i + 1))
    [ $(((i - 1) % sample)) -eq 0 ] || continue
    spec="$k/.kusion/compile-cache/$st/spec.yaml"
    (cd "$k" && KCL="$kcl run" && eval "$(cat "$st/command.txt")") > "$work/kcl.yaml"
    python3 - "$spec" "$work/kcl.yaml" "$st" <<'PY'
import sys, yaml
spec = yaml.safe_load(open(sys.argv[1]))["resources"]
docs = [d for d in yaml.safe_load_all(open(sys.argv[2])) if d is not None]
got = [r["attributes"] for r in spec]
if got != docs:
    sys.exit("MISMATCH %s: spec has %d objects, kcl run printed %d" % (sys.argv[3], len(got), len(docs)))
for r in spec:
    a = r["attributes"]; m = a["metadata"]
    want = ":".join([a["apiVersion"], a["kind"]] + ([m["namespace"]] if m.get("namespace") else []) + [m["name"]])
    if r["id"] != want or r["type"] != "Kubernetes":
        sys.exit("MISMATCH %s: id %s, expected %s" % (sys.argv[3], r["id"], want))
PY
    "$ctl" compile -C "$k/$st" > "$work/one.yaml"
    cmp -s "$work/one.yaml" "$spec" || { echo "MISMATCH $st: compile --all differs from per-stack compile" >&2; exit 1; }
    checked=$((checked + 1))
done < "$k/fleet/STACKS.txt"
echo "$checked sampled stacks identical to kcl run and to per-stack compile"

upstream="$(awk -F'\t' '/^1500 generated stacks/ {print $2}' "$corpus/timings/upstream-670ab63b-scale.tsv" 2>/dev/null || true)"
echo "== figures"
printf 'stacks                     %s\n' "$n"
printf 'cold compile --all         %s s\n' "$cold"
printf 'unchanged compile --all    %s s\n' "$warm"
printf 'one-file edit compile --all %s s\n' "$edit"
printf 'upstream (1500, one kcl process per stack) %s s\n' "${upstream:-?}"
