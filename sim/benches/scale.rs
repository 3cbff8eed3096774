//! The simulator at scale (issue 16): one LIST of N pods into the simulated apiserver and the
//! controller, then one simulated hour, timed at growing N. A linear simulator costs 10× for
//! 10× the pods. Each run proves it did the work: the controller synced all N pods.
//!
//! `cargo bench -p reconcile-sim --bench scale`; sizes from `SIM_SCALE_SIZES` (default
//! `1000,10000,100000`; add `1000000` for a million, about 21 s and 6.9 GB of RSS).
//!
//! It was quadratic until 2026-12-01: every write to the simulated apiserver found the
//! object's parents by scanning every visible object for its key (4k pods 0.8 s, 8k 5.0 s,
//! 16k 30 s). Now a keyed lookup: 1k 0.015 s, 10k 0.18 s, 100k 2.0 s, 1M 21 s.

#![allow(missing_docs)]

use std::time::{Duration, Instant as WallClock};

use reconcile_core::{Instant, KeyBy};
use reconcile_sim::harness::Render;
use reconcile_sim::trace::{Entry, Header, Record, Trace};
use reconcile_sim::{SimOptions, simulate};

fn pod(i: usize) -> String {
    format!(
        "{{\"metadata\":{{\"name\":\"p{i:07}\",\"namespace\":\"default\",\"uid\":\"u-{i}\",\"resourceVersion\":\"{rv}\",\"labels\":{{\"app\":\"cell\",\"cell\":\"c{cell}\"}}}},\"spec\":{{\"nodeName\":\"node-1\"}},\"status\":{{\"phase\":\"Running\",\"podIP\":\"10.0.0.1\"}}}}",
        rv = i + 2,
        cell = i / 10
    )
}

fn trace(pods: usize) -> Trace {
    let items: Vec<String> = (0..pods).map(pod).collect();
    let list = format!(
        "{{\"kind\":\"PodList\",\"metadata\":{{\"resourceVersion\":\"{}\"}},\"items\":[{}]}}",
        pods + 2,
        items.join(",")
    );
    Trace {
        name: format!("scale-{pods}"),
        header: Header {
            namespace: Some("default".into()),
            label_selector: Some("app=cell".into()),
            parent: KeyBy::Label("cell".into()),
            ..Header::default()
        },
        entries: vec![
            Entry::new(
                Some(Instant::ZERO),
                Record::List {
                    status: 200,
                    body: list.into(),
                    transport_error: None,
                },
            ),
            Entry::new(
                None,
                Record::Advance {
                    by: Duration::from_secs(3600),
                },
            ),
        ],
    }
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo test --benches` probes with --list
    }
    let sizes: Vec<usize> = std::env::var("SIM_SCALE_SIZES")
        .unwrap_or_else(|_| "1000,10000,100000".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let opts = SimOptions {
        render: Render::Quiet,
        settle: Duration::ZERO,
        ..SimOptions::default()
    };
    let mut previous: Option<f64> = None;
    for pods in sizes {
        let trace = trace(pods);
        let start = WallClock::now();
        let report = simulate(&trace, &opts).expect("valid header");
        let seconds = start.elapsed().as_secs_f64();
        // The work was done: listed, every parent reconciled, no invariant broken.
        assert!(report.violations.is_empty(), "{:?}", report.violations);
        assert!(report.stats.lists >= 1, "listed");
        assert!(
            report.stats.reconciles >= (pods / 10) as u64,
            "every parent reconciled: {} reconciles for {} parents",
            report.stats.reconciles,
            pods / 10
        );
        let growth = previous.map_or_else(String::new, |p| {
            format!(", {:.1}× the size before", seconds / p)
        });
        println!(
            "simulate, {pods} pods listed, 1 simulated hour: {seconds:.3} s, {} reconciles{growth}",
            report.stats.reconciles
        );
        previous = Some(seconds);
    }
}
