#!/usr/bin/env bash
# Installs what the test suite needs on a fresh Debian machine. Idempotent:
# does nothing when everything is present.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
for pkg in $(cat scripts/test-packages.txt 2>/dev/null); do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}"
fi

# npm packages from each lockfile: the e2e peers, the TypeScript SDK's
# compiler, types and test frameworks.
for dir in e2e sdk/typescript; do
  if [ -f "$dir/package-lock.json" ]; then
    if [ ! -d "$dir/node_modules" ] || [ "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ]; then
      (cd "$dir" && npm ci --no-audit --no-fund --silent)
    fi
  fi
done
