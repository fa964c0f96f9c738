#!/usr/bin/env bash
# The README's main command: installs what is missing, builds kwatch, starts the embedded real
# kube-apiserver (unless KUBECONFIG names a cluster), runs `kwatch demo`, and tears it down.
# Extra arguments go to `kwatch demo` (e.g. --components 50, --unshared).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${KINFORMER_BUILD_DIR:-$root/build}
step() { printf '==> %s\n' "$*" >&2; }

step "setup: Debian packages"
bash "$root/tools/scripts/setup.sh"
step "build kwatch ($build)"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C "$build" kwatch

if [ -z "${KUBECONFIG:-}" ]; then
  export KINFORMER_E2E_DIR=${KINFORMER_E2E_DIR:-/tmp/kinformer-demo}
  trap 'step "stopping the embedded kube-apiserver"; bash "$root/e2e/launcher.sh" down --dir "$KINFORMER_E2E_DIR" >&2 || true' EXIT
  step "starting a real kube-apiserver + etcd on loopback (first run builds them: see progress)"
  up_log=$(mktemp)
  bash "$root/e2e/launcher.sh" up --dir "$KINFORMER_E2E_DIR" | tee "$up_log" >&2
  KUBECONFIG=$(sed -n 's/^KUBECONFIG=//p' "$up_log" | tail -1)
  rm -f "$up_log"
  export KUBECONFIG
else
  step "using the cluster from KUBECONFIG=$KUBECONFIG"
fi

step "kwatch demo $*"
"$build/tools/kwatch/kwatch" demo "$@"
