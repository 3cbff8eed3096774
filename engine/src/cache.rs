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
//! The copy is one persistent map, key to object, about 60 bytes per object on top of the
//! core's store: a parent's members are found by running the key map over it, O(objects),
//! rather than kept in a second index that would cost as much again for every object.

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use event_listener::Event;
use reconcile_core::{CacheChange, KeyMap, ObjectKey};

/// The whole cache as of one moment: what a reconcile sees as of its dispatch, or what
/// [`Cache::snapshot`] returns. Cheap to clone; never changes.
pub struct CacheSnapshot<O, P> {
    objects: imbl::HashMap<ObjectKey, Arc<O>>,
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
            objects: imbl::HashMap::new(),
            key_map: Some(key_map),
        }
    }

    /// An empty cache of a controller not yet running.
    pub(crate) fn empty() -> Self {
        CacheSnapshot {
            objects: imbl::HashMap::new(),
            key_map: None,
        }
    }
}

impl<O, P: Ord> CacheSnapshot<O, P> {
    /// The object under `key` (`namespace/name`; see [`ObjectKey::new`]).
    #[must_use]
    pub fn get(&self, key: &ObjectKey) -> Option<Arc<O>> {
        self.objects.get(key).cloned()
    }

    /// The parent the object under `key` is grouped under.
    #[must_use]
    pub fn parent_of(&self, key: &ObjectKey) -> Option<P> {
        let object = self.objects.get(key)?;
        self.key_map.as_ref()?.parent_of(object).ok()
    }

    /// Every cached object, in key order (kube-runtime's `Store::state`).
    #[must_use]
    pub fn state(&self) -> Vec<Arc<O>> {
        self.sorted()
            .into_iter()
            .map(|(_, o)| Arc::clone(o))
            .collect()
    }

    /// The members of `parent`, in key order: what a reconcile of `parent` dispatched now
    /// would get. Runs the key map over every object (O(objects)).
    #[must_use]
    pub fn members(&self, parent: &P) -> Vec<Arc<O>> {
        let Some(key_map) = &self.key_map else {
            return Vec::new();
        };
        self.sorted()
            .into_iter()
            .filter(|(_, o)| key_map.parent_of(o).is_ok_and(|p| p == *parent))
            .map(|(_, o)| Arc::clone(o))
            .collect()
    }

    /// Every parent with at least one member, in order (O(objects)).
    #[must_use]
    pub fn parents(&self) -> Vec<P> {
        let Some(key_map) = &self.key_map else {
            return Vec::new();
        };
        let mut parents: Vec<P> = self
            .objects
            .values()
            .filter_map(|o| key_map.parent_of(o).ok())
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

    /// The entries in key order: the map's own order depends on hashing.
    fn sorted(&self) -> Vec<(&ObjectKey, &Arc<O>)> {
        let mut entries: Vec<_> = self.objects.iter().collect();
        entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
        entries
    }

    /// Applies one change reported by the core.
    pub(crate) fn apply(&mut self, change: CacheChange<'_, O, P>) {
        match change {
            CacheChange::Cleared => self.objects = imbl::HashMap::new(),
            CacheChange::Set { key, object, .. } => {
                self.objects.insert(key.clone(), Arc::clone(object));
            }
            CacheChange::Removed { key } => {
                self.objects.remove(key);
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

impl<O, P: Ord> Cache<O, P> {
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
    use super::*;

    fn set(snapshot: &mut CacheSnapshot<String, String>, key: &str, value: &str) {
        let key = ObjectKey::new(None, key);
        let object = Arc::new(value.to_owned());
        snapshot.apply(CacheChange::Set {
            key: &key,
            object: &object,
            parent: &String::new(),
        });
    }

    #[test]
    fn a_snapshot_never_sees_later_writes_and_members_follow_the_key_map() {
        // Grouped by the value's first letter.
        let by_letter = KeyMap::new(|v: &String| Ok(v[..1].to_owned()));
        let mut live = CacheSnapshot::new(by_letter);
        set(&mut live, "a", "p1");
        set(&mut live, "b", "p2");
        let before = live.clone();
        set(&mut live, "a", "q1");
        live.apply(CacheChange::Removed {
            key: &ObjectKey::new(None, "b"),
        });
        let values =
            |pods: Vec<Arc<String>>| pods.iter().map(|o| o.to_string()).collect::<Vec<_>>();
        assert_eq!(values(before.state()), ["p1", "p2"]);
        assert_eq!(values(before.members(&"p".into())), ["p1", "p2"]);
        assert_eq!(values(live.state()), ["q1"]);
        assert!(live.members(&"p".into()).is_empty());
        assert_eq!(live.parents(), ["q"]);
        assert_eq!(live.parent_of(&ObjectKey::new(None, "a")), Some("q".into()));
        live.apply(CacheChange::Cleared);
        assert!(live.is_empty() && live.parents().is_empty());
    }
}
