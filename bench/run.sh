#!/usr/bin/env bash
# Runs the side-by-side benchmarks (issue 7) and regenerates docs/benchmarks.md.
#
# Usage: bash bench/run.sh [--quick] [--runs N] [--frames N] [--no-real] [--real-sizes N,N]
#                          [--paging-sizes N,N] [--rates N,N] [--only SECTION,SECTION]
#   --quick    one run at small sizes: checks the harness, not the figures
#   --no-real  skip everything on the real kube-apiserver (tests/k8s-env)
#   --only     sections: throughput, owned, replay, real (time to sync on the real
#              apiserver), paging, real-throughput, scale. A run of only real, paging and/or
#              real-throughput replaces just their blocks in docs/benchmarks.md, e.g.
#              bash bench/run.sh --only real,paging,real-throughput
#              and a run of only scale (1k to 1M pods, issue 16) rewrites just the scaling
#              section, its targets and docs/benchmarks-scale.svg
# Builds the Rust peers (release) and the client-go peer (bench/go/build.sh, cached).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
cargo build --release -p reconcile-bench --bins
exec "${CARGO_TARGET_DIR:-$root/target}/release/reconcile-bench" all "$@"
