//! A controller that owns children of another kind: Pods (the primary) own ConfigMaps
//! (`Controller::owns`). The LISTs and WATCHes of each go to their own collection, the
//! reconcile waits for both to sync, and each reconcile gets its ConfigMaps typed. On tokio
//! with paused time (see `support`).

// Shared by several test binaries; this one uses part of it.
#[allow(dead_code)]
mod support;

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use reconcile_core::{ObjectKey, Predicate};
use reconcile_engine::{
    Action, BodyStream, BoxFuture, Controller, Reconcile, Source, Transport, TransportError,
    default_error_policy,
};
use support::{Paused, paused, stop_cleanly, until};

const PODS: &str = r#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"10"},"items":[
  {"metadata":{"name":"a","namespace":"ns","resourceVersion":"5","uid":"u-a"}}]}"#;

const CONFIGMAPS: &str = r#"{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"20"},"items":[
  {"metadata":{"name":"a-1","namespace":"ns","resourceVersion":"11","ownerReferences":[{"apiVersion":"v1","kind":"Pod","name":"a","uid":"u-a","controller":true}]}},
  {"metadata":{"name":"stray","namespace":"ns","resourceVersion":"12"}}]}"#;

const CONFIGMAP_ADDED: &str = r#"{"type":"ADDED","object":{"metadata":{"name":"a-2","namespace":"ns","resourceVersion":"21","ownerReferences":[{"apiVersion":"v1","kind":"Pod","name":"a","uid":"u-a","controller":true}]}}}"#;

/// A data-only change of `a-1`: no label moves.
const CONFIGMAP_DATA: &str = r#"{"type":"MODIFIED","object":{"metadata":{"name":"a-1","namespace":"ns","resourceVersion":"22","ownerReferences":[{"apiVersion":"v1","kind":"Pod","name":"a","uid":"u-a","controller":true}]},"data":{"k":"v"}}}"#;

/// Answers each collection's LIST, and each WATCH with its lines; keeps the paths sent.
#[derive(Clone, Default)]
struct TwoCollections {
    sent: Arc<Mutex<Vec<String>>>,
    /// Lines the configmaps' WATCH sends before `CONFIGMAP_ADDED`.
    before_added: Vec<&'static str>,
}

impl Transport for TwoCollections {
    fn send(
        &self,
        request: http::Request<Vec<u8>>,
    ) -> BoxFuture<Result<http::Response<BodyStream>, TransportError>> {
        let path = request.uri().to_string();
        self.sent.lock().unwrap().push(path.clone());
        let watch = path.contains("watch=true");
        let configmaps = path.starts_with("/api/v1/namespaces/ns/configmaps");
        let body: BodyStream = match (watch, configmaps) {
            (false, false) => Box::pin(futures_lite::stream::once(Ok(Bytes::from(PODS)))),
            (false, true) => Box::pin(futures_lite::stream::once(Ok(Bytes::from(CONFIGMAPS)))),
            (true, false) => Box::pin(futures_lite::stream::pending()),
            (true, true) => {
                let mut lines: String =
                    self.before_added.iter().map(|l| format!("{l}\n")).collect();
                lines.push_str(&format!("{CONFIGMAP_ADDED}\n"));
                Box::pin(futures_lite::stream::StreamExt::chain(
                    futures_lite::stream::once(Ok(Bytes::from(lines))),
                    futures_lite::stream::pending(),
                ))
            }
        };
        Box::pin(async move { Ok(http::Response::builder().status(200).body(body).unwrap()) })
    }
}

type Seen = Arc<Mutex<Vec<(String, Vec<String>)>>>;

#[tokio::test(start_paused = true)]
async fn a_reconcile_gets_the_children_its_object_controls() {
    let transport = TwoCollections::default();
    let controller: Controller<Pod, ObjectKey, Paused, TwoCollections> =
        Controller::for_objects_with(paused().await, Source::namespaced(transport.clone(), "ns"))
            .owns(Source::<ConfigMap, _>::namespaced(transport.clone(), "ns"));
    let handle = controller.handle();
    let seen: Seen = Arc::default();
    let task = tokio::spawn(controller.run(
        |req: Reconcile<Pod, ObjectKey>, seen: Seen| async move {
            let children = req
                .related::<ConfigMap>()
                .iter()
                .filter_map(|c| c.metadata.name.clone())
                .collect();
            seen.lock()
                .unwrap()
                .push((req.parent().to_string(), children));
            Ok::<_, String>(Action::await_change())
        },
        default_error_policy,
        Arc::clone(&seen),
    ));
    until("a reconciled with both children", || {
        seen.lock()
            .unwrap()
            .last()
            .is_some_and(|(_, c)| c == &["a-1", "a-2"])
    })
    .await;
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen[0], ("ns/a".to_owned(), vec!["a-1".to_owned()]));
    assert!(
        seen.iter().all(|(p, _)| p == "ns/a"),
        "the stray has no owner: {seen:?}"
    );
    let sent = transport.sent.lock().unwrap().clone();
    for path in [
        "/api/v1/namespaces/ns/pods?",
        "/api/v1/namespaces/ns/configmaps?",
    ] {
        assert_eq!(
            sent.iter()
                .filter(|s| s.starts_with(path) && !s.contains("watch=true"))
                .count(),
            1,
            "one LIST of {path}: {sent:?}"
        );
    }
    stop_cleanly(&handle, task).await;
}

#[tokio::test(start_paused = true)]
async fn a_predicate_on_the_children_source_keeps_their_data_changes_from_waking() {
    let transport = TwoCollections {
        before_added: vec![CONFIGMAP_DATA],
        ..TwoCollections::default()
    };
    let children = Source::<ConfigMap, _>::namespaced(transport.clone(), "ns")
        .predicate(Predicate::LabelsChanged);
    let controller: Controller<Pod, ObjectKey, Paused, TwoCollections> =
        Controller::for_objects_with(paused().await, Source::namespaced(transport.clone(), "ns"))
            .owns(children);
    let handle = controller.handle();
    let seen: Seen = Arc::default();
    let task = tokio::spawn(controller.run(
        |req: Reconcile<Pod, ObjectKey>, seen: Seen| async move {
            let children = req
                .related::<ConfigMap>()
                .iter()
                .map(|c| {
                    let data = c.data.as_ref().map_or(0, |d| d.len());
                    format!("{}:{data}", c.metadata.name.as_deref().unwrap_or(""))
                })
                .collect();
            seen.lock()
                .unwrap()
                .push((req.parent().to_string(), children));
            Ok::<_, String>(Action::await_change())
        },
        default_error_policy,
        Arc::clone(&seen),
    ));
    until("a reconciled with a-2", || {
        seen.lock()
            .unwrap()
            .last()
            .is_some_and(|(_, c)| c.len() == 2)
    })
    .await;
    // The data change was cached (the reconcile woken by a-2 sees it) and counted as
    // filtered, and it woke nothing by itself.
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.last().unwrap().1, ["a-1:1", "a-2:0"]);
    until("the filtered update is counted", || {
        handle.metrics().filtered_total == 1
    })
    .await;
    stop_cleanly(&handle, task).await;
}
