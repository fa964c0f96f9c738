# Sourced by the scripts that measure kube-apiserver's own CPU (server_cpu_ab.sh,
# list_pages_cpu.sh): the e2e launcher's server in a directory, its CPU ticks, and a block of
# back-to-back runs measured by them.

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

# block RUNS COMMAND...: one block, COMMAND run RUNS times back to back, with the server's ticks
# and the time read around it. Sets per (the server's CPU-s per run, less its idle rate $idle in
# CPU-s/s times the block's length) and len (the block's length, s).
block() {
  local n="$1" i a b t0 t1
  shift
  a="$(ticks)" t0="$(now)"
  for ((i = 0; i < n; i++)); do "$@"; done
  b="$(ticks)" t1="$(now)"
  read -r per len < <(awk -v a="$a" -v b="$b" -v t0="$t0" -v t1="$t1" -v i="$idle" -v n="$n" -v k="$tck" \
    'BEGIN { printf "%.3f %.3f\n", ((b - a) / k - i * (t1 - t0)) / n, t1 - t0 }')
}
