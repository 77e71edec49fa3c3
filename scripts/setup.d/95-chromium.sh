#!/usr/bin/env bash
# Debian's chromium and chromium-driver: the real browser of the web console's end-to-end test
# (tests/tests/console_browser.rs drives it headless over WebDriver). Idempotent.
set -euo pipefail
if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then
  exit 0
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
# fonts-dejavu-core: the screenshots need a font with every glyph the console draws.
$sudo apt-get install -y -qq --no-install-recommends chromium chromium-driver fonts-dejavu-core >/dev/null
[ -x /usr/bin/chromium ] || { echo "chromium installed but /usr/bin/chromium is missing" >&2; exit 1; }
[ -x /usr/bin/chromedriver ] || { echo "chromium-driver installed but /usr/bin/chromedriver is missing" >&2; exit 1; }
