#!/usr/bin/env bash
# An OCI registry (Debian's docker-registry: the CNCF distribution registry) for the `kcl mod`
# tests, which start their own throwaway instance on 127.0.0.1 (kcl/tests/cli_mod.rs). No
# system service is needed; the package's own is stopped if it started one. git (for the git
# daemon the same tests start) is already on the machine. Idempotent.
set -euo pipefail
if command -v docker-registry >/dev/null 2>&1 && command -v git >/dev/null 2>&1; then
  exit 0
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends docker-registry git >/dev/null
# a service started by the package would hold port 5000 for nothing
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet docker-registry 2>/dev/null; then
  $sudo systemctl disable --now docker-registry >/dev/null 2>&1 || true
fi
command -v docker-registry >/dev/null || { echo "docker-registry installed but not on PATH" >&2; exit 1; }
