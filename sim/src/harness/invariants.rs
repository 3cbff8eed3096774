//! The invariants that need to see every command: retry delays, cursors served, bounded
//! queues, and the priority queue's starvation rule.

use std::collections::{BTreeMap, BTreeSet};

use reconcile_core::{SourceId, Wake};

use crate::starvation::{StarvationCheck, StepWakes};
use crate::trace::Header;

use crate::harness::*;

impl Harness {
    /// Checks the priority queue's starvation invariant ([`crate::starvation`]) with
    /// `in_a_row` as the rule's normal keys in a row. Call before the first step, on a core
    /// with priorities on. The check sees only the primary source's wakes: with secondary
    /// sources it is left off (their wakes would be invisible to it).
    pub fn check_starvation(&mut self, header: &Header, in_a_row: u32) {
        if header.secondaries.is_empty() {
            self.starvation = Some(Box::new(Starvation {
                check: StarvationCheck::new(in_a_row),
                cached: BTreeMap::new(),
                step: StepWakes::default(),
                all_low: false,
            }));
        }
    }

    /// At the end of a run that is still running: every parent woken must have been
    /// dispatched (the eventual half of the starvation invariant).
    pub fn finish_starvation(&mut self) {
        let Some(s) = &self.starvation else {
            return;
        };
        let low = s.check.low_dispatched;
        let moved_up = s.check.moved_up;
        let normal = s.check.normal_dispatched;
        let (waited, bound) = s.check.longest_wait;
        for starved in s.check.finish(!self.running.is_empty()) {
            self.violation(starved.invariant, starved.detail);
        }
        *self
            .paths
            .entry("priority: low key dispatched within its bound")
            .or_default() += low;
        *self
            .paths
            .entry("priority: low key moved up by a live change")
            .or_default() += moved_up;
        *self
            .paths
            .entry("priority: normal key dispatched within its bound")
            .or_default() += normal;
        // Tenths of the bound the longest wait used: how close the run came.
        if let Some(tenths) = (waited * 10).checked_div(bound) {
            let tenths = tenths.min(10);
            const USED: [&str; 11] = [
                "priority: longest low wait 0/10 of its bound",
                "priority: longest low wait 1/10 of its bound",
                "priority: longest low wait 2/10 of its bound",
                "priority: longest low wait 3/10 of its bound",
                "priority: longest low wait 4/10 of its bound",
                "priority: longest low wait 5/10 of its bound",
                "priority: longest low wait 6/10 of its bound",
                "priority: longest low wait 7/10 of its bound",
                "priority: longest low wait 8/10 of its bound",
                "priority: longest low wait 9/10 of its bound",
                "priority: longest low wait 10/10 of its bound",
            ];
            self.count(USED[usize::try_from(tenths).unwrap_or(10)]);
        }
    }

    /// Checks that every WATCH starts from a version registered with [`served_rv`]
    /// (world mode, which knows every version it serves before the core sees it).
    ///
    /// [`served_rv`]: Self::served_rv
    pub fn check_cursors(&mut self) {
        self.check_cursors = true;
    }

    /// Records a resourceVersion the apiserver side served `source` (a LIST's or a frame's):
    /// a WATCH of that source may only start from one of these.
    pub fn served_rv(&mut self, source: SourceId, rv: &str) {
        self.served_rvs
            .entry(source)
            .or_default()
            .insert(rv.to_owned());
    }

    pub(super) fn violation(&mut self, invariant: &'static str, detail: String) {
        self.violations.push(Violation {
            at: self.now,
            invariant,
            detail,
        });
    }

    /// A LIST or WATCH that follows a failure must wait at least `retry_delay`.
    pub(super) fn check_retry_delay(&mut self, source: SourceId, what: &str) {
        if let Some(since) = self.retry_armed.remove(&source) {
            let waited = self.now.saturating_duration_since(since);
            if waited < self.retry_delay {
                self.violation(
                    "retry delay out of bounds",
                    format!(
                        "{what} of {source} {}s after a failure, retry_delay is {}s",
                        waited.as_secs_f64(),
                        self.retry_delay.as_secs_f64()
                    ),
                );
            }
        }
    }

    /// A parent with a retry or requeue timer: its timer's wake, invisible to the
    /// starvation check, may move it up.
    pub(super) fn exempt_from_starvation(&mut self, parent: &str) {
        if let Some(s) = &mut self.starvation {
            s.check.exempt(parent);
        }
    }

    /// Hands the step's wakes and dispatches to the starvation check.
    pub(super) fn check_starvation_step(&mut self) {
        let Some(s) = &mut self.starvation else {
            return;
        };
        if std::mem::take(&mut s.all_low) {
            // Every parent with members, as the core's store has them.
            let parents: BTreeSet<String> = s.cached.values().map(|(p, _)| p.clone()).collect();
            s.step.low.extend(parents);
        }
        let mut step = std::mem::take(&mut s.step);
        // Running before this step's dispatches: a key is never handed out while it runs.
        step.running = self
            .running
            .values()
            .map(|r| r.parent.clone())
            .filter(|p| !step.dispatched.contains(p))
            .collect();
        step.waiting = self.core.queued();
        let broken = s.check.step(step);
        for starved in broken {
            self.violation(starved.invariant, starved.detail);
        }
    }

    pub(super) fn after_step(&mut self) {
        self.check_starvation_step();
        // A reflector retry must be scheduled no later than retry_delay from now.
        if let Some(d) = self.core.poll_timeout()
            && matches!(d.wake, Wake::ListRetry | Wake::WatchRetry)
            && d.at > self.now + self.retry_delay
        {
            self.violation(
                "retry delay out of bounds",
                format!(
                    "{} scheduled at {}, later than now + retry_delay",
                    d.wake, d.at
                ),
            );
        }
        if let Some(bound) = self.queue_bound {
            let size = self.core.queued() + self.core.in_flight();
            if size > bound {
                self.violation(
                    "queue unbounded",
                    format!("{size} keys queued or running, bound {bound}"),
                );
            }
        }
    }
}
