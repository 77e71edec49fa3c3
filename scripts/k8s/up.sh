#!/usr/bin/env bash
# Brings up a local Kubernetes control plane (etcd + kube-apiserver + kube-controller-manager
# v1.20.2 + a fake kubelet) on free loopback ports and keeps it until Ctrl-C.
# Usage: scripts/k8s/up.sh [KUBECONFIG_OUT]   (default: $KUSION_CACHE/k8s-local.kubeconfig)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
cache="${KUSION_CACHE:-$HOME/.cache/kusion-rs}"
out="${1:-$cache/k8s-local.kubeconfig}"
mkdir -p "$(dirname "$out")"
bash scripts/k8s/build-control-plane.sh
exec cargo run -q -p kusion-k8s-harness --bin kusion-k8s-up -- --kubeconfig-out "$out"
