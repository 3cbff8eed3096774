//! The work queue: insertion-ordered dedup of parent keys, with client-go's dirty/processing
//! protocol so that a key is never handed out twice at once.

use std::collections::{HashSet, VecDeque};
use std::hash::Hash;

use crate::hashing::FixedState;

/// The sets are only probed, never iterated, so their order cannot reach an output; `queue`
/// holds the order.
type KeySet<K> = HashSet<K, FixedState>;

/// Keys waiting for a reconcile, and keys being reconciled.
///
/// - `add` of a queued key is a no-op (dedup);
/// - `add` of a key being processed marks it dirty: it is queued again, once, by `done`;
/// - `pop` hands out the oldest key and marks it processing.
///
/// Bounded by the number of distinct keys: each key is at most once in `queue`, once in
/// `dirty` and once in `processing`.
#[derive(Debug)]
pub struct WorkQueue<K> {
    queue: VecDeque<K>,
    /// Keys that need a reconcile: those in `queue`, plus processing keys re-added meanwhile.
    dirty: KeySet<K>,
    processing: KeySet<K>,
}

impl<K> Default for WorkQueue<K> {
    fn default() -> Self {
        WorkQueue {
            queue: VecDeque::new(),
            dirty: KeySet::default(),
            processing: KeySet::default(),
        }
    }
}

impl<K: Eq + Hash + Clone> WorkQueue<K> {
    /// Asks for a reconcile of `key`. Returns whether it was newly queued.
    pub fn add(&mut self, key: K) -> bool {
        if !self.dirty.insert(key.clone()) {
            return false;
        }
        if self.processing.contains(&key) {
            return false;
        }
        self.queue.push_back(key);
        true
    }

    /// Hands out the oldest queued key and marks it processing.
    pub fn pop(&mut self) -> Option<K> {
        let key = self.queue.pop_front()?;
        debug_assert!(!self.processing.contains(&key), "a key is handed out twice");
        self.dirty.remove(&key);
        self.processing.insert(key.clone());
        Some(key)
    }

    /// Marks `key` finished. If it was re-added meanwhile it is queued again; returns whether.
    pub fn done(&mut self, key: &K) -> bool {
        if !self.processing.remove(key) {
            return false;
        }
        if self.dirty.contains(key) {
            self.queue.push_back(key.clone());
            return true;
        }
        false
    }

    /// Keys waiting to be handed out.
    #[must_use]
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// Keys handed out and not yet done.
    #[must_use]
    pub fn processing(&self) -> usize {
        self.processing.len()
    }

    /// Drops every waiting key (on stop).
    pub fn clear(&mut self) {
        self.queue.clear();
        self.dirty.clear();
        self.processing.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_come_out_in_insertion_order_once() {
        let mut q = WorkQueue::default();
        assert!(q.add("b"));
        assert!(q.add("a"));
        assert!(!q.add("b"));
        assert_eq!(q.pop(), Some("b"));
        assert_eq!(q.pop(), Some("a"));
        assert_eq!(q.pop(), None);
    }

    #[test]
    fn key_added_while_processing_gets_exactly_one_follow_up() {
        let mut q = WorkQueue::default();
        q.add("a");
        assert_eq!(q.pop(), Some("a"));
        for _ in 0..5 {
            assert!(!q.add("a"));
        }
        assert_eq!(q.pop(), None, "never handed out twice at once");
        assert!(q.done(&"a"));
        assert_eq!(q.pop(), Some("a"));
        assert!(!q.done(&"a"));
        assert_eq!(q.pop(), None);
    }

    #[test]
    fn done_of_an_unknown_key_is_ignored() {
        let mut q: WorkQueue<&str> = WorkQueue::default();
        assert!(!q.done(&"x"));
        assert_eq!(q.processing(), 0);
    }
}
