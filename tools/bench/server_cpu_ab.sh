#!/usr/bin/env bash
# The API server's CPU per sync, A/B: kinformer with gzip on, kinformer with gzip off, client-go
# (protobuf; LIST by default, --list-mode watchlist for WatchList; the informers of --resources,
# all three by default), by the block method of docs/BENCHMARKS.md, with what the server allocated
# and how many GC cycles it ran per sync (from its /metrics).
#
#   tools/bench/server_cpu_ab.sh [--rounds N] [--runs N] [--dir DIR] [--resources LIST]
#                                [--list-mode list|watchlist] [--pods N] [--secrets N] [--slices N]
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
# first) times the block's length, over the runs. Beside it, per sync: the bytes the server's Go
# heap allocated (go_memstats_alloc_bytes_total) and its GC cycles (go_gc_duration_seconds_count),
# read from /metrics with the launcher's admin certificate (DIR/pki), less their idle rates too.
# Prints every block, then the mean of the blocks per configuration, its standard error and the
# ratio to client-go, and a GC-adjusted figure (below). With the LIST, --rounds 10 takes about
# 5 minutes. (gzip applies to LIST responses only: with WatchList the two kinformer
# configurations send the same requests.)
set -euo pipefail
export LC_ALL=C  # printf/awk decimals
KINFORMER_BUILD_DIR="${KINFORMER_BUILD_DIR:-${BUILD_DIR:-build}}"  # BUILD_DIR: this script's older name for it
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

rounds=12 runs=8 dir=/tmp/kinformer-sync-e2e resources=pods,secrets,endpointslices mode=list
pods=20000 secrets=2000 slices=1000
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --dir) dir="$2"; shift 2 ;;
    --resources) resources="$2"; shift 2 ;;
    --list-mode) mode="$2"; shift 2 ;;
    --pods) pods="$2"; shift 2 ;;
    --secrets) secrets="$2"; shift 2 ;;
    --slices) slices="$2"; shift 2 ;;
    *) die "unknown argument $1" ;;
  esac
done

[[ "$rounds" =~ ^[1-9][0-9]*$ && "$runs" =~ ^[1-9][0-9]*$ ]] || die "--rounds and --runs take a positive number"
[[ "$mode" == list || "$mode" == watchlist ]] || die "--list-mode takes list or watchlist"

bench="$bench_dir"
for p in kinformer_sync_bench clientgo-sync; do
  [[ -x "$bench/$p" ]] || fail "$bench/$p not built (run tools/bench/sync.sh once)"
done
export KUBECONFIG="$dir/kubeconfig"
apiserver_attach "$dir"
# "<allocated bytes> <GC cycles>" of kube-apiserver so far, from its /metrics.
heap() {
  python3 - "$dir" <<'PY'
import sys, urllib.request
from benchlib import launcher_server
url, ctx = launcher_server(sys.argv[1])
alloc = gc = None
for line in urllib.request.urlopen(url + "/metrics", context=ctx, timeout=30).read().decode().splitlines():
    if line.startswith("go_memstats_alloc_bytes_total "):
        alloc = float(line.split()[1])
    elif line.startswith("go_gc_duration_seconds_count "):
        gc = float(line.split()[1])
if alloc is None or gc is None:
    sys.exit("server_cpu_ab.sh: no go_memstats_alloc_bytes_total or go_gc_duration_seconds_count in /metrics")
print(int(alloc), int(gc))
PY
}

run() {  # configuration name -> one sync
  case "$1" in
    on | off)
      "$bench/kinformer_sync_bench" --encoding protobuf --list-mode "$mode" --gzip "$1" \
        --resources "$resources" --pods "$pods" --secrets "$secrets" --slices "$slices" --settle-ms 0 ;;
    client-go)
      "$bench/clientgo-sync" -encoding protobuf -list-mode "$mode" -resources "$resources" \
        -pods "$pods" -secrets "$secrets" -slices "$slices" -settle-ms 0 ;;
  esac >/dev/null 2>&1 || fail "a $1 run failed"
}

read -r m0 g0 < <(heap)
a="$(ticks "$pid")" t="$(now)"; sleep 10
b="$(ticks "$pid")" t1="$(now)"
read -r m1 g1 < <(heap)
# The idle server's rates, subtracted from every block like its CPU: CPU-s, bytes allocated and GC
# cycles per second.
read -r idle idle_alloc idle_gc < <(awk -v a="$a" -v b="$b" -v t0="$t" -v t1="$t1" -v k="$tck" \
  -v m0="$m0" -v m1="$m1" -v g0="$g0" -v g1="$g1" \
  'BEGIN { d = t1 - t0; print (b - a) / k / d, (m1 - m0) / d, (g1 - g0) / d }')
idle_mb="$(awk -v x="$idle_alloc" 'BEGIN { printf "%.2f", x / 1e6 }')"
echo "kube-apiserver pid $pid, idle $idle CPU-s/s, $idle_mb MB/s allocated, $idle_gc GC cycles/s;" \
  "$pods Pods, $secrets Secrets, $slices EndpointSlices; $resources; $mode"

results="$(mktemp)"
at_exit rm -f "$results"
for r in $(seq "$rounds"); do
  case $((r % 3)) in
    0) order="on off client-go" ;;
    1) order="off client-go on" ;;
    *) order="client-go on off" ;;
  esac
  for c in $order; do
    run "$c"  # warm-up
    read -r m0 g0 < <(heap)
    block "$runs" run "$c"
    read -r m1 g1 < <(heap)
    if ((m1 < m0 || g1 < g0)); then fail "the server's counters went back (restarted?) during a $c block"; fi
    mb="$(awk -v a="$m0" -v b="$m1" -v n="$runs" -v i="$idle_alloc" -v d="$len" \
      'BEGIN { printf "%.1f", ((b - a) - i * d) / n / 1e6 }')"
    gcs="$(awk -v a="$g0" -v b="$g1" -v n="$runs" -v i="$idle_gc" -v d="$len" \
      'BEGIN { printf "%.3f", ((b - a) - i * d) / n }')"
    printf 'round %d %-9s %s s, %s MB allocated, %s GC cycles per sync (block of %d, %.1f s)\n' \
      "$r" "$c" "$per" "$mb" "$gcs" "$runs" "$len"
    echo "$c $per $mb $gcs" >>"$results"
  done
done

python3 - "$results" <<'PY'
import statistics as st, sys
from benchlib import se
blocks = {}
for line in open(sys.argv[1]):
    name, *values = line.split()
    blocks.setdefault(name, []).append([float(v) for v in values])
def column(name, i):
    return [block[i] for block in blocks[name]]
names = ("on", "off", "client-go")
# Part of a block's spread is how many GC cycles of the server's whole heap fell into it: a cycle
# comes every so many allocated bytes, so where it lands is luck, but how often it comes is set
# by what a sync allocates. The GC-adjusted figure keeps the second and removes the first: the
# CPU of one cycle (k, the slope of CPU on cycles within each configuration) times the difference
# between a block's cycles and the cycles its allocation predicts (the run's cycles per MB). Its
# standard error leaves out the uncertainty of k (printed) and of the cycles per MB; with too
# few blocks, or the same cycles in every block, there is no slope and no adjustment.
sxy = sxx = 0.0
for name in names:
    cpu, gcs = column(name, 0), column(name, 2)
    mc, mg = st.mean(cpu), st.mean(gcs)
    sxy += sum((g - mg) * (c - mc) for c, g in zip(cpu, gcs))
    sxx += sum((g - mg) ** 2 for g in gcs)
k = sxy / sxx if sxx > 0 else 0.0
dof = sum(len(blocks[name]) for name in names) - len(names) - 1
k_se = float("nan")
if sxx > 0 and dof > 0:
    rss = 0.0
    for name in names:
        cpu, gcs = column(name, 0), column(name, 2)
        mc, mg = st.mean(cpu), st.mean(gcs)
        rss += sum(((c - mc) - k * (g - mg)) ** 2 for c, g in zip(cpu, gcs))
    k_se = (rss / dof / sxx) ** 0.5
all_mb = sum(sum(column(name, 1)) for name in names)
per_mb = sum(sum(column(name, 2)) for name in names) / all_mb if all_mb > 0 else 0.0
def adjusted(name):
    return [c - k * (g - m * per_mb) for c, m, g in zip(*(column(name, i) for i in range(3)))]
cpu0, mb0 = st.mean(column("client-go", 0)), st.median(column("client-go", 1))
adj0 = st.mean(adjusted("client-go"))
print("| configuration | API-server CPU per sync, mean of blocks (s) | standard error | ratio | "
      "GC-adjusted (s) | standard error | ratio | allocated per sync, median of blocks (MB) | ratio | "
      "GC cycles per sync |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for name in names:
    cpu, mb, gcs, adj = column(name, 0), column(name, 1), column(name, 2), adjusted(name)
    label = {"on": "kinformer, gzip on", "off": "kinformer, gzip off"}.get(name, name)
    print(f"| {label} | {st.mean(cpu):.3f} | {se(cpu):.3f} | {st.mean(cpu) / cpu0:.2f}x | "
          f"{st.mean(adj):.3f} | {se(adj):.3f} | {st.mean(adj) / adj0:.2f}x | "
          f"{st.median(mb):.1f} | {st.median(mb) / mb0:.2f}x | {st.mean(gcs):.3f} |")
if sxx > 0:
    print(f"one GC cycle: {k:.2f} CPU-s (se {k_se:.2f}; slope within configurations); "
          f"{per_mb * 1000:.2f} cycles per GB allocated")
else:
    print("one GC cycle: n/a (every configuration's blocks had the same cycles): GC-adjusted = plain mean")
PY
