//! How an exploration runs one trace: quietly, every invariant checked, long enough for the
//! faults to heal.

use std::collections::BTreeMap;
use std::time::Duration;

use reconcile_core::Instant;

use crate::harness::{Render, Violation};
use crate::simulate::{SimOptions, StreamingLists, simulate};

use crate::trace::Trace;

/// How long runs keep going after the last record, so faults heal and retries finish.
pub fn settle(long: bool) -> Duration {
    Duration::from_secs(if long { 3600 } else { 1200 })
}

/// Runs one explore trace quietly with every invariant checked.
#[must_use]
pub fn run(trace: &Trace, long: bool) -> crate::simulate::RunReport {
    run_paged(trace, long, None)
}

/// [`run`], listing every source in pages of `list_page_size` objects when set.
#[must_use]
pub fn run_paged(
    trace: &Trace,
    long: bool,
    list_page_size: Option<u32>,
) -> crate::simulate::RunReport {
    run_listing(trace, long, list_page_size, None)
}

/// [`run_paged`], with streaming lists served or refused when `streaming_lists` is set.
#[must_use]
pub fn run_listing(
    trace: &Trace,
    long: bool,
    list_page_size: Option<u32>,
    streaming_lists: Option<StreamingLists>,
) -> crate::simulate::RunReport {
    let opts = SimOptions {
        render: Render::Quiet,
        settle: settle(long),
        max_steps: 2_000_000,
        check: true,
        list_page_size,
        streaming_lists,
        ..SimOptions::default()
    };
    run_with(trace, &opts)
}

pub(super) fn run_with(trace: &Trace, opts: &SimOptions) -> crate::simulate::RunReport {
    match simulate(trace, opts) {
        Ok(report) => report,
        // Generated headers are always within the core's bounds; say so loudly if not.
        Err(e) => crate::simulate::RunReport {
            output: String::new(),
            violations: vec![Violation {
                at: Instant::ZERO,
                invariant: "configuration",
                detail: e.to_string(),
            }],
            paths: BTreeMap::new(),
            stats: reconcile_core::Stats::default(),
            cursor: None,
            store: Vec::new(),
            steps: 0,
            end: Instant::ZERO,
        },
    }
}
