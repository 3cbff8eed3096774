//! The cache: every object the source delivered, indexed by the parent it belongs to.
//!
//! client-go's `cache.Store` plus `DeltaFIFO.Replace()`'s deletion synthesis, with
//! controller-runtime's `EnqueueRequestForOwner` folded in as `key_map`: the parent index is
//! the only index, so membership and the keys to wake come out of one write.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::hash::Hash;
use std::sync::Arc;

use crate::controller::key_map::{KeyMap, KeyMapError};
use crate::controller::members::{MemberSet, Members};
use crate::controller::predicate::Predicate;
use crate::hashing::FixedState;
use crate::source::Change;
#[cfg(test)]
use crate::vocabulary::SourceEvent;
use crate::wire::object::{Object, ObjectKey, write_key};

/// An object the store refused to hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Rejected<P> {
    /// `key_map` failed; if the object was stored, it was evicted from `evicted_from`.
    Unmapped {
        /// The object.
        key: ObjectKey,
        /// What `key_map` said.
        error: KeyMapError,
        /// The parent it left, which was woken.
        evicted_from: Option<P>,
    },
    /// The object has no `metadata.name`, so it has no key.
    Unnamed,
}

/// Objects by key, and objects by parent.
///
/// Bounded by the number of objects the source holds: every entry is one object the
/// apiserver (or in-process source) reported as existing and did not delete.
///
/// An update that keeps its parent (almost every MODIFIED) is two hash lookups and a scan
/// of one small node: in a large cache every B-tree level and every key compared is a cache
/// miss, so ordered walks are kept off that path. The hash maps are never iterated, so their
/// order cannot reach an output; `order` and the member maps give every ordered walk.
pub struct Store<O, P> {
    /// Key → parent. A parent is one allocation shared by its members' entries, its index
    /// entry and `order`: a million pods in 100k parents hold 100k parent keys, not a million.
    parents: HashMap<ObjectKey, Arc<P>, FixedState>,
    /// Parent → its members, in key order. Invariant: every member map is non-empty, and
    /// `k ∈ index[p]` exactly when `parents[k] == p`. A reconcile's member snapshot shares
    /// the set (see `MemberSet`).
    index: HashMap<Arc<P>, MemberSet<O>, FixedState>,
    /// The keys of `index`, in order.
    order: BTreeSet<Arc<P>>,
    /// Scratch for the joined key, so updates of known objects allocate no key.
    key_buf: String,
    /// The keys written since the driver last took them, when it asked for them; see
    /// [`Store::take_changes`].
    changes: Option<ChangeLog>,
    /// Which updates wake their parent; `None` wakes on every new version.
    predicate: Option<Predicate<O>>,
    /// Updates the predicate kept from waking, since the loop last took them.
    filtered: Vec<ObjectKey>,
}

/// The keys written since they were last taken: what a driver needs to keep a copy of the
/// cache in step, one key clone per write. Bounded by the writes between two takes, which a
/// driver does once per turn.
#[derive(Debug, Default)]
struct ChangeLog {
    /// A whole listing replaced the cache: every key may have changed.
    replaced: bool,
    keys: Vec<ObjectKey>,
}

impl ChangeLog {
    fn note(&mut self, key: &ObjectKey) {
        if !self.replaced {
            self.keys.push(key.clone());
        }
    }
}

/// One change to the cache, as [`ReconcileLoop::drain_cache_changes`] reports it.
///
/// [`ReconcileLoop::drain_cache_changes`]: crate::ReconcileLoop::drain_cache_changes
#[derive(Debug)]
pub enum CacheChange<'a, O, P> {
    /// Everything before is gone: a `Set` for every cached object follows.
    Cleared,
    /// `key` now holds `object`, under `parent`.
    Set {
        /// The key.
        key: &'a ObjectKey,
        /// The object now cached.
        object: &'a Arc<O>,
        /// The parent it is cached under.
        parent: &'a P,
    },
    /// `key` is no longer cached.
    Removed {
        /// The key.
        key: &'a ObjectKey,
    },
}

impl<O, P> Default for Store<O, P> {
    fn default() -> Self {
        Store {
            parents: HashMap::default(),
            index: HashMap::default(),
            order: BTreeSet::new(),
            key_buf: String::new(),
            changes: None,
            predicate: None,
            filtered: Vec::new(),
        }
    }
}

impl<O, P: fmt::Debug + Ord + Hash> fmt::Debug for Store<O, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(
                self.order
                    .iter()
                    .filter_map(|p| Some((p, self.index.get(p)?.keys()))),
            )
            .finish()
    }
}

impl<O: Object, P: Ord + Hash + Clone> Store<O, P> {
    /// Sets which updates wake their parent.
    pub(crate) fn set_predicate(&mut self, predicate: Option<Predicate<O>>) {
        self.predicate = predicate;
    }

    /// The keys whose updates the predicate kept from waking since the last call.
    pub(crate) fn take_filtered(&mut self) -> std::vec::Drain<'_, ObjectKey> {
        self.filtered.drain(..)
    }

    /// Number of cached objects.
    #[must_use]
    pub fn len(&self) -> usize {
        self.parents.len()
    }

    /// Whether nothing is cached.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.parents.is_empty()
    }

    /// The cached object under `key`.
    #[must_use]
    pub fn get(&self, key: &ObjectKey) -> Option<&Arc<O>> {
        self.index.get(self.parents.get(key)?)?.get(key)
    }

    /// The parent `key` is cached under.
    #[must_use]
    pub fn parent_of(&self, key: &ObjectKey) -> Option<&P> {
        self.parents.get(key).map(|parent| &**parent)
    }

    /// The parent `key` is cached under, as the store shares it.
    pub(crate) fn shared_parent_of(&self, key: &ObjectKey) -> Option<&Arc<P>> {
        self.parents.get(key)
    }

    /// The members of `parent`, in key order.
    pub fn members<'a>(&'a self, parent: &P) -> impl Iterator<Item = &'a Arc<O>> + 'a {
        self.index
            .get(parent)
            .into_iter()
            .flat_map(|members| members.iter().map(|(_, object)| object))
    }

    /// The members of `parent`, in key order, as they are now: O(1) in the parent's size (a
    /// large parent's snapshot shares the store's persistent tree).
    #[must_use]
    pub fn snapshot(&self, parent: &P) -> Members<O> {
        self.index
            .get(parent)
            .map(MemberSet::snapshot)
            .unwrap_or_default()
    }

    /// The parents that have at least one member, in order.
    pub fn parents(&self) -> impl ExactSizeIterator<Item = &P> {
        self.order.iter().map(|parent| &**parent)
    }

    /// The parents that have at least one member, in order, as the store shares them.
    pub(crate) fn shared_parents(&self) -> impl ExactSizeIterator<Item = &Arc<P>> {
        self.order.iter()
    }

    /// Every cached object with its parent, by parent, then by key.
    pub fn iter(&self) -> impl Iterator<Item = (&ObjectKey, &Arc<O>, &P)> {
        self.order.iter().flat_map(move |p| {
            self.index
                .get(p)
                .into_iter()
                .flat_map(move |members| members.iter().map(move |(k, o)| (k, o, &**p)))
        })
    }

    /// Starts (or stops) keeping the log [`Store::take_changes`] reads.
    pub(crate) fn log_changes(&mut self, on: bool) {
        self.changes = on.then(ChangeLog::default);
    }

    /// Reports every change since the last call (nothing when the log is off), in the order
    /// written; a key written twice is reported twice, each time with its state now.
    pub(crate) fn take_changes(&mut self, mut each: impl FnMut(CacheChange<'_, O, P>)) {
        let Some(log) = self.changes.as_mut() else {
            return;
        };
        let replaced = std::mem::take(&mut log.replaced);
        let mut keys = std::mem::take(&mut log.keys);
        if replaced {
            each(CacheChange::Cleared);
            for (key, object, parent) in self.iter() {
                each(CacheChange::Set {
                    key,
                    object,
                    parent,
                });
            }
        } else {
            for key in &keys {
                match self.parents.get_key_value(key) {
                    Some((key, parent)) => {
                        if let Some(object) = self.index.get(parent).and_then(|m| m.get(key)) {
                            each(CacheChange::Set {
                                key,
                                object,
                                parent: &**parent,
                            });
                        }
                    }
                    None => each(CacheChange::Removed { key }),
                }
            }
        }
        keys.clear();
        if let Some(log) = self.changes.as_mut() {
            // Keep the buffer's capacity for the next turn.
            log.keys = keys;
        }
    }

    /// Applies one source event. Parents whose membership or members changed are pushed to
    /// `wakes` (possibly more than once); objects the store refuses go to `rejected`.
    pub(crate) fn apply(
        &mut self,
        change: Change<O>,
        key_map: &KeyMap<O, P>,
        wakes: &mut Vec<Arc<P>>,
        rejected: &mut Vec<Rejected<P>>,
    ) {
        match change {
            Change::Upsert(object) => {
                let mut key = std::mem::take(&mut self.key_buf);
                if object_key_into(&*object, &mut key) {
                    self.upsert(&key, object, key_map, wakes, rejected);
                } else {
                    rejected.push(Rejected::Unnamed);
                }
                self.key_buf = key;
            }
            Change::Delete(tombstone) => {
                // The stored parent wins over the tombstone's: labels on the final state may
                // have changed, but the parent that must notice is the one it was under.
                let mut key = std::mem::take(&mut self.key_buf);
                if object_key_into(&*tombstone, &mut key)
                    && let Some(parent) = self.remove(&key)
                {
                    wakes.push(parent);
                }
                self.key_buf = key;
            }
            Change::Replace(objects) => self.replace(objects, key_map, wakes, rejected),
        }
        self.debug_check();
    }

    fn upsert(
        &mut self,
        key: &str,
        object: Arc<O>,
        key_map: &KeyMap<O, P>,
        wakes: &mut Vec<Arc<P>>,
        rejected: &mut Vec<Rejected<P>>,
    ) {
        let parent = match key_map.parent_of(&object) {
            Ok(parent) => parent,
            Err(error) => {
                let evicted_from = self.remove(key);
                if let Some(old) = &evicted_from {
                    wakes.push(Arc::clone(old));
                }
                rejected.push(Rejected::Unmapped {
                    key: ObjectKey::from_joined(key),
                    error,
                    evicted_from: evicted_from.map(Arc::unwrap_or_clone),
                });
                return;
            }
        };
        let woken = match self.parents.get_key_value(key) {
            Some((known, old)) if **old == parent => {
                if let Some(slot) = self
                    .index
                    .get_mut(&parent)
                    .and_then(|members| members.slot(known))
                {
                    // The version the cache already holds: nothing changed, so nothing wakes
                    // (Go's informer delivers it as a resync, which handlers without a resync
                    // period never see). A relist then wakes only what it changed.
                    if let (Some(new), Some(cached)) = (
                        object.object_resource_version(),
                        slot.object_resource_version(),
                    ) && new == cached
                    {
                        return;
                    }
                    let wakes_parent = self
                        .predicate
                        .as_ref()
                        .is_none_or(|p| p.wakes(slot, &object));
                    *slot = object;
                    if let Some(log) = &mut self.changes {
                        log.note(known);
                    }
                    if !wakes_parent {
                        // Cached, but its parent has nothing new to see by the predicate.
                        self.filtered.push(known.clone());
                        return;
                    }
                }
                // Taken only now: an unchanged object (most of a relist) touches no count.
                Arc::clone(old)
            }
            Some((known, _)) => {
                let known = known.clone();
                let shared = self.shared(&parent);
                if let Some(old) = self.parents.insert(known.clone(), Arc::clone(&shared)) {
                    self.unindex(&known, &old);
                    wakes.push(old);
                }
                if let Some(log) = &mut self.changes {
                    log.note(&known);
                }
                self.index_insert(Arc::clone(&shared), known, object);
                shared
            }
            None => {
                let key = ObjectKey::from_joined(key);
                let shared = self.shared(&parent);
                self.parents.insert(key.clone(), Arc::clone(&shared));
                if let Some(log) = &mut self.changes {
                    log.note(&key);
                }
                self.index_insert(Arc::clone(&shared), key, object);
                shared
            }
        };
        wakes.push(woken);
    }

    fn replace(
        &mut self,
        objects: Vec<Arc<O>>,
        key_map: &KeyMap<O, P>,
        wakes: &mut Vec<Arc<P>>,
        rejected: &mut Vec<Rejected<P>>,
    ) {
        let mut incoming = BTreeMap::new();
        for object in objects {
            let mut key = String::new();
            if object_key_into(&*object, &mut key) {
                // A listing that names a key twice keeps the later object, as a watch would.
                incoming.insert(key, object);
            } else {
                rejected.push(Rejected::Unnamed);
            }
        }
        // Deletions missed while disconnected: whatever the listing no longer has.
        // Walked through the ordered index, never the hash map, so the order is fixed.
        let mut gone: Vec<ObjectKey> = self
            .order
            .iter()
            .filter_map(|p| self.index.get(p))
            .flat_map(|members| members.iter().map(|(key, _)| key))
            .filter(|key| !incoming.contains_key(key.as_str()))
            .cloned()
            .collect();
        gone.sort_unstable();
        for key in gone {
            if let Some(parent) = self.remove(key.as_str()) {
                wakes.push(parent);
            }
        }
        for (key, object) in incoming {
            self.upsert(&key, object, key_map, wakes, rejected);
        }
        if let Some(log) = &mut self.changes {
            // A copy is rebuilt from the whole cache rather than key by key.
            log.replaced = true;
            log.keys.clear();
        }
    }

    /// Removes `key`, returning the parent it was under.
    fn remove(&mut self, key: &str) -> Option<Arc<P>> {
        let (key, parent) = self.parents.remove_entry(key)?;
        if let Some(log) = &mut self.changes {
            log.note(&key);
        }
        self.unindex(&key, &parent);
        Some(parent)
    }

    /// The store's shared copy of `parent`, or a new one when it has no members yet.
    fn shared(&self, parent: &P) -> Arc<P> {
        match self.index.get_key_value(parent) {
            Some((shared, _)) => Arc::clone(shared),
            None => Arc::new(parent.clone()),
        }
    }

    fn index_insert(&mut self, parent: Arc<P>, key: ObjectKey, object: Arc<O>) {
        match self.index.get_mut(&*parent) {
            Some(members) => {
                members.insert(key, object);
            }
            None => {
                self.index
                    .insert(Arc::clone(&parent), MemberSet::one(key, object));
                self.order.insert(parent);
            }
        }
    }

    fn unindex(&mut self, key: &ObjectKey, parent: &P) {
        if let Some(members) = self.index.get_mut(parent) {
            members.remove(key);
            if members.is_empty() {
                self.index.remove(parent);
                self.order.remove(parent);
            }
        }
    }

    fn debug_check(&self) {
        if cfg!(debug_assertions) {
            let indexed: usize = self.index.values().map(MemberSet::len).sum();
            debug_assert_eq!(indexed, self.parents.len(), "parent index out of step");
            debug_assert!(self.index.values().all(|members| !members.is_empty()));
            debug_assert_eq!(
                self.order.len(),
                self.index.len(),
                "parent order out of step"
            );
        }
    }
}

/// Writes `object`'s joined key into `buf`; `false` when it has no name.
fn object_key_into<O: Object>(object: &O, buf: &mut String) -> bool {
    match object.object_name().filter(|name| !name.is_empty()) {
        Some(name) => {
            write_key(buf, object.object_namespace(), name);
            true
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::pod::PodView;

    fn pod(name: &str, cell: Option<&str>) -> PodView {
        let mut pod = PodView::default();
        pod.metadata.name = Some(name.into());
        pod.metadata.namespace = Some("ns".into());
        pod.metadata.labels = cell.map(|c| ("cell", c)).into_iter().collect();
        pod
    }

    fn by_cell() -> KeyMap<PodView, String> {
        KeyMap::by_label("cell")
    }

    struct Harness {
        store: Store<PodView, String>,
        key_map: KeyMap<PodView, String>,
    }

    impl Harness {
        fn new() -> Self {
            Harness {
                store: Store::default(),
                key_map: by_cell(),
            }
        }

        fn apply(&mut self, event: SourceEvent<PodView>) -> (Vec<String>, Vec<Rejected<String>>) {
            let (mut wakes, mut rejected) = (Vec::new(), Vec::new());
            self.store
                .apply(event.into(), &self.key_map, &mut wakes, &mut rejected);
            (
                wakes.into_iter().map(Arc::unwrap_or_clone).collect(),
                rejected,
            )
        }

        fn members(&self, cell: &str) -> Vec<String> {
            self.store
                .members(&cell.to_owned())
                .map(|p| p.metadata.name.as_deref().unwrap().to_owned())
                .collect()
        }
    }

    #[test]
    fn upsert_indexes_by_parent_and_wakes_it() {
        let mut h = Harness::new();
        let (wakes, _) = h.apply(SourceEvent::Upsert(pod("a", Some("c1"))));
        assert_eq!(wakes, ["c1"]);
        assert_eq!(h.members("c1"), ["a"]);
    }

    fn versioned(name: &str, cell: &str, rv: &str) -> PodView {
        let mut pod = pod(name, Some(cell));
        pod.metadata.resource_version = Some(rv.into());
        pod
    }

    #[test]
    fn a_large_parents_snapshot_is_shared_and_never_sees_later_writes() {
        let mut h = Harness::new();
        let names =
            |n: std::ops::Range<usize>| -> Vec<String> { n.map(|i| format!("p{i:03}")).collect() };
        let pods: Vec<PodView> = names(0..300)
            .iter()
            .map(|n| versioned(n, "big", "1"))
            .collect();
        h.apply(SourceEvent::Replace(pods));
        let before = h.store.snapshot(&"big".to_owned());
        assert_eq!(before.len(), 300);
        // An update in place, a move to another parent, a delete and a create.
        h.apply(SourceEvent::Upsert(versioned("p005", "big", "2")));
        h.apply(SourceEvent::Upsert(versioned("p006", "small", "2")));
        h.apply(SourceEvent::Delete(versioned("p007", "big", "2")));
        h.apply(SourceEvent::Upsert(versioned("p999", "big", "2")));
        let seen = |m: &Members<PodView>| -> Vec<String> {
            m.iter()
                .map(|p| p.metadata.name.as_deref().unwrap().to_owned())
                .collect()
        };
        assert_eq!(seen(&before), names(0..300));
        assert_eq!(
            before
                .get(5)
                .and_then(|p| p.metadata.resource_version.as_deref()),
            Some("1")
        );
        let after = h.store.snapshot(&"big".to_owned());
        let mut expected: Vec<String> = names(0..300);
        expected.retain(|n| n != "p006" && n != "p007");
        expected.push("p999".into());
        assert_eq!(seen(&after), expected);
        assert_eq!(h.members("big"), expected);
        assert_eq!(
            after
                .get(5)
                .and_then(|p| p.metadata.resource_version.as_deref()),
            Some("2")
        );
        assert_eq!(h.members("small"), ["p006"]);
        // Shrinking the parent to a handful turns its set back into a plain map, in order.
        let few: Vec<PodView> = names(0..3)
            .iter()
            .map(|n| versioned(n, "big", "3"))
            .collect();
        let (wakes, _) = h.apply(SourceEvent::Replace(few));
        assert!(wakes.contains(&"big".to_owned()) && wakes.contains(&"small".to_owned()));
        assert_eq!(h.members("big"), names(0..3));
        assert_eq!(
            seen(&before).len(),
            300,
            "the old snapshot still holds all 300"
        );
    }

    #[test]
    fn the_version_already_cached_wakes_nothing() {
        let mut h = Harness::new();
        h.apply(SourceEvent::Upsert(versioned("a", "c1", "5")));
        let (wakes, _) = h.apply(SourceEvent::Upsert(versioned("a", "c1", "5")));
        assert!(wakes.is_empty(), "{wakes:?}");
        let (wakes, _) = h.apply(SourceEvent::Upsert(versioned("a", "c1", "6")));
        assert_eq!(wakes, ["c1"]);
        // Without a version there is nothing to compare: it wakes.
        h.apply(SourceEvent::Upsert(pod("b", Some("c2"))));
        let (wakes, _) = h.apply(SourceEvent::Upsert(pod("b", Some("c2"))));
        assert_eq!(wakes, ["c2"]);
    }

    #[test]
    fn a_relist_wakes_only_the_parents_it_changed() {
        let mut h = Harness::new();
        h.apply(SourceEvent::Replace(vec![
            versioned("a", "c1", "1"),
            versioned("b", "c2", "2"),
            versioned("c", "c3", "3"),
            versioned("d", "c4", "4"),
        ]));
        let (mut wakes, _) = h.apply(SourceEvent::Replace(vec![
            versioned("a", "c1", "1"),
            versioned("b", "c2", "7"),
            versioned("d", "c5", "4"),
            versioned("e", "c6", "8"),
        ]));
        wakes.sort();
        wakes.dedup();
        // c2 changed, c3 lost its pod, d moved from c4 to c5 (the parent is compared before
        // the version, so the index always follows the listing), c6 is new; c1 is as cached.
        assert_eq!(wakes, ["c2", "c3", "c4", "c5", "c6"]);
        assert_eq!(h.members("c5"), ["d"]);
    }

    #[test]
    fn reparenting_wakes_the_old_and_the_new_parent() {
        let mut h = Harness::new();
        h.apply(SourceEvent::Upsert(pod("a", Some("c1"))));
        let (wakes, _) = h.apply(SourceEvent::Upsert(pod("a", Some("c2"))));
        assert_eq!(wakes, ["c1", "c2"]);
        assert!(h.members("c1").is_empty());
        assert_eq!(h.members("c2"), ["a"]);
        assert_eq!(h.store.parents().collect::<Vec<_>>(), ["c2"]);
    }

    #[test]
    fn unmappable_object_is_evicted_and_its_old_parent_woken() {
        let mut h = Harness::new();
        h.apply(SourceEvent::Upsert(pod("a", Some("c1"))));
        let (wakes, rejected) = h.apply(SourceEvent::Upsert(pod("a", None)));
        assert_eq!(wakes, ["c1"]);
        assert_eq!(h.store.len(), 0);
        assert!(matches!(
            &rejected[..],
            [Rejected::Unmapped { evicted_from: Some(c), .. }] if c == "c1"
        ));
    }

    #[test]
    fn unmappable_new_object_is_never_stored() {
        let mut h = Harness::new();
        let (wakes, rejected) = h.apply(SourceEvent::Upsert(pod("a", None)));
        assert!(wakes.is_empty());
        assert!(matches!(
            &rejected[..],
            [Rejected::Unmapped {
                evicted_from: None,
                ..
            }]
        ));
        assert!(h.store.is_empty());
    }

    #[test]
    fn delete_wakes_the_stored_parent_not_the_tombstones() {
        let mut h = Harness::new();
        h.apply(SourceEvent::Upsert(pod("a", Some("c1"))));
        let (wakes, _) = h.apply(SourceEvent::Delete(pod("a", Some("c9"))));
        assert_eq!(wakes, ["c1"]);
        assert!(h.store.is_empty());
    }

    #[test]
    fn delete_of_an_unknown_object_wakes_nothing() {
        let mut h = Harness::new();
        let (wakes, rejected) = h.apply(SourceEvent::Delete(pod("a", Some("c1"))));
        assert!(wakes.is_empty() && rejected.is_empty());
    }

    #[test]
    fn replace_synthesizes_deletions_for_missing_objects() {
        let mut h = Harness::new();
        h.apply(SourceEvent::Upsert(pod("a", Some("c1"))));
        h.apply(SourceEvent::Upsert(pod("b", Some("c2"))));
        let (wakes, _) = h.apply(SourceEvent::Replace(vec![
            pod("b", Some("c2")),
            pod("c", Some("c3")),
        ]));
        assert_eq!(wakes, ["c1", "c2", "c3"]);
        assert!(h.members("c1").is_empty());
        assert_eq!(h.store.len(), 2);
    }

    #[test]
    fn replace_with_a_duplicate_key_keeps_the_later_object() {
        let mut h = Harness::new();
        h.apply(SourceEvent::Replace(vec![
            pod("a", Some("c1")),
            pod("a", Some("c2")),
        ]));
        assert_eq!(h.members("c2"), ["a"]);
        assert_eq!(h.store.len(), 1);
    }

    #[test]
    fn object_without_a_name_is_rejected() {
        let mut h = Harness::new();
        let (_, rejected) = h.apply(SourceEvent::Upsert(PodView::default()));
        assert_eq!(rejected, [Rejected::Unnamed]);
    }
}
