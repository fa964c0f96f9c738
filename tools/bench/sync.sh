#!/usr/bin/env bash
# sync.sh: the side-by-side sync benchmark. kinformer (kinformer_sync_bench) and client-go
# v0.36 (clientgo-sync: cmd/clientgo-sync), each with Pod, Secret and EndpointSlice informers on all namespaces,
# against a real kube-apiserver on loopback, interleaved.
#
#   tools/bench/sync.sh                  # 20,000 Pods, 2,000 Secrets, 1,000 EndpointSlices, 3 rounds
#   tools/bench/sync.sh --pods 50000
#   tools/bench/sync.sh --quick          # smoke run: 2,000 Pods, 200 Secrets, 100 slices, 1 round
#   tools/bench/sync.sh --plot "5000 20000 50000"   # protobuf only, at each Pod count: docs/bench/sync.png
#
# Wall time on 2 cores: the sync runs ~8 min once the objects are loaded (a quiet machine: ~4 min
# of rounds + ~3.5 min of CPU blocks in 3 rounds; more under load), ~9 min from an empty
# server (loading 23,000 objects takes ~100 s; so does deleting 15,000 Pods when --pods shrinks),
# then the fan-out benchmark ~8 min; --quick ~2.5 min with its own --dir (the fan-out smoke run
# included); --plot "5000 20000" ~5 min from a server holding 20,000 Pods (two loads, 8 runs).
#
# Options: --pods N (default 20000), --secrets N (2000), --slices N (1000), --namespaces N (4),
# --rounds N (3), --out FILE (default <build>/tools/bench/sync-results.md; raw JSON lines in
# sync-results.jsonl beside it), --dir DIR (launcher state; default /tmp/kinformer-sync-e2e),
# --settle-ms MS (1000), --no-per-resource (skip the single-informer memory runs), --cpu-runs N
# (6; 0 skips them: the back-to-back runs per protobuf configuration for API-server CPU, below),
# --cpu-rounds N (3: rounds of those blocks in rotating order; --quick 1),
# --plot "COUNTS", --plot-rounds N (1), --plot-out FILE (default docs/bench/sync.png), --replot (with
# --plot: no runs, table and plot again from the JSON lines of the last --plot run),
# --gzip on|off (on: kinformer's RestClientOptions::gzip, passed explicitly; client-go asks for gzip
# as Go's transport does by default), --no-fanout (skip the fan-out benchmark, which otherwise runs after the sync runs on the
# same server: tools/bench/fanout.sh with the arguments after "--" (default none; --quick passes
# --quick), its tables appended to this table and its Pods deleted after it; ~8 min more).
# Example: tools/bench/sync.sh -- --source synthetic --handlers "100 1000"
# Build dir: ${KINFORMER_BUILD_DIR:-build}. C++ builds take ${KINFORMER_BUILD_LOCK:-/tmp/kinformer-build.lock}
# with flock when flock exists (machines whose cores are shared between builds; lib.sh).
#
# Unless KUBECONFIG is set, uses the e2e launcher's kube-apiserver + etcd in DIR (e2e/launcher.sh;
# reused when DIR already runs one started by this script, else started with the EndpointSlice
# watch cache enabled, which the launcher disables for its 410 tests, and stopped at exit). The
# server must be on a loopback address. API-server CPU needs its pid: DIR/state.json (also when
# KUBECONFIG is DIR/kubeconfig of a launcher), else $KUBE_APISERVER_PID, else it is reported n/a.
#
# Per configuration -- side {kinformer, client-go} x encoding {protobuf, json} x list mode
# {watchlist, list} -- one process per run; the 8 configurations run in one order in odd rounds
# and reversed in even rounds. Each program syncs, prints one JSON line (sync time, VmHWM peak,
# settled VmRSS, bytes received) and exits; this script adds kube-apiserver's CPU (utime+stime
# of /proc/PID/stat before and after the run, minus its idle rate measured before the runs times
# the run's wall time). Before the rounds: each configuration once on the empty namespace
# sync-empty (the zero-object RSS: memory per object = (steady - zero) / objects). In every
# round: each side (protobuf, WatchList and LIST) once per resource alone, for memory per object
# per resource in both list modes. After the rounds: API-server CPU in blocks of back-to-back runs
# per protobuf configuration (cpu_blocks, below). Then one markdown table of medians, with kinformer/client-go ratios and the
# targets.
#
# --plot: loads each Pod count in turn (Secrets and slices as given), runs the four protobuf
# configurations --plot-rounds times, and plots sync time and memory per object against the
# object count with gnuplot (installs gnuplot-nox with apt-get when missing).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

pods=20000 secrets=2000 slices=1000 namespaces=4 rounds=3 out="" dir="" settle_ms=1000 cpu_runs=6 cpu_rounds=3
per_resource=1 plot="" plot_rounds=1 replot=0 plot_out="$root/docs/bench/sync.png"
fanout=1 fanout_args=() fanout_quick=0 gzip=on
while [[ $# -gt 0 ]]; do
  case "$1" in
    --pods) pods="$2"; shift 2 ;;
    --secrets) secrets="$2"; shift 2 ;;
    --slices) slices="$2"; shift 2 ;;
    --namespaces) namespaces="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --dir) dir="$2"; shift 2 ;;
    --settle-ms) settle_ms="$2"; shift 2 ;;
    --no-per-resource) per_resource=0; shift ;;
    --cpu-runs) cpu_runs="$2"; shift 2 ;;
    --cpu-rounds) cpu_rounds="$2"; shift 2 ;;
    --plot) plot="$2"; shift 2 ;;
    --plot-rounds) plot_rounds="$2"; shift 2 ;;
    --plot-out) plot_out="$2"; shift 2 ;;
    --replot) replot=1; shift ;;
    --no-fanout) fanout=0; shift ;;
    --gzip) gzip="$2"; shift 2 ;;
    --quick) pods=2000 secrets=200 slices=100 rounds=1 cpu_runs=2 cpu_rounds=1 fanout_quick=1; shift ;;
    --) shift; fanout_args=("$@"); break ;;
    -h|--help) print_help ;;
    *) die "unknown argument $1" ;;
  esac
done
[[ $gzip == on || $gzip == off ]] || die "--gzip takes on or off"
num --pods "$pods" 1 200000; num --secrets "$secrets" 0 100000; num --slices "$slices" 0 100000
num --namespaces "$namespaces" 1 100; num --rounds "$rounds" 1 20; num --cpu-runs "$cpu_runs" 0 50; num --cpu-rounds "$cpu_rounds" 1 20; num --plot-rounds "$plot_rounds" 1 20
for n in $plot; do num "--plot count" "$n" 1 200000; done

if [[ -n "$plot" ]]; then out="${out:-$bench_dir/sync-plot.md}"; else out="${out:-$bench_dir/sync-results.md}"; fi
raw="${out%.md}.jsonl"
work_dir sync

# --- table -----------------------------------------------------------------------------------
make_table() {
  local commit
  commit="$(commit_short)"
  python3 "$bench_lib_dir/sync_table.py" "$raw" "$out" "$rounds" "$elapsed" "$commit" "${plot:+plot}" "$plot_rounds"
  log "table written to $out (raw: $raw)"
}

make_plot() {
  if ! command -v gnuplot >/dev/null 2>&1; then
    log "installing gnuplot-nox"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends gnuplot-nox) >&2
  fi
  dat="${out%.md}.dat"
  python3 - "$raw" "$dat" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
zero = {(r["side"], r["encoding"], r["list_mode"]): r["steady_rss_kb"] for r in rows if r["kind"] == "zero"}
out = open(sys.argv[2], "w")
for side in ("kinformer", "client-go"):
    for mode in ("watchlist", "list"):
        pts = {}
        for r in rows:
            if r["kind"].startswith("plot-") and r["side"] == side and r["list_mode"] == mode and r["synced"]:
                z = zero.get((side, r["encoding"], mode))
                per = (r["steady_rss_kb"] - z) * 1024 / r["objects"] if z is not None else float("nan")
                pts.setdefault(r["objects"], []).append((r["sync_s"], per))
        out.write(f'# {side} {mode}\n')
        for n in sorted(pts):
            out.write(f'{n} {statistics.median(p[0] for p in pts[n]):.4f} {statistics.median(p[1] for p in pts[n]):.1f}\n')
        out.write("\n\n")
PY
  mkdir -p "$(dirname "$plot_out")"
  gnuplot <<GP
set terminal pngcairo size 960,400 font ",9"
set output "$plot_out"
set multiplot layout 1,2 title "Initial sync: Pods + $secrets Secrets + $slices EndpointSlices, protobuf (kube-apiserver 1.36 on loopback, 2 shared cores)"
set key top left
set grid
set xrange [0:*]
set yrange [0:*]
set xlabel "objects"
set ylabel "time to sync (s)"
plot "$dat" index 0 using 1:2 with linespoints title "kinformer WatchList", \
     "" index 1 using 1:2 with linespoints title "kinformer LIST", \
     "" index 2 using 1:2 with linespoints title "client-go WatchList", \
     "" index 3 using 1:2 with linespoints title "client-go LIST"
set ylabel "steady RSS per object, all three resources (B)"
set key bottom left
plot "$dat" index 0 using 1:3 with linespoints title "kinformer WatchList", \
     "" index 1 using 1:3 with linespoints title "kinformer LIST", \
     "" index 2 using 1:3 with linespoints title "client-go WatchList", \
     "" index 3 using 1:3 with linespoints title "client-go LIST"
unset multiplot
GP
  log "plot written to $plot_out (data: $dat)"
}

if [[ $replot == 1 ]]; then
  [[ -n "$plot" && -s "$raw" ]] || die "--replot needs --plot and the JSON lines of a --plot run ($raw)"
  elapsed=0
  make_table
  make_plot
  exit 0
fi

# --- build -----------------------------------------------------------------------------------
build_cxx kinformer_sync_bench
build_go_peers
kin="$bench_dir/kinformer_sync_bench"
cg="$bench_dir/clientgo-sync"
loader="$bench_dir/fanout-loader"

# --- server ----------------------------------------------------------------------------------
cache_arg="--watch-cache-sizes=endpointslices.discovery.k8s.io#1000"
state=""
if [[ -z "${KUBECONFIG:-}" ]]; then
  dir="${dir:-/tmp/kinformer-sync-e2e}"
  state="$dir/state.json"
  launcher_ensure --same-args "$dir" "--apiserver-arg=$cache_arg"  # the EndpointSlice watch cache on
elif [[ -f "$(dirname "$KUBECONFIG")/state.json" ]]; then
  state="$(dirname "$KUBECONFIG")/state.json"
fi
require_loopback
api_pid="${KUBE_APISERVER_PID:-}" etcd_pid=""
if [[ -n "$state" && -f "$state" ]]; then
  api_pid="$(json_get "$state" apiserver pid)"
  etcd_pid="$(json_get "$state" etcd pid)"
fi
[[ -n "$api_pid" && -r "/proc/$api_pid/stat" ]] || { log "no kube-apiserver pid: API-server CPU is n/a"; api_pid=""; }
log "server $server (kube-apiserver pid ${api_pid:-?}, etcd pid ${etcd_pid:-?})"
clk_tck="$(getconf CLK_TCK)"

totals="$work/totals.json"
load() {  # pods: loads, writes the cluster-wide totals to $totals
  log "loading $1 Pods, $secrets Secrets, $slices EndpointSlices into sync-0..sync-$((namespaces - 1))"
  timeout 1800 "$loader" sync-load -pods "$1" -secrets "$secrets" -slices "$slices" -namespaces "$namespaces" >"$totals"
  cat "$totals" >&2
}
total() { json_get "$totals" "$1_total"; }

idle_rate=0
measure_idle() {
  [[ -n "$api_pid" ]] || return 0
  sleep 2
  local a b
  a="$(ticks "$api_pid")"
  sleep 5
  b="$(ticks "$api_pid")"
  idle_rate="$(awk -v a="$a" -v b="$b" -v t="$clk_tck" 'BEGIN { printf "%.4f", (b - a) / t / 5 }')"
  log "kube-apiserver idle: $idle_rate CPU-s/s"
}

# --- runs ------------------------------------------------------------------------------------
run_one() {  # side encoding mode resources namespace kind round
  local side="$1" enc="$2" mode="$3" res="$4" ns="$5" kind="$6" round="$7" cmd
  local p=0 s=0 e=0
  if [[ -z "$ns" ]]; then p="$(total pods)" s="$(total secrets)" e="$(total endpointslices)"; fi
  if [[ $side == kinformer ]]; then
    cmd=("$kin" --encoding "$enc" --gzip "$gzip" --list-mode "$mode" --resources "$res" --pods "$p" --secrets "$s" --slices "$e"
      --settle-ms "$settle_ms")
    [[ -n "$ns" ]] && cmd+=(--namespace "$ns")
  else
    local gate=false
    [[ $mode == watchlist ]] && gate=true
    cmd=(env "KUBE_FEATURE_WatchListClient=$gate" "$cg" -encoding "$enc" -list-mode "$mode" -resources "$res"
      -pods "$p" -secrets "$s" -slices "$e" -settle-ms "$settle_ms")
    [[ -n "$ns" ]] && cmd+=(-namespace "$ns")
  fi
  local load1 a0 e0 w0 a1 e1 w1 rc=0
  load1="$(loadavg1)"
  a0="$(ticks "$api_pid")" e0="$(ticks "$etcd_pid")" w0="$(date +%s%N)"
  timeout --kill-after=10 400 "${cmd[@]}" >"$work/res.json" 2>"$work/err" || rc=$?
  a1="$(ticks "$api_pid")" e1="$(ticks "$etcd_pid")" w1="$(date +%s%N)"
  if [[ $rc != 0 || ! -s "$work/res.json" ]]; then
    log "run failed: $side $enc $mode $res ns=${ns:-all} rc=$rc"
    tail -n 5 "$work/err" >&2 || true
    return 0
  fi
  python3 - "$work/res.json" "$kind" "$round" "$load1" "$a0" "$a1" "$e0" "$e1" "$w0" "$w1" "$clk_tck" "$idle_rate" \
    "${api_pid:+1}" "$(grep -c 'level=warn\|level=error' "$work/err" || true)" >>"$raw" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
kind, rnd, load1, a0, a1, e0, e1, w0, w1, tck, idle, have_pid, warns = sys.argv[2:15]
wall = (int(w1) - int(w0)) / 1e9
r.update(kind=kind, round=int(rnd), loadavg1=float(load1), run_wall_s=wall, warn_lines=int(warns or 0))
if have_pid:
    raw = (float(a1) - float(a0)) / float(tck)
    r["apiserver_cpu_raw_s"] = raw
    r["apiserver_idle_cpu_per_s"] = float(idle)
    r["apiserver_cpu_s"] = max(0.0, raw - float(idle) * wall)
    r["etcd_cpu_s"] = (float(e1) - float(e0)) / float(tck)
print(json.dumps(r))
PY
  python3 -c 'import json,sys; r=json.loads(sys.stdin.readlines()[-1]); print("   %-9s %-8s %-9s %-30s sync=%6.3fs peak=%4dMB steady=%4dMB tcp=%6.1fMB api_cpu=%s load=%.2f" % (r["side"], r["encoding"], r["list_mode"], r["resources"] + ("@" + r["namespace"] if r["namespace"] else ""), r["sync_s"], r["peak_rss_kb"] // 1024, r["steady_rss_kb"] // 1024, r["tcp_bytes_received"] / 1e6, ("%.2fs" % r["apiserver_cpu_s"]) if "apiserver_cpu_s" in r else "n/a", r["loadavg1"]))' <"$raw" >&2
}

all_resources="pods,secrets,endpointslices"
configs=()  # side:encoding:mode
for enc in protobuf json; do
  for mode in watchlist list; do
    for side in kinformer client-go; do configs+=("$side:$enc:$mode"); done
  done
done
if [[ -n "$plot" ]]; then configs=(kinformer:protobuf:watchlist client-go:protobuf:watchlist kinformer:protobuf:list client-go:protobuf:list); fi

# API-server CPU per sync, measured in blocks: kube-apiserver is a Go program, and its GC runs when
# its heap has grown enough, about once per one to three syncs of these objects, so the CPU that a
# single run's window sees depends on where the previous runs left the GC cycle (seen here: the
# same configuration alternating 0.6 / 1.1 CPU-s from one run to the next, and interleaved
# medians that charged one side's GC to the other). Per protobuf configuration: one warm-up run
# (it absorbs what the previous configuration left; kind cpu-warm), then --cpu-runs back-to-back
# runs (kind cpu); --cpu-rounds rounds of such blocks, the order of the configurations rotated by
# one each round (tools/bench/server_cpu_ab.sh's method), so that no configuration always follows
# the same one. The mean of all the cpu runs (blocks of equal size: the mean of the blocks) is the
# table's "API-server CPU per sync".
cpu_blocks() {
  ((cpu_runs > 0)) || return 0
  local c side enc mode i r k pb=()
  for c in "${configs[@]}"; do [[ $c == *:protobuf:* ]] && pb+=("$c"); done
  for ((r = 0; r < cpu_rounds; r++)); do
    for ((k = 0; k < ${#pb[@]}; k++)); do
      IFS=: read -r side enc mode <<<"${pb[$(((k + r) % ${#pb[@]}))]}"
      log "CPU block $((r + 1))/$cpu_rounds: $side $enc $mode, 1 warm-up + $cpu_runs runs"
      run_one "$side" "$enc" "$mode" "$all_resources" "" cpu-warm 0
      for ((i = 1; i <= cpu_runs; i++)); do run_one "$side" "$enc" "$mode" "$all_resources" "" cpu "$i"; done
    done
  done
}

rounds_loop() {  # rounds kind
  local n="$1" kind="$2" r c side enc mode ordered
  for ((r = 1; r <= n; r++)); do
    ordered=("${configs[@]}")
    if ((r % 2 == 0)); then
      ordered=()
      for ((c = ${#configs[@]} - 1; c >= 0; c--)); do ordered+=("${configs[$c]}"); done
    fi
    for c in "${ordered[@]}"; do
      IFS=: read -r side enc mode <<<"$c"
      log "round $r/$n: $side $enc $mode"
      run_one "$side" "$enc" "$mode" "$all_resources" "" "$kind" "$r"
    done
    if [[ $per_resource == 1 && $kind == sync ]]; then
      local sides=(kinformer client-go)
      ((r % 2 == 0)) && sides=(client-go kinformer)
      for res in pods secrets endpointslices; do
        for mode in watchlist list; do
          for side in "${sides[@]}"; do
            log "round $r/$n: $side protobuf $mode, $res alone"
            run_one "$side" protobuf "$mode" "$res" "" "single" "$r"
          done
        done
      done
    fi
  done
}

: >"$raw"
t_start=$(date +%s)
if [[ -z "$plot" ]]; then
  load "$pods"
  measure_idle
  log "zero-object runs (namespace sync-empty)"
  for c in "${configs[@]}"; do
    IFS=: read -r side enc mode <<<"$c"
    run_one "$side" "$enc" "$mode" "$all_resources" sync-empty zero 0
  done
  if [[ $per_resource == 1 ]]; then
    for res in pods secrets endpointslices; do
      for mode in watchlist list; do
        for side in kinformer client-go; do run_one "$side" protobuf "$mode" "$res" sync-empty zero 0; done
      done
    done
  fi
  rounds_loop "$rounds" sync
  cpu_blocks
else
  for c in "${configs[@]}"; do
    IFS=: read -r side enc mode <<<"$c"
    run_one "$side" "$enc" "$mode" "$all_resources" sync-empty zero 0
  done
  first=1
  for n in $plot; do
    load "$n"
    if [[ $first == 1 ]]; then measure_idle; first=0; fi
    rounds_loop "$plot_rounds" "plot-$n"
  done
fi
elapsed=$(($(date +%s) - t_start))

make_table
[[ -z "$plot" ]] || make_plot

# --- the fan-out benchmark, on the same server -------------------------------------
if [[ -z "$plot" && $fanout == 1 ]]; then
  fanout_out="${out%.md}-fanout.md"
  if ((${#fanout_args[@]} == 0 && fanout_quick == 1)); then fanout_args=(--quick); fi
  log "fan-out benchmark: tools/bench/fanout.sh ${fanout_args[*]} --cleanup"
  if bash "$bench_lib_dir/fanout.sh" "${fanout_args[@]}" --cleanup --out "$fanout_out" >&2; then
    {
      printf '\n## Fan-out (tools/bench/fanout.sh %s, on the server that holds the sync objects above)\n\n' "${fanout_args[*]}"
      cat "$fanout_out"
    } >>"$out"
    log "fan-out tables appended to $out"
  else
    log "fan-out benchmark failed; the sync table above stands alone"
    exit 1
  fi
fi
