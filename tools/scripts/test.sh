#!/usr/bin/env bash
# The README's test command (and what .ci/run calls): installs what is missing, builds with
# warnings as errors, checks the benchmark toolkit (go vet of tools/bench's client-go peers, bash -n
# of its scripts), runs the unit tests, the enforced style (tools/scripts/style.sh:
# clang-format and clang-tidy; every mutant must still apply), the mutation check, the sanitizer
# builds (ASan+UBSan and TSan, each on every unit test), the fuzzers, an out-of-tree
# find_package(kinformer) consumer, and the e2e suites against a real kube-apiserver (the e2e
# launcher's, unless KUBECONFIG is set). Ends with one line "N passed, N failed, N skipped" (the
# mutation check prints its own "mutants: N killed, N survived" line before it, the fuzzers
# "fuzz: N targets, N findings"; each fuzz target and each style check counts as one test).
#
# Three lanes beside the stages: the Go work (vetting the bench toolkit, building and starting the
# e2e launcher's kube-apiserver) beside the main build; then the build lane (the sanitizer and
# fuzzing builds, then the out-of-tree consumer's), from the end of the main build, and the e2e
# suites, which mostly wait on the API server, from the end of the unit tests, beside the stages
# that test. Priorities share the cores: the e2e lane first, the stages after the unit tests next
# (nice 10), the build lane last (nice 19), so the builds take the time the others leave idle.
# Each stage header says how busy the cores were since the previous one. Output goes to
# $build/test-logs; a failure prints its tail.
#
# Environment: KINFORMER_BUILD_DIR (default ./build), KUBECONFIG (use that cluster for e2e),
# KINFORMER_SKIP_SANITIZERS=1 (local quick runs only; CI never sets it), KINFORMER_FUZZ_SECONDS
# (time per fuzz target, default 30; tools/scripts/fuzz.sh --seconds 3600 TARGET for a long run).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${KINFORMER_BUILD_DIR:-$root/build}
log_dir=$build/test-logs
jobs=$(nproc)
started=$(date +%s)
# cpu_ticks: busy and idle clock ticks of the whole machine so far (/proc/stat's first line).
cpu_ticks() {
  local _ user nice system idle iowait irq softirq steal
  read -r _ user nice system idle iowait irq softirq steal _ </proc/stat
  echo "$((user + nice + system + irq + softirq + steal)) $((idle + iowait))"
}
read -r step_busy step_idle < <(cpu_ticks)
# step NAME: a stage's header, with how busy the machine's cores were since the previous one
# (the lanes overlap stages, so this is the machine's share, not one stage's).
step() {
  local busy idle use=""
  read -r busy idle < <(cpu_ticks)
  if [ $((busy - step_busy + idle - step_idle)) -gt 0 ]; then
    use=", cores $(( 100 * (busy - step_busy) / (busy - step_busy + idle - step_idle) ))% busy since the last"
  fi
  step_busy=$busy; step_idle=$idle
  printf '\n==> [%s, +%ss%s] %s\n' "$(date +%H:%M:%S)" "$(( $(date +%s) - started ))" "$use" "$*" >&2
}

step "setup: Debian packages"
bash "$root/tools/scripts/setup.sh"
mkdir -p "$log_dir"
rm -f "$log_dir"/*.ctest "$log_dir"/*.rc

passed=0; failed=0; skipped=0; failures=()
# ctest_into NAME DIR ARGS...: runs ctest, its output into $log_dir/NAME.ctest (and the terminal
# unless QUIET=1); never fails.
ctest_into() {
  local name=$1 dir=$2; shift 2
  local out=$log_dir/$name.ctest rc=0
  if [ "${QUIET:-0}" = 1 ]; then
    ctest --test-dir "$dir" --output-on-failure --timeout 600 "$@" >"$out" 2>&1 || rc=$?
  else
    ctest --test-dir "$dir" --output-on-failure --timeout 600 "$@" 2>&1 | tee "$out" || rc=$?
  fi
  echo "$rc" >"$log_dir/$name.rc"
}
# count_ctest NAME: adds what ctest_into NAME ran to the totals.
count_ctest() {
  local name=$1
  local out=$log_dir/$name.ctest rc
  rc=$(cat "$log_dir/$name.rc" 2>/dev/null || echo 1)
  local line p f t s
  line=$(grep -E 'tests passed, [0-9]+ tests? failed out of [0-9]+' "$out" 2>/dev/null | tail -1 || true)
  # ctest counts a skipped test (GTEST_SKIP) as passed in its summary line; count it apart.
  s=$(grep -cE '^[[:space:]]*[0-9]+ - .*\(Skipped\)$' "$out" 2>/dev/null || true)
  s=${s:-0}
  if [ -n "$line" ]; then
    f=$(sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\1/' <<<"$line")
    t=$(sed -E 's/.* failed out of ([0-9]+).*/\1/' <<<"$line")
    p=$((t - f - s))
  elif grep -q 'No tests were found' "$out" 2>/dev/null; then
    p=0; f=1; echo "[$name] no tests were found" >&2
  else
    p=0; f=1
  fi
  [ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1
  passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
  [ "$s" -ne 0 ] && echo "[$name] $s skipped" >&2
  [ "$f" -ne 0 ] && failures+=("$name")
  return 0
}
run_ctest() { ctest_into "$@"; count_ctest "$1"; }
# pass NAME / fail NAME: one more test passed or failed.
pass() { passed=$((passed + 1)); }
fail() { failed=$((failed + 1)); failures+=("$1"); }

# The Go lane: vets the bench toolkit (one test: the benchmarks' Go module vets and builds, and
# every bench script parses; their runs need minutes each and are not part of this command), then
# builds (cold: minutes) and starts the e2e launcher's kube-apiserver and etcd unless KUBECONFIG
# names a cluster.
launched=0
if [ -z "${KUBECONFIG:-}" ]; then
  export KINFORMER_E2E_DIR=${KINFORMER_E2E_DIR:-/tmp/kinformer-e2e-test}
  launched=1
fi
# descendants PID...: the PIDs' processes and all their descendants (procps from setup.sh).
descendants() {
  local p
  for p in "$@"; do
    echo "$p"
    descendants $(pgrep -P "$p" 2>/dev/null || true)
  done
}
# On an early exit (a failed build): the lanes stop, and so does the launcher.
cleanup() {
  local pids
  # The lanes and whatever they started (a launcher build or start, a ctest run): all of them
  # listed first, then stopped, so none is left running on its own.
  pids=$(descendants $(jobs -p))
  [ -n "$pids" ] && kill $pids 2>/dev/null
  wait 2>/dev/null
  if [ "$launched" = 1 ]; then
    bash "$root/e2e/launcher.sh" down --dir "$KINFORMER_E2E_DIR" >&2 || true
  fi
}
trap cleanup EXIT
go_lane() {
  local rc=0 f
  # Vetted with the launcher's build settings (no cgo, -trimpath): the client-go, apimachinery and
  # api packages vet compiles are then the very ones kube-apiserver's build needs, compiled once.
  (cd "$root/tools/bench" && CGO_ENABLED=0 go vet -trimpath ./...) >"$log_dir/bench-toolkit.log" 2>&1 || rc=$?
  for f in "$root"/tools/bench/*.sh; do bash -n "$f" >>"$log_dir/bench-toolkit.log" 2>&1 || rc=$?; done
  echo "$rc" >"$log_dir/bench-toolkit.rc"
  if [ "$launched" = 1 ]; then
    rc=0
    bash "$root/e2e/launcher.sh" up --dir "$KINFORMER_E2E_DIR" >"$log_dir/launcher-up.log" \
      2>"$log_dir/launcher-up.err" || rc=$?
    echo "$rc" >"$log_dir/launcher-up.rc"
  fi
}

step "configure + build ($build, -Werror)"
# Test programs from unity sources here too (the libraries stay one object per file: a mutant
# then recompiles its one file, and the mutation check's copy, configured alike, takes every
# other object from ccache).
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKINFORMER_UNITY_TESTS=ON \
  -DCMAKE_INSTALL_PREFIX="$build/install" >"$log_dir/configure.log"
go_lane &
go_pid=$!
echo "Go lane started: go vet of tools/bench, then the e2e launcher (logs: $log_dir/bench-toolkit.log, launcher-up.err)" >&2
ninja -C "$build" -j"$jobs"

# The build lane: the sanitizer builds, the fuzzers' build and the out-of-tree consumer's, one
# after another at the lowest priority, beside the stages that test (unit tests, style, the
# mutation check, the sanitizer runs), which leave cores idle while they wait on timers, sockets
# and the API server. Each finished build writes "NAME EXIT-STATUS" to a pipe; the stages that
# need it read it there (wait_build), in the lane's order.
sanitizers=0
if [ "${KINFORMER_SKIP_SANITIZERS:-0}" != 1 ] || [ "${CI:-}" = true ]; then sanitizers=1; fi
builds_fifo=$log_dir/builds.fifo
rm -f "$builds_fifo"
mkfifo "$builds_fifo"
exec 3<>"$builds_fifo"
# lane_build NAME COMMAND...: runs one build of the lane, its output into $log_dir/build-NAME.log.
lane_build() {
  local name=$1 rc=0 t0=$SECONDS
  shift
  "$@" >"$log_dir/build-$name.log" 2>&1 || rc=$?
  echo "$name $rc" >&3
  echo "build lane: $name ended (exit $rc) after $((SECONDS - t0)) s" >&2
}
build_lane() {
  renice -n 19 -p "$BASHPID" >/dev/null || true
  if [ "$sanitizers" = 1 ]; then
    # -g1 (line tables, no types or locals) in both sanitizer builds: their reports need file and
    # line, not a debugger's view. Their libraries and test programs are compiled from unity
    # sources (made once here, never edited in place); the examples only the e2e suites run.
    lane_build asan sh -c 'cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=Debug \
      -DCMAKE_CXX_FLAGS_DEBUG=-g1 -DKINFORMER_SANITIZE=address,undefined \
      -DKINFORMER_BUILD_TOOLS=OFF -DKINFORMER_BUILD_EXAMPLES=OFF -DKINFORMER_UNITY_BUILD=ON \
      -DKINFORMER_UNITY_TESTS=ON && ninja -C "$2" -j"$3"' sh "$root" "$build-asan" "$jobs"
    # TSan at -O1: a fifth less compile time than -O2, and what TSan's own documentation asks
    # for at least.
    lane_build tsan sh -c 'cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" -DKINFORMER_SANITIZE=thread \
      -DKINFORMER_BUILD_TOOLS=OFF -DKINFORMER_BUILD_EXAMPLES=OFF -DKINFORMER_UNITY_BUILD=ON \
      -DKINFORMER_UNITY_TESTS=ON && ninja -C "$2" -j"$3"' sh "$root" "$build-tsan" "$jobs"
  fi
  lane_build fuzz bash "$root/tools/scripts/fuzz.sh" --build-only
  # The out-of-tree consumer: installs the main build, then builds small programs against it.
  lane_build consumer bash "$root/tests/consumer/check.sh" "$build"
}
# What the lane's builds need from apt is installed here first: two apt-gets at once (style.sh
# installs clang-tidy meanwhile) would fail on dpkg's lock.
bash "$root/tools/scripts/fuzz.sh" --install-only ||
  echo "clang could not be installed: the fuzz build will fail (counted there)" >&2
build_lane &
build_pid=$!
# wait_build NAME: returns once the build lane's NAME build ended; fails, counting NAME-build as
# a failed test and printing its log's tail, when it failed or the lane ended without it.
wait_build() {
  local name="" rc=1
  until read -r -t 30 name rc <&3; do
    if ! kill -0 "$build_pid" 2>/dev/null; then
      read -r -t 1 name rc <&3 || name=""  # its last line, if it wrote one before it ended
      break
    fi
  done
  if [ "$name" = "$1" ] && [ "$rc" = 0 ]; then return 0; fi
  fail "$1-build"
  [ "$name" = "$1" ] || echo "build lane: ended before the $1 build (got '${name:-nothing}')" >&2
  tail -40 "$log_dir/build-$1.log" >&2 || true
  return 1
}

step "unit tests"
run_ctest unit "$build" -L unit -j"$jobs"

step "waiting for the Go lane: bench toolkit (go vet ./... in tools/bench, bash -n of its scripts), e2e launcher"
wait "$go_pid" || true
if [ "$(cat "$log_dir/bench-toolkit.rc" 2>/dev/null || echo 1)" -eq 0 ]; then
  pass bench-toolkit; echo "bench toolkit: ok" >&2
else
  fail bench-toolkit; tail -30 "$log_dir/bench-toolkit.log" >&2
fi
e2e_ready=1
if [ "$launched" = 1 ]; then
  if [ "$(cat "$log_dir/launcher-up.rc" 2>/dev/null || echo 1)" -eq 0 ]; then
    KUBECONFIG=$(sed -n 's/^KUBECONFIG=//p' "$log_dir/launcher-up.log" | tail -1)
    export KUBECONFIG
    echo "KUBECONFIG=$KUBECONFIG (embedded kube-apiserver)" >&2
  else
    e2e_ready=0; fail e2e-launcher; tail -30 "$log_dir/launcher-up.err" >&2
  fi
fi
export KINFORMER_E2E_LAUNCHED=$launched

# The e2e lane: the suites, one at a time, then the launcher's teardown (one test: no
# kube-apiserver, etcd or port left behind).
e2e_lane() {
  QUIET=1 ctest_into e2e "$build" -L e2e
  if [ "$launched" = 1 ]; then
    local down_rc=0 status_rc=0
    bash "$root/e2e/launcher.sh" down --dir "$KINFORMER_E2E_DIR" --purge >"$log_dir/teardown.log" 2>&1 || down_rc=$?
    bash "$root/e2e/launcher.sh" status --dir "$KINFORMER_E2E_DIR" >>"$log_dir/teardown.log" 2>&1 || status_rc=$?
    echo "$down_rc $status_rc" >"$log_dir/teardown.rc"
  fi
}
e2e_pid=""
if [ "$e2e_ready" = 1 ]; then
  step "e2e suites against a real API server: started beside the stages below (log: $log_dir/e2e.ctest)"
  e2e_lane 3>&- &  # the build lane's pipe is not the API server's to hold
  e2e_pid=$!
fi
# The CPU-bound stages from here on yield to the e2e lane.
renice -n 10 -p $$ >/dev/null

step "style: clang-format (no diff) and clang-tidy (library sources); every mutant still applies"
# tools/scripts/style.sh prints "style format: ..." and "style tidy: ..."; each counts as a test.
bash "$root/tools/scripts/style.sh" >"$log_dir/style.log" 2>"$log_dir/style.err" || true
for check in format tidy; do
  line=$(grep "^style $check: " "$log_dir/style.log" || echo "style $check: did not run")
  echo "$line" >&2
  if [[ $line == "style $check: ok"* ]]; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1)); failures+=("style-$check"); tail -40 "$log_dir/style.err" >&2
  fi
done
if bash "$root/tests/mutation/run.sh" --check >"$log_dir/mutants-apply.log" 2>&1; then
  passed=$((passed + 1)); tail -1 "$log_dir/mutants-apply.log" >&2
else
  failed=$((failed + 1)); failures+=(mutants-apply); cat "$log_dir/mutants-apply.log" >&2
fi

step "mutation check (tests/mutation: every mutant must be killed)"
# CI runs a rotating sample (the short run): every G-th mutant, starting at the day of the year
# mod G, so each mutant runs at least once every G days. KINFORMER_MUTANTS=all (or a local run)
# runs every mutant; KINFORMER_MUTANTS_SAMPLE sets the sample size (default 12).
mutants=()
if [ "${CI:-}" = true ] && [ "${KINFORMER_MUTANTS:-sample}" != all ]; then
  mapfile -t all_mutants < <(cd "$root/tests/mutation" && ls ./*.mutant | sed 's|^\./||; s|\.mutant$||' | sort)
  k=${KINFORMER_MUTANTS_SAMPLE:-12}
  groups=$(( (${#all_mutants[@]} + k - 1) / k ))
  group=$(( 10#$(date -u +%j) % groups ))
  for ((i = group; i < ${#all_mutants[@]}; i += groups)); do mutants+=("${all_mutants[$i]}"); done
  echo "mutants: sample of ${#mutants[@]} of ${#all_mutants[@]} (group $((group + 1)) of $groups, by day of year; KINFORMER_MUTANTS=all runs every one)" >&2
fi
if bash "$root/tests/mutation/run.sh" --work "$build/mutation" "${mutants[@]}" 2>&1 | tee "$log_dir/mutation.log" >&2 &&
   grep -q '^mutants: [0-9]* killed, 0 survived$' "$log_dir/mutation.log"; then
  passed=$((passed + 1))
else
  failed=$((failed + 1)); failures+=(mutation)
fi
grep '^mutants:' "$log_dir/mutation.log" || echo "mutants: the check did not finish"

if [ "$sanitizers" = 1 ]; then
  step "ASan + UBSan unit tests (built by the build lane: $log_dir/build-asan.log)"
  if wait_build asan; then
    ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
      run_ctest asan "$build-asan" -L unit -j"$jobs"
  fi

  step "TSan unit tests (every component runs threads: io thread, reflectors, handlers; build log: $log_dir/build-tsan.log)"
  if wait_build tsan; then
    TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
      run_ctest tsan "$build-tsan" -L unit -j"$jobs"
  fi
fi

step "fuzzing: short run of each libFuzzer target (tools/scripts/fuzz.sh; --seconds 3600 for a long one)"
if wait_build fuzz; then
  fuzz_rc=0
  bash "$root/tools/scripts/fuzz.sh" --no-build --seconds "${KINFORMER_FUZZ_SECONDS:-30}" \
    2>"$log_dir/fuzz.err" | tee "$log_dir/fuzz.log" || fuzz_rc=$?
  while read -r line; do
    case "$line" in
      *", 0 findings") passed=$((passed + 1)) ;;
      "fuzz "*" findings") failed=$((failed + 1)); failures+=("${line%%:*}") ;;
    esac
  done < <(grep -E '^fuzz [a-z_]+: ' "$log_dir/fuzz.log" || true)
  if [ "$fuzz_rc" -ne 0 ] && ! grep -q '^fuzz: ' "$log_dir/fuzz.log"; then
    fail fuzz-run; tail -30 "$log_dir/fuzz.err" >&2
  fi
fi

step "install + out-of-tree consumer (find_package(kinformer), built by the build lane: $log_dir/build-consumer.log)"
if wait_build consumer; then
  pass consumer; echo "consumer: ok" >&2
fi
wait "$build_pid" || true

if [ -n "$e2e_pid" ]; then
  step "waiting for the e2e lane"
  wait "$e2e_pid" || true
  grep -E '^[[:space:]]*[0-9]+/[0-9]+ Test|tests passed|Failed|\*\*\*' "$log_dir/e2e.ctest" >&2 || true
  count_ctest e2e
  if [ "$launched" = 1 ]; then
    read -r down_rc status_rc <"$log_dir/teardown.rc" || { down_rc=1; status_rc=0; }
    if [ "$down_rc" -eq 0 ] && [ "$status_rc" -ne 0 ]; then
      pass teardown; echo "teardown: ok" >&2
    else
      fail teardown; cat "$log_dir/teardown.log" >&2
      echo "teardown: down exited $down_rc, status exited $status_rc (0 = still running)" >&2
    fi
  fi
fi

cleanup  # idempotent: the launcher is down already unless its lane never ran
trap - EXIT
printf '\n' >&2
[ ${#failures[@]} -gt 0 ] && echo "failed stages: ${failures[*]}" >&2
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
