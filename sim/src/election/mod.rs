//! Election mode: two or three candidates, each a core configured with leader election and
//! its own identity, share one simulated `coordination.k8s.io/v1` Lease ([`crate::lease`])
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
//! Each candidate's harness checks its own invariants as in world mode (retry delays,
//! backoffs, cursors, no command after stop, no key twice at once, bounded queues); at the
//! end every running candidate's cache equals the world, and every parent whose members
//! changed was last dispatched, by whichever process, with its final members.

mod generate;
mod run;
mod scenario;

use std::collections::BTreeMap;
use std::ops::Range;
use std::time::Duration;

pub use generate::{PROFILES, generate};
pub use run::{ElectionReport, MAX_HELD, MAX_INBOX, RunOptions, liveness_bound, run};
pub use scenario::{
    CandidatePlan, ElectionFault, MAX_CANDIDATES, MAX_ITEMS, MAX_TIME_MS, PartitionMode, Scenario,
    ScenarioError, WorkOp,
};

use crate::explore::{ExploreOptions, ExploreReport, Failure, ddmin};
use crate::harness::{Render, Violation};
use reconcile_core::Instant;

/// The Lease's namespace.
pub const LEASE_NAMESPACE: &str = "default";

/// The Lease's name.
pub const LEASE_NAME: &str = "reconcile-sim";

/// The clock rate drift election seeds draw within by default: just inside the 20 % the
/// default durations tolerate, `(15 − 10) / (15 + 10)`.
pub const DEFAULT_DRIFT: f64 = 0.19;

/// Safety: a process dispatched while another's term covered the instant.
pub const TWO_LEADERS: &str = "two leaders dispatch at once";

/// Safety: a process dispatched outside every term of its own.
pub const OUTSIDE_TERM: &str = "dispatch outside its own term";

/// Liveness: no leader within the bound after the faults healed.
pub const NO_LEADER: &str = "no leader elected after the faults healed";

/// Failing seeds minimized at most per exploration (each may take thousands of runs); the
/// others are written as generated.
pub const MAX_MINIMIZED: usize = 10;

/// Figures of an election exploration.
#[derive(Debug, Clone, Default)]
pub struct ElectionTotals {
    /// The drift the seeds' clock rates were drawn within.
    pub drift: f64,
    /// Terms begun.
    pub terms: u64,
    /// Writes that took an expired Lease from its holder.
    pub takeovers: u64,
    /// The closest handover: a term's start minus the latest end of any other process's
    /// term, least over all seeds (ns; negative: terms overlapped), and its seed.
    pub closest_handover: Option<(i64, u64)>,
    /// The slowest election after the faults healed: how long it took, its bound, and its
    /// seed.
    pub slowest_election: Option<(Duration, Duration, u64)>,
}

/// Checks a drift for `--election-drift`: a fraction in `0..1`.
///
/// # Errors
/// When it is not.
pub fn check_drift(drift: f64) -> Result<f64, String> {
    if drift.is_finite() && (0.0..1.0).contains(&drift) {
        Ok(drift)
    } else {
        Err(format!(
            "--election-drift {drift}: a fraction from 0 to 1 (0.19 is 19 %)"
        ))
    }
}

fn quiet() -> RunOptions {
    RunOptions {
        render: Render::Quiet,
        max_steps: 2_000_000,
        check: true,
    }
}

/// Runs every election seed in `seeds` (the seeds' own stream: election seed 7 has nothing
/// to do with world seed 7). `opts.inject` and `opts.sources` do not apply.
#[must_use]
pub fn explore(seeds: Range<u64>, opts: &ExploreOptions) -> ExploreReport {
    let drift = opts.election_drift;
    let mut report = ExploreReport {
        mode_flags: mode_flags(opts),
        ..ExploreReport::default()
    };
    let mut totals = ElectionTotals {
        drift,
        ..ElectionTotals::default()
    };
    let mut minimized = 0;
    for seed in seeds {
        let (scenario, profile) = generate(seed, opts.long, drift);
        let result = run(&scenario, &quiet()).unwrap_or_else(|e| configuration_failure(&e));
        report.seeds += 1;
        report.steps += result.steps;
        *report.profiles.entry(profile).or_default() += 1;
        for (path, n) in &result.paths {
            let e = report.paths.entry(path).or_default();
            e.0 += 1;
            e.1 += n;
        }
        totals.terms += result.terms;
        totals.takeovers += result.takeovers;
        if let Some(gap) = result.closest_handover
            && totals.closest_handover.is_none_or(|(g, _)| gap < g)
        {
            totals.closest_handover = Some((gap, seed));
        }
        if let Some(elected) = result.elected {
            let took = elected.saturating_duration_since(result.heal);
            let ratio = |d: Duration, b: Duration| d.as_secs_f64() / b.as_secs_f64().max(1e-9);
            if totals
                .slowest_election
                .is_none_or(|(d, b, _)| ratio(took, result.bound) > ratio(d, b))
            {
                totals.slowest_election = Some((took, result.bound, seed));
            }
        }
        if opts.verbose {
            report.lines.push(format!(
                "seed {seed}: {profile}, {} candidates, {} faults, {} steps, {} reconciles, {} terms, {} takeovers: {}",
                scenario.candidates.len(),
                scenario.faults.len(),
                result.steps,
                result.reconciles,
                result.terms,
                result.takeovers,
                if result.violations.is_empty() {
                    "ok"
                } else {
                    "FAILED"
                }
            ));
        }
        if let Some(violation) = result.violations.first().cloned() {
            let small = if opts.minimize && minimized < MAX_MINIMIZED {
                minimized += 1;
                minimize(&scenario, violation.invariant)
            } else {
                scenario.clone()
            };
            let written = opts.out_dir.as_ref().and_then(|dir| {
                std::fs::create_dir_all(dir).ok()?;
                let path = dir.join(format!("seed-{seed}.election.json"));
                std::fs::write(&path, small.to_json()).ok()?;
                Some(path)
            });
            report.failures.push(Failure {
                seed,
                profile,
                violation,
                records: (items(&scenario), items(&small)),
                minimized: written,
            });
        }
    }
    report.election = Some(totals);
    report
}

fn configuration_failure(e: &ScenarioError) -> ElectionReport {
    ElectionReport {
        output: String::new(),
        violations: vec![Violation {
            at: Instant::ZERO,
            invariant: "configuration",
            detail: e.to_string(),
        }],
        paths: BTreeMap::new(),
        steps: 0,
        reconciles: 0,
        terms: 0,
        takeovers: 0,
        heal: Instant::ZERO,
        bound: Duration::ZERO,
        elected: None,
        closest_handover: None,
        end: Instant::ZERO,
    }
}

/// The explore flags that select these seeds again.
fn mode_flags(opts: &ExploreOptions) -> String {
    if opts.election_drift == DEFAULT_DRIFT {
        " --election".into()
    } else {
        format!(" --election --election-drift {}", opts.election_drift)
    }
}

/// Faults plus workload operations: what minimization removes.
#[must_use]
pub fn items(s: &Scenario) -> usize {
    s.faults.len() + s.workload.len()
}

#[derive(Clone)]
enum Item {
    Fault(ElectionFault),
    Work(WorkOp),
}

/// Delta debugging over the scenario's faults and workload operations: the smallest
/// scenario found that still breaks `invariant`.
#[must_use]
pub fn minimize(scenario: &Scenario, invariant: &str) -> Scenario {
    let all: Vec<Item> = scenario
        .faults
        .iter()
        .cloned()
        .map(Item::Fault)
        .chain(scenario.workload.iter().cloned().map(Item::Work))
        .collect();
    let rebuild = |items: &[Item]| {
        let mut s = scenario.clone();
        s.faults.clear();
        s.workload.clear();
        for item in items {
            match item {
                Item::Fault(f) => s.faults.push(f.clone()),
                Item::Work(w) => s.workload.push(w.clone()),
            }
        }
        s
    };
    let fails = |items: &[Item]| {
        run(&rebuild(items), &quiet())
            .is_ok_and(|r| r.violations.iter().any(|v| v.invariant == invariant))
    };
    let mut small = rebuild(&ddmin(&all, fails));
    small.description = format!("{} (minimized for: {invariant})", scenario.description);
    small
}
