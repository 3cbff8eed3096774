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

/// One change a shared cache sends a subscriber: the objects are the cache's own pointers,
/// never copies, so a queued change costs a pointer or two whatever the object's size.
pub(crate) enum Feed<O> {
    /// The whole cache: the first change of every subscription, and after a relist.
    Replace(Arc<Vec<Arc<O>>>),
    /// Inserted or updated.
    Upsert(Arc<O>),
    /// Removed; the object is its last cached state.
    Delete(Arc<O>),
    /// The changes sent so far reflect the collection up to this resourceVersion: the
    /// shared cache's cursor as of its publish.
    Cursor(Arc<str>),
}

impl<O> Clone for Feed<O> {
    fn clone(&self) -> Self {
        match self {
            Feed::Replace(all) => Feed::Replace(Arc::clone(all)),
            Feed::Upsert(o) => Feed::Upsert(Arc::clone(o)),
            Feed::Delete(o) => Feed::Delete(Arc::clone(o)),
            Feed::Cursor(rv) => Feed::Cursor(Arc::clone(rv)),
        }
    }
}

impl<O> fmt::Debug for Feed<O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Feed::Replace(all) => write!(f, "Replace({} objects)", all.len()),
            Feed::Upsert(_) => f.write_str("Upsert"),
            Feed::Delete(_) => f.write_str("Delete"),
            Feed::Cursor(rv) => write!(f, "Cursor({rv})"),
        }
    }
}

/// The most changes staged between two publishes before they collapse into one whole
/// [`Feed::Replace`]: bounds the staging buffer whatever a turn fed.
const MAX_STAGED: usize = 4096;

/// The cache changes of one or more drains, not yet published.
#[derive(Debug)]
pub(crate) struct Staged<O> {
    /// Whether the changes are collected one by one (there were subscribers at the drain).
    collect: bool,
    changes: Vec<Feed<O>>,
    /// Send the whole cache instead of `changes`: a relist, too many changes, or changes
    /// made while nobody was subscribed (one may subscribe before they are published).
    whole: bool,
}

impl<O> Staged<O> {
    /// Nothing staged; `collect` when someone is subscribed.
    pub(crate) fn new(collect: bool) -> Self {
        Staged {
            collect,
            changes: Vec::new(),
            whole: false,
        }
    }
}

impl<O: Object> Staged<O> {
    /// Notes `change`, before it is applied to `cache` (a removal needs the last state).
    pub(crate) fn note<P: Ord>(
        &mut self,
        change: &CacheChange<'_, O, P>,
        cache: &CacheSnapshot<O, P>,
    ) {
        if self.whole {
            return;
        }
        if !self.collect || matches!(change, CacheChange::Cleared) {
            self.whole = true;
            self.changes = Vec::new();
            return;
        }
        match change {
            CacheChange::Cleared => {}
            CacheChange::Set { object, .. } => self.changes.push(Feed::Upsert(Arc::clone(object))),
            CacheChange::Removed { key } => {
                if let Some(last) = cache.get(key) {
                    self.changes.push(Feed::Delete(last));
                }
            }
        }
        if self.changes.len() > MAX_STAGED {
            self.whole = true;
            self.changes = Vec::new();
        }
    }
}

impl<O> Staged<O> {
    fn merge(&mut self, later: Staged<O>) {
        if self.whole || later.whole {
            self.whole = true;
            self.changes = Vec::new();
            return;
        }
        self.changes.extend(later.changes);
        if self.changes.len() > MAX_STAGED {
            self.whole = true;
            self.changes = Vec::new();
        }
    }
}

/// The subscribers of a shared cache and what is staged for them.
struct Share<O> {
    /// One bounded channel per subscriber, in subscription order.
    subscribers: Vec<async_channel::Sender<Feed<O>>>,
    staged: Staged<O>,
    /// The cache's controller has ended: no one may subscribe.
    ended: bool,
    /// Subscribers dropped because their buffer was full (each resubscribes).
    lagged: u64,
    /// Subscriptions made, resubscriptions included.
    subscriptions: u64,
    /// The cursor as of the last publish (`None` while relisting, or for a source without
    /// one): a subscriber gets it after its snapshot, and after each publish that moved it.
    cursor: Option<Arc<str>>,
}

/// A shared cache's figures ([`Cache::share_stats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShareStats {
    /// Subscribers now fed.
    pub subscribers: usize,
    /// Times a subscriber fell a whole buffer behind and was cut off, to resubscribe with a
    /// fresh snapshot.
    pub lagged: u64,
    /// Subscriptions made so far, resubscriptions included.
    pub subscriptions: u64,
}

/// What the driver publishes and every [`Cache`] reads.
pub(crate) struct Published<O, P> {
    snapshot: Mutex<CacheSnapshot<O, P>>,
    ready: Mutex<Readiness>,
    changed: Event,
    /// Taken before `snapshot` whenever both are: a publish and a subscription are ordered
    /// by it, so a subscriber sees one snapshot then every later change, none twice.
    share: Mutex<Share<O>>,
    /// The collection the cache mirrors, as (API group, plural): its own LIST+WATCH's, or
    /// the shared cache's it subscribes to. A write a reconcile reports to it waits on the
    /// cursor. Set once, when the controller is built.
    resource: std::sync::OnceLock<(String, String)>,
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
            share: Mutex::new(Share {
                subscribers: Vec::new(),
                staged: Staged::new(false),
                ended: false,
                lagged: 0,
                subscriptions: 0,
                cursor: None,
            }),
            resource: std::sync::OnceLock::new(),
        }
    }

    /// Names the collection the cache mirrors; the first call wins.
    pub(crate) fn set_resource(&self, group: String, plural: String) {
        let _ = self.resource.set((group, plural));
    }

    /// The collection the cache mirrors, when known.
    pub(crate) fn resource(&self) -> Option<&(String, String)> {
        self.resource.get()
    }

    fn share(&self) -> MutexGuard<'_, Share<O>> {
        // Every update leaves the share whole, so a poisoned lock still holds a valid one.
        self.share
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether anyone is subscribed: the driver collects changes one by one only then.
    pub(crate) fn has_subscribers(&self) -> bool {
        !self.share().subscribers.is_empty()
    }

    /// Keeps a drain's changes for the next [`publish`](Published::publish).
    pub(crate) fn stage(&self, staged: Staged<O>) {
        if staged.whole || !staged.changes.is_empty() {
            self.share().staged.merge(staged);
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

    /// Replaces what readers see, and sends the changes staged since the last publish to
    /// every subscriber, then `cursor` when it moved: the cursor the snapshot is at (the
    /// core's, read in the same turn). A subscriber whose buffer is full is cut off (its
    /// channel closed): it resubscribes, with a fresh snapshot.
    pub(crate) fn publish(&self, snapshot: CacheSnapshot<O, P>, cursor: Option<&str>)
    where
        O: Object,
        P: Ord,
    {
        let mut share = self.share();
        let staged = std::mem::replace(&mut share.staged, Staged::new(false));
        let moved = match (cursor, share.cursor.as_deref()) {
            (Some(now), Some(before)) => now != before,
            (now, before) => now.is_some() != before.is_some(),
        };
        if moved {
            share.cursor = cursor.map(Arc::from);
        }
        // A cursor gone (a relist under way) is not sent: subscribers keep the last one,
        // which the listing's own cursor will pass.
        let send_cursor = if moved { share.cursor.clone() } else { None };
        if share.subscribers.is_empty()
            || (!staged.whole && staged.changes.is_empty() && send_cursor.is_none())
        {
            *self.snapshot() = snapshot;
            return;
        }
        let mut feed = if staged.whole {
            vec![Feed::Replace(Arc::new(snapshot.state()))]
        } else {
            staged.changes
        };
        feed.extend(send_cursor.map(Feed::Cursor));
        *self.snapshot() = snapshot;
        let mut lagged = 0;
        share.subscribers.retain(|tx| {
            for change in &feed {
                match tx.try_send(change.clone()) {
                    Ok(()) => {}
                    Err(async_channel::TrySendError::Full(_)) => {
                        tx.close();
                        lagged += 1;
                        return false;
                    }
                    Err(async_channel::TrySendError::Closed(_)) => return false,
                }
            }
            true
        });
        if lagged > 0 {
            tracing::warn!(
                lagged,
                "shared cache: a subscriber fell a buffer behind; it resubscribes"
            );
        }
        share.lagged += lagged;
    }

    /// Registers a subscriber whose buffer holds `buffer` changes, and queues it the
    /// published snapshot, both under the share's lock. `None` once the controller ended.
    pub(crate) fn subscribe(&self, buffer: usize) -> Option<async_channel::Receiver<Feed<O>>>
    where
        O: Object,
        P: Ord,
    {
        let mut share = self.share();
        if share.ended {
            return None;
        }
        // Room for the snapshot and its cursor at least.
        let (tx, rx) = async_channel::bounded(buffer.max(2));
        let all = self.snapshot().state();
        // A fresh channel with room for two: cannot fail.
        let _ = tx.try_send(Feed::Replace(Arc::new(all)));
        if let Some(cursor) = &share.cursor {
            let _ = tx.try_send(Feed::Cursor(Arc::clone(cursor)));
        }
        share.subscribers.push(tx);
        share.subscriptions += 1;
        Some(rx)
    }

    /// The share's figures.
    pub(crate) fn share_stats(&self) -> ShareStats {
        let share = self.share();
        ShareStats {
            subscribers: share.subscribers.len(),
            lagged: share.lagged,
            subscriptions: share.subscriptions,
        }
    }

    /// Whether the controller has ended (no one may subscribe again).
    pub(crate) fn share_ended(&self) -> bool {
        self.share().ended
    }

    /// The first whole listing is in what readers see.
    pub(crate) fn set_ready(&self) {
        *self.readiness() = Readiness::Ready;
        self.changed.notify(usize::MAX);
    }

    /// The controller ended; a reader still waiting for the first sync stops waiting, and
    /// every subscriber's channel is closed.
    pub(crate) fn set_ended(&self) {
        {
            let mut share = self.share();
            share.ended = true;
            for tx in share.subscribers.drain(..) {
                tx.close();
            }
        }
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

    /// How many controllers are fed from this cache as a shared source, and how often one
    /// fell a whole buffer behind and resubscribed.
    #[must_use]
    pub fn share_stats(&self) -> ShareStats {
        self.published.share_stats()
    }

    /// Subscribes with a buffer of `buffer` changes: a `Replace` of the published cache
    /// first, then every later change. `None` once the controller ended.
    pub(crate) fn subscribe(&self, buffer: usize) -> Option<async_channel::Receiver<Feed<O>>> {
        self.published.subscribe(buffer)
    }

    /// The collection the cache mirrors, as (API group, plural), when known.
    pub(crate) fn resource(&self) -> Option<&(String, String)> {
        self.published.resource()
    }

    /// Whether the cache's controller has ended for good.
    pub(crate) fn has_ended(&self) -> bool {
        self.published.share_ended()
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

    /// What a subscriber has queued, as `R:<names>`, `U:<name>`, `D:<name>`.
    fn queued(rx: &async_channel::Receiver<Feed<PodView>>) -> Vec<String> {
        let name = |o: &Arc<PodView>| o.key().unwrap().to_string();
        std::iter::from_fn(|| rx.try_recv().ok())
            .map(|f| match f {
                Feed::Replace(all) => {
                    format!("R:{}", all.iter().map(name).collect::<Vec<_>>().join(","))
                }
                Feed::Upsert(o) => format!("U:{}", name(&o)),
                Feed::Delete(o) => format!("D:{}", name(&o)),
                Feed::Cursor(rv) => format!("C:{rv}"),
            })
            .collect()
    }

    /// One drain as the driver does it: stage each change against the copy, apply it,
    /// publish.
    fn turn(
        published: &Published<PodView, String>,
        copy: &mut CacheSnapshot<PodView, String>,
        changes: &[(&str, Option<&str>)],
    ) {
        let mut staged = Staged::new(published.has_subscribers());
        for (name, cell) in changes {
            let object = pod("a", name, cell.unwrap_or("p"));
            let key = object.key().unwrap();
            let change = match cell {
                Some(_) => CacheChange::Set {
                    key: &key,
                    object: &object,
                    parent: &String::new(),
                },
                None => CacheChange::Removed { key: &key },
            };
            staged.note(&change, copy);
            copy.apply(change);
        }
        published.stage(staged);
        published.publish(copy.clone(), None);
    }

    #[test]
    fn a_late_subscriber_gets_the_published_snapshot_then_every_later_change() {
        let published = Published::new();
        let mut copy = CacheSnapshot::new(KeyMap::by_label("cell"));
        turn(&published, &mut copy, &[("x", Some("p")), ("y", Some("p"))]);
        let rx = published.subscribe(8).unwrap();
        turn(&published, &mut copy, &[("z", Some("q")), ("x", None)]);
        assert_eq!(queued(&rx), ["R:a/x,a/y", "U:a/z", "D:a/x"]);
        assert_eq!(published.share_stats().subscribers, 1);
    }

    #[test]
    fn a_subscriber_joining_between_a_drain_and_its_publish_gets_the_whole_cache() {
        let published = Published::new();
        let mut copy = CacheSnapshot::new(KeyMap::by_label("cell"));
        turn(&published, &mut copy, &[("x", Some("p"))]);
        // The drain ran with nobody subscribed, so its changes were not collected...
        let mut staged = Staged::new(published.has_subscribers());
        let object = pod("a", "y", "p");
        let key = object.key().unwrap();
        let change = CacheChange::Set {
            key: &key,
            object: &object,
            parent: &String::new(),
        };
        staged.note(&change, &copy);
        copy.apply(change);
        published.stage(staged);
        // ...then someone subscribes before the publish: the old snapshot, then the new
        // whole one, so y is not lost.
        let rx = published.subscribe(8).unwrap();
        published.publish(copy.clone(), None);
        assert_eq!(queued(&rx), ["R:a/x", "R:a/x,a/y"]);
    }

    #[test]
    fn a_relist_reaches_subscribers_as_one_replace() {
        let published = Published::new();
        let mut copy = CacheSnapshot::new(KeyMap::by_label("cell"));
        turn(&published, &mut copy, &[("x", Some("p"))]);
        let rx = published.subscribe(8).unwrap();
        let mut staged = Staged::new(published.has_subscribers());
        staged.note(&CacheChange::Cleared, &copy);
        copy.apply(CacheChange::Cleared);
        let object = pod("a", "y", "p");
        let key = object.key().unwrap();
        let change = CacheChange::Set {
            key: &key,
            object: &object,
            parent: &String::new(),
        };
        staged.note(&change, &copy);
        copy.apply(change);
        published.stage(staged);
        published.publish(copy.clone(), None);
        assert_eq!(queued(&rx), ["R:a/x", "R:a/y"]);
    }

    #[test]
    fn a_subscriber_a_buffer_behind_is_cut_off_and_counted() {
        let published = Published::new();
        let mut copy = CacheSnapshot::new(KeyMap::by_label("cell"));
        let slow = published.subscribe(2).unwrap();
        let quick = published.subscribe(8).unwrap();
        turn(&published, &mut copy, &[("x", Some("p")), ("y", Some("p"))]);
        // The slow one had the snapshot and room for one more: cut off after U:a/x.
        assert!(slow.is_closed());
        assert_eq!(queued(&slow), ["R:", "U:a/x"]);
        assert_eq!(queued(&quick), ["R:", "U:a/x", "U:a/y"]);
        assert_eq!(
            published.share_stats(),
            ShareStats {
                subscribers: 1,
                lagged: 1,
                subscriptions: 2,
            }
        );
        // It resubscribes: a fresh snapshot.
        let again = published.subscribe(2).unwrap();
        assert_eq!(queued(&again), ["R:a/x,a/y"]);
    }

    #[test]
    fn too_many_changes_between_publishes_collapse_into_the_whole_cache() {
        let published = Published::new();
        let mut copy = CacheSnapshot::new(KeyMap::by_label("cell"));
        let rx = published.subscribe(MAX_STAGED + 8).unwrap();
        let names: Vec<String> = (0..=MAX_STAGED).map(|i| format!("p{i:05}")).collect();
        let changes: Vec<(&str, Option<&str>)> =
            names.iter().map(|n| (n.as_str(), Some("p"))).collect();
        turn(&published, &mut copy, &changes);
        let got = queued(&rx);
        assert_eq!(got.len(), 2, "the snapshot, then one replace");
        assert!(got[1].starts_with("R:a/p00000,"));
    }

    #[test]
    fn the_cursor_follows_the_changes_it_covers_and_a_late_subscriber_gets_it_after_its_snapshot() {
        let published = Published::new();
        let mut copy = CacheSnapshot::new(KeyMap::by_label("cell"));
        let early = published.subscribe(8).unwrap();
        let mut staged = Staged::new(published.has_subscribers());
        let object = pod("a", "x", "p");
        let key = object.key().unwrap();
        let change = CacheChange::Set {
            key: &key,
            object: &object,
            parent: &String::new(),
        };
        staged.note(&change, &copy);
        copy.apply(change);
        published.stage(staged);
        published.publish(copy.clone(), Some("10"));
        // A publish with no change: only a cursor that moved is sent.
        published.publish(copy.clone(), Some("10"));
        published.publish(copy.clone(), Some("12"));
        // A relist under way has no cursor: nothing is sent, the next one is.
        published.publish(copy.clone(), None);
        let late = published.subscribe(8).unwrap();
        published.publish(copy.clone(), Some("15"));
        assert_eq!(queued(&early), ["R:", "U:a/x", "C:10", "C:12", "C:15"]);
        assert_eq!(queued(&late), ["R:a/x", "C:15"]);
        let again = published.subscribe(1).unwrap();
        assert_eq!(
            queued(&again),
            ["R:a/x", "C:15"],
            "room for both at any buffer"
        );
    }

    #[test]
    fn an_ended_cache_closes_its_subscribers_and_takes_no_more() {
        let published: Published<PodView, String> = Published::new();
        let rx = published.subscribe(8).unwrap();
        published.set_ended();
        assert!(rx.is_closed());
        assert!(published.subscribe(8).is_none());
        assert!(published.share_ended());
    }
}
