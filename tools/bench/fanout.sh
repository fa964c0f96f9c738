#!/usr/bin/env bash
# fanout.sh: the fan-out benchmark, kinformer (kinformer_fanout_bench) side by side with
# client-go v0.36 (clientgo-fanout: cmd/clientgo-fanout), interleaved, against a real kube-apiserver on loopback.
#
#   tools/bench/fanout.sh                 # 5,000 Pods, 3 rounds, 1/10/100/1000 handlers (~10 min)
#   tools/bench/fanout.sh --pods 20000
#   tools/bench/fanout.sh --quick         # smoke run: 1,000 Pods, 1 round, 1 and 100 handlers (~1.5 min)
#   tools/bench/fanout.sh --source synthetic --handlers "100 1000"   # synthetic source only (~8 min)
#
# Options: --pods N, --rounds N, --handlers "1 10 100 1000", --rate EVENTS_PER_S (default 5000),
# --window S (default 8), --warmup S (default 1), --out FILE, --dir DIR (launcher state),
# --no-stuck, --source server|synthetic|both, --synthetic-handlers "100 1000",
# --synthetic-window S (default: --window), --stuck-phases N, --cleanup (delete the loaded Pods
# at the end: tools/bench/sync.sh runs this on its server, whose informers watch every
# namespace). Build dir: ${KINFORMER_BUILD_DIR:-build}.
#
# --stuck-phases N adds N rounds of kinformer alone, synthetic source, 100 handlers, each run's
# --synthetic-window cut into three phases (before / handler 0 stuck / after), in one process,
# beside a control run with the same phases and no handler stuck; the two alternate ABBA. A
# stuck handler is compared with no stuck handler on the same process and the same minutes,
# which separate runs cannot do (fanout_bench.cc, --stuck-phases). Try --synthetic-window 15.
#
# --source: where the steady-state events come from. server: fanout-loader patch against the
# server (what the server accepts, ~180/s on 2 cores). synthetic: no patcher; both programs
# list from the server as usual but their watch is an in-process source paced to --rate
# (fanout_bench.cc SyntheticSource, cmd/clientgo-fanout/synthetic.go), so the fan-out path alone
# is measured at the asked rate; handler counts from --handlers. both: the server runs for
# --handlers, then synthetic runs for --synthetic-handlers. The default (and --quick) is server:
# adding the synthetic runs would take the default run to ~16 min (docs/BENCHMARKS.md, Command).
#
# Unless KUBECONFIG is set, starts the e2e launcher's kube-apiserver + etcd (e2e/launcher.sh up;
# the first build takes minutes and is cached) and stops it at exit. The server must be on a
# loopback address. Loads the Pods (fanout-loader load), then for every round and every handler
# count runs both programs (their order alternates per round); each prints one JSON line after
# a sync, then a window under a steady patch rate (fanout-loader patch, started when the program
# is synced). Then the same at 100 handlers with one stuck handler. Prints one table of medians
# with kinformer/client-go ratios and writes it to --out (default <build>/tools/bench/fanout-results.md);
# raw lines go to fanout-results.jsonl beside it.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

pods=5000 rounds=3 handlers="1 10 100 1000" rate=5000 window=8 warmup=1 stuck=1 out="" dir=""
source="" synth_handlers="100 1000" synth_window="" stuck_phases=0 cleanup_pods=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --pods) pods="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --handlers) handlers="$2"; shift 2 ;;
    --rate) rate="$2"; shift 2 ;;
    --window) window="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --dir) dir="$2"; shift 2 ;;
    --no-stuck) stuck=0; shift ;;
    --source) source="$2"; shift 2 ;;
    --synthetic-handlers) synth_handlers="$2"; shift 2 ;;
    --synthetic-window) synth_window="$2"; shift 2 ;;
    --stuck-phases) stuck_phases="$2"; shift 2 ;;
    --cleanup) cleanup_pods=1; shift ;;
    --quick) pods=1000 rounds=1 handlers="1 100" rate=1000 window=3 warmup=0.5; shift ;;
    -h|--help) print_help ;;
    *) die "unknown argument $1" ;;
  esac
done
source="${source:-server}"
case "$source" in
  server) synth_handlers="" ;;
  synthetic) synth_handlers="$handlers" handlers="" ;;
  both) ;;
  *) die "--source server|synthetic|both" ;;
esac
synth_window="${synth_window:-$window}"
num --rounds "$rounds" 1 20; num --stuck-phases "$stuck_phases" 0 40; num --pods "$pods" 1 100000

out="${out:-$bench_dir/fanout-results.md}"
raw="${out%.md}.jsonl"
work_dir fanout
ns="fanout-$pods"

# --- build -----------------------------------------------------------------------------------
build_cxx kinformer_fanout_bench
build_go_peers
kin="$bench_dir/kinformer_fanout_bench"
cg="$bench_dir/clientgo-fanout"
loader="$bench_dir/fanout-loader"

# --- server ----------------------------------------------------------------------------------
if [[ -z "${KUBECONFIG:-}" ]]; then launcher_up "${dir:-/tmp/kinformer-fanout-e2e}"; fi
require_loopback
log "server $server"

delete_pods() {  # at exit with --cleanup
  log "deleting the $pods Pods of namespace $ns (--cleanup)"
  if ! timeout 600 "$loader" load -namespace "$ns" -pods 0 >&2; then
    log "could not delete the Pods of $ns: a sync run on this server would count them"
    exit_rc=1
  fi
}
[[ $cleanup_pods == 1 ]] && at_exit delete_pods
log "loading $pods Pods into namespace $ns"
timeout 900 "$loader" load -namespace "$ns" -pods "$pods" >&2

# --- runs ------------------------------------------------------------------------------------
: >"$raw"
patch_s="$(awk -v w="$window" -v u="$warmup" 'BEGIN { printf "%.1fs", w + u + 2.5 }')"
run_timeout="$(awk -v w="$window" -v s="${synth_window:-0}" -v u="$warmup" 'BEGIN { if (s > w) w = s; printf "%d", 180 + 30 + w + u + 30 }')"

run_one() {  # side handlers stuck(0|1|p1|p2) round mode(server|synthetic)
  local side="$1" n="$2" st="$3" round="$4" mode="$5" bin ready="$work/ready" res="$work/res.json" pres="$work/patch.json"
  local win="$window" extra=()
  if [[ $st == p* ]]; then  # --stuck-phases runs: kinformer only
    extra=(--stuck-phases "${st#p}")
    st=0
  fi
  local load1; load1="$(loadavg1)"
  rm -f "$ready" "$res" "$pres"
  if [[ $mode == synthetic ]]; then
    win="$synth_window"
    if [[ $side == kinformer ]]; then extra+=(--source synthetic --rate "$rate"); else extra+=(-source synthetic -rate "$rate"); fi
  fi
  if [[ $side == kinformer ]]; then
    bin=("$kin" --namespace "$ns" --pods "$pods" --handlers "$n" --stuck "$st" --warmup-seconds "$warmup"
      --window-seconds "$win" --ready-file "$ready" "${extra[@]}")
  else
    bin=("$cg" -namespace "$ns" -pods "$pods" -handlers "$n" -stuck "$st" -warmup-seconds "$warmup"
      -window-seconds "$win" -ready-file "$ready" "${extra[@]}")
  fi
  timeout --kill-after=10 "$run_timeout" "${bin[@]}" >"$res" 2>"$work/err" &
  local pid=$!
  if wait_ready "$ready" "$pid" 200 && [[ $mode == server ]]; then
    timeout 120 "$loader" patch -namespace "$ns" -pods "$pods" -rate "$rate" -duration "$patch_s" >"$pres" 2>>"$work/err" || true
  fi
  local rc=0
  wait "$pid" || rc=$?
  if [[ $rc != 0 || ! -s "$res" ]]; then
    log "run failed: $side handlers=$n stuck=$st round=$round rc=$rc"
    tail -n 5 "$work/err" >&2 || true
    return 0
  fi
  python3 - "$res" "$pres" "$round" "$load1" "$mode" >>"$raw" <<'PY'
import json, sys
res = json.load(open(sys.argv[1]))
res["mode"] = sys.argv[5]
try:
    p = json.load(open(sys.argv[2]))
except Exception:
    p = {}
res["round"] = int(sys.argv[3])
res["loadavg1"] = float(sys.argv[4])
res["patch_rate"] = p.get("achieved_rate", 0.0)
res["patch_dropped"] = p.get("dropped", 0)
res["patch_failed"] = p.get("failed", 0)
res["events_per_s"] = res["source_events_per_s"] if res["mode"] == "synthetic" else res["patch_rate"]
print(json.dumps(res))
PY
  python3 -c 'import json,sys; r=json.loads(sys.stdin.readlines()[-1]); print("   %-9s %-9s n=%-4d stuck=%d sync=%.3fs threads=%d delivered/s=%.0f cpu_us/notif=%.3f p50=%.1fus p99=%.1fus events/s=%.0f load=%.2f steal=%.2fs" % (r["side"], r["mode"], r["handlers"], r["stuck"], r["sync_s"], r["threads_max"], r["delivered_per_s"], r["cpu_us_per_notification"], r["latency_p50_us"], r["latency_p99_us"], r["events_per_s"], r["loadavg1"], r.get("steal_window_s", float("nan"))))' <"$raw" >&2
}

configs=()  # mode:handlers:stuck
for n in $handlers; do configs+=("server:$n:0"); done
if [[ $stuck == 1 && -n "$handlers" ]]; then configs+=("server:100:1"); fi
for n in $synth_handlers; do configs+=("synthetic:$n:0"); done
if [[ $stuck == 1 && -n "$synth_handlers" ]]; then configs+=("synthetic:100:1"); fi
t_start=$(date +%s)
for ((r = 1; r <= rounds; r++)); do
  for c in "${configs[@]}"; do
    IFS=: read -r mode n st <<<"$c"
    if ((r % 2 == 1)); then order=(kinformer client-go); else order=(client-go kinformer); fi
    for side in "${order[@]}"; do
      log "round $r/$rounds: $side, $mode, $n handlers, stuck=$st"
      run_one "$side" "$n" "$st" "$r" "$mode"
    done
  done
done
for ((r = 1; r <= stuck_phases; r++)); do
  if ((r % 2 == 1)); then phases=(1 2); else phases=(2 1); fi
  for p in "${phases[@]}"; do
    log "stuck-phases round $r/$stuck_phases: kinformer, synthetic, 100 handlers, $([[ $p == 1 ]] && echo "handler 0 stuck in phase 2" || echo "control, none stuck")"
    run_one kinformer 100 "p$p" "$r" synthetic
  done
done
elapsed=$(($(date +%s) - t_start))

# --- table -----------------------------------------------------------------------------------
commit="$(commit_short)"
python3 - "$raw" "$out" "$pods" "$rounds" "$rate" "$window" "$elapsed" "$commit" "$synth_window" <<'PY'
import json, statistics, sys
from benchlib import fmt as f, ratio, run_context
raw, out, pods, rounds, rate, window, elapsed, commit, synth_window = sys.argv[1:10]
rows = [json.loads(l) for l in open(raw) if l.strip()]
for r in rows:
    r.setdefault("mode", "server")
    r.setdefault("stuck_phases", 0)
loads = [r["loadavg1"] for r in rows]
phase_rows = [r for r in rows if r["stuck_phases"] != 0]
rows = [r for r in rows if r["stuck_phases"] == 0]
med = statistics.median
def pick(side, n, stuck, mode):
    return [r for r in rows if r["side"] == side and r["handlers"] == n and r["stuck"] == stuck and r["mode"] == mode]
def m(side, n, stuck, field, mode="server"):
    v = [r[field] for r in pick(side, n, stuck, mode)]
    return med(v) if v else float("nan")
modes = [x for x in ("server", "synthetic") if any(r["mode"] == x for r in rows)]
def counts(mode):
    return sorted({r["handlers"] for r in rows if r["stuck"] == 0 and r["mode"] == mode})
lines = []
P = lines.append
P(f"Fan-out benchmark: one Pod informer, {int(pods):,} Pods, "
  + (f"medians of {rounds} interleaved rounds" if rows else "no side-by-side runs")
  + (f" (stuck-phases: {max(r['round'] for r in phase_rows)} rounds)" if phase_rows else ""))
P(f"{run_context(commit, loads)}, "
  f"rate asked {float(rate):,.0f}/s, window {window} s (synthetic {synth_window} s), runs took {int(elapsed)} s")
# The initial list: from the server runs; without them from the synthetic runs (whose client-go
# side lists with LIST, not WatchList).
lm = "server" if "server" in modes else "synthetic"
if modes:
    P("")
    P("Initial list (time from start until every handler counted every Pod; threads = /proc/<pid>/status Threads, max)"
      + ("" if lm == "server" else "; from the synthetic runs: client-go lists with LIST there, not WatchList"))
    P("")
    P("| handlers | sync kinformer s | sync client-go s | ratio | list notif/s kinformer | list notif/s client-go | ratio | threads kinformer (pool) | threads client-go |")
    P("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n in counts(lm):
        ks, cs = m("kinformer", n, 0, "sync_s", lm), m("client-go", n, 0, "sync_s", lm)
        kr, cr = m("kinformer", n, 0, "initial_notifications_per_s", lm), m("client-go", n, 0, "initial_notifications_per_s", lm)
        P(f"| {n:,} | {f(ks,3)} | {f(cs,3)} | {f(ratio(ks,cs),2)}x | {f(kr)} | {f(cr)} | {f(ratio(kr,cr),2)}x | "
          f"{f(m('kinformer', n, 0, 'threads_max', lm))} ({f(m('kinformer', n, 0, 'pool', lm))}) | {f(m('client-go', n, 0, 'threads_max', lm))} |")
if "server" in modes:
    ns = counts("server")
    P("")
    P("Steady patch rate (events/s = patches the server accepted, per run; delivered = callbacks/s summed over handlers;")
    P("latency = informer receipt (transform, before the store update) to callback; e2e = patch sent to callback)")
    P("")
    P("| handlers | events/s kin / cg | delivered/s kinformer | delivered/s client-go | ratio | CPU us/notif kin | CPU us/notif cg | p50 us kin / cg | p99 us kin / cg | e2e p99 ms kin / cg |")
    P("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n in ns:
        kd, cd = m("kinformer", n, 0, "delivered_per_s"), m("client-go", n, 0, "delivered_per_s")
        P(f"| {n:,} | {f(m('kinformer', n, 0, 'patch_rate'))} / {f(m('client-go', n, 0, 'patch_rate'))} | {f(kd)} | {f(cd)} | {f(ratio(kd,cd),2)}x | "
          f"{f(m('kinformer', n, 0, 'cpu_us_per_notification'),3)} | {f(m('client-go', n, 0, 'cpu_us_per_notification'),3)} | "
          f"{f(m('kinformer', n, 0, 'latency_p50_us'),1)} / {f(m('client-go', n, 0, 'latency_p50_us'),1)} | "
          f"{f(m('kinformer', n, 0, 'latency_p99_us'),1)} / {f(m('client-go', n, 0, 'latency_p99_us'),1)} | "
          f"{f(m('kinformer', n, 0, 'e2e_p99_us')/1e3,1)} / {f(m('client-go', n, 0, 'e2e_p99_us')/1e3,1)} |")
if "synthetic" in modes:
    S = "synthetic"
    P("")
    P(f"Synthetic steady source, fan-out only (list from the server; watch events made in-process, paced to {float(rate):,.0f}/s")
    P("on an absolute schedule; events/s = what the informer took in the window; delivered = callbacks/s summed over handlers;")
    P("share = delivered / (events x handlers), below 1 when the handlers fall behind (kinformer coalesces a key's pending updates);")
    P("latency = informer receipt (transform) to callback)")
    P("")
    P("| handlers | asked/s | events/s kin / cg | delivered/s kinformer | delivered/s client-go | ratio | share kin / cg | CPU us/notif kin / cg | p50 us kin / cg | p99 us kin / cg | threads kin / cg |")
    P("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n in counts(S):
        kd, cd = m("kinformer", n, 0, "delivered_per_s", S), m("client-go", n, 0, "delivered_per_s", S)
        ke, ce = m("kinformer", n, 0, "events_per_s", S), m("client-go", n, 0, "events_per_s", S)
        cnt = n
        P(f"| {n:,} | {float(rate):,.0f} | {f(ke)} / {f(ce)} | {f(kd)} | {f(cd)} | {f(ratio(kd,cd),2)}x | "
          f"{f(ratio(kd, ke*cnt),2)} / {f(ratio(cd, ce*cnt),2)} | "
          f"{f(m('kinformer', n, 0, 'cpu_us_per_notification', S),2)} / {f(m('client-go', n, 0, 'cpu_us_per_notification', S),2)} | "
          f"{f(m('kinformer', n, 0, 'latency_p50_us', S),1)} / {f(m('client-go', n, 0, 'latency_p50_us', S),1)} | "
          f"{f(m('kinformer', n, 0, 'latency_p99_us', S),1)} / {f(m('client-go', n, 0, 'latency_p99_us', S),1)} | "
          f"{f(m('kinformer', n, 0, 'threads_max', S))} / {f(m('client-go', n, 0, 'threads_max', S))} |")
for mode in modes:
    if not any(r["stuck"] == 1 and r["mode"] == mode for r in rows):
        continue
    P("")
    P(f"One stuck handler (handler 0 blocks in its first callback), 100 handlers, {mode} source: the other 99's latency")
    P("")
    P("| side | events/s | p50 us | p99 us | p99 us without stuck | p99 change | delivered/s | threads max |")
    P("|---|---:|---:|---:|---:|---:|---:|---:|")
    for side in ("kinformer", "client-go"):
        p99s, p99 = m(side, 100, 1, "latency_p99_us", mode), m(side, 100, 0, "latency_p99_us", mode)
        P(f"| {side} | {f(m(side, 100, 1, 'events_per_s', mode))} | {f(m(side, 100, 1, 'latency_p50_us', mode),1)} | {f(p99s,1)} | {f(p99,1)} | "
          f"{f((ratio(p99s,p99)-1)*100,1)}% | {f(m(side, 100, 1, 'delivered_per_s', mode))} | {f(m(side, 100, 1, 'threads_max', mode))} |")
if phase_rows:
    P("")
    P("Stuck handler within one process (kinformer, synthetic source, 100 handlers; each run's window in three phases:")
    P("before / handler 0 stuck / after it is released; the control run has the same phases and no handler stuck;")
    P("latency of handlers 1-99 only, in every phase. p99 columns: medians over the rounds of each phase's p99;")
    P("change of the medians = stuck column / before column - 1; per round = that run's own phase 2 / phase 1 - 1)")
    P("")
    P("| run | rounds | p99 us before | p99 us stuck (control: phase 2) | p99 us after | change of the medians | change per round, median | per round |")
    P("|---|---:|---:|---:|---:|---:|---:|---|")
    phase_change = {}
    def change(r):  # one run's stuck (or control's second) phase against its first
        return ratio(r["phase_p99_us"][1], r["phase_p99_us"][0]) - 1
    for kind, label in ((1, "handler 0 stuck"), (2, "control")):
        rs = sorted((r for r in phase_rows if r["stuck_phases"] == kind), key=lambda r: r["round"])
        if not rs:
            continue
        ch = [change(r) for r in rs]
        mb, ms, ma = (med([r["phase_p99_us"][i] for r in rs]) for i in range(3))
        phase_change[kind] = ratio(ms, mb) - 1
        P(f"| {label} | {len(rs)} | {f(mb,1)} | {f(ms,1)} | {f(ma,1)} | {phase_change[kind]*100:+.1f}% | {med(ch)*100:+.1f}% | "
          f"{' / '.join(f'{c*100:+.0f}%' for c in ch)} |")
    unblocked = [r["round"] for r in phase_rows if r["stuck_phases"] == 1 and not r.get("stuck_handler_blocked", True)]
    if unblocked:
        P(f"WARNING: handler 0 never blocked in the stuck runs of rounds {unblocked}")
    # Per round, the stuck run's change minus the control's (the same round, ABBA neighbours).
    paired = []
    for rd in sorted({r["round"] for r in phase_rows}):
        a = [r for r in phase_rows if r["round"] == rd and r["stuck_phases"] == 1]
        b = [r for r in phase_rows if r["round"] == rd and r["stuck_phases"] == 2]
        if a and b:
            paired.append(change(a[0]) - change(b[0]))
    if len(paired) >= 2:
        q = statistics.quantiles(paired, n=4)
        P("")
        P(f"Paired by round (stuck run's change minus its control's): median {med(paired)*100:+.1f}%, "
          f"quartiles {q[0]*100:+.1f}% / {q[2]*100:+.1f}% over {len(paired)} rounds")
P("")
P("Targets")
def target(name, ok, detail):
    P(f"- {'MET   ' if ok else 'MISSED'} {name}: {detail}")
for mode in modes:
    ns = counts(mode)
    for n in (100, 1000):
        if n in ns:
            r = ratio(m("kinformer", n, 0, "delivered_per_s", mode), m("client-go", n, 0, "delivered_per_s", mode))
            target(f"delivered/s at {n} handlers >= 1.5x client-go (steady rate, {mode} source)", r >= 1.5, f"{r:.2f}x")
            if mode == lm:
                r2 = ratio(m("kinformer", n, 0, "initial_notifications_per_s", mode), m("client-go", n, 0, "initial_notifications_per_s", mode))
                P(f"  (initial list, notifications/s: {r2:.2f}x)")
kt = [r["threads_max"] - r["pool"] for r in rows + phase_rows if r["side"] == "kinformer"]
if kt:
    target("kinformer threads <= pool + constant", max(kt) <= 8, f"threads - pool: max {max(kt)} over all runs (constant allowed: 8)")
for mode in modes:
    if 100 not in counts(mode):
        continue
    p = m("kinformer", 100, 0, "latency_p99_us", mode)
    ev = m("kinformer", 100, 0, "events_per_s", mode)
    why = "server-limited rate when below 5,000" if mode == "server" else "the informer took fewer than asked when below 5,000"
    target(f"p99 < 1 ms at 100 handlers, 5,000 events/s ({mode} source)", p < 1000 and ev >= 4750,
           f"p99 {p:,.1f} us at {ev:,.0f} events/s ({why})")
    if any(r["stuck"] == 1 and r["mode"] == mode for r in rows):
        ch = ratio(m("kinformer", 100, 1, "latency_p99_us", mode), p) - 1
        target(f"one stuck handler moves the others' p99 by < 10% ({mode} source, separate runs)", abs(ch) < 0.10, f"{ch*100:+.1f}%")
if phase_rows and 1 in phase_change:
    # Net of the control: what the phases change by themselves is not the stuck handler's.
    ctl = phase_change.get(2, 0.0)
    net = phase_change[1] - ctl
    target("one stuck handler moves the others' p99 by < 10% (within one process, change of the medians net of the control)",
           abs(net) < 0.10, f"{net*100:+.1f}% (stuck {phase_change[1]*100:+.1f}%, control {ctl*100:+.1f}%)")
text = "\n".join(lines) + "\n"
open(out, "w").write(text)
print(text)
PY
log "table written to $out (raw: $raw)"
