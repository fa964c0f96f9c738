#!/usr/bin/env bash
# The mutation check: every mutant under tests/mutation/*.mutant breaks one promise of the
# library with a small source change; the tests must notice each one.
#
# For each mutant: apply it to a copy of the tree, rebuild only its test target (ccache makes
# the copy's first build cheap after the main build), run that test binary (optionally with a
# gtest filter) under a timeout, and restore the file. A mutant is killed when the binary fails
# or times out (a survivor is run twice more first, see below). Before the mutants, every
# target is built and run unmutated: it must pass, or a "kill" would mean nothing.
#
# Usage: tests/mutation/run.sh [--work DIR] [--timeout SECONDS] [--check] [NAME...]
#   NAME: run only these mutants (file names without .mutant).
#   --check: build nothing; only check that every selected mutant still applies to the tree
#            (each find occurs exactly once), e.g. after a reformat. Ends "mutants: N apply, M do not".
# Ends with one line "mutants: N killed, M survived" (and exits 1 if any survived or a mutant
# could not be applied).
#
# Mutant format (one "key: value" per line; find/replace may repeat, applied in order):
#   rule:    the promise the mutant breaks (one line)
#   file:    path relative to the repository root
#   find:    an exact substring that must occur exactly once in that file
#   replace: what it becomes
#   target:  the ninja target (test binary) that must kill it
#   filter:  optional gtest filter of the tests that kill it
#   timeout: optional, seconds (default --timeout): the most a run of its tests may take. A run
#            also ends as hung after ten times its unmutated run, and at least 20 s (a kill when
#            a second run ends so too).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
work=${KINFORMER_MUTATION_DIR:-$root/build/mutation}
timeout_s=180
only=()
check_only=0
while [ $# -gt 0 ]; do
  case $1 in
    --check) check_only=1; shift ;;
    --work) work=$2; shift 2 ;;
    --timeout) timeout_s=$2; shift 2 ;;
    -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
    *) only+=("$1"); shift ;;
  esac
done

src=$work/src
# The build directory sits in the copy as build/ sits in the tree: compile commands then name the
# sources by the same relative paths, and ccache serves every object the mutant does not change
# from the main build's (CMakeLists.txt sets CCACHE_BASEDIR to the source tree).
bld=$src/build
logs=$work/logs
mkdir -p "$work" "$logs"
say() { printf '[mutation %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

mutants=()
for f in "$root"/tests/mutation/*.mutant; do
  name=$(basename "$f" .mutant)
  if [ ${#only[@]} -gt 0 ] && ! printf '%s\n' "${only[@]}" | grep -qx "$name"; then continue; fi
  mutants+=("$f")
done
[ ${#mutants[@]} -gt 0 ] || { echo "mutants: 0 killed, 0 survived (none selected)"; exit 1; }

field() { sed -n "s/^$2: \{0,1\}//p" "$1" | head -1; }
binary_of() { find "$bld/tests" -type f -name "$1" -perm -u+x | head -1; }

# apply FILE.mutant: edits the copy; prints why and fails if a find does not match exactly once.
apply() {
  python3 - "$1" "${2:-$src}" "${3:-write}" <<'PY'
import sys, pathlib
spec, src, mode = sys.argv[1], pathlib.Path(sys.argv[2]), sys.argv[3]
lines = pathlib.Path(spec).read_text().splitlines()
target = next(l.split(":", 1)[1].strip() for l in lines if l.startswith("file:"))
pairs, find = [], None
for l in lines:
    if l.startswith("find:"):
        find = l.split(":", 1)[1][1:] if l[5:6] == " " else l.split(":", 1)[1]
    elif l.startswith("replace:") and find is not None:
        rep = l.split(":", 1)[1]
        pairs.append((find, rep[1:] if rep.startswith(" ") else rep))
        find = None
path = src / target
text = path.read_text()
if not pairs:
    sys.exit(f"{spec}: no find/replace pair")
for f, r in pairs:
    n = text.count(f)
    if n != 1:
        sys.exit(f"{spec}: '{f}' occurs {n} times in {target} (must be exactly once)")
    text = text.replace(f, r)
if mode == "write":
    path.write_text(text)
PY
}

if [ "$check_only" = 1 ]; then
  ok=0; bad=0
  for f in "${mutants[@]}"; do
    if why=$(apply "$f" "$root" check 2>&1); then ok=$((ok + 1)); else bad=$((bad + 1)); echo "  BROKEN   $why" >&2; fi
  done
  echo "mutants: $ok apply, $bad do not"
  [ "$bad" -eq 0 ]
  exit
fi

# A fresh copy of the tracked tree (plus uncommitted changes), without build directories.
say "copying the tree to $src"
rm -rf "$src"
mkdir -p "$src"
(cd "$root" && git ls-files -co --exclude-standard -z | grep -zv '^tests/mutation/' |
  xargs -0 cp --parents -t "$src" 2>/dev/null) || true
cp -r "$root/tests/mutation" "$src/tests/" 2>/dev/null || true
[ -f "$src/CMakeLists.txt" ] || { echo "mutation: copying the tree failed" >&2; exit 1; }

# Test programs from unity sources when the main build has them (the test command's), so that
# ccache serves the copy's objects from it.
unity_tests=$(sed -n 's/^KINFORMER_UNITY_TESTS:BOOL=//p' "${KINFORMER_BUILD_DIR:-$root/build}/CMakeCache.txt" 2>/dev/null || true)
say "configuring $bld"
cmake -S "$src" -B "$bld" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKINFORMER_BUILD_TOOLS=OFF \
  -DKINFORMER_UNITY_TESTS="${unity_tests:-OFF}" >"$logs/configure.log" 2>&1 ||
  { tail -20 "$logs/configure.log" >&2; exit 1; }


run_target() {  # run_target TARGET FILTER LOG [TIMEOUT] -> exit status (124: timeout)
  local bin rc=0 limit=${4:-$timeout_s}
  bin=$(binary_of "$1")
  [ -n "$bin" ] || { echo "no binary for target $1" >"$3"; return 2; }
  local args=()
  [ -n "$2" ] && args+=("--gtest_filter=$2")
  timeout "$limit" "$bin" "${args[@]}" >"$3" 2>&1 || rc=$?
  return "$rc"
}

# Baseline: each (target, filter) must build and pass unmutated.
say "baseline: building and running each target unmutated"
declare -A seen=() hang_limit=()
min_limit_s=20
for f in "${mutants[@]}"; do
  t=$(field "$f" target); flt=$(field "$f" filter)
  [ -n "$t" ] || { echo "mutation: $f has no target" >&2; exit 1; }
  key="$t|$flt"
  [ -n "${seen[$key]:-}" ] && continue
  seen[$key]=1
  ninja -C "$bld" "$t" >"$logs/baseline-build.log" 2>&1 ||
    { tail -30 "$logs/baseline-build.log" >&2; echo "mutation: baseline build of $t failed" >&2; exit 1; }
  t0=$(date +%s%N)
  if ! run_target "$t" "$flt" "$logs/baseline-$t.log"; then
    tail -30 "$logs/baseline-$t.log" >&2
    echo "mutation: baseline $t ${flt:+($flt) }fails without any mutant" >&2
    exit 1
  fi
  # A mutant's run may take ten times its baseline, and at least min_limit_s, before it ends as
  # hung (run_mutant): most hangs then end in seconds, not at the mutant's timeout.
  baseline_s=$(( ($(date +%s%N) - t0 + 999999999) / 1000000000 ))
  hang_limit[$key]=$(( baseline_s * 10 > min_limit_s ? baseline_s * 10 : min_limit_s ))
done

# run_mutant: one run of the mutant's tests ($t, $flt, $name, $limit, $declared). The hang limit
# could also cut a run that a busy machine merely slowed, so a timeout there counts only when a
# second run ends so too (hang_note says so); a second run's other outcome stands instead.
run_mutant() {
  local rc=0
  run_target "$t" "$flt" "$logs/$name.test.log" "$limit" || rc=$?
  if [ "$rc" -eq 124 ] && [ "$limit" -lt "$declared" ]; then
    rc=0
    run_target "$t" "$flt" "$logs/$name.test.log" "$limit" || rc=$?
    [ "$rc" -eq 124 ] && hang_note=" (the hang limit, twice)"
  fi
  return "$rc"
}

killed=0; survived=0; broken=0; survivors=()
for f in "${mutants[@]}"; do
  name=$(basename "$f" .mutant)
  file=$(field "$f" file); t=$(field "$f" target); flt=$(field "$f" filter); rule=$(field "$f" rule)
  cp "$src/$file" "$work/orig"
  if ! why=$(apply "$f" 2>&1); then
    echo "  BROKEN   $name: $why" >&2
    broken=$((broken + 1)); survivors+=("$name(does not apply)")
    continue
  fi
  verdict=""
  if ! ninja -C "$bld" "$t" >"$logs/$name.build.log" 2>&1; then
    # A mutant that does not compile tests nothing: it is a broken mutant, not a kill.
    cp "$work/orig" "$src/$file"
    echo "  BROKEN   $name: does not compile (see $logs/$name.build.log)" >&2
    broken=$((broken + 1)); survivors+=("$name(does not compile)")
    continue
  else
    rc=0
    declared=$(field "$f" timeout)
    declared=${declared:-$timeout_s}
    limit=$declared
    [ "${hang_limit[$t|$flt]}" -lt "$limit" ] && limit=${hang_limit[$t|$flt]}
    hang_note=""
    run_mutant || rc=$?
    # A few kills rest on a bounded negative wait (e.g. "close() has not returned within
    # 200 ms"): correct code never fails it, but a loaded machine can hide a mutant. Run a
    # survivor twice more before calling it a survivor, and say when a retry was needed.
    tries=1
    while [ "$rc" -eq 0 ] && [ "$tries" -lt 3 ]; do
      tries=$((tries + 1))
      run_mutant || rc=$?
    done
    if [ "$rc" -eq 0 ]; then
      verdict=""
    elif [ "$rc" -eq 124 ]; then
      verdict="killed (timeout after ${limit}s)$hang_note"
      [ "$tries" -gt 1 ] && verdict="$verdict (on run $tries)"
    else
      by=$(sed -n 's/^\[  FAILED  \] \([A-Za-z0-9_/]*\.[A-Za-z0-9_./]*\).*/\1/p' "$logs/$name.test.log" | sort -u |
        head -3 | paste -sd, -)
      verdict="killed by ${by:-exit $rc}"
      [ "$tries" -gt 1 ] && verdict="$verdict (on run $tries: the kill is timing-dependent)"
    fi
  fi
  cp "$work/orig" "$src/$file"
  touch "$src/$file"
  if [ -n "$verdict" ]; then
    killed=$((killed + 1))
    echo "  killed   $name: $verdict" >&2
  else
    survived=$((survived + 1)); survivors+=("$name")
    echo "  SURVIVED $name: $rule" >&2
  fi
done

[ ${#survivors[@]} -gt 0 ] && echo "mutation: survivors: ${survivors[*]}" >&2
echo "mutants: $killed killed, $((survived + broken)) survived"
[ $((survived + broken)) -eq 0 ]
