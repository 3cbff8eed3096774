//! Metrics as plain data: counters and fixed-bucket histograms updated by the same
//! transitions that produce the loop's commands and events, so a driver, a simulator or a
//! test reads the same figures. No clock reads: every duration is the difference of two
//! injected [`Instant`]s (dispatch vs outcome, enqueue vs dispatch).
//!
//! The names follow controller-runtime and client-go's workqueue, so their dashboards work
//! unchanged once a driver exposes these figures (see `reconcile-engine`'s `metrics`).

use crate::time::Instant;
use crate::vocabulary::{Event, RelistReason};

/// controller-runtime's buckets for `controller_runtime_reconcile_time_seconds`, in seconds.
pub const RECONCILE_TIME_BUCKETS: [f64; 40] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9,
    1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0,
    25.0, 30.0, 40.0, 50.0, 60.0,
];

/// The workqueue histograms' buckets, in seconds: controller-runtime's
/// `ExponentialBuckets(10e-9, 10, 12)`, 10 ns to 1000 s.
pub const WORKQUEUE_BUCKETS: [f64; 12] = [
    1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0, 1000.0,
];

/// A histogram with `N` fixed upper bounds (plus `+Inf`), as Prometheus keeps one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Histogram<const N: usize> {
    bounds: &'static [f64; N],
    /// Observations per bucket, not cumulative: `counts[i]` fell in `(bounds[i-1], bounds[i]]`.
    counts: [u64; N],
    sum: f64,
    count: u64,
}

impl<const N: usize> Histogram<N> {
    /// An empty histogram over `bounds` (ascending).
    #[must_use]
    pub const fn new(bounds: &'static [f64; N]) -> Self {
        Histogram {
            bounds,
            counts: [0; N],
            sum: 0.0,
            count: 0,
        }
    }

    /// Records one observation of `seconds`.
    pub fn observe(&mut self, seconds: f64) {
        // A value above every bound counts only in `+Inf` (count minus the buckets).
        if let Some(i) = self.bounds.iter().position(|b| seconds <= *b) {
            self.counts[i] += 1;
        }
        self.sum += seconds;
        self.count += 1;
    }

    /// Observations in total.
    #[must_use]
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Sum of the observations, in seconds.
    #[must_use]
    pub fn sum(&self) -> f64 {
        self.sum
    }

    /// `(upper bound, observations in that bucket alone)`, ascending, without `+Inf`.
    pub fn bucket_counts(&self) -> impl Iterator<Item = (f64, u64)> + '_ {
        self.bounds.iter().copied().zip(self.counts.iter().copied())
    }

    /// `(upper bound, cumulative count)` per bucket, ascending, without `+Inf` (whose count
    /// is [`count`](Self::count)), as the exposition format wants them.
    pub fn buckets(&self) -> impl Iterator<Item = (f64, u64)> + '_ {
        self.bounds
            .iter()
            .zip(self.counts.iter())
            .scan(0u64, |acc, (bound, n)| {
                *acc += n;
                Some((*bound, *acc))
            })
    }
}

/// Why a source relisted, as a metric label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum RelistLabel {
    /// The cursor expired: 410 Gone / Expired, in an ERROR frame or as the WATCH's status.
    Expired,
    /// The cursor is newer than the server's: 504 / ResourceVersionTooLarge.
    TooLarge,
    /// Another status ended the cursor.
    Other,
    /// A frame that tells no resourceVersion.
    UndecodableFrame,
    /// The replica's shards moved and the apiserver selects by shard.
    ShardsMoved,
}

impl RelistLabel {
    /// Every label, in exposition order.
    pub const ALL: [RelistLabel; 5] = [
        RelistLabel::Expired,
        RelistLabel::TooLarge,
        RelistLabel::Other,
        RelistLabel::UndecodableFrame,
        RelistLabel::ShardsMoved,
    ];

    /// The label value.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            RelistLabel::Expired => "expired",
            RelistLabel::TooLarge => "too_large_resource_version",
            RelistLabel::Other => "other_status",
            RelistLabel::UndecodableFrame => "undecodable_frame",
            RelistLabel::ShardsMoved => "shards_moved",
        }
    }

    fn of(reason: &RelistReason) -> Self {
        let code = match reason {
            RelistReason::ErrorFrame(status) => status.code,
            RelistReason::HttpStatus(code, _) => Some(i32::from(*code)),
            RelistReason::UndecodableFrame(_) => return RelistLabel::UndecodableFrame,
            RelistReason::ShardsMoved => return RelistLabel::ShardsMoved,
        };
        match code {
            Some(410) => RelistLabel::Expired,
            Some(504) => RelistLabel::TooLarge,
            _ => RelistLabel::Other,
        }
    }
}

/// A reconcile's result as controller-runtime labels it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ResultLabel {
    /// Done, nothing scheduled.
    Success,
    /// Failed (with or without an error policy's follow-up).
    Error,
    /// Done, rerun at once (a requeue after zero).
    Requeue,
    /// Done, rerun after a delay.
    RequeueAfter,
}

impl ResultLabel {
    /// Every label, in exposition order.
    pub const ALL: [ResultLabel; 4] = [
        ResultLabel::Success,
        ResultLabel::Error,
        ResultLabel::Requeue,
        ResultLabel::RequeueAfter,
    ];

    /// The label value, as controller-runtime spells it.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            ResultLabel::Success => "success",
            ResultLabel::Error => "error",
            ResultLabel::Requeue => "requeue",
            ResultLabel::RequeueAfter => "requeue_after",
        }
    }
}

/// The loop's metrics as plain data ([`ReconcileLoop::metrics`](crate::ReconcileLoop::metrics)).
///
/// Counters only grow; gauges are as of the loop's latest `now`. `Copy`, so a driver can
/// publish it every turn without an allocation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Metrics {
    /// `controller_runtime_reconcile_total`, by [`ResultLabel`] (indexed as `ResultLabel::ALL`).
    pub reconcile_total: [u64; 4],
    /// `controller_runtime_reconcile_errors_total`.
    pub reconcile_errors_total: u64,
    /// `controller_runtime_reconcile_time_seconds`: dispatch to outcome.
    pub reconcile_time: Histogram<40>,
    /// `controller_runtime_max_concurrent_reconciles`.
    pub max_concurrent_reconciles: u64,
    /// `controller_runtime_active_workers`: reconciles running.
    pub active_workers: u64,
    /// `workqueue_depth`: keys waiting for a slot.
    pub workqueue_depth: u64,
    /// `workqueue_adds_total`: keys newly wanted (an add of a key already wanted is none).
    pub workqueue_adds_total: u64,
    /// `workqueue_queue_duration_seconds`: wanted to dispatched.
    pub workqueue_queue_duration: Histogram<12>,
    /// `workqueue_work_duration_seconds`: dispatched to outcome.
    pub workqueue_work_duration: Histogram<12>,
    /// `workqueue_retries_total`: retries scheduled by the backoff.
    pub workqueue_retries_total: u64,
    /// `workqueue_unfinished_work_seconds`: the running reconciles' ages, summed.
    pub workqueue_unfinished_work_seconds: f64,
    /// `workqueue_longest_running_processor_seconds`: the oldest running reconcile's age.
    pub workqueue_longest_running_processor_seconds: f64,
    /// `reconcile_loop_relists_total`, by [`RelistLabel`] (indexed as `RelistLabel::ALL`).
    pub relists_total: [u64; RelistLabel::ALL.len()],
    /// `reconcile_loop_watch_restarts_total`: watches reopened from their cursor.
    pub watch_restarts_total: u64,
    /// `reconcile_loop_frames_applied_total`: watch frames decoded and applied.
    pub frames_applied_total: u64,
    /// `reconcile_loop_frames_skipped_total`: frames skipped with the cursor advanced.
    pub frames_skipped_total: u64,
    /// `reconcile_loop_lists_total`: LIST requests sent.
    pub lists_total: u64,
    /// `reconcile_loop_list_bytes_total`: LIST body bytes received, over every source.
    pub list_bytes_total: u64,
    /// `reconcile_loop_cursor_age_seconds`: how long ago the stalest source's cursor last
    /// moved (a listing, a frame or a bookmark). The apiserver sends a bookmark about every
    /// minute on a quiet watch, so an age well past that means a stuck watch or a relist
    /// that keeps failing.
    pub cursor_age_seconds: f64,
    /// `reconcile_loop_filtered_updates_total`: updates a predicate kept from waking a
    /// parent (still cached).
    pub filtered_total: u64,
    /// `reconcile_loop_streaming_lists_total`: streaming lists whose initial events were
    /// applied (at their end bookmark), over every source.
    pub streaming_lists_total: u64,
    /// `reconcile_loop_streaming_list_fallbacks_total`: sources that stopped streaming their
    /// listings (refused, or no end bookmark within the bounds) and use LIST+WATCH.
    pub streaming_list_fallbacks_total: u64,
    /// `reconcile_loop_synced`: every source has applied a whole listing.
    pub synced: bool,
    /// `reconcile_loop_leader`: `Some(leading)` with an election, `None` without.
    pub leader: Option<bool>,
    /// `reconcile_loop_leadership_transitions_total`: terms begun and lost here.
    pub leadership_transitions_total: u64,
    /// `controller_runtime_reconcile_timeouts_total`: reconciles cancelled at their
    /// deadline (`Config::reconcile_timeout`).
    pub reconcile_timeouts_total: u64,
    /// `reconcile_loop_own_write_holds_total`: dispatches held until the key's own writes
    /// were observed (once per wait).
    pub own_write_holds_total: u64,
    /// `reconcile_loop_own_write_hold_seconds`: how long each held dispatch waited, whether
    /// its writes were observed or its wait ran out.
    pub own_write_hold_seconds: Histogram<40>,
    /// `reconcile_loop_own_write_timeouts_total`: held keys dispatched anyway, their writes
    /// unobserved after `Config::read_own_writes`.
    pub own_write_timeouts_total: u64,
    /// `reconcile_loop_own_writes_untracked_total`: reported writes not waited for (not a
    /// number, no cursor, table full: fail open).
    pub own_writes_untracked_total: u64,
    /// `reconcile_loop_own_writes_waiting`: keys whose writes are not observed yet.
    pub own_writes_waiting: u64,
    /// `reconcile_loop_shards_held`: `Some(shards)` this replica holds when sharded.
    pub shards_held: Option<u64>,
    /// `reconcile_loop_shard_server_selection`: when the primary's shards may be selected
    /// on the apiserver (KEP-5866), `Some(true)` while they are and `Some(false)` once the
    /// apiserver was found to ignore the selector (every object cached, filtered on
    /// dispatch); `None` when not selected.
    pub shard_server_selection: Option<bool>,
    /// `reconcile_loop_shard_transitions_total`: shard terms begun and ended here (each
    /// ended one a handover).
    pub shard_transitions_total: u64,
    /// `reconcile_loop_shard_takeover_seconds`: from first seeing a shard free or expired to
    /// holding it.
    pub shard_takeover_seconds: Histogram<40>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            reconcile_total: [0; 4],
            reconcile_errors_total: 0,
            reconcile_time: Histogram::new(&RECONCILE_TIME_BUCKETS),
            max_concurrent_reconciles: 0,
            active_workers: 0,
            workqueue_depth: 0,
            workqueue_adds_total: 0,
            workqueue_queue_duration: Histogram::new(&WORKQUEUE_BUCKETS),
            workqueue_work_duration: Histogram::new(&WORKQUEUE_BUCKETS),
            workqueue_retries_total: 0,
            workqueue_unfinished_work_seconds: 0.0,
            workqueue_longest_running_processor_seconds: 0.0,
            relists_total: [0; RelistLabel::ALL.len()],
            watch_restarts_total: 0,
            frames_applied_total: 0,
            frames_skipped_total: 0,
            lists_total: 0,
            list_bytes_total: 0,
            cursor_age_seconds: 0.0,
            filtered_total: 0,
            streaming_lists_total: 0,
            streaming_list_fallbacks_total: 0,
            synced: false,
            leader: None,
            leadership_transitions_total: 0,
            reconcile_timeouts_total: 0,
            own_write_holds_total: 0,
            own_write_hold_seconds: Histogram::new(&RECONCILE_TIME_BUCKETS),
            own_write_timeouts_total: 0,
            own_writes_untracked_total: 0,
            own_writes_waiting: 0,
            shards_held: None,
            shard_server_selection: None,
            shard_transitions_total: 0,
            shard_takeover_seconds: Histogram::new(&RECONCILE_TIME_BUCKETS),
        }
    }
}

impl Metrics {
    /// The `controller_runtime_reconcile_total` counter for `result`.
    #[must_use]
    pub fn reconciles(&self, result: ResultLabel) -> u64 {
        self.reconcile_total[result as usize]
    }

    /// The `reconcile_loop_relists_total` counter for `reason`.
    #[must_use]
    pub fn relists(&self, reason: RelistLabel) -> u64 {
        self.relists_total[reason as usize]
    }

    pub(crate) fn count_result(&mut self, result: ResultLabel) {
        self.reconcile_total[result as usize] += 1;
    }

    /// Counts what an event reports: the loop's events are its outputs, so what is counted
    /// here is exactly what a trace shows.
    pub(crate) fn count_event<P>(&mut self, event: &Event<P>) {
        match event {
            Event::Relist { reason, .. } => {
                self.relists_total[RelistLabel::of(reason) as usize] += 1;
            }
            Event::WatchRetry { .. } => self.watch_restarts_total += 1,
            Event::Filtered { .. } => self.filtered_total += 1,
            Event::InitialEventsEnd { .. } => self.streaming_lists_total += 1,
            Event::StreamingListFallback { .. } => self.streaming_list_fallbacks_total += 1,
            Event::ReconcileTimedOut { .. } => self.reconcile_timeouts_total += 1,
            Event::HeldForOwnWrites { .. } => self.own_write_holds_total += 1,
            Event::OwnWritesObserved { held_for, .. } => {
                self.own_write_hold_seconds.observe(held_for.as_secs_f64());
            }
            Event::OwnWritesUnobserved { held_for, .. } => {
                self.own_write_timeouts_total += 1;
                self.own_write_hold_seconds.observe(held_for.as_secs_f64());
            }
            Event::OwnWriteUntracked { .. } => self.own_writes_untracked_total += 1,
            _ => {}
        }
    }
}

/// Seconds from `from` to `to` (zero when `to` is earlier), as a metric value.
pub(crate) fn seconds(from: Instant, to: Instant) -> f64 {
    to.saturating_duration_since(from).as_secs_f64()
}
