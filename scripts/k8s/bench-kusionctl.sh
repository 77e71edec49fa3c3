#!/usr/bin/env bash
# Benchmark of the whole `kusionctl apply` (process start, plugin loading, preview, apply, state
# journal) on 200 objects (100 ConfigMaps + 50 Deployments + 50 Services in 5 namespaces), next
# to `kubectl apply --server-side -f` of the same manifests on the same control plane, then a
# no-change `kusionctl preview` next to `kubectl diff --server-side`. Prints figures.
# Usage: scripts/k8s/bench-kusionctl.sh [KUSIONCTL]   (default: this checkout's target/debug build)
# KUSION_BENCH_KUBECONFIG=PATH uses a running control plane instead of starting one.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
command -v kubectl >/dev/null || { echo "kubectl is needed for the comparison" >&2; exit 1; }
target="${CARGO_TARGET_DIR:-$root/target}"
kusionctl="${1:-$target/debug/kusionctl}"
if [[ $# -eq 0 ]]; then
  cargo build -q -p kusionctl -p kusion-runtime-kubernetes -p kusion-k8s-harness
fi
work="$(mktemp -d)"
up_pid=""
cleanup() { [[ -n "$up_pid" ]] && kill "$up_pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
kubeconfig="${KUSION_BENCH_KUBECONFIG:-}"
if [[ -z "$kubeconfig" ]]; then
  bash scripts/k8s/build-control-plane.sh >/dev/null
  kubeconfig="$work/kubeconfig"
  "$target/debug/kusion-k8s-up" --kubeconfig-out "$kubeconfig" >"$work/up.log" 2>&1 &
  up_pid=$!
  for _ in $(seq 1 240); do grep -q KUBECONFIG= "$work/up.log" && break; sleep 0.5; done
  grep -q KUBECONFIG= "$work/up.log" || { cat "$work/up.log" >&2; exit 1; }
fi
run="$(date +%s%N | tail -c 7)"
# The same objects under two namespace prefixes: one set for kusionctl, one for kubectl.
python3 - "$work" "$run" <<'PY'
import json, sys
work, run = sys.argv[1], sys.argv[2]
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
          open(f"{work}/ns.json", "w"))
json.dump({"resources": [{"id": f"v1:Namespace:{o['metadata']['name']}", "type": "Kubernetes", "attributes": o} for o in ns(k)]
           + [{"id": rid(o), "type": "Kubernetes", "attributes": o} for o in objects(k)]}, open(f"{work}/spec.json", "w"))
with open(f"{work}/ns.yaml", "w") as f:
    f.write("".join("---\n" + json.dumps(o) + "\n" for o in ns(c)))
with open(f"{work}/all.yaml", "w") as f:
    f.write("".join("---\n" + json.dumps(o) + "\n" for o in objects(c)))
PY
printf 'kubernetes:\n  kubeconfig: %s\n' "$kubeconfig" >"$work/runtime.yaml"
k() { kubectl --kubeconfig="$kubeconfig" "$@"; }
kc() { "$kusionctl" -C "$work" --runtime-config "$work/runtime.yaml" "$@"; }
secs() { python3 -c "import sys; print(f'{(int(sys.argv[2]) - int(sys.argv[1])) / 1e9:8.3f} s')" "$@"; }
# Namespaces first, outside the timings, for both.
k apply --server-side -f "$work/ns.yaml" >/dev/null
kc apply -y -f "$work/ns.json" >/dev/null
t0=$(date +%s%N); k apply --server-side -f "$work/all.yaml" >/dev/null; t1=$(date +%s%N)
kc apply -y -f "$work/spec.json" >"$work/apply.out"; t2=$(date +%s%N)
grep -q "200 created" "$work/apply.out" || { cat "$work/apply.out" >&2; exit 1; }
set +e; k diff --server-side -f "$work/all.yaml" >"$work/diff.out"; rc=$?; set -e
t3=$(date +%s%N)
[[ $rc -eq 0 ]] || { echo "kubectl diff exit $rc" >&2; cat "$work/diff.out" >&2; exit 1; }
kc preview -f "$work/spec.json" >"$work/preview.out"; t4=$(date +%s%N)
kc apply -y -f "$work/spec.json" >"$work/noop.out"; t5=$(date +%s%N)
grep -q "No changes" "$work/noop.out" || { cat "$work/noop.out" >&2; exit 1; }
echo "objects: 200 (100 ConfigMaps, 50 Deployments, 50 Services in 5 namespaces), kube-apiserver v1.20.2"
echo "kubectl apply --server-side -f:        $(secs "$t0" "$t1")"
echo "kusionctl apply -y (200 creates):      $(secs "$t1" "$t2")"
echo "kubectl diff --server-side -f:         $(secs "$t2" "$t3")"
echo "kusionctl preview (no change):         $(secs "$t3" "$t4")"
echo "kusionctl apply -y (no change):        $(secs "$t4" "$t5")"
