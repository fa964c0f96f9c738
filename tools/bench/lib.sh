# shellcheck shell=bash
# lib.sh: what the benchmark scripts of tools/bench share. Sourced, never run:
#
#   source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
#
# Sets root (the repository), build (${KINFORMER_BUILD_DIR:-build}, made absolute), bench_dir
# ($build/tools/bench: the programs and the results) and prog (the sourcing script's name), puts
# this directory on PYTHONPATH (benchlib.py: the scripts' shared Python) and installs the exit trap.
# Provides:
#   messages        log, die, fail, num, print_help
#   exit hooks      at_exit, work_dir
#   building        build_cxx, build_go_peers
#   the server      launcher, launcher_up, launcher_ensure, require_loopback (the e2e launcher's)
#   processes       wait_ready, stop_pids, reap, status_field, loadavg1, ticks, now
#   other           json_get, commit_short
#   server CPU      apiserver_attach, block (the API server's CPU in blocks of runs)
#
# Environment: KINFORMER_BUILD_DIR (default build), KINFORMER_BUILD_JOBS (ninja -j and go build
# -p; default 2), KINFORMER_BUILD_LOCK (default /tmp/kinformer-build.lock: C++ builds hold it with
# flock where flock exists, for machines whose cores are shared between builds).

bench_lib_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$bench_lib_dir/../.." && pwd)"
prog="$(basename "${BASH_SOURCE[1]:-$0}")"
build="${KINFORMER_BUILD_DIR:-build}"
case "$build" in /*) ;; *) build="$root/$build" ;; esac
bench_dir="$build/tools/bench"
bench_jobs="${KINFORMER_BUILD_JOBS:-2}"
export PYTHONPATH="$bench_lib_dir${PYTHONPATH:+:$PYTHONPATH}"  # benchlib.py

# --- messages ----------------------------------------------------------------------------------
log() { printf '== [%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
# die MESSAGE: a usage error (exit 2); fail MESSAGE: anything else (exit 1). Both name the script.
die() { echo "$prog: $*" >&2; exit 2; }
fail() { echo "$prog: $*" >&2; exit 1; }
# print_help: the script's leading comment block (from line 2), then exit 0.
print_help() { awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0"; exit 0; }
# num NAME VALUE MIN MAX: dies unless VALUE is a whole number in [MIN, MAX].
num() { [[ "$2" =~ ^[0-9]+$ && "$2" -ge "$3" && "$2" -le "$4" ]] || die "$1 in [$3, $4]"; }

# --- exit hooks --------------------------------------------------------------------------------
# at_exit COMMAND...: runs COMMAND at exit (hooks in reverse order of registration). A hook may
# set exit_rc to change the script's exit status. INT and TERM exit with 130.
bench_exit_hooks=()
exit_rc=0
at_exit() { bench_exit_hooks+=("$(printf '%q ' "$@")"); }
bench_run_exit_hooks() {
  exit_rc=$?
  local i
  for ((i = ${#bench_exit_hooks[@]} - 1; i >= 0; i--)); do eval "${bench_exit_hooks[$i]}" || true; done
  exit "$exit_rc"
}
trap bench_run_exit_hooks EXIT
trap 'exit 130' INT TERM

# --- building ----------------------------------------------------------------------------------
# build_cxx TARGET...: configures $build when it has no build.ninja (RelWithDebInfo, plus the
# script's cmake_args), then builds the targets that are out of date.
cmake_args=()
build_cxx() {
  local lock=() t todo=()
  if command -v flock >/dev/null 2>&1; then lock=(flock "${KINFORMER_BUILD_LOCK:-/tmp/kinformer-build.lock}"); fi
  if [[ ! -f "$build/build.ninja" ]]; then
    log "configuring $build"
    cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${cmake_args[@]}" >&2
  fi
  for t in "$@"; do
    if ninja -C "$build" -n "$t" 2>/dev/null | grep -q "no work to do"; then log "$t is up to date"; else todo+=("$t"); fi
  done
  if ((${#todo[@]} > 0)); then
    log "building ${todo[*]}"
    "${lock[@]}" ninja -C "$build" -j"$bench_jobs" "${todo[@]}" >&2
  fi
  mkdir -p "$bench_dir"
}

# build_go_peers: the client-go peers (tools/bench/cmd/*, one Go module) into $bench_dir:
# clientgo_bench, clientgo-fanout, clientgo-storm, clientgo-sync, clientgo-workqueue, fanout-loader.
build_go_peers() {
  mkdir -p "$bench_dir"
  log "building the client-go peers (tools/bench/cmd) into $bench_dir"
  # The e2e launcher's settings (no cgo, -trimpath): the peers then reuse the client-go packages
  # its kube-apiserver build compiled.
  (cd "$bench_lib_dir" && CGO_ENABLED=0 go build -trimpath -p "$bench_jobs" -o "$bench_dir/" ./cmd/...) >&2
}

# --- the e2e launcher's server -----------------------------------------------------------------
launcher_sh="$root/e2e/launcher.sh"
launcher() { bash "$launcher_sh" "$@"; }
launcher_down() {
  log "stopping the launcher's server"
  launcher down --dir "$1" >&2 || true
}
# launcher_up DIR [UP_ARG...]: starts a fresh server in DIR (stopping whatever ran there), stops
# it at exit, exports KUBECONFIG=DIR/kubeconfig.
launcher_up() {
  local dir="$1"
  shift
  log "starting the e2e launcher's kube-apiserver in $dir${*:+ ($*)}"
  at_exit launcher_down "$dir"
  timeout 900 bash "$launcher_sh" up --dir "$dir" "$@" >/dev/null
  export KUBECONFIG="$dir/kubeconfig"
}
# launcher_ensure [--same-args] DIR [UP_ARG...]: uses the server running in DIR (left running),
# with --same-args only when its state.json holds every UP_ARG; else launcher_up DIR UP_ARG....
launcher_ensure() {
  local same=0 a reuse=0
  [[ "$1" == --same-args ]] && { same=1; shift; }
  local dir="$1"
  shift
  if launcher status --dir "$dir" >/dev/null 2>&1; then
    reuse=1
    if ((same)); then
      for a in "$@"; do grep -qF -- "${a#--apiserver-arg=}" "$dir/state.json" || reuse=0; done
    fi
  fi
  if ((reuse)); then
    log "using the launcher's kube-apiserver in $dir (left running)"
    export KUBECONFIG="$dir/kubeconfig"
  else
    launcher_up "$dir" "$@"
  fi
}
# require_loopback: sets server to $KUBECONFIG's server and dies unless it is on a loopback
# address (every benchmark here sends its load to this machine only).
require_loopback() {
  server="$(awk '$1 == "server:" { print $2; exit }' "$KUBECONFIG")"
  [[ "$server" =~ ^https?://(127\.[0-9.]+|localhost|\[::1\])(:[0-9]+)?/?$ ]] ||
    die "server '$server' in $KUBECONFIG is not a loopback address; refusing"
}

# --- processes ---------------------------------------------------------------------------------
# wait_ready FILE PID SECONDS: waits until FILE exists, PID exited or SECONDS passed; 0 when FILE
# exists.
wait_ready() {
  local file="$1" pid="$2" limit=$(($3 * 10)) waited=0
  while [[ ! -e "$file" ]] && kill -0 "$pid" 2>/dev/null && ((waited < limit)); do
    sleep 0.1
    waited=$((waited + 1))
  done
  [[ -e "$file" ]]
}
# stop_pids SECONDS PID...: SIGTERM, then SIGKILL to those still running SECONDS later (logged).
# Does not reap: see reap.
stop_pids() {
  local limit=$(($1 * 10)) p alive i
  shift
  for p in "$@"; do kill -TERM "$p" 2>/dev/null || true; done
  for ((i = 0; i < limit; i++)); do
    alive=0
    for p in "$@"; do kill -0 "$p" 2>/dev/null && alive=1; done
    ((alive)) || return 0
    sleep 0.1
  done
  for p in "$@"; do
    if kill -0 "$p" 2>/dev/null; then
      log "pid $p still running $((limit / 10)) s after SIGTERM; SIGKILL"
      kill -KILL "$p" 2>/dev/null || true
    fi
  done
}
reap() { local p; for p in "$@"; do wait "$p" 2>/dev/null || true; done; }
# status_field PID FIELD: a field of /proc/PID/status (Threads; VmRSS, VmHWM in kB).
status_field() { awk -v k="$2:" '$1 == k { print $2; exit }' "/proc/$1/status" 2>/dev/null || true; }
loadavg1() { cut -d' ' -f1 /proc/loadavg; }
# ticks PID: utime + stime of PID (fields 14 and 15 of /proc/PID/stat, clock ticks); 0 when PID
# is empty or gone.
ticks() {
  if [[ -n "$1" && -r "/proc/$1/stat" ]]; then awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; else echo 0; fi
}
now() { date +%s.%N; }
# work_dir NAME: sets work to a new directory /tmp/kinformer-NAME.XXXXXX, removed at exit.
work_dir() {
  work="$(mktemp -d "/tmp/kinformer-$1.XXXXXX")"
  at_exit rm -rf "$work"
}
# json_get FILE KEY...: the value at KEY... (nested) of the JSON object in FILE.
json_get() { python3 -c 'import json,sys; v=json.load(open(sys.argv[1])); [v := v[k] for k in sys.argv[2:]]; print(v)' "$@"; }
commit_short() { git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown; }

# --- the API server's CPU in blocks of runs (server_cpu_ab.sh, list_pages_cpu.sh) --------------
# apiserver_attach DIR: sets pid (kube-apiserver's, from the launcher's DIR/state.json) and tck,
# or fails.
apiserver_attach() {
  pid="$(json_get "$1/state.json" apiserver pid)" ||
    fail "no launcher state in $1 (start the server first)"
  [[ -r "/proc/$pid/stat" ]] || fail "kube-apiserver (pid $pid, $1) is not running"
  tck="$(getconf CLK_TCK)"
}
# block RUNS COMMAND...: one block, COMMAND run RUNS times back to back, with the server's ticks
# and the time read around it. Sets per (the server's CPU-s per run, less its idle rate $idle in
# CPU-s/s times the block's length) and len (the block's length, s).
block() {
  local n="$1" i a b t0 t1
  shift
  a="$(ticks "$pid")" t0="$(now)"
  for ((i = 0; i < n; i++)); do "$@"; done
  b="$(ticks "$pid")" t1="$(now)"
  # shellcheck disable=SC2034,SC2154  # per and len are the caller's; idle is set by the caller
  read -r per len < <(awk -v a="$a" -v b="$b" -v t0="$t0" -v t1="$t1" -v i="$idle" -v n="$n" -v k="$tck" \
    'BEGIN { printf "%.3f %.3f\n", ((b - a) / k - i * (t1 - t0)) / n, t1 - t0 }')
}
