//! The operator test kit's throughput: configmap-generator with 10 generators and 50 user
//! actions, every fault on, seeds per second on every core (`cargo bench -p
//! reconcile-sim --bench scenario`; `SCENARIO_SEEDS`, default 10,000). Each seed is a
//! whole run: the schedule, the controller from its first LIST to its clean stop, the
//! 10 simulated minutes of the no-hot-loop oracle, the restart of the idempotence oracle.
//! The run proves its work before its figure counts: every seed clean, and the summary's
//! requests, writes and faults.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use reconcile_examples::configmap_generator::{
    self, ConfigMapGenerator, ConfigMapGeneratorSpec, Context,
};
use reconcile_examples::{Args, error_policy};
use reconcile_sim::scenario::{Env, Faults, Scenario, World, create, delete, edit};

fn generator(i: usize, content: &str) -> ConfigMapGenerator {
    let mut g = ConfigMapGenerator::new(
        &format!("g{i}"),
        ConfigMapGeneratorSpec {
            content: content.into(),
        },
    );
    g.metadata.namespace = Some("default".into());
    g
}

fn converged(world: &World<'_>) -> Result<(), String> {
    let generators = world.list::<ConfigMapGenerator>();
    for g in &generators {
        let name = format!("{}-cm", g.metadata.name.as_deref().unwrap_or(""));
        let cm = world
            .get::<ConfigMap>(Some("default"), &name)
            .ok_or_else(|| format!("no {name}"))?;
        if cm.data.as_ref().and_then(|d| d.get("content")) != Some(&g.spec.content) {
            return Err(format!("{name} is stale"));
        }
    }
    let owned = world
        .list::<ConfigMap>()
        .into_iter()
        .filter(|c| c.metadata.owner_references.is_some())
        .count();
    if owned != generators.len() {
        return Err(format!(
            "{owned} owned ConfigMaps for {} generators",
            generators.len()
        ));
    }
    Ok(())
}

fn scenario() -> Scenario {
    let mut s = Scenario::new("bench-configmap-generator", |env: &Env| {
        let env = env.clone();
        async move {
            let args = Args::default();
            let ctx = Arc::new(Context::new(env.transport()));
            let _ = configmap_generator::controller(
                env.runtime(),
                configmap_generator::source(env.transport(), &args),
                configmap_generator::children(env.transport(), &args),
            )
            .shutdown_on_signal()
            .run(configmap_generator::reconcile, error_policy, ctx)
            .await;
        }
    })
    .crd::<ConfigMapGenerator>()
    .given((0..10).map(|i| create(&generator(i, "v0"))))
    .faults(Faults::all())
    .converges_to(converged);
    // 50 actions, 200 ms apart: edits of every generator, then deletes and re-creates.
    let mut live = [true; 10];
    for k in 0..50usize {
        let i = (k * 7) % 10;
        let at = Duration::from_millis(200 * (k as u64 + 1));
        let action = match (k % 5, live[i]) {
            (4, true) => {
                live[i] = false;
                delete::<ConfigMapGenerator>(&format!("g{i}"))
            }
            (_, false) => {
                live[i] = true;
                create(&generator(i, &format!("v{k}")))
            }
            _ => edit(&generator(i, &format!("v{k}"))),
        };
        s = s.then_at(at, action);
    }
    s
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing: run a few then.
    let benching = std::env::args().any(|a| a == "--bench");
    let seeds: u64 = std::env::var("SCENARIO_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(if benching { 10_000 } else { 20 });
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let start = Instant::now();
    let summary = scenario().explore(0..seeds);
    let took = start.elapsed();
    assert_eq!(summary.seeds, seeds, "every seed ran");
    assert!(
        summary.writes > 0 && !summary.faults.is_empty(),
        "{summary}"
    );
    println!(
        "test kit, configmap-generator, 10 generators, 50 actions, all faults (JSON over the simulated transport): {seeds} seeds in {:.1} s on {cores} cores = {:.0} seeds/s",
        took.as_secs_f64(),
        seeds as f64 / took.as_secs_f64()
    );
    println!("  {summary}");
}
