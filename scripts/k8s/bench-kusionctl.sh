#!/usr/bin/env bash
# Benchmark of the whole `kusionctl apply` (process start, plugin loading, preview, apply, state
# journal) on 200 objects (100 ConfigMaps + 50 Deployments + 50 Services in 5 namespaces), next
# to `kubectl apply --server-side -f` of the same manifests on the same control plane, then a
# no-change `kusionctl preview` next to `kubectl diff --server-side`. Prints figures per round
# and their medians; the two tools take turns going first, so background load and the
# controllers' work on the other tool's objects fall on both alike.
# Usage: scripts/k8s/bench-kusionctl.sh [KUSIONCTL]
#   KUSIONCTL defaults to this checkout's build of the profile KUSION_BENCH_PROFILE (debug, or
#   release), built first; its plugins are staged beside it (<target>/lib/kusion/plugins, see
#   scripts/stage-plugins.sh).
#   KUSION_BENCH_ROUNDS=N   rounds (default 3)
#   KUSION_BENCH_KUBECONFIG=PATH uses a running control plane instead of starting one.
#   KUBECTL=PATH            the kubectl to compare with (default: kubectl on PATH)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
kubectl_bin="${KUBECTL:-kubectl}"
command -v "$kubectl_bin" >/dev/null || { echo "kubectl is needed for the comparison" >&2; exit 1; }
target="${CARGO_TARGET_DIR:-$root/target}"
profile="${KUSION_BENCH_PROFILE:-debug}"
rounds="${KUSION_BENCH_ROUNDS:-3}"
kusionctl="${1:-$target/$profile/kusionctl}"
if [[ $# -eq 0 ]]; then
  if [[ "$profile" == release ]]; then
    cargo build -q --release -p kusionctl -p kusion-runtime-kubernetes
  else
    cargo build -q -p kusionctl -p kusion-runtime-kubernetes
  fi
  bash scripts/stage-plugins.sh "$target" >/dev/null
fi
work="$(mktemp -d)"
up_pid=""
cleanup() {
  if [[ -n "$up_pid" ]]; then kill "$up_pid" 2>/dev/null || true; wait "$up_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
kubeconfig="${KUSION_BENCH_KUBECONFIG:-}"
if [[ -z "$kubeconfig" ]]; then
  cargo build -q -p kusion-k8s-harness
  bash scripts/k8s/build-control-plane.sh >/dev/null
  kubeconfig="$work/kubeconfig"
  "$target/debug/kusion-k8s-up" --kubeconfig-out "$kubeconfig" >"$work/up.log" 2>&1 &
  up_pid=$!
  for _ in $(seq 1 240); do grep -q KUBECONFIG= "$work/up.log" && break; sleep 0.5; done
  grep -q KUBECONFIG= "$work/up.log" || { cat "$work/up.log" >&2; exit 1; }
fi
printf 'kubernetes:\n  kubeconfig: %s\n' "$kubeconfig" >"$work/runtime.yaml"
k() { "$kubectl_bin" --kubeconfig="$kubeconfig" "$@"; }
now() { date +%s%N; }
load() { cut -d' ' -f1-3 /proc/loadavg; }

# The same objects under two namespace prefixes per round: one set for kusionctl (its own stack
# folder, so every round starts from empty state), one for kubectl.
manifests() {
  python3 - "$1" "$2" <<'PY'
import json, sys
out_dir, run = sys.argv[1], sys.argv[2]
def objects(prefix):
    out = []
    for n in range(5):
        ns = f"{prefix}-{n}"
        for i in range(20):
            out.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"cm-{i}", "namespace": ns},
                        "data": {"index": str(i), "payload": "x" * 256}})
        for i in range(10):
            name = f"app-{i}"
            out.append({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": ns},
                        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                                 "template": {"metadata": {"labels": {"app": name}},
                                              "spec": {"containers": [{"name": "main", "image": "nginx:1.25", "ports": [{"containerPort": 80}]}]}}}})
            out.append({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns},
                        "spec": {"selector": {"app": name}, "ports": [{"port": 80, "targetPort": 80, "protocol": "TCP"}]}})
    return out
def rid(o):
    m = o["metadata"]
    return ":".join([o["apiVersion"], o["kind"], m.get("namespace", ""), m["name"]])
ns = lambda p: [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"{p}-{n}"}} for n in range(5)]
k, c = f"bk{run}", f"bc{run}"
json.dump({"resources": [{"id": f"v1:Namespace:{o['metadata']['name']}", "type": "Kubernetes", "attributes": o} for o in ns(k)]},
          open(f"{out_dir}/ns.json", "w"))
json.dump({"resources": [{"id": f"v1:Namespace:{o['metadata']['name']}", "type": "Kubernetes", "attributes": o} for o in ns(k)]
           + [{"id": rid(o), "type": "Kubernetes", "attributes": o} for o in objects(k)]}, open(f"{out_dir}/spec.json", "w"))
with open(f"{out_dir}/ns.yaml", "w") as f:
    f.write("".join("---\n" + json.dumps(o) + "\n" for o in ns(c)))
with open(f"{out_dir}/all.yaml", "w") as f:
    f.write("".join("---\n" + json.dumps(o) + "\n" for o in objects(c)))
PY
}

# Timings in nanoseconds, one line per round: kubectl-apply kusionctl-apply kubectl-diff
# kusionctl-preview kusionctl-noop-apply
results="$work/results"
: >"$results"
echo "objects: 200 (100 ConfigMaps, 50 Deployments, 50 Services in 5 namespaces), kube-apiserver v1.20.2"
echo "kubectl: $(command -v "$kubectl_bin") ($(k version --client 2>/dev/null | head -1))"
echo "kusionctl: $kusionctl"
for round in $(seq 1 "$rounds"); do
  dir="$work/r$round"
  mkdir -p "$dir"
  manifests "$dir" "$(date +%s%N | tail -c 7)$round"
  # --runtime-config belongs to the subcommand (apply, preview, destroy), so it follows it.
  kc() { local sub="$1"; shift; "$kusionctl" "$sub" -C "$dir" --runtime-config "$work/runtime.yaml" "$@"; }
  load_before="$(load)"
  # Namespaces first, outside the timings, for both.
  k apply --server-side -f "$dir/ns.yaml" >/dev/null
  kc apply -y -f "$dir/ns.json" >/dev/null
  kubectl_apply() { local t=$(now); k apply --server-side -f "$dir/all.yaml" >/dev/null; echo $(( $(now) - t )); }
  kusion_apply() {
    local t=$(now); kc apply -y -f "$dir/spec.json" >"$dir/apply.out" 2>"$dir/apply.err"; local d=$(( $(now) - t ))
    grep -q "200 created" "$dir/apply.out" || { cat "$dir/apply.out" "$dir/apply.err" >&2; exit 1; }
    echo "$d"
  }
  kubectl_diff() {
    local t=$(now) rc=0
    k diff --server-side -f "$dir/all.yaml" >"$dir/diff.out" || rc=$?
    local d=$(( $(now) - t ))
    [[ $rc -eq 0 ]] || { echo "kubectl diff exit $rc" >&2; cat "$dir/diff.out" >&2; exit 1; }
    echo "$d"
  }
  kusion_preview() {
    local t=$(now); kc preview -f "$dir/spec.json" >"$dir/preview.out"; local d=$(( $(now) - t ))
    grep -q "No changes" "$dir/preview.out" || { cat "$dir/preview.out" >&2; exit 1; }
    echo "$d"
  }
  # Odd rounds: kubectl first; even rounds: kusionctl first. A pause between phases lets the
  # controllers settle the Deployments just created.
  if (( round % 2 )); then
    ka=$(kubectl_apply); sleep 3; ca=$(kusion_apply); sleep 3
    kd=$(kubectl_diff); cp_=$(kusion_preview)
  else
    ca=$(kusion_apply); sleep 3; ka=$(kubectl_apply); sleep 3
    cp_=$(kusion_preview); kd=$(kubectl_diff)
  fi
  t=$(now); kc apply -y -f "$dir/spec.json" >"$dir/noop.out"; cn=$(( $(now) - t ))
  grep -q "No changes" "$dir/noop.out" || { cat "$dir/noop.out" >&2; exit 1; }
  echo "$ka $ca $kd $cp_ $cn" >>"$results"
  python3 - "$round" "$ka" "$ca" "$kd" "$cp_" "$cn" "$load_before" "$(load)" <<'PY'
import sys
r, ka, ca, kd, cp, cn = sys.argv[1], *(int(x) / 1e9 for x in sys.argv[2:7])
print(f"round {r}: kubectl apply {ka:.3f} s | kusionctl apply {ca:.3f} s ({ca / ka:.2f}x) | "
      f"kubectl diff {kd:.3f} s | kusionctl preview {cp:.3f} s | kusionctl no-change apply {cn:.3f} s | "
      f"load {sys.argv[7]} -> {sys.argv[8]}")
PY
  # The round's objects go before the next round (outside the timings): the harness's service
  # IP range holds about two rounds' Services.
  grep -oh '"name": "b[kc][0-9]*-[0-9]"' "$dir/ns.yaml" "$dir/ns.json" | cut -d'"' -f4 |
    xargs -r "$kubectl_bin" --kubeconfig="$kubeconfig" delete namespace --wait=true --timeout=180s >/dev/null 2>&1 || true
done
python3 - "$results" <<'PY'
import statistics, sys
rows = [[int(x) / 1e9 for x in line.split()] for line in open(sys.argv[1]) if line.strip()]
med = [statistics.median(col) for col in zip(*rows)]
ka, ca, kd, cp, cn = med
print(f"medians over {len(rows)} rounds:")
print(f"kubectl apply --server-side -f:        {ka:8.3f} s")
print(f"kusionctl apply -y (200 creates):      {ca:8.3f} s   ({ca / ka:.2f}x kubectl)")
print(f"kubectl diff --server-side -f:         {kd:8.3f} s")
print(f"kusionctl preview (no change):         {cp:8.3f} s   ({cp / kd:.2f}x kubectl diff; goal < 2 s)")
print(f"kusionctl apply -y (no change):        {cn:8.3f} s")
PY
