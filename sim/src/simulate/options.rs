//! What a world-mode run is asked: its options, and the bounds and delays every run keeps.

use std::time::Duration;

use reconcile_core::Instant;

use crate::harness::Render;
use crate::trace::{Entry, Trace};

/// Deliveries queued at most: a run that queues more is reported and stopped.
pub const MAX_AGENDA: usize = 1_000_000;

/// The step budget the command line gives a run of `trace` (`simulate` and `replay`): a
/// million steps plus a hundred per record. A step is one input to the core; a record
/// costs a few (its frames, the reconciles it wakes), idle simulated time a few per
/// bookmark interval and watch timeout. A run that needs more is a livelock, reported as
/// the `step limit` violation, and a tiny trace ends in about a second however far its
/// clock is told to go.
#[must_use]
pub fn step_budget(trace: &Trace) -> u64 {
    1_000_000u64.saturating_add((trace.entries.len() as u64).saturating_mul(100))
}

/// The simulated time world mode covers at most: the trace's records (their `t`, and every
/// `advance`) plus `--settle`; clock jumps are not counted, as they skip time in one step.
/// An idle simulated day costs a few thousand steps (bookmarks, watch timeouts), so a run
/// within this span ends in seconds; a trace past it is refused up front ([`validate`](crate::simulate::validate())),
/// naming the record that crosses it, and a run that gets there anyway stops.
pub const MAX_SPAN: Duration = Duration::from_secs(30 * 24 * 3600);

/// How long after it is asked for the world answers a LIST's next page (a continuation), so
/// that a paged listing spans time and faults and compaction can fall between its pages.
pub const PAGE_DELAY: Duration = Duration::from_secs(5);

/// Options of a world-mode run.
#[derive(Debug, Clone)]
pub struct SimOptions {
    /// How steps are written.
    pub render: Render,
    /// Extra fault records (from flags), merged by time.
    pub faults: Vec<Entry>,
    /// How long to keep running after the last record.
    pub settle: Duration,
    /// Step budget (a livelock detector).
    pub max_steps: u64,
    /// How long an unscripted reconcile takes.
    pub reconcile_duration: Duration,
    /// Check the quiescence invariants at the end.
    pub check: bool,
    /// Turn the core's priority queue on (`Config::priority`): listings', resyncs' and
    /// reconcile-all triggers' wakes go in at low priority. Not part of the trace format:
    /// a trace replays the same with or without it.
    pub priority: bool,
    /// Check the starvation invariant ([`crate::starvation`]), holding the queue to this
    /// many normal keys in a row while low keys wait (the core's rule is
    /// [`crate::starvation::CORE_NORMAL_IN_A_ROW`]; a smaller number is a deliberately
    /// wrong rule, to watch the check fire). One-source traces only.
    pub starvation: Option<u32>,
    /// A driver bug, injected to show the convergence check fires: from this instant on,
    /// every reconcile the core dispatches is acknowledged as a success but never run (the
    /// user's code never sees it). Never set outside tests.
    pub lose_reconciles_from: Option<Instant>,
    /// LIST every source in pages of at most this many objects (`WatchParams::list_page_size`
    /// on the primary and each secondary); the world serves pages, each continuation
    /// [`PAGE_DELAY`] after it is asked for. Not part of the trace format: a trace replays
    /// the same with or without it.
    pub list_page_size: Option<u32>,
    /// Fetch every source's listings with streaming lists (`WatchParams::streaming_lists`),
    /// which the world serves or, as an apiserver with the `WatchList` gate off, refuses.
    /// A trace whose header asks for them is served without this. Not part of the trace
    /// format beyond the header's own flag.
    pub streaming_lists: Option<StreamingLists>,
}

/// How a run's world meets streaming lists ([`SimOptions::streaming_lists`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamingLists {
    /// Served: the initial events, [`INITIAL_EVENT_DELAY`] apart, then the end bookmark.
    Served,
    /// Refused with 422: every source falls back to LIST+WATCH.
    Refused,
}

/// A primary LIST whose JSON body is longer than this is fed to the core piece by piece as
/// the world writes it, never joined into one body (when the run is not recorded): a world
/// of 100,000 real pods would otherwise hold its objects' text twice while it answers.
/// Smaller bodies keep the joined path, so no seeded run moves.
pub const LARGE_LIST: usize = 16 << 20;

/// A world serving protobuf answers every this many-th LIST or WATCH (counted over its
/// sources' requests) in JSON, as the apiserver answers a protobuf request for a custom
/// resource: the core must read it by its first byte. A rule of the count, not a draw, so a
/// trace replays the same.
pub const JSON_ANSWER_EVERY: u64 = 7;

/// The time between two initial events of a streaming list in world mode, so that faults
/// (a 410 storm, a dropped stream, a restart) land between them.
pub const INITIAL_EVENT_DELAY: Duration = Duration::from_millis(500);

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions {
            render: Render::Text,
            faults: Vec::new(),
            settle: Duration::from_secs(600),
            max_steps: 10_000_000,
            reconcile_duration: Duration::ZERO,
            check: false,
            priority: false,
            starvation: None,
            lose_reconciles_from: None,
            list_page_size: None,
            streaming_lists: None,
        }
    }
}
