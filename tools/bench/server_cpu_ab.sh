#!/usr/bin/env bash
# The API server's CPU per sync for the LIST path, A/B: kinformer with gzip on, kinformer with gzip
# off, client-go (protobuf, LIST; the informers of --resources, all three by default), by the block
# method of docs/BENCHMARKS.md.
#
#   tools/bench/server_cpu_ab.sh [--rounds N] [--runs N] [--dir DIR] [--resources LIST]
#                                [--pods N] [--secrets N] [--slices N]
#
# Needs the launcher's server running with the benchmark's objects loaded: sync.sh stops a server
# it started itself, so start it first and sync.sh (or fanout-loader sync-load) loads it:
#   bash e2e/launcher.sh up --dir /tmp/kinformer-sync-e2e \
#     "--apiserver-arg=--watch-cache-sizes=endpointslices.discovery.k8s.io#1000"
# (--dir DIR: the launcher's directory). --pods/--secrets/--slices (sync.sh's defaults) are the
# counts each run waits for: at most what the server holds, or every run times out. Needs the
# built benchmark programs (build/tools/bench). Per round, one block per configuration in a
# rotating order: one warm-up run, then --runs (8) back-to-back runs; the block's figure is
# kube-apiserver's utime+stime (/proc/PID/stat) over the block, less its idle rate (measured
# first) times the block's length, over the runs. Prints every block, then the mean of the
# blocks per configuration, its standard error and the ratio to client-go. --rounds 12 takes
# about 6 minutes.
set -euo pipefail
export LC_ALL=C  # printf/awk decimals

rounds=12 runs=8 dir=/tmp/kinformer-sync-e2e resources=pods,secrets,endpointslices
pods=20000 secrets=2000 slices=1000
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --dir) dir="$2"; shift 2 ;;
    --resources) resources="$2"; shift 2 ;;
    --pods) pods="$2"; shift 2 ;;
    --secrets) secrets="$2"; shift 2 ;;
    --slices) slices="$2"; shift 2 ;;
    *) echo "server_cpu_ab.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

[[ "$rounds" =~ ^[1-9][0-9]*$ && "$runs" =~ ^[1-9][0-9]*$ ]] ||
  { echo "server_cpu_ab.sh: --rounds and --runs take a positive number" >&2; exit 2; }

root="$(cd "$(dirname "$0")/../.." && pwd)"
bench="${BUILD_DIR:-$root/build}/tools/bench"
for p in kinformer_sync_bench clientgo-sync; do
  [[ -x "$bench/$p" ]] || { echo "server_cpu_ab.sh: $bench/$p not built (run tools/bench/sync.sh once)" >&2; exit 1; }
done
export KUBECONFIG="$dir/kubeconfig"
pid="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["apiserver"]["pid"])' "$dir/state.json")"
[[ -r "/proc/$pid/stat" ]] || { echo "server_cpu_ab.sh: kube-apiserver (pid $pid, $dir) is not running" >&2; exit 1; }
tck="$(getconf CLK_TCK)"
ticks() { awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$pid/stat"; }
now() { date +%s.%N; }

run() {  # configuration name -> one sync
  case "$1" in
    on | off)
      "$bench/kinformer_sync_bench" --encoding protobuf --list-mode list --gzip "$1" \
        --resources "$resources" --pods "$pods" --secrets "$secrets" --slices "$slices" --settle-ms 0 ;;
    client-go)
      "$bench/clientgo-sync" -encoding protobuf -list-mode list -resources "$resources" \
        -pods "$pods" -secrets "$secrets" -slices "$slices" -settle-ms 0 ;;
  esac >/dev/null 2>&1 || { echo "server_cpu_ab.sh: a $1 run failed" >&2; exit 1; }
}

a="$(ticks)" t="$(now)"; sleep 10
idle="$(awk -v a="$a" -v b="$(ticks)" -v t0="$t" -v t1="$(now)" -v k="$tck" 'BEGIN { print (b - a) / k / (t1 - t0) }')"
echo "kube-apiserver pid $pid, idle $idle CPU-s/s; $pods Pods, $secrets Secrets, $slices EndpointSlices; $resources"

results="$(mktemp)"
trap 'rm -f "$results"' EXIT
for r in $(seq "$rounds"); do
  case $((r % 3)) in
    0) order="on off client-go" ;;
    1) order="off client-go on" ;;
    *) order="client-go on off" ;;
  esac
  for c in $order; do
    run "$c"  # warm-up
    a="$(ticks)" t0="$(now)"
    for _ in $(seq "$runs"); do run "$c"; done
    b="$(ticks)" t1="$(now)"
    per="$(awk -v a="$a" -v b="$b" -v t0="$t0" -v t1="$t1" -v k="$tck" -v i="$idle" -v n="$runs" \
      'BEGIN { printf "%.3f", ((b - a) / k - i * (t1 - t0)) / n }')"
    printf 'round %d %-9s %s s per sync (block of %d, %.1f s)\n' "$r" "$c" "$per" "$runs" \
      "$(awk -v t0="$t0" -v t1="$t1" 'BEGIN { print t1 - t0 }')"
    echo "$c $per" >>"$results"
  done
done

python3 - "$results" <<'PY'
import statistics as st, sys
blocks = {}
for line in open(sys.argv[1]):
    name, value = line.split()
    blocks.setdefault(name, []).append(float(value))
base = st.mean(blocks["client-go"])
print("| configuration | API-server CPU per sync, mean of blocks (s) | standard error | ratio to client-go |")
print("|---|---:|---:|---:|")
for name in ("on", "off", "client-go"):
    v = blocks[name]
    se = st.stdev(v) / len(v) ** 0.5 if len(v) > 1 else float("nan")
    label = {"on": "kinformer, gzip on", "off": "kinformer, gzip off"}.get(name, name)
    print(f"| {label} | {st.mean(v):.3f} | {se:.3f} | {st.mean(v) / base:.2f}x |")
PY
