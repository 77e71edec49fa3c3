#!/usr/bin/env bash
# PostgreSQL server binaries for tests that start a throwaway cluster (tests/pg-harness: the CMDB
# plugin's PostgreSQL backend, the PostgreSQL state backend). Tests run initdb/pg_ctl themselves;
# no system cluster is needed, so the package is told not to create or start one.
set -euo pipefail
have_server() {
  for d in /usr/lib/postgresql/*/bin; do
    [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && return 0
  done
  return 1
}
if have_server && id postgres >/dev/null 2>&1; then
  exit 0
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
$sudo mkdir -p /etc/postgresql-common
if [ ! -e /etc/postgresql-common/createcluster.conf ]; then
  echo "create_main_cluster = false" | $sudo tee /etc/postgresql-common/createcluster.conf >/dev/null
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends postgresql >/dev/null
have_server || { echo "postgresql installed but no initdb/pg_ctl under /usr/lib/postgresql/*/bin" >&2; exit 1; }
id postgres >/dev/null 2>&1 || { echo "postgresql installed but there is no postgres user" >&2; exit 1; }
