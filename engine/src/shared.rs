//! Shared sources and the standalone reflector: one LIST+WATCH and one cache, feeding any
//! number of controllers in the process (kube-runtime's `reflect_shared` and
//! `Controller::for_shared_stream`; kube-rs #1080), each with its own queue, key map and
//! predicate.
//!
//! Any controller's [`Cache`] can be shared: [`Controller::for_shared`] subscribes to it.
//! A [`Reflector`] is a cache with no controller of its own to speak of (kube-runtime's
//! `reflector(store, watcher(..))`): a shared source with zero subscribers, which
//! controllers may subscribe to at any time.
//!
//! A subscriber's own source is an in-process one ([`Source::in_process`]), fed from the
//! shared cache: a `Replace` of the cache as published, then every later change. The
//! snapshot is taken and the subscriber registered under the lock every publish takes, so
//! a controller that joins after the sync sees one consistent snapshot followed by each
//! later change, none lost and none twice (the race kube-rs #1630 describes). The core of
//! each subscriber sees ordinary in-process source events, which its trace records.
//!
//! Each subscriber's buffer holds at most [`SharedSource::buffer`] changes; a queued change
//! is a pointer into the shared cache, never a copy of the object. A subscriber that falls
//! a whole buffer behind (its controller's inbox full for that long) is cut off and
//! resubscribes with a fresh snapshot: level-triggered, so nothing is lost, only coalesced.
//! [`Cache::share_stats`] counts it.
//!
//! Read your own writes works on a subscriber: each publish that moved the shared cache's
//! cursor sends it after the changes it covers, and the subscriber's in-process source
//! takes it as its own cursor ([`Handle::source_cursor`]); the subscriber knows the shared
//! collection's resource, so a write its reconcile reports to it waits on that cursor.
//!
//! A shared cache can also hold a controller's children: [`Controller::owns_shared`]
//! (kube-runtime's `owns_shared_stream`) wakes each child's owner from it, with no LIST or
//! WATCH of the children of its own; [`Controller::watches_shared`] (kube-runtime's
//! `watches_shared_stream`) wakes what a function of the user's names.

use std::collections::{BTreeMap, BTreeSet};
use std::convert::Infallible;
use std::fmt;
use std::sync::Arc;

use reconcile_core::{KeyMap, Object, ObjectKey, ParentsBy, SourceEvent};

use super::cache::{Cache, Feed};
use super::controller::{Controller, ParentKey, Running, owner_type};
use super::driver::Limits;
use super::error::Error;
use super::handle::Handle;
use super::reconcile::{Action, Reconcile, default_error_policy};
use super::runtime::Runtime;
use super::source::Source;
use super::transport::Transport;

/// The default subscriber buffer, in changes.
pub const DEFAULT_BUFFER: usize = 1024;

/// A cache to subscribe to, with the buffer each subscription gets: what
/// [`Controller::for_shared`] takes. Made by [`Reflector::shared`] or
/// [`SharedSource::of`] from any controller's cache.
pub struct SharedSource<O, Q> {
    cache: Cache<O, Q>,
    buffer: usize,
}

impl<O, Q> Clone for SharedSource<O, Q> {
    fn clone(&self) -> Self {
        SharedSource {
            cache: self.cache.clone(),
            buffer: self.buffer,
        }
    }
}

impl<O, Q> fmt::Debug for SharedSource<O, Q> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedSource")
            .field("buffer", &self.buffer)
            .finish_non_exhaustive()
    }
}

impl<O, Q> SharedSource<O, Q> {
    /// `cache` (a [`Reflector`]'s or any controller's) as a source, with a buffer of
    /// [`DEFAULT_BUFFER`] changes per subscriber.
    #[must_use]
    pub fn of(cache: Cache<O, Q>) -> Self {
        SharedSource {
            cache,
            buffer: DEFAULT_BUFFER,
        }
    }

    /// Each subscriber's buffer holds at most `changes` changes (at least 1); a subscriber
    /// further behind is cut off and resubscribes with a fresh snapshot.
    #[must_use]
    pub fn buffer(mut self, changes: usize) -> Self {
        self.buffer = changes.max(1);
        self
    }

    /// The shared cache.
    #[must_use]
    pub fn cache(&self) -> &Cache<O, Q> {
        &self.cache
    }
}

impl<O, P, R, T> Controller<O, P, R, T>
where
    O: Object + Clone + Send + Sync,
    P: ParentKey,
    R: Runtime,
    T: Transport,
{
    /// A controller over a shared source (kube-runtime's `for_shared_stream`): its objects
    /// come from `shared`'s cache, with no LIST or WATCH of its own, grouped by its own
    /// `key_map` into its own queue. It syncs once the shared cache has synced and its
    /// snapshot reached this controller's store; it may start at any time.
    ///
    /// Each controller's store holds its own index of the objects, but not its own copy of
    /// them: it keeps the shared cache's pointers (in-process `*Shared` events,
    /// [`SourceEvent::UpsertShared`]), so the watch, the decoding and the objects themselves
    /// are shared.
    pub fn for_shared_with<Q>(
        runtime: R,
        shared: SharedSource<O, Q>,
        key_map: impl Into<KeyMap<O, P>>,
    ) -> Self
    where
        Q: Ord + Send + Sync + 'static,
    {
        let controller = Self::with_runtime(runtime, Source::in_process(), key_map).name("shared");
        // Its writes to the shared collection wait on the shared cache's cursor.
        if let Some((group, plural)) = shared.cache.resource() {
            controller
                .published()
                .set_resource(group.clone(), plural.clone());
        }
        let handle = controller.handle();
        controller.beside(Box::pin(feed(shared, handle)))
    }

    /// [`Controller::for_shared_with`] on the runtime's default value.
    pub fn for_shared<Q>(shared: SharedSource<O, Q>, key_map: impl Into<KeyMap<O, P>>) -> Self
    where
        R: Default,
        Q: Ord + Send + Sync + 'static,
    {
        Self::for_shared_with(R::default(), shared, key_map)
    }
}

impl<O, P, R, T> Controller<O, P, R, T>
where
    O: Object + Send + Sync,
    P: ParentKey,
    R: Runtime,
    T: Transport,
{
    /// Adds the children cached by `shared` (a [`Reflector`]'s, or any controller's cache),
    /// each waking its **controller** owner when that owner is of this controller's kind and
    /// API group, as [`Controller::owns`] does, with no LIST or WATCH of its own: kube-runtime's
    /// `owns_shared_stream`, except that kube-runtime wakes every owner of the kind (that is
    /// [`Controller::owns_shared_any_owner`]).
    ///
    /// The owner is woken as [`Handle::reconcile_on`] wakes it: the owner's key names a
    /// cached primary object (in the child's namespace), and that object's parent is queued.
    /// A child added, changed or deleted wakes its owner, and so does a child whose owner
    /// changed (both owners). A fresh snapshot (the first, or after falling a buffer behind)
    /// wakes the owner of every child in it, and of every child known before and missing
    /// from it.
    ///
    /// Unlike [`Controller::owns`], the children are not in the reconcile's
    /// [`Reconcile::related`], and the controller does not wait for the shared cache's
    /// sync before its first reconcile: read them from the shared cache
    /// ([`SharedSource::cache`]), after its `wait_until_ready` when a reconcile needs the
    /// whole listing. An owner woken before the controller's own first listing is in its
    /// cache is not queued by the child; that listing queues it anyway.
    #[must_use]
    pub fn owns_shared<C, Q>(self, shared: SharedSource<C, Q>) -> Self
    where
        O: kube_core::Resource,
        O::DynamicType: Default,
        C: Object + Send + Sync,
        Q: Ord + Send + Sync + 'static,
    {
        let owner_type = owner_type::<O>();
        self.owns_shared_by(shared, ParentsBy::ControllerOwner(owner_type))
    }

    /// [`Controller::owns_shared`] waking **every** owner of the controller's kind and API
    /// group among a child's `ownerReferences`, controller or not: kube-runtime's
    /// `owns_shared_stream` (its `trigger_owners`), as [`Controller::owns_any_owner`] is
    /// kube-runtime's `owns`.
    #[must_use]
    pub fn owns_shared_any_owner<C, Q>(self, shared: SharedSource<C, Q>) -> Self
    where
        O: kube_core::Resource,
        O::DynamicType: Default,
        C: Object + Send + Sync,
        Q: Ord + Send + Sync + 'static,
    {
        let owner_type = owner_type::<O>();
        self.owns_shared_by(shared, ParentsBy::AnyOwner(owner_type))
    }

    /// [`Controller::owns_shared`] for owners of `owner_type`, `Kind` or `Kind.group`: for a
    /// primary whose kind its type does not name (a `DynamicObject`, a view).
    #[must_use]
    pub fn owns_shared_kind<C, Q>(self, shared: SharedSource<C, Q>, owner_type: &str) -> Self
    where
        C: Object + Send + Sync,
        Q: Ord + Send + Sync + 'static,
    {
        self.owns_shared_by(shared, ParentsBy::ControllerOwner(owner_type.to_owned()))
    }

    fn owns_shared_by<C, Q>(self, shared: SharedSource<C, Q>, rule: ParentsBy) -> Self
    where
        C: Object + Send + Sync,
        Q: Ord + Send + Sync + 'static,
    {
        self.watches_shared(shared, move |child: &C| rule.parents_of(child))
    }

    /// Adds the objects cached by `shared` (a [`Reflector`]'s, or any controller's cache),
    /// each waking the primary objects `map` names: kube-runtime's `watches_shared_stream`,
    /// with no LIST or WATCH of its own.
    ///
    /// Each primary object named is woken as [`Handle::reconcile_on`] wakes it (the parent
    /// it is cached under is queued; one not cached queues nothing). `map` names primary
    /// **objects**, as kube-runtime's mapper names `ObjectRef`s, not parents as
    /// [`Controller::watches`]'s does; with [`KeyMap::by_object`] the two are the same.
    ///
    /// An object added, changed or deleted wakes what `map` names for it, and a changed
    /// object also wakes what it named before (so a moved reference wakes both ends). A
    /// fresh snapshot (the first, or after falling a buffer behind) wakes what every object
    /// in it names, and what every object known before and missing from it named. As with
    /// [`Controller::owns_shared`], the objects are not in [`Reconcile::related`] (read them
    /// from [`SharedSource::cache`]), and the controller does not wait for the shared
    /// cache's sync.
    ///
    /// The last names of each object that named any are kept, one key list per object:
    /// bounded by the shared cache's size.
    #[must_use]
    pub fn watches_shared<C, Q>(
        self,
        shared: SharedSource<C, Q>,
        map: impl Fn(&C) -> Vec<ObjectKey> + Send + Sync + 'static,
    ) -> Self
    where
        C: Object + Send + Sync,
        Q: Ord + Send + Sync + 'static,
    {
        let handle = self.handle();
        self.beside(Box::pin(wake_mapped(shared, map, handle)))
    }
}

/// Wakes, through `handle`, the primary objects `map` names for each object `shared`
/// publishes, until either ends; resubscribes with a fresh snapshot when cut off for
/// lagging.
async fn wake_mapped<C, Q, O, P>(
    shared: SharedSource<C, Q>,
    map: impl Fn(&C) -> Vec<ObjectKey>,
    handle: Handle<O, P>,
) where
    C: Object + Send + Sync,
    Q: Ord,
{
    // What each object naming any named last, so that an object missing from a fresh
    // snapshot (deleted while this subscriber lagged) still wakes them, and an object
    // whose names changed wakes the ones it left.
    let mut known: BTreeMap<ObjectKey, Vec<ObjectKey>> = BTreeMap::new();
    loop {
        if shared.cache.wait_until_ready().await.is_err() {
            return;
        }
        let Some(changes) = shared.cache.subscribe(shared.buffer) else {
            return;
        };
        while let Ok(change) = changes.recv().await {
            let mut wake = BTreeSet::new();
            match change {
                Feed::Replace(all) => {
                    let mut now = BTreeMap::new();
                    for child in all.iter() {
                        let owners = names(&map, &**child);
                        if let Some(key) = child_key(&**child).filter(|_| !owners.is_empty()) {
                            wake.extend(owners.iter().cloned());
                            now.insert(key, owners);
                        }
                    }
                    for (key, owners) in std::mem::replace(&mut known, now) {
                        if !known.contains_key(&key) {
                            wake.extend(owners);
                        }
                    }
                }
                Feed::Upsert(child) => {
                    let owners = names(&map, &*child);
                    wake.extend(owners.iter().cloned());
                    if let Some(key) = child_key(&*child) {
                        let before = if owners.is_empty() {
                            known.remove(&key)
                        } else {
                            known.insert(key, owners)
                        };
                        wake.extend(before.unwrap_or_default());
                    }
                }
                Feed::Cursor(_) => {}
                Feed::Delete(child) => {
                    wake.extend(map(&*child));
                    if let Some(key) = child_key(&*child) {
                        wake.extend(known.remove(&key).unwrap_or_default());
                    }
                }
            }
            for owner in wake {
                if handle.reconcile_on(owner).await.is_err() {
                    // This controller has ended.
                    return;
                }
            }
        }
        if shared.cache.has_ended() {
            return;
        }
        tracing::info!("shared secondary: resubscribing after falling behind");
    }
}

/// What `map` names for `object`, sorted and without repeats.
fn names<C>(map: &impl Fn(&C) -> Vec<ObjectKey>, object: &C) -> Vec<ObjectKey> {
    let mut names = map(object);
    names.sort_unstable();
    names.dedup();
    names
}

/// A cached object's key; `None` for one with no name, which no cache holds.
fn child_key<C: Object>(child: &C) -> Option<ObjectKey> {
    Some(ObjectKey::new(
        child.object_namespace(),
        child.object_name()?,
    ))
}

/// Feeds `handle`'s in-process source from `shared` until either ends: subscribes once the
/// shared cache is ready, and again with a fresh snapshot whenever cut off for lagging.
async fn feed<O, Q, P>(shared: SharedSource<O, Q>, handle: Handle<O, P>)
where
    O: Object + Clone + Send + Sync,
    Q: Ord,
{
    loop {
        if shared.cache.wait_until_ready().await.is_err() {
            let _ = handle
                .end_source(Some("the shared source ended before its sync".into()))
                .await;
            return;
        }
        let Some(changes) = shared.cache.subscribe(shared.buffer) else {
            let _ = handle
                .end_source(Some("the shared source has ended".into()))
                .await;
            return;
        };
        while let Ok(change) = changes.recv().await {
            // The cache's own pointers: the subscriber's store shares each object with it.
            let event = match change {
                Feed::Replace(all) => SourceEvent::ReplaceShared(all.to_vec()),
                Feed::Upsert(o) => SourceEvent::UpsertShared(o),
                Feed::Delete(o) => SourceEvent::DeleteShared(o),
                Feed::Cursor(rv) => {
                    if handle.source_cursor(&*rv).await.is_err() {
                        return;
                    }
                    continue;
                }
            };
            let pushed = handle.source_event(event).await;
            if pushed.is_err() {
                // This controller has ended.
                return;
            }
        }
        if shared.cache.has_ended() {
            let _ = handle
                .end_source(Some("the shared source has ended".into()))
                .await;
            return;
        }
        tracing::info!("shared source: resubscribing after falling behind");
    }
}

/// The parent key of a [`Reflector`]: every object of it is under the one `Whole`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Whole;

impl fmt::Display for Whole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("whole")
    }
}

/// A standalone reflector (kube-runtime's `reflector(store, watcher(..))`): a source's
/// LIST+WATCH into a [`Cache`] with its reader and `wait_until_ready`, and no reconcile of
/// the user's. Controllers subscribe to it with [`Reflector::shared`] and
/// [`Controller::for_shared`], before or after it synced.
///
/// It runs on the controller machinery with every object under one parent ([`Whole`]) and
/// a reconcile that does nothing, at most one at a time: a burst of changes costs one empty
/// run, whatever the number of objects.
#[doc(alias = "informer")]
#[doc(alias = "Store")]
pub struct Reflector<O, R: Runtime, T> {
    controller: Controller<O, Whole, R, T>,
}

impl<O, R: Runtime, T> fmt::Debug for Reflector<O, R, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reflector").finish_non_exhaustive()
    }
}

impl<O, R, T> Reflector<O, R, T>
where
    O: Object + Send + Sync,
    R: Runtime,
    T: Transport,
{
    /// A reflector of `source` on `runtime`.
    pub fn with_runtime(runtime: R, source: Source<O, T>) -> Self {
        let controller = Controller::with_runtime(runtime, source, KeyMap::new(|_: &O| Ok(Whole)))
            .name("reflector")
            .resync(None);
        Reflector { controller }
    }

    /// A reflector of `source` on the runtime's default value.
    pub fn new(source: Source<O, T>) -> Self
    where
        R: Default,
    {
        Self::with_runtime(R::default(), source)
    }

    /// Names it, as [`Controller::name`] (default `reflector`).
    #[must_use]
    pub fn name(mut self, name: &str) -> Self {
        self.controller = self.controller.name(name);
        self
    }

    /// The reflector's limits ([`Controller::limits`]).
    #[must_use]
    pub fn limits(mut self, limits: Limits) -> Self {
        self.controller = self.controller.limits(limits);
        self
    }

    /// Wait before every LIST / WATCH retry ([`Controller::retry_delay`]).
    #[must_use]
    pub fn retry_delay(mut self, delay: std::time::Duration) -> Self {
        self.controller = self.controller.retry_delay(delay);
        self
    }

    /// The cache it fills (kube-runtime's `reflector::Store`): `get`, `state`,
    /// `wait_until_ready`.
    #[must_use]
    pub fn cache(&self) -> Cache<O, Whole> {
        self.controller.cache()
    }

    /// Its cache as a source for [`Controller::for_shared`].
    #[must_use]
    pub fn shared(&self) -> SharedSource<O, Whole> {
        SharedSource::of(self.cache())
    }

    /// A handle: stop it, wait for it, or push to an in-process source.
    #[must_use]
    pub fn handle(&self) -> Handle<O, Whole> {
        self.controller.handle()
    }

    /// Runs until stopped.
    ///
    /// # Errors
    /// As [`Controller::run`].
    pub async fn run(self) -> Result<(), Error> {
        self.controller
            .run(reflected, default_error_policy, Arc::new(()))
            .await
    }

    /// Starts it on a task of its own and returns once its cache has synced.
    ///
    /// # Errors
    /// As [`Controller::start`].
    pub async fn start(self) -> Result<Running<O, Whole, R>, Error> {
        self.controller
            .start(reflected, default_error_policy, Arc::new(()))
            .await
    }
}

/// A reflector's reconcile: the objects are in the cache already; nothing else to do.
async fn reflected<O>(_: Reconcile<O, Whole>, _: Arc<()>) -> Result<Action, Infallible> {
    Ok(Action::await_change())
}
