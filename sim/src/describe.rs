//! Short descriptions of inputs for the step lines: a frame's type, object and version.

use serde::Deserialize;

use reconcile_core::pod::PodView;
use reconcile_core::{ListResponse, StreamId, WireFormat, protobuf};

#[derive(Deserialize)]
struct Envelope {
    #[serde(rename = "type")]
    kind: Option<String>,
    object: Option<Payload>,
}

#[derive(Deserialize)]
struct Payload {
    metadata: Option<Meta>,
    code: Option<i64>,
    reason: Option<String>,
}

#[derive(Deserialize)]
struct Meta {
    name: Option<String>,
    namespace: Option<String>,
    #[serde(rename = "resourceVersion")]
    resource_version: Option<String>,
}

#[derive(Deserialize)]
struct ListEnvelope {
    metadata: Option<Meta>,
    items: Option<Vec<serde::de::IgnoredAny>>,
}

/// `frame W2 MODIFIED ns/a rv=12`, `frame W2 BOOKMARK rv=30`, `frame W2 ERROR 410 Expired`.
#[must_use]
pub fn frame(stream: StreamId, line: &[u8]) -> String {
    let Ok(env) = serde_json::from_slice::<Envelope>(line) else {
        return protobuf_frame(stream, line);
    };
    let kind = env.kind.as_deref().unwrap_or("?");
    let Some(object) = env.object else {
        return format!("frame {stream} {kind} (no object)");
    };
    if kind == "ERROR" {
        let code = object.code.map_or("-".into(), |c| c.to_string());
        return format!(
            "frame {stream} ERROR {code} {}",
            object.reason.as_deref().unwrap_or("-")
        );
    }
    let meta = object.metadata.unwrap_or(Meta {
        name: None,
        namespace: None,
        resource_version: None,
    });
    let rv = meta.resource_version.as_deref().unwrap_or("-");
    match (kind, meta.name) {
        ("BOOKMARK", _) => format!("frame {stream} BOOKMARK rv={rv}"),
        (_, Some(name)) => match meta.namespace {
            Some(ns) => format!("frame {stream} {kind} {ns}/{name} rv={rv}"),
            None => format!("frame {stream} {kind} {name} rv={rv}"),
        },
        (_, None) => format!("frame {stream} {kind} (no name) rv={rv}"),
    }
}

/// A frame that is not JSON, read as a protobuf `WatchEvent` (issue 16):
/// `frame W2 MODIFIED ns/a rv=12 (protobuf)`.
fn protobuf_frame(stream: StreamId, line: &[u8]) -> String {
    use reconcile_core::frame::{WatchEvent, parse_frame_as};
    let event = match parse_frame_as::<PodView>(line, WireFormat::Protobuf) {
        Ok(event) => event,
        Err(_) => return format!("frame {stream} (undecodable, {} bytes)", line.len()),
    };
    let (kind, pod) = match &event {
        WatchEvent::Added(p) => ("ADDED", p),
        WatchEvent::Modified(p) => ("MODIFIED", p),
        WatchEvent::Deleted(p) => ("DELETED", p),
        WatchEvent::Bookmark {
            resource_version,
            initial_events_end,
        } => {
            let end = if *initial_events_end {
                " initial-events-end"
            } else {
                ""
            };
            return format!("frame {stream} BOOKMARK rv={resource_version}{end} (protobuf)");
        }
        WatchEvent::Error(status) => {
            let code = status.code.map_or("-".into(), |c| c.to_string());
            return format!(
                "frame {stream} ERROR {code} {} (protobuf)",
                status.reason.as_deref().unwrap_or("-")
            );
        }
    };
    let meta = &pod.metadata;
    let rv = meta.resource_version.as_deref().unwrap_or("-");
    let name = meta.name.as_deref().unwrap_or("(no name)");
    match meta.namespace.as_deref() {
        Some(ns) => format!("frame {stream} {kind} {ns}/{name} rv={rv} (protobuf)"),
        None => format!("frame {stream} {kind} {name} rv={rv} (protobuf)"),
    }
}

/// A JSON LIST answered 200 with `items` items at `rv`, as [`list`] describes its body.
#[must_use]
pub fn list_ok(req: reconcile_core::RequestId, items: usize, rv: &str) -> String {
    format!("list {req} 200 items={items} rv={rv}")
}

/// `list L1 200 items=3 rv=10`, `list L1 500`, `list L1 transport error (…)`.
#[must_use]
pub fn list<O>(req: reconcile_core::RequestId, response: &ListResponse<O>) -> String {
    match response {
        ListResponse::TransportError(e) => format!("list {req} transport error ({e})"),
        ListResponse::Response { status: 200, body } if protobuf::is_protobuf(body) => {
            match reconcile_core::list::parse_list::<PodView>(body) {
                Ok(l) => format!(
                    "list {req} 200 items={} rv={} (protobuf)",
                    l.items.len() + l.skipped.len(),
                    l.resource_version
                ),
                Err(_) => format!("list {req} 200 (undecodable body, {} bytes)", body.len()),
            }
        }
        ListResponse::Response { status: 200, body } => {
            match serde_json::from_slice::<ListEnvelope>(body) {
                Ok(l) => list_ok(
                    req,
                    l.items.map_or(0, |i| i.len()),
                    l.metadata
                        .and_then(|m| m.resource_version)
                        .as_deref()
                        .unwrap_or("-"),
                ),
                Err(_) => format!("list {req} 200 (undecodable body, {} bytes)", body.len()),
            }
        }
        ListResponse::Response { status, .. } => format!("list {req} {status}"),
        ListResponse::Decoded(Ok(list)) => format!(
            "list {req} 200 items={} rv={} (decoded while streaming)",
            list.items.len(),
            list.resource_version
        ),
        ListResponse::Decoded(Err(e)) => format!("list {req} 200 (undecodable body: {e})"),
    }
}
