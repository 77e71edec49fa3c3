#!/usr/bin/env bash
# The project's test command: installs what the tests need (each scripts/setup.d/*.sh step is
# idempotent and caches heavy builds outside the clone), then runs every test of the workspace.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
export KUSION_CACHE="${KUSION_CACHE:-$HOME/.cache/kusion-rs}"
mkdir -p "$KUSION_CACHE"
for step in scripts/setup.d/*.sh; do
  [ -e "$step" ] || continue
  echo "== setup: $step"
  bash "$step"
done
# Build everything first so plugin cdylibs exist before tests that load them run, and stage them
# where the built kusionctl looks for plugins (<target>/lib/kusion/plugins).
cargo build --workspace --all-targets --locked
bash scripts/stage-plugins.sh
cargo test --workspace --locked -- "$@"
# A library user who needs only the model builds the kernel without wasmtime, PostgreSQL or S3.
cargo check -p kusion-kernel --no-default-features --locked
# The command line alone, without the server and controller front ends (features on by default).
cargo check -p kusionctl --no-default-features --locked
# The plugin SDK's documentation: every public item documented, every link resolving.
RUSTDOCFLAGS="-D missing_docs -D rustdoc::broken_intra_doc_links" cargo doc -p kusion-sdk --no-deps --all-features --locked
