#!/usr/bin/env bash
# Regenerates docs/testing-your-controller.png, the walkthrough's picture of a failing seed: the
# buggy operator that ignores a 409 (examples/src/buggy.rs, Bug::IgnoredConflict) is explored
# by its test, which writes the minimized run's trace under target/scenarios; that trace's
# report is opened in headless Chromium (Debian's `chromium` package) on its first 65 seconds,
# with the edit's watch frame selected (its step line names the reconcile it woke, and the
# next line shows that reconcile ending `ok` although its update got the injected 409); after it, the ConfigMap watch's bookmarks stay at the old version.
# Usage: bash scripts/scenario-screenshot.sh [OUT.png]   (from anywhere)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-docs/testing-your-controller.png}"
browser="$(command -v chromium || command -v chromium-headless-shell || true)"
if [[ -z "$browser" ]]; then
  echo "chromium is not installed: apt-get install -y chromium" >&2
  exit 1
fi
mkdir -p target
# The test passes when the bug is caught; its reproducer names the trace to draw.
log="$(cargo test -q -p reconcile-examples --test buggy an_ignored_conflict_is_caught -- --nocapture 2>&1)" || {
  echo "$log" >&2
  exit 1
}
trace="$(sed -n 's/^  its timeline: reconcile-sim report //p' <<<"$log" | head -n 1)"
if [[ -z "$trace" || ! -f "$trace" ]]; then
  echo "the test printed no trace:" >&2
  echo "$log" >&2
  exit 1
fi
html="$(pwd)/target/report-ignored-conflict.html"
# Relative, so the page's title names no checkout.
trace="$(realpath --relative-to=. "$trace")"
cargo run -q -p reconcile-sim -- report "$trace" -o "$html"
# The step to select: the watch frame of the edit (the page's steps are simulate's lines).
step="$(cargo run -q -p reconcile-sim -- simulate "$trace" 2>/dev/null | grep -n -m1 -E 'frame W[0-9]+ MODIFIED default/a' | cut -d: -f1)"
if [[ -z "$step" ]]; then
  echo "no frame of the edit in $trace" >&2
  exit 1
fi
profile="$(mktemp -d)"
trap 'rm -rf "$profile"' EXIT
"$browser" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run \
  --hide-scrollbars --user-data-dir="$profile" --window-size=1400,500 \
  --virtual-time-budget=3000 --screenshot="$(pwd)/$out" \
  "file://$html#view=-1,65&step=$step" 2>/dev/null
echo "wrote $out from $trace"
