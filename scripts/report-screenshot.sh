#!/usr/bin/env bash
# Regenerates docs/report.png, the README's picture of `reconcile-sim report`: the report of
# the bundled cell-pool trace, opened in headless Chromium (Debian's `chromium` package) on its
# first 40 seconds (each reconcile taking half a second), with step 12 (b's failed reconcile and its backoff) selected.
# Usage: bash scripts/report-screenshot.sh [OUT.png]   (from anywhere)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-docs/report.png}"
browser="$(command -v chromium || command -v chromium-headless-shell || true)"
if [[ -z "$browser" ]]; then
  echo "chromium is not installed: apt-get install -y chromium" >&2
  exit 1
fi
mkdir -p target
html="$(pwd)/target/report-cell-pool.html"
cargo run -q -p reconcile-sim -- report sim/traces/cell-pool.jsonl --reconcile-duration 0.5 -o "$html"
profile="$(mktemp -d)"
trap 'rm -rf "$profile"' EXIT
"$browser" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run \
  --hide-scrollbars --user-data-dir="$profile" --window-size=1400,510 \
  --virtual-time-budget=3000 --screenshot="$(pwd)/$out" \
  "file://$html#view=-1,40&step=12" 2>/dev/null
echo "wrote $out"
