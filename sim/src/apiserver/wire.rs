//! The simulated apiserver's protobuf (issue 16): the bodies and frames a source that asked
//! for `application/vnd.kubernetes.protobuf` gets, built from the same objects as the JSON
//! ones through the core's prost declarations ([`reconcile_core::protobuf::messages`]), so
//! there is one encoder, checked against the decoder by the core's own tests.
//!
//! The shapes are the apiserver's: a LIST body or an error's `Status` is `k8s\0` and a
//! `runtime.Unknown` around the message; a WATCH frame is a bare `metav1.WatchEvent` whose
//! object is an enveloped `Pod` (or `Status`, for `ERROR`). A field the JSON object lacks,
//! or that the views do not read, is left out, as prost skips what it does not declare.

use std::collections::BTreeMap;

use prost::Message as _;
use reconcile_core::protobuf::messages as m;
use serde_json::Value;

fn text(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_owned)
}

fn string_map(v: &Value, key: &str) -> BTreeMap<String, String> {
    v.get(key)
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

fn list<'a>(v: &'a Value, key: &str) -> impl Iterator<Item = &'a Value> {
    v.get(key).and_then(Value::as_array).into_iter().flatten()
}

/// Seconds from the Unix epoch of an RFC 3339 time in UTC with whole seconds
/// (`2024-05-01T10:00:00Z`, what Go's JSON writes for a `metav1.Time`); `None` otherwise.
#[must_use]
pub fn rfc3339_seconds(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() != 20 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || b[19] != b'Z' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, se) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || se > 60 {
        return None;
    }
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + h * 3600 + mi * 60 + se)
}

fn time(v: &Value, key: &str) -> Option<m::Time> {
    let seconds = rfc3339_seconds(v.get(key)?.as_str()?)?;
    Some(m::Time {
        seconds: Some(seconds),
        nanos: None,
    })
}

fn state(v: &Value) -> Option<m::ContainerState> {
    if !v.is_object() {
        return None;
    }
    Some(m::ContainerState {
        running: v
            .get("running")
            .filter(|r| r.is_object())
            .map(|r| m::ContainerStateRunning {
                started_at: time(r, "startedAt"),
            }),
        terminated: v.get("terminated").filter(|t| t.is_object()).map(|t| {
            m::ContainerStateTerminated {
                container_id: text(t, "containerID"),
            }
        }),
    })
}

/// What a world serves: whole pods, or any kind's metadata only (a secondary source, which
/// the simulator decodes as metadata: `PartialObjectMetadata`, as client-go's metadata
/// client asks for it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Served {
    /// `Pod` and `PodList`.
    Pods,
    /// `PartialObjectMetadata` and `PartialObjectMetadataList` (`meta.k8s.io/v1`).
    Metadata,
}

/// An object's `metadata` (a JSON object as the world stores it) as the `ObjectMeta`
/// message.
fn object_meta(meta: &Value) -> m::ObjectMeta {
    m::ObjectMeta {
        name: text(meta, "name"),
        namespace: text(meta, "namespace"),
        uid: text(meta, "uid"),
        resource_version: text(meta, "resourceVersion"),
        deletion_timestamp: time(meta, "deletionTimestamp"),
        labels: string_map(meta, "labels"),
        annotations: string_map(meta, "annotations"),
        owner_references: list(meta, "ownerReferences")
            .map(|o| m::OwnerReference {
                kind: text(o, "kind"),
                name: text(o, "name"),
                uid: text(o, "uid"),
                api_version: text(o, "apiVersion"),
                controller: o.get("controller").and_then(Value::as_bool),
            })
            .collect(),
    }
}

/// An object's metadata only, as the `PartialObjectMetadata` message.
#[must_use]
pub fn partial_object_metadata(value: &Value) -> m::PartialObjectMetadata {
    m::PartialObjectMetadata {
        metadata: Some(object_meta(&value["metadata"])),
    }
}

/// A pod (a JSON object as the world stores it) as the `Pod` message.
#[must_use]
pub fn pod(value: &Value) -> m::Pod {
    let spec = &value["spec"];
    let status = &value["status"];
    m::Pod {
        metadata: Some(object_meta(&value["metadata"])),
        spec: Some(m::PodSpec {
            node_selector: string_map(spec, "nodeSelector"),
            node_name: text(spec, "nodeName"),
            subdomain: text(spec, "subdomain"),
            scheduling_gates: list(spec, "schedulingGates")
                .map(|g| m::PodSchedulingGate {
                    name: text(g, "name"),
                })
                .collect(),
        }),
        status: Some(m::PodStatus {
            phase: text(status, "phase"),
            conditions: list(status, "conditions")
                .map(|c| m::PodCondition {
                    r#type: text(c, "type"),
                    status: text(c, "status"),
                    reason: text(c, "reason"),
                })
                .collect(),
            pod_ip: text(status, "podIP"),
            container_statuses: list(status, "containerStatuses")
                .map(|c| m::ContainerStatus {
                    name: text(c, "name"),
                    state: c.get("state").and_then(state),
                    last_state: c.get("lastState").and_then(state),
                    restart_count: c
                        .get("restartCount")
                        .and_then(Value::as_i64)
                        .and_then(|n| i32::try_from(n).ok()),
                    container_id: text(c, "containerID"),
                })
                .collect(),
        }),
    }
}

/// The `apiVersion` of metadata only.
const META_V1: &str = "meta.k8s.io/v1";

/// An object as `served`, enveloped (`k8s\0`, `Unknown` of kind `Pod` or
/// `PartialObjectMetadata`).
#[must_use]
pub fn object(served: Served, value: &Value) -> Vec<u8> {
    match served {
        Served::Pods => m::envelope("Pod", pod(value).encode_to_vec()),
        Served::Metadata => m::envelope_of(
            META_V1,
            "PartialObjectMetadata",
            partial_object_metadata(value).encode_to_vec(),
        ),
    }
}

/// A WATCH frame (no length prefix) of `event_type` around the enveloped `value`.
#[must_use]
pub fn frame(served: Served, event_type: &str, value: &Value) -> Vec<u8> {
    m::watch_frame(event_type, object(served, value))
}

/// A `BOOKMARK` frame at `rv`: an object with only its resourceVersion (and, for a streaming
/// list's end, the `k8s.io/initial-events-end: "true"` annotation), as the apiserver sends.
#[must_use]
pub fn bookmark(served: Served, rv: u64, end: bool) -> Vec<u8> {
    let mut annotations = BTreeMap::new();
    if end {
        annotations.insert("k8s.io/initial-events-end".to_owned(), "true".to_owned());
    }
    let metadata = Some(m::ObjectMeta {
        resource_version: Some(rv.to_string()),
        annotations,
        ..m::ObjectMeta::default()
    });
    let object = match served {
        Served::Pods => {
            let pod = m::Pod {
                metadata,
                spec: Some(m::PodSpec::default()),
                status: Some(m::PodStatus::default()),
            };
            m::envelope("Pod", pod.encode_to_vec())
        }
        Served::Metadata => m::envelope_of(
            META_V1,
            "PartialObjectMetadata",
            m::PartialObjectMetadata { metadata }.encode_to_vec(),
        ),
    };
    m::watch_frame("BOOKMARK", object)
}

/// A LIST body as `served`: `k8s\0`, `Unknown` of kind `PodList` (or
/// `PartialObjectMetadataList`), the list at `rv` with `items`, and the continue token of a
/// page that is not the last.
#[must_use]
pub fn list_body(
    served: Served,
    rv: u64,
    continue_token: Option<String>,
    items: impl Iterator<Item = Value>,
) -> Vec<u8> {
    let metadata = Some(m::ListMeta {
        resource_version: Some(rv.to_string()),
        r#continue: continue_token,
        // As the world's JSON pages: no `remainingItemCount`.
        remaining_item_count: None,
        // The world does not select by shard.
        shard_info: None,
    });
    match served {
        Served::Pods => {
            let list = m::PodList {
                metadata,
                items: items.map(|v| pod(&v)).collect(),
            };
            m::envelope("PodList", list.encode_to_vec())
        }
        Served::Metadata => {
            let list = m::PartialObjectMetadataList {
                metadata,
                items: items.map(|v| partial_object_metadata(&v)).collect(),
            };
            m::envelope_of(META_V1, "PartialObjectMetadataList", list.encode_to_vec())
        }
    }
}

/// An enveloped failed `metav1.Status`.
#[must_use]
pub fn status(code: u16, reason: &str, message: &str, cause: Option<&str>) -> Vec<u8> {
    let status = m::Status {
        metadata: Some(m::ListMeta::default()),
        status: Some("Failure".into()),
        message: Some(message.into()),
        reason: Some(reason.into()),
        details: cause.map(|cause| m::StatusDetails {
            causes: vec![m::StatusCause {
                reason: Some(cause.into()),
                message: Some(message.into()),
            }],
        }),
        code: Some(i32::from(code)),
    };
    m::envelope("Status", status.encode_to_vec())
}

/// An `ERROR` frame around an enveloped `Status`.
#[must_use]
pub fn error_frame(code: u16, reason: &str, message: &str) -> Vec<u8> {
    m::watch_frame("ERROR", status(code, reason, message, None))
}

/// A frame that does not decode but names version `rv`: a `MODIFIED` object whose metadata
/// is readable (the decoder finds the version) followed by a field that cannot be (a pod's
/// spec as a varint where a message must be; metadata's own field 1 again, cut short).
/// Without `rv`, a frame whose object is cut short, naming nothing.
#[must_use]
pub fn malformed_frame(served: Served, rv: Option<u64>) -> Vec<u8> {
    match rv {
        Some(rv) => {
            let meta = m::ObjectMeta {
                name: Some("corrupt".into()),
                resource_version: Some(rv.to_string()),
                ..m::ObjectMeta::default()
            };
            match served {
                Served::Pods => {
                    let mut raw = m::Pod {
                        metadata: Some(meta),
                        spec: None,
                        status: None,
                    }
                    .encode_to_vec();
                    // Field 2 (spec) with wire type 0 (varint): a message cannot be.
                    raw.extend_from_slice(&[0x10, 0x01]);
                    m::watch_frame("MODIFIED", m::envelope("Pod", raw))
                }
                Served::Metadata => {
                    let mut raw = m::PartialObjectMetadata {
                        metadata: Some(meta),
                    }
                    .encode_to_vec();
                    // Field 1 (metadata) again, 9 bytes long with 1 left: past its end.
                    raw.extend_from_slice(&[0x0a, 0x09, 0x0a]);
                    m::watch_frame(
                        "MODIFIED",
                        m::envelope_of(META_V1, "PartialObjectMetadata", raw),
                    )
                }
            }
        }
        None => {
            let mut whole = frame(
                served,
                "MODIFIED",
                &serde_json::json!({"metadata": {"name": "corrupt"}}),
            );
            whole.truncate(whole.len() / 2);
            whole
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_is_read_as_go_writes_it() {
        assert_eq!(rfc3339_seconds("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(rfc3339_seconds("2024-02-29T12:34:56Z"), Some(1_709_210_096));
        assert_eq!(rfc3339_seconds("2024-02-29T12:34:56.5Z"), None);
        assert_eq!(rfc3339_seconds("2024-13-01T00:00:00Z"), None);
    }
}
