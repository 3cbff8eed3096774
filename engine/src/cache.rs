//! The cache, readable outside the driver: [`CacheSnapshot`] is the cache as of one moment,
//! [`Cache`] the live reader any task or thread can hold (kube-runtime's `reflector::Store`).
//!
//! The core's store stays the driver's alone, lock-free on the per-frame path. The driver
//! keeps a persistent copy in step once per turn from the core's change log
//! ([`ReconcileLoop::drain_cache_changes`](reconcile_core::ReconcileLoop::drain_cache_changes))
//! and publishes it under a lock held only to swap or clone a pointer. Copies share their
//! structure, so a snapshot costs O(1) to take and a write after it copies only the path it
//! touches: every reconcile gets the whole cache as of its dispatch.
//!
//! The copy is one persistent B-tree of object pointers, ordered by each object's own key:
//! about 42 bytes per object on top of the core's store at a million pods, nodes included
//! (a map from a separate key to the object cost 60 more). A parent's members are found by running the key map over it,
//! O(objects), rather than kept in a second index that would cost more than the set itself.
//!
//! Not imbl's hash map: with small chunks its hash is 8 bits
//! wide (3 bits a level), so at a million objects every bucket was a list of about 4,000
//! compared one by one: a 1M-pod sync took 200 CPU seconds instead of 13 (issue 16).

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use event_listener::Event;
use std::borrow::Borrow;
use std::cmp::Ordering;

use reconcile_core::{CacheChange, KeyMap, Object, ObjectKey};

/// The two parts of an object's key, however it is held: what the copy hashes and compares,
/// so an object is found by an [`ObjectKey`] without the copy storing one.
trait KeyParts {
    /// The namespace (`""` when cluster-scoped) and the name.
    fn parts(&self) -> (&str, &str);
}

impl KeyParts for ObjectKey {
    fn parts(&self) -> (&str, &str) {
        (self.namespace().unwrap_or(""), self.name())
    }
}

impl PartialEq for dyn KeyParts + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.parts() == other.parts()
    }
}

impl Eq for dyn KeyParts + '_ {}

impl PartialOrd for dyn KeyParts + '_ {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for dyn KeyParts + '_ {
    fn cmp(&self, other: &Self) -> Ordering {
        joined_order(self.parts(), other.parts())
    }
}

/// A cached object, ordered and compared by its key.
struct Keyed<O>(Arc<O>);

impl<O> Clone for Keyed<O> {
    fn clone(&self) -> Self {
        Keyed(Arc::clone(&self.0))
    }
}

impl<O: Object> KeyParts for Keyed<O> {
    fn parts(&self) -> (&str, &str) {
        (
            self.0.object_namespace().unwrap_or(""),
            self.0.object_name().unwrap_or(""),
        )
    }
}

impl<'a, O: Object> Borrow<dyn KeyParts + 'a> for Keyed<O> {
    fn borrow(&self) -> &(dyn KeyParts + 'a) {
        self
    }
}

impl<O: Object> PartialEq for Keyed<O> {
    fn eq(&self, other: &Self) -> bool {
        self.parts() == other.parts()
    }
}

impl<O: Object> Eq for Keyed<O> {}

impl<O: Object> PartialOrd for Keyed<O> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<O: Object> Ord for Keyed<O> {
    fn cmp(&self, other: &Self) -> Ordering {
        joined_order(self.parts(), other.parts())
    }
}

/// Orders keys as their joined `namespace/name` form orders, as the core's store does,
/// without joining them.
fn joined_order(a: (&str, &str), b: (&str, &str)) -> Ordering {
    fn bytes<'s>((ns, name): (&'s str, &'s str)) -> impl Iterator<Item = u8> + 's {
        let slash: &[u8] = if ns.is_empty() { b"" } else { b"/" };
        ns.bytes().chain(slash.iter().copied()).chain(name.bytes())
    }
    bytes(a).cmp(bytes(b))
}

/// The whole cache as of one moment: what a reconcile sees as of its dispatch, or what
/// [`Cache::snapshot`] returns. Cheap to clone; never changes.
pub struct CacheSnapshot<O, P> {
    /// A map to `()`: imbl's set has no lookup that returns the stored element. In key
    /// order, as the core's store.
    objects: imbl::OrdMap<Keyed<O>, ()>,
    key_map: Option<KeyMap<O, P>>,
}

impl<O, P> Clone for CacheSnapshot<O, P> {
    fn clone(&self) -> Self {
        CacheSnapshot {
            objects: self.objects.clone(),
            key_map: self.key_map.clone(),
        }
    }
}

impl<O, P> fmt::Debug for CacheSnapshot<O, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CacheSnapshot")
            .field("objects", &self.objects.len())
            .field("key_map", &self.key_map)
            .finish()
    }
}

impl<O, P> CacheSnapshot<O, P> {
    /// An empty cache whose objects are grouped by `key_map`.
    pub(crate) fn new(key_map: KeyMap<O, P>) -> Self {
        CacheSnapshot {
            objects: imbl::OrdMap::new(),
            key_map: Some(key_map),
        }
    }

    /// An empty cache of a controller not yet running.
    pub(crate) fn empty() -> Self {
        CacheSnapshot {
            objects: imbl::OrdMap::new(),
            key_map: None,
        }
    }
}

impl<O: Object, P: Ord> CacheSnapshot<O, P> {
    /// The object under `key` (`namespace/name`; see [`ObjectKey::new`]).
    #[must_use]
    pub fn get(&self, key: &ObjectKey) -> Option<Arc<O>> {
        self.objects
            .get_key_value(key as &dyn KeyParts)
            .map(|(k, ())| Arc::clone(&k.0))
    }

    /// The parent the object under `key` is grouped under.
    #[must_use]
    pub fn parent_of(&self, key: &ObjectKey) -> Option<P> {
        let object = self.get(key)?;
        self.key_map.as_ref()?.parent_of(&object).ok()
    }

    /// Every cached object, in key order (kube-runtime's `Store::state`).
    #[must_use]
    pub fn state(&self) -> Vec<Arc<O>> {
        self.sorted()
    }

    /// The members of `parent`, in key order: what a reconcile of `parent` dispatched now
    /// would get. Runs the key map over every object (O(objects)).
    #[must_use]
    pub fn members(&self, parent: &P) -> Vec<Arc<O>> {
        let Some(key_map) = &self.key_map else {
            return Vec::new();
        };
        let mut members = self.sorted();
        members.retain(|o| key_map.parent_of(o).is_ok_and(|p| p == *parent));
        members
    }

    /// Every parent with at least one member, in order (O(objects)).
    #[must_use]
    pub fn parents(&self) -> Vec<P> {
        let Some(key_map) = &self.key_map else {
            return Vec::new();
        };
        let mut parents: Vec<P> = self
            .objects
            .keys()
            .filter_map(|o| key_map.parent_of(&o.0).ok())
            .collect();
        parents.sort_unstable();
        parents.dedup();
        parents
    }

    /// Number of cached objects.
    #[must_use]
    pub fn len(&self) -> usize {
        self.objects.len()
    }

    /// Whether nothing is cached.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    /// The objects in key order: the map's own order.
    fn sorted(&self) -> Vec<Arc<O>> {
        self.objects.keys().map(|k| Arc::clone(&k.0)).collect()
    }

    /// Applies one change reported by the core.
    pub(crate) fn apply(&mut self, change: CacheChange<'_, O, P>) {
        match change {
            CacheChange::Cleared => self.objects = imbl::OrdMap::new(),
            CacheChange::Set { key, object, .. } => {
                debug_assert!(Keyed(Arc::clone(object)).parts() == key.parts());
                self.objects.insert(Keyed(Arc::clone(object)), ());
            }
            CacheChange::Removed { key } => {
                self.objects.remove(key as &dyn KeyParts);
            }
        }
    }
}

/// What the driver publishes and every [`Cache`] reads.
pub(crate) struct Published<O, P> {
    snapshot: Mutex<CacheSnapshot<O, P>>,
    ready: Mutex<Readiness>,
    changed: Event,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Readiness {
    Waiting,
    Ready,
    /// The controller ended before its first sync: nothing will ever be ready.
    Ended,
}

impl<O, P> Published<O, P> {
    pub(crate) fn new() -> Self {
        Published {
            snapshot: Mutex::new(CacheSnapshot::empty()),
            ready: Mutex::new(Readiness::Waiting),
            changed: Event::new(),
        }
    }

    fn snapshot(&self) -> MutexGuard<'_, CacheSnapshot<O, P>> {
        // Held only to swap or clone a pointer, so a poisoned lock still holds a whole value.
        self.snapshot
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn readiness(&self) -> MutexGuard<'_, Readiness> {
        self.ready
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Replaces what readers see.
    pub(crate) fn publish(&self, snapshot: CacheSnapshot<O, P>) {
        *self.snapshot() = snapshot;
    }

    /// The first whole listing is in what readers see.
    pub(crate) fn set_ready(&self) {
        *self.readiness() = Readiness::Ready;
        self.changed.notify(usize::MAX);
    }

    /// The controller ended; a reader still waiting for the first sync stops waiting.
    pub(crate) fn set_ended(&self) {
        {
            let mut ready = self.readiness();
            if *ready == Readiness::Waiting {
                *ready = Readiness::Ended;
            }
        }
        self.changed.notify(usize::MAX);
    }
}

/// A live, cloneable reader of a controller's cache, usable from any task or thread
/// (kube-runtime's `reflector::Store`). Each read sees the cache as of the driver's last
/// turn; [`snapshot`](Cache::snapshot) pins one moment for several reads.
pub struct Cache<O, P> {
    published: Arc<Published<O, P>>,
}

impl<O, P> Clone for Cache<O, P> {
    fn clone(&self) -> Self {
        Cache {
            published: Arc::clone(&self.published),
        }
    }
}

impl<O, P> fmt::Debug for Cache<O, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cache").finish_non_exhaustive()
    }
}

/// The controller ended before its cache was first synced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the controller ended before its cache was synced")]
pub struct NeverReady;

impl<O, P> Cache<O, P> {
    pub(crate) fn new(published: Arc<Published<O, P>>) -> Self {
        Cache { published }
    }
}

impl<O: Object, P: Ord> Cache<O, P> {
    /// The cache as of the driver's last turn; later changes do not reach it.
    #[must_use]
    pub fn snapshot(&self) -> CacheSnapshot<O, P> {
        self.published.snapshot().clone()
    }

    /// The object under `key`.
    #[must_use]
    pub fn get(&self, key: &ObjectKey) -> Option<Arc<O>> {
        self.published.snapshot().get(key)
    }

    /// Every cached object, in key order.
    #[must_use]
    pub fn state(&self) -> Vec<Arc<O>> {
        self.snapshot().state()
    }

    /// The members of `parent`, in key order.
    #[must_use]
    pub fn members(&self, parent: &P) -> Vec<Arc<O>> {
        self.snapshot().members(parent)
    }

    /// Whether the first whole listing is in the cache.
    #[must_use]
    pub fn is_ready(&self) -> bool {
        *self.published.readiness() == Readiness::Ready
    }

    /// Waits until the first whole listing is in the cache (kube-runtime's
    /// `Store::wait_until_ready`).
    ///
    /// # Errors
    /// [`NeverReady`] when the controller ended before that.
    pub async fn wait_until_ready(&self) -> Result<(), NeverReady> {
        loop {
            let listener = self.published.changed.listen();
            match *self.published.readiness() {
                Readiness::Ready => return Ok(()),
                Readiness::Ended => return Err(NeverReady),
                Readiness::Waiting => {}
            }
            listener.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use reconcile_core::pod::PodView;

    use super::*;

    fn pod(ns: &str, name: &str, cell: &str) -> Arc<PodView> {
        let ns = if ns.is_empty() {
            String::new()
        } else {
            format!(r#""namespace":"{ns}","#)
        };
        Arc::new(
            serde_json::from_str(&format!(
                r#"{{"metadata":{{{ns}"name":"{name}","labels":{{"cell":"{cell}"}}}}}}"#
            ))
            .unwrap(),
        )
    }

    fn set(snapshot: &mut CacheSnapshot<PodView, String>, object: Arc<PodView>) {
        let key = object.key().unwrap();
        snapshot.apply(CacheChange::Set {
            key: &key,
            object: &object,
            parent: &String::new(),
        });
    }

    fn names(pods: &[Arc<PodView>]) -> Vec<String> {
        pods.iter().map(|p| p.key().unwrap().to_string()).collect()
    }

    #[test]
    fn a_snapshot_never_sees_later_writes_and_members_follow_the_key_map() {
        let mut live = CacheSnapshot::new(KeyMap::by_label("cell"));
        set(&mut live, pod("a", "x", "p"));
        set(&mut live, pod("a-b", "y", "p"));
        set(&mut live, pod("", "node-1", "q"));
        let before = live.clone();
        set(&mut live, pod("a", "x", "q"));
        live.apply(CacheChange::Removed {
            key: &ObjectKey::new(Some("a-b"), "y"),
        });
        // Key order is the joined form's: "a-b/y" < "a/x" < "node-1".
        assert_eq!(names(&before.state()), ["a-b/y", "a/x", "node-1"]);
        assert_eq!(names(&before.members(&"p".into())), ["a-b/y", "a/x"]);
        assert_eq!(names(&live.state()), ["a/x", "node-1"]);
        assert!(live.members(&"p".into()).is_empty());
        assert_eq!(live.parents(), ["q"]);
        let x = ObjectKey::new(Some("a"), "x");
        assert_eq!(live.parent_of(&x), Some("q".into()));
        assert_eq!(before.parent_of(&x), Some("p".into()));
        assert!(live.get(&ObjectKey::new(None, "node-1")).is_some());
        assert!(live.get(&ObjectKey::new(Some("a"), "node-1")).is_none());
        live.apply(CacheChange::Cleared);
        assert!(live.is_empty() && live.parents().is_empty());
    }
}
