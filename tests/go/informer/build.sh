#!/usr/bin/env bash
# Builds the client-go informer harness (tests/go/informer, issue 30) and caches the binary,
# keyed by this module's go.mod, go.sum and sources, as tests/go/build.sh caches its binaries.
# The binary is the package's test binary (`go test -c`): informer_test.go plays the trace
# inside a testing/synctest bubble, on virtual time; its CLI is main.go's.
#
# Usage: bash tests/go/informer/build.sh
#   Prints the path of the binary as the last line of stdout.
#
# Environment:
#   RECONCILE_K8S_CACHE  cache root (default: $XDG_CACHE_HOME or ~/.cache, + /reconcile-loop)
#   GO                   Go toolchain to use (default: `go` on PATH, then /usr/local/go/bin/go)
#
# Exit codes: 0 ok, 3 no Go toolchain (callers treat this as "cannot provision"),
# anything else is a build failure.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache_root="${RECONCILE_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/reconcile-loop}"
flags_rev="2 cgo=0 trimpath test-c"
key="$(cd "$here" && { echo "$flags_rev"; cat go.mod go.sum main.go informer_test.go; } | sha256sum | cut -c1-16)"
out="$cache_root/informer/$key"

if [[ -x "$out/informer" ]]; then
	echo "$out/informer"
	exit 0
fi

GO="${GO:-$(command -v go || true)}"
if [[ -z "$GO" && -x /usr/local/go/bin/go ]]; then GO=/usr/local/go/bin/go; fi
if [[ -z "$GO" ]]; then
	echo "informer/build.sh: no Go toolchain found (install Go >= 1.26 or set GO=/path/to/go)" >&2
	exit 3
fi

mkdir -p "$cache_root/informer"
exec 9>"$cache_root/informer/.lock"
flock 9
if [[ -x "$out/informer" ]]; then
	echo "$out/informer"
	exit 0
fi
tmp="$(mktemp -d "$cache_root/informer/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
export CGO_ENABLED=0
# As in tests/go/build.sh: the build cache (about 300 MB here) lives and dies with this build, so
# a fresh CI machine keeps that disk for the Rust build.
export GOCACHE="$tmp/go-build-cache"
# The committed go.sum is the pin: refuse to change it during a build.
export GOFLAGS="-mod=readonly ${GOFLAGS:-}"
echo "informer/build.sh: building the client-go informer harness into $out" >&2
(cd "$here" && "$GO" test -c -trimpath -o "$tmp/informer" .)
rm -rf "$tmp/go-build-cache"
rm -rf "$out"
mv "$tmp" "$out"
trap - EXIT
echo "$out/informer"
