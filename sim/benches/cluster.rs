//! The simulated cluster's speed (issue 26): simulated API requests per second, and
//! configmap-generator, unchanged, over 1,000 generators and 10,000 spec edits, then 10,000
//! generators and 100,000 edits to show the growth is linear. Release, one core (the
//! simulation is single-threaded). Each run proves its work before its figure counts: every
//! request answered as expected, and at the end every generator's ConfigMap holds its last
//! content.
//!
//! `cargo bench -p reconcile-sim --bench cluster`; `CLUSTER_BENCH_SIZES` sets the generator
//! counts (default `1000,10000`; edits are ten per generator); `CLUSTER_BENCH_REQUESTS=0` skips
//! the requests figure, so a profile of the generators sees them alone.

#![allow(missing_docs)]

use std::sync::Arc;
use std::time::{Duration, Instant as WallClock};

use k8s_openapi::api::core::v1::ConfigMap;
use kube_core::CustomResourceExt;
use kube_core::params::{Patch, PatchParams, PostParams};
use reconcile_engine::ApiClient;
use reconcile_examples::Args;
use reconcile_examples::configmap_generator::{
    self, ConfigMapGenerator, ConfigMapGeneratorSpec, Context,
};
use reconcile_sim::runtime::{SimConfig, SimTransport, Simulation};
use serde_json::json;

const REQUESTS: u64 = 100_000;

fn simulation() -> Simulation {
    let sim = Simulation::new(SimConfig {
        // One line per reconcile would be 100,000s of lines: the figure is the cluster's.
        log_reconciles: false,
        // 110,000 requests at a few virtual milliseconds each, and their polls.
        horizon: Duration::from_secs(36_000),
        max_steps: 1_000_000_000,
        ..SimConfig::seed(1)
    });
    let crd = serde_json::to_value(ConfigMapGenerator::crd()).expect("a CRD serializes");
    sim.cluster(|cluster, _| cluster.register_crd(&crd))
        .expect("the CRD registers");
    sim
}

/// `REQUESTS` requests through `ApiClient` over the simulated transport, one after another:
/// creates of 100 ConfigMaps, then GETs and merge patches of them, in turn.
fn requests_per_second() {
    let sim = simulation();
    let transport = sim.transport();
    let start = WallClock::now();
    let checked = sim
        .block_on(async move {
            let api = ApiClient::<ConfigMap, SimTransport>::namespaced(transport, "default");
            let mut checked = 0u64;
            for i in 0..100 {
                let cm: ConfigMap = serde_json::from_value(json!({
                    "metadata": {"name": format!("cm-{i}"), "labels": {"group": format!("g{}", i % 10)}},
                    "data": {"n": "0"}
                }))
                .expect("a ConfigMap");
                api.create(&PostParams::default(), &cm).await.expect("created");
                checked += 1;
            }
            for r in 100..REQUESTS {
                let name = format!("cm-{}", r % 100);
                if r % 2 == 0 {
                    let got = api.get(&name).await.expect("got");
                    assert_eq!(got.metadata.name.as_deref(), Some(name.as_str()));
                } else {
                    let patch = json!({"data": {"n": r.to_string()}});
                    let got = api
                        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await
                        .expect("patched");
                    assert_eq!(
                        got.data.as_ref().and_then(|d| d.get("n")),
                        Some(&r.to_string())
                    );
                }
                checked += 1;
            }
            checked
        })
        .expect("the run ends");
    let wall = start.elapsed();
    assert_eq!(checked, REQUESTS, "every request answered as expected");
    println!(
        "simulated requests (ApiClient over SimTransport, JSON; creates, then GET and merge PATCH in turn): {REQUESTS} in {:.2} s = {:.0} requests/s (target: 50,000/s)",
        wall.as_secs_f64(),
        REQUESTS as f64 / wall.as_secs_f64()
    );
}

/// configmap-generator over `generators` generators and ten spec edits each, 1 ms of
/// virtual time apart, then a minute to settle; checked: every ConfigMap holds its
/// generator's last content.
fn generators(generators: usize) {
    let edits = generators * 10;
    let sim = simulation();
    let (runtime, transport) = (sim.runtime(), sim.transport());
    let api =
        ApiClient::<ConfigMapGenerator, SimTransport>::namespaced(transport.clone(), "default");
    let start = WallClock::now();
    let (rt, tr, generators_api) = (runtime.clone(), transport.clone(), api.clone());
    let (running, handle) = sim
        .block_on(async move {
            for i in 0..generators {
                let g = ConfigMapGenerator::new(
                    &format!("g{i}"),
                    ConfigMapGeneratorSpec {
                        content: "v0".into(),
                    },
                );
                generators_api
                    .create(&PostParams::default(), &g)
                    .await
                    .expect("created");
            }
            let args = Args::default();
            let controller = configmap_generator::controller(
                rt,
                configmap_generator::source(tr.clone(), &args),
                configmap_generator::children(tr.clone(), &args),
            );
            let handle = controller.handle();
            let ctx = Arc::new(Context::new(tr));
            let running = configmap_generator::start(controller, ctx)
                .await
                .expect("the controller syncs");
            (running, handle)
        })
        .unwrap_or_else(|e| panic!("{e}"));
    // The edits in rounds of one per generator; between rounds, the history is compacted
    // to 10,000 changes back, as etcd compacts (its bound would refuse writes otherwise).
    for round in 0..edits / generators {
        let (rt, edits_api) = (runtime.clone(), api.clone());
        sim.block_on(async move {
            for i in 0..generators {
                let patch = json!({"spec": {"content": format!("v{}", round + 1)}});
                edits_api
                    .patch(
                        &format!("g{i}"),
                        &PatchParams::default(),
                        &Patch::Merge(&patch),
                    )
                    .await
                    .expect("edited");
                rt.sleep(Duration::from_millis(1)).await;
            }
        })
        .unwrap_or_else(|e| panic!("{e}"));
        sim.cluster(|cluster, _| {
            let to = cluster.resource_version().saturating_sub(10_000);
            cluster.compact(to);
        });
    }
    let reconciles = sim
        .block_on(async move {
            runtime.sleep(Duration::from_secs(60)).await;
            let reconciles: u64 = handle.metrics().reconcile_total.iter().sum();
            running.shutdown().await.expect("a clean stop");
            let configmaps = ApiClient::<ConfigMap, SimTransport>::namespaced(transport, "default");
            for i in 0..generators {
                let cm = configmaps
                    .get(&format!("g{i}-cm"))
                    .await
                    .expect("its ConfigMap");
                assert_eq!(
                    cm.data
                        .as_ref()
                        .and_then(|d| d.get("content"))
                        .map(String::as_str),
                    Some("v10"),
                    "g{i}-cm holds its generator's last content"
                );
            }
            reconciles
        })
        .unwrap_or_else(|e| panic!("{e}"));
    let wall = start.elapsed();
    println!(
        "configmap-generator, {generators} generators, {edits} spec edits (JSON over SimTransport): {:.2} s, {reconciles} reconciles = {:.0} reconciles/s; every ConfigMap at its last content",
        wall.as_secs_f64(),
        reconciles as f64 / wall.as_secs_f64()
    );
}

pub fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs this once, small.
    let test = std::env::args().any(|a| a == "--test") || !std::env::args().any(|a| a == "--bench");
    if test {
        generators(20);
        return;
    }
    if std::env::var("CLUSTER_BENCH_REQUESTS").as_deref() != Ok("0") {
        requests_per_second();
    }
    let sizes = std::env::var("CLUSTER_BENCH_SIZES").unwrap_or_else(|_| "1000,10000".into());
    for n in sizes.split(',').filter_map(|s| s.trim().parse().ok()) {
        generators(n);
    }
}
