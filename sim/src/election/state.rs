//! What an election run is and holds: its options and report, and its state: the
//! candidates, their processes and terms, the messages in flight, the happenings to come.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use reconcile_core::{Instant, KeyBy, LeaseRequest, LeaseResponse, RequestId, StreamEnd, StreamId};

use crate::apiserver::lease::LeaseSet;
use crate::apiserver::world::{Frame, World};
use crate::clock::Clock;
use crate::harness::{Dispatch, Harness, PathCounts, Render, Violation};
use crate::trace::Header;

use crate::election::scenario::{PartitionMode, Scenario};

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
    /// A bug injected on purpose, to show that an invariant fires (tests only; `None` in
    /// every exploration).
    pub sabotage: Option<Sabotage>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            render: Render::Text,
            max_steps: 5_000_000,
            check: true,
            sabotage: None,
        }
    }
}

/// A bug the simulator injects around the replicas (never in the core), each to show that
/// one invariant of a sharded run fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sabotage {
    /// The first candidate's process also dispatches every parent whose pods change, whether
    /// it holds the parent's shard or not (a replica that ignores its table):
    /// [`TWO_OWNERS`](crate::election::TWO_OWNERS) and
    /// [`OUTSIDE_TERM`](crate::election::OUTSIDE_TERM) fire.
    Rogue,
    /// Every Lease write is stored with `leaseDurationSeconds: 1`, so others take a shard
    /// over while its holder still counts on its term (a handover that does not wait).
    ShortLease,
    /// Every LIST leaves out the other replicas' membership Leases: each counts itself alone and
    /// takes every free shard ([`UNBALANCED`](crate::election::UNBALANCED) fires).
    HideMembers,
    /// Every write to shard 0's Lease (the election's Lease, unsharded) is refused, for
    /// ever: a fault that never heals ([`NO_SHARD_OWNER`](crate::election::NO_SHARD_OWNER)
    /// fires, or [`NO_LEADER`](crate::election::NO_LEADER)).
    StallShard,
    /// Once the faults healed, every replica's driver acknowledges reconciles without
    /// running them ([`NOT_RECONCILED_BY_OWNER`](crate::election::NOT_RECONCILED_BY_OWNER)
    /// fires).
    LoseDispatches,
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
    /// When the first leader after `heal` was elected; sharded, when the last shard to be
    /// held after `heal` was.
    pub elected: Option<Instant>,
    /// Shards in the run (1 for an election).
    pub shards: u32,
    /// Sharded: when the balance was checked (`heal + bound + retry_period / r_min`), and
    /// the most shards one replica held then over its limit `ceil(shards / live) + 1`.
    pub balance: Option<(Instant, usize, usize)>,
    /// The closest handover: a term's start minus the end of the latest term of every other
    /// process, the least over the run, in ns (negative: the terms overlapped).
    pub closest_handover: Option<i64>,
    /// Real time at the end.
    pub end: Instant,
}

pub(super) fn ms(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

pub(super) fn at_ms(t: u64) -> Instant {
    Instant::from_duration(ms(t))
}

/// One process: a candidate's incarnation, with its own identity, terms and dispatches.
pub(super) struct Proc {
    pub(super) cand: usize,
    pub(super) identity: String,
    /// Every dispatch, in time order: (real instant, parent, the parent's shard).
    pub(super) dispatches: Vec<(Instant, String, u32)>,
    /// Its running term on each shard (shard 0 alone for an election).
    pub(super) term: BTreeMap<u32, Term>,
    /// The latest term end (real) of this process per shard, once one closed.
    pub(super) last_end: BTreeMap<u32, Instant>,
    /// Per shard, the local instant until which the writes the store applied for this
    /// process keep everyone else waiting: the latest such write's local send instant +
    /// renew_deadline.
    pub(super) latent: BTreeMap<u32, Instant>,
    pub(super) terms: u64,
    /// Its harness's last dispatch per parent, once the harness is retired.
    pub(super) last_dispatch: BTreeMap<String, Dispatch>,
    /// Every parent its cache ever held an object of, once the harness is retired.
    pub(super) known_parents: BTreeSet<String>,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Term {
    /// Real instant of `LeadershipAcquired`.
    pub(super) start: Instant,
    /// Local instant the term lasts until, unless `LeadershipLost` comes first.
    pub(super) until: Instant,
}

pub(super) struct Cand {
    pub(super) name: String,
    pub(super) clock: Clock,
    pub(super) drain: bool,
    pub(super) incarnation: u32,
    /// Its current process (`usize::MAX` before it first starts).
    pub(super) proc_: usize,
    /// `None` while it is down.
    pub(super) h: Option<Harness>,
    pub(super) paused_until: Option<Instant>,
    /// What arrived while it was paused, in arrival order.
    pub(super) inbox: VecDeque<Delivery>,
    /// Mode, lease-only, until.
    pub(super) partition: Option<(PartitionMode, bool, Instant)>,
    /// Requests and answers a delayed partition holds.
    pub(super) held: VecDeque<Delivery>,
    pub(super) alive: BTreeSet<StreamId>,
    pub(super) open: BTreeSet<StreamId>,
    pub(super) cancelled_lists: BTreeSet<RequestId>,
}

pub(super) struct LeaseMsg {
    pub(super) req: RequestId,
    /// The Lease named (empty for a LIST).
    pub(super) name: String,
    pub(super) request: LeaseRequest,
    pub(super) sent_local: Instant,
    pub(super) sent_real: Instant,
    pub(super) wall: String,
}

pub(super) enum What {
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

pub(super) struct Delivery {
    pub(super) cand: usize,
    pub(super) proc_: usize,
    pub(super) what: What,
}

#[derive(Debug, Clone, Copy)]
pub(super) enum Happening {
    Heal(usize),
    Work(usize),
    Start(usize),
    Strike(usize),
}

pub(super) struct Run<'a> {
    pub(super) s: &'a Scenario,
    pub(super) opts: &'a RunOptions,
    pub(super) header: Header,
    pub(super) key_by: KeyBy,
    pub(super) now: Instant,
    pub(super) out: String,
    pub(super) world: World,
    pub(super) lease: LeaseSet,
    /// Sharded: the set's settings (the identity is each process's own).
    pub(super) shard_set: Option<reconcile_core::ShardConfig>,
    /// Shards in the run (1 for an election).
    pub(super) shards: u32,
    /// Per shard, when it was first held after `heal`.
    pub(super) held_since_heal: Vec<Option<Instant>>,
    /// Sharded: when the balance is checked, and whether it was.
    pub(super) balance_at: Instant,
    pub(super) balance: Option<(Instant, usize, usize)>,
    pub(super) cands: Vec<Cand>,
    pub(super) procs: Vec<Proc>,
    pub(super) agenda: BTreeMap<(Instant, u64), Delivery>,
    pub(super) seq: u64,
    pub(super) renew_deadline: Duration,
    pub(super) violations: Vec<Violation>,
    pub(super) paths: PathCounts,
    pub(super) retired_steps: u64,
    pub(super) retired_reconciles: u64,
    pub(super) membership_changed: BTreeMap<String, Instant>,
    pub(super) parents_seen: BTreeSet<String>,
    pub(super) heal: Instant,
    pub(super) bound: Duration,
    pub(super) horizon: Instant,
    pub(super) liveness_reported: bool,
    /// The candidate each fault hit, for its healing.
    pub(super) resolved: Vec<Option<usize>>,
    pub(super) takeovers: u64,
    pub(super) closest_handover: Option<i64>,
}
