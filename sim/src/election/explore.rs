//! Election seeds explored: each seed's scenario generated and run, a failing one minimized
//! by delta debugging over its faults and workload operations, into the same report as world
//! seeds ([`crate::explore::ExploreReport`]).

use std::collections::BTreeMap;
use std::ops::Range;
use std::time::Duration;

use reconcile_core::Instant;

use crate::election::generate::{DEFAULT_DRIFT, generate, generate_sharded};
use crate::election::run::run;
use crate::election::scenario::{ElectionFault, Scenario, ScenarioError, WorkOp};
use crate::election::state::{ElectionReport, RunOptions};
use crate::explore::minimize::ddmin;
use crate::explore::options::ExploreOptions;
use crate::explore::parallel::{map_blocks, map_items};
use crate::explore::report::{ElectionTotals, ExploreReport, Failure};
use crate::harness::{Render, Violation};

/// Failing seeds minimized at most per exploration (each may take thousands of runs); the
/// others are written as generated.
pub const MAX_MINIMIZED: usize = 10;

fn quiet() -> RunOptions {
    RunOptions {
        render: Render::Quiet,
        max_steps: 2_000_000,
        check: true,
        sabotage: None,
    }
}

/// Runs every election seed in `seeds` (the seeds' own stream: election seed 7 has nothing
/// to do with world seed 7), or with `opts.sharding` every sharded seed (a stream of their
/// own again). `opts.inject` and `opts.sources` do not apply.
#[must_use]
pub fn explore(seeds: Range<u64>, opts: &ExploreOptions) -> ExploreReport {
    let mut report = ExploreReport {
        mode_flags: mode_flags(opts),
        election: Some(ElectionTotals {
            drift: opts.election_drift,
            ..ElectionTotals::default()
        }),
        ..ExploreReport::default()
    };
    let counted = opts.counting_progress();
    let mut failing = Vec::new();
    for (block, scenarios) in map_blocks(seeds, opts.jobs, |r| explore_block(r, &counted)) {
        report.absorb(block);
        failing.extend(scenarios);
    }
    // The first MAX_MINIMIZED failures, in seed order, are minimized after the run, so what
    // is written does not depend on which thread found what.
    let numbered: Vec<(usize, (Scenario, &'static str))> =
        failing.into_iter().enumerate().collect();
    let finished = map_items(&numbered, opts.jobs, |(i, (scenario, invariant))| {
        let small = if opts.minimize && *i < MAX_MINIMIZED {
            minimize(scenario, invariant)
        } else {
            scenario.clone()
        };
        (items(&small), small)
    });
    for (failure, (records, small)) in report.failures.iter_mut().zip(finished) {
        failure.records.1 = records;
        failure.minimized = opts.out_dir.as_ref().and_then(|dir| {
            std::fs::create_dir_all(dir).ok()?;
            let path = dir.join(format!("seed-{}.election.json", failure.seed));
            std::fs::write(&path, small.to_json()).ok()?;
            Some(path)
        });
    }
    report
}

/// The seeds of one block, in order; failures are reported unminimized, with their
/// scenarios and the invariant each broke first.
fn explore_block(
    seeds: Range<u64>,
    opts: &ExploreOptions,
) -> (ExploreReport, Vec<(Scenario, &'static str)>) {
    let drift = opts.election_drift;
    let mut report = ExploreReport::default();
    let mut totals = ElectionTotals {
        drift,
        ..ElectionTotals::default()
    };
    let mut failing = Vec::new();
    for seed in seeds {
        let (scenario, profile) = if opts.sharding {
            generate_sharded(seed, opts.long, drift, opts.shards)
        } else {
            generate(seed, opts.long, drift)
        };
        let result = run(&scenario, &quiet()).unwrap_or_else(|e| configuration_failure(&e));
        report.seeds += 1;
        opts.progress.done(report.seeds);
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
            let records = items(&scenario);
            let invariant = violation.invariant;
            report.failures.push(Failure {
                seed,
                profile,
                violation,
                records: (records, records),
                minimized: None,
            });
            failing.push((scenario, invariant));
        }
    }
    report.election = Some(totals);
    (report, failing)
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
        shards: 0,
        balance: None,
        closest_handover: None,
        end: Instant::ZERO,
    }
}

/// The explore flags that select these seeds again.
fn mode_flags(opts: &ExploreOptions) -> String {
    let mut flags = " --election".to_owned();
    match (opts.sharding, opts.shards) {
        (true, Some(n)) => flags.push_str(&format!(" --shards {n}")),
        (true, None) => flags.push_str(" --sharding"),
        (false, _) => {}
    }
    if opts.election_drift != DEFAULT_DRIFT {
        flags.push_str(&format!(" --election-drift {}", opts.election_drift));
    }
    flags
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
