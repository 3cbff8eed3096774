//! Shared sources and streams as sources on the apiserver (issue 29): two controllers over
//! one `Reflector` send one LIST and one WATCH between them, as counted at the transport,
//! and a third that joins after the sync sees the snapshot then every later change; a
//! controller over a stream of objects reconciles each as it comes; a subscriber reads its
//! own writes through the shared cache's cursor.
//!
//! Secondaries fed by a shared cache or a stream (`watches_shared`, `owns_stream`,
//! `watches_stream`): a ConfigMap controller is woken by pods in a reflector's cache, by
//! pods it controls arriving down a stream, and by Secrets a function maps to ConfigMaps.
//! Each counts its ConfigMaps' runs and waits for exact counts, which a wake too many fails
//! at once: there is no resync, and nothing else writes the ConfigMaps.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::ConfigMap;
use reconcile_core::pod::PodView;
use reconcile_core::{KeyMap, ObjectKey};
use reconcile_engine::{
    Action, BodyStream, BoxFuture, Controller, Reconcile, Reflector, SharedSource, Source,
    Transport, TransportError, default_error_policy,
};
use reconcile_k8s_env::{ApiServer, pod_manifest};
use serde_json::{Value, json};

use super::kinds::{Live, connect};
use super::ports::unscheduled;
use crate::harness::{Case, DriverUnderTest, WAIT, eventually};

/// A transport that counts the LISTs and WATCHes sent through it.
#[derive(Clone)]
pub(crate) struct Counting<T> {
    pub(crate) inner: T,
    pub(crate) counts: Arc<Counts>,
}

/// The LISTs and WATCHes a [`Counting`] transport sent.
#[derive(Default)]
pub(crate) struct Counts {
    pub(crate) lists: AtomicUsize,
    pub(crate) watches: AtomicUsize,
}

impl<T: Transport> Transport for Counting<T> {
    fn send(
        &self,
        request: http::Request<Vec<u8>>,
    ) -> BoxFuture<Result<http::Response<BodyStream>, TransportError>> {
        let watch = crate::harness::is_watch(&request);
        if watch {
            self.counts.watches.fetch_add(1, Ordering::SeqCst);
        } else if request.method() == http::Method::GET {
            self.counts.lists.fetch_add(1, Ordering::SeqCst);
        }
        self.inner.send(request)
    }
}

/// What each parent's latest run saw.
type Seen = Arc<Mutex<BTreeMap<String, Vec<String>>>>;

async fn record(request: Reconcile<PodView, String>, seen: Seen) -> Result<Action, String> {
    let (parent, members) = request.into_parts();
    let names = members
        .iter()
        .filter_map(|p| p.metadata.name.as_deref().map(str::to_owned))
        .collect();
    seen.lock().unwrap().insert(parent, names);
    Ok(Action::await_change())
}

fn pod(name: &str, cell: &str) -> Value {
    pod_manifest(name, &[("app", "e2e"), ("cell", cell)])
}

fn create<D: DriverUnderTest>(case: &Case<D>, ns: &str, name: &str, cell: &str) {
    case.api()
        .create_pod(ns, &pod(name, cell))
        .unwrap_or_else(|e| panic!("create pod in {ns}: {e}"));
}

async fn saw<D: DriverUnderTest>(
    case: &Case<D>,
    who: &str,
    seen: &Seen,
    parent: &str,
    names: &[&str],
) {
    let what = format!("{who}: {parent} = {names:?} ({})", case.name);
    eventually(&case.runtime, WAIT, &what, || {
        let got = seen.lock().unwrap().get(parent).cloned();
        match got {
            Some(got) if got.iter().map(String::as_str).eq(names.iter().copied()) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
}

/// Two controllers over one reflector, each with its own key map (by cell, by name), and a
/// third that joins after the sync: one LIST and one WATCH in all.
pub async fn two_controllers_share_one_watch_and_a_late_one_joins<D: DriverUnderTest>(
    case: Case<D>,
) {
    let _steady = case.env.steady();
    let ns = case.namespace();
    create(&case, &ns, "a1", "a");
    create(&case, &ns, "b1", "b");
    let transport = D::connect(case.env.kubeconfig_path(ApiServer::Cached))
        .await
        .unwrap_or_else(|e| panic!("{}: cannot connect: {e}", case.name));
    let counts = Arc::new(Counts::default());
    let counting = Counting {
        inner: transport,
        counts: Arc::clone(&counts),
    };
    let source =
        Source::<PodView, Counting<D::Transport>>::pods(counting, Some(&ns)).labels("app=e2e");
    let reflector = Reflector::with_runtime(D::runtime(), source);
    let shared = reflector.shared();
    let reflecting = reflector.start().await.expect("the reflector synced");
    let cache = reflecting.cache();
    assert_eq!(cache.state().len(), 2);

    let start = |key_map: KeyMap<PodView, String>, seen: &Seen| {
        Controller::<PodView, String, D::Runtime, Counting<D::Transport>>::for_shared_with(
            D::runtime(),
            shared.clone(),
            key_map,
        )
        .start(record, default_error_policy, Arc::clone(seen))
    };
    let (cells, names): (Seen, Seen) = (Seen::default(), Seen::default());
    let by_cell = start(KeyMap::by_label("cell"), &cells)
        .await
        .expect("synced");
    let by_name = start(KeyMap::by_name(), &names).await.expect("synced");
    saw(&case, "by cell", &cells, "a", &["a1"]).await;
    saw(&case, "by name", &names, &format!("{ns}/b1"), &["b1"]).await;

    create(&case, &ns, "a2", "a");
    saw(&case, "by cell", &cells, "a", &["a1", "a2"]).await;
    saw(&case, "by name", &names, &format!("{ns}/a2"), &["a2"]).await;

    let late_seen = Seen::default();
    let late = start(KeyMap::by_label("cell"), &late_seen)
        .await
        .expect("synced");
    assert_eq!(
        late.cache().state().len(),
        3,
        "the late one got the whole snapshot"
    );
    create(&case, &ns, "b2", "b");
    saw(&case, "late", &late_seen, "b", &["b1", "b2"]).await;
    saw(&case, "by cell", &cells, "b", &["b1", "b2"]).await;
    case.api()
        .delete_pod(&ns, "a1", Some(0))
        .unwrap_or_else(|e| panic!("delete pod: {e}"));
    saw(&case, "late", &late_seen, "a", &["a2"]).await;
    saw(&case, "by cell", &cells, "a", &["a2"]).await;

    assert_eq!(
        counts.lists.load(Ordering::SeqCst),
        1,
        "one LIST for three controllers"
    );
    assert_eq!(
        counts.watches.load(Ordering::SeqCst),
        1,
        "one WATCH for three controllers"
    );
    assert_eq!(cache.share_stats().subscribers, 3);
    assert_eq!(cache.share_stats().lagged, 0);
    for running in [late, by_name, by_cell] {
        running.shutdown().await.expect("a clean stop");
    }
    reflecting.shutdown().await.expect("a clean stop");
}

/// A controller over a stream of objects (here, pods read back from the apiserver and sent
/// down a channel): each reconciles as it comes, with no LIST or WATCH.
pub async fn a_controller_over_a_stream_of_objects_reconciles_each<D: DriverUnderTest>(
    case: Case<D>,
) {
    let _steady = case.env.steady();
    let ns = case.namespace();
    let (tx, rx) = async_channel::bounded::<PodView>(8);
    let seen = Seen::default();
    let running = Controller::<PodView, String, D::Runtime, D::Transport>::for_stream_with(
        D::runtime(),
        rx,
        KeyMap::by_label("cell"),
    )
    .start(record, default_error_policy, Arc::clone(&seen))
    .await
    .expect("synced at once");
    for (name, cell) in [("s1", "a"), ("s2", "a"), ("s3", "b")] {
        create(&case, &ns, name, cell);
        let live = case
            .api()
            .get_pod(&ns, name)
            .unwrap_or_else(|e| panic!("get pod: {e}"))
            .expect("the pod just created");
        let view: PodView = serde_json::from_value(live).expect("a pod view");
        tx.send(view)
            .await
            .expect("the controller reads its stream");
    }
    saw(&case, "stream", &seen, "a", &["s1", "s2"]).await;
    saw(&case, "stream", &seen, "b", &["s3"]).await;
    assert_eq!(running.handle().stats().lists, 0, "no LIST");
    assert_eq!(running.handle().stats().watches, 0, "no WATCH");
    running.shutdown().await.expect("a clean stop");
}

/// Read your own writes on a shared cache's subscriber: a reflector of pods (its WATCH
/// gated, as in the `own_writes` case) and a subscriber whose reconcile annotates its pod
/// and asks to run again at once. The rerun is held until the shared cache's cursor, which
/// follows the feed, reaches the write; then it runs, seeing the annotation, and writes no
/// second time.
pub async fn a_subscribers_rerun_after_its_write_sees_the_write<D: DriverUnderTest>(case: Case<D>) {
    use super::own_writes::{Gate, Gated, SEEN, quiet_pod};
    use k8s_openapi::api::core::v1::Pod;
    use kube_core::params::{Patch, PatchParams};
    use reconcile_engine::ApiClient;

    let _steady = case.env.steady();
    let ns = case.namespace();
    case.api()
        .create_pod(&ns, &quiet_pod("p1", &[("app", "e2e"), ("cell", "a")]))
        .unwrap_or_else(|e| panic!("{}: create pod: {e}", case.name));
    let inner = D::connect(case.env.kubeconfig_path(ApiServer::Cached))
        .await
        .unwrap_or_else(|e| panic!("{}: cannot connect: {e}", case.name));
    let gate = Gate::default();
    let transport = Gated {
        inner,
        gate: gate.clone(),
    };
    let source = Source::<PodView, Gated<D::Transport>>::pods(transport.clone(), Some(&ns))
        .labels("app=e2e")
        .timeout(60);
    let reflecting = Reflector::with_runtime(D::runtime(), source)
        .start()
        .await
        .expect("the reflector synced");
    let shared = reconcile_engine::SharedSource::of(reflecting.cache());

    #[derive(Default)]
    struct Runs {
        seen: Mutex<Vec<Option<String>>>,
        patches: AtomicUsize,
    }
    type Ctx<T> = (Gated<T>, String, Arc<Runs>);
    let runs: Arc<Runs> = Arc::default();
    let ctx: Arc<Ctx<D::Transport>> = Arc::new((transport, ns.clone(), Arc::clone(&runs)));
    let running = Controller::<PodView, String, D::Runtime, Gated<D::Transport>>::for_shared_with(
        D::runtime(),
        shared,
        KeyMap::by_label("cell"),
    )
    .resync(None)
    .read_own_writes(Some(WAIT * 2))
    .start(
        |req: Reconcile<PodView, String>, ctx: Arc<Ctx<D::Transport>>| async move {
            let (transport, ns, runs) = (&ctx.0, &ctx.1, &ctx.2);
            let seen = req
                .members()
                .iter()
                .find(|p| p.metadata.name.as_deref() == Some("p1"))
                .and_then(|p| p.metadata.annotations.get(SEEN).map(|v| v.to_string()));
            runs.seen.lock().unwrap().push(seen.clone());
            if seen.is_some() {
                return Ok(Action::await_change());
            }
            let pods: ApiClient<Pod, Gated<D::Transport>> =
                ApiClient::namespaced(transport.clone(), ns);
            let patch = Patch::Merge(serde_json::json!({"metadata": {"annotations": {SEEN: "1"}}}));
            pods.patch("p1", &PatchParams::default(), &patch)
                .await
                .map_err(|e| e.to_string())?;
            runs.patches.fetch_add(1, Ordering::SeqCst);
            // Run again at once: before the shared cache can have the write.
            Ok::<_, String>(Action::requeue(std::time::Duration::from_millis(1)))
        },
        default_error_policy,
        ctx,
    )
    .await
    .expect("the subscriber synced");
    let handle = running.handle().clone();
    case.eventually("the subscriber has the shared cursor", || {
        handle
            .cursor()
            .map(|_| ())
            .ok_or_else(|| "no cursor".to_owned())
    })
    .await;
    case.eventually("the rerun held for the write", || {
        let s = handle.stats();
        if s.own_write_holds >= 1 {
            Ok(())
        } else {
            Err(format!("{s:?}"))
        }
    })
    .await;
    assert_eq!(
        runs.seen.lock().unwrap().as_slice(),
        [None],
        "{}: held",
        case.name
    );

    gate.open();
    case.eventually("the released rerun", || {
        let s = runs.seen.lock().unwrap().clone();
        if s.len() >= 2 {
            Ok(())
        } else {
            Err(format!("runs saw {s:?}"))
        }
    })
    .await;
    let seen = runs.seen.lock().unwrap().clone();
    assert!(
        seen[1..].iter().all(|s| s.as_deref() == Some("1")),
        "{}: every run after the write saw it: {seen:?}",
        case.name
    );
    assert_eq!(
        runs.patches.load(Ordering::SeqCst),
        1,
        "{}: one write",
        case.name
    );
    let m = handle.metrics();
    assert_eq!(
        (
            m.own_write_holds_total,
            m.own_write_timeouts_total,
            m.own_writes_waiting
        ),
        (1, 0, 0),
        "{}: released by the shared cursor, not by the wait",
        case.name
    );
    running.shutdown().await.expect("a clean stop");
    reflecting.shutdown().await.expect("a clean stop");
}

/// The label by which a pod of the `watches_shared` case names the ConfigMap it wakes.
const CONFIG: &str = "config";

/// The annotation in which a Secret of the `watches_stream` case lists, comma-separated,
/// the ConfigMaps it wakes.
const USED_BY: &str = "e2e.reconcile-loop/used-by";

/// How many times each ConfigMap, by name, has been reconciled.
type Runs = Arc<Mutex<BTreeMap<String, usize>>>;

/// The reconcile of the secondaries' cases: counts the run of its ConfigMap.
async fn count_run(request: Reconcile<ConfigMap, ObjectKey>, runs: Runs) -> Result<Action, String> {
    *runs
        .lock()
        .unwrap()
        .entry(request.parent().name().to_owned())
        .or_default() += 1;
    Ok(Action::await_change())
}

/// Creates ConfigMap `name` in `ns`; returns it as the apiserver wrote it (with its uid).
fn configmap<D: DriverUnderTest>(case: &Case<D>, ns: &str, name: &str) -> Value {
    case.api()
        .create(
            &format!("/api/v1/namespaces/{ns}/configmaps"),
            &json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": { "name": name, "labels": { "app": "e2e" } },
            }),
        )
        .unwrap_or_else(|e| panic!("{}: create configmap {name}: {e}", case.name))
}

/// A controller of the ConfigMaps of `ns`, one parent per ConfigMap, with no resync: each
/// run after the first listing's is a wake from its secondary.
async fn configmaps<D: DriverUnderTest>(
    case: &Case<D>,
    ns: &str,
) -> Controller<ConfigMap, ObjectKey, D::Runtime, D::Transport> {
    let source =
        Source::<ConfigMap, D::Transport>::namespaced(connect(case).await, ns).labels("app=e2e");
    Controller::with_runtime(D::runtime(), source, KeyMap::by_object()).resync(None)
}

/// Starts `controller` with [`count_run`], and waits for the first listing's run of each of
/// the two ConfigMaps the secondaries' cases make, `cm-a` and `cm-b`.
async fn start_counting<D: DriverUnderTest>(
    case: &Case<D>,
    controller: Controller<ConfigMap, ObjectKey, D::Runtime, D::Transport>,
    runs: &Runs,
) -> Live<ConfigMap, D::Runtime> {
    let live = Live::start(
        case,
        controller.handle(),
        controller.start(count_run, default_error_policy, Arc::clone(runs)),
    )
    .await;
    ran(case, runs, &[("cm-a", 1), ("cm-b", 1)], "the first listing").await;
    live
}

/// Waits until the ConfigMaps have run exactly as often as `want` says, each of them; fails
/// at once when one ran more often (a wake that should not have happened). `want` names
/// every ConfigMap of the case, so the ones a step must leave alone are checked too.
async fn ran<D: DriverUnderTest>(case: &Case<D>, runs: &Runs, want: &[(&str, usize)], after: &str) {
    ran_with(case, runs, want, None, after).await;
}

/// [`ran`], except that `busy` may run more often than it says: for a step that sends its
/// ConfigMap more than one event (a pod's deletion may come as a MODIFIED that sets its
/// `deletionTimestamp`, then the DELETED), whose runs may or may not coalesce.
async fn ran_with<D: DriverUnderTest>(
    case: &Case<D>,
    runs: &Runs,
    want: &[(&str, usize)],
    busy: Option<&str>,
    after: &str,
) {
    case.eventually(&format!("runs {want:?} after {after}"), || {
        let got = runs.lock().unwrap().clone();
        let count = |name: &str| got.get(name).copied().unwrap_or(0);
        for (name, want) in want {
            assert!(
                count(name) <= *want || busy == Some(*name),
                "{}: {name} ran {} times after {after}, {want} expected: {got:?}",
                case.name,
                count(name)
            );
        }
        let reached = |name: &str, want: usize| match busy == Some(name) {
            true => count(name) >= want,
            false => count(name) == want,
        };
        if want.iter().all(|(name, want)| reached(name, *want)) {
            Ok(())
        } else {
            Err(format!("{got:?}"))
        }
    })
    .await;
}

/// `watches_shared` (kube-runtime's `watches_shared_stream`): a ConfigMap controller whose
/// secondary is a reflector's cache of pods, each pod naming a ConfigMap by its `config`
/// label. A pod created wakes the ConfigMap it names, one with no such label wakes none, a
/// pod relabelled wakes both the ConfigMap it left and the one it names, and a pod deleted
/// wakes the one it named last (once or twice: the apiserver may first send the pod with its
/// `deletionTimestamp` set, a change of its own). The pods are listed once and watched once, by the
/// reflector, as counted at its transport: the secondary sends no request of its own.
pub async fn a_pod_in_a_shared_cache_wakes_the_configmap_its_label_names<D: DriverUnderTest>(
    case: Case<D>,
) {
    let _steady = case.env.steady();
    let ns = case.namespace();
    configmap(&case, &ns, "cm-a");
    configmap(&case, &ns, "cm-b");
    let counts = Arc::new(Counts::default());
    let counting = Counting {
        inner: connect(&case).await,
        counts: Arc::clone(&counts),
    };
    let pods =
        Source::<PodView, Counting<D::Transport>>::pods(counting, Some(&ns)).labels("app=e2e");
    let reflecting = Reflector::with_runtime(D::runtime(), pods)
        .start()
        .await
        .expect("the reflector synced");
    let runs = Runs::default();
    let controller = configmaps(&case, &ns).await.watches_shared(
        SharedSource::of(reflecting.cache()),
        |pod: &PodView| {
            pod.metadata
                .labels
                .get(CONFIG)
                .map(|name| vec![ObjectKey::new(pod.metadata.namespace.as_deref(), name)])
                .unwrap_or_default()
        },
    );
    let live = start_counting(&case, controller, &runs).await;

    let mut p1 = unscheduled("p1");
    p1["metadata"]["labels"][CONFIG] = json!("cm-a");
    let created = |pod: &Value| {
        case.api()
            .create_pod(&ns, pod)
            .unwrap_or_else(|e| panic!("{}: create pod: {e}", case.name));
    };
    created(&p1);
    ran(
        &case,
        &runs,
        &[("cm-a", 2), ("cm-b", 1)],
        "p1 came naming cm-a",
    )
    .await;
    created(&unscheduled("unlabelled"));
    case.api()
        .patch_pod(
            &ns,
            "p1",
            &json!({"metadata": {"labels": {CONFIG: "cm-b"}}}),
        )
        .unwrap_or_else(|e| panic!("{}: patch pod: {e}", case.name));
    ran(
        &case,
        &runs,
        &[("cm-a", 3), ("cm-b", 2)],
        "a pod naming none, then p1 moved from cm-a to cm-b",
    )
    .await;
    case.api()
        .delete_pod(&ns, "p1", Some(0))
        .unwrap_or_else(|e| panic!("{}: delete pod: {e}", case.name));
    ran_with(
        &case,
        &runs,
        &[("cm-a", 3), ("cm-b", 3)],
        Some("cm-b"),
        "p1's deletion",
    )
    .await;

    assert_eq!(
        reflecting.cache().share_stats().subscribers,
        1,
        "the secondary is the reflector's one subscriber"
    );
    live.shutdown().await;
    reflecting.shutdown().await.expect("a clean stop");
    assert_eq!(counts.lists.load(Ordering::SeqCst), 1, "one LIST of pods");
    assert_eq!(
        counts.watches.load(Ordering::SeqCst),
        1,
        "one WATCH of pods"
    );
}

/// An `ownerReferences` entry naming `owner` (an object as the apiserver wrote it).
fn owner_reference(owner: &Value, controller: bool) -> Value {
    json!({
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": controller,
    })
}

/// `owns_stream` (kube-runtime's `owns_stream`): a ConfigMap controller whose secondary is
/// a stream of pods (created on the apiserver, and sent down a channel as it returned
/// them). A pod whose controller owner is a ConfigMap wakes it; a pod with no owner, one
/// owned by a ConfigMap that is not its controller, and one controlled by a Secret of a
/// ConfigMap's name wake none (each is followed by a pod waking the other ConfigMap, so
/// the wake they must not cause has had its chance). The pods are not cached.
pub async fn a_streamed_pod_wakes_the_configmap_that_controls_it<D: DriverUnderTest>(
    case: Case<D>,
) {
    use k8s_openapi::api::core::v1::Pod;

    let _steady = case.env.steady();
    let ns = case.namespace();
    let cm_a = configmap(&case, &ns, "cm-a");
    let cm_b = configmap(&case, &ns, "cm-b");
    let secret_b = case
        .api()
        .create(
            &format!("/api/v1/namespaces/{ns}/secrets"),
            &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "cm-b"}}),
        )
        .unwrap_or_else(|e| panic!("{}: create secret: {e}", case.name));
    let (tx, rx) = async_channel::bounded::<Pod>(8);
    let runs = Runs::default();
    let controller = configmaps(&case, &ns).await.owns_stream(rx);
    let cache = controller.cache();
    let live = start_counting(&case, controller, &runs).await;

    let send = |name: &'static str, owners: Vec<Value>| {
        let mut pod = unscheduled(name);
        pod["metadata"]["ownerReferences"] = Value::Array(owners);
        let written = case
            .api()
            .create_pod(&ns, &pod)
            .unwrap_or_else(|e| panic!("{}: create pod {name}: {e}", case.name));
        let pod: Pod = serde_json::from_value(written).expect("a pod");
        let tx = tx.clone();
        async move { tx.send(pod).await.expect("the controller reads its stream") }
    };
    send("c1", vec![owner_reference(&cm_a, true)]).await;
    ran(
        &case,
        &runs,
        &[("cm-a", 2), ("cm-b", 1)],
        "c1, controlled by cm-a",
    )
    .await;
    send("orphan", vec![]).await;
    send("adopted", vec![owner_reference(&cm_b, false)]).await;
    send("secrets", vec![owner_reference(&secret_b, true)]).await;
    send("c2", vec![owner_reference(&cm_a, true)]).await;
    ran(
        &case,
        &runs,
        &[("cm-a", 3), ("cm-b", 1)],
        "pods with no owner, not controlled by cm-b, controlled by a Secret cm-b; then c2, \
         controlled by cm-a",
    )
    .await;
    send("c3", vec![owner_reference(&cm_b, true)]).await;
    ran(
        &case,
        &runs,
        &[("cm-a", 3), ("cm-b", 2)],
        "c3, controlled by cm-b",
    )
    .await;
    assert_eq!(cache.state().len(), 2, "the ConfigMaps only: no pod cached");
    live.shutdown().await;
}

/// `watches_stream` (kube-runtime's `watches_stream`): a ConfigMap controller whose
/// secondary is a stream of Secrets (created on the apiserver, and sent down a channel as
/// it returned them), mapped to ConfigMaps by a function: each Secret lists the ConfigMaps
/// that use it in an annotation. A Secret wakes each ConfigMap it lists; one that lists
/// none, or only a ConfigMap that does not exist, wakes none.
pub async fn a_streamed_secret_wakes_each_configmap_its_mapper_names<D: DriverUnderTest>(
    case: Case<D>,
) {
    use k8s_openapi::api::core::v1::Secret;

    let _steady = case.env.steady();
    let ns = case.namespace();
    configmap(&case, &ns, "cm-a");
    configmap(&case, &ns, "cm-b");
    let (tx, rx) = async_channel::bounded::<Secret>(8);
    let runs = Runs::default();
    let controller = configmaps(&case, &ns)
        .await
        .watches_stream(rx, |secret: &Secret| {
            let ns = secret.metadata.namespace.as_deref();
            secret
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(USED_BY))
                .map(|list| {
                    list.split(',')
                        .map(|name| ObjectKey::new(ns, name))
                        .collect()
                })
                .unwrap_or_default()
        });
    let live = start_counting(&case, controller, &runs).await;

    let send = |name: &'static str, used_by: Option<&str>| {
        let mut secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}});
        if let Some(list) = used_by {
            secret["metadata"]["annotations"] = json!({ USED_BY: list });
        }
        let written = case
            .api()
            .create(&format!("/api/v1/namespaces/{ns}/secrets"), &secret)
            .unwrap_or_else(|e| panic!("{}: create secret {name}: {e}", case.name));
        let secret: Secret = serde_json::from_value(written).expect("a secret");
        let tx = tx.clone();
        async move {
            tx.send(secret)
                .await
                .expect("the controller reads its stream");
        }
    };
    send("both", Some("cm-a,cm-b")).await;
    ran(
        &case,
        &runs,
        &[("cm-a", 2), ("cm-b", 2)],
        "a Secret used by both",
    )
    .await;
    send("unused", None).await;
    send("stale", Some("cm-gone")).await;
    send("b-only", Some("cm-b")).await;
    ran(
        &case,
        &runs,
        &[("cm-a", 2), ("cm-b", 3)],
        "Secrets used by none and by a ConfigMap that does not exist; then one used by cm-b",
    )
    .await;
    live.shutdown().await;
}
