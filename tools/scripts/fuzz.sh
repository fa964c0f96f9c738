#!/usr/bin/env bash
# Runs the libFuzzer targets of tests/fuzz (watch decoder with arbitrary chunking, API errors,
# typed model decoders, kubeconfig loader, protobuf decoders, streaming list decoders cut at
# chosen points, gzip bodies cut likewise, HTTP/2 frames, HPACK blocks), each bounded, 2 at once.
# Installs clang and its runtime (Debian's clang-14, libclang-rt-14-dev) when missing; builds the
# client library with clang, ASan+UBSan and fuzzer coverage in $KINFORMER_BUILD_DIR-fuzz.
#
# Usage: tools/scripts/fuzz.sh [--seconds N] [--install-only | --build-only | --no-build] [TARGET...]
#   --seconds N  time per target (default 60; the test command's short run). A long run:
#                tools/scripts/fuzz.sh --seconds 3600 model_fuzz
#   --install-only installs clang and exits; --build-only builds the targets and runs none;
#                --no-build runs them as last built (the test command builds them while other
#                stages run, and runs them later).
# Each target starts from its seed corpus (tests/fuzz/corpus/<target>, never modified) plus the
# inputs it found in earlier runs (<build>-fuzz/corpus/<target>). Limits per input: 10 s, 64 KiB,
# 256 MB per allocation, 2 GB RSS: a hang, a huge allocation or a leak is a finding.
# Prints "fuzz <target>: N executions, cov C, ft F, corpus K, 0 findings" per target and ends with
# "fuzz: N targets, N findings"; exits non-zero on any finding (the input is kept under
# <build>-fuzz/findings/).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${KINFORMER_BUILD_DIR:-$root/build}-fuzz
seconds=60
targets=()
install_only=0
build_step=1
run_step=1
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --install-only) install_only=1; shift ;;
    --build-only) run_step=0; shift ;;
    --no-build) build_step=0; shift ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) targets+=("$1"); shift ;;
  esac
done
[ ${#targets[@]} -eq 0 ] && targets=(watch_decoder_fuzz status_fuzz model_fuzz kubeconfig_fuzz protobuf_fuzz
  list_decoder_fuzz gzip_fuzz hpack_fuzz http2_session_fuzz)

if [ "$build_step" = 1 ]; then
  need=()
  command -v clang++-14 >/dev/null || need+=(clang-14)
  dpkg-query -W -f='${Status}' libclang-rt-14-dev 2>/dev/null | grep -q "install ok installed" ||
    need+=(libclang-rt-14-dev)
  if [ ${#need[@]} -gt 0 ]; then
    echo "[fuzz] installing ${need[*]}" >&2
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get install -y -q --no-install-recommends "${need[@]}" >&2 || {
      $SUDO apt-get update -q >&2
      $SUDO apt-get install -y -q --no-install-recommends "${need[@]}" >&2
    }
  fi
  [ "$install_only" = 0 ] || exit 0

  mkdir -p "$build"
  echo "[fuzz] building ${targets[*]} in $build (clang, ASan+UBSan, fuzzer coverage)" >&2
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++-14 \
    -DKINFORMER_FUZZ=ON -DKINFORMER_SANITIZE=address,undefined -DKINFORMER_UNITY_BUILD=ON \
    -DKINFORMER_BUILD_TESTS=OFF -DKINFORMER_BUILD_TOOLS=OFF >"$build/configure.log" 2>&1 ||
    { cat "$build/configure.log" >&2; exit 1; }
  ninja -C "$build" -j"$(nproc)" "${targets[@]}" >&2
fi
[ "$run_step" = 1 ] || exit 0
for t in "${targets[@]}"; do
  [ -x "$build/tests/fuzz/$t" ] || { echo "[fuzz] $t is not built in $build (run without --no-build)" >&2; exit 1; }
done

mkdir -p "$build/findings" "$build/logs"
run_one() {
  local t=$1 work=$build/corpus/$1
  mkdir -p "$work"
  # -close_fd_mask=1: the targets' stdout is not ours to read; stderr keeps libFuzzer's report.
  ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=0 UBSAN_OPTIONS=print_stacktrace=1 \
    "$build/tests/fuzz/$t" -max_total_time="$seconds" -timeout=10 -max_len=65536 \
    -malloc_limit_mb=256 -rss_limit_mb=2048 -print_final_stats=1 -close_fd_mask=1 \
    -artifact_prefix="$build/findings/$t-" "$work" "$root/tests/fuzz/corpus/$t" \
    >"$build/logs/$t.log" 2>&1
}
pids=(); names=()
rc_of=()
for t in "${targets[@]}"; do
  run_one "$t" & pids+=($!); names+=("$t")
  if [ ${#pids[@]} -ge 2 ]; then
    wait "${pids[0]}" && rc_of+=("${names[0]}:0") || rc_of+=("${names[0]}:$?")
    pids=("${pids[@]:1}"); names=("${names[@]:1}")
  fi
done
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" && rc_of+=("${names[$i]}:0") || rc_of+=("${names[$i]}:$?")
done

findings=0
for entry in "${rc_of[@]}"; do
  t=${entry%%:*}; rc=${entry##*:}
  log=$build/logs/$t.log
  execs=$(sed -nE 's/^stat::number_of_executed_units: ([0-9]+)/\1/p' "$log" | tail -1)
  last=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
  cov=$(sed -nE 's/.* cov: ([0-9]+).*/\1/p' <<<"$last"); ft=$(sed -nE 's/.* ft: ([0-9]+).*/\1/p' <<<"$last")
  corp=$(sed -nE 's/.* corp: ([0-9]+).*/\1/p' <<<"$last")
  n=0
  if [ "$rc" -ne 0 ]; then
    n=1; findings=$((findings + 1))
    echo "[fuzz] $t: finding (exit $rc); log $log:" >&2
    grep -E 'ERROR|SUMMARY|deadly|Test unit written|timeout|out-of-memory|malloc' "$log" | head -20 >&2 || true
  fi
  echo "fuzz $t: ${execs:-0} executions, cov ${cov:-?}, ft ${ft:-?}, corpus ${corp:-?}, $n findings"
done
echo "fuzz: ${#targets[@]} targets, $findings findings"
[ "$findings" -eq 0 ]
