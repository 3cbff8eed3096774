//! What the ready-made transforms save: the heap a `ReconcileLoop` holds for 10,000 full
//! k8s-openapi `Pod`s after their LIST is applied, with no transform, with
//! `strip_managed_fields`, and with it and `strip_last_applied`, measured with a counting
//! allocator (as `amplification.rs` measures a LIST). The pods are the 8 real ones of a
//! kube-apiserver 1.36 (`testdata/real/k8s-openapi/v1-36_pod-list.body.json`, 7.5-10.6 KB of
//! JSON each, 3.0-4.3 KB of it `managedFields`), cycled under unique names, each given the
//! `kubectl.kubernetes.io/last-applied-configuration` that `kubectl apply` of its manifest
//! would write (its name, namespace, labels and spec, as JSON). One test function, so that no
//! other test's allocations run in parallel with the counts.
//!
//! Run with `--nocapture` for the figures; `docs/benchmarks.md` ("Transforms") quotes them.

use k8s_openapi::api::core::v1::Pod;
use reconcile_core::transform::{
    LAST_APPLIED_ANNOTATION, strip_last_applied, strip_managed_fields,
};
use reconcile_core::{
    Command, Config, Input, Instant, KeyMap, ListResponse, ObjectKey, Output, ReconcileLoop,
    Transform, WatchParams,
};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<std::alloc::System> = &INSTRUMENTED_SYSTEM;

const PODS: usize = 10_000;

/// The LIST body: `PODS` pods, each real, renamed, with a last-applied annotation.
fn body() -> Vec<u8> {
    let path = format!(
        "{}/../testdata/real/k8s-openapi/v1-36_pod-list.body.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let list: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).expect("the real pod list")).expect("json");
    let real = list["items"].as_array().expect("items").clone();
    let items: Vec<serde_json::Value> = (0..PODS)
        .map(|n| {
            let mut pod = real[n % real.len()].clone();
            let name = format!("pod-{n:05}");
            pod["metadata"]["name"] = name.clone().into();
            let applied = serde_json::json!({
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": name,
                    "namespace": pod["metadata"]["namespace"],
                    "labels": pod["metadata"]["labels"],
                },
                "spec": pod["spec"],
            });
            let annotations = pod["metadata"]
                .as_object_mut()
                .expect("metadata")
                .entry("annotations")
                .or_insert_with(|| serde_json::json!({}));
            annotations[LAST_APPLIED_ANNOTATION] = applied.to_string().into();
            pod
        })
        .collect();
    serde_json::to_vec(&serde_json::json!({
        "kind": "PodList",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": "100"},
        "items": items,
    }))
    .expect("a body")
}

fn net(region: &Region<'_, std::alloc::System>) -> i64 {
    let c = region.change();
    c.bytes_allocated as i64 - c.bytes_deallocated as i64
}

/// The heap the loop holds once the listing of `body` is applied: the loop built, started,
/// fed the LIST and drained, measured from before it was built, with the body dropped.
fn held(body: &[u8], transform: Option<Transform<Pod>>) -> (i64, usize) {
    let body = bytes::Bytes::copy_from_slice(body);
    let region = Region::new(GLOBAL);
    let mut config = Config::kubernetes(
        WatchParams::default(),
        KeyMap::<Pod, ObjectKey>::by_object(),
    )
    .resync(None);
    if let Some(t) = transform {
        config = config.transform(t);
    }
    let mut core = ReconcileLoop::new(config, Instant::ZERO).expect("a config");
    core.handle_input(Instant::ZERO, Input::Start);
    let mut req = None;
    loop {
        match core.poll_output() {
            Output::Command(Command::List { req: r, .. }) => req = Some(r),
            Output::Timeout(_) => break,
            _ => {}
        }
    }
    core.handle_input(
        Instant::ZERO,
        Input::List {
            req: req.expect("a LIST"),
            response: ListResponse::Response { status: 200, body },
        },
    );
    // The reconciles dispatched hold member snapshots; drop each output as it comes.
    while !matches!(core.poll_output(), Output::Timeout(_)) {}
    let cached = core.store().len();
    let held = net(&region);
    drop(core);
    (held, cached)
}

#[test]
fn the_ready_made_transforms_shrink_the_cache_of_full_pods() {
    let body = body();
    let (plain, n) = held(&body, None);
    let (no_mf, n1) = held(&body, Some(Transform::new(strip_managed_fields)));
    let (both, n2) = held(
        &body,
        Some(Transform::new(strip_managed_fields).then(Transform::new(strip_last_applied))),
    );
    assert_eq!((n, n1, n2), (PODS, PODS, PODS));
    let per = |b: i64| b / PODS as i64;
    let saved = |b: i64| 100.0 * (plain - b) as f64 / plain as f64;
    eprintln!(
        "LIST body {} B ({} B per pod); held per pod: {} B plain, {} B without managedFields \
         ({:.0}% saved), {} B without managedFields and last-applied ({:.0}% saved)",
        body.len(),
        body.len() / PODS,
        per(plain),
        per(no_mf),
        saved(no_mf),
        per(both),
        saved(both),
    );
    // Each strip frees what it names: managedFields are 3-4 KB of JSON per pod, many small
    // strings once decoded; the annotation is one string of about 2 KB.
    assert!(saved(no_mf) > 25.0, "{plain} -> {no_mf}");
    assert!(both < no_mf - (PODS as i64) * 1000, "{no_mf} -> {both}");
}
