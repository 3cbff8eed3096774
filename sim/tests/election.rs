//! Election mode: failovers pinned step by step, the explore run within the drift bound
//! (no two leaders, a leader once faults heal), above it (the safety check fires), and
//! scenario files that are not scenarios.

use reconcile_sim::election::{
    self, CandidatePlan, ElectionFault, NO_LEADER, OUTSIDE_TERM, PartitionMode, RunOptions,
    Scenario, TWO_LEADERS, WorkOp,
};
use reconcile_sim::explore::{self, ExploreOptions};
use serde_json::json;

fn pod(name: &str, cell: &str) -> serde_json::Value {
    json!({"metadata": {"name": name, "namespace": "default", "labels": {"app": "cell", "cell": cell}}})
}

/// Two candidates on exact clocks: `a` starts first and leads; a few pods change now and
/// then; `fault` strikes.
fn failover(fault: ElectionFault) -> Scenario {
    let candidate = |name: &str, start_ms| CandidatePlan {
        name: name.into(),
        rate_ppm: 1_000_000,
        origin_ms: 0,
        start_ms,
        drain: false,
    };
    Scenario {
        description: "failover".into(),
        seed: 1,
        candidates: vec![candidate("a", 0), candidate("b", 1_000)],
        shards: None,
        handover_drain_ms: 5_000,
        lease_duration_ms: 15_000,
        renew_deadline_ms: 10_000,
        retry_period_ms: 2_000,
        latency_ms: [10, 10],
        concurrency: 1,
        reconcile_ms: 0,
        timeout_seconds: 300,
        settle_s: 4,
        workload: vec![
            WorkOp::Put {
                at_ms: 0,
                pod: pod("p1", "cell-0"),
            },
            WorkOp::Put {
                at_ms: 5_000,
                pod: pod("p2", "cell-1"),
            },
            WorkOp::Put {
                at_ms: 23_000,
                pod: pod("p3", "cell-0"),
            },
            WorkOp::Put {
                at_ms: 50_000,
                pod: pod("p1", "cell-1"),
            },
        ],
        faults: vec![fault],
    }
}

fn run(scenario: &Scenario) -> election::ElectionReport {
    election::run(scenario, &RunOptions::default()).unwrap()
}

/// The lines of the candidate `name`, without its routine renewals and reads.
fn lines_of<'a>(output: &'a str, name: &str) -> Vec<&'a str> {
    output
        .lines()
        .filter(|l| l.split_whitespace().nth(1) == Some(name))
        .collect()
}

#[test]
fn a_paused_leader_is_replaced_and_stands_down_when_it_resumes() {
    let scenario = failover(ElectionFault::Pause {
        at_ms: 10_500,
        target: "leader".into(),
        for_ms: 30_000,
    });
    let report = run(&scenario);
    assert!(report.violations.is_empty(), "{:?}", report.violations);
    assert_eq!(report.takeovers, 1, "{}", report.output);
    let out = &report.output;
    // b waits out the lease from the last renewal it saw, then takes over and runs what
    // queued while it stood by.
    let b = lines_of(out, "b");
    let won = b
        .iter()
        .position(|l| l.contains("(leading b transitions=1)"))
        .unwrap_or_else(|| panic!("b never led:\n{out}"));
    assert!(b[won].contains("reconcile cell-0"), "{}", b[won]);
    // a resumes with its inputs waiting, its term long over: it dispatches nothing, ends
    // its term, reads the Lease and stands by.
    let a = lines_of(out, "a");
    let resumed = out
        .lines()
        .position(|l| l.contains("# a resumes"))
        .expect("a resumes");
    let after: Vec<&str> = out
        .lines()
        .skip(resumed)
        .filter(|l| a.contains(l))
        .collect();
    assert!(
        after
            .iter()
            .any(|l| l.contains("(leadership lost a (renew deadline passed))")),
        "{out}"
    );
    assert!(after.iter().any(|l| l.contains("(leader is b)")), "{out}");
    assert!(after.iter().all(|l| !l.contains("reconcile ")), "{out}");
    // The change at +50 s is b's to reconcile.
    assert!(
        b.iter()
            .any(|l| l.trim_start().starts_with("+50.000s") && l.contains("reconcile cell-")),
        "{out}"
    );
    insta::assert_snapshot!(report.output);
}

#[test]
fn a_partitioned_leader_steps_down_and_its_late_renewal_conflicts_after_the_takeover() {
    // Lease requests only: a keeps its watch and its cache, but no renewal gets through;
    // they are held, and reach the apiserver when the partition heals.
    let scenario = failover(ElectionFault::Partition {
        at_ms: 10_500,
        target: "leader".into(),
        for_ms: 30_000,
        mode: PartitionMode::Delayed,
        lease_only: true,
    });
    let report = run(&scenario);
    assert!(report.violations.is_empty(), "{:?}", report.violations);
    let out = &report.output;
    let a = lines_of(out, "a");
    let lost = a
        .iter()
        .position(|l| l.contains("(leadership lost a (renew deadline passed))"))
        .expect("a's term ends");
    let b_won = lines_of(out, "b")
        .into_iter()
        .find(|l| l.contains("(leading b"))
        .expect("b leads");
    // a stepped down before b took over.
    let at = |l: &str| l.split_whitespace().next().unwrap().to_owned();
    let secs = |t: String| t.trim_matches(['+', 's']).parse::<f64>().unwrap();
    assert!(secs(at(a[lost])) < secs(at(b_won)), "{out}");
    // A pod change after a's term ended, before b's began: a is cut off from the Lease but
    // not from the watch, sees it and dispatches nothing; nor does b, yet.
    assert!(
        a.iter().any(|l| l.trim_start().starts_with("+23.000s")
            && l.contains("ADDED default/p3")
            && !l.contains("reconcile")),
        "{out}"
    );
    // Its held renewals reach the apiserver after the takeover: conflicts.
    assert!(
        a.iter().any(|l| l.contains("409 Conflict")),
        "a's late renewal did not conflict:\n{out}"
    );
    insta::assert_snapshot!(report.output);
}

#[test]
fn explore_100_election_seeds_elect_one_leader_at_a_time_and_reach_every_path() {
    let opts = ExploreOptions {
        election: true,
        ..ExploreOptions::default()
    };
    let report = explore::explore(0..100, &opts);
    let text = report.render(false);
    assert!(report.failures.is_empty(), "{text}");
    assert_eq!(report.profiles.len(), election::PROFILES.len(), "{text}");
    let totals = report.election.as_ref().unwrap();
    assert!(
        totals.closest_handover.is_some_and(|(gap, _)| gap > 0),
        "{text}"
    );
    for path in [
        "election: leadership acquired",
        "election: expired lease taken over",
        "election: free lease taken",
        "election: lease released",
        "election: lease conflict (409)",
        "election: lease unanswered, abandoned",
        "election: term ended at its renew deadline",
        "election: term ended by stop",
        "election: inputs waited for a paused process",
        "election: partition held a lease request",
        "election: partition lost a lease answer",
        "election: partition refused a lease request",
        "election: foreign write to the lease",
        "election: apiserver restart",
        "election: candidate restarted",
        "election: crash",
        "stale input ignored",
    ] {
        assert!(
            report.paths.get(path).is_some_and(|(seeds, _)| *seeds > 0),
            "{path} never reached:\n{text}"
        );
    }
}

/// With clocks drifting apart by more than `(L - R) / (L + R)`, a standby on a fast clock
/// takes over while a leader on a slow one still believes its term runs: the safety check
/// must say so, and point at a scenario that still fails once minimized.
#[test]
fn a_drift_above_the_bound_makes_two_leaders_and_the_check_catches_it() {
    let dir = std::env::temp_dir().join(format!("reconcile-sim-election-{}", std::process::id()));
    let opts = ExploreOptions {
        election: true,
        election_drift: 0.35,
        out_dir: Some(dir.clone()),
        ..ExploreOptions::default()
    };
    let report = explore::explore(0..40, &opts);
    let text = report.render(false);
    assert!(report.failures.len() >= 3, "{text}");
    assert!(
        report
            .failures
            .iter()
            .all(|f| f.violation.invariant == TWO_LEADERS),
        "{text}"
    );
    assert!(
        text.contains("reproduce: cargo run -p reconcile-sim -- explore --seeds")
            && text.contains("--election --election-drift 0.35"),
        "{text}"
    );
    assert!(text.contains("TERMS OVERLAPPED"), "{text}");
    let first = &report.failures[0];
    assert!(first.records.1 < first.records.0, "{text}");
    let path = first.minimized.as_ref().expect("written");
    let small = Scenario::parse(&std::fs::read_to_string(path).unwrap()).unwrap();
    let again = run(&small);
    assert!(
        again.violations.iter().any(|v| v.invariant == TWO_LEADERS),
        "{}: the minimized scenario no longer fails",
        path.display()
    );
    // The same seeds within the bound: not one.
    let within = explore::explore(
        0..40,
        &ExploreOptions {
            election: true,
            out_dir: None,
            ..ExploreOptions::default()
        },
    );
    assert!(within.failures.is_empty(), "{}", within.render(false));
    let _ = std::fs::remove_dir_all(dir);
}

/// An apiserver slower than renew_deadline elects nobody: every term would end before the
/// answer that begins it. The liveness check says so.
#[test]
fn no_leader_within_the_bound_is_reported() {
    let mut scenario = failover(ElectionFault::ForeignWrite {
        at_ms: 1_000,
        shard: None,
    });
    scenario.latency_ms = [6_000, 6_000];
    let report = run(&scenario);
    assert!(report.elected.is_none(), "{}", report.output);
    assert!(
        report.violations.iter().any(|v| v.invariant == NO_LEADER),
        "{:?}",
        report.violations
    );
    assert!(
        report
            .violations
            .iter()
            .all(|v| v.invariant != OUTSIDE_TERM),
        "{:?}",
        report.violations
    );
}

#[test]
fn one_seed_one_run_byte_for_byte() {
    for seed in [3, 17, 42] {
        let (scenario, _) = election::generate(seed, false, election::DEFAULT_DRIFT);
        let first = run(&scenario);
        let second = run(&scenario);
        assert_eq!(first.output, second.output, "seed {seed}");
        let json = |s: &Scenario| {
            election::run(
                s,
                &RunOptions {
                    render: reconcile_sim::Render::Json,
                    ..RunOptions::default()
                },
            )
            .unwrap()
            .output
        };
        let lines = json(&scenario);
        assert_eq!(lines, json(&scenario), "seed {seed}");
        for line in lines.lines() {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            assert!(v["t_ns"].is_u64(), "{line}");
        }
        // Through a file and back: the same run.
        let reread = Scenario::parse(&scenario.to_json()).unwrap();
        assert_eq!(run(&reread).output, first.output, "seed {seed}");
    }
}

#[test]
fn a_scenario_file_that_is_not_one_is_an_error_not_a_panic() {
    let (good, _) = election::generate(5, false, election::DEFAULT_DRIFT);
    let good: serde_json::Value = serde_json::from_str(&good.to_json()).unwrap();
    let with = |path: &[&str], value: serde_json::Value| {
        let mut v = good.clone();
        let mut at = &mut v;
        for (i, key) in path.iter().enumerate() {
            if i + 1 == path.len() {
                at[*key] = value.clone();
            } else {
                at = match key.parse::<usize>() {
                    Ok(n) => &mut at[n],
                    Err(_) => &mut at[*key],
                };
            }
        }
        v.to_string()
    };
    let bad = [
        String::new(),
        "[]".into(),
        "{}".into(),
        "{\"seed\":1,\"candidates\":[],\"latency_ms\":[0,1]}".into(),
        with(&["candidates"], json!([])),
        with(&["candidates", "0", "name"], json!("leader")),
        with(&["candidates", "0", "name"], json!("A b")),
        with(&["candidates", "1", "name"], json!("a")),
        with(&["candidates", "0", "rate_ppm"], json!(0)),
        with(&["candidates", "0", "rate_ppm"], json!(-1)),
        with(&["candidates", "0", "start_ms"], json!(u64::MAX)),
        with(&["renew_deadline_ms"], json!(20_000)),
        with(&["retry_period_ms"], json!(0)),
        with(&["lease_duration_ms"], json!(15_500)),
        with(&["latency_ms"], json!([5, 1])),
        with(&["latency_ms"], json!([1])),
        with(&["concurrency"], json!(0)),
        with(&["timeout_seconds"], json!(0)),
        with(&["settle_s"], json!(u64::MAX)),
        with(&["unknown"], json!(1)),
        with(
            &["faults"],
            json!([{"fault": "pause", "at_ms": 1, "target": "z", "for_ms": 1}]),
        ),
        with(
            &["faults"],
            json!([{"fault": "pause", "at_ms": 1, "target": "a", "for_ms": u64::MAX}]),
        ),
        with(&["faults"], json!([{"fault": "meteor", "at_ms": 1}])),
        with(
            &["workload"],
            json!([{"op": "put", "at_ms": u64::MAX, "pod": {}}]),
        ),
    ];
    for text in &bad {
        assert!(Scenario::parse(text).is_err(), "accepted: {text}");
    }
    // Pods that are not pods are refused by the world, not fatal.
    let odd = with(
        &["workload"],
        json!([{"op": "put", "at_ms": 0, "pod": 7}, {"op": "put", "at_ms": 1, "pod": {"metadata": {}}},
               {"op": "delete", "at_ms": 2, "key": ""}]),
    );
    let scenario = Scenario::parse(&odd).unwrap();
    let report = run(&scenario);
    assert!(
        report.output.contains("world refused a pod"),
        "{}",
        report.output
    );
}
