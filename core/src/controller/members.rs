//! A parent's members: the store's per-parent set, and the snapshot a reconcile is handed.
//!
//! A snapshot must cost O(1) in the parent's size and must not touch the members
//! themselves: a parent of 100k members would otherwise pay 100k refcount increments for
//! every reconcile, and a resync of a million objects a million cache misses on objects
//! spread over gigabytes. So a set is shared with its snapshots, never copied into them:
//!
//! - one member (every controller keyed by the object itself) is held inline, with no
//!   allocation of its own;
//! - up to [`MANY_FROM`] members are a `BTreeMap` behind an `Arc`, copied on write only
//!   while a snapshot of it is still held (so at most [`MANY_FROM`] pointer copies, once
//!   per reconcile that overlaps a write);
//! - more are a persistent B-tree (`imbl`), whose snapshot shares every node and whose
//!   writes copy only the path they touch.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use crate::wire::object::ObjectKey;

/// A member set with more than this many members is held persistently.
pub const MANY_FROM: usize = 64;

/// A persistent set shrinks back to a plain map below this, so a parent hovering around
/// [`MANY_FROM`] does not convert on every write.
const FEW_BELOW: usize = MANY_FROM / 2;

type Few<O> = Arc<BTreeMap<ObjectKey, Arc<O>>>;
type Shared<O> = imbl::OrdMap<ObjectKey, Arc<O>>;

/// One parent's members in the store, in key order.
pub(crate) enum MemberSet<O> {
    /// Only while the store removes the parent.
    Empty,
    One(ObjectKey, Arc<O>),
    Few(Few<O>),
    Many(Shared<O>),
}

impl<O> MemberSet<O> {
    /// A set of one.
    pub(crate) fn one(key: ObjectKey, object: Arc<O>) -> Self {
        MemberSet::One(key, object)
    }

    pub(crate) fn len(&self) -> usize {
        match self {
            MemberSet::Empty => 0,
            MemberSet::One(..) => 1,
            MemberSet::Few(map) => map.len(),
            MemberSet::Many(map) => map.len(),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub(crate) fn get(&self, key: &ObjectKey) -> Option<&Arc<O>> {
        match self {
            MemberSet::Empty => None,
            MemberSet::One(k, object) => (k == key).then_some(object),
            MemberSet::Few(map) => map.get(key),
            MemberSet::Many(map) => map.get(key),
        }
    }

    /// The slot of `key`. `key` is the store's own copy, which shares its allocation with
    /// the member map's: a small set is scanned comparing pointers, reading no key bytes
    /// (in a large cache every key compared is a cache miss).
    pub(crate) fn slot(&mut self, key: &ObjectKey) -> Option<&mut Arc<O>> {
        match self {
            MemberSet::Empty => None,
            MemberSet::One(k, object) => (k.same_allocation(key) || k == key).then_some(object),
            MemberSet::Few(map) => {
                let map = Arc::make_mut(map);
                let scanned = (map.len() <= SCAN_MAX)
                    .then(|| map.keys().position(|k| k.same_allocation(key)))
                    .flatten();
                match scanned {
                    Some(position) => map.values_mut().nth(position),
                    None => map.get_mut(key),
                }
            }
            MemberSet::Many(map) => map.get_mut(key),
        }
    }

    pub(crate) fn insert(&mut self, key: ObjectKey, object: Arc<O>) {
        match self {
            MemberSet::Empty => *self = MemberSet::One(key, object),
            MemberSet::One(k, slot) if *k == key => *slot = object,
            MemberSet::One(..) => {
                let MemberSet::One(k, o) = std::mem::replace(self, MemberSet::Empty) else {
                    unreachable!("matched above");
                };
                *self = MemberSet::Few(Arc::new(BTreeMap::from([(k, o), (key, object)])));
            }
            MemberSet::Few(map) => {
                let map = Arc::make_mut(map);
                map.insert(key, object);
                if map.len() > MANY_FROM {
                    let many: Shared<O> = std::mem::take(map).into_iter().collect();
                    *self = MemberSet::Many(many);
                }
            }
            MemberSet::Many(map) => {
                map.insert(key, object);
            }
        }
    }

    pub(crate) fn remove(&mut self, key: &ObjectKey) {
        match self {
            MemberSet::Empty => {}
            MemberSet::One(k, _) => {
                if k == key {
                    *self = MemberSet::Empty;
                }
            }
            MemberSet::Few(map) => {
                let map = Arc::make_mut(map);
                map.remove(key);
                if map.len() == 1 {
                    if let Some((k, o)) = map.pop_first() {
                        *self = MemberSet::One(k, o);
                    }
                } else if map.is_empty() {
                    *self = MemberSet::Empty;
                }
            }
            MemberSet::Many(map) => {
                map.remove(key);
                if map.len() < FEW_BELOW {
                    let few: BTreeMap<_, _> = std::mem::take(map).into_iter().collect();
                    *self = MemberSet::Few(Arc::new(few));
                }
            }
        }
    }

    /// The keys, in key order (for `Debug`).
    pub(crate) fn keys(&self) -> Vec<&ObjectKey> {
        self.iter().map(|(key, _)| key).collect()
    }

    /// The members, in key order.
    pub(crate) fn iter(&self) -> Iter<'_, O> {
        match self {
            MemberSet::Empty => Iter::One(None),
            MemberSet::One(key, object) => Iter::One(Some((key, object))),
            MemberSet::Few(map) => Iter::Few(map.iter()),
            MemberSet::Many(map) => Iter::Many(map.iter()),
        }
    }

    /// The members as they are now, sharing the set: no member is touched.
    pub(crate) fn snapshot(&self) -> Members<O> {
        Members(match self {
            MemberSet::Empty => Repr::List(Vec::new()),
            MemberSet::One(_, object) => Repr::List(vec![Arc::clone(object)]),
            MemberSet::Few(map) => Repr::Few(Arc::clone(map)),
            MemberSet::Many(map) => Repr::Many(map.clone()),
        })
    }
}

/// Small sets are scanned by pointer before being searched by key.
const SCAN_MAX: usize = 32;

/// An iterator over a member set's keys and objects, in key order.
pub(crate) enum Iter<'a, O> {
    One(Option<(&'a ObjectKey, &'a Arc<O>)>),
    Few(std::collections::btree_map::Iter<'a, ObjectKey, Arc<O>>),
    Many(imbl::ordmap::Iter<'a, ObjectKey, Arc<O>, imbl::shared_ptr::DefaultSharedPtr>),
}

impl<'a, O> Iterator for Iter<'a, O> {
    type Item = (&'a ObjectKey, &'a Arc<O>);

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Iter::One(one) => one.take(),
            Iter::Few(it) => it.next(),
            Iter::Many(it) => it.next(),
        }
    }
}

/// A parent's members as of a reconcile's dispatch, in key order (kube-runtime hands a
/// reconcile the object; this runtime hands it every object under the parent).
///
/// Cheap to clone and to keep, whatever the parent's size: it shares the store's set
/// instead of copying it, and later writes to the store never show through it.
pub struct Members<O>(Repr<O>);

enum Repr<O> {
    /// Built by hand, or a set of one.
    List(Vec<Arc<O>>),
    Few(Few<O>),
    Many(Shared<O>),
}

impl<O> Members<O> {
    /// No members.
    #[must_use]
    pub fn new() -> Self {
        Members(Repr::List(Vec::new()))
    }

    /// How many members there are.
    #[must_use]
    pub fn len(&self) -> usize {
        match &self.0 {
            Repr::List(v) => v.len(),
            Repr::Few(map) => map.len(),
            Repr::Many(map) => map.len(),
        }
    }

    /// Whether there are none (every one was deleted before the reconcile ran).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The members, in key order.
    #[must_use]
    pub fn iter(&self) -> MembersIter<'_, O> {
        MembersIter(match &self.0 {
            Repr::List(v) => IterRepr::List(v.iter()),
            Repr::Few(map) => IterRepr::Few(map.values()),
            Repr::Many(map) => IterRepr::Many(map.values()),
        })
    }

    /// The member with the lowest key.
    #[must_use]
    pub fn first(&self) -> Option<&Arc<O>> {
        match &self.0 {
            Repr::List(v) => v.first(),
            Repr::Few(map) => map.first_key_value().map(|(_, o)| o),
            Repr::Many(map) => map.get_min().map(|(_, o)| o),
        }
    }

    /// The member with the highest key.
    #[must_use]
    pub fn last(&self) -> Option<&Arc<O>> {
        match &self.0 {
            Repr::List(v) => v.last(),
            Repr::Few(map) => map.last_key_value().map(|(_, o)| o),
            Repr::Many(map) => map.get_max().map(|(_, o)| o),
        }
    }

    /// The `index`th member in key order: O(index) at most.
    #[must_use]
    pub fn get(&self, index: usize) -> Option<&Arc<O>> {
        match &self.0 {
            Repr::List(v) => v.get(index),
            Repr::Few(_) | Repr::Many(_) => self.iter().nth(index),
        }
    }

    /// The members in a vector of their own, in key order (one pointer copy each).
    #[must_use]
    pub fn to_vec(&self) -> Vec<Arc<O>> {
        self.iter().cloned().collect()
    }
}

impl<O> Default for Members<O> {
    fn default() -> Self {
        Members::new()
    }
}

impl<O> Clone for Members<O> {
    fn clone(&self) -> Self {
        Members(match &self.0 {
            Repr::List(v) => Repr::List(v.clone()),
            Repr::Few(map) => Repr::Few(Arc::clone(map)),
            Repr::Many(map) => Repr::Many(map.clone()),
        })
    }
}

impl<O: fmt::Debug> fmt::Debug for Members<O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// Members are equal when they hold equal objects in the same order.
impl<O: PartialEq> PartialEq for Members<O> {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

/// Members in the order given, which must be key order; for tests and hand-made requests.
impl<O> From<Vec<Arc<O>>> for Members<O> {
    fn from(members: Vec<Arc<O>>) -> Self {
        Members(Repr::List(members))
    }
}

impl<O> FromIterator<Arc<O>> for Members<O> {
    fn from_iter<I: IntoIterator<Item = Arc<O>>>(iter: I) -> Self {
        Members(Repr::List(iter.into_iter().collect()))
    }
}

impl<'a, O> IntoIterator for &'a Members<O> {
    type Item = &'a Arc<O>;
    type IntoIter = MembersIter<'a, O>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<O> IntoIterator for Members<O> {
    type Item = Arc<O>;
    type IntoIter = MembersIntoIter<O>;

    fn into_iter(self) -> Self::IntoIter {
        MembersIntoIter(match self.0 {
            Repr::List(v) => IntoIterRepr::List(v.into_iter()),
            // Shared with the store as a rule: its members are copied out (at most
            // `MANY_FROM`), never taken.
            Repr::Few(map) => {
                IntoIterRepr::List(map.values().cloned().collect::<Vec<_>>().into_iter())
            }
            Repr::Many(map) => IntoIterRepr::Many(map.into_iter()),
        })
    }
}

/// The members of a [`Members`], by reference, in key order.
pub struct MembersIter<'a, O>(IterRepr<'a, O>);

enum IterRepr<'a, O> {
    List(std::slice::Iter<'a, Arc<O>>),
    Few(std::collections::btree_map::Values<'a, ObjectKey, Arc<O>>),
    Many(imbl::ordmap::Values<'a, ObjectKey, Arc<O>, imbl::shared_ptr::DefaultSharedPtr>),
}

impl<'a, O> Iterator for MembersIter<'a, O> {
    type Item = &'a Arc<O>;

    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.0 {
            IterRepr::List(it) => it.next(),
            IterRepr::Few(it) => it.next(),
            IterRepr::Many(it) => it.next(),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match &self.0 {
            IterRepr::List(it) => it.size_hint(),
            IterRepr::Few(it) => it.size_hint(),
            IterRepr::Many(it) => it.size_hint(),
        }
    }
}

impl<O> ExactSizeIterator for MembersIter<'_, O> {}

impl<O> fmt::Debug for MembersIter<'_, O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("MembersIter")
    }
}

/// The members of a [`Members`], owned, in key order.
pub struct MembersIntoIter<O>(IntoIterRepr<O>);

enum IntoIterRepr<O> {
    List(std::vec::IntoIter<Arc<O>>),
    Many(imbl::ordmap::ConsumingIter<ObjectKey, Arc<O>, imbl::shared_ptr::DefaultSharedPtr>),
}

impl<O> Iterator for MembersIntoIter<O> {
    type Item = Arc<O>;

    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.0 {
            IntoIterRepr::List(it) => it.next(),
            IntoIterRepr::Many(it) => it.next().map(|(_, o)| o),
        }
    }
}

impl<O> fmt::Debug for MembersIntoIter<O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("MembersIntoIter")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: usize) -> ObjectKey {
        ObjectKey::new(Some("ns"), &format!("p{i:05}"))
    }

    fn names(members: &Members<usize>) -> Vec<usize> {
        members.iter().map(|o| **o).collect()
    }

    #[test]
    fn a_set_grows_persistent_and_shrinks_back_keeping_key_order() {
        let mut set = MemberSet::one(key(0), Arc::new(0));
        for i in 1..=MANY_FROM {
            set.insert(key(i), Arc::new(i));
        }
        assert!(
            matches!(set, MemberSet::Many(_)),
            "past {MANY_FROM}: persistent"
        );
        let all: Vec<usize> = (0..=MANY_FROM).collect();
        assert_eq!(names(&set.snapshot()), all);
        for i in (FEW_BELOW..=MANY_FROM).rev() {
            set.remove(&key(i));
        }
        assert!(
            matches!(set, MemberSet::Many(_)),
            "at {FEW_BELOW}: still persistent"
        );
        set.remove(&key(FEW_BELOW - 1));
        assert!(
            matches!(set, MemberSet::Few(_)),
            "below {FEW_BELOW}: plain again"
        );
        let left: Vec<usize> = (0..FEW_BELOW - 1).collect();
        assert_eq!(names(&set.snapshot()), left);
        assert_eq!(set.len(), FEW_BELOW - 1);
        for i in (1..FEW_BELOW - 1).rev() {
            set.remove(&key(i));
        }
        assert!(matches!(set, MemberSet::One(..)), "one: inline");
        assert_eq!(names(&set.snapshot()), [0]);
        set.remove(&key(0));
        assert!(set.is_empty());
    }

    #[test]
    fn a_snapshot_never_sees_later_writes() {
        let mut set = MemberSet::one(key(0), Arc::new(0));
        for i in 1..200 {
            set.insert(key(i), Arc::new(i));
        }
        let before = set.snapshot();
        *set.slot(&key(5)).expect("present") = Arc::new(1_000);
        set.remove(&key(7));
        set.insert(key(500), Arc::new(500));
        assert_eq!(before.len(), 200);
        assert_eq!(before.get(5).map(|o| **o), Some(5));
        assert_eq!(before.get(7).map(|o| **o), Some(7));
        assert_eq!(before.last().map(|o| **o), Some(199));
        let after = set.snapshot();
        assert_eq!(after.len(), 200);
        assert_eq!(after.get(5).map(|o| **o), Some(1_000));
        assert_eq!(after.last().map(|o| **o), Some(500));
    }

    #[test]
    fn both_forms_read_alike() {
        let few: Members<usize> = (0..100).map(Arc::new).collect();
        let mut set = MemberSet::one(key(0), Arc::new(0));
        for i in 1..100 {
            set.insert(key(i), Arc::new(i));
        }
        let many = set.snapshot();
        assert_eq!(few, many);
        assert_eq!(few.first(), many.first());
        assert_eq!(few.to_vec(), many.to_vec());
        assert_eq!(
            many.clone().into_iter().map(|o| *o).collect::<Vec<_>>(),
            (0..100).collect::<Vec<_>>()
        );
        assert_eq!(many.iter().size_hint(), (100, Some(100)));
        assert!(Members::<usize>::default().is_empty());
    }
}
