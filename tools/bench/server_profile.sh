#!/usr/bin/env bash
# server_profile.sh: where kube-apiserver's CPU goes while a client syncs (issue 12: "find where
# the time goes"). Four modes, each a run of --runs back-to-back protobuf syncs of Pod, Secret and
# EndpointSlice informers on all namespaces (as in sync.sh) under one CPU profile of the
# launcher's kube-apiserver (/debug/pprof/profile): kinformer's WatchList and LIST, and
# client-go's WatchList and LIST (clientgo-sync: the same requests served to the peer; both sides
# ask for gzip on lists). Prints, per mode, the CPU-s per sync in named parts of the server (go
# tool pprof, cumulative), the median sync time, and each profile's top.
#
#   tools/bench/server_profile.sh                 # 5 syncs per mode (~3 min once loaded)
#   tools/bench/server_profile.sh --runs 10 --top 40
#
# Options: --runs N (5), --top N (25: rows of each profile's top), --dir DIR (launcher state;
# default /tmp/kinformer-sync-e2e, sync.sh's), --pods N / --secrets N / --slices N /
# --namespaces N (sync.sh's defaults; loaded with fanout-loader sync-load, which is idempotent),
# --keep DIR (where the .pprof files go; default <build>/tools/bench/server-profile).
# Uses the launcher in DIR when one runs there (left running), else starts one with the
# EndpointSlice watch cache on, as sync.sh does, and stops it at exit. The profiles are raw
# pprof files: `go tool pprof -http=: FILE` opens one in a browser.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${KINFORMER_BUILD_DIR:-build}"
case "$build" in /*) ;; *) build="$root/$build" ;; esac
runs=5 top=25 dir="/tmp/kinformer-sync-e2e" pods=20000 secrets=2000 slices=1000 namespaces=4 keep=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --top) top="$2"; shift 2 ;;
    --dir) dir="$2"; shift 2 ;;
    --pods) pods="$2"; shift 2 ;;
    --secrets) secrets="$2"; shift 2 ;;
    --slices) slices="$2"; shift 2 ;;
    --namespaces) namespaces="$2"; shift 2 ;;
    --keep) keep="$2"; shift 2 ;;
    -h|--help) sed -n 2,19p "$0"; exit 0 ;;
    *) echo "server_profile.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ "$runs" =~ ^[0-9]+$ && "$runs" -ge 1 && "$runs" -le 50 ]] || { echo "server_profile.sh: --runs in [1, 50]" >&2; exit 2; }
[[ "$top" =~ ^[0-9]+$ && "$top" -ge 1 ]] || { echo "server_profile.sh: --top must be a positive number" >&2; exit 2; }
bench_dir="$build/tools/bench"
keep="${keep:-$bench_dir/server-profile}"
mkdir -p "$keep"
log() { printf '== [%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

lock=()
if command -v flock >/dev/null 2>&1; then lock=(flock "${KINFORMER_BUILD_LOCK:-/tmp/kinformer-build.lock}"); fi
[[ -f "$build/build.ninja" ]] || cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >&2
"${lock[@]}" ninja -C "$build" -j2 kinformer_sync_bench >&2
mkdir -p "$bench_dir"
(cd "$root/tools/bench/clientgo-fanout" && GOFLAGS="${GOFLAGS:--mod=mod}" go build -p 2 -o "$bench_dir/fanout-loader" ./loader) >&2
(cd "$root/tools/bench/clientgo-sync" && GOFLAGS="${GOFLAGS:--mod=mod}" go build -p 2 -o "$bench_dir/clientgo-sync" .) >&2
kin="$bench_dir/kinformer_sync_bench"
cg="$bench_dir/clientgo-sync"

started_server=0
cleanup() {
  if [[ $started_server == 1 ]]; then
    log "stopping the launcher's server"
    bash "$root/e2e/launcher.sh" down --dir "$dir" >&2 || true
  fi
}
trap cleanup EXIT
cache_arg="--watch-cache-sizes=endpointslices.discovery.k8s.io#1000"
if bash "$root/e2e/launcher.sh" status --dir "$dir" >/dev/null 2>&1; then
  log "using the launcher's kube-apiserver in $dir (left running)"
else
  log "starting the e2e launcher's kube-apiserver in $dir (EndpointSlice watch cache on)"
  bash "$root/e2e/launcher.sh" up --dir "$dir" "--apiserver-arg=$cache_arg" >/dev/null
  started_server=1
fi
export KUBECONFIG="$dir/kubeconfig"
server="$(awk '$1 == "server:" { print $2; exit }' "$KUBECONFIG")"
if ! [[ "$server" =~ ^https://(127\.[0-9.]+|localhost|\[::1\])(:[0-9]+)?/?$ ]]; then
  echo "server_profile.sh: server '$server' in $KUBECONFIG is not a loopback address; refusing" >&2
  exit 2
fi
pki="$dir/pki"
[[ -r "$pki/admin.crt" && -r "$pki/admin.key" && -r "$pki/ca.crt" ]] || { echo "server_profile.sh: no launcher admin certificate in $pki" >&2; exit 2; }

log "loading $pods Pods, $secrets Secrets, $slices EndpointSlices (idempotent)"
totals="$keep/totals.json"
timeout 1800 "$bench_dir/fanout-loader" sync-load -pods "$pods" -secrets "$secrets" -slices "$slices" -namespaces "$namespaces" >"$totals"
total() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2] + "_total"])' "$totals" "$1"; }
p="$(total pods)" s="$(total secrets)" e="$(total endpointslices)"

# Named parts of kube-apiserver, as regular expressions (extended, matched by awk) over pprof's
# function names. Cumulative CPU, so parts overlap (an encode inside the watch server, GC inside
# anything).
parts=(
  "watch server (WatchServer.HandleHTTP)|handlers[.][(][*]WatchServer[)][.]Handle"
  "list handler (ListResource)|handlers[.]ListResource"
  "initial events (cacheWatcher.processInterval)|cacheWatcher[)][.]processInterval"
  "deep copy of objects (DeepCopyObject)|[.]DeepCopyObject$"
  "protobuf encoding (Serializer.Encode)|protobuf[.][(][*]Serializer[)][.]Encode"
  "watch cache list (Cacher.GetList)|Cacher[)][.]GetList"
  "consistent read: current RV from etcd|GetCurrentResourceVersion"
  "flushes of the watch response (Flush)|[.]Flush$"
  "TLS writes (crypto/tls Conn.Write)|tls[.][(][*]Conn[)][.]Write$"
  "HTTP/2 frame writes (writeFrameAsync)|http2[.][(][*]serverConn[)][.]writeFrameAsync"
  "write system calls (syscall.write)|^syscall[.]write$"
  "gzip compression (gzip.Writer.Write)|compress/gzip[.][(][*]Writer[)][.]Write$"
  "GC (runtime.gcBgMarkWorker)|runtime[.]gcBgMarkWorker$"
)
modes=(kinformer-watchlist kinformer-list clientgo-watchlist clientgo-list)

for mode in "${modes[@]}"; do
  prof="$keep/$mode.pprof"
  secs=$((runs * 3 + 3))
  log "$mode: profiling kube-apiserver for $secs s across $runs syncs"
  curl -sf --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" \
    -o "$prof" "$server/debug/pprof/profile?seconds=$secs" &
  curl_pid=$!
  sleep 1
  t0=$SECONDS
  for ((i = 1; i <= runs; i++)); do
    case "$mode" in
      kinformer-*) cmd=("$kin" --encoding protobuf --list-mode "${mode#kinformer-}" --pods "$p" --secrets "$s" --slices "$e" --settle-ms 0) ;;
      clientgo-watchlist) cmd=(env KUBE_FEATURE_WatchListClient=true "$cg" -encoding protobuf -list-mode watchlist -pods "$p" -secrets "$s" -slices "$e" -settle-ms 0) ;;
      clientgo-list) cmd=(env KUBE_FEATURE_WatchListClient=false "$cg" -encoding protobuf -list-mode list -pods "$p" -secrets "$s" -slices "$e" -settle-ms 0) ;;
    esac
    timeout --kill-after=10 300 "${cmd[@]}" >"$keep/$mode-$i.json" 2>"$keep/$mode-$i.err" \
      || { echo "server_profile.sh: sync $i ($mode) failed; see $keep/$mode-$i.err" >&2; exit 1; }
  done
  log "$mode: $runs syncs took $((SECONDS - t0)) s; waiting for the profile"
  wait "$curl_pid" || { echo "server_profile.sh: fetching the profile failed (is --profiling off?)" >&2; exit 1; }
done

seconds_of() {  # a pprof -top value like "1.23s" / "120ms" / "0" -> seconds
  awk -v v="$1" 'BEGIN { if (v ~ /ms$/) { sub(/ms$/, "", v); print v / 1000 } else if (v ~ /us$/) { sub(/us$/, "", v); print v / 1e6 } else if (v ~ /min$/) { sub(/min$/, "", v); print v * 60 } else if (v ~ /h$/) { sub(/h$/, "", v); print v * 3600 } else { sub(/s$/, "", v); print v + 0 } }'
}
median_sync() {  # mode -> median sync_s over its runs
  python3 - "$keep" "$1" "$runs" <<'PY'
import json, statistics, sys
keep, mode, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
print("%.3f" % statistics.median(json.load(open(f"{keep}/{mode}-{i}.json"))["sync_s"] for i in range(1, runs + 1)))
PY
}
summary() {  # mode -> median sync s, all samples, then one value per part (CPU-s per sync)
  local prof="$keep/$1.pprof" cum total part re best
  cum="$(go tool pprof -top -cum -nodecount=100000 "$prof" 2>/dev/null)"
  total="$(sed -nE 's/.*Total samples = ([0-9.]+[a-z]*) .*/\1/p' <<<"$cum" | head -1)"
  printf '%s %s' "$(median_sync "$1")" "$(awk -v t="$(seconds_of "${total:-0}")" -v r="$runs" 'BEGIN { printf "%.3f", t / r }')"
  for part in "${parts[@]}"; do
    re="${part#*|}"
    # The largest cumulative value among the matching functions (the part's entry point). The
    # regex goes through the environment: awk -v would process its backslashes.
    best="$(RE="$re" awk 'NR > 6 && $NF ~ ENVIRON["RE"] { print $4 }' <<<"$cum" | while read -r v; do seconds_of "$v"; done | sort -g | tail -1)"
    printf ' %s' "$(awk -v t="${best:-0}" -v r="$runs" 'BEGIN { printf "%.3f", t / r }')"
  done
  echo
}
declare -A col
for mode in "${modes[@]}"; do col[$mode]="$(summary "$mode")"; done
read -ra kw <<<"${col[kinformer-watchlist]}"
read -ra kl <<<"${col[kinformer-list]}"
read -ra cw <<<"${col[clientgo-watchlist]}"
read -ra cl <<<"${col[clientgo-list]}"
echo
echo "kube-apiserver CPU-s per sync ($p Pods, $s Secrets, $e EndpointSlices, protobuf; $runs syncs per mode; cumulative, so parts overlap)"
printf '| %-44s | %13s | %13s | %13s | %13s |\n' "part" "kin WatchList" "kin LIST" "cg WatchList" "cg LIST"
printf '|%s|%s|%s|%s|%s|\n' "$(printf -- '-%.0s' {1..46})" "--------------:" "--------------:" "--------------:" "--------------:"
printf '| %-44s | %13s | %13s | %13s | %13s |\n' "median time to sync, s" "${kw[0]}" "${kl[0]}" "${cw[0]}" "${cl[0]}"
printf '| %-44s | %13s | %13s | %13s | %13s |\n' "all samples" "${kw[1]}" "${kl[1]}" "${cw[1]}" "${cl[1]}"
for i in "${!parts[@]}"; do
  printf '| %-44s | %13s | %13s | %13s | %13s |\n' "${parts[$i]%%|*}" "${kw[$((i + 2))]}" "${kl[$((i + 2))]}" "${cw[$((i + 2))]}" "${cl[$((i + 2))]}"
done
for mode in "${modes[@]}"; do
  echo
  echo "== $mode: go tool pprof -top -cum (first $top rows)"
  go tool pprof -top -cum -nodecount="$top" "$keep/$mode.pprof" 2>/dev/null
done
log "profiles: $(printf '%s ' "${modes[@]/#/$keep/}" | sed 's/ /.pprof /g')"
