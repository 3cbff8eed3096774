//! Read your own writes and the reconcile timeout through the engine: an `ApiClient` write
//! inside a reconcile is recorded by itself and holds the key until the watch shows it; a
//! reconcile past its deadline is cancelled, counted in
//! `controller_runtime_reconcile_timeouts_total`, and retried through the backoff. On tokio
//! with paused time (see `support`).

// Not every helper is used here.
#[allow(dead_code)]
mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use k8s_openapi::api::core::v1::Pod;
use kube_core::params::{Patch, PatchParams};
use reconcile_core::KeyMap;
use reconcile_core::pod::PodView;
use reconcile_engine::{
    Action, ApiClient, BodyStream, BoxFuture, Controller, Reconcile, Source, Transport,
    TransportError, default_error_policy,
};
use support::{NoTransport, Paused, paused, stop_cleanly, until};

const LIST: &str = r#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"10"},"items":[
  {"metadata":{"name":"p1","namespace":"ns","resourceVersion":"5","labels":{"cell":"a"}}}]}"#;

/// The patched pod as the apiserver answers it: at resourceVersion 20.
const PATCHED: &str = r#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p1","namespace":"ns","resourceVersion":"20","labels":{"cell":"a"}}}"#;

/// LIST answers [`LIST`]; WATCH streams what the test sends on `lines`; PATCH answers
/// [`PATCHED`].
#[derive(Clone)]
struct Cluster {
    lines: async_channel::Receiver<String>,
    patches: Arc<AtomicUsize>,
}

impl Transport for Cluster {
    fn send(
        &self,
        request: http::Request<Vec<u8>>,
    ) -> BoxFuture<Result<http::Response<BodyStream>, TransportError>> {
        let query = request.uri().query().unwrap_or("").to_owned();
        let body: BodyStream = if request.method() == http::Method::PATCH {
            self.patches.fetch_add(1, Ordering::SeqCst);
            Box::pin(futures_lite::stream::once(Ok(Bytes::from_static(
                PATCHED.as_bytes(),
            ))))
        } else if query.contains("watch=true") {
            let lines = self.lines.clone();
            Box::pin(futures_lite::stream::unfold(lines, |lines| async move {
                let line = lines.recv().await.ok()?;
                Some((Ok(Bytes::from(format!("{line}\n"))), lines))
            }))
        } else {
            Box::pin(futures_lite::stream::once(Ok(Bytes::from_static(
                LIST.as_bytes(),
            ))))
        };
        Box::pin(async move {
            Ok(http::Response::builder()
                .status(200)
                .body(body)
                .expect("a response"))
        })
    }
}

fn frame(kind: &str, name: &str, rv: u64) -> String {
    format!(
        r#"{{"type":"{kind}","object":{{"metadata":{{"name":"{name}","namespace":"ns","resourceVersion":"{rv}","labels":{{"cell":"a"}}}}}}}}"#
    )
}

#[tokio::test(start_paused = true)]
async fn an_api_client_write_holds_the_key_until_the_watch_shows_it() {
    let (tx, lines) = async_channel::unbounded();
    let cluster = Cluster {
        lines,
        patches: Arc::default(),
    };
    let source: Source<PodView, Cluster> = Source::pods(cluster.clone(), Some("ns")).timeout(60);
    let controller = Controller::with_runtime(paused().await, source, KeyMap::by_label("cell"));
    let handle = controller.handle();
    let runs: Arc<Mutex<Vec<Vec<String>>>> = Arc::default();
    let ctx = Arc::new((cluster.clone(), Arc::clone(&runs)));
    type Ctx = (Cluster, Arc<Mutex<Vec<Vec<String>>>>);
    let task = tokio::spawn(controller.run(
        |req: Reconcile<PodView, String>, ctx: Arc<Ctx>| async move {
            let names: Vec<String> = req
                .members()
                .iter()
                .filter_map(|p| p.metadata.name.as_deref().map(str::to_owned))
                .collect();
            let first = {
                let mut runs = ctx.1.lock().unwrap();
                runs.push(names);
                runs.len() == 1
            };
            if first {
                // The first run labels p1; the answer is at rv 20, recorded by itself.
                let pods: ApiClient<Pod, Cluster> = ApiClient::namespaced(ctx.0.clone(), "ns");
                let patch = Patch::Merge(serde_json::json!({"metadata":{"labels":{"seen":"1"}}}));
                pods.patch("p1", &PatchParams::default(), &patch)
                    .await
                    .map_err(|e| e.to_string())?;
            }
            Ok::<_, String>(Action::await_change())
        },
        default_error_policy,
        ctx,
    ));
    until("the first run", || runs.lock().unwrap().len() == 1).await;
    until("the write recorded", || {
        handle.metrics().own_writes_waiting == 1
    })
    .await;
    // A pod of `a` written before our patch: `a` is woken, but held.
    tx.send(frame("ADDED", "p2", 15)).await.unwrap();
    until("the hold", || handle.stats().own_write_holds == 1).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(runs.lock().unwrap().len(), 1, "held: no second run yet");
    // The echo of the patch: `a` runs, seeing both pods.
    tx.send(frame("MODIFIED", "p1", 20)).await.unwrap();
    until("the second run", || runs.lock().unwrap().len() == 2).await;
    assert_eq!(runs.lock().unwrap()[1], ["p1", "p2"]);
    let m = handle.metrics();
    assert_eq!(m.own_write_holds_total, 1);
    assert_eq!(m.own_write_timeouts_total, 0);
    assert_eq!(m.own_writes_waiting, 0);
    assert_eq!(cluster.patches.load(Ordering::SeqCst), 1);
    stop_cleanly(&handle, task).await;
}

fn pod(name: &str, cell: &str) -> PodView {
    serde_json::from_str(&format!(
        r#"{{"metadata":{{"name":"{name}","namespace":"ns","resourceVersion":"1","labels":{{"cell":"{cell}"}}}}}}"#
    ))
    .expect("a pod")
}

#[tokio::test(start_paused = true)]
async fn a_reconcile_past_its_deadline_is_cancelled_counted_and_retried() {
    let controller: Controller<PodView, String, Paused, NoTransport> = Controller::with_runtime(
        paused().await,
        Source::in_process(),
        KeyMap::by_label("cell"),
    )
    .reconcile_timeout(Some(Duration::from_secs(1)))
    .backoff(Duration::from_millis(10), Duration::from_millis(100));
    let handle = controller.handle();
    handle
        .replace(vec![pod("a1", "a"), pod("b1", "b")])
        .await
        .expect("pushed");
    let attempts: Arc<Mutex<Vec<(String, u32)>>> = Arc::default();
    let task = tokio::spawn(controller.run(
        |req: Reconcile<PodView, String>, attempts: Arc<Mutex<Vec<(String, u32)>>>| async move {
            attempts
                .lock()
                .unwrap()
                .push((req.parent().clone(), req.attempt()));
            match (req.parent().as_str(), req.attempt()) {
                // `a` hangs past the controller's 1 s the first time.
                ("a", 1) => tokio::time::sleep(Duration::from_secs(3600)).await,
                // `b` shortens its own deadline to 100 ms, then takes 500 ms.
                ("b", 1) => {
                    req.set_timeout(Some(Duration::from_millis(100))).await;
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                _ => {}
            }
            Ok::<_, String>(Action::await_change())
        },
        default_error_policy,
        Arc::clone(&attempts),
    ));
    until("both retried", || attempts.lock().unwrap().len() == 4).await;
    assert_eq!(
        *attempts.lock().unwrap(),
        [
            // One slot: `a`'s retry, 10 ms after its timeout, waits behind `b`.
            ("a".to_owned(), 1),
            ("b".to_owned(), 1),
            ("a".to_owned(), 2),
            ("b".to_owned(), 2)
        ]
    );
    let m = handle.metrics();
    assert_eq!(m.reconcile_timeouts_total, 2);
    assert_eq!(m.reconcile_errors_total, 2);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(
        &mut text,
        &reconcile_engine::metrics::registry_with(handle.collector()),
    )
    .unwrap();
    assert!(
        text.contains("controller_runtime_reconcile_timeouts_total{controller=")
            && text.contains("} 2"),
        "{text}"
    );
    stop_cleanly(&handle, task).await;
}

/// Read your own writes on a shared cache's subscriber: the reflector's cursor travels
/// with the feed, so a subscriber whose reconcile patched a pod is not run again until the
/// shared cache has the patch, and then sees it.
#[tokio::test(start_paused = true)]
async fn a_subscribers_own_write_holds_it_until_the_shared_cache_has_it() {
    let (tx, lines) = async_channel::unbounded();
    let cluster = Cluster {
        lines,
        patches: Arc::default(),
    };
    let source: Source<PodView, Cluster> = Source::pods(cluster.clone(), Some("ns")).timeout(60);
    let reflector = reconcile_engine::Reflector::with_runtime(paused().await, source);
    let shared = reflector.shared();
    let reflector_handle = reflector.handle();
    let reflecting = tokio::spawn(reflector.run());
    let subscriber = Controller::<PodView, String, Paused, Cluster>::for_shared_with(
        paused().await,
        shared,
        KeyMap::by_label("cell"),
    );
    let handle = subscriber.handle();
    // Each run: the members' names and resourceVersions.
    let runs: Arc<Mutex<Vec<Vec<String>>>> = Arc::default();
    let ctx = Arc::new((cluster.clone(), Arc::clone(&runs)));
    type Ctx = (Cluster, Arc<Mutex<Vec<Vec<String>>>>);
    let task = tokio::spawn(subscriber.run(
        |req: Reconcile<PodView, String>, ctx: Arc<Ctx>| async move {
            let seen: Vec<String> = req
                .members()
                .iter()
                .map(|p| {
                    format!(
                        "{}@{}",
                        p.metadata.name.as_deref().unwrap_or(""),
                        p.metadata.resource_version.as_deref().unwrap_or("")
                    )
                })
                .collect();
            let first = {
                let mut runs = ctx.1.lock().unwrap();
                runs.push(seen);
                runs.len() == 1
            };
            if first {
                let pods: ApiClient<Pod, Cluster> = ApiClient::namespaced(ctx.0.clone(), "ns");
                let patch = Patch::Merge(serde_json::json!({"metadata":{"labels":{"seen":"1"}}}));
                pods.patch("p1", &PatchParams::default(), &patch)
                    .await
                    .map_err(|e| e.to_string())?;
            }
            Ok::<_, String>(Action::await_change())
        },
        default_error_policy,
        ctx,
    ));
    until("the first run", || runs.lock().unwrap().len() == 1).await;
    until("the subscriber has the shared cursor", || {
        handle.cursor().as_deref() == Some("10")
    })
    .await;
    until("the write is waited for", || {
        handle.metrics().own_writes_waiting == 1
    })
    .await;
    // A pod of `a` written before the patch: `a` is woken, but held.
    tx.send(frame("ADDED", "p2", 15)).await.unwrap();
    until("the hold", || handle.stats().own_write_holds == 1).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(runs.lock().unwrap().len(), 1, "held: no second run yet");
    assert_eq!(handle.cursor().as_deref(), Some("15"));
    // The shared cache gets the patch: `a` runs, seeing its own write.
    tx.send(frame("MODIFIED", "p1", 20)).await.unwrap();
    until("the second run", || runs.lock().unwrap().len() == 2).await;
    assert_eq!(runs.lock().unwrap()[1], ["p1@20", "p2@15"]);
    let m = handle.metrics();
    assert_eq!(m.own_write_holds_total, 1);
    assert_eq!(m.own_write_timeouts_total, 0);
    assert_eq!(m.own_writes_waiting, 0);
    assert_eq!(cluster.patches.load(Ordering::SeqCst), 1);
    stop_cleanly(&handle, task).await;
    stop_cleanly(&reflector_handle, reflecting).await;
}
