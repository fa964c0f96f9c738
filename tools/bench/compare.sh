#!/usr/bin/env bash
# compare.sh: kinformer_bench and its client-go peer (clientgo_bench, cmd/clientgo_bench) on the same bytes, on
# the same machine, one after the other; prints one table of ratios against DESIGN.md's targets.
#
#   tools/bench/compare.sh                      # build dir: ${KINFORMER_BUILD_DIR:-build}
#   REPETITIONS=5 PASSES=7 tools/bench/compare.sh
#
# Builds what is missing (cmake/ninja for kinformer_bench, go build for the peer; both cached),
# writes the stream with `kinformer_bench --write-stream/--write-memory-stream`, runs both, and
# keeps the raw outputs next to the binaries (tools/bench/compare-{kinformer,clientgo}.json).
# Exit status: 0 when it ran (whether or not the targets are met), non-zero on a failure.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
reps="${REPETITIONS:-5}"
passes="${PASSES:-7}"
min_time="${MIN_TIME:-0.5}"
out="$bench_dir"

cmake_args=(-DKINFORMER_BUILD_TESTS=OFF)  # only if it has to configure
build_cxx kinformer_bench
build_go_peers

bench="$out/kinformer_bench"
stream="$out/pods.ndjson"
memory="$out/pods-distinct.ndjson"
if [[ ! -s "$stream" || ! -s "$memory" || "$bench" -nt "$stream" || "$bench" -nt "$memory" ]]; then
  log "writing the streams"
  "$bench" --write-stream="$stream" --write-memory-stream="$memory"
fi

log "running kinformer_bench ($reps repetitions, min time ${min_time}s)"
"$bench" --benchmark_filter='^BM_(BareRapidJsonParse|WatchDecoderPods|IngestPods|MemoryPerPod|MemoryPerPodInStore)(/|$)' \
  --benchmark_repetitions="$reps" --benchmark_report_aggregates_only=true \
  --benchmark_min_time="$min_time" --benchmark_format=json >"$out/compare-kinformer.json"

log "running clientgo_bench ($passes passes per metric after a warm-up)"
"$out/clientgo_bench" -stream "$stream" -memory-stream "$memory" -passes "$passes" >"$out/compare-clientgo.json"

python3 - "$out/compare-kinformer.json" "$out/compare-clientgo.json" "$reps" "$passes" <<'PY'
import json, sys

kin_path, cg_path, reps, passes = sys.argv[1:5]
kin = json.load(open(kin_path))
cg = {m["metric"]: m for m in map(json.loads, open(cg_path)) }

def agg(name, which="median"):
    for b in kin["benchmarks"]:
        if b.get("run_name", "").split("/")[0] == name and b.get("aggregate_name", which) == which:
            return b
    sys.exit(f"compare.sh: {name} ({which}) missing from kinformer_bench output")

to_s = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
def wall_rate(b, events):
    return events / (b["real_time"] * to_s[b["time_unit"]])

def k(v):
    return f"{v/1e3:,.1f} k" if v < 1e6 else f"{v/1e6:,.2f} M"

events = cg["clientgo_decode"]["events"]
rows = []
def row(metric, kv, cv, fmt, target=None, better="higher"):
    ratio = kv / cv
    if target is None:
        tgt, res = "-", "-"
    else:
        tgt = (">= " if better == "higher" else "<= ") + f"{target}x"
        ok = ratio >= target if better == "higher" else ratio <= target
        res = "PASS" if ok else "MISS"
    rows.append((metric, fmt(kv), fmt(cv), f"{ratio:.2f}x", tgt, res))

dec, ing, bare = agg("BM_WatchDecoderPods"), agg("BM_IngestPods"), agg("BM_BareRapidJsonParse")
row("decode Pods, events/s (CPU)", dec["items_per_second"], cg["clientgo_decode"]["events_per_sec_cpu_median"], k)
row("decode Pods, MiB/s (CPU)", dec["bytes_per_second"], cg["clientgo_decode"]["bytes_per_sec_cpu_median"],
    lambda v: f"{v/2**20:,.1f}")
row("decode Pods, events/s (wall)", wall_rate(dec, events), cg["clientgo_decode"]["events_per_sec_wall_median"], k)
row("ingest (decode + store), events/s (CPU)", ing["items_per_second"],
    cg["clientgo_ingest"]["events_per_sec_cpu_median"], k, 3)
row("ingest (decode + store), events/s (wall)", wall_rate(ing, events),
    cg["clientgo_ingest"]["events_per_sec_wall_median"], k)
rows.append(("typed decode vs bare RapidJSON Document::Parse, events/s (CPU)", k(dec["items_per_second"]),
             f"(bare RapidJSON) {k(bare['items_per_second'])}",
             f"{dec['items_per_second']/bare['items_per_second']:.2f}x", ">= 0.5x",
             "PASS" if dec["items_per_second"] / bare["items_per_second"] >= 0.5 else "MISS"))
row("heap per cached Pod, B (Store / Indexer)", agg("BM_MemoryPerPodInStore")["bytes_per_pod"],
    cg["clientgo_memory_per_pod_indexer"]["bytes_per_pod"], lambda v: f"{v:,.0f}", 0.3, "lower")
row("heap per Pod held in vector / slice, B", agg("BM_MemoryPerPod")["bytes_per_pod"],
    cg["clientgo_memory_per_pod_slice"]["bytes_per_pod"], lambda v: f"{v:,.0f}")

head = ("metric", "kinformer", "client-go", "ratio", "target", "result")
print("| " + " | ".join(head) + " |")
print("|---|---:|---:|---:|---|---|")
for r in rows:
    print("| " + " | ".join(r) + " |")
print()
print(f"kinformer: median of {reps} repetitions (Google Benchmark, thread CPU time); "
      f"client-go: median of {passes} passes after a warm-up (process CPU time, GC workers included).")
print("client-go best pass: decode {} events/s, ingest {} events/s (CPU); kinformer_bench context: {} CPUs, load avg {}.".format(
    k(cg["clientgo_decode"]["events_per_sec_cpu_best"]), k(cg["clientgo_ingest"]["events_per_sec_cpu_best"]),
    kin["context"].get("num_cpus"), ", ".join(f"{x:.2f}" for x in kin["context"].get("load_avg", []))))
PY
