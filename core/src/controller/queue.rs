//! The work queue: insertion-ordered dedup of parent keys, with client-go's dirty/processing
//! protocol so that a key is never handed out twice at once.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::hash::Hash;

use crate::hashing::FixedState;
use crate::time::Instant;

/// The sets are only probed, never iterated, so their order cannot reach an output; `queue`
/// holds the order.
type KeySet<K> = HashSet<K, FixedState>;

/// Normal-priority keys handed out in a row, while low-priority keys wait, before one low
/// key goes: low keys get at least a quarter of the dispatches, so none starves.
pub const NORMAL_IN_A_ROW: u32 = 3;

/// Keys waiting for a reconcile, and keys being reconciled.
///
/// - `add` of a queued key is a no-op (dedup);
/// - `add` of a key being processed marks it dirty: it is queued again, once, by `done`;
/// - `pop` hands out the oldest key and marks it processing.
///
/// With priorities ([`WorkQueue::add_low`]): a key asked for at low priority waits in a
/// second FIFO; asked for again at normal priority it moves up. `pop` takes normal keys
/// first, but never more than [`NORMAL_IN_A_ROW`] in a row while low keys wait, so the
/// low key at position `n` is handed out within `(NORMAL_IN_A_ROW + 1) · n` pops however
/// steady the normal stream (the starvation of controller-runtime issue #3496 cannot
/// happen).
///
/// Bounded by the number of distinct keys: each key is at most once in `queue`, once in
/// `dirty` and once in `processing`; `low` holds each key at most once live, plus the
/// entries left behind by moves up (one per move, skipped when reached and never revived:
/// each entry carries the sequence number its key was queued under).
#[derive(Debug)]
pub struct WorkQueue<K> {
    queue: VecDeque<K>,
    low: VecDeque<(K, u64)>,
    /// Keys that need a reconcile: those in `queue`, plus processing keys re-added meanwhile.
    dirty: KeySet<K>,
    /// Dirty keys asked for at low priority only, with the sequence number of their live
    /// entry in `low` (`None` while the key is processing: queued on `done`).
    low_keys: HashMap<K, Option<u64>, FixedState>,
    low_seq: u64,
    processing: KeySet<K>,
    /// Keys waiting to be handed out (stale entries of `low` not counted).
    waiting: usize,
    normal_in_a_row: u32,
}

impl<K> Default for WorkQueue<K> {
    fn default() -> Self {
        WorkQueue {
            queue: VecDeque::new(),
            low: VecDeque::new(),
            dirty: KeySet::default(),
            low_keys: HashMap::default(),
            low_seq: 0,
            processing: KeySet::default(),
            waiting: 0,
            normal_in_a_row: 0,
        }
    }
}

impl<K: Eq + Hash + Clone> WorkQueue<K> {
    /// Asks for a reconcile of `key` at normal priority. Returns whether it was newly queued
    /// (a key moved up from low priority counts as queued already).
    pub fn add(&mut self, key: K) -> bool {
        if !self.dirty.insert(key.clone()) {
            if self.low_keys.remove(&key).is_some() && !self.processing.contains(&key) {
                // Moved up: its entry in `low` is left behind and skipped when reached.
                self.queue.push_back(key);
            }
            return false;
        }
        if self.processing.contains(&key) {
            return false;
        }
        self.queue.push_back(key);
        self.waiting += 1;
        true
    }

    /// Asks for a reconcile of `key` at low priority (a listing's or a resync's wake). A key
    /// already wanted keeps its priority. Returns whether it was newly queued.
    pub fn add_low(&mut self, key: K) -> bool {
        if !self.dirty.insert(key.clone()) {
            return false;
        }
        if self.processing.contains(&key) {
            self.low_keys.insert(key, None);
            return false;
        }
        self.push_low(key);
        self.waiting += 1;
        true
    }

    /// Whether `key` is wanted already (waiting, or re-added while processing): adding it
    /// again changes nothing. The workqueue metrics count only adds of keys not wanted.
    pub fn is_wanted(&self, key: &K) -> bool {
        self.dirty.contains(key)
    }

    /// Hands out the next key (see the type's rule) and marks it processing.
    pub fn pop(&mut self) -> Option<K> {
        self.drop_stale_low();
        let take_low = !self.low.is_empty()
            && (self.queue.is_empty() || self.normal_in_a_row >= NORMAL_IN_A_ROW);
        let key = if take_low {
            self.normal_in_a_row = 0;
            self.low.pop_front()?.0
        } else {
            let key = self.queue.pop_front()?;
            if !self.low.is_empty() {
                self.normal_in_a_row += 1;
            }
            key
        };
        debug_assert!(!self.processing.contains(&key), "a key is handed out twice");
        self.dirty.remove(&key);
        self.low_keys.remove(&key);
        self.processing.insert(key.clone());
        self.waiting -= 1;
        Some(key)
    }

    fn push_low(&mut self, key: K) {
        self.low_seq += 1;
        self.low_keys.insert(key.clone(), Some(self.low_seq));
        self.low.push_back((key, self.low_seq));
    }

    /// Drops the entries of `low` left behind by keys that moved up.
    fn drop_stale_low(&mut self) {
        while let Some((key, seq)) = self.low.front() {
            if self.low_keys.get(key) == Some(&Some(*seq)) {
                break;
            }
            self.low.pop_front();
        }
    }

    /// Marks `key` finished. If it was re-added meanwhile it is queued again, at the
    /// priority it was asked for; returns whether.
    pub fn done(&mut self, key: &K) -> bool {
        if !self.processing.remove(key) {
            return false;
        }
        if self.dirty.contains(key) {
            if self.low_keys.contains_key(key) {
                self.push_low(key.clone());
            } else {
                self.queue.push_back(key.clone());
            }
            self.waiting += 1;
            return true;
        }
        false
    }

    /// Keys waiting to be handed out.
    #[must_use]
    pub fn len(&self) -> usize {
        self.waiting
    }

    /// Keys handed out and not yet done.
    #[must_use]
    pub fn processing(&self) -> usize {
        self.processing.len()
    }

    /// Drops every waiting key (on stop).
    pub fn clear(&mut self) {
        self.queue.clear();
        self.low.clear();
        self.dirty.clear();
        self.low_keys.clear();
        self.processing.clear();
        self.waiting = 0;
        self.normal_in_a_row = 0;
    }
}

/// kube-runtime's debounce (`controller::Config::debounce`, its scheduler's `debounce`), on
/// the loop's virtual clock: a key asked for is held for `period` before it is queued, and
/// each new request for a key still held pushes it back to `period` after that request, so
/// a key is queued once its requests have paused for `period`. A key that is already wanted
/// (queued, or running and due again) is not held: it will run anyway, as kube-runtime
/// ignores a request for a message it already holds back.
///
/// Bounded by the number of distinct keys: each key is at most once in `due` and once in
/// `order`.
#[derive(Debug)]
pub struct Debounce<K> {
    period: std::time::Duration,
    /// Key → when it is queued, and whether every request for it was at low priority.
    due: BTreeMap<K, (Instant, bool)>,
    /// The same entries by time, then key: the first is the next deadline.
    order: BTreeSet<(Instant, K)>,
}

impl<K: Ord + Clone> Debounce<K> {
    /// Holds keys for `period`.
    #[must_use]
    pub fn new(period: std::time::Duration) -> Self {
        Debounce {
            period,
            due: BTreeMap::new(),
            order: BTreeSet::new(),
        }
    }

    /// A request for `key` at `now` (`low`: at low priority): held until `now + period`,
    /// pushing back any earlier hold of the key. A low request keeps a normal one normal.
    pub fn hold(&mut self, key: K, now: Instant, low: bool) {
        let at = now + self.period;
        let low = match self.due.get(&key) {
            Some(&(was, was_low)) => {
                self.order.remove(&(was, key.clone()));
                was_low && low
            }
            None => low,
        };
        self.order.insert((at, key.clone()));
        self.due.insert(key, (at, low));
    }

    /// The next key whose hold has ended by `now`, with whether it is low priority; keys
    /// come in the order their holds end, ties by key.
    pub fn pop_due(&mut self, now: Instant) -> Option<(K, bool)> {
        let (at, _) = self.order.first()?;
        if *at > now {
            return None;
        }
        let (_, key) = self.order.pop_first()?;
        let (_, low) = self.due.remove(&key)?;
        Some((key, low))
    }

    /// When the next hold ends.
    #[must_use]
    pub fn next_deadline(&self) -> Option<Instant> {
        self.order.first().map(|(at, _)| *at)
    }

    /// Keys held.
    #[cfg(test)]
    #[must_use]
    pub fn len(&self) -> usize {
        self.due.len()
    }

    /// Whether no key is held.
    #[cfg(test)]
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.due.is_empty()
    }

    /// Drops every hold (a stop, a lost term).
    pub fn clear(&mut self) {
        self.due.clear();
        self.order.clear();
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

    #[test]
    fn normal_keys_go_first_but_a_low_key_waits_at_most_four_pops() {
        let mut q = WorkQueue::default();
        for k in ["l1", "l2"] {
            q.add_low(k);
        }
        // A steady normal stream: a new normal key before every pop.
        let mut order = Vec::new();
        for i in 0..10 {
            q.add(["n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8", "n9"][i]);
            let k = q.pop().unwrap();
            q.done(&k);
            order.push(k);
        }
        let l1 = order.iter().position(|k| *k == "l1").unwrap();
        let l2 = order.iter().position(|k| *k == "l2").unwrap();
        assert!(l1 < 4 && l2 < 8, "{order:?}");
        assert_eq!(q.len(), 2);
    }

    #[test]
    fn a_low_key_asked_for_again_at_normal_priority_moves_up_once() {
        let mut q = WorkQueue::default();
        q.add("n");
        q.add_low("x");
        q.add("x");
        assert_eq!(q.len(), 2);
        assert_eq!(q.pop(), Some("n"));
        assert_eq!(q.pop(), Some("x"));
        assert_eq!(q.pop(), None, "the entry left behind in low is skipped");
        assert_eq!(q.len(), 0);
        // Re-added while processing at low priority: requeued at low on done.
        q.add_low("y");
        assert_eq!(q.pop(), Some("y"));
        q.add_low("y");
        assert!(q.done(&"y"));
        assert_eq!(q.pop(), Some("y"));
    }

    #[test]
    fn an_entry_left_behind_by_a_move_up_is_never_revived() {
        // The key that moved up is woken at low again: it queues behind z, not in its old
        // place ahead of it.
        let mut q = WorkQueue::default();
        q.add_low("y");
        q.add_low("x");
        q.add("x");
        assert_eq!(q.pop(), Some("x"));
        q.done(&"x");
        q.add_low("z");
        q.add_low("x");
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(order, ["y", "z", "x"]);
    }

    fn at(secs: u64) -> Instant {
        Instant::from_duration(std::time::Duration::from_secs(secs))
    }

    #[test]
    fn a_debounced_key_waits_until_its_requests_pause_for_the_period() {
        let mut d = Debounce::new(std::time::Duration::from_secs(5));
        d.hold("a", at(0), false);
        d.hold("b", at(1), false);
        // Each request for `a` within the window pushes it back.
        d.hold("a", at(3), false);
        assert_eq!(d.next_deadline(), Some(at(6)));
        assert_eq!(d.pop_due(at(5)), None);
        assert_eq!(d.pop_due(at(6)), Some(("b", false)));
        assert_eq!(d.pop_due(at(7)), None);
        assert_eq!(d.next_deadline(), Some(at(8)));
        d.hold("a", at(7), true);
        assert_eq!(d.len(), 1, "one entry per key");
        assert_eq!(d.pop_due(at(11)), None);
        assert_eq!(
            d.pop_due(at(12)),
            Some(("a", false)),
            "a normal request keeps it normal"
        );
        assert!(d.is_empty());
        assert_eq!(d.next_deadline(), None);
    }

    #[test]
    fn keys_due_together_come_by_key_and_low_only_when_every_request_was() {
        let mut d = Debounce::new(std::time::Duration::from_secs(1));
        for k in ["c", "a", "b"] {
            d.hold(k, at(0), true);
        }
        d.hold("b", at(0), false);
        let due: Vec<_> = std::iter::from_fn(|| d.pop_due(at(1))).collect();
        assert_eq!(due, [("a", true), ("b", false), ("c", true)]);
        d.hold("x", at(2), false);
        d.clear();
        assert!(d.is_empty() && d.next_deadline().is_none());
    }
}
