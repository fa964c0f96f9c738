#!/usr/bin/env bash
# style.sh: the enforced style. Two checks, each printing one verdict line:
#   format: every tracked C++ file (.cc, .h) is what clang-format makes of it (.clang-format);
#           a file that differs is named with its first differing lines.
#   tidy:   clang-tidy (.clang-tidy) on the library sources (client/, cache/, informer/, mesh/, controller/, prometheus/ src),
#           from the build's compile_commands.json; every finding is an error.
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
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
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
  echo "[style] clang-tidy on ${#sources[@]} library sources ($(nproc) at a time)" >&2
  # Each file's findings are printed whole (xargs -P interleaves only between files). With
  # --fix, each file's fixes are exported and applied once at the end by
  # clang-apply-replacements, which merges the identical fixes several files make to one header.
  fixes=""
  if [ "$fix" = 1 ]; then
    command -v clang-apply-replacements-14 >/dev/null ||
      { sudo=(); [ "$(id -u)" -ne 0 ] && sudo=(sudo); "${sudo[@]}" apt-get install -y -q clang-tools-14 >&2; }
    fixes=$(mktemp -d)
  fi
  printf '%s\0' "${sources[@]}" |
    xargs -0 -P "$(nproc)" -n 1 sh -c '
      extra=""; [ -n "$1" ] && extra="--export-fixes=$1/$(echo "$2" | tr / _).yaml"
      out=$(clang-tidy-14 -p "$0" --quiet $extra "$2" 2>/dev/null); printf "%s\n" "$out"' \
      "$build" "$fixes" >"$log" || true
  if [ -n "$fixes" ]; then
    clang-apply-replacements-14 "$fixes" && rm -rf "$fixes"
    clang-format-14 --style=file -i "${sources[@]}" $(git ls-files 'client/*.h' 'informer/*.h' 'cache/*.h' 'mesh/*.h' 'controller/*.h' 'prometheus/*.h')
    echo "[style] fixes applied; run again to see what is left" >&2
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
