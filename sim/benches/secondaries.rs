//! Secondary sources at scale (issue 31): a world with one parent and N secondary sources,
//! each watching its own children, simulated with the invariants checked, timed at growing
//! N. A linear loop costs 2× for 2× the sources. Each run proves its work: every source
//! synced, its children listed, and the parent reconciled with no invariant broken.
//!
//! `cargo bench -p reconcile-sim --bench secondaries`; sizes from `SECONDARIES_SIZES`
//! (default `1000,2000,4000,8000,16000`).

#![allow(missing_docs)]

use std::fmt::Write as _;
use std::time::{Duration, Instant as WallClock};

use reconcile_sim::harness::Render;
use reconcile_sim::trace::Trace;
use reconcile_sim::{SimOptions, simulate};

/// One parent `p` in `ns`; source `Sk` (k = 1..=n) watches label `src=k`, and holds one
/// child owned by `p`, created at t=0 and edited at t=1.
fn trace(sources: usize) -> Trace {
    let secondaries: Vec<String> = (1..=sources)
        .map(|k| {
            format!(
                r#"{{"namespace":"ns","label_selector":"src={k}","timeout_seconds":300,"parents_by":"owner:Pod"}}"#
            )
        })
        .collect();
    let mut text = format!(
        r#"{{"reconcile_sim_trace":2,"description":"one parent, {sources} secondary sources","namespace":"ns","label_selector":"role=parent","parent":"name","secondaries":[{}]}}"#,
        secondaries.join(",")
    );
    text.push('\n');
    text.push_str(
        r#"{"record":"frame","t":0,"event":{"type":"ADDED","object":{"metadata":{"name":"p","namespace":"ns","labels":{"role":"parent"}}}}}"#,
    );
    text.push('\n');
    for (t, edit) in [(0, ""), (1, r#","edited":"yes""#)] {
        let kind = if edit.is_empty() { "ADDED" } else { "MODIFIED" };
        for k in 1..=sources {
            let _ = writeln!(
                text,
                r#"{{"record":"frame","t":{t},"source":{k},"event":{{"type":"{kind}","object":{{"metadata":{{"name":"c-{k}","namespace":"ns","labels":{{"src":"{k}"{edit}}},"ownerReferences":[{{"apiVersion":"v1","kind":"Pod","name":"p","uid":"u-p","controller":true}}]}}}}}}}}"#
            );
        }
    }
    Trace::parse("secondaries.jsonl", &text).expect("a valid trace")
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo test --benches` probes with --list
    }
    let sizes: Vec<usize> = std::env::var("SECONDARIES_SIZES")
        .unwrap_or_else(|_| "1000,2000,4000,8000,16000".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let opts = SimOptions {
        render: Render::Quiet,
        settle: Duration::from_secs(30),
        check: true,
        ..SimOptions::default()
    };
    let mut previous: Option<f64> = None;
    for sources in sizes {
        let trace = trace(sources);
        let start = WallClock::now();
        let report = simulate(&trace, &opts).expect("valid header");
        let seconds = start.elapsed().as_secs_f64();
        assert!(report.violations.is_empty(), "{:?}", report.violations);
        assert!(
            report.stats.lists > sources as u64,
            "every source listed: {} lists for {sources} sources",
            report.stats.lists
        );
        assert!(report.stats.reconciles >= 1, "the parent reconciled");
        let growth = previous.map_or_else(String::new, |p| {
            format!(", {:.1}× the size before", seconds / p)
        });
        println!(
            "simulate, 1 parent and {sources} secondary sources of one child each (JSON): {seconds:.3} s, {} lists, {} frames, {} reconciles{growth}",
            report.stats.lists, report.stats.frames, report.stats.reconciles
        );
        previous = Some(seconds);
    }
}
