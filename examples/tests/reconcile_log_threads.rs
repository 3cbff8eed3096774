//! A simulation's reconcile lines survive another thread of the same process reaching the
//! engine's `reconcile` span first, with no subscriber of its own. `tracing` caches each
//! callsite's interest process-wide, computed when the callsite is first hit; with one
//! subscriber alive it asks only the hitting thread's, so a bare thread would switch the
//! span off for every simulation in the process and their logs would lose their
//! `reconcile` lines: a seed's log would depend on what else the test binary ran. Alone in
//! its binary so that the bare thread really is the first to hit the span.

use std::sync::{Arc, Barrier};
use std::time::Duration;

use kube::CustomResourceExt;
use kube::core::params::PostParams;
use reconcile_engine::ApiClient;
use reconcile_examples::Args;
use reconcile_examples::configmap_generator::{
    self, ConfigMapGenerator, ConfigMapGeneratorSpec, Context,
};
use reconcile_sim::runtime::{SimConfig, Simulation};

/// Runs the generator's controller over one generator in a simulation, and returns its log.
/// `before` runs inside the simulation, with its subscriber (if any) installed, first.
fn run(log_reconciles: bool, before: impl FnOnce() + Send + 'static) -> String {
    let sim = Simulation::new(SimConfig {
        log_reconciles,
        ..SimConfig::seed(1)
    });
    let crd = serde_json::to_value(ConfigMapGenerator::crd()).expect("a CRD serializes");
    sim.cluster(|cluster, _| cluster.register_crd(&crd))
        .expect("the CRD registers");
    let (runtime, transport) = (sim.runtime(), sim.transport());
    sim.block_on(async move {
        before();
        let args = Args::default();
        let controller = configmap_generator::controller(
            runtime.clone(),
            configmap_generator::source(transport.clone(), &args),
            configmap_generator::children(transport.clone(), &args),
        );
        let ctx = Arc::new(Context::new(transport.clone()));
        let running = configmap_generator::start(controller, ctx)
            .await
            .expect("the controller syncs");
        let generators =
            ApiClient::<ConfigMapGenerator, reconcile_sim::runtime::SimTransport>::namespaced(
                transport, "default",
            );
        let spec = ConfigMapGeneratorSpec {
            content: "x=1".into(),
        };
        generators
            .create(&PostParams::default(), &ConfigMapGenerator::new("a", spec))
            .await
            .expect("created");
        runtime.sleep(Duration::from_secs(2)).await;
        running.shutdown().await.expect("a clean stop");
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", sim.log_text()));
    sim.log_text()
}

#[test]
fn a_bare_thread_reaching_the_reconcile_span_first_leaves_the_log_whole() {
    // The logging simulation waits, its subscriber installed, while a bare simulation on
    // another thread runs a reconcile: the span is first hit there.
    let installed = Arc::new(Barrier::new(2));
    let bare_done = Arc::new(Barrier::new(2));
    let (i, d) = (Arc::clone(&installed), Arc::clone(&bare_done));
    let logging = std::thread::spawn(move || {
        run(true, move || {
            i.wait();
            d.wait();
        })
    });
    installed.wait();
    let bare = std::thread::spawn(|| run(false, || {}))
        .join()
        .expect("the bare run");
    assert!(!bare.contains("reconcile default/a"), "{bare}");
    bare_done.wait();
    let log = logging.join().expect("the logging run");
    assert!(
        log.lines().any(|l| l.ends_with("reconcile default/a")),
        "the reconcile line is missing:\n{log}"
    );
}
