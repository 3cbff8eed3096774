//! Secondary sources: objects of other kinds that wake the primary's parents
//! (kube-runtime's `owns` and `watches`, controller-runtime's `Owns` and `Watches`).
//!
//! Each secondary owns its reflector (cursor, LIST / WATCH, relist, retry) and its store, so
//! a 410 on one never touches another's cursor. Its objects are of its own type; the loop
//! holds it behind [`Secondary`], so one loop holds sources of several kinds, and hands its
//! members to a reconcile type-erased ([`Related`]), for the driver to downcast.

use std::any::Any;
use std::collections::BTreeMap;
use std::sync::Arc;

use crate::controller::predicate::Predicate;
use crate::source::Change;
use crate::source::params::WatchParams;
use crate::source::reflector::{Counters, Reflector, Timing};
use crate::source::transform::Transform;
use crate::time::Instant;
use crate::vocabulary::{
    Deadline, Event, ListResponse, MintIds, Outbox, Output, Related, RequestId, SourceId,
    StreamEnd, StreamId,
};
use crate::wire::object::{Object, ObjectKey};

/// Maps a secondary object to the parents it wakes: none, one (an owner) or several.
pub type SecondaryMap<C, P> = Arc<dyn Fn(&C) -> Vec<P> + Send + Sync>;

/// One secondary source, whatever its object type.
pub(crate) trait Secondary<O, P> {
    /// The LIST in flight, whose answer is this source's.
    fn current_list(&self) -> Option<RequestId>;
    /// The WATCH open, whose frames are this source's.
    fn current_stream(&self) -> Option<StreamId>;
    fn start(&mut self, now: Instant, ids: &mut dyn MintIds, out: &mut Outbox<O, P>);
    #[allow(clippy::too_many_arguments)]
    fn handle_list(
        &mut self,
        now: Instant,
        req: RequestId,
        response: ListResponse<O>,
        ids: &mut dyn MintIds,
        out: &mut Outbox<O, P>,
        wakes: &mut Vec<Arc<P>>,
    );
    fn handle_watch_opened(&mut self, now: Instant, stream: StreamId, out: &mut Outbox<O, P>);
    fn handle_watch_line(
        &mut self,
        now: Instant,
        stream: StreamId,
        line: &[u8],
        out: &mut Outbox<O, P>,
        wakes: &mut Vec<Arc<P>>,
    );
    fn handle_watch_end(
        &mut self,
        now: Instant,
        stream: StreamId,
        end: StreamEnd,
        ids: &mut dyn MintIds,
        out: &mut Outbox<O, P>,
    );
    fn handle_timeout(&mut self, now: Instant, ids: &mut dyn MintIds, out: &mut Outbox<O, P>);
    fn deadline(&self) -> Option<Deadline>;
    fn stop(&mut self, out: &mut Outbox<O, P>);
    /// Whether a whole listing has been applied at least once.
    fn is_synced(&self) -> bool;
    fn related(&self, parent: &P) -> Related;
    /// Every object held, in key order.
    fn objects(&self) -> Related;
    fn cursor(&self) -> Option<&str>;
    fn counters(&self) -> Counters;
    fn len(&self) -> usize;
}

/// How a secondary source is built, kept in the [`Config`](crate::Config) so the config
/// stays cloneable: its parameters, its map to parents and its predicate, typed.
pub(crate) trait SecondarySpec<O, P>: Send + Sync {
    /// The source, numbered `id`, with the loop's reflector timings.
    fn build(&self, id: SourceId, timing: Timing) -> Box<dyn Secondary<O, P> + Send>;
    /// Sets the predicate, handed over as `Predicate<C>`; gives it back when `C` is not the
    /// source's object type.
    fn set_predicate(&mut self, predicate: Box<dyn Any>) -> Result<(), Box<dyn Any>>;
    /// Sets (or chains) the transform, handed over as `Transform<C>`; gives it back when `C`
    /// is not the source's object type.
    fn set_transform(&mut self, transform: Box<dyn Any>) -> Result<(), Box<dyn Any>>;
    /// The source's object type, for an error that names it.
    fn object_type(&self) -> &'static str;
    /// A copy, for `Config::clone`.
    fn clone_box(&self) -> Box<dyn SecondarySpec<O, P>>;
}

/// The spec of a secondary source of `C`s listed and watched with `params`, whose objects
/// wake the parents `map` names.
pub(crate) fn spec<O, P, C>(
    params: WatchParams,
    map: SecondaryMap<C, P>,
) -> Box<dyn SecondarySpec<O, P>>
where
    O: 'static,
    P: Ord + Clone + Send + 'static,
    C: Object + Send + Sync,
{
    Box::new(Spec {
        params,
        map,
        predicate: None,
        transform: None,
    })
}

struct Spec<C, P> {
    params: WatchParams,
    map: SecondaryMap<C, P>,
    predicate: Option<Predicate<C>>,
    transform: Option<Transform<C>>,
}

impl<O, P, C> SecondarySpec<O, P> for Spec<C, P>
where
    O: 'static,
    P: Ord + Clone + Send + 'static,
    C: Object + Send + Sync,
{
    fn build(&self, id: SourceId, timing: Timing) -> Box<dyn Secondary<O, P> + Send> {
        Box::new(Source::<C, P> {
            id,
            reflector: Reflector::new(id, self.params.clone(), timing),
            map: Arc::clone(&self.map),
            predicate: self
                .predicate
                .clone()
                .map(|p| (Arc::from(p.to_string()), p)),
            transform: self.transform.clone(),
            objects: BTreeMap::new(),
            index: BTreeMap::new(),
            synced: false,
        })
    }

    fn set_predicate(&mut self, predicate: Box<dyn Any>) -> Result<(), Box<dyn Any>> {
        self.predicate = Some(*predicate.downcast::<Predicate<C>>()?);
        Ok(())
    }

    fn set_transform(&mut self, transform: Box<dyn Any>) -> Result<(), Box<dyn Any>> {
        let transform = *transform.downcast::<Transform<C>>()?;
        self.transform = Some(match self.transform.take() {
            Some(first) => first.then(transform),
            None => transform,
        });
        Ok(())
    }

    fn object_type(&self) -> &'static str {
        std::any::type_name::<C>()
    }

    fn clone_box(&self) -> Box<dyn SecondarySpec<O, P>> {
        Box::new(Spec {
            params: self.params.clone(),
            map: Arc::clone(&self.map),
            predicate: self.predicate.clone(),
            transform: self.transform.clone(),
        })
    }
}

/// A secondary source of `C`s.
struct Source<C, P> {
    id: SourceId,
    reflector: Reflector<C>,
    map: SecondaryMap<C, P>,
    /// Which updates wake, and its name for `Event::Filtered`.
    predicate: Option<(Arc<str>, Predicate<C>)>,
    /// Applied to each object before it is cached.
    transform: Option<Transform<C>>,
    /// Key → the object and the parents it wakes (sorted, deduplicated).
    objects: BTreeMap<ObjectKey, (Arc<C>, Vec<P>)>,
    /// Parent → its related objects, in key order. Invariant: `k ∈ index[p]` exactly when
    /// `p ∈ objects[k].1`, and no member map is empty.
    index: BTreeMap<P, BTreeMap<ObjectKey, Arc<C>>>,
    synced: bool,
}

impl<C: Object + Send + Sync, P: Ord + Clone> Source<C, P> {
    fn apply<O>(&mut self, mut change: Change<C>, wakes: &mut Vec<Arc<P>>, out: &mut Outbox<O, P>) {
        super::transform::apply_to(self.transform.as_ref(), &mut change);
        match change {
            Change::Upsert(object) => self.upsert(object, wakes, out),
            Change::Delete(tombstone) => {
                if let Some(key) = tombstone.key() {
                    self.remove(&key, wakes);
                }
            }
            Change::Replace(objects) => {
                let incoming: BTreeMap<ObjectKey, Arc<C>> = objects
                    .into_iter()
                    .filter_map(|o| Some((o.key()?, o)))
                    .collect();
                let gone: Vec<ObjectKey> = self
                    .objects
                    .keys()
                    .filter(|k| !incoming.contains_key(*k))
                    .cloned()
                    .collect();
                for key in gone {
                    self.remove(&key, wakes);
                }
                for (_, object) in incoming {
                    self.upsert(object, wakes, out);
                }
                self.synced = true;
            }
        }
    }

    fn upsert<O>(&mut self, object: Arc<C>, wakes: &mut Vec<Arc<P>>, out: &mut Outbox<O, P>) {
        let Some(key) = object.key() else {
            return;
        };
        if let Some((cached, _)) = self.objects.get(&key)
            && let (Some(new), Some(old)) = (
                object.object_resource_version(),
                cached.object_resource_version(),
            )
            && new == old
        {
            // The version already held: nothing changed, nothing wakes.
            return;
        }
        let mut parents = (self.map)(&object);
        parents.sort_unstable();
        parents.dedup();
        if let Some((by, predicate)) = &self.predicate
            && let Some((cached, held_by)) = self.objects.get_mut(&key)
            && *held_by == parents
            && !predicate.wakes(cached, &object)
        {
            // Cached under the same parents, but they have nothing new to see by the
            // predicate.
            *cached = Arc::clone(&object);
            for parent in &parents {
                if let Some(slot) = self.index.get_mut(parent).and_then(|m| m.get_mut(&key)) {
                    *slot = Arc::clone(&object);
                }
            }
            out.push_back(Output::Event(Event::Filtered {
                source: self.id,
                key,
                by: Arc::clone(by),
            }));
            return;
        }
        self.remove(&key, wakes);
        for parent in &parents {
            self.index
                .entry(parent.clone())
                .or_default()
                .insert(key.clone(), Arc::clone(&object));
            wakes.push(Arc::new(parent.clone()));
        }
        self.objects.insert(key, (object, parents));
    }

    fn remove(&mut self, key: &ObjectKey, wakes: &mut Vec<Arc<P>>) {
        let Some((_, parents)) = self.objects.remove(key) else {
            return;
        };
        for parent in parents {
            if let Some(members) = self.index.get_mut(&parent) {
                members.remove(key);
                if members.is_empty() {
                    self.index.remove(&parent);
                }
            }
            wakes.push(Arc::new(parent));
        }
    }
}

/// A LIST answer meant for a secondary: the raw forms carry over, a body decoded as the
/// primary's type cannot.
fn for_secondary<O, C>(response: ListResponse<O>) -> ListResponse<C> {
    match response {
        ListResponse::Response { status, body } => ListResponse::Response { status, body },
        ListResponse::TransportError(e) => ListResponse::TransportError(e),
        ListResponse::Decoded(_) => ListResponse::TransportError(
            "a LIST of a secondary source was decoded as the primary's type".into(),
        ),
    }
}

impl<O, C, P> Secondary<O, P> for Source<C, P>
where
    C: Object + Send + Sync,
    P: Ord + Clone,
{
    fn current_list(&self) -> Option<RequestId> {
        self.reflector.current_list()
    }

    fn current_stream(&self) -> Option<StreamId> {
        self.reflector.current_stream()
    }

    fn start(&mut self, now: Instant, ids: &mut dyn MintIds, out: &mut Outbox<O, P>) {
        self.reflector.start(now, ids, out);
    }

    fn handle_list(
        &mut self,
        now: Instant,
        req: RequestId,
        response: ListResponse<O>,
        ids: &mut dyn MintIds,
        out: &mut Outbox<O, P>,
        wakes: &mut Vec<Arc<P>>,
    ) {
        let response = for_secondary(response);
        if let Some(change) = self.reflector.handle_list(now, req, response, ids, out) {
            self.apply(change, wakes, out);
        }
    }

    fn handle_watch_opened(&mut self, now: Instant, stream: StreamId, out: &mut Outbox<O, P>) {
        self.reflector.handle_watch_opened(now, stream, out);
    }

    fn handle_watch_line(
        &mut self,
        now: Instant,
        stream: StreamId,
        line: &[u8],
        out: &mut Outbox<O, P>,
        wakes: &mut Vec<Arc<P>>,
    ) {
        if let Some(change) = self.reflector.handle_watch_line(now, stream, line, out) {
            self.apply(change, wakes, out);
        }
    }

    fn handle_watch_end(
        &mut self,
        now: Instant,
        stream: StreamId,
        end: StreamEnd,
        ids: &mut dyn MintIds,
        out: &mut Outbox<O, P>,
    ) {
        self.reflector.handle_watch_end(now, stream, end, ids, out);
    }

    fn handle_timeout(&mut self, now: Instant, ids: &mut dyn MintIds, out: &mut Outbox<O, P>) {
        self.reflector.handle_timeout(now, ids, out);
    }

    fn deadline(&self) -> Option<Deadline> {
        self.reflector.deadline()
    }

    fn stop(&mut self, out: &mut Outbox<O, P>) {
        self.reflector.stop(out);
    }

    fn is_synced(&self) -> bool {
        self.synced
    }

    fn related(&self, parent: &P) -> Related {
        let objects = self
            .index
            .get(parent)
            .into_iter()
            .flat_map(BTreeMap::values)
            .map(|o| Arc::clone(o) as Arc<dyn Any + Send + Sync>)
            .collect();
        Related {
            source: self.id,
            objects,
        }
    }

    fn objects(&self) -> Related {
        Related {
            source: self.id,
            objects: self
                .objects
                .values()
                .map(|(o, _)| Arc::clone(o) as Arc<dyn Any + Send + Sync>)
                .collect(),
        }
    }

    fn cursor(&self) -> Option<&str> {
        self.reflector.cursor()
    }

    fn counters(&self) -> Counters {
        self.reflector.counters()
    }

    fn len(&self) -> usize {
        self.objects.len()
    }
}
