//! Election mode's faults: which candidate each one hits, what striking and healing it does.

use crate::harness::Harness;

use crate::election::scenario::{ElectionFault, LEASE_NAME, PartitionMode};
use crate::election::state::*;

impl Run<'_> {
    /// Whom a fault names: a candidate, or `leader` (whoever holds a term now; else the
    /// first candidate running and, if `awake`, not paused).
    pub(super) fn resolve(&self, target: &str, awake: bool) -> Option<usize> {
        if target != "leader" {
            return self.s.candidate(target);
        }
        let usable = |c: &Cand| c.h.is_some() && (!awake || c.paused_until.is_none());
        let leading = self.cands.iter().position(|c| {
            usable(c)
                && self
                    .procs
                    .get(c.proc_)
                    .is_some_and(|p| p.term.values().any(|t| self.now < c.clock.real(t.until)))
        });
        leading.or_else(|| self.cands.iter().position(usable))
    }

    pub(super) fn strike(&mut self, i: usize) {
        let s = self.s;
        let fault = &s.faults[i];
        let now = self.now;
        match fault {
            ElectionFault::ApiserverRestart { down_ms, .. } => {
                self.note(&format!("fault: {fault}"));
                self.count("election: apiserver restart");
                self.world.restart(now, ms(*down_ms));
                self.lease.restart(now, ms(*down_ms));
                for c in 0..self.cands.len() {
                    self.cut(c, "apiserver restarted", "restart");
                }
            }
            ElectionFault::Partition {
                target,
                for_ms,
                mode,
                lease_only,
                ..
            } => {
                let Some(c) = self.resolve(target, false) else {
                    return self.note(&format!("fault skipped, nobody to hit: {fault}"));
                };
                self.resolved[i] = Some(c);
                let until = now + ms(*for_ms);
                let cand = &mut self.cands[c];
                let until = cand.partition.map_or(until, |(.., u)| u.max(until));
                cand.partition = Some((*mode, *lease_only, until));
                let text = format!("fault: {}", describe_on(fault, &cand.name));
                self.note(&text);
                self.count(match mode {
                    PartitionMode::Refused => "election: partition (refused)",
                    PartitionMode::Dropped => "election: partition (dropped)",
                    PartitionMode::Delayed => "election: partition (delayed)",
                    PartitionMode::RepliesLost => "election: partition (replies lost)",
                });
                if !lease_only {
                    self.cut(c, "network partition", "partition");
                }
            }
            ElectionFault::Pause { target, for_ms, .. } => {
                let Some(c) = self.resolve(target, true) else {
                    return self.note(&format!("fault skipped, nobody to hit: {fault}"));
                };
                if self.cands[c].h.is_none() || self.cands[c].paused_until.is_some() {
                    return self.note(&format!("fault skipped, down or paused: {fault}"));
                }
                self.resolved[i] = Some(c);
                self.cands[c].paused_until = Some(now + ms(*for_ms));
                let text = format!("fault: {}", describe_on(fault, &self.cands[c].name));
                self.note(&text);
                self.count("election: process paused");
            }
            ElectionFault::ForeignWrite { shard, .. } => {
                match self.lease.foreign_write(&match &self.shard_set {
                    Some(set) => set.shard_lease(shard.unwrap_or(0) % set.shards.max(1)),
                    None => LEASE_NAME.to_owned(),
                }) {
                    Some(rv) => {
                        self.note(&format!("fault: {fault}: rv={rv}"));
                        self.count("election: foreign write to the lease");
                    }
                    None => self.note(&format!("fault skipped, no Lease yet: {fault}")),
                }
            }
            ElectionFault::Stop { target, .. } => {
                let Some(c) = self.resolve(target, true) else {
                    return self.note(&format!("fault skipped, nobody to hit: {fault}"));
                };
                if self.cands[c].h.is_none() || self.cands[c].paused_until.is_some() {
                    return self.note(&format!("fault skipped, down or paused: {fault}"));
                }
                self.resolved[i] = Some(c);
                let text = format!("fault: {}", describe_on(fault, &self.cands[c].name));
                self.note(&text);
                self.count("election: graceful stop");
                self.feed(c, Harness::stop);
                self.take_down(c);
            }
            ElectionFault::Crash { target, .. } => {
                let Some(c) = self.resolve(target, false) else {
                    return self.note(&format!("fault skipped, nobody to hit: {fault}"));
                };
                if self.cands[c].h.is_none() {
                    return self.note(&format!("fault skipped, down: {fault}"));
                }
                self.resolved[i] = Some(c);
                let text = format!("fault: {}", describe_on(fault, &self.cands[c].name));
                self.note(&text);
                self.count("election: crash");
                self.take_down(c);
            }
        }
    }

    pub(super) fn heal_fault(&mut self, i: usize) {
        let s = self.s;
        let fault = &s.faults[i];
        let now = self.now;
        match fault {
            ElectionFault::ApiserverRestart { .. } => self.note("apiserver is back"),
            ElectionFault::Partition { .. } => {
                let Some(c) = self.resolved[i] else { return };
                if self.cands[c]
                    .partition
                    .is_none_or(|(.., until)| now < until)
                {
                    // A later partition of the same candidate still holds.
                    return;
                }
                self.cands[c].partition = None;
                let held: Vec<Delivery> = self.cands[c].held.drain(..).collect();
                let text = format!(
                    "partition of {} heals ({} held requests and answers go through)",
                    self.cands[c].name,
                    held.len()
                );
                self.note(&text);
                for d in held {
                    let at = match &d.what {
                        What::LeaseArrive(msg) => now + self.latency(d.proc_, msg.req, 0),
                        _ => now,
                    };
                    self.schedule(at, d.cand, d.proc_, d.what);
                }
            }
            ElectionFault::Pause { .. } => {
                let Some(c) = self.resolved[i] else { return };
                if self.cands[c].paused_until.is_none_or(|until| now < until) {
                    return;
                }
                self.cands[c].paused_until = None;
                let waiting = self.cands[c].inbox.len();
                if waiting > 0 {
                    self.count("election: inputs waited for a paused process");
                }
                let text = format!("{} resumes ({waiting} inputs waiting)", self.cands[c].name);
                self.note(&text);
            }
            ElectionFault::ForeignWrite { .. } => {}
            ElectionFault::Stop { .. } | ElectionFault::Crash { .. } => {
                let Some(c) = self.resolved[i] else { return };
                self.start(c);
            }
        }
    }

    // ----- quiescence -----
}

/// A fault's description with `leader` replaced by the candidate it hit.
fn describe_on(fault: &ElectionFault, name: &str) -> String {
    let text = fault.to_string();
    if fault.target() == Some("leader") {
        text.replacen("leader", &format!("leader {name}"), 1)
    } else {
        text
    }
}
