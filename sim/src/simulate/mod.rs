//! World mode: the trace defines the history of the objects, and the simulated apiserver
//! ([`World`](crate::world::World)) answers whatever the core asks, with the trace's and the flags' faults.
//!
//! A discrete-event loop: at each step the earliest of (trace records, apiserver
//! deliveries, reconcile completions, the core's deadline) happens, in that fixed order on
//! ties. Records at time zero build the world before the controller starts.

//! | file | concept |
//! |---|---|
//! | `options.rs` | a run's options, bounds and delays |
//! | `event_loop.rs` | the discrete-event loop: records, deliveries, the core's commands answered |
//! | `faults.rs` | what each injected fault does |
//! | `quiescence.rs` | the invariants checked once the run has settled |
//! | `validate.rs` | traces world mode refuses up front |
//! | `report.rs` | what a run produced |

mod event_loop;
mod faults;
pub(crate) mod options;
pub(crate) mod quiescence;
mod report;
mod validate;

pub use options::{
    INITIAL_EVENT_DELAY, JSON_ANSWER_EVERY, LARGE_LIST, MAX_AGENDA, MAX_SPAN, PAGE_DELAY,
    SimOptions, StreamingLists, step_budget,
};
pub use report::{RunError, RunReport};
pub(crate) use validate::Nested;
pub use validate::validate;

use crate::trace::Trace;

/// Runs `trace` in world mode, its rendered lines kept in [`RunReport::output`].
///
/// # Errors
/// When the header's settings are out of the core's bounds.
pub fn simulate(
    trace: &Trace,
    opts: &SimOptions,
) -> Result<RunReport, reconcile_core::ConfigError> {
    match crate::simulate::event_loop::simulate_inner(trace, opts, None) {
        Ok(report) => Ok(report),
        Err(RunError::Config(e)) => Err(e),
        // No sink, nothing written.
        Err(RunError::Output(_)) => unreachable!("a run without a sink writes nothing"),
    }
}

/// Runs `trace` in world mode as [`simulate`] does, and returns the run's conversation as
/// a trace too: every LIST and WATCH answer the simulated apiserver gave, each frame and
/// stream end, and the reconcile outcomes, as a recorder of a live run writes them (the
/// header is `trace`'s). Replayed, it feeds the core what the world fed it; played to
/// another client (`sim/tests/client_go_diff.rs`), it is the same conversation.
///
/// # Errors
/// When the header's settings are out of the core's bounds.
pub fn simulate_recorded(
    trace: &Trace,
    opts: &SimOptions,
) -> Result<(RunReport, Trace), reconcile_core::ConfigError> {
    match crate::simulate::event_loop::simulate_recorded_inner(trace, opts, None, true) {
        Ok((report, entries)) => Ok((
            report,
            Trace {
                name: format!("{} (recorded)", trace.name),
                header: trace.header.clone(),
                entries,
            },
        )),
        Err(RunError::Config(e)) => Err(e),
        Err(RunError::Output(_)) => unreachable!("a run without a sink writes nothing"),
    }
}

/// Runs `trace` in world mode, writing each rendered line to `sink` as the run goes (in
/// chunks of [`crate::harness::STREAM_CHUNK`] bytes), so memory does not grow with the
/// output; [`RunReport::output`] is empty. A write error stops the run.
///
/// # Errors
/// When the header's settings are out of the core's bounds, or writing fails.
pub fn simulate_to(
    trace: &Trace,
    opts: &SimOptions,
    sink: Box<dyn std::io::Write>,
) -> Result<RunReport, RunError> {
    crate::simulate::event_loop::simulate_inner(trace, opts, Some(sink))
}
