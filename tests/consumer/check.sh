#!/usr/bin/env bash
# Installs kinformer from BUILD_DIR into BUILD_DIR/install, then builds tests/consumer against it
# out of tree twice, as users' projects would: with CMake (find_package(kinformer)) and with
# pkg-config (kinformer.pc, a plain compiler command line), and runs both. Then builds
# examples/ out of tree against the same package (the e2e suite runs those programs).
set -euo pipefail
build=$1
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cmake --install "$build" --prefix "$build/install"
# The installed headers need neither Boost, OpenSSL nor RapidJSON (they are private to the
# libraries): a consumer's own use of them stays its own.
if grep -rnE '#include [<"](boost|openssl|rapidjson)/' "$build/install/include/kinformer"; then
  echo "check.sh: a public header includes a private dependency (above)" >&2
  exit 1
fi
rm -rf "$build/consumer"
cmake -S "$here" -B "$build/consumer" -G Ninja -DCMAKE_PREFIX_PATH="$build/install"
ninja -C "$build/consumer"
"$build/consumer/consumer"

command -v pkg-config >/dev/null || { echo "check.sh: pkg-config not found" >&2; exit 1; }
pc_dir=$(dirname "$(find "$build/install" -name kinformer.pc -print -quit)")
[ -n "$pc_dir" ] || { echo "check.sh: kinformer.pc was not installed" >&2; exit 1; }
flags=$(PKG_CONFIG_PATH="$pc_dir" pkg-config --cflags --libs kinformer)
echo "pkg-config --cflags --libs kinformer: $flags"
# shellcheck disable=SC2086  # the flags are words
c++ -std=c++20 "$here/main.cc" -o "$build/consumer/consumer-pkg-config" $flags
"$build/consumer/consumer-pkg-config"

rm -rf "$build/examples-standalone"
cmake -S "$here/../../examples" -B "$build/examples-standalone" -G Ninja -DCMAKE_PREFIX_PATH="$build/install" \
  -DCMAKE_CXX_FLAGS="-Wall -Wextra -Wno-missing-field-initializers -Werror"
ninja -C "$build/examples-standalone"
# Without a cluster they fail, saying what they tried (and nothing secret).
for p in "cert_distributor --namespace x" "endpoint_publisher --namespace x --service y" \
  "lease_controller --namespace x --lease l --identity i"; do
  # shellcheck disable=SC2086  # program and arguments are words
  set -- $p
  if env -u KUBECONFIG -u KUBERNETES_SERVICE_HOST HOME=/nonexistent "$build/examples-standalone/$1" "${@:2}" \
      2>"$build/examples-standalone/$1.err"; then
    echo "check.sh: $1 succeeded without a cluster" >&2; exit 1
  fi
  grep -q "no cluster configuration found" "$build/examples-standalone/$1.err" ||
    { cat "$build/examples-standalone/$1.err" >&2; echo "check.sh: $1 did not report load_default's error" >&2; exit 1; }
done
echo "examples: built out of tree against the installed package"
