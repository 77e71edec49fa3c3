#!/usr/bin/env bash
# Put this checkout's built plugins where a kusionctl built here looks for them:
#
#   <target>/lib/kusion/plugins/<name>/{plugin.toml,<library>}   manifest with the library's sha256
#
# kusionctl searches <its folder>/../lib/kusion/plugins (an installation's <prefix>/lib/kusion/
# plugins, see scripts/install.sh), and for <target>/<profile>/kusionctl that folder is here. The
# plugin host knows nothing of this source tree; this script is what puts every in-repo plugin
# that is built (runtimes/, plugins/, examples/, tests/; the newer of debug and release) on that
# path, and removes one that is not. Run it again after rebuilding a plugin; the test harness
# (tests/src/plugins.rs) does so itself before it drives kusionctl.
#
# Usage: scripts/stage-plugins.sh [TARGET_DIR]   (default $CARGO_TARGET_DIR, else ./target)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
# Built as part of the workspace (the features of a workspace build, so nothing is rebuilt).
cargo build --locked -q --workspace --bin kusion-stage-plugins
"${CARGO_TARGET_DIR:-$root/target}/debug/kusion-stage-plugins" "$@"
