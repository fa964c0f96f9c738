#!/usr/bin/env bash
# The API server's CPU for one LIST of a resource, whole against paginated: the whole list at
# resourceVersion "0" (served from the watch cache in one response, the informers' first list)
# against pages of --limit with resourceVersion unset (a consistent read, continued page by page
# with the server's continue token). Protobuf and gzip, as a typed client asks. A small Python
# client makes the requests, so the figure is the server's alone; method as server_cpu_ab.sh
# (blocks of --runs back-to-back lists after one warm-up, alternating order, kube-apiserver's
# utime+stime less its idle rate).
#
#   tools/bench/list_pages_cpu.sh [--dir DIR] [--path /api/v1/pods] [--limit 500] [--rounds 6] [--runs 8]
#
# Needs the launcher's server running in DIR with the objects loaded (see server_cpu_ab.sh).
set -euo pipefail
export LC_ALL=C
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

dir=/tmp/kinformer-sync-e2e path=/api/v1/pods limit=500 rounds=6 runs=8
while [[ $# -gt 0 ]]; do
  case "$1" in
    --dir) dir="$2"; shift 2 ;;
    --path) path="$2"; shift 2 ;;
    --limit) limit="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    *) die "unknown argument $1" ;;
  esac
done
[[ "$limit" =~ ^[1-9][0-9]*$ && "$rounds" =~ ^[1-9][0-9]*$ && "$runs" =~ ^[1-9][0-9]*$ ]] ||
  die "--limit, --rounds and --runs take a positive number"
apiserver_attach "$dir"

# One list, "whole" or "paged"; prints "<pages> <bytes on the wire>".
list() {
  python3 - "$dir" "$path" "$1" "$limit" <<'PY'
import gzip, sys, urllib.parse, urllib.request
from benchlib import launcher_server
d, path, mode, limit = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
url, ctx = launcher_server(d)

def varint(b, i):
    value = shift = 0
    while True:
        x = b[i]
        i += 1
        value |= (x & 0x7F) << shift
        shift += 7
        if x < 0x80:
            return value, i

def fields(b):  # protobuf fields of one message: (number, value)
    i = 0
    while i < len(b):
        key, i = varint(b, i)
        wire = key & 7
        if wire == 0:
            v, i = varint(b, i)
        elif wire == 2:
            n, i = varint(b, i)
            v, i = b[i:i + n], i + n
        elif wire == 1:
            v, i = b[i:i + 8], i + 8
        elif wire == 5:
            v, i = b[i:i + 4], i + 4
        else:
            sys.exit(f"list_pages_cpu.sh: wire type {wire} in the response")
        yield key >> 3, v

pages = wire_bytes = 0
token = ""
while True:
    q = {"resourceVersion": "0"} if mode == "whole" else {"limit": limit}
    if token:
        q["continue"] = token
    req = urllib.request.Request(url + path + "?" + urllib.parse.urlencode(q), headers={
        "Accept": "application/vnd.kubernetes.protobuf", "Accept-Encoding": "gzip"})
    with urllib.request.urlopen(req, context=ctx, timeout=120) as r:
        body = r.read()
        wire_bytes += len(body)
        if r.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
    pages += 1
    if body[:4] != b"k8s\0":
        sys.exit("list_pages_cpu.sh: not a protobuf response")
    unknown = dict(fields(body[4:]))       # runtime.Unknown: raw = 2
    items = dict(fields(unknown[2]))       # the List: metadata = 1
    meta = dict(fields(items.get(1, b"")))  # ListMeta: continue = 3
    token = meta.get(3, b"").decode()
    if mode == "whole" or not token:
        break
print(pages, wire_bytes)
PY
}

list_quiet() { list "$1" >/dev/null; }

a="$(ticks "$pid")" t0="$(now)"; sleep 10
idle="$(awk -v a="$a" -v b="$(ticks "$pid")" -v t0="$t0" -v t1="$(now)" -v k="$tck" 'BEGIN { print (b - a) / k / (t1 - t0) }')"
read -r wp wb < <(list whole)
read -r pp pb < <(list paged)
echo "kube-apiserver pid $pid, idle $idle CPU-s/s; $path: whole $wp page, $wb bytes; limit $limit: $pp pages, $pb bytes"
results="$(mktemp)"
at_exit rm -f "$results"
for r in $(seq "$rounds"); do
  if ((r % 2)); then order="whole paged"; else order="paged whole"; fi
  for m in $order; do
    list "$m" >/dev/null  # warm-up
    block "$runs" list_quiet "$m"
    printf 'round %d %-5s %s s per list (block of %d)\n' "$r" "$m" "$per" "$runs"
    echo "$m $per" >>"$results"
  done
done
python3 - "$results" <<'PY'
import statistics as st, sys
from benchlib import se
v = {}
for line in open(sys.argv[1]):
    m, cpu = line.split()
    v.setdefault(m, []).append(float(cpu))
for m in ("whole", "paged"):
    print(f"{m}: {st.mean(v[m]):.3f} s per list (se {se(v[m]):.3f}, {len(v[m])} blocks)")
print(f"paged / whole: {st.mean(v['paged']) / st.mean(v['whole']):.2f}x")
PY
