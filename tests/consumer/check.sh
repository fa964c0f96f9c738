#!/usr/bin/env bash
# Installs kinformer from BUILD_DIR into BUILD_DIR/install, builds tests/consumer against it
# out of tree, and runs it.
set -euo pipefail
build=$1
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cmake --install "$build" --prefix "$build/install"
rm -rf "$build/consumer"
cmake -S "$here" -B "$build/consumer" -G Ninja -DCMAKE_PREFIX_PATH="$build/install"
ninja -C "$build/consumer"
"$build/consumer/consumer"
