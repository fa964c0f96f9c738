#!/usr/bin/env bash
# The chaos suite alone, for as long as you like:
#   tools/scripts/chaos.sh [--duration 30m] [--seed N] [--dir DIR]
# Installs what is missing (tools/scripts/setup.sh, as the test command does), builds the chaos
# test (e2e/suites/chaos_e2e_test.cc), starts the embedded kube-apiserver + etcd with
# e2e/launcher.sh (unless KUBECONFIG is set: then that cluster, without restarts and
# compactions), runs the test with KINFORMER_CHAOS_DURATION / KINFORMER_CHAOS_SEED, and stops
# the launcher on exit. The test prints the seed, the faults by kind, restarts, compactions,
# relists, rewatches and the differences found; rerun a failure with its --seed.
#
# Environment: KINFORMER_BUILD_DIR (default ./build, the test command's), KINFORMER_BUILD_JOBS.
# The README's test command runs the same test with its short default (45 s) via ctest -L e2e.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${KINFORMER_BUILD_DIR:-$root/build}
duration=45s
seed=
dir=${KINFORMER_E2E_DIR:-/tmp/kinformer-chaos}
usage() { sed -n '2,3p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --duration) duration=${2:?--duration needs a value}; shift 2 ;;
    --duration=*) duration=${1#*=}; shift ;;
    --seed) seed=${2:?--seed needs a value}; shift 2 ;;
    --seed=*) seed=${1#*=}; shift ;;
    --dir) dir=${2:?--dir needs a value}; shift 2 ;;
    --dir=*) dir=${1#*=}; shift ;;
    -h|--help) usage ;;
    *) echo "chaos.sh: unknown argument '$1'" >&2; usage ;;
  esac
done
[[ "$duration" =~ ^[0-9]+[smh]?$ ]] || { echo "chaos.sh: --duration: expected e.g. 45s, 30m or 2h" >&2; exit 2; }
[ -z "$seed" ] || [[ "$seed" =~ ^[0-9]+$ ]] || { echo "chaos.sh: --seed: expected a decimal number" >&2; exit 2; }

bash "$root/tools/scripts/setup.sh"
mkdir -p "$build"
if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_INSTALL_PREFIX="$build/install" >"$build/chaos-configure.log"
fi
ninja -C "$build" -j"${KINFORMER_BUILD_JOBS:-$(nproc)}" chaos_e2e >&2

launched=0
if [ -z "${KUBECONFIG:-}" ]; then
  export KINFORMER_E2E_DIR=$dir
  trap 'bash "$root/e2e/launcher.sh" down --dir "$KINFORMER_E2E_DIR" >&2 || true' EXIT
  up_log=$(mktemp)
  bash "$root/e2e/launcher.sh" up --dir "$KINFORMER_E2E_DIR" >"$up_log"
  KUBECONFIG=$(sed -n 's/^KUBECONFIG=//p' "$up_log" | tail -1)
  rm -f "$up_log"
  export KUBECONFIG
  launched=1
  echo "KUBECONFIG=$KUBECONFIG (embedded kube-apiserver)" >&2
fi
export KINFORMER_E2E_LAUNCHED=$launched
export KINFORMER_CHAOS_DURATION=$duration
if [ -n "$seed" ]; then export KINFORMER_CHAOS_SEED=$seed; else unset KINFORMER_CHAOS_SEED; fi
"$build/e2e/suites/chaos_e2e"
