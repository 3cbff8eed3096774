//! `reconcile-sim report`: one self-contained HTML page that shows a run as a timeline.
//!
//! The run is the one `simulate` (or `replay`) performs on the trace: [`build`] runs the
//! simulator twice, once rendering step lines ([`Render::Text`]) and once rendering the same
//! steps as JSON ([`Render::Json`]), and reads the JSON steps' commands, events and inputs
//! into lanes ([`timeline`]). Nothing of the simulator's logic is repeated here: the page
//! only arranges what the run printed.
//!
//! The page ([`Report::to_html`]) inlines its script, style and data (no network, no CDN):
//! a lane per stream (each source's LIST and WATCH, relists with their reasons), a lane per
//! parent (reconciles with attempt and outcome, backoff and requeue delays), a lane for the
//! core's own steps (start, timers, notes and faults), and violations. It draws on a canvas
//! only what is visible, one mark per pixel and kind at most, so 100 000 steps stay usable.
//! Wheel zooms, dragging pans, a click shows the step's line as `simulate` prints it, and the
//! run's summary (counts, the invariants checked and any violation) is on top.
//!
//! Opened with `#selfcheck` in its address, the page checks itself after drawing (lanes,
//! counts, a click on a step of each lane) and writes the result as JSON into
//! `<pre id="selfcheck">`, with every console error and uncaught exception collected since
//! the page started; the browser tests read it with `chromium --headless --dump-dom`.

pub mod timeline;

use std::fmt::Write as _;

use serde::Serialize;

use crate::harness::Render;
use crate::replay::{DIVERGENCE, ReplayOptions};
use crate::simulate::{RunReport, SimOptions};
use crate::trace::Trace;

pub use timeline::{Item, Kind, Lane, LaneGroup, Timeline};

/// The most steps a report holds: far above the 100 000 it is tested with, low enough that
/// a runaway run is refused before its page outgrows what a browser opens.
pub const MAX_STEPS: u64 = 1_000_000;

const PAGE: &str = include_str!("page.html");
const STYLE: &str = include_str!("page.css");
const SCRIPT: &str = include_str!("page.js");

/// The invariants every run checks, in both modes (the harness's own checks).
pub const ALWAYS_CHECKED: &[&str] = &[
    "backoff counts failures in a row",
    "retry delay out of bounds",
    "key reconciled twice at once",
    "command for a closed stream",
    "command after stop",
    "queue unbounded",
];

/// The invariants world mode adds (`simulate`), the last four unless `--no-check`.
pub const WORLD_CHECKED: &[&str] = &[
    "WATCH without a cursor from a LIST or a frame",
    "step limit",
    "a copy kept from the change log differs from the cache",
    "store differs from the world at quiescence",
    "source differs from the world at quiescence",
    "parent not reconciled after its last change",
];

/// The starvation invariants (`--priority`).
pub const PRIORITY_CHECKED: &[&str] = &[
    "low-priority key starved",
    "normal-priority key starved",
    "woken parent never dispatched",
];

/// How the run behind a report is made.
#[derive(Debug, Clone)]
pub enum Mode {
    /// World mode, as `reconcile-sim simulate` runs (its options; `render` is ignored).
    Simulate(SimOptions),
    /// Replay mode, as `reconcile-sim replay` runs (its options; `render` is ignored).
    Replay(ReplayOptions),
}

/// Why a report could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The trace's header does not make a valid controller configuration.
    #[error("{trace}: {error}")]
    Config {
        /// The trace's name.
        trace: String,
        /// What the core refused.
        error: reconcile_core::ConfigError,
    },
    /// The run took more steps than a report holds.
    #[error("{trace}: the run took more than {max} steps, more than a report holds")]
    TooManySteps {
        /// The trace's name.
        trace: String,
        /// The bound ([`MAX_STEPS`]).
        max: u64,
    },
    /// The two renderings of the run disagree (a bug in the simulator's determinism).
    #[error("{trace}: step {step}: {message}")]
    Rendering {
        /// The trace's name.
        trace: String,
        /// 0-based step (rendered line) index.
        step: usize,
        /// What did not match.
        message: String,
    },
}

/// The run's summary, as the page shows it on top.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// `simulate` or `replay`.
    pub mode: &'static str,
    /// Steps taken (lines that are notes not counted).
    pub steps: u64,
    /// Simulated time at the end, in nanoseconds.
    pub end_ns: u64,
    /// The core's counters and the timeline's, in a fixed order.
    pub counts: Vec<(String, u64)>,
    /// Fault paths reached, as explore counts them.
    pub paths: Vec<(String, u64)>,
    /// Every invariant checked, and whether it held.
    pub invariants: Vec<InvariantResult>,
    /// The violations, in the order they were seen.
    pub violations: Vec<ViolationView>,
    /// The core's cursor at the end.
    pub cursor: Option<String>,
}

/// One invariant checked.
#[derive(Debug, Clone, Serialize)]
pub struct InvariantResult {
    /// Its stable name: the violation's, which names what went wrong ("store differs from
    /// the world at quiescence").
    pub name: String,
    /// What must hold, as the page shows it ("store matches the world at quiescence"):
    /// [`rule`] of the name.
    pub rule: String,
    /// True when no violation of it was seen.
    pub held: bool,
}

/// What must hold for the invariant whose violation is named `violation`: the page shows
/// this beside a PASS or FAIL mark, where a green check beside the violation's own name read
/// as a bug found (issue 32). A name this table does not know reads "never: NAME".
#[must_use]
pub fn rule(violation: &str) -> String {
    let known = match violation {
        "backoff counts failures in a row" => "backoff counts failures in a row",
        "retry delay out of bounds" => "every retry delay within its bounds",
        "key reconciled twice at once" => "no key reconciled twice at once",
        "command for a closed stream" => "no command for a closed stream",
        "command after stop" => "no command after stop",
        "queue unbounded" => "the work queue stays bounded",
        "WATCH without a cursor from a LIST or a frame" => {
            "every WATCH starts from a cursor a LIST or a frame gave"
        }
        "step limit" => "the run ends within its step limit",
        "a copy kept from the change log differs from the cache" => {
            "copies kept from the change log match the cache"
        }
        "store differs from the world at quiescence" => "store matches the world at quiescence",
        "source differs from the world at quiescence" => {
            "every source matches the world at quiescence"
        }
        "parent not reconciled after its last change" => {
            "every parent reconciled after its last change"
        }
        "low-priority key starved" => "no low-priority key starves",
        "normal-priority key starved" => "no normal-priority key starves",
        "woken parent never dispatched" => "every woken parent is dispatched",
        DIVERGENCE => "the core asks what the recording answered (no divergence)",
        other => return format!("never: {other}"),
    };
    known.to_owned()
}

/// A violation, as shown.
#[derive(Debug, Clone, Serialize)]
pub struct ViolationView {
    /// Simulated time, in nanoseconds.
    pub t_ns: u64,
    /// The invariant.
    pub invariant: String,
    /// What happened.
    pub detail: String,
}

/// A report: the run's summary, its timeline and every step line.
#[derive(Debug, Clone)]
pub struct Report {
    /// What the page is titled (the trace's name).
    pub title: String,
    /// The summary.
    pub summary: Summary,
    /// Lanes and the items on them.
    pub timeline: Timeline,
}

/// Runs `trace` as `mode` says and builds its report.
///
/// # Errors
/// When the header is not a valid configuration, when the run exceeds [`MAX_STEPS`], or when
/// the simulator's two renderings of the same run disagree.
pub fn build(trace: &Trace, mode: &Mode) -> Result<Report, ReportError> {
    let run = |render: Render| -> Result<RunReport, ReportError> {
        let result = match mode {
            Mode::Simulate(opts) => crate::simulate(
                trace,
                &SimOptions {
                    render,
                    max_steps: opts.max_steps.min(MAX_STEPS + 1),
                    ..opts.clone()
                },
            ),
            Mode::Replay(opts) => crate::replay(
                trace,
                &ReplayOptions {
                    render,
                    max_steps: opts.max_steps.min(MAX_STEPS + 1),
                },
            ),
        };
        let report = result.map_err(|error| ReportError::Config {
            trace: trace.name.clone(),
            error,
        })?;
        if report.steps > MAX_STEPS {
            return Err(ReportError::TooManySteps {
                trace: trace.name.clone(),
                max: MAX_STEPS,
            });
        }
        Ok(report)
    };
    let text = run(Render::Text)?;
    let json = run(Render::Json)?;
    let timeline = Timeline::from_run(&json.output, &text.output, json.end.as_nanos()).map_err(
        |(step, message)| ReportError::Rendering {
            trace: trace.name.clone(),
            step,
            message,
        },
    )?;
    let mut timeline = timeline;
    for v in &json.violations {
        timeline.add_violation(v.at.as_nanos(), &format!("{}: {}", v.invariant, v.detail));
    }
    let summary = summary(mode, &json, &timeline);
    Ok(Report {
        title: trace.name.clone(),
        summary,
        timeline,
    })
}

fn summary(mode: &Mode, run: &RunReport, timeline: &Timeline) -> Summary {
    let mut names: Vec<&str> = ALWAYS_CHECKED.to_vec();
    let mode_name = match mode {
        Mode::Simulate(opts) => {
            let world = if opts.check {
                WORLD_CHECKED
            } else {
                &WORLD_CHECKED[..3]
            };
            names.extend(world);
            if opts.starvation.is_some() {
                names.extend(PRIORITY_CHECKED);
            }
            "simulate"
        }
        Mode::Replay(_) => {
            names.push(DIVERGENCE);
            "replay"
        }
    };
    let mut invariants: Vec<InvariantResult> = names
        .iter()
        .map(|&name| InvariantResult {
            name: name.to_owned(),
            rule: rule(name),
            held: !run.violations.iter().any(|v| v.invariant == name),
        })
        .collect();
    for v in &run.violations {
        if !invariants.iter().any(|i| i.name == v.invariant) {
            invariants.push(InvariantResult {
                name: v.invariant.to_owned(),
                rule: rule(v.invariant),
                held: false,
            });
        }
    }
    let s = &run.stats;
    let mut counts: Vec<(String, u64)> = [
        ("steps", run.steps),
        ("lists", s.lists),
        ("watches", s.watches),
        ("frames", s.frames),
        ("frames skipped", s.frames_skipped),
        ("relists", s.relists),
        ("reconciles", s.reconciles),
        ("reconcile errors", s.reconcile_errors),
        ("resyncs", s.resyncs),
        ("stale inputs", s.stale_inputs),
        ("rejected objects", s.rejected_objects),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    counts.push((
        "parents".into(),
        timeline.lanes_in(LaneGroup::Parent) as u64,
    ));
    counts.push((
        "streams".into(),
        timeline.lanes_in(LaneGroup::Stream) as u64,
    ));
    Summary {
        mode: mode_name,
        steps: run.steps,
        end_ns: run.end.as_nanos(),
        counts,
        paths: run
            .paths
            .iter()
            .map(|(k, v)| ((*k).to_owned(), *v))
            .collect(),
        invariants,
        violations: run
            .violations
            .iter()
            .map(|v| ViolationView {
                t_ns: v.at.as_nanos(),
                invariant: v.invariant.to_owned(),
                detail: v.detail.clone(),
            })
            .collect(),
        cursor: run.cursor.clone(),
    }
}

impl Report {
    /// The report as one self-contained HTML page: style, script and data inlined.
    #[must_use]
    pub fn to_html(&self) -> String {
        let data = serde_json::to_string(&PageData::of(self)).unwrap_or_else(|_| "null".into());
        // Inside a <script> element only `</` could end it early; `<` escaped as \u003c is
        // the same JSON string.
        let data = data.replace('<', "\\u003c");
        let mut page = String::with_capacity(PAGE.len() + STYLE.len() + SCRIPT.len() + data.len());
        let mut rest = PAGE;
        for (marker, content) in [
            ("/*STYLE*/", STYLE),
            ("{{TITLE}}", &html_escape(&self.title)),
            ("/*DATA*/", data.as_str()),
            ("/*SCRIPT*/", SCRIPT),
        ] {
            if let Some((before, after)) = rest.split_once(marker) {
                page.push_str(before);
                page.push_str(content);
                rest = after;
            }
        }
        page.push_str(rest);
        page
    }
}

/// What the page's script reads: the timeline's items as columns (one array per field, the
/// kind as an index into `kinds`), which keeps 100 000 steps' data compact.
#[derive(Serialize)]
struct PageData<'a> {
    title: &'a str,
    summary: &'a Summary,
    lanes: &'a [Lane],
    kinds: &'static [Kind],
    items: Columns<'a>,
    step_t: &'a [u64],
    step_line: &'a [String],
    end_ns: u64,
    queue: &'a [[u64; 2]],
}

#[derive(Serialize, Default)]
struct Columns<'a> {
    lane: Vec<u32>,
    t0: Vec<u64>,
    t1: Vec<u64>,
    kind: Vec<u8>,
    step: Vec<u32>,
    end_step: Vec<u32>,
    label: Vec<&'a str>,
}

impl<'a> PageData<'a> {
    fn of(report: &'a Report) -> Self {
        let t = &report.timeline;
        let mut items = Columns::default();
        for i in &t.items {
            items.lane.push(i.lane);
            items.t0.push(i.t0);
            items.t1.push(i.t1);
            items.kind.push(i.kind.index());
            items.step.push(i.step);
            items.end_step.push(i.end_step);
            items.label.push(&i.label);
        }
        PageData {
            title: &report.title,
            summary: &report.summary,
            lanes: &t.lanes,
            kinds: Kind::ALL,
            items,
            step_t: &t.step_t,
            step_line: &t.step_line,
            end_ns: t.end_ns,
            queue: &t.queue,
        }
    }
}

fn html_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
    out
}

/// The command that opens a report of a failing explore seed's trace, with the flags its
/// `simulate` reproduction takes (`extra_flags`, each with its leading space).
#[must_use]
pub fn command_for(trace: &std::path::Path, extra_flags: &str) -> String {
    let mut out = String::new();
    let html = trace.with_extension("html");
    let _ = write!(
        out,
        "cargo run -p reconcile-sim -- report{extra_flags} {} -o {}",
        trace.display(),
        html.display()
    );
    out
}
