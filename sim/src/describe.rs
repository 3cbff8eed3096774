//! Short descriptions of inputs for the step lines: a frame's type, object and version.

use serde::Deserialize;

use reconcile_core::{ListResponse, StreamId};

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
        return format!("frame {stream} (undecodable, {} bytes)", line.len());
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

/// `list L1 200 items=3 rv=10`, `list L1 500`, `list L1 transport error (…)`.
#[must_use]
pub fn list<O>(req: reconcile_core::RequestId, response: &ListResponse<O>) -> String {
    match response {
        ListResponse::TransportError(e) => format!("list {req} transport error ({e})"),
        ListResponse::Response { status: 200, body } => {
            match serde_json::from_slice::<ListEnvelope>(body) {
                Ok(l) => format!(
                    "list {req} 200 items={} rv={}",
                    l.items.map_or(0, |i| i.len()),
                    l.metadata
                        .and_then(|m| m.resource_version)
                        .as_deref()
                        .unwrap_or("-")
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
