//! The engine's helpers against the real apiserver, on each driver: the finalizer helper
//! (through the stuck-finalizer operator's fixed twin, `reconcile_examples::buggy`) and
//! the events recorder (a repeat becomes a series on the apiserver's Event).

use std::sync::Arc;

use k8s_openapi::api::core::v1::ObjectReference;
use reconcile_engine::events::{Event, EventType, Recorder, Reporter};
use reconcile_examples::buggy::{self, Bug, FINALIZER, Variant};
use reconcile_k8s_env::ApiServer;
use serde_json::{Value, json};

use crate::harness::{Case, DriverUnderTest, WAIT};

/// A widget's finalizer is added, its child made; deleting the widget runs the cleanup,
/// which deletes the child, and the finalizer goes, so the widget goes. Two publications
/// of one event make one Event with `series.count` 2.
pub async fn a_finalizer_holds_a_widget_until_its_cleanup_and_events_become_a_series<
    D: DriverUnderTest,
>(
    case: Case<D>,
) {
    let _steady = case.env.steady();
    let ns = case.namespace();
    let transport = D::connect(case.env.kubeconfig_path(ApiServer::Cached))
        .await
        .unwrap_or_else(|e| panic!("{}: cannot connect: {e}", case.name));
    buggy::install_crd(&case.runtime, transport.clone(), WAIT)
        .await
        .unwrap_or_else(|e| panic!("{}: {e}", case.name));
    let ctx = Arc::new(buggy::context(
        &case.runtime,
        transport.clone(),
        Bug::StuckFinalizer,
        Variant::Fixed,
    ));
    let running = buggy::controller(case.runtime.clone(), transport.clone(), &ns)
        .start(buggy::reconcile, buggy::error_policy, ctx)
        .await
        .unwrap_or_else(|e| panic!("{}: the controller does not start: {e}", case.name));

    let widgets = format!("/apis/buggy.reconcile-loop.dev/v1/namespaces/{ns}/widgets");
    let widget = format!("{widgets}/w");
    let child = format!(
        "/api/v1/namespaces/{ns}/configmaps/{}",
        buggy::child_name("w")
    );
    let api = case.api();
    let created = api
        .create(
            &widgets,
            &json!({
                "apiVersion": "buggy.reconcile-loop.dev/v1", "kind": "Widget",
                "metadata": {"name": "w"}, "spec": {"content": "hello", "replicas": 1},
            }),
        )
        .unwrap_or_else(|e| panic!("{}: create: {e}", case.name));
    case.eventually("the finalizer on the widget, and its child", || {
        let w = api.get(&widget).map_err(|e| e.to_string())?;
        let finalizers = w["metadata"]["finalizers"].clone();
        if finalizers != json!([FINALIZER]) {
            return Err(format!("finalizers {finalizers}"));
        }
        match api.get_opt(&child).map_err(|e| e.to_string())? {
            Some(c) if c["data"]["content"] == "hello" => Ok(()),
            other => Err(format!("child {other:?}")),
        }
    })
    .await;

    // Two publications of one event: one Event, then its series.
    let recorder: Recorder<D::Transport> = Recorder::new(
        transport.clone(),
        Reporter {
            controller: "reconcile-loop.dev/e2e".into(),
            instance: None,
        },
    );
    let regarding = ObjectReference {
        api_version: Some("buggy.reconcile-loop.dev/v1".into()),
        kind: Some("Widget".into()),
        name: Some("w".into()),
        namespace: Some(ns.clone()),
        uid: created["metadata"]["uid"].as_str().map(str::to_owned),
        ..ObjectReference::default()
    };
    let event = Event {
        type_: EventType::Normal,
        reason: "Cleaned".into(),
        note: Some("the widget's child is in step".into()),
        action: "Reconcile".into(),
        secondary: None,
    };
    for _ in 0..2 {
        recorder
            .publish(&event, &regarding)
            .await
            .unwrap_or_else(|e| panic!("{}: publish: {e}", case.name));
    }
    let events = format!("/apis/events.k8s.io/v1/namespaces/{ns}/events");
    let list = api
        .get(&events)
        .unwrap_or_else(|e| panic!("{}: list events: {e}", case.name));
    let mine: Vec<&Value> = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["reason"] == "Cleaned" && e["regarding"]["name"] == "w")
        .collect();
    assert_eq!(mine.len(), 1, "{}: one Event: {mine:?}", case.name);
    assert_eq!(mine[0]["series"]["count"], 2, "{}: {}", case.name, mine[0]);
    assert_eq!(mine[0]["reportingController"], "reconcile-loop.dev/e2e");

    api.delete(&widget, None)
        .unwrap_or_else(|e| panic!("{}: delete: {e}", case.name));
    case.eventually("the widget and its child gone", || {
        let w = api.get_opt(&widget).map_err(|e| e.to_string())?;
        let c = api.get_opt(&child).map_err(|e| e.to_string())?;
        match (w, c) {
            (None, None) => Ok(()),
            (w, c) => Err(format!(
                "widget {:?}, child {}",
                w.map(|w| w["metadata"]["finalizers"].clone()),
                c.is_some()
            )),
        }
    })
    .await;
    running
        .shutdown()
        .await
        .unwrap_or_else(|e| panic!("{}: stop: {e}", case.name));
}
