//! Two controllers over one shared pod source, under the operator test kit: one `Reflector`
//! watches the pods, and two `Controller::for_shared_with` subscribers, each with its own key
//! map, write through `ApiClient` to the simulated cluster. Explored over seeds with every
//! fault on (dropped and expired watches, relists, crashes of the whole process), so a
//! subscriber that missed a change, kept a stale object, or lost its snapshot shows as a
//! world that does not converge.
//!
//! - the pod controller keys each pod by itself and keeps a ConfigMap `pod-<name>` holding
//!   the pod's `app` label, deleting it with the pod;
//! - the app controller keys pods by their `app` label and keeps a ConfigMap `app-<app>`
//!   listing that app's pods, deleting it once the app has none.
//!
//! Each controller also watches the ConfigMaps it writes, mapped back to their key. Without
//! that, the kit found the classic restart bug in the first version of this scenario (seed
//! 7): pod `c` moves from app `db` to `cache`, the process crashes before the app controller
//! sees the edit, and after the restart no pod names `db` any more, so nothing ever wakes the
//! key that would delete `app-db`. A level-triggered controller must watch what it owns.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::ResourceExt;
use kube::core::params::{DeleteParams, PostParams};
use reconcile_core::{KeyMap, ObjectKey};
use reconcile_engine::{
    Action, ApiClient, ApiError, Controller, Reconcile, Reflector, Source, default_error_policy,
};
use reconcile_sim::runtime::SimTransport;
use reconcile_sim::scenario::{Env, Faults, Scenario, World, create, delete, edit};

const NAMESPACE: &str = "default";

/// What both reconciles are handed.
struct Ctx {
    transport: SimTransport,
    /// The app controller's planted bug: an app left with no pod keeps its ConfigMap.
    keeps_empty_apps: bool,
}

fn pod(name: &str, app: &str) -> Pod {
    let mut pod = Pod::default();
    pod.metadata.name = Some(name.into());
    pod.metadata.namespace = Some(NAMESPACE.into());
    pod.metadata.labels = Some(BTreeMap::from([("app".to_owned(), app.to_owned())]));
    pod
}

fn config_map(name: &str, key: &str, value: &str) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.into());
    cm.metadata.namespace = Some(NAMESPACE.into());
    cm.data = Some(BTreeMap::from([(key.to_owned(), value.to_owned())]));
    cm
}

fn app_of(pod: &Pod) -> String {
    pod.labels().get("app").cloned().unwrap_or_default()
}

/// Makes `name` hold `key: value`, or removes it when `value` is `None`; reads first, so a
/// world already right takes no write (the kit's idempotence oracle counts writes).
async fn keep(ctx: &Ctx, name: &str, key: &str, value: Option<&str>) -> Result<(), ApiError> {
    let api = ApiClient::<ConfigMap, SimTransport>::namespaced(ctx.transport.clone(), NAMESPACE);
    let current = api.get_opt(name).await?;
    let held = current
        .as_ref()
        .and_then(|cm| cm.data.as_ref()?.get(key).map(String::as_str));
    match (current.as_ref(), value) {
        (None, None) => Ok(()),
        (Some(_), None) => match api.delete(name, &DeleteParams::default()).await {
            Err(e) if e.is_not_found() => Ok(()),
            done => done,
        },
        // A 409 here (an earlier incarnation's create landed after our read) goes to the
        // error policy, whose retry reads the ConfigMap again.
        (None, Some(value)) => api
            .create(&PostParams::default(), &config_map(name, key, value))
            .await
            .map(drop),
        (Some(_), Some(value)) if held == Some(value) => Ok(()),
        (Some(cm), Some(value)) => {
            let mut cm = cm.clone();
            cm.data = Some(BTreeMap::from([(key.to_owned(), value.to_owned())]));
            api.replace(name, &PostParams::default(), &cm)
                .await
                .map(drop)
        }
    }
}

async fn reconcile_pod(
    request: Reconcile<Pod, ObjectKey>,
    ctx: Arc<Ctx>,
) -> Result<Action, ApiError> {
    let name = format!("pod-{}", request.parent().name());
    let app = request.object().map(|p| app_of(p));
    keep(&ctx, &name, "app", app.as_deref()).await?;
    Ok(Action::await_change())
}

async fn reconcile_app(request: Reconcile<Pod, String>, ctx: Arc<Ctx>) -> Result<Action, ApiError> {
    let (app, members) = request.into_parts();
    let pods: BTreeSet<String> = members.iter().map(|p| p.name_any()).collect();
    let name = format!("app-{app}");
    if pods.is_empty() && ctx.keeps_empty_apps {
        return Ok(Action::await_change());
    }
    let listed = (!pods.is_empty()).then(|| Vec::from_iter(pods).join(","));
    keep(&ctx, &name, "pods", listed.as_deref()).await?;
    Ok(Action::await_change())
}

/// The ConfigMaps both controllers write, watched so that one left over wakes its key.
fn config_maps(env: &Env) -> Source<ConfigMap, SimTransport> {
    Source::namespaced(env.transport(), NAMESPACE)
}

/// What follows `prefix` in the ConfigMap's name: the pod or app it is kept for.
fn named_after<'a>(cm: &'a ConfigMap, prefix: &str) -> Option<&'a str> {
    cm.metadata.name.as_deref()?.strip_prefix(prefix)
}

/// One incarnation: the reflector, then both subscribers on it until the kit's shutdown
/// signal, then the reflector stopped.
async fn controllers(env: Env, keeps_empty_apps: bool) {
    let ctx = Arc::new(Ctx {
        transport: env.transport(),
        keeps_empty_apps,
    });
    let reflector = Reflector::with_runtime(
        env.runtime(),
        Source::<Pod, SimTransport>::namespaced(env.transport(), NAMESPACE),
    )
    .name("pods");
    let shared = reflector.shared();
    let Ok(reflecting) = reflector.start().await else {
        return;
    };
    let by_pod = env
        .traced(Controller::for_shared_with(
            env.runtime(),
            shared.clone(),
            KeyMap::by_object(),
        ))
        .watches(config_maps(&env), |cm| {
            named_after(cm, "pod-")
                .map(|pod| ObjectKey::new(Some(NAMESPACE), pod))
                .into_iter()
                .collect()
        })
        .name("pod-controller")
        .shutdown_on_signal();
    let by_app = Controller::<Pod, String, _, SimTransport>::for_shared_with(
        env.runtime(),
        shared,
        KeyMap::by_label("app"),
    )
    .watches(config_maps(&env), |cm| {
        named_after(cm, "app-")
            .map(str::to_owned)
            .into_iter()
            .collect()
    })
    .name("app-controller")
    .shutdown_on_signal();
    // Either start fails when the shutdown signal comes before the first listing; the
    // reflector is stopped all the same, or its watch would outlive this incarnation (the
    // kit's clean-stop check caught exactly that in an earlier version, at seed 334).
    let by_pod = by_pod
        .start(reconcile_pod, default_error_policy, Arc::clone(&ctx))
        .await;
    let by_app = by_app.start(reconcile_app, default_error_policy, ctx).await;
    if let Ok(by_pod) = by_pod {
        let _ = by_pod.join().await;
    }
    if let Ok(by_app) = by_app {
        let _ = by_app.join().await;
    }
    let _ = reflecting.shutdown().await;
}

/// Every pod has its `pod-` ConfigMap with its app, every app with pods its `app-`
/// ConfigMap listing them, and no other ConfigMap is left.
fn desired(world: &World<'_>) -> Result<(), String> {
    let pods = world.list::<Pod>();
    let mut want: BTreeMap<String, (&str, String)> = BTreeMap::new();
    let mut apps: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for p in &pods {
        want.insert(format!("pod-{}", p.name_any()), ("app", app_of(p)));
        apps.entry(app_of(p)).or_default().insert(p.name_any());
    }
    for (app, names) in apps {
        want.insert(
            format!("app-{app}"),
            ("pods", Vec::from_iter(names).join(",")),
        );
    }
    let mut have = BTreeMap::new();
    for cm in world.list::<ConfigMap>() {
        if cm.namespace().as_deref() == Some(NAMESPACE) && cm.name_any() != "kube-root-ca.crt" {
            have.insert(cm.name_any(), cm);
        }
    }
    for (name, (key, value)) in &want {
        let held = have
            .get(name)
            .and_then(|cm| cm.data.as_ref()?.get(*key).cloned());
        if held.as_deref() != Some(value.as_str()) {
            return Err(format!("{name} holds {key}={held:?}, wants {value:?}"));
        }
    }
    if let Some(stale) = have.keys().find(|name| !want.contains_key(*name)) {
        return Err(format!("{stale} is left over"));
    }
    Ok(())
}

fn scenario(keeps_empty_apps: bool) -> Scenario {
    Scenario::new("shared-pods", move |env: &Env| {
        controllers(env.clone(), keeps_empty_apps)
    })
    .given([
        create(&pod("a", "web")),
        create(&pod("b", "web")),
        create(&pod("c", "db")),
    ])
    .then_at(Duration::from_secs(2), edit(&pod("b", "db")))
    .then_at(Duration::from_secs(4), create(&pod("d", "web")))
    .then_at(Duration::from_secs(6), delete::<Pod>("a"))
    .then_at(Duration::from_secs(8), edit(&pod("b", "cache")))
    .then_at(Duration::from_secs(9), edit(&pod("c", "cache")))
    .converges_to(desired)
}

#[test]
fn two_subscribers_of_one_shared_pod_source_converge_under_every_fault() {
    let summary = scenario(false)
        .faults(Faults::all())
        .explore(0..common::seeds(200));
    eprintln!("{summary}");
}

#[test]
fn the_convergence_check_fires_on_an_app_controller_that_keeps_an_empty_apps_config_map() {
    let failure = scenario(true)
        .try_explore(0..4)
        .expect_err("app-db outlives its last pod");
    let text = failure.to_string();
    assert!(text.contains("app-db is left over"), "{text}");
}
