//! The loop: lifecycle, the sync barrier, dispatch with bounded concurrency, retries and
//! resync (controller-runtime's `Controller` over client-go's informer).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::config::{Config, ConfigError, SourceConfig};
use crate::frame::{ListBodyError, ObjectList};
use crate::object::Object;
use crate::output::{Command, Deadline, Event, Outbox, Output, RequestId, StreamId, Ticket, Wake};
use crate::queue::WorkQueue;
use crate::reflector::{ListResponse, MintIds, Reflector, StreamEnd};
use crate::retry::RetryScheduler;
use crate::source::{Change, InProcessSource, SourceEvent};
use crate::store::{KeyMap, Rejected, Store};
use crate::time::Instant;

/// How a reconcile run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Done; run again only when something changes (kube-runtime's `Action::await_change`).
    Success,
    /// Done; run again after this long unless something changes first
    /// (kube-runtime's `Action::requeue`, controller-runtime's `Result{RequeueAfter}`).
    RequeueAfter(Duration),
    /// Failed; retried with exponential backoff.
    Error(String),
}

/// Where the loop is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lifecycle {
    /// Built, not started.
    New,
    /// Started.
    Running,
    /// Stopped; only closes were emitted since.
    Stopped,
}

/// A lifecycle call out of order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LifecycleError {
    /// `start` on a loop that already started (or stopped).
    #[error("the loop was already started")]
    AlreadyStarted,
    /// `stop` before `start`.
    #[error("stop before start")]
    NotStarted,
}

/// One input, for drivers and simulators that prefer a single entry point.
#[derive(Debug)]
pub enum Input<'a, O> {
    /// See [`ReconcileLoop::handle_list`].
    List(RequestId, ListResponse<'a>),
    /// See [`ReconcileLoop::handle_list_decoded`].
    ListDecoded(RequestId, Result<ObjectList<O>, ListBodyError>),
    /// See [`ReconcileLoop::handle_watch_opened`].
    WatchOpened(StreamId),
    /// See [`ReconcileLoop::handle_watch_line`].
    WatchLine(StreamId, &'a [u8]),
    /// See [`ReconcileLoop::handle_watch_end`].
    WatchEnd(StreamId, StreamEnd),
    /// See [`ReconcileLoop::handle_source_event`].
    SourceEvent(StreamId, SourceEvent<O>),
    /// See [`ReconcileLoop::handle_source_end`].
    SourceEnd(StreamId, Option<String>),
    /// See [`ReconcileLoop::handle_reconciled`].
    Reconciled(Ticket, Outcome),
    /// See [`ReconcileLoop::handle_timeout`].
    Timeout,
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
    Kubernetes(Reflector<O>),
    InProcess(InProcessSource),
}

/// A level-triggered reconcile loop as a pure state machine.
///
/// # The contract
/// - **Inputs** (`handle_*`, [`start`](Self::start), [`stop`](Self::stop)) each carry `now`.
///   The core never reads a clock; time never goes backwards inside it (an earlier `now` is
///   clamped to the latest seen), and inputs at the same instant may come in any order.
/// - **Outputs**: after every input, call [`poll_output`](Self::poll_output) until it returns
///   [`Output::Timeout`]; then sleep until that deadline or the next input. Commands are
///   never queued behind the timeout, so a driver that drains first cannot miss a wakeup.
/// - **Ids**: the core mints every [`RequestId`], [`StreamId`] and [`Ticket`]. Input naming
///   one that is no longer live (a frame from a closed stream, a second outcome for one
///   ticket) is ignored and reported as [`Event::Stale`].
/// - **Timers**: [`handle_timeout`](Self::handle_timeout) fires whatever is due in a fixed
///   order (reflector, in-process source, per-key retries by deadline, resync); an early or
///   spurious call is a no-op.
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
    store: Store<O, P>,
    queue: WorkQueue<P>,
    retry: RetryScheduler<P>,
    /// Invariant: `in_flight.len() <= concurrency`, and no parent appears twice.
    in_flight: BTreeMap<Ticket, P>,
    synced: bool,
    resync_at: Option<Instant>,
    out: Outbox<O, P>,
    ids: Ids,
    stats: Stats,
    wakes: Vec<P>,
    rejected: Vec<Rejected<P>>,
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
    /// Builds a loop; nothing happens until [`start`](Self::start).
    ///
    /// # Errors
    /// [`ConfigError`] when a setting is out of bounds.
    pub fn new(config: Config<O, P>, now: Instant) -> Result<Self, ConfigError> {
        config.validate()?;
        let source = match config.source {
            SourceConfig::Kubernetes(params) => {
                Source::Kubernetes(Reflector::new(params, config.retry_delay))
            }
            SourceConfig::InProcess => {
                Source::InProcess(InProcessSource::new(config.source_retry_delay))
            }
        };
        Ok(ReconcileLoop {
            key_map: config.key_map,
            concurrency: config.concurrency,
            resync: config.resync,
            lifecycle: Lifecycle::New,
            now,
            source,
            store: Store::default(),
            queue: WorkQueue::default(),
            retry: RetryScheduler::new(config.backoff),
            in_flight: BTreeMap::new(),
            synced: false,
            resync_at: None,
            out: Outbox::new(),
            ids: Ids::default(),
            stats: Stats::default(),
            wakes: Vec::new(),
            rejected: Vec::new(),
        })
    }

    // ----- lifecycle -----

    /// Starts: the first LIST (or the in-process source) is requested.
    ///
    /// # Errors
    /// [`LifecycleError::AlreadyStarted`] unless the loop is new.
    pub fn start(&mut self, now: Instant) -> Result<(), LifecycleError> {
        let now = self.advance(now);
        if self.lifecycle != Lifecycle::New {
            return Err(LifecycleError::AlreadyStarted);
        }
        self.lifecycle = Lifecycle::Running;
        match &mut self.source {
            Source::Kubernetes(reflector) => reflector.start(&mut self.ids, &mut self.out),
            Source::InProcess(source) => {
                let stream = self.ids.stream();
                source.start(stream, &mut self.out);
            }
        }
        self.resync_at = self.resync.map(|period| now + period);
        Ok(())
    }

    /// Stops: closes the open LIST / WATCH / source and cancels running reconciles. Nothing
    /// but those closes is emitted afterwards, and every later input is ignored. Stopping
    /// twice is a no-op; this may be called while a reconcile runs, or as its outcome.
    ///
    /// # Errors
    /// [`LifecycleError::NotStarted`] before [`start`](Self::start).
    pub fn stop(&mut self, now: Instant) -> Result<(), LifecycleError> {
        self.advance(now);
        match self.lifecycle {
            Lifecycle::New => return Err(LifecycleError::NotStarted),
            Lifecycle::Stopped => return Ok(()),
            Lifecycle::Running => {}
        }
        self.lifecycle = Lifecycle::Stopped;
        // Commands not yet polled would act after the stop; only events may stay.
        self.out.retain(|o| matches!(o, Output::Event(_)));
        match &mut self.source {
            Source::Kubernetes(reflector) => reflector.stop(&mut self.out),
            Source::InProcess(source) => source.stop(&mut self.out),
        }
        for ticket in std::mem::take(&mut self.in_flight).into_keys() {
            self.out
                .push_back(Output::Command(Command::CancelReconcile { ticket }));
        }
        self.queue.clear();
        self.retry.clear();
        self.resync_at = None;
        Ok(())
    }

    // ----- inputs -----

    /// Feeds any input; the same as calling the matching `handle_*` method.
    pub fn handle_input(&mut self, now: Instant, input: Input<'_, O>) {
        match input {
            Input::List(req, response) => self.handle_list(now, req, response),
            Input::ListDecoded(req, list) => self.handle_list_decoded(now, req, list),
            Input::WatchOpened(stream) => self.handle_watch_opened(now, stream),
            Input::WatchLine(stream, line) => self.handle_watch_line(now, stream, line),
            Input::WatchEnd(stream, end) => self.handle_watch_end(now, stream, end),
            Input::SourceEvent(stream, event) => self.handle_source_event(now, stream, event),
            Input::SourceEnd(stream, error) => self.handle_source_end(now, stream, error),
            Input::Reconciled(ticket, outcome) => self.handle_reconciled(now, ticket, outcome),
            Input::Timeout => self.handle_timeout(now),
        }
    }

    /// The response to [`Command::List`] `req`.
    pub fn handle_list(&mut self, now: Instant, req: RequestId, response: ListResponse<'_>) {
        let now = self.advance(now);
        let (Lifecycle::Running, Source::Kubernetes(reflector)) =
            (self.lifecycle, &mut self.source)
        else {
            return self.stale("list response");
        };
        let change = reflector.handle_list(now, req, response, &mut self.ids, &mut self.out);
        self.after_source(change);
    }

    /// The `200` response to [`Command::List`] `req`, decoded by the driver while the body
    /// streamed in with a [`crate::list_decoder::ListDecoder`], so that the parse overlaps the
    /// transfer. Equivalent to [`ReconcileLoop::handle_list`] with the whole body: the same
    /// decoder reads both.
    pub fn handle_list_decoded(
        &mut self,
        now: Instant,
        req: RequestId,
        list: Result<ObjectList<O>, ListBodyError>,
    ) {
        let now = self.advance(now);
        let (Lifecycle::Running, Source::Kubernetes(reflector)) =
            (self.lifecycle, &mut self.source)
        else {
            return self.stale("list response");
        };
        let change = reflector.handle_list_decoded(now, req, list, &mut self.ids, &mut self.out);
        self.after_source(change);
    }

    /// The WATCH `stream` was answered with 200 and is streaming (optional; it marks when the
    /// stream really started for the short-watch rule).
    pub fn handle_watch_opened(&mut self, now: Instant, stream: StreamId) {
        let now = self.advance(now);
        let (Lifecycle::Running, Source::Kubernetes(reflector)) =
            (self.lifecycle, &mut self.source)
        else {
            return self.stale("watch opened");
        };
        reflector.handle_watch_opened(now, stream, &mut self.out);
        self.after_source(None);
    }

    /// One line of WATCH `stream`: a JSON watch event, raw, with or without its newline.
    pub fn handle_watch_line(&mut self, now: Instant, stream: StreamId, line: &[u8]) {
        let now = self.advance(now);
        let (Lifecycle::Running, Source::Kubernetes(reflector)) =
            (self.lifecycle, &mut self.source)
        else {
            return self.stale("watch frame");
        };
        let change = reflector.handle_watch_line(now, stream, line, &mut self.out);
        self.after_source(change);
    }

    /// WATCH `stream` ended.
    pub fn handle_watch_end(&mut self, now: Instant, stream: StreamId, end: StreamEnd) {
        let now = self.advance(now);
        let (Lifecycle::Running, Source::Kubernetes(reflector)) =
            (self.lifecycle, &mut self.source)
        else {
            return self.stale("watch end");
        };
        reflector.handle_watch_end(now, stream, end, &mut self.ids, &mut self.out);
        self.after_source(None);
    }

    /// An event from the in-process source's `stream`.
    pub fn handle_source_event(&mut self, now: Instant, stream: StreamId, event: SourceEvent<O>) {
        let now = self.advance(now);
        let (Lifecycle::Running, Source::InProcess(source)) = (self.lifecycle, &mut self.source)
        else {
            return self.stale("source event");
        };
        let change = source.handle_event(now, stream, event, &mut self.out);
        self.after_source(change.map(Change::from));
    }

    /// The in-process source's `stream` ended, with an error or without.
    pub fn handle_source_end(&mut self, now: Instant, stream: StreamId, error: Option<String>) {
        let now = self.advance(now);
        let (Lifecycle::Running, Source::InProcess(source)) = (self.lifecycle, &mut self.source)
        else {
            return self.stale("source end");
        };
        source.handle_end(now, stream, error, &mut self.out);
        self.after_source(None);
    }

    /// The outcome of [`Command::Reconcile`] `ticket`.
    pub fn handle_reconciled(&mut self, now: Instant, ticket: Ticket, outcome: Outcome) {
        let now = self.advance(now);
        if self.lifecycle != Lifecycle::Running {
            return self.stale("reconcile outcome");
        }
        let Some(parent) = self.in_flight.remove(&ticket) else {
            return self.stale("reconcile outcome");
        };
        self.queue.done(&parent);
        match outcome {
            Outcome::Success => self.retry.succeeded(&parent),
            Outcome::RequeueAfter(delay) => {
                self.retry.requeue_after(now, parent.clone(), delay);
                self.event(Event::RequeueScheduled { parent, delay });
            }
            Outcome::Error(error) => {
                self.stats.reconcile_errors += 1;
                let (failures, delay) = self.retry.failed(now, parent.clone());
                self.event(Event::BackoffScheduled {
                    parent,
                    failures,
                    delay,
                    error,
                });
            }
        }
        self.dispatch();
    }

    /// Fires every timer that is due; an early or spurious call does nothing.
    pub fn handle_timeout(&mut self, now: Instant) {
        let now = self.advance(now);
        if self.lifecycle != Lifecycle::Running {
            return;
        }
        match &mut self.source {
            Source::Kubernetes(reflector) => {
                reflector.handle_timeout(now, &mut self.ids, &mut self.out);
            }
            Source::InProcess(source) => {
                let ids = &mut self.ids;
                source.handle_timeout(now, || ids.stream(), &mut self.out);
            }
        }
        while let Some(parent) = self.retry.pop_due(now) {
            self.queue.add(parent);
        }
        if let Some(at) = self.resync_at
            && at <= now
        {
            self.resync_at = self.resync.map(|period| now + period);
            self.stats.resyncs += 1;
            let mut parents = 0;
            for parent in self.store.parents() {
                self.queue.add(parent.clone());
                parents += 1;
            }
            self.event(Event::Resync { parents });
        }
        self.dispatch();
    }

    // ----- outputs -----

    /// The next output. Call until it returns [`Output::Timeout`].
    pub fn poll_output(&mut self) -> Output<O, P> {
        self.out
            .pop_front()
            .unwrap_or_else(|| Output::Timeout(self.poll_timeout()))
    }

    /// The next deadline and its reason; `None` when only an input can make progress.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Deadline> {
        if self.lifecycle != Lifecycle::Running {
            return None;
        }
        // Listed in handle_timeout's firing order, so a tie names the first to fire.
        let source = match &self.source {
            Source::Kubernetes(reflector) => reflector.deadline(),
            Source::InProcess(source) => source.deadline(),
        };
        let requeue = self.retry.next_deadline().map(|at| Deadline {
            at,
            wake: Wake::Requeue,
        });
        let resync = self.resync_at.map(|at| Deadline {
            at,
            wake: Wake::Resync,
        });
        [source, requeue, resync]
            .into_iter()
            .flatten()
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

    /// The reflector's cursor (`None` for an in-process source, or while relisting).
    #[must_use]
    pub fn cursor(&self) -> Option<&str> {
        match &self.source {
            Source::Kubernetes(reflector) => reflector.cursor(),
            Source::InProcess(_) => None,
        }
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
        stats
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

    /// Applies a store write from the source, then wakes, then dispatches: the store is
    /// always updated before any key is queued.
    fn after_source(&mut self, change: Option<Change<O>>) {
        if let Some(change) = change {
            let replace = matches!(change, Change::Replace(_));
            self.store
                .apply(change, &self.key_map, &mut self.wakes, &mut self.rejected);
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
            for parent in self.wakes.drain(..) {
                self.queue.add(parent);
            }
            if replace && !self.synced {
                self.synced = true;
                let objects = self.store.len();
                self.event(Event::Synced { objects });
            }
        }
        self.dispatch();
    }

    /// Hands queued keys to free reconcile slots, once synced.
    fn dispatch(&mut self) {
        if self.lifecycle != Lifecycle::Running || !self.synced {
            return;
        }
        while self.in_flight.len() < self.concurrency {
            let Some(parent) = self.queue.pop() else {
                break;
            };
            debug_assert!(
                self.in_flight.values().all(|p| *p != parent),
                "a key reconciled twice at once"
            );
            let ticket = Ticket(self.ids.bump());
            let attempt = self.retry.failures(&parent).saturating_add(1);
            let members = self.store.snapshot(&parent);
            self.in_flight.insert(ticket, parent.clone());
            self.stats.reconciles += 1;
            self.out.push_back(Output::Command(Command::Reconcile {
                ticket,
                parent,
                attempt,
                members,
            }));
        }
        debug_assert!(self.in_flight.len() <= self.concurrency);
        debug_assert_eq!(self.in_flight.len(), self.queue.processing());
    }
}
