#!/usr/bin/env bash
# Upstream KCL as a Python package (kcl-lib from PyPI): the differential oracle that
# kcl/tests/oracle.rs compares the evaluator against. Idempotent.
set -euo pipefail
command -v python3 >/dev/null || { echo "python3 is required for the KCL oracle test" >&2; exit 1; }
if python3 -c 'import kcl_lib.api' >/dev/null 2>&1; then
  exit 0
fi
python3 -m pip install --quiet --disable-pip-version-check 'kcl-lib>=0.12,<0.14' \
  || python3 -m pip install --quiet --disable-pip-version-check --break-system-packages 'kcl-lib>=0.12,<0.14'
python3 -c 'import kcl_lib.api' || { echo "kcl-lib installed but not importable" >&2; exit 1; }
