#!/usr/bin/env bash
# style.sh: the enforced style. Two checks, each printing one verdict line:
#   format: every tracked C++ file (.cc, .h) is what clang-format makes of it (.clang-format);
#           a file that differs is named with its first differing lines.
#   tidy:   clang-tidy (.clang-tidy) on the library sources (client/, cache/, informer/, mesh/,
#           controller/, prometheus/ src) and the headers they include, eight sources at a time
#           from unity sources in ${build}-tidy (configured here, never built), plus a file-by-file
#           pass of the checks that see only the file tidy starts on; every finding is an error.
#
#   tools/scripts/style.sh                 # both checks (the test command runs this)
#   tools/scripts/style.sh --fix           # rewrite files in place with clang-format, then tidy
#   tools/scripts/style.sh --format-only | --tidy-only
#
# Installs Debian's clang-format-14 and clang-tidy-14 when missing. Build dir:
# ${KINFORMER_BUILD_DIR:-build} (configured first if it has no compile_commands.json).
# Ends with "style format: ok|N files differ" and "style tidy: ok|N findings"; exits 1 on either.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${KINFORMER_BUILD_DIR:-$root/build}
fix=0 do_format=1 do_tidy=1
while [ $# -gt 0 ]; do
  case $1 in
    --fix) fix=1; shift ;;
    --format-only) do_tidy=0; shift ;;
    --tidy-only) do_format=0; shift ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "style.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

need=()
command -v clang-format-14 >/dev/null || need+=(clang-format-14)
[ "$do_tidy" = 1 ] && { command -v clang-tidy-14 >/dev/null || need+=(clang-tidy-14); }
if [ ${#need[@]} -gt 0 ]; then
  echo "[style] installing ${need[*]} (apt-get)" >&2
  sudo=(); [ "$(id -u)" -ne 0 ] && sudo=(sudo)
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}" >&2 ||
    { "${sudo[@]}" apt-get update -q >&2 && "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}" >&2; }
fi

cd "$root"
rc=0
if [ "$do_format" = 1 ]; then
  mapfile -t files < <(git ls-files '*.cc' '*.h')
  if [ "$fix" = 1 ]; then
    clang-format-14 --style=file -i "${files[@]}"
  fi
  differ=0
  for f in "${files[@]}"; do
    if ! out=$(clang-format-14 --style=file "$f" | diff -u --label "$f" --label "$f (clang-format)" "$f" -); then
      differ=$((differ + 1))
      [ "$differ" -le 10 ] && head -20 <<<"$out" >&2
    fi
  done
  if [ "$differ" -eq 0 ]; then
    echo "style format: ok (${#files[@]} files)"
  else
    echo "style format: $differ files differ (tools/scripts/style.sh --fix --format-only rewrites them)"
    rc=1
  fi
fi

if [ "$do_tidy" = 1 ]; then
  if [ ! -f "$build/compile_commands.json" ]; then
    cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  fi
  mapfile -t sources < <(git ls-files 'client/src/*.cc' 'informer/src/*.cc' 'cache/src/*.cc' 'mesh/src/*.cc' 'controller/src/*.cc' 'prometheus/src/*.cc')
  log=$(mktemp)
  trap 'rm -f "$log"' EXIT
  # tidy_each BUILD ARGS... < NUL-separated files: clang-tidy on each file, nproc at a time, each
  # file's findings printed whole (xargs -P interleaves only between files), all into $log.
  # With $fixes set, each file's fixes are exported there.
  fixes=""
  tidy_each() {
    FIXES=$fixes xargs -0 -P "$(nproc)" -n 1 sh -c '
      eval "file=\${$#}"; extra=""
      [ -n "$FIXES" ] && extra="--export-fixes=$FIXES/$(echo "$file" | tr / _).yaml"
      out=$(clang-tidy-14 $extra "$@" 2>/dev/null); printf "%s\n" "$out"' tidy -p "$@" >>"$log" || true
  }
  if [ "$fix" = 1 ]; then
    # Each file's fixes are exported and applied once at the end by clang-apply-replacements,
    # which merges the identical fixes several files make to one header.
    command -v clang-apply-replacements-14 >/dev/null ||
      { sudo=(); [ "$(id -u)" -ne 0 ] && sudo=(sudo); "${sudo[@]}" apt-get install -y -q clang-tools-14 >&2; }
    fixes=$(mktemp -d)
    echo "[style] clang-tidy --fix on ${#sources[@]} library sources ($(nproc) at a time)" >&2
    printf '%s\0' "${sources[@]}" | tidy_each "$build" --quiet
    clang-apply-replacements-14 "$fixes" && rm -rf "$fixes"
    clang-format-14 --style=file -i "${sources[@]}" $(git ls-files 'client/*.h' 'informer/*.h' 'cache/*.h' 'mesh/*.h' 'controller/*.h' 'prometheus/*.h')
    echo "[style] fixes applied; run again to see what is left" >&2
  else
    # Two passes, for time: most of a file's tidy time is the checks walking the AST of Asio and
    # Beast, which every library source includes. Pass 1 runs every check once per unity source
    # (the libraries' files eight at a time, from a configure-only unity build directory with the
    # main build's choice of Prometheus); pass 2 runs, file by file, the checks that look only at
    # the file tidy was started on (unused using-declarations and namespace aliases).
    unity=$(cd "$(dirname "$build")" && pwd)/$(basename "$build")-tidy
    prometheus=$(sed -n 's/^KINFORMER_WITH_PROMETHEUS:BOOL=//p' "$build/CMakeCache.txt" 2>/dev/null || true)
    cmake -S "$root" -B "$unity" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKINFORMER_UNITY_BUILD=ON \
      -DKINFORMER_BUILD_TESTS=OFF -DKINFORMER_BUILD_TOOLS=OFF -DKINFORMER_WITH_PROMETHEUS="${prometheus:-ON}" \
      >"$log" 2>&1 || { cat "$log" >&2; exit 1; }
    : >"$log"
    # The unity sources this configuration compiles (its compile commands; a folder may hold
    # stale ones from an earlier configuration).
    compiled() { python3 -c 'import json, sys
for e in json.load(open(sys.argv[1])): print(e["file"])' "$1/compile_commands.json"; }
    mapfile -t batches < <(compiled "$unity" | grep '/Unity/unity_' | sort)
    [ ${#batches[@]} -gt 0 ] || { echo "[style] no unity sources in $unity/compile_commands.json" >&2; exit 1; }
    # Every library source must be in a batch; one that is not (a source a library keeps out of
    # its unity build) is checked on its own with every check. A source this configuration does
    # not compile (prometheus/ without Prometheus) is not checked.
    main_compiled=$(compiled "$build")
    alone=() checked=()
    for f in "${sources[@]}"; do
      grep -qxF "$root/$f" <<<"$main_compiled" || continue
      checked+=("$f")
      grep -qsF "/$f\"" "${batches[@]}" || alone+=("$f")
    done
    [ ${#checked[@]} -lt ${#sources[@]} ] &&
      echo "[style] $((${#sources[@]} - ${#checked[@]})) library sources are not compiled in this configuration" >&2
    main_file_checks='-*,misc-unused-using-decls,misc-unused-alias-decls'
    # Pass 2 needs only the files where those can occur: a `using` or a namespace alias.
    mapfile -t own < <(grep -lE '(^|[^A-Za-z0-9_])using([^A-Za-z0-9_]|$)|namespace[[:space:]]+[A-Za-z0-9_]+[[:space:]]*=' "${checked[@]}" /dev/null || true)
    echo "[style] clang-tidy on ${#sources[@]} library sources: every check on ${#batches[@]} unity sources" \
      "and ${#alone[@]} sources alone, then $main_file_checks on ${#own[@]} sources ($(nproc) at a time)" >&2
    # The batches live in the build directory: name the tree's .clang-tidy; GCC's warning options
    # in their commands are not clang's. Their own #include of .cc files is the point of them:
    # bugprone-suspicious-include findings in the batches themselves are dropped.
    printf '%s\0' "${batches[@]}" | tidy_each "$unity" --quiet --config-file="$root/.clang-tidy" \
      --extra-arg=-Wno-unknown-warning-option
    [ ${#alone[@]} -gt 0 ] && printf '%s\0' "${alone[@]}" | tidy_each "$build" --quiet
    [ ${#own[@]} -gt 0 ] && printf '%s\0' "${own[@]}" | tidy_each "$build" --quiet --checks="$main_file_checks"
    awk -v p="$unity/" 'index($0, p) == 1 && /: (warning|error): suspicious #include .*\[bugprone-suspicious-include/ { next }
      { print }' "$log" >"$log.kept"
    mv "$log.kept" "$log"
  fi
  findings=$(grep -cE '^[^ ]+:[0-9]+:[0-9]+: (warning|error):' "$log" || true)
  if [ "$findings" -eq 0 ]; then
    echo "style tidy: ok (${#sources[@]} files)"
  else
    grep -A3 -E '^[^ ]+:[0-9]+:[0-9]+: (warning|error):' "$log" | head -200 >&2
    echo "style tidy: $findings findings"
    rc=1
  fi
fi
exit "$rc"
