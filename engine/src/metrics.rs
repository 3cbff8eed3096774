//! The controller's metrics in Prometheus form, under controller-runtime's and client-go's
//! workqueue names and labels, so their dashboards and alerts work unchanged.
//!
//! The figures are the core's ([`reconcile_core::Metrics`]), published by the driver task
//! after every turn; [`ControllerMetrics`] is a `prometheus-client` [`Collector`] that
//! encodes the latest of them on each scrape. Register it in your own registry
//! ([`Handle::collector`](crate::Handle::collector)) next to your metrics, or serve the
//! drivers' endpoints ([`Endpoints`](crate::Endpoints)).
//!
//! | series | labels | from |
//! |---|---|---|
//! | `controller_runtime_reconcile_total` | `controller`, `result` | outcomes: `success`, `error`, `requeue` (requeue after zero), `requeue_after` |
//! | `controller_runtime_reconcile_errors_total` | `controller` | failed outcomes |
//! | `controller_runtime_reconcile_time_seconds` | `controller` | dispatch to outcome, controller-runtime's buckets |
//! | `controller_runtime_max_concurrent_reconciles` | `controller` | `concurrency` |
//! | `controller_runtime_active_workers` | `controller` | reconciles running |
//! | `workqueue_depth` | `name`, `controller` | keys waiting for a slot |
//! | `workqueue_adds_total` | `name`, `controller` | keys newly wanted |
//! | `workqueue_queue_duration_seconds` | `name`, `controller` | wanted to dispatched |
//! | `workqueue_work_duration_seconds` | `name`, `controller` | dispatched to outcome |
//! | `workqueue_retries_total` | `name`, `controller` | retries scheduled by the backoff |
//! | `workqueue_unfinished_work_seconds` | `name`, `controller` | ages of the running reconciles, summed |
//! | `workqueue_longest_running_processor_seconds` | `name`, `controller` | age of the oldest running reconcile |
//! | `reconcile_loop_relists_total` | `controller`, `reason` | relists: `expired`, `too_large_resource_version`, `other_status`, `undecodable_frame`, `shards_moved` |
//! | `reconcile_loop_watch_restarts_total` | `controller` | watches reopened from their cursor |
//! | `reconcile_loop_frames_applied_total` | `controller` | watch frames applied |
//! | `reconcile_loop_frames_skipped_total` | `controller` | frames skipped with the cursor advanced |
//! | `reconcile_loop_lists_total` | `controller` | LIST requests sent |
//! | `reconcile_loop_list_bytes_total` | `controller` | LIST body bytes received, every source |
//! | `reconcile_loop_cursor_age_seconds` | `controller` | since the stalest source's cursor last moved |
//! | `reconcile_loop_filtered_updates_total` | `controller` | updates a predicate kept from waking (still cached) |
//! | `reconcile_loop_streaming_lists_total` | `controller` | streaming lists applied at their end bookmark, every source |
//! | `reconcile_loop_streaming_list_fallbacks_total` | `controller` | sources fallen back from streaming lists to LIST+WATCH |
//! | `reconcile_loop_synced` | `controller` | 1 once every source has listed |
//! | `reconcile_loop_shared_subscribers` | `controller` | controllers fed from this cache as a shared source (only once one subscribed) |
//! | `reconcile_loop_shared_lagged_total` | `controller` | subscribers cut off a buffer behind, to resubscribe with a fresh snapshot |
//! | `reconcile_loop_leader` | `controller` | 1 while leading (only with an election) |
//! | `reconcile_loop_leadership_transitions_total` | `controller` | terms begun and lost here |
//! | `reconcile_loop_shards_held` | `controller` | shards this replica holds (only when sharded) |
//! | `reconcile_loop_shard_transitions_total` | `controller` | shard terms begun and ended here |
//! | `reconcile_loop_shard_takeover_seconds` | `controller` | from first seeing a shard free or expired to holding it |
//! | `reconcile_loop_shard_server_selection` | `controller` | 1 while the apiserver selects this replica's shards, 0 once it was found to ignore `shardSelector` (only when selecting) |
//!
//! Gauges are as of the driver's last turn.

use std::sync::{Arc, Mutex, MutexGuard};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;
use reconcile_core::Metrics;
use reconcile_core::metrics::{Histogram, RelistLabel, ResultLabel};

use super::cache::ShareStats;

/// The latest figures and the name they are labelled with, shared by the driver task (which
/// writes them once per turn) and every collector.
#[derive(Debug)]
pub(crate) struct MetricsCell {
    state: Mutex<(Arc<str>, Metrics)>,
    /// The controller's cache as a shared source: its subscribers and how many lagged.
    share: Mutex<ShareStats>,
}

impl MetricsCell {
    pub(crate) fn new(name: &str) -> Self {
        MetricsCell {
            state: Mutex::new((Arc::from(name), Metrics::default())),
            share: Mutex::new(ShareStats::default()),
        }
    }

    fn state(&self) -> MutexGuard<'_, (Arc<str>, Metrics)> {
        // Held only to copy a value in or out, so a poisoned lock still holds a whole one.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn set_name(&self, name: &str) {
        self.state().0 = Arc::from(name);
    }

    pub(crate) fn name(&self) -> Arc<str> {
        Arc::clone(&self.state().0)
    }

    pub(crate) fn publish(&self, metrics: Metrics) {
        self.state().1 = metrics;
    }

    /// Publishes the share's figures after a turn.
    pub(crate) fn publish_share(&self, stats: ShareStats) {
        *self
            .share
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = stats;
    }

    fn share(&self) -> ShareStats {
        *self
            .share
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn get(&self) -> (Arc<str>, Metrics) {
        let state = self.state();
        (Arc::clone(&state.0), state.1)
    }
}

/// A controller's metrics as a `prometheus-client` [`Collector`]: each scrape encodes the
/// figures of the driver's last turn, labelled with the controller's name
/// ([`Controller::name`](crate::Controller::name)).
///
/// ```
/// # use prometheus_client::registry::Registry;
/// # fn demo<O, P>(handle: reconcile_engine::Handle<O, P>) {
/// let mut registry = Registry::default();
/// registry.register_collector(Box::new(handle.collector()));
/// # }
/// ```
///
/// Register it in a registry without a prefix: a prefix renames every series, and
/// controller-runtime's dashboards would no longer find them.
#[derive(Debug, Clone)]
pub struct ControllerMetrics {
    cell: Arc<MetricsCell>,
}

impl ControllerMetrics {
    pub(crate) fn new(cell: Arc<MetricsCell>) -> Self {
        ControllerMetrics { cell }
    }

    /// The figures as of the driver's last turn.
    #[must_use]
    pub fn get(&self) -> Metrics {
        self.cell.get().1
    }
}

type Labels<'a> = [(&'static str, &'a str)];

fn counter(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    series: &[(&Labels<'_>, u64)],
) -> Result<(), std::fmt::Error> {
    let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (labels, value) in series {
        ConstCounter::new(*value).encode(metric.encode_family(labels)?)?;
    }
    Ok(())
}

fn gauge(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    labels: &Labels<'_>,
    value: f64,
) -> Result<(), std::fmt::Error> {
    let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    ConstGauge::new(value).encode(metric.encode_family(&labels)?)
}

fn histogram<const N: usize>(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    labels: &Labels<'_>,
    histogram: &Histogram<N>,
) -> Result<(), std::fmt::Error> {
    let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Histogram)?;
    // The encoder takes each bucket's own count and adds `+Inf` itself.
    let buckets: Vec<(f64, u64)> = histogram.bucket_counts().collect();
    metric
        .encode_family(&labels)?
        .encode_histogram::<NoLabelSet>(histogram.sum(), histogram.count(), &buckets, None)
}

#[allow(clippy::cast_precision_loss)] // gauges are f64 in the format
fn float(n: u64) -> f64 {
    n as f64
}

impl Collector for ControllerMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let (name, m) = self.cell.get();
        let e = &mut encoder;
        let controller: &Labels<'_> = &[("controller", &name)];
        // controller-runtime names its workqueue after the controller.
        let queue: &Labels<'_> = &[("name", &name), ("controller", &name)];

        // Help texts are controller-runtime's and client-go's, word for word.
        let by_result: Vec<([(&str, &str); 2], u64)> = ResultLabel::ALL
            .iter()
            .map(|r| {
                (
                    [("controller", &*name), ("result", r.as_str())],
                    m.reconciles(*r),
                )
            })
            .collect();
        let series: Vec<(&Labels<'_>, u64)> = by_result.iter().map(|(l, v)| (&l[..], *v)).collect();
        counter(
            e,
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller",
            &series,
        )?;
        counter(
            e,
            "controller_runtime_reconcile_errors",
            "Total number of reconciliation errors per controller",
            &[(controller, m.reconcile_errors_total)],
        )?;
        histogram(
            e,
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            controller,
            &m.reconcile_time,
        )?;
        counter(
            e,
            "controller_runtime_reconcile_timeouts",
            "Total number of reconciliation timeouts per controller",
            &[(controller, m.reconcile_timeouts_total)],
        )?;
        gauge(
            e,
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller",
            controller,
            float(m.max_concurrent_reconciles),
        )?;
        gauge(
            e,
            "controller_runtime_active_workers",
            "Number of currently used workers per controller",
            controller,
            float(m.active_workers),
        )?;

        gauge(
            e,
            "workqueue_depth",
            "Current depth of workqueue",
            queue,
            float(m.workqueue_depth),
        )?;
        counter(
            e,
            "workqueue_adds",
            "Total number of adds handled by workqueue",
            &[(queue, m.workqueue_adds_total)],
        )?;
        histogram(
            e,
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            queue,
            &m.workqueue_queue_duration,
        )?;
        histogram(
            e,
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes.",
            queue,
            &m.workqueue_work_duration,
        )?;
        gauge(
            e,
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and hasn't been \
             observed by work_duration. Large values indicate stuck threads. One can deduce \
             the number of stuck threads by observing the rate at which this increases.",
            queue,
            m.workqueue_unfinished_work_seconds,
        )?;
        gauge(
            e,
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running.",
            queue,
            m.workqueue_longest_running_processor_seconds,
        )?;
        counter(
            e,
            "workqueue_retries",
            "Total number of retries handled by workqueue",
            &[(queue, m.workqueue_retries_total)],
        )?;

        let by_reason: Vec<([(&str, &str); 2], u64)> = RelistLabel::ALL
            .iter()
            .map(|r| {
                (
                    [("controller", &*name), ("reason", r.as_str())],
                    m.relists(*r),
                )
            })
            .collect();
        let series: Vec<(&Labels<'_>, u64)> = by_reason.iter().map(|(l, v)| (&l[..], *v)).collect();
        counter(
            e,
            "reconcile_loop_relists",
            "Relists by reason: the watch cursor died and the collection was listed again",
            &series,
        )?;
        counter(
            e,
            "reconcile_loop_watch_restarts",
            "Watches reopened from their cursor after ending or failing",
            &[(controller, m.watch_restarts_total)],
        )?;
        counter(
            e,
            "reconcile_loop_frames_applied",
            "Watch frames decoded and applied to the cache",
            &[(controller, m.frames_applied_total)],
        )?;
        counter(
            e,
            "reconcile_loop_frames_skipped",
            "Watch frames that did not decode but told their resourceVersion: skipped, cursor advanced",
            &[(controller, m.frames_skipped_total)],
        )?;
        counter(
            e,
            "reconcile_loop_lists",
            "LIST requests sent",
            &[(controller, m.lists_total)],
        )?;
        counter(
            e,
            "reconcile_loop_list_bytes",
            "LIST body bytes received, over every source",
            &[(controller, m.list_bytes_total)],
        )?;
        gauge(
            e,
            "reconcile_loop_cursor_age_seconds",
            "Seconds since the stalest source's cursor last moved (a listing, a frame or a bookmark)",
            controller,
            m.cursor_age_seconds,
        )?;
        counter(
            e,
            "reconcile_loop_filtered_updates",
            "Updates a predicate kept from waking a parent; still cached",
            &[(controller, m.filtered_total)],
        )?;
        counter(
            e,
            "reconcile_loop_streaming_lists",
            "Streaming lists whose initial events were applied at their end bookmark, over every source",
            &[(controller, m.streaming_lists_total)],
        )?;
        counter(
            e,
            "reconcile_loop_streaming_list_fallbacks",
            "Sources that stopped streaming their listings (refused, or no end bookmark in time) and list then watch",
            &[(controller, m.streaming_list_fallbacks_total)],
        )?;
        gauge(
            e,
            "reconcile_loop_synced",
            "1 once every source has applied a whole listing",
            controller,
            if m.synced { 1.0 } else { 0.0 },
        )?;
        let share = self.cell.share();
        if share.subscriptions > 0 {
            gauge(
                e,
                "reconcile_loop_shared_subscribers",
                "Controllers fed from this cache as a shared source",
                controller,
                share.subscribers as f64,
            )?;
            counter(
                e,
                "reconcile_loop_shared_lagged",
                "Subscribers cut off a whole buffer behind, each to resubscribe with a fresh snapshot",
                &[(controller, share.lagged)],
            )?;
        }
        if let Some(leading) = m.leader {
            gauge(
                e,
                "reconcile_loop_leader",
                "1 while this candidate holds the leader election's Lease",
                controller,
                if leading { 1.0 } else { 0.0 },
            )?;
        }
        if let Some(held) = m.shards_held {
            gauge(
                e,
                "reconcile_loop_shards_held",
                "Shards whose Lease this replica holds",
                controller,
                held as f64,
            )?;
            counter(
                e,
                "reconcile_loop_shard_transitions",
                "Shard terms begun and ended by this replica",
                &[(controller, m.shard_transitions_total)],
            )?;
            if let Some(selecting) = m.shard_server_selection {
                gauge(
                    e,
                    "reconcile_loop_shard_server_selection",
                    "1 while the apiserver lists and watches only this replica's shards (shardSelector), 0 once found to ignore it",
                    controller,
                    if selecting { 1.0 } else { 0.0 },
                )?;
            }
            histogram(
                e,
                "reconcile_loop_shard_takeover_seconds",
                "From first seeing a shard free or expired to holding it",
                controller,
                &m.shard_takeover_seconds,
            )?;
        }
        counter(
            e,
            "reconcile_loop_leadership_transitions",
            "Leadership terms begun and lost by this candidate",
            &[(controller, m.leadership_transitions_total)],
        )?;
        counter(
            e,
            "reconcile_loop_own_write_holds",
            "Dispatches held until the sources observed the key's own writes (once per wait)",
            &[(controller, m.own_write_holds_total)],
        )?;
        histogram(
            e,
            "reconcile_loop_own_write_hold_seconds",
            "How long a dispatch held for the key's own writes waited",
            controller,
            &m.own_write_hold_seconds,
        )?;
        counter(
            e,
            "reconcile_loop_own_write_timeouts",
            "Held keys dispatched anyway, their own writes unobserved when the wait ran out",
            &[(controller, m.own_write_timeouts_total)],
        )?;
        counter(
            e,
            "reconcile_loop_own_writes_untracked",
            "Reported writes not waited for: a resourceVersion or cursor not a number, or the table full",
            &[(controller, m.own_writes_untracked_total)],
        )?;
        gauge(
            e,
            "reconcile_loop_own_writes_waiting",
            "Keys whose own writes the sources have not observed yet",
            controller,
            float(m.own_writes_waiting),
        )?;
        Ok(())
    }
}

/// A registry holding `metrics` alone, for a quick `/metrics` without one of your own.
#[must_use]
pub fn registry_with(metrics: ControllerMetrics) -> Registry {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(metrics));
    registry
}
