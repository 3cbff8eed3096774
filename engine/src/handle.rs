//! The cloneable handle: stop from anywhere, wait for the sync or the end, push in-process
//! source events.

use std::sync::{Arc, Mutex, MutexGuard};

use event_listener::Event;
use reconcile_core::{SourceEvent, Stats};

use super::cache::{Cache, Published};
use super::error::Error;
use super::metrics::{ControllerMetrics, MetricsCell};

/// One message into the driver task.
#[derive(Debug)]
pub(crate) enum Msg<O> {
    /// A LIST answered or failed.
    List(reconcile_core::RequestId, Result<Listed<O>, String>),
    /// A WATCH answered 200.
    WatchOpened(reconcile_core::StreamId),
    /// One raw line of a WATCH body.
    WatchLine(reconcile_core::StreamId, bytes::Bytes),
    /// A WATCH ended.
    WatchEnd(reconcile_core::StreamId, reconcile_core::StreamEnd),
    /// A reconcile finished, with the writes it made.
    Reconciled(
        reconcile_core::Ticket,
        reconcile_core::Outcome,
        Vec<super::writes::Written>,
    ),
    /// A running reconcile set its own deadline ([`Reconcile::set_timeout`](crate::Reconcile::set_timeout)).
    ReconcileTimeout(reconcile_core::Ticket, Option<std::time::Duration>),
    /// An in-process source event pushed through a [`Handle`].
    Source(SourceEvent<O>),
    /// The in-process source ended, with an error or without.
    SourceEnd(Option<String>),
    /// The in-process stream's events so far reflect this resourceVersion.
    SourceCursor(String),
    /// A reconcile-all trigger.
    ReconcileAll,
    /// A one-key trigger: the parent of this cached primary object.
    ReconcileOn(reconcile_core::ObjectKey),
    /// A Lease request answered or failed.
    Lease(reconcile_core::RequestId, reconcile_core::LeaseResponse),
}

/// A LIST's answer, as the LIST task read it.
#[derive(Debug)]
pub(crate) enum Listed<O> {
    /// `200`: the body, decoded while it streamed in. The raw body is kept only for a
    /// recorder.
    Decoded {
        list: Result<reconcile_core::list::ObjectList<O>, reconcile_core::list::ListBodyError>,
        body: Option<bytes::Bytes>,
    },
    /// Any other status, with its body (usually a `Status`).
    Status { status: u16, body: bytes::Bytes },
}

#[derive(Debug, Default)]
struct State {
    synced: bool,
    finished: Option<Result<(), Error>>,
    stats: Stats,
    cursor: Option<String>,
    leadership: Option<reconcile_core::Leadership>,
    sharding: Option<reconcile_core::Sharding>,
}

/// State shared by the driver task and every handle.
#[derive(Debug)]
pub(crate) struct Shared<O> {
    state: Mutex<State>,
    changed: Event,
    /// Capacity 1: a stop already pending makes a second one a no-op.
    stop: async_channel::Sender<()>,
    /// Replaced when `Controller::limits` changes the inbox's capacity before the start.
    inbox: Mutex<async_channel::Sender<Msg<O>>>,
    /// The core's metrics after each turn, and the controller's name.
    pub(crate) metrics: Arc<MetricsCell>,
}

impl<O> Shared<O> {
    pub(crate) fn new(
        stop: async_channel::Sender<()>,
        inbox: async_channel::Sender<Msg<O>>,
    ) -> Self {
        Shared {
            state: Mutex::new(State::default()),
            changed: Event::new(),
            stop,
            inbox: Mutex::new(inbox),
            metrics: Arc::new(MetricsCell::new("controller")),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // The lock is only held for a field update, so a poisoned one still has a valid state.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn set_synced(&self) {
        self.state().synced = true;
        self.changed.notify(usize::MAX);
    }

    /// Publishes the core's counters and cursor after a turn (no wakeup: nobody waits on
    /// them, they are read on demand).
    pub(crate) fn publish(&self, stats: Stats, cursor: Option<&str>) {
        let mut state = self.state();
        state.stats = stats;
        if state.cursor.as_deref() != cursor {
            state.cursor = cursor.map(str::to_owned);
        }
    }

    /// Publishes the election as the core sees it after a turn.
    pub(crate) fn publish_leadership(&self, leadership: Option<reconcile_core::Leadership>) {
        let mut state = self.state();
        if state.leadership != leadership {
            state.leadership = leadership;
        }
    }

    /// Publishes the shards as the core sees them after a turn.
    pub(crate) fn publish_sharding(&self, sharding: Option<reconcile_core::Sharding>) {
        let mut state = self.state();
        if state.sharding != sharding {
            state.sharding = sharding;
        }
    }

    pub(crate) fn finish(&self, result: Result<(), Error>) {
        {
            let mut state = self.state();
            if state.finished.is_none() {
                state.finished = Some(result);
            }
        }
        self.changed.notify(usize::MAX);
    }

    pub(crate) fn inbox(&self) -> async_channel::Sender<Msg<O>> {
        // Held only to clone or swap the sender: a poisoned lock still holds a valid one.
        self.inbox
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Puts `inbox` in place of the current sender (before the driver starts).
    pub(crate) fn replace_inbox(&self, inbox: async_channel::Sender<Msg<O>>) {
        *self
            .inbox
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = inbox;
    }

    /// Waits until `ready` says the state is final enough to answer.
    async fn wait_for<T>(&self, ready: impl Fn(&State) -> Option<T>) -> T {
        loop {
            let listener = self.changed.listen();
            if let Some(answer) = ready(&self.state()) {
                return answer;
            }
            listener.await;
        }
    }
}

/// A cloneable handle on a running (or about to run) controller.
///
/// Every method is safe to call from inside a reconcile: [`stop`](Handle::stop) only
/// signals, and the reconcile that called it is cancelled with the others.
pub struct Handle<O, P> {
    shared: Arc<Shared<O>>,
    published: Arc<Published<O, P>>,
}

impl<O, P> Clone for Handle<O, P> {
    fn clone(&self) -> Self {
        Handle {
            shared: Arc::clone(&self.shared),
            published: Arc::clone(&self.published),
        }
    }
}

impl<O, P> std::fmt::Debug for Handle<O, P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.shared.state();
        f.debug_struct("Handle")
            .field("synced", &state.synced)
            .field("finished", &state.finished)
            .finish()
    }
}

impl<O, P> Handle<O, P> {
    pub(crate) fn new(shared: Arc<Shared<O>>, published: Arc<Published<O, P>>) -> Self {
        Handle { shared, published }
    }

    /// A reader of the controller's cache, usable from any task or thread (kube-runtime's
    /// `reflector::Store`): `get`, `state`, `members`, `wait_until_ready`.
    #[must_use]
    pub fn cache(&self) -> Cache<O, P> {
        Cache::new(Arc::clone(&self.published))
    }

    /// Asks the controller to stop: open requests are closed and running reconciles
    /// cancelled. Returns at once; await [`stopped`](Handle::stopped) to wait for the end.
    pub fn stop(&self) {
        // Full means a stop is already pending; closed means the driver already ended.
        let _ = self.shared.stop.try_send(());
    }

    /// Whether the first whole-world listing has reached the store.
    #[must_use]
    pub fn is_synced(&self) -> bool {
        self.shared.state().synced
    }

    /// The core's counters as of the driver's last turn.
    #[must_use]
    pub fn stats(&self) -> Stats {
        self.shared.state().stats
    }

    /// The core's metrics as of the driver's last turn, as plain data.
    #[must_use]
    pub fn metrics(&self) -> reconcile_core::Metrics {
        self.shared.metrics.get().1
    }

    /// The controller's metrics as a `prometheus-client` collector, to register in your own
    /// registry: `registry.register_collector(Box::new(handle.collector()))`. The series
    /// carry controller-runtime's names and labels; see [`crate::metrics`].
    #[must_use]
    pub fn collector(&self) -> ControllerMetrics {
        ControllerMetrics::new(Arc::clone(&self.shared.metrics))
    }

    /// The controller's name, as its metrics label it
    /// ([`Controller::name`](crate::Controller::name)).
    #[must_use]
    pub fn name(&self) -> Arc<str> {
        self.shared.metrics.name()
    }

    /// The reflector's cursor as of the driver's last turn (`None` before the first LIST
    /// or while relisting).
    #[must_use]
    pub fn cursor(&self) -> Option<String> {
        self.shared.state().cursor.clone()
    }

    /// The election as of the driver's last turn: whether this candidate leads, the holder
    /// last seen on the Lease, its transitions, the terms begun here. `None` without an
    /// election.
    #[must_use]
    pub fn leadership(&self) -> Option<reconcile_core::Leadership> {
        self.shared.state().leadership.clone()
    }

    /// The shards as this replica last saw them: held, being given up, replicas live, the
    /// target. `None` when not sharded.
    #[must_use]
    pub fn sharding(&self) -> Option<reconcile_core::Sharding> {
        self.shared.state().sharding.clone()
    }

    /// Whether reconciles may run: always without an election, while leading with one.
    #[must_use]
    pub fn is_leader(&self) -> bool {
        self.shared
            .state()
            .leadership
            .as_ref()
            .is_none_or(|l| l.leading)
    }

    /// Whether the controller has ended.
    #[must_use]
    pub fn is_stopped(&self) -> bool {
        self.shared.state().finished.is_some()
    }

    /// Waits for the first sync.
    ///
    /// # Errors
    /// [`Error::StoppedBeforeSync`], or the error the controller ended with, when it ended
    /// before syncing.
    pub async fn synced(&self) -> Result<(), Error> {
        self.shared
            .wait_for(|s| match (&s.finished, s.synced) {
                (_, true) => Some(Ok(())),
                (Some(Err(e)), false) => Some(Err(e.clone())),
                (Some(Ok(())), false) => Some(Err(Error::StoppedBeforeSync)),
                (None, false) => None,
            })
            .await
    }

    /// Waits until the controller has ended, and returns how it ended.
    ///
    /// # Errors
    /// The error the controller ended with.
    pub async fn stopped(&self) -> Result<(), Error> {
        self.shared.wait_for(|s| s.finished.clone()).await
    }

    /// Queues every parent with members for a reconcile, each once (kube-runtime's
    /// `reconcile_all_on`, one trigger).
    ///
    /// # Errors
    /// [`Error::NotRunning`] once the controller has ended.
    pub async fn reconcile_all(&self) -> Result<(), Error> {
        self.push(Msg::ReconcileAll).await
    }

    /// Queues the parent of the cached primary object `object` for a reconcile
    /// (kube-runtime's `reconcile_on`, one trigger; controller-runtime's channel source for
    /// one object). An object not in the primary cache queues nothing. With
    /// [`KeyMap::by_object`](reconcile_core::KeyMap::by_object) the object's key is its
    /// parent's.
    ///
    /// # Errors
    /// [`Error::NotRunning`] once the controller has ended.
    pub async fn reconcile_on(&self, object: reconcile_core::ObjectKey) -> Result<(), Error> {
        self.push(Msg::ReconcileOn(object)).await
    }

    /// Pushes an in-process insert or update.
    ///
    /// # Errors
    /// [`Error::NotRunning`] once the controller has ended.
    pub async fn upsert(&self, object: O) -> Result<(), Error> {
        self.push(Msg::Source(SourceEvent::Upsert(object))).await
    }

    /// Pushes an in-process delete (the object's last known state).
    ///
    /// # Errors
    /// [`Error::NotRunning`] once the controller has ended.
    pub async fn delete(&self, object: O) -> Result<(), Error> {
        self.push(Msg::Source(SourceEvent::Delete(object))).await
    }

    /// Pushes the whole in-process world; every stream must open with one.
    ///
    /// # Errors
    /// [`Error::NotRunning`] once the controller has ended.
    pub async fn replace(&self, objects: Vec<O>) -> Result<(), Error> {
        self.push(Msg::Source(SourceEvent::Replace(objects))).await
    }

    /// Pushes an in-process event whose objects may be shared with another cache
    /// ([`SourceEvent::UpsertShared`] and the like): the store keeps the pointers instead of
    /// a copy of each object. A controller with a transform should be pushed objects it
    /// holds alone (see [`SourceEvent`]).
    ///
    /// # Errors
    /// [`Error::NotRunning`] once the controller has ended.
    pub async fn source_event(&self, event: SourceEvent<O>) -> Result<(), Error> {
        self.push(Msg::Source(event)).await
    }

    /// Ends the in-process stream; the core reopens it after `source_retry_delay`, and the
    /// next push must then be a [`replace`](Handle::replace).
    ///
    /// # Errors
    /// [`Error::NotRunning`] once the controller has ended.
    pub async fn end_source(&self, error: Option<String>) -> Result<(), Error> {
        self.push(Msg::SourceEnd(error)).await
    }

    /// Says that the in-process events pushed so far reflect the collection they mirror up
    /// to `resource_version` (a shared cache's subscriber sends its cache's cursor this way).
    /// It becomes the source's cursor ([`Handle::cursor`]), which read your own writes waits
    /// on, as on a reflector's. Until a stream sends one, writes to an in-process source are
    /// not waited for; once one has, a reopened stream has no cursor until it sends one.
    /// One sent before the stream's first [`replace`](Handle::replace) is ignored.
    ///
    /// # Errors
    /// [`Error::NotRunning`] once the controller has ended.
    pub async fn source_cursor(&self, resource_version: impl Into<String>) -> Result<(), Error> {
        self.push(Msg::SourceCursor(resource_version.into())).await
    }

    async fn push(&self, msg: Msg<O>) -> Result<(), Error> {
        if self.is_stopped() {
            return Err(Error::NotRunning);
        }
        self.shared
            .inbox()
            .send(msg)
            .await
            .map_err(|_| Error::NotRunning)
    }
}
