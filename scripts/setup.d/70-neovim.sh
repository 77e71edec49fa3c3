#!/usr/bin/env bash
# Debian's neovim, the real editor client of the language server's end-to-end test
# (kcl/tests/lsp_neovim.rs drives its built-in LSP client headless from a Lua script).
# Idempotent.
set -euo pipefail
if command -v nvim >/dev/null 2>&1; then
  exit 0
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends neovim >/dev/null
command -v nvim >/dev/null || { echo "neovim installed but nvim is not on PATH" >&2; exit 1; }
