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

/// What the loop's server-side shard selection says of a selected secondary's objects, by
/// their namespace (`shard::selection`).
pub(crate) struct Scope<'a> {
    /// Whether an object in this namespace is of a shard the source's cache covers: such
    /// objects are kept through a listing of the shards gained.
    pub(crate) covered: &'a dyn Fn(&str) -> bool,
    /// Whether a change at this resourceVersion to an object in this namespace is already
    /// cached from a newer listing of its shard.
    pub(crate) stale: &'a dyn Fn(&str, Option<&str>) -> bool,
}

/// A listing a secondary applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Applied {
    /// Every object it selects.
    Whole,
    /// Only the shards it gained, at this version, merged with the shards it covers.
    Gained(u64),
}

/// One secondary source, whatever its object type.
pub(crate) trait Secondary<O, P> {
    /// The LIST in flight, whose answer is this source's.
    fn current_list(&self) -> Option<RequestId>;
    /// The WATCH open, whose frames are this source's.
    fn current_stream(&self) -> Option<StreamId>;
    fn start(&mut self, now: Instant, ids: &mut dyn MintIds, out: &mut Outbox<O, P>);
    /// Handles a LIST answer; gives the listing it applied, if one completed.
    #[allow(clippy::too_many_arguments)]
    fn handle_list(
        &mut self,
        now: Instant,
        req: RequestId,
        response: ListResponse<O>,
        ids: &mut dyn MintIds,
        out: &mut Outbox<O, P>,
        wakes: &mut Vec<Arc<P>>,
        scope: &Scope<'_>,
    ) -> Option<Applied>;
    fn handle_watch_opened(&mut self, now: Instant, stream: StreamId, out: &mut Outbox<O, P>);
    fn handle_watch_line(
        &mut self,
        now: Instant,
        stream: StreamId,
        line: &[u8],
        out: &mut Outbox<O, P>,
        wakes: &mut Vec<Arc<P>>,
        scope: &Scope<'_>,
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
    /// Whether the primary's shard selector fits this source: its objects wake their
    /// owners, which live in their namespace, so an object's shard is its parent's.
    fn selectable(&self) -> bool;
    /// Moves to the shards `all` (a selector): lists `gained` alone and resumes its watch
    /// from its cursor, or relists everything with `all` when it cannot. With nothing
    /// gained, forgets at once the objects `scope` no longer covers.
    #[allow(clippy::too_many_arguments)]
    fn select(
        &mut self,
        now: Instant,
        all: String,
        gained: Option<String>,
        scope: &Scope<'_>,
        ids: &mut dyn MintIds,
        out: &mut Outbox<O, P>,
        wakes: &mut Vec<Arc<P>>,
    );
    /// No shard is held: stops listing and forgets every object, until the next `select`.
    fn deselect(&mut self, out: &mut Outbox<O, P>, wakes: &mut Vec<Arc<P>>);
    /// The apiserver ignores the selector: stops sending it (what it sends is everything).
    fn unselect(&mut self, now: Instant, ids: &mut dyn MintIds, out: &mut Outbox<O, P>);
    /// Whether a LIST asked with a shard selector came back unfiltered since last asked.
    fn take_selector_ignored(&mut self) -> bool;
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
    by_owner: bool,
) -> Box<dyn SecondarySpec<O, P>>
where
    O: 'static,
    P: Ord + Clone + Send + 'static,
    C: Object + Send + Sync,
{
    Box::new(Spec {
        params,
        map,
        by_owner,
        predicate: None,
        transform: None,
    })
}

struct Spec<C, P> {
    params: WatchParams,
    map: SecondaryMap<C, P>,
    /// The map wakes owners (`owns`): an object's parent is in its namespace.
    by_owner: bool,
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
            by_owner: self.by_owner,
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
            by_owner: self.by_owner,
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
    by_owner: bool,
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
    fn apply<O>(&mut self, change: Change<C>, wakes: &mut Vec<Arc<P>>, out: &mut Outbox<O, P>) {
        self.apply_keeping(change, &|_| false, wakes, out);
    }

    /// Applies `change`; a `Replace` keeps the cached objects `keep` names (by namespace)
    /// besides the ones it brings.
    fn apply_keeping<O>(
        &mut self,
        mut change: Change<C>,
        keep: &dyn Fn(&str) -> bool,
        wakes: &mut Vec<Arc<P>>,
        out: &mut Outbox<O, P>,
    ) {
        super::transform::apply_to(self.transform.as_ref(), &mut change);
        if let Change::Replace(objects) = &mut change {
            let kept = self
                .objects
                .values()
                .filter(|(o, _)| keep(o.object_namespace().unwrap_or("")))
                .map(|(o, _)| Arc::clone(o));
            let kept: Vec<Arc<C>> = kept.collect();
            // The listed version wins over a kept one of the same key (`incoming` below
            // keeps the later).
            let listed = std::mem::replace(objects, kept);
            objects.extend(listed);
        }
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
        scope: &Scope<'_>,
    ) -> Option<Applied> {
        let response = for_secondary(response);
        let change = self.reflector.handle_list(now, req, response, ids, out)?;
        let Some(version) = self.reflector.take_gained_listed() else {
            self.apply(change, wakes, out);
            return Some(Applied::Whole);
        };
        self.apply_keeping(change, scope.covered, wakes, out);
        Some(Applied::Gained(version))
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
        scope: &Scope<'_>,
    ) {
        let Some(change) = self.reflector.handle_watch_line(now, stream, line, out) else {
            return;
        };
        if let Change::Upsert(object) | Change::Delete(object) = &change {
            let namespace = object.object_namespace().unwrap_or("");
            if (scope.stale)(namespace, object.object_resource_version()) {
                // Replayed by a watch resumed after a move: the listing of its shard,
                // newer, is cached already.
                return;
            }
        }
        self.apply(change, wakes, out);
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

    fn selectable(&self) -> bool {
        self.by_owner
    }

    fn select(
        &mut self,
        now: Instant,
        all: String,
        gained: Option<String>,
        scope: &Scope<'_>,
        ids: &mut dyn MintIds,
        out: &mut Outbox<O, P>,
        wakes: &mut Vec<Arc<P>>,
    ) {
        let only_let_go = gained.is_none();
        if !self
            .reflector
            .move_shards(now, all.clone(), gained, ids, out)
        {
            self.reflector.reselect(now, Some(all), true, ids, out);
        } else if only_let_go && self.synced {
            self.apply_keeping(Change::Replace(Vec::new()), scope.covered, wakes, out);
        }
    }

    fn deselect(&mut self, out: &mut Outbox<O, P>, wakes: &mut Vec<Arc<P>>) {
        self.reflector.pause(out);
        let synced = self.synced;
        self.apply(Change::Replace(Vec::new()), wakes, out);
        // Emptied, not listed: a source that never listed has not synced.
        self.synced = synced;
    }

    fn unselect(&mut self, now: Instant, ids: &mut dyn MintIds, out: &mut Outbox<O, P>) {
        self.reflector.reselect(now, None, false, ids, out);
    }

    fn take_selector_ignored(&mut self) -> bool {
        self.reflector.take_selector_ignored()
    }
}
