//! The configmap-generator example on the simulator: the very body its mains run
//! (`source`, `children`, `controller`, `start` with its `reconcile` and `error_policy`),
//! on `reconcile-sim`'s deterministic runtime and transport, against the simulated
//! cluster. Each case snapshots the run log (one line per request, watch event, collector
//! action and reconcile) and the final world.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::CustomResourceExt;
use kube::core::params::{DeleteParams, Patch, PatchParams, PostParams};
use reconcile_engine::ApiClient;
use reconcile_examples::Args;
use reconcile_examples::configmap_generator::{
    self, ConfigMapGenerator, ConfigMapGeneratorSpec, Context,
};
use reconcile_sim::cluster::ListOptions;
use reconcile_sim::runtime::{SimConfig, SimRuntime, SimTransport, Simulation};
use serde_json::{Value, json};

/// Long enough for every reconcile, write, watch event and collector pass to settle.
const SETTLE: Duration = Duration::from_secs(2);

/// What a case does once the controller is running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Create the generator `a` with `content: x=1`.
    Create,
    /// Change its content to `x=2`.
    Edit,
    /// Delete its ConfigMap behind the controller's back.
    DeleteChild,
    /// Delete the generator.
    DeleteGenerator,
}

/// A simulation serving the built-in kinds and the generator's CRD.
fn simulation(seed: u64) -> Simulation {
    let sim = Simulation::new(SimConfig::seed(seed));
    let crd = serde_json::to_value(ConfigMapGenerator::crd()).expect("a CRD serializes");
    sim.cluster(|cluster, _| cluster.register_crd(&crd))
        .expect("the CRD registers");
    sim
}

/// Starts the controller, runs `steps` (settling after each), and stops it.
async fn scenario(runtime: SimRuntime, transport: SimTransport, steps: Vec<Step>) {
    let args = Args::default();
    let ctx = Arc::new(Context::new(transport.clone()));
    let controller = configmap_generator::controller(
        runtime.clone(),
        configmap_generator::source(transport.clone(), &args),
        configmap_generator::children(transport.clone(), &args),
    );
    let running = configmap_generator::start(controller, ctx)
        .await
        .expect("the controller syncs");
    let generators =
        ApiClient::<ConfigMapGenerator, SimTransport>::namespaced(transport.clone(), "default");
    let configmaps = ApiClient::<ConfigMap, SimTransport>::namespaced(transport, "default");
    for step in steps {
        match step {
            Step::Create => {
                let generator = ConfigMapGenerator::new(
                    "a",
                    ConfigMapGeneratorSpec {
                        content: "x=1".into(),
                    },
                );
                generators
                    .create(&PostParams::default(), &generator)
                    .await
                    .expect("created");
            }
            Step::Edit => {
                let patch = json!({"spec": {"content": "x=2"}});
                generators
                    .patch("a", &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .expect("patched");
            }
            Step::DeleteChild => configmaps
                .delete("a-cm", &DeleteParams::default())
                .await
                .expect("deleted"),
            Step::DeleteGenerator => generators
                .delete("a", &DeleteParams::default())
                .await
                .expect("deleted"),
        }
        runtime.sleep(SETTLE).await;
    }
    running.shutdown().await.expect("a clean stop");
}

/// Runs `steps` with `seed`: the simulation, for its log and world.
fn run(seed: u64, steps: &[Step]) -> Simulation {
    let sim = simulation(seed);
    sim.block_on(scenario(sim.runtime(), sim.transport(), steps.to_vec()))
        .unwrap_or_else(|e| panic!("{e}\n{}", sim.log_text()));
    sim
}

/// The ConfigMaps and generators of `default`, one line each: name, content, owners.
fn world(sim: &Simulation) -> String {
    sim.cluster(|cluster, _| {
        let mut out = String::new();
        for (group, plural) in [
            ("", "configmaps"),
            ("example.reconcile-loop.dev", "configmapgenerators"),
        ] {
            let kind = cluster.kind(group, plural).expect("served");
            let list = cluster
                .list(kind, Some("default"), &ListOptions::default())
                .expect("listed");
            for item in list["items"].as_array().into_iter().flatten() {
                let owners: Vec<String> = item["metadata"]["ownerReferences"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|o| {
                        format!(
                            "{}/{} controller={} blockOwnerDeletion={}",
                            o["kind"].as_str().unwrap_or(""),
                            o["name"].as_str().unwrap_or(""),
                            o["controller"],
                            o["blockOwnerDeletion"]
                        )
                    })
                    .collect();
                let content = item
                    .pointer("/data/content")
                    .or_else(|| item.pointer("/spec/content"))
                    .cloned()
                    .unwrap_or(Value::Null);
                out.push_str(&format!(
                    "{plural} {} content={content} owners=[{}]\n",
                    item["metadata"]["name"].as_str().unwrap_or(""),
                    owners.join(", ")
                ));
            }
        }
        out
    })
}

fn snapshot(sim: &Simulation) -> String {
    format!("# world\n{}\n# log\n{}", world(sim), sim.log_text())
}

#[test]
fn creating_a_generator_yields_its_configmap_with_the_owner_reference() {
    let sim = run(1, &[Step::Create]);
    insta::assert_snapshot!(snapshot(&sim));
}

#[test]
fn editing_the_spec_updates_the_configmap() {
    let sim = run(1, &[Step::Create, Step::Edit]);
    insta::assert_snapshot!(snapshot(&sim));
}

#[test]
fn a_configmap_deleted_behind_the_controllers_back_is_put_back() {
    let sim = run(1, &[Step::Create, Step::DeleteChild]);
    insta::assert_snapshot!(snapshot(&sim));
}

#[test]
fn deleting_the_generator_removes_the_configmap_by_garbage_collection() {
    let sim = run(1, &[Step::Create, Step::DeleteGenerator]);
    insta::assert_snapshot!(snapshot(&sim));
}

const ALL: [Step; 4] = [
    Step::Create,
    Step::Edit,
    Step::DeleteChild,
    Step::DeleteGenerator,
];

#[test]
fn the_same_seed_gives_a_byte_identical_log_twenty_times() {
    let first = run(7, &ALL).log_text();
    for _ in 0..19 {
        assert_eq!(run(7, &ALL).log_text(), first);
    }
}

#[test]
fn different_seeds_give_different_interleavings() {
    let logs: std::collections::BTreeSet<String> =
        (0..8).map(|seed| run(seed, &ALL).log_text()).collect();
    assert!(logs.len() >= 2, "8 seeds, one interleaving");
}
