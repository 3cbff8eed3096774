//! Built-in types decode from protobuf into k8s-openapi's own types as from JSON: the LIST
//! and the WATCH captured from a real kube-apiserver (`testdata/apiserver-protobuf`) give the
//! same `Pod`s in protobuf as in JSON, field for field (issue 16).

use k8s_openapi::api::core::v1::Pod;
use reconcile_core::WireFormat;
use reconcile_core::frame::{WatchEvent, parse_frame_as};
use reconcile_core::list::parse_list;

fn fixture(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/../testdata/apiserver-protobuf/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The frames of a protobuf watch body: 4-byte big-endian lengths.
fn frames(mut body: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    while !body.is_empty() {
        let n = u32::from_be_bytes([body[0], body[1], body[2], body[3]]) as usize;
        out.push(&body[4..4 + n]);
        body = &body[4 + n..];
    }
    out
}

fn rv_of(event: &WatchEvent<Pod>) -> u64 {
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

#[test]
fn a_real_protobuf_list_decodes_into_k8s_openapi_pods_as_its_json() {
    let pb = parse_list::<Pod>(&fixture("pod-list.pb")).expect("the protobuf list");
    let json = parse_list::<Pod>(&fixture("pod-list.json")).expect("the JSON list");
    assert!(!pb.items.is_empty() && pb.skipped.is_empty());
    assert_eq!(pb.resource_version, json.resource_version);
    for (pb, json) in pb.items.iter().zip(&json.items) {
        assert_eq!(
            serde_json::to_value(pb).unwrap(),
            serde_json::to_value(json).unwrap()
        );
    }
    assert_eq!(pb.items, json.items);
    // What JSON carries that a partial view does not: the whole spec and status.
    let pod = &pb.items[0];
    let spec = pod.spec.as_ref().expect("a spec");
    assert!(!spec.containers.is_empty());
    assert!(pod.metadata.creation_timestamp.is_some());
    assert!(pod.metadata.managed_fields.is_some());
}

#[test]
fn a_real_protobuf_watch_decodes_into_k8s_openapi_pods_as_its_json() {
    let rv: u64 = String::from_utf8(fixture("list-rv"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let pb: Vec<_> = frames(&fixture("watch.pb"))
        .into_iter()
        .map(|f| parse_frame_as::<Pod>(f, WireFormat::Protobuf).unwrap())
        .filter(|e| rv_of(e) <= rv)
        .collect();
    let json_watch = fixture("watch.jsonl");
    let json: Vec<_> = json_watch
        .split(|b| *b == b'\n')
        .filter(|l| !l.trim_ascii().is_empty())
        .map(|l| parse_frame_as::<Pod>(l, WireFormat::Json).unwrap())
        .filter(|e| rv_of(e) <= rv)
        .collect();
    assert!(pb.len() >= 5, "{}", pb.len());
    assert_eq!(pb, json);
}
