#!/usr/bin/env bash
# workqueue.sh: the work-queue benchmark. kinformer's controller::WorkQueue
# (kinformer_workqueue_bench) side by side with client-go v0.36's rate-limiting work queue
# (clientgo-workqueue: cmd/clientgo-workqueue), interleaved; no server.
#
#   tools/bench/workqueue.sh                   # 100,000 keys, 8 workers, 5 runs each (~15 s)
#   tools/bench/workqueue.sh --runs 3 --keys 10000
#
# Options: --runs N (processes per side, default 5), --keys N (default 100000), --workers W
# (default 8), --rounds R (throughput rounds per process, default 10), --out FILE (default
# build/tools/bench/workqueue-results.md; each process's JSON goes to workqueue-results.jsonl).
# Build dir: ${KINFORMER_BUILD_DIR:-build}.
#
# Per process (see workqueue_bench.cc and cmd/clientgo-workqueue/main.go): memory with every key
# queued and none handed out (heap delta per key: mallinfo2 in C++, HeapAlloc after runtime.GC()
# in Go; VmRSS delta per key), then R rounds of one producer adding every key while W workers
# get, forget and done them (keys/s from the first add to the last done). The table gives, per
# side, the median over the processes of each process's median keys/s, the median memory
# figures, and kinformer / client-go ratios. The order of the two sides alternates per run.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

runs=5 keys=100000 workers=8 rounds=10 out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --keys) keys="$2"; shift 2 ;;
    --workers) workers="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    -h|--help) print_help ;;
    *) die "unknown argument $1" ;;
  esac
done
num --runs "$runs" 1 50
num --keys "$keys" 1 10000000
num --workers "$workers" 1 256
num --rounds "$rounds" 1 100

out="${out:-$bench_dir/workqueue-results.md}"
raw="${out%.md}.jsonl"
mkdir -p "$(dirname "$out")"

build_cxx kinformer_workqueue_bench
build_go_peers
kin="$bench_dir/kinformer_workqueue_bench"
cg="$bench_dir/clientgo-workqueue"

: >"$raw"
loads=()
for ((run = 1; run <= runs; run++)); do
  order=(kin cg)
  ((run % 2 == 0)) && order=(cg kin)
  for side in "${order[@]}"; do
    loads+=("$(loadavg1)")
    if [[ "$side" == kin ]]; then
      "$kin" --keys "$keys" --workers "$workers" --rounds "$rounds" >>"$raw"
    else
      "$cg" -keys "$keys" -workers "$workers" -rounds "$rounds" >>"$raw"
    fi
    log "run $run: $side done"
  done
done

python3 - "$raw" "$(commit_short)" "${loads[@]}" >"$out" <<'EOF'
import json, statistics, sys
import benchlib

raw, commit = sys.argv[1:3]
loads = [float(x) for x in sys.argv[3:]]
rows = [json.loads(line) for line in open(raw)]
side = {s: [r for r in rows if r["side"] == s] for s in ("kinformer", "client-go")}
first = rows[0]

def med(s, k):
    return statistics.median(r[k] for r in side[s])

print(f"# Work queue: {first['keys']:,} keys, {first['workers']} workers, "
      f"{len(side['kinformer'])} processes per side\n")
print(benchlib.run_context(commit, loads) + "\n")
print("| | kinformer | client-go v0.36 | kinformer / client-go |")
print("|---|---:|---:|---:|")
for key, name, d in (("keys_per_s_median", "throughput, keys/s (median)", 0),
                     ("heap_bytes_per_queued_key", "heap per queued key, bytes", 1),
                     ("rss_bytes_per_queued_key", "RSS per queued key, bytes", 1),
                     ("vmhwm_kb", "peak RSS of the process, kB", 0),
                     ("cpu_s", "CPU of the process, s", 2)):
    k, g = med("kinformer", key), med("client-go", key)
    print(f"| {name} | {benchlib.fmt(k, d)} | {benchlib.fmt(g, d)} | {benchlib.ratio(k, g):.2f} |")
spread = {s: (min(r["keys_per_s_median"] for r in side[s]), max(r["keys_per_s_median"] for r in side[s]))
          for s in side}
print(f"\nthroughput per process, min-max: kinformer {benchlib.fmt(spread['kinformer'][0])}-"
      f"{benchlib.fmt(spread['kinformer'][1])}, client-go {benchlib.fmt(spread['client-go'][0])}-"
      f"{benchlib.fmt(spread['client-go'][1])} keys/s")
EOF
cat "$out"
log "table in $out; raw JSON in $raw"
