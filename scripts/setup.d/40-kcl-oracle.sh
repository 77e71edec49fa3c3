#!/usr/bin/env bash
# Upstream KCL as Python packages (kcl-lib from PyPI): the differential oracle that
# kcl/tests/differential.rs and kcl/tests/oracle.rs compare the evaluator against
# (scripts/kcl-oracle.py runs it). Two releases: the current one for python3 (0.13), and
# 0.12.4 in the cache folder ($KUSION_CACHE/kcl-lib-0.12.4, `pip install --target`), the
# release the grammar suite and the Konfig goldens come from. Idempotent.
set -euo pipefail
command -v python3 >/dev/null || { echo "python3 is required for the KCL oracle test" >&2; exit 1; }
pip_install() {
  python3 -m pip install --quiet --disable-pip-version-check "$@" \
    || python3 -m pip install --quiet --disable-pip-version-check --break-system-packages "$@"
}
if ! python3 -c 'import kcl_lib.api' >/dev/null 2>&1; then
  pip_install 'kcl-lib>=0.12,<0.14'
  python3 -c 'import kcl_lib.api' || { echo "kcl-lib installed but not importable" >&2; exit 1; }
fi
python3 -c 'import yaml' >/dev/null 2>&1 || pip_install pyyaml
cache="${KUSION_CACHE:-$HOME/.cache/kusion-rs}"
old="$cache/kcl-lib-0.12.4"
if [ ! -d "$old/kcl_lib" ]; then
  mkdir -p "$cache"
  tmp="$(mktemp -d "$cache/kcl-lib-0.12.4.XXXXXX")"
  pip_install --target "$tmp" 'kcl-lib==0.12.4'
  rm -rf "$old" && mv "$tmp" "$old"
fi
KCL_ORACLE_PATH="$old" python3 -c 'import kcl_lib.api' \
  || { echo "kcl-lib 0.12.4 installed in $old but not importable" >&2; exit 1; }
