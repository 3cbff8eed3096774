//! Read your own writes (Kubernetes' KEP-5647, "stale controller mitigation"): a key whose
//! last reconcile wrote is not dispatched again until the sources caching what it wrote have
//! observed those writes, so its next run does not act on a cache older than its own work.
//!
//! A reconcile reports each write as the source that caches the written kind and the
//! resourceVersion the apiserver answered ([`OwnWrite`]). The key then waits, per source,
//! until that source's cursor (the reflector's last seen resourceVersion: a LIST, any watch
//! frame, a bookmark) has reached the version. The wait costs nothing unless the key is
//! woken meanwhile: only then is a dispatch held. It is bounded: past `wait` from the write
//! the key is dispatched anyway.
//!
//! Fail open, as Kubernetes' own store does: a resourceVersion that is not a number, a
//! source without a numeric cursor, or a full table tracks nothing and holds nothing.
//!
//! Every collection is ordered; nothing here iterates a hash map.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::time::Instant;
use crate::vocabulary::{OwnWrite, SourceId, Untracked};

/// Where a source's cursor is, as the wait reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CursorState {
    /// At this resourceVersion.
    At(u64),
    /// No cursor now (listing, relisting): what it waits for is not observed yet.
    Listing,
    /// A cursor that is not a number: nothing can be compared, so the wait fails open.
    Opaque,
    /// Not a source with a cursor (in-process, or not configured).
    None,
}

impl CursorState {
    pub(crate) fn of(cursor: Option<&str>) -> Self {
        match cursor {
            None => CursorState::Listing,
            Some(c) => c.parse().map_or(CursorState::Opaque, CursorState::At),
        }
    }
}

/// What a popped key may do.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Gate {
    /// Dispatch it (nothing tracked, or every write observed).
    Go {
        /// How long a dispatch of it was held, when one was.
        held_for: Option<Duration>,
    },
    /// Hold it: a write is not observed yet. `first` when no dispatch was held before.
    Hold {
        /// The first hold of this wait.
        first: bool,
        /// What it waits for, by source.
        waits: Vec<(SourceId, u64)>,
    },
    /// The wait is over: dispatch it anyway.
    Expired {
        /// How long a dispatch was held, when one was.
        held_for: Option<Duration>,
    },
}

#[derive(Debug)]
struct Pending {
    /// Unobserved writes: the highest version per source.
    unmet: BTreeMap<SourceId, u64>,
    deadline: Instant,
    /// When a dispatch was first held.
    held_since: Option<Instant>,
}

/// The keys waiting for their writes to be observed.
///
/// Bounded by `max_keys` entries, each with one version per source, and two index entries
/// per version or deadline.
#[derive(Debug)]
pub(crate) struct OwnWrites<K> {
    wait: Duration,
    max_keys: usize,
    keys: BTreeMap<K, Pending>,
    /// Every unmet wait, by source: `(version, key)`, so a cursor releases from the front.
    waits: BTreeMap<SourceId, BTreeSet<(u64, K)>>,
    /// Every entry's deadline.
    expiry: BTreeSet<(Instant, K)>,
    /// The deadlines of the keys whose dispatch is held: the only ones worth a wakeup.
    held_expiry: BTreeSet<(Instant, K)>,
}

/// A key released by its sources' cursors.
pub(crate) struct Released<K> {
    pub(crate) key: K,
    /// How long its dispatch was held; `None` when none was (nothing to dispatch).
    pub(crate) held_for: Option<Duration>,
}

impl<K: Ord + Clone> OwnWrites<K> {
    pub(crate) fn new(wait: Duration, max_keys: usize) -> Self {
        OwnWrites {
            wait,
            max_keys,
            keys: BTreeMap::new(),
            waits: BTreeMap::new(),
            expiry: BTreeSet::new(),
            held_expiry: BTreeSet::new(),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Keys waiting now.
    pub(crate) fn len(&self) -> usize {
        self.keys.len()
    }

    /// Records `writes` of `key`'s reconcile, which ended at `now`. Writes already observed
    /// are dropped; those that cannot be waited for are reported in `untracked`.
    pub(crate) fn record(
        &mut self,
        now: Instant,
        key: &K,
        writes: &[OwnWrite],
        cursor: impl Fn(SourceId) -> CursorState,
        untracked: &mut Vec<(OwnWrite, Untracked)>,
    ) {
        let mut wanted: BTreeMap<SourceId, u64> = BTreeMap::new();
        for write in writes {
            let Ok(rv) = write.resource_version.parse::<u64>() else {
                untracked.push((write.clone(), Untracked::NotANumber));
                continue;
            };
            match cursor(write.source) {
                CursorState::At(at) if at >= rv => {}
                CursorState::At(_) | CursorState::Listing => {
                    let v = wanted.entry(write.source).or_insert(rv);
                    *v = (*v).max(rv);
                }
                CursorState::Opaque => untracked.push((write.clone(), Untracked::OpaqueCursor)),
                CursorState::None => untracked.push((write.clone(), Untracked::NoCursor)),
            }
        }
        if wanted.is_empty() {
            return;
        }
        if !self.keys.contains_key(key) && self.keys.len() >= self.max_keys {
            self.purge_expired(now);
            if self.keys.len() >= self.max_keys {
                let full = Untracked::Full(self.keys.len());
                for write in writes {
                    if wanted.contains_key(&write.source) {
                        untracked.push((write.clone(), full.clone()));
                    }
                }
                return;
            }
        }
        let deadline = now + self.wait;
        let pending = self.keys.entry(key.clone()).or_insert_with(|| Pending {
            unmet: BTreeMap::new(),
            deadline,
            held_since: None,
        });
        // A newer write restarts the wait; a held dispatch stays held.
        self.expiry.remove(&(pending.deadline, key.clone()));
        if pending.held_since.is_some() {
            self.held_expiry.remove(&(pending.deadline, key.clone()));
            self.held_expiry.insert((deadline, key.clone()));
        }
        pending.deadline = deadline;
        self.expiry.insert((deadline, key.clone()));
        for (source, rv) in wanted {
            let waits = self.waits.entry(source).or_default();
            let v = pending.unmet.entry(source).or_insert(rv);
            if *v < rv {
                waits.remove(&(*v, key.clone()));
                *v = rv;
            }
            waits.insert((rv, key.clone()));
        }
    }

    /// Decides a popped key's dispatch at `now`.
    pub(crate) fn gate(
        &mut self,
        now: Instant,
        key: &K,
        cursor: impl Fn(SourceId) -> CursorState,
    ) -> Gate {
        let Some(pending) = self.keys.get(key) else {
            return Gate::Go { held_for: None };
        };
        let held_for = pending.held_since.map(|t| now.saturating_duration_since(t));
        let unmet: Vec<(SourceId, u64)> = pending
            .unmet
            .iter()
            .map(|(s, v)| (*s, *v))
            .filter(|(s, v)| !observed(cursor(*s), *v))
            .collect();
        if unmet.is_empty() {
            self.remove(key);
            return Gate::Go { held_for };
        }
        if pending.deadline <= now {
            self.remove(key);
            return Gate::Expired { held_for };
        }
        let first = pending.held_since.is_none();
        if first {
            let deadline = pending.deadline;
            if let Some(p) = self.keys.get_mut(key) {
                p.held_since = Some(now);
            }
            self.held_expiry.insert((deadline, key.clone()));
        }
        Gate::Hold {
            first,
            waits: unmet,
        }
    }

    /// Releases every key whose writes the sources' cursors have now reached (or can no
    /// longer compare: fail open).
    pub(crate) fn observe(
        &mut self,
        now: Instant,
        cursor: impl Fn(SourceId) -> CursorState,
        released: &mut Vec<Released<K>>,
    ) {
        let sources: Vec<SourceId> = self.waits.keys().copied().collect();
        for source in sources {
            let upto = match cursor(source) {
                CursorState::At(at) => at,
                CursorState::Listing => continue,
                CursorState::Opaque | CursorState::None => u64::MAX,
            };
            let Some(waits) = self.waits.get_mut(&source) else {
                continue;
            };
            let mut met = Vec::new();
            while let Some((v, _)) = waits.first()
                && *v <= upto
            {
                if let Some((_, key)) = waits.pop_first() {
                    met.push(key);
                }
            }
            if waits.is_empty() {
                self.waits.remove(&source);
            }
            for key in met {
                let Some(pending) = self.keys.get_mut(&key) else {
                    continue;
                };
                pending.unmet.remove(&source);
                if pending.unmet.is_empty() {
                    let held_for = pending.held_since.map(|t| now.saturating_duration_since(t));
                    self.remove(&key);
                    released.push(Released { key, held_for });
                }
            }
        }
    }

    /// The held keys whose wait is over at `now`, with how long each was held; entries
    /// that hold nothing and are past their wait are dropped.
    pub(crate) fn expire(&mut self, now: Instant) -> Vec<(K, Duration)> {
        let mut out = Vec::new();
        while let Some((at, key)) = self.held_expiry.first().cloned() {
            if at > now {
                break;
            }
            let held_for = self
                .keys
                .get(&key)
                .and_then(|p| p.held_since)
                .map_or(Duration::ZERO, |t| now.saturating_duration_since(t));
            self.remove(&key);
            out.push((key, held_for));
        }
        self.purge_expired(now);
        out
    }

    /// When the first held key's wait ends.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.held_expiry.first().map(|(at, _)| *at)
    }

    pub(crate) fn clear(&mut self) {
        self.keys.clear();
        self.waits.clear();
        self.expiry.clear();
        self.held_expiry.clear();
    }

    /// Drops the entries past their wait that hold no dispatch.
    fn purge_expired(&mut self, now: Instant) {
        let due: Vec<K> = self
            .expiry
            .iter()
            .take_while(|(at, _)| *at <= now)
            .map(|(_, k)| k.clone())
            .collect();
        for key in due {
            if self.keys.get(&key).is_some_and(|p| p.held_since.is_none()) {
                self.remove(&key);
            }
        }
    }

    fn remove(&mut self, key: &K) {
        let Some(pending) = self.keys.remove(key) else {
            return;
        };
        for (s, v) in pending.unmet {
            if let Some(waits) = self.waits.get_mut(&s) {
                waits.remove(&(v, key.clone()));
                if waits.is_empty() {
                    self.waits.remove(&s);
                }
            }
        }
        self.expiry.remove(&(pending.deadline, key.clone()));
        self.held_expiry.remove(&(pending.deadline, key.clone()));
    }
}

/// Whether a write at `rv` is observed by a source whose cursor is `cursor`; a cursor that
/// cannot be compared fails open.
fn observed(cursor: CursorState, rv: u64) -> bool {
    match cursor {
        CursorState::At(at) => at >= rv,
        CursorState::Listing => false,
        CursorState::Opaque | CursorState::None => true,
    }
}
