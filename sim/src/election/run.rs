//! One election run: a discrete-event loop on real time over the candidates, the pods world
//! and the Lease. At each step the earliest of (the scenario's happenings, inputs a resumed
//! candidate has waiting, network deliveries, a candidate's reconcile completion or
//! deadline) happens, in that fixed order on ties, candidates by index.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt::Write as _;
use std::time::Duration;

use reconcile_core::{Command, Instant, KeyBy};

use crate::apiserver::lease::LeaseSet;
use crate::apiserver::world::World;
use crate::clock::Clock;
use crate::harness::{
    Candidate, Cmd, Harness, LeadershipChange, PathCounts, Render, StepIo, Violation,
};
use crate::simulate::options::MAX_AGENDA;
use crate::trace::{Header, ScriptedOutcome};

use crate::election::scenario::{
    ElectionFault, LEASE_NAME, LEASE_NAMESPACE, Scenario, ScenarioError, WorkOp,
};
use crate::election::state::*;
use crate::election::terms::liveness_bound;

/// Runs `scenario`.
///
/// # Errors
/// When it is out of bounds ([`Scenario::validate`]).
pub fn run(scenario: &Scenario, opts: &RunOptions) -> Result<ElectionReport, ScenarioError> {
    scenario.validate()?;
    let mut run = Run::new(scenario, opts);
    run.run();
    Ok(run.report())
}

impl<'a> Run<'a> {
    pub(super) fn new(s: &'a Scenario, opts: &'a RunOptions) -> Self {
        let header = Header {
            description: None,
            namespace: Some("default".into()),
            label_selector: Some("app=cell".into()),
            parent: KeyBy::Label("cell".into()),
            concurrency: s.concurrency,
            timeout_seconds: s.timeout_seconds,
            bookmark_interval: None,
            ..Header::default()
        };
        let cands = s
            .candidates
            .iter()
            .map(|c| Cand {
                name: c.name.clone(),
                clock: Clock::new(Instant::ZERO, at_ms(c.origin_ms), c.rate_ppm),
                drain: c.drain,
                incarnation: 0,
                proc_: usize::MAX,
                h: None,
                paused_until: None,
                inbox: VecDeque::new(),
                partition: None,
                held: VecDeque::new(),
                alive: BTreeSet::new(),
                open: BTreeSet::new(),
                cancelled_lists: BTreeSet::new(),
            })
            .collect();
        let (heal, bound) = liveness_bound(s);
        let shard_set = s.shard_config("", false);
        let shards = s.shards.unwrap_or(1);
        let r_min = s
            .candidates
            .iter()
            .map(|c| c.rate_ppm)
            .min()
            .unwrap_or(crate::clock::PPM);
        let retry_real = Clock::new(Instant::ZERO, Instant::ZERO, r_min)
            .real(at_ms(s.retry_period_ms))
            .since_origin();
        let last_op = s.workload.iter().map(WorkOp::at_ms).max().unwrap_or(0);
        let horizon = (heal + bound).max(at_ms(last_op)) + Duration::from_secs(s.settle_s);
        Run {
            s,
            opts,
            world: World::new(&header),
            header,
            key_by: KeyBy::Label("cell".into()),
            now: Instant::ZERO,
            out: String::new(),
            lease: LeaseSet::new(LEASE_NAMESPACE),
            shard_set,
            shards,
            held_since_heal: vec![None; shards as usize],
            balance_at: heal + bound + retry_real,
            balance: None,
            cands,
            procs: Vec::new(),
            agenda: BTreeMap::new(),
            seq: 0,
            renew_deadline: ms(s.renew_deadline_ms),
            violations: Vec::new(),
            paths: PathCounts::new(),
            retired_steps: 0,
            retired_reconciles: 0,
            membership_changed: BTreeMap::new(),
            parents_seen: BTreeSet::new(),
            heal,
            bound,
            horizon,
            liveness_reported: false,
            resolved: vec![None; s.faults.len()],
            takeovers: 0,
            closest_handover: None,
        }
    }

    pub(super) fn report(self) -> ElectionReport {
        let elected = self.elected();
        let mut violations = self.violations;
        violations.sort_by_key(|v| v.at);
        ElectionReport {
            output: self.out,
            violations,
            paths: self.paths,
            steps: self.retired_steps,
            reconciles: self.retired_reconciles,
            terms: self.procs.iter().map(|p| p.terms).sum(),
            takeovers: self.takeovers,
            heal: self.heal,
            bound: self.bound,
            elected,
            shards: self.shards,
            balance: self.balance,
            closest_handover: self.closest_handover,
            end: self.now,
        }
    }

    pub(super) fn timeline(&self) -> Vec<(Instant, Happening)> {
        let mut t: Vec<(Instant, u8, usize, Happening)> = Vec::new();
        for (i, op) in self.s.workload.iter().enumerate() {
            t.push((at_ms(op.at_ms()), 1, i, Happening::Work(i)));
        }
        for (i, c) in self.s.candidates.iter().enumerate() {
            t.push((at_ms(c.start_ms), 2, i, Happening::Start(i)));
        }
        for (i, f) in self.s.faults.iter().enumerate() {
            t.push((at_ms(f.at_ms()), 3, i, Happening::Strike(i)));
            let heals = !matches!(
                f,
                ElectionFault::ForeignWrite { .. }
                    | ElectionFault::Stop {
                        restart_after_ms: None,
                        ..
                    }
                    | ElectionFault::Crash {
                        restart_after_ms: None,
                        ..
                    }
            );
            if heals {
                // Heals go first at an instant: a fault striking as another heals stays.
                t.push((at_ms(f.at_ms() + f.lasts_ms()), 0, i, Happening::Heal(i)));
            }
        }
        t.sort_by_key(|(at, rank, i, _)| (*at, *rank, *i));
        t.into_iter().map(|(at, _, _, h)| (at, h)).collect()
    }

    pub(super) fn steps(&self) -> u64 {
        self.retired_steps
            + self
                .cands
                .iter()
                .filter_map(|c| c.h.as_ref())
                .map(Harness::steps)
                .sum::<u64>()
    }

    pub(super) fn run(&mut self) {
        let timeline = self.timeline();
        let mut next = 0;
        loop {
            if self.steps() >= self.opts.max_steps {
                self.violation("step limit", format!("{} steps (livelock?)", self.steps()));
                break;
            }
            if self.agenda.len() > MAX_AGENDA {
                self.violation(
                    "queue unbounded",
                    format!("{} network deliveries queued", self.agenda.len()),
                );
                break;
            }
            let t_hap = timeline.get(next).map(|(t, _)| *t);
            let inbox = self.ready_inbox();
            let t_agenda = self.agenda.first_key_value().map(|((t, _), _)| *t);
            let due = self.next_due();
            let Some(t) = [t_hap, inbox.map(|_| self.now), t_agenda, due.map(|d| d.0)]
                .into_iter()
                .flatten()
                .min()
            else {
                break;
            };
            self.check_liveness(t);
            self.check_balance(t);
            if t > self.horizon {
                break;
            }
            self.now = self.now.max(t);
            if t_hap.is_some_and(|t| t <= self.now) {
                let (_, happening) = timeline[next];
                next += 1;
                self.happen(happening);
            } else if let Some(c) = inbox {
                if let Some(d) = self.cands[c].inbox.pop_front() {
                    self.act(d);
                }
            } else if t_agenda.is_some_and(|t| t <= self.now) {
                if let Some((_, d)) = self.agenda.pop_first() {
                    self.route(d);
                }
            } else if let Some((_, c, completion)) = due {
                if completion {
                    self.feed_opt(c, Harness::complete_due);
                } else {
                    self.feed(c, Harness::timeout);
                }
            }
        }
        self.check_liveness(self.horizon.max(self.now) + Duration::from_nanos(1));
        self.check_balance(self.horizon.max(self.now) + Duration::from_nanos(1));
        // Who holds each shard at the end (leads, unsharded), for the convergence check: the
        // latest term on it still running.
        let owners: Vec<Option<usize>> = (0..self.shards)
            .map(|shard| {
                (0..self.procs.len())
                    .filter(|&p| {
                        self.procs[p]
                            .term
                            .get(&shard)
                            .is_some_and(|t| self.now < self.clock_of(p).real(t.until))
                    })
                    .max_by_key(|&p| self.procs[p].term.get(&shard).map(|t| t.start))
            })
            .collect();
        // Terms still open end now (or at their deadline): every dispatch before is known.
        for p in 0..self.procs.len() {
            self.close_terms(p, self.now);
        }
        if self.opts.check {
            self.check_caches();
        }
        for c in 0..self.cands.len() {
            if let Some(h) = self.cands[c].h.take() {
                let p = self.cands[c].proc_;
                self.retire(p, h);
            }
        }
        if self.opts.check {
            if self.shard_set.is_some() {
                self.check_owned(&owners);
            } else if let Some(leader) = owners.first().copied().flatten() {
                self.check_converged(leader);
            }
        }
        let summary = if let Some(set) = &self.shard_set {
            let holders: Vec<String> = (0..self.shards)
                .map(|i| {
                    let holder = self.lease.holder(&set.shard_lease(i)).unwrap_or("-");
                    format!("{i}={}", if holder.is_empty() { "-" } else { holder })
                })
                .collect();
            format!(
                "end: {} steps, {} reconciles, {} terms, {} takeovers; healed at {}, every shard held {} (bound {}s); balance {}; leases rv={} shards {}",
                self.retired_steps,
                self.retired_reconciles,
                self.procs.iter().map(|p| p.terms).sum::<u64>(),
                self.takeovers,
                self.heal,
                self.elected()
                    .map_or_else(|| "never".to_owned(), |t| format!("at {t}")),
                self.bound.as_secs_f64(),
                self.balance.map_or_else(
                    || "unchecked".to_owned(),
                    |(at, most, limit)| format!("at {at}: most held {most}, limit {limit}")
                ),
                self.lease.last_resource_version(),
                holders.join(" "),
            )
        } else {
            format!(
                "end: {} steps, {} reconciles, {} terms, {} takeovers; healed at {}, leader elected {} (bound {}s); lease rv={} holder={}",
                self.retired_steps,
                self.retired_reconciles,
                self.procs.iter().map(|p| p.terms).sum::<u64>(),
                self.takeovers,
                self.heal,
                self.elected()
                    .map_or_else(|| "never".to_owned(), |t| format!("at {t}")),
                self.bound.as_secs_f64(),
                self.lease
                    .resource_version(LEASE_NAME)
                    .map_or_else(|| "-".to_owned(), |rv| rv.to_string()),
                self.lease.holder(LEASE_NAME).unwrap_or("-"),
            )
        };
        self.note(&summary);
    }

    // ----- scheduling -----

    pub(super) fn schedule(&mut self, at: Instant, cand: usize, proc_: usize, what: What) {
        self.seq += 1;
        self.agenda
            .insert((at, self.seq), Delivery { cand, proc_, what });
    }

    /// A candidate back from a pause with inputs waiting: they go first, in order.
    pub(super) fn ready_inbox(&self) -> Option<usize> {
        self.cands
            .iter()
            .position(|c| c.paused_until.is_none() && c.h.is_some() && !c.inbox.is_empty())
    }

    /// The earliest reconcile completion or deadline of a running, unpaused candidate, in
    /// real time: (when, candidate, whether a completion).
    pub(super) fn next_due(&self) -> Option<(Instant, usize, bool)> {
        let mut best: Option<(Instant, usize, bool)> = None;
        for (i, c) in self.cands.iter().enumerate() {
            if c.paused_until.is_some() {
                continue;
            }
            let Some(h) = &c.h else { continue };
            let done = h.next_completion().map(|l| (c.clock.real(l), i, true));
            let timer = h.core_deadline().map(|d| (c.clock.real(d.at), i, false));
            for x in [done, timer].into_iter().flatten() {
                let key = |d: (Instant, usize, bool)| (d.0, d.1, !d.2);
                if best.is_none_or(|b| key(x) < key(b)) {
                    best = Some(x);
                }
            }
        }
        best
    }

    /// Steps candidate `c`'s harness at the current real time, keeps its line, and acts on
    /// what the step asked for.
    pub(super) fn feed(&mut self, c: usize, f: impl FnOnce(&mut Harness) -> StepIo) {
        self.feed_opt(c, |h| Some(f(h)));
    }

    pub(super) fn feed_opt(&mut self, c: usize, f: impl FnOnce(&mut Harness) -> Option<StepIo>) {
        let now = self.now;
        let Some(h) = self.cands[c].h.as_mut() else {
            return;
        };
        h.set_real(now);
        let io = f(h);
        let out = h.take_output();
        self.out.push_str(&out);
        if let Some(io) = io {
            self.after(c, io);
        }
    }

    pub(super) fn after(&mut self, c: usize, io: StepIo) {
        let p = self.cands[c].proc_;
        // The core reports a won term before the reconciles it starts.
        let changes = io.leadership.into_iter().map(|change| (0, change));
        for (shard, change) in changes.chain(io.shards) {
            match change {
                LeadershipChange::Acquired => self.open_term(p, shard),
                LeadershipChange::Lost => self.close_term(p, shard, self.now),
            }
        }
        for parent in io.dispatched {
            self.dispatched(p, parent);
        }
        for command in io.commands {
            self.command(c, p, command);
        }
    }

    pub(super) fn command(&mut self, c: usize, p: usize, command: Cmd) {
        let now = self.now;
        match command {
            Command::List { req, .. } => self.schedule(now, c, p, What::List(req)),
            Command::CancelList { req } => {
                self.cands[c].cancelled_lists.insert(req);
            }
            Command::Watch {
                stream,
                resource_version,
                ..
            } => {
                self.cands[c].alive.insert(stream);
                self.schedule(now, c, p, What::WatchOpen(stream, resource_version));
            }
            Command::CloseWatch { stream } => {
                self.cands[c].alive.remove(&stream);
                self.cands[c].open.remove(&stream);
            }
            Command::Lease {
                req, name, request, ..
            } => self.send_lease(c, p, req, name, request),
            _ => {}
        }
    }

    // ----- invariants -----

    pub(super) fn violation(&mut self, invariant: &'static str, detail: String) {
        self.violations.push(Violation {
            at: self.now,
            invariant,
            detail,
        });
    }

    pub(super) fn count(&mut self, path: &'static str) {
        *self.paths.entry(path).or_default() += 1;
    }

    pub(super) fn clock_of(&self, p: usize) -> Clock {
        self.cands[self.procs[p].cand].clock
    }

    pub(super) fn label(&self, describe: impl FnOnce() -> String) -> String {
        if self.opts.render == Render::Quiet {
            String::new()
        } else {
            describe()
        }
    }

    pub(super) fn note(&mut self, text: &str) {
        match self.opts.render {
            Render::Text => {
                let _ = writeln!(self.out, "{:>12}  # {text}", self.now.to_string());
            }
            Render::Json => {
                let _ = writeln!(
                    self.out,
                    "{}",
                    serde_json::json!({"t_ns": self.now.as_nanos(), "note": text})
                );
            }
            Render::Quiet => {}
        }
    }

    pub(super) fn happen(&mut self, happening: Happening) {
        let s = self.s;
        match happening {
            Happening::Work(i) => match &s.workload[i] {
                WorkOp::Put { pod, .. } => self.world_put(&pod.to_string()),
                WorkOp::Delete { key, .. } => self.world_delete(key),
                WorkOp::Requeue {
                    parent, after_ms, ..
                } => self.script(parent, ScriptedOutcome::RequeueAfter(ms(*after_ms))),
                WorkOp::Fail { parent, .. } => {
                    self.script(parent, ScriptedOutcome::Error("scripted failure".into()));
                }
            },
            Happening::Start(c) => self.start(c),
            Happening::Strike(i) => self.strike(i),
            Happening::Heal(i) => self.heal_fault(i),
        }
    }

    /// The next reconcile of `parent`, by whichever candidate runs it, ends so.
    pub(super) fn script(&mut self, parent: &str, outcome: ScriptedOutcome) {
        for c in &mut self.cands {
            if let Some(h) = &mut c.h {
                h.script(Some(parent.to_owned()), outcome.clone(), Duration::ZERO);
            }
        }
    }

    /// Starts a new process for candidate `c`: a fresh core, a new identity after the first.
    pub(super) fn start(&mut self, c: usize) {
        if self.cands[c].h.is_some() {
            return;
        }
        let cand = &mut self.cands[c];
        cand.incarnation += 1;
        let identity = if cand.incarnation == 1 {
            cand.name.clone()
        } else {
            format!("{}-{}", cand.name, cand.incarnation)
        };
        let p = self.procs.len();
        self.procs.push(Proc {
            cand: c,
            identity: identity.clone(),
            dispatches: Vec::new(),
            term: BTreeMap::new(),
            last_end: BTreeMap::new(),
            latent: BTreeMap::new(),
            terms: 0,
            last_dispatch: BTreeMap::new(),
            known_parents: BTreeSet::new(),
        });
        let candidate = Candidate {
            name: identity.clone(),
            clock: self.cands[c].clock,
        };
        let built = match self.s.shard_config(&identity, self.cands[c].drain) {
            Some(shards) => Harness::for_replica(
                &self.header,
                shards,
                candidate,
                self.now,
                self.opts.render,
                self.opts.max_steps,
            ),
            None => Harness::for_candidate(
                &self.header,
                self.s.election(&identity, self.cands[c].drain),
                candidate,
                self.now,
                self.opts.render,
                self.opts.max_steps,
            ),
        };
        match built {
            Ok(mut h) => {
                h.set_default_duration(ms(self.s.reconcile_ms));
                h.check_cursors();
                h.set_queue_bound(self.parents_seen.len().max(1));
                if self.opts.sabotage == Some(Sabotage::LoseDispatches) {
                    let from = self.cands[c].clock.local(self.heal.max(self.now));
                    h.lose_dispatches_from(from);
                }
                let cand = &mut self.cands[c];
                cand.proc_ = p;
                cand.h = Some(h);
                cand.alive.clear();
                cand.open.clear();
                cand.cancelled_lists.clear();
            }
            Err(e) => {
                self.violation("configuration", format!("{identity}: {e}"));
                return;
            }
        }
        if self.cands[c].incarnation > 1 {
            self.count("election: candidate restarted");
        }
        self.feed(c, Harness::start);
    }

    /// A candidate's process goes away: what it counted and checked is kept.
    pub(super) fn take_down(&mut self, c: usize) {
        let cand = &mut self.cands[c];
        let Some(h) = cand.h.take() else { return };
        cand.paused_until = None;
        cand.inbox.clear();
        // Its connections die with it, and what they held.
        cand.held.clear();
        cand.alive.clear();
        cand.open.clear();
        cand.cancelled_lists.clear();
        let p = cand.proc_;
        self.retire(p, h);
    }

    pub(super) fn retire(&mut self, p: usize, mut h: Harness) {
        let clock = self.clock_of(p);
        self.retired_steps += h.steps();
        self.retired_reconciles += h.core().stats().reconciles;
        for (path, n) in &h.paths {
            *self.paths.entry(path).or_default() += n;
        }
        for v in h.violations.drain(..) {
            self.violations.push(Violation {
                // The harness keeps its candidate's time.
                at: clock.real(v.at),
                invariant: v.invariant,
                detail: format!("{}: {}", self.procs[p].identity, v.detail),
            });
        }
        self.procs[p].last_dispatch = std::mem::take(&mut h.last_dispatch);
        self.procs[p].known_parents = std::mem::take(&mut h.known_parents);
    }
}
