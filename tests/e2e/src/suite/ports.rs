//! The ports of kube-rs's examples (issue 29) on the apiserver, each started as its
//! example's `main` starts it (the same `source`, `controller`, `reconcile` and error
//! policy of `reconcile-examples`), with the case checking what it leaves behind: the
//! reflectors' caches, the secret syncer's Secret and finalizer, the configmap generator's
//! reload, and one watch of pods shared by two controllers.
//!
//! No traces, as in [`super::kinds`]: these controllers cache other kinds than `PodView`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube_core::ResourceExt;
use reconcile_core::ObjectKey;
use reconcile_engine::runtime::timeout;
use reconcile_engine::{Runtime, Task};
use reconcile_examples::configmap_generator::{self, ConfigMapGenerator};
use reconcile_examples::{
    Args, Effect, Observations, crd_reflector, periodically, pod_reflector, secret_syncer,
    shared_stream_controllers,
};
use reconcile_k8s_env::pod_manifest;
use serde_json::{Value, json};

use super::kinds::{Live, connect, create, delete, deployment, key, merge_patch, settled};
use super::shared::{Counting, Counts};
use crate::harness::{Case, DriverUnderTest, WAIT};

/// A pod the case makes: no node, so it stays `Pending` and nothing but the case writes it.
pub(crate) fn unscheduled(name: &str) -> Value {
    let mut pod = pod_manifest(name, &[("app", "e2e")]);
    if let Some(spec) = pod["spec"].as_object_mut() {
        spec.remove("nodeName");
    }
    pod
}

/// Waits until the latest reconcile of `key` in `seen` did `effect`.
async fn saw<D: DriverUnderTest>(
    case: &Case<D>,
    seen: &Observations,
    key: &ObjectKey,
    effect: Effect,
) {
    case.eventually(&format!("{key}: {effect:?}"), || match seen.latest(key) {
        Some(latest) if latest == effect => Ok(()),
        other => Err(format!("latest {other:?}")),
    })
    .await;
}

/// `pod-reflector`: the pods of the namespace are cached with no managed fields, no
/// annotations and no status, each one that comes in is seen (kube-runtime's `saw`), a new
/// pod and a deletion reach the cache, and the periodic look at the cache (the example's
/// count every five seconds, here every 50 ms) reads the whole of it on the case's runtime.
pub async fn a_pod_reflector_caches_slim_pods_and_sees_each<D: DriverUnderTest>(case: Case<D>) {
    let _steady = case.env.steady();
    let ns = case.namespace();
    for name in ["p1", "p2"] {
        let mut pod = unscheduled(name);
        pod["metadata"]["annotations"] = json!({"note": "not cached"});
        case.api()
            .create_pod(&ns, &pod)
            .unwrap_or_else(|e| panic!("create pod: {e}"));
    }
    let transport = connect(&case).await;
    let seen = Arc::new(Observations::default());
    let controller = pod_reflector::controller(
        case.runtime.clone(),
        pod_reflector::source(transport, &Args::namespace(&ns)),
    );
    let cache = controller.cache();
    let live = Live::start(
        &case,
        controller.handle(),
        pod_reflector::start(controller, Arc::clone(&seen)),
    )
    .await;
    let names = |pods: &[Arc<Pod>]| pods.iter().map(|p| p.name_any()).collect::<Vec<_>>();
    assert_eq!(names(&cache.state()), ["p1", "p2"]);
    for pod in cache.state() {
        assert!(pod.status.is_none(), "status cached: {pod:?}");
        assert!(pod.annotations().is_empty(), "annotations cached: {pod:?}");
        assert!(pod.managed_fields().is_empty(), "managed fields cached");
        assert!(pod.spec.is_some(), "the spec is kept");
    }
    for name in ["p1", "p2"] {
        saw(&case, &seen, &key(&ns, name), Effect::Observed(name.into())).await;
    }
    let looked = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&looked);
    let (runtime, reader) = (case.runtime.clone(), cache.clone());
    let looking = case.runtime.spawn(Box::pin(async move {
        periodically(&runtime, &reader, Duration::from_millis(50), |pods| {
            counter.store(pods.len(), Ordering::SeqCst);
        })
        .await;
    }));

    case.api()
        .create_pod(&ns, &unscheduled("p3"))
        .unwrap_or_else(|e| panic!("create pod: {e}"));
    saw(&case, &seen, &key(&ns, "p3"), Effect::Observed("p3".into())).await;
    case.eventually("the periodic look counts three pods", || {
        match looked.load(Ordering::SeqCst) {
            3 => Ok(()),
            n => Err(format!("{n}")),
        }
    })
    .await;
    case.api()
        .delete_pod(&ns, "p1", Some(0))
        .unwrap_or_else(|e| panic!("delete pod: {e}"));
    saw(&case, &seen, &key(&ns, "p1"), Effect::Deleted).await;
    assert_eq!(names(&cache.state()), ["p2", "p3"]);
    case.eventually("the periodic look counts two pods", || {
        match looked.load(Ordering::SeqCst) {
            2 => Ok(()),
            n => Err(format!("{n}")),
        }
    })
    .await;
    looking.abort();
    live.shutdown().await;
}

/// `crd-reflector`: the `Foo` CRD is installed (and `Established`) by the example's
/// `install_crd`, then the `Foo`s of the namespace are cached: those made before the start,
/// one made after, an edit, and a deletion.
pub async fn a_crd_reflector_caches_the_foos_of_its_namespace<D: DriverUnderTest>(case: Case<D>) {
    let _steady = case.env.steady();
    let ns = case.namespace();
    let transport = connect(&case).await;
    crd_reflector::install_crd(&case.runtime, transport.clone(), WAIT)
        .await
        .unwrap_or_else(|e| panic!("{}: {e}", case.name));
    let foos = format!("/apis/example.reconcile-loop.dev/v1/namespaces/{ns}/foos");
    let new_foo = |name: &str, info: &str| {
        json!({
            "apiVersion": "example.reconcile-loop.dev/v1",
            "kind": "Foo",
            "metadata": { "name": name },
            "spec": { "name": name, "info": info },
        })
    };
    create(&case, &foos, &new_foo("baz", "old baz"));
    let seen = Arc::new(Observations::default());
    let controller = crd_reflector::controller(
        case.runtime.clone(),
        crd_reflector::source(transport, &Args::namespace(&ns)),
    );
    let cache = controller.cache();
    let live = Live::start(
        &case,
        controller.handle(),
        crd_reflector::start(controller, Arc::clone(&seen)),
    )
    .await;
    let infos = || {
        cache
            .state()
            .iter()
            .map(|f| format!("{}={}", f.name_any(), f.spec.info))
            .collect::<Vec<_>>()
    };
    assert_eq!(infos(), ["baz=old baz"]);
    saw(
        &case,
        &seen,
        &key(&ns, "baz"),
        Effect::Observed("old baz".into()),
    )
    .await;

    create(&case, &foos, &new_foo("qux", "new qux"));
    saw(
        &case,
        &seen,
        &key(&ns, "qux"),
        Effect::Observed("new qux".into()),
    )
    .await;
    merge_patch(
        &case,
        &format!("{foos}/baz"),
        &json!({"spec": {"info": "edited"}}),
    );
    saw(
        &case,
        &seen,
        &key(&ns, "baz"),
        Effect::Observed("edited".into()),
    )
    .await;
    assert_eq!(infos(), ["baz=edited", "qux=new qux"]);
    delete(&case, &format!("{foos}/qux"));
    saw(&case, &seen, &key(&ns, "qux"), Effect::Deleted).await;
    assert_eq!(infos(), ["baz=edited"]);
    live.shutdown().await;
}

/// `secret-syncer`: a ConfigMap labelled for syncing gets the finalizer and its Secret
/// `cmsyncer-<name>` (its `data` as the Secret's, its `binaryData` too); an edit reaches the
/// Secret; an unlabelled ConfigMap is left alone; deleting the ConfigMap runs the cleanup,
/// which deletes the Secret, and only then does the ConfigMap go.
pub async fn a_secret_syncer_copies_a_configmap_and_cleans_up_behind_its_finalizer<
    D: DriverUnderTest,
>(
    case: Case<D>,
) {
    let _steady = case.env.steady();
    let ns = case.namespace();
    let transport = connect(&case).await;
    let ctx = Arc::new(secret_syncer::Context::new(transport.clone()));
    let seen = ctx.observations().clone();
    let controller = secret_syncer::controller(
        case.runtime.clone(),
        secret_syncer::source(transport, &Args::namespace(&ns)),
    );
    let live = Live::start(
        &case,
        controller.handle(),
        secret_syncer::start(controller, ctx),
    )
    .await;

    let configmaps = format!("/api/v1/namespaces/{ns}/configmaps");
    let configmap = format!("{configmaps}/settings");
    let secret = format!("/api/v1/namespaces/{ns}/secrets/cmsyncer-settings");
    let (label, value) = secret_syncer::SYNC_LABEL
        .split_once('=')
        .expect("a label=value selector");
    create(
        &case,
        &configmaps,
        &json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": { "name": "settings", "labels": { label: value } },
            "data": { "mode": "fast" },
            "binaryData": { "blob": "AAEC" },
        }),
    );
    create(
        &case,
        &configmaps,
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "bystander"}}),
    );
    let api = case.api();
    wait_secret(&case, &secret, "fast").await;
    let finalizers = api.get(&configmap).expect("the ConfigMap")["metadata"]["finalizers"].clone();
    assert_eq!(finalizers, json!([secret_syncer::FINALIZER]));

    merge_patch(&case, &configmap, &json!({"data": {"mode": "slow"}}));
    wait_secret(&case, &secret, "slow").await;
    let bystander = api
        .get(&format!("{configmaps}/bystander"))
        .expect("the bystander");
    assert_eq!(bystander["metadata"]["finalizers"], Value::Null);
    assert!(
        api.get_opt(&format!(
            "/api/v1/namespaces/{ns}/secrets/cmsyncer-bystander"
        ))
        .expect("a read")
        .is_none(),
        "an unlabelled ConfigMap is not copied"
    );

    delete(&case, &configmap);
    case.eventually("the ConfigMap and its Secret gone", || {
        let cm = api.get_opt(&configmap).map_err(|e| e.to_string())?;
        let s = api.get_opt(&secret).map_err(|e| e.to_string())?;
        match (cm, s) {
            (None, None) => Ok(()),
            (cm, s) => Err(format!(
                "ConfigMap present {}, Secret present {}",
                cm.is_some(),
                s.is_some()
            )),
        }
    })
    .await;
    let settings = key(&ns, "settings");
    saw(&case, &seen, &settings, Effect::Deleted).await;
    let effects = seen.of(&settings);
    let cleaned = effects
        .iter()
        .position(|e| *e == Effect::Observed("deleted cmsyncer-settings".into()));
    assert!(
        cleaned.is_some_and(|at| at + 1 < effects.len()),
        "the cleanup ran before the ConfigMap went: {effects:?}"
    );
    live.shutdown().await;
}

/// Waits until the Secret at `path` holds `mode` (and the blob) as its data.
async fn wait_secret<D: DriverUnderTest>(case: &Case<D>, path: &str, mode: &str) {
    let api = case.api();
    case.eventually(&format!("{path} with mode {mode:?}"), || {
        let Some(got) = api.get_opt(path).map_err(|e| e.to_string())? else {
            return Err("no Secret".into());
        };
        // The blob is copied as it is; the mode goes in as `stringData` and shows as base64.
        let want = json!({ "mode": b64(mode), "blob": "AAEC" });
        if got["data"] == want {
            Ok(())
        } else {
            Err(format!("data {}", got["data"]))
        }
    })
    .await;
}

/// Base64 of `text` (standard alphabet, padded), as the apiserver shows a Secret's data.
fn b64(text: &str) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in text.as_bytes().chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// `configmap-generator`'s reload (the original's "press enter"): each trigger on the
/// controller's `reconcile_all_on` stream reconciles every generator once more, and each
/// such run finds its ConfigMap in step and writes nothing. (That the generator's ConfigMap
/// is made, owned and recreated is `kinds::an_operator_owning_configmaps_keeps_them_in_step`.)
pub async fn a_configmap_generator_reconciles_every_generator_on_a_reload<D: DriverUnderTest>(
    case: Case<D>,
) {
    let _steady = case.env.steady();
    let ns = case.namespace();
    let transport = connect(&case).await;
    configmap_generator::install_crd(&case.runtime, transport.clone(), WAIT)
        .await
        .unwrap_or_else(|e| panic!("{}: {e}", case.name));
    let ctx = Arc::new(configmap_generator::Context::new(transport.clone()));
    let seen = ctx.observations().clone();
    let args = Args::namespace(&ns);
    let (reload, reloads) = async_channel::bounded::<()>(1);
    let controller = configmap_generator::controller(
        case.runtime.clone(),
        configmap_generator::source(transport.clone(), &args),
        configmap_generator::children(transport, &args),
    )
    .reconcile_all_on(reloads);
    let live: Live<ConfigMapGenerator, D::Runtime> = Live::start(
        &case,
        controller.handle(),
        configmap_generator::start(controller, ctx),
    )
    .await;
    let generators =
        format!("/apis/example.reconcile-loop.dev/v1/namespaces/{ns}/configmapgenerators");
    let mut runs = Vec::new();
    for name in ["one", "two"] {
        create(
            &case,
            &generators,
            &json!({
                "apiVersion": "example.reconcile-loop.dev/v1",
                "kind": "ConfigMapGenerator",
                "metadata": { "name": name },
                "spec": { "content": name },
            }),
        );
        runs.push(settled(&case, &seen, &key(&ns, name), name, 0).await);
    }
    for round in 1..=2 {
        reload
            .send(())
            .await
            .expect("the controller reads its trigger");
        for (name, before) in ["one", "two"].iter().zip(&runs) {
            let generator = key(&ns, name);
            case.eventually(
                &format!("{generator} run once per reload ({round})"),
                || match seen.count(&generator) - before {
                    n if n == round => Ok(()),
                    n => Err(format!(
                        "{n} runs since it settled: {:?}",
                        seen.of(&generator)
                    )),
                },
            )
            .await;
            assert_eq!(
                seen.latest(&generator),
                Some(Effect::Unchanged((*name).into()))
            );
        }
    }
    live.shutdown().await;
}

/// Waits until `key` has run at least `runs` times in all, woken by `what`.
async fn woken<D: DriverUnderTest>(
    case: &Case<D>,
    seen: &Observations,
    key: &ObjectKey,
    runs: usize,
    what: &str,
) {
    case.eventually(&format!("{key} woken by {what}"), || {
        match seen.count(key) {
            n if n >= runs => Ok(()),
            n => Err(format!("{n} runs, {runs} wanted: {:?}", seen.of(key))),
        }
    })
    .await;
}

/// `shared-stream-controllers`: one reflector of pods, a pod controller on it and a
/// Deployment controller that owns its pods through it. Each pod is reconciled by the pod
/// controller; a pod whose owner reference names the Deployment wakes it when it comes and
/// when it goes; and the pods were listed once and watched once for both controllers.
pub async fn two_controllers_act_on_one_shared_pod_watch<D: DriverUnderTest>(case: Case<D>) {
    let _steady = case.env.steady();
    let ns = case.namespace();
    let transport = connect(&case).await;
    let web = create(
        &case,
        &format!("/apis/apps/v1/namespaces/{ns}/deployments"),
        &deployment("web", 0),
    );
    case.api()
        .create_pod(&ns, &unscheduled("early"))
        .unwrap_or_else(|e| panic!("create pod: {e}"));
    let counts = Arc::new(Counts::default());
    // Only the pods' requests are counted.
    let counting = Counting {
        inner: transport.clone(),
        counts: Arc::clone(&counts),
    };
    let args = Args::namespace(&ns);
    let seen = Arc::new(Observations::default());
    let started = timeout(
        &case.runtime,
        WAIT,
        shared_stream_controllers::start(
            case.runtime.clone(),
            shared_stream_controllers::pods(counting, &args),
            shared_stream_controllers::deployments(
                Counting {
                    inner: transport,
                    counts: Arc::default(),
                },
                &args,
            ),
            Arc::clone(&seen),
        ),
    )
    .await
    .unwrap_or_else(|| panic!("{}: no sync within {}s", case.name, WAIT.as_secs()))
    .unwrap_or_else(|e| panic!("{}: {e}", case.name));
    let pod = Effect::Observed("Pod".into());
    let deploy = Effect::Observed("Deployment".into());
    let web_key = key(&ns, "web");
    saw(&case, &seen, &key(&ns, "early"), pod.clone()).await;
    saw(&case, &seen, &web_key, deploy.clone()).await;
    let web_runs = seen.count(&web_key);

    let mut owned = unscheduled("owned");
    owned["metadata"]["ownerReferences"] = json!([{
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "web",
        "uid": web["metadata"]["uid"],
        "controller": true,
    }]);
    case.api()
        .create_pod(&ns, &owned)
        .unwrap_or_else(|e| panic!("create pod: {e}"));
    saw(&case, &seen, &key(&ns, "owned"), pod.clone()).await;
    woken(&case, &seen, &web_key, web_runs + 1, "the pod it owns").await;
    assert_eq!(seen.latest(&web_key), Some(deploy.clone()));
    let after_create = seen.count(&web_key);
    case.api()
        .delete_pod(&ns, "owned", Some(0))
        .unwrap_or_else(|e| panic!("delete pod: {e}"));
    saw(&case, &seen, &key(&ns, "owned"), Effect::Deleted).await;
    woken(
        &case,
        &seen,
        &web_key,
        after_create + 1,
        "the pod's deletion",
    )
    .await;

    assert_eq!(
        started.reflector.cache().share_stats().subscribers,
        2,
        "the pod controller and the Deployment controller's owner feed"
    );
    started
        .shutdown()
        .await
        .unwrap_or_else(|e| panic!("{}: {e}", case.name));
    assert_eq!(
        counts.lists.load(Ordering::SeqCst),
        1,
        "one LIST of pods for both"
    );
    assert_eq!(
        counts.watches.load(Ordering::SeqCst),
        1,
        "one WATCH of pods for both"
    );
}
