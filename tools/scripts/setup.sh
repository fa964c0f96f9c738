#!/usr/bin/env bash
# Installs the Debian packages kinformer builds with. Idempotent: quiet and fast when
# everything is already installed; safe to re-run.
set -euo pipefail

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
[ ${#missing[@]} -eq 0 ] && exit 0

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
