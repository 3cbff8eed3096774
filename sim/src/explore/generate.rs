//! One-source workloads: pods created, relabelled between parents, moved out of and back
//! into the selector, deleted and recreated under the same name, with the profile's faults.

use std::collections::BTreeMap;
use std::time::Duration;

use reconcile_core::Instant;

use crate::rng::Rng;
use reconcile_core::KeyBy;

use crate::explore::profiles::{PROFILES, fault_kinds};
use crate::trace::{Entry, Fault, GoneAs, Header, Record, ScriptedOutcome, Trace};

pub(super) fn at(s: u64) -> Option<Instant> {
    Some(Instant::from_duration(Duration::from_secs(s)))
}

/// A pod; an empty `cell` leaves the parent label off (the pod cannot be mapped).
pub(super) fn pod(name: &str, uid: u64, cell: &str, app: &str, phase: &str) -> String {
    let cell = if cell.is_empty() {
        String::new()
    } else {
        format!(",\"cell\":\"{cell}\"")
    };
    format!(
        "{{\"metadata\":{{\"name\":\"{name}\",\"namespace\":\"default\",\"uid\":\"u{uid}\",\"labels\":{{\"app\":\"{app}\"{cell}}}}},\"status\":{{\"phase\":\"{phase}\"}}}}"
    )
}

pub(super) fn frame(kind: &str, object: &str) -> Record {
    Record::Frame {
        line: format!("{{\"type\":\"{kind}\",\"object\":{object}}}").into(),
    }
}

#[derive(Clone)]
struct PodState {
    uid: u64,
    cell: String,
    app: &'static str,
    phase: &'static str,
}

pub(super) fn fault(rng: &mut Rng, kind: &str) -> Fault {
    let count = u32::try_from(rng.range(1, 3)).unwrap_or(1);
    match kind {
        "watch_drop" => Fault::WatchDrop,
        "gone" => Fault::GoneStorm { count },
        "too_large" => Fault::TooLarge { count },
        "malformed_cursor" => Fault::MalformedFrame { cursor: true },
        "malformed_nocursor" => Fault::MalformedFrame { cursor: false },
        "restart" => Fault::Restart {
            down: Duration::from_secs(rng.range(1, 20)),
        },
        "compact" => Fault::Compact,
        "list_fail" => Fault::ListFail {
            count,
            status: *rng.pick(&[500, 503, 0]),
        },
        "slow" => Fault::SlowReconcile {
            count: count * 3,
            duration: Duration::from_secs(rng.range(1, 40)),
        },
        "fail" => Fault::FailReconcile {
            count: u32::try_from(rng.range(1, 8)).unwrap_or(1),
        },
        _ => Fault::ClockJump {
            by: Duration::from_secs(rng.range(30, 7200)),
        },
    }
}

/// The one-source trace seed `seed` runs, and its profile.
#[must_use]
pub fn generate(seed: u64, long: bool) -> (Trace, &'static str) {
    let mut rng = Rng::new(seed);
    let profile = *rng.pick(PROFILES);
    let window = if long { 3600 } else { 300 };
    let parents = rng.range(2, 4);
    let mut header = Header {
        description: Some(format!("explore seed {seed}, profile {profile}")),
        namespace: Some("default".into()),
        label_selector: Some("app=cell".into()),
        parent: KeyBy::Label("cell".into()),
        concurrency: usize::try_from(rng.range(1, 4)).unwrap_or(1),
        timeout_seconds: *rng.pick(&[30, 60, 300]),
        bookmark_interval: if rng.chance(70) {
            Some(Duration::from_secs(rng.range(5, 60)))
        } else {
            None
        },
        gone_as: if profile == "gone-status" || (profile == "chaos" && rng.chance(50)) {
            GoneAs::Status
        } else {
            GoneAs::Frame
        },
        ..Header::default()
    };
    if profile == "compaction" {
        header.compaction_window = Duration::from_secs(rng.range(5, 30));
    }
    let mut events: Vec<(u64, Record)> = Vec::new();
    // Workload.
    let ops = if long {
        rng.range(40, 200)
    } else {
        rng.range(5, 25)
    };
    let max_pods = if long { 20 } else { 8 };
    let mut pods: BTreeMap<String, PodState> = BTreeMap::new();
    let mut uid = 0;
    let cell = |rng: &mut Rng| format!("cell-{}", rng.below(parents));
    for _ in 0..ops {
        let t = rng.range(0, window);
        let name = format!("p{}", rng.below(max_pods));
        let record = match pods.get(&name).cloned() {
            None => {
                // Created, or recreated under a name used before: a new uid either way.
                uid += 1;
                let state = PodState {
                    uid,
                    cell: cell(&mut rng),
                    app: "cell",
                    phase: "Pending",
                };
                let r = frame(
                    "ADDED",
                    &pod(&name, uid, &state.cell, state.app, state.phase),
                );
                pods.insert(name, state);
                r
            }
            Some(mut state) => {
                match rng.below(6) {
                    0 => {
                        let r = frame(
                            "DELETED",
                            &pod(&name, state.uid, &state.cell, state.app, state.phase),
                        );
                        pods.remove(&name);
                        events.push((t, r));
                        continue;
                    }
                    1 | 2 => state.cell = cell(&mut rng),
                    3 => state.app = if state.app == "cell" { "other" } else { "cell" },
                    // The parent label goes away (unmappable: evicted), or comes back.
                    4 => {
                        state.cell = if state.cell.is_empty() {
                            cell(&mut rng)
                        } else {
                            String::new()
                        };
                    }
                    _ => {
                        state.phase = if state.phase == "Running" {
                            "Pending"
                        } else {
                            "Running"
                        }
                    }
                }
                let r = frame(
                    "MODIFIED",
                    &pod(&name, state.uid, &state.cell, state.app, state.phase),
                );
                pods.insert(name, state);
                r
            }
        };
        events.push((t, record));
    }
    // Scripted outcomes: some reconciles ask to be requeued, some fail, and an error policy
    // picks the follow-up of some failures (a fixed requeue, or none until a change).
    for _ in 0..rng.below(4) {
        let t = rng.range(0, window);
        let parent = Some(cell(&mut rng));
        let outcome = match rng.below(4) {
            0 => ScriptedOutcome::RequeueAfter(Duration::from_secs(rng.range(1, 120))),
            1 => ScriptedOutcome::ErrorHandled {
                error: "scripted conflict".into(),
                requeue_after: rng
                    .chance(50)
                    .then(|| Duration::from_secs(rng.range(1, 120))),
            },
            _ => ScriptedOutcome::Error("scripted failure".into()),
        };
        events.push((
            t,
            Record::Reconcile {
                parent,
                outcome,
                duration: Duration::ZERO,
                writes: Vec::new(),
            },
        ));
    }
    // Faults.
    let kinds = fault_kinds(profile);
    if !kinds.is_empty() {
        let n = if profile == "chaos" {
            rng.range(3, 10)
        } else {
            rng.range(1, 5)
        };
        for _ in 0..n {
            let kind = *rng.pick(kinds);
            let t = rng.range(1, window);
            events.push((t, Record::Fault(fault(&mut rng, kind))));
        }
    }
    // Stable by time: same-time events keep generation order.
    events.sort_by_key(|(t, _)| *t);
    let entries = events
        .into_iter()
        .map(|(t, r)| Entry::new(at(t), r))
        .collect();
    (
        Trace {
            name: format!("seed-{seed}"),
            header,
            entries,
        },
        profile,
    )
}
