#!/usr/bin/env bash
# RabbitMQ (Debian's rabbitmq-server) with the management plugin, for the tests of the Python
# example runtime (examples/rabbitmq-runtime), which start a private broker of their own on
# 127.0.0.1 (free ports, temp dirs; tests/rabbitmq-harness). No system service is needed: the
# one the package starts is stopped and disabled. Idempotent.
set -euo pipefail
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
have_broker() {
  command -v rabbitmq-server >/dev/null 2>&1 && command -v rabbitmq-plugins >/dev/null 2>&1 \
    && ls /usr/lib/rabbitmq/lib/rabbitmq_server-*/plugins/rabbitmq_management-* >/dev/null 2>&1
}
if ! have_broker; then
  export DEBIAN_FRONTEND=noninteractive
  # policy-rc.d 101: the package must not start a broker (no init system in containers, and the
  # tests start their own).
  policy_created=""
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' | $sudo tee /usr/sbin/policy-rc.d >/dev/null
    $sudo chmod +x /usr/sbin/policy-rc.d
    policy_created=1
  fi
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends rabbitmq-server >/dev/null
  [ -n "$policy_created" ] && $sudo rm -f /usr/sbin/policy-rc.d
fi
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet rabbitmq-server 2>/dev/null; then
  $sudo systemctl disable --now rabbitmq-server >/dev/null 2>&1 || true
fi
have_broker || { echo "rabbitmq-server installed but the management plugin is missing" >&2; exit 1; }
