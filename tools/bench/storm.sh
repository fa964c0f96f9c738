#!/usr/bin/env bash
# storm.sh: the reconnect-storm benchmark. kinformer (kinformer_storm_bench) side by side
# with client-go v0.36 (clientgo-storm: cmd/clientgo-storm), interleaved, across restarts of a real kube-apiserver.
#
#   tools/bench/storm.sh                       # 50 namespaces x 3 Pods, 3 rounds (~6-8 min)
#   tools/bench/storm.sh --rounds 1 --namespaces 10
#   tools/bench/storm.sh --kinformer-list   # kinformer with LIST syncs (default: WatchList)
#
# Options: --rounds N (default 3), --namespaces N (default 50), --pods P per namespace (default 3),
# --dir DIR (launcher state; default /tmp/kinformer-storm-e2e), --out FILE, --kinformer-list,
# --recover-timeout S (default 180). Build dir: ${KINFORMER_BUILD_DIR:-build}.
#
# Always uses the e2e launcher's own server (it restarts it: `restart-apiserver` needs the
# launcher's DIR), started here unless DIR already runs one, and stopped at exit if started here.
# Per run: start the program (N Pod informers, one per namespace); once it writes its ready file
# (every informer synced), note the restart's begin (wall ns), run `e2e/launcher.sh
# restart-apiserver --dir DIR` (returns when /readyz is 200: "server ready"), note that time,
# write both into the program's times file, then `clientgo-storm mark` patches pod-0 of every
# namespace with a marker unique to the run. Each program reports, per informer, when it saw the
# marker (recovered) relative to server ready, and the requests it sent from the restart's begin
# until its last informer recovered. The order of the two programs alternates per round.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

rounds=3 namespaces=50 pods=3 dir="/tmp/kinformer-storm-e2e" out="" kin_list=0 recover_timeout=180
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --namespaces) namespaces="$2"; shift 2 ;;
    --pods) pods="$2"; shift 2 ;;
    --dir) dir="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --kinformer-list) kin_list=1; shift ;;
    --recover-timeout) recover_timeout="$2"; shift 2 ;;
    -h|--help) print_help ;;
    *) die "unknown argument $1" ;;
  esac
done
num --rounds "$rounds" 1 20; num --namespaces "$namespaces" 1 1000

out="${out:-$bench_dir/storm-results.md}"
raw="${out%.md}.jsonl"
work_dir storm

# --- build -----------------------------------------------------------------------------------
build_cxx kinformer_storm_bench
build_go_peers
kin="$bench_dir/kinformer_storm_bench"
cg="$bench_dir/clientgo-storm"

# --- server ----------------------------------------------------------------------------------
launcher_ensure "$dir"
require_loopback
log "server $server; loading $namespaces namespaces x $pods Pods"
timeout 300 "$cg" load -namespaces "$namespaces" -pods "$pods" >&2

# --- runs ------------------------------------------------------------------------------------
: >"$raw"
run_one() {  # side round
  local side="$1" round="$2" ready="$work/ready" times="$work/times" res="$work/res.json" marker
  marker="r$round-$side-$(date +%s%N)"
  rm -f "$ready" "$times" "$res"
  local cmd
  if [[ $side == kinformer ]]; then
    cmd=("$kin" --namespaces "$namespaces" --marker "$marker" --ready-file "$ready" --times-file "$times"
      --recover-timeout "$recover_timeout")
    [[ $kin_list == 1 ]] && cmd+=(--list)
  else
    cmd=("$cg" run -namespaces "$namespaces" -marker "$marker" -ready-file "$ready" -times-file "$times"
      -recover-timeout "$recover_timeout")
  fi
  local load1; load1="$(loadavg1)"
  timeout --kill-after=10 "$((recover_timeout + 200))" "${cmd[@]}" >"$res" 2>"$work/err-$side-$round" &
  local pid=$!
  if ! wait_ready "$ready" "$pid" 150; then
    log "$side did not sync"; kill "$pid" 2>/dev/null || true; wait "$pid" || true
    tail -n 5 "$work/err-$side-$round" >&2 || true
    return 0
  fi
  local begin ready_ns
  begin="$(date +%s%N)"
  timeout 180 bash "$launcher_sh" restart-apiserver --dir "$dir" >/dev/null 2>"$work/restart.log" ||
    { log "restart-apiserver failed"; tail -n 5 "$work/restart.log" >&2; }
  ready_ns="$(date +%s%N)"
  echo "$begin $ready_ns" >"$times.tmp" && mv "$times.tmp" "$times"
  timeout 60 "$cg" mark -namespaces "$namespaces" -value "$marker" >&2 || log "mark failed"
  local rc=0
  wait "$pid" || rc=$?
  if [[ ! -s "$res" ]]; then
    log "run failed: $side round=$round rc=$rc"; tail -n 5 "$work/err-$side-$round" >&2 || true
    return 0
  fi
  python3 - "$res" "$round" "$load1" "$(grep -c 'level=warn' "$work/err-$side-$round" || true)" >>"$raw" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
r["round"] = int(sys.argv[2]); r["loadavg1"] = float(sys.argv[3]); r["warn_lines"] = int(sys.argv[4] or 0)
print(json.dumps(r))
PY
  python3 -c 'import json,sys; r=json.loads(sys.stdin.readlines()[-1]); print("   %-9s round %d: recovered %d/%d p50 %.2fs max %.2fs downtime %.1fs lists %d watches %d watchlists %d failed %d peak/s %d load %.2f" % (r["side"], r["round"], r["recovered"], r["informers"], r["recover_p50_s"], r["recover_max_s"], r["downtime_s"], r["lists"], r["watches"], r["watch_lists"], r["failed_requests"], r["peak_requests_per_s"], r["loadavg1"]))' <"$raw" >&2
}

t_start=$(date +%s)
for ((r = 1; r <= rounds; r++)); do
  if ((r % 2 == 1)); then order=(kinformer client-go); else order=(client-go kinformer); fi
  for side in "${order[@]}"; do
    log "round $r/$rounds: $side"
    run_one "$side" "$r"
  done
done
elapsed=$(($(date +%s) - t_start))

# --- table -----------------------------------------------------------------------------------
commit="$(commit_short)"
python3 - "$raw" "$out" "$namespaces" "$pods" "$rounds" "$elapsed" "$commit" "$kin_list" <<'PY'
import json, statistics, sys
from benchlib import fmt, ratio, run_context
raw, out, namespaces, pods, rounds, elapsed, commit, kin_list = sys.argv[1:9]
rows = [json.loads(l) for l in open(raw) if l.strip()]
med = statistics.median
def col(side, k):
    v = [r[k] for r in rows if r["side"] == side]
    return v
def m(side, k):
    v = col(side, k)
    return med(v) if v else float("nan")
def mx(side, k):
    v = col(side, k)
    return max(v) if v else float("nan")
def f(v, d=2):
    return fmt(v, d)
loads = [r["loadavg1"] for r in rows]
L = []
P = L.append
P(f"Reconnect storm: {namespaces} Pod informers (one per namespace, {pods} Pods each), kube-apiserver restarted once per run; medians of {rounds} interleaved rounds")
P(f"{run_context(commit, loads)}, runs took {elapsed} s"
  + (", kinformer with LIST syncs (--kinformer-list)" if kin_list == "1" else ", kinformer defaults (WatchList)"))
P("")
P("| client | recovered | time to recover p50 s | max s | worst run max s | restart (begin to ready) s | lists | watches | WatchLists | failed | requests | peak requests/s | budget denials |")
P("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for side in ("kinformer", "client-go"):
    if not col(side, "recovered"):
        continue
    req = [r["lists"] + r["watches"] + r["watch_lists"] for r in rows if r["side"] == side]
    P(f"| {side} | {min(col(side,'recovered'))}/{namespaces} | {f(m(side,'recover_p50_s'))} | {f(m(side,'recover_max_s'))} | {f(mx(side,'recover_max_s'))} | "
      f"{f(m(side,'downtime_s'),1)} | {f(m(side,'lists'),0)} | {f(m(side,'watches'),0)} | {f(m(side,'watch_lists'),0)} | {f(m(side,'failed_requests'),0)} | "
      f"{f(med(req),0)} | {f(m(side,'peak_requests_per_s'),0)} | {f(m(side,'budget_denials'),0)} |")
P("")
P(f"kinformer / client-go: time to recover p50 {f(ratio(m('kinformer','recover_p50_s'), m('client-go','recover_p50_s')))}x, "
  f"max {f(ratio(m('kinformer','recover_max_s'), m('client-go','recover_max_s')))}x; "
  f"peak requests/s {f(ratio(m('kinformer','peak_requests_per_s'), m('client-go','peak_requests_per_s')))}x")
P("")
P("Per run (round, client: max recover s, requests per 1 s bin from the restart's begin, bins with requests only)")
for r in rows:
    P(f"- round {r['round']} {r['side']}: max {r['recover_max_s']:.2f} s, " + " ".join(f"{s}:{n}" for s, n in r["per_second"]))
text = "\n".join(L) + "\n"
open(out, "w").write(text)
print(text)
PY
log "table written to $out (raw: $raw)"
