"""What the Python of the benchmark scripts shares (sync_table.py and the tables and helpers
embedded in the scripts): number formatting, ratios, the standard error of a mean, the UTC time,
the line that says what was measured on which machine under which load, and an HTTPS client of
the e2e launcher's API server. lib.sh puts this directory on PYTHONPATH."""

import datetime
import os
import ssl
import statistics

NAN = float("nan")


def fmt(v, d=0):
    """v with thousands separators and d decimals; "n/a" for NaN."""
    return "n/a" if v != v else f"{v:,.{d}f}"


def ratio(a, b):
    """a / b; NaN when b is 0 or either is NaN."""
    return a / b if b and a == a and b == b else NAN


def utc_now():
    """The current UTC time as the tables print it (YYYY-MM-DD HH:MM)."""
    return f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M}"


def run_context(commit, loads):
    """The start of a table's second line: time, commit, CPUs and the load averages read at each
    run's start."""
    return (f"date {utc_now()} UTC, commit {commit}, {os.cpu_count()} CPUs, "
            f"load average (1 min, at each run's start) min {min(loads, default=0):.2f} / "
            f"median {statistics.median(loads) if loads else 0:.2f} / max {max(loads, default=0):.2f}")


def se(v):
    """The standard error of the mean of v; NaN with fewer than two values."""
    return statistics.stdev(v) / len(v) ** 0.5 if len(v) > 1 else NAN


def launcher_server(d):
    """(server URL, SSL context with the admin client certificate) of the e2e launcher's API
    server whose state is in directory d (d/kubeconfig, d/pki)."""
    url = next((line.split(None, 1)[1].strip() for line in open(d + "/kubeconfig")
                if line.strip().startswith("server:")), None)
    if url is None:
        raise SystemExit("no server: line in " + d + "/kubeconfig")
    ctx = ssl.create_default_context(cafile=d + "/pki/ca.crt")
    ctx.load_cert_chain(d + "/pki/admin.crt", d + "/pki/admin.key")
    return url, ctx
