#!/usr/bin/env bash
# The main job on a fresh machine: install what is needed, build kusionctl, bring up a local
# Kubernetes control plane (etcd + kube-apiserver + kube-controller-manager + a fake kubelet),
# compile a Konfig stack and apply it with --watch, check that a second preview reports no
# changes, destroy, and stop the control plane.
#
#   STACK=<folder>   the Konfig stack to apply (relative to the checkout); default below, or the
#                    test fixture when the example library is not there
#   PROFILE=debug    use a debug build (quicker to build; default release)
#   PREFIX=<folder>  where scripts/install.sh installs kusionctl, kcl and the plugins
#                    (default ~/.local); the job runs the installed kusionctl
#   KEEP_CLUSTER=1   leave the stack applied and the control plane running (Ctrl-C stops it)
set -euo pipefail
STACK="${STACK:-examples/konfig/projects/guestbook/dev}"
FALLBACK_STACK="tests/fixtures/konfig/shop/dev"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
export KUSION_CACHE="${KUSION_CACHE:-$HOME/.cache/kusion-rs}"
mkdir -p "$KUSION_CACHE"
if [ ! -f "$STACK/stack.yaml" ]; then
    echo "== $STACK is not a stack here; using $FALLBACK_STACK"
    STACK="$FALLBACK_STACK"
fi

echo "== setup"
bash scripts/setup.d/00-rust.sh
bash scripts/setup.d/20-k8s.sh

profile="${PROFILE:-release}"
prefix="${PREFIX:-$HOME/.local}"
echo "== install ($profile) into $prefix"
bash scripts/install.sh --prefix "$prefix" --profile "$profile"
bin="$prefix/bin/kusionctl"
# The local control plane is a test harness, not part of the installed tool.
flag=()
[ "$profile" = release ] && flag=(--release)
cargo build "${flag[@]}" --locked -p kusion-k8s-harness --bin kusion-k8s-up

work="$(mktemp -d)"
up_pid=""
stop_cluster() {
    if [ -n "$up_pid" ] && kill -0 "$up_pid" 2>/dev/null; then
        echo "== stopping the control plane (pid $up_pid)"
        kill -INT "$up_pid" 2>/dev/null || true
        wait "$up_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap stop_cluster EXIT

echo "== starting the local control plane"
"$root/target/$profile/kusion-k8s-up" --kubeconfig-out "$work/kubeconfig" > "$work/up.log" 2>&1 &
up_pid=$!
for _ in $(seq 300); do
    grep -q '^KUBECONFIG=' "$work/up.log" 2>/dev/null && break
    if ! kill -0 "$up_pid" 2>/dev/null; then
        cat "$work/up.log" >&2
        echo "error: the control plane did not start" >&2
        exit 1
    fi
    sleep 1
done
grep -q '^KUBECONFIG=' "$work/up.log" || { cat "$work/up.log" >&2; echo "error: the control plane did not come up in 300 s" >&2; exit 1; }
cat "$work/up.log"
# The Kubernetes runtime falls back to $KUBECONFIG when stack.yaml names no cluster.
export KUBECONFIG="$work/kubeconfig"
export KUSION_STATE_DIR="$work/state"

echo "== compile $STACK"
"$bin" compile -C "$STACK" | grep -E '^- id:' || true
echo "== preview"
"$bin" preview -C "$STACK" -d
echo "== apply --watch"
"$bin" apply -C "$STACK" --yes --watch
echo "== preview after apply (must report no changes)"
"$bin" preview -C "$STACK" | tee "$work/preview.txt"
grep -q '^No changes\.$' "$work/preview.txt" || { echo "error: the preview after apply reports changes" >&2; exit 1; }
"$bin" state list -C "$STACK"
if [ -n "${KEEP_CLUSTER:-}" ]; then
    echo "== leaving the stack applied; KUBECONFIG=$KUBECONFIG (Ctrl-C stops the control plane)"
    wait "$up_pid"
    exit 0
fi
echo "== destroy"
"$bin" destroy -C "$STACK" --yes
echo "== main job done"
