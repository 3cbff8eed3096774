#!/usr/bin/env bash
# Builds the pinned test binaries (kube-apiserver, kube-controller-manager, etcd,
# kwok) from their Go modules and caches them, keyed by the pins.
#
# Usage: bash tests/go/build.sh
#   Prints the directory holding the binaries as the last line of stdout.
#   A second run with the same pins only checks the cache and returns at once.
#
# Pins live in the three Go modules next to this script (go.mod + go.sum):
#   kube/  k8s.io/kubernetes (staging modules replaced by the matching v0.x.y)
#   etcd/  go.etcd.io/etcd/server/v3 and its sibling modules
#   kwok/  sigs.k8s.io/kwok
# They are separate modules because their dependency graphs disagree (e.g. the
# etcd client version Kubernetes wants is newer than etcd 3.5's own).
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

# Bump when the flags below change, so the cache key changes with them.
flags_rev="1 cgo=0 trimpath -s -w"
binaries=(kube-apiserver kube-controller-manager etcd kwok)

key="$(cd "$here" && {
	echo "$flags_rev"
	cat kube/go.mod kube/go.sum etcd/go.mod etcd/go.sum kwok/go.mod kwok/go.sum
} | sha256sum | cut -c1-16)"
out="$cache_root/bins/$key"

have_all() {
	[[ -f "$out/.complete" ]] || return 1
	local b
	for b in "${binaries[@]}"; do [[ -x "$out/$b" ]] || return 1; done
}

if have_all; then
	echo "$out"
	exit 0
fi

GO="${GO:-$(command -v go || true)}"
if [[ -z "$GO" && -x /usr/local/go/bin/go ]]; then GO=/usr/local/go/bin/go; fi
if [[ -z "$GO" ]]; then
	echo "build.sh: no Go toolchain found (install Go >= 1.26 or set GO=/path/to/go)" >&2
	exit 3
fi

mkdir -p "$cache_root/bins"
# One builder at a time; others wait here and then find the cache filled.
exec 9>"$cache_root/bins/.lock"
flock 9
if have_all; then
	echo "$out"
	exit 0
fi

tmp="$(mktemp -d "$cache_root/bins/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

export CGO_ENABLED=0
# The build cache (about 4 GB for these four) would only speed up a rebuild under new pins; on a
# fresh CI machine it is disk the Rust build then lacks. It lives and dies with this build.
export GOCACHE="$tmp/go-build-cache"
# The committed go.sum files are the pins: refuse to change them during a build.
export GOFLAGS="-mod=readonly ${GOFLAGS:-}"

start=$(date +%s)
kube_version="$(awk '$1 == "k8s.io/kubernetes" {print $2; exit} $1 == "require" && $2 == "k8s.io/kubernetes" {print $3; exit}' "$here/kube/go.mod")"
[[ "$kube_version" =~ ^v1\.[0-9]+\.[0-9]+$ ]] || { echo "build.sh: cannot read the k8s.io/kubernetes pin from kube/go.mod" >&2; exit 1; }
kube_minor="$(echo "$kube_version" | cut -d. -f2)"
# Without these the binaries report v0.0.0-master, which confuses version checks
# in clients.
kube_ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	kube_ldflags+=" -X $pkg.gitVersion=$kube_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$kube_minor"
	kube_ldflags+=" -X $pkg.gitTreeState=clean"
done

echo "build.sh: building $kube_version apiserver + controller-manager into $out" >&2
(cd "$here/kube" && "$GO" build -trimpath -ldflags="$kube_ldflags" -o "$tmp/" \
	k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager)
echo "build.sh: building etcd" >&2
(cd "$here/etcd" && "$GO" build -trimpath -ldflags="-s -w" -o "$tmp/etcd" go.etcd.io/etcd/server/v3)
echo "build.sh: building kwok" >&2
(cd "$here/kwok" && "$GO" build -trimpath -ldflags="-s -w" -o "$tmp/kwok" sigs.k8s.io/kwok/cmd/kwok)

rm -rf "$tmp/go-build-cache"
touch "$tmp/.complete"
rm -rf "$out"
mv "$tmp" "$out"
trap - EXIT
echo "build.sh: built in $(($(date +%s) - start))s" >&2
echo "$out"
