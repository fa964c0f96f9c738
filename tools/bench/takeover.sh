#!/usr/bin/env bash
# takeover.sh: leader takeovers of examples/lease_controller, N in a row, against a real
# kube-apiserver (the e2e launcher's).
#
#   tools/bench/takeover.sh                  # 20 takeovers between 2 replicas (~4 min)
#   tools/bench/takeover.sh --runs 6 --replicas 3
#
# Options: --runs N (default 20), --replicas R (2 or 3; default 2), --namespace NS (default
# takeover-bench), --dir DIR (launcher state; default /tmp/kinformer-takeover-e2e), --out FILE
# (default build/tools/bench/takeover-results.md; the role lines of every replica go to
# takeover-results.logs/ beside it). Build dir: ${KINFORMER_BUILD_DIR:-build} (lease_controller
# is built here when out of date).
#
# The server is the launcher's, started here unless DIR already runs one (stopped at exit if
# started here). R replicas of `lease_controller --namespace NS --lease L --identity ID
# --timestamps --release-on-exit` run with client-go's durations (lease 15 s, renew deadline 10 s,
# retry 2 s); L is new for each invocation. Per run, once every follower has printed "new leader
# LEADER", and after a random pause of 0-5 s (so that the stop falls anywhere in the followers'
# retry cycle, not just after a try), the leader is stopped, alternately with kill -9 (odd runs;
# its Lease expires) and with SIGTERM (even runs; it releases the Lease, and must exit 0); the
# takeover time is from just before the signal to the timestamp of the next "leading" line of
# another replica; then a new replica (a new identity) replaces the stopped one. Targets: kill -9 <= lease + retry = 17 s,
# SIGTERM <= retry + 1 s = 3 s. "Two leaders at once" counts the runs whose new leader's term
# (from its "leading" line to its "stopped leading" line, its death or the end) overlaps another
# replica's term; a replica killed with -9 stops acting at the kill.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

runs=20 replicas=2 ns="takeover-bench" dir="/tmp/kinformer-takeover-e2e" out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --replicas) replicas="$2"; shift 2 ;;
    --namespace) ns="$2"; shift 2 ;;
    --dir) dir="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    -h|--help) print_help ;;
    *) die "unknown argument $1" ;;
  esac
done
num --runs "$runs" 1 1000
num --replicas "$replicas" 2 3

out="${out:-$bench_dir/takeover-results.md}"
logs="${out%.md}.logs"
mkdir -p "$(dirname "$out")"
rm -rf "$logs"
mkdir -p "$logs"

build_cxx lease_controller
bin="$build/examples/lease_controller"
launcher_ensure "$dir"
require_loopback
kubectl create namespace "$ns" >/dev/null 2>&1 || true
lease="takeover-$(date +%s)-$$"
log "server $server; namespace $ns, lease $lease, $replicas replicas, $runs takeovers"

# Replicas: identity -> pid, in start order. events: one line per run for the table.
declare -A pid_of=()
alive=()
generation=0
events="$logs/runs.txt"
: >"$events"
# SIGTERM, then SIGKILL 20 s later: a SIGTERM that reaches a replica before it blocked the signal
# for sigwait() (between fork and exec, bash's own trap takes it) would be lost.
stop_all() {
  local id pids=()
  for id in "${alive[@]}"; do pids+=("${pid_of[$id]}"); done
  alive=()
  ((${#pids[@]} > 0)) || return 0
  stop_pids 20 "${pids[@]}"
  reap "${pids[@]}"
}
at_exit stop_all

start_replica() {
  generation=$((generation + 1))
  local id="r$generation"
  "$bin" --namespace "$ns" --lease "$lease" --identity "$id" --timestamps --release-on-exit \
    >"$logs/$id.out" 2>"$logs/$id.err" &
  pid_of[$id]=$!
  alive+=("$id")
}
# The replica whose last role line says it leads ("" when none).
leader() {
  local id last
  for id in "${alive[@]}"; do
    last="$(grep -E ' (leading|stopped leading) ' "$logs/$id.out" 2>/dev/null | tail -n 1 || true)"
    [[ "$last" == *" leading $id" && "$last" != *"stopped leading"* ]] && { echo "$id"; return; }
  done
}
# wait_for SECONDS COMMAND...: polls COMMAND every 50 ms until it succeeds; 1 after SECONDS.
wait_for() {
  local deadline
  deadline=$(awk -v n="$EPOCHREALTIME" -v s="$1" 'BEGIN { printf "%.3f", n + s }')
  shift
  until "$@"; do
    awk -v n="$EPOCHREALTIME" -v d="$deadline" 'BEGIN { exit !(n > d) }' && return 1
    sleep 0.05
  done
}
has_leader() { [[ -n "$(leader)" ]]; }
followers_see() {  # LEADER: every other replica printed "new leader LEADER"
  local id
  for id in "${alive[@]}"; do
    [[ "$id" == "$1" ]] && continue
    grep -q " new leader $1\$" "$logs/$id.out" 2>/dev/null || return 1
  done
}
other_leads() {  # FORMER: a replica other than FORMER prints "leading"
  local id
  for id in "${alive[@]}"; do
    [[ "$id" == "$1" ]] && continue
    grep -qE "^[0-9.]+ leading $id\$" "$logs/$id.out" 2>/dev/null && return 0
  done
  return 1
}
drop() {  # ID: no longer alive
  local id keep=()
  for id in "${alive[@]}"; do [[ "$id" != "$1" ]] && keep+=("$id"); done
  alive=("${keep[@]}")
}

load_start="$(loadavg1)"
for ((i = 0; i < replicas; i++)); do start_replica; done
wait_for 60 has_leader || fail "no replica leads after 60 s (see $logs)"

for ((run = 1; run <= runs; run++)); do
  current="$(leader)"
  [[ -n "$current" ]] || wait_for 60 has_leader || fail "run $run: no leader (see $logs)"
  current="$(leader)"
  wait_for 60 followers_see "$current" || fail "run $run: the followers do not see $current"
  # A follower prints "new leader" right after a try; stopping the leader then would always fall
  # at the start of the followers' retry cycle (2-4.4 s). A random pause spreads it over the cycle.
  sleep "$(awk -v r="$RANDOM" 'BEGIN { printf "%.3f", r / 32768 * 5 }')"
  kind=term
  ((run % 2 == 1)) && kind="kill"
  at="$EPOCHREALTIME"
  if [[ "$kind" == kill ]]; then kill -KILL "${pid_of[$current]}"; else kill -TERM "${pid_of[$current]}"; fi
  rc=0
  wait "${pid_of[$current]}" || rc=$?
  drop "$current"
  wait_for 90 other_leads "$current" || fail "run $run: no takeover within 90 s (see $logs)"
  echo "$run $kind $current $at $rc" >>"$events"
  log "run $run: $kind $current (exit $rc); $(leader) leads"
  ((run < runs)) && start_replica
done
stop_all

python3 - "$logs" "$events" "$runs" "$replicas" "$(commit_short)" "$load_start" "$(loadavg1)" \
  >"$out" <<'EOF'
import glob, os, statistics, sys, time
import benchlib

logs, events, runs, replicas, commit, load_start, load_end = sys.argv[1:8]
# Role lines of every replica: id -> [(time, role)].
lines = {}
for path in glob.glob(os.path.join(logs, "r*.out")):
    rid = os.path.basename(path)[:-4]
    lines[rid] = []
    for line in open(path):
        at, _, role = line.rstrip("\n").partition(" ")
        lines[rid].append((float(at), role))
runs_ = [line.split() for line in open(events)]
killed = {r[2]: float(r[3]) for r in runs_ if r[1] == "kill"}
end = time.time()  # a term still open (none once every replica was stopped) ends now
# Terms: (id, start, end). A replica killed with -9 stops acting at the kill.
terms = []
for rid, v in lines.items():
    since = None
    for t, role in v:
        if role == "leading " + rid:
            since = t
        elif role == "stopped leading " + rid and since is not None:
            terms.append((rid, since, t))
            since = None
    if since is not None:
        terms.append((rid, since, killed.get(rid, end)))
takeovers = {"kill": [], "term": []}
overlaps = 0
bad_exit = 0
for run, kind, former, at, rc in runs_:
    at = float(at)
    # The next term of another replica: one still open at the stop (it led while the former
    # leader did: negative, and an overlap below) or one starting after it.
    new = min(((s, rid) for rid, s, e in terms if rid != former and e > at), default=None)
    if new is None:
        raise SystemExit(f"run {run}: no other replica led after {former} stopped")
    takeovers[kind].append(new[0] - at)
    start, rid = new
    term = next(x for x in terms if x[0] == rid and x[1] == start)
    if any(o[0] != rid and o[1] < term[2] and term[1] < o[2] for o in terms):
        overlaps += 1
    if kind == "term" and rc != "0":
        bad_exit += 1

def q(v, p):
    s = sorted(v)
    return s[min(len(s) - 1, int(p * len(s)))] if s else float("nan")

print("# Leader takeover: examples/lease_controller, lease 15 s / renew deadline 10 s / retry 2 s\n")
print(f"date {benchlib.utc_now()} UTC, commit {commit}, {os.cpu_count()} CPUs, "
      f"load average (1 min) {load_start} at the start, {load_end} at the end; "
      f"{replicas} replicas, {runs} takeovers\n")
print("| stop of the leader | takeovers | min s | p50 s | max s | target s |")
print("|---|---:|---:|---:|---:|---:|")
for kind, name, target in (("kill", "kill -9 (Lease expires)", 17),
                           ("term", "SIGTERM, --release-on-exit", 3)):
    v = takeovers[kind]
    print(f"| {name} | {len(v)} | {q(v, 0) if v else float('nan'):.2f} | {statistics.median(v) if v else float('nan'):.2f} "
          f"| {max(v) if v else float('nan'):.2f} | <= {target} |")
print(f"\ntwo leaders at once: {overlaps} of {len(runs_)}")
print(f"SIGTERM exits other than 0: {bad_exit} of {len(takeovers['term'])}")
EOF
cat "$out"
log "table in $out; role lines in $logs"
