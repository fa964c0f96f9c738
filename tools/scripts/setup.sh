#!/usr/bin/env bash
# Installs the Debian packages kinformer builds with, and fetches the Go modules of the
# benchmarks' client-go peers (tools/bench/go.mod) when Go is installed (Go itself, >= 1.26, is
# not a Debian package here: e2e/launcher.sh says where it must come from). Idempotent: quiet and
# fast when everything is already there; safe to re-run.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

# go_modules: the peers' modules into the module cache (no-op when cached), so that the
# benchmark scripts build them offline later.
go_modules() {
  command -v go >/dev/null 2>&1 || return 0
  if ! (cd "$root/tools/bench" && GOFLAGS=-mod=readonly go mod download) >&2; then
    echo "[setup] warning: could not fetch the Go modules of tools/bench (the benchmarks' client-go peers)" >&2
  fi
}

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config
  libboost1.81-dev libboost-url1.81-dev libssl-dev openssl
  rapidjson-dev libprotozero-dev prometheus-cpp-dev libyaml-cpp-dev zlib1g-dev
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  curl ca-certificates procps iproute2
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  go_modules
  exit 0
fi

echo "[setup] installing Debian packages: ${missing[*]}" >&2
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
# Only reached when something is missing: refresh the lists first (a machine image may ship
# stale or partial lists, where apt-get cannot find packages that Debian serves).
echo "[setup] apt-get update" >&2
$SUDO apt-get update -q >&2
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
echo "[setup] Debian packages installed" >&2
go_modules
