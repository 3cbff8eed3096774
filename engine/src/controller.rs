//! The builder users see: source, `key_map`, concurrency, resync, retry delays; then
//! [`Controller::run`] or [`Controller::start`].

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures_lite::FutureExt;
use reconcile_core::{
    Config, ElectionConfig, KeyMap, Object, ObjectKey, Outcome, Predicate, ReconcileLoop,
};

use super::cache::{Cache, CacheSnapshot, Published};
use super::driver::{Driver, InboxBytes, Limits, ReconcileFn, Remote, Shutdown};
use super::error::Error;
use super::handle::{Handle, Shared};
use super::reconcile::{Action, ErrorPolicy, Reconcile};
use super::recorder::Recorder;
use super::runtime::{BoxFuture, Runtime, ShutdownSignal, Task};
use super::source::Source;
use super::transport::Transport;

/// The most reconcile-future boxes kept for reuse, whatever the concurrency: enough for the
/// usual handful of parallel reconciles without keeping kilobytes per slot of a huge one.
const MAX_KEPT_FUTURE_SLOTS: usize = 64;

/// The bounds every parent key meets: ordered and hashed for the queue and the cache,
/// printable for logs and traces.
pub trait ParentKey:
    Ord + std::hash::Hash + Clone + fmt::Display + fmt::Debug + Send + Sync + 'static
{
}

impl<P> ParentKey for P where
    P: Ord + std::hash::Hash + Clone + fmt::Display + fmt::Debug + Send + Sync + 'static
{
}

/// A controller on runtime `R`: a [`ReconcileLoop`] plus the tasks that do its I/O.
#[doc(alias = "Reconciler")]
pub struct Controller<O, P, R: Runtime, T> {
    runtime: R,
    remote: Option<Remote<T>>,
    /// The secondary sources' collections, in the order added (`S1` first).
    secondaries: Vec<Remote<T>>,
    config: Config<O, P>,
    limits: Limits,
    shared: Arc<Shared<O>>,
    published: Arc<Published<O, P>>,
    inbox: async_channel::Receiver<super::handle::Msg<O>>,
    stop: async_channel::Receiver<()>,
    recorder: Option<Box<dyn Recorder<O, P>>>,
    shutdown_on: Vec<BoxFuture<()>>,
    /// Reconcile-all triggers, read on tasks of their own while the controller runs.
    triggers: Vec<BoxFuture<()>>,
    /// Where the election's Lease requests go (the primary's transport unless given).
    lease: Option<T>,
    shutdown: Shutdown,
    /// Where each reconcile's result goes, for [`Controller::run_stream`].
    results: Option<super::results::ResultSink<P>>,
}

impl<O, P, R: Runtime, T> fmt::Debug for Controller<O, P, R, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Controller")
            .field("config", &self.config)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl<O, R, T> Controller<O, ObjectKey, R, T>
where
    O: Object + Send + Sync,
    R: Runtime + Default,
    T: Transport,
{
    /// kube-runtime's model: every object of `source` reconciled on its own, keyed by its
    /// [`ObjectKey`] ([`KeyMap::by_object`]). The reconcile of a deleted object still runs,
    /// with no object ([`Reconcile::object`] is `None`), so it can clean up.
    pub fn for_objects(source: Source<O, T>) -> Self {
        Self::new(source, KeyMap::by_object())
    }
}

impl<O, R, T> Controller<O, ObjectKey, R, T>
where
    O: Object + Send + Sync,
    R: Runtime,
    T: Transport,
{
    /// [`Controller::for_objects`] on `runtime`.
    pub fn for_objects_with(runtime: R, source: Source<O, T>) -> Self {
        Self::with_runtime(runtime, source, KeyMap::by_object())
    }
}

/// Owned children wake their owner's `namespace/name`: any parent key made from an
/// [`ObjectKey`] (`ObjectKey` itself, or its `String` form).
impl<O, P, R, T> Controller<O, P, R, T>
where
    O: Object + Send + Sync,
    P: ParentKey + From<ObjectKey>,
    R: Runtime,
    T: Transport,
{
    /// Adds the children of `source`, each waking its **controller** owner: the one
    /// `ownerReferences` entry with `controller: true`, when it is of the controller's own
    /// kind and API group. This is controller-runtime's `Owns` (`EnqueueRequestForOwner`
    /// with `OnlyControllerOwner`), and what a controller that creates its children with
    /// `controllerutil.SetControllerReference` (or kube's `controller_owner_ref`) wants: a
    /// child is managed by one controller, and only that one runs when it changes.
    ///
    /// kube-runtime's `Controller::owns` is [`Controller::owns_any_owner`] instead: it wakes
    /// every owner reference of the kind, controller or not. The two differ only for a child
    /// with several owners of the controller's kind (a ConfigMap shared by two parents, an
    /// owner reference added by hand without `controller: true`): `owns` wakes the one that
    /// controls it, or none; `owns_any_owner` wakes each.
    ///
    /// The children reach the reconcile through [`Reconcile::related`].
    #[must_use]
    pub fn owns<C>(self, source: Source<C, T>) -> Self
    where
        O: kube_core::Resource,
        O::DynamicType: Default,
        C: Object + Send + Sync,
    {
        let owner_type = owner_type::<O>();
        self.owns_kind(source, &owner_type)
    }

    /// Adds the children of `source`, each waking **every** owner of the controller's kind
    /// and API group among its `ownerReferences`, controller or not: kube-runtime's
    /// `Controller::owns` (its `trigger_owners`), and controller-runtime's
    /// `EnqueueRequestForOwner` without `OnlyControllerOwner`.
    ///
    /// Prefer [`Controller::owns`] (the controller owner only, controller-runtime's `Owns`)
    /// unless a child is deliberately shared: with several owners of the kind, a change to
    /// the child runs each of them here, and only its controller there. For a child with one
    /// owner of the kind that is also its controller, the two are the same.
    #[must_use]
    pub fn owns_any_owner<C>(mut self, source: Source<C, T>) -> Self
    where
        O: kube_core::Resource,
        O::DynamicType: Default,
        C: Object + Send + Sync,
    {
        let owner_type = owner_type::<O>();
        self.config = self
            .config
            .owns_any_owner::<C>(source.params.clone(), &owner_type);
        self.add_secondary(source)
    }

    /// [`Controller::owns`] for owners of `owner_type`, `Kind` or `Kind.group`: for a
    /// primary whose kind its type does not name (a `DynamicObject`).
    #[must_use]
    pub fn owns_kind<C>(mut self, source: Source<C, T>, owner_type: &str) -> Self
    where
        C: Object + Send + Sync,
    {
        self.config = self.config.owns::<C>(source.params.clone(), owner_type);
        self.add_secondary(source)
    }
}

impl<O, P, R, T> Controller<O, P, R, T>
where
    O: Object + Send + Sync,
    P: ParentKey,
    R: Runtime,
    T: Transport,
{
    /// A controller over `source`, grouping objects under the parent `key_map` returns
    /// (a ready-made map such as [`KeyMap::by_label`], or a closure), with the default
    /// settings (one reconcile at a time, resync 10 h, backoff 1 s to 60 s, retry delay 1 s).
    pub fn with_runtime(
        runtime: R,
        source: Source<O, T>,
        key_map: impl Into<KeyMap<O, P>>,
    ) -> Self {
        let limits = Limits::default();
        let (mut config, remote) = match source.remote {
            Some((transport, requests)) => (
                Config::kubernetes(source.params, key_map),
                Some(Remote {
                    transport: Some(transport),
                    requests,
                }),
            ),
            None => (Config::in_process(key_map), None),
        };
        if let Some(predicate) = source.predicate {
            config = config.predicate(predicate);
        }
        if let Some(transform) = source.transform {
            config = config.transform(transform);
        }
        let (stop_tx, stop) = async_channel::bounded(1);
        let (inbox_tx, inbox) = async_channel::bounded(limits.inbox);
        let shared = Shared::new(stop_tx, inbox_tx);
        // controller-runtime names a controller after its kind; the collection's last path
        // segment (`pods`, `configmaps`) is as close as an untyped source gets.
        let name = remote
            .as_ref()
            .and_then(|r| r.requests.collection_name())
            .unwrap_or("in-process");
        shared.metrics.set_name(name);
        let published = Published::new();
        if let Some(remote) = &remote {
            let resource =
                super::recorder::SourceResource::of_url(remote.requests.url_path(), None, false);
            if let (Some(group), Some(plural)) = (resource.group, resource.plural) {
                published.set_resource(group, plural);
            }
        }
        Controller {
            runtime,
            remote,
            secondaries: Vec::new(),
            config,
            limits,
            shared: Arc::new(shared),
            published: Arc::new(published),
            inbox,
            stop,
            recorder: None,
            shutdown_on: Vec::new(),
            triggers: Vec::new(),
            results: None,
            lease: None,
            shutdown: Shutdown::default(),
        }
    }

    /// A controller over `source` on the runtime's default value (the ambient tokio
    /// runtime, smol's global executor); see [`Controller::with_runtime`] for the defaults.
    pub fn new(source: Source<O, T>, key_map: impl Into<KeyMap<O, P>>) -> Self
    where
        R: Default,
    {
        Self::with_runtime(R::default(), source, key_map)
    }

    /// Names the controller, as controller-runtime's `Named`: the `controller` label of its
    /// metrics and the `name` of its workqueue's. Defaults to the primary collection's
    /// resource name (`pods`), or `in-process`.
    #[must_use]
    pub fn name(self, name: &str) -> Self {
        self.shared.metrics.set_name(name);
        self
    }

    /// Filters the primary's updates (controller-runtime's predicates, kube-runtime's
    /// `predicate_filter`): an update `predicate` rejects still reaches the cache but wakes
    /// no reconcile, so a controller that writes its own status can use
    /// [`Predicate::GenerationChanged`] and not run again on its own write. New objects,
    /// deletions and parent moves always wake.
    #[must_use]
    pub fn predicate(mut self, predicate: Predicate<O>) -> Self {
        self.config = self.config.predicate(predicate);
        self
    }

    /// Priorities (controller-runtime's priority queue): parents woken by a listing (the
    /// first sync, a relist), a resync or a reconcile-all trigger wait behind live changes,
    /// requeues and retries, but get at least a quarter of the dispatches while they wait,
    /// so none starves. Off by default.
    #[must_use]
    pub fn priority(mut self, on: bool) -> Self {
        self.config = self.config.priority(on);
        self
    }

    /// What a stop request ([`Handle::stop`], a shutdown signal, [`Running::shutdown`]) does
    /// to the reconciles still running: by default they get 30 s to finish
    /// ([`Shutdown::FinishRunning`]); [`Shutdown::CancelRunning`] cancels them at once.
    #[must_use]
    pub fn shutdown(mut self, shutdown: Shutdown) -> Self {
        self.shutdown = shutdown;
        self
    }

    /// Reconciles only while this replica leads the election on the Lease
    /// `namespace/name` (client-go's `leaderelection`, on by default in controller-runtime),
    /// as [`default_identity`](crate::default_identity), with client-go's durations: lease
    /// 15 s, renew deadline 10 s, retry 2 s. The sources list and watch all along, so a
    /// replica that takes over has a warm cache. On stop a leader releases the Lease.
    #[must_use]
    pub fn leader_election(self, namespace: &str, name: &str) -> Self {
        let identity = crate::election::default_identity();
        self.leader_election_with(ElectionConfig::new(namespace, name, &identity))
    }

    /// [`Controller::leader_election`] with every setting given.
    #[must_use]
    pub fn leader_election_with(mut self, election: ElectionConfig) -> Self {
        self.config = self.config.leader_election(election);
        self
    }

    /// Splits the parent keys into `shards` shards, one `coordination.k8s.io/v1` Lease
    /// each, in `namespace`: this replica reconciles a key only while it holds the key's
    /// shard, and the replicas running this controller share the shards evenly
    /// ([`reconcile_core::shard`]). The identity is the hostname plus a random suffix;
    /// [`Controller::sharding_with`] sets every setting.
    #[must_use]
    pub fn sharding(self, namespace: &str, name: &str, shards: u32) -> Self
    where
        P: reconcile_core::ShardKey,
    {
        let identity = crate::election::default_identity();
        self.sharding_with(reconcile_core::ShardConfig::new(
            namespace, name, &identity, shards,
        ))
    }

    /// [`Controller::sharding`] with every setting given.
    #[must_use]
    pub fn sharding_with(mut self, sharding: reconcile_core::ShardConfig) -> Self
    where
        P: reconcile_core::ShardKey,
    {
        self.config = self.config.sharding(sharding);
        self
    }

    /// Sends the election's Lease requests through `transport` (by default, the primary
    /// source's): for an in-process primary, or a Lease in another cluster.
    #[must_use]
    pub fn lease_transport(mut self, transport: T) -> Self {
        self.lease = Some(transport);
        self
    }

    /// Stops gracefully on SIGINT or SIGTERM, as the runtime's [`ShutdownSignal`] sees them.
    #[must_use]
    pub fn shutdown_on_signal(self) -> Self
    where
        R: ShutdownSignal,
    {
        let signal = self.runtime.shutdown_signal();
        self.graceful_shutdown_on(signal)
    }

    /// Adds a secondary source: each `C` of `source` wakes the parents `map` names
    /// (kube-runtime's `watches`, controller-runtime's `Watches`). Its objects reach the
    /// reconcile through [`Reconcile::related`]. No reconcile runs before every source has
    /// synced once.
    ///
    /// An in-process `source` has nowhere to list from: every LIST of it fails, and the
    /// controller never syncs.
    #[must_use]
    pub fn watches<C>(
        mut self,
        source: Source<C, T>,
        map: impl Fn(&C) -> Vec<P> + Send + Sync + 'static,
    ) -> Self
    where
        C: Object + Send + Sync,
    {
        self.config = self.config.watches(source.params.clone(), map);
        self.add_secondary(source)
    }

    /// Takes the transport, the predicate and the transform of `source`, whose config was
    /// just added.
    fn add_secondary<C>(mut self, source: Source<C, T>) -> Self
    where
        C: Object + Send + Sync,
    {
        if let Some(predicate) = source.predicate {
            self.config = self.config.secondary_predicate(predicate);
        }
        if let Some(transform) = source.transform {
            self.config = self.config.secondary_transform(transform);
        }
        if let Some((transport, requests)) = source.remote {
            self.secondaries.push(Remote {
                transport: Some(transport),
                requests,
            });
        } else {
            // Keeps the numbering: S_n is secondaries[n - 1]. Its LISTs fail (no transport).
            tracing::warn!("a secondary source without a transport never syncs");
            self.secondaries.push(Remote::none());
        }
        self
    }

    /// Reconciles at most `n` keys at once (default 1); one key never runs twice at once.
    #[must_use]
    pub fn concurrency(mut self, n: usize) -> Self {
        self.config = self.config.concurrency(n);
        self
    }

    /// Cancels a reconcile still running `timeout` after its dispatch and counts it as
    /// failed, through the backoff (controller-runtime's `ReconciliationTimeout`; counted in
    /// `controller_runtime_reconcile_timeouts_total`). Default `None`: no deadline. A run may
    /// set its own with [`Reconcile::set_timeout`](crate::Reconcile::set_timeout).
    #[must_use]
    pub fn reconcile_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.config = self.config.reconcile_timeout(timeout);
        self
    }

    /// Read your own writes (KEP-5647): a key whose reconcile wrote (through
    /// [`ApiClient`](crate::ApiClient), or reported with
    /// [`Reconcile::wrote`](crate::Reconcile::wrote)) is not reconciled again until the
    /// source caching the written resource has observed the write, for at most `wait`
    /// (default 5 s); `None` turns it off.
    #[must_use]
    pub fn read_own_writes(mut self, wait: Option<Duration>) -> Self {
        self.config = self.config.read_own_writes(wait);
        self
    }

    /// The most keys that may wait for their own writes at once (default 10 000); past it
    /// new writes are not waited for.
    #[must_use]
    pub fn max_own_writes(mut self, keys: usize) -> Self {
        self.config = self.config.max_own_writes(keys);
        self
    }

    /// Re-queues every parent with members each `period`; `None` turns it off.
    #[must_use]
    pub fn resync(mut self, period: Option<Duration>) -> Self {
        self.config = self.config.resync(period);
        self
    }

    /// Debounces reconciles (kube-runtime's `controller::Config::debounce`): a key woken by
    /// a change, a listing, a resync, a trigger or its requeue runs only once its wakes have
    /// paused for `period`, each wake within the window pushing the run back; a key already
    /// queued, or running and due again, is not held. Zero (the default) runs at once.
    /// Changes read together already coalesce without it; a debounce also merges a burst
    /// spread over time (an object written several times in a row), at the cost of that
    /// much latency. Held keys are bounded by the number of distinct keys.
    #[must_use]
    pub fn debounce(mut self, period: Duration) -> Self {
        self.config = self.config.debounce(Some(period));
        self
    }

    /// Reconcile retry backoff: `base`, doubling up to `cap`.
    #[must_use]
    pub fn backoff(mut self, base: Duration, cap: Duration) -> Self {
        self.config = self.config.backoff(base, cap);
        self
    }

    /// Wait before every LIST / WATCH retry.
    #[must_use]
    pub fn retry_delay(mut self, delay: Duration) -> Self {
        self.config = self.config.retry_delay(delay);
        self
    }

    /// Wait before reopening an in-process source.
    #[must_use]
    pub fn source_retry_delay(mut self, delay: Duration) -> Self {
        self.config = self.config.source_retry_delay(delay);
        self
    }

    /// Bounds and I/O timeouts.
    #[must_use]
    pub fn limits(mut self, limits: Limits) -> Self {
        if limits.inbox != self.limits.inbox {
            // The inbox was made with the default capacity; remake it, keeping what waits.
            let (tx, rx) = async_channel::bounded(limits.inbox.max(1));
            while let Ok(msg) = self.inbox.try_recv() {
                if tx.try_send(msg).is_err() {
                    break;
                }
            }
            self.shared.replace_inbox(tx);
            self.inbox = rx;
        }
        self.limits = limits;
        // A streaming list may gather its initial events as long as one LIST may take.
        self.config = self.config.list_deadline(limits.list_deadline);
        self.config = self
            .config
            .max_listing_bytes(u64::try_from(limits.max_list_body).unwrap_or(u64::MAX));
        self
    }

    /// The core configuration this controller will run with.
    #[must_use]
    pub fn config(&self) -> &Config<O, P> {
        &self.config
    }

    /// Writes the run to `path` as a trace while it goes (see [`TraceRecorder`]: streamed,
    /// bounded, redacted by default, mode 0600), replayable in `reconcile-sim`. The header is this controller's configuration, set before this
    /// call, with `description`; its key map is written when it is a ready-made one
    /// ([`KeyMap::by_label`] and friends), so a replay rebuilds it.
    ///
    /// [`TraceRecorder`]: super::trace_recorder::TraceRecorder
    #[must_use]
    pub fn record_trace(self, path: impl Into<std::path::PathBuf>, description: &str) -> Self
    where
        O: Clone,
    {
        let description = format!(
            "{description} (recorded by reconcile-engine on {})",
            runtime_name::<R>()
        );
        let header = reconcile_trace::header_for(&description, &self.config);
        self.recorder(super::trace_recorder::TraceRecorder::new(path, header))
    }

    /// Records every input fed and command issued (see [`Recorder`]).
    #[must_use]
    pub fn recorder(mut self, recorder: impl Recorder<O, P>) -> Self {
        self.recorder = Some(Box::new(recorder));
        self
    }

    /// Reconciles every parent with members, each once, whenever `trigger` yields
    /// (kube-runtime's `reconcile_all_on`). The stream is read until it ends or the
    /// controller stops.
    #[must_use]
    pub fn reconcile_all_on(
        mut self,
        trigger: impl futures_core::Stream<Item = ()> + Send + 'static,
    ) -> Self {
        let handle = self.handle();
        self.triggers.push(Box::pin(async move {
            let mut trigger = std::pin::pin!(trigger);
            while futures_lite::StreamExt::next(&mut trigger).await.is_some() {
                if handle.reconcile_all().await.is_err() {
                    break;
                }
            }
        }));
        self
    }

    /// What this controller publishes to its caches and handles.
    pub(crate) fn published(&self) -> &Published<O, P> {
        &self.published
    }

    /// Runs `task` on a task of its own beside the controller, from its start to its end
    /// (the feed of a shared source).
    #[must_use]
    pub(crate) fn beside(mut self, task: BoxFuture<()>) -> Self {
        self.triggers.push(task);
        self
    }

    /// Reconciles the parent of the cached primary object each time `trigger` yields its key
    /// (kube-runtime's `reconcile_on`; see [`Handle::reconcile_on`]). The stream is read
    /// until it ends or the controller stops; an object not in the primary cache queues
    /// nothing.
    #[must_use]
    pub fn reconcile_on(
        mut self,
        trigger: impl futures_core::Stream<Item = reconcile_core::ObjectKey> + Send + 'static,
    ) -> Self {
        let handle = self.handle();
        self.triggers.push(Box::pin(async move {
            let mut trigger = std::pin::pin!(trigger);
            while let Some(object) = futures_lite::StreamExt::next(&mut trigger).await {
                if handle.reconcile_on(object).await.is_err() {
                    break;
                }
            }
        }));
        self
    }

    /// Stops gracefully once `signal` completes.
    #[must_use]
    pub fn graceful_shutdown_on(
        mut self,
        signal: impl Future<Output = ()> + Send + 'static,
    ) -> Self {
        self.shutdown_on.push(Box::pin(signal));
        self
    }

    /// A handle for stopping, waiting, reading the cache, and in-process pushes; valid
    /// before and after `run`.
    #[must_use]
    pub fn handle(&self) -> Handle<O, P> {
        Handle::new(Arc::clone(&self.shared), Arc::clone(&self.published))
    }

    /// A reader of this controller's cache, usable from any task or thread (kube-runtime's
    /// `reflector::Store`); the same as `handle().cache()`.
    #[must_use]
    pub fn cache(&self) -> Cache<O, P> {
        Cache::new(Arc::clone(&self.published))
    }

    /// Runs until stopped, calling `reconcile(request, ctx)` for each woken key (its members
    /// and the whole cache as of dispatch are in the [`Reconcile`]). When it fails,
    /// `error_policy(request, error, ctx)` chooses what follows, as kube-runtime's does;
    /// [`default_error_policy`](crate::default_error_policy) retries with the key's backoff.
    ///
    /// # Errors
    /// [`Error::Config`] when a setting is out of bounds.
    pub async fn run<F, Fut, E, EP, C>(
        self,
        reconcile: F,
        error_policy: EP,
        ctx: Arc<C>,
    ) -> Result<(), Error>
    where
        F: Fn(Reconcile<O, P>, Arc<C>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        E: fmt::Display + Send + 'static,
        EP: ErrorPolicy<O, P, E, C>,
        C: Send + Sync + 'static,
    {
        let (driver, signals) = match self.into_driver(reconcile, error_policy, ctx) {
            Ok(parts) => parts,
            Err((shared, error)) => {
                shared.finish(Err(error.clone()));
                return Err(error);
            }
        };
        let shared = Arc::clone(&driver.shared);
        // Every line the driver logs, and those of the tasks it spawns (LIST, WATCH, Lease,
        // each reconcile's span), carry the controller's name: two controllers in one
        // process would log identical lines otherwise.
        let span = tracing::info_span!("controller", controller = %shared.metrics.name());
        // A bug in the driver must still end every wait on a handle, not hang it.
        let result =
            std::panic::AssertUnwindSafe(tracing::Instrument::instrument(driver.run(), span))
                .catch_unwind()
                .await
                .unwrap_or_else(|_| {
                    shared.finish(Err(Error::Panicked));
                    Err(Error::Panicked)
                });
        for task in signals {
            task.abort();
        }
        result
    }

    /// Spawns the controller on the runtime and returns once the first listing reached the
    /// store; see [`Controller::run`]. Dropped before that (a timeout around it, say), it
    /// stops the controller it spawned, so nothing is left running without a handle.
    ///
    /// # Errors
    /// [`Error::Config`], or [`Error::StoppedBeforeSync`] when stopped before syncing.
    pub async fn start<F, Fut, E, EP, C>(
        self,
        reconcile: F,
        error_policy: EP,
        ctx: Arc<C>,
    ) -> Result<Running<O, P, R>, Error>
    where
        F: Fn(Reconcile<O, P>, Arc<C>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        E: fmt::Display + Send + 'static,
        EP: ErrorPolicy<O, P, E, C>,
        C: Send + Sync + 'static,
    {
        let handle = self.handle();
        let runtime = self.runtime.clone();
        let task = runtime.spawn(Box::pin(async move {
            let _ = self.run(reconcile, error_policy, ctx).await;
        }));
        let running = Running {
            handle: handle.clone(),
            task: Some(task),
        };
        let mut unsynced = StopOnDrop(Some(handle.clone()));
        handle.synced().await?;
        unsynced.0 = None;
        Ok(running)
    }

    /// Spawns the controller as [`Controller::start`] does, without waiting for the sync,
    /// and returns each reconcile's result as a stream (kube-runtime's
    /// `Controller::run(..).for_each(|res| ..)`): its key and its [`Outcome`], in the order
    /// the runs ended. The stream ends once the controller has ended; dropping it stops the
    /// controller.
    ///
    /// The stream holds at most [`RESULTS_CAPACITY`](crate::results::RESULTS_CAPACITY)
    /// unread results. The controller never waits for its reader: a result that finds the
    /// stream full is dropped and counted ([`Results::dropped`](crate::Results::dropped)).
    /// A run cancelled before it ended (past its timeout, by a stop, or with a shard or
    /// leadership lost) has no result.
    ///
    /// A configuration error ends the stream at once, with no result;
    /// `results.handle().stopped()` returns it.
    pub fn run_stream<F, Fut, E, EP, C>(
        mut self,
        reconcile: F,
        error_policy: EP,
        ctx: Arc<C>,
    ) -> super::results::Results<O, P, R>
    where
        F: Fn(Reconcile<O, P>, Arc<C>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        E: fmt::Display + Send + 'static,
        EP: ErrorPolicy<O, P, E, C>,
        C: Send + Sync + 'static,
    {
        let handle = self.handle();
        let (sink, unread) = super::results::channel::<P>();
        self.results = Some(sink);
        let runtime = self.runtime.clone();
        let task = runtime.spawn(Box::pin(async move {
            let _ = self.run(reconcile, error_policy, ctx).await;
        }));
        unread.attach(handle, task)
    }

    #[allow(clippy::type_complexity)]
    fn into_driver<F, Fut, E, EP, C>(
        mut self,
        reconcile: F,
        error_policy: EP,
        ctx: Arc<C>,
    ) -> Result<(Driver<O, P, R, T>, Vec<R::Task>), (Arc<Shared<O>>, Error)>
    where
        F: Fn(Reconcile<O, P>, Arc<C>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        E: fmt::Display + Send + 'static,
        EP: ErrorPolicy<O, P, E, C>,
        C: Send + Sync + 'static,
    {
        let origin = self.runtime.now();
        if let Some(recorder) = &mut self.recorder {
            let resources: Vec<super::recorder::SourceResource> = self
                .remote
                .iter()
                .chain(&self.secondaries)
                .map(|remote| {
                    super::recorder::SourceResource::of_url(
                        remote.requests.url_path(),
                        remote.requests.kind.as_deref(),
                        remote.requests.metadata_only,
                    )
                })
                .collect();
            // An in-process primary has no remote: it is source 0 all the same.
            let resources = if self.remote.is_none() {
                std::iter::once(super::recorder::SourceResource::default())
                    .chain(resources)
                    .collect()
            } else {
                resources
            };
            recorder.sources(&resources);
        }
        let lease = self.lease.or_else(|| {
            self.remote
                .as_ref()
                .and_then(|remote| remote.transport.clone())
        });
        let cache = CacheSnapshot::new(self.config.key_map.clone());
        let concurrency = self.config.concurrency;
        let mut core = match ReconcileLoop::new(self.config, reconcile_core::Instant::ZERO) {
            Ok(core) => core,
            Err(e) => return Err((self.shared, e.into())),
        };
        core.log_cache_changes(true);
        let error_policy = Arc::new(error_policy);
        let results = self.results.take();
        // One box per reconcile in flight, reused (see `future_slots`).
        let slots =
            super::future_slots::FutureSlots::<Fut>::new(concurrency.min(MAX_KEPT_FUTURE_SLOTS));
        let reconcile: ReconcileFn<O, P> = Arc::new(move |request: Reconcile<O, P>| {
            let results = results.clone();
            let parent = results.as_ref().map(|_| request.parent().clone());
            // Kept for the error policy, which sees what the reconcile saw.
            let kept = request.clone();
            let ctx = Arc::clone(&ctx);
            let error_policy = Arc::clone(&error_policy);
            // The user's function may panic before it returns a future; that must fail
            // this run only, not the driver task that called it.
            let called = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                reconcile(request, Arc::clone(&ctx))
            }));
            let outcome: BoxFuture<Outcome> = match called {
                Ok(future) => {
                    let future = slots.hold(future);
                    Box::pin(async move {
                        match future.await {
                            Ok(action) => action.after_success(),
                            Err(error) => {
                                let chosen =
                                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                                        error_policy(&kept, &error, ctx)
                                    }));
                                match chosen {
                                    Ok(action) => action.after_error(error.to_string()),
                                    Err(_) => Outcome::Error(format!(
                                        "{error} (and the error policy panicked)"
                                    )),
                                }
                            }
                        }
                    })
                }
                Err(_) => Box::pin(async { Outcome::Error("reconcile panicked".into()) }),
            };
            match (results, parent) {
                (Some(results), Some(parent)) => Box::pin(async move {
                    let outcome = outcome.await;
                    results.offer(super::results::ReconcileResult {
                        parent,
                        outcome: outcome.clone(),
                    });
                    outcome
                }),
                _ => outcome,
            }
        });
        let triggers: Vec<R::Task> = self
            .triggers
            .into_iter()
            .map(|trigger| self.runtime.spawn(trigger))
            .collect();
        let signals = self
            .shutdown_on
            .into_iter()
            .map(|signal| {
                let handle = Handle::new(Arc::clone(&self.shared), Arc::clone(&self.published));
                self.runtime.spawn(Box::pin(async move {
                    signal.await;
                    tracing::info!("shutdown signal received");
                    handle.stop();
                }))
            })
            // The trigger tasks end with the controller too.
            .chain(triggers)
            .collect();
        let driver = Driver {
            core,
            runtime: self.runtime,
            origin,
            remote: self.remote,
            secondaries: self.secondaries,
            reconcile,
            limits: self.limits,
            shared: self.shared,
            published: self.published,
            cache,
            inbox: self.inbox,
            inbox_bytes: Arc::new(InboxBytes::new(self.limits.inbox_bytes)),
            stop: self.stop,
            recorder: self.recorder,
            tasks: BTreeMap::new(),
            open_source: None,
            watched_since_list: false,
            lease,
            shutdown: self.shutdown,
            drain_until: None,
        };
        Ok((driver, signals))
    }
}

/// A controller spawned by [`Controller::start`], already synced.
///
/// Dropping it leaves the controller running; [`Running::shutdown`] stops it and waits.
pub struct Running<O, P, R: Runtime> {
    handle: Handle<O, P>,
    task: Option<R::Task>,
}

impl<O, P, R: Runtime> fmt::Debug for Running<O, P, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Running")
            .field("handle", &self.handle)
            .finish_non_exhaustive()
    }
}

impl<O, P: ParentKey, R: Runtime> Running<O, P, R> {
    /// The controller's handle.
    #[must_use]
    pub fn handle(&self) -> &Handle<O, P> {
        &self.handle
    }

    /// A reader of the controller's cache.
    #[must_use]
    pub fn cache(&self) -> Cache<O, P> {
        self.handle.cache()
    }

    /// Waits until the controller ends (after a stop from any handle, or a signal).
    ///
    /// # Errors
    /// The error the controller ended with.
    pub async fn join(mut self) -> Result<(), Error> {
        let result = self.handle.stopped().await;
        // The driver task has published its result and is about to return; detach it.
        drop(self.task.take());
        result
    }

    /// Stops the controller and waits until it has ended.
    ///
    /// # Errors
    /// The error the controller ended with.
    pub async fn shutdown(self) -> Result<(), Error> {
        self.handle.stop();
        self.join().await
    }

    /// Cancels the driver task outright, without the core's orderly stop. Prefer
    /// [`shutdown`](Running::shutdown).
    pub fn abort(mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// Stops the controller behind the handle when dropped: what a `start` future dropped before
/// the first sync leaves behind.
struct StopOnDrop<O, P>(Option<Handle<O, P>>);

impl<O, P> Drop for StopOnDrop<O, P> {
    fn drop(&mut self) {
        if let Some(handle) = self.0.take() {
            handle.stop();
        }
    }
}

/// The runtime's type name without its module path (`TokioRuntime`, `SmolRuntime`), for
/// trace headers.
fn runtime_name<R>() -> &'static str {
    let full = std::any::type_name::<R>();
    let outer = full.split('<').next().unwrap_or(full);
    outer.rsplit("::").next().unwrap_or(outer)
}

/// `K`'s owner type as `owns` matches it: `Kind.group`, where `Kind.` is the core group.
pub(crate) fn owner_type<K>() -> String
where
    K: kube_core::Resource,
    K::DynamicType: Default,
{
    let dt = K::DynamicType::default();
    format!("{}.{}", K::kind(&dt), K::group(&dt))
}

#[cfg(test)]
mod tests {
    use super::runtime_name;

    mod deep {
        #[derive(Debug)]
        pub struct SomeRuntime<T>(pub T);
    }

    #[test]
    fn the_trace_header_names_the_runtime_type_without_its_path() {
        assert_eq!(
            runtime_name::<deep::SomeRuntime<std::time::Instant>>(),
            "SomeRuntime"
        );
        assert_eq!(runtime_name::<u8>(), "u8");
    }
}
