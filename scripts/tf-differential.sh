#!/usr/bin/env bash
# Differential against the terraform CLI on moto (the machine's terraform 1.11.4, provider from
# the filesystem mirror):
# - drift on an S3 bucket, an IAM role and a VPC, planned and applied by kusion's Terraform
#   runtime and by `terraform`; both must plan the same fields and end the same
#   (runtimes/terraform/tests/drift_differential.rs);
# - seeded random attribute edits of a bucket, a role, a security group with rules and a DynamoDB
#   table through `kusionctl` and `terraform`: the same action and attributes planned, the same
#   state recorded (tests/tests/terraform_edit_differential.rs).
# Usage: scripts/tf-differential.sh [STEPS [SEED]]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup.d/30-moto.sh >/dev/null
command -v terraform >/dev/null || { echo "tf-differential: terraform is not on PATH" >&2; exit 1; }
cargo test --locked -p kusion-runtime-terraform --test drift_differential -- --include-ignored --nocapture
cargo build --locked --workspace
env TF_EDIT_STEPS="${1:-12}" ${2:+TF_EDIT_SEED="$2"} cargo test --locked -p kusion-tests \
  --test terraform_edit_differential -- --ignored --nocapture
