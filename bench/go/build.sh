#!/usr/bin/env bash
# Builds the client-go peer (bench/go) through the Go module proxy and caches the binary,
# keyed by go.mod, go.sum and the source, as tests/go/build.sh does for the cluster.
#
# Usage: bash bench/go/build.sh   (prints the binary's path as the last line of stdout)
# Environment: RECONCILE_K8S_CACHE (cache root), GO (toolchain).
# Exit codes: 0 ok, 3 no Go toolchain, anything else a build failure.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache_root="${RECONCILE_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/reconcile-loop}"
key="$(cd "$here" && cat go.mod go.sum main.go | sha256sum | cut -c1-16)"
out="$cache_root/bench-peer/$key/client-go-peer"
if [[ -x "$out" ]]; then
	echo "$out"
	exit 0
fi
GO="${GO:-$(command -v go || true)}"
if [[ -z "$GO" && -x /usr/local/go/bin/go ]]; then GO=/usr/local/go/bin/go; fi
if [[ -z "$GO" ]]; then
	echo "bench/go/build.sh: no Go toolchain found (install Go >= 1.26 or set GO=/path/to/go)" >&2
	exit 3
fi
mkdir -p "$(dirname "$out")"
export CGO_ENABLED=0
export GOFLAGS="-mod=readonly ${GOFLAGS:-}"
(cd "$here" && "$GO" build -trimpath -o "$out.tmp" .)
mv "$out.tmp" "$out"
echo "$out"
