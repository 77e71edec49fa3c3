#!/usr/bin/env bash
# componentize-py (PyPI): builds the Python example runtime (examples/rabbitmq-runtime) into a
# WebAssembly component. Pinned: the component's bindings and the bundled CPython change between
# releases, and the example is tested against this one. Idempotent.
set -euo pipefail
version="0.25.1"
if command -v componentize-py >/dev/null 2>&1 \
  && [ "$(componentize-py --version 2>/dev/null | awk '{print $2}')" = "$version" ]; then
  exit 0
fi
python3 -m pip install --quiet "componentize-py==$version"
command -v componentize-py >/dev/null || { echo "componentize-py is not on PATH after installing it" >&2; exit 1; }
