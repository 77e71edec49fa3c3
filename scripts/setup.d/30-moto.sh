#!/usr/bin/env bash
# moto's server (a local AWS API) for the Terraform runtime's tests against terraform-provider-aws.
set -euo pipefail
if command -v moto_server >/dev/null 2>&1 && python3 -c 'import moto, flask' >/dev/null 2>&1; then
  exit 0
fi
python3 -m pip install --quiet 'moto[server]'
command -v moto_server >/dev/null || { echo "moto_server is not on PATH after installing moto[server]" >&2; exit 1; }
