//! The cache, readable outside the driver: [`CacheSnapshot`] is the cache as of one moment,
//! [`Cache`] the live reader any task or thread can hold (kube-runtime's `reflector::Store`).
//!
//! The core's store stays the driver's alone, lock-free on the per-frame path. The driver
//! keeps a persistent copy in step once per turn from the core's change log
//! ([`ReconcileLoop::drain_cache_changes`](reconcile_core::ReconcileLoop::drain_cache_changes))
//! and publishes it under a lock held only to swap or clone a pointer. Copies share their
//! structure, so a snapshot costs O(1) to take and a write after it copies only the path it
//! touches: every reconcile gets the whole cache as of its dispatch.

use std::fmt;
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard};

use event_listener::Event;
use reconcile_core::{CacheChange, ObjectKey};

/// One cached object and the parent it is grouped under.
struct Entry<O, P> {
    object: Arc<O>,
    parent: P,
}

impl<O, P: Clone> Clone for Entry<O, P> {
    fn clone(&self) -> Self {
        Entry {
            object: Arc::clone(&self.object),
            parent: self.parent.clone(),
        }
    }
}

/// The whole cache as of one moment: what a reconcile sees as of its dispatch, or what
/// [`Cache::snapshot`] returns. Cheap to clone; never changes.
pub struct CacheSnapshot<O, P> {
    objects: imbl::HashMap<ObjectKey, Entry<O, P>>,
    members: imbl::HashMap<P, imbl::OrdSet<ObjectKey>>,
}

impl<O, P: Clone> Clone for CacheSnapshot<O, P> {
    fn clone(&self) -> Self {
        CacheSnapshot {
            objects: self.objects.clone(),
            members: self.members.clone(),
        }
    }
}

impl<O, P: Clone + Hash + Eq> Default for CacheSnapshot<O, P> {
    fn default() -> Self {
        CacheSnapshot {
            objects: imbl::HashMap::new(),
            members: imbl::HashMap::new(),
        }
    }
}

impl<O, P> fmt::Debug for CacheSnapshot<O, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CacheSnapshot")
            .field("objects", &self.objects.len())
            .field("parents", &self.members.len())
            .finish()
    }
}

impl<O, P: Clone + Hash + Eq + Ord> CacheSnapshot<O, P> {
    /// The object under `key` (`namespace/name`; see [`ObjectKey::new`]).
    #[must_use]
    pub fn get(&self, key: &ObjectKey) -> Option<Arc<O>> {
        self.objects.get(key).map(|e| Arc::clone(&e.object))
    }

    /// The parent the object under `key` is grouped under.
    #[must_use]
    pub fn parent_of(&self, key: &ObjectKey) -> Option<&P> {
        self.objects.get(key).map(|e| &e.parent)
    }

    /// Every cached object, in key order (kube-runtime's `Store::state`).
    #[must_use]
    pub fn state(&self) -> Vec<Arc<O>> {
        let mut entries: Vec<_> = self.objects.iter().collect();
        entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
        entries
            .into_iter()
            .map(|(_, e)| Arc::clone(&e.object))
            .collect()
    }

    /// The members of `parent`, in key order: what a reconcile of `parent` dispatched now
    /// would get.
    #[must_use]
    pub fn members(&self, parent: &P) -> Vec<Arc<O>> {
        self.members
            .get(parent)
            .into_iter()
            .flat_map(|keys| keys.iter())
            .filter_map(|key| self.get(key))
            .collect()
    }

    /// Every parent with at least one member, in order.
    #[must_use]
    pub fn parents(&self) -> Vec<P> {
        let mut parents: Vec<P> = self.members.keys().cloned().collect();
        parents.sort_unstable();
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

    /// Applies one change reported by the core.
    pub(crate) fn apply(&mut self, change: CacheChange<'_, O, P>) {
        match change {
            CacheChange::Cleared => {
                self.objects = imbl::HashMap::new();
                self.members = imbl::HashMap::new();
            }
            CacheChange::Set {
                key,
                object,
                parent,
            } => {
                let entry = Entry {
                    object: Arc::clone(object),
                    parent: parent.clone(),
                };
                match self.objects.insert(key.clone(), entry) {
                    Some(old) if old.parent == *parent => {}
                    Some(old) => {
                        self.unindex(key, &old.parent);
                        self.index(key, parent);
                    }
                    None => self.index(key, parent),
                }
            }
            CacheChange::Removed { key } => {
                if let Some(old) = self.objects.remove(key) {
                    self.unindex(key, &old.parent);
                }
            }
        }
    }

    fn index(&mut self, key: &ObjectKey, parent: &P) {
        self.members
            .entry(parent.clone())
            .or_default()
            .insert(key.clone());
    }

    fn unindex(&mut self, key: &ObjectKey, parent: &P) {
        if let Some(keys) = self.members.get_mut(parent) {
            keys.remove(key);
            if keys.is_empty() {
                self.members.remove(parent);
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

impl<O, P: Clone + Hash + Eq> Published<O, P> {
    pub(crate) fn new() -> Self {
        Published {
            snapshot: Mutex::new(CacheSnapshot::default()),
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

impl<O, P: Clone + Hash + Eq + Ord> Cache<O, P> {
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

    fn set(snapshot: &mut CacheSnapshot<String, String>, key: &str, value: &str, parent: &str) {
        let key = ObjectKey::new(None, key);
        let object = Arc::new(value.to_owned());
        snapshot.apply(CacheChange::Set {
            key: &key,
            object: &object,
            parent: &parent.to_owned(),
        });
    }

    #[test]
    fn a_snapshot_never_sees_later_writes() {
        let mut live = CacheSnapshot::default();
        set(&mut live, "a", "a1", "p1");
        set(&mut live, "b", "b1", "p1");
        let before = live.clone();
        set(&mut live, "a", "a2", "p2");
        live.apply(CacheChange::Removed {
            key: &ObjectKey::new(None, "b"),
        });
        let values = |s: &CacheSnapshot<String, String>| {
            s.state().iter().map(|o| o.to_string()).collect::<Vec<_>>()
        };
        assert_eq!(values(&before), ["a1", "b1"]);
        assert_eq!(before.members(&"p1".into()).len(), 2);
        assert_eq!(values(&live), ["a2"]);
        assert!(live.members(&"p1".into()).is_empty());
        assert_eq!(live.parents(), ["p2"]);
        assert_eq!(
            live.parent_of(&ObjectKey::new(None, "a")),
            Some(&"p2".into())
        );
        live.apply(CacheChange::Cleared);
        assert!(live.is_empty() && live.parents().is_empty());
    }
}
