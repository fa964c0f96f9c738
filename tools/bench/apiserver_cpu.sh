# Sourced by the scripts that measure kube-apiserver's own CPU (server_cpu_ab.sh,
# list_pages_cpu.sh): the e2e launcher's server in a directory, its CPU ticks, and the
# per-run figure of a block of back-to-back runs.

# apiserver_attach SCRIPT DIR: sets pid (kube-apiserver's, from DIR/state.json) and tck, or exits
# with an error that names SCRIPT.
apiserver_attach() {
  pid="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["apiserver"]["pid"])' "$2/state.json")" ||
    { echo "$1: no launcher state in $2 (start the server first)" >&2; exit 1; }
  [[ -r "/proc/$pid/stat" ]] || { echo "$1: kube-apiserver (pid $pid, $2) is not running" >&2; exit 1; }
  tck="$(getconf CLK_TCK)"
}

# utime + stime of kube-apiserver so far, in ticks.
ticks() { awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$pid/stat"; }
now() { date +%s.%N; }

# cpu_per_run TICKS0 TICKS1 T0 T1 IDLE RUNS: the server's CPU-s per run of a block, less its idle
# rate (CPU-s/s) times the block's length.
cpu_per_run() {
  awk -v a="$1" -v b="$2" -v t0="$3" -v t1="$4" -v i="$5" -v n="$6" -v k="$tck" \
    'BEGIN { printf "%.3f", ((b - a) / k - i * (t1 - t0)) / n }'
}
