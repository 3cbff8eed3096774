//! The core's priority queue under a busy live stream: busy explore seeds hold the
//! starvation invariant, and the invariant fires when the rule it is held to is wrong or
//! the queue is strict priority (controller-runtime issue #3496's starvation).

use std::collections::{BTreeSet, VecDeque};

use reconcile_sim::explore::{self, BUSY_PROFILES, ExploreOptions};
use reconcile_sim::starvation::{CORE_NORMAL_IN_A_ROW, StarvationCheck, StepWakes};

fn busy(starvation_rule: u32) -> ExploreOptions {
    ExploreOptions {
        priority: true,
        starvation_rule,
        minimize: false,
        ..ExploreOptions::default()
    }
}

#[test]
fn busy_seeds_dispatch_every_low_key_within_its_bound() {
    let report = explore::explore(0..200, &busy(CORE_NORMAL_IN_A_ROW));
    let text = report.render(false);
    assert!(report.failures.is_empty(), "{text}");
    for profile in BUSY_PROFILES {
        assert!(report.profiles.contains_key(profile), "{profile}: {text}");
    }
    // The seeds went where the bound is tested: many low keys, some moved up by a live
    // change, low wakes from relists, resyncs and triggers, and waits that used the whole
    // bound (it is exact, not loose).
    let reached = |path: &str| report.paths.get(path).map_or(0, |(_, times)| *times);
    assert!(
        reached("priority: low key dispatched within its bound") > 10_000,
        "{text}"
    );
    for path in [
        "priority: low key moved up by a live change",
        "priority: longest low wait 10/10 of its bound",
        "relist: 410 ERROR frame",
        "resync",
        "reconcile-all trigger",
        "priority: normal key dispatched within its bound",
    ] {
        assert!(reached(path) > 0, "{path}: {text}");
    }
}

#[test]
fn busy_seeds_are_deterministic() {
    let opts = ExploreOptions {
        verbose: true,
        ..busy(CORE_NORMAL_IN_A_ROW)
    };
    assert_eq!(
        explore::explore(0..10, &opts).render(false),
        explore::explore(0..10, &opts).render(false)
    );
}

#[test]
fn a_rule_one_normal_key_too_short_makes_the_check_fire() {
    // The sim's model of the rule claims 2 normal keys in a row where the core hands out
    // 3: the waits that use the whole real bound exceed the claimed one.
    let report = explore::explore(0..30, &busy(CORE_NORMAL_IN_A_ROW - 1));
    let text = report.render(false);
    assert!(!report.failures.is_empty(), "{text}");
    for f in &report.failures {
        assert_eq!(f.violation.invariant, "low-priority key starved", "{text}");
    }
    assert!(text.contains("--priority"), "{text}");
}

/// A two-level queue with one worker: strict priority (`in_a_row: None`, every normal key
/// first) or the core's rule (`Some(k)`), as the check sees a queue: wakes and pops.
#[derive(Default)]
struct TwoLevel {
    in_a_row: Option<u32>,
    normal: VecDeque<String>,
    low: VecDeque<String>,
    queued: BTreeSet<String>,
    running: Option<String>,
    again: bool,
    row: u32,
}

impl TwoLevel {
    fn add(&mut self, key: &str) {
        if self.running.as_deref() == Some(key) {
            self.again = true;
        } else if self.queued.insert(key.to_owned()) {
            self.normal.push_back(key.to_owned());
        } else if let Some(i) = self.low.iter().position(|k| k == key) {
            self.low.remove(i);
            self.normal.push_back(key.to_owned());
        }
    }

    fn add_low(&mut self, key: &str) {
        if self.queued.insert(key.to_owned()) {
            self.low.push_back(key.to_owned());
        }
    }

    fn pop(&mut self) -> Option<String> {
        let turn = self.in_a_row.is_some_and(|k| self.row >= k);
        let key = if !self.low.is_empty() && (self.normal.is_empty() || turn) {
            self.row = 0;
            self.low.pop_front()?
        } else {
            let key = self.normal.pop_front()?;
            if !self.low.is_empty() {
                self.row += 1;
            }
            key
        };
        self.queued.remove(&key);
        self.running = Some(key.clone());
        Some(key)
    }

    fn waiting(&self) -> usize {
        self.normal.len() + self.low.len()
    }

    fn done(&mut self) -> Option<String> {
        let key = self.running.take()?;
        if std::mem::take(&mut self.again) {
            self.add(&key);
        }
        Some(key)
    }
}

/// One worker, a first listing of ten parents at low priority, and a hot parent changed
/// during every reconcile, for `rounds` reconciles; what the check said.
fn hot_stream(in_a_row: Option<u32>, rounds: usize) -> (Vec<String>, StarvationCheck) {
    let mut q = TwoLevel {
        in_a_row,
        ..TwoLevel::default()
    };
    let mut check = StarvationCheck::new(CORE_NORMAL_IN_A_ROW);
    let mut broken = Vec::new();
    let lows: BTreeSet<String> = (0..10).map(|i| format!("cell-{i}")).collect();
    q.add("hot");
    for l in &lows {
        q.add_low(l);
    }
    let first = q.pop();
    broken.extend(check.step(StepWakes {
        low: lows,
        normal: BTreeSet::from(["hot".to_owned()]),
        dispatched: first.into_iter().collect(),
        waiting: q.waiting(),
        ..StepWakes::default()
    }));
    for _ in 0..rounds {
        // A live change of the hot parent while the worker is busy.
        q.add("hot");
        broken.extend(check.step(StepWakes {
            normal: BTreeSet::from(["hot".to_owned()]),
            running: q.running.iter().cloned().collect(),
            waiting: q.waiting(),
            ..StepWakes::default()
        }));
        // The reconcile completes; the worker takes the next key.
        let completed = q.done();
        let next = q.pop();
        broken.extend(check.step(StepWakes {
            completed,
            dispatched: next.into_iter().collect(),
            waiting: q.waiting(),
            ..StepWakes::default()
        }));
    }
    let mut broken: Vec<String> = broken
        .into_iter()
        .map(|s| format!("{}: {}", s.invariant, s.detail))
        .collect();
    broken.extend(
        check
            .finish(false)
            .into_iter()
            .map(|s| format!("{}: {}", s.invariant, s.detail)),
    );
    (broken, check)
}

#[test]
fn a_strict_priority_queue_starves_the_listing_and_the_check_fires() {
    let (broken, check) = hot_stream(None, 200);
    assert_eq!(check.low_dispatched, 0);
    // Every listed parent overdue, caught while the run goes on, and still waiting at the
    // end.
    let starved = broken
        .iter()
        .filter(|b| b.starts_with("low-priority key starved"))
        .count();
    let never = broken
        .iter()
        .filter(|b| b.starts_with("woken parent never dispatched"))
        .count();
    assert_eq!((starved, never), (10, 10), "{broken:#?}");
    assert!(
        broken[0].contains("cell-0 queued at low priority with 0 low entries ahead"),
        "{broken:#?}"
    );
}

#[test]
fn the_same_stream_through_the_cores_rule_holds() {
    let (broken, check) = hot_stream(Some(CORE_NORMAL_IN_A_ROW), 200);
    assert!(broken.is_empty(), "{broken:#?}");
    assert_eq!(check.low_dispatched, 10);
    assert_eq!(
        check.normal_dispatched, 191,
        "the hot parent, every other turn"
    );
    // The bound is met exactly: the tenth listed parent waits 4 x 10 dispatches.
    assert_eq!(check.longest_wait, (40, 40));
}
