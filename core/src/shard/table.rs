//! The shard table: one elector per shard's Lease and one for this replica's membership,
//! read together by one LIST per retry period, with the balance and handover rules of the
//! module's front page.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde::Deserialize;

use super::{MAX_MEMBERS, ShardConfig, Sharding, fnv1a64};
use crate::election::{Change, ElectionWake, Elector, LeaseBody, MAX_LEASE_BYTES, Role};
use crate::time::Instant;
use crate::vocabulary::{
    Command, Event, LeaseRequest, LeaseResponse, MintIds, Outbox, Output, RequestId,
};

/// What the loop must do after a table step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ShardChange {
    /// A term began on the shard: its parked keys may be dispatched.
    Acquired(u32),
    /// The shard's term ended: its running reconciles are cancelled unless the policy is
    /// to drain.
    Lost(u32),
    /// A shard given up waited [`ShardConfig::handover_drain`] for its running
    /// reconciles: cancel them now, before its Lease is written free.
    Cancel(u32),
}

#[derive(Debug)]
struct Shard<K> {
    elector: Elector,
    /// Given up since this instant: nothing of it starts; released once drained.
    releasing_since: Option<Instant>,
    /// Keys of this shard that were wanted while this replica did not hold it.
    parked: BTreeSet<K>,
    /// First seen claimable by this replica (free or expired) since it last held it: the
    /// start of a takeover.
    claimable_since: Option<Instant>,
}

/// Another replica's membership Lease as last seen.
#[derive(Debug)]
struct Member {
    resource_version: String,
    holder: String,
    duration: Duration,
    /// When this version was first seen here.
    at: Instant,
}

#[derive(Debug, Deserialize)]
struct LeaseList {
    #[serde(default)]
    items: Vec<LeaseBody>,
}

/// The shard table of one replica.
#[derive(Debug)]
pub(crate) struct ShardTable<K> {
    config: ShardConfig,
    shards: Vec<Shard<K>>,
    member: Elector,
    member_name: String,
    /// Other replicas' membership Leases, by name.
    members: BTreeMap<String, Member>,
    /// The LIST on its way, and when it was sent.
    list: Option<(RequestId, Instant)>,
    next_tick: Option<Instant>,
    /// This replica's membership Lease has been seen in a LIST: others can count it, so it
    /// may take shards.
    published: bool,
    stopped: bool,
    draining: bool,
    live: usize,
    target: usize,
    changes: Vec<ShardChange>,
    acquired_total: u64,
    handovers_total: u64,
    /// Takeover durations not yet taken by the metrics.
    takeovers: Vec<Duration>,
}

/// Bytes of a LIST of the set's Leases read at most.
fn max_list_bytes(shards: u32) -> usize {
    (shards as usize + MAX_MEMBERS).saturating_mul(MAX_LEASE_BYTES / 16)
}

impl<K: Ord> ShardTable<K> {
    pub(crate) fn new(config: ShardConfig) -> Self {
        let labels = |role: &str| {
            vec![
                (super::SHARD_ROLE_LABEL.to_owned(), role.to_owned()),
                (super::SHARD_SET_LABEL.to_owned(), config.name.clone()),
            ]
        };
        let shards = (0..config.shards)
            .map(|i| Shard {
                elector: Elector::with_role(
                    config.election(config.shard_lease(i)),
                    Role::Shard(i),
                    labels("shard"),
                ),
                releasing_since: None,
                parked: BTreeSet::new(),
                claimable_since: None,
            })
            .collect();
        let member_name = config.member_lease();
        let member = Elector::with_role(
            config.election(member_name.clone()),
            Role::Member,
            labels("member"),
        );
        ShardTable {
            shards,
            member,
            member_name,
            members: BTreeMap::new(),
            list: None,
            next_tick: None,
            published: false,
            stopped: false,
            draining: false,
            live: 1,
            target: config.shards as usize,
            changes: Vec::new(),
            acquired_total: 0,
            handovers_total: 0,
            takeovers: Vec::new(),
            config,
        }
    }

    pub(crate) fn config(&self) -> &ShardConfig {
        &self.config
    }

    pub(crate) fn start<O, P>(
        &mut self,
        now: Instant,
        ids: &mut (impl MintIds + ?Sized),
        out: &mut Outbox<O, P>,
    ) {
        self.tick(now, ids, out);
    }

    /// Whether a key of `shard` may start now.
    pub(crate) fn may_dispatch(&self, shard: u32, now: Instant) -> bool {
        self.shards.get(shard as usize).is_some_and(|s| {
            s.releasing_since.is_none() && !self.draining && s.elector.is_leader(now)
        })
    }

    /// Whether this replica holds any shard whose keys may start.
    pub(crate) fn may_dispatch_any(&self, now: Instant) -> bool {
        (0..self.config.shards).any(|s| self.may_dispatch(s, now))
    }

    /// Remembers a wanted key of a shard not held here, for when it is.
    pub(crate) fn park(&mut self, shard: u32, key: K) {
        if let Some(s) = self.shards.get_mut(shard as usize) {
            s.parked.insert(key);
        }
    }

    pub(crate) fn take_parked(&mut self, shard: u32) -> BTreeSet<K> {
        self.shards
            .get_mut(shard as usize)
            .map(|s| std::mem::take(&mut s.parked))
            .unwrap_or_default()
    }

    pub(crate) fn take_changes(&mut self) -> Vec<ShardChange> {
        std::mem::take(&mut self.changes)
    }

    pub(crate) fn take_takeovers(&mut self) -> Vec<Duration> {
        std::mem::take(&mut self.takeovers)
    }

    pub(crate) fn owns_request(&self, req: RequestId) -> bool {
        self.list.is_some_and(|(r, _)| r == req)
            || self.member.owns_request(req)
            || self.shards.iter().any(|s| s.elector.owns_request(req))
    }

    pub(crate) fn has_releasing(&self) -> bool {
        self.shards.iter().any(|s| s.releasing_since.is_some())
    }

    /// Shards held now, without building the whole view (the metrics take it every turn).
    pub(crate) fn held_count(&self, now: Instant) -> usize {
        self.shards
            .iter()
            .filter(|s| s.elector.is_leader(now))
            .count()
    }

    pub(crate) fn sharding(&self, now: Instant) -> Sharding {
        let held = (0..self.config.shards)
            .filter(|&i| self.shards[i as usize].elector.is_leader(now))
            .collect::<Vec<_>>();
        let releasing = held
            .iter()
            .copied()
            .filter(|&i| self.shards[i as usize].releasing_since.is_some())
            .collect();
        Sharding {
            held,
            releasing,
            shards: self.config.shards,
            live: self.live,
            target: self.target,
            acquired_total: self.acquired_total,
            handovers_total: self.handovers_total,
        }
    }

    /// The next timer: a retry period's tick, an unanswered request, a term's end, or a
    /// handover's drain bound.
    pub(crate) fn deadline(&self) -> Option<(Instant, ElectionWake)> {
        let tick = self.next_tick.map(|at| (at, ElectionWake::Attempt));
        let list = self
            .list
            .map(|(_, sent)| (sent + self.config.renew_deadline, ElectionWake::Attempt));
        // A shard with a write on its way is released once that write is answered or
        // abandoned (the elector's own deadline): its drain bound, past, would only wake the
        // loop again at once, for ever (issue 33, found by the simulator's sharded seeds).
        let drain = self
            .shards
            .iter()
            .filter(|s| !s.elector.writing())
            .filter_map(|s| s.releasing_since)
            .map(|since| (since + self.config.handover_drain, ElectionWake::Attempt));
        let electors = self
            .shards
            .iter()
            .map(|s| &s.elector)
            .chain(std::iter::once(&self.member))
            .filter_map(Elector::deadline);
        tick.into_iter()
            .chain(list)
            .chain(
                if self.draining { None } else { Some(drain) }
                    .into_iter()
                    .flatten(),
            )
            .chain(electors)
            .reduce(|a, b| if b.0 < a.0 { b } else { a })
    }

    pub(crate) fn handle_timeout<O, P>(
        &mut self,
        now: Instant,
        running: &BTreeMap<u32, usize>,
        ids: &mut (impl MintIds + ?Sized),
        out: &mut Outbox<O, P>,
    ) {
        for i in 0..self.config.shards {
            let change = self.shards[i as usize]
                .elector
                .handle_timeout(now, ids, out);
            self.elector_changed(now, i, change);
        }
        self.member.handle_timeout(now, ids, out);
        if let Some((req, sent)) = self.list
            && now >= sent + self.config.renew_deadline
        {
            self.list = None;
            out.push_back(Output::Event(Event::LeaseFailed {
                req,
                error: "no answer within renew_deadline".into(),
            }));
        }
        if self.next_tick.is_some_and(|at| now >= at) {
            self.tick(now, ids, out);
        }
        self.hand_over(now, running, ids, out);
    }

    pub(crate) fn handle_response<O, P>(
        &mut self,
        now: Instant,
        req: RequestId,
        response: LeaseResponse,
        running: &BTreeMap<u32, usize>,
        ids: &mut (impl MintIds + ?Sized),
        out: &mut Outbox<O, P>,
    ) {
        if let Some((r, sent)) = self.list
            && r == req
        {
            self.list = None;
            match self.read_list(now, sent, response, out) {
                Ok(()) => self.rebalance(now, running, ids, out),
                Err(error) => out.push_back(Output::Event(Event::LeaseFailed { req, error })),
            }
            self.hand_over(now, running, ids, out);
            return;
        }
        if self.member.owns_request(req) {
            self.member.handle_response(now, req, response, ids, out);
            return;
        }
        if let Some(i) =
            (0..self.config.shards).find(|&i| self.shards[i as usize].elector.owns_request(req))
        {
            let change = self.shards[i as usize]
                .elector
                .handle_response(now, req, response, ids, out);
            self.elector_changed(now, i, change);
            self.hand_over(now, running, ids, out);
        }
    }

    /// A running reconcile ended: a shard being given up may now be drained.
    pub(crate) fn reconcile_ended<O, P>(
        &mut self,
        now: Instant,
        running: &BTreeMap<u32, usize>,
        ids: &mut (impl MintIds + ?Sized),
        out: &mut Outbox<O, P>,
    ) {
        self.hand_over(now, running, ids, out);
    }

    /// A graceful stop began: no shard is taken any more, and each held shard is written
    /// free as soon as its running reconciles have ended.
    pub(crate) fn drain<O, P>(
        &mut self,
        now: Instant,
        running: &BTreeMap<u32, usize>,
        ids: &mut (impl MintIds + ?Sized),
        out: &mut Outbox<O, P>,
    ) {
        self.draining = true;
        self.hand_over(now, running, ids, out);
    }

    /// Ends every term; with `release_on_stop` the held shards and the membership are
    /// written free.
    pub(crate) fn stop<O, P>(
        &mut self,
        now: Instant,
        ids: &mut (impl MintIds + ?Sized),
        out: &mut Outbox<O, P>,
    ) {
        self.stopped = true;
        self.next_tick = None;
        self.list = None;
        for i in 0..self.config.shards {
            let shard = &mut self.shards[i as usize];
            shard.releasing_since = None;
            if shard.elector.stop(now, ids, out) {
                self.handovers_total += 1;
                self.changes.push(ShardChange::Lost(i));
            }
        }
        self.member.stop(now, ids, out);
    }

    fn elector_changed(&mut self, now: Instant, i: u32, change: Change) {
        let shard = &mut self.shards[i as usize];
        match change {
            Change::None => {}
            Change::Acquired => {
                self.acquired_total += 1;
                if let Some(since) = shard.claimable_since.take() {
                    self.takeovers.push(now.saturating_duration_since(since));
                }
                self.changes.push(ShardChange::Acquired(i));
            }
            Change::Lost => {
                self.handovers_total += 1;
                shard.releasing_since = None;
                self.changes.push(ShardChange::Lost(i));
            }
        }
    }

    /// Every retry period: renew what is held, keep the membership, read the set.
    fn tick<O, P>(
        &mut self,
        now: Instant,
        ids: &mut (impl MintIds + ?Sized),
        out: &mut Outbox<O, P>,
    ) {
        self.next_tick = None;
        if self.stopped {
            return;
        }
        for shard in &mut self.shards {
            shard.elector.renew(now, ids, out);
        }
        if !self.member.renew(now, ids, out) {
            self.member.campaign(now, ids, out);
        }
        if self.list.is_none() {
            let req = ids.request();
            self.list = Some((req, now));
            out.push_back(Output::Command(Command::Lease {
                req,
                namespace: self.config.namespace.clone(),
                name: String::new(),
                request: LeaseRequest::List {
                    label_selector: self.config.label_selector(),
                },
            }));
        }
        self.next_tick = Some(now + self.config.retry_period);
    }

    fn read_list<O, P>(
        &mut self,
        now: Instant,
        sent: Instant,
        response: LeaseResponse,
        out: &mut Outbox<O, P>,
    ) -> Result<(), String> {
        let body = match response {
            LeaseResponse::Response { status: 200, body } => body,
            LeaseResponse::Response { status, .. } => return Err(format!("list: HTTP {status}")),
            LeaseResponse::TransportError(e) => return Err(format!("list: transport: {e}")),
        };
        let max = max_list_bytes(self.config.shards);
        if body.len() > max {
            return Err(format!(
                "lease list of {} bytes, more than {max}",
                body.len()
            ));
        }
        let list: LeaseList =
            serde_json::from_slice(&body).map_err(|e| format!("lease list: {e}"))?;
        if list.items.len() > self.config.shards as usize + MAX_MEMBERS {
            return Err(format!("lease list of {} items", list.items.len()));
        }
        let shard_prefix = format!("{}-shard-", self.config.name);
        let member_prefix = format!("{}-member-", self.config.name);
        let mut seen = vec![false; self.config.shards as usize];
        let mut own_seen = false;
        let mut members = BTreeMap::new();
        for lease in list.items {
            let name = lease.metadata.name.clone();
            if name == self.member_name {
                own_seen = true;
                if lease.spec.holder_identity.as_deref() == Some(self.config.identity.as_str()) {
                    self.published = true;
                }
                self.member.observe_listed(now, lease, sent, out)?;
            } else if let Some(i) = name
                .strip_prefix(&shard_prefix)
                .and_then(|i| i.parse::<u32>().ok())
                .filter(|&i| i < self.config.shards)
            {
                seen[i as usize] = true;
                self.shards[i as usize]
                    .elector
                    .observe_listed(now, lease, sent, out)?;
            } else if name.starts_with(&member_prefix) && members.len() < MAX_MEMBERS {
                let resource_version = lease.metadata.resource_version.unwrap_or_default();
                let at = match self.members.get(&name) {
                    Some(m) if m.resource_version == resource_version => m.at,
                    _ => now,
                };
                let member = Member {
                    resource_version,
                    holder: lease.spec.holder_identity.unwrap_or_default(),
                    duration: Duration::from_secs(u64::from(
                        lease.spec.lease_duration_seconds.unwrap_or(0),
                    )),
                    at,
                };
                members.insert(name, member);
            }
        }
        self.members = members;
        if !own_seen && self.member.takes_list(sent) {
            self.member.forget(now);
        }
        for (i, seen) in seen.into_iter().enumerate() {
            if !seen && self.shards[i].elector.takes_list(sent) {
                self.shards[i].elector.forget(now);
            }
        }
        let others: BTreeSet<&str> = self
            .members
            .values()
            .filter(|m| !m.holder.is_empty() && m.holder != self.config.identity)
            .filter(|m| now < m.at + m.duration)
            .map(|m| m.holder.as_str())
            .collect();
        let live = others.len() + 1;
        let target = (self.config.shards as usize).div_ceil(live);
        if (live, target) != (self.live, self.target) {
            self.live = live;
            self.target = target;
            out.push_back(Output::Event(Event::ShardMembers { live, target }));
        }
        Ok(())
    }

    /// This replica's preference for a shard: a rendezvous hash, so replicas rank shards
    /// differently and rarely race for the same one.
    fn score(&self, shard: u32) -> u64 {
        let mut text = self.config.identity.clone();
        text.push('\0');
        text.push_str(&shard.to_string());
        fnv1a64(text.as_bytes())
    }

    /// Gives up the excess over the target, or campaigns for free shards below it.
    fn rebalance<O, P>(
        &mut self,
        now: Instant,
        running: &BTreeMap<u32, usize>,
        ids: &mut (impl MintIds + ?Sized),
        out: &mut Outbox<O, P>,
    ) {
        if self.stopped {
            return;
        }
        for shard in &mut self.shards {
            if shard.elector.claimable(now) && !shard.elector.is_leader(now) {
                shard.claimable_since.get_or_insert(now);
            } else if !shard.elector.is_leader(now) {
                shard.claimable_since = None;
            }
        }
        if self.draining {
            return;
        }
        let keeping: Vec<u32> = (0..self.config.shards)
            .filter(|&i| {
                let s = &self.shards[i as usize];
                s.elector.is_leader(now) && s.releasing_since.is_none()
            })
            .collect();
        let acquiring = self
            .shards
            .iter()
            .filter(|s| s.elector.writing() && !s.elector.is_leader(now))
            .count();
        if keeping.len() > self.target {
            let mut ranked = keeping;
            ranked.sort_by_key(|&i| (self.score(i), i));
            let excess = ranked.len() - self.target;
            for &i in &ranked[..excess] {
                self.shards[i as usize].releasing_since = Some(now);
                out.push_back(Output::Event(Event::ShardReleasing {
                    shard: i,
                    running: running.get(&i).copied().unwrap_or(0),
                }));
            }
            return;
        }
        if !self.published || self.has_releasing() {
            return;
        }
        let room = self.target.saturating_sub(keeping.len() + acquiring);
        if room == 0 {
            return;
        }
        let mut free: Vec<u32> = (0..self.config.shards)
            .filter(|&i| {
                let e = &self.shards[i as usize].elector;
                !e.is_leader(now) && !e.writing() && e.claimable(now)
            })
            .collect();
        free.sort_by_key(|&i| (std::cmp::Reverse(self.score(i)), i));
        for &i in free.iter().take(room) {
            self.shards[i as usize].elector.campaign(now, ids, out);
        }
    }

    /// Writes free every shard given up whose reconciles have ended; past the drain bound,
    /// has them cancelled first.
    fn hand_over<O, P>(
        &mut self,
        now: Instant,
        running: &BTreeMap<u32, usize>,
        ids: &mut (impl MintIds + ?Sized),
        out: &mut Outbox<O, P>,
    ) {
        if self.stopped {
            return;
        }
        for i in 0..self.config.shards {
            let shard = &mut self.shards[i as usize];
            let leading = shard.elector.is_leader(now);
            if self.draining && leading && shard.releasing_since.is_none() {
                shard.releasing_since = Some(now);
            }
            let Some(since) = shard.releasing_since else {
                continue;
            };
            if !leading {
                shard.releasing_since = None;
                continue;
            }
            let busy = running.get(&i).copied().unwrap_or(0);
            if busy > 0 {
                // A graceful stop waits for its reconciles under the loop's own bound.
                if self.draining || now < since + self.config.handover_drain {
                    continue;
                }
                self.changes.push(ShardChange::Cancel(i));
            }
            if shard.elector.writing() {
                // A renewal on its way: released once it is answered.
                continue;
            }
            shard.releasing_since = None;
            shard.elector.release(now, ids, out);
            self.handovers_total += 1;
            self.changes.push(ShardChange::Lost(i));
        }
    }
}
