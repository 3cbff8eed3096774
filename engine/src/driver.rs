//! The driver task: owns the core, performs its commands, feeds the results back.
//!
//! One task holds the [`ReconcileLoop`]; LIST, WATCH and reconcile run as tasks of their own
//! and report through one bounded inbox. The choreography, in order, every turn:
//! 1. drain the core until [`Output::Timeout`], performing each command as it comes;
//! 2. wait for the first of: a stop request, an inbox message, the deadline;
//! 3. feed what woke us and every message already waiting in the inbox behind it (at most
//!    the inbox's capacity, so a turn stays bounded): the core decides dispatch when it is
//!    drained, so inputs fed together wake each parent once;
//! 4. read the clock and, if the deadline has passed, feed [`Input::Timeout`] — the clock
//!    decides, not which future won the race (quinn's rule), so a timer that fired late or a
//!    message that beat it cannot lose a wakeup.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures_lite::{FutureExt, StreamExt};
use reconcile_core::list::{ListDecoder, ListLimits};
use reconcile_core::{
    Command, Deadline, Event, Input, Instant, LeaseRequest, LeaseResponse, Lifecycle, ListResponse,
    Members, Object, Outcome, Output, OwnWrite, ReconcileLoop, Related, RequestId, SourceId,
    StreamEnd, StreamId, Ticket, WatchParams,
};
use tracing::Instrument;

use super::cache::{CacheSnapshot, Published, Staged};
use super::election::{lease_call, lease_request};
use super::error::Error;
use super::handle::{Listed, Msg, Shared};
use super::lines::WatchSplitter;
use super::reconcile::Reconcile;
use super::recorder::Recorder;
use super::runtime::{BoxFuture, Runtime, Task, timeout};
use super::transport::{
    BodyStream, Requests, Transport, TransportError, for_each_chunk, read_body, read_prefix,
};

/// A reconcile with its context and error policy bound: request in, outcome out.
pub(crate) type ReconcileFn<O, P> =
    Arc<dyn Fn(Reconcile<O, P>) -> BoxFuture<Outcome> + Send + Sync + 'static>;

/// Bounds on what the driver holds and how long it waits.
///
/// Every buffer the driver fills from the network has a bound in bytes, and every wait a
/// deadline (issue 17): a buggy or hostile server gets a typed error, never an out-of-memory
/// kill or a task that waits forever.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Added to a WATCH's `timeoutSeconds` to get its read-idle timeout: a watch silent for
    /// longer is taken as hung and ended as a transport error.
    pub watch_idle_margin: Duration,
    /// Longest wait for a LIST's response head or for any chunk of its body.
    pub list_idle: Duration,
    /// Longest a whole LIST may take, from sending it to the last byte of its body
    /// (default 5 min, five times the apiserver's own 60 s request timeout): a body that
    /// trickles in just often enough to beat `list_idle` still ends, as a transport error,
    /// and the LIST is retried.
    pub list_deadline: Duration,
    /// Largest LIST body accepted (default 2 GiB); also the most bytes one paged or
    /// streaming listing may gather (`Config::max_listing_bytes`).
    pub max_list_body: usize,
    /// What a `200` LIST body may decode into, in proportion to its bytes, and how many
    /// items it may hold; over it the LIST fails with a
    /// [`ListBodyError`](reconcile_core::list::ListBodyError) and is retried. A secondary
    /// source's body is decoded by the core, under the default bounds.
    pub list_decode: ListLimits,
    /// Largest single watch line accepted, and the largest length a protobuf watch frame may
    /// declare (checked before any of the frame is buffered).
    pub max_watch_line: usize,
    /// How much of the body of a non-200 WATCH or LIST is read (1 MiB): it is only context,
    /// usually a `Status`, so the rest is neither read nor kept.
    pub max_error_body: usize,
    /// Capacity of the inbox in messages; a full inbox slows the watch readers down
    /// (backpressure).
    pub inbox: usize,
    /// Bytes of watch lines that may wait in the inbox, read but not yet fed to the core
    /// (default 64 MiB): a watch reader that would pass it waits until the driver has fed
    /// what is there. A single line larger than the budget still goes through once nothing
    /// else waits, so the bound is `max(inbox_bytes, max_watch_line)`.
    pub inbox_bytes: usize,
    /// Longest wait for a Lease request's answer; also how long a stopping leader waits for
    /// its release to be written.
    pub lease_request: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            watch_idle_margin: Duration::from_secs(10),
            list_idle: Duration::from_secs(60),
            list_deadline: Duration::from_secs(300),
            // 2 GiB (`usize::MAX` where that does not fit): the core's default bound on a
            // gathered listing, which the controller sets from this.
            max_list_body: usize::try_from(reconcile_core::MAX_LISTING_BYTES).unwrap_or(usize::MAX),
            list_decode: ListLimits::default(),
            max_watch_line: 16 << 20,
            max_error_body: 1 << 20,
            inbox: 1024,
            inbox_bytes: 64 << 20,
            lease_request: Duration::from_secs(5),
        }
    }
}

/// The bytes of watch lines in the inbox, bounded by [`Limits::inbox_bytes`]: a watch
/// reader takes a [`Permit`] for a line before sending it, and the driver gives the bytes
/// back when it feeds the line.
#[derive(Debug)]
pub(crate) struct InboxBytes {
    held: Mutex<usize>,
    freed: event_listener::Event,
    limit: usize,
}

impl InboxBytes {
    pub(crate) fn new(limit: usize) -> Self {
        InboxBytes {
            held: Mutex::new(0),
            freed: event_listener::Event::new(),
            limit,
        }
    }

    fn held(&self) -> std::sync::MutexGuard<'_, usize> {
        // Only ever held for an addition: a poisoned count is still a count.
        self.held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Waits until `bytes` more fit (or nothing is held), and takes them.
    async fn acquire(self: &Arc<Self>, bytes: usize) -> Permit {
        loop {
            let listener = self.freed.listen();
            {
                let mut held = self.held();
                if *held == 0 || held.saturating_add(bytes) <= self.limit {
                    *held = held.saturating_add(bytes);
                    return Permit {
                        budget: Arc::clone(self),
                        bytes,
                    };
                }
            }
            listener.await;
        }
    }

    /// Gives `bytes` back: the driver fed a line of that length.
    pub(crate) fn release(&self, bytes: usize) {
        {
            let mut held = self.held();
            *held = held.saturating_sub(bytes);
        }
        self.freed.notify(usize::MAX);
    }
}

/// Bytes taken for one line; given back on drop unless the line reached the inbox.
struct Permit {
    budget: Arc<InboxBytes>,
    bytes: usize,
}

impl Permit {
    /// The line is in the inbox: the driver gives its bytes back when it feeds it.
    fn sent(mut self) {
        self.bytes = 0;
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        if self.bytes > 0 {
            self.budget.release(self.bytes);
        }
    }
}

/// What a stop request does to the reconciles still running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shutdown {
    /// Nothing new starts; the running reconciles get up to `up_to` to finish, then the
    /// rest are cancelled (controller-runtime's `GracefulShutdownTimeout`, 30 s by default).
    /// A second stop request cancels at once.
    FinishRunning {
        /// The longest wait for the running reconciles.
        up_to: Duration,
    },
    /// The running reconciles are cancelled at once.
    CancelRunning,
}

impl Default for Shutdown {
    fn default() -> Self {
        Shutdown::FinishRunning {
            up_to: Duration::from_secs(30),
        }
    }
}

/// A task the driver may have to cancel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum TaskKey {
    List(RequestId),
    Watch(StreamId),
    Reconcile(Ticket),
    Lease(RequestId),
}

/// What ended a wait.
enum Woken<O> {
    Stop,
    Input(Msg<O>),
    Timer,
}

/// Where LIST / WATCH go, for a Kubernetes source.
pub(crate) struct Remote<T> {
    /// `None` for an in-process source added as a secondary: it has nowhere to list from.
    pub(crate) transport: Option<T>,
    pub(crate) requests: Requests,
}

impl<T> Remote<T> {
    pub(crate) fn none() -> Self {
        Remote {
            transport: None,
            requests: Requests::new(""),
        }
    }
}

pub(crate) struct Driver<O, P, R: Runtime, T> {
    pub(crate) core: ReconcileLoop<O, P>,
    pub(crate) runtime: R,
    pub(crate) origin: std::time::Instant,
    pub(crate) remote: Option<Remote<T>>,
    /// The secondary sources' collections: `S1` first.
    pub(crate) secondaries: Vec<Remote<T>>,
    pub(crate) reconcile: ReconcileFn<O, P>,
    pub(crate) limits: Limits,
    pub(crate) shared: Arc<Shared<O>>,
    /// What every `Cache` reader sees.
    pub(crate) published: Arc<Published<O, P>>,
    /// The driver's copy of the cache, kept in step from the core's change log at the
    /// start of every drain; reconciles get snapshots of it.
    pub(crate) cache: CacheSnapshot<O, P>,
    pub(crate) inbox: async_channel::Receiver<Msg<O>>,
    /// The bytes of watch lines waiting in the inbox.
    pub(crate) inbox_bytes: Arc<InboxBytes>,
    pub(crate) stop: async_channel::Receiver<()>,
    pub(crate) recorder: Option<Box<dyn Recorder<O, P>>>,
    pub(crate) tasks: BTreeMap<TaskKey, R::Task>,
    pub(crate) open_source: Option<StreamId>,
    /// A WATCH was sent since the last LIST: the next one is a reopen.
    pub(crate) watched_since_list: bool,
    /// Where the election's Lease requests go.
    pub(crate) lease: Option<T>,
    /// What a stop request does.
    pub(crate) shutdown: Shutdown,
    /// Draining: when the reconciles still running are cancelled.
    pub(crate) drain_until: Option<Instant>,
}

impl<O, P, R, T> Driver<O, P, R, T>
where
    O: Object + Send + Sync,
    P: Ord + std::hash::Hash + Clone + fmt::Display + fmt::Debug + Send + Sync + 'static,
    R: Runtime,
    T: Transport,
{
    pub(crate) fn now(&self) -> Instant {
        Instant::from_duration(self.runtime.now().saturating_duration_since(self.origin))
    }

    /// Records `input` (if a recorder is attached) and feeds it to the core.
    fn input(&mut self, now: Instant, input: Input<O>) {
        if let Some(recorder) = &mut self.recorder {
            recorder.input(now, &input);
        }
        self.core.handle_input(now, input);
    }

    /// Runs until stopped; the result is also published to every handle.
    pub(crate) async fn run(mut self) -> Result<(), Error> {
        let result = self.turns().await;
        self.await_release().await;
        for (_, task) in std::mem::take(&mut self.tasks) {
            task.abort();
        }
        let now = self.now();
        if let Some(recorder) = &mut self.recorder {
            recorder.finish(now);
        }
        // Closing the inbox makes every later push fail fast instead of queueing forever.
        self.inbox.close();
        self.stop.close();
        self.published.set_ended();
        self.shared.finish(result.clone());
        result
    }

    async fn turns(&mut self) -> Result<(), Error> {
        let now = self.now();
        self.input(now, Input::Start);
        loop {
            let deadline = self.drain();
            self.published
                .publish(self.cache.clone(), self.core.cursor());
            self.shared.publish(self.core.stats(), self.core.cursor());
            self.shared.publish_leadership(self.core.leadership());
            self.shared.publish_sharding(self.core.sharding());
            self.shared.metrics.publish(self.core.metrics());
            self.shared
                .metrics
                .publish_share(self.published.share_stats());
            if self.core.lifecycle() == Lifecycle::Stopped {
                return Ok(());
            }
            let timer = [deadline.map(|d| d.at), self.drain_until]
                .into_iter()
                .flatten()
                .min();
            let woken = self.wait(timer).await;
            let now = self.now();
            if self.drain_until.is_some_and(|until| until <= now) {
                tracing::warn!("graceful stop timed out: cancelling the reconciles still running");
                self.drain_until = None;
                self.input(now, Input::Stop);
                continue;
            }
            match woken {
                Woken::Stop => {
                    match (self.shutdown, self.core.lifecycle()) {
                        (Shutdown::FinishRunning { up_to }, Lifecycle::Running) => {
                            tracing::info!(?up_to, "stopping: running reconciles may finish");
                            self.drain_until = Some(now + up_to);
                            self.input(now, Input::Drain);
                        }
                        _ => self.input(now, Input::Stop),
                    }
                    continue;
                }
                Woken::Input(msg) => {
                    self.feed(now, msg);
                    self.feed_waiting(now);
                }
                Woken::Timer => {}
            }
            if deadline.is_some_and(|d| d.at <= now) {
                // Drain what the inputs produced first, so commands keep their order.
                let deadline = self.drain();
                if deadline.is_some_and(|d| d.at <= now) {
                    self.input(now, Input::Timeout);
                }
            }
        }
    }

    /// A stopping leader's release of its Lease is in flight: wait for its answer (bounded)
    /// so the next leader can take over at once instead of waiting out the lease.
    async fn await_release(&mut self) {
        let pending: Vec<RequestId> = self
            .tasks
            .keys()
            .filter_map(|k| match k {
                TaskKey::Lease(req) => Some(*req),
                _ => None,
            })
            .collect();
        if pending.is_empty() {
            return;
        }
        let inbox = self.inbox.clone();
        let expected = pending.len();
        // A sharded replica releases every shard it holds and its membership: all are
        // awaited, under one bound.
        let mut answers = Vec::with_capacity(expected);
        let _ = timeout(&self.runtime, self.limits.lease_request, async {
            while answers.len() < expected
                && let Ok(msg) = inbox.recv().await
            {
                if let Msg::Lease(req, response) = msg
                    && pending.contains(&req)
                {
                    answers.push(response);
                }
            }
        })
        .await;
        for answer in &answers {
            match answer {
                LeaseResponse::Response { status, .. } if *status < 300 => {
                    tracing::info!("lease released");
                }
                other => tracing::warn!(answer = ?other, "lease not released"),
            }
        }
        if answers.len() < expected {
            tracing::warn!(
                unanswered = expected - answers.len(),
                "lease release unanswered"
            );
        }
    }

    /// Feeds the messages already waiting in the inbox, without waiting for more: the core
    /// decides dispatch at the next drain, so a burst fed together wakes each parent once.
    /// At most the inbox's capacity is taken, so one turn stays bounded while readers keep
    /// refilling it.
    fn feed_waiting(&mut self, now: Instant) {
        for _ in 1..self.limits.inbox.max(1) {
            match self.inbox.try_recv() {
                Ok(msg) => self.feed(now, msg),
                Err(_) => break,
            }
        }
    }

    /// The wait for one turn. Built from clones so the future borrows nothing of the
    /// driver (which holds non-`Sync` parts) and stays `Send`.
    fn wait(&self, deadline: Option<Instant>) -> impl Future<Output = Woken<O>> + Send + 'static {
        let stop = self.stop.clone();
        let inbox = self.inbox.clone();
        let timer: BoxFuture<()> = match deadline {
            Some(at) => self.runtime.sleep_until(self.origin + at.since_origin()),
            None => Box::pin(futures_lite::future::pending()),
        };
        // Stop first: `or` polls its left side first, so a pending stop always wins.
        let stop = async move {
            let _ = stop.recv().await;
            Woken::Stop
        };
        let input = async move {
            match inbox.recv().await {
                Ok(msg) => Woken::Input(msg),
                // Cannot happen while `shared` holds a sender; stopping is the safe reading.
                Err(_) => Woken::Stop,
            }
        };
        stop.or(input).or(async move {
            timer.await;
            Woken::Timer
        })
    }

    /// Drains the core; the number of outputs per input is finite, so this ends.
    fn drain(&mut self) -> Option<Deadline> {
        // Inputs only change the store; dispatch happens below, so the copy is in step with
        // every reconcile this drain dispatches.
        let cache = &mut self.cache;
        // Subscribers of this cache (controllers over it as a shared source) get each change
        // at the next publish, as one batch with the snapshot it leads to.
        let mut staged = Staged::new(self.published.has_subscribers());
        self.core.drain_cache_changes(|change| {
            staged.note(&change, cache);
            cache.apply(change);
        });
        self.published.stage(staged);
        loop {
            match self.core.poll_output() {
                Output::Command(command) => {
                    if let Some(recorder) = &mut self.recorder {
                        recorder.command(self.core.now(), &command);
                    }
                    self.perform(command);
                }
                Output::Event(event) => self.observe(&event),
                Output::Timeout(deadline) => return deadline,
            }
        }
    }

    fn feed(&mut self, now: Instant, msg: Msg<O>) {
        let input = match msg {
            Msg::List(req, result) => {
                self.tasks.remove(&TaskKey::List(req));
                let response = match result {
                    Ok(Listed::Decoded { list, body }) => {
                        // The recorder keeps the raw body, which a replay decodes the same way.
                        if let (Some(recorder), Some(body)) = (&mut self.recorder, body) {
                            let raw = ListResponse::Response { status: 200, body };
                            recorder.input(now, &Input::List { req, response: raw });
                        }
                        self.core.handle_input(
                            now,
                            Input::List {
                                req,
                                response: ListResponse::Decoded(list),
                            },
                        );
                        return;
                    }
                    Ok(Listed::Status { status, body }) => ListResponse::Response { status, body },
                    Err(error) => {
                        tracing::warn!(%req, %error, "list failed to get a response");
                        ListResponse::TransportError(error)
                    }
                };
                Input::List { req, response }
            }
            Msg::WatchOpened(stream) => Input::WatchOpened { stream },
            Msg::WatchLine(stream, line) => {
                self.inbox_bytes.release(line.len());
                Input::WatchLine { stream, line }
            }
            Msg::WatchEnd(stream, end) => {
                self.tasks.remove(&TaskKey::Watch(stream));
                tracing::debug!(%stream, ?end, "watch ended");
                Input::WatchEnd { stream, end }
            }
            Msg::Reconciled(ticket, outcome, written) => {
                self.tasks.remove(&TaskKey::Reconcile(ticket));
                let writes: Vec<OwnWrite> = written
                    .iter()
                    .filter_map(|w| {
                        let source = self.source_caching(w);
                        if source.is_none() {
                            tracing::debug!(group = %w.group, plural = %w.plural, "write to a resource no source caches");
                        }
                        source.map(|s| OwnWrite::new(s, w.resource_version.clone()))
                    })
                    .collect();
                if writes.is_empty() {
                    Input::Reconciled { ticket, outcome }
                } else {
                    Input::ReconciledWrote {
                        ticket,
                        outcome,
                        writes,
                    }
                }
            }
            Msg::ReconcileTimeout(ticket, timeout) => Input::ReconcileTimeout { ticket, timeout },
            Msg::Source(event) => match self.open_source {
                Some(stream) => Input::SourceEvent { stream, event },
                None => {
                    tracing::debug!("in-process event dropped: no source stream is open");
                    return;
                }
            },
            Msg::ReconcileAll => Input::ReconcileAll,
            Msg::ReconcileOn(object) => Input::ReconcileOn { object },
            Msg::Lease(req, response) => {
                self.tasks.remove(&TaskKey::Lease(req));
                Input::Lease { req, response }
            }
            Msg::SourceCursor(resource_version) => match self.open_source {
                Some(stream) => Input::SourceCursor {
                    stream,
                    resource_version,
                },
                None => return,
            },
            Msg::SourceEnd(error) => match self.open_source.take() {
                Some(stream) => Input::SourceEnd { stream, error },
                None => return,
            },
        };
        self.input(now, input);
    }

    fn abort(&mut self, key: TaskKey) {
        if let Some(task) = self.tasks.remove(&key) {
            task.abort();
        }
    }

    fn perform(&mut self, command: Command<O, P>) {
        match command {
            Command::List {
                req,
                source,
                params,
                limit,
                continue_token,
            } => self.list(req, source, &params, limit, continue_token.as_deref()),
            Command::CancelList { req } => self.abort(TaskKey::List(req)),
            Command::Watch {
                stream,
                source,
                params,
                resource_version,
                timeout_seconds,
                allow_bookmarks,
                send_initial_events,
            } => self.watch(
                stream,
                source,
                &params,
                &resource_version,
                timeout_seconds,
                (allow_bookmarks, send_initial_events),
            ),
            Command::CloseWatch { stream } => self.abort(TaskKey::Watch(stream)),
            Command::OpenSource { stream } => self.open_source = Some(stream),
            Command::CloseSource { stream } => {
                if self.open_source == Some(stream) {
                    self.open_source = None;
                }
            }
            Command::Reconcile {
                ticket,
                parent,
                attempt,
                members,
                related,
            } => self.reconcile(ticket, parent, attempt, members, related),
            Command::CancelReconcile { ticket } => self.abort(TaskKey::Reconcile(ticket)),
            Command::Lease {
                req,
                namespace,
                name,
                request,
            } => self.lease(req, &namespace, &name, &request),
            other => tracing::warn!(command = %other, "command not understood by this driver"),
        }
    }

    fn lease(&mut self, req: RequestId, namespace: &str, name: &str, request: &LeaseRequest) {
        tracing::debug!(%req, %request, "lease");
        let inbox = self.shared.inbox();
        let Some(transport) = self.lease.clone() else {
            let answer = LeaseResponse::TransportError("no transport for the Lease".into());
            let _ = inbox.try_send(Msg::Lease(req, answer));
            return;
        };
        let request = lease_request(namespace, name, request);
        let runtime = self.runtime.clone();
        let limit = self.limits.lease_request;
        let task = self.runtime.spawn(Box::pin(
            async move {
                let answer = match request {
                    Ok(request) => lease_call(&runtime, &transport, request, limit).await,
                    Err(e) => LeaseResponse::TransportError(format!(
                        "cannot build the Lease request: {e}"
                    )),
                };
                let _ = inbox.send(Msg::Lease(req, answer)).await;
            }
            // The controller's span, so the task's lines name the controller.
            .instrument(tracing::Span::current()),
        ));
        self.tasks.insert(TaskKey::Lease(req), task);
    }

    /// The first source whose collection is `write`'s resource (by group and plural,
    /// whatever the namespace or selectors: its cursor moves for every write to the
    /// resource); `None` when no source caches it.
    fn source_caching(&self, write: &super::writes::Written) -> Option<SourceId> {
        // An in-process primary fed from a shared cache mirrors that cache's collection.
        if self.remote.is_none()
            && self
                .published
                .resource()
                .is_some_and(|(group, plural)| *group == write.group && *plural == write.plural)
        {
            return Some(SourceId::PRIMARY);
        }
        self.remote
            .iter()
            .map(|r| (SourceId::PRIMARY, r))
            .chain(
                self.secondaries
                    .iter()
                    .zip(1..)
                    .map(|(r, n)| (SourceId::nth(n), r)),
            )
            .find(|(_, r)| {
                let resource =
                    super::recorder::SourceResource::of_url(r.requests.url_path(), None, false);
                resource.group.as_deref() == Some(write.group.as_str())
                    && resource.plural.as_deref() == Some(write.plural.as_str())
            })
            .map(|(id, _)| id)
    }

    /// Where `source`'s LIST and WATCH go.
    fn remote(&self, source: SourceId) -> Option<&Remote<T>> {
        match usize::try_from(source.get()).ok()? {
            0 => self.remote.as_ref(),
            n => self.secondaries.get(n - 1),
        }
    }

    fn list(
        &mut self,
        req: RequestId,
        source: SourceId,
        params: &WatchParams,
        limit: Option<u32>,
        continue_token: Option<&str>,
    ) {
        if source == SourceId::PRIMARY && continue_token.is_none() {
            self.watched_since_list = false;
        }
        let Some(remote) = self.remote(source) else {
            // The core only lists for a Kubernetes source, which always has a remote.
            let _ = self
                .shared
                .inbox()
                .try_send(Msg::List(req, Err("no transport configured".into())));
            return;
        };
        if continue_token.is_none() {
            tracing::info!(%req, %source, ?limit, "list");
        } else {
            tracing::debug!(%req, %source, ?limit, "list next page");
        }
        let request = remote.requests.list_page(params, limit, continue_token);
        let Some(transport) = remote.transport.clone() else {
            let _ = self
                .shared
                .inbox()
                .try_send(Msg::List(req, Err("no transport configured".into())));
            return;
        };
        let runtime = self.runtime.clone();
        let inbox = self.shared.inbox();
        let limits = self.limits;
        let keep_body = self.recorder.is_some();
        let primary = source == SourceId::PRIMARY;
        let task = self.runtime.spawn(Box::pin(
            async move {
                let listed = async {
                    match request {
                        // Only the primary's objects are of type `O`: a secondary's body goes to
                        // the core raw, which decodes it as that source's type.
                        Ok(request) if primary => {
                            list(&runtime, &transport, request, limits, keep_body)
                                .await
                                .map_err(|e| e.0)
                        }
                        Ok(request) => list_raw(&runtime, &transport, request, limits)
                            .await
                            .map_err(|e| e.0),
                        Err(e) => Err(format!("cannot build the LIST request: {e}")),
                    }
                };
                let result = timeout(&runtime, limits.list_deadline, listed)
                    .await
                    .unwrap_or_else(|| {
                        Err(format!(
                            "LIST did not finish within {}s (Limits::list_deadline)",
                            limits.list_deadline.as_secs()
                        ))
                    });
                let _ = inbox.send(Msg::List(req, result)).await;
            }
            // The controller's span, so the task's lines name the controller.
            .instrument(tracing::Span::current()),
        ));
        self.tasks.insert(TaskKey::List(req), task);
    }

    fn watch(
        &mut self,
        stream: StreamId,
        source: SourceId,
        params: &WatchParams,
        resource_version: &str,
        timeout_seconds: u32,
        (bookmarks, initial_events): (bool, bool),
    ) {
        if initial_events {
            tracing::info!(%stream, %source, timeout_seconds, "streaming list");
        } else if source != SourceId::PRIMARY {
            tracing::info!(%stream, %source, resource_version, timeout_seconds, "watch");
        } else if !self.watched_since_list {
            tracing::info!(%stream, resource_version, timeout_seconds, "watch open");
        } else {
            tracing::info!(%stream, resource_version, timeout_seconds, "watch reopen");
        }
        if source == SourceId::PRIMARY {
            self.watched_since_list = true;
        }
        let Some(remote) = self.remote(source) else {
            let _ = self.shared.inbox().try_send(Msg::WatchEnd(
                stream,
                StreamEnd::TransportError("no transport configured".into()),
            ));
            return;
        };
        let request = remote.requests.watch_with(
            params,
            resource_version,
            timeout_seconds,
            bookmarks,
            initial_events,
        );
        let Some(transport) = remote.transport.clone() else {
            let _ = self.shared.inbox().try_send(Msg::WatchEnd(
                stream,
                StreamEnd::TransportError("no transport configured".into()),
            ));
            return;
        };
        let runtime = self.runtime.clone();
        let inbox = self.shared.inbox();
        let budget = Arc::clone(&self.inbox_bytes);
        let limits = self.limits;
        let idle = Duration::from_secs(u64::from(timeout_seconds)) + limits.watch_idle_margin;
        let task = self.runtime.spawn(Box::pin(
            async move {
                let end = match request {
                    Ok(request) => {
                        let to = Inbox {
                            sender: &inbox,
                            budget: &budget,
                        };
                        watch(&runtime, &transport, request, stream, to, idle, limits).await
                    }
                    Err(e) => {
                        StreamEnd::TransportError(format!("cannot build the WATCH request: {e}"))
                    }
                };
                let _ = inbox.send(Msg::WatchEnd(stream, end)).await;
            }
            // The controller's span, so the task's lines name the controller.
            .instrument(tracing::Span::current()),
        ));
        self.tasks.insert(TaskKey::Watch(stream), task);
    }

    fn reconcile(
        &mut self,
        ticket: Ticket,
        parent: P,
        attempt: u32,
        members: Members<O>,
        related: Vec<Related>,
    ) {
        let span = tracing::info_span!("reconcile", key = %parent, attempt, %ticket);
        let inbox = self.shared.inbox();
        let writes = super::writes::WriteLog::default();
        let run = super::reconcile::Run {
            ticket,
            writes: writes.clone(),
            inbox: inbox.clone(),
        };
        let request = Reconcile::new(
            parent,
            members,
            related,
            attempt,
            self.cache.clone(),
            Some(run),
        );
        // Polled with its write log current, so ApiClient's writes land in it.
        let future = super::writes::Recording {
            log: writes.clone(),
            inner: (self.reconcile)(request),
        };
        let task = self.runtime.spawn(Box::pin(
            async move {
                // A panicking reconcile must still hand its slot back, or its key would be
                // stuck in flight forever.
                let outcome = std::panic::AssertUnwindSafe(future)
                    .catch_unwind()
                    .await
                    .unwrap_or_else(|_| Outcome::Error("reconcile panicked".into()));
                match &outcome {
                    Outcome::Error(error) => tracing::warn!(%error, "reconcile failed"),
                    Outcome::ErrorHandled {
                        error,
                        requeue_after,
                    } => tracing::warn!(%error, ?requeue_after, "reconcile failed; policy chose"),
                    _ => tracing::debug!(?outcome, "reconcile done"),
                }
                let _ = inbox
                    .send(Msg::Reconciled(ticket, outcome, writes.take()))
                    .await;
            }
            .instrument(span),
        ));
        self.tasks.insert(TaskKey::Reconcile(ticket), task);
    }

    fn observe(&self, event: &Event<P>) {
        match event {
            Event::Synced { objects } => {
                tracing::info!(objects, "synced");
                // Readers woken by readiness must find the listing already published.
                self.published
                    .publish(self.cache.clone(), self.core.cursor());
                self.published.set_ready();
                self.shared.set_synced();
            }
            Event::Relist { source, reason } => tracing::warn!(%source, %reason, "relist"),
            Event::ReconcileTimedOut { after, .. } => {
                tracing::warn!(%event, after_s = after.as_secs_f64(), "reconcile timed out");
            }
            Event::OwnWritesUnobserved { .. } | Event::OwnWriteUntracked { .. } => {
                tracing::info!(%event, "read your own writes");
            }
            Event::HeldForOwnWrites { .. } | Event::OwnWritesObserved { .. } => {
                tracing::debug!(%event, "read your own writes");
            }
            Event::InitialEventsEnd {
                stream,
                objects,
                resource_version,
            } => tracing::info!(%stream, objects, %resource_version, "streaming list complete"),
            Event::InitialEventsFailed { stream, reason } => {
                tracing::warn!(%stream, %reason, "streaming list failed; streaming again");
            }
            Event::StreamingListFallback { source, reason } => {
                tracing::warn!(%source, %reason, "streaming list refused; LIST+WATCH from now on");
            }
            Event::WatchRetry { stream, reason } => {
                tracing::info!(%stream, %reason, "watch will reopen");
            }
            Event::FrameSkipped { stream, error } => {
                tracing::warn!(%stream, %error, cursor = ?self.core.cursor(), "frame skipped");
            }
            Event::BackoffScheduled {
                parent,
                failures,
                delay,
                error,
            } => tracing::warn!(key = %parent, failures, ?delay, %error, "backoff scheduled"),
            Event::ListFailed { req, error } => tracing::warn!(%req, %error, "list failed"),
            Event::Stale { input } => tracing::trace!(input, "stale input ignored"),
            Event::LeadershipAcquired {
                identity,
                transitions,
            } => tracing::info!(%identity, transitions, "leading"),
            Event::LeadershipLost {
                identity,
                reason: reason @ reconcile_core::election::LostReason::Stopped,
            } => tracing::info!(%identity, %reason, "leadership ended"),
            Event::LeadershipLost { identity, reason } => {
                tracing::warn!(%identity, %reason, "leadership lost");
            }
            Event::LeaderObserved { holder } => tracing::info!(?holder, "leader observed"),
            Event::LeaseFailed { req, error } => tracing::info!(%req, %error, "lease try failed"),
            Event::ShardAcquired {
                shard,
                identity,
                transitions,
            } => tracing::info!(shard, %identity, transitions, "shard held"),
            Event::ShardLost {
                shard,
                reason:
                    reason @ (reconcile_core::election::LostReason::Stopped
                    | reconcile_core::election::LostReason::Rebalanced),
            } => tracing::info!(shard, %reason, "shard handed over"),
            Event::ShardLost { shard, reason } => tracing::warn!(shard, %reason, "shard lost"),
            Event::ShardReleasing { shard, running } => {
                tracing::info!(shard, running, "shard given up to rebalance");
            }
            Event::ShardMembers { live, target } => {
                tracing::info!(live, target, "shard members");
            }
            Event::ShardsSelected { shards } => {
                tracing::info!(
                    ?shards,
                    "listing only these shards' objects (shardSelector)"
                );
            }
            Event::ShardSelectionIgnored { outside } => tracing::warn!(
                ?outside,
                "the apiserver ignores shardSelector (ShardedListAndWatch off?): caching every object"
            ),
            other => tracing::debug!(event = %other, "core event"),
        }
    }
}

/// Sends a LIST and reads its answer. A `200` body is decoded chunk by chunk as it arrives
/// (on this task, off the driver's), so the parse overlaps the transfer; `keep_body` also
/// keeps the raw bytes, for a recorder.
async fn list<R: Runtime, T: Transport, O: Object>(
    runtime: &R,
    transport: &T,
    request: http::Request<Vec<u8>>,
    limits: Limits,
    keep_body: bool,
) -> Result<Listed<O>, TransportError> {
    let response = timeout(runtime, limits.list_idle, transport.send(request))
        .await
        .ok_or_else(|| TransportError::new("LIST got no response head in time"))??;
    let status = response.status().as_u16();
    let mut body = response.into_body();
    if status != 200 {
        // Only context for the core (usually a `Status`): a prefix is enough.
        let body = read_prefix(runtime, &mut body, limits.list_idle, limits.max_error_body).await?;
        return Ok(Listed::Status {
            status,
            body: body.into(),
        });
    }
    let mut decoder = ListDecoder::<O>::with_limits(limits.list_decode);
    let mut kept = keep_body.then(Vec::new);
    let mut failed = None;
    for_each_chunk(
        runtime,
        &mut body,
        limits.list_idle,
        limits.max_list_body,
        |chunk| {
            if let Some(kept) = &mut kept {
                kept.extend_from_slice(&chunk);
            }
            // After a decode error the body is still read to its end (it is bounded), so that
            // the connection stays reusable; the error is the answer.
            if failed.is_none()
                && let Err(e) = decoder.push(&chunk)
            {
                failed = Some(e);
            }
        },
    )
    .await?;
    let list = match failed {
        Some(e) => Err(e),
        None => decoder.finish(),
    };
    Ok(Listed::Decoded {
        list,
        body: kept.map(Bytes::from),
    })
}

/// Sends a LIST and reads its whole answer undecoded: a secondary source's, which the core
/// decodes as that source's type.
async fn list_raw<R: Runtime, T: Transport, O>(
    runtime: &R,
    transport: &T,
    request: http::Request<Vec<u8>>,
    limits: Limits,
) -> Result<Listed<O>, TransportError> {
    let response = timeout(runtime, limits.list_idle, transport.send(request))
        .await
        .ok_or_else(|| TransportError::new("LIST got no response head in time"))??;
    let status = response.status().as_u16();
    let mut body = response.into_body();
    let body = if status == 200 {
        read_body(runtime, &mut body, limits.list_idle, limits.max_list_body).await?
    } else {
        read_prefix(runtime, &mut body, limits.list_idle, limits.max_error_body).await?
    };
    Ok(Listed::Status {
        status,
        body: body.into(),
    })
}

/// Where a watch reader sends: the inbox, and the byte budget for the lines in it.
struct Inbox<'a, O> {
    sender: &'a async_channel::Sender<Msg<O>>,
    budget: &'a Arc<InboxBytes>,
}

impl<O> Inbox<'_, O> {
    async fn send(&self, msg: Msg<O>) -> Result<(), ()> {
        self.sender.send(msg).await.map_err(|_| ())
    }

    /// Sends one line once its bytes fit the budget.
    async fn line(&self, stream: StreamId, line: Bytes) -> Result<(), ()> {
        let permit = self.budget.acquire(line.len()).await;
        self.send(Msg::WatchLine(stream, line)).await?;
        permit.sent();
        Ok(())
    }
}

async fn watch<R: Runtime, T: Transport, O>(
    runtime: &R,
    transport: &T,
    request: http::Request<Vec<u8>>,
    stream: StreamId,
    inbox: Inbox<'_, O>,
    idle: Duration,
    limits: Limits,
) -> StreamEnd {
    let response = match timeout(runtime, idle, transport.send(request)).await {
        None => return StreamEnd::TransportError("WATCH got no response head in time".into()),
        Some(Err(e)) => return StreamEnd::TransportError(e.0),
        Some(Ok(response)) => response,
    };
    let code = response.status().as_u16();
    let head_content_type = response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let mut body: BodyStream = response.into_body();
    if code != 200 {
        // The body is only context (usually a Status); a failure to read it loses nothing.
        let body = read_prefix(runtime, &mut body, idle, limits.max_error_body)
            .await
            .unwrap_or_default();
        return StreamEnd::HttpStatus { code, body };
    }
    if inbox.send(Msg::WatchOpened(stream)).await.is_err() {
        return StreamEnd::Clean;
    }
    // The answer's Content-Type says how the body is framed, whatever was asked for: a source
    // that asked for protobuf is answered in JSON for a custom resource.
    let mut splitter = WatchSplitter::for_content_type(&head_content_type, limits.max_watch_line);
    let mut lines: Vec<Bytes> = Vec::new();
    loop {
        match timeout(runtime, idle, body.next()).await {
            None => {
                return StreamEnd::TransportError(format!(
                    "watch read-idle timeout: no data for {}s",
                    idle.as_secs()
                ));
            }
            Some(None) => {
                return match splitter.finish() {
                    Ok(Some(line)) => {
                        let _ = inbox.line(stream, line).await;
                        StreamEnd::Clean
                    }
                    Ok(None) => StreamEnd::Clean,
                    Err(e) => StreamEnd::TransportError(e),
                };
            }
            Some(Some(Err(e))) => return StreamEnd::TransportError(e.0),
            Some(Some(Ok(chunk))) => {
                if let Err(e) = splitter.push(&chunk, &mut lines) {
                    return StreamEnd::TransportError(e);
                }
                for line in lines.drain(..) {
                    if inbox.line(stream, line).await.is_err() {
                        return StreamEnd::Clean;
                    }
                }
            }
        }
    }
}
