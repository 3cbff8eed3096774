//! Controllers of other kinds than pods, on the apiserver: the bodies of
//! `reconcile-examples` (Deployments, a custom resource's status, ConfigMaps as
//! `DynamicObject`s, Secrets metadata-only, an operator owning ConfigMaps), each started
//! exactly as its example's `main` starts it (the same `source`, `controller`, `reconcile`
//! and error policy), with the case reading the `Observations` its reconciles leave and the
//! objects on the apiserver.
//!
//! What these cases prove is that a reconcile which writes back settles: its own write
//! wakes the object once more, that run finds nothing to change, and nothing runs again.
//! "Nothing runs again" is checked against a marker, not a sleep: once a marker object
//! created afterwards has been reconciled and settled (its create and its own write-back
//! came through the same watch, after anything still pending for the others), the other
//! objects' run counts and resourceVersions must not have moved.
//!
//! The operator case also owns a second kind, so a change to a child must wake its owner;
//! it forces a 410 on the children's watch by compacting etcd (so it holds the
//! environment's `disrupt` guard, and talks to the watch-cache-off apiserver), and relies
//! on kube-controller-manager's garbage collector, which the environment runs, for the
//! deletion of a child after its owner.
//!
//! No traces: the harness records a trace of every `PodView` controller and replays it in
//! `reconcile-sim`, whose replay caches `PodView`s only. These controllers cache other
//! kinds, so they record no trace (multi-kind traces are a later issue); the metadata-only
//! case keeps an in-memory [`Tape`] instead, to read the bytes that came off the wire.

use std::fmt::Display;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use reconcile_core::frame::{WatchEvent, parse_frame_as};
use reconcile_core::list::parse_list;
use reconcile_core::{Input, ListResponse, ObjectKey, SourceId, WireFormat};
use reconcile_engine::runtime::timeout;
use reconcile_engine::{ApiClient, Handle, Running, Runtime, Tape};
use reconcile_examples::configmap_generator::{self, ConfigMapGenerator};
use reconcile_examples::crd_status::{self, Shop};
use reconcile_examples::secret_metadata::{self, SecretMeta};
use reconcile_examples::{Args, Effect, Observations, deployment_annotate, dynamic_configmaps};
use reconcile_k8s_env::ApiServer;
use reconcile_trace::Recorded;
use serde_json::{Value, json};

use crate::harness::{Case, DriverUnderTest, WAIT, eventually};
use crate::tap::TapeExt;

/// Runs allowed for one change of an object: the run that writes, and the run its own
/// write wakes. One more is tolerated for a change that lands while a run is in flight
/// (the key is then run again once it finishes).
const RUNS_PER_CHANGE: usize = 3;

/// A transport to the watch-cache-on apiserver, as the examples' mains build one.
pub(crate) async fn connect<D: DriverUnderTest>(case: &Case<D>) -> D::Transport {
    D::connect(case.env.kubeconfig_path(ApiServer::Cached))
        .await
        .unwrap_or_else(|e| panic!("{}: cannot connect: {e}", case.name))
}

/// A controller started by an example's `start`, stopped when the case ends (or unwinds).
pub(crate) struct Live<O, R: Runtime> {
    name: &'static str,
    runtime: R,
    running: Option<Running<O, ObjectKey, R>>,
    handle: Handle<O, ObjectKey>,
}

impl<O, R: Runtime> Live<O, R> {
    /// Awaits `start` (an example's `start`, which returns once the first listing is in
    /// the cache) for at most [`WAIT`]; `handle` is the controller's, taken before.
    pub(crate) async fn start<D, E>(
        case: &Case<D>,
        handle: Handle<O, ObjectKey>,
        start: impl Future<Output = Result<Running<O, ObjectKey, R>, E>>,
    ) -> Self
    where
        D: DriverUnderTest<Runtime = R>,
        E: Display,
    {
        let running = match timeout(&case.runtime, WAIT, start).await {
            Some(Ok(running)) => running,
            Some(Err(e)) => panic!("{}: the controller did not start: {e}", case.name),
            None => {
                handle.stop();
                panic!(
                    "{}: no sync within {}s (stats {:?})",
                    case.name,
                    WAIT.as_secs(),
                    handle.stats()
                )
            }
        };
        Live {
            name: case.name,
            runtime: case.runtime.clone(),
            running: Some(running),
            handle,
        }
    }

    /// Stops the controller and waits for its end, which must be clean.
    pub(crate) async fn shutdown(mut self) {
        let Some(running) = self.running.take() else {
            return;
        };
        let result = timeout(&self.runtime, WAIT, running.shutdown())
            .await
            .unwrap_or_else(|| {
                panic!(
                    "{}: the controller did not stop within {}s",
                    self.name,
                    WAIT.as_secs()
                )
            });
        if let Err(e) = result {
            panic!("{}: the controller ended with {e}", self.name);
        }
    }
}

impl<O, R: Runtime> Drop for Live<O, R> {
    fn drop(&mut self) {
        // A failed case unwinds here without `shutdown`: stop the controller anyway, so it
        // does not watch on in the background of the next case.
        if self.running.is_some() {
            self.handle.stop();
        }
    }
}

/// The key of `name` in `ns`.
pub(crate) fn key(ns: &str, name: &str) -> ObjectKey {
    ObjectKey::new(Some(ns), name)
}

/// `POST path` through the environment's client.
pub(crate) fn create<D: DriverUnderTest>(case: &Case<D>, path: &str, object: &Value) -> Value {
    case.api()
        .create(path, object)
        .unwrap_or_else(|e| panic!("{}: create in {path}: {e}", case.name))
}

/// A JSON merge patch of `path` through the environment's client.
pub(crate) fn merge_patch<D: DriverUnderTest>(case: &Case<D>, path: &str, patch: &Value) {
    case.api()
        .merge_patch(path, patch)
        .unwrap_or_else(|e| panic!("{}: patch {path}: {e}", case.name));
}

/// `DELETE path` through the environment's client.
pub(crate) fn delete<D: DriverUnderTest>(case: &Case<D>, path: &str) {
    case.api()
        .delete(path, None)
        .unwrap_or_else(|e| panic!("{}: delete {path}: {e}", case.name));
}

/// `metadata.resourceVersion` of the object at `path`.
fn resource_version<D: DriverUnderTest>(case: &Case<D>, path: &str) -> String {
    let object = case
        .api()
        .get(path)
        .unwrap_or_else(|e| panic!("{}: get {path}: {e}", case.name));
    object["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Waits until annotation `name` of the object at `path` is `want` on the apiserver.
async fn wait_annotation<D: DriverUnderTest>(case: &Case<D>, path: &str, name: &str, want: &str) {
    let api = case.api();
    case.eventually(&format!("{path} annotated {name}={want:?}"), || {
        let object = api.get(path).map_err(|e| e.to_string())?;
        match object["metadata"]["annotations"][name].as_str() {
            Some(value) if value == want => Ok(()),
            other => Err(format!("annotation {other:?}")),
        }
    })
    .await;
}

/// Waits until the latest run of `key` found `value` already written (so it wrote
/// nothing), one change after `since` runs (so at least one run after `since`), and returns
/// how many runs `key` has had. Fails
/// at once when the change took more than [`RUNS_PER_CHANGE`] runs without settling: a
/// reconcile that keeps waking itself.
pub(crate) async fn settled<D: DriverUnderTest>(
    case: &Case<D>,
    seen: &Observations,
    key: &ObjectKey,
    value: &str,
    since: usize,
) -> usize {
    let runs = case
        .eventually(&format!("{key} to settle at {value:?}"), || {
            let runs = seen.count(key);
            // At least one run after the change: the latest effect may still be the one
            // that settled the previous change (an apply the apiserver shows before the
            // reconcile that sent it has recorded its effect).
            if runs > since
                && let Some(Effect::Unchanged(v)) = seen.latest(key)
                && v == value
            {
                return Ok(runs);
            }
            let effects = seen.of(key);
            let last = &effects[effects.len().saturating_sub(6)..];
            assert!(
                runs - since <= RUNS_PER_CHANGE,
                "{key}: {} runs since the change and still not settled at {value:?} (at most \
                 {RUNS_PER_CHANGE} expected); its last runs: {last:?}",
                runs - since
            );
            Err(format!("its last runs: {last:?}"))
        })
        .await;
    assert!(
        runs - since <= RUNS_PER_CHANGE,
        "{key}: {} runs for one change (at most {RUNS_PER_CHANGE} expected): {:?}",
        runs - since,
        seen.of(key)
    );
    runs
}

/// An object as of its settling: how many runs it had, and its resourceVersion.
struct Quiet {
    key: ObjectKey,
    runs: usize,
    path: String,
    resource_version: String,
}

impl Quiet {
    /// `key` (at `path` on the apiserver) has settled after `runs` runs.
    fn after<D: DriverUnderTest>(
        case: &Case<D>,
        key: &ObjectKey,
        runs: usize,
        path: String,
    ) -> Self {
        Quiet {
            key: key.clone(),
            runs,
            resource_version: resource_version(case, &path),
            path,
        }
    }
}

/// The settle proof (see the module docs): once `marker` has settled at `marker_value`,
/// none of the `quiet` objects may have run again or been written.
async fn assert_quiet<D: DriverUnderTest>(
    case: &Case<D>,
    seen: &Observations,
    quiet: &[Quiet],
    marker: &ObjectKey,
    marker_value: &str,
) {
    settled(case, seen, marker, marker_value, 0).await;
    for q in quiet {
        assert_eq!(
            seen.count(&q.key),
            q.runs,
            "{} ran again after it had settled (a reconcile that keeps waking itself): {:?}",
            q.key,
            seen.of(&q.key)
        );
        assert_eq!(
            resource_version(case, &q.path),
            q.resource_version,
            "{} was written again after it had settled",
            q.key
        );
    }
}

/// A Deployment of `replicas` whose pods nothing will run (no deployment controller runs
/// in the environment, so nobody but the case and the controller writes to it).
pub(crate) fn deployment(name: &str, replicas: i32) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": { "name": name },
        "spec": {
            "replicas": replicas,
            "selector": { "matchLabels": { "app": name } },
            "template": {
                "metadata": { "labels": { "app": name } },
                "spec": { "containers": [{ "name": "main", "image": "registry.invalid/none" }] },
            },
        },
    })
}

/// `deployment-annotate`: Deployments created before and after the start are annotated
/// `<ready>/<desired>`; a change of replicas (spec) and of ready replicas (status) is
/// rewritten; each settles within a bounded number of runs and then stays quiet; a
/// deleted one is reconciled once more, with no object.
pub async fn a_deployment_controller_writes_back<D>(case: Case<D>)
where
    D: DriverUnderTest,
    D::Runtime: Default,
{
    deployment_controller_writes_back(case, false).await;
}

/// The same, with the Deployments listed and watched in Kubernetes protobuf (issue 16):
/// they decode into k8s-openapi's `Deployment` by the embedded schemas, and the controller
/// behaves exactly as on JSON. Every LIST body and WATCH frame it received was protobuf.
pub async fn a_deployment_controller_writes_back_over_protobuf<D>(case: Case<D>)
where
    D: DriverUnderTest,
    D::Runtime: Default,
{
    deployment_controller_writes_back(case, true).await;
}

async fn deployment_controller_writes_back<D>(case: Case<D>, protobuf: bool)
where
    D: DriverUnderTest,
    D::Runtime: Default,
{
    let _steady = case.env.steady();
    let ns = case.namespace();
    let collection = format!("/apis/apps/v1/namespaces/{ns}/deployments");
    let path = |name: &str| format!("{collection}/{name}");
    let annotation = deployment_annotate::ANNOTATION;
    create(&case, &collection, &deployment("web", 2));

    let transport = connect(&case).await;
    let ctx = Arc::new(deployment_annotate::Context::new(transport.clone()));
    let seen = ctx.observations().clone();
    let args = Args {
        protobuf,
        ..Args::namespace(&ns)
    };
    let tape: Tape<Deployment, ObjectKey> = Tape::default();
    let controller = deployment_annotate::controller::<D::Runtime, _>(deployment_annotate::source(
        transport, &args,
    ))
    .recorder(tape.clone());
    let handle = controller.handle();
    let live = Live::start(&case, handle, deployment_annotate::start(controller, ctx)).await;
    create(&case, &collection, &deployment("api", 1));

    let (web, api) = (key(&ns, "web"), key(&ns, "api"));
    wait_annotation(&case, &path("web"), annotation, "0/2").await;
    wait_annotation(&case, &path("api"), annotation, "0/1").await;
    let web_runs = settled(&case, &seen, &web, "0/2", 0).await;
    let api_runs = settled(&case, &seen, &api, "0/1", 0).await;

    // A spec change: the desired count.
    merge_patch(&case, &path("web"), &json!({"spec": {"replicas": 3}}));
    wait_annotation(&case, &path("web"), annotation, "0/3").await;
    let scaled = settled(&case, &seen, &web, "0/3", web_runs).await;

    // A status change: the ready count (written by the case, standing in for the
    // deployment controller, which the environment does not run).
    merge_patch(
        &case,
        &format!("{}/status", path("web")),
        &json!({"status": {"replicas": 3, "readyReplicas": 2}}),
    );
    wait_annotation(&case, &path("web"), annotation, "2/3").await;
    let web_runs = settled(&case, &seen, &web, "2/3", scaled).await;
    let written: Vec<Effect> = seen.of(&web).into_iter().filter(Effect::wrote).collect();
    assert_eq!(
        written,
        ["0/2", "0/3", "2/3"].map(|v| Effect::Wrote(v.into())),
        "web: one write per change, in order"
    );

    let quiet = [
        Quiet::after(&case, &web, web_runs, path("web")),
        Quiet::after(&case, &api, api_runs, path("api")),
    ];
    create(&case, &collection, &deployment("marker", 1));
    assert_quiet(&case, &seen, &quiet, &key(&ns, "marker"), "0/1").await;

    delete(&case, &path("api"));
    let seen_delete = seen.clone();
    case.eventually(
        &format!("a run of {api} with no object"),
        || match seen_delete.latest(&api) {
            Some(Effect::Deleted) => Ok(()),
            _ => Err(format!("runs so far: {:?}", seen_delete.of(&api))),
        },
    )
    .await;
    live.shutdown().await;
    // What came off the wire: protobuf (`k8s\0` and frames), or JSON.
    let (mut lists, mut frames) = (0, 0);
    for (_, record) in tape.all() {
        match record {
            Recorded::Input(Input::List {
                response: ListResponse::Response { status: 200, body },
                ..
            }) => {
                assert_eq!(body.starts_with(b"k8s\0"), protobuf, "a LIST body");
                lists += 1;
            }
            Recorded::Input(Input::WatchLine { line, .. }) => {
                assert_eq!(!line.starts_with(b"{"), protobuf, "a WATCH frame");
                frames += 1;
            }
            _ => {}
        }
    }
    assert!(!tape.truncated(), "the tape kept the whole run");
    assert!(lists >= 1 && frames >= 4, "lists {lists}, frames {frames}");
}

/// The status writer with `Predicate::GenerationChanged`: its own status write is cached
/// but wakes nothing, so each spec change runs the reconcile exactly once (without the
/// predicate it runs twice: the write, then the no-op its write wakes).
pub async fn a_status_writer_with_the_generation_predicate_runs_once_per_spec_change<
    D: DriverUnderTest,
>(
    case: Case<D>,
) {
    let _steady = case.env.steady();
    let ns = case.namespace();
    let transport = connect(&case).await;
    crd_status::install_crd(&case.runtime, transport.clone(), WAIT)
        .await
        .unwrap_or_else(|e| panic!("{}: {e}", case.name));
    let ctx = Arc::new(crd_status::Context::new(transport.clone()));
    let seen = ctx.observations().clone();
    let controller = crd_status::controller(
        case.runtime.clone(),
        crd_status::source(transport, &Args::namespace(&ns)),
    )
    .predicate(reconcile_core::Predicate::GenerationChanged);
    let handle = controller.handle();
    let live = Live::start(&case, handle, crd_status::start(controller, ctx)).await;
    let collection = format!("/apis/example.reconcile-loop.dev/v1/namespaces/{ns}/shops");
    let shop = |name: &str, replicas: i32| {
        json!({
            "apiVersion": "example.reconcile-loop.dev/v1",
            "kind": "Shop",
            "metadata": { "name": name },
            "spec": { "replicas": replicas },
        })
    };
    let corner = key(&ns, "corner");
    // Each marker is created after the write it follows, so once the marker's status is
    // written, the watch has delivered the corner's own status write before it.
    let marker_done = |name: &'static str| {
        let seen = seen.clone();
        let marker = key(&ns, name);
        move || {
            if seen.of(&marker).iter().any(Effect::wrote) {
                Ok(())
            } else {
                Err(format!("{name} not reconciled yet"))
            }
        }
    };
    create(&case, &collection, &shop("corner", 2));
    let corner_written = |n: usize| {
        let seen = seen.clone();
        let corner = corner.clone();
        move || {
            let writes = seen.of(&corner).iter().filter(|e| e.wrote()).count();
            if writes >= n {
                Ok(())
            } else {
                Err(format!("{writes} status writes"))
            }
        }
    };
    case.eventually("corner's first status write", corner_written(1))
        .await;
    create(&case, &collection, &shop("marker-1", 1));
    case.eventually("marker-1 reconciled", marker_done("marker-1"))
        .await;
    assert_eq!(
        seen.of(&corner),
        [Effect::Wrote("2 replica(s) wanted".into())],
        "{}: one run for the creation; the status write woke nothing",
        case.name
    );
    merge_patch(
        &case,
        &format!("{collection}/corner"),
        &json!({"spec": {"replicas": 5}}),
    );
    case.eventually("corner's second status write", corner_written(2))
        .await;
    create(&case, &collection, &shop("marker-2", 1));
    case.eventually("marker-2 reconciled", marker_done("marker-2"))
        .await;
    assert_eq!(
        seen.of(&corner),
        ["2 replica(s) wanted", "5 replica(s) wanted"].map(|v| Effect::Wrote(v.into())),
        "{}: one run per spec change",
        case.name
    );
    live.shutdown().await;
}

/// `crd-status`: the case installs the `Shop` CRD through the API and waits until it is
/// Established; a shop gets its status through the status subresource, the status write
/// (which does not bump the generation) wakes the shop once more and that run writes
/// nothing; a spec change (a new generation) gets a new status; nothing loops.
pub async fn a_crd_controller_writes_status_without_looping<D: DriverUnderTest>(case: Case<D>) {
    let _steady = case.env.steady();
    let ns = case.namespace();
    let transport = connect(&case).await;
    // Twice: the second finds it there (AlreadyExists), as a restarted example would.
    for _ in 0..2 {
        crd_status::install_crd(&case.runtime, transport.clone(), WAIT)
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", case.name));
    }

    let ctx = Arc::new(crd_status::Context::new(transport.clone()));
    let seen = ctx.observations().clone();
    let controller = crd_status::controller(
        case.runtime.clone(),
        crd_status::source(transport, &Args::namespace(&ns)),
    );
    let handle = controller.handle();
    let live = Live::start(&case, handle, crd_status::start(controller, ctx)).await;

    let collection = format!("/apis/example.reconcile-loop.dev/v1/namespaces/{ns}/shops");
    let path = |name: &str| format!("{collection}/{name}");
    let shop = |name: &str, replicas: i32| {
        json!({
            "apiVersion": "example.reconcile-loop.dev/v1",
            "kind": "Shop",
            "metadata": { "name": name },
            "spec": { "replicas": replicas },
        })
    };
    create(&case, &collection, &shop("corner", 2));

    // The shop's status on the apiserver: (generation, observedGeneration, summary).
    let status_of = |name: &str| -> Result<(i64, i64, String), String> {
        let object = case.api().get(&path(name)).map_err(|e| e.to_string())?;
        let parsed: Shop = serde_json::from_value(object).map_err(|e| e.to_string())?;
        let status = parsed.status.unwrap_or_default();
        Ok((
            parsed.metadata.generation.unwrap_or_default(),
            status.observed_generation.unwrap_or_default(),
            status.summary,
        ))
    };
    let want_status = |generation: i64, summary: &'static str| {
        move || match status_of("corner")? {
            (g, observed, s) if g == generation && observed == generation && s == summary => Ok(()),
            other => Err(format!(
                "(generation, observedGeneration, summary) = {other:?}"
            )),
        }
    };
    let corner = key(&ns, "corner");
    case.eventually(
        "corner's status at generation 1",
        want_status(1, "2 replica(s) wanted"),
    )
    .await;
    let first = settled(&case, &seen, &corner, "2 replica(s) wanted", 0).await;

    merge_patch(&case, &path("corner"), &json!({"spec": {"replicas": 5}}));
    case.eventually(
        "corner's new status at generation 2",
        want_status(2, "5 replica(s) wanted"),
    )
    .await;
    let second = settled(&case, &seen, &corner, "5 replica(s) wanted", first).await;
    let written: Vec<Effect> = seen.of(&corner).into_iter().filter(Effect::wrote).collect();
    assert_eq!(
        written,
        ["2 replica(s) wanted", "5 replica(s) wanted"].map(|v| Effect::Wrote(v.into())),
        "corner: one status write per spec change"
    );

    let quiet = [Quiet::after(&case, &corner, second, path("corner"))];
    create(&case, &collection, &shop("marker", 1));
    assert_quiet(
        &case,
        &seen,
        &quiet,
        &key(&ns, "marker"),
        "1 replica(s) wanted",
    )
    .await;
    live.shutdown().await;
}

/// `dynamic-configmaps`: ConfigMaps watched as `DynamicObject`s (selected by label) are
/// annotated with their number of data keys, read from the untyped body; a new key is
/// counted; each settles and stays quiet; a deletion is reconciled with no object.
pub async fn a_dynamic_object_controller_reconciles_configmaps<D: DriverUnderTest>(case: Case<D>) {
    let _steady = case.env.steady();
    let ns = case.namespace();
    let collection = format!("/api/v1/namespaces/{ns}/configmaps");
    let path = |name: &str| format!("{collection}/{name}");
    let annotation = dynamic_configmaps::ANNOTATION;
    let config_map = |name: &str, app: &str, data: Value| {
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": { "name": name, "labels": { "app": app } },
            "data": data,
        })
    };
    create(
        &case,
        &collection,
        &config_map("two", "e2e", json!({"a": "1", "b": "2"})),
    );
    create(
        &case,
        &collection,
        &config_map("other", "other", json!({"a": "1"})),
    );

    let transport = connect(&case).await;
    let resource = dynamic_configmaps::resource();
    let ctx = Arc::new(dynamic_configmaps::Context::new(
        transport.clone(),
        resource.clone(),
    ));
    let seen = ctx.observations().clone();
    let args = Args {
        selector: Some("app=e2e".into()),
        ..Args::namespace(&ns)
    };
    let controller = dynamic_configmaps::controller(
        case.runtime.clone(),
        dynamic_configmaps::source(transport, &resource, &args),
    );
    let handle = controller.handle();
    let live = Live::start(&case, handle, dynamic_configmaps::start(controller, ctx)).await;
    create(&case, &collection, &config_map("none", "e2e", json!({})));

    let (two, none) = (key(&ns, "two"), key(&ns, "none"));
    wait_annotation(&case, &path("two"), annotation, "2").await;
    wait_annotation(&case, &path("none"), annotation, "0").await;
    let two_runs = settled(&case, &seen, &two, "2", 0).await;

    merge_patch(&case, &path("two"), &json!({"data": {"c": "3"}}));
    wait_annotation(&case, &path("two"), annotation, "3").await;
    let three = settled(&case, &seen, &two, "3", two_runs).await;
    let none_runs = settled(&case, &seen, &none, "0", 0).await;

    let quiet = [
        Quiet::after(&case, &two, three, path("two")),
        Quiet::after(&case, &none, none_runs, path("none")),
    ];
    create(
        &case,
        &collection,
        &config_map("marker", "e2e", json!({"k": "v"})),
    );
    assert_quiet(&case, &seen, &quiet, &key(&ns, "marker"), "1").await;

    delete(&case, &path("none"));
    let seen_delete = seen.clone();
    case.eventually(
        &format!("a run of {none} with no object"),
        || match seen_delete.latest(&none) {
            Some(Effect::Deleted) => Ok(()),
            _ => Err(format!("runs so far: {:?}", seen_delete.of(&none))),
        },
    )
    .await;
    let outside = key(&ns, "other");
    assert_eq!(
        seen.count(&outside),
        0,
        "a ConfigMap outside the selector was reconciled"
    );
    assert!(
        case.api()
            .get(&path("other"))
            .map(|o| o["metadata"]["annotations"][annotation].is_null())
            .unwrap_or(false),
        "a ConfigMap outside the selector was annotated"
    );
    live.shutdown().await;
}

/// The secret value the metadata-only case plants; it must never come over the wire.
const SECRET_VALUE: &str = "reconcile-e2e-planted-s3cr3t-4f1b9c";

/// `secret-metadata`: every LIST body and WATCH line the controller received (read off its
/// recorder's tape) is `PartialObjectMetadata`, with no `data` and neither the planted
/// secret value nor its base64; the same Secret read as a full object does carry it, so
/// the check can fail. The reconciles see the Secrets' labels change and a deletion.
pub async fn a_metadata_only_watch_sends_metadata_only<D: DriverUnderTest>(case: Case<D>) {
    metadata_only_watch(case, false).await;
}

/// The same, in Kubernetes protobuf (issue 16), as client-go's metadata client asks:
/// every LIST body and WATCH frame is protobuf `PartialObjectMetadata`, decoded into
/// `PartialObjectMeta<Secret>`, and the controller behaves exactly as on JSON.
pub async fn a_metadata_only_watch_sends_metadata_only_over_protobuf<D: DriverUnderTest>(
    case: Case<D>,
) {
    metadata_only_watch(case, true).await;
}

#[allow(clippy::too_many_lines)] // one run, then every byte it received checked
async fn metadata_only_watch<D: DriverUnderTest>(case: Case<D>, protobuf: bool) {
    let _steady = case.env.steady();
    let ns = case.namespace();
    let collection = format!("/api/v1/namespaces/{ns}/secrets");
    let path = |name: &str| format!("{collection}/{name}");
    let encoded = match serde_json::to_value(ByteString(SECRET_VALUE.as_bytes().to_vec())) {
        Ok(Value::String(encoded)) => encoded,
        other => panic!("ByteString serializes as a base64 string, not {other:?}"),
    };
    let secret = |name: &str| {
        json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": { "name": name, "labels": { "app": "e2e", "tier": "db" } },
            "data": { "password": encoded },
        })
    };
    create(&case, &collection, &secret("early"));

    let transport = connect(&case).await;
    // The full object through the same transport carries the value: what a full-object
    // source would have received.
    let full = ApiClient::<Secret, D::Transport>::namespaced(transport.clone(), &ns)
        .get("early")
        .await
        .unwrap_or_else(|e| panic!("{}: get secret early: {e}", case.name));
    assert_eq!(
        full.data.as_ref().and_then(|d| d.get("password")),
        Some(&ByteString(SECRET_VALUE.as_bytes().to_vec())),
        "the full Secret carries the planted value"
    );

    let ctx = Arc::new(secret_metadata::Context::default());
    let seen = ctx.observations().clone();
    let tape: Tape<SecretMeta, ObjectKey> = Tape::default();
    let args = Args {
        protobuf,
        ..Args::namespace(&ns)
    };
    let controller = secret_metadata::controller(
        case.runtime.clone(),
        secret_metadata::source(transport, &args),
    )
    .recorder(tape.clone());
    let handle = controller.handle();
    let cache = controller.cache();
    let live = Live::start(&case, handle, secret_metadata::start(controller, ctx)).await;

    let (early, late) = (key(&ns, "early"), key(&ns, "late"));
    create(&case, &collection, &secret("late"));
    merge_patch(
        &case,
        &path("early"),
        &json!({"metadata": {"labels": {"rotated": "yes"}}}),
    );
    let seen_early = seen.clone();
    case.eventually("early seen with its third label", || {
        match seen_early.latest(&early) {
            Some(Effect::Observed(line)) if line == "3 label(s)" => Ok(()),
            other => Err(format!("latest run {other:?}")),
        }
    })
    .await;
    let seen_late = seen.clone();
    case.eventually("late seen", || match seen_late.latest(&late) {
        Some(Effect::Observed(line)) if line == "2 label(s)" => Ok(()),
        other => Err(format!("latest run {other:?}")),
    })
    .await;
    delete(&case, &path("late"));
    let seen_deleted = seen.clone();
    case.eventually("late reconciled with no object", || {
        match seen_deleted.latest(&late) {
            Some(Effect::Deleted) => Ok(()),
            other => Err(format!("latest run {other:?}")),
        }
    })
    .await;
    assert!(
        cache.get(&early).is_some() && cache.get(&late).is_none(),
        "the cache holds early, not late"
    );

    // Every byte the controller received: LIST bodies and WATCH lines.
    let mut lists = Vec::new();
    let mut lines = Vec::new();
    for (_, record) in tape.all() {
        match record {
            Recorded::Input(Input::List {
                response: ListResponse::Response { status: 200, body },
                ..
            }) => lists.push(body),
            Recorded::Input(Input::WatchLine { line, .. }) => lines.push(line),
            _ => {}
        }
    }
    assert!(!tape.truncated(), "the tape kept the whole run");
    assert!(!lists.is_empty(), "no LIST body was recorded");
    for (what, bytes) in lists
        .iter()
        .map(|b| ("a LIST body", b))
        .chain(lines.iter().map(|l| ("a WATCH line", l)))
    {
        let text = String::from_utf8_lossy(bytes);
        for forbidden in [SECRET_VALUE, encoded.as_str(), "\"data\":"] {
            assert!(
                !text.contains(forbidden),
                "{what} carries {forbidden:?}: {text}"
            );
        }
    }
    for body in &lists {
        assert_eq!(body.starts_with(b"k8s\0"), protobuf, "a LIST body");
        // The core's decoder checks the kind each body names: `PartialObjectMetadataList`.
        let list = parse_list::<SecretMeta>(body)
            .unwrap_or_else(|e| panic!("a LIST body: {e}: {}", String::from_utf8_lossy(body)));
        assert!(
            list.items
                .iter()
                .any(|i| i.metadata.name.as_deref() == Some("early")),
            "the LIST body names early: {}",
            String::from_utf8_lossy(body)
        );
        for item in &list.items {
            assert_eq!(
                item.types.as_ref().map(|t| t.kind.as_str()),
                Some("PartialObjectMetadata"),
                "a LIST item"
            );
        }
    }
    let wire = if protobuf {
        WireFormat::Protobuf
    } else {
        WireFormat::Json
    };
    let mut events = Vec::new();
    for line in &lines {
        assert_eq!(!line.starts_with(b"{"), protobuf, "a WATCH frame");
        // As the LIST: each frame's object must be a `PartialObjectMetadata` to decode.
        let event = parse_frame_as::<SecretMeta>(line, wire)
            .unwrap_or_else(|e| panic!("a WATCH line: {e}: {}", String::from_utf8_lossy(line)));
        let (kind, secret) = match &event {
            WatchEvent::Added(o) => ("ADDED", o),
            WatchEvent::Modified(o) => ("MODIFIED", o),
            WatchEvent::Deleted(o) => ("DELETED", o),
            _ => continue,
        };
        assert_eq!(
            secret.types.as_ref().map(|t| t.kind.as_str()),
            Some("PartialObjectMetadata"),
            "a WATCH line: {}",
            String::from_utf8_lossy(line)
        );
        let name = secret.metadata.name.as_deref().unwrap_or_default();
        events.push(format!("{kind} {name}"));
    }
    for want in ["ADDED late", "MODIFIED early", "DELETED late"] {
        assert!(
            events.iter().any(|e| e == want),
            "no {want} came over the watch: {events:?}"
        );
    }
    live.shutdown().await;
}

/// How long the operator case's controller waits before any LIST or WATCH retry, a relist
/// included: the window, after the 410, in which the case deletes a child while no watch
/// of ConfigMaps is open.
const RELIST_WINDOW: Duration = Duration::from_secs(5);

/// How long the garbage collector may take to delete a child after its owner, beyond
/// [`WAIT`]: kube-controller-manager's collector rediscovers kinds only every 30 s, and the
/// case installed this CRD moments before (it took from 0.1 s to 34 s in trial runs).
const GC_WAIT: Duration = Duration::from_secs(120);

/// Whether a WATCH of `resource` is open on the watch-cache-on apiserver, which only
/// kube-controller-manager's garbage collector uses for the operator case's kinds (its
/// controller talks to the other apiserver). Read from the apiserver's
/// `apiserver_longrunning_requests` gauge.
fn collector_watches<D: DriverUnderTest>(case: &Case<D>, resource: &str) -> Result<String, String> {
    let text = case
        .api()
        .request_text("GET", "/metrics", None)
        .map_err(|e| format!("GET /metrics: {e}"))?;
    let want = format!("resource=\"{resource}\"");
    let open: f64 = text
        .lines()
        .filter(|l| l.starts_with("apiserver_longrunning_requests{"))
        .filter(|l| l.contains(&want) && l.contains("verb=\"WATCH\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    if open > 0.0 {
        Ok(format!("{open} open"))
    } else {
        Err(format!("no open WATCH of {resource}"))
    }
}

/// Step timings of a case, printed as each step completes (shown with `--nocapture`).
struct Laps<R> {
    case: String,
    runtime: R,
    began: Instant,
    last: Instant,
}

impl<R: Runtime> Laps<R> {
    fn new<D: DriverUnderTest<Runtime = R>>(case: &Case<D>) -> Self {
        let now = case.runtime.now();
        Laps {
            case: format!("{} [{}]", case.name, D::NAME),
            runtime: case.runtime.clone(),
            began: now,
            last: now,
        }
    }

    fn done(&mut self, step: &str) {
        let now = self.runtime.now();
        eprintln!(
            "{}: {step}: {:.2}s (at {:.2}s)",
            self.case,
            now.duration_since(self.last).as_secs_f64(),
            now.duration_since(self.began).as_secs_f64()
        );
        self.last = now;
    }
}

/// The generated ConfigMap at `path` as the apiserver has it, or `None`.
fn config_map<D: DriverUnderTest>(case: &Case<D>, path: &str) -> Result<Option<ConfigMap>, String> {
    match case.api().get_opt(path).map_err(|e| e.to_string())? {
        Some(object) => serde_json::from_value(object)
            .map(Some)
            .map_err(|e| format!("not a ConfigMap: {e}")),
        None => Ok(None),
    }
}

/// Waits until the ConfigMap at `path` holds `data.content = content` and carries `owner`
/// (and, with `replacing`, is not the object of that uid: it was recreated), and returns
/// its uid.
async fn wait_child<D: DriverUnderTest>(
    case: &Case<D>,
    path: &str,
    owner: &OwnerReference,
    content: &str,
    replacing: Option<&str>,
) -> String {
    let what = match replacing {
        Some(uid) => format!(
            "{path} recreated (not uid {uid}) with content {content:?}, owned by {}",
            owner.name
        ),
        None => format!("{path} with content {content:?}, owned by {}", owner.name),
    };
    case.eventually(&what, || {
        let Some(child) = config_map(case, path)? else {
            return Err("no such ConfigMap".into());
        };
        let uid = child.metadata.uid.clone().unwrap_or_default();
        let has = child
            .data
            .as_ref()
            .and_then(|d| d.get(configmap_generator::CONTENT));
        let owners = child.metadata.owner_references.clone().unwrap_or_default();
        if has.map(String::as_str) == Some(content)
            && owners.contains(owner)
            && replacing != Some(uid.as_str())
        {
            Ok(uid)
        } else {
            Err(format!(
                "uid {uid}, content {has:?}, ownerReferences {owners:?}"
            ))
        }
    })
    .await
}

/// `configmap-generator`, an operator (kube-runtime's `configmapgen`): a
/// `ConfigMapGenerator` gets its ConfigMap, with the content and a controller owner
/// reference; the ConfigMap deleted behind the controller's back is recreated (its deletion
/// wakes its owner through `owns`); an edit of the generator reaches the ConfigMap; a 410 on
/// the ConfigMaps' watch, forced by compacting etcd, relists that source alone, and a
/// deletion made while it was relisting, which no watch carried, is noticed by the relist
/// and undone; a later edit still gets through; and once the generator is deleted the
/// garbage collector of kube-controller-manager deletes its ConfigMap. Each change settles
/// with one write.
///
/// The controller talks to the watch-cache-off apiserver, the one where a WATCH from a
/// compacted cursor is refused, and holds the environment's `disrupt` guard throughout.
pub async fn an_operator_owning_configmaps_keeps_them_in_step<D: DriverUnderTest>(case: Case<D>) {
    let _disrupt = case.env.disrupt();
    let mut laps = Laps::new(&case);
    let ns = case.namespace();
    let transport = D::connect(case.env.kubeconfig_path(ApiServer::Uncached))
        .await
        .unwrap_or_else(|e| panic!("{}: cannot connect: {e}", case.name));
    configmap_generator::install_crd(&case.runtime, transport.clone(), WAIT)
        .await
        .unwrap_or_else(|e| panic!("{}: {e}", case.name));
    laps.done("CRD installed and Established");

    let ctx = Arc::new(configmap_generator::Context::new(transport.clone()));
    let seen = ctx.observations().clone();
    let args = Args::namespace(&ns);
    let tape: Tape<ConfigMapGenerator, ObjectKey> = Tape::default();
    let controller = configmap_generator::controller(
        case.runtime.clone(),
        configmap_generator::source(transport.clone(), &args),
        // Watched 2 s at a time, so that it soon watches again from its cursor once etcd
        // is compacted; the generators' watch stays open (300 s), and is never refused.
        configmap_generator::children(transport, &args).timeout(2),
    )
    .retry_delay(RELIST_WINDOW)
    .recorder(tape.clone());
    let handle = controller.handle();
    let live = Live::start(
        &case,
        handle.clone(),
        configmap_generator::start(controller, ctx),
    )
    .await;
    laps.done("controller synced on both sources");

    let generators =
        format!("/apis/example.reconcile-loop.dev/v1/namespaces/{ns}/configmapgenerators");
    let generator = format!("{generators}/alpha");
    let child = format!("/api/v1/namespaces/{ns}/configmaps/alpha-cm");
    let alpha = key(&ns, "alpha");
    let created = create(
        &case,
        &generators,
        &json!({
            "apiVersion": "example.reconcile-loop.dev/v1",
            "kind": "ConfigMapGenerator",
            "metadata": { "name": "alpha" },
            "spec": { "content": "one" },
        }),
    );
    let owner = OwnerReference {
        api_version: "example.reconcile-loop.dev/v1".into(),
        kind: "ConfigMapGenerator".into(),
        name: "alpha".into(),
        uid: created["metadata"]["uid"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    };
    let first = wait_child(&case, &child, &owner, "one", None).await;
    let runs = settled(&case, &seen, &alpha, "one", 0).await;
    laps.done("a generator's ConfigMap appeared, owned, and settled");

    // Deleted behind the controller's back: the watch of ConfigMaps delivers the deletion,
    // which wakes the owner.
    delete(&case, &child);
    let second = wait_child(&case, &child, &owner, "one", Some(&first)).await;
    let runs = settled(&case, &seen, &alpha, "one", runs).await;
    laps.done("the deleted ConfigMap was recreated");

    merge_patch(&case, &generator, &json!({"spec": {"content": "two"}}));
    wait_child(&case, &child, &owner, "two", None).await;
    let runs = settled(&case, &seen, &alpha, "two", runs).await;
    laps.done("the generator's edit reached its ConfigMap");

    // A 410 on the ConfigMaps' source alone. Two writes neither source sees move etcd past
    // the ConfigMaps' cursor (a WATCH from a cursor starts one past it, and only a start
    // below the compacted revision is refused); then the next 2 s watch is refused.
    let before = handle.stats();
    create(
        &case,
        &format!("/api/v1/namespaces/{ns}/secrets"),
        &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "bystander"}}),
    );
    merge_patch(
        &case,
        &format!("/api/v1/namespaces/{ns}/secrets/bystander"),
        &json!({"metadata": {"labels": {"touched": "yes"}}}),
    );
    let revision = case
        .env
        .compact_etcd()
        .unwrap_or_else(|e| panic!("{}: compact: {e}", case.name));
    let relisting = handle.clone();
    let at_410 = case
        .eventually(
            "a relist after the ConfigMaps' cursor was compacted",
            || {
                let stats = relisting.stats();
                if stats.relists > before.relists {
                    Ok(stats)
                } else {
                    Err(format!("compacted at {revision}, {stats:?}"))
                }
            },
        )
        .await;
    laps.done("the compacted cursor was refused (410)");
    // The relist's LIST waits RELIST_WINDOW: delete the child now, while no watch of
    // ConfigMaps is open, so only that LIST can tell the controller.
    assert_eq!(
        handle.stats().lists,
        at_410.lists,
        "the relist listed before the case could delete the child: {}s was too short a \
         window on this machine",
        RELIST_WINDOW.as_secs()
    );
    delete(&case, &child);
    wait_child(&case, &child, &owner, "two", Some(&second)).await;
    let runs = settled(&case, &seen, &alpha, "two", runs).await;
    laps.done("the child deleted while relisting was recreated after the relist");
    let deletions = tape
        .frames_of(SourceId::nth(1))
        .into_iter()
        .filter(|f| f.kind == "DELETED" && f.name == "alpha-cm")
        .count();
    assert_eq!(
        deletions, 1,
        "only the first deletion came over the watch; the second only by the relist"
    );
    assert_eq!(
        tape.lists_of(SourceId::PRIMARY),
        1,
        "the generators were listed again: the 410 was on the ConfigMaps' source only"
    );
    assert!(
        tape.lists_of(SourceId::nth(1)) >= 2,
        "the ConfigMaps were relisted: {:?}",
        handle.stats()
    );
    assert!(
        tape.frames_of(SourceId::PRIMARY)
            .iter()
            .all(|f| f.kind != "ERROR"),
        "the generators' watch was refused too"
    );

    merge_patch(&case, &generator, &json!({"spec": {"content": "three"}}));
    wait_child(&case, &child, &owner, "three", None).await;
    settled(&case, &seen, &alpha, "three", runs).await;
    laps.done("an edit after the relist reached the ConfigMap");
    let written: Vec<Effect> = seen.of(&alpha).into_iter().filter(Effect::wrote).collect();
    assert_eq!(
        written,
        ["one", "one", "two", "two", "three"].map(|v| Effect::Wrote(v.into())),
        "alpha: one apply per change (created, recreated, edited, recreated, edited)"
    );

    // The generator goes; the reconcile does nothing; the garbage collector removes the
    // child after its owner. Only once the collector watches generators: an owner deleted
    // before that is never observed, and the collector's only other way to learn of it, a
    // lookup retried with a backoff that had grown while the kind was unknown to it, came
    // more than 120 s later in one CI run.
    let gc_watch = eventually(
        &case.runtime,
        GC_WAIT,
        "kube-controller-manager's garbage collector to watch configmapgenerators",
        || collector_watches(&case, "configmapgenerators"),
    )
    .await;
    // A moment for that watch, counted when its request arrives, to take its snapshot.
    case.runtime
        .sleep_until(case.runtime.now() + Duration::from_secs(1))
        .await;
    laps.done(&format!(
        "the garbage collector watches generators ({gc_watch})"
    ));
    delete(&case, &generator);
    let seen_delete = seen.clone();
    case.eventually(
        &format!("a run of {alpha} with no object"),
        || match seen_delete.latest(&alpha) {
            Some(Effect::Deleted) => Ok(()),
            _ => Err(format!("runs so far: {:?}", seen_delete.of(&alpha))),
        },
    )
    .await;
    eventually(
        &case.runtime,
        GC_WAIT,
        &format!(
            "the garbage collector to delete {child} after its owner ({})",
            case.name
        ),
        || match config_map(&case, &child)? {
            None => Ok(()),
            Some(c) => Err(format!(
                "still there: uid {:?}, ownerReferences {:?}, deletionTimestamp {:?}",
                c.metadata.uid, c.metadata.owner_references, c.metadata.deletion_timestamp
            )),
        },
    )
    .await;
    laps.done("the garbage collector deleted the ConfigMap after its generator");
    assert_eq!(
        seen.of(&alpha).iter().filter(|e| e.wrote()).count(),
        written.len(),
        "nothing was applied after the generator was deleted: {:?}",
        seen.of(&alpha)
    );
    live.shutdown().await;
}

/// Transforms (`Source::modify`, kube-runtime's `watcher(..).modify(..)`): a ConfigMap
/// controller whose source strips `metadata.managedFields` and the last-applied annotation
/// caches ConfigMaps without either, from the LIST and from the WATCH, while the apiserver's
/// copies carry both (so the check can fail); what else the objects carry is kept.
pub async fn a_transform_strips_managed_fields_before_the_cache<D: DriverUnderTest>(case: Case<D>) {
    use reconcile_core::KeyMap;
    use reconcile_core::transform::{
        LAST_APPLIED_ANNOTATION, strip_last_applied, strip_managed_fields,
    };
    use reconcile_engine::{Action, Controller, Reconcile, Source, default_error_policy};

    let _steady = case.env.steady();
    let ns = case.namespace();
    let collection = format!("/api/v1/namespaces/{ns}/configmaps");
    let config_map = |name: &str, v: &str| {
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": name,
                "labels": { "app": "e2e" },
                "annotations": { LAST_APPLIED_ANNOTATION: "{\"kind\":\"ConfigMap\"}", "keep": "me" },
            },
            "data": { "v": v },
        })
    };
    create(&case, &collection, &config_map("listed", "1"));
    let source = Source::<ConfigMap, D::Transport>::namespaced(connect(&case).await, &ns)
        .labels("app=e2e")
        .modify(strip_managed_fields)
        .modify(strip_last_applied);
    let controller = Controller::with_runtime(D::runtime(), source, KeyMap::by_object());
    let cache = controller.cache();
    let running = timeout(
        &case.runtime,
        WAIT,
        controller.start(
            |_: Reconcile<ConfigMap, ObjectKey>, _: Arc<()>| async move {
                Ok::<_, std::convert::Infallible>(Action::await_change())
            },
            default_error_policy,
            Arc::new(()),
        ),
    )
    .await
    .unwrap_or_else(|| panic!("{}: no sync", case.name))
    .unwrap_or_else(|e| panic!("{}: {e}", case.name));
    create(&case, &collection, &config_map("watched", "1"));
    merge_patch(
        &case,
        &format!("{collection}/listed"),
        &json!({"data": {"v": "2"}}),
    );
    for (name, v) in [("listed", "2"), ("watched", "1")] {
        let cached = case
            .eventually(&format!("{name} cached at v={v}"), || {
                match cache.get(&key(&ns, name)) {
                    Some(cm)
                        if cm
                            .data
                            .as_ref()
                            .and_then(|d| d.get("v"))
                            .map(String::as_str)
                            == Some(v) =>
                    {
                        Ok(cm)
                    }
                    other => Err(format!("{other:?}")),
                }
            })
            .await;
        assert!(
            cached.metadata.managed_fields.is_none(),
            "{}: {name} cached with managedFields",
            case.name
        );
        let annotations = cached.metadata.annotations.clone().unwrap_or_default();
        assert_eq!(
            annotations.keys().collect::<Vec<_>>(),
            ["keep"],
            "{}: {name}'s annotations as cached",
            case.name
        );
        let served = case
            .api()
            .get(&format!("{collection}/{name}"))
            .unwrap_or_else(|e| panic!("{}: get {name}: {e}", case.name));
        assert!(
            served["metadata"]["managedFields"]
                .as_array()
                .is_some_and(|m| !m.is_empty()),
            "{}: the apiserver's {name} has managedFields",
            case.name
        );
        assert!(
            served["metadata"]["annotations"][LAST_APPLIED_ANNOTATION].is_string(),
            "{}: the apiserver's {name} has the annotation",
            case.name
        );
    }
    timeout(&case.runtime, WAIT, running.shutdown())
        .await
        .unwrap_or_else(|| panic!("{}: no stop", case.name))
        .unwrap_or_else(|e| panic!("{}: {e}", case.name));
}

/// The result stream (`Controller::run_stream`, kube-runtime's `Controller::run(..)`
/// stream): a ConfigMap controller on the apiserver yields one result per reconcile, with
/// the key and the error text of a failing one, and dropping the stream stops it.
pub async fn the_result_stream_yields_each_reconcile_with_its_key_and_error<D: DriverUnderTest>(
    case: Case<D>,
) {
    use futures_lite::StreamExt;
    use reconcile_core::KeyMap;
    use reconcile_engine::{Action, Controller, Reconcile, Source};

    let _steady = case.env.steady();
    let ns = case.namespace();
    let collection = format!("/api/v1/namespaces/{ns}/configmaps");
    for name in ["good", "bad"] {
        create(
            &case,
            &collection,
            &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": {"app": "e2e"}}}),
        );
    }
    let source =
        Source::<ConfigMap, D::Transport>::namespaced(connect(&case).await, &ns).labels("app=e2e");
    let controller = Controller::with_runtime(D::runtime(), source, KeyMap::by_object());
    let handle = controller.handle();
    let mut results = controller.run_stream(
        |req: Reconcile<ConfigMap, ObjectKey>, _: Arc<()>| async move {
            if req.parent().name() == "bad" {
                Err("bad is broken".to_owned())
            } else {
                Ok(Action::await_change())
            }
        },
        |_: &Reconcile<ConfigMap, ObjectKey>, _: &String, _: Arc<()>| Action::await_change(),
        Arc::new(()),
    );
    let mut seen = Vec::new();
    while seen.len() < 2 {
        let result = timeout(&case.runtime, WAIT, results.next())
            .await
            .unwrap_or_else(|| panic!("{}: no result within {WAIT:?}", case.name))
            .unwrap_or_else(|| panic!("{}: the stream ended", case.name));
        seen.push((
            result.parent.name().to_owned(),
            result.error().map(str::to_owned),
        ));
    }
    seen.sort();
    assert_eq!(
        seen,
        [
            ("bad".to_owned(), Some("bad is broken".to_owned())),
            ("good".to_owned(), None),
        ],
        "{}",
        case.name
    );
    assert_eq!(results.dropped(), 0);
    drop(results);
    timeout(&case.runtime, WAIT, handle.stopped())
        .await
        .unwrap_or_else(|| panic!("{}: dropping the stream did not stop it", case.name))
        .unwrap_or_else(|e| panic!("{}: {e}", case.name));
}

/// The measurement beside `cargo bench -p reconcile-sim --bench cluster` (issue 26):
/// configmap-generator over 1,000 generators and ten rounds of one spec edit each, on the
/// real kube-apiserver, timed from the first create until every ConfigMap holds its
/// generator's last content. Not a test: it prints the wall time (`-- --ignored
/// configmap_generator_at_1000`).
pub async fn configmap_generator_at_1000_generators_and_10000_edits<D: DriverUnderTest>(
    case: Case<D>,
) {
    const GENERATORS: usize = 1000;
    const ROUNDS: usize = 10;
    let ns = case.namespace();
    let transport = D::connect(case.env.kubeconfig_path(ApiServer::Uncached))
        .await
        .unwrap_or_else(|e| panic!("{}: cannot connect: {e}", case.name));
    configmap_generator::install_crd(&case.runtime, transport.clone(), WAIT)
        .await
        .unwrap_or_else(|e| panic!("{}: {e}", case.name));
    let api = ApiClient::<ConfigMapGenerator, D::Transport>::namespaced(transport.clone(), &ns);
    let started = Instant::now();
    for i in 0..GENERATORS {
        let g = ConfigMapGenerator::new(
            &format!("g{i}"),
            configmap_generator::ConfigMapGeneratorSpec {
                content: "v0".into(),
            },
        );
        api.create(&kube_core::params::PostParams::default(), &g)
            .await
            .unwrap_or_else(|e| panic!("{}: create g{i}: {e}", case.name));
    }
    let args = Args::namespace(&ns);
    let controller = configmap_generator::controller(
        case.runtime.clone(),
        configmap_generator::source(transport.clone(), &args),
        configmap_generator::children(transport.clone(), &args),
    );
    let handle = controller.handle();
    let ctx = Arc::new(configmap_generator::Context::new(transport.clone()));
    let running = configmap_generator::start(controller, ctx)
        .await
        .unwrap_or_else(|e| panic!("{}: {e}", case.name));
    for round in 0..ROUNDS {
        for i in 0..GENERATORS {
            let patch = json!({"spec": {"content": format!("v{}", round + 1)}});
            api.patch(
                &format!("g{i}"),
                &kube_core::params::PatchParams::default(),
                &kube_core::params::Patch::Merge(&patch),
            )
            .await
            .unwrap_or_else(|e| panic!("{}: edit g{i}: {e}", case.name));
        }
    }
    let configmaps = ApiClient::<ConfigMap, D::Transport>::namespaced(transport, &ns);
    let last = format!("v{ROUNDS}");
    for i in 0..GENERATORS {
        let name = format!("g{i}-cm");
        loop {
            let content = configmaps
                .get(&name)
                .await
                .ok()
                .and_then(|cm| cm.data.as_ref().and_then(|d| d.get("content")).cloned());
            if content.as_deref() == Some(last.as_str()) {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(600),
                "{}: {name} holds {content:?}, not {last}",
                case.name
            );
            let runtime = &case.runtime;
            runtime
                .sleep_until(runtime.now() + Duration::from_millis(100))
                .await;
        }
    }
    let took = started.elapsed();
    let reconciles: u64 = handle.metrics().reconcile_total.iter().sum();
    timeout(&case.runtime, WAIT, running.shutdown())
        .await
        .unwrap_or_else(|| panic!("{}: no stop", case.name))
        .unwrap_or_else(|e| panic!("{}: {e}", case.name));
    println!(
        "configmap-generator on the real kube-apiserver, {GENERATORS} generators, {} edits: {:.2} s, {reconciles} reconciles; every ConfigMap at its last content",
        GENERATORS * ROUNDS,
        took.as_secs_f64()
    );
}
