//! The other examples on the simulator, each from its own body (`source`, `controller`,
//! `start`, its `reconcile`), against the simulated cluster: one object is created, the
//! controller does its write (or only looks), settles, and is stopped. Each snapshot is the
//! run log and the object as it ends.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::CustomResourceExt;
use kube::core::params::PostParams;
use reconcile_core::ObjectKey;
use reconcile_engine::ApiClient;
use reconcile_examples::crd_status::{Shop, ShopSpec};
use reconcile_examples::{
    Args, Effect, crd_status, deployment_annotate, dynamic_configmaps, secret_metadata,
};
use reconcile_sim::runtime::{SimConfig, SimRuntime, SimTransport, Simulation};
use serde_json::json;

const SETTLE: Duration = Duration::from_secs(2);

fn key() -> ObjectKey {
    ObjectKey::new(Some("default"), "a")
}

/// Runs `body` on a fresh simulation (with the Shop CRD registered) and returns the
/// simulation and what the body returned.
fn simulate<T, F>(body: impl FnOnce(SimRuntime, SimTransport) -> F) -> (Simulation, T)
where
    T: Send + 'static,
    F: Future<Output = T> + Send + 'static,
{
    let sim = Simulation::new(SimConfig::seed(1));
    let crd = serde_json::to_value(Shop::crd()).expect("a CRD serializes");
    sim.cluster(|cluster, _| cluster.register_crd(&crd))
        .expect("the CRD registers");
    let future = body(sim.runtime(), sim.transport());
    let out = sim
        .block_on(future)
        .unwrap_or_else(|e| panic!("{e}\n{}", sim.log_text()));
    (sim, out)
}

/// The object at `path` in the cluster, its metadata's volatile parts left out.
fn object(sim: &Simulation, group: &str, plural: &str) -> String {
    sim.cluster(|cluster, _| {
        let kind = cluster.kind(group, plural).expect("served");
        let mut v = cluster.get(kind, Some("default"), "a").expect("there");
        let meta = v["metadata"].as_object_mut().expect("metadata");
        for field in ["uid", "creationTimestamp", "managedFields"] {
            meta.remove(field);
        }
        serde_json::to_string_pretty(&v).expect("JSON")
    })
}

fn snapshot(sim: &Simulation, object: &str, effects: &[Effect]) -> String {
    format!(
        "# effects\n{effects:?}\n\n# object\n{object}\n\n# log\n{}",
        sim.log_text()
    )
}

#[test]
fn deployment_annotate_annotates_a_deployment_with_its_replicas() {
    let (sim, effects) = simulate(|runtime, transport| async move {
        let ctx = Arc::new(deployment_annotate::Context::new(transport.clone()));
        // `Controller::for_objects`: the runtime's default value, the ambient simulation.
        let controller = deployment_annotate::controller::<SimRuntime, _>(
            deployment_annotate::source(transport.clone(), &Args::default()),
        );
        let running = deployment_annotate::start(controller, Arc::clone(&ctx))
            .await
            .expect("synced");
        let deployment: Deployment = serde_json::from_value(json!({
            "metadata": {"name": "a"},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "a"}},
                     "template": {"metadata": {"labels": {"app": "a"}}}}
        }))
        .expect("a Deployment");
        ApiClient::<Deployment, SimTransport>::namespaced(transport, "default")
            .create(&PostParams::default(), &deployment)
            .await
            .expect("created");
        runtime.sleep(SETTLE).await;
        running.shutdown().await.expect("a clean stop");
        ctx.observations().of(&key())
    });
    assert_eq!(effects[0], Effect::Wrote("0/3".into()), "{effects:?}");
    assert!(
        !effects.last().expect("ran").wrote(),
        "settled: {effects:?}"
    );
    insta::assert_snapshot!(snapshot(
        &sim,
        &object(&sim, "apps", "deployments"),
        &effects
    ));
}

#[test]
fn crd_status_writes_a_shops_status() {
    let (sim, effects) = simulate(|runtime, transport| async move {
        let ctx = Arc::new(crd_status::Context::new(transport.clone()));
        let controller = crd_status::controller(
            runtime.clone(),
            crd_status::source(transport.clone(), &Args::default()),
        );
        let running = crd_status::start(controller, Arc::clone(&ctx))
            .await
            .expect("synced");
        let shop = Shop::new("a", ShopSpec { replicas: 2 });
        ApiClient::<Shop, SimTransport>::namespaced(transport, "default")
            .create(&PostParams::default(), &shop)
            .await
            .expect("created");
        runtime.sleep(SETTLE).await;
        running.shutdown().await.expect("a clean stop");
        ctx.observations().of(&key())
    });
    assert_eq!(
        effects[0],
        Effect::Wrote("2 replica(s) wanted".into()),
        "{effects:?}"
    );
    assert!(
        !effects.last().expect("ran").wrote(),
        "settled: {effects:?}"
    );
    let shop = object(&sim, "example.reconcile-loop.dev", "shops");
    insta::assert_snapshot!(snapshot(&sim, &shop, &effects));
}

#[test]
fn dynamic_configmaps_counts_a_configmaps_keys() {
    let (sim, effects) = simulate(|runtime, transport| async move {
        let resource = dynamic_configmaps::resource();
        let ctx = Arc::new(dynamic_configmaps::Context::new(
            transport.clone(),
            resource.clone(),
        ));
        let controller = dynamic_configmaps::controller(
            runtime.clone(),
            dynamic_configmaps::source(transport.clone(), &resource, &Args::default()),
        );
        let running = dynamic_configmaps::start(controller, Arc::clone(&ctx))
            .await
            .expect("synced");
        let cm: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": "a"}, "data": {"x": "1", "y": "2"}
        }))
        .expect("a ConfigMap");
        ApiClient::<ConfigMap, SimTransport>::namespaced(transport, "default")
            .create(&PostParams::default(), &cm)
            .await
            .expect("created");
        runtime.sleep(SETTLE).await;
        running.shutdown().await.expect("a clean stop");
        ctx.observations().of(&key())
    });
    assert_eq!(effects[0], Effect::Wrote("2".into()), "{effects:?}");
    assert!(
        !effects.last().expect("ran").wrote(),
        "settled: {effects:?}"
    );
    insta::assert_snapshot!(snapshot(&sim, &object(&sim, "", "configmaps"), &effects));
}

#[test]
fn secret_metadata_sees_a_secrets_labels_and_nothing_else() {
    let (sim, effects) = simulate(|runtime, transport| async move {
        let ctx = Arc::new(secret_metadata::Context::default());
        let controller = secret_metadata::controller(
            runtime.clone(),
            secret_metadata::source(transport.clone(), &Args::default()),
        );
        let running = secret_metadata::start(controller, Arc::clone(&ctx))
            .await
            .expect("synced");
        let secret: Secret = serde_json::from_value(json!({
            "metadata": {"name": "a", "labels": {"app": "a"}},
            "stringData": {"password": "hunter2"}
        }))
        .expect("a Secret");
        ApiClient::<Secret, SimTransport>::namespaced(transport, "default")
            .create(&PostParams::default(), &secret)
            .await
            .expect("created");
        runtime.sleep(SETTLE).await;
        running.shutdown().await.expect("a clean stop");
        ctx.observations().of(&key())
    });
    assert_eq!(effects, [Effect::Observed("1 label(s)".into())]);
    insta::assert_snapshot!(snapshot(&sim, &object(&sim, "", "secrets"), &effects));
}
