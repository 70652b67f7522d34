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

# The Rust crate (sdk/rust) builds offline from the librust-*-dev packages
# above: sdk/rust/.cargo/config.toml replaces crates.io with their
# directory. cargo and rustc themselves are not Debian's (too old there).
if [ ! -d /usr/share/cargo/registry ]; then
  echo "install-test-deps: /usr/share/cargo/registry is missing: the librust-*-dev packages did not install" >&2
  exit 1
fi
if ! command -v cargo >/dev/null 2>&1; then
  echo "install-test-deps: cargo is not on PATH: sdk/rust's tests need cargo >= 1.85 (https://rustup.rs)" >&2
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
