//! configmap-generator under the operator test kit: its own body, unchanged, explored over
//! seeds with every fault on.

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
    let summary = scenario().faults(Faults::all()).explore(0..200);
    eprintln!("{summary}");
}

#[test]
fn the_request_lines_of_one_seed() {
    insta::assert_snapshot!(scenario().snapshot(0));
}
