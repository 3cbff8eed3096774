//! Busy workloads (`explore --priority`): one worker and a live stream that never runs dry,
//! the core's priority queue on and the starvation invariant checked.

use std::time::Duration;

use reconcile_core::Instant;

use crate::harness::Render;
use crate::rng::Rng;
use crate::simulate::SimOptions;
use reconcile_core::KeyBy;

use crate::explore::generate::{fault, frame, pod};
use crate::explore::many::toggle;
use crate::explore::run::{run_with, settle};
use crate::trace::{Entry, Header, Record, Trace};

/// The busy profiles (`explore --priority`): one worker, a large first listing, and a live
/// stream to a few hot parents that never lets normal-priority work run dry, with the
/// core's priority queue on and the starvation invariant ([`crate::starvation`]) checked.
/// What else wakes every parent at low priority now and then: nothing (`busy/calm`: the
/// first listing's backlog alone), relists (`busy/relists`), resyncs (`busy/resyncs`),
/// reconcile-all triggers (`busy/triggers`), or all of them (`busy/mixed`).
pub const BUSY_PROFILES: &[&str] = &[
    "busy/calm",
    "busy/relists",
    "busy/resyncs",
    "busy/triggers",
    "busy/mixed",
];

/// How long a busy seed's reconciles take: longer than the gap between two live changes,
/// so a hot parent is always wanted again by the time the worker is free.
pub const BUSY_RECONCILE: Duration = Duration::from_secs(1);

/// The longest gap between two live changes of a busy seed, in milliseconds (below
/// [`BUSY_RECONCILE`]).
const BUSY_MAX_GAP_MS: u64 = 900;

fn at_ms(ms: u64) -> Option<Instant> {
    Some(Instant::from_duration(Duration::from_millis(ms)))
}

/// The busy trace seed `seed` runs, and its profile (see [`BUSY_PROFILES`]). Drawn from its
/// own stream: the one-source and many-source seeds are untouched.
#[must_use]
pub fn generate_busy(seed: u64, long: bool) -> (Trace, &'static str) {
    let mut rng = Rng::new(seed ^ 0x6275_7379_2d70_7269);
    let profile = *rng.pick(BUSY_PROFILES);
    let parents = if long {
        rng.range(100, 400)
    } else {
        rng.range(4, 24)
    };
    let hot = rng.range(1, 3).min(parents);
    let mixed = profile == "busy/mixed";
    let mut header = Header {
        description: Some(format!("explore busy seed {seed}, profile {profile}")),
        namespace: Some("default".into()),
        label_selector: Some("app=cell".into()),
        parent: KeyBy::Label("cell".into()),
        concurrency: 1,
        timeout_seconds: *rng.pick(&[30, 60, 300]),
        bookmark_interval: rng
            .chance(50)
            .then(|| Duration::from_secs(rng.range(5, 60))),
        ..Header::default()
    };
    // Long enough for the first listing's backlog to drain at a quarter of the dispatches,
    // and some more for the relists, resyncs and triggers to land in a busy queue.
    let window_s = parents * 5 + rng.range(10, 40);
    if profile == "busy/resyncs" || mixed {
        header.resync = Some(Duration::from_secs(rng.range(15, window_s / 2 + 15)));
    }
    let mut events: Vec<(u64, Record)> = Vec::new();
    // The world before the start: one pod per parent (each a low key of the first sync).
    let mut phases: Vec<&'static str> = Vec::new();
    let mut uids: Vec<u64> = Vec::new();
    for i in 0..parents {
        let cell = format!("cell-{i}");
        events.push((
            0,
            frame(
                "ADDED",
                &pod(&format!("p{i}"), i + 1, &cell, "cell", "Pending"),
            ),
        ));
        phases.push("Pending");
        uids.push(i + 1);
    }
    // The live stream: mostly the hot parents, now and then a cold one (which, if it waits
    // at low priority, moves up).
    let hot_cells: Vec<u64> = (0..hot).map(|_| rng.below(parents)).collect();
    let mut t_ms = 1_000;
    while t_ms < window_s * 1_000 {
        let i = if rng.chance(90) {
            *rng.pick(&hot_cells)
        } else {
            rng.below(parents)
        };
        let slot = usize::try_from(i).unwrap_or(0);
        phases[slot] = toggle(phases[slot], "Pending", "Running");
        events.push((
            t_ms,
            frame(
                "MODIFIED",
                &pod(
                    &format!("p{i}"),
                    uids[slot],
                    &format!("cell-{i}"),
                    "cell",
                    phases[slot],
                ),
            ),
        ));
        t_ms += rng.range(50, BUSY_MAX_GAP_MS);
    }
    // Whatever wakes every parent, or every changed one, at low priority.
    if profile == "busy/relists" || mixed {
        for _ in 0..rng.range(1, 4) {
            let kind = *rng.pick(&["gone", "restart", "compact", "watch_drop"]);
            let t = rng.range(2, window_s) * 1_000;
            events.push((t, Record::Fault(fault(&mut rng, kind))));
        }
    }
    if profile == "busy/triggers" || mixed {
        for _ in 0..rng.range(2, 6) {
            events.push((rng.range(2, window_s) * 1_000, Record::ReconcileAll));
        }
    }
    events.sort_by_key(|(t, _)| *t);
    let entries = events
        .into_iter()
        .map(|(t, r)| Entry::new(at_ms(t), r))
        .collect();
    (
        Trace {
            name: format!("busy-seed-{seed}"),
            header,
            entries,
        },
        profile,
    )
}

/// Runs one busy trace quietly: every invariant checked, the core's priority queue on, and
/// the starvation invariant held to `in_a_row` normal keys in a row
/// ([`crate::starvation::CORE_NORMAL_IN_A_ROW`] for the core's rule).
#[must_use]
pub fn run_busy(trace: &Trace, long: bool, in_a_row: u32) -> crate::simulate::RunReport {
    run_with(
        trace,
        &SimOptions {
            render: Render::Quiet,
            settle: settle(long),
            max_steps: 2_000_000,
            check: true,
            priority: true,
            starvation: Some(in_a_row),
            reconcile_duration: BUSY_RECONCILE,
            ..SimOptions::default()
        },
    )
}
