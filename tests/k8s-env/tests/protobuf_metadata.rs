//! Metadata only over protobuf on the real apiserver (issue 16): LISTs and WATCHes that ask,
//! as client-go's metadata client does, for `PartialObjectMetadata` in protobuf, answered so
//! for built-in kinds and for a custom resource alike, decode with the core's decoders into
//! the same `PartialObjectMeta`s as their JSON at the same resourceVersion. With
//! `RECONCILE_WRITE_PROTOBUF_FIXTURES=1` the bodies are kept in
//! `testdata/apiserver-protobuf/metadata`, which the core's tests decode without an apiserver.

use std::fmt::Debug;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube_core::{DynamicObject, PartialObjectMeta, TypeMeta};
use reconcile_core::WireFormat;
use reconcile_core::frame::{WatchEvent, parse_frame_as};
use reconcile_core::list::parse_list;
use reconcile_k8s_env::{
    ApiServer, Client, keep_capture, protobuf_frames, resource_version, shared_or_skip, wait_for,
};
use serde_json::json;

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
/// client-go's metadata client, header for header.
const LIST_PROTOBUF: &str = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;\
                             g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;\
                             g=meta.k8s.io;v=v1,application/json";
const WATCH_PROTOBUF: &str = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;\
                              g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadata;\
                              g=meta.k8s.io;v=v1,application/json";
/// kube's metadata API (JSON only).
const LIST_JSON: &str = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
const WATCH_JSON: &str = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
const LABEL: &str = "reconcile-loop.dev/protobuf-metadata";

/// What a `PartialObjectMeta` holds (it has no `PartialEq`).
fn views<K>(items: &[PartialObjectMeta<K>]) -> Vec<(Option<TypeMeta>, &ObjectMeta)> {
    items
        .iter()
        .map(|o| (o.types.clone(), &o.metadata))
        .collect()
}

/// Each event's type and what its object holds.
fn events<K>(
    events: &[WatchEvent<PartialObjectMeta<K>>],
) -> Vec<(&'static str, Option<TypeMeta>, &ObjectMeta)> {
    events
        .iter()
        .filter_map(|e| match e {
            WatchEvent::Added(o) => Some(("ADDED", o)),
            WatchEvent::Modified(o) => Some(("MODIFIED", o)),
            WatchEvent::Deleted(o) => Some(("DELETED", o)),
            _ => None,
        })
        .map(|(kind, o)| (kind, o.types.clone(), &o.metadata))
        .collect()
}

/// Lists `collection` (this run's objects) as metadata in JSON, then at the same
/// resourceVersion in protobuf; both decode to the same `PartialObjectMeta<K>`s, `count` of
/// them, each typed `meta.k8s.io/v1` `PartialObjectMetadata` as JSON types it. Returns the
/// resourceVersion.
fn list_in_both<K>(api: &Client, collection: &str, selector: &str, file: &str, count: usize) -> u64
where
    PartialObjectMeta<K>: reconcile_core::Object + Debug,
{
    let path = format!("{collection}?labelSelector={selector}");
    let listed = api.get(&path).unwrap();
    let rv = resource_version(&listed).to_owned();
    let exact = format!("{path}&resourceVersion={rv}&resourceVersionMatch=Exact");
    let (status, content_type, json_body) = api.get_bytes(&exact, LIST_JSON).unwrap();
    assert_eq!(
        status,
        200,
        "{file}: {}",
        String::from_utf8_lossy(&json_body)
    );
    assert!(
        content_type.starts_with("application/json"),
        "{file}: {content_type}"
    );
    let (status, content_type, pb_body) = api.get_bytes(&exact, LIST_PROTOBUF).unwrap();
    assert_eq!(status, 200, "{file}");
    assert!(content_type.starts_with(PROTOBUF), "{file}: {content_type}");
    let from_json = parse_list::<PartialObjectMeta<K>>(&json_body)
        .unwrap_or_else(|e| panic!("{file} JSON: {e}"));
    let from_pb = parse_list::<PartialObjectMeta<K>>(&pb_body)
        .unwrap_or_else(|e| panic!("{file} protobuf: {e}"));
    assert!(from_pb.skipped.is_empty(), "{file}: {:?}", from_pb.skipped);
    assert_eq!(from_pb.items.len(), count, "{file}");
    assert_eq!(from_pb.resource_version, rv, "{file}");
    assert_eq!(views(&from_pb.items), views(&from_json.items), "{file}");
    for item in &from_pb.items {
        let types = item.types.as_ref().expect("typed as in JSON");
        assert_eq!(
            (types.api_version.as_str(), types.kind.as_str()),
            ("meta.k8s.io/v1", "PartialObjectMetadata"),
            "{file}"
        );
        let meta = &item.metadata;
        assert!(
            meta.uid.is_some() && meta.creation_timestamp.is_some(),
            "{file}: {meta:?}"
        );
        assert!(
            meta.managed_fields.as_ref().is_some_and(|m| !m.is_empty()),
            "{file}"
        );
        assert_eq!(
            meta.labels
                .as_ref()
                .and_then(|l| l.get("app"))
                .map(String::as_str),
            Some("web"),
            "{file}"
        );
    }
    keep_capture("metadata", &format!("{file}-list.pb"), &pb_body);
    keep_capture("metadata", &format!("{file}-list.json"), &json_body);
    rv.parse().unwrap()
}

/// The WATCH of `collection` from `range.0` (before its objects), as metadata in both
/// encodings, up to `range.1`: the same events, a deletion among them.
fn watch_in_both<K>(api: &Client, collection: &str, selector: &str, file: &str, range: (u64, u64))
where
    PartialObjectMeta<K>: reconcile_core::Object + Debug,
{
    let (from, until) = range;
    let watch = format!(
        "{collection}?watch=true&labelSelector={selector}&resourceVersion={from}\
         &timeoutSeconds=2&allowWatchBookmarks=false"
    );
    let (status, content_type, pb_watch) = api.get_bytes(&watch, WATCH_PROTOBUF).unwrap();
    assert_eq!(status, 200, "{file}");
    assert!(
        content_type.starts_with(PROTOBUF) && content_type.contains("stream=watch"),
        "{file}: {content_type}"
    );
    let (_, _, json_watch) = api.get_bytes(&watch, WATCH_JSON).unwrap();
    let rv_of = |event: &WatchEvent<PartialObjectMeta<K>>| -> u64 {
        match event {
            WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) => o
                .metadata
                .resource_version
                .as_deref()
                .and_then(|rv| rv.parse().ok())
                .unwrap_or(u64::MAX),
            _ => u64::MAX,
        }
    };
    let pb_events: Vec<_> = protobuf_frames(&pb_watch)
        .into_iter()
        .map(|f| {
            parse_frame_as::<PartialObjectMeta<K>>(f, WireFormat::Protobuf)
                .unwrap_or_else(|e| panic!("{file} protobuf frame: {e}"))
        })
        .filter(|e| rv_of(e) <= until)
        .collect();
    let json_events: Vec<_> = json_watch
        .split(|b| *b == b'\n')
        .filter(|l| !l.trim_ascii().is_empty())
        .map(|l| parse_frame_as::<PartialObjectMeta<K>>(l, WireFormat::Json).unwrap())
        .filter(|e| rv_of(e) <= until)
        .collect();
    assert!(pb_events.len() >= 3, "{file}: {pb_events:?}");
    assert_eq!(events(&pb_events), events(&json_events), "{file}");
    assert!(
        pb_events
            .iter()
            .any(|e| matches!(e, WatchEvent::Deleted(_))),
        "{file}: {pb_events:?}"
    );
    keep_capture("metadata", &format!("{file}-watch.pb"), &pb_watch);
    keep_capture("metadata", &format!("{file}-watch.jsonl"), &json_watch);
}

#[test]
#[allow(clippy::too_many_lines)] // three built-in kinds and a custom resource, each made then read
fn metadata_only_decodes_from_protobuf_as_from_json_for_every_resource() {
    let Some(env) =
        shared_or_skip("metadata_only_decodes_from_protobuf_as_from_json_for_every_resource")
    else {
        return;
    };
    let _steady = env.steady();
    let ns = env.unique_namespace("protobuf-metadata").unwrap();
    let api = env.client(ApiServer::Cached);
    let run = ns.as_str();
    let sel = format!("{LABEL}%3D{run}");
    let meta = |name: &str| {
        json!({
            "name": name,
            "labels": {LABEL: run, "app": "web"},
            "annotations": {"note": "metadata over protobuf"},
            "finalizers": ["example.invalid/keep"],
            "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
                "uid": "8c4e1f5a-0000-4000-8000-000000000001", "controller": true,
                "blockOwnerDeletion": false}]
        })
    };
    // Finalizers hold each deleted object until they are removed: a deletion is then a
    // MODIFIED (with its deletionTimestamp) and a DELETED, both in the watch.
    let delete = |path: &str| {
        api.delete(path, Some(0)).unwrap();
        api.merge_patch(path, &json!({"metadata": {"finalizers": null}}))
            .unwrap();
    };

    // The custom resource's definition first: it takes a moment to be served.
    let group = format!("{run}.metadata.invalid");
    let crd = format!("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gadgets.{group}");
    api.create(
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        &json!({
            "metadata": {"name": format!("gadgets.{group}")},
            "spec": {
                "group": group,
                "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget",
                          "listKind": "GadgetList"},
                "scope": "Namespaced",
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object",
                        "x-kubernetes-preserve-unknown-fields": true}}}]
            }
        }),
    )
    .unwrap();
    let gadgets = format!("/apis/{group}/v1/namespaces/{ns}/gadgets");
    wait_for(
        Duration::from_secs(60),
        "the custom resource served",
        || {
            api.get_opt(&gadgets)
                .map_err(|e| e.to_string())?
                .ok_or_else(|| "not yet".to_owned())
        },
    )
    .unwrap();

    let collections = [
        format!("/api/v1/namespaces/{ns}/configmaps"),
        format!("/api/v1/namespaces/{ns}/secrets"),
        format!("/apis/apps/v1/namespaces/{ns}/deployments"),
        gadgets.clone(),
    ];
    let from: Vec<u64> = collections
        .iter()
        .map(|c| resource_version(&api.get(c).unwrap()).parse().unwrap())
        .collect();

    for name in ["a", "b"] {
        api.create(
            &collections[0],
            &json!({"metadata": meta(name), "data": {"k": "v"}}),
        )
        .unwrap();
        // Metadata only: the secret's data never reaches the decoder.
        api.create(
            &collections[1],
            &json!({"metadata": meta(name), "stringData": {"token": "s3cr3t"}}),
        )
        .unwrap();
        api.create(
            &collections[2],
            &json!({"metadata": meta(name), "spec": {
                "replicas": 0,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "app", "image": "registry.invalid/app:1"}]}}
            }}),
        )
        .unwrap();
        api.create(
            &collections[3],
            &json!({"apiVersion": format!("{group}/v1"), "kind": "Gadget",
                    "metadata": meta(name), "spec": {"size": 3}}),
        )
        .unwrap();
    }
    for collection in &collections {
        api.merge_patch(
            &format!("{collection}/a"),
            &json!({"metadata": {"labels": {"cell": "moved"}, "annotations": {"note": null}}}),
        )
        .unwrap();
        delete(&format!("{collection}/b"));
    }

    let files = ["v1-configmap", "v1-secret", "apps-v1-deployment", "gadget"];
    let until = [
        list_in_both::<ConfigMap>(api, &collections[0], &sel, files[0], 1),
        list_in_both::<Secret>(api, &collections[1], &sel, files[1], 1),
        list_in_both::<Deployment>(api, &collections[2], &sel, files[2], 1),
        list_in_both::<DynamicObject>(api, &collections[3], &sel, files[3], 1),
    ];
    watch_in_both::<ConfigMap>(api, &collections[0], &sel, files[0], (from[0], until[0]));
    watch_in_both::<Secret>(api, &collections[1], &sel, files[1], (from[1], until[1]));
    watch_in_both::<Deployment>(api, &collections[2], &sel, files[2], (from[2], until[2]));
    watch_in_both::<DynamicObject>(api, &collections[3], &sel, files[3], (from[3], until[3]));

    for collection in &collections {
        delete(&format!("{collection}/a"));
    }
    api.delete(&crd, Some(0)).unwrap();
    api.delete_namespace(&ns).unwrap();
}
