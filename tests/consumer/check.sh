#!/usr/bin/env bash
# Installs kinformer from BUILD_DIR into BUILD_DIR/install, then builds tests/consumer against it
# out of tree, as users' projects would: with CMake (find_package(kinformer)) and with pkg-config
# (kinformer.pc, a plain compiler command line), each once with the core package alone and once
# with the Prometheus component (kinformer::prometheus, kinformer-prometheus.pc), and runs all
# four. It checks that nothing of the core package (exported targets, pkg-config file, headers)
# requires prometheus-cpp, and builds the libraries and kwatch configured with
# -DKINFORMER_WITH_PROMETHEUS=OFF. Then builds examples/ out of tree against the installed package
# (the e2e suite runs those programs).
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
# The core package needs no prometheus-cpp: not in its exported targets, its config's
# unconditional dependencies, its pkg-config Requires, nor in a core public header.
cmake_dir=$(dirname "$(find "$build/install" -name kinformerTargets.cmake -print -quit)")
if grep -n prometheus "$cmake_dir"/kinformerTargets*.cmake; then
  echo "check.sh: the core package's exported targets name prometheus-cpp (above)" >&2
  exit 1
fi
if grep -rlE '#include [<"]prometheus/' "$build/install/include/kinformer" | grep -v '/kinformer/prometheus/'; then
  echo "check.sh: a core public header includes prometheus-cpp (above)" >&2
  exit 1
fi
[ -f "$cmake_dir/kinformerPrometheusTargets.cmake" ] ||
  { echo "check.sh: the Prometheus component was not installed" >&2; exit 1; }

rm -rf "$build/consumer" "$build/consumer-prometheus"
cmake -S "$here" -B "$build/consumer" -G Ninja -DCMAKE_PREFIX_PATH="$build/install"
ninja -C "$build/consumer"
if grep -q prometheus "$build/consumer/build.ninja"; then
  echo "check.sh: the core consumer links prometheus-cpp" >&2; exit 1
fi
"$build/consumer/consumer"
cmake -S "$here" -B "$build/consumer-prometheus" -G Ninja -DCMAKE_PREFIX_PATH="$build/install" \
  -DKINFORMER_CONSUMER_PROMETHEUS=ON
ninja -C "$build/consumer-prometheus"
"$build/consumer-prometheus/consumer"

command -v pkg-config >/dev/null || { echo "check.sh: pkg-config not found" >&2; exit 1; }
pc_dir=$(dirname "$(find "$build/install" -name kinformer.pc -print -quit)")
[ -n "$pc_dir" ] || { echo "check.sh: kinformer.pc was not installed" >&2; exit 1; }
if PKG_CONFIG_PATH="$pc_dir" pkg-config --print-requires kinformer | grep prometheus; then
  echo "check.sh: kinformer.pc requires prometheus-cpp (above)" >&2; exit 1
fi
flags=$(PKG_CONFIG_PATH="$pc_dir" pkg-config --cflags --libs kinformer)
echo "pkg-config --cflags --libs kinformer: $flags"
# shellcheck disable=SC2086  # the flags are words
c++ -std=c++20 "$here/main.cc" -o "$build/consumer/consumer-pkg-config" $flags
"$build/consumer/consumer-pkg-config"
flags=$(PKG_CONFIG_PATH="$pc_dir" pkg-config --cflags --libs kinformer-prometheus)
echo "pkg-config --cflags --libs kinformer-prometheus: $flags"
# shellcheck disable=SC2086  # the flags are words
c++ -std=c++20 -DKINFORMER_CONSUMER_PROMETHEUS "$here/main.cc" \
  -o "$build/consumer-prometheus/consumer-pkg-config" $flags
"$build/consumer-prometheus/consumer-pkg-config"

# Without the Prometheus target: the libraries and kwatch still build (the unit tests and the sync
# benchmark read metrics through Prometheus and are left out with it). The main build's type, so
# that ccache serves the objects the option does not change.
root=$(cd "$here/../.." && pwd)
# A sibling of the build directory (one level below the tree, as build/ is): the same relative
# source paths, so ccache's objects match.
noprom="$root/$(basename "$build")-without-prometheus"
# The main build's flags, whatever this directory was configured with before.
main_flags=$(sed -n 's/^CMAKE_CXX_FLAGS_RELWITHDEBINFO:STRING=//p' "$build/CMakeCache.txt")
cmake -S "$root" -B "$noprom" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=$main_flags" \
  -DKINFORMER_WITH_PROMETHEUS=OFF -DKINFORMER_BUILD_TESTS=OFF >"$build/without-prometheus.log"
ninja -C "$noprom" -j"$(nproc)" kinformer_mesh kinformer_controller kwatch
if [ -n "$(ninja -C "$noprom" -t targets all | grep -i prometheus)" ]; then
  echo "check.sh: -DKINFORMER_WITH_PROMETHEUS=OFF still has a Prometheus target" >&2; exit 1
fi
echo "without prometheus: libraries and kwatch built"

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
