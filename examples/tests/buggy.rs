//! The proof that the test kit's oracles bite: each buggy operator of
//! `reconcile_examples::buggy` is caught, minimized, within 1,000 seeds; its fixed twin
//! passes. `SCENARIO_SEEDS` sets the seed count of the fixed twins and of the polling
//! controller with read your own writes (300 by default; `.ci/run`
//! runs 10,000 in release).

mod common;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use reconcile_examples::buggy::{self, Bug, Variant, Widget, child_name, children_of, widget};
use reconcile_sim::scenario::{Env, Failure, Faults, Scenario, World, create, delete, edit};

fn replicas(bug: Bug) -> u32 {
    if bug == Bug::MemoryOnly { 2 } else { 1 }
}

/// Each live widget has its children holding its content; a deleted one has none.
fn converged(bug: Bug) -> impl Fn(&World<'_>) -> Result<(), String> + Send + Sync + 'static {
    move |world| {
        let widgets = world.list::<Widget>();
        let configmaps = world.list::<ConfigMap>();
        for name in ["a", "b"] {
            let children = children_of(&configmaps, name);
            match widgets.iter().find(|w| w.name_any() == name) {
                None if !children.is_empty() => {
                    return Err(format!(
                        "widget {name} is gone, {} child(ren) remain",
                        children.len()
                    ));
                }
                None => {}
                Some(w) if w.metadata.deletion_timestamp.is_some() => {
                    return Err(format!(
                        "widget {name} is still being deleted (finalizers {:?})",
                        w.finalizers()
                    ));
                }
                Some(w) => {
                    let observed = w.status.as_ref().and_then(|s| s.observed_generation);
                    if bug == Bug::StatusHotLoop && observed != w.metadata.generation {
                        return Err(format!(
                            "widget {name}'s status observed generation {observed:?}, it is at {:?}",
                            w.metadata.generation
                        ));
                    }
                    if children.len() != w.spec.replicas as usize {
                        return Err(format!(
                            "widget {name} has {} children, wants {}",
                            children.len(),
                            w.spec.replicas
                        ));
                    }
                    for c in children {
                        let content = c.data.as_ref().and_then(|d| d.get("content"));
                        if content != Some(&w.spec.content) {
                            return Err(format!(
                                "{} holds {content:?}, wants {:?}",
                                c.name_any(),
                                w.spec.content
                            ));
                        }
                    }
                }
            }
        }
        if bug == Bug::StaleListDelete {
            let keep = configmaps
                .iter()
                .find(|c| c.name_any() == child_name("a"))
                .and_then(|c| c.annotations().get("keep").cloned());
            if keep.as_deref() != Some("yes") {
                return Err(
                    "a-child lost the user's annotation keep=yes (it was deleted and made anew)"
                        .into(),
                );
            }
        }
        Ok(())
    }
}

fn scenario(bug: Bug, variant: Variant) -> Scenario {
    let n = replicas(bug);
    let mut s = Scenario::new(&format!("{}-{variant:?}", bug.name()), move |env: &Env| {
        let ctx = Arc::new(buggy::context(
            &env.runtime(),
            env.transport(),
            bug,
            variant,
        ));
        let controller = env.traced(buggy::controller(env.runtime(), env.transport(), "default"));
        async move {
            controller
                .shutdown_on_signal()
                .run(buggy::reconcile, buggy::error_policy, ctx)
                .await
        }
    })
    .crd::<Widget>()
    .given([create(&widget("a", "hello", n))])
    .then_at(Duration::from_secs(2), create(&widget("b", "one", n)))
    .then_at(Duration::from_secs(5), edit(&widget("a", "world", n)))
    .then_at(Duration::from_secs(9), delete::<Widget>("b"))
    .faults(Faults::all())
    .invariant("no widget has more children than it asks for", |world| {
        let configmaps = world.list::<ConfigMap>();
        for w in world.list::<Widget>() {
            let have = children_of(&configmaps, &w.name_any()).len();
            if have > w.spec.replicas as usize {
                return Err(format!(
                    "widget {} has {have} children, asks for {}",
                    w.name_any(),
                    w.spec.replicas
                ));
            }
        }
        Ok(())
    })
    .converges_to(converged(bug));
    if bug == Bug::StaleListDelete {
        // The user's own ConfigMap, which the operator adopts: deleting it loses the
        // annotation, which the operator would never put back.
        let mut keep = ConfigMap::default();
        keep.metadata.name = Some(child_name("a"));
        keep.metadata.namespace = Some("default".into());
        keep.metadata.annotations = Some([("keep".to_owned(), "yes".to_owned())].into());
        keep.data = Some([("content".to_owned(), "hello".to_owned())].into());
        s = s.given([create(&keep)]);
    }
    s
}

fn caught(bug: Bug) -> Box<Failure> {
    let failure = scenario(bug, Variant::Buggy)
        .try_explore(0..1000)
        .expect_err("the bug is found within 1,000 seeds");
    eprintln!("{failure}");
    assert!(failure.minimized.len() <= failure.schedule.len());
    failure
}

fn passes(bug: Bug) {
    let summary = scenario(bug, Variant::Fixed).explore(0..common::seeds(300));
    eprintln!("{}: {summary}", bug.name());
}

#[test]
fn a_duplicate_create_from_a_stale_cache_is_caught() {
    let f = caught(Bug::StaleDuplicate);
    assert!(f.violation.oracle.contains("more children"), "{f}");
}

#[test]
fn one_child_under_a_fixed_name_passes() {
    passes(Bug::StaleDuplicate);
}

#[test]
fn a_finalizer_stuck_on_a_child_already_gone_is_caught() {
    let f = caught(Bug::StuckFinalizer);
    assert_eq!(f.violation.oracle, "convergence", "{f}");
}

#[test]
fn a_finalizer_taking_404_for_done_passes() {
    passes(Bug::StuckFinalizer);
}

#[test]
fn a_status_timestamp_on_every_reconcile_is_caught() {
    let f = caught(Bug::StatusHotLoop);
    assert_eq!(f.violation.oracle, "no hot loop", "{f}");
}

#[test]
fn a_status_written_only_when_it_changes_passes() {
    passes(Bug::StatusHotLoop);
}

#[test]
fn an_ignored_conflict_is_caught() {
    let f = caught(Bug::IgnoredConflict);
    assert_eq!(f.violation.oracle, "convergence", "{f}");
}

#[test]
fn a_conflict_retried_passes() {
    passes(Bug::IgnoredConflict);
}

#[test]
fn children_deleted_on_a_stale_list_are_caught() {
    let f = caught(Bug::StaleListDelete);
    assert_eq!(f.violation.oracle, "convergence", "{f}");
}

#[test]
fn orphans_left_to_the_collector_pass() {
    passes(Bug::StaleListDelete);
}

#[test]
fn state_kept_only_in_memory_is_caught() {
    let f = caught(Bug::MemoryOnly);
    assert!(f.violation.oracle.contains("more children"), "{f}");
}

#[test]
fn children_named_and_applied_pass() {
    passes(Bug::MemoryOnly);
}

/// The stale duplicate within one run, with no restart: a controller that polls its
/// widgets every 200 ms while slow watches hold its own child back. Reading its own writes
/// (the core holds the widget's next reconcile until the child's create is in the cache,
/// 5 s at most) is what saves the buggy variant; with it off, the kit finds the duplicate.
fn polling(read_own_writes: Option<Duration>) -> Scenario {
    use reconcile_sim::scenario::FaultKind;
    let bug = Bug::StaleDuplicate;
    Scenario::new("stale-duplicate-polling", move |env: &Env| {
        let mut ctx = buggy::context(&env.runtime(), env.transport(), bug, Variant::Buggy);
        ctx.requeue = Some(Duration::from_millis(200));
        let controller = buggy::controller(env.runtime(), env.transport(), "default")
            .read_own_writes(read_own_writes);
        async move {
            controller
                .shutdown_on_signal()
                .run(buggy::reconcile, buggy::error_policy, Arc::new(ctx))
                .await
        }
    })
    .crd::<Widget>()
    .given([create(&widget("a", "hello", 1))])
    .then_at(Duration::from_secs(2), create(&widget("b", "one", 1)))
    .faults(Faults::none().with(FaultKind::SlowWatches).per_seed(3))
    .invariant("no widget has more children than it asks for", |world| {
        let configmaps = world.list::<ConfigMap>();
        for w in world.list::<Widget>() {
            let have = children_of(&configmaps, &w.name_any()).len();
            if have > 1 {
                return Err(format!("widget {} has {have} children", w.name_any()));
            }
        }
        Ok(())
    })
    // A poller reconciles each widget 5 times a second: the quiet period allows it (two
    // widgets, 300 reconciles), and is 30 s rather than 10 minutes (6,000 reconciles). The duplicate can only come before convergence,
    // while the second child is still to be created; the 10-minute period took 10,000 seeds
    // from 20 s to 7 minutes of CI's release run.
    .quiet(Duration::from_secs(30))
    .quiet_reconciles(400)
    .converges_to(converged(bug))
}

#[test]
fn reading_its_own_writes_keeps_a_polling_controller_from_a_duplicate_create() {
    let off = polling(None)
        .try_explore(0..1000)
        .expect_err("without read-your-own-writes the duplicate is found");
    eprintln!("{off}");
    assert!(off.violation.oracle.contains("more children"), "{off}");
    let summary = polling(Some(Duration::from_secs(5))).explore(0..common::seeds(300));
    eprintln!("with read-your-own-writes: {summary}");
}

#[test]
fn a_failing_seeds_trace_carries_the_kits_faults_and_the_report_draws_them() {
    let f = caught(Bug::StaleDuplicate);
    assert!(!f.traces.is_empty(), "{f}");
    let mut noted = 0;
    for path in &f.traces {
        let text = std::fs::read_to_string(path).expect("the trace is written");
        let trace = reconcile_trace::Trace::parse(&path.display().to_string(), &text)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let notes: Vec<&str> = trace
            .entries
            .iter()
            .filter(|e| matches!(e.record, reconcile_trace::Record::Note))
            .filter_map(|e| e.note.as_deref())
            .collect();
        assert!(
            notes.iter().any(|n| n.contains("starts")),
            "{}: {notes:?}",
            path.display()
        );
        noted += notes.iter().filter(|n| n.contains("kit: fault ")).count();
        // The report's step lines, which its timeline draws as marks, show each of them.
        let mode = reconcile_sim::report::Mode::Replay(reconcile_sim::ReplayOptions::default());
        let report = reconcile_sim::report::build(&trace, &mode).expect("the trace reports");
        for note in &notes {
            assert!(
                report.timeline.step_line.iter().any(|l| l.contains(*note)),
                "{}: the report lacks {note:?}",
                path.display()
            );
        }
        // The kit's faults on the faults lane, each named; its other notes as marks.
        let faults: Vec<&str> = report
            .timeline
            .items
            .iter()
            .filter(|i| i.kind == reconcile_sim::report::Kind::Fault)
            .map(|i| i.label.as_str())
            .collect();
        assert_eq!(
            faults.len(),
            notes.iter().filter(|n| n.contains("kit: fault ")).count(),
            "{}: {faults:?}",
            path.display()
        );
        assert!(faults.iter().all(|f| !f.starts_with("kit:")), "{faults:?}");
        let marks = report
            .timeline
            .items
            .iter()
            .filter(|i| i.kind == reconcile_sim::report::Kind::Note && i.label.contains("kit:"))
            .count();
        assert!(
            marks >= notes.len().min(1),
            "{}: no kit mark drawn",
            path.display()
        );
    }
    assert!(
        noted > 0,
        "a fault of the minimized schedule is noted in a trace: {f}"
    );
}
