//! Protobuf built with prost from the same data as JSON must decode to the same view; bad
//! bytes give typed errors that say where.

use std::collections::BTreeMap;

use proptest::prelude::*;
use prost::Message as _;
use serde_json::json;

use super::messages as m;
use super::reader::{GO_ZERO_TIME, LAST_TIME, rfc3339};
use super::*;
use crate::wire::format::WireFormat;
use crate::wire::frame::{FrameErrorKind, WatchEvent, parse_frame, parse_frame_as};
use crate::wire::list::{ListBodyError, ListDecoder, ListLimits, parse_list};
use crate::wire::pod::PodView;

/// (name, container id, restarts, started at, last terminated id)
type ContainerData = (String, Option<String>, i32, Option<i64>, Option<String>);

/// The data of one pod, from which both encodings are built.
#[derive(Debug, Clone, Default)]
struct PodData {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    rv: Option<String>,
    deletion: Option<i64>,
    labels: BTreeMap<String, String>,
    annotations: BTreeMap<String, String>,
    /// (kind, name, controller)
    owners: Vec<(String, String, bool)>,
    node_name: Option<String>,
    subdomain: Option<String>,
    node_selector: BTreeMap<String, String>,
    gates: Vec<String>,
    phase: Option<String>,
    pod_ip: Option<String>,
    /// (type, status, reason)
    conditions: Vec<(String, String, Option<String>)>,
    /// (name, container id, restarts, started at, last terminated id)
    containers: Vec<ContainerData>,
}

fn time_message(seconds: i64) -> m::Time {
    m::Time {
        seconds: Some(seconds),
        nanos: Some(0),
    }
}

impl PodData {
    /// As Go's protobuf writes it: every string, even empty (gogo writes non-pointer fields
    /// always).
    fn message(&self) -> m::Pod {
        let s = |v: &Option<String>| Some(v.clone().unwrap_or_default());
        m::Pod {
            metadata: Some(m::ObjectMeta {
                name: s(&self.name),
                namespace: s(&self.namespace),
                uid: s(&self.uid),
                resource_version: s(&self.rv),
                deletion_timestamp: self.deletion.map(time_message),
                labels: self.labels.clone(),
                annotations: self.annotations.clone(),
                owner_references: self
                    .owners
                    .iter()
                    .map(|(kind, name, controller)| m::OwnerReference {
                        kind: Some(kind.clone()),
                        name: Some(name.clone()),
                        uid: Some("u-1".into()),
                        api_version: Some("apps/v1".into()),
                        controller: Some(*controller),
                    })
                    .collect(),
            }),
            spec: Some(m::PodSpec {
                node_selector: self.node_selector.clone(),
                node_name: s(&self.node_name),
                subdomain: s(&self.subdomain),
                scheduling_gates: self
                    .gates
                    .iter()
                    .map(|g| m::PodSchedulingGate {
                        name: Some(g.clone()),
                    })
                    .collect(),
            }),
            status: Some(m::PodStatus {
                phase: s(&self.phase),
                conditions: self
                    .conditions
                    .iter()
                    .map(|(t, st, reason)| m::PodCondition {
                        r#type: Some(t.clone()),
                        status: Some(st.clone()),
                        reason: s(reason),
                    })
                    .collect(),
                pod_ip: s(&self.pod_ip),
                container_statuses: self
                    .containers
                    .iter()
                    .map(|(name, id, restarts, started, last)| m::ContainerStatus {
                        name: Some(name.clone()),
                        state: Some(m::ContainerState {
                            running: started.map(|t| m::ContainerStateRunning {
                                started_at: Some(time_message(t)),
                            }),
                            terminated: None,
                        }),
                        last_state: Some(m::ContainerState {
                            running: None,
                            terminated: last.as_ref().map(|id| m::ContainerStateTerminated {
                                container_id: Some(id.clone()),
                            }),
                        }),
                        restart_count: Some(*restarts),
                        container_id: s(id),
                    })
                    .collect(),
            }),
        }
    }

    /// As Go's JSON writes it: empty strings and maps left out (`omitempty`).
    fn json(&self) -> serde_json::Value {
        let mut metadata = serde_json::Map::new();
        let put = |map: &mut serde_json::Map<String, serde_json::Value>,
                   key: &str,
                   v: &Option<String>| {
            if let Some(v) = v.as_ref().filter(|v| !v.is_empty()) {
                map.insert(key.into(), json!(v));
            }
        };
        put(&mut metadata, "name", &self.name);
        put(&mut metadata, "namespace", &self.namespace);
        put(&mut metadata, "uid", &self.uid);
        put(&mut metadata, "resourceVersion", &self.rv);
        if let Some(t) = self.deletion {
            metadata.insert("deletionTimestamp".into(), json!(rfc3339(t).as_str()));
        }
        if !self.labels.is_empty() {
            metadata.insert("labels".into(), json!(self.labels));
        }
        if !self.annotations.is_empty() {
            metadata.insert("annotations".into(), json!(self.annotations));
        }
        if !self.owners.is_empty() {
            let owners: Vec<_> = self
                .owners
                .iter()
                .map(|(kind, name, controller)| {
                    json!({"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": "u-1",
                           "controller": controller})
                })
                .collect();
            metadata.insert("ownerReferences".into(), json!(owners));
        }
        let mut spec = serde_json::Map::new();
        put(&mut spec, "nodeName", &self.node_name);
        put(&mut spec, "subdomain", &self.subdomain);
        if !self.node_selector.is_empty() {
            spec.insert("nodeSelector".into(), json!(self.node_selector));
        }
        if !self.gates.is_empty() {
            let gates: Vec<_> = self.gates.iter().map(|g| json!({"name": g})).collect();
            spec.insert("schedulingGates".into(), json!(gates));
        }
        spec.insert("containers".into(), json!([{"name": "c", "image": "i"}]));
        let mut status = serde_json::Map::new();
        put(&mut status, "phase", &self.phase);
        put(&mut status, "podIP", &self.pod_ip);
        if !self.conditions.is_empty() {
            let conditions: Vec<_> = self
                .conditions
                .iter()
                .map(|(t, st, reason)| {
                    let mut c = serde_json::Map::new();
                    c.insert("type".into(), json!(t));
                    c.insert("status".into(), json!(st));
                    c.insert("lastProbeTime".into(), serde_json::Value::Null);
                    put(&mut c, "reason", reason);
                    serde_json::Value::Object(c)
                })
                .collect();
            status.insert("conditions".into(), json!(conditions));
        }
        if !self.containers.is_empty() {
            let containers: Vec<_> = self
                .containers
                .iter()
                .map(|(name, id, restarts, started, last)| {
                    let mut c = serde_json::Map::new();
                    c.insert("name".into(), json!(name));
                    c.insert("restartCount".into(), json!(restarts));
                    c.insert("ready".into(), json!(false));
                    put(&mut c, "containerID", id);
                    let state = match started {
                        Some(t) => json!({"running": {"startedAt": rfc3339(*t).as_str()}}),
                        None => json!({}),
                    };
                    c.insert("state".into(), state);
                    let last = match last.as_ref().filter(|l| !l.is_empty()) {
                        Some(id) => json!({"terminated": {"exitCode": 0, "containerID": id}}),
                        None => match last {
                            Some(_) => json!({"terminated": {"exitCode": 0}}),
                            None => json!({}),
                        },
                    };
                    c.insert("lastState".into(), last);
                    serde_json::Value::Object(c)
                })
                .collect();
            status.insert("containerStatuses".into(), json!(containers));
        }
        json!({"kind": "Pod", "apiVersion": "v1", "metadata": metadata, "spec": spec,
               "status": status})
    }

    fn enveloped(&self) -> Vec<u8> {
        m::envelope("Pod", self.message().encode_to_vec())
    }
}

fn sample() -> PodData {
    PodData {
        name: Some("web-7d9c-abcde".into()),
        namespace: Some("shop".into()),
        uid: Some("0b4b1c5e-7f6a-4c3e-9b1d-2a3f4e5d6c7b".into()),
        rv: Some("12345".into()),
        deletion: Some(1_767_225_600),
        labels: BTreeMap::from([("app".into(), "web".into()), ("cell".into(), "c1".into())]),
        annotations: BTreeMap::from([("note".into(), "x".repeat(100))]),
        owners: vec![
            ("Other".into(), "o".into(), false),
            ("ReplicaSet".into(), "web-7d9c".into(), true),
        ],
        node_name: Some("node-1".into()),
        subdomain: None,
        node_selector: BTreeMap::from([("disk".into(), "ssd".into())]),
        gates: vec!["wait".into()],
        phase: Some("Running".into()),
        pod_ip: Some("10.0.0.7".into()),
        conditions: vec![
            ("Ready".into(), "True".into(), None),
            ("PodScheduled".into(), "True".into(), Some("Done".into())),
        ],
        containers: vec![(
            "app".into(),
            Some("containerd://abc".into()),
            3,
            Some(1_767_225_601),
            Some("containerd://old".into()),
        )],
    }
}

fn decode(pod: &PodData) -> PodView {
    let bytes = pod.message().encode_to_vec();
    pod_view(&bytes, 0, u64::MAX).unwrap().0
}

fn from_json(pod: &PodData) -> PodView {
    serde_json::from_value(pod.json()).unwrap()
}

#[test]
fn a_pod_decodes_as_its_json_does() {
    let pod = sample();
    let view = decode(&pod);
    assert_eq!(view, from_json(&pod));
    assert_eq!(
        view.metadata.controller.as_ref().map(|c| c.name.as_str()),
        Some("web-7d9c")
    );
    assert_eq!(
        view.metadata.deletion_timestamp.as_deref(),
        Some("2026-01-01T00:00:00Z")
    );
    assert!(view.status.is_running_and_ready());
}

#[test]
fn unknown_fields_are_skipped_at_every_level() {
    // Fields the view does not read, of every wire type, before and after the ones it does.
    let mut bytes = Vec::new();
    prost::encoding::string::encode(99, &"skip".to_owned(), &mut bytes);
    prost::encoding::uint64::encode(98, &7, &mut bytes);
    prost::encoding::fixed64::encode(97, &7, &mut bytes);
    prost::encoding::fixed32::encode(96, &7, &mut bytes);
    bytes.extend(sample().message().encode_to_vec());
    let mut spec = Vec::new();
    // PodSpec.containers (2), which the view skips, holding a nested message.
    prost::encoding::bytes::encode(2, &vec![0x0a, 0x01, b'c'], &mut spec);
    prost::encoding::bytes::encode(2, &spec, &mut bytes);
    let view = pod_view(&bytes, 0, u64::MAX).unwrap().0;
    assert_eq!(view, from_json(&sample()));
}

#[test]
fn a_field_sent_twice_merges() {
    let a = PodData {
        conditions: vec![("A".into(), "True".into(), None)],
        labels: BTreeMap::from([("k".into(), "1".into())]),
        ..Default::default()
    };
    let b = PodData {
        conditions: vec![("B".into(), "False".into(), None)],
        labels: BTreeMap::from([("k".into(), "2".into()), ("l".into(), "3".into())]),
        name: Some("n".into()),
        ..Default::default()
    };
    let mut bytes = a.message().encode_to_vec();
    bytes.extend(b.message().encode_to_vec());
    let view = pod_view(&bytes, 0, u64::MAX).unwrap().0;
    let types: Vec<_> = view
        .status
        .conditions
        .iter()
        .map(|c| c.type_.as_str())
        .collect();
    assert_eq!(types, ["A", "B"]);
    assert_eq!(view.metadata.labels.get("k"), Some("2"));
    assert_eq!(view.metadata.labels.len(), 2);
    assert_eq!(view.metadata.name.as_deref(), Some("n"));
}

#[test]
fn times_are_written_as_go_writes_them() {
    for (seconds, text) in [
        (0, "1970-01-01T00:00:00Z"),
        (951_782_400, "2000-02-29T00:00:00Z"),
        (1_767_225_599, "2025-12-31T23:59:59Z"),
        (-1, "1969-12-31T23:59:59Z"),
        (GO_ZERO_TIME + 1, "0001-01-01T00:00:01Z"),
        (LAST_TIME, "9999-12-31T23:59:59Z"),
    ] {
        assert_eq!(rfc3339(seconds), text, "{seconds}");
    }
    let time_of = |t: m::Time| {
        let pod = m::Pod {
            metadata: Some(m::ObjectMeta {
                deletion_timestamp: Some(t),
                ..Default::default()
            }),
            ..Default::default()
        };
        pod_view(&pod.encode_to_vec(), 0, u64::MAX).map(|(p, _)| p.metadata.deletion_timestamp)
    };
    // An empty message and Go's zero time are JSON's `null`; nanoseconds are dropped.
    assert_eq!(time_of(m::Time::default()), Ok(None));
    assert_eq!(time_of(time_message(GO_ZERO_TIME)), Ok(None));
    let nanos = m::Time {
        seconds: Some(1),
        nanos: Some(5),
    };
    assert_eq!(time_of(nanos), Ok(Some("1970-01-01T00:00:01Z".into())));
    let error = time_of(time_message(LAST_TIME + 1)).unwrap_err();
    assert_eq!(error.kind, ProtobufErrorKind::Time(LAST_TIME + 1));
}

fn frame(event_type: &str, object: Vec<u8>) -> Vec<u8> {
    m::watch_frame(event_type, object)
}

#[test]
fn watch_frames_decode_envelope_first() {
    let pod = sample();
    let event =
        parse_frame_as::<PodView>(&frame("MODIFIED", pod.enveloped()), WireFormat::Protobuf)
            .unwrap();
    assert_eq!(event, WatchEvent::Modified(from_json(&pod)));
    // A bookmark is read for its resourceVersion only.
    let bookmark = PodData {
        rv: Some("550".into()),
        ..Default::default()
    };
    let event = parse_frame_as::<PodView>(
        &frame("BOOKMARK", bookmark.enveloped()),
        WireFormat::Protobuf,
    )
    .unwrap();
    assert_eq!(
        event,
        WatchEvent::Bookmark {
            resource_version: "550".into(),
            initial_events_end: false,
        }
    );
    // The bookmark that ends a streaming list's initial events says so in an annotation.
    let end = PodData {
        rv: Some("551".into()),
        annotations: [
            ("other".to_owned(), "x".to_owned()),
            ("k8s.io/initial-events-end".to_owned(), "true".to_owned()),
        ]
        .into_iter()
        .collect(),
        ..Default::default()
    };
    let event =
        parse_frame_as::<PodView>(&frame("BOOKMARK", end.enveloped()), WireFormat::Protobuf)
            .unwrap();
    assert_eq!(
        event,
        WatchEvent::Bookmark {
            resource_version: "551".into(),
            initial_events_end: true,
        }
    );
}

fn status_body(code: i32, reason: &str, causes: &[&str]) -> Vec<u8> {
    let status = m::Status {
        metadata: Some(m::ListMeta::default()),
        status: Some("Failure".into()),
        message: Some("too old resource version: 1 (2692711)".into()),
        reason: Some(reason.into()),
        details: Some(m::StatusDetails {
            causes: causes
                .iter()
                .map(|c| m::StatusCause {
                    reason: Some((*c).into()),
                    message: Some("m".into()),
                })
                .collect(),
        }),
        code: Some(code),
    };
    m::envelope("Status", status.encode_to_vec())
}

#[test]
fn error_frames_and_error_bodies_carry_a_status() {
    let event = parse_frame_as::<PodView>(
        &frame("ERROR", status_body(410, "Expired", &[])),
        WireFormat::Protobuf,
    )
    .unwrap();
    let WatchEvent::Error(status) = event else {
        panic!("{event:?}")
    };
    assert!(status.is_expired());
    assert_eq!(
        status.to_string(),
        "410 Expired: too old resource version: 1 (2692711)"
    );
    let status = crate::wire::frame::parse_status(&status_body(
        504,
        "Timeout",
        &["ResourceVersionTooLarge"],
    ))
    .unwrap();
    assert!(status.is_too_large());
    // A Status where a Pod was expected, and a Pod where a Status was.
    let error =
        parse_frame_as::<PodView>(&frame("ERROR", sample().enveloped()), WireFormat::Protobuf)
            .unwrap_err();
    assert!(
        matches!(error.kind, FrameErrorKind::Payload(ref e) if e.contains("\"Pod\"")),
        "{error}"
    );
}

#[test]
fn a_json_answer_to_a_protobuf_request_is_read_as_json() {
    let line = br#"{"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"7"}}}"#;
    for format in [WireFormat::Json, WireFormat::Protobuf] {
        assert_eq!(
            parse_frame_as::<PodView>(line, format).unwrap(),
            parse_frame::<PodView>(line).unwrap()
        );
    }
    let body = br#"{"metadata":{"resourceVersion":"9"},"items":[]}"#;
    assert_eq!(parse_list::<PodView>(body).unwrap().resource_version, "9");
}

#[test]
fn bad_frames_are_typed_errors_that_keep_the_cursor_when_they_can() {
    let good = frame("ADDED", sample().enveloped());
    // Cut short anywhere: never a panic; the cursor only when the object's metadata is whole.
    for cut in 0..good.len() {
        let error = parse_frame_as::<PodView>(&good[..cut], WireFormat::Protobuf).unwrap_err();
        assert!(!error.to_string().is_empty());
    }
    // The object's own bytes corrupted after its metadata: skipped, cursor kept.
    let mut pod = sample().message();
    pod.status = None;
    let mut raw = pod.encode_to_vec();
    raw.extend([0x1a, 0x05, 0x0a, 0x09]); // status: 5 bytes promised, 2 there
    let error = parse_frame_as::<PodView>(
        &frame("ADDED", m::envelope("Pod", raw)),
        WireFormat::Protobuf,
    )
    .unwrap_err();
    assert_eq!(error.resource_version.as_deref(), Some("12345"));
    assert!(matches!(error.kind, FrameErrorKind::Payload(_)), "{error}");
    // Bad magic on the object.
    let mut object = sample().enveloped();
    object[0] = b'K';
    let error =
        parse_frame_as::<PodView>(&frame("ADDED", object), WireFormat::Protobuf).unwrap_err();
    assert!(
        error.to_string().contains("no k8s\\0 magic prefix"),
        "{error}"
    );
    // Unknown and missing types keep the cursor; a missing object is named.
    let error =
        parse_frame_as::<PodView>(&frame("SYNC", sample().enveloped()), WireFormat::Protobuf)
            .unwrap_err();
    assert_eq!(error.kind, FrameErrorKind::UnknownType);
    assert_eq!(error.resource_version.as_deref(), Some("12345"));
    let no_object = m::WatchEvent {
        r#type: Some("ADDED".into()),
        object: None,
    }
    .encode_to_vec();
    assert_eq!(
        parse_frame_as::<PodView>(&no_object, WireFormat::Protobuf)
            .unwrap_err()
            .kind,
        FrameErrorKind::MissingObject
    );
    assert_eq!(
        parse_frame_as::<PodView>(&[], WireFormat::Protobuf)
            .unwrap_err()
            .kind,
        FrameErrorKind::MissingType
    );
    // A nested length past the end of its message, with the offset of the field.
    let error = pod_view(&[0x12, 0x03, 0x52, 0x09, b'x'], 0, u64::MAX).unwrap_err();
    assert_eq!(
        error,
        ProtobufError {
            at: 2,
            context: "Pod.spec",
            kind: ProtobufErrorKind::PastTheEnd {
                field: 10,
                length: 9,
                left: 1
            }
        }
    );
    assert_eq!(
        error.to_string(),
        "protobuf Pod.spec at byte 2: field 10 is 9 bytes long, 1 left"
    );
    // A known field with the wrong wire type, a group, bad UTF-8, a bad varint.
    let wire = pod_view(&[0x0a, 0x02, 0x08, 0x01], 0, u64::MAX).unwrap_err();
    assert!(
        matches!(
            wire.kind,
            ProtobufErrorKind::WireType {
                field: 1,
                got: 0,
                expected: 2
            }
        ),
        "{wire}"
    );
    assert_eq!(
        pod_view(&[0x0b], 0, u64::MAX).unwrap_err().kind,
        ProtobufErrorKind::Group(1)
    );
    let utf8 = pod_view(&[0x0a, 0x03, 0x0a, 0x01, 0xff], 0, u64::MAX).unwrap_err();
    assert_eq!(utf8.kind, ProtobufErrorKind::Utf8(1));
    assert!(matches!(
        pod_view(&[0x0a, 0xff], 0, u64::MAX).unwrap_err().kind,
        ProtobufErrorKind::Wire(_)
    ));
}

#[test]
fn a_frame_that_would_hold_too_much_is_refused_and_keeps_the_cursor() {
    // 400,000 empty conditions: 800 KB of frame, each a PodCondition (72 bytes) once decoded.
    let mut raw = m::Pod {
        metadata: Some(m::ObjectMeta {
            resource_version: Some("12".into()),
            ..Default::default()
        }),
        ..Default::default()
    }
    .encode_to_vec();
    let mut status = Vec::new();
    for _ in 0..400_000 {
        status.extend([0x12, 0x00]);
    }
    prost::encoding::bytes::encode(3, &status, &mut raw);
    let frame = frame("MODIFIED", m::envelope("Pod", raw));
    let error = parse_frame_as::<PodView>(&frame, WireFormat::Protobuf).unwrap_err();
    assert_eq!(error.resource_version.as_deref(), Some("12"));
    assert!(
        matches!(error.kind, FrameErrorKind::TooLarge { line, .. } if line == frame.len()),
        "{error}"
    );
}

fn list_body(pods: &[PodData], rv: &str, continue_token: Option<&str>) -> Vec<u8> {
    let list = m::PodList {
        metadata: Some(m::ListMeta {
            resource_version: Some(rv.into()),
            r#continue: continue_token.map(str::to_owned),
            remaining_item_count: continue_token.map(|_| 5),
            shard_info: continue_token.map(|_| m::ShardInfo {
                selector: Some("shardRange(object.metadata.namespace, '0x0', '0x8')".into()),
            }),
        }),
        items: pods.iter().map(PodData::message).collect(),
    };
    m::envelope("PodList", list.encode_to_vec())
}

#[test]
fn a_list_decodes_whole_or_in_chunks() {
    let pods = vec![sample(), PodData::default(), sample()];
    let body = list_body(&pods, "77", Some("next"));
    let list = parse_list::<PodView>(&body).unwrap();
    assert_eq!(list.resource_version, "77");
    assert_eq!(list.continue_token.as_deref(), Some("next"));
    assert_eq!(list.remaining_item_count, Some(5));
    assert_eq!(
        list.shard_selector.as_deref(),
        Some("shardRange(object.metadata.namespace, '0x0', '0x8')")
    );
    assert_eq!(list.body_bytes, body.len() as u64);
    let expected: Vec<_> = pods.iter().map(from_json).collect();
    assert_eq!(list.items, expected);
    for size in [1, 3, 64] {
        let mut decoder = ListDecoder::<PodView>::new();
        for chunk in body.chunks(size) {
            decoder.push(chunk).unwrap();
        }
        assert_eq!(decoder.finish().unwrap(), list);
    }
}

#[test]
fn bad_lists_are_typed_errors() {
    // An item that does not decode is skipped; the rest are kept.
    let mut list = m::PodList {
        metadata: Some(m::ListMeta {
            resource_version: Some("5".into()),
            ..Default::default()
        }),
        items: vec![sample().message()],
    }
    .encode_to_vec();
    prost::encoding::bytes::encode(2, &vec![0x0a, 0x01, 0x0b], &mut list);
    let decoded = parse_list::<PodView>(&m::envelope("PodList", list)).unwrap();
    assert_eq!(decoded.items.len(), 1);
    assert_eq!(decoded.skipped.len(), 1);
    assert_eq!(decoded.skipped[0].index, 1);
    // No resourceVersion; the wrong kind; a truncated body; bad magic.
    let body = list_body(&[sample()], "", None);
    assert_eq!(
        parse_list::<PodView>(&body),
        Err(ListBodyError::NoResourceVersion)
    );
    let wrong = m::envelope("Pod", sample().message().encode_to_vec());
    assert!(
        matches!(parse_list::<PodView>(&wrong), Err(ListBodyError::Malformed(e)) if e.contains("expected a PodList"))
    );
    let body = list_body(&[sample()], "5", None);
    // The envelope ends with its two empty strings (4 bytes), which a cut may drop whole.
    for cut in 1..body.len() - 4 {
        assert!(parse_list::<PodView>(&body[..cut]).is_err(), "cut at {cut}");
    }
    assert!(parse_list::<PodView>(b"k8s").is_err());
    // A type with no protobuf decoder (its kind is known only at run time).
    assert!(matches!(
        parse_list::<kube_core::DynamicObject>(&body),
        Err(ListBodyError::Malformed(e)) if e.contains("cannot decode")
    ));
}

#[test]
fn a_list_is_bounded_like_a_json_one() {
    let pods = vec![PodData::default(); 10];
    let body = list_body(&pods, "5", None);
    let limits = ListLimits {
        max_items: 9,
        ..ListLimits::default()
    };
    let mut decoder = ListDecoder::<PodView>::with_limits(limits);
    let result = decoder.push(&body).and_then(|()| decoder.finish());
    assert!(matches!(
        result,
        Err(ListBodyError::TooManyItems {
            limit: 9,
            index: 9,
            ..
        })
    ));
    let limits = ListLimits {
        multiple: 1,
        allowance: 2 * size_of::<PodView>() as u64,
        max_items: 100,
    };
    let mut decoder = ListDecoder::<PodView>::with_limits(limits);
    let result = decoder.push(&body).and_then(|()| decoder.finish());
    assert!(
        matches!(result, Err(ListBodyError::TooLarge { .. })),
        "{result:?}"
    );
}

fn text() -> impl Strategy<Value = String> {
    // ASCII and a few multi-byte characters, short and past the inline length.
    prop_oneof!["[a-z0-9.-]{0,10}", "[a-zA-Z0-9 é✓-]{20,40}",]
}

fn opt_text() -> impl Strategy<Value = Option<String>> {
    proptest::option::of("[a-z0-9é-]{1,30}")
}

fn time_strategy() -> impl Strategy<Value = i64> {
    (GO_ZERO_TIME + 1)..=LAST_TIME
}

prop_compose! {
    fn pod_data()(
        name in opt_text(), namespace in opt_text(), uid in opt_text(), rv in opt_text(),
        deletion in proptest::option::of(time_strategy()),
        labels in proptest::collection::btree_map(text(), text(), 0..5),
        annotations in proptest::collection::btree_map(text(), text(), 0..3),
        owners in proptest::collection::vec((text(), text(), any::<bool>()), 0..3),
        node_name in opt_text(), subdomain in opt_text(),
        node_selector in proptest::collection::btree_map(text(), text(), 0..3),
        gates in proptest::collection::vec(text(), 0..3),
        phase in opt_text(), pod_ip in opt_text(),
        conditions in proptest::collection::vec((text(), text(), opt_text()), 0..4),
        containers in proptest::collection::vec(
            (text(), opt_text(), any::<i32>(), proptest::option::of(time_strategy()), opt_text()),
            0..3,
        ),
    ) -> PodData {
        PodData {
            name, namespace, uid, rv, deletion, labels, annotations, owners, node_name,
            subdomain, node_selector, gates, phase, pod_ip, conditions, containers,
        }
    }
}

proptest! {
    #[test]
    fn protobuf_and_json_of_one_pod_decode_alike(pod in pod_data()) {
        prop_assert_eq!(decode(&pod), from_json(&pod));
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = pod_view(&bytes, 0, 1 << 20);
        let _ = parse_frame_as::<PodView>(&bytes, WireFormat::Protobuf);
        let mut enveloped = MAGIC.to_vec();
        enveloped.extend(&bytes);
        let _ = parse_list::<PodView>(&enveloped);
        let _ = crate::wire::frame::parse_status(&enveloped);
    }
}

/// The seeds of the `protobuf` fuzz target (core/fuzz/seeds/protobuf): real protobuf, as the
/// encoder writes it today. Rewritten with `RECONCILE_WRITE_FUZZ_SEEDS=1`.
#[test]
fn the_fuzz_seeds_are_the_protobuf_the_decoders_read() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/protobuf");
    let pods = [sample(), PodData::default()];
    let seeds = [
        ("pod-list", list_body(&pods, "77", Some("next"))),
        ("watch-added", frame("ADDED", sample().enveloped())),
        (
            "watch-bookmark",
            frame(
                "BOOKMARK",
                PodData {
                    rv: Some("550".into()),
                    ..PodData::default()
                }
                .enveloped(),
            ),
        ),
        (
            "watch-error",
            frame("ERROR", status_body(410, "Expired", &[])),
        ),
        (
            "status",
            status_body(504, "Timeout", &["ResourceVersionTooLarge"]),
        ),
        ("pod", sample().message().encode_to_vec()),
    ];
    for (name, bytes) in &seeds {
        let path = dir.join(name);
        if std::env::var_os("RECONCILE_WRITE_FUZZ_SEEDS").is_some() {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, bytes).unwrap();
        }
        let on_disk = std::fs::read(&path).unwrap_or_default();
        assert!(
            on_disk == *bytes,
            "{} is stale: rerun with RECONCILE_WRITE_FUZZ_SEEDS=1",
            path.display()
        );
    }
    assert!(parse_list::<PodView>(&seeds[0].1).is_ok());
    for (_, frame) in &seeds[1..4] {
        assert!(parse_frame_as::<PodView>(frame, WireFormat::Protobuf).is_ok());
    }
    assert!(crate::wire::frame::parse_status(&seeds[4].1).is_some());
    assert!(pod_view(&seeds[5].1, 0, u64::MAX).is_ok());
}
