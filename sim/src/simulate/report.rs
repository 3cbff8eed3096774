//! What a world-mode run produced, and why a streamed one failed.

use reconcile_core::Instant;

use crate::harness::{Harness, PathCounts, Violation};

/// What a run produced.
#[derive(Debug, Clone)]
pub struct RunReport {
    /// The rendered steps.
    pub output: String,
    /// Invariants broken (world mode with checks), or the divergence (replay).
    pub violations: Vec<Violation>,
    /// Fault paths reached.
    pub paths: PathCounts,
    /// The core's counters at the end.
    pub stats: reconcile_core::Stats,
    /// The core's cursor at the end: where its next WATCH would start.
    pub cursor: Option<String>,
    /// The keys the core's cache holds at the end, in the cache's order: what a replay and a
    /// simulation of one trace are compared by.
    pub store: Vec<String>,
    /// Steps taken.
    pub steps: u64,
    /// Simulated time at the end.
    pub end: Instant,
}

impl RunReport {
    /// What `h` ends a run with, once its output is flushed: one place for replay and world
    /// mode, so both report their store and counters alike.
    pub(crate) fn finish(mut h: Harness) -> Result<Self, RunError> {
        h.finish_output().map_err(RunError::Output)?;
        Ok(RunReport {
            output: h.output().to_owned(),
            stats: h.core().stats(),
            cursor: h.core().cursor().map(str::to_owned),
            store: h
                .core()
                .store()
                .iter()
                .map(|(k, _, _)| k.to_string())
                .collect(),
            steps: h.steps(),
            end: h.now(),
            violations: h.violations,
            paths: h.paths,
        })
    }
}

/// Why a streamed run failed.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The header's settings are out of the core's bounds.
    #[error(transparent)]
    Config(#[from] reconcile_core::ConfigError),
    /// The output could not be written (a closed pipe, a full disk): the run stopped there.
    #[error("writing the output: {0}")]
    Output(#[source] std::io::Error),
}
