//! The loop: lifecycle, the sync barrier, dispatch with bounded concurrency, retries and
//! resync (controller-runtime's `Controller` over client-go's informer).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::controller::config::{Config, ConfigError, ShardText, SourceConfig};
use crate::controller::key_map::KeyMap;
use crate::controller::own_writes::{CursorState, Gate, OwnWrites, Released};
use crate::controller::queue::{Debounce, WorkQueue};
use crate::controller::retry::RetryScheduler;
use crate::election::{
    Change as ElectionChange, ElectionWake, Elector, Leadership, LeaseResponse, OnLost,
};
use crate::hashing::FixedState;
use crate::metrics::{Metrics, ResultLabel, seconds};
use crate::shard::{Ask, Selection, ShardBy, ShardChange, ShardTable, Sharding};
use crate::source::Change;
use crate::source::in_process::InProcessSource;
use crate::source::reflector::{Reflector, Timing};
use crate::source::secondaries::Secondaries;
use crate::source::secondary::Secondary;
use crate::source::secondary::{Applied, Scope};
use crate::source::store::{CacheChange, Rejected, Store};
use crate::source::transform::Transform;
use crate::time::Instant;
use crate::vocabulary::{
    Command, Deadline, Event, Input, MintIds, Outbox, Outcome, Output, OwnWrite, Related,
    RequestId, SourceId, StreamId, Ticket, Wake,
};
use crate::wire::object::{Object, ObjectKey};

/// What a `Replace` of the primary holds (`ReconcileLoop::apply_primary`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Listed {
    /// Every object: a whole listing (or a change that is no listing at all).
    Whole,
    /// The objects of the shards just gained, listed at this version; the cache keeps the
    /// objects of the shards it still covers.
    Gained(u64),
    /// Nothing new: the cache keeps only the objects of the shards it still covers.
    Kept,
}

/// Where the loop is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lifecycle {
    /// Built, not started.
    New,
    /// Started.
    Running,
    /// Draining ([`Input::Drain`]): the sources are closed and nothing new is dispatched;
    /// the running reconciles finish, then the loop stops by itself.
    Draining,
    /// Stopped; only closes were emitted since.
    Stopped,
}

/// Counters of what the loop has seen, for tests, simulators and metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Watch lines parsed.
    pub frames: u64,
    /// Frames skipped with the cursor advanced.
    pub frames_skipped: u64,
    /// LIST commands issued.
    pub lists: u64,
    /// WATCH commands issued.
    pub watches: u64,
    /// Relists caused by a dead cursor or an undecodable frame.
    pub relists: u64,
    /// Reconciles dispatched.
    pub reconciles: u64,
    /// Reconciles that failed.
    pub reconcile_errors: u64,
    /// Inputs ignored as stale.
    pub stale_inputs: u64,
    /// Objects evicted or refused by the store.
    pub rejected_objects: u64,
    /// Resyncs that fired.
    pub resyncs: u64,
    /// Dispatches held for the key's own writes (once per wait).
    pub own_write_holds: u64,
    /// Held keys dispatched anyway, their writes unobserved after `read_own_writes`.
    pub own_write_timeouts: u64,
    /// Reconciles cancelled at their deadline.
    pub reconcile_timeouts: u64,
}

#[derive(Debug, Default)]
struct Ids {
    next: u64,
}

impl Ids {
    fn bump(&mut self) -> u64 {
        self.next += 1;
        self.next
    }
}

impl MintIds for Ids {
    fn request(&mut self) -> RequestId {
        RequestId(self.bump())
    }

    fn stream(&mut self) -> StreamId {
        StreamId(self.bump())
    }
}

enum Source<O> {
    Kubernetes(Box<Reflector<O>>),
    InProcess(InProcessSource),
}

/// A level-triggered reconcile loop as a pure state machine.
///
/// # The contract
/// - **Inputs**: every input is an [`Input`] fed with [`handle_input`](Self::handle_input),
///   stamped with `now`. The core never reads a clock; time never goes backwards inside it
///   (an earlier `now` is clamped to the latest seen), and inputs at the same instant may
///   come in any order. Which input answers which command:
///
///   | input | answers |
///   |---|---|
///   | [`Start`](Input::Start) | (nothing: the first input) |
///   | [`List`](Input::List) | [`Command::List`] |
///   | [`WatchOpened`](Input::WatchOpened), [`WatchLine`](Input::WatchLine), [`WatchEnd`](Input::WatchEnd) | [`Command::Watch`] |
///   | [`SourceEvent`](Input::SourceEvent), [`SourceCursor`](Input::SourceCursor), [`SourceEnd`](Input::SourceEnd) | [`Command::OpenSource`] |
///   | [`Reconciled`](Input::Reconciled) | [`Command::Reconcile`] |
///   | [`Timeout`](Input::Timeout) | [`Output::Timeout`] (the deadline passed) |
///   | [`Stop`](Input::Stop) | (nothing: the last input) |
///
///   [`Command::CancelList`], [`Command::CloseWatch`], [`Command::CloseSource`] and
///   [`Command::CancelReconcile`] need no answer: anything that still arrives for what they
///   closed is ignored as stale.
///
/// - **Outputs**: after feeding, call [`poll_output`](Self::poll_output) until it returns
///   [`Output::Timeout`]. Only then sleep, until that deadline or the next input, and feed
///   [`Input::Timeout`] once the deadline has passed. Commands are never queued behind the
///   timeout, so a driver that drains first cannot miss a wakeup.
/// - **Coalescing**: inputs only record what changed; reconciles are decided when the driver
///   drains. All inputs fed between two drains wake each parent at most once, the parents
///   woken together are dispatched in ascending key order, and each reconcile's members are
///   read at that drain, so it sees every input before it. A driver that feeds everything it
///   has read before draining gets the most coalescing.
/// - **Ids**: the core mints every [`RequestId`], [`StreamId`] and [`Ticket`]. An input
///   naming one that is no longer live (a frame from a closed stream, a second outcome for
///   one ticket), or a lifecycle input out of order, is ignored and reported as
///   [`Event::Stale`].
/// - **Timers**: [`Input::Timeout`] fires whatever is due in a fixed order (reflector,
///   in-process source, per-key retries, resync); an early or spurious one is a no-op. The
///   first resync comes one full period after the first sync.
/// - **Reads**: [`members`](Self::members) and [`store`](Self::store) show the cache, which
///   is always updated before the keys it wakes are queued.
///
/// No output depends on hash order: every collection here is ordered.
#[doc(alias = "Controller")]
pub struct ReconcileLoop<O, P> {
    key_map: KeyMap<O, P>,
    concurrency: usize,
    resync: Option<Duration>,
    lifecycle: Lifecycle,
    now: Instant,
    source: Source<O>,
    /// The secondary sources, `S1` onwards, in the order configured.
    secondaries: Secondaries<O, P>,
    /// Per secondary: its source number in the [`Selection`] when the shard selector is
    /// sent on its requests too (an owned kind, under a selected primary).
    secondary_slots: Vec<Option<usize>>,
    store: Store<O, P>,
    /// Keys from here on are the store's shared `Arc<P>`: queueing, dispatching and
    /// completing a reconcile then clone no key and compare most by pointer (a resync of 1M
    /// pods spent a third of its time allocating, freeing and comparing key strings).
    queue: WorkQueue<Arc<P>>,
    /// Keys held before they are queued (`Config::debounce`); `None` queues at once.
    debounce: Option<Debounce<Arc<P>>>,
    retry: RetryScheduler<Arc<P>>,
    /// Invariant: `in_flight.len() <= concurrency`, and no parent appears twice. Each run
    /// keeps the instant it was dispatched, for the work-duration metrics.
    in_flight: BTreeMap<Ticket, (Arc<P>, Instant)>,
    /// Sum of `in_flight`'s dispatch instants, in nanoseconds: the unfinished-work gauge
    /// without a walk over the running set.
    in_flight_since: u128,
    /// When each key waiting in the queue was first wanted (client-go's `addTimes`). Only
    /// probed, never iterated, so its order reaches no output.
    queued_at: std::collections::HashMap<Arc<P>, Instant, FixedState>,
    /// The counters and histograms only the loop's transitions can update.
    metrics: Metrics,
    /// The primary's first whole listing has been applied.
    primary_synced: bool,
    /// Every source has applied a whole listing: the sync barrier is passed.
    synced: bool,
    resync_at: Option<Instant>,
    out: Outbox<O, P>,
    ids: Ids,
    stats: Stats,
    /// Parents woken since the last drain; sorted, deduplicated and queued at the next one.
    wakes: Vec<Arc<P>>,
    /// Something since the last drain may let a reconcile start (a wake, a freed slot).
    dispatch_due: bool,
    rejected: Vec<Rejected<P>>,
    /// Listings, resyncs and reconcile-all triggers wake at low priority.
    priority: bool,
    /// Parents woken at low priority since the last drain.
    low_wakes: Vec<Arc<P>>,
    /// Applied to each primary object before the store takes it.
    transform: Option<Transform<O>>,
    /// The primary's predicate as it prints, for `Event::Filtered`.
    predicate_name: Option<Arc<str>>,
    /// The election, when configured: dispatch waits for leadership.
    elector: Option<Elector>,
    /// The shard table, when sharded: a key is dispatched only inside this replica's term
    /// on its shard.
    shards: Option<ShardTable<Arc<P>>>,
    shard_text: Option<ShardText<P>>,
    /// When the primary's shards are selected on the apiserver (KEP-5866): the shards
    /// asked for, and those its cache already holds.
    selection: Option<Selection>,
    on_lost: OnLost,
    /// Keys waiting for their writes to be observed; `None` when read your own writes is off.
    own_writes: Option<OwnWrites<Arc<P>>>,
    /// Every run's deadline unless it sets its own.
    reconcile_timeout: Option<Duration>,
    /// The running reconciles' deadlines, by run and in firing order.
    run_deadlines: BTreeMap<Ticket, Instant>,
    run_deadline_order: BTreeSet<(Instant, Ticket)>,
}

impl<O, P: fmt::Debug> fmt::Debug for ReconcileLoop<O, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReconcileLoop")
            .field("lifecycle", &self.lifecycle)
            .field("now", &self.now)
            .field("synced", &self.synced)
            .field("in_flight", &self.in_flight)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl<O: Object, P: Ord + std::hash::Hash + Clone> ReconcileLoop<O, P> {
    /// Builds a loop; nothing happens until [`Input::Start`].
    ///
    /// # Errors
    /// [`ConfigError`] when a setting is out of bounds.
    pub fn new(config: Config<O, P>, now: Instant) -> Result<Self, ConfigError> {
        config.validate()?;
        if let SourceConfig::Kubernetes(params) = &config.source {
            crate::controller::config::check_wire_format::<O>(SourceId::PRIMARY, params)?;
        }
        let timing = Timing {
            retry_delay: config.retry_delay,
            list_deadline: config.list_deadline,
            max_listing_bytes: config.max_listing_bytes,
        };
        let source = match config.source {
            SourceConfig::Kubernetes(params) => {
                Source::Kubernetes(Box::new(Reflector::new(SourceId::PRIMARY, params, timing)))
            }
            SourceConfig::InProcess => {
                Source::InProcess(InProcessSource::new(config.source_retry_delay))
            }
        };
        let secondaries = config
            .secondaries
            .iter()
            .zip(1..)
            .map(|((_, spec), n)| spec.build(SourceId::nth(n), timing))
            .collect();
        let secondaries = Secondaries::new(secondaries);
        let mut store = Store::default();
        let predicate_name = config.predicate.as_ref().map(|p| Arc::from(p.to_string()));
        store.set_predicate(config.predicate);
        let transform = config.transform;
        let on_lost = match (&config.election, &config.sharding) {
            (Some(e), _) => e.on_lost,
            (None, Some((s, _))) => s.on_lost,
            (None, None) => OnLost::Cancel,
        };
        // Selected on the server only where a key's shard is its objects' namespace's: keys
        // by name or by owner (owners are in their objects' namespace).
        let selectable = matches!(source, Source::Kubernetes(_))
            && matches!(
                config.key_map.describe(),
                Some(crate::KeyBy::Name | crate::KeyBy::Owner(_))
            );
        let selected = config
            .sharding
            .as_ref()
            .is_some_and(|(s, _)| selectable && s.select_on_server && s.by == ShardBy::Namespace);
        // Owned secondaries follow a selected primary: numbered from 1 in the selection.
        let mut slots = 0;
        let secondary_slots: Vec<Option<usize>> = secondaries
            .iter()
            .map(|source| {
                (selected && source.selectable()).then(|| {
                    slots += 1;
                    slots
                })
            })
            .collect();
        let selection = selected.then(|| Selection::new(1 + slots));
        let (shards, shard_text) = match config.sharding {
            Some((sharding, text)) => (Some(ShardTable::new(sharding)), Some(text)),
            None => (None, None),
        };
        Ok(ReconcileLoop {
            own_writes: config
                .read_own_writes
                .map(|wait| OwnWrites::new(wait, config.max_own_writes)),
            reconcile_timeout: config.reconcile_timeout,
            run_deadlines: BTreeMap::new(),
            run_deadline_order: BTreeSet::new(),
            elector: config.election.map(Elector::new),
            shards,
            shard_text,
            selection,
            on_lost,
            key_map: config.key_map,
            concurrency: config.concurrency,
            resync: config.resync,
            lifecycle: Lifecycle::New,
            now,
            source,
            secondaries,
            secondary_slots,
            store,
            predicate_name,
            transform,
            priority: config.priority,
            low_wakes: Vec::new(),
            queue: WorkQueue::default(),
            debounce: config.debounce.map(Debounce::new),
            retry: RetryScheduler::new(config.backoff),
            in_flight: BTreeMap::new(),
            in_flight_since: 0,
            queued_at: std::collections::HashMap::default(),
            metrics: Metrics::default(),
            primary_synced: false,
            synced: false,
            resync_at: None,
            out: Outbox::new(),
            ids: Ids::default(),
            stats: Stats::default(),
            wakes: Vec::new(),
            dispatch_due: false,
            rejected: Vec::new(),
        })
    }

    // ----- inputs -----

    /// Feeds one input at `now`. Drain [`poll_output`](Self::poll_output) afterwards (or
    /// after a batch of inputs) until it returns [`Output::Timeout`].
    pub fn handle_input(&mut self, now: Instant, input: Input<O>) {
        let now = self.advance(now);
        let kind = input.kind();
        match (self.lifecycle, input) {
            (Lifecycle::New, Input::Start) => self.start(),
            (Lifecycle::Running | Lifecycle::Draining, Input::Stop) => self.stop(),
            (Lifecycle::Running, Input::Drain) => self.drain(),
            (Lifecycle::Draining, Input::Drain) => {}
            (Lifecycle::Draining, Input::Reconciled { ticket, outcome }) => {
                self.handle_reconciled(now, ticket, outcome);
                self.shard_reconcile_ended(now);
                self.finish_drain();
            }
            (
                Lifecycle::Draining,
                Input::ReconciledWrote {
                    ticket,
                    outcome,
                    writes: _,
                },
            ) => {
                // Nothing is dispatched again: the writes need no wait.
                self.handle_reconciled(now, ticket, outcome);
                self.shard_reconcile_ended(now);
                self.finish_drain();
            }
            (
                Lifecycle::Running | Lifecycle::Draining,
                Input::ReconcileTimeout { ticket, timeout },
            ) => {
                self.set_run_deadline(ticket, timeout);
            }
            (Lifecycle::Draining, Input::Lease { req, response }) => {
                self.handle_lease(now, req, response);
                self.finish_drain();
            }
            (Lifecycle::Draining, Input::Timeout) => {
                // Only the election's timers and the running reconciles' deadlines still
                // matter: the running reconciles need the term kept.
                self.fire_run_deadlines(now);
                if let Some(elector) = &mut self.elector {
                    let change = elector.handle_timeout(now, &mut self.ids, &mut self.out);
                    self.leadership_changed(change);
                }
                self.shard_timeout(now);
                self.finish_drain();
            }
            (Lifecycle::Stopped, Input::Stop) => {}
            (Lifecycle::Running, Input::Timeout) => self.handle_timeout(now),
            (_, Input::Timeout) => {}
            (Lifecycle::Running, Input::ReconcileAll) => self.reconcile_all(),
            (Lifecycle::Running, Input::ReconcileOn { object }) => self.reconcile_on(object),
            (Lifecycle::Running, Input::Lease { req, response }) => {
                self.handle_lease(now, req, response);
            }
            (Lifecycle::Running, Input::Reconciled { ticket, outcome }) => {
                self.handle_reconciled(now, ticket, outcome);
                self.shard_reconcile_ended(now);
            }
            (
                Lifecycle::Running,
                Input::ReconciledWrote {
                    ticket,
                    outcome,
                    writes,
                },
            ) => {
                if let Some(parent) = self.handle_reconciled(now, ticket, outcome) {
                    self.record_writes(now, &parent, &writes);
                }
                self.shard_reconcile_ended(now);
            }
            (Lifecycle::Running, input) => {
                if let Some(input) = self.route_to_secondary(now, input) {
                    self.feed_primary(now, kind, input);
                }
                self.release_observed(now);
            }
            _ => self.stale(kind),
        }
    }

    /// Hands `input` to the secondary source whose LIST or WATCH it answers; gives it back
    /// when it is none of theirs.
    fn route_to_secondary(&mut self, now: Instant, input: Input<O>) -> Option<Input<O>> {
        if self.secondaries.is_empty() {
            // The single-source loop, and its per-frame path, pay nothing for secondaries.
            return Some(input);
        }
        let owner = match &input {
            Input::List { req, .. } => self.secondaries.owner_of_list(*req),
            Input::WatchOpened { stream }
            | Input::WatchLine { stream, .. }
            | Input::WatchEnd { stream, .. } => self.secondaries.owner_of_stream(*stream),
            _ => None,
        };
        let Some(i) = owner else {
            return Some(input);
        };
        let listing = matches!(input, Input::List { .. });
        let before = self.wakes.len();
        let (ids, out, wakes) = (&mut self.ids, &mut self.out, &mut self.wakes);
        let slot = self.secondary_slots[i];
        let selected = slot.and_then(|slot| {
            Some((
                slot,
                self.selection.as_ref()?,
                self.shards.as_ref()?.config(),
            ))
        });
        let covered = |namespace: &str| {
            selected.is_none_or(|(slot, selection, config)| {
                selection.is_covered(slot, config.shard_of_text(namespace))
            })
        };
        // Checked only while some shard is fresh: most frames pay one branch.
        let stale = |namespace: &str, version: Option<&str>| {
            selected.is_some_and(|(slot, selection, config)| {
                selection.has_fresh(slot)
                    && selection.is_stale(
                        slot,
                        config.shard_of_text(namespace),
                        version.and_then(|v| v.parse().ok()),
                    )
            })
        };
        let scope = Scope {
            covered: &covered,
            stale: &stale,
        };
        let fresh = selected.is_some_and(|(slot, selection, _)| selection.has_fresh(slot));
        let (applied, ignored, cursor) = self.secondaries.with(i, |source| {
            let applied = match input {
                Input::List { req, response } => {
                    source.handle_list(now, req, response, ids, out, wakes, &scope)
                }
                Input::WatchOpened { stream } => {
                    source.handle_watch_opened(now, stream, out);
                    None
                }
                Input::WatchLine { stream, line } => {
                    source.handle_watch_line(now, stream, &line, out, wakes, &scope);
                    None
                }
                Input::WatchEnd { stream, end } => {
                    source.handle_watch_end(now, stream, end, ids, out);
                    None
                }
                _ => unreachable!("only LIST and WATCH inputs have an owner"),
            };
            // Only a watch resumed after a move has fresh shards to pass.
            let cursor = fresh
                .then(|| source.cursor().and_then(|rv| rv.parse::<u64>().ok()))
                .flatten();
            (applied, source.take_selector_ignored(), cursor)
        });
        if let Some(slot) = slot {
            self.after_secondary(slot, applied, ignored, cursor);
        }
        if self.wakes.len() > before {
            self.dispatch_due = true;
        }
        if listing {
            self.demote_since(before);
        }
        self.check_synced(now);
        None
    }

    fn feed_primary(&mut self, now: Instant, kind: &'static str, input: Input<O>) {
        match (&mut self.source, input) {
            (Source::Kubernetes(reflector), Input::List { req, response }) => {
                let change =
                    reflector.handle_list(now, req, response, &mut self.ids, &mut self.out);
                let listed = reflector
                    .take_gained_listed()
                    .map_or(Listed::Whole, Listed::Gained);
                if reflector.take_selector_ignored() {
                    self.ignore_selection(None);
                }
                if let Some(change) = change {
                    self.apply_primary(now, change, listed);
                }
            }
            (Source::Kubernetes(reflector), Input::WatchOpened { stream }) => {
                reflector.handle_watch_opened(now, stream, &mut self.out);
            }
            (Source::Kubernetes(reflector), Input::WatchLine { stream, line }) => {
                let change = reflector.handle_watch_line(now, stream, &line, &mut self.out);
                if !self.selection.as_ref().is_some_and(|s| s.has_fresh(0)) {
                    return self.after_source(now, change);
                }
                // A watch resumed after a move replays what a newer listing holds.
                let cursor = reflector.cursor().and_then(|rv| rv.parse().ok());
                let change = change.filter(|c| !self.is_stale_change(c));
                self.after_source(now, change);
                if let (Some(selection), Some(cursor)) = (&mut self.selection, cursor) {
                    selection.passed(0, cursor);
                }
            }
            (Source::Kubernetes(reflector), Input::WatchEnd { stream, end }) => {
                reflector.handle_watch_end(now, stream, end, &mut self.ids, &mut self.out);
            }
            (Source::InProcess(source), Input::SourceEvent { stream, event }) => {
                let change = source.handle_event(now, stream, event, &mut self.out);
                self.after_source(now, change.map(Change::from));
            }
            (
                Source::InProcess(source),
                Input::SourceCursor {
                    stream,
                    resource_version,
                },
            ) => source.handle_cursor(stream, resource_version, &mut self.out),
            (Source::InProcess(source), Input::SourceEnd { stream, error }) => {
                source.handle_end(now, stream, error, &mut self.out);
            }
            _ => self.stale(kind),
        }
    }

    fn start(&mut self) {
        self.lifecycle = Lifecycle::Running;
        if let Some(elector) = &mut self.elector {
            elector.start(self.now, &mut self.ids, &mut self.out);
        }
        if let Some(table) = &mut self.shards {
            table.start(self.now, &mut self.ids, &mut self.out);
        }
        match &mut self.source {
            // A selected primary lists once it holds a shard (`reselect`): no selector can
            // name no shard.
            Source::Kubernetes(_) if self.selection.is_some() => {}
            Source::Kubernetes(reflector) => {
                reflector.start(self.now, &mut self.ids, &mut self.out);
            }
            Source::InProcess(source) => {
                let stream = self.ids.stream();
                source.start(stream, &mut self.out);
            }
        }
        let (now, ids, out) = (self.now, &mut self.ids, &mut self.out);
        for i in 0..self.secondary_slots.len() {
            // A selected secondary lists once a shard is held, as the primary.
            if self.secondary_slots[i].is_none() {
                self.secondaries
                    .with(i, |source| source.start(now, ids, out));
            }
        }
    }

    fn drain(&mut self) {
        self.lifecycle = Lifecycle::Draining;
        match &mut self.source {
            Source::Kubernetes(reflector) => reflector.stop(&mut self.out),
            Source::InProcess(source) => source.stop(&mut self.out),
        }
        let out = &mut self.out;
        self.secondaries.each(|source| source.stop(out));
        self.retry.clear();
        self.resync_at = None;
        self.event(Event::Draining {
            running: self.in_flight.len(),
        });
        if self.shards.is_some() {
            let running = self.running_by_shard();
            if let Some(table) = &mut self.shards {
                table.drain(self.now, &running, &mut self.ids, &mut self.out);
            }
            self.apply_shard_changes();
        }
        self.finish_drain();
    }

    fn finish_drain(&mut self) {
        if self.lifecycle == Lifecycle::Draining && self.in_flight.is_empty() {
            self.stop();
        }
    }

    fn stop(&mut self) {
        self.lifecycle = Lifecycle::Stopped;
        // Commands not yet polled would act after the stop; only events and closes (a
        // drain's, say) may stay.
        self.out.retain(|o| {
            matches!(
                o,
                Output::Event(_)
                    | Output::Command(
                        Command::CloseWatch { .. }
                            | Command::CancelList { .. }
                            | Command::CloseSource { .. }
                            | Command::CancelReconcile { .. }
                    )
            )
        });
        match &mut self.source {
            Source::Kubernetes(reflector) => reflector.stop(&mut self.out),
            Source::InProcess(source) => source.stop(&mut self.out),
        }
        let out = &mut self.out;
        self.secondaries.each(|source| source.stop(out));
        if let Some(elector) = &mut self.elector {
            elector.stop(self.now, &mut self.ids, &mut self.out);
        }
        if let Some(table) = &mut self.shards {
            table.stop(self.now, &mut self.ids, &mut self.out);
            // Every run is cancelled below.
            table.take_changes();
        }
        for ticket in std::mem::take(&mut self.in_flight).into_keys() {
            self.out
                .push_back(Output::Command(Command::CancelReconcile { ticket }));
        }
        self.run_deadlines.clear();
        self.run_deadline_order.clear();
        if let Some(own) = &mut self.own_writes {
            own.clear();
        }
        self.in_flight_since = 0;
        self.queue.clear();
        if let Some(debounce) = &mut self.debounce {
            debounce.clear();
        }
        self.queued_at.clear();
        self.retry.clear();
        self.wakes.clear();
        self.low_wakes.clear();
        self.dispatch_due = false;
        self.resync_at = None;
    }

    /// Ends run `ticket` with `outcome`; the run's key, unless the input was stale.
    fn handle_reconciled(
        &mut self,
        now: Instant,
        ticket: Ticket,
        outcome: Outcome,
    ) -> Option<Arc<P>> {
        let Some((parent, started)) = self.in_flight.remove(&ticket) else {
            self.stale("reconcile outcome");
            return None;
        };
        if let Some(at) = self.run_deadlines.remove(&ticket) {
            self.run_deadline_order.remove(&(at, ticket));
        }
        self.in_flight_since -= u128::from(started.as_nanos());
        let took = seconds(started, now);
        self.metrics.reconcile_time.observe(took);
        self.metrics.workqueue_work_duration.observe(took);
        self.metrics.count_result(match &outcome {
            Outcome::Success => ResultLabel::Success,
            Outcome::RequeueAfter(delay) if delay.is_zero() => ResultLabel::Requeue,
            Outcome::RequeueAfter(_) => ResultLabel::RequeueAfter,
            Outcome::Error(_) | Outcome::ErrorHandled { .. } => ResultLabel::Error,
        });
        self.queue.done(&parent);
        self.dispatch_due = true;
        match outcome {
            Outcome::Success => self.retry.succeeded(&parent),
            Outcome::RequeueAfter(delay) => {
                self.retry.requeue_after(now, parent.clone(), delay);
                self.event(Event::RequeueScheduled {
                    parent: P::clone(&parent),
                    delay,
                });
            }
            Outcome::Error(error) => {
                self.stats.reconcile_errors += 1;
                // client-go counts a retry per rate-limited re-add, which is the backoff's.
                self.metrics.workqueue_retries_total += 1;
                let (failures, delay) = self.retry.failed(now, parent.clone());
                self.event(Event::BackoffScheduled {
                    parent: P::clone(&parent),
                    failures,
                    delay,
                    error,
                });
            }
            Outcome::ErrorHandled {
                error,
                requeue_after,
            } => {
                self.stats.reconcile_errors += 1;
                match requeue_after {
                    Some(delay) => self.retry.requeue_after(now, parent.clone(), delay),
                    None => self.retry.succeeded(&parent),
                }
                self.event(Event::ErrorHandled {
                    parent: P::clone(&parent),
                    requeue_after,
                    error,
                });
            }
        }
        Some(parent)
    }

    /// Records the writes of `parent`'s run that just ended, for its next dispatch to wait
    /// for.
    fn record_writes(&mut self, now: Instant, parent: &Arc<P>, writes: &[OwnWrite]) {
        if writes.is_empty() {
            return;
        }
        let Some(own) = self.own_writes.as_mut() else {
            return;
        };
        let mut untracked = Vec::new();
        let (source, secondaries) = (&self.source, &self.secondaries);
        own.record(
            now,
            parent,
            writes,
            |s| cursor_state(source, secondaries, s),
            &mut untracked,
        );
        for (write, reason) in untracked {
            self.event(Event::OwnWriteUntracked {
                parent: P::clone(parent),
                write,
                reason,
            });
        }
    }

    /// Releases the keys whose writes every source has now observed; those whose dispatch
    /// was held go back to the queue.
    fn release_observed(&mut self, now: Instant) {
        let Some(own) = self.own_writes.as_mut().filter(|o| !o.is_empty()) else {
            return;
        };
        let mut released = Vec::new();
        let (source, secondaries) = (&self.source, &self.secondaries);
        own.observe(now, |s| cursor_state(source, secondaries, s), &mut released);
        for Released { key, held_for } in released {
            if let Some(held_for) = held_for {
                self.event(Event::OwnWritesObserved {
                    parent: P::clone(&key),
                    held_for,
                });
                self.queue.add(key);
                self.dispatch_due = true;
            }
        }
    }

    /// Sets run `ticket`'s deadline to `timeout` after its dispatch, or lifts it.
    fn set_run_deadline(&mut self, ticket: Ticket, timeout: Option<Duration>) {
        let Some((_, started)) = self.in_flight.get(&ticket) else {
            return self.stale("reconcile timeout");
        };
        let started = *started;
        if let Some(at) = self.run_deadlines.remove(&ticket) {
            self.run_deadline_order.remove(&(at, ticket));
        }
        if let Some(timeout) = timeout {
            let at = started + timeout;
            self.run_deadlines.insert(ticket, at);
            self.run_deadline_order.insert((at, ticket));
        }
    }

    /// Cancels every run past its deadline; each counts as failed, through the backoff.
    fn fire_run_deadlines(&mut self, now: Instant) {
        while let Some(&(at, ticket)) = self.run_deadline_order.first() {
            if at > now {
                break;
            }
            self.run_deadline_order.remove(&(at, ticket));
            self.run_deadlines.remove(&ticket);
            let Some((parent, started)) = self.in_flight.get(&ticket) else {
                continue;
            };
            let after = at.saturating_duration_since(*started);
            let parent = P::clone(parent);
            self.stats.reconcile_timeouts += 1;
            self.out
                .push_back(Output::Command(Command::CancelReconcile { ticket }));
            self.event(Event::ReconcileTimedOut {
                parent,
                ticket,
                after,
            });
            let error = format!("reconcile timed out after {}s", after.as_secs_f64());
            self.handle_reconciled(now, ticket, Outcome::Error(error));
        }
    }

    fn handle_lease(&mut self, now: Instant, req: RequestId, response: LeaseResponse) {
        if self.shards.as_ref().is_some_and(|t| t.owns_request(req)) {
            let running = self.running_by_shard();
            if let Some(table) = &mut self.shards {
                table.handle_response(now, req, response, &running, &mut self.ids, &mut self.out);
            }
            return self.apply_shard_changes();
        }
        let Some(elector) = self.elector.as_mut().filter(|e| e.owns_request(req)) else {
            return self.stale("lease response");
        };
        let change = elector.handle_response(now, req, response, &mut self.ids, &mut self.out);
        self.leadership_changed(change);
    }

    fn leadership_changed(&mut self, change: ElectionChange) {
        match change {
            ElectionChange::None => {}
            // Whatever queued while standing by may run now.
            ElectionChange::Acquired => {
                self.metrics.leadership_transitions_total += 1;
                self.dispatch_due = true;
            }
            ElectionChange::Lost => {
                self.metrics.leadership_transitions_total += 1;
                if self.on_lost == OnLost::Cancel {
                    self.cancel_runs(None);
                }
            }
        }
    }

    /// Cancels the running reconciles (of one shard's keys, or all); abandoned runs go back
    /// to the queue, for this replica's next term.
    fn cancel_runs(&mut self, shard: Option<u32>) {
        let tickets: Vec<Ticket> = self
            .in_flight
            .iter()
            .filter(|(_, (parent, _))| shard.is_none() || self.shard_of(parent) == shard)
            .map(|(ticket, _)| *ticket)
            .collect();
        for ticket in tickets {
            let Some((parent, started)) = self.in_flight.remove(&ticket) else {
                continue;
            };
            self.in_flight_since -= u128::from(started.as_nanos());
            if let Some(at) = self.run_deadlines.remove(&ticket) {
                self.run_deadline_order.remove(&(at, ticket));
            }
            self.queue.done(&parent);
            if !self.queue.is_wanted(&parent) {
                self.metrics.workqueue_adds_total += 1;
                self.queued_at.entry(parent.clone()).or_insert(self.now);
            }
            self.queue.add(parent);
            self.out
                .push_back(Output::Command(Command::CancelReconcile { ticket }));
            // The slot is free: queued keys of the shards still held may start now, not at
            // some later input (issue 33, found by the simulator's sharded seeds).
            self.dispatch_due = true;
        }
    }

    /// The shard of `parent`, when sharded.
    fn shard_of(&self, parent: &P) -> Option<u32> {
        let (table, text) = (self.shards.as_ref()?, self.shard_text?);
        let config = table.config();
        Some(config.shard_of_text(&text(parent, config.by)))
    }

    /// Reconciles running per shard.
    fn running_by_shard(&self) -> BTreeMap<u32, usize> {
        let mut running = BTreeMap::new();
        for (parent, _) in self.in_flight.values() {
            if let Some(shard) = self.shard_of(parent) {
                *running.entry(shard).or_insert(0) += 1;
            }
        }
        running
    }

    fn shard_timeout(&mut self, now: Instant) {
        if self.shards.is_none() {
            return;
        }
        let running = self.running_by_shard();
        if let Some(table) = &mut self.shards {
            table.handle_timeout(now, &running, &mut self.ids, &mut self.out);
        }
        self.apply_shard_changes();
    }

    fn shard_reconcile_ended(&mut self, now: Instant) {
        if !self.shards.as_ref().is_some_and(ShardTable::has_releasing) {
            return;
        }
        let running = self.running_by_shard();
        if let Some(table) = &mut self.shards {
            table.reconcile_ended(now, &running, &mut self.ids, &mut self.out);
        }
        self.apply_shard_changes();
    }

    /// Acts on what the shard table's last step did: an acquired shard's parked keys are
    /// queued, a lost or given-up shard's runs cancelled.
    fn apply_shard_changes(&mut self) {
        let Some(table) = &mut self.shards else {
            return;
        };
        let changes = table.take_changes();
        for took in table.take_takeovers() {
            self.metrics
                .shard_takeover_seconds
                .observe(took.as_secs_f64());
        }
        for change in changes {
            match change {
                ShardChange::Acquired(shard) => {
                    self.metrics.shard_transitions_total += 1;
                    self.unpark(shard);
                }
                ShardChange::Lost(shard) => {
                    self.metrics.shard_transitions_total += 1;
                    if self.on_lost == OnLost::Cancel {
                        self.cancel_runs(Some(shard));
                    }
                }
                ShardChange::Cancel(shard) => self.cancel_runs(Some(shard)),
            }
        }
        self.reselect();
    }

    /// Queues the keys parked for `shard`: it is held, or its objects are now cached. Those
    /// that still may not run are parked again at dispatch.
    fn unpark(&mut self, shard: u32) {
        let parked = self
            .shards
            .as_mut()
            .map(|t| t.take_parked(shard))
            .unwrap_or_default();
        for parent in parked {
            if !self.queue.is_wanted(&parent) {
                self.metrics.workqueue_adds_total += 1;
                self.queued_at.entry(parent.clone()).or_insert(self.now);
            }
            self.queue.add(parent);
        }
        self.dispatch_due = true;
    }

    /// Asks the apiserver for the shards held now, when the primary is selected on the
    /// server and they changed: the primary lists them (or, holding none, is emptied).
    fn reselect(&mut self) {
        if self.lifecycle != Lifecycle::Running {
            return;
        }
        let (Some(selection), Some(table)) = (&mut self.selection, &self.shards) else {
            return;
        };
        let held = table.sharding(self.now).held;
        let Some(ask) = selection.want(table.config(), &held) else {
            return;
        };
        let gained = selection.gained(table.config(), 0);
        let Source::Kubernetes(reflector) = &mut self.source else {
            return;
        };
        self.out
            .push_back(Output::Event(Event::ShardsSelected { shards: held }));
        let (now, ids, out) = (self.now, &mut self.ids, &mut self.out);
        match &ask {
            Ask::Shards(all) => {
                let only_let_go = gained.is_none();
                if !reflector.move_shards(now, all.clone(), gained, ids, out) {
                    reflector.reselect(now, Some(all.clone()), true, ids, out);
                } else if only_let_go {
                    // Nothing to list: the objects of the shards let go are forgotten now.
                    self.apply_primary(now, Change::Replace(Vec::new()), Listed::Kept);
                }
            }
            Ask::Nothing => {
                reflector.pause(out);
                self.after_source(now, Some(Change::Replace(Vec::new())));
            }
        }
        self.select_secondaries(&ask);
    }

    /// Moves the selected secondaries to the shards the primary was just asked for.
    fn select_secondaries(&mut self, ask: &Ask) {
        let (Some(selection), Some(table)) = (&self.selection, &self.shards) else {
            return;
        };
        let config = table.config();
        let (now, ids, out, wakes) = (self.now, &mut self.ids, &mut self.out, &mut self.wakes);
        let before = wakes.len();
        for (i, slot) in self.secondary_slots.iter().enumerate() {
            let Some(slot) = *slot else {
                continue;
            };
            match ask {
                Ask::Shards(all) => {
                    let gained = selection.gained(config, slot);
                    let covered = |namespace: &str| {
                        selection.is_covered(slot, config.shard_of_text(namespace))
                    };
                    let scope = Scope {
                        covered: &covered,
                        stale: &|_, _| false,
                    };
                    self.secondaries.with(i, |source| {
                        source.select(now, all.clone(), gained, &scope, ids, out, wakes);
                    });
                }
                Ask::Nothing => self
                    .secondaries
                    .with(i, |source| source.deselect(out, wakes)),
            }
        }
        if self.wakes.len() > before {
            self.dispatch_due = true;
        }
    }

    /// Acts on what a selected secondary (number `slot` in the selection) just did: a
    /// listing it applied may cover shards (their parked keys may run), a LIST it got
    /// unfiltered shows the selector ignored, and its watch passing a listing's version
    /// ends that listing's freshness.
    fn after_secondary(
        &mut self,
        slot: usize,
        applied: Option<Applied>,
        ignored: bool,
        cursor: Option<u64>,
    ) {
        if ignored {
            self.ignore_selection(None);
            return;
        }
        let Some(selection) = &mut self.selection else {
            return;
        };
        let covered = match applied {
            Some(Applied::Whole) => selection.listed(slot, None),
            Some(Applied::Gained(version)) => selection.listed(slot, Some(version)),
            None => {
                // Only a known position passes: a listing in flight has none.
                if let Some(cursor) = cursor {
                    selection.passed(slot, cursor);
                }
                Vec::new()
            }
        };
        for shard in covered {
            self.unpark(shard);
        }
    }

    /// Whether `change` holds an object outside the shards asked for: then the apiserver
    /// ignored the selector, and the replica caches everything from now on.
    fn check_selected(&mut self, change: &Change<O>) {
        let (Some(selection), Some(table)) = (&mut self.selection, &self.shards) else {
            return;
        };
        if selection.is_ignored() {
            return;
        }
        let config = table.config();
        let outside = |o: &O| {
            let shard = config.shard_of_text(o.object_namespace().unwrap_or(""));
            selection.outside(shard).then_some(shard)
        };
        let found = match change {
            Change::Replace(items) => items.iter().find_map(|o| outside(o).map(|s| (&**o, s))),
            Change::Upsert(o) | Change::Delete(o) => outside(o).map(|s| (&**o, s)),
        };
        let Some((object, shard)) = found else {
            return;
        };
        let object = object
            .key()
            .unwrap_or_else(|| ObjectKey::new(None, "<unnamed>"));
        self.ignore_selection(Some((object, shard)));
    }

    /// The apiserver does not select by shard: cache everything from now on.
    fn ignore_selection(&mut self, outside: Option<(ObjectKey, u32)>) {
        let Some(selection) = &mut self.selection else {
            return;
        };
        if selection.is_ignored() {
            return;
        }
        let newly = selection.ignore();
        if let Source::Kubernetes(reflector) = &mut self.source {
            reflector.reselect(self.now, None, false, &mut self.ids, &mut self.out);
        }
        let (now, ids, out) = (self.now, &mut self.ids, &mut self.out);
        for i in 0..self.secondary_slots.len() {
            if self.secondary_slots[i].is_some() {
                self.secondaries
                    .with(i, |source| source.unselect(now, ids, out));
            }
        }
        self.out
            .push_back(Output::Event(Event::ShardSelectionIgnored { outside }));
        for shard in newly {
            self.unpark(shard);
        }
    }

    fn handle_timeout(&mut self, now: Instant) {
        if let Some(elector) = &mut self.elector {
            let change = elector.handle_timeout(now, &mut self.ids, &mut self.out);
            self.leadership_changed(change);
        }
        self.shard_timeout(now);
        self.fire_run_deadlines(now);
        match &mut self.source {
            Source::Kubernetes(reflector) => {
                reflector.handle_timeout(now, &mut self.ids, &mut self.out);
            }
            Source::InProcess(source) => {
                let ids = &mut self.ids;
                source.handle_timeout(now, || ids.stream(), &mut self.out);
            }
        }
        for i in self.secondaries.due(now) {
            let (ids, out) = (&mut self.ids, &mut self.out);
            self.secondaries
                .with(i, |source| source.handle_timeout(now, ids, out));
        }
        while let Some(parent) = self.retry.pop_due(now) {
            self.wake(parent);
        }
        while let Some((parent, low)) = self.debounce.as_mut().and_then(|d| d.pop_due(now)) {
            self.enqueue(parent, low);
            self.dispatch_due = true;
        }
        // A source's timer may have relisted: its cursor may have moved.
        self.release_observed(now);
        if let Some(own) = &mut self.own_writes {
            for (key, held_for) in own.expire(now) {
                self.stats.own_write_timeouts += 1;
                self.out
                    .push_back(Output::Event(Event::OwnWritesUnobserved {
                        parent: P::clone(&key),
                        held_for,
                    }));
                self.queue.add(key);
                self.dispatch_due = true;
            }
        }
        if let Some(at) = self.resync_at
            && at <= now
        {
            self.resync_at = self.resync.map(|period| now + period);
            self.stats.resyncs += 1;
            let parents = self.store.parents().len();
            let before = self.wakes.len();
            self.wakes.extend(self.store.shared_parents().cloned());
            self.demote_since(before);
            self.dispatch_due = true;
            self.event(Event::Resync { parents });
        }
    }

    // ----- outputs -----

    /// The next output. Call until it returns [`Output::Timeout`].
    ///
    /// The first call after a batch of inputs decides what to dispatch: every parent woken
    /// since the last drain is queued once, in ascending order, and free slots are filled.
    pub fn poll_output(&mut self) -> Output<O, P> {
        if self.dispatch_due {
            self.dispatch_due = false;
            self.queue_wakes();
            self.dispatch();
        }
        match self.out.pop_front() {
            Some(output) => {
                if let Output::Event(event) = &output {
                    self.metrics.count_event(event);
                }
                output
            }
            None => Output::Timeout(self.poll_timeout()),
        }
    }

    /// The next deadline and its reason; `None` when only an input can make progress.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Deadline> {
        if !matches!(self.lifecycle, Lifecycle::Running | Lifecycle::Draining) {
            return None;
        }
        // Listed in handle_timeout's firing order, so a tie names the first to fire.
        let election = self
            .elector
            .as_ref()
            .and_then(Elector::deadline)
            .into_iter()
            .chain(self.shards.as_ref().and_then(ShardTable::deadline))
            .reduce(|a, b| if b.0 < a.0 { b } else { a })
            .map(|(at, wake)| Deadline {
                at,
                wake: match wake {
                    ElectionWake::Attempt => Wake::LeaseRetry,
                    ElectionWake::TermEnd => Wake::TermEnd,
                },
            });
        let run = self.run_deadline_order.first().map(|(at, _)| Deadline {
            at: *at,
            wake: Wake::ReconcileTimeout,
        });
        if self.lifecycle == Lifecycle::Draining {
            // Only the election and the running reconciles fire while draining.
            return election
                .into_iter()
                .chain(run)
                .reduce(|a, b| if b.at < a.at { b } else { a });
        }
        let source = match &self.source {
            Source::Kubernetes(reflector) => reflector.deadline(),
            Source::InProcess(source) => source.deadline(),
        };
        let secondaries = self.secondaries.deadline();
        let requeue = self.retry.next_deadline().map(|at| Deadline {
            at,
            wake: Wake::Requeue,
        });
        let own_writes = self
            .own_writes
            .as_ref()
            .and_then(OwnWrites::deadline)
            .map(|at| Deadline {
                at,
                wake: Wake::OwnWrites,
            });
        let resync = self.resync_at.map(|at| Deadline {
            at,
            wake: Wake::Resync,
        });
        let debounce = self
            .debounce
            .as_ref()
            .and_then(Debounce::next_deadline)
            .map(|at| Deadline {
                at,
                wake: Wake::Debounce,
            });
        election
            .into_iter()
            .chain(run)
            .chain(source)
            .chain(secondaries)
            .chain(requeue)
            .chain(debounce)
            .chain(own_writes)
            .chain(resync)
            .reduce(|a, b| if b.at < a.at { b } else { a })
    }

    // ----- reads -----

    /// The members of `parent` now, in key order.
    pub fn members<'a>(&'a self, parent: &P) -> impl Iterator<Item = &'a Arc<O>> + 'a {
        self.store.members(parent)
    }

    /// The cache.
    #[must_use]
    pub fn store(&self) -> &Store<O, P> {
        &self.store
    }

    /// Starts (or stops) logging the cache's changes for
    /// [`drain_cache_changes`](ReconcileLoop::drain_cache_changes): off by default, so a
    /// driver that keeps no copy of the cache pays nothing.
    pub fn log_cache_changes(&mut self, on: bool) {
        self.store.log_changes(on);
    }

    /// Reports every change to the cache since the last call, so a driver can keep a copy
    /// (a cache readable from other threads) in step once per turn instead of once per frame.
    /// Reports nothing unless [`log_cache_changes`](ReconcileLoop::log_cache_changes) is on.
    pub fn drain_cache_changes(&mut self, each: impl FnMut(CacheChange<'_, O, P>)) {
        self.store.take_changes(each);
    }

    /// The election as this candidate sees it; `None` when no election is configured.
    #[must_use]
    pub fn leadership(&self) -> Option<Leadership> {
        self.elector.as_ref().map(|e| e.leadership(self.now))
    }

    /// Whether the first whole-world listing has been applied.
    #[must_use]
    pub fn is_synced(&self) -> bool {
        self.synced
    }

    /// Where the loop is in its life.
    #[must_use]
    pub fn lifecycle(&self) -> Lifecycle {
        self.lifecycle
    }

    /// The reflector's cursor (`None` while relisting), or the in-process source's as its
    /// stream last said ([`Input::SourceCursor`]; `None` for a source that says none).
    #[must_use]
    pub fn cursor(&self) -> Option<&str> {
        match &self.source {
            Source::Kubernetes(reflector) => reflector.cursor(),
            Source::InProcess(source) => source.cursor(),
        }
    }

    /// Every object secondary source `source` holds now, in key order, type-erased as in a
    /// reconcile ([`Related::downcast`]); `None` for the primary or a source not configured.
    #[must_use]
    pub fn secondary_objects(&self, source: SourceId) -> Option<Related> {
        self.secondary(source).map(|s| s.objects())
    }

    /// Secondary source `source`'s cursor (`None` while it lists, or for a source not
    /// configured): each source watches from its own.
    #[must_use]
    pub fn secondary_cursor(&self, source: SourceId) -> Option<&str> {
        self.secondary(source).and_then(|s| s.cursor())
    }

    fn secondary(&self, source: SourceId) -> Option<&(dyn Secondary<O, P> + Send)> {
        let n = usize::try_from(source.get()).ok()?.checked_sub(1)?;
        self.secondaries.get(n)
    }

    /// The latest `now` seen.
    #[must_use]
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Counters.
    #[must_use]
    pub fn stats(&self) -> Stats {
        let mut stats = self.stats;
        if let Source::Kubernetes(reflector) = &self.source {
            let r = reflector.counters();
            stats.frames = r.frames;
            stats.frames_skipped = r.frames_skipped;
            stats.lists = r.lists;
            stats.watches = r.watches;
            stats.relists = r.relists;
            stats.stale_inputs += r.stale_inputs;
        }
        if let Source::InProcess(source) = &self.source {
            stats.stale_inputs += source.stale_inputs;
        }
        // Every source counts: the figures are the loop's, whichever source did the work.
        for source in self.secondaries.iter() {
            let r = source.counters();
            stats.frames += r.frames;
            stats.frames_skipped += r.frames_skipped;
            stats.lists += r.lists;
            stats.watches += r.watches;
            stats.relists += r.relists;
            stats.stale_inputs += r.stale_inputs;
        }
        stats
    }

    /// The metrics as of the latest `now`: the counters and histograms the loop's
    /// transitions keep, with the gauges (queue depth, running reconciles and their ages,
    /// sync, leadership) read off the state. Pure: the same inputs give the same figures.
    #[must_use]
    pub fn metrics(&self) -> Metrics {
        let stats = self.stats();
        let mut m = self.metrics;
        m.reconcile_errors_total = stats.reconcile_errors;
        m.max_concurrent_reconciles = self.concurrency as u64;
        m.active_workers = self.in_flight.len() as u64;
        m.workqueue_depth = self.queue.len() as u64;
        let running = self.in_flight.len() as u128;
        let now = u128::from(self.now.as_nanos());
        // Every dispatch instant is at most `now`, so this cannot underflow.
        let unfinished = (running * now).saturating_sub(self.in_flight_since);
        #[allow(clippy::cast_precision_loss)] // nanoseconds to seconds: f64 is the format's type
        {
            m.workqueue_unfinished_work_seconds = unfinished as f64 / 1e9;
        }
        // Tickets grow with dispatch order: the first running ticket is the oldest run.
        m.workqueue_longest_running_processor_seconds = self
            .in_flight
            .values()
            .next()
            .map_or(0.0, |(_, started)| seconds(*started, self.now));
        m.frames_skipped_total = stats.frames_skipped;
        m.frames_applied_total = stats.frames.saturating_sub(
            stats.frames_skipped + m.relists(crate::metrics::RelistLabel::UndecodableFrame),
        );
        m.lists_total = stats.lists;
        let primary = match &self.source {
            Source::Kubernetes(reflector) => Some(reflector.counters()),
            Source::InProcess(_) => None,
        };
        let counters = primary
            .into_iter()
            .chain(self.secondaries.iter().map(|s| s.counters()));
        for c in counters {
            m.list_bytes_total += c.list_bytes;
            // The stalest source's cursor; one that never moved counts from the start.
            let age = seconds(c.cursor_at.unwrap_or(Instant::ZERO), self.now);
            m.cursor_age_seconds = m.cursor_age_seconds.max(age);
        }
        m.own_writes_waiting = self.own_writes.as_ref().map_or(0, |o| o.len() as u64);
        m.synced = self.synced;
        m.leader = self.elector.as_ref().map(|e| e.is_leader(self.now));
        m.shards_held = self.shards.as_ref().map(|t| t.held_count(self.now) as u64);
        m.shard_server_selection = self.selection.as_ref().map(|s| !s.is_ignored());
        m
    }

    /// The shards as this replica sees them; `None` when not sharded.
    #[must_use]
    pub fn sharding(&self) -> Option<Sharding> {
        self.shards.as_ref().map(|t| t.sharding(self.now))
    }

    /// Reconciles running now.
    #[must_use]
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Keys waiting for a reconcile slot.
    #[must_use]
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    // ----- internals -----

    fn advance(&mut self, now: Instant) -> Instant {
        self.now = self.now.max(now);
        self.now
    }

    fn stale(&mut self, input: &'static str) {
        self.stats.stale_inputs += 1;
        self.event(Event::Stale { input });
    }

    fn event(&mut self, event: Event<P>) {
        self.out.push_back(Output::Event(event));
    }

    /// Applies a store write from the source and records the parents it woke: the store is
    /// always updated before any key is queued.
    fn after_source(&mut self, now: Instant, change: Option<Change<O>>) {
        if let Some(change) = change {
            self.apply_primary(now, change, Listed::Whole);
        }
    }

    /// Applies a change of the primary to the cache. `listed` says what a `Replace` holds:
    /// every object, or only the shards just gained (then the cached objects of the
    /// shards still covered are kept).
    fn apply_primary(&mut self, now: Instant, mut change: Change<O>, listed: Listed) {
        self.check_selected(&change);
        // Every primary object reaches the store here, whichever path decoded it.
        crate::source::transform::apply_to(self.transform.as_ref(), &mut change);
        if matches!(listed, Listed::Gained(_) | Listed::Kept)
            && let Change::Replace(items) = &mut change
        {
            items.extend(self.covered_objects());
        }
        let replace = matches!(change, Change::Replace(_));
        let before = self.wakes.len();
        self.store
            .apply(change, &self.key_map, &mut self.wakes, &mut self.rejected);
        if let Some(by) = &self.predicate_name {
            for key in self.store.take_filtered() {
                let by = Arc::clone(by);
                self.out.push_back(Output::Event(Event::Filtered {
                    source: SourceId::PRIMARY,
                    key,
                    by,
                }));
            }
        }
        for rejected in self.rejected.drain(..) {
            self.stats.rejected_objects += 1;
            self.out.push_back(Output::Event(match rejected {
                Rejected::Unmapped {
                    key,
                    error,
                    evicted_from,
                } => Event::Unmapped {
                    key,
                    error,
                    evicted_from,
                },
                Rejected::Unnamed => Event::Unnamed,
            }));
        }
        if self.wakes.len() > before {
            self.dispatch_due = true;
        }
        if replace {
            self.demote_since(before);
            self.primary_synced = true;
            let covered = match (&mut self.selection, listed) {
                (Some(selection), Listed::Gained(version)) => selection.listed(0, Some(version)),
                (Some(selection), Listed::Whole) => selection.listed(0, None),
                // Nothing new was listed.
                (Some(_), Listed::Kept) | (None, _) => Vec::new(),
            };
            for shard in covered {
                self.unpark(shard);
            }
        }
        self.check_synced(now);
    }

    /// Whether `change` is a watch event the cache already holds from a newer listing of
    /// its shard (see `shard::selection`): applying it would take the object back in time.
    fn is_stale_change(&self, change: &Change<O>) -> bool {
        let (Some(selection), Some(table)) = (&self.selection, &self.shards) else {
            return false;
        };
        let (Change::Upsert(object) | Change::Delete(object)) = change else {
            return false;
        };
        let shard = table
            .config()
            .shard_of_text(object.object_namespace().unwrap_or(""));
        let version = object
            .object_resource_version()
            .and_then(|rv| rv.parse().ok());
        selection.is_stale(0, shard, version)
    }

    /// The cached primary objects of the shards the cache covers, to keep through a
    /// listing of other shards.
    fn covered_objects(&self) -> Vec<Arc<O>> {
        let (Some(selection), Some(table)) = (&self.selection, &self.shards) else {
            return Vec::new();
        };
        let config = table.config();
        self.store
            .iter()
            .filter(|(_, object, _)| {
                selection.is_covered(
                    0,
                    config.shard_of_text(object.object_namespace().unwrap_or("")),
                )
            })
            .map(|(_, object, _)| Arc::clone(object))
            .collect()
    }

    /// Passes the sync barrier once every source has applied a whole listing: no reconcile
    /// runs before, so none sees a partial world.
    fn check_synced(&mut self, now: Instant) {
        if self.synced || !self.primary_synced || !self.secondaries.all_synced() {
            return;
        }
        self.synced = true;
        self.dispatch_due = true;
        // The first resync is one full period after the first sync, not after start: a
        // source that syncs late must not be resynced early.
        self.resync_at = self.resync.map(|period| now + period);
        let objects = self.store.len() + self.secondaries.iter().map(|s| s.len()).sum::<usize>();
        self.event(Event::Synced { objects });
    }

    fn reconcile_all(&mut self) {
        let parents = self.store.parents().len();
        let before = self.wakes.len();
        self.wakes.extend(self.store.shared_parents().cloned());
        self.demote_since(before);
        self.dispatch_due = true;
        self.event(Event::ReconcileAll { parents });
    }

    fn reconcile_on(&mut self, object: ObjectKey) {
        let parent = self.store.shared_parent_of(&object).cloned();
        if let Some(parent) = &parent {
            self.wake(Arc::clone(parent));
        }
        self.event(Event::ReconcileOn {
            object,
            parent: parent.map(Arc::unwrap_or_clone),
        });
    }

    fn wake(&mut self, parent: Arc<P>) {
        self.wakes.push(parent);
        self.dispatch_due = true;
    }

    /// With priorities on, the wakes pushed since `before` (a listing's, a resync's) go in
    /// at low priority.
    fn demote_since(&mut self, before: usize) {
        if self.priority && self.wakes.len() > before {
            let added = self.wakes.split_off(before);
            self.low_wakes.extend(added);
        }
    }

    /// Queues the parents woken since the last drain, each once, in ascending order: those
    /// at normal priority first, then those at low priority.
    fn queue_wakes(&mut self) {
        if !self.wakes.is_empty() {
            self.wakes.sort_unstable();
            self.wakes.dedup();
            let wakes = std::mem::take(&mut self.wakes);
            for parent in wakes {
                self.wanted(parent, false);
            }
        }
        if !self.low_wakes.is_empty() {
            self.low_wakes.sort_unstable();
            self.low_wakes.dedup();
            let wakes = std::mem::take(&mut self.low_wakes);
            for parent in wakes {
                self.wanted(parent, true);
            }
        }
    }

    /// A wake of `parent`: held by the debounce when there is one and the key is not
    /// wanted already, queued otherwise.
    fn wanted(&mut self, parent: Arc<P>, low: bool) {
        if let Some(debounce) = &mut self.debounce
            && !self.queue.is_wanted(&parent)
        {
            debounce.hold(parent, self.now, low);
            return;
        }
        self.enqueue(parent, low);
    }

    fn enqueue(&mut self, parent: Arc<P>, low: bool) {
        if !self.queue.is_wanted(&parent) {
            self.metrics.workqueue_adds_total += 1;
            self.queued_at.entry(parent.clone()).or_insert(self.now);
        }
        if low {
            self.queue.add_low(parent);
        } else {
            self.queue.add(parent);
        }
    }

    /// Hands queued keys to free reconcile slots, once synced, and while leading when an
    /// election is configured.
    fn dispatch(&mut self) {
        if self.lifecycle != Lifecycle::Running || !self.synced {
            return;
        }
        if self
            .elector
            .as_ref()
            .is_some_and(|e| !e.is_leader(self.now))
        {
            return;
        }
        if self
            .shards
            .as_ref()
            .is_some_and(|t| !t.may_dispatch_any(self.now))
        {
            return;
        }
        while self.in_flight.len() < self.concurrency {
            let Some(parent) = self.queue.pop() else {
                break;
            };
            if let Some(shard) = self.shard_of(&parent)
                && let Some(table) = &mut self.shards
                && (!table.may_dispatch(shard, self.now)
                    || self.selection.as_ref().is_some_and(|s| !s.covers(shard)))
            {
                // Another replica's key for now: kept for the term this replica may win.
                self.queue.done(&parent);
                table.park(shard, parent);
                continue;
            }
            if !self.gate_own_writes(&parent) {
                continue;
            }
            debug_assert!(
                self.in_flight.values().all(|(p, _)| *p != parent),
                "a key reconciled twice at once"
            );
            let ticket = Ticket(self.ids.bump());
            let attempt = self.retry.failures(&parent).saturating_add(1);
            let members = self.store.snapshot(&parent);
            // Every source's objects of this parent, read now: a parent whose children
            // changed sees them.
            let related = self
                .secondaries
                .iter()
                .map(|s| s.related(&parent))
                .collect();
            if let Some(at) = self.queued_at.remove(&parent) {
                self.metrics
                    .workqueue_queue_duration
                    .observe(seconds(at, self.now));
            }
            let handed = P::clone(&parent);
            if let Some(timeout) = self.reconcile_timeout {
                let at = self.now + timeout;
                self.run_deadlines.insert(ticket, at);
                self.run_deadline_order.insert((at, ticket));
            }
            self.in_flight.insert(ticket, (parent, self.now));
            self.in_flight_since += u128::from(self.now.as_nanos());
            self.stats.reconciles += 1;
            self.out.push_back(Output::Command(Command::Reconcile {
                ticket,
                parent: handed,
                attempt,
                members,
                related,
            }));
        }
        debug_assert!(self.in_flight.len() <= self.concurrency);
        debug_assert_eq!(self.in_flight.len(), self.queue.processing());
    }

    /// Whether popped `parent` may be dispatched now; a key held for its own writes leaves
    /// the queue (without taking a slot) until they are observed or its wait ends.
    fn gate_own_writes(&mut self, parent: &Arc<P>) -> bool {
        let Some(own) = self.own_writes.as_mut().filter(|o| !o.is_empty()) else {
            return true;
        };
        let (source, secondaries) = (&self.source, &self.secondaries);
        let gate = own.gate(self.now, parent, |s| cursor_state(source, secondaries, s));
        match gate {
            Gate::Go { held_for: None } | Gate::Expired { held_for: None } => true,
            Gate::Go {
                held_for: Some(held_for),
            } => {
                self.event(Event::OwnWritesObserved {
                    parent: P::clone(parent),
                    held_for,
                });
                true
            }
            Gate::Expired {
                held_for: Some(held_for),
            } => {
                self.stats.own_write_timeouts += 1;
                self.event(Event::OwnWritesUnobserved {
                    parent: P::clone(parent),
                    held_for,
                });
                true
            }
            Gate::Hold { first, waits } => {
                // Out of the queue; released by a cursor or by the wait's end.
                self.queue.done(parent);
                if first {
                    self.stats.own_write_holds += 1;
                    self.event(Event::HeldForOwnWrites {
                        parent: P::clone(parent),
                        waits,
                    });
                }
                false
            }
        }
    }
}

/// Source `id`'s cursor, as the wait for own writes reads it.
fn cursor_state<O: Object, P>(
    source: &Source<O>,
    secondaries: &Secondaries<O, P>,
    id: SourceId,
) -> CursorState {
    match usize::try_from(id.get()) {
        Ok(0) => match source {
            Source::Kubernetes(reflector) => CursorState::of(reflector.cursor()),
            // An in-process source has a cursor once it mirrors a collection with one (a
            // shared cache's); until then its writes cannot be waited for.
            Source::InProcess(source) if source.mirrors() => CursorState::of(source.cursor()),
            Source::InProcess(_) => CursorState::None,
        },
        Ok(n) => secondaries
            .get(n - 1)
            .map_or(CursorState::None, |s| CursorState::of(s.cursor())),
        Err(_) => CursorState::None,
    }
}
