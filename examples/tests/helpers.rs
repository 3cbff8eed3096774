//! The engine's finalizer helper and events recorder on the simulator: the same code a
//! tokio or smol controller runs, on `reconcile-sim`'s deterministic runtime and transport,
//! against the simulated cluster (which serves JSON patch `test` ops and `events.k8s.io/v1`
//! Events as the apiserver does). Snapshots hold the run log (one line per request, watch
//! event and reconcile) and what the cluster holds at the end.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, ObjectReference};
use k8s_openapi::api::events::v1::Event as K8sEvent;
use kube::Resource;
use kube::core::params::{DeleteParams, Patch, PatchParams, PostParams};
use reconcile_core::ObjectKey;
use reconcile_engine::events::{self, EventType, Recorder, Reporter};
use reconcile_engine::finalizer::{self, finalizer};
use reconcile_engine::{Action, ApiClient, Controller, Reconcile, Source};
use reconcile_sim::cluster::ListOptions;
use reconcile_sim::runtime::{SimConfig, SimRuntime, SimTransport, Simulation};
use serde_json::json;

/// Long enough for every reconcile, write and watch event to settle.
const SETTLE: Duration = Duration::from_secs(2);

/// The finalizer the test controller keeps.
const FINALIZER: &str = "example.com/cleanup";

/// Runs `body` on a fresh simulation; the simulation and what the body returned.
fn simulate<T, F>(body: impl FnOnce(SimRuntime, SimTransport) -> F) -> (Simulation, T)
where
    T: Send + 'static,
    F: Future<Output = T> + Send + 'static,
{
    let sim = Simulation::new(SimConfig::seed(1));
    let future = body(sim.runtime(), sim.transport());
    let out = sim
        .block_on(future)
        .unwrap_or_else(|e| panic!("{e}\n{}", sim.log_text()));
    (sim, out)
}

fn configmaps(transport: &SimTransport) -> ApiClient<ConfigMap, SimTransport> {
    ApiClient::namespaced(transport.clone(), "default")
}

fn configmap(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": {"x": "1"}}))
        .expect("a ConfigMap")
}

/// The ConfigMap `name` as the cluster holds it: its finalizers and whether it is being
/// deleted, or `gone`.
fn configmap_state(sim: &Simulation, name: &str) -> String {
    sim.cluster(|cluster, _| {
        let kind = cluster.kind("", "configmaps").expect("served");
        match cluster.get(kind, Some("default"), name) {
            Ok(v) => format!(
                "finalizers={} deleting={}",
                v["metadata"]["finalizers"],
                v["metadata"].get("deletionTimestamp").is_some()
            ),
            Err(_) => "gone".to_owned(),
        }
    })
}

// ---------------------------------------------------------------------------------------
// The finalizer helper, run by a controller
// ---------------------------------------------------------------------------------------

/// What the test controller's reconciles did, and whether its cleanup may succeed.
struct Ctx {
    transport: SimTransport,
    effects: Mutex<Vec<String>>,
    cleanup_fails: Mutex<bool>,
}

#[derive(Debug, thiserror::Error)]
#[error("the cleanup failed on purpose")]
struct CleanupFailed;

/// A reconcile that is nothing but the finalizer helper, as kube-runtime advises.
async fn reconcile(
    req: Reconcile<ConfigMap, ObjectKey>,
    ctx: Arc<Ctx>,
) -> Result<Action, finalizer::Error<CleanupFailed>> {
    let Some(cm) = req.object().cloned() else {
        return Ok(Action::await_change());
    };
    let api = configmaps(&ctx.transport);
    let name = req.parent().name().to_owned();
    finalizer(&api, FINALIZER, cm, |event| async move {
        match event {
            finalizer::Event::Apply(_) => {
                ctx.effects.lock().unwrap().push(format!("apply {name}"));
                Ok(Action::await_change())
            }
            finalizer::Event::Cleanup(_) => {
                let fails = *ctx.cleanup_fails.lock().unwrap();
                let outcome = if fails { "failed" } else { "done" };
                ctx.effects
                    .lock()
                    .unwrap()
                    .push(format!("cleanup {name}: {outcome}"));
                if fails {
                    Err(CleanupFailed)
                } else {
                    Ok(Action::await_change())
                }
            }
        }
    })
    .await
}

fn error_policy(
    _req: &Reconcile<ConfigMap, ObjectKey>,
    error: &finalizer::Error<CleanupFailed>,
    _ctx: Arc<Ctx>,
) -> Action {
    if error.is_conflict() {
        Action::requeue(Duration::from_millis(100))
    } else {
        Action::backoff()
    }
}

/// What the API says of the ConfigMap `a` now.
async fn state(api: &ApiClient<ConfigMap, SimTransport>) -> String {
    match api.get_opt("a").await.expect("read") {
        Some(cm) => format!(
            "finalizers={:?} deleting={}",
            cm.metadata.finalizers.unwrap_or_default(),
            cm.metadata.deletion_timestamp.is_some()
        ),
        None => "gone".to_owned(),
    }
}

/// Starts the controller, creates `a`, deletes it, and lets `fix` run after the delete
/// has settled; the effects, and the object's state after each step.
async fn finalizer_scenario(
    runtime: SimRuntime,
    transport: SimTransport,
    cleanup_fails: bool,
    fix_after_delete: bool,
) -> (Vec<String>, Vec<String>) {
    let ctx = Arc::new(Ctx {
        transport: transport.clone(),
        effects: Mutex::new(Vec::new()),
        cleanup_fails: Mutex::new(cleanup_fails),
    });
    let source = Source::<ConfigMap, SimTransport>::namespaced(transport.clone(), "default");
    let running = Controller::for_objects_with(runtime.clone(), source)
        .start(reconcile, error_policy, Arc::clone(&ctx))
        .await
        .expect("synced");
    let api = configmaps(&transport);
    let mut states = Vec::new();
    api.create(&PostParams::default(), &configmap("a"))
        .await
        .expect("created");
    runtime.sleep(SETTLE).await;
    states.push(format!("after create: {}", state(&api).await));
    api.delete("a", &DeleteParams::default())
        .await
        .expect("deleted");
    runtime.sleep(SETTLE).await;
    states.push(format!("after delete: {}", state(&api).await));
    if fix_after_delete {
        *ctx.cleanup_fails.lock().unwrap() = false;
        runtime.sleep(Duration::from_secs(10)).await;
        states.push(format!("after the fix: {}", state(&api).await));
    }
    running.shutdown().await.expect("a clean stop");
    let effects = ctx.effects.lock().unwrap().clone();
    (effects, states)
}

#[test]
fn the_finalizer_is_added_before_apply_and_removed_after_cleanup_so_the_object_goes() {
    let (sim, (effects, states)) = simulate(|rt, tr| finalizer_scenario(rt, tr, false, false));
    assert_eq!(
        states,
        [
            format!("after create: finalizers=[{FINALIZER:?}] deleting=false"),
            "after delete: gone".to_owned(),
        ]
    );
    // The add's own watch event runs the reconcile that applies: one apply, one cleanup.
    assert_eq!(effects, ["apply a", "cleanup a: done"]);
    assert_eq!(configmap_state(&sim, "a"), "gone");
    insta::assert_snapshot!(format!(
        "# effects\n{effects:?}\n\n# states\n{states:#?}\n\n# log\n{}",
        sim.log_text()
    ));
}

#[test]
fn a_failing_cleanup_keeps_the_object_until_it_succeeds() {
    let (sim, (effects, states)) = simulate(|rt, tr| finalizer_scenario(rt, tr, true, true));
    assert_eq!(
        states,
        [
            format!("after create: finalizers=[{FINALIZER:?}] deleting=false"),
            format!("after delete: finalizers=[{FINALIZER:?}] deleting=true"),
            "after the fix: gone".to_owned(),
        ]
    );
    let failed = effects.iter().filter(|e| *e == "cleanup a: failed").count();
    assert!(failed >= 2, "retried with backoff: {effects:?}");
    assert_eq!(effects.first().map(String::as_str), Some("apply a"));
    assert_eq!(effects.last().map(String::as_str), Some("cleanup a: done"));
    assert_eq!(configmap_state(&sim, "a"), "gone");
}

// ---------------------------------------------------------------------------------------
// The finalizer helper, called directly: races with another writer
// ---------------------------------------------------------------------------------------

#[derive(Debug, thiserror::Error)]
#[error("never")]
struct Never;

/// Runs `finalizer` on `cm` with a reconcile that records the event it got.
async fn step(
    api: &ApiClient<ConfigMap, SimTransport>,
    cm: ConfigMap,
    seen: &Mutex<Vec<&'static str>>,
) -> Result<Action, finalizer::Error<Never>> {
    finalizer(api, FINALIZER, Arc::new(cm), |event| async move {
        seen.lock().unwrap().push(match event {
            finalizer::Event::Apply(_) => "apply",
            finalizer::Event::Cleanup(_) => "cleanup",
        });
        Ok(Action::requeue(Duration::from_secs(7)))
    })
    .await
}

fn merge(value: serde_json::Value) -> Patch<serde_json::Value> {
    Patch::Merge(value)
}

#[test]
fn a_finalizer_added_from_a_stale_copy_fails_instead_of_losing_anothers() {
    let (sim, out) = simulate(|_rt, transport| async move {
        let api = configmaps(&transport);
        let seen = Mutex::new(Vec::new());
        let stale = api
            .create(&PostParams::default(), &configmap("a"))
            .await
            .expect("created");
        // Another controller adds its finalizer after our copy was read.
        api.patch(
            "a",
            &PatchParams::default(),
            &merge(json!({"metadata": {"finalizers": ["other.io/x"]}})),
        )
        .await
        .expect("patched");
        let error = step(&api, stale, &seen)
            .await
            .expect_err("the test op fails");
        let lost_race = error.is_conflict();
        let status = error_status(&error);
        // Read again: now the add appends after the other's.
        let fresh = api.get("a").await.expect("read");
        let action = step(&api, fresh, &seen).await.expect("added");
        let fresh = api.get("a").await.expect("read");
        let applied = step(&api, fresh, &seen).await.expect("applied");
        let seen = seen.into_inner().unwrap();
        (error.to_string(), lost_race, status, action, applied, seen)
    });
    let (message, lost_race, status, action, applied, seen) = out;
    assert!(lost_race, "{message}");
    assert_eq!(
        status,
        Some(422),
        "the apiserver answers a failed test with 422"
    );
    assert!(
        message
            .starts_with("failed to add finalizer: PATCH /api/v1/namespaces/default/configmaps/a"),
        "{message}"
    );
    assert_eq!(
        action,
        Action::await_change(),
        "no apply right after the add"
    );
    assert_eq!(
        applied,
        Action::requeue(Duration::from_secs(7)),
        "apply's own action"
    );
    assert_eq!(seen, ["apply"]);
    assert_eq!(
        configmap_state(&sim, "a"),
        format!("finalizers=[\"other.io/x\",{FINALIZER:?}] deleting=false")
    );
    insta::assert_snapshot!(sim.log_text());
}

fn error_status<E: std::error::Error>(error: &finalizer::Error<E>) -> Option<u16> {
    match error {
        finalizer::Error::AddFinalizer(e) | finalizer::Error::RemoveFinalizer(e) => {
            e.status().map(|s| s.code)
        }
        _ => None,
    }
}

#[test]
fn a_finalizer_removed_from_a_stale_copy_fails_instead_of_removing_anothers() {
    let (sim, out) = simulate(|_rt, transport| async move {
        let api = configmaps(&transport);
        let seen = Mutex::new(Vec::new());
        let mut cm = configmap("a");
        cm.metadata.finalizers = Some(vec!["other.io/x".into(), FINALIZER.into()]);
        api.create(&PostParams::default(), &cm)
            .await
            .expect("created");
        api.delete("a", &DeleteParams::default())
            .await
            .expect("deleting");
        let stale = api.get("a").await.expect("read"); // ours at index 1
        // The other controller finishes first and removes its entry: ours moves to 0.
        api.patch(
            "a",
            &PatchParams::default(),
            &merge(json!({"metadata": {"finalizers": [FINALIZER]}})),
        )
        .await
        .expect("patched");
        let error = step(&api, stale, &seen)
            .await
            .expect_err("the test op fails");
        let lost_race = error.is_conflict();
        let between = api.get("a").await.expect("still there");
        let between = between.metadata.finalizers.unwrap_or_default();
        // Read again: cleanup again (it is idempotent), and the removal goes through.
        let fresh = api.get("a").await.expect("read");
        let action = step(&api, fresh, &seen).await.expect("removed");
        let gone = api.get_opt("a").await.expect("read").is_none();
        let seen = seen.into_inner().unwrap();
        (error.to_string(), lost_race, between, action, gone, seen)
    });
    let (message, lost_race, between, action, gone, seen) = out;
    assert!(lost_race, "{message}");
    assert!(
        message.starts_with("failed to remove finalizer: PATCH"),
        "{message}"
    );
    assert_eq!(between, [FINALIZER], "nothing removed by the failed patch");
    assert_eq!(
        action,
        Action::requeue(Duration::from_secs(7)),
        "cleanup's own action"
    );
    assert!(gone, "the last finalizer removed deletes the object");
    assert_eq!(seen, ["cleanup", "cleanup"]);
    assert_eq!(configmap_state(&sim, "a"), "gone");
}

#[test]
fn an_object_being_deleted_without_the_finalizer_is_left_alone_and_a_bad_name_sends_nothing() {
    let (sim, out) = simulate(|_rt, transport| async move {
        let api = configmaps(&transport);
        let seen = Mutex::new(Vec::new());
        let mut cm = configmap("a");
        cm.metadata.finalizers = Some(vec!["other.io/x".into()]);
        api.create(&PostParams::default(), &cm)
            .await
            .expect("created");
        api.delete("a", &DeleteParams::default())
            .await
            .expect("deleting");
        let deleting = api.get("a").await.expect("read");
        let action = step(&api, deleting.clone(), &seen)
            .await
            .expect("nothing to do");
        let bad = finalizer(&api, "Not A Name", Arc::new(deleting), |_| async {
            Ok::<_, Never>(Action::await_change())
        })
        .await
        .expect_err("refused");
        let unnamed = step(&api, ConfigMap::default(), &seen)
            .await
            .expect_err("no name");
        let seen = seen.into_inner().unwrap();
        (action, bad.to_string(), unnamed.to_string(), seen)
    });
    let (action, bad, unnamed, seen) = out;
    assert_eq!(action, Action::await_change());
    assert!(seen.is_empty(), "{seen:?}");
    assert_eq!(
        bad,
        "invalid finalizer name \"Not A Name\": the name may hold only letters, digits, '-', '_' and '.'"
    );
    assert_eq!(unnamed, "object has no name");
    // Nothing was sent for the three: the log ends with the GET.
    let log = sim.log();
    assert!(
        log.last()
            .unwrap()
            .contains(" GET /api/v1/namespaces/default/configmaps/a"),
        "{log:#?}"
    );
    assert_eq!(
        configmap_state(&sim, "a"),
        "finalizers=[\"other.io/x\"] deleting=true"
    );
}

// ---------------------------------------------------------------------------------------
// The events recorder
// ---------------------------------------------------------------------------------------

/// A recorder on the simulation's virtual wall clock.
fn recorder(runtime: &SimRuntime, transport: &SimTransport) -> Recorder<SimTransport> {
    let clock = runtime.clone();
    Recorder::new(
        transport.clone(),
        Reporter {
            controller: "example.com/test-controller".into(),
            instance: Some("test-controller-0".into()),
        },
    )
    .with_clock(move || clock.wall_time())
}

fn event(reason: &str, note: &str) -> events::Event {
    events::Event {
        type_: EventType::Normal,
        reason: reason.into(),
        note: Some(note.into()),
        action: "Reconcile".into(),
        secondary: None,
    }
}

fn reference(name: &str) -> ObjectReference {
    let mut cm = configmap(name);
    cm.metadata.namespace = Some("default".into());
    cm.metadata.uid = Some(format!("uid-{name}"));
    cm.object_ref(&())
}

/// The Events of `namespace`, one line each, in name order.
fn events_in(sim: &Simulation, namespace: &str) -> Vec<String> {
    sim.cluster(|cluster, _| {
        let kind = cluster.kind("events.k8s.io", "events").expect("served");
        let list = cluster
            .list(kind, Some(namespace), &ListOptions::default())
            .expect("listed");
        let mut lines: Vec<String> = list["items"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|item| {
                let e: K8sEvent = serde_json::from_value(item.clone()).expect("an Event");
                let series = e.series.map_or("-".to_owned(), |s| {
                    format!("count={} last={}", s.count, s.last_observed_time.0)
                });
                format!(
                    "{} type={} reason={} action={} note={:?} regarding={}/{} by={}/{} eventTime={} series={}",
                    e.metadata.name.unwrap_or_default(),
                    e.type_.unwrap_or_default(),
                    e.reason.unwrap_or_default(),
                    e.action.unwrap_or_default(),
                    e.note.map(|n| if n.len() > 40 { format!("<{} bytes>", n.len()) } else { n }),
                    e.regarding.as_ref().and_then(|r| r.kind.clone()).unwrap_or_default(),
                    e.regarding.and_then(|r| r.name).unwrap_or_default(),
                    e.reporting_controller.unwrap_or_default(),
                    e.reporting_instance.unwrap_or_default(),
                    e.event_time.map(|t| t.0.to_string()).unwrap_or_default(),
                    series
                )
            })
            .collect();
        lines.sort();
        lines
    })
}

#[test]
fn a_repeated_event_becomes_a_series_and_other_reasons_are_events_of_their_own() {
    let (sim, ()) = simulate(|runtime, transport| async move {
        let recorder = recorder(&runtime, &transport);
        let a = reference("a");
        for _ in 0..3 {
            recorder
                .publish(&event("Synced", "all good"), &a)
                .await
                .expect("published");
            runtime.sleep(Duration::from_secs(1)).await;
        }
        recorder
            .publish(&event("Scaled", "all good"), &a)
            .await
            .expect("published");
        // The same reason with another note is another event.
        recorder
            .publish(&event("Synced", "not so good"), &a)
            .await
            .expect("published");
        // And the same about another object.
        recorder
            .publish(&event("Synced", "all good"), &reference("b"))
            .await
            .expect("published");
        assert_eq!(recorder.cached(), 4);
    });
    let events = events_in(&sim, "default");
    assert_eq!(events.len(), 4, "{events:#?}");
    let counts: Vec<&str> = events
        .iter()
        .map(|e| e.split(" series=").nth(1).unwrap())
        .collect();
    assert_eq!(
        counts.iter().filter(|c| c.starts_with("count=3 ")).count(),
        1,
        "{events:#?}"
    );
    assert_eq!(
        counts.iter().filter(|c| **c == "-").count(),
        3,
        "{events:#?}"
    );
    insta::assert_snapshot!(format!(
        "# events\n{}\n\n# log\n{}",
        events.join("\n"),
        sim.log_text()
    ));
}

#[test]
fn the_second_occurrence_is_count_two() {
    let (sim, ()) = simulate(|runtime, transport| async move {
        let recorder = recorder(&runtime, &transport);
        for _ in 0..2 {
            recorder
                .publish(&event("Synced", "all good"), &reference("a"))
                .await
                .expect("published");
            runtime.sleep(Duration::from_secs(1)).await;
        }
    });
    let events = events_in(&sim, "default");
    assert_eq!(events.len(), 1, "{events:#?}");
    assert!(events[0].contains("series=count=2 "), "{events:#?}");
}

#[test]
fn a_repeat_after_the_six_minute_window_starts_a_new_event() {
    let (sim, ()) = simulate(|runtime, transport| async move {
        let recorder = recorder(&runtime, &transport);
        let a = reference("a");
        recorder
            .publish(&event("Synced", "all good"), &a)
            .await
            .expect("published");
        runtime.sleep(Duration::from_secs(5 * 60 + 59)).await;
        recorder
            .publish(&event("Synced", "all good"), &a)
            .await
            .expect("published: a series, seen 5:59 after the first");
        runtime.sleep(Duration::from_secs(6 * 60)).await;
        recorder
            .publish(&event("Synced", "all good"), &a)
            .await
            .expect("published: 6:00 after the last, a new Event");
        assert_eq!(recorder.cached(), 1, "the expired entry went");
    });
    let events = events_in(&sim, "default");
    assert_eq!(events.len(), 2, "{events:#?}");
    assert!(
        events.iter().any(|e| e.contains("series=count=2 ")),
        "{events:#?}"
    );
    assert!(
        events.iter().any(|e| e.ends_with("series=-")),
        "{events:#?}"
    );
}

#[test]
fn the_cache_bound_evicts_the_least_recently_seen_event() {
    let (sim, ()) = simulate(|runtime, transport| async move {
        let recorder = recorder(&runtime, &transport).max_cached(2);
        let a = reference("a");
        for reason in ["A", "B", "C", "A", "C"] {
            recorder
                .publish(&event(reason, "n"), &a)
                .await
                .expect("published");
            runtime.sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(recorder.cached(), 2);
    });
    // A was evicted by C, so its repeat is a new Event; C's repeat is a series.
    let events = events_in(&sim, "default");
    let by_reason = |r: &str| -> Vec<&String> {
        events
            .iter()
            .filter(|e| e.contains(&format!(" reason={r} ")))
            .collect()
    };
    assert_eq!(by_reason("A").len(), 2, "{events:#?}");
    assert!(
        by_reason("A").iter().all(|e| e.ends_with("series=-")),
        "{events:#?}"
    );
    assert_eq!(by_reason("B").len(), 1, "{events:#?}");
    assert_eq!(by_reason("C").len(), 1, "{events:#?}");
    assert!(by_reason("C")[0].contains("series=count=2 "), "{events:#?}");
}

#[test]
fn a_series_whose_event_was_deleted_is_created_again_with_its_count() {
    let sim = Simulation::new(SimConfig::seed(1));
    let recorder = recorder(&sim.runtime(), &sim.transport());
    let publish = |recorder: Recorder<SimTransport>| async move {
        recorder
            .publish(&event("Synced", "all good"), &reference("a"))
            .await
    };
    sim.block_on(publish(recorder.clone()))
        .unwrap()
        .expect("published");
    let first = events_in(&sim, "default");
    assert_eq!(first.len(), 1, "{first:#?}");
    let name = first[0].split(' ').next().unwrap().to_owned();
    // Deleted behind the recorder's back (as the apiserver's one-hour TTL does).
    let api = ApiClient::<K8sEvent, SimTransport>::namespaced(sim.transport(), "default");
    let runtime = sim.runtime();
    let deleted = name.clone();
    sim.block_on(async move {
        api.delete(&deleted, &DeleteParams::default()).await?;
        runtime.sleep(Duration::from_secs(1)).await;
        Ok::<_, reconcile_engine::ApiError>(())
    })
    .unwrap()
    .expect("deleted");
    assert!(events_in(&sim, "default").is_empty());
    sim.block_on(publish(recorder))
        .unwrap()
        .expect("published again");
    let events = events_in(&sim, "default");
    assert_eq!(events.len(), 1, "{events:#?}");
    assert!(
        events[0].starts_with(&format!("{name} ")),
        "under its name: {events:#?}"
    );
    assert!(events[0].contains("series=count=2 "), "{events:#?}");
    insta::assert_snapshot!(sim.log_text());
}

#[test]
fn a_storm_about_one_object_is_held_to_the_per_object_bound_and_keeps_its_count() {
    let (sim, suppressed) = simulate(|runtime, transport| async move {
        let recorder = recorder(&runtime, &transport);
        let a = reference("a");
        // 30 in a burst: the default bound sends 25 writes (a create, 24 series updates).
        for _ in 0..30 {
            recorder
                .publish(&event("Failing", "again"), &a)
                .await
                .expect("published or held back");
        }
        let held = recorder.suppressed();
        // A minute later the window is open again: the next write sends the true count.
        runtime.sleep(Duration::from_secs(61)).await;
        recorder
            .publish(&event("Failing", "again"), &a)
            .await
            .expect("published");
        (held, recorder.suppressed())
    });
    assert_eq!(suppressed, (5, 5));
    let log = sim.log_text();
    assert_eq!(log.matches(" POST ").count(), 1, "{log}");
    assert_eq!(log.matches(" PATCH ").count(), 25, "{log}");
    let events = events_in(&sim, "default");
    assert_eq!(events.len(), 1, "{events:#?}");
    assert!(events[0].contains("series=count=31 "), "{events:#?}");
}

#[test]
fn a_long_note_is_cut_to_one_kib_and_a_cluster_scoped_object_reports_in_default() {
    let (sim, errors) = simulate(|runtime, transport| async move {
        let recorder = recorder(&runtime, &transport);
        let namespace: Namespace =
            serde_json::from_value(json!({"metadata": {"name": "prod"}})).unwrap();
        recorder
            .publish(&event("Big", &"é".repeat(1000)), &namespace.object_ref(&()))
            .await
            .expect("published");
        let too_long = recorder
            .publish(&event(&"R".repeat(129), "n"), &reference("a"))
            .await
            .expect_err("refused");
        let empty_action = recorder
            .publish(
                &events::Event {
                    action: String::new(),
                    ..event("R", "n")
                },
                &reference("a"),
            )
            .await
            .expect_err("refused");
        (too_long.to_string(), empty_action.to_string())
    });
    let events = events_in(&sim, "default");
    assert_eq!(events.len(), 1, "{events:#?}");
    assert!(
        events[0].contains("note=Some(\"<1024 bytes>\") regarding=Namespace/prod"),
        "{events:#?}"
    );
    assert_eq!(
        errors.0,
        "event reason is 129 bytes; the apiserver takes 1 to 128"
    );
    assert_eq!(
        errors.1,
        "event action is 0 bytes; the apiserver takes 1 to 128"
    );
    // The refused ones sent nothing: one POST in all.
    assert_eq!(
        sim.log_text().matches(" POST ").count(),
        1,
        "{}",
        sim.log_text()
    );
}

#[test]
fn the_same_seed_gives_the_same_events_and_log() {
    let run = || {
        let (sim, ()) = simulate(|runtime, transport| async move {
            let recorder = recorder(&runtime, &transport);
            for reason in ["A", "A", "B", "A"] {
                recorder
                    .publish(&event(reason, "n"), &reference("a"))
                    .await
                    .expect("published");
            }
        });
        format!("{:?}\n{}", events_in(&sim, "default"), sim.log_text())
    };
    assert_eq!(run(), run());
}
