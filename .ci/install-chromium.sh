#!/usr/bin/env bash
# Installs Debian's chromium for the dashboard browser test (test/dashboard/browser.test.ts).
# playwright-core cannot download its own browser here, so the test drives the distribution's build.
# Idempotent: does nothing when /usr/bin/chromium already exists.
set -euo pipefail

if [ -x /usr/bin/chromium ]; then
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null
$SUDO apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null

if [ ! -x /usr/bin/chromium ]; then
  echo "install-chromium: apt-get finished but /usr/bin/chromium is missing" >&2
  exit 1
fi
echo "install-chromium: $(/usr/bin/chromium --version 2>/dev/null || echo chromium installed)"
