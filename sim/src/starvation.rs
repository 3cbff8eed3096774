//! The starvation invariant of the core's priority queue (`Config::priority(true)`), checked
//! from the outside: from which parents each step woke, at which priority, and which
//! parents the core dispatched.
//!
//! # The rule it holds the core to
//!
//! The queue keeps two FIFOs. Wakes from a listing, a resync or a reconcile-all trigger go
//! in at low priority; anything else at normal. A low key asked for at normal moves up. A
//! pop takes a normal key first, but after `k` normal keys in a row while low keys wait the
//! next pop takes the oldest low key (`k` = [`CORE_NORMAL_IN_A_ROW`] in the core).
//!
//! # The invariant
//!
//! *A parent queued at low priority with `e` entries ahead of it in the low FIFO is
//! dispatched within the next `(k + 1) · (e + 1)` dispatches, unless a normal wake moves it
//! up first; a parent queued (or moved up) at normal priority while `w` keys wait, itself
//! included, within the next `(k + 1) · w`; so every parent woken is dispatched.*
//!
//! The entries ahead are the low keys waiting and the entries left behind by keys that moved
//! up: the core skips those when they reach the front, but a key that moved up and is
//! woken at low priority again revives its old entry in place (it is in the low set again),
//! jumping ahead of the low keys queued since. Counting only the low keys waiting, `n`,
//! the bound `(k + 1) · n` is exceeded by one low pop per such jump (seen by explore: a
//! resync's `cell-9`, moved up by a live change, revived its place at the next resync);
//! no key starves for it, since each entry ahead is consumed once.
//!
//! Why that bound: the counter of normal keys in a row never exceeds `k` (it is reset by a
//! low pop and only counts while a live low key waits), so among any `k + 1` consecutive
//! pops while the key waits at least one is a low pop. A low pop removes the front entry
//! and the stale ones before it; entries join only at the back, so each of the `e` entries
//! ahead is removed by at most one low pop, and low pop `e + 1` at the latest takes the key.
//!
//! For a normal key `m`-th in the normal FIFO (`m <= w`): the keys ahead only leave, and a
//! low pop happens only once `k` normal keys went in a row, so at most `1 + (m - 1) / k`
//! low pops come before its turn: `m + 1 + (m - 1) / k <= (k + 1) · m` dispatches (`k >= 1`).
//!
//! # How the entries are counted
//!
//! The check keeps its own copy of the low FIFO from the wakes it sees: an entry per key
//! queued at low priority; a move up leaves it in place; a low dispatch removes the front up
//! to the key's first entry; a dispatch while no live low key waits empties it (the core's
//! pop drops the entries left behind). It is never shorter than the core's FIFO, so the
//! bound it derives is never tighter than the rule. A wake it cannot see (a retry's or a
//! requeue's timer) can only move a key up; a parent with such a timer is exempt from the
//! bound (its move up is invisible) but its entry still counts.
//!
//! Within one step the core queues the step's wakes before it dispatches: a reconcile's
//! completion requeues its key first (at the priority it was re-asked for while it ran),
//! then the normal wakes, then the low wakes in ascending order; the step's dispatches come
//! after. A key woken while it runs is queued when it completes, not when woken, so its
//! position is taken then.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// `reconcile_core`'s `NORMAL_IN_A_ROW` (its queue module is private): normal keys handed
/// out in a row while low keys wait.
pub const CORE_NORMAL_IN_A_ROW: u32 = 3;

/// The priority a key waits at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Priority {
    /// A listing's, a resync's or a reconcile-all trigger's wake.
    Low,
    /// A live change, a requeue, a retry.
    Normal,
}

/// A parent waiting in the queue.
#[derive(Debug, Clone)]
struct Waiting {
    priority: Priority,
    /// The dispatch count by which it must have gone (low keys only).
    deadline: Option<u64>,
    /// Its place in the low FIFO when queued (entries ahead + 1), for the report.
    position: u64,
    /// The dispatch count when queued.
    since: u64,
    /// Overdue already reported.
    reported: bool,
}

/// What one step did, as the check needs it.
#[derive(Debug, Default, Clone)]
pub struct StepWakes {
    /// The parent whose reconcile completed in this step, if one did.
    pub completed: Option<String>,
    /// Parents woken at normal priority.
    pub normal: BTreeSet<String>,
    /// Parents woken at low priority.
    pub low: BTreeSet<String>,
    /// Parents dispatched, in order.
    pub dispatched: Vec<String>,
    /// Parents running before the step's dispatches (the completed one excluded).
    pub running: BTreeSet<String>,
    /// Keys waiting in the queue after the step (the core's own count, which sees the
    /// timers' wakes too).
    pub waiting: usize,
}

/// A broken promise: what went wrong, for a violation's detail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Starved {
    /// The invariant's short name.
    pub invariant: &'static str,
    /// What happened.
    pub detail: String,
}

/// The starvation invariant's bookkeeping over one run.
#[derive(Debug, Clone)]
pub struct StarvationCheck {
    in_a_row: u64,
    dispatches: u64,
    waiting: BTreeMap<String, Waiting>,
    /// Parents woken while running: queued at this priority when they complete.
    after_done: BTreeMap<String, Priority>,
    /// Parents with a retry or requeue timer: their move up would be invisible.
    exempt: BTreeSet<String>,
    /// Low keys waiting (never below the core's count).
    low_waiting: u64,
    /// The low FIFO's entries as the core keeps them (see the module's documentation):
    /// live keys, and entries left behind by keys that moved up, which the core drops only
    /// when they reach the front of a pop. Never shorter than the core's.
    low_fifo: VecDeque<String>,
    /// Low keys dispatched within their bound.
    pub low_dispatched: u64,
    /// Low keys moved up by a normal wake before their turn.
    pub moved_up: u64,
    /// Normal keys dispatched within their bound.
    pub normal_dispatched: u64,
    /// The longest a low key waited, in dispatches, and its bound then.
    pub longest_wait: (u64, u64),
}

impl StarvationCheck {
    /// A check holding the queue to `in_a_row` normal keys in a row while low keys wait
    /// ([`CORE_NORMAL_IN_A_ROW`] for the core as it is; a smaller number is a deliberately
    /// wrong rule, to see the check fire).
    #[must_use]
    pub fn new(in_a_row: u32) -> Self {
        StarvationCheck {
            in_a_row: u64::from(in_a_row),
            dispatches: 0,
            waiting: BTreeMap::new(),
            after_done: BTreeMap::new(),
            exempt: BTreeSet::new(),
            low_waiting: 0,
            low_fifo: VecDeque::new(),
            low_dispatched: 0,
            moved_up: 0,
            normal_dispatched: 0,
            longest_wait: (0, 0),
        }
    }

    /// Dispatches seen so far.
    #[must_use]
    pub fn dispatches(&self) -> u64 {
        self.dispatches
    }

    /// `parent` has a retry or requeue timer: a wake the check cannot see may move it up.
    pub fn exempt(&mut self, parent: &str) {
        self.exempt.insert(parent.to_owned());
    }

    fn queue(&mut self, parent: String, priority: Priority, at: u64, queued: u64) {
        let waiting = match priority {
            Priority::Low => {
                self.low_waiting += 1;
                // Every entry ahead, live or left behind, may cost one low pop.
                let position = self.low_fifo.len() as u64 + 1;
                self.low_fifo.push_back(parent.clone());
                Waiting {
                    priority,
                    deadline: Some(at + (self.in_a_row + 1) * position),
                    position,
                    since: at,
                    reported: false,
                }
            }
            Priority::Normal => Waiting {
                priority,
                deadline: Some(at + (self.in_a_row + 1) * queued),
                position: queued,
                since: at,
                reported: false,
            },
        };
        self.waiting.insert(parent, waiting);
    }

    /// Takes one step's wakes and dispatches; returns what it broke.
    pub fn step(&mut self, step: StepWakes) -> Vec<Starved> {
        let at = self.dispatches;
        let mut broken = Vec::new();
        // Keys waiting once the step's wakes are queued, before its dispatches: at least a
        // normal key's place in the normal FIFO.
        let queued = (step.waiting + step.dispatched.len()).max(1) as u64;
        // The completed key first: `done` requeues it before the step's wakes are queued.
        if let Some(parent) = step.completed
            && let Some(priority) = self.after_done.remove(&parent)
        {
            self.queue(parent, priority, at, queued);
        }
        for parent in step.normal {
            if step.running.contains(&parent) {
                self.after_done.insert(parent, Priority::Normal);
                continue;
            }
            match self.waiting.get_mut(&parent) {
                Some(w) if w.priority == Priority::Low => {
                    // Moved up: out of the low FIFO, into the normal one.
                    self.low_waiting -= 1;
                    self.moved_up += 1;
                    w.priority = Priority::Normal;
                    w.deadline = Some(at + (self.in_a_row + 1) * queued);
                    w.position = queued;
                    w.since = at;
                }
                Some(_) => {}
                None => self.queue(parent, Priority::Normal, at, queued),
            }
        }
        // Ascending, as the core queues them (a `BTreeSet` of `String` sorts as it does).
        for parent in step.low {
            if step.running.contains(&parent) {
                self.after_done.entry(parent).or_insert(Priority::Low);
            } else if !self.waiting.contains_key(&parent) {
                // A key already wanted keeps its priority and its place.
                self.queue(parent, Priority::Low, at, queued);
            }
        }
        for parent in step.dispatched {
            self.dispatches += 1;
            if self.low_waiting == 0 {
                // No live low key: the pop drops every entry left behind.
                self.low_fifo.clear();
            }
            let Some(w) = self.waiting.remove(&parent) else {
                // Woken by a timer the check does not see.
                continue;
            };
            let low = w.priority == Priority::Low;
            if low {
                self.low_waiting -= 1;
                // A low pop takes the first entry still wanted: the ones before it were
                // left behind and are dropped with it.
                if let Some(i) = self.low_fifo.iter().position(|p| *p == parent) {
                    self.low_fifo.drain(..=i);
                }
            }
            if self.exempt.contains(&parent) {
                continue;
            }
            let waited = self.dispatches - w.since;
            let bound = w.deadline.unwrap_or(u64::MAX) - w.since;
            if low && waited > self.longest_wait.0 {
                self.longest_wait = (waited, bound);
            }
            if waited <= bound {
                if low {
                    self.low_dispatched += 1;
                } else {
                    self.normal_dispatched += 1;
                }
            } else if !w.reported {
                broken.push(self.starved(&parent, &w));
            }
        }
        // Overdue and still waiting: report now, once, rather than only if it ever goes.
        let now = self.dispatches;
        let mut overdue = Vec::new();
        for (parent, w) in &mut self.waiting {
            if let Some(deadline) = w.deadline
                && deadline < now
                && !w.reported
                && !self.exempt.contains(parent)
            {
                w.reported = true;
                overdue.push((parent.clone(), w.clone()));
            }
        }
        for (parent, w) in overdue {
            broken.push(self.starved(&parent, &w));
        }
        broken
    }

    fn starved(&self, parent: &str, w: &Waiting) -> Starved {
        let bound = w.deadline.unwrap_or(u64::MAX) - w.since;
        if w.priority == Priority::Normal {
            return Starved {
                invariant: "normal-priority key starved",
                detail: format!(
                    "{parent} queued at normal priority with {} keys waiting (bound {bound} = \
                     {} x {} dispatches) not dispatched within {bound} dispatches ({} so far)",
                    w.position,
                    self.in_a_row + 1,
                    w.position,
                    self.dispatches - w.since
                ),
            };
        }
        Starved {
            invariant: "low-priority key starved",
            detail: format!(
                "{parent} queued at low priority with {} low entries ahead (bound {} = {} x {} \
                 dispatches) not dispatched within {bound} dispatches ({} so far)",
                w.position - 1,
                bound,
                self.in_a_row + 1,
                w.position,
                self.dispatches - w.since
            ),
        }
    }

    /// At the end of a run that did not stop: every parent woken has been dispatched, or a
    /// reconcile is still running (`busy`), so the queue still moves: a run with a resync
    /// period never runs out of work, and ends at its horizon with keys queued. Low keys
    /// waiting then are held to their bound by [`StarvationCheck::step`] already.
    #[must_use]
    pub fn finish(&self, busy: bool) -> Vec<Starved> {
        if busy {
            return Vec::new();
        }
        self.waiting
            .keys()
            .chain(self.after_done.keys())
            .map(|parent| Starved {
                invariant: "woken parent never dispatched",
                detail: format!(
                    "{parent} was woken and is still waiting at the end, with no reconcile running"
                ),
            })
            .collect()
    }
}
