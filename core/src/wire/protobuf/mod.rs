//! Kubernetes protobuf (`application/vnd.kubernetes.protobuf`) on the wire: the envelope, the
//! watch event, `Status`, list metadata, the partial Pod view, and any built-in type into
//! k8s-openapi's own types by the Kubernetes schemas the crate embeds (`schema`, `de`,
//! `builtin`; issue 16).
//!
//! What the apiserver sends, as apimachinery's serializers write it (checked against
//! `pkg/runtime/serializer/protobuf/protobuf.go`, `pkg/util/framer/framer.go`,
//! `pkg/runtime/serializer/codec_factory.go` and the apiserver's
//! `pkg/endpoints/handlers/watch.go`):
//!
//! - An object or list body (LIST, GET, an error's `Status`) is the 4-byte magic `k8s\0`
//!   followed by a `runtime.Unknown` message: `typeMeta` (1: `apiVersion` 1, `kind` 2),
//!   `raw` (2: the object's own message), `contentEncoding` (3) and `contentType` (4), both
//!   empty for plain protobuf.
//! - A WATCH answered as `application/vnd.kubernetes.protobuf;stream=watch` is a sequence of
//!   frames, each a 4-byte big-endian length and that many bytes. The frame is a
//!   `metav1.WatchEvent` written by the *raw* serializer, so with no magic and no envelope:
//!   `type` (1) and `object` (2, a `runtime.RawExtension` whose `raw` (1) is the object
//!   written by the ordinary serializer, magic and envelope included). An ERROR event's object
//!   is a `metav1.Status`.
//!
//! Decoding walks the wire format over borrowed bytes with prost's primitives
//! (`decode_key`, `decode_varint`) straight into the view: strings go from the frame into
//! [`CompactString`](compact_str::CompactString)s, inline when short, as the JSON path does,
//! so a pod decoded from protobuf holds and allocates what the same pod decoded from JSON
//! does. Fields the view does not read are skipped by their length. Field numbers are those of k8s.io/api `core/v1`
//! `generated.proto` and k8s.io/apimachinery `pkg/apis/meta/v1` and `pkg/runtime`
//! `generated.proto`; [`messages`] declares the same fields as prost messages, from which the
//! tests build real protobuf to check the decoder against the JSON one.
//!
//! Go's JSON leaves out empty strings (`omitempty`) where protobuf (proto2, gogo) writes them,
//! so an empty string reads as `None` here, as it does when JSON leaves the field out; an
//! empty `metav1.Time` (Go's zero time, JSON `null`) reads as `None`, and a set one as the
//! RFC 3339 text, seconds only, that Go's JSON writes.

use crate::wire::status::Status;

// The schemas and the decoder by them serve k8s-openapi's types, so they come with them.
#[cfg(feature = "kube")]
pub(crate) mod builtin;
pub(crate) mod codec;
#[cfg(feature = "kube")]
mod de;
pub mod messages;
pub(crate) mod reader;
#[cfg(feature = "kube")]
mod schema;

pub use codec::{
    DecodeFn, MAGIC, MEDIA_TYPE, ProtobufCodec, ProtobufError, ProtobufErrorKind, is_protobuf,
};
use reader::{Budget, Reader, map_entry};
// The Pod view decodes itself (wire/pod/protobuf.rs); its decoder keeps its old path here.
pub use crate::wire::pod::protobuf::pod_view;

// ---------------------------------------------------------------------------------------------
// The envelope.

/// A decoded `runtime.Unknown` envelope: its kind and its message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Envelope<'a> {
    pub(crate) kind: &'a str,
    pub(crate) raw: &'a [u8],
    /// `raw`'s offset in the bytes handed in.
    pub(crate) raw_at: usize,
}

/// Reads `k8s\0` and the `runtime.Unknown` after it (`runtime/generated.proto`: typeMeta 1,
/// raw 2, contentEncoding 3, contentType 4; TypeMeta: apiVersion 1, kind 2).
pub(crate) fn envelope(body: &[u8], base: usize) -> Result<Envelope<'_>, ProtobufError> {
    let Some(message) = body.strip_prefix(&MAGIC) else {
        return Err(ProtobufError::new(
            base,
            "envelope",
            ProtobufErrorKind::BadMagic,
        ));
    };
    let mut envelope = Envelope {
        kind: "",
        raw: &[],
        raw_at: base + MAGIC.len(),
    };
    let budget = Budget::new(u64::MAX);
    let mut r = Reader::new(message, base + MAGIC.len(), "runtime.Unknown", &budget);
    while let Some((field, value)) = r.next()? {
        match field {
            1 => {
                let (bytes, at) = r.bytes(field, value)?;
                envelope.kind = type_meta_kind(bytes, at)?;
            }
            2 => (envelope.raw, envelope.raw_at) = r.bytes(field, value)?,
            3 | 4 => {
                let text = r.str(field, value)?;
                if !(text.is_empty() || field == 4 && text.starts_with(MEDIA_TYPE)) {
                    let name = if field == 3 {
                        "contentEncoding"
                    } else {
                        "contentType"
                    };
                    return Err(r.error(ProtobufErrorKind::Encoding(format!("{name} {text:?}"))));
                }
            }
            _ => {}
        }
    }
    Ok(envelope)
}

/// The `kind` (2) of a `runtime.TypeMeta` message.
pub(crate) fn type_meta_kind(message: &[u8], base: usize) -> Result<&str, ProtobufError> {
    let budget = Budget::new(u64::MAX);
    let mut t = Reader::new(message, base, "runtime.TypeMeta", &budget);
    let mut kind = "";
    while let Some((field, value)) = t.next()? {
        if field == 2 {
            kind = t.str(field, value)?;
        }
    }
    Ok(kind)
}

/// [`envelope`], checking that it holds a `kind`.
pub(crate) fn envelope_of<'a>(
    body: &'a [u8],
    base: usize,
    kind: &'static str,
) -> Result<Envelope<'a>, ProtobufError> {
    let envelope = envelope(body, base)?;
    if envelope.kind != kind {
        return Err(ProtobufError::new(
            base + MAGIC.len(),
            "runtime.Unknown",
            ProtobufErrorKind::Kind {
                expected: kind,
                got: envelope.kind.to_owned(),
            },
        ));
    }
    Ok(envelope)
}

/// The kind a protobuf payload carries: an enveloped body's `typeMeta.kind` (a LIST, an
/// error's `Status`), or the kind of a watch frame's object; `None` for bytes that are
/// neither (JSON among them: `{` cannot start a `WatchEvent`). For a trace's redaction,
/// which must know whether a payload may hold a Secret.
#[must_use]
pub fn payload_kind(payload: &[u8]) -> Option<&str> {
    if is_protobuf(payload) {
        return envelope(payload, 0).ok().map(|e| e.kind);
    }
    let (object, at) = watch_event(payload).ok()?.object?;
    envelope(object, at).ok().map(|e| e.kind)
}

// ---------------------------------------------------------------------------------------------
// Watch events.

/// A `metav1.WatchEvent` (meta/v1 `generated.proto`: type 1, object 2 a RawExtension whose
/// raw is 1), borrowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RawWatchEvent<'a> {
    pub(crate) event_type: Option<&'a str>,
    /// The enveloped object and its offset.
    pub(crate) object: Option<(&'a [u8], usize)>,
}

/// Reads one WATCH frame's `metav1.WatchEvent` (the bytes after the length prefix).
pub(crate) fn watch_event(frame: &[u8]) -> Result<RawWatchEvent<'_>, ProtobufError> {
    let mut event = RawWatchEvent {
        event_type: None,
        object: None,
    };
    let budget = Budget::new(u64::MAX);
    let mut r = Reader::new(frame, 0, "metav1.WatchEvent", &budget);
    while let Some((field, value)) = r.next()? {
        match field {
            1 => event.event_type = Some(r.str(field, value)?),
            2 => {
                let mut x = r.child(r.bytes(field, value)?, "runtime.RawExtension");
                while let Some((field, value)) = x.next()? {
                    if field == 1 {
                        event.object = Some(x.bytes(field, value)?);
                    }
                }
            }
            _ => {}
        }
    }
    Ok(event)
}

/// The `metadata.resourceVersion` of an object's message (every object's `metadata` is field
/// 1, an `ObjectMeta` whose `resourceVersion` is 6), read leniently: whatever fails to decode
/// around it is ignored. `None` when absent or empty.
pub(crate) fn object_resource_version(message: &[u8]) -> Option<String> {
    object_bookmark(message).0
}

/// What a BOOKMARK's object says, read leniently as [`object_resource_version`] is: its
/// `metadata.resourceVersion`, and whether its annotations (ObjectMeta field 12, a map
/// entry of key 1 and value 2) hold `k8s.io/initial-events-end: "true"`, which ends a
/// streaming list's initial events.
pub(crate) fn object_bookmark(message: &[u8]) -> (Option<String>, bool) {
    let budget = Budget::new(u64::MAX);
    let mut r = Reader::new(message, 0, "object", &budget);
    let (mut found, mut initial_events_end) = (None, false);
    while let Ok(Some((field, value))) = r.next() {
        if field != 1 {
            continue;
        }
        let Ok(bytes) = r.bytes(field, value) else {
            continue;
        };
        let mut m = r.child(bytes, "metav1.ObjectMeta");
        while let Ok(Some((field, value))) = m.next() {
            match field {
                6 => {
                    if let Ok(rv) = m.str(field, value) {
                        found = Some(rv.to_owned());
                    }
                }
                12 => {
                    let entry = m
                        .bytes(field, value)
                        .and_then(|b| map_entry(m.child(b, "ObjectMeta.annotations")));
                    if let Ok(("k8s.io/initial-events-end", "true")) = entry {
                        initial_events_end = true;
                    }
                }
                _ => {}
            }
        }
    }
    (found.filter(|rv| !rv.is_empty()), initial_events_end)
}

// ---------------------------------------------------------------------------------------------
// Status and list metadata.

/// Reads a `metav1.Status` message (meta/v1: status 2, message 3, reason 4, details 5, code 6;
/// StatusDetails: causes 4; StatusCause: reason 1).
pub(crate) fn status_message(message: &[u8], base: usize) -> Result<Status, ProtobufError> {
    let mut status = Status::default();
    let budget = Budget::new(u64::MAX);
    let mut r = Reader::new(message, base, "metav1.Status", &budget);
    while let Some((field, value)) = r.next()? {
        match field {
            3 => status.message = Some(r.str(field, value)?.to_owned()),
            4 => status.reason = Some(r.str(field, value)?.to_owned()),
            // int32: Go truncates the varint to 32 bits.
            6 => status.code = Some(r.varint(field, value)? as i32),
            5 => {
                let mut d = r.child(r.bytes(field, value)?, "metav1.StatusDetails");
                while let Some((field, value)) = d.next()? {
                    if field != 4 {
                        continue;
                    }
                    let mut c = d.child(d.bytes(field, value)?, "metav1.StatusCause");
                    while let Some((field, value)) = c.next()? {
                        if field == 1 {
                            status.causes.push(c.str(field, value)?.to_owned());
                        }
                    }
                }
            }
            _ => {}
        }
    }
    status.reason = status.reason.filter(|r| !r.is_empty());
    status.message = status.message.filter(|m| !m.is_empty());
    // Go writes `code` always; 0 is its zero value, which JSON leaves out.
    status.code = status.code.filter(|&c| c != 0);
    Ok(status)
}

/// Reads an enveloped `Status` body (an error response, or an ERROR event's object).
///
/// # Errors
/// The body is not an enveloped `Status`.
pub fn parse_status(body: &[u8]) -> Result<Status, ProtobufError> {
    let envelope = envelope_of(body, 0, "Status")?;
    status_message(envelope.raw, envelope.raw_at)
}

/// A list's `metadata` (meta/v1 `ListMeta`: resourceVersion 2, continue 3,
/// remainingItemCount 4, shardInfo 5, whose selector is 1).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ListMeta {
    pub(crate) resource_version: Option<String>,
    pub(crate) continue_token: Option<String>,
    pub(crate) remaining_item_count: Option<i64>,
    pub(crate) shard_selector: Option<String>,
}

pub(crate) fn list_meta(
    meta: &mut ListMeta,
    message: &[u8],
    base: usize,
) -> Result<(), ProtobufError> {
    let budget = Budget::new(u64::MAX);
    let mut r = Reader::new(message, base, "metav1.ListMeta", &budget);
    while let Some((field, value)) = r.next()? {
        match field {
            2 => meta.resource_version = Some(r.str(field, value)?.to_owned()),
            3 => meta.continue_token = Some(r.str(field, value)?.to_owned()),
            4 => meta.remaining_item_count = Some(r.varint(field, value)? as i64),
            5 => {
                let (info, at) = r.bytes(field, value)?;
                let mut s = Reader::new(info, at, "metav1.ShardInfo", &budget);
                while let Some((field, value)) = s.next()? {
                    if field == 1 {
                        meta.shard_selector = Some(s.str(field, value)?.to_owned());
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
