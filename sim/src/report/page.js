// reconcile-sim report: draws the embedded run on a canvas. Only what is visible is drawn,
// at most one mark per pixel column and kind in a lane, so the cost of a frame is bounded by
// the items in view, and a run of 100 000 steps pans and zooms smoothly.
"use strict";
(function () {
  var started = performance.now();
  var data = JSON.parse(document.getElementById("data").textContent);
  var ROW = 20;
  // One family of hues per kind of lane: streams blue and cyan, their failures orange to
  // brown, reconciles green and violet with a red failure, faults magenta, violations
  // maroon. Colours sharing a lane stay apart under simulated deuteranopia
  // (sim/tests/report.rs checks it).
  var COLORS = {
    list: "#2e90fa", list_failed: "#fb6514", relist: "#06aed4", watch: "#b2ccff",
    frame: "#155eef", bookmark: "#98a2b3", error_frame: "#93370d", watch_end: "#475467",
    watch_failed: "#fdb022", reconcile_ok: "#12b76a", reconcile_requeue: "#7a5af8",
    reconcile_error: "#f04438", reconcile_cancelled: "#98a2b3", backoff: "#fec84b",
    requeue: "#d9d6fe", core: "#667085", note: "#eaaa08", fault: "#c11574", violation: "#55160c"
  };
  // Failures: never thinner than FAIL_MIN_PX, and marked with a triangle at the lane's top,
  // so a failed reconcile of zero width (reconciles take no time unless asked) still shows.
  var FAIL_KINDS = { list_failed: 1, error_frame: 1, watch_failed: 1, reconcile_error: 1, violation: 1 };
  var FAIL_MIN_PX = 5;
  // Kinds that are not activity: a run's quiet tail holds only these (bookmarks, the idle
  // watch that carries them and its renewal at timeoutSeconds, a requeue's wait), and the
  // run's closing "end: ..." note, so the fit view leaves them out.
  var QUIET_KINDS = { bookmark: 1, watch: 1, watch_end: 1, requeue: 1 };
  function quiet(i) {
    return QUIET_KINDS[kindName[i]] === 1 || (kindName[i] === "note" && /^end[: ]/.test(it.label[i] || ""));
  }
  var SPAN_KINDS = { list: 1, list_failed: 1, watch: 1, reconcile_ok: 1, reconcile_requeue: 1,
    reconcile_error: 1, reconcile_cancelled: 1, backoff: 1, requeue: 1 };
  // Items, as columns; kinds by name.
  var it = data.items;
  var n = it.lane.length;
  var kindName = it.kind.map(function (k) { return data.kinds[k]; });
  var lanes = data.lanes;
  // Each lane's first item and its longest item (to find spans that start before the view).
  var laneStart = new Array(lanes.length + 1).fill(n);
  for (var i = n - 1; i >= 0; i--) { laneStart[it.lane[i]] = i; }
  for (var l = lanes.length - 1; l >= 0; l--) { if (laneStart[l] > laneStart[l + 1]) { laneStart[l] = laneStart[l + 1]; } }
  var end = Math.max(data.end_ns, 1);
  // Where the activity ends: the last item that is not quiet (steps with no item count too).
  var activeEnd = 0;
  for (i = 0; i < n; i++) {
    if (!quiet(i) && it.t1[i] > activeEnd) { activeEnd = it.t1[i]; }
  }
  // ---- idle stretches ----
  // A stretch before the activity's end where nothing but quiet items happen (bookmarks, an
  // idle watch, a requeue's wait), longer than IDLE_MIN_SHARE of the activity and 10 s (the
  // pauses between a run's changes keep their real length),
  // is drawn narrow: IDLE_SHARE of the busy time at most, shaded and labelled with its real
  // length, so the default view shows what happened rather than the waits between. The
  // view works in display time (real time less what the stretches before it save), in which
  // `ut0` / `ut1` are the items' ends; the axis and every label stay in real time. "i"
  // (or the button) shows real time.
  var IDLE_MIN_SHARE = 0.25, IDLE_MIN_NS = 10e9, IDLE_SHARE = 0.04, IDLE_SHARE_ALL = 0.3;
  var compressIdle = true;
  var idle = []; // { t0, t1 } real, { u0, u1 } display; in time order
  var ut0 = new Float64Array(n), ut1 = new Float64Array(n);
  var laneMaxDurU = new Float64Array(lanes.length);
  var endU = end, fitEnd = end, fitStart = 0;
  // The idle stretch holding real time `t` (strictly inside), or -1.
  function idleAt(t) {
    var lo = 0, hi = idle.length;
    while (lo < hi) { var mid = (lo + hi) >>> 1; if (idle[mid].t1 <= t) { lo = mid + 1; } else { hi = mid; } }
    return lo < idle.length && t > idle[lo].t0 ? lo : -1;
  }
  // Real time to display time, and back.
  function toU(t) {
    var lo = 0, hi = idle.length;
    while (lo < hi) { var mid = (lo + hi) >>> 1; if (idle[mid].t1 <= t) { lo = mid + 1; } else { hi = mid; } }
    if (lo < idle.length && t > idle[lo].t0) {
      var g = idle[lo];
      return g.u0 + (t - g.t0) / (g.t1 - g.t0) * (g.u1 - g.u0);
    }
    return lo === 0 ? t : t - (idle[lo - 1].t1 - idle[lo - 1].u1);
  }
  function toT(u) {
    var lo = 0, hi = idle.length;
    while (lo < hi) { var mid = (lo + hi) >>> 1; if (idle[mid].u1 <= u) { lo = mid + 1; } else { hi = mid; } }
    if (lo < idle.length && u > idle[lo].u0) {
      var g = idle[lo];
      return g.t0 + (u - g.u0) / (g.u1 - g.u0) * (g.t1 - g.t0);
    }
    return lo === 0 ? u : u + (idle[lo - 1].t1 - idle[lo - 1].u1);
  }
  function buildTimes() {
    idle = [];
    if (compressIdle && activeEnd > 0) {
      var act = [];
      for (var q = 0; q < n; q++) { if (!quiet(q)) { act.push(q); } }
      act.sort(function (x, y) { return it.t0[x] - it.t0[y]; });
      var gaps = [], covered = 0, minGap = Math.max(activeEnd * IDLE_MIN_SHARE, IDLE_MIN_NS), saved = 0;
      for (q = 0; q < act.length; q++) {
        var a = act[q];
        if (it.t0[a] - covered > minGap) { gaps.push([covered, it.t0[a]]); saved += it.t0[a] - covered; }
        if (it.t1[a] > covered) { covered = it.t1[a]; }
      }
      var busy = Math.max(activeEnd - saved, 1e6);
      var width = busy * Math.min(IDLE_SHARE, IDLE_SHARE_ALL / Math.max(gaps.length, 1));
      var shift = 0;
      gaps.forEach(function (g) {
        var w = Math.min(width, g[1] - g[0]);
        idle.push({ t0: g[0], t1: g[1], u0: g[0] - shift, u1: g[0] - shift + w });
        shift += g[1] - g[0] - w;
      });
    }
    laneMaxDurU.fill(0);
    for (var j = 0; j < n; j++) {
      ut0[j] = toU(it.t0[j]);
      ut1[j] = toU(it.t1[j]);
      if (ut1[j] - ut0[j] > laneMaxDurU[it.lane[j]]) { laneMaxDurU[it.lane[j]] = ut1[j] - ut0[j]; }
    }
    endU = toU(end);
    // Fit to the activity when the quiet tail is most of the run; "fit" again shows it all.
    var activeU = toU(activeEnd);
    fitEnd = activeEnd > 0 && activeU < endU * 0.8 ? activeU * 1.05 : endU;
    fitStart = fitEnd < endU ? -fitEnd * 0.02 : 0; // a margin, so what happens at +0s shows
  }
  buildTimes();

  // Each step's first item (-1: none), for keyboard navigation.
  var stepFirst = new Array(data.step_line.length).fill(-1);
  for (i = 0; i < n; i++) {
    var st = it.step[i];
    if (stepFirst[st] === -1 || it.t0[i] < it.t0[stepFirst[st]]) { stepFirst[st] = i; }
  }
  // Steps as the summary counts them: the last line ("# end: ...") is the run's end, no step.
  var totalSteps = data.step_line.length;
  data.summary.counts.forEach(function (c) { if (c[0] === "steps" && c[1] <= totalSteps) { totalSteps = c[1]; } });
  // Failures and violations in time order, for "next / previous error".
  var failures = [];
  for (i = 0; i < n; i++) { if (FAIL_KINDS[kindName[i]] === 1) { failures.push(i); } }
  failures.sort(function (x, y) { return it.t0[x] - it.t0[y] || x - y; });
  // Rows: the lanes shown, in order. The lanes that are not parents come first and stay
  // pinned on top (when they fit in 40 % of the tallest plot); the parents scroll under them, and
  // the filter hides those whose name does not match.
  var rows = [], rowOf = new Array(lanes.length).fill(-1), pinnedRows = 0, filterText = "";
  var view = { a: 0, b: endU };
  var selected = -1;
  var currentStep = -1;
  var drawnLast = 0;

  var canvas = document.getElementById("canvas");
  var axis = document.getElementById("axis");
  var lanesEl = document.getElementById("lanes");
  var ctx = canvas.getContext("2d");
  var actx = axis.getContext("2d");

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) { e.className = cls; }
    if (text !== undefined) { e.textContent = text; }
    return e;
  }

  function fmt(ns) {
    var s = ns / 1e9;
    return (s < 0 ? "-" : "+") + Math.abs(s).toFixed(3) + "s";
  }

  function fmtSpan(ns) {
    var s = ns / 1e9;
    if (s >= 3600) { return (s / 3600).toFixed(2) + " h"; }
    if (s >= 60) { return (s / 60).toFixed(2) + " min"; }
    if (s >= 1) { return s.toFixed(3) + " s"; }
    return (s * 1000).toFixed(3) + " ms";
  }

  // ---- summary ----
  function summary() {
    var s = data.summary;
    document.getElementById("title").textContent = data.title;
    document.getElementById("mode").textContent = s.mode + ", ended at " + fmt(s.end_ns) + (s.cursor ? ", cursor rv=" + s.cursor : "");
    var counts = document.getElementById("counts");
    s.counts.forEach(function (c) {
      var e = el("span", "count");
      e.dataset.count = c[0];
      e.appendChild(document.createTextNode(c[0] + " "));
      e.appendChild(el("b", "", String(c[1])));
      counts.appendChild(e);
    });
    var inv = document.getElementById("invariants");
    var broken = 0;
    s.invariants.forEach(function (v) {
      // What must hold, with PASS or FAIL: the violation's own name ("store differs from
      // the world") is the tooltip, as a failing run reports it.
      var e = el("li", v.held ? "held" : "broken");
      e.appendChild(el("span", "mark", v.held ? "PASS" : "FAIL"));
      e.appendChild(el("span", "rule", v.rule));
      e.dataset.invariant = v.name;
      e.title = v.held ? "never seen: \u201c" + v.name + "\u201d" : "seen: \u201c" + v.name + "\u201d";
      if (!v.held) { broken++; }
      inv.appendChild(e);
    });
    document.getElementById("invariants-title").textContent =
      s.invariants.length + " invariants: " + (s.invariants.length - broken) + " pass, " + broken + " fail";
    var vl = document.getElementById("violations");
    s.violations.forEach(function (v) {
      var e = el("li", "violation", fmt(v.t_ns) + "  " + v.invariant + ": " + v.detail);
      e.addEventListener("click", function () {
        var w = Math.max((view.b - view.a) / 20, 1e6);
        setView(toU(v.t_ns) - w, toU(v.t_ns) + w);
      });
      vl.appendChild(e);
    });
    var paths = document.getElementById("paths");
    s.paths.forEach(function (p) { paths.appendChild(el("span", "count", p[0] + ": " + p[1])); });
    if (!s.paths.length) { document.getElementById("paths-box").hidden = true; }
    var legend = document.getElementById("legend");
    data.kinds.forEach(function (k) {
      var e = el("span", "");
      var sw = el("span", "swatch");
      sw.style.background = COLORS[k] || "#000";
      e.appendChild(sw);
      e.appendChild(document.createTextNode(k.replace(/_/g, " ")));
      legend.appendChild(e);
    });
  }

  // ---- lanes ----
  var laneEls = [];
  function laneLabels() {
    var pinnedEl = document.getElementById("lanes-pinned");
    var inner = document.getElementById("lanes-inner");
    var pinFrag = document.createDocumentFragment(), frag = document.createDocumentFragment();
    lanes.forEach(function (lane, i) {
      var e = el("div", "lane group-" + lane.group, lane.name);
      e.dataset.lane = lane.name;
      e.dataset.group = lane.group;
      e.dataset.items = String(laneStart[i + 1] - laneStart[i]);
      e.title = lane.name;
      laneEls.push(e);
      (lane.group === "parent" ? frag : pinFrag).appendChild(e);
    });
    pinnedEl.appendChild(pinFrag);
    inner.appendChild(frag);
    var h = Math.min(lanes.length * ROW + 16, Math.max(window.innerHeight * 0.62, 200));
    document.documentElement.style.setProperty("--plot-height", Math.round(h) + "px");
    layout();
  }

  // Rows from the lanes and the filter; the labels follow (hidden, striped, pinned).
  function layout() {
    var pinned = [], rest = [];
    lanes.forEach(function (lane, l) {
      if (lane.group !== "parent") { pinned.push(l); return; }
      var shown = !filterText || lane.name.toLowerCase().indexOf(filterText) >= 0;
      laneEls[l].classList.toggle("filtered", !shown);
      if (shown) { rest.push(l); }
    });
    // The tallest the plot may be (it is shorter only when every lane fits anyway).
    var plotH = Math.max(lanesEl.clientHeight || 0, window.innerHeight * 0.62, 200);
    pinnedRows = pinned.length > 0 && pinned.length * ROW <= plotH * 0.4 ? pinned.length : 0;
    document.getElementById("lanes-pinned").classList.toggle("pinned", pinnedRows > 0);
    rows = pinned.concat(rest);
    rowOf.fill(-1);
    rows.forEach(function (l, r) {
      rowOf[l] = r;
      laneEls[l].classList.toggle("odd", r % 2 === 1);
    });
    redraw();
  }

  // Where lane `l` is on the canvas, with the lanes scrolled to `top`; null when hidden.
  function laneY(l, top) {
    var r = rowOf[l];
    if (r < 0) { return null; }
    if (r < pinnedRows) { return r * ROW; }
    var y = r * ROW - top;
    return y + ROW <= pinnedRows * ROW ? null : y;
  }

  // Scrolls lane `l` into view (a filtered-out lane clears the filter first).
  function scrollToLane(l) {
    if (rowOf[l] < 0) { setFilter(""); }
    var r = rowOf[l];
    if (r < pinnedRows) { return; }
    var top = lanesEl.scrollTop, h = lanesEl.clientHeight || ROW, pinH = pinnedRows * ROW;
    if (r * ROW < top + pinH || (r + 1) * ROW > top + h) {
      lanesEl.scrollTop = Math.max(0, r * ROW - pinH - Math.max((h - pinH) / 2 - ROW, 0));
    }
  }

  function setFilter(text) {
    filterText = text.trim().toLowerCase();
    var input = document.getElementById("lane-filter");
    if (input.value.trim().toLowerCase() !== filterText) { input.value = text; }
    layout();
  }

  // ---- drawing ----
  function size(c, g) {
    var dpr = window.devicePixelRatio || 1;
    var w = c.clientWidth, h = c.clientHeight;
    if (c.width !== Math.round(w * dpr) || c.height !== Math.round(h * dpr)) {
      c.width = Math.round(w * dpr);
      c.height = Math.round(h * dpr);
    }
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    return { w: w, h: h };
  }

  // First index in [lo, hi) whose t0 >= t.
  function lowerBound(lo, hi, t) {
    while (lo < hi) {
      var mid = (lo + hi) >>> 1;
      if (ut0[mid] < t) { lo = mid + 1; } else { hi = mid; }
    }
    return lo;
  }

  function niceStep(span, px) {
    var raw = span / Math.max(px / 110, 1);
    var p = Math.pow(10, Math.floor(Math.log10(raw)));
    var m = raw / p;
    return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
  }

  // ---- overview ----
  // Sorted times, so each column of the overview is two binary searches per series.
  function sortedTimes(pred, field) {
    var out = [];
    for (var q = 0; q < n; q++) { if (pred(kindName[q])) { out.push(it[field][q]); } }
    out.sort(function (x, y) { return x - y; });
    return out;
  }
  function isReconcile(k) { return k.indexOf("reconcile_") === 0; }
  var ovFrames = sortedTimes(function (k) { return k === "frame" || k === "bookmark" || k === "error_frame"; }, "t0");
  var ovStarts = sortedTimes(isReconcile, "t0");
  var ovEnds = sortedTimes(isReconcile, "t1");
  var ovFails = sortedTimes(function (k) { return FAIL_KINDS[k] === 1; }, "t0");
  function countBelow(arr, t) {
    var lo = 0, hi = arr.length;
    while (lo < hi) { var mid = (lo + hi) >>> 1; if (arr[mid] < t) { lo = mid + 1; } else { hi = mid; } }
    return lo;
  }
  // The queue's depth at real time `t` (its last change at or before `t`).
  var queueSeries = data.queue || [];
  function queueAt(t) {
    var lo = 0, hi = queueSeries.length;
    while (lo < hi) { var mid = (lo + hi) >>> 1; if (queueSeries[mid][0] <= t) { lo = mid + 1; } else { hi = mid; } }
    return lo === 0 ? 0 : queueSeries[lo - 1][1];
  }
  var overviewEl = document.getElementById("overview");
  var octx = overviewEl.getContext("2d");
  var overviewLast = null;
  function drawOverview() {
    var s = size(overviewEl, octx);
    octx.clearRect(0, 0, s.w, s.h);
    var bin = 3, cols = Math.max(1, Math.floor(s.w / bin));
    var span = view.b - view.a, per = span / cols;
    var frames = [], starts = [], flight = [], fails = [], queued = [];
    var maxRate = 0, maxFlight = 0, maxQueue = 0;
    for (var c = 0; c < cols; c++) {
      // Each column in real time (one across an idle stretch covers more of it).
      var t0 = toT(view.a + c * per), t1 = toT(view.a + (c + 1) * per), mid = toT(view.a + (c + 0.5) * per);
      var secs = Math.max(t1 - t0, 1) / 1e9;
      frames.push((countBelow(ovFrames, t1) - countBelow(ovFrames, t0)) / secs);
      starts.push((countBelow(ovStarts, t1) - countBelow(ovStarts, t0)) / secs);
      // Started by the column's middle and not ended by it: running then.
      flight.push(Math.max(0, countBelow(ovStarts, mid + 1) - countBelow(ovEnds, mid + 1)));
      fails.push(countBelow(ovFails, t1) - countBelow(ovFails, t0));
      queued.push(queueAt(mid));
      maxRate = Math.max(maxRate, frames[c], starts[c]);
      maxFlight = Math.max(maxFlight, flight[c]);
      maxQueue = Math.max(maxQueue, queued[c]);
    }
    var h = s.h - 2, drawnCols = 0;
    octx.fillStyle = IDLE_FILL;
    idleInView(s.w).forEach(function (v) { octx.fillRect(v[1], 0, v[2] - v[1], s.h); });
    for (c = 0; c < cols; c++) {
      var x = c * bin;
      if (maxFlight > 0 && flight[c] > 0) {
        octx.fillStyle = "rgba(18,183,106,0.35)";
        var fh = flight[c] / maxFlight * h;
        octx.fillRect(x, s.h - fh, bin, fh);
      }
      if (maxRate > 0 && frames[c] > 0) {
        octx.fillStyle = "#155eef";
        var yh = Math.max(frames[c] / maxRate * h, 1);
        octx.fillRect(x, s.h - yh, 1, yh);
      }
      if (maxRate > 0 && starts[c] > 0) {
        octx.fillStyle = "#067647";
        var rh = Math.max(starts[c] / maxRate * h, 1);
        octx.fillRect(x + 1, s.h - rh, 1, rh);
      }
      if (fails[c] > 0) {
        octx.fillStyle = "#f04438";
        octx.fillRect(x, 0, bin, 4);
      }
      if (frames[c] > 0 || starts[c] > 0 || flight[c] > 0 || fails[c] > 0 || queued[c] > 0) { drawnCols++; }
    }
    // The queue's depth: a line on a scale of its own, over the bars.
    if (maxQueue > 0) {
      octx.strokeStyle = "#7a5af8";
      octx.lineWidth = 1.5;
      octx.beginPath();
      // Drawn where keys wait only: an empty queue is no line at all.
      for (c = 0; c < cols; c++) {
        if (queued[c] === 0) { continue; }
        var qy = s.h - 1 - queued[c] / maxQueue * (h - 5);
        if (c === 0 || queued[c - 1] === 0) { octx.moveTo(c * bin, qy); } else { octx.lineTo(c * bin, qy); }
        octx.lineTo((c + 1) * bin, qy);
      }
      octx.stroke();
      octx.lineWidth = 1;
    }
    var fmtRate = function (r) { return r >= 100 ? Math.round(r) : r >= 10 ? r.toFixed(0) : r.toFixed(1); };
    document.getElementById("overview-max").textContent =
      "top: " + fmtRate(maxRate) + "/s · " + maxFlight + " in flight · " + maxQueue + " queued";
    overviewLast = { cols: cols, drawn: drawnCols, max_rate: maxRate, max_in_flight: maxFlight, max_queued: maxQueue,
      frames: ovFrames.length, reconciles: ovStarts.length, failures: fails.reduce(function (x, y) { return x + y; }, 0) };
  }

  // The idle stretches in view: [index, x0, x1] on a canvas `w` wide.
  function idleInView(w) {
    var out = [], scale = w / (view.b - view.a);
    for (var g = 0; g < idle.length; g++) {
      if (idle[g].u1 < view.a || idle[g].u0 > view.b) { continue; }
      out.push([g, (idle[g].u0 - view.a) * scale, (idle[g].u1 - view.a) * scale]);
    }
    return out;
  }
  var IDLE_FILL = "rgba(152,162,179,0.22)";
  var idleLabelled = 0;
  function drawAxis() {
    var s = size(axis, actx);
    actx.clearRect(0, 0, s.w, s.h);
    var span = view.b - view.a, scale = s.w / span;
    var step = niceStep(span, s.w);
    actx.strokeStyle = "#d9dde5";
    actx.font = "11px system-ui, sans-serif";
    actx.textBaseline = "middle";
    var digits = Math.max(0, Math.min(9, -Math.floor(Math.log10(step / 1e9))));
    // Idle stretches first: shaded and named with their real length, the name centred on the
    // stretch (unless it would cover the previous stretch's name); tick labels keep clear.
    var shown = idleInView(s.w), saved = 0, labelEnd = -Infinity, taken = [];
    idleLabelled = 0;
    actx.fillStyle = "#eaecf0";
    shown.forEach(function (v) { actx.fillRect(Math.max(v[1], 0), 0, Math.max(Math.min(v[2], s.w) - Math.max(v[1], 0), 1), s.h); });
    shown.forEach(function (v) {
      var x0 = Math.max(v[1], 0), x1 = Math.min(v[2], s.w);
      var text = "idle " + fmtSpan(idle[v[0]].t1 - idle[v[0]].t0);
      saved += idle[v[0]].t1 - idle[v[0]].t0;
      var tw = actx.measureText(text).width + 8;
      var lx = Math.min(Math.max((x0 + x1) / 2 - tw / 2, 0), s.w - tw);
      if (lx >= labelEnd) {
        actx.fillStyle = "#eaecf0";
        actx.fillRect(lx, 0, tw, s.h);
        actx.fillStyle = "#344054";
        actx.fillText(text, lx + 4, s.h / 2 - 2);
        labelEnd = lx + tw + 4;
        taken.push([lx, lx + tw]);
        idleLabelled++;
      }
    });
    // Real-time ticks, outside the idle stretches (inside one the axis does not run at its
    // pace), their labels clear of the stretches'.
    var t = Math.ceil(toT(view.a) / step) * step, last = toT(view.b), ticks = 0;
    while (t <= last && ticks < 1000) {
      var g = idleAt(t);
      if (g >= 0) { t = Math.ceil(idle[g].t1 / step) * step; continue; }
      var x = (toU(t) - view.a) * scale;
      actx.beginPath();
      actx.moveTo(x + 0.5, s.h - 6);
      actx.lineTo(x + 0.5, s.h);
      actx.stroke();
      var secs = t / 1e9;
      var tickText = (secs < 0 ? "-" : "+") + Math.abs(secs).toFixed(digits) + "s";
      var tx1 = x + 3 + actx.measureText(tickText).width;
      var free = taken.every(function (r) { return tx1 < r[0] || x + 3 > r[1]; });
      actx.fillStyle = "#667085";
      if (free) { actx.fillText(tickText, x + 3, s.h / 2 - 2); }
      ticks++;
      t += step;
    }
    var note = "";
    if (fitEnd < endU && view.a === fitStart && view.b === fitEnd) {
      note = "  · fitted to the activity, until " + fmt(activeEnd) + ": after it, until " + fmt(end) +
        ", only bookmarks and watch renewals (fit again, or 0 twice, for the whole run)";
    }
    if (shown.length) {
      note += "  · " + shown.length + (shown.length === 1 ? " idle stretch" : " idle stretches") +
        " (" + fmtSpan(saved) + ") drawn narrow, shaded (i: real time)";
    }
    var ra = toT(view.a), rb = toT(view.b);
    document.getElementById("range").textContent = fmt(ra) + " … " + fmt(rb) + "  (" + fmtSpan(rb - ra) + ")" + note;
  }

  // Real time or idle stretches drawn narrow ("i"); the view keeps the same real window.
  function setCompressIdle(on) {
    var ra = toT(view.a), rb = toT(view.b), atFit = view.a === fitStart && view.b === fitEnd;
    compressIdle = on;
    buildTimes();
    var button = document.getElementById("idle-toggle");
    button.textContent = on ? "idle: narrow" : "idle: real";
    button.disabled = !on && idle.length === 0 && !idleFound;
    if (atFit) { setView(fitStart, fitEnd); } else { setView(toU(ra), toU(rb)); }
  }

  // Where a thin failure is drawn: the whole pixel column nearest its centre, kept inside the
  // canvas so that a failure at the run's first or last instant is not cut in half.
  function failX(x0, x1, w) {
    return Math.min(Math.max(Math.round((x0 + x1) / 2), 3), Math.floor(w) - 4);
  }

  function draw() {
    var s = size(canvas, ctx);
    ctx.clearRect(0, 0, s.w, s.h);
    var top = lanesEl.scrollTop;
    var span = view.b - view.a;
    var scale = s.w / span;
    var pinH = pinnedRows * ROW;
    var firstRow = Math.max(pinnedRows, Math.floor((top + pinH) / ROW));
    var lastRow = Math.min(rows.length - 1, Math.floor((top + s.h) / ROW));
    var visible = [];
    for (var pr = 0; pr < pinnedRows; pr++) { visible.push(pr); }
    for (var vr = firstRow; vr <= lastRow; vr++) { visible.push(vr); }
    var drawn = 0;
    ctx.font = "11px system-ui, sans-serif";
    ctx.textBaseline = "middle";
    var lastPx = {};
    var idleShown = idleInView(s.w);
    for (var v = 0; v < visible.length; v++) {
      var row = visible[v];
      var l = rows[row];
      if (v === pinnedRows && pinnedRows > 0) {
        // The parents scroll under the pinned lanes: nothing of theirs is drawn there.
        ctx.save();
        ctx.beginPath();
        ctx.rect(0, pinH, s.w, s.h - pinH);
        ctx.clip();
      }
      var y = laneY(l, top);
      if (y === null) { continue; }
      if (row % 2 === 1) { ctx.fillStyle = "#f5f7fa"; ctx.fillRect(0, y, s.w, ROW); }
      ctx.fillStyle = IDLE_FILL;
      for (var ig = 0; ig < idleShown.length; ig++) { ctx.fillRect(idleShown[ig][1], y, idleShown[ig][2] - idleShown[ig][1], ROW); }
      var lo = laneStart[l], hi = laneStart[l + 1];
      var i0 = lowerBound(lo, hi, view.a - laneMaxDurU[l]);
      lastPx = {};
      var marks = [];
      for (var i = i0; i < hi && ut0[i] <= view.b; i++) {
        if (ut1[i] < view.a) { continue; }
        var k = kindName[i];
        var x0 = (ut0[i] - view.a) * scale;
        var x1 = (ut1[i] - view.a) * scale;
        var px = Math.floor(x0);
        var span_ = SPAN_KINDS[k] === 1;
        if (x1 - x0 < 1) {
          if (lastPx[k] === px) { continue; }
          lastPx[k] = px;
        }
        drawn++;
        ctx.fillStyle = COLORS[k] || "#000";
        if (!span_ || x1 - x0 < 1.5) {
          // Marks (and spans too short to see) go on top of the lane's spans.
          marks.push(i, x0);
          continue;
        }
        if (span_) {
          var cx0 = Math.max(x0, -1), cx1 = Math.min(x1, s.w + 1);
          var h = (k === "backoff" || k === "requeue" || k === "watch") ? ROW - 10 : ROW - 6;
          ctx.fillRect(cx0, y + (ROW - h) / 2, Math.max(cx1 - cx0, 1.5), h);
          var label = it.label[i];
          if (label && cx1 - cx0 > 30) {
            ctx.save();
            ctx.beginPath();
            ctx.rect(cx0, y, cx1 - cx0, ROW);
            ctx.clip();
            ctx.fillStyle = (k === "watch" || k === "backoff" || k === "requeue") ? "#1d2330" : "#ffffff";
            ctx.fillText(label, cx0 + 3, y + ROW / 2);
            ctx.restore();
          }
        }
      }
      var labelEnd = -Infinity;
      for (var m = 0; m < marks.length; m += 2) {
        var mk = kindName[marks[m]];
        ctx.fillStyle = COLORS[mk] || "#000";
        if (FAIL_KINDS[mk] === 1) { continue; }
        ctx.fillRect(marks[m + 1] - 1, y + 3, 2, ROW - 6);
        // A fault is named beside its tick, where the previous name leaves room.
        if (mk === "fault" && it.label[marks[m]] && marks[m + 1] + 3 > labelEnd) {
          ctx.fillText(it.label[marks[m]], marks[m + 1] + 3, y + ROW / 2);
          labelEnd = marks[m + 1] + 3 + ctx.measureText(it.label[marks[m]]).width + 6;
        }
      }
      // Failures last, on top of everything in the lane: at least FAIL_MIN_PX wide, with a
      // triangle above.
      for (var f = i0; f < hi && ut0[f] <= view.b; f++) {
        var fk = kindName[f];
        if (FAIL_KINDS[fk] !== 1 || ut1[f] < view.a) { continue; }
        var fx0 = (ut0[f] - view.a) * scale, fx1 = (ut1[f] - view.a) * scale;
        if (fx1 - fx0 >= FAIL_MIN_PX) { continue; } // drawn as a span already
        var fc = failX(fx0, fx1, s.w);
        ctx.fillStyle = COLORS[fk] || "#000";
        ctx.fillRect(fc - 2, y + 4, FAIL_MIN_PX, ROW - 6);
        ctx.beginPath();
        ctx.moveTo(fc - 3.5, y);
        ctx.lineTo(fc + 4.5, y);
        ctx.lineTo(fc + 0.5, y + 4);
        ctx.closePath();
        ctx.fill();
      }
    }
    if (pinnedRows > 0 && visible.length > pinnedRows) { ctx.restore(); }
    if (pinnedRows > 0) {
      ctx.fillStyle = "#98a2b3";
      ctx.fillRect(0, pinH - 1, s.w, 1);
    }
    var sy = selected >= 0 ? laneY(it.lane[selected], top) : null;
    if (sy !== null) {
      var sx0 = (ut0[selected] - view.a) * scale, sx1 = (ut1[selected] - view.a) * scale;
      ctx.strokeStyle = "#101828";
      ctx.lineWidth = 2;
      ctx.strokeRect(Math.max(sx0, -2) - 2, sy + 1, Math.min(sx1, s.w + 2) - Math.max(sx0, -2) + 4, ROW - 2);
      ctx.lineWidth = 1;
    }
    if (currentStep >= 0) {
      var cx = (toU(data.step_t[currentStep]) - view.a) * scale;
      ctx.strokeStyle = "rgba(16,24,40,0.35)";
      ctx.beginPath();
      ctx.moveTo(cx + 0.5, 0);
      ctx.lineTo(cx + 0.5, s.h);
      ctx.stroke();
    }
    drawnLast = drawn;
    drawAxis();
    drawOverview();
  }

  var pending = false;
  function redraw() {
    if (pending) { return; }
    pending = true;
    requestAnimationFrame(function () { pending = false; draw(); });
  }

  function setView(a, b) {
    var minSpan = 1e3; // 1 µs
    if (b - a < minSpan) { var c = (a + b) / 2; a = c - minSpan / 2; b = c + minSpan / 2; }
    var pad = endU * 0.02;
    if (b - a > endU + 2 * pad) { a = -pad; b = endU + pad; }
    if (a < -pad) { b += -pad - a; a = -pad; }
    if (b > endU + pad) { a -= b - endU - pad; b = endU + pad; }
    view.a = a; view.b = b;
    redraw();
  }

  function zoom(factor, atX) {
    var w = canvas.clientWidth || 1;
    var t = view.a + (atX === undefined ? 0.5 : atX / w) * (view.b - view.a);
    setView(t - (t - view.a) * factor, t + (view.b - t) * factor);
  }

  // ---- selection ----
  function hit(x, y) {
    var row = y < pinnedRows * ROW ? Math.floor(y / ROW) : Math.floor((y + lanesEl.scrollTop) / ROW);
    if (row < 0 || row >= rows.length) { return -1; }
    var lane = rows[row];
    var w = canvas.clientWidth || 1;
    var scale = w / (view.b - view.a);
    var slack = 4 / scale;
    var t = view.a + x / scale;
    var lo = laneStart[lane], hi = laneStart[lane + 1];
    var best = -1, bestDist = Infinity, bestWidth = Infinity;
    for (var i = lowerBound(lo, hi, t - slack - laneMaxDurU[lane]); i < hi && ut0[i] <= t + slack; i++) {
      var x0 = (ut0[i] - view.a) * scale, x1 = (ut1[i] - view.a) * scale;
      var dist = x < x0 ? x0 - x : x > x1 ? x - x1 : 0;
      if (dist > 4) { continue; }
      var width = x1 - x0;
      if (dist < bestDist || (dist === bestDist && width < bestWidth)) { best = i; bestDist = dist; bestWidth = width; }
    }
    return best;
  }

  function showStep(step) {
    if (step < 0 || step >= data.step_line.length) { return; }
    currentStep = step;
    document.getElementById("step-line").textContent = data.step_line[step];
    document.getElementById("step-index").textContent =
      step < totalSteps ? "step " + (step + 1) + " of " + totalSteps : "the run's end, after step " + totalSteps;
  }

  // The address remembers the step (#step=N, 1-based), so a reload or a shared link opens on it.
  function rememberStep(step) {
    if (selfchecking || step < 0) { return; }
    history.replaceState(null, "", "#step=" + (step + 1));
  }

  // Keyboard and button navigation: step `step`'s first item selected (the header names it),
  // its lane scrolled into view and the view moved to it; a step with no item on the timeline
  // clears the selection and says so.
  function goToStep(step) {
    if (step < 0 || step >= data.step_line.length) { return; }
    var i = stepFirst[step];
    if (i >= 0) {
      select(i);
      scrollToLane(it.lane[i]);
      var w = view.b - view.a;
      if (ut0[i] < view.a || ut0[i] > view.b) { setView(ut0[i] - w / 2, ut0[i] + w / 2); }
    } else {
      selected = -1;
      document.getElementById("detail-head").textContent = "step " + (step + 1) + ": nothing on the timeline";
      var endLine = document.getElementById("end-step-line");
      endLine.hidden = true;
      endLine.textContent = "";
      showStep(step);
    }
    rememberStep(step);
    redraw();
  }

  // An item in words: its lane, kind, label and time (the header, and the tooltip).
  function describe(i) {
    var head = lanes[it.lane[i]].name + " · " + kindName[i].replace(/_/g, " ") + (it.label[i] ? " · " + it.label[i] : "") + " · " + fmt(it.t0[i]);
    if (it.t1[i] > it.t0[i]) { head += " … " + fmt(it.t1[i]) + " (" + fmtSpan(it.t1[i] - it.t0[i]) + ")"; }
    return head;
  }

  // The next (dir 1) or previous (-1) failure or violation from the selection (or from the
  // view's start): selected, its lane scrolled in and the view centred on it.
  function goToError(dir) {
    if (!failures.length) { return -1; }
    var pos = failures.indexOf(selected);
    var next;
    if (pos >= 0) {
      next = Math.min(Math.max(pos + dir, 0), failures.length - 1);
    } else {
      var t = selected >= 0 ? ut0[selected] : view.a;
      next = -1;
      for (var q = 0; q < failures.length; q++) {
        if (dir > 0 ? ut0[failures[q]] >= t : ut0[failures[q]] <= t) {
          next = q;
          if (dir > 0) { break; }
        }
      }
      if (next < 0) { next = dir > 0 ? failures.length - 1 : 0; }
    }
    var i = failures[next];
    select(i);
    scrollToLane(it.lane[i]);
    var w = view.b - view.a;
    if (ut0[i] < view.a + w * 0.05 || ut0[i] > view.b - w * 0.05) { setView(ut0[i] - w / 2, ut0[i] + w / 2); }
    return i;
  }

  var selfchecking = false;
  function select(i) {
    selected = i;
    var endLine = document.getElementById("end-step-line");
    if (i < 0) { redraw(); return; }
    document.getElementById("detail-head").textContent = describe(i);
    showStep(it.step[i]);
    rememberStep(it.step[i]);
    if (it.end_step[i] !== it.step[i]) {
      endLine.hidden = false;
      endLine.textContent = data.step_line[it.end_step[i]];
    } else {
      endLine.hidden = true;
      endLine.textContent = "";
    }
    redraw();
  }

  // ---- input ----
  var drag = null;
  canvas.addEventListener("mousedown", function (e) {
    drag = { x: e.clientX, y: e.clientY, a: view.a, b: view.b, top: lanesEl.scrollTop, moved: false };
  });
  window.addEventListener("mousemove", function (e) {
    if (!drag) { return; }
    var dx = e.clientX - drag.x, dy = e.clientY - drag.y;
    if (Math.abs(dx) + Math.abs(dy) > 3) { drag.moved = true; canvas.classList.add("dragging"); }
    if (drag.moved) {
      var dt = dx / (canvas.clientWidth || 1) * (drag.b - drag.a);
      setView(drag.a - dt, drag.b - dt);
      lanesEl.scrollTop = drag.top - dy;
    }
  });
  window.addEventListener("mouseup", function () {
    canvas.classList.remove("dragging");
    setTimeout(function () { drag = null; }, 0);
  });
  canvas.addEventListener("click", function (e) {
    if (drag && drag.moved) { return; }
    var r = canvas.getBoundingClientRect();
    select(hit(e.clientX - r.left, e.clientY - r.top));
    canvas.focus();
  });
  // Hover: what is under the pointer, in words, beside it.
  var tooltip = document.getElementById("tooltip");
  function hover(x, y) {
    var i = drag && drag.moved ? -1 : hit(x, y);
    if (i < 0) { tooltip.hidden = true; return -1; }
    tooltip.textContent = describe(i);
    tooltip.hidden = false;
    var w = canvas.clientWidth || 1;
    tooltip.style.left = Math.min(x + 12, Math.max(w - tooltip.offsetWidth - 4, 0)) + "px";
    tooltip.style.top = (y + 16) + "px";
    return i;
  }
  canvas.addEventListener("mousemove", function (e) {
    var r = canvas.getBoundingClientRect();
    hover(e.clientX - r.left, e.clientY - r.top);
  });
  canvas.addEventListener("mouseleave", function () { tooltip.hidden = true; });
  document.getElementById("lane-filter").addEventListener("input", function (e) { setFilter(e.target.value); });
  document.getElementById("prev-error").addEventListener("click", function () { goToError(-1); });
  document.getElementById("next-error").addEventListener("click", function () { goToError(1); });
  if (!failures.length) {
    document.getElementById("prev-error").disabled = true;
    document.getElementById("next-error").disabled = true;
  }
  // Fit: to the activity first; when the view is already that, to the whole run.
  function fit() {
    if (fitEnd < endU && !(view.a === fitStart && view.b === fitEnd)) {
      setView(fitStart, fitEnd);
    } else {
      setView(0, endU);
    }
  }
  canvas.addEventListener("dblclick", fit);
  canvas.addEventListener("wheel", function (e) {
    e.preventDefault();
    var r = canvas.getBoundingClientRect();
    if (e.shiftKey) { lanesEl.scrollTop += e.deltaY || e.deltaX; return; }
    if (Math.abs(e.deltaX) > Math.abs(e.deltaY)) {
      var dt = e.deltaX / (canvas.clientWidth || 1) * (view.b - view.a);
      setView(view.a + dt, view.b + dt);
      return;
    }
    zoom(Math.pow(1.0015, e.deltaY), e.clientX - r.left);
  }, { passive: false });
  lanesEl.addEventListener("scroll", redraw);
  window.addEventListener("resize", redraw);
  document.getElementById("zoom-in").addEventListener("click", function () { zoom(0.5); });
  document.getElementById("zoom-out").addEventListener("click", function () { zoom(2); });
  document.getElementById("fit").addEventListener("click", fit);
  document.getElementById("idle-toggle").addEventListener("click", function () { setCompressIdle(!compressIdle); });
  var idleFound = idle.length > 0;
  if (!idleFound) { document.getElementById("idle-toggle").disabled = true; }
  document.getElementById("prev-step").addEventListener("click", function () { goToStep(currentStep - 1); });
  document.getElementById("next-step").addEventListener("click", function () { goToStep(currentStep + 1); });
  window.addEventListener("keydown", function (e) {
    if (e.target && e.target.id === "lane-filter") {
      if (e.key === "Escape") { setFilter(""); e.target.blur(); }
      return;
    }
    var span = view.b - view.a;
    switch (e.key) {
      case "/": document.getElementById("lane-filter").focus(); break;
      case "e": goToError(1); break;
      case "E": goToError(-1); break;
      case "+": case "=": zoom(0.5); break;
      case "-": zoom(2); break;
      case "0": fit(); break;
      case "i": setCompressIdle(!compressIdle); break;
      case "ArrowLeft": goToStep(currentStep - 1); break;
      case "ArrowRight": goToStep(currentStep + 1); break;
      case "a": setView(view.a - span / 5, view.b - span / 5); break;
      case "d": setView(view.a + span / 5, view.b + span / 5); break;
      default: return;
    }
    e.preventDefault();
  });

  // ---- self-check (#selfcheck): what a person would check, done by the page itself ----
  function selfcheck(readyMs) {
    var out = { ready_ms: Math.round(readyMs), lanes: [], groups: {}, items: n, steps: data.step_line.length,
      counts: {}, invariants: {}, drawn_at_fit: drawnLast, clicks: 0, click_failures: [], zoom_ok: false, errors: [] };
    document.querySelectorAll("#lanes .lane").forEach(function (e) {
      out.lanes.push(e.dataset.lane);
      out.groups[e.dataset.group] = (out.groups[e.dataset.group] || 0) + 1;
    });
    document.querySelectorAll("#counts .count").forEach(function (e) {
      out.counts[e.dataset.count] = Number(e.querySelector("b").textContent);
    });
    document.querySelectorAll("#invariants li").forEach(function (e) {
      out.invariants[e.dataset.invariant] = e.className === "held";
    });
    selfchecking = true;
    out.fit = { a: toT(view.a), b: toT(view.b), end: end, active_end: activeEnd, note: document.getElementById("range").textContent };
    // Idle stretches in the default view: how many, how long in real time, and how much of the
    // width they take.
    var inView = idleInView(canvas.clientWidth), share = 0, realIdle = 0;
    inView.forEach(function (v) {
      var g = idle[v[0]];
      share += (Math.min(g.u1, view.b) - Math.max(g.u0, view.a)) / (view.b - view.a);
      realIdle += g.t1 - g.t0;
    });
    out.idle = { stretches: idle.length, in_view: inView.length, labelled: idleLabelled, real_ns: realIdle, width_share: share };
    out.invariant_marks = {};
    document.querySelectorAll("#invariants li").forEach(function (e) {
      out.invariant_marks[e.dataset.invariant] = e.querySelector(".mark").textContent + " " + e.querySelector(".rule").textContent;
    });
    // Failures in the default view: each one's centre and 2 px either side must be its colour.
    out.failures = { total: 0, visible: 0, missing: [] };
    var dpr = window.devicePixelRatio || 1;
    function hex(x, y) {
      var p = ctx.getImageData(Math.round(x * dpr), Math.round(y * dpr), 1, 1).data;
      return "#" + [p[0], p[1], p[2]].map(function (c) { return (c < 16 ? "0" : "") + c.toString(16); }).join("");
    }
    for (var fi = 0; fi < n && out.failures.total < 200; fi++) {
      if (FAIL_KINDS[kindName[fi]] !== 1 || ut0[fi] > view.b || ut1[fi] < view.a) { continue; }
      out.failures.total++;
      scrollToLane(it.lane[fi]);
      draw();
      var sc = canvas.clientWidth / (view.b - view.a);
      var fx0c = (ut0[fi] - view.a) * sc, fx1c = (ut1[fi] - view.a) * sc;
      var fcx = fx1c - fx0c >= FAIL_MIN_PX ? (Math.max(fx0c, 0) + Math.min(fx1c, canvas.clientWidth)) / 2 : failX(fx0c, fx1c, canvas.clientWidth);
      var fcy = laneY(it.lane[fi], lanesEl.scrollTop) + ROW / 2;
      var want = COLORS[kindName[fi]];
      var got = [hex(fcx - 2, fcy), hex(fcx, fcy), hex(fcx + 2, fcy)];
      if (got.every(function (g) { return g === want; })) { out.failures.visible++; } else {
        out.failures.missing.push(lanes[it.lane[fi]].name + " " + kindName[fi] + " at " + fmt(ut0[fi]) + ": " + got.join(",") + " not " + want);
      }
    }
    lanesEl.scrollTop = 0;
    draw();
    // Keyboard: from a step whose next step has an item, ArrowRight selects that item, names
    // it in the header, moves the counter and the address; ArrowLeft comes back.
    out.keyboard = { tried: false, problems: [] };
    var from = -1;
    for (var ks = 1; ks + 1 < stepFirst.length; ks++) { if (stepFirst[ks] >= 0 && stepFirst[ks + 1] >= 0 && stepFirst[ks + 1] !== stepFirst[ks]) { from = ks; break; } }
    if (from >= 0) {
      out.keyboard.tried = true;
      selfchecking = false;
      var expect = function (step, what) {
        var want = stepFirst[step];
        var head = document.getElementById("detail-head").textContent;
        if (currentStep !== step) { out.keyboard.problems.push(what + ": current step " + currentStep + ", not " + step); }
        if (selected !== want) { out.keyboard.problems.push(what + ": selected " + selected + ", not " + want); }
        if (head.indexOf(lanes[it.lane[want]].name + " · ") !== 0 || head.indexOf(fmt(it.t0[want])) < 0) { out.keyboard.problems.push(what + ": header " + head); }
        var idx = document.getElementById("step-index").textContent;
        if (idx !== "step " + (step + 1) + " of " + totalSteps) { out.keyboard.problems.push(what + ": counter " + idx); }
        if (location.hash !== "#step=" + (step + 1)) { out.keyboard.problems.push(what + ": address " + location.hash); }
      };
      goToStep(from);
      expect(from, "start");
      window.dispatchEvent(new KeyboardEvent("keydown", { key: "ArrowRight", bubbles: true, cancelable: true }));
      expect(from + 1, "ArrowRight");
      window.dispatchEvent(new KeyboardEvent("keydown", { key: "ArrowLeft", bubbles: true, cancelable: true }));
      expect(from, "ArrowLeft");
      selfchecking = true;
      history.replaceState(null, "", "#selfcheck");
      select(-1);
      setView(fitStart, fitEnd);
    }
    // Interaction (issue 32): what a person does with the mouse and the keys, each checked
    // against what the page must then show.
    out.overview = overviewLast;
    out.interaction = { problems: [], pinned_rows: pinnedRows, failures: failures.length, faults: [] };
    var ip = out.interaction.problems;
    // "i": real time (no stretch drawn narrow, the same real window), and back.
    if (idle.length) {
      setView(fitStart, fitStart + (fitEnd - fitStart) * 0.999); // not the fit: that is its own, in each
      var was = idle.length, ra0 = toT(view.a), rb0 = toT(view.b);
      window.dispatchEvent(new KeyboardEvent("keydown", { key: "i", bubbles: true, cancelable: true }));
      var label = document.getElementById("idle-toggle").textContent;
      if (idle.length !== 0 || label !== "idle: real") { ip.push("i: " + idle.length + " idle stretches still narrow, button " + label); }
      if (Math.abs(toT(view.b) - toT(view.a) - (rb0 - ra0)) > (rb0 - ra0) * 0.05) { ip.push("i: the real window went from " + fmtSpan(rb0 - ra0) + " to " + fmtSpan(toT(view.b) - toT(view.a))); }
      window.dispatchEvent(new KeyboardEvent("keydown", { key: "i", bubbles: true, cancelable: true }));
      if (idle.length !== was) { ip.push("i again: " + idle.length + " idle stretches, not " + was); }
      setView(fitStart, fitEnd);
    }
    for (var fl = 0; fl < n; fl++) { if (kindName[fl] === "fault") { out.interaction.faults.push(lanes[it.lane[fl]].name + ": " + it.label[fl]); } }
    // Hover: the tooltip over an item says what the header would.
    var hi0 = laneStart[rows[0]];
    if (hi0 < laneStart[rows[0] + 1]) {
      var hw = Math.max(ut1[hi0] - ut0[hi0], 2e6);
      setView(ut0[hi0] - hw * 0.1, ut0[hi0] + hw * 1.1);
      draw();
      var hr = canvas.getBoundingClientRect();
      var hx = (ut0[hi0] - view.a) / (view.b - view.a) * canvas.clientWidth + (ut1[hi0] > ut0[hi0] ? 2 : 0);
      canvas.dispatchEvent(new MouseEvent("mousemove", { clientX: hr.left + hx, clientY: hr.top + laneY(rows[0], lanesEl.scrollTop) + ROW / 2, bubbles: true }));
      if (tooltip.hidden || tooltip.textContent !== describe(hi0)) { ip.push("hover: tooltip " + (tooltip.hidden ? "hidden" : tooltip.textContent) + ", not " + describe(hi0)); }
      canvas.dispatchEvent(new MouseEvent("mousemove", { clientX: hr.left + 1, clientY: hr.bottom + 50, bubbles: true }));
      canvas.dispatchEvent(new MouseEvent("mouseleave", { bubbles: true }));
      if (!tooltip.hidden) { ip.push("hover: the tooltip stayed after the pointer left"); }
    }
    // Pinned lanes: with the parents scrolled to the end, the first lane is still on top.
    lanesEl.scrollTop = lanesEl.scrollHeight;
    draw();
    if (pinnedRows > 0) {
      var dy = laneEls[rows[0]].getBoundingClientRect().top - lanesEl.getBoundingClientRect().top;
      if (Math.abs(dy) > 1 || laneY(rows[0], lanesEl.scrollTop) !== 0) { ip.push("pinned: the first lane moved by " + dy + " px when the parents scrolled"); }
    }
    lanesEl.scrollTop = 0;
    // The filter: the last parent's name keeps the parents that contain it, and only those.
    var parents = lanes.filter(function (ln) { return ln.group === "parent"; });
    if (parents.length) {
      var word = parents[parents.length - 1].name;
      var want = parents.filter(function (ln) { return ln.name.toLowerCase().indexOf(word.toLowerCase()) >= 0; }).length;
      var input = document.getElementById("lane-filter");
      input.value = word;
      input.dispatchEvent(new Event("input", { bubbles: true }));
      var shownParents = document.querySelectorAll("#lanes-inner .lane:not(.filtered)").length;
      if (shownParents !== want || rows.length !== lanes.length - parents.length + want) { ip.push("filter " + word + ": " + shownParents + " parent lanes shown, " + rows.length + " rows, not " + want); }
      input.value = "";
      input.dispatchEvent(new Event("input", { bubbles: true }));
      if (rows.length !== lanes.length) { ip.push("filter cleared: " + rows.length + " rows of " + lanes.length); }
    }
    // Next / previous error: E from the run's start selects the first failure, again the
    // second, shift+E back; each one's lane shown and its time in view.
    if (failures.length) {
      select(-1);
      setView(-endU * 0.02, endU * 0.1);
      var press = function (key) { window.dispatchEvent(new KeyboardEvent("keydown", { key: key, bubbles: true, cancelable: true })); };
      var expectErr = function (q, what) {
        var fi2 = failures[q];
        if (selected !== fi2) { ip.push(what + ": selected " + selected + ", not failure " + q + " (" + fi2 + ")"); return; }
        if (laneY(it.lane[fi2], lanesEl.scrollTop) === null) { ip.push(what + ": its lane is not shown"); }
        if (ut0[fi2] < view.a || ut0[fi2] > view.b) { ip.push(what + ": not in view"); }
        if (document.getElementById("detail-head").textContent !== describe(fi2)) { ip.push(what + ": header"); }
      };
      press("e");
      expectErr(0, "E");
      if (failures.length > 1) {
        press("e");
        expectErr(1, "E again");
        press("E");
        expectErr(0, "shift+E");
      }
      select(-1);
    }
    history.replaceState(null, "", "#selfcheck");
    setView(fitStart, fitEnd);
    // Zoom: a wheel event over the canvas narrows the view.
    var before = view.b - view.a;
    var r = canvas.getBoundingClientRect();
    canvas.dispatchEvent(new WheelEvent("wheel", { deltaY: -300, clientX: r.left + r.width / 2, clientY: r.top + 5, bubbles: true, cancelable: true }));
    out.zoom_ok = view.b - view.a < before;
    // Click: for each lane (at most 60), zoom onto its first and its middle item and click its
    // centre; the step line shown must be that item's step, as simulate printed it.
    var tried = 0;
    for (var l = 0; l < lanes.length && tried < 120; l++) {
      var cands = [laneStart[l], (laneStart[l] + laneStart[l + 1]) >> 1];
      for (var c = 0; c < cands.length; c++) {
        var i = cands[c];
        if (i >= laneStart[l + 1]) { continue; }
        tried++;
        var w = Math.max(ut1[i] - ut0[i], 2e6);
        setView(ut0[i] - w * 0.1, ut0[i] + w * 1.1);
        scrollToLane(l);
        draw();
        var x = (ut0[i] - view.a) / (view.b - view.a) * canvas.clientWidth + (ut1[i] > ut0[i] ? 2 : 0);
        var y = laneY(l, lanesEl.scrollTop) + ROW / 2;
        r = canvas.getBoundingClientRect();
        canvas.dispatchEvent(new MouseEvent("click", { clientX: r.left + x, clientY: r.top + y, bubbles: true }));
        var shown = document.getElementById("step-line").textContent;
        if (selected >= 0 && it.lane[selected] === l && shown === data.step_line[it.step[selected]] &&
            ut0[selected] <= ut0[i] + w && ut1[selected] >= ut0[i] - w) {
          out.clicks++;
        } else {
          out.click_failures.push(lanes[l].name + " item " + i);
        }
      }
    }
    select(-1);
    lanesEl.scrollTop = 0;
    setView(fitStart, fitEnd);
    draw();
    out.errors = window.__reportErrors.slice();
    var pre = document.getElementById("selfcheck");
    pre.textContent = JSON.stringify(out);
    // The data is large; the DOM dump that reads the result needs no copy of it.
    var script = document.getElementById("data");
    if (script) { script.remove(); }
  }

  // The address's fragment: #view=A,B (seconds) opens on that window, #step=N selects the
  // first item of step N (1-based), #selfcheck runs the self-check.
  var params = {};
  location.hash.replace(/^#/, "").split("&").forEach(function (kv) {
    var p = kv.split("=");
    if (p[0]) { params[p[0]] = p.length > 1 ? decodeURIComponent(p[1]) : ""; }
  });
  summary();
  laneLabels();
  setView(fitStart, fitEnd);
  if (params.view) {
    var v = params.view.split(",").map(Number);
    if (v.length === 2 && isFinite(v[0]) && isFinite(v[1]) && v[1] > v[0]) { setView(toU(v[0] * 1e9), toU(v[1] * 1e9)); }
  }
  if (params.step) {
    var want = Number(params.step) - 1;
    for (var j = 0; j < n; j++) { if (it.step[j] === want) { select(j); break; } }
  }
  draw();
  var readyMs = performance.now();
  if ("selfcheck" in params) { selfcheck(readyMs); }
  void started;
})();
