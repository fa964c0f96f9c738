"""The table of tools/bench/sync.sh: medians of its JSON lines, kinformer/client-go ratios and
the targets, printed and written to OUT (markdown).

usage: sync_table.py RAW.jsonl OUT.md ROUNDS ELAPSED_S COMMIT [plot] [PLOT_ROUNDS]
"""

import json
import statistics
import sys

from benchlib import NAN, fmt as f, ratio, run_context

raw, out, rounds, elapsed, commit = sys.argv[1:6]
plot = len(sys.argv) > 6 and sys.argv[6] == "plot"
plot_rounds = sys.argv[7] if len(sys.argv) > 7 else "1"
rows = [json.loads(line) for line in open(raw) if line.strip()]
ALL = "pods,secrets,endpointslices"


def med(values):
    values = [v for v in values if v == v]
    return statistics.median(values) if values else NAN


zero = {}
for r in rows:
    if r["kind"] == "zero" and r["synced"]:
        zero[(r["side"], r["encoding"], r["list_mode"], r["resources"])] = r["steady_rss_kb"]


def per_object(r):
    z = zero.get((r["side"], r["encoding"], r["list_mode"], r["resources"]))
    if z is None or not r["objects"]:
        return NAN
    return (r["steady_rss_kb"] - z) * 1024 / r["objects"]


for r in rows:
    r["per_object_b"] = per_object(r)
    r["peak_over_steady"] = ratio(r["peak_rss_kb"], r["steady_rss_kb"])
    r["peak_mb"] = r["peak_rss_kb"] / 1024
    r["steady_mb"] = r["steady_rss_kb"] / 1024
    r["zero_mb"] = zero.get((r["side"], r["encoding"], r["list_mode"], r["resources"]), NAN) / 1024
    r["tcp_mb"] = r["tcp_bytes_received"] / 1e6
    r["body_mb"] = r.get("body_bytes", NAN) / 1e6
    r.setdefault("apiserver_cpu_s", NAN)


def pick(kind, side, enc, mode, resources=ALL):
    return [r for r in rows if r["kind"] == kind and r["side"] == side and r["encoding"] == enc
            and r["list_mode"] == mode and r["resources"] == resources and r["synced"]]


def m(kind, side, enc, mode, field, resources=ALL):
    return med([r[field] for r in pick(kind, side, enc, mode, resources)])


def block_cpu(side, enc, mode):
    """Mean API-server CPU per sync over the back-to-back runs of sync.sh's CPU block (a mean, not
    a median: the server's GC cycles come every one to three syncs, and the mean spreads them)."""
    values = [r["apiserver_cpu_s"] for r in pick("cpu", side, enc, mode)]
    values = [v for v in values if v == v]
    return statistics.fmean(values) if values else NAN


def server_cpu(side, mode):
    """API-server CPU per protobuf sync: the block mean when sync.sh ran the CPU blocks, else the
    median of the interleaved rounds (GC-phase dependent; older JSON lines)."""
    b = block_cpu(side, "protobuf", mode)
    return b if b == b else m("sync", side, "protobuf", mode, "apiserver_cpu_s")


cpu_runs = len(pick("cpu", "kinformer", "protobuf", "watchlist"))
# Blocks per configuration: each block starts with one warm-up run (kind cpu-warm).
cpu_blocks = max(1, len(pick("cpu-warm", "kinformer", "protobuf", "watchlist")))
cpu_label = (f"mean of {cpu_runs} back-to-back runs" if cpu_blocks == 1 else
             f"mean of {cpu_blocks} blocks of {cpu_runs // cpu_blocks} back-to-back runs, rotating order")


lines = []
P = lines.append
loads = [r["loadavg1"] for r in rows]
any_row = next((r for r in rows if r["kind"] != "zero"), rows[0] if rows else {})
P(f"Sync side by side: Pod, Secret and EndpointSlice informers, all namespaces")
P(f"{run_context(commit, loads)}; runs took {int(elapsed)} s; "
  f"kube-apiserver idle {any_row.get('apiserver_idle_cpu_per_s', NAN):.3f} CPU-s/s (subtracted)")
kin_gzip = {r.get("gzip") for r in rows if r.get("side") == "kinformer"}
P("kinformer asks for gzip on lists (RestClientOptions::gzip): " +
  ", ".join("on" if g else "off" if g is not None else "not recorded" for g in sorted(kin_gzip, key=str)) +
  "; client-go asks for it as Go's transport does by default")

if plot:
    P("")
    P(f"Protobuf, medians of {plot_rounds} round(s) per object count (memory per object: (steady - zero-object RSS) / objects)")
    P("")
    P("| objects | list mode | sync kinformer s | sync client-go s | ratio | API CPU kin s | API CPU cg s | ratio | B/object kin | B/object cg | ratio |")
    P("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    kinds = sorted({r["kind"] for r in rows if r["kind"].startswith("plot-")}, key=lambda k: int(k[5:]))
    for kind in kinds:
        for mode in ("watchlist", "list"):
            n = med([r["objects"] for r in rows if r["kind"] == kind])
            ks, cs = m(kind, "kinformer", "protobuf", mode, "sync_s"), m(kind, "client-go", "protobuf", mode, "sync_s")
            ka, ca = m(kind, "kinformer", "protobuf", mode, "apiserver_cpu_s"), m(kind, "client-go", "protobuf", mode, "apiserver_cpu_s")
            kb, cb = m(kind, "kinformer", "protobuf", mode, "per_object_b"), m(kind, "client-go", "protobuf", mode, "per_object_b")
            P(f"| {f(n)} | {mode} | {f(ks, 3)} | {f(cs, 3)} | {f(ratio(ks, cs), 2)}x | {f(ka, 2)} | {f(ca, 2)} | "
              f"{f(ratio(ka, ca), 2)}x | {f(kb)} | {f(cb)} | {f(ratio(kb, cb), 2)}x |")
    text = "\n".join(lines) + "\n"
    open(out, "w").write(text)
    print(text)
    sys.exit(0)

objs = {}
for r in rows:
    if r["kind"] == "sync":
        for k, v in r["per_resource"].items():
            objs[k] = v["expected"]
P(f"Objects (cluster-wide): {objs.get('pods', 0):,} Pods, {objs.get('secrets', 0):,} Secrets, "
  f"{objs.get('endpointslices', 0):,} EndpointSlices; medians of {rounds} interleaved rounds")
P("")
P("| metric | list mode | kinformer protobuf | client-go protobuf | ratio | kinformer JSON | client-go JSON | ratio |")
P("|---|---|---:|---:|---:|---:|---:|---:|")
metrics = [
    ("time to sync, s", "sync_s", 3, 2),
    ("API-server CPU in the interleaved runs (median; GC-phase dependent), s", "apiserver_cpu_s", 2, 2),
    ("peak RSS during sync (VmHWM), MB", "peak_mb", 1, 2),
    ("steady RSS after sync (VmRSS), MB", "steady_mb", 1, 2),
    ("zero-object RSS, MB", "zero_mb", 1, 2),
    ("memory per object, B", "per_object_b", 0, 2),
    ("peak / steady", "peak_over_steady", 2, 2),
    ("bytes received (TCP payload), MB", "tcp_mb", 1, 2),
]
for mode, label in (("watchlist", "WatchList"), ("list", "LIST")):
    for name, field, d, rd in metrics:
        cells = []
        for enc in ("protobuf", "json"):
            k, c = m("sync", "kinformer", enc, mode, field), m("sync", "client-go", enc, mode, field)
            cells += [f(k, d), f(c, d), f"{f(ratio(k, c), rd)}x"]
        P(f"| {name} | {label} | " + " | ".join(cells) + " |")
    cells = []
    for enc in ("protobuf", "json"):
        def per(side):
            return " / ".join(f(med([r["per_resource"].get(res, {}).get("sync_s", NAN)
                                     for r in pick("sync", side, enc, mode)]), 2)
                              for res in ("pods", "secrets", "endpointslices"))
        cells += [per("kinformer"), per("client-go"), ""]
    P(f"| sync per informer (Pods / Secrets / slices), s | {label} | " + " | ".join(cells) + " |")
    if cpu_runs:
        k, c = block_cpu("kinformer", "protobuf", mode), block_cpu("client-go", "protobuf", mode)
        P(f"| API-server CPU per sync ({cpu_label}), s | {label} | {f(k, 2)} | {f(c, 2)} | "
          f"{f(ratio(k, c), 2)}x |  |  |  |")
        # The rounds and the blocks together: more runs for a time that is bimodal with the GC.
        k, c = (med([r["sync_s"] for kind in ("sync", "cpu") for r in pick(kind, side, "protobuf", mode)])
                for side in ("kinformer", "client-go"))
        P(f"| time to sync (median of the rounds' and the blocks' runs), s | {label} | {f(k, 3)} | {f(c, 3)} | "
          f"{f(ratio(k, c), 2)}x |  |  |  |")
    cells = []
    for enc in ("protobuf", "json"):
        cells += ["", f(m("sync", "client-go", enc, mode, "body_mb"), 1), ""]
    P(f"| client-go response bodies after gzip decoding, MB | {label} | " + " | ".join(cells) + " |")

single = [r for r in rows if r["kind"] == "single" and r["synced"]]
per_res = {}  # (resource, list mode) -> (kinformer, client-go) B/object
if single:
    P("")
    P("Memory per object by resource: one informer alone, protobuf, each list mode; (steady RSS - the same")
    P("program's zero-object RSS) / objects. Secrets beyond data: minus the decoded data bytes per Secret.")
    P("")
    P("| resource | list mode | objects | kinformer B/object | client-go B/object | ratio | target |")
    P("|---|---|---:|---:|---:|---:|---|")
    for res in ("pods", "secrets", "endpointslices"):
        for mode, label in (("watchlist", "WatchList"), ("list", "LIST")):
            if not pick("single", "kinformer", "protobuf", mode, res):
                continue  # a run from before per-resource LIST runs, or --no-per-resource
            k = m("single", "kinformer", "protobuf", mode, "per_object_b", res)
            c = m("single", "client-go", "protobuf", mode, "per_object_b", res)
            n = objs.get(res, 0)
            per_res[(res, mode)] = (k, c)
            P(f"| {res} | {label} | {n:,} | {f(k)} | {f(c)} | {f(ratio(k, c), 2)}x | {'<= 0.3x' if res != 'secrets' else '(see next row)'} |")
            if res == "secrets":
                data = med([r["secret_data_bytes"] / max(1, r["per_resource"]["secrets"]["objects"])
                            for r in single if r["resources"] == "secrets" and r["list_mode"] == mode])
                k2, c2 = k - data, c - data
                per_res[("secrets_beyond_data", mode)] = (k2, c2)
                P(f"| secrets beyond their data ({f(data)} B each) | {label} | {n:,} | {f(k2)} | {f(c2)} | {f(ratio(k2, c2), 2)}x | <= 0.3x |")

P("")
P("Targets (kinformer protobuf against client-go protobuf)")


def target(name, ok, detail):
    if ok is None:
        P(f"- n/a    {name}: {detail}")
    else:
        P(f"- {'MET   ' if ok else 'MISSED'} {name}: {detail}")


for mode, label in (("watchlist", "WatchList"), ("list", "LIST")):
    k, c = m("sync", "kinformer", "protobuf", mode, "sync_s"), m("sync", "client-go", "protobuf", mode, "sync_s")
    rt = ratio(k, c)
    target(f"time to sync <= 0.7x ({label})", rt <= 0.7 if rt == rt else None, f"{f(k, 3)} s vs {f(c, 3)} s = {f(rt, 2)}x")
for mode, label in (("watchlist", "WatchList"), ("list", "LIST")):
    k, c = server_cpu("kinformer", mode), server_cpu("client-go", mode)
    rt = ratio(k, c)
    how = cpu_label if cpu_runs else "median of the interleaved runs"
    target(f"API-server CPU per sync <= 0.8x ({label}, {how})", rt <= 0.8 if rt == rt else None, f"{f(k, 2)} s vs {f(c, 2)} s = {f(rt, 2)}x")
for res in ("pods", "secrets_beyond_data", "endpointslices"):
    for mode, label in (("watchlist", "WatchList"), ("list", "LIST")):
        if (res, mode) in per_res:
            k, c = per_res[(res, mode)]
            rt = ratio(k, c)
            target(f"RSS per object <= 0.3x ({res}, {label})", rt <= 0.3 if rt == rt else None,
                   f"{f(k)} B vs {f(c)} B = {f(rt, 2)}x")
for enc in ("protobuf", "json"):
    for mode, label in (("watchlist", "WatchList"), ("list", "LIST")):
        p = m("sync", "kinformer", enc, mode, "peak_over_steady")
        pc = m("sync", "client-go", enc, mode, "peak_over_steady")
        target(f"kinformer peak <= 1.5x steady ({enc}, {label})", p <= 1.5 if p == p else None,
               f"{f(p, 2)}x (client-go {f(pc, 2)}x)")
fb = [r.get("watch_list_fallbacks", 0) for r in rows if r["side"] == "kinformer" and r["list_mode"] == "watchlist"]
if any(fb):
    P(f"- note: kinformer WatchList runs fell back to LIST {int(sum(fb))} time(s) in total")
text = "\n".join(lines) + "\n"
open(out, "w").write(text)
print(text)
