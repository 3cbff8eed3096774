//! Election scenarios from a seed: two or three candidates on drifting clocks, pods churning
//! under them, and a profile's faults.

use std::collections::BTreeMap;

use serde_json::json;

use crate::clock::PPM;
use crate::rng::Rng;

use crate::election::scenario::{CandidatePlan, ElectionFault, PartitionMode, Scenario, WorkOp};

/// The clock rate drift election seeds draw within by default: just inside the 20 % the
/// default durations tolerate, `(15 − 10) / (15 + 10)`.
pub const DEFAULT_DRIFT: f64 = 0.19;

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

/// The profiles an election seed picks from.
pub const PROFILES: &[&str] = &[
    "election/calm",
    "election/partition",
    "election/pause",
    "election/drift",
    "election/apiserver-restart",
    "election/conflicts",
    "election/stop-leader",
    "election/crash",
    "election/slow-apiserver",
    "election/chaos",
];

/// The profiles a sharded seed picks from.
pub const SHARD_PROFILES: &[&str] = &[
    "sharding/calm",
    "sharding/scale-up",
    "sharding/crash",
    "sharding/stop",
    "sharding/partition",
    "sharding/pause",
    "sharding/drift",
    "sharding/apiserver-restart",
    "sharding/conflicts",
    "sharding/chaos",
];

/// Replicas' names in a sharded run, at most [`MAX_REPLICAS`].
const REPLICA_NAMES: [&str; MAX_REPLICAS] = ["a", "b", "c", "d", "e", "f", "g"];

/// Replicas of a sharded seed at most (and 2 at least).
pub const MAX_REPLICAS: usize = 7;

/// A clock rate within `drift` of real time, in ppm: half the time at one end of the range
/// (where safety is tightest), otherwise anywhere in it.
fn rate(rng: &mut Rng, drift: f64) -> u64 {
    let (lo, hi) = rate_range(drift);
    match rng.below(4) {
        0 => lo,
        1 => hi,
        _ => rng.range(lo, hi),
    }
}

/// The rates within `drift` of real time, in ppm.
fn rate_range(drift: f64) -> (u64, u64) {
    let d = if drift.is_finite() {
        drift.clamp(0.0, 0.99)
    } else {
        0.0
    };
    let ppm = PPM as f64;
    (
        (ppm * (1.0 - d)).round() as u64,
        (ppm * (1.0 + d)).round() as u64,
    )
}

fn target(rng: &mut Rng, n: usize) -> String {
    if rng.chance(70) {
        "leader".into()
    } else {
        ["a", "b", "c"][usize::try_from(rng.below(n as u64)).unwrap_or(0)].into()
    }
}

fn partition_mode(rng: &mut Rng) -> PartitionMode {
    *rng.pick(&[
        PartitionMode::Refused,
        PartitionMode::Dropped,
        PartitionMode::Delayed,
        PartitionMode::RepliesLost,
    ])
}

/// A pause: mostly longer than the lease duration (the dangerous kind), sometimes short.
fn pause_ms(rng: &mut Rng) -> u64 {
    if rng.chance(70) {
        rng.range(16_000, 45_000)
    } else {
        rng.range(500, 14_000)
    }
}

/// Faults of one kind, at `at_ms`, for `n` candidates; `permanent` counts candidates gone
/// for good, so that one always runs.
fn fault(rng: &mut Rng, kind: &str, at_ms: u64, n: usize, permanent: &mut usize) -> ElectionFault {
    let restart = |rng: &mut Rng, permanent: &mut usize| {
        if *permanent + 1 < n && rng.chance(25) {
            *permanent += 1;
            None
        } else {
            Some(rng.range(1_000, 30_000))
        }
    };
    match kind {
        "partition" => ElectionFault::Partition {
            at_ms,
            target: target(rng, n),
            for_ms: rng.range(3_000, 40_000),
            mode: partition_mode(rng),
            lease_only: rng.chance(40),
        },
        "pause" => ElectionFault::Pause {
            at_ms,
            target: target(rng, n),
            for_ms: pause_ms(rng),
        },
        "apiserver_restart" => ElectionFault::ApiserverRestart {
            at_ms,
            down_ms: rng.range(1_000, 30_000),
        },
        "foreign_write" => ElectionFault::ForeignWrite { at_ms, shard: None },
        "stop" => ElectionFault::Stop {
            at_ms,
            target: "leader".into(),
            restart_after_ms: restart(rng, permanent),
        },
        _ => ElectionFault::Crash {
            at_ms,
            target: target(rng, n),
            restart_after_ms: restart(rng, permanent),
        },
    }
}

/// The scenario seed `seed` runs, and its profile: candidates' clock rates within `drift`.
#[must_use]
pub fn generate(seed: u64, long: bool, drift: f64) -> (Scenario, &'static str) {
    // Its own stream: election seeds share nothing with world seeds.
    let mut rng = Rng::new(seed ^ 0x656c_6563_7469_6f6e);
    let profile = *rng.pick(PROFILES);
    let base = profile.strip_prefix("election/").unwrap_or(profile);
    let window_ms: u64 = if long { 1_800_000 } else { 300_000 };
    let n = usize::try_from(rng.range(2, 3)).unwrap_or(2);
    let (lo, hi) = rate_range(drift);
    let candidates: Vec<CandidatePlan> = ["a", "b", "c"][..n]
        .iter()
        .enumerate()
        .map(|(i, name)| CandidatePlan {
            name: (*name).into(),
            // The drift profile puts the first leader at its slowest and the others at their
            // fastest: its term lasts longest while they wait least.
            rate_ppm: match (base, i) {
                ("drift", 0) => lo,
                ("drift", _) => hi,
                _ => rate(&mut rng, drift),
            },
            origin_ms: rng.range(0, 86_400_000),
            start_ms: if i == 0 { 0 } else { rng.range(0, 5_000) },
            drain: rng.chance(30),
        })
        .collect();
    let latency_ms = if base == "slow-apiserver" {
        [rng.range(100, 500), rng.range(800, 1_500)]
    } else {
        [rng.range(0, 2), rng.range(5, 100)]
    };
    // Faults.
    let kinds: &[&str] = match base {
        "calm" => &[],
        "partition" => &["partition"],
        "pause" | "drift" => &["pause", "partition"],
        "apiserver-restart" => &["apiserver_restart"],
        "conflicts" => &["foreign_write"],
        "stop-leader" => &["stop"],
        "crash" => &["crash"],
        "slow-apiserver" => &["pause", "partition", "foreign_write"],
        _ => &[
            "partition",
            "pause",
            "apiserver_restart",
            "foreign_write",
            "stop",
            "crash",
        ],
    };
    let count = match base {
        "calm" => 0,
        "chaos" => rng.range(4, 10),
        "conflicts" => rng.range(3, 12),
        _ => rng.range(1, 3),
    };
    let mut permanent = 0;
    let mut faults: Vec<ElectionFault> = (0..count)
        .map(|_| {
            let kind = *rng.pick(kinds);
            let at = rng.range(10_000, window_ms);
            let mut f = fault(&mut rng, kind, at, n, &mut permanent);
            if base == "drift" {
                // At the leader, long enough for a takeover.
                match &mut f {
                    ElectionFault::Pause { target, for_ms, .. } => {
                        *target = "leader".into();
                        *for_ms = rng.range(16_000, 40_000);
                    }
                    ElectionFault::Partition { target, for_ms, .. } => {
                        *target = "leader".into();
                        *for_ms = rng.range(16_000, 40_000);
                    }
                    _ => {}
                }
            }
            f
        })
        .collect();
    faults.sort_by_key(ElectionFault::at_ms);
    let workload = workload(&mut rng, window_ms, None);
    let scenario = Scenario {
        description: format!(
            "election seed {seed}, profile {profile}, drift {drift}: rates {lo}..={hi} ppm"
        ),
        seed,
        candidates,
        shards: None,
        handover_drain_ms: 5_000,
        lease_duration_ms: 15_000,
        renew_deadline_ms: 10_000,
        retry_period_ms: 2_000,
        latency_ms,
        concurrency: usize::try_from(rng.range(1, 3)).unwrap_or(1),
        reconcile_ms: *rng.pick(&[0, 100, 1_000, 4_000]),
        timeout_seconds: *rng.pick(&[30, 60, 300]),
        settle_s: if long { 600 } else { 120 },
        workload,
        faults,
    };
    (scenario, profile)
}

/// The sharded scenario seed `seed` runs, and its profile: 2 to [`MAX_REPLICAS`] replicas
/// of one shard set of `shards` shards (`None`: 1 to 16, from the seed), clock rates within
/// `drift`, replicas added during the run, crashed, stopped, paused and partitioned.
#[must_use]
pub fn generate_sharded(
    seed: u64,
    long: bool,
    drift: f64,
    shards: Option<u32>,
) -> (Scenario, &'static str) {
    // Its own stream again: sharded seed 7 shares nothing with election seed 7.
    let mut rng = Rng::new(seed ^ 0x7368_6172_6469_6e67);
    let profile = *rng.pick(SHARD_PROFILES);
    let base = profile.strip_prefix("sharding/").unwrap_or(profile);
    let window_ms: u64 = if long { 1_800_000 } else { 300_000 };
    let n = usize::try_from(rng.range(2, MAX_REPLICAS as u64)).unwrap_or(2);
    let shards = shards.unwrap_or_else(|| *rng.pick(&[1, 2, 3, 4, 5, 6, 8, 12, 16]));
    let (lo, hi) = rate_range(drift);
    // Replicas added later: in scale-up most of them, elsewhere now and then.
    let late = |rng: &mut Rng, i: usize| {
        i >= 2
            && match base {
                "scale-up" => rng.chance(70),
                "calm" => false,
                _ => rng.chance(25),
            }
    };
    let candidates: Vec<CandidatePlan> = REPLICA_NAMES[..n]
        .iter()
        .enumerate()
        .map(|(i, name)| CandidatePlan {
            name: (*name).into(),
            rate_ppm: match (base, i) {
                ("drift", 0) => lo,
                ("drift", _) => hi,
                _ => rate(&mut rng, drift),
            },
            origin_ms: rng.range(0, 86_400_000),
            start_ms: if i == 0 {
                0
            } else if late(&mut rng, i) {
                rng.range(20_000, window_ms)
            } else {
                rng.range(0, 5_000)
            },
            drain: rng.chance(30),
        })
        .collect();
    let latency_ms = [rng.range(0, 2), rng.range(5, 100)];
    let kinds: &[&str] = match base {
        "calm" | "scale-up" => &[],
        "crash" => &["crash"],
        "stop" => &["stop"],
        "partition" => &["partition"],
        "pause" | "drift" => &["pause", "partition"],
        "apiserver-restart" => &["apiserver_restart"],
        "conflicts" => &["foreign_write"],
        _ => &[
            "partition",
            "pause",
            "apiserver_restart",
            "foreign_write",
            "stop",
            "crash",
        ],
    };
    let count = match base {
        "calm" | "scale-up" => 0,
        "chaos" => rng.range(4, 10),
        "conflicts" => rng.range(3, 12),
        _ => rng.range(1, 4),
    };
    let mut permanent = 0;
    let mut faults: Vec<ElectionFault> =
        (0..count)
            .map(|_| {
                let kind = *rng.pick(kinds);
                let at = rng.range(10_000, window_ms);
                // The election's draws name one of its three candidates: retargeted below.
                let mut f = fault(&mut rng, kind, at, n.min(3), &mut permanent);
                // Any replica, not only the first three; "leader" is whoever holds a shard.
                let who = *rng.pick(&REPLICA_NAMES[..n]);
                match &mut f {
                    ElectionFault::Partition { target, .. }
                    | ElectionFault::Pause { target, .. }
                    | ElectionFault::Crash { target, .. } => {
                        if target != "leader" {
                            *target = who.into();
                        }
                    }
                    ElectionFault::Stop { target, .. } => {
                        if rng.chance(50) {
                            *target = who.into();
                        }
                    }
                    ElectionFault::ForeignWrite { shard, .. } => {
                        *shard = Some(u32::try_from(rng.below(u64::from(shards))).unwrap_or(0));
                    }
                    ElectionFault::ApiserverRestart { .. } => {}
                }
                if base == "drift"
                    && let ElectionFault::Pause { for_ms, .. }
                    | ElectionFault::Partition { for_ms, .. } = &mut f
                {
                    *for_ms = rng.range(16_000, 40_000);
                }
                f
            })
            .collect();
    faults.sort_by_key(ElectionFault::at_ms);
    let shape = (rng.range(4, 24), rng.range(8, 40));
    let workload = workload(&mut rng, window_ms, Some(shape));
    let scenario = Scenario {
        description: format!(
            "sharded seed {seed}, profile {profile}, {n} replicas, {shards} shards, drift {drift}: rates {lo}..={hi} ppm"
        ),
        seed,
        candidates,
        shards: Some(shards),
        handover_drain_ms: *rng.pick(&[1_000, 5_000]),
        lease_duration_ms: 15_000,
        renew_deadline_ms: 10_000,
        retry_period_ms: 2_000,
        latency_ms,
        concurrency: usize::try_from(rng.range(1, 3)).unwrap_or(1),
        reconcile_ms: *rng.pick(&[0, 100, 1_000, 4_000]),
        timeout_seconds: *rng.pick(&[30, 60, 300]),
        settle_s: if long { 600 } else { 120 },
        workload,
        faults,
    };
    (scenario, profile)
}

/// Pods created, relabelled between cells, moved out of and into the selector and deleted,
/// every few seconds all along, so that a leader always has something to dispatch; and a
/// few scripted outcomes.
/// `shape`: the cells and pods, `(cells, pods)`; an election's are 2 to 4 cells of 8 pods.
fn workload(rng: &mut Rng, window_ms: u64, shape: Option<(u64, u64)>) -> Vec<WorkOp> {
    let (cells, pod_names) = match shape {
        Some(shape) => shape,
        None => (rng.range(2, 4), 8),
    };
    let mut ops = Vec::new();
    let mut pods: BTreeMap<String, (u64, String, &'static str)> = BTreeMap::new();
    let mut uid = 0;
    let mut t = 0;
    while t < window_ms {
        let name = format!("p{}", rng.below(pod_names));
        let cell = format!("cell-{}", rng.below(cells));
        let pod = |name: &str, uid: u64, cell: &str, app: &str| {
            json!({"metadata": {"name": name, "namespace": "default", "uid": format!("u{uid}"),
                "labels": {"app": app, "cell": cell}}, "status": {"phase": "Running"}})
        };
        match pods.get(&name).cloned() {
            None => {
                uid += 1;
                ops.push(WorkOp::Put {
                    at_ms: t,
                    pod: pod(&name, uid, &cell, "cell"),
                });
                pods.insert(name, (uid, cell, "cell"));
            }
            Some((uid, old, app)) => match rng.below(4) {
                0 => {
                    ops.push(WorkOp::Delete {
                        at_ms: t,
                        key: format!("default/{name}"),
                    });
                    pods.remove(&name);
                }
                1 => {
                    let app = if app == "cell" { "other" } else { "cell" };
                    ops.push(WorkOp::Put {
                        at_ms: t,
                        pod: pod(&name, uid, &old, app),
                    });
                    pods.insert(name, (uid, old, app));
                }
                _ => {
                    ops.push(WorkOp::Put {
                        at_ms: t,
                        pod: pod(&name, uid, &cell, app),
                    });
                    pods.insert(name, (uid, cell, app));
                }
            },
        }
        t += rng.range(500, 6_000);
    }
    for _ in 0..rng.below(5) {
        let at_ms = rng.range(0, window_ms);
        let parent = format!("cell-{}", rng.below(cells));
        ops.push(if rng.chance(60) {
            WorkOp::Requeue {
                at_ms,
                parent,
                after_ms: rng.range(1_000, 30_000),
            }
        } else {
            WorkOp::Fail { at_ms, parent }
        });
    }
    ops.sort_by_key(WorkOp::at_ms);
    ops
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_always_generates_the_same_valid_scenario_within_the_drift() {
        for seed in 0..50 {
            let (a, pa) = generate(seed, false, 0.19);
            let (b, pb) = generate(seed, false, 0.19);
            assert_eq!(pa, pb);
            assert_eq!(a, b);
            a.validate().unwrap();
            assert!(
                a.candidates
                    .iter()
                    .all(|c| (810_000..=1_190_000).contains(&c.rate_ppm)),
                "seed {seed}"
            );
            let again = Scenario::parse(&a.to_json()).unwrap();
            assert_eq!(again, a, "seed {seed}");
        }
        for seed in 0..50 {
            let (a, pa) = generate_sharded(seed, false, 0.19, None);
            assert_eq!(generate_sharded(seed, false, 0.19, None), (a.clone(), pa));
            a.validate().unwrap();
            assert!(
                (2..=MAX_REPLICAS).contains(&a.candidates.len()),
                "seed {seed}"
            );
            assert_eq!(Scenario::parse(&a.to_json()).unwrap(), a, "seed {seed}");
        }
        assert_eq!(rate_range(0.2), (800_000, 1_200_000));
        assert_eq!(rate_range(f64::NAN), (PPM, PPM));
    }
}
