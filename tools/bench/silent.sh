#!/usr/bin/env bash
# silent.sh: how long kinformer (kwatch cache) and client-go v0.36 (clientgo-storm watch-pods:
# default rest config, protobuf, WatchList on) take to see a Pod created after their TCP path to
# the API server went silent: no bytes either way, no FIN, no RST (a wedged proxy, a dead NAT
# entry). Optionally, a long idle run against the real server.
#
#   tools/bench/silent.sh                      # 1 round (~2-3 min)
#   tools/bench/silent.sh --rounds 2
#   tools/bench/silent.sh --rounds 1 --idle-minutes 15
#
# Options: --rounds N (default 1), --idle-minutes M (default 0: no idle phase), --dir DIR
# (launcher state; default /tmp/kinformer-silent-e2e), --out FILE (default
# BUILD/tools/bench/silent-results.md; the processes' logs go to FILE without .md + .logs/),
# --namespace NS (default silent-bench), --max-wait S (default 900). Build dir:
# ${KINFORMER_BUILD_DIR:-build}.
#
# Uses the e2e launcher's server in DIR, started here unless it runs, stopped at exit if started
# here. Per round: one `clientgo-storm silent-proxy` per side in front of the server, a copy of the
# kubeconfig per side pointing at its proxy (same CA and client certificates), `kwatch cache
# --resource pods -n NS --events` and `clientgo-storm watch-pods -namespace NS`; once both synced
# and 5 s later, SIGUSR1 to both proxies (T0: every open connection goes silent for ever, new ones
# forward), then a Pod silent-<round>-<ns> is created against the server directly. Each side's
# time is from T0 to the line printing its ADDED (stamped on arrival), or "not within S s".
# Idle phase (no proxy): kwatch for pods and for endpointslices, and watch-pods, for M minutes
# with nothing changing; counts kinformer's "watch idle" lines per resource and client-go's
# requests after its sync.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
command_line="tools/bench/silent.sh${*:+ $*}"

rounds=1 idle_minutes=0 dir="/tmp/kinformer-silent-e2e" out="" ns="silent-bench" max_wait=900
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --idle-minutes) idle_minutes="$2"; shift 2 ;;
    --dir) dir="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --namespace) ns="$2"; shift 2 ;;
    --max-wait) max_wait="$2"; shift 2 ;;
    -h|--help) print_help ;;
    *) die "unknown argument $1" ;;
  esac
done
num --rounds "$rounds" 1 20; num --idle-minutes "$idle_minutes" 0 600; num --max-wait "$max_wait" 10 3600
[[ "$ns" =~ ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$ ]] || die "--namespace '$ns' is not a DNS label"

out="${out:-$bench_dir/silent-results.md}"
logs="${out%.md}.logs"
work_dir silent
now_ns() { date +%s%N; }
# Each line of stdin prefixed with its arrival time (wall ns).
stamp() { while IFS= read -r l; do printf '%s %s\n' "$(date +%s%N)" "$l"; done; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (a - b) / 1e9 }'; }

children=()       # pids of every background process started here
current_pod=""    # the round's Pod, deleted at exit if still there
stop_all() {      # TERM, up to 10 s, then KILL; reaped
  stop_pids 10 "$@"
  reap "$@"
}
cleanup() {  # at exit, before the server stops
  if ((${#children[@]} > 0)); then stop_all "${children[@]}"; fi
  if [[ -n "$current_pod" ]]; then
    KUBECONFIG="$dir/kubeconfig" timeout 40 "$cg" delete-pod -namespace "$ns" -name "$current_pod" >&2 || true
  fi
}
cg="$bench_dir/clientgo-storm"
kw="$build/tools/kwatch/kwatch"

# --- build -----------------------------------------------------------------------------------
if [[ ! -x "$kw" ]]; then build_cxx kwatch; fi
build_go_peers
rm -rf "$logs" && mkdir -p "$logs"
# What was measured: the tree at the start and the kwatch binary's build time.
commit="$(commit_short)"
git -C "$root" status --porcelain --untracked-files=no 2>/dev/null | grep -q . && commit+=", uncommitted changes in the tree"
commit+=", kwatch built $(date -u -r "$kw" '+%Y-%m-%d %H:%M') UTC"

# --- server ----------------------------------------------------------------------------------
launcher_ensure "$dir"
at_exit cleanup
kubeconfig="$dir/kubeconfig"
require_loopback
[[ "$server" =~ ^https://(127\.[0-9.]+|localhost)(:[0-9]+)/?$ ]] ||
  die "server '$server' in $kubeconfig is not https on a loopback address with a port; refusing"
upstream="${server#https://}" && upstream="${upstream%/}"
log "server $server; namespace $ns"
timeout 60 "$cg" create-pod -namespace "$ns" >&2

# Starts "$@" in the background (bounded by timeout), stdout and stderr stamped into $1.out and
# $1.err; sets $started to the pid.
started=""
start_stamped() {
  local base="$1"; shift
  timeout --kill-after=10 "$((max_wait + idle_minutes * 60 + 600))" "$@" \
    > >(stamp >"$base.out") 2> >(stamp >"$base.err") &
  started=$!
  children+=("$started")
}
forget() {  # drops pids from $children
  local p keep=() q
  for q in "${children[@]}"; do
    keep+=("$q")
    for p in "$@"; do [[ "$q" == "$p" ]] && unset 'keep[-1]' && break; done
  done
  children=("${keep[@]+"${keep[@]}"}")
}
kwatch_synced() { grep -q 'msg="cache synced"' "$1.err" 2>/dev/null; }
first_ns() { grep -m1 -F -- "$2" "$1" 2>/dev/null | cut -d' ' -f1 || true; }  # file pattern
count() { grep -c -F -- "$2" "$1" 2>/dev/null || true; }
# Waits up to $1 s until every "label file check" triple's check passes; progress every 15 s.
wait_synced() {
  local limit="$1"; shift
  local t=0 waiting
  while ((t < limit * 10)); do
    waiting=""
    local i
    for ((i = 1; i <= $#; i += 3)); do
      local label="${!i}" j=$((i + 1)) k=$((i + 2))
      local base="${!j}" check="${!k}"
      "$check" "$base" || waiting+=" $label"
    done
    [[ -z "$waiting" ]] && return 0
    ((t > 0 && t % 150 == 0)) && log "waiting for the sync of:$waiting ($((t / 10)) s)"
    sleep 0.1
    t=$((t + 1))
  done
  log "not synced within $limit s:$waiting"
  return 1
}
cg_synced() { [[ -e "$1.ready" ]]; }

# --- rounds ----------------------------------------------------------------------------------
results="$work/rounds.tsv"
: >"$results"
t_start=$(date +%s)
for ((r = 1; r <= rounds; r++)); do
  log "round $r/$rounds: proxies"
  rl="$logs/round-$r"
  mkdir -p "$rl"
  for side in kinformer client-go; do
    rm -f "$work/port-$side"
    "$cg" silent-proxy -listen 127.0.0.1:0 -upstream "$upstream" -port-file "$work/port-$side" 2>"$rl/proxy-$side.log" &
    children+=("$!")
    eval "proxy_${side//-/_}=$!"
  done
  for side in kinformer client-go; do
    for ((i = 0; i < 100; i++)); do [[ -s "$work/port-$side" ]] && break; sleep 0.1; done
    [[ -s "$work/port-$side" ]] || { log "the $side proxy wrote no port"; cat "$rl/proxy-$side.log" >&2; exit 1; }
    port="$(cat "$work/port-$side")"
    sed -E "s#^([[:space:]]*server:[[:space:]]*).*#\1https://127.0.0.1:$port#" "$kubeconfig" >"$work/kubeconfig-$side"
    chmod 600 "$work/kubeconfig-$side"
    log "round $r: $side through 127.0.0.1:$port"
  done

  rm -f "$rl/client-go.ready"
  KUBECONFIG="$work/kubeconfig-kinformer" start_stamped "$rl/kinformer" \
    "$kw" cache --resource pods -n "$ns" --events --timeout 120
  kin_pid=$started
  KUBECONFIG="$work/kubeconfig-client-go" start_stamped "$rl/client-go" \
    "$cg" watch-pods -namespace "$ns" -ready-file "$rl/client-go.ready"
  cg_pid=$started
  if ! wait_synced 130 kinformer "$rl/kinformer" kwatch_synced client-go "$rl/client-go" cg_synced; then
    tail -n 5 "$rl/kinformer.err" "$rl/client-go.err" >&2 || true
    exit 1
  fi
  log "round $r: both synced; silencing in 5 s"
  sleep 5

  pod="silent-$r-$(now_ns)"
  # shellcheck disable=SC2154  # both set by the eval above
  kill -USR1 "$proxy_kinformer" "$proxy_client_go"
  t0=$(now_ns)
  current_pod="$pod"
  timeout 60 "$cg" create-pod -namespace "$ns" -name "$pod" >"$rl/create.out" 2>&2 ||
    { log "could not create the Pod"; exit 1; }
  log "round $r: T0 (both paths silent); created $ns/$pod $(secs "$(cut -d' ' -f1 "$rl/create.out")" "$t0") s after T0"

  kin_seen="" cg_seen="" waited=0
  while ((waited < max_wait)); do
    [[ -z "$kin_seen" ]] && kin_seen="$(first_ns "$rl/kinformer.out" " ADDED $ns/$pod rv=")"
    [[ -z "$cg_seen" ]] && cg_seen="$(first_ns "$rl/client-go.out" " ADDED $ns/$pod")"
    [[ -n "$kin_seen" && -n "$cg_seen" ]] && break
    sleep 1
    waited=$((waited + 1))
    if ((waited % 15 == 0)); then
      log "waiting: kinformer seen=$([[ -n $kin_seen ]] && echo yes || echo no) client-go seen=$([[ -n $cg_seen ]] && echo yes || echo no) $waited s"
      kill -0 "$kin_pid" 2>/dev/null || { [[ -z "$kin_seen" ]] && log "kwatch exited"; }
      kill -0 "$cg_pid" 2>/dev/null || { [[ -z "$cg_seen" ]] && log "watch-pods exited"; }
    fi
  done
  kin_s="$([[ -n $kin_seen ]] && secs "$kin_seen" "$t0" || echo none)"
  cg_s="$([[ -n $cg_seen ]] && secs "$cg_seen" "$t0" || echo none)"
  log "round $r: kinformer ${kin_s} s, client-go ${cg_s} s"

  stop_all "$kin_pid" "$cg_pid" "$proxy_kinformer" "$proxy_client_go"
  forget "$kin_pid" "$cg_pid" "$proxy_kinformer" "$proxy_client_go"
  sleep 0.3  # the stampers flush on EOF
  timeout 40 "$cg" delete-pod -namespace "$ns" -name "$pod" >&2 || log "could not delete $ns/$pod"
  current_pod=""

  # kinformer's log lines, with their time after T0; client-go's first reflector/http2 line.
  rel() { local t; t="$(first_ns "$rl/kinformer.err" "$1")"; [[ -n "$t" ]] && secs "$t" "$t0" || echo -; }
  cg_line="$(awk -v t0="$t0" '$1 >= t0 && /reflector|http2|connection lost|ping/ { printf "%.2f s: ", ($1 - t0) / 1e9; $1 = ""; print substr($0, 2); exit }' "$rl/client-go.err" || true)"
  new_kin="$(awk '/SIGUSR1/ { s = 1; next } s && / open from / { n++ } END { print n + 0 }' "$rl/proxy-kinformer.log")"
  new_cg="$(awk '/SIGUSR1/ { s = 1; next } s && / open from / { n++ } END { print n + 0 }' "$rl/proxy-client-go.log")"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$kin_s" "$cg_s" \
    "$(count "$rl/kinformer.err" 'msg="watch idle')" "$(rel 'msg="watch idle')" \
    "$(count "$rl/kinformer.err" 'msg="cache stale')" "$(rel 'msg="cache stale')" \
    "$(count "$rl/kinformer.err" 'msg="cache fresh again"')" "$(rel 'msg="cache fresh again"')" \
    "$new_kin" "$new_cg" "$(loadavg1)" "${cg_line//$'\t'/ }" >>"$results"
done

# --- idle phase ------------------------------------------------------------------------------
idle="$work/idle.tsv"
: >"$idle"
if ((idle_minutes > 0)); then
  il="$logs/idle"
  mkdir -p "$il"
  log "idle phase: $idle_minutes min, no proxy, nothing changing in $ns"
  start_stamped "$il/kinformer-pods" "$kw" cache --resource pods -n "$ns" --events --timeout 120
  kp=$started
  start_stamped "$il/kinformer-endpointslices" "$kw" cache --resource endpointslices -n "$ns" --events --timeout 120
  ke=$started
  rm -f "$il/client-go.ready"
  start_stamped "$il/client-go" "$cg" watch-pods -namespace "$ns" -ready-file "$il/client-go.ready"
  cp=$started
  if ! wait_synced 130 kinformer-pods "$il/kinformer-pods" kwatch_synced \
      kinformer-endpointslices "$il/kinformer-endpointslices" kwatch_synced client-go "$il/client-go" cg_synced; then
    exit 1
  fi
  i0=$(now_ns)
  for ((m = 1; m <= idle_minutes; m++)); do
    for ((q = 0; q < 4; q++)); do
      sleep 15
      for p in "$kp" "$ke" "$cp"; do kill -0 "$p" 2>/dev/null || { log "a process of the idle phase exited"; break 3; }; done
    done
    log "idle: $m/$idle_minutes min, kinformer watch idle: pods $(count "$il/kinformer-pods.err" 'msg="watch idle') endpointslices $(count "$il/kinformer-endpointslices.err" 'msg="watch idle')"
  done
  i1=$(now_ns)
  stop_all "$kp" "$ke" "$cp"
  forget "$kp" "$ke" "$cp"
  sleep 0.3
  minutes="$(awk -v a="$i1" -v b="$i0" 'BEGIN { printf "%.1f", (a - b) / 6e10 }')"
  for res in pods endpointslices; do
    f="$il/kinformer-$res.err"
    times="$(awk -v t0="$i0" '/msg="watch idle/ { printf "%s%.0f", (n++ ? " " : ""), ($1 - t0) / 1e9 } END { if (!n) printf "-" }' "$f")"
    printf 'kinformer\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$res" "$minutes" "$(count "$f" 'msg="watch idle')" "$times" \
      "$(count "$f" 'msg="cache stale')" "$(count "$f" 'msg="cache fresh again"')" \
      "$(count "$f" 'no bookmark from the server within three idle deadlines')" >>"$idle"
  done
  summary="$(grep -m1 'requests after sync' "$il/client-go.err" | sed 's/.*requests after sync //' || true)"
  [[ -n "$summary" ]] || summary='{}'
  printf 'client-go\tpods\t%s\t%s\n' "$minutes" "$summary" >>"$idle"
fi
elapsed=$(($(date +%s) - t_start))

# --- tables ----------------------------------------------------------------------------------
python3 - "$results" "$idle" "$out" "$command_line" "$commit" "$elapsed" "$max_wait" "$ns" "$logs" <<'PY'
import json, os, sys
from benchlib import utc_now
results, idle, out, command, commit, elapsed, max_wait, ns, logs = sys.argv[1:10]
rows = [l.rstrip("\n").split("\t") for l in open(results) if l.strip()]
L = []
P = L.append
P("Silent watch path: a Pod created in %s right after each side's TCP connections to kube-apiserver went silent "
  "(SIGUSR1 to its own proxy at T0: no bytes either way, no FIN, no RST; new connections forward). "
  "kinformer: `kwatch cache --resource pods --events` (HTTP/2 with its PING: 30 s read idle + 15 s ping timeout; 75 s watch idle deadline); client-go v0.36: "
  "`clientgo-storm watch-pods` (default rest config, protobuf, WatchList; HTTP/2 health check: 30 s read idle + 15 s ping timeout)." % ns)
P("date %s UTC, commit %s, %d CPUs, took %s s" % (utc_now(), commit, os.cpu_count(), elapsed))
P("")
P("Command: `bash %s`" % command)
P("")
def sec(v):
    return "not within %s s" % max_wait if v == "none" else v
def rel(n, t):
    return "none" if n in ("", "0") else ("%s (first at %s s)" % (n, t))
P("| round | kinformer s | client-go s | ratio kinformer/client-go | kinformer `watch idle` | kinformer `cache stale` | kinformer `cache fresh again` | new connections after T0 (kinformer / client-go) | load 1 min |")
P("|---:|---:|---:|---:|---|---|---|---:|---:|")
for r in rows:
    rnd, k, c, wi, wit, cs, cst, cf, cft, nk, nc, load = r[:12]
    ratio = "n/a" if "none" in (k, c) or float(c) == 0 else "%.2f" % (float(k) / float(c))
    P("| %s | %s | %s | %s | %s | %s | %s | %s / %s | %s |" % (rnd, sec(k), sec(c), ratio, rel(wi, wit), rel(cs, cst), rel(cf, cft), nk, nc, load))
P("")
notes = [(r[0], r[12]) for r in rows if len(r) > 12 and r[12]]
for rnd, line in notes:
    P("- round %s, client-go's first reflector/http2 log line after T0: %s" % (rnd, line))
if notes:
    P("")
irows = [l.rstrip("\n").split("\t") for l in open(idle) if l.strip()]
if irows:
    P("Idle run (no proxy, nothing changing in %s)" % ns)
    P("")
    P("| client | resource | minutes | `watch idle` lines | at s | `cache stale` | `cache fresh again` | `no bookmark ... three idle deadlines` | watch requests after sync |")
    P("|---|---|---:|---:|---|---:|---:|---:|---|")
    for r in irows:
        if r[0] == "kinformer":
            _, res, mins, n, at, cs, cf, nb = r
            P("| kinformer | %s | %s | %s | %s | %s | %s | %s | n/a |" % (res, mins, n, at, cs, cf, nb))
        else:
            _, res, mins, js = r
            try:
                j = json.loads(js)
                req = "%d watches, %d WatchLists, %d lists, %d failed" % (j["watches"], j["watch_lists"], j["lists"], j["failed_requests"])
            except Exception:
                req = "n/a (no summary)"
            P("| client-go | %s | %s | n/a | - | n/a | n/a | n/a | %s |" % (res, mins, req))
    P("")
P("Logs: %s" % logs)
text = "\n".join(L) + "\n"
open(out, "w").write(text)
print(text)
PY
log "table written to $out"
