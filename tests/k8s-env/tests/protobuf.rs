//! Kubernetes protobuf from the real apiserver (issue 16): a pod LIST and a WATCH fetched in
//! protobuf and in JSON at the same resourceVersions decode to the same `PodView`s with the
//! core's decoders, and an error's `Status` comes and decodes in protobuf too. With `RECONCILE_WRITE_PROTOBUF_FIXTURES=1` the bytes
//! are kept as the fixtures in `testdata/apiserver-protobuf`, which the core's tests
//! decode without an apiserver.

use std::time::Duration;

use reconcile_core::WireFormat;
use reconcile_core::frame::{WatchEvent, parse_frame_as};
use reconcile_core::list::parse_list;
use reconcile_core::pod::PodView;
use reconcile_k8s_env::{
    ApiServer, K8sEnv, keep_capture, pod_manifest, pod_phase, protobuf_frames, resource_version,
    shared_or_skip, wait_for,
};
use serde_json::json;

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
const ACCEPT: &str = "application/vnd.kubernetes.protobuf, application/json";
const WAIT: Duration = Duration::from_secs(60);

fn rv_of(event: &WatchEvent<PodView>) -> u64 {
    match event {
        WatchEvent::Added(p) | WatchEvent::Modified(p) | WatchEvent::Deleted(p) => p
            .metadata
            .resource_version
            .as_deref()
            .and_then(|rv| rv.parse().ok())
            .unwrap_or(0),
        _ => 0,
    }
}

fn running(env: &K8sEnv, ns: &str, pod: &str) {
    let api = env.client(ApiServer::Cached);
    wait_for(WAIT, &format!("pod {ns}/{pod} Running"), || {
        match api.get_pod(ns, pod) {
            Ok(Some(p)) if pod_phase(&p) == "Running" => Ok(()),
            Ok(p) => Err(format!("{p:?}")),
            Err(e) => Err(e.to_string()),
        }
    })
    .unwrap();
}

#[test]
fn protobuf_lists_and_watches_decode_as_their_json() {
    let Some(env) = shared_or_skip("protobuf_lists_and_watches_decode_as_their_json") else {
        return;
    };
    let _steady = env.steady();
    let ns = env.unique_namespace("protobuf").unwrap();
    let api = env.client(ApiServer::Cached);
    let path = format!("/api/v1/namespaces/{ns}/pods");
    let start = api.get(&path).unwrap();
    let rv0 = resource_version(&start).to_owned();

    for name in ["web-0", "web-1"] {
        let mut pod = pod_manifest(name, &[("app", "web"), ("cell", name)]);
        pod["metadata"]["annotations"] = json!({"note": "x".repeat(40)});
        pod["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1",
            "kind": "ReplicaSet", "name": "web", "uid": "8c4e1f5a-0000-4000-8000-000000000001",
            "controller": true}]);
        api.create_pod(&ns, &pod).unwrap();
    }
    for name in ["web-0", "web-1"] {
        running(env, &ns, name);
    }
    api.patch_pod(
        &ns,
        "web-0",
        &json!({"metadata": {"labels": {"cell": "moved"}}}),
    )
    .unwrap();
    api.delete(&format!("{path}/web-1"), Some(0)).unwrap();

    // One LIST in JSON, then the same resourceVersion exactly in protobuf.
    let json_list = api.get(&path).unwrap();
    let rv = resource_version(&json_list).to_owned();
    let exact = format!("{path}?resourceVersion={rv}&resourceVersionMatch=Exact");
    let (_, _, json_body) = api.get_bytes(&exact, "application/json").unwrap();
    let (_, content_type, pb_body) = api.get_bytes(&exact, ACCEPT).unwrap();
    assert!(content_type.starts_with(PROTOBUF), "{content_type}");
    assert!(pb_body.starts_with(b"k8s\0"));
    let from_json = parse_list::<PodView>(&json_body).unwrap();
    let from_pb = parse_list::<PodView>(&pb_body).unwrap();
    assert_eq!(from_pb.resource_version, rv);
    assert!(from_pb.skipped.is_empty(), "{:?}", from_pb.skipped);
    assert_eq!(from_pb.items, from_json.items);
    let web0 = from_pb
        .items
        .iter()
        .find(|p| p.metadata.name.as_deref() == Some("web-0"))
        .expect("web-0 listed");
    assert!(web0.status.is_running_and_ready(), "{web0:?}");
    assert_eq!(web0.metadata.labels.get("cell"), Some("moved"));
    assert!(web0.metadata.controller.is_some());
    assert!(!web0.status.container_statuses.is_empty());

    // The WATCH from before the pods, in both encodings, up to the LIST's version.
    let watch = format!(
        "{path}?watch=true&resourceVersion={rv0}&timeoutSeconds=2&allowWatchBookmarks=false"
    );
    let (_, content_type, pb_watch) = api.get_bytes(&watch, ACCEPT).unwrap();
    assert!(
        content_type.starts_with(PROTOBUF) && content_type.contains("stream=watch"),
        "{content_type}"
    );
    let (_, _, json_watch) = api.get_bytes(&watch, "application/json").unwrap();
    let limit: u64 = rv.parse().unwrap();
    let pb_events: Vec<_> = protobuf_frames(&pb_watch)
        .into_iter()
        .map(|f| parse_frame_as::<PodView>(f, WireFormat::Protobuf).unwrap())
        .filter(|e| rv_of(e) <= limit)
        .collect();
    let json_events: Vec<_> = json_watch
        .split(|b| *b == b'\n')
        .filter(|l| !l.trim_ascii().is_empty())
        .map(|l| parse_frame_as::<PodView>(l, WireFormat::Json).unwrap())
        .filter(|e| rv_of(e) <= limit)
        .collect();
    assert!(pb_events.len() >= 5, "{pb_events:?}");
    assert_eq!(pb_events, json_events);
    assert!(
        pb_events
            .iter()
            .any(|e| matches!(e, WatchEvent::Deleted(_)))
    );

    // An error's Status comes in protobuf too (a GET of a pod that is not there).
    let (status, content_type, error_body) =
        api.get_bytes(&format!("{path}/not-there"), ACCEPT).unwrap();
    assert_eq!(status, 404);
    assert!(content_type.starts_with(PROTOBUF), "{content_type}");
    let error = reconcile_core::frame::parse_status(&error_body).expect("a protobuf Status");
    assert_eq!(error.code, Some(404), "{error}");
    assert_eq!(error.reason.as_deref(), Some("NotFound"), "{error}");

    keep_capture("", "pod-list.pb", &pb_body);
    keep_capture("", "pod-list.json", &json_body);
    keep_capture("", "watch.pb", &pb_watch);
    keep_capture("", "watch.jsonl", &json_watch);
    keep_capture("", "not-found-status.pb", &error_body);
    keep_capture("", "list-rv", rv.as_bytes());
    api.delete_namespace(&ns).unwrap();
}
