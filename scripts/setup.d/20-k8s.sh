#!/usr/bin/env bash
# Kubernetes runtime tests need a real control plane: etcd (Debian) and kube-apiserver +
# kube-controller-manager v1.20.2 built from source once, cached under $KUSION_CACHE.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bash "$here/../k8s/build-control-plane.sh"
