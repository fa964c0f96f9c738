#!/usr/bin/env bash
# Real kube-apiserver + etcd on loopback for kinformer's e2e tests.
#
#   e2e/launcher.sh build                          build (or reuse) the binaries; prints their folder
#   e2e/launcher.sh up [--dir DIR] [...]           start; prints KUBECONFIG=DIR/kubeconfig last
#   e2e/launcher.sh down [--dir DIR] [--purge]     stop (idempotent)
#   e2e/launcher.sh restart-apiserver [--dir DIR]  restart kube-apiserver only
#   e2e/launcher.sh compact [--dir DIR] [--wait=false]  compact etcd past its current revision (old RVs -> 410)
#   e2e/launcher.sh status [--dir DIR]             exit 0 when both processes run, 3 otherwise
#
# DIR defaults to ${KINFORMER_E2E_DIR:-/tmp/kinformer-e2e}. Binaries are cached in
# ${KINFORMER_CACHE:-$HOME/.cache/kinformer}/e2e/<hash>/, hash over go.mod, go.sum,
# the launcher's *.go files and the Go version; a cache hit takes well under a second.
# The first build compiles kube-apiserver (~2000 packages): 4-7 min on 2 cores here.
# KINFORMER_BUILD_JOBS (default 2) is passed to `go build -p`.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
src="$here/launcher"
cache_root="${KINFORMER_CACHE:-${HOME:-/root}/.cache/kinformer}/e2e"
jobs="${KINFORMER_BUILD_JOBS:-2}"
# Bump when the build recipe below changes, so that cached binaries are rebuilt.
recipe=1

say() { printf '[launcher.sh %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { say "error: $*"; exit 1; }

check_go() {
    command -v go >/dev/null 2>&1 ||
        die "'go' not found on PATH. Go >= 1.26 is needed to build kube-apiserver 1.36 (Debian's golang-go is too old); install an official Go release >= 1.26 and put its bin/ on PATH."
    local v
    v="$(go env GOVERSION 2>/dev/null || true)"
    [[ "$v" =~ ^go1\.([0-9]+) ]] || die "cannot tell the Go version ('$v')"
    (( BASH_REMATCH[1] >= 26 )) || die "$v is too old: kube-apiserver 1.36 needs Go >= 1.26"
    printf '%s' "$v"
}

# Settings for every go command: the installed toolchain only, read-only
# go.mod, no VCS stamping (the repo may have no commit yet), no user GOFLAGS.
go_env() {
    export GOTOOLCHAIN=local
    export GOFLAGS="-mod=readonly -buildvcs=false"
    export CGO_ENABLED=0 # static binaries, same cache key everywhere
}

bin_dir() {
    local gov="$1" hash
    hash="$(
        cd "$src"
        { printf 'recipe %s\n%s\n' "$recipe" "$gov"; sha256sum go.mod go.sum *.go; } | sha256sum | cut -c1-16
    )"
    printf '%s/%s' "$cache_root" "$hash"
}

# go build -v prints one package path per line: count those, pass anything
# else (compiler errors) through.
count_packages() {
    local total="$1" label="$2"
    awk -v total="$total" -v label="$label" '
        / / || /^#/ || /:/ { print > "/dev/stderr"; next }
        { n++; if (n % 100 == 0) { printf "[launcher.sh] %s: %d/~%d packages compiled\n", label, n, total > "/dev/stderr"; fflush("/dev/stderr") } }
        END { if (n > 0) printf "[launcher.sh] %s: %d packages compiled\n", label, n > "/dev/stderr" }'
}

do_build() {
    local gov dir k8s_version minor t0
    gov="$(check_go)"
    go_env
    dir="$(bin_dir "$gov")"
    if [[ -x "$dir/kube-apiserver" && -x "$dir/kinformer-e2e" ]]; then
        printf '%s\n' "$dir"
        return 0
    fi
    mkdir -p "$cache_root"
    # One build at a time per cache (parallel test jobs wait for the first).
    exec 9>"$cache_root/.build.lock"
    if command -v flock >/dev/null 2>&1; then
        flock -n 9 || { say "another build is running; waiting for it"; flock 9; }
    fi
    if [[ -x "$dir/kube-apiserver" && -x "$dir/kinformer-e2e" ]]; then
        printf '%s\n' "$dir"
        return 0
    fi
    t0=$SECONDS
    k8s_version="$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ { print $2; exit }' "$src/go.mod")"
    [[ "$k8s_version" =~ ^v1\.([0-9]+)\. ]] || die "cannot find the k8s.io/kubernetes version in $src/go.mod"
    minor="${BASH_REMATCH[1]}"
    local tmp="$dir.tmp.$$"
    rm -rf "$tmp"
    mkdir -p "$tmp"
    trap 'rm -rf "$tmp"' EXIT

    say "building into $dir ($gov, k8s.io/kubernetes $k8s_version, go build -p $jobs)"
    say "downloading modules..."
    (cd "$src" && go mod download) || die "go mod download failed"

    local total
    total="$(cd "$src" && go list -deps . 2>/dev/null | wc -l || echo 550)"
    say "building kinformer-e2e (launcher + embedded etcd)..."
    (cd "$src" && go build -p "$jobs" -trimpath -v -ldflags "-s -w" -o "$tmp/kinformer-e2e" . 2>&1) |
        count_packages "$total" "kinformer-e2e" || die "building kinformer-e2e failed"

    say "building kube-apiserver $k8s_version (first time: ~4-7 min on 2 cores, up to 20 on slow ones)..."
    total="$(cd "$src" && go list -deps k8s.io/kubernetes/cmd/kube-apiserver 2>/dev/null | wc -l || echo 2000)"
    local v=k8s.io/component-base/version
    local ldflags="-s -w -X $v.gitVersion=$k8s_version -X $v.gitMajor=1 -X $v.gitMinor=$minor -X $v.gitTreeState=clean"
    (cd "$src" && go build -p "$jobs" -trimpath -v -ldflags "$ldflags" -o "$tmp/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver 2>&1) |
        count_packages "$total" "kube-apiserver" || die "building kube-apiserver failed"

    rm -rf "$dir"
    mv "$tmp" "$dir"
    trap - EXIT
    say "built in $((SECONDS - t0))s: $dir"
    printf '%s\n' "$dir"
}

# A folder that holds a built kinformer-e2e without building one: this recipe's, else the newest
# finished one in the cache (any of them reads the state folder). Prints nothing when there is none.
built_dir() {
    local d="" x
    command -v go >/dev/null 2>&1 && d="$(bin_dir "$(check_go)")"
    if [[ -z "$d" || ! -x "$d/kinformer-e2e" ]]; then
        d=""
        for x in "$cache_root"/*/; do
            x="${x%/}"
            [[ "$x" == *.tmp.* || ! -x "$x/kinformer-e2e" ]] && continue
            [[ -z "$d" || "$x/kinformer-e2e" -nt "$d/kinformer-e2e" ]] && d="$x"
        done
    fi
    printf '%s' "$d"
}

cmd="${1:-}"
[[ $# -gt 0 ]] && shift
case "$cmd" in
build)
    do_build
    ;;
down | status)
    # Stopping or asking never builds (minutes, cold): with no binary built, only a state folder
    # left by a binary since deleted could name running processes.
    dir="$(built_dir)"
    [[ -n "$dir" ]] && exec "$dir/kinformer-e2e" "$cmd" "$@"
    state="${KINFORMER_E2E_DIR:-/tmp/kinformer-e2e}" purge=0
    while [[ $# -gt 0 ]]; do
        case "$1" in
        --dir) state="${2:-}"; shift $(($# > 1 ? 2 : 1)) ;;
        --dir=*) state="${1#--dir=}"; shift ;;
        --purge) purge=1; shift ;;
        *) shift ;;
        esac
    done
    if [[ -f "$state/state.json" ]]; then
        die "nothing built in $cache_root, but $state/state.json names processes that may run: build the launcher (e2e/launcher.sh build) and run $cmd again"
    fi
    if [[ "$cmd" == status ]]; then
        say "nothing built in $cache_root and no state in $state: not running"
        exit 3
    fi
    say "nothing built in $cache_root and no state in $state: nothing to stop"
    if [[ "$purge" == 1 && -n "$state" ]]; then
        # What the launcher's own --purge removes, then the folder if that leaves it empty.
        rm -rf "$state/pki" "$state/etcd" "$state/logs" "$state/kubeconfig"
        rmdir "$state" 2>/dev/null || true
    fi
    exit 0
    ;;
up | restart-apiserver | compact)
    dir="$(do_build)"
    exec "$dir/kinformer-e2e" "$cmd" "$@"
    ;;
*)
    sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
