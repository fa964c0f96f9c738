#!/usr/bin/env bash
# threads.sh: OS threads and RSS of `kwatch endpoints SERVICE -n NS --watch` with N remote
# clusters, for N in a list, optionally side by side with an older kwatch binary.
#
#   tools/bench/threads.sh                                   # N = 1 10 50 200, this build only
#   tools/bench/threads.sh --baseline-bin /tmp/kinformer-baseline/build/tools/kwatch/kwatch
#   tools/bench/threads.sh --clusters "1 10" --storm-namespaces 0
#
# Options: --baseline-bin PATH (another kwatch to compare with), --clusters "N ..." (default
# "1 10 50 200"), --namespace NS (default threads-bench), --dir DIR (launcher state; default
# /tmp/kinformer-threads-e2e), --sync-wait S (default 180), --storm-namespaces M (default 500; 0
# skips), --storm-pods P (default 1), --out FILE (default build/tools/bench/threads-results.md;
# each process's stdout, stderr and threads by name and wchan go to threads-results.logs/ beside it).
# Build dir: ${KINFORMER_BUILD_DIR:-build}; nothing is built here (ninja -C build kwatch
# kinformer_storm_bench; clientgo-storm as tools/bench/storm.sh builds it).
#
# All remote clusters are the launcher's own API server (started here unless DIR already runs
# one, stopped at exit if started here), so only the client's cost grows with N. Per N and binary:
# Secrets in kinformer-system labelled kinformer.io/multicluster=true hold keys c0..c{N-1}
# (at most 50 keys per Secret: remote-clusters, remote-clusters-1, ...), each an inline kubeconfig
# (CA, client certificate and key as *-data); kwatch endpoints svc -n NS --port http --watch
# starts; once it printed a snapshot with N+1 clusters (or --sync-wait passed) and
# /proc/PID/status Threads stayed unchanged for 5 s (at most 60 s), Threads and VmRSS are
# recorded; then SIGTERM (SIGKILL after 20 s), the Secrets are deleted, the process is reaped.
# RSS per remote cluster = (RSS(N) - RSS(1)) / (N - 1). The order of the two binaries alternates
# per N. With --storm-namespaces M: kinformer_storm_bench (one InformerFactory, one Pod informer per
# namespace) against M namespaces of P Pods (loaded by clientgo-storm), its Threads and VmRSS once
# synced; also for the baseline build's kinformer_storm_bench when one sits beside --baseline-bin,
# and for client-go (`clientgo-storm run`, the same informers with client-go's defaults).
# The namespaces are left in place (the launcher runs no namespace controller to delete them).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

baseline_bin="" clusters="1 10 50 200" ns="threads-bench" dir="/tmp/kinformer-threads-e2e"
sync_wait=180 storm_ns=500 storm_pods=1 out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --baseline-bin) baseline_bin="$2"; shift 2 ;;
    --clusters) clusters="$2"; shift 2 ;;
    --namespace) ns="$2"; shift 2 ;;
    --dir) dir="$2"; shift 2 ;;
    --sync-wait) sync_wait="$2"; shift 2 ;;
    --storm-namespaces) storm_ns="$2"; shift 2 ;;
    --storm-pods) storm_pods="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    -h|--help) print_help ;;
    *) die "unknown argument $1" ;;
  esac
done
for n in $clusters; do
  num "--clusters: each N" "$n" 1 1000
done
[[ "$sync_wait" =~ ^[0-9]+$ ]] || die "--sync-wait SECONDS"
num --storm-namespaces "$storm_ns" 0 2000

kwatch="$build/tools/kwatch/kwatch"
[[ -x "$kwatch" ]] || die "$kwatch missing (ninja -C $build kwatch)"
if [[ -n "$baseline_bin" ]]; then
  [[ -x "$baseline_bin" ]] || die "--baseline-bin $baseline_bin is not executable"
  baseline_bin="$(cd "$(dirname "$baseline_bin")" && pwd)/$(basename "$baseline_bin")"
fi
out="${out:-$build/tools/bench/threads-results.md}"
logs="${out%.md}.logs"
raw="${out%.md}.jsonl"
mkdir -p "$(dirname "$out")"
rm -rf "$logs"
mkdir -p "$logs"
work_dir threads
kubectl=/usr/bin/kubectl
secret_ns=kinformer-system
bench_label="kinformer.io/bench=threads"

child=""
cleanup() {  # at exit, before the server stops
  if [[ -n "$child" ]] && kill -0 "$child" 2>/dev/null; then kill -KILL "$child" 2>/dev/null || true; fi
  "$kubectl" delete secret -n "$secret_ns" -l "$bench_label" --ignore-not-found --wait=true >/dev/null 2>&1 || true
}

# --- server ----------------------------------------------------------------------------------
launcher_ensure "$dir"
at_exit cleanup
require_loopback
log "server $server"

# The remote kubeconfig: the launcher's admin user, everything inline (file paths are refused).
python3 - "$server" "$dir/pki" >"$work/remote-kubeconfig" <<'PY'
import base64, sys
server, pki = sys.argv[1:3]
b = lambda f: base64.b64encode(open(f"{pki}/{f}", "rb").read()).decode()
print(f"""apiVersion: v1
kind: Config
clusters:
- name: remote
  cluster:
    server: {server}
    certificate-authority-data: {b("ca.crt")}
users:
- name: admin
  user:
    client-certificate-data: {b("admin.crt")}
    client-key-data: {b("admin.key")}
contexts:
- name: remote
  context:
    cluster: remote
    user: admin
current-context: remote""")
PY

# --- objects ---------------------------------------------------------------------------------
# Applied, never deleted: the launcher runs no namespace controller, a deleted namespace would
# stay Terminating.
"$kubectl" apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Namespace
metadata: {name: $secret_ns}
---
apiVersion: v1
kind: Namespace
metadata: {name: $ns}
---
apiVersion: v1
kind: Service
metadata: {name: svc, namespace: $ns}
spec:
  ports: [{name: http, port: 80, targetPort: 8080, protocol: TCP}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: svc-bench
  namespace: $ns
  labels: {kubernetes.io/service-name: svc}
addressType: IPv4
ports: [{name: http, port: 8080, protocol: TCP}]
endpoints: [{addresses: [10.0.0.1], conditions: {ready: true}}]
EOF
"$kubectl" delete secret -n "$secret_ns" -l "$bench_label" --ignore-not-found --wait=true >/dev/null

write_secrets() {  # N
  python3 - "$1" "$work/remote-kubeconfig" "$secret_ns" "$bench_label" >"$work/secrets.json" <<'PY'
import base64, json, sys
n, kc, ns, bench = int(sys.argv[1]), open(sys.argv[2], "rb").read(), sys.argv[3], sys.argv[4]
value = base64.b64encode(kc).decode()
per = 50  # ~8 KB a key: 50 keys stay far below the 1 MiB Secret limit
items = []
for start in range(0, n, per):
    k = start // per
    items.append({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                  "metadata": {"name": "remote-clusters" + (f"-{k}" if k else ""), "namespace": ns,
                               "labels": {"kinformer.io/multicluster": "true",
                                          bench.split("=")[0]: bench.split("=")[1]}},
                  "data": {f"c{i}": value for i in range(start, min(n, start + per))}})
print(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
PY
  "$kubectl" create -f "$work/secrets.json" >/dev/null
}

# Distinct clusters in the newest complete-or-partial snapshot of a table stream (0 before any).
clusters_seen() {
  awk '/^snapshot / { if (n) last = n; n = 0; delete seen; in_snap = 1; next }
       in_snap && $1 != "CLUSTER" && $1 !~ /^\(/ && NF > 0 && !($1 in seen) { seen[$1] = 1; n++ }
       END { print (n > last ? n : last) + 0 }' "$1" 2>/dev/null || echo 0
}

# Waits until Threads of PID is unchanged for 5 s (at most 60 s); prints "threads rss_kb hwm_kb stable".
settle() {
  local pid="$1" last="" same_since now t deadline
  deadline=$(($(date +%s) + 60))
  same_since=$(date +%s)
  while kill -0 "$pid" 2>/dev/null; do
    t="$(status_field "$pid" Threads)"
    now=$(date +%s)
    if [[ "$t" != "$last" ]]; then last="$t"; same_since=$now; fi
    if ((now - same_since >= 5)); then
      echo "$t $(status_field "$pid" VmRSS) $(status_field "$pid" VmHWM) 1"
      return 0
    fi
    if ((now >= deadline)); then
      echo "$t $(status_field "$pid" VmRSS) $(status_field "$pid" VmHWM) 0"
      return 0
    fi
    sleep 0.5
  done
  echo "0 0 0 0"
}

# Threads by name and by where they sleep (/proc/PID/task/*/comm and wchan), most first.
thread_names() {
  local t
  for t in /proc/"$1"/task/*; do
    printf '%s %s\n' "$(cat "$t/comm" 2>/dev/null)" "$(cat "$t/wchan" 2>/dev/null)"
  done | sort | uniq -c | sort -rn || true
}

: >"$raw"
run_one() {  # side bin N
  local side="$1" bin="$2" n="$3" o e pid t0 seen=0 synced_s=-1
  o="$logs/$side-n$n.out" e="$logs/$side-n$n.err"
  write_secrets "$n"
  : >"$o"
  : >"$e"
  t0=$(date +%s%N)
  "$bin" endpoints svc -n "$ns" --port http --watch >"$o" 2>"$e" &
  pid=$! child=$pid
  while kill -0 "$pid" 2>/dev/null; do
    seen="$(clusters_seen "$o")"
    if ((seen >= n + 1)); then synced_s=$(( ($(date +%s%N) - t0) / 1000000 )); break; fi
    (( $(date +%s%N) - t0 >= sync_wait * 1000000000 )) && break
    sleep 0.5
  done
  local threads rss hwm stable
  read -r threads rss hwm stable < <(settle "$pid")
  thread_names "$pid" >"$logs/$side-n$n.threads"
  seen="$(clusters_seen "$o")"
  stop_pids 20 "$pid"
  "$kubectl" delete secret -n "$secret_ns" -l "$bench_label" --ignore-not-found --wait=true >/dev/null
  local rc=0
  wait "$pid" || rc=$?
  child=""
  local warns errors
  warns="$(grep -c 'level=warn' "$e" || true)"
  errors="$(grep -c 'level=error' "$e" || true)"
  printf '{"side":"%s","n":%d,"threads":%d,"rss_kb":%d,"hwm_kb":%d,"stable":%d,"clusters_seen":%d,"all_seen_ms":%d,"rc":%d,"warn_lines":%d,"error_lines":%d}\n' \
    "$side" "$n" "${threads:-0}" "${rss:-0}" "${hwm:-0}" "${stable:-0}" "$seen" "$synced_s" "$rc" "${warns:-0}" "${errors:-0}" >>"$raw"
  log "  $side N=$n: clusters $seen/$((n + 1)) after $( ((synced_s >= 0)) && echo "$((synced_s / 1000)).$(printf %03d $((synced_s % 1000)))s" || echo "never (${sync_wait}s)" ), threads $threads$( ((stable)) || echo " (not stable in 60 s)" ), RSS $((rss / 1024)) MiB, exit $rc, stderr warn $warns error $errors"
}

# The client-go peer of run_one: `clientgo-storm clusters` (N+1 clusters, each its own clientset
# with an EndpointSlice and a Pod informer on NS), measured the same way once it wrote its
# ready file.
peer_one() {  # N
  local n="$1" o="$logs/client-go-n$1.out" e="$logs/client-go-n$1.err" ready="$work/peer-ready"
  local pid t0 synced_s=-1 seen=0
  rm -f "$ready"
  t0=$(date +%s%N)
  "$peer" clusters -clusters "$n" -namespace "$ns" -ready-file "$ready" -sync-timeout "$sync_wait" \
    >"$o" 2>"$e" &
  pid=$! child=$pid
  if wait_ready "$ready" "$pid" "$sync_wait"; then
    synced_s=$(( ($(date +%s%N) - t0) / 1000000 )) seen=$((n + 1))
  fi
  local threads rss hwm stable
  read -r threads rss hwm stable < <(settle "$pid")
  thread_names "$pid" >"$logs/client-go-n$n.threads"
  stop_pids 20 "$pid"
  local rc=0
  wait "$pid" || rc=$?
  child=""
  printf '{"side":"client-go","n":%d,"threads":%d,"rss_kb":%d,"hwm_kb":%d,"stable":%d,"clusters_seen":%d,"all_seen_ms":%d,"rc":%d,"warn_lines":0,"error_lines":%d}\n' \
    "$n" "${threads:-0}" "${rss:-0}" "${hwm:-0}" "${stable:-0}" "$seen" "$synced_s" "$rc" "$(wc -l <"$e")" >>"$raw"
  log "  client-go N=$n: synced $( ((synced_s >= 0)) && echo "after $((synced_s / 1000)).$(printf %03d $((synced_s % 1000)))s" || echo "never (${sync_wait}s)" ), threads $threads, RSS $((rss / 1024)) MiB, exit $rc"
}
peer="$bench_dir/clientgo-storm"
[[ -x "$peer" ]] || log "no client-go peer: $peer missing (tools/bench/storm.sh builds it)"

t_start=$(date +%s)
i=0
for n in $clusters; do
  sides=(now)
  if [[ -n "$baseline_bin" ]]; then
    if ((i % 2 == 0)); then sides=(baseline now); else sides=(now baseline); fi
  fi
  [[ -x "$peer" ]] && sides+=(client-go)
  for side in "${sides[@]}"; do
    log "N=$n: $side"
    case $side in
      now) run_one now "$kwatch" "$n" ;;
      baseline) run_one baseline "$baseline_bin" "$n" ;;
      client-go) peer_one "$n" ;;
    esac
  done
  i=$((i + 1))
done

# --- one factory, many Pod informers ----------------------------------------------------------
storm_one() {  # side bin (a kinformer_storm_bench, or clientgo-storm for the client-go side)
  local side="$1" bin="$2" ready="$work/storm-ready" pid t0
  rm -f "$ready"
  t0=$(date +%s%N)
  if [[ $side == client-go ]]; then
    "$bin" run -namespaces "$storm_ns" -prefix threads-storm- -marker none -ready-file "$ready" \
      -times-file "$work/storm-times-never" -sync-timeout 300 -recover-timeout 900 \
      >"$logs/storm-$side.out" 2>"$logs/storm-$side.err" &
  else
    "$bin" --namespaces "$storm_ns" --prefix threads-storm- --marker none --ready-file "$ready" \
      --times-file "$work/storm-times-never" --sync-timeout 300 --recover-timeout 900 \
      >"$logs/storm-$side.out" 2>"$logs/storm-$side.err" &
  fi
  pid=$! child=$pid
  local sync_ms=-1 threads=0 rss=0 hwm=0 stable=0
  if wait_ready "$ready" "$pid" 330; then
    sync_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    read -r threads rss hwm stable < <(settle "$pid")
    thread_names "$pid" >"$logs/storm-$side.threads"
  else
    log "  storm $side did not sync"; tail -n 5 "$logs/storm-$side.err" >&2 || true
  fi
  stop_pids 20 "$pid"
  reap "$pid"
  child=""
  printf '{"side":"storm-%s","n":%d,"threads":%d,"rss_kb":%d,"hwm_kb":%d,"stable":%d,"all_seen_ms":%d}\n' \
    "$side" "$storm_ns" "$threads" "$rss" "$hwm" "$stable" "$sync_ms" >>"$raw"
  log "  storm $side: $storm_ns informers synced after ${sync_ms} ms, threads $threads, RSS $((rss / 1024)) MiB"
}
if ((storm_ns > 0)); then
  storm_bin="$bench_dir/kinformer_storm_bench" loader="$bench_dir/clientgo-storm"
  storm_base=""
  [[ -n "$baseline_bin" ]] && storm_base="$(dirname "$(dirname "$baseline_bin")")/bench/kinformer_storm_bench"
  if [[ ! -x "$storm_bin" || ! -x "$loader" ]]; then
    log "skipping the factory measurement: $storm_bin or $loader missing (tools/bench/storm.sh builds both)"
  else
    log "loading $storm_ns namespaces x $storm_pods Pods (threads-storm-*)"
    timeout 600 "$loader" load -namespaces "$storm_ns" -pods "$storm_pods" -prefix threads-storm- >&2
    if [[ -x "$storm_base" ]]; then
      log "factory with $storm_ns Pod informers: baseline"
      storm_one baseline "$storm_base"
    fi
    log "factory with $storm_ns Pod informers: now"
    storm_one now "$storm_bin"
    log "$storm_ns Pod informers: client-go (one SharedInformerFactory per namespace, as clientgo-storm runs them)"
    storm_one client-go "$loader"
  fi
fi
elapsed=$(($(date +%s) - t_start))

# --- table -----------------------------------------------------------------------------------
commit="$(commit_short)"
base_commit=""
[[ -n "$baseline_bin" ]] && base_commit="$(git -C "$(dirname "$baseline_bin")" rev-parse --short HEAD 2>/dev/null || echo unknown)"
python3 - "$raw" "$out" "$commit" "$base_commit" "$elapsed" "$ns" "$sync_wait" "$baseline_bin" "$kwatch" <<'PY'
import json, os, sys, datetime
from benchlib import utc_now
raw, out, commit, base_commit, elapsed, ns, sync_wait, baseline_bin, kwatch = sys.argv[1:10]
def built(path):
    return datetime.datetime.fromtimestamp(os.path.getmtime(path), datetime.timezone.utc).strftime("%Y-%m-%d %H:%M")
rows = [json.loads(l) for l in open(raw) if l.strip()]
runs = {(r["side"], r["n"]): r for r in rows}
ns_list = sorted({r["n"] for r in rows if not r["side"].startswith("storm")})
sides = [x for x in ("baseline", "now", "client-go") if any(r["side"] == x for r in rows)]
cores = os.cpu_count()
def mib(kb): return kb / 1024.0
def cell_threads(r):
    if r is None: return "n/a"
    s = str(r["threads"])
    if r["clusters_seen"] < r["n"] + 1: s += f" ({max(r['clusters_seen'] - 1, 0)}/{r['n']} remotes seen)"
    if not r["stable"]: s += " (unstable)"
    return s
def cell_rss(r):
    return f"{mib(r['rss_kb']):.1f}" if r else "n/a"
def rss_per_cluster(side, n):
    r, one = runs.get((side, n)), runs.get((side, 1))
    if n == 1 or r is None or one is None: return None
    return mib(r["rss_kb"] - one["rss_kb"]) / (n - 1)
def per_cluster(side, n):
    v = rss_per_cluster(side, n)
    return "-" if v is None else f"{v:.2f}"
def ratio(a, b):
    return f"{a / b:.2f}x" if a is not None and b not in (None, 0) else "-"
L = []; P = L.append
P(f"Threads and RSS of `kwatch endpoints svc -n {ns} --port http --watch` with N remote clusters (all the launcher's API server), "
  f"read from /proc/PID/status once the output showed N+1 clusters and Threads was unchanged for 5 s"
  + ("; client-go = `clientgo-storm clusters` (N+1 clientsets, each an EndpointSlice and a Pod informer on the namespace, "
     "client-go v0.36 defaults), read once synced the same way" if "client-go" in sides else ""))
P(f"date {utc_now()} UTC, now = {kwatch} (built {built(kwatch)} UTC; HEAD {commit})"
  + (f", baseline = {baseline_bin} (built {built(baseline_bin)} UTC; its tree at {base_commit})" if baseline_bin else "")
  + f", {cores} CPUs, runs took {elapsed} s; the project's bound: 4 x cores + 8 = {4 * cores + 8} threads")
P("")
head = ["N"] + [f"threads ({x})" for x in sides] + [f"RSS MiB ({x})" for x in sides] + [f"RSS/cluster MiB ({x})" for x in sides]
peer_cols = "client-go" in sides
if peer_cols: head += ["threads now / client-go", "RSS/cluster now / client-go"]
P("| " + " | ".join(head) + " |")
P("|" + "---:|" * len(head))
for n in ns_list:
    cells = [str(n)] + [cell_threads(runs.get((x, n))) for x in sides] + [cell_rss(runs.get((x, n))) for x in sides] \
        + [per_cluster(x, n) for x in sides]
    if peer_cols:
        w, g = runs.get(("now", n)), runs.get(("client-go", n))
        cells += [ratio(w["threads"] if w else None, g["threads"] if g else None),
                  ratio(rss_per_cluster("now", n), rss_per_cluster("client-go", n))]
    P("| " + " | ".join(cells) + " |")
P("")
P("Per run: time until N+1 clusters were shown, peak RSS (VmHWM), exit status after SIGTERM, stderr lines")
for r in rows:
    if r["side"].startswith("storm"): continue
    seen = f"{r['all_seen_ms'] / 1000:.1f} s" if r["all_seen_ms"] >= 0 else f"never within {sync_wait} s ({r['clusters_seen']} clusters)"
    P(f"- {r['side']} N={r['n']}: all clusters after {seen}, VmHWM {mib(r['hwm_kb']):.1f} MiB, exit {r['rc']}, "
      f"warn {r['warn_lines']}, error {r['error_lines']}")
storm = [r for r in rows if r["side"].startswith("storm")]
if storm:
    P("")
    P(f"{storm[0]['n']} Pod informers, one namespace each (kinformer_storm_bench: one InformerFactory; "
      f"clientgo-storm run: client-go v0.36 defaults), once synced; ratio = kinformer / client-go:")
    P("")
    P("| binary | threads | RSS MiB | synced after s |")
    P("|---|---:|---:|---:|")
    peer = next((r for r in storm if r["side"] == "storm-client-go" and r["all_seen_ms"] >= 0), None)
    for r in storm:
        if r["all_seen_ms"] < 0:
            P(f"| {r['side'][6:]} | did not sync | - | - |")
            continue
        P(f"| {r['side'][6:]} | {r['threads']}{'' if r['stable'] else ' (unstable)'} | {mib(r['rss_kb']):.1f} | "
          f"{r['all_seen_ms'] / 1000:.1f} |")
    now = next((r for r in storm if r["side"] == "storm-now" and r["all_seen_ms"] >= 0), None)
    if peer and now:
        P(f"| ratio now / client-go | {now['threads'] / peer['threads']:.2f}x | "
          f"{now['rss_kb'] / peer['rss_kb']:.2f}x | {now['all_seen_ms'] / max(peer['all_seen_ms'], 1):.2f}x |")
text = "\n".join(L) + "\n"
open(out, "w").write(text)
print(text)
PY
log "table written to $out (raw: $raw, logs: $logs)"
