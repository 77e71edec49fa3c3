#!/usr/bin/env bash
# PostgreSQL server programs for the state-backend tests (tests/tests/state_backends.rs,
# crash.rs): each test starts its own throwaway cluster with initdb, so no service is enabled.
set -euo pipefail
have_server() {
  command -v pg_config >/dev/null 2>&1 && [ -x "$(pg_config --bindir)/initdb" ] && return 0
  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1
}
if ! have_server; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends postgresql >/dev/null
fi
have_server || { echo "PostgreSQL's initdb is not installed after installing postgresql" >&2; exit 1; }
# PostgreSQL refuses to run as root; the tests then run it as the `postgres` user the package
# creates (or `nobody`).
if [ "$(id -u)" -eq 0 ] && ! id postgres >/dev/null 2>&1 && ! id nobody >/dev/null 2>&1; then
  echo "running as root without a postgres or nobody user to run PostgreSQL as" >&2
  exit 1
fi
