//! Streams as sources (kube-runtime's `Controller::for_stream`): a controller whose objects
//! come from any `Stream` in the process, on every runtime. The stream feeds the
//! controller's in-process source ([`Source::in_process`]), so its events are ordinary
//! `SourceEvent`s to the core and reach a trace as such, and every object wakes the parent
//! its key map names.
//!
//! The feed is bounded by the controller's inbox: a stream that yields faster than the
//! controller reads waits for room (nothing is dropped or buffered beyond it).
//!
//! A stream can also be a secondary (kube-runtime's `owns_stream` and `watches_stream`):
//! each object it yields wakes the primary objects its owners, or a function of the
//! user's, name, through [`Handle::reconcile_on`]. The core records each wake as an
//! `Input::ReconcileOn`, so a trace replays them; the stream's objects are not cached.

use futures_core::Stream;
use futures_lite::StreamExt;
use reconcile_core::{KeyMap, Object, ObjectKey, ParentsBy, SourceEvent};

use super::controller::{Controller, ParentKey, owner_type};
use super::handle::Handle;
use super::runtime::Runtime;
use super::source::Source;
use super::transport::Transport;

impl<O, P, R, T> Controller<O, P, R, T>
where
    O: Object + Send + Sync,
    P: ParentKey,
    R: Runtime,
    T: Transport,
{
    /// A controller over a stream of objects (kube-runtime's `for_stream`): it syncs at
    /// once with nothing cached, and each object the stream yields is cached (inserted or
    /// updated) and wakes its parent. When the stream ends the source ends with it
    /// ([`Event::SourceEnded`](reconcile_core::Event::SourceEnded)); what is cached stays.
    pub fn for_stream_with(
        runtime: R,
        objects: impl Stream<Item = O> + Send + 'static,
        key_map: impl Into<KeyMap<O, P>>,
    ) -> Self {
        let events = futures_lite::stream::once(SourceEvent::Replace(Vec::new()))
            .chain(objects.map(SourceEvent::Upsert));
        Self::for_events_with(runtime, events, key_map)
    }

    /// [`Controller::for_stream_with`] on the runtime's default value.
    pub fn for_stream(
        objects: impl Stream<Item = O> + Send + 'static,
        key_map: impl Into<KeyMap<O, P>>,
    ) -> Self
    where
        R: Default,
    {
        Self::for_stream_with(R::default(), objects, key_map)
    }

    /// A controller over a stream of store writes: the first must be a
    /// [`SourceEvent::Replace`] (the whole world; the controller syncs on it), then any
    /// `Upsert`, `Delete` or `Replace`. A stream that opens otherwise is refused as an
    /// in-process source is ([`Event::SourceNotSynced`](reconcile_core::Event::SourceNotSynced)).
    pub fn for_events_with(
        runtime: R,
        events: impl Stream<Item = SourceEvent<O>> + Send + 'static,
        key_map: impl Into<KeyMap<O, P>>,
    ) -> Self {
        let controller = Self::with_runtime(runtime, Source::in_process(), key_map).name("stream");
        let handle = controller.handle();
        controller.beside(Box::pin(feed(events, handle)))
    }
}

impl<O, P, R, T> Controller<O, P, R, T>
where
    O: Object + Send + Sync,
    P: ParentKey,
    R: Runtime,
    T: Transport,
{
    /// Adds a stream of children (kube-runtime's `owns_stream`): each object `children`
    /// yields wakes its **controller** owner when that owner is of this controller's kind
    /// and API group, as [`Controller::owns`] does. kube-runtime's `owns_stream` wakes every
    /// owner of the kind: that is [`Controller::owns_stream_any_owner`].
    ///
    /// The owner is woken as [`Handle::reconcile_on`] wakes it: the owner's key, in the
    /// child's namespace, names a cached primary object, and that object's parent is
    /// queued; an owner not (yet) cached queues nothing. The stream's objects are not
    /// cached and do not reach [`Reconcile::related`](crate::Reconcile::related); each
    /// object wakes only the owners it names itself (a child that moved to another owner
    /// does not wake the one it left, as kube-runtime's does not). Works on any runtime;
    /// the stream is read at the pace of the controller's bounded inbox, until it ends or
    /// the controller stops.
    #[must_use]
    pub fn owns_stream<C>(self, children: impl Stream<Item = C> + Send + 'static) -> Self
    where
        O: kube_core::Resource,
        O::DynamicType: Default,
        C: Object + Send + 'static,
    {
        let rule = ParentsBy::ControllerOwner(owner_type::<O>());
        self.watches_stream(children, move |child: &C| rule.parents_of(child))
    }

    /// [`Controller::owns_stream`] waking **every** owner of the controller's kind and API
    /// group among a child's `ownerReferences`, controller or not: kube-runtime's
    /// `owns_stream` exactly, as [`Controller::owns_any_owner`] is kube-runtime's `owns`.
    #[must_use]
    pub fn owns_stream_any_owner<C>(self, children: impl Stream<Item = C> + Send + 'static) -> Self
    where
        O: kube_core::Resource,
        O::DynamicType: Default,
        C: Object + Send + 'static,
    {
        let rule = ParentsBy::AnyOwner(owner_type::<O>());
        self.watches_stream(children, move |child: &C| rule.parents_of(child))
    }

    /// [`Controller::owns_stream`] for controller owners of `owner_type`, `Kind` or
    /// `Kind.group`: for a primary whose kind its type does not name (a `DynamicObject`,
    /// a view).
    #[must_use]
    pub fn owns_stream_kind<C>(
        self,
        children: impl Stream<Item = C> + Send + 'static,
        owner_type: &str,
    ) -> Self
    where
        C: Object + Send + 'static,
    {
        let rule = ParentsBy::ControllerOwner(owner_type.to_owned());
        self.watches_stream(children, move |child: &C| rule.parents_of(child))
    }

    /// Adds a stream of related objects (kube-runtime's `watches_stream`): each object
    /// `objects` yields wakes the primary objects `map` names, each as
    /// [`Handle::reconcile_on`] wakes it (the parent each is cached under is queued; one
    /// not cached queues nothing).
    ///
    /// `map` names primary **objects**, as kube-runtime's mapper names `ObjectRef`s, not
    /// parents as [`Controller::watches`]'s does: with [`KeyMap::by_object`] the two are
    /// the same. The objects are not cached and do not reach
    /// [`Reconcile::related`](crate::Reconcile::related). Works on any runtime; the stream
    /// is read at the pace of the controller's bounded inbox, until it ends or the
    /// controller stops.
    #[must_use]
    pub fn watches_stream<C>(
        self,
        objects: impl Stream<Item = C> + Send + 'static,
        map: impl Fn(&C) -> Vec<ObjectKey> + Send + 'static,
    ) -> Self
    where
        C: Send + 'static,
    {
        let handle = self.handle();
        self.beside(Box::pin(wake_mapped(objects, map, handle)))
    }
}

/// Wakes, through `handle`, the primary objects `map` names for each object of `objects`,
/// until either ends. A repeat within one object's list wakes once.
async fn wake_mapped<C, O, P>(
    objects: impl Stream<Item = C> + Send + 'static,
    map: impl Fn(&C) -> Vec<ObjectKey> + Send + 'static,
    handle: Handle<O, P>,
) {
    let mut objects = std::pin::pin!(objects);
    while let Some(object) = objects.next().await {
        let mut wake = map(&object);
        drop(object);
        wake.sort_unstable();
        wake.dedup();
        for key in wake {
            if handle.reconcile_on(key).await.is_err() {
                // The controller has ended.
                return;
            }
        }
    }
}

/// Pushes each event of `events` through `handle` until either ends.
async fn feed<O, P>(
    events: impl Stream<Item = SourceEvent<O>> + Send + 'static,
    handle: Handle<O, P>,
) {
    let mut events = std::pin::pin!(events);
    while let Some(event) = events.next().await {
        if handle.source_event(event).await.is_err() {
            return;
        }
    }
    let _ = handle.end_source(Some("the stream ended".into())).await;
}
