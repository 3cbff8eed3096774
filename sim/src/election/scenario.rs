//! What an election run is made of, as plain data: the candidates and their clocks, the pods
//! workload, the faults. Generated from a seed, or read from a JSON file; nothing in a file
//! can make the simulator panic (every bound is checked before a run).

use std::collections::BTreeSet;
use std::time::Duration;

use reconcile_core::{ElectionConfig, ShardConfig};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::clock::PPM;

/// The Lease's namespace.
pub const LEASE_NAMESPACE: &str = "default";

/// The Lease's name.
pub const LEASE_NAME: &str = "reconcile-sim";

/// A sharded run's shard set: Leases `reconcile-sim-shard-<i>` and
/// `reconcile-sim-member-<hash>` in [`LEASE_NAMESPACE`].
pub const SHARD_SET: &str = "reconcile-sim";

/// The latest instant anything may happen at, in ms (30 simulated days).
pub const MAX_TIME_MS: u64 = 30 * 86_400_000;

/// Candidates at most.
pub const MAX_CANDIDATES: usize = 8;

/// Workload operations and faults at most, each.
pub const MAX_ITEMS: usize = 100_000;

/// An election run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Free text.
    #[serde(default)]
    pub description: String,
    /// Drives the network's latencies, hashed with each request's candidate and id, so that
    /// a fault removed while minimizing leaves the other requests' latencies alone.
    pub seed: u64,
    /// The candidates, in the order ties between them are broken.
    pub candidates: Vec<CandidatePlan>,
    /// Sharded: the candidates are replicas of one shard set of this many shards (1 to
    /// [`MAX_SHARDS`](reconcile_core::shard::MAX_SHARDS)), each shard its own Lease;
    /// `None`: they run for one election's Lease.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shards: Option<u32>,
    /// Sharded: how long a shard given up waits for its running reconciles, ms (5 s).
    #[serde(default = "default_handover_drain_ms")]
    pub handover_drain_ms: u64,
    /// `lease_duration`, ms (client-go's default 15 s).
    #[serde(default = "default_lease_duration_ms")]
    pub lease_duration_ms: u64,
    /// `renew_deadline`, ms (10 s).
    #[serde(default = "default_renew_deadline_ms")]
    pub renew_deadline_ms: u64,
    /// `retry_period`, ms (2 s).
    #[serde(default = "default_retry_period_ms")]
    pub retry_period_ms: u64,
    /// One-way latency of a Lease request or answer, ms: `[min, max]`.
    pub latency_ms: [u64; 2],
    /// Parallel reconciles per candidate.
    #[serde(default = "one")]
    pub concurrency: usize,
    /// How long a reconcile takes, ms of the candidate's clock.
    #[serde(default)]
    pub reconcile_ms: u64,
    /// `timeoutSeconds` of every WATCH.
    #[serde(default = "default_timeout_seconds")]
    pub timeout_seconds: u32,
    /// How long the run goes on once the faults have healed and the bound to elect a leader
    /// has passed, s.
    #[serde(default = "default_settle_s")]
    pub settle_s: u64,
    /// The pods world's history.
    #[serde(default)]
    pub workload: Vec<WorkOp>,
    /// The faults.
    #[serde(default)]
    pub faults: Vec<ElectionFault>,
}

fn default_lease_duration_ms() -> u64 {
    15_000
}
fn default_renew_deadline_ms() -> u64 {
    10_000
}
fn default_retry_period_ms() -> u64 {
    2_000
}
fn default_handover_drain_ms() -> u64 {
    5_000
}
fn one() -> usize {
    1
}
fn default_timeout_seconds() -> u32 {
    60
}
fn default_settle_s() -> u64 {
    120
}

/// One candidate: a replica of the controller, on its own machine and clock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CandidatePlan {
    /// Its name, and identity (a restarted candidate's identity gets `-2`, `-3` ...).
    pub name: String,
    /// Its clock's rate, parts per million of real time (1 000 000 keeps time).
    #[serde(default = "exact")]
    pub rate_ppm: u64,
    /// What its clock reads at real zero, ms: clocks of different machines disagree.
    #[serde(default)]
    pub origin_ms: u64,
    /// When it starts, real ms.
    #[serde(default)]
    pub start_ms: u64,
    /// Running reconciles finish after a lost term instead of being cancelled.
    #[serde(default)]
    pub drain: bool,
}

fn exact() -> u64 {
    PPM
}

/// A change to the pods world, or a scripted reconcile outcome, at `at_ms` (real).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum WorkOp {
    /// A pod created or replaced.
    Put {
        /// When, ms.
        at_ms: u64,
        /// The pod.
        pod: Value,
    },
    /// A pod deleted.
    Delete {
        /// When, ms.
        at_ms: u64,
        /// Its `namespace/name`.
        key: String,
    },
    /// The next reconcile of `parent`, by whichever candidate runs it, asks to run again
    /// after `after_ms`.
    Requeue {
        /// When, ms.
        at_ms: u64,
        /// The parent.
        parent: String,
        /// Until the rerun, ms.
        after_ms: u64,
    },
    /// The next reconcile of `parent` fails.
    Fail {
        /// When, ms.
        at_ms: u64,
        /// The parent.
        parent: String,
    },
}

impl WorkOp {
    /// When it happens, ms.
    #[must_use]
    pub fn at_ms(&self) -> u64 {
        match self {
            WorkOp::Put { at_ms, .. }
            | WorkOp::Delete { at_ms, .. }
            | WorkOp::Requeue { at_ms, .. }
            | WorkOp::Fail { at_ms, .. } => *at_ms,
        }
    }
}

/// How a partitioned candidate's Lease requests fare.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PartitionMode {
    /// Refused at once (a transport error).
    Refused,
    /// Lost on the way: never applied, never answered.
    Dropped,
    /// Held until the partition heals, then applied and answered (late, and stale).
    Delayed,
    /// Applied, but the answers are lost.
    RepliesLost,
}

impl PartitionMode {
    /// Its name in notes and paths.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            PartitionMode::Refused => "refused",
            PartitionMode::Dropped => "dropped",
            PartitionMode::Delayed => "delayed",
            PartitionMode::RepliesLost => "replies lost",
        }
    }

    /// Whether a request may go unanswered: the elector then waits `renew_deadline`.
    #[must_use]
    pub fn unanswered(self) -> bool {
        matches!(self, PartitionMode::Dropped | PartitionMode::RepliesLost)
    }
}

/// A fault of an election run. `target` names a candidate, or is `leader`: whoever leads
/// when the fault strikes (the first candidate running when nobody does).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "fault", rename_all = "snake_case", deny_unknown_fields)]
pub enum ElectionFault {
    /// The apiserver restarts: every Lease request, LIST and WATCH fails for `down_ms`, and
    /// open watches are cut.
    ApiserverRestart {
        /// When, ms.
        at_ms: u64,
        /// For how long, ms.
        down_ms: u64,
    },
    /// The network between `target` and the apiserver fails for `for_ms`: its Lease
    /// requests as `mode` says, and unless `lease_only`, its LISTs and WATCHes too.
    Partition {
        /// When, ms.
        at_ms: u64,
        /// Who.
        target: String,
        /// For how long, ms.
        for_ms: u64,
        /// What happens to Lease requests.
        mode: PartitionMode,
        /// Only Lease requests fail; the watch keeps streaming.
        #[serde(default)]
        lease_only: bool,
    },
    /// `target`'s process stops for `for_ms` (a long GC pause, SIGSTOP): no input, no timer,
    /// no reconcile progresses; its clock runs on; what arrived is processed on resuming.
    Pause {
        /// When, ms.
        at_ms: u64,
        /// Who.
        target: String,
        /// For how long, ms.
        for_ms: u64,
    },
    /// Another writer changes the Lease (an annotation): its resourceVersion moves, so the
    /// next conditional write conflicts.
    ForeignWrite {
        /// When, ms.
        at_ms: u64,
        /// Sharded: whose shard's Lease (modulo the shards; shard 0 when absent).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        shard: Option<u32>,
    },
    /// `target` stops gracefully (a leader releases the Lease); restarted after
    /// `restart_after_ms` as a new process with a new identity, unless `None`.
    Stop {
        /// When, ms.
        at_ms: u64,
        /// Who.
        target: String,
        /// Until the restart, ms.
        restart_after_ms: Option<u64>,
    },
    /// `target` dies (no stop, no release); restarted like [`ElectionFault::Stop`].
    Crash {
        /// When, ms.
        at_ms: u64,
        /// Who.
        target: String,
        /// Until the restart, ms.
        restart_after_ms: Option<u64>,
    },
}

impl ElectionFault {
    /// When it strikes, ms.
    #[must_use]
    pub fn at_ms(&self) -> u64 {
        match self {
            ElectionFault::ApiserverRestart { at_ms, .. }
            | ElectionFault::Partition { at_ms, .. }
            | ElectionFault::Pause { at_ms, .. }
            | ElectionFault::ForeignWrite { at_ms, .. }
            | ElectionFault::Stop { at_ms, .. }
            | ElectionFault::Crash { at_ms, .. } => *at_ms,
        }
    }

    /// How long after it strikes it heals, ms (its restart for a stop or crash; at once
    /// for a stop or crash that is never undone and for a foreign write).
    #[must_use]
    pub fn lasts_ms(&self) -> u64 {
        match self {
            ElectionFault::ApiserverRestart { down_ms, .. } => *down_ms,
            ElectionFault::Partition { for_ms, .. } | ElectionFault::Pause { for_ms, .. } => {
                *for_ms
            }
            ElectionFault::ForeignWrite { .. } => 0,
            ElectionFault::Stop {
                restart_after_ms, ..
            }
            | ElectionFault::Crash {
                restart_after_ms, ..
            } => restart_after_ms.unwrap_or(0),
        }
    }

    /// Whom it hits, if one candidate.
    #[must_use]
    pub fn target(&self) -> Option<&str> {
        match self {
            ElectionFault::Partition { target, .. }
            | ElectionFault::Pause { target, .. }
            | ElectionFault::Stop { target, .. }
            | ElectionFault::Crash { target, .. } => Some(target),
            ElectionFault::ApiserverRestart { .. } | ElectionFault::ForeignWrite { .. } => None,
        }
    }
}

impl std::fmt::Display for ElectionFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = |ms: u64| Duration::from_millis(ms).as_secs_f64();
        match self {
            ElectionFault::ApiserverRestart { down_ms, .. } => {
                write!(f, "apiserver restarts, down {}s", s(*down_ms))
            }
            ElectionFault::Partition {
                target,
                for_ms,
                mode,
                lease_only,
                ..
            } => write!(
                f,
                "partition of {target} for {}s: lease requests {}{}",
                s(*for_ms),
                mode.name(),
                if *lease_only {
                    ", the watch unaffected"
                } else {
                    ", lists and watches fail"
                }
            ),
            ElectionFault::Pause { target, for_ms, .. } => {
                write!(f, "{target} paused for {}s", s(*for_ms))
            }
            ElectionFault::ForeignWrite { .. } => {
                f.write_str("another writer changes the Lease (conflict)")
            }
            ElectionFault::Stop {
                target,
                restart_after_ms,
                ..
            } => match restart_after_ms {
                Some(ms) => write!(f, "{target} stops gracefully, restarts after {}s", s(*ms)),
                None => write!(f, "{target} stops gracefully for good"),
            },
            ElectionFault::Crash {
                target,
                restart_after_ms,
                ..
            } => match restart_after_ms {
                Some(ms) => write!(f, "{target} crashes, restarts after {}s", s(*ms)),
                None => write!(f, "{target} crashes for good"),
            },
        }
    }
}

/// A scenario that cannot run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScenarioError {
    /// Not a scenario's JSON.
    #[error("{0}")]
    Json(String),
    /// A value out of bounds.
    #[error("{0}")]
    Invalid(String),
}

fn invalid<T>(message: impl Into<String>) -> Result<T, ScenarioError> {
    Err(ScenarioError::Invalid(message.into()))
}

impl Scenario {
    /// Reads and checks a scenario.
    ///
    /// # Errors
    /// When it is not a scenario, or [`validate`](Self::validate) fails.
    pub fn parse(text: &str) -> Result<Scenario, ScenarioError> {
        let scenario: Scenario =
            serde_json::from_str(text).map_err(|e| ScenarioError::Json(e.to_string()))?;
        scenario.validate()?;
        Ok(scenario)
    }

    /// The scenario as pretty JSON (what [`parse`](Self::parse) reads).
    #[must_use]
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default() + "\n"
    }

    /// The election settings of `identity`.
    #[must_use]
    pub fn election(&self, identity: &str, drain: bool) -> ElectionConfig {
        let mut e = ElectionConfig::new(LEASE_NAMESPACE, LEASE_NAME, identity);
        e.lease_duration = Duration::from_millis(self.lease_duration_ms);
        e.renew_deadline = Duration::from_millis(self.renew_deadline_ms);
        e.retry_period = Duration::from_millis(self.retry_period_ms);
        e.on_lost = if drain {
            reconcile_core::OnLost::Drain
        } else {
            reconcile_core::OnLost::Cancel
        };
        e
    }

    /// The shard set's settings for `identity`, when sharded.
    #[must_use]
    pub fn shard_config(&self, identity: &str, drain: bool) -> Option<ShardConfig> {
        let shards = self.shards?;
        let mut c = ShardConfig::new(LEASE_NAMESPACE, SHARD_SET, identity, shards);
        c.lease_duration = Duration::from_millis(self.lease_duration_ms);
        c.renew_deadline = Duration::from_millis(self.renew_deadline_ms);
        c.retry_period = Duration::from_millis(self.retry_period_ms);
        c.handover_drain = Duration::from_millis(self.handover_drain_ms);
        c.on_lost = if drain {
            reconcile_core::OnLost::Drain
        } else {
            reconcile_core::OnLost::Cancel
        };
        Some(c)
    }

    /// The index of the candidate named `name`.
    #[must_use]
    pub fn candidate(&self, name: &str) -> Option<usize> {
        self.candidates.iter().position(|c| c.name == name)
    }

    /// Checks every bound, so that a run cannot panic or run away.
    ///
    /// # Errors
    /// The first value out of bounds.
    pub fn validate(&self) -> Result<(), ScenarioError> {
        if self.candidates.is_empty() || self.candidates.len() > MAX_CANDIDATES {
            return invalid(format!("1 to {MAX_CANDIDATES} candidates"));
        }
        let mut names = BTreeSet::new();
        for c in &self.candidates {
            let ok_name = !c.name.is_empty()
                && c.name.len() <= 32
                && c.name
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
                && c.name != "leader";
            if !ok_name {
                return invalid(format!(
                    "candidate name {:?}: 1 to 32 lowercase letters or digits, not \"leader\"",
                    c.name
                ));
            }
            if !names.insert(c.name.as_str()) {
                return invalid(format!("candidate {:?} twice", c.name));
            }
            if !(PPM / 100..=PPM * 100).contains(&c.rate_ppm) {
                return invalid(format!(
                    "candidate {}: rate_ppm {} out of {}..={}",
                    c.name,
                    c.rate_ppm,
                    PPM / 100,
                    PPM * 100
                ));
            }
            if c.origin_ms > MAX_TIME_MS || c.start_ms > MAX_TIME_MS {
                return invalid(format!(
                    "candidate {}: origin_ms and start_ms at most {MAX_TIME_MS}",
                    c.name
                ));
            }
        }
        if self.lease_duration_ms > MAX_TIME_MS || !self.lease_duration_ms.is_multiple_of(1000) {
            // The Lease stores whole seconds: others would wait less than the holder assumes.
            return invalid("lease_duration_ms: whole seconds, at most 30 days");
        }
        self.election("x", false)
            .validate()
            .or_else(|e| invalid(format!("election: {e}")))?;
        if self.handover_drain_ms > MAX_TIME_MS {
            return invalid(format!("handover_drain_ms at most {MAX_TIME_MS}"));
        }
        if let Some(config) = self.shard_config("x", false) {
            config
                .validate()
                .or_else(|e| invalid(format!("sharding: {e}")))?;
        }
        if self.latency_ms[0] > self.latency_ms[1] || self.latency_ms[1] > 60_000 {
            return invalid("latency_ms: [min, max] with min <= max <= 60000");
        }
        if self.concurrency == 0 || self.concurrency > 64 {
            return invalid("concurrency: 1 to 64");
        }
        if self.reconcile_ms > MAX_TIME_MS || self.settle_s > MAX_TIME_MS / 1000 {
            return invalid("reconcile_ms or settle_s too large");
        }
        if self.timeout_seconds == 0 || self.timeout_seconds > 86_400 {
            return invalid("timeout_seconds: 1 to 86400");
        }
        if self.workload.len() > MAX_ITEMS || self.faults.len() > MAX_ITEMS {
            return invalid(format!("at most {MAX_ITEMS} workload ops and faults"));
        }
        for op in &self.workload {
            let late = match op {
                WorkOp::Requeue { after_ms, .. } => *after_ms > MAX_TIME_MS,
                _ => false,
            };
            if op.at_ms() > MAX_TIME_MS || late {
                return invalid(format!(
                    "workload op at {} ms: times at most {MAX_TIME_MS}",
                    op.at_ms()
                ));
            }
        }
        for fault in &self.faults {
            if fault.at_ms() > MAX_TIME_MS || fault.lasts_ms() > MAX_TIME_MS {
                return invalid(format!(
                    "fault at {} ms: times at most {MAX_TIME_MS}",
                    fault.at_ms()
                ));
            }
            if let Some(target) = fault.target()
                && target != "leader"
                && self.candidate(target).is_none()
            {
                return invalid(format!(
                    "fault at {} ms: no candidate {target:?}",
                    fault.at_ms()
                ));
            }
        }
        Ok(())
    }
}
