#!/usr/bin/env bash
# server_profile.sh: where kube-apiserver's CPU goes while a client syncs ("find where the time
# goes"). Four modes, each a run of --runs back-to-back protobuf syncs of Pod, Secret and
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
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
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
    -h|--help) print_help ;;
    *) die "unknown argument $1" ;;
  esac
done
num --runs "$runs" 1 50
[[ "$top" =~ ^[0-9]+$ && "$top" -ge 1 ]] || die "--top must be a positive number"
keep="${keep:-$bench_dir/server-profile}"
mkdir -p "$keep"

build_cxx kinformer_sync_bench
build_go_peers
kin="$bench_dir/kinformer_sync_bench"
cg="$bench_dir/clientgo-sync"

cache_arg="--watch-cache-sizes=endpointslices.discovery.k8s.io#1000"
launcher_ensure "$dir" "--apiserver-arg=$cache_arg"  # when it starts one: the EndpointSlice watch cache on
require_loopback
[[ "$server" == https://* ]] || die "server '$server' in $KUBECONFIG is not https; refusing"
pki="$dir/pki"
[[ -r "$pki/admin.crt" && -r "$pki/admin.key" && -r "$pki/ca.crt" ]] || die "no launcher admin certificate in $pki"

log "loading $pods Pods, $secrets Secrets, $slices EndpointSlices (idempotent)"
totals="$keep/totals.json"
timeout 1800 "$bench_dir/fanout-loader" sync-load -pods "$pods" -secrets "$secrets" -slices "$slices" -namespaces "$namespaces" >"$totals"
total() { json_get "$totals" "$1_total"; }
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
      || fail "sync $i ($mode) failed; see $keep/$mode-$i.err"
  done
  log "$mode: $runs syncs took $((SECONDS - t0)) s; waiting for the profile"
  wait "$curl_pid" || fail "fetching the profile failed (is --profiling off?)"
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
