//! configmap-generator under the operator test kit: its own body, unchanged, explored over
//! seeds with every fault on.

mod common;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use reconcile_examples::configmap_generator::{
    self, ConfigMapGenerator, ConfigMapGeneratorSpec, Context,
};
use reconcile_examples::{Args, error_policy};
use reconcile_sim::scenario::{Env, Faults, Scenario, World, create, delete, edit};

fn generator(name: &str, content: &str) -> ConfigMapGenerator {
    let mut g = ConfigMapGenerator::new(
        name,
        ConfigMapGeneratorSpec {
            content: content.into(),
        },
    );
    g.metadata.namespace = Some("default".into());
    g
}

async fn controller(env: Env) {
    let args = Args::default();
    let ctx = Arc::new(Context::new(env.transport()));
    let controller = configmap_generator::controller(
        env.runtime(),
        configmap_generator::source(env.transport(), &args),
        configmap_generator::children(env.transport(), &args),
    );
    let _ = env
        .traced(controller)
        .shutdown_on_signal()
        .run(configmap_generator::reconcile, error_policy, ctx)
        .await;
}

/// Each live generator has its ConfigMap with its content; no ConfigMap of a deleted one.
fn desired(world: &World<'_>) -> Result<(), String> {
    let generators = world.list::<ConfigMapGenerator>();
    for g in &generators {
        let want = format!("{}-cm", g.metadata.name.as_deref().unwrap_or(""));
        let cm = world
            .get::<ConfigMap>(Some("default"), &want)
            .ok_or_else(|| format!("no ConfigMap {want}"))?;
        let content = cm.data.as_ref().and_then(|d| d.get("content")).cloned();
        if content.as_deref() != Some(g.spec.content.as_str()) {
            return Err(format!(
                "{want} has {content:?}, wants {:?}",
                g.spec.content
            ));
        }
    }
    for cm in world.list::<ConfigMap>() {
        let owner = cm
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.kind == "ConfigMapGenerator");
        if let Some(owner) = owner
            && !generators
                .iter()
                .any(|g| g.metadata.name.as_deref() == Some(owner.name.as_str()))
        {
            return Err(format!(
                "{} outlives its generator",
                cm.metadata.name.as_deref().unwrap_or("")
            ));
        }
    }
    Ok(())
}

fn scenario() -> Scenario {
    Scenario::new("configmap-generator", |env: &Env| controller(env.clone()))
        .crd::<ConfigMapGenerator>()
        .given([create(&generator("a", "hello"))])
        .then_at(Duration::from_secs(2), create(&generator("b", "one")))
        .then_at(Duration::from_secs(5), edit(&generator("a", "world")))
        .then_at(Duration::from_secs(9), delete::<ConfigMapGenerator>("b"))
        .invariant("at most one ConfigMap per generator", |world| {
            let mut seen = std::collections::BTreeSet::new();
            for cm in world.list::<ConfigMap>() {
                for o in cm.metadata.owner_references.iter().flatten() {
                    if !seen.insert(o.uid.clone()) {
                        return Err(format!("two ConfigMaps owned by {}", o.name));
                    }
                }
            }
            Ok(())
        })
        .converges_to(desired)
}

#[test]
fn without_faults_the_generator_converges() {
    let summary = scenario().explore(0..4);
    assert_eq!(summary.seeds, 4);
}

#[test]
fn under_every_fault_the_generator_converges() {
    let summary = scenario()
        .faults(Faults::all())
        .explore(0..common::seeds(200));
    eprintln!("{summary}");
}

#[test]
fn the_request_lines_of_one_seed() {
    insta::assert_snapshot!(scenario().snapshot(0));
}

/// The first seed of `0..200` whose log, with only `faults` on, has a line with every
/// part of `evidence`; and every seed up to it converges.
fn fires(faults: Faults, evidence: &[&str]) -> u64 {
    let s = scenario().faults(faults);
    for seed in 0..200 {
        let log = s.log(seed);
        assert!(!log.contains("violation:"), "seed {seed}:\n{log}");
        if log.lines().any(|l| evidence.iter().all(|e| l.contains(e))) {
            return seed;
        }
    }
    panic!("no seed of 0..200 shows {evidence:?}");
}

#[test]
fn every_fault_shows_in_the_log_and_the_generator_still_converges() {
    use reconcile_sim::scenario::FaultKind as K;
    let one = |k: K| Faults::none().with(k).per_seed(3);
    // A fault on the next LIST or WATCH needs one to come: a drop or a 410 brings it.
    let with_drops = |k: K| one(k).with(K::WatchDrop).with(K::Expired);
    let cases: [(K, Faults, &[&str]); 16] = [
        (K::WatchDrop, one(K::WatchDrop), &["cut (dropped)"]),
        (K::Expired, one(K::Expired), &["ERROR 410 Expired"]),
        (
            K::ApiserverRestart,
            one(K::ApiserverRestart),
            &["unreachable (connection refused"],
        ),
        (
            K::ListError,
            with_drops(K::ListError),
            &["? -> 500 InternalError"],
        ),
        (
            K::WatchError,
            with_drops(K::WatchError),
            &["watch=true", "-> 500 InternalError"],
        ),
        (K::SlowWatches, one(K::SlowWatches), &["fault slow-watches"]),
        (
            K::HangingWatches,
            one(K::HangingWatches),
            &["(the hung watches end)"],
        ),
        // A stale LIST needs a LIST to come after it: a restart brings one.
        (
            K::StaleList,
            one(K::StaleList).with(K::Crash),
            &["resourceVersionMatch=Exact)"],
        ),
        (K::Coalesce, one(K::Coalesce), &["held while coalescing"]),
        (
            K::WriteConflict,
            one(K::WriteConflict),
            &["-> 409 Conflict"],
        ),
        (K::WriteError, one(K::WriteError), &["-> 500 InternalError"]),
        (K::LostAnswer, one(K::LostAnswer), &["the answer lost"]),
        (K::Crash, one(K::Crash), &["crash: controller #1 dies"]),
        (
            K::CrashAfterWrite,
            one(K::CrashAfterWrite),
            &["crash: controller #1 dies"],
        ),
        (
            K::ReconcilePanic,
            one(K::ReconcilePanic),
            &["-> the reconcile panics (injected"],
        ),
        (
            K::RollingRestart,
            one(K::RollingRestart),
            &["rolling restart: controller #1 drained and returned"],
        ),
    ];
    for (kind, faults, evidence) in cases {
        let seed = fires(faults, evidence);
        eprintln!("{kind}: seed {seed} shows {evidence:?}");
    }
}

#[test]
fn a_watch_error_is_answered_and_the_watch_reopened() {
    use reconcile_sim::scenario::FaultKind as K;
    let faults = Faults::none()
        .with(K::WatchError)
        .with(K::WatchDrop)
        .per_seed(4);
    let s = scenario().faults(faults);
    let log = (0..200)
        .map(|seed| s.log(seed))
        .find(|log| {
            log.contains("watch=true")
                && (log.contains("-> 500 InternalError") || log.contains("-> 429 TooManyRequests"))
                && log.contains("fault watch-error")
        })
        .expect("a seed with a refused WATCH");
    assert!(!log.contains("violation:"), "{log}");
}

#[test]
fn slow_watches_deliver_late() {
    use reconcile_sim::scenario::FaultKind as K;
    // Seed by seed: a slow-watches fault covering the edit at 5 s delays its event.
    let s = scenario().faults(Faults::none().with(K::SlowWatches).per_seed(1));
    let stamp = |line: &str| {
        line.trim_start()
            .split('s')
            .next()
            .and_then(|t| t.parse::<f64>().ok())
    };
    let mut late = 0;
    for seed in 0..100 {
        let log = s.log(seed);
        let edit = log
            .lines()
            .find(|l| l.contains("user: edit"))
            .and_then(stamp);
        let seen = log
            .lines()
            .find(|l| l.contains("MODIFIED ConfigMapGenerator default/a"))
            .and_then(stamp);
        if let (Some(edit), Some(seen)) = (edit, seen)
            && seen - edit >= 0.1
        {
            late += 1;
        }
    }
    assert!(late > 0, "no seed delivered the edit late");
}

#[test]
fn one_seed_gives_one_log_and_the_summary_is_the_same_on_any_core_count() {
    let s = scenario().faults(Faults::all());
    assert_eq!(s.log(7), s.log(7));
    assert_eq!(
        s.clone().threads(1).explore(0..30),
        s.threads(2).explore(0..30)
    );
}

/// A controller of no kind: it does `at_start` on each start, then waits for the shutdown
/// signal and does `at_stop`.
fn bare<A, B>(at_start: A, at_stop: B) -> Scenario
where
    A: Fn(&Env) + Send + Sync + 'static,
    B: Fn(&Env) + Send + Sync + 'static,
{
    use reconcile_engine::ShutdownSignal;
    let at_start = Arc::new(at_start);
    let at_stop = Arc::new(at_stop);
    Scenario::new("bare", move |env: &Env| {
        let env = env.clone();
        let (at_start, at_stop) = (Arc::clone(&at_start), Arc::clone(&at_stop));
        async move {
            at_start(&env);
            env.runtime().shutdown_signal().await;
            at_stop(&env);
        }
    })
}

/// Spawns, on the incarnation's runtime, a task that sleeps `after` and then creates the
/// ConfigMap `name` (a child task the controller does not wait for).
fn create_later(env: &Env, after: Duration, name: &str, annotation: &str) {
    use reconcile_engine::Runtime;
    let runtime = env.runtime();
    let api =
        reconcile_engine::ApiClient::<ConfigMap, reconcile_sim::runtime::SimTransport>::namespaced(
            env.transport(),
            "default",
        );
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.to_owned());
    cm.metadata.annotations = Some([("at".to_owned(), annotation.to_owned())].into());
    let patch = serde_json::to_value(&cm).expect("serializes");
    let name = name.to_owned();
    let sleeper = runtime.clone();
    drop(runtime.spawn(Box::pin(async move {
        sleeper.sleep_until(sleeper.now() + after).await;
        let params = kube::core::params::PatchParams::apply("bare").force();
        let _ = api
            .patch(&name, &params, &kube::core::params::Patch::Apply(&patch))
            .await;
    })));
}

/// A controller that applies a ConfigMap naming its incarnation each time it starts.
fn writes_on_every_start() -> Scenario {
    bare(
        |env| {
            create_later(
                env,
                Duration::ZERO,
                "started",
                &env.incarnation().to_string(),
            )
        },
        |_| {},
    )
}

#[test]
fn the_idempotence_oracle_fires_on_a_controller_that_writes_on_every_start() {
    let s = writes_on_every_start();
    let f = s.try_explore(0..1).expect_err("a fresh start writes");
    assert_eq!(f.violation.oracle, "idempotence", "{f}");
    assert!(
        f.violation
            .message
            .contains("apply ConfigMap default/started"),
        "{f}"
    );
}

#[test]
fn the_clean_stop_oracle_fires_on_a_request_after_the_controller_returned() {
    let s = bare(
        |_| {},
        |env| create_later(env, Duration::from_secs(1), "late", "after-stop"),
    );
    let f = s.try_explore(0..1).expect_err("a write after the return");
    assert_eq!(f.violation.oracle, "clean stop", "{f}");
    assert!(
        f.violation
            .message
            .contains("a request after the controller returned: PATCH"),
        "{f}"
    );
}

#[test]
fn the_clean_stop_oracle_fires_on_an_escaping_panic() {
    use reconcile_engine::Runtime;
    let s = bare(
        |env| {
            let runtime = env.runtime();
            let sleeper = runtime.clone();
            drop(runtime.spawn(Box::pin(async move {
                sleeper
                    .sleep_until(sleeper.now() + Duration::from_secs(3))
                    .await;
                panic!("a task of the controller panics");
            })));
        },
        |_| {},
    );
    let f = s.try_explore(0..1).expect_err("the panic escapes");
    assert_eq!(f.violation.oracle, "clean stop", "{f}");
    assert!(
        f.violation
            .message
            .contains("a task panicked: a task of the controller panics"),
        "{f}"
    );
}

#[test]
fn a_quiescence_invariant_is_checked_once_converged_and_an_every_step_one_at_once() {
    use reconcile_sim::scenario::When;
    let at_rest = scenario()
        .invariant_when("never", When::Quiescence, |_| Err("always false".into()))
        .try_explore(0..1)
        .expect_err("fires");
    assert_eq!(at_rest.violation.oracle, "invariant \"never\"");
    assert!(at_rest.violation.at >= Duration::from_secs(14), "{at_rest}");
    let each = scenario()
        .invariant("never", |_| Err("always false".into()))
        .try_explore(0..1)
        .expect_err("fires");
    assert!(each.violation.at < Duration::from_secs(1), "{each}");
}

#[test]
fn an_oracle_turned_off_does_not_fire() {
    use reconcile_sim::scenario::Oracles;
    let s = writes_on_every_start().oracles(Oracles {
        idempotence: false,
        ..Oracles::default()
    });
    s.explore(0..2);
    let late = bare(
        |_| {},
        |env| create_later(env, Duration::from_secs(1), "late", "after-stop"),
    )
    .oracles(Oracles {
        clean_stop: false,
        ..Oracles::default()
    });
    late.explore(0..2);
}

#[test]
fn a_capture_seeds_the_world_and_the_actions_and_the_generator_converges_under_faults() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/generators-capture.jsonl"
    );
    let s = Scenario::new("captured", |env: &Env| controller(env.clone()))
        .crd::<ConfigMapGenerator>()
        .captured(path)
        .expect("the capture seeds the scenario")
        .faults(Faults::all())
        .converges_to(desired);
    let log = s.log(0);
    for line in [
        "user: create ConfigMapGenerator default/a",
        "user: create ConfigMapGenerator default/b",
        "3.200s user: edit ConfigMapGenerator default/a",
        "5.000s user: create ConfigMapGenerator default/c",
        "7.500s user: delete ConfigMapGenerator default/b",
    ] {
        assert!(log.contains(line), "no {line:?} in\n{log}");
    }
    s.explore(0..50);
    let missing = Scenario::new("captured", |env: &Env| controller(env.clone()))
        .captured("no/such/capture.jsonl")
        .expect_err("no file");
    assert!(
        missing.to_string().contains("no/such/capture.jsonl"),
        "{missing}"
    );
}

#[test]
fn the_examples_own_main_body_installs_its_crd_and_runs_unchanged_under_faults() {
    // `configmap_generator::run` is what the example's mains call: it creates the CRD, waits
    // for the apiserver to report it Established, then runs until the shutdown signal.
    let s =
        Scenario::new("configmap-generator-run", |env: &Env| {
            let env = env.clone();
            async move {
                configmap_generator::run(env.runtime(), env.transport(), &Args::default()).await
            }
        })
        .then_at(Duration::from_secs(2), create(&generator("a", "hello")))
        .then_at(Duration::from_secs(5), edit(&generator("a", "world")))
        .faults(Faults::all())
        .converges_to(desired);
    let log = s.log(0);
    assert!(
        log.contains("POST /apis/apiextensions.k8s.io/v1/customresourcedefinitions"),
        "{log}"
    );
    assert!(
        log.contains("user: create ConfigMapGenerator default/a\n"),
        "{log}"
    );
    s.explore(0..100);
}
