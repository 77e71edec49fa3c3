#!/usr/bin/env bash
# Differential against the terraform CLI on moto: drift on an S3 bucket, an IAM role and a VPC,
# planned and applied by kusion's Terraform runtime and by `terraform` (the machine's 1.11.4,
# provider from the filesystem mirror); both must plan the same fields and end the same.
# See runtimes/terraform/tests/drift_differential.rs.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup.d/30-moto.sh >/dev/null
command -v terraform >/dev/null || { echo "tf-differential: terraform is not on PATH" >&2; exit 1; }
cargo test --locked -p kusion-runtime-terraform --test drift_differential -- --include-ignored --nocapture
