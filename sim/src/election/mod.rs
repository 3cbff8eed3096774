//! Election mode: two or three candidates, each a core configured with leader election and
//! its own identity, share one simulated `coordination.k8s.io/v1` Lease ([`crate::lease`]);
//! sharded, 2 to 7 replicas share the Leases of one shard set ([Sharded runs](#sharded-runs)),
//! and one simulated pods world ([`crate::world`]), each on its own clock
//! ([`crate::clock`]), while faults hit the apiserver, the network between it and one
//! candidate, a candidate's process, and the Lease itself.
//!
//! A run is a pure function of its [`Scenario`]: the event loop runs on real (simulated)
//! time; each candidate's core is fed its own clock's reading, `local = origin + (real −
//! start) × rate`, and its deadlines are converted back to the first real instant its clock
//! reaches them. Lease requests and answers take a latency drawn from the scenario's seed and
//! the request alone; LISTs, WATCHes and frames arrive at once, as in world mode. Every
//! collection is ordered and every queue bounded.
//!
//! # Faults
//!
//! | fault | what happens |
//! |---|---|
//! | apiserver restart | every Lease request, LIST and WATCH fails for a while; watches are cut |
//! | partition of one candidate | its Lease requests are refused, dropped, held until it heals (then applied and answered, late), or applied with their answers lost; its LISTs and WATCHes fail too unless the partition is lease-only |
//! | paused process | the candidate processes nothing (no input, no timer, no reconcile) while its clock runs on; on resuming it gets what arrived, in order, before anything else |
//! | clock drift | each candidate's rate is within the drift (`--election-drift`, default [`DEFAULT_DRIFT`]), half of them at an end of the range |
//! | foreign write | another writer changes the Lease: its resourceVersion moves, the next conditional write conflicts |
//! | graceful stop | the candidate stops (a leader releases the Lease), restarted later as a new process with a new identity, or never |
//! | crash | the same without the stop: no release |
//!
//! # Invariants
//!
//! **Safety** ([`TWO_LEADERS`], [`OUTSIDE_TERM`]). A *process* is one incarnation of a
//! candidate. A *term* of a process opens at the real instant its core reports
//! `LeadershipAcquired`, and lasts until the real instant its own clock reaches
//! `lead_until`: the local instant it *sent* the latest write naming it as holder that the
//! Lease store *applied*, plus `renew_deadline`. That is never earlier than the core's own
//! `lead_until` (the core extends its term only on the answer to such a write; one whose
//! answer was lost still keeps every other candidate waiting, so it still counts). The term
//! ends sooner at the instant the core reports `LeadershipLost`. A paused or crashed process
//! keeps its term to its end: had it run, it could have acted. Then:
//! - a dispatch by process X at real time t while a term of another process Y covers t
//!   (`start ≤ t < end`) is a violation: two leaders dispatch at once;
//! - a dispatch by X that no term of X's own covers is a violation too.
//!
//! Within the drift bound, `(L − R) / (L + R)`, no seed may break either; above it, some do.
//!
//! **Liveness** ([`NO_LEADER`]). Once every fault has healed, with a candidate running,
//! some candidate must be elected — process the successful answer to a Lease write it sent
//! after the healing, and lead — within the bound [`liveness_bound`] documents:
//! `(first_look + lease_duration + retry_period) / r_min + 8 × latency_max + 1 ms`.
//!
//! # Sharded runs
//!
//! A scenario with `shards: Some(n)` ([`generate_sharded`], `reconcile-sim explore
//! --sharding` or `--shards N`) makes its candidates *replicas* of one shard set
//! ([`reconcile_core::shard`]), 2 to [`MAX_REPLICAS`] of them, some started during the run
//! (added), some crashed or stopped (and restarted as new processes, or not), under the same
//! faults. The one Lease becomes the set's Leases ([`crate::lease::LeaseSet`]): one per
//! shard, one per replica's membership, one resourceVersion sequence, LISTed by label, all
//! refused while the apiserver restarts; a foreign write hits one shard's Lease. Terms are
//! kept per shard, derived from the applied writes to that shard's Lease exactly as above,
//! opened by `ShardAcquired` and closed by `ShardLost`. Then:
//!
//! 1. **Safety** ([`TWO_OWNERS`], [`OUTSIDE_TERM`]): no key is dispatched by process X while
//!    another process's term on the key's shard covers the instant, nor outside X's own term
//!    on that shard.
//! 2. **Liveness** ([`NO_SHARD_OWNER`]): once the faults have healed, every shard is held
//!    within the election's bound plus one retry period (a survivor also waits out the
//!    membership Lease of the replica gone, which it may see renewed one LIST later).
//! 3. **Balance** ([`UNBALANCED`]): at `heal + bound + retry_period / r_min` (every
//!    membership change is a heal), no running replica holds more than `ceil(n / live) + 1`
//!    shards.
//! 4. **Convergence** ([`NOT_RECONCILED_BY_OWNER`]): at the end, every parent whose members
//!    changed was last reconciled, by the process holding its shard then, with its final
//!    members.
//!
//! [`RunOptions::sabotage`] injects a bug around the replicas (never in the core) for each
//! of them, so the tests show every check firing ([`Sabotage`]).
//!
//! Each candidate's harness checks its own invariants as in world mode (retry delays,
//! backoffs, cursors, no command after stop, no key twice at once, bounded queues); at the
//! end every running candidate's cache equals the world, and every parent whose members
//! changed was last dispatched, by whichever process, with its final members.
//!
//! | file | concept |
//! |---|---|
//! | `scenario.rs` | a run as plain data: candidates, clocks, workload, faults, shards; the Leases' names |
//! | `generate.rs` | scenarios from a seed, within a drift (election and sharded) |
//! | `state.rs` | a run's options, report and state: candidates, processes, terms, messages |
//! | `run.rs` | the event loop on real time |
//! | `terms.rs` | terms per shard, safety, liveness and balance, caches and owners at the end |
//! | `network.rs` | Lease requests and answers, latency, partitions |
//! | `pods.rs` | the pods world's LISTs, WATCHes and frames |
//! | `faults.rs` | which candidate a fault hits, striking and healing it |
//! | `explore.rs` | election seeds explored and minimized, into explore's report |

pub(crate) mod explore;
mod faults;
pub(crate) mod generate;
mod network;
mod pods;
mod run;
mod scenario;
mod state;
mod terms;

pub use crate::explore::report::ElectionTotals;
pub use explore::{MAX_MINIMIZED, explore, items, minimize};
pub use generate::{
    DEFAULT_DRIFT, MAX_REPLICAS, PROFILES, SHARD_PROFILES, check_drift, generate, generate_sharded,
};
pub use run::run;
pub use scenario::{
    CandidatePlan, ElectionFault, LEASE_NAME, LEASE_NAMESPACE, MAX_CANDIDATES, MAX_ITEMS,
    MAX_TIME_MS, PartitionMode, SHARD_SET, Scenario, ScenarioError, WorkOp,
};
pub use state::{ElectionReport, MAX_HELD, MAX_INBOX, RunOptions, Sabotage};
pub use terms::{
    NO_LEADER, NO_SHARD_OWNER, NOT_RECONCILED_BY_OWNER, OUTSIDE_TERM, TWO_LEADERS, TWO_OWNERS,
    UNBALANCED, liveness_bound,
};
