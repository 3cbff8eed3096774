//! Election mode's invariants: each process's terms, no two leaders and no dispatch outside
//! a term (safety), a leader once the faults heal (liveness), and at the end every running
//! candidate's cache equal to the world.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use reconcile_core::pod::PodView;
use reconcile_core::{Instant, Lifecycle, Object};

use crate::clock::Clock;
use crate::harness::{Dispatch, Violation};
use crate::simulate::quiescence::differences;

use crate::election::scenario::{ElectionFault, LEASE_NAME, Scenario};
use crate::election::state::*;

/// Safety: a process dispatched while another's term covered the instant.
pub const TWO_LEADERS: &str = "two leaders dispatch at once";

/// Safety, sharded: a process dispatched a key while another's term on the key's shard
/// covered the instant.
pub const TWO_OWNERS: &str = "two replicas dispatch a shard's key in overlapping terms";

/// Safety: a process dispatched outside every term of its own (sharded: on the key's shard).
pub const OUTSIDE_TERM: &str = "dispatch outside its own term";

/// Liveness: no leader within the bound after the faults healed.
pub const NO_LEADER: &str = "no leader elected after the faults healed";

/// Liveness, sharded: a shard nobody held within the bound after the faults healed.
pub const NO_SHARD_OWNER: &str = "a shard not held within the bound after the faults healed";

/// Balance, sharded: a replica held more than `ceil(shards / live) + 1` shards once the
/// faults had healed and the membership had been stable for the bound and a retry period.
pub const UNBALANCED: &str = "a replica holds more than ceil(shards / live) + 1 shards";

/// Convergence, sharded: a key's latest change was not reconciled by its shard's owner at
/// the end.
pub const NOT_RECONCILED_BY_OWNER: &str =
    "a key's latest change not reconciled by its shard's owner";

impl Run<'_> {
    /// A term of process `p` on `shard` begins: it lasts until the local send instant of the
    /// latest write the store applied for this process on that shard's Lease, plus
    /// renew_deadline (the write that won it is one).
    pub(super) fn open_term(&mut self, p: usize, shard: u32) {
        let now = self.now;
        let clock = self.clock_of(p);
        // A term whose deadline passed without the core saying so (it cannot: the timer
        // fires) ends there.
        self.close_term(p, shard, now);
        let until = self.procs[p]
            .latent
            .get(&shard)
            .copied()
            .unwrap_or_else(|| clock.local(now));
        // How close this handover came to the other processes' terms on the shard.
        for q in 0..self.procs.len() {
            if q == p {
                continue;
            }
            let end = match self.procs[q].term.get(&shard) {
                Some(t) => Some(self.clock_of(q).real(t.until)),
                None => self.procs[q].last_end.get(&shard).copied(),
            };
            if let Some(end) = end {
                let gap = i128::from(now.as_nanos()) - i128::from(end.as_nanos());
                let gap = i64::try_from(gap).unwrap_or(if gap < 0 { i64::MIN } else { i64::MAX });
                if self.closest_handover.is_none_or(|c| gap < c) {
                    self.closest_handover = Some(gap);
                }
            }
        }
        let proc_ = &mut self.procs[p];
        proc_.term.insert(shard, Term { start: now, until });
        proc_.terms += 1;
    }

    /// Ends every term of process `p` at `at` (or at its deadline if that came first).
    pub(super) fn close_terms(&mut self, p: usize, at: Instant) {
        let shards: Vec<u32> = self.procs[p].term.keys().copied().collect();
        for shard in shards {
            self.close_term(p, shard, at);
        }
    }

    /// Ends process `p`'s term on `shard` at `at`, or at its deadline if that came first,
    /// and checks that no other process dispatched a key of that shard while it lasted.
    pub(super) fn close_term(&mut self, p: usize, shard: u32, at: Instant) {
        let Some(term) = self.procs[p].term.remove(&shard) else {
            return;
        };
        let end = self.clock_of(p).real(term.until).min(at);
        self.procs[p].last_end.insert(shard, end.max(term.start));
        if end <= term.start {
            return;
        }
        let invariant = if self.shard_set.is_some() {
            TWO_OWNERS
        } else {
            TWO_LEADERS
        };
        for q in 0..self.procs.len() {
            if q == p {
                continue;
            }
            let d = &self.procs[q].dispatches;
            let i = d.partition_point(|(t, ..)| *t < term.start);
            let overlapping = d[i..]
                .iter()
                .take_while(|(t, ..)| *t < end)
                .find(|(_, _, s)| *s == shard);
            if let Some((t, parent, _)) = overlapping {
                let on = if self.shard_set.is_some() {
                    format!(" on shard {shard}")
                } else {
                    String::new()
                };
                let detail = format!(
                    "{} dispatched {parent} at {t} while {}'s term{on} [{}, {end}) covers it",
                    self.procs[q].identity, self.procs[p].identity, term.start
                );
                self.violations.push(Violation {
                    at: *t,
                    invariant,
                    detail,
                });
            }
        }
    }

    /// The shard of a parent (0 for an election).
    pub(super) fn shard_of_parent(&self, parent: &str) -> u32 {
        self.shard_set
            .as_ref()
            .map_or(0, |c| c.shard_of(&parent.to_owned()))
    }

    /// The shard whose Lease is `name` (0 for the election's Lease); `None` for a
    /// membership Lease or a LIST.
    pub(super) fn shard_of_lease(&self, name: &str) -> Option<u32> {
        match &self.shard_set {
            None => (name == LEASE_NAME).then_some(0),
            Some(c) => name
                .strip_prefix(&c.name)
                .and_then(|rest| rest.strip_prefix("-shard-"))
                .and_then(|i| i.parse::<u32>().ok())
                .filter(|&i| i < c.shards),
        }
    }

    pub(super) fn dispatched(&mut self, p: usize, parent: String) {
        let now = self.now;
        let clock = self.clock_of(p);
        let shard = self.shard_of_parent(&parent);
        let term = self.procs[p].term.get(&shard).copied();
        let covered = term.is_some_and(|t| now >= t.start && now < clock.real(t.until));
        if !covered {
            let on = if self.shard_set.is_some() {
                format!(" on shard {shard}")
            } else {
                String::new()
            };
            let detail = match term {
                Some(t) => format!(
                    "{} dispatched {parent} at {now}; its term{on} [{}, {}) does not cover it",
                    self.procs[p].identity,
                    t.start,
                    clock.real(t.until)
                ),
                None => format!(
                    "{} dispatched {parent} at {now} without a term{on}",
                    self.procs[p].identity
                ),
            };
            self.violation(OUTSIDE_TERM, detail);
        }
        self.procs[p].dispatches.push((now, parent, shard));
    }

    /// When every shard had been held after the faults healed (the last of them).
    pub(super) fn elected(&self) -> Option<Instant> {
        self.held_since_heal
            .iter()
            .copied()
            .collect::<Option<Vec<Instant>>>()
            .and_then(|v| v.into_iter().max())
    }

    /// Once `t` is past the bound: was a leader elected (every shard held) after the faults
    /// healed?
    pub(super) fn check_liveness(&mut self, t: Instant) {
        let deadline = self.heal + self.bound;
        if self.liveness_reported || self.elected().is_some() || t <= deadline {
            return;
        }
        self.liveness_reported = true;
        if self.cands.iter().all(|c| c.h.is_none()) {
            return;
        }
        let (invariant, detail) = if self.shard_set.is_some() {
            let missing: Vec<String> = (0..self.shards)
                .filter(|&i| self.held_since_heal[i as usize].is_none())
                .map(|i| i.to_string())
                .collect();
            (
                NO_SHARD_OWNER,
                format!(
                    "healed at {}, shards {} not held within {}s (by {deadline})",
                    self.heal,
                    missing.join(", "),
                    self.bound.as_secs_f64()
                ),
            )
        } else {
            (
                NO_LEADER,
                format!(
                    "healed at {}, none elected within {}s (by {deadline})",
                    self.heal,
                    self.bound.as_secs_f64()
                ),
            )
        };
        self.violations.push(Violation {
            at: deadline,
            invariant,
            detail,
        });
    }

    /// Sharded, once `t` is past the balance instant: no running replica holds more than
    /// `ceil(shards / live) + 1` shards, `live` the replicas running.
    pub(super) fn check_balance(&mut self, t: Instant) {
        if self.shard_set.is_none() || self.balance.is_some() || t <= self.balance_at {
            return;
        }
        let held: Vec<(String, usize)> = self
            .cands
            .iter()
            .filter_map(|c| {
                let h = c.h.as_ref()?;
                if h.core().lifecycle() != Lifecycle::Running {
                    return None;
                }
                let held = h.core().sharding().map_or(0, |s| s.held.len());
                Some((self.procs[c.proc_].identity.clone(), held))
            })
            .collect();
        if held.is_empty() {
            self.balance = Some((self.balance_at, 0, 0));
            return;
        }
        let limit = (self.shards as usize).div_ceil(held.len()) + 1;
        let most = held.iter().map(|(_, n)| *n).max().unwrap_or(0);
        self.balance = Some((self.balance_at, most, limit));
        if most > limit {
            let detail = format!(
                "at {}: {} live, limit {limit}; held: {}",
                self.balance_at,
                held.len(),
                held.iter()
                    .map(|(who, n)| format!("{who}={n}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            );
            self.violations.push(Violation {
                at: self.balance_at,
                invariant: UNBALANCED,
                detail,
            });
        }
    }

    // ----- the Lease -----

    /// At the end, every running candidate's cache equals the world (standbys keep theirs
    /// warm too), and the copy kept from its change log equals its cache.
    pub(super) fn check_caches(&mut self) {
        let mut world: BTreeMap<String, (String, String)> = BTreeMap::new();
        for obj in self.world.visible_objects() {
            let Ok(pod) = serde_json::from_str::<PodView>(&obj.json) else {
                continue;
            };
            let Ok(parent) = self.key_by.parent_of(&pod) else {
                continue;
            };
            let rv = pod.object_resource_version().unwrap_or("").to_owned();
            world.insert(obj.key.clone(), (parent, rv));
        }
        let mut found = Vec::new();
        for c in &self.cands {
            let Some(h) = &c.h else { continue };
            if h.core().lifecycle() != Lifecycle::Running {
                continue;
            }
            let name = &self.procs[c.proc_].identity;
            let store: BTreeMap<String, (String, String)> = h
                .core()
                .store()
                .iter()
                .map(|(k, o, p)| {
                    let rv = o.object_resource_version().unwrap_or("").to_owned();
                    (k.to_string(), (p.clone(), rv))
                })
                .collect();
            if store != world {
                found.push((
                    "store differs from the world at quiescence",
                    format!("{name}: {}", differences(&store, &world)),
                ));
            }
            let copied = h.cache_copy.len() == h.core().store().len()
                && h.core()
                    .store()
                    .iter()
                    .all(|(k, o, _)| h.cache_copy.get(k).is_some_and(|c| Arc::ptr_eq(c, o)));
            if !copied {
                found.push((
                    "a copy kept from the change log differs from the cache",
                    format!("{name}: {} copied", h.cache_copy.len()),
                ));
            }
        }
        for (invariant, detail) in found {
            self.violation(invariant, detail);
        }
    }

    /// At the end, every parent whose members changed was last dispatched (by whichever
    /// process, in real time) with its final members at their final versions; unless it has
    /// none and the leader at the end never knew it (it emptied before that process had it in
    /// its cache, while no process that knew it was running): no controller can reconcile
    /// a parent it never heard of.
    pub(super) fn check_converged(&mut self, leader: usize) {
        let mut members: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
        for obj in self.world.visible_objects() {
            let Ok(pod) = serde_json::from_str::<PodView>(&obj.json) else {
                continue;
            };
            let Ok(parent) = self.key_by.parent_of(&pod) else {
                continue;
            };
            let rv = pod.object_resource_version().unwrap_or("").to_owned();
            members
                .entry(parent)
                .or_default()
                .push((obj.key.clone(), rv));
        }
        let mut found = Vec::new();
        for (parent, changed_at) in &self.membership_changed {
            let want = members.get(parent).cloned().unwrap_or_default();
            if want.is_empty() && !self.procs[leader].known_parents.contains(parent) {
                continue;
            }
            let last = self
                .procs
                .iter()
                .filter_map(|p| {
                    p.dispatches
                        .iter()
                        .rev()
                        .find(|(_, d, _)| d == parent)
                        .map(|(at, ..)| (*at, p))
                })
                .max_by_key(|(at, _)| *at);
            let Some((at, p)) = last else {
                if !want.is_empty() {
                    found.push(format!(
                        "{parent}: never reconciled, membership is {want:?}"
                    ));
                }
                continue;
            };
            let seen: Vec<(String, String)> = p
                .last_dispatch
                .get(parent)
                .map(|d| {
                    d.members
                        .iter()
                        .map(|m| {
                            let key = m.key().map_or_else(|| "?".into(), |k| k.to_string());
                            (key, m.object_resource_version().unwrap_or("").to_owned())
                        })
                        .collect()
                })
                .unwrap_or_default();
            if seen != want {
                found.push(format!(
                    "{parent}: last reconcile by {} at {at} saw {seen:?}, membership is {want:?} since {changed_at}",
                    p.identity
                ));
            }
        }
        for detail in found {
            self.violation("parent not reconciled after its last change", detail);
        }
    }
}

impl Run<'_> {
    /// Sharded, at the end: every parent whose members changed was last reconciled, by the
    /// process holding its shard at the end (`owners`, per shard), with its final members at
    /// their final versions; unless it has none and that process never knew it.
    pub(super) fn check_owned(&mut self, owners: &[Option<usize>]) {
        let members = self.final_members();
        let mut found = Vec::new();
        for (parent, changed_at) in &self.membership_changed {
            let want = members.get(parent).cloned().unwrap_or_default();
            let shard = self.shard_of_parent(parent);
            let Some(owner) = owners.get(shard as usize).copied().flatten() else {
                // Nobody holds the shard at the end: liveness says whether that is a bug.
                continue;
            };
            let p = &self.procs[owner];
            if want.is_empty() && !p.known_parents.contains(parent) {
                continue;
            }
            let seen: Option<Vec<(String, String)>> = p.last_dispatch.get(parent).map(seen_members);
            if seen.as_ref() != Some(&want) {
                found.push(format!(
                    "{parent} (shard {shard}): its owner {} last reconciled it {}, membership is {want:?} since {changed_at}",
                    p.identity,
                    match (&seen, p.last_dispatch.get(parent)) {
                        (Some(seen), Some(d)) => format!("at {} seeing {seen:?}", d.at),
                        _ => "never".to_owned(),
                    }
                ));
            }
        }
        for detail in found {
            self.violation(NOT_RECONCILED_BY_OWNER, detail);
        }
    }

    /// Each parent's members in the world now, with their versions.
    pub(super) fn final_members(&self) -> BTreeMap<String, Vec<(String, String)>> {
        let mut members: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
        for obj in self.world.visible_objects() {
            let Ok(pod) = serde_json::from_str::<PodView>(&obj.json) else {
                continue;
            };
            let Ok(parent) = self.key_by.parent_of(&pod) else {
                continue;
            };
            let rv = pod.object_resource_version().unwrap_or("").to_owned();
            members
                .entry(parent)
                .or_default()
                .push((obj.key.clone(), rv));
        }
        members
    }
}

/// The members a reconcile was handed, with their versions.
fn seen_members(d: &Dispatch) -> Vec<(String, String)> {
    d.members
        .iter()
        .map(|m| {
            let key = m.key().map_or_else(|| "?".into(), |k| k.to_string());
            (key, m.object_resource_version().unwrap_or("").to_owned())
        })
        .collect()
}

/// When the faults of `s` have all healed, and how long after that a leader must be elected.
///
/// `heal` is the last of: a candidate's start, a partition's or a pause's end, the apiserver
/// back, a stopped or crashed candidate restarted (or stopped for good). From `heal`:
///
/// `bound = (first_look + lease_duration + retry_period) / r_min + 8 × latency_max + 1 ms`
///
/// - `first_look`: until every running candidate sends a request that is answered:
///   `renew_deadline` when a partition could leave a request unanswered (the elector
///   abandons one only then), `retry_period` otherwise (a failed or answered request is
///   retried within it; a candidate resuming or restarting tries at once);
/// - then it waits `lease_duration` from its first sight of the record (the holder may be
///   gone), reading every `retry_period`, so expiry is seen at most one period late;
/// - each of those waits is on the candidate's own clock: up to `1 / r_min` as long in real
///   time, `r_min` the slowest rate;
/// - four round trips on the way (the answer pending at `heal`, the first read, the read
///   that sees the record expired, the write that takes it), each at most twice the
///   largest one-way latency; 1 ms for rounding.
///
/// Sharded, the bound is each shard's, with one retry period more: a survivor sees the
/// membership Lease of a replica gone expire at most one LIST after that replica's shard
/// Leases, and only then has room to take them.
///
/// A record that changes meanwhile was written by a candidate, which was elected by that
/// write, or (a request held by a partition, applied late) leads once it reads the record
/// naming it, sooner than the bound.
#[must_use]
pub fn liveness_bound(s: &Scenario) -> (Instant, Duration) {
    let mut heal = s
        .candidates
        .iter()
        .map(|c| at_ms(c.start_ms))
        .max()
        .unwrap_or(Instant::ZERO);
    for f in &s.faults {
        heal = heal.max(at_ms(f.at_ms() + f.lasts_ms()));
    }
    let unanswered = s
        .faults
        .iter()
        .any(|f| matches!(f, ElectionFault::Partition { mode, .. } if mode.unanswered()));
    let first_look = if unanswered {
        s.renew_deadline_ms
    } else {
        s.retry_period_ms
    };
    // Sharded, a survivor also waits out the membership Lease of the replica gone, which it
    // may first see renewed one LIST after the shard's: one retry period more.
    let membership = if s.shards.is_some() {
        s.retry_period_ms
    } else {
        0
    };
    let local = ms(first_look + s.lease_duration_ms + s.retry_period_ms + membership);
    let r_min = s
        .candidates
        .iter()
        .map(|c| c.rate_ppm)
        .min()
        .unwrap_or(crate::clock::PPM);
    let slowest = Clock::new(Instant::ZERO, Instant::ZERO, r_min);
    let real = slowest.real(Instant::from_duration(local)).since_origin();
    (heal, real + ms(8 * s.latency_ms[1]) + ms(1))
}
