//! One election run: a discrete-event loop on real time over the candidates, the pods world
//! and the Lease. At each step the earliest of (the scenario's happenings, inputs a resumed
//! candidate has waiting, network deliveries, a candidate's reconcile completion or
//! deadline) happens, in that fixed order on ties, candidates by index.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use reconcile_core::pod::PodView;
use reconcile_core::{
    Command, Input, Instant, KeyBy, LeaseRequest, LeaseResponse, Lifecycle, ListResponse, Object,
    RequestId, SourceId, StreamEnd, StreamId,
};

use crate::apiserver::lease::{LeaseAnswer, LeaseStore};
use crate::apiserver::world::{Frame, ListAnswer, WatchAnswer, World};
use crate::clock::{Clock, rfc3339};
use crate::describe;
use crate::harness::{
    Candidate, Cmd, Dispatch, Harness, LeadershipChange, PathCounts, Render, StepIo, Violation,
};
use crate::simulate::options::MAX_AGENDA;
use crate::simulate::quiescence::differences;
use crate::trace::{Header, ScriptedOutcome};

use crate::election::scenario::{
    ElectionFault, LEASE_NAME, LEASE_NAMESPACE, PartitionMode, Scenario, ScenarioError, WorkOp,
};

/// Safety: a process dispatched while another's term covered the instant.
pub const TWO_LEADERS: &str = "two leaders dispatch at once";

/// Safety: a process dispatched outside every term of its own.
pub const OUTSIDE_TERM: &str = "dispatch outside its own term";

/// Liveness: no leader within the bound after the faults healed.
pub const NO_LEADER: &str = "no leader elected after the faults healed";

/// Requests (and answers) a partition holds per candidate at most; older ones are dropped.
pub const MAX_HELD: usize = 256;

/// Inputs waiting for a paused candidate at most.
pub const MAX_INBOX: usize = 100_000;

/// Options of an election run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// How steps are written.
    pub render: Render,
    /// Steps over all candidates at most (a livelock detector).
    pub max_steps: u64,
    /// Check the quiescence invariants at the end (each cache equals the world, each parent
    /// reconciled with its final members).
    pub check: bool,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            render: Render::Text,
            max_steps: 5_000_000,
            check: true,
        }
    }
}

/// What an election run produced.
#[derive(Debug, Clone)]
pub struct ElectionReport {
    /// The rendered steps: one line per step, naming the candidate.
    pub output: String,
    /// Invariants broken, in time order.
    pub violations: Vec<Violation>,
    /// Fault paths reached.
    pub paths: PathCounts,
    /// Steps over all candidates.
    pub steps: u64,
    /// Reconciles dispatched over all candidates.
    pub reconciles: u64,
    /// Terms begun over all candidates.
    pub terms: u64,
    /// Writes that moved the Lease from one holder to another.
    pub takeovers: u64,
    /// When the last fault healed (or the last candidate started).
    pub heal: Instant,
    /// How long after `heal` a leader must be elected.
    pub bound: Duration,
    /// When the first leader after `heal` was elected.
    pub elected: Option<Instant>,
    /// The closest handover: a term's start minus the end of the latest term of every other
    /// process, the least over the run, in ns (negative: the terms overlapped).
    pub closest_handover: Option<i64>,
    /// Real time at the end.
    pub end: Instant,
}

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

fn ms(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

fn at_ms(t: u64) -> Instant {
    Instant::from_duration(ms(t))
}

/// One process: a candidate's incarnation, with its own identity, terms and dispatches.
struct Proc {
    cand: usize,
    identity: String,
    /// Every dispatch, in time order: (real instant, parent).
    dispatches: Vec<(Instant, String)>,
    term: Option<Term>,
    /// The latest term end (real) of this process, once one closed.
    last_end: Option<Instant>,
    /// Local instant until which the writes the store applied for this process keep
    /// everyone else waiting: the latest such write's local send instant + renew_deadline.
    latent: Option<Instant>,
    terms: u64,
    /// Its harness's last dispatch per parent, once the harness is retired.
    last_dispatch: BTreeMap<String, Dispatch>,
    /// Every parent its cache ever held an object of, once the harness is retired.
    known_parents: BTreeSet<String>,
}

#[derive(Debug, Clone, Copy)]
struct Term {
    /// Real instant of `LeadershipAcquired`.
    start: Instant,
    /// Local instant the term lasts until, unless `LeadershipLost` comes first.
    until: Instant,
}

struct Cand {
    name: String,
    clock: Clock,
    drain: bool,
    incarnation: u32,
    /// Its current process (`usize::MAX` before it first starts).
    proc_: usize,
    /// `None` while it is down.
    h: Option<Harness>,
    paused_until: Option<Instant>,
    /// What arrived while it was paused, in arrival order.
    inbox: VecDeque<Delivery>,
    /// Mode, lease-only, until.
    partition: Option<(PartitionMode, bool, Instant)>,
    /// Requests and answers a delayed partition holds.
    held: VecDeque<Delivery>,
    alive: BTreeSet<StreamId>,
    open: BTreeSet<StreamId>,
    cancelled_lists: BTreeSet<RequestId>,
}

struct LeaseMsg {
    req: RequestId,
    request: LeaseRequest,
    sent_local: Instant,
    sent_real: Instant,
    wall: String,
}

enum What {
    List(RequestId),
    WatchOpen(StreamId, String),
    Frame(StreamId, Frame),
    End(StreamId, StreamEnd, &'static str),
    WatchTimeout(StreamId),
    /// A Lease request reaching the apiserver.
    LeaseArrive(LeaseMsg),
    /// Its answer reaching the candidate.
    LeaseReply {
        req: RequestId,
        response: LeaseResponse,
        sent_real: Instant,
        label: String,
    },
}

struct Delivery {
    cand: usize,
    proc_: usize,
    what: What,
}

#[derive(Debug, Clone, Copy)]
enum Happening {
    Heal(usize),
    Work(usize),
    Start(usize),
    Strike(usize),
}

struct Run<'a> {
    s: &'a Scenario,
    opts: &'a RunOptions,
    header: Header,
    key_by: KeyBy,
    now: Instant,
    out: String,
    world: World,
    lease: LeaseStore,
    cands: Vec<Cand>,
    procs: Vec<Proc>,
    agenda: BTreeMap<(Instant, u64), Delivery>,
    seq: u64,
    renew_deadline: Duration,
    violations: Vec<Violation>,
    paths: PathCounts,
    retired_steps: u64,
    retired_reconciles: u64,
    membership_changed: BTreeMap<String, Instant>,
    parents_seen: BTreeSet<String>,
    heal: Instant,
    bound: Duration,
    horizon: Instant,
    elected: Option<Instant>,
    liveness_reported: bool,
    /// The candidate each fault hit, for its healing.
    resolved: Vec<Option<usize>>,
    takeovers: u64,
    closest_handover: Option<i64>,
}

impl<'a> Run<'a> {
    fn new(s: &'a Scenario, opts: &'a RunOptions) -> Self {
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
            lease: LeaseStore::new(LEASE_NAMESPACE, LEASE_NAME),
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
            elected: None,
            liveness_reported: false,
            resolved: vec![None; s.faults.len()],
            takeovers: 0,
            closest_handover: None,
        }
    }

    fn report(self) -> ElectionReport {
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
            elected: self.elected,
            closest_handover: self.closest_handover,
            end: self.now,
        }
    }

    fn timeline(&self) -> Vec<(Instant, Happening)> {
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

    fn steps(&self) -> u64 {
        self.retired_steps
            + self
                .cands
                .iter()
                .filter_map(|c| c.h.as_ref())
                .map(Harness::steps)
                .sum::<u64>()
    }

    fn run(&mut self) {
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
        // Who leads at the end, for the convergence check: the latest term still running.
        let leader = (0..self.procs.len())
            .filter(|&p| {
                self.procs[p]
                    .term
                    .is_some_and(|t| self.now < self.clock_of(p).real(t.until))
            })
            .max_by_key(|&p| self.procs[p].term.map(|t| t.start));
        // Terms still open end now (or at their deadline): every dispatch before is known.
        for p in 0..self.procs.len() {
            self.close_term(p, self.now);
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
        if self.opts.check
            && let Some(leader) = leader
        {
            self.check_converged(leader);
        }
        let summary = format!(
            "end: {} steps, {} reconciles, {} terms, {} takeovers; healed at {}, leader elected {} (bound {}s); lease rv={} holder={}",
            self.retired_steps,
            self.retired_reconciles,
            self.procs.iter().map(|p| p.terms).sum::<u64>(),
            self.takeovers,
            self.heal,
            self.elected
                .map_or_else(|| "never".to_owned(), |t| format!("at {t}")),
            self.bound.as_secs_f64(),
            self.lease
                .resource_version()
                .map_or_else(|| "-".to_owned(), |rv| rv.to_string()),
            self.lease.holder().unwrap_or("-"),
        );
        self.note(&summary);
    }

    // ----- scheduling -----

    fn schedule(&mut self, at: Instant, cand: usize, proc_: usize, what: What) {
        self.seq += 1;
        self.agenda
            .insert((at, self.seq), Delivery { cand, proc_, what });
    }

    /// A candidate back from a pause with inputs waiting: they go first, in order.
    fn ready_inbox(&self) -> Option<usize> {
        self.cands
            .iter()
            .position(|c| c.paused_until.is_none() && c.h.is_some() && !c.inbox.is_empty())
    }

    /// The earliest reconcile completion or deadline of a running, unpaused candidate, in
    /// real time: (when, candidate, whether a completion).
    fn next_due(&self) -> Option<(Instant, usize, bool)> {
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

    /// One-way latency of Lease message `req` of process `p` (`dir` 0 there, 1 back), from
    /// the seed and the message alone.
    fn latency(&self, p: usize, req: RequestId, dir: u64) -> Duration {
        let [lo, hi] = self.s.latency_ms;
        let mut rng = crate::rng::Rng::new(
            self.s.seed
                ^ (p as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
                ^ req.get().wrapping_mul(0xC2B2_AE3D_27D4_EB4F)
                ^ dir.wrapping_mul(0x1656_67B1_9E37_79F9),
        );
        Duration::from_micros(rng.range(lo * 1000, hi * 1000))
    }

    // ----- stepping a candidate -----

    /// Steps candidate `c`'s harness at the current real time, keeps its line, and acts on
    /// what the step asked for.
    fn feed(&mut self, c: usize, f: impl FnOnce(&mut Harness) -> StepIo) {
        self.feed_opt(c, |h| Some(f(h)));
    }

    fn feed_opt(&mut self, c: usize, f: impl FnOnce(&mut Harness) -> Option<StepIo>) {
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

    fn after(&mut self, c: usize, io: StepIo) {
        let p = self.cands[c].proc_;
        // The core reports a won term before the reconciles it starts.
        for change in io.leadership {
            match change {
                LeadershipChange::Acquired => self.open_term(p),
                LeadershipChange::Lost => self.close_term(p, self.now),
            }
        }
        for parent in io.dispatched {
            self.dispatched(p, parent);
        }
        for command in io.commands {
            self.command(c, p, command);
        }
    }

    fn command(&mut self, c: usize, p: usize, command: Cmd) {
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
            Command::Lease { req, request, .. } => self.send_lease(c, p, req, request),
            _ => {}
        }
    }

    // ----- invariants -----

    fn violation(&mut self, invariant: &'static str, detail: String) {
        self.violations.push(Violation {
            at: self.now,
            invariant,
            detail,
        });
    }

    fn count(&mut self, path: &'static str) {
        *self.paths.entry(path).or_default() += 1;
    }

    fn clock_of(&self, p: usize) -> Clock {
        self.cands[self.procs[p].cand].clock
    }

    /// A term begins: it lasts until the local send instant of the latest write the store
    /// applied for this process, plus renew_deadline (the write that won it is one).
    fn open_term(&mut self, p: usize) {
        let now = self.now;
        let clock = self.clock_of(p);
        // A term whose deadline passed without the core saying so (it cannot: the timer
        // fires) ends there.
        self.close_term(p, now);
        let until = self.procs[p].latent.unwrap_or_else(|| clock.local(now));
        // How close this handover came to the other processes' terms.
        for q in 0..self.procs.len() {
            if q == p {
                continue;
            }
            let end = match self.procs[q].term {
                Some(t) => Some(self.clock_of(q).real(t.until)),
                None => self.procs[q].last_end,
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
        proc_.term = Some(Term { start: now, until });
        proc_.terms += 1;
    }

    /// Ends process `p`'s term at `at`, or at its deadline if that came first, and checks
    /// that no other process dispatched while it lasted.
    fn close_term(&mut self, p: usize, at: Instant) {
        let Some(term) = self.procs[p].term.take() else {
            return;
        };
        let end = self.clock_of(p).real(term.until).min(at);
        self.procs[p].last_end = Some(end.max(term.start));
        if end <= term.start {
            return;
        }
        for q in 0..self.procs.len() {
            if q == p {
                continue;
            }
            let d = &self.procs[q].dispatches;
            let i = d.partition_point(|(t, _)| *t < term.start);
            if let Some((t, parent)) = d.get(i)
                && *t < end
            {
                let detail = format!(
                    "{} dispatched {parent} at {t} while {}'s term [{}, {end}) covers it",
                    self.procs[q].identity, self.procs[p].identity, term.start
                );
                self.violations.push(Violation {
                    at: *t,
                    invariant: TWO_LEADERS,
                    detail,
                });
            }
        }
    }

    fn dispatched(&mut self, p: usize, parent: String) {
        let now = self.now;
        let clock = self.clock_of(p);
        let term = self.procs[p].term;
        let covered = term.is_some_and(|t| now >= t.start && now < clock.real(t.until));
        if !covered {
            let detail = match term {
                Some(t) => format!(
                    "{} dispatched {parent} at {now}; its term [{}, {}) does not cover it",
                    self.procs[p].identity,
                    t.start,
                    clock.real(t.until)
                ),
                None => format!(
                    "{} dispatched {parent} at {now} without a term",
                    self.procs[p].identity
                ),
            };
            self.violation(OUTSIDE_TERM, detail);
        }
        self.procs[p].dispatches.push((now, parent));
    }

    /// Once `t` is past the bound: was a leader elected after the faults healed?
    fn check_liveness(&mut self, t: Instant) {
        let deadline = self.heal + self.bound;
        if self.liveness_reported || self.elected.is_some() || t <= deadline {
            return;
        }
        self.liveness_reported = true;
        if self.cands.iter().all(|c| c.h.is_none()) {
            return;
        }
        let detail = format!(
            "healed at {}, none elected within {}s (by {deadline})",
            self.heal,
            self.bound.as_secs_f64()
        );
        self.violations.push(Violation {
            at: deadline,
            invariant: NO_LEADER,
            detail,
        });
    }

    // ----- the Lease -----

    fn send_lease(&mut self, c: usize, p: usize, req: RequestId, request: LeaseRequest) {
        let now = self.now;
        let Some(h) = &self.cands[c].h else {
            return;
        };
        let local = h.now();
        let msg = LeaseMsg {
            req,
            request,
            sent_local: local,
            sent_real: now,
            wall: rfc3339(local),
        };
        match self.cands[c].partition.map(|(mode, ..)| mode) {
            Some(PartitionMode::Refused) => {
                self.count("election: partition refused a lease request");
                let at = now + self.latency(p, req, 0);
                let reply = self.reply(
                    req,
                    LeaseAnswer::Transport("connection refused (network partition)".into()),
                    now,
                );
                self.schedule(at, c, p, reply);
            }
            Some(PartitionMode::Dropped) => {
                self.count("election: partition dropped a lease request");
            }
            Some(PartitionMode::Delayed) => {
                self.count("election: partition held a lease request");
                self.hold(
                    c,
                    Delivery {
                        cand: c,
                        proc_: p,
                        what: What::LeaseArrive(msg),
                    },
                );
            }
            _ => {
                let at = now + self.latency(p, req, 0);
                self.schedule(at, c, p, What::LeaseArrive(msg));
            }
        }
    }

    fn hold(&mut self, c: usize, d: Delivery) {
        let held = &mut self.cands[c].held;
        if held.len() >= MAX_HELD {
            held.pop_front();
        }
        held.push_back(d);
    }

    fn reply(&self, req: RequestId, answer: LeaseAnswer, sent_real: Instant) -> What {
        let rendering = self.opts.render != Render::Quiet;
        let (response, label) = match answer {
            LeaseAnswer::Response { status, body } => {
                let label = if rendering {
                    describe_lease(req, status, &body)
                } else {
                    String::new()
                };
                (
                    LeaseResponse::Response {
                        status,
                        body: Bytes::from(body),
                    },
                    label,
                )
            }
            LeaseAnswer::Transport(e) => {
                let label = if rendering {
                    format!("lease {req} transport error ({e})")
                } else {
                    String::new()
                };
                (LeaseResponse::TransportError(e), label)
            }
        };
        What::LeaseReply {
            req,
            response,
            sent_real,
            label,
        }
    }

    /// A Lease request reaches the apiserver: answered, and its answer sent back.
    fn arrive(&mut self, c: usize, p: usize, msg: LeaseMsg) {
        let now = self.now;
        let before = self.lease.holder().map(str::to_owned);
        let (answer, applied) = self.lease.handle(now, &msg.request, &msg.wall);
        if let Some(applied) = applied {
            if applied.holder == self.procs[p].identity {
                let until = msg.sent_local + self.renew_deadline;
                let proc_ = &mut self.procs[p];
                proc_.latent = Some(proc_.latent.map_or(until, |l| l.max(until)));
                if let Some(term) = &mut proc_.term {
                    term.until = term.until.max(until);
                }
            }
            let path = match before.as_deref() {
                None => "election: lease created",
                _ if applied.holder.is_empty() => "election: lease released",
                Some(b) if b == applied.holder => "election: lease renewed",
                Some("") => "election: free lease taken",
                Some(_) => {
                    self.takeovers += 1;
                    "election: expired lease taken over"
                }
            };
            self.count(path);
        }
        if matches!(answer, LeaseAnswer::Response { status: 422, .. }) {
            // An update without a resourceVersion: a Lease takes no unconditional update.
            self.count("election: lease update without resourceVersion refused (422)");
        }
        let at = now + self.latency(p, msg.req, 1);
        let reply = self.reply(msg.req, answer, msg.sent_real);
        self.schedule(at, c, p, reply);
    }

    /// An answer reaching a partitioned candidate: refused, lost, or held.
    fn through_partition(&mut self, d: Delivery) -> Option<Delivery> {
        let c = d.cand;
        let Some((mode, ..)) = self.cands[c].partition else {
            return Some(d);
        };
        if matches!(
            d.what,
            What::LeaseReply {
                response: LeaseResponse::TransportError(_),
                ..
            }
        ) {
            // Already a failure (the partition refused the request): nothing to lose.
            return Some(d);
        }
        match mode {
            PartitionMode::Refused => {
                let What::LeaseReply { req, sent_real, .. } = d.what else {
                    return Some(d);
                };
                self.count("election: partition reset a lease answer");
                let what = self.reply(
                    req,
                    LeaseAnswer::Transport("connection reset (network partition)".into()),
                    sent_real,
                );
                Some(Delivery { what, ..d })
            }
            PartitionMode::Dropped | PartitionMode::RepliesLost => {
                self.count("election: partition lost a lease answer");
                None
            }
            PartitionMode::Delayed => {
                self.count("election: partition held a lease answer");
                self.hold(c, d);
                None
            }
        }
    }

    fn lease_reply(
        &mut self,
        c: usize,
        req: RequestId,
        response: LeaseResponse,
        sent_real: Instant,
        label: String,
    ) {
        let ok = matches!(&response, LeaseResponse::Response { status, .. } if (200..300).contains(status));
        self.feed(c, |h| {
            h.step(
                || label,
                |core, now| core.handle_input(now, Input::Lease { req, response }),
            )
        });
        if ok && sent_real >= self.heal && self.elected.is_none() {
            let leading = self.cands[c]
                .h
                .as_ref()
                .and_then(|h| h.core().leadership())
                .is_some_and(|l| l.leading);
            if leading {
                self.elected = Some(self.now);
            }
        }
    }

    // ----- deliveries -----

    /// A delivery is due: the apiserver answers a Lease request; anything for a candidate
    /// goes through its partition, then waits if it is paused.
    fn route(&mut self, d: Delivery) {
        let Delivery { cand, proc_, what } = d;
        let d = match what {
            What::LeaseArrive(msg) => return self.arrive(cand, proc_, msg),
            what => Delivery { cand, proc_, what },
        };
        let c = d.cand;
        if self.cands[c].proc_ != d.proc_ || self.cands[c].h.is_none() {
            // For a process that is gone.
            return;
        }
        let d = if matches!(d.what, What::LeaseReply { .. }) {
            match self.through_partition(d) {
                Some(d) => d,
                None => return,
            }
        } else {
            d
        };
        if self.cands[c].paused_until.is_some() || !self.cands[c].inbox.is_empty() {
            if self.cands[c].inbox.len() >= MAX_INBOX {
                let detail = format!(
                    "{MAX_INBOX} inputs waiting for paused {}",
                    self.cands[c].name
                );
                self.violation("queue unbounded", detail);
                return;
            }
            self.cands[c].inbox.push_back(d);
            return;
        }
        self.act(d);
    }

    /// A delivery reaches its candidate.
    fn act(&mut self, d: Delivery) {
        let c = d.cand;
        if self.cands[c].proc_ != d.proc_ || self.cands[c].h.is_none() {
            return;
        }
        match d.what {
            What::List(req) => self.answer_list(c, req),
            What::WatchOpen(stream, cursor) => self.open_watch(c, stream, &cursor),
            What::Frame(stream, frame) => {
                if self.cands[c].open.contains(&stream) {
                    self.deliver_frame(c, stream, &frame);
                }
            }
            What::End(stream, end, why) => {
                if self.cands[c].open.contains(&stream) {
                    self.end_stream(c, stream, end, why);
                }
            }
            What::WatchTimeout(stream) => {
                if self.cands[c].open.contains(&stream) {
                    self.end_stream(c, stream, StreamEnd::Clean, "timeoutSeconds");
                }
            }
            What::LeaseReply {
                req,
                response,
                sent_real,
                label,
            } => self.lease_reply(c, req, response, sent_real, label),
            What::LeaseArrive(msg) => self.arrive(c, d.proc_, msg),
        }
    }

    /// Whether `c`'s LISTs and WATCHes fail (a partition that is not lease-only).
    fn cut_off(&self, c: usize) -> bool {
        self.cands[c]
            .partition
            .is_some_and(|(_, lease_only, _)| !lease_only)
    }

    fn answer_list(&mut self, c: usize, req: RequestId) {
        if self.cands[c].cancelled_lists.remove(&req) {
            return;
        }
        let response = if self.cut_off(c) {
            ListResponse::TransportError("network partition".into())
        } else {
            match self.world.list(self.now) {
                ListAnswer::Response(status, body) => {
                    if status == 200 {
                        let rv = self.world.rv().to_string();
                        if let Some(h) = &mut self.cands[c].h {
                            h.served_rv(SourceId::PRIMARY, &rv);
                        }
                    }
                    ListResponse::Response {
                        status,
                        body: body.bytes(true),
                    }
                }
                ListAnswer::Transport(e) => ListResponse::TransportError(e),
            }
        };
        let label = self.label(|| describe::list(req, &response));
        self.feed(c, |h| {
            h.step(
                || label,
                |core, now| core.handle_input(now, Input::List { req, response }),
            )
        });
    }

    fn label(&self, describe: impl FnOnce() -> String) -> String {
        if self.opts.render == Render::Quiet {
            String::new()
        } else {
            describe()
        }
    }

    fn open_watch(&mut self, c: usize, stream: StreamId, cursor: &str) {
        if !self.cands[c].alive.contains(&stream) {
            return;
        }
        if self.cut_off(c) {
            let end = StreamEnd::TransportError("network partition".into());
            return self.end_stream(c, stream, end, "partition");
        }
        let now = self.now;
        let p = self.cands[c].proc_;
        match self.world.watch(now, cursor) {
            WatchAnswer::Open(frames) => {
                self.opened(c, stream);
                for frame in frames {
                    self.schedule(now, c, p, What::Frame(stream, frame));
                }
            }
            WatchAnswer::GoneFrame(frame) => {
                self.opened(c, stream);
                self.schedule(now, c, p, What::Frame(stream, frame));
                self.schedule(
                    now,
                    c,
                    p,
                    What::End(stream, StreamEnd::Clean, "after ERROR"),
                );
            }
            WatchAnswer::Status(code, body) => {
                let end = StreamEnd::HttpStatus {
                    code,
                    body: body.bytes(true).to_vec(),
                };
                self.end_stream(c, stream, end, "status");
            }
            WatchAnswer::Transport(e) => {
                self.end_stream(c, stream, StreamEnd::TransportError(e), "transport");
            }
        }
    }

    fn opened(&mut self, c: usize, stream: StreamId) {
        let now = self.now;
        let p = self.cands[c].proc_;
        self.cands[c].open.insert(stream);
        self.feed(c, |h| {
            h.step(
                || format!("watch {stream} opened"),
                |core, now| core.handle_input(now, Input::WatchOpened { stream }),
            )
        });
        let timeout = Duration::from_secs(u64::from(self.s.timeout_seconds));
        self.schedule(now + timeout, c, p, What::WatchTimeout(stream));
    }

    fn deliver_frame(&mut self, c: usize, stream: StreamId, frame: &Frame) {
        if let Some(rv) = frame.rv
            && let Some(h) = &mut self.cands[c].h
        {
            h.served_rv(SourceId::PRIMARY, &rv.to_string());
        }
        let line = Bytes::copy_from_slice(frame.line.as_bytes());
        let text = self.label(|| describe::frame(stream, &line));
        self.feed(c, |h| {
            h.step(
                || text,
                |core, now| core.handle_input(now, Input::WatchLine { stream, line }),
            )
        });
    }

    fn end_stream(&mut self, c: usize, stream: StreamId, end: StreamEnd, why: &'static str) {
        let cand = &mut self.cands[c];
        cand.alive.remove(&stream);
        cand.open.remove(&stream);
        let text = self.label(|| match &end {
            StreamEnd::Clean => format!("watch {stream} ended ({why})"),
            StreamEnd::TransportError(e) => format!("watch {stream} failed ({e})"),
            StreamEnd::HttpStatus { code, .. } => format!("watch {stream} answered {code}"),
        });
        self.feed(c, |h| h.watch_end(stream, end, || text));
    }

    /// Cuts `c`'s open watches, as a broken connection does.
    fn cut(&mut self, c: usize, error: &str, why: &'static str) {
        let p = self.cands[c].proc_;
        let open: Vec<StreamId> = self.cands[c].open.iter().copied().collect();
        for stream in open {
            let end = StreamEnd::TransportError(error.into());
            self.schedule(self.now, c, p, What::End(stream, end, why));
        }
    }

    // ----- the pods world -----

    fn parent_of(&self, key: &str) -> Option<String> {
        let obj = self.world.visible_object(key)?;
        let pod = serde_json::from_str::<PodView>(&obj.json).ok()?;
        self.key_by.parent_of(&pod).ok()
    }

    fn world_put(&mut self, json: &str) {
        let key = self.world.key_of(json).ok();
        let before = key.as_deref().and_then(|k| self.parent_of(k));
        match self.world.put(self.now, json) {
            Ok(()) => {
                let after = key.as_deref().and_then(|k| self.parent_of(k));
                self.membership_moved(before, after);
                self.broadcast();
            }
            Err(e) => self.note(&format!("world refused a pod: {e}")),
        }
    }

    fn world_delete(&mut self, key: &str) {
        let before = self.parent_of(key);
        if self.world.delete(self.now, key) {
            self.membership_moved(before, None);
            self.broadcast();
        }
    }

    fn membership_moved(&mut self, before: Option<String>, after: Option<String>) {
        for parent in before.into_iter().chain(after) {
            self.parents_seen.insert(parent.clone());
            self.membership_changed.insert(parent, self.now);
        }
        let bound = self.parents_seen.len().max(1);
        for c in &mut self.cands {
            if let Some(h) = &mut c.h {
                h.set_queue_bound(bound);
            }
        }
    }

    /// Every open watch of every candidate gets the frame for the world's last change.
    fn broadcast(&mut self) {
        let Some(frame) = self.world.frames_for_last_change() else {
            return;
        };
        for c in 0..self.cands.len() {
            if self.cands[c].h.is_none() {
                continue;
            }
            let p = self.cands[c].proc_;
            let open: Vec<StreamId> = self.cands[c].open.iter().copied().collect();
            for stream in open {
                self.schedule(self.now, c, p, What::Frame(stream, frame.clone()));
            }
        }
    }

    // ----- happenings -----

    fn note(&mut self, text: &str) {
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

    fn happen(&mut self, happening: Happening) {
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
    fn script(&mut self, parent: &str, outcome: ScriptedOutcome) {
        for c in &mut self.cands {
            if let Some(h) = &mut c.h {
                h.script(Some(parent.to_owned()), outcome.clone(), Duration::ZERO);
            }
        }
    }

    /// Starts a new process for candidate `c`: a fresh core, a new identity after the first.
    fn start(&mut self, c: usize) {
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
            term: None,
            last_end: None,
            latent: None,
            terms: 0,
            last_dispatch: BTreeMap::new(),
            known_parents: BTreeSet::new(),
        });
        let election = self.s.election(&identity, self.cands[c].drain);
        let candidate = Candidate {
            name: identity.clone(),
            clock: self.cands[c].clock,
        };
        match Harness::for_candidate(
            &self.header,
            election,
            candidate,
            self.now,
            self.opts.render,
            self.opts.max_steps,
        ) {
            Ok(mut h) => {
                h.set_default_duration(ms(self.s.reconcile_ms));
                h.check_cursors();
                h.set_queue_bound(self.parents_seen.len().max(1));
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
    fn take_down(&mut self, c: usize) {
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

    fn retire(&mut self, p: usize, mut h: Harness) {
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

    /// Whom a fault names: a candidate, or `leader` (whoever holds a term now; else the
    /// first candidate running and, if `awake`, not paused).
    fn resolve(&self, target: &str, awake: bool) -> Option<usize> {
        if target != "leader" {
            return self.s.candidate(target);
        }
        let usable = |c: &Cand| c.h.is_some() && (!awake || c.paused_until.is_none());
        let leading = self.cands.iter().position(|c| {
            usable(c)
                && self
                    .procs
                    .get(c.proc_)
                    .and_then(|p| p.term)
                    .is_some_and(|t| self.now < c.clock.real(t.until))
        });
        leading.or_else(|| self.cands.iter().position(usable))
    }

    fn strike(&mut self, i: usize) {
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
            ElectionFault::ForeignWrite { .. } => match self.lease.foreign_write() {
                Some(rv) => {
                    self.note(&format!("fault: {fault}: rv={rv}"));
                    self.count("election: foreign write to the lease");
                }
                None => self.note(&format!("fault skipped, no Lease yet: {fault}")),
            },
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

    fn heal_fault(&mut self, i: usize) {
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

    /// At the end, every running candidate's cache equals the world (standbys keep theirs
    /// warm too), and the copy kept from its change log equals its cache.
    fn check_caches(&mut self) {
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
    fn check_converged(&mut self, leader: usize) {
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
                        .find(|(_, d)| d == parent)
                        .map(|(at, _)| (*at, p))
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

/// A fault's description with `leader` replaced by the candidate it hit.
fn describe_on(fault: &ElectionFault, name: &str) -> String {
    let text = fault.to_string();
    if fault.target() == Some("leader") {
        text.replacen("leader", &format!("leader {name}"), 1)
    } else {
        text
    }
}

/// `lease L5 200 rv=7 holder=b`, `lease L5 404`, `lease L5 409 Conflict`.
fn describe_lease(req: RequestId, status: u16, body: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
    if (200..300).contains(&status) {
        let rv = v["metadata"]["resourceVersion"].as_str().unwrap_or("-");
        let holder = v["spec"]["holderIdentity"].as_str().unwrap_or("none");
        format!("lease {req} {status} rv={rv} holder={holder}")
    } else {
        match v["reason"].as_str() {
            Some(reason) => format!("lease {req} {status} {reason}"),
            None => format!("lease {req} {status}"),
        }
    }
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
    let local = ms(first_look + s.lease_duration_ms + s.retry_period_ms);
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
