#!/usr/bin/env bash
# Smoke test of the launcher with curl: up, admin/restricted access, /metrics,
# WatchList, Pod creation, compact -> 410, restart-apiserver, down.
# Usage: e2e/launcher/smoke.sh [DIR]   (default /tmp/kinformer-e2e-smoke)
set -euo pipefail
launcher="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/launcher.sh"
dir="${1:-/tmp/kinformer-e2e-smoke}"
pass=0 fail=0
check() { # name, command...
    local name="$1"; shift
    if "$@"; then pass=$((pass + 1)); echo "ok   $name"; else fail=$((fail + 1)); echo "FAIL $name"; fi
}
trap 'bash "$launcher" down --dir "$dir" >/dev/null 2>&1 || true' EXIT

t0=$(date +%s.%N)
bash "$launcher" up --dir "$dir" >"$dir.up.out"
echo "up took $(echo "$(date +%s.%N) - $t0" | bc)s"
[[ "$(tail -1 "$dir.up.out")" == "KUBECONFIG=$dir/kubeconfig" ]] || { echo "FAIL up output"; exit 1; }
url="$(sed -n 's/^APISERVER=//p' "$dir.up.out")"
pki="$dir/pki"
admin=(--cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key")
restricted=(--cacert "$pki/ca.crt" -H "@$dir/.restricted-header")
printf 'Authorization: Bearer %s\n' "$(cat "$pki/restricted.token")" >"$dir/.restricted-header"
chmod 600 "$dir/.restricted-header"
code() { curl -sS -o /dev/null -w '%{http_code}' "$@"; }
post() { curl -sS -o /dev/null -w '%{http_code}' "${admin[@]}" -X POST -H 'Content-Type: application/json' "$@"; }

check "admin lists secrets (200)" test "$(code "${admin[@]}" "$url/api/v1/namespaces/default/secrets")" = 200
check "restricted user is forbidden (403)" test "$(code "${restricted[@]}" "$url/api/v1/namespaces/default/secrets")" = 403
metrics="$(curl -sS "${admin[@]}" "$url/metrics")"
check "/metrics has apiserver_longrunning_requests" grep -q '^apiserver_longrunning_requests' <<<"$metrics"
check "create secret s1 (201)" test "$(post -d '{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s1"}}' "$url/api/v1/namespaces/default/secrets")" = 201
wl="$(timeout 5 curl -sS -N "${admin[@]}" "$url/api/v1/namespaces/default/secrets?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true" || true)"
check "WatchList ends initial events with a k8s.io/initial-events-end BOOKMARK" \
    bash -c 'grep "\"type\":\"BOOKMARK\"" <<<"$1" | grep -q "\"k8s.io/initial-events-end\":\"true\""' _ "$wl"
check "create pod without a service account (201)" \
    test "$(post -d '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p1"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}' "$url/api/v1/namespaces/default/pods")" = 201

old_rv="$(curl -sS "${admin[@]}" "$url/api/v1/namespaces/default/secrets" | python3 -c 'import json,sys; print(json.load(sys.stdin)["metadata"]["resourceVersion"])')"
post -d '{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s2"}}' "$url/api/v1/namespaces/default/secrets" >/dev/null
rev="$(bash "$launcher" compact --dir "$dir" 2>/dev/null | tail -1)"
echo "compacted to $rev (old resourceVersion $old_rv)"
check "exact list at a compacted resourceVersion is 410" \
    test "$(code "${admin[@]}" "$url/api/v1/namespaces/default/secrets?resourceVersion=$old_rv&resourceVersionMatch=Exact")" = 410
es="$(timeout 5 curl -sS -N "${admin[@]}" "$url/apis/discovery.k8s.io/v1/namespaces/default/endpointslices?watch=1&resourceVersion=$old_rv" || true)"
check "watch (no watch cache: endpointslices) from a compacted resourceVersion is 410" \
    bash -c 'grep -q "\"type\":\"ERROR\".*\"code\":410" <<<"$1"' _ "$es"

bash "$launcher" restart-apiserver --dir "$dir" >/dev/null 2>&1
check "restart-apiserver: ready again on the same port" test "$(code "${admin[@]}" "$url/readyz")" = 200
check "restart-apiserver: data kept" test "$(code "${admin[@]}" "$url/api/v1/namespaces/default/secrets/s1")" = 200
w="$(timeout 5 curl -sS -N "${admin[@]}" "$url/api/v1/namespaces/default/secrets?watch=1&resourceVersion=$old_rv" || true)"
check "watch (watch cache: secrets) from a compacted resourceVersion after restart is 410" \
    bash -c 'grep -q "\"type\":\"ERROR\".*\"code\":410" <<<"$1"' _ "$w"

ports="$(python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(s["apiserver_port"], s["etcd_client_port"], s["etcd_peer_port"])' "$dir/state.json")"
pids="$(python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(s["apiserver"]["pid"], s["etcd"]["pid"])' "$dir/state.json")"
bash "$launcher" down --dir "$dir" >/dev/null 2>&1
# "[x]yz" matches "xyz" but not itself, nor this script's own command line.
check "down: no process of this cluster left" bash -c '! pgrep -f "$1" >/dev/null' _ "[${dir:0:1}]${dir:1}/"
for p in $pids; do
    check "down: pid $p gone (not even a zombie)" test ! -e "/proc/$p"
done
for p in $ports; do
    check "down: port $p closed" bash -c '[ -z "$(ss -Htln "sport = :$1")" ]' _ "$p"
done
check "down is idempotent" bash "$launcher" down --dir "$dir"
rm -f "$dir.up.out"
bash "$launcher" down --dir "$dir" --purge >/dev/null 2>&1
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
