//! Per-key retry: exponential backoff with latest-wins deadlines.
//!
//! One mechanism replaces client-go's rate limiter and delaying queue. A key has at most one
//! deadline; a new failure or requeue overwrites it, so the delay always matches the key's
//! current state, and a success clears both the deadline and the failure count.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::time::Instant;

/// Exponential backoff bounds: `base · 2^(failures-1)`, capped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The delay after the first failure (default 1 s).
    pub base: Duration,
    /// The largest delay (default 60 s).
    pub cap: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            base: Duration::from_secs(1),
            cap: Duration::from_secs(60),
        }
    }
}

impl Backoff {
    /// The delay after `failures` consecutive failures (`failures >= 1`).
    #[must_use]
    pub fn delay(&self, failures: u32) -> Duration {
        let exponent = failures.saturating_sub(1).min(63);
        let factor = 1u64 << exponent;
        u32::try_from(factor)
            .ok()
            .and_then(|f| self.base.checked_mul(f))
            .map_or(self.cap, |d| d.min(self.cap))
    }
}

/// Failure counts and deadlines per key.
///
/// Bounded by the number of keys that failed or asked to be requeued and have not succeeded
/// since: one record and at most one timer each.
#[derive(Debug)]
pub struct RetryScheduler<K> {
    backoff: Backoff,
    failures: BTreeMap<K, u32>,
    deadlines: BTreeMap<K, (Instant, u64)>,
    /// Ordered by deadline, then by scheduling order, so ties fire deterministically.
    timers: BTreeMap<(Instant, u64), K>,
    seq: u64,
}

impl<K: Ord + Clone> RetryScheduler<K> {
    /// A scheduler with these bounds.
    #[must_use]
    pub fn new(backoff: Backoff) -> Self {
        RetryScheduler {
            backoff,
            failures: BTreeMap::new(),
            deadlines: BTreeMap::new(),
            timers: BTreeMap::new(),
            seq: 0,
        }
    }

    /// Consecutive failures of `key` so far.
    #[must_use]
    pub fn failures(&self, key: &K) -> u32 {
        self.failures.get(key).copied().unwrap_or(0)
    }

    /// Records a failure and schedules the retry. Returns the failure count and the delay.
    pub fn failed(&mut self, now: Instant, key: K) -> (u32, Duration) {
        let failures = self.failures.entry(key.clone()).or_insert(0);
        *failures = failures.saturating_add(1);
        let failures = *failures;
        let delay = self.backoff.delay(failures);
        self.schedule(now + delay, key);
        (failures, delay)
    }

    /// A success that asks to run again after `delay`: clears the failures, sets the deadline.
    pub fn requeue_after(&mut self, now: Instant, key: K, delay: Duration) {
        self.failures.remove(&key);
        self.schedule(now + delay, key);
    }

    /// A success: forget the key.
    pub fn succeeded(&mut self, key: &K) {
        self.failures.remove(key);
        self.cancel(key);
    }

    /// The earliest deadline.
    #[must_use]
    pub fn next_deadline(&self) -> Option<Instant> {
        self.timers.keys().next().map(|(at, _)| *at)
    }

    /// Takes one key whose deadline has passed, earliest first. Its failure count is kept, so
    /// the next failure backs off further.
    pub fn pop_due(&mut self, now: Instant) -> Option<K> {
        let entry = self.timers.first_entry()?;
        if entry.key().0 > now {
            return None;
        }
        let key = entry.remove();
        self.deadlines.remove(&key);
        Some(key)
    }

    /// Keys with a pending deadline.
    #[must_use]
    #[cfg(test)]
    pub fn pending(&self) -> usize {
        self.timers.len()
    }

    /// Forgets everything (on stop).
    pub fn clear(&mut self) {
        self.failures.clear();
        self.deadlines.clear();
        self.timers.clear();
    }

    fn schedule(&mut self, at: Instant, key: K) {
        self.cancel(&key);
        self.seq += 1;
        self.timers.insert((at, self.seq), key.clone());
        self.deadlines.insert(key, (at, self.seq));
        debug_assert_eq!(self.timers.len(), self.deadlines.len());
    }

    fn cancel(&mut self, key: &K) {
        if let Some(slot) = self.deadlines.remove(key) {
            self.timers.remove(&slot);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn backoff_doubles_from_one_second_up_to_sixty() {
        let b = Backoff::default();
        let delays: Vec<u64> = (1..=9).map(|n| b.delay(n).as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
        assert_eq!(b.delay(u32::MAX), Duration::from_secs(60));
    }

    #[test]
    fn latest_failure_wins_the_deadline() {
        let mut r = RetryScheduler::new(Backoff::default());
        let t0 = Instant::ZERO;
        assert_eq!(r.failed(t0, "a"), (1, S));
        assert_eq!(r.failed(t0, "a"), (2, 2 * S));
        assert_eq!(r.pending(), 1);
        assert_eq!(r.next_deadline(), Some(t0 + 2 * S));
        assert_eq!(r.pop_due(t0 + S), None);
        assert_eq!(r.pop_due(t0 + 2 * S), Some("a"));
        assert_eq!(r.failures(&"a"), 2, "the count survives the retry");
    }

    #[test]
    fn success_clears_failures_and_deadline() {
        let mut r = RetryScheduler::new(Backoff::default());
        r.failed(Instant::ZERO, "a");
        r.succeeded(&"a");
        assert_eq!(r.failures(&"a"), 0);
        assert_eq!(r.next_deadline(), None);
    }

    #[test]
    fn requeue_after_overrides_a_backoff_and_resets_failures() {
        let mut r = RetryScheduler::new(Backoff::default());
        r.failed(Instant::ZERO, "a");
        r.requeue_after(Instant::ZERO, "a", 30 * S);
        assert_eq!(r.failures(&"a"), 0);
        assert_eq!(r.next_deadline(), Some(Instant::ZERO + 30 * S));
    }

    #[test]
    fn equal_deadlines_fire_in_scheduling_order() {
        let mut r = RetryScheduler::new(Backoff::default());
        r.failed(Instant::ZERO, "b");
        r.failed(Instant::ZERO, "a");
        assert_eq!(r.pop_due(Instant::ZERO + S), Some("b"));
        assert_eq!(r.pop_due(Instant::ZERO + S), Some("a"));
    }
}
