//! Pure parsers for what the apiserver sends: watch frames, LIST bodies and `Status` objects.
//!
//! A frame is read envelope first: its `type`, then the payload that type implies (an object
//! for ADDED / MODIFIED / DELETED, a bare `resourceVersion` for BOOKMARK, a `Status` for
//! ERROR). A BOOKMARK is never decoded as the object type, because a Pod bookmark carries
//! `"spec":{"containers":null}`, which a strict Pod decoder rejects.
//!
//! The common case costs one pass over the bytes. Only when that pass fails is the line read
//! again, leniently, to recover the event type and the resourceVersion, so the reflector can
//! skip the frame and still advance its cursor past it.
//!
//! A source that asked for protobuf gets `metav1.WatchEvent` frames instead
//! ([`parse_frame_as`]), read envelope first likewise; `Status` bodies are told apart by the
//! protobuf magic ([`parse_status`]).

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;

use crate::wire::format::WireFormat;
use crate::wire::list::budget::{self, Budgeted};
use crate::wire::object::Object;
use crate::wire::protobuf;
pub use crate::wire::status::Status;

/// One decoded watch frame.
#[derive(Debug, Clone, PartialEq)]
pub enum WatchEvent<O> {
    /// `ADDED`: a new object, or a synthetic one when the watch started without a version.
    Added(O),
    /// `MODIFIED`: the object's new state.
    Modified(O),
    /// `DELETED`: the object's last state.
    Deleted(O),
    /// `BOOKMARK`: only moves the cursor.
    Bookmark {
        /// The version the stream has reached.
        resource_version: String,
        /// The bookmark carries the annotation `k8s.io/initial-events-end: "true"`: on a
        /// streaming list (`sendInitialEvents=true`), the initial events are all sent.
        initial_events_end: bool,
    },
    /// `ERROR`: the watch failed in-band; the rest of the stream is meaningless.
    Error(Status),
}

/// A frame that could not be used, with whatever could still be read from it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct FrameError {
    /// The frame's `type`, when it could be read.
    pub event_type: Option<String>,
    /// The object's `metadata.resourceVersion`, when it could be read. With it, the reflector
    /// skips the frame and advances; without it, it must relist.
    pub resource_version: Option<String>,
    /// What was wrong.
    pub kind: FrameErrorKind,
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.event_type, &self.resource_version) {
            (Some(t), Some(rv)) => write!(f, "{t} frame at rv {rv}: {}", self.kind),
            (Some(t), None) => write!(f, "{t} frame without rv: {}", self.kind),
            (None, Some(rv)) => write!(f, "frame at rv {rv}: {}", self.kind),
            (None, None) => write!(f, "frame: {}", self.kind),
        }
    }
}

/// Why a frame could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameErrorKind {
    /// Not a JSON object of the watch-event shape at all.
    #[error("not a watch event: {0}")]
    Malformed(String),
    /// No `type` member.
    #[error("no \"type\"")]
    MissingType,
    /// A `type` other than ADDED, MODIFIED, DELETED, BOOKMARK or ERROR.
    #[error("unknown type")]
    UnknownType,
    /// No `object` member.
    #[error("no \"object\"")]
    MissingObject,
    /// The payload does not decode as what its type implies.
    #[error("payload does not decode: {0}")]
    Payload(String),
    /// The object names a `kind` other than the source's ([`WatchParams::kind`]): a
    /// ConfigMap in a pod watch is not a pod, though it may decode as one.
    ///
    /// [`WatchParams::kind`]: crate::WatchParams::kind
    #[error("the object is a {found}, not a {expected}")]
    WrongKind {
        /// The source's kind.
        expected: String,
        /// The kind the object names.
        found: String,
    },
    /// The object decoded but carries no `metadata.resourceVersion`.
    #[error("no metadata.resourceVersion")]
    NoResourceVersion,
    /// The object would hold more memory than a frame of its length may (see
    /// [`FRAME_CHECKED_ABOVE`]): it was not decoded.
    #[error(
        "the object would hold more than {limit} bytes once decoded, for a line of {line} bytes"
    )]
    TooLarge {
        /// The line's length.
        line: usize,
        /// What it may hold: [`FRAME_MULTIPLE`] × its length + [`FRAME_ALLOWANCE`].
        limit: u64,
    },
}

/// Lines longer than this are decoded under a memory budget; shorter ones, every real frame
/// of a pod (about 8 KB), are decoded unchecked, as they can hold little in absolute terms
/// (at most about 13 MB for the worst shape measured, a k8s-openapi `Pod` of empty
/// containers, which holds 198× its line).
pub const FRAME_CHECKED_ABOVE: usize = 64 << 10;

/// A checked frame's object may hold this multiple of its line's length (as a LIST's
/// items, twice what a real k8s-openapi `Pod` is charged)…
pub const FRAME_MULTIPLE: u64 = 8;

/// …plus this many bytes.
pub const FRAME_ALLOWANCE: u64 = 1 << 20;

/// Parses one line of a watch stream. Leading and trailing whitespace is ignored.
///
/// # Errors
/// A [`FrameError`] naming what is wrong; its `resource_version` is set whenever the frame
/// still tells where the stream is, so the caller can skip it and advance.
pub fn parse_frame<O: Object>(line: &[u8]) -> Result<WatchEvent<O>, FrameError> {
    parse_frame_held::<O, O>(line)
}

/// Parses one frame of a watch stream of `format`.
///
/// A protobuf frame is a `metav1.WatchEvent` without its length prefix (see
/// [`protobuf`]). A source that asked for protobuf may still be answered
/// in JSON (custom resources are served only as JSON): with [`WireFormat::Protobuf`], a
/// frame whose first byte other than a space, tab or CR is `{` is read as JSON. No protobuf
/// `WatchEvent` starts so: `{` is the key of field 15 as a group, which the message does not
/// have.
///
/// # Errors
/// As [`parse_frame`].
pub fn parse_frame_as<O: Object>(
    frame: &[u8],
    format: WireFormat,
) -> Result<WatchEvent<O>, FrameError> {
    parse_frame_as_held::<O, O>(frame, format)
}

/// The `kind` a JSON watch frame's object names, when it names one: read in a pass of its
/// own that builds nothing but that string (only sources that check their kind pay for it,
/// see [`WatchParams::kind`](crate::WatchParams::kind)).
#[must_use]
pub fn object_kind(frame: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Event {
        object: Option<ObjectKind>,
    }
    #[derive(serde::Deserialize)]
    struct ObjectKind {
        kind: Option<String>,
    }
    serde_json::from_slice::<Event>(frame).ok()?.object?.kind
}

/// `event`, or a [`FrameErrorKind::WrongKind`] error when `expected` is set, the frame is
/// JSON and its object names another kind. The error keeps the object's resourceVersion, so
/// the reflector skips the frame and advances, as for any object that does not decode.
///
/// # Errors
/// The wrong kind, with the frame's type and version.
pub(crate) fn check_kind<O: Object, H: Hold<O>>(
    frame: &[u8],
    json: bool,
    expected: Option<&str>,
    event: WatchEvent<H>,
) -> Result<WatchEvent<H>, FrameError> {
    let Some(expected) = expected.filter(|_| json) else {
        return Ok(event);
    };
    let (event_type, object) = match &event {
        WatchEvent::Added(o) => (EventType::Added, o),
        WatchEvent::Modified(o) => (EventType::Modified, o),
        WatchEvent::Deleted(o) => (EventType::Deleted, o),
        WatchEvent::Bookmark { .. } | WatchEvent::Error(_) => return Ok(event),
    };
    match object_kind(frame) {
        Some(found) if found != expected => Err(FrameError {
            event_type: Some(event_type.as_str().to_owned()),
            resource_version: object.held().object_resource_version().map(str::to_owned),
            kind: FrameErrorKind::WrongKind {
                expected: expected.to_owned(),
                found,
            },
        }),
        _ => Ok(event),
    }
}

/// Whether a frame of a stream that asked for protobuf is JSON (see [`parse_frame_as`]).
pub(crate) fn is_json_frame(frame: &[u8]) -> bool {
    frame.iter().find(|b| !matches!(b, b' ' | b'\t' | b'\r')) == Some(&b'{')
}

/// [`parse_frame_as`], with the object held as `H`.
pub(crate) fn parse_frame_as_held<O: Object, H: Hold<O>>(
    frame: &[u8],
    format: WireFormat,
) -> Result<WatchEvent<H>, FrameError> {
    match format {
        WireFormat::Protobuf if !is_json_frame(frame) => parse_protobuf_frame::<O, H>(frame),
        _ => parse_frame_held::<O, H>(frame),
    }
}

/// A protobuf `metav1.WatchEvent`: its type, then the enveloped object that type implies.
fn parse_protobuf_frame<O: Object, H: Hold<O>>(frame: &[u8]) -> Result<WatchEvent<H>, FrameError> {
    let event = protobuf::watch_event(frame).map_err(|e| FrameError {
        event_type: None,
        resource_version: None,
        kind: FrameErrorKind::Malformed(e.to_string()),
    })?;
    let resource_version = || {
        let (object, at) = event.object?;
        protobuf::object_resource_version(protobuf::envelope(object, at).ok()?.raw)
    };
    let fail = |kind, resource_version| FrameError {
        event_type: event.event_type.map(str::to_owned),
        resource_version,
        kind,
    };
    let Some(event_type) = event.event_type.filter(|t| !t.is_empty()) else {
        return Err(fail(FrameErrorKind::MissingType, resource_version()));
    };
    let Some(event_type) = EventType::parse(event_type) else {
        return Err(fail(FrameErrorKind::UnknownType, resource_version()));
    };
    let Some((object, at)) = event.object else {
        return Err(fail(FrameErrorKind::MissingObject, None));
    };
    let payload = |e: protobuf::ProtobufError| FrameErrorKind::Payload(e.to_string());
    let object_event = |wrap: fn(H) -> WatchEvent<H>| {
        let Some(codec) = O::protobuf() else {
            let kind = protobuf::ProtobufErrorKind::Unsupported(std::any::type_name::<O>());
            return Err(fail(
                FrameErrorKind::Payload(kind.to_string()),
                resource_version(),
            ));
        };
        // The same bound as a checked JSON line: the multiple of the frame's length, plus the
        // allowance.
        let limit = FRAME_MULTIPLE
            .saturating_mul(frame.len() as u64)
            .saturating_add(FRAME_ALLOWANCE);
        let decoded = protobuf::envelope_of(object, at, codec.kind)
            .and_then(|envelope| (codec.decode)(envelope.raw, envelope.raw_at, limit));
        match decoded {
            Ok((object, _)) => Ok(wrap(H::hold(object))),
            Err(protobuf::ProtobufError {
                kind: protobuf::ProtobufErrorKind::TooLarge { limit },
                ..
            }) => Err(fail(
                FrameErrorKind::TooLarge {
                    line: frame.len(),
                    limit,
                },
                resource_version(),
            )),
            Err(e) => Err(fail(payload(e), resource_version())),
        }
    };
    let event = match event_type {
        EventType::Added => object_event(WatchEvent::Added)?,
        EventType::Modified => object_event(WatchEvent::Modified)?,
        EventType::Deleted => object_event(WatchEvent::Deleted)?,
        EventType::Bookmark => {
            let (resource_version, initial_events_end) = protobuf::envelope(object, at)
                .map(|envelope| protobuf::object_bookmark(envelope.raw))
                .unwrap_or_default();
            match resource_version {
                Some(resource_version) => WatchEvent::Bookmark {
                    resource_version,
                    initial_events_end,
                },
                None => return Err(fail(FrameErrorKind::NoResourceVersion, None)),
            }
        }
        EventType::Error => {
            let status = protobuf::envelope_of(object, at, "Status")
                .and_then(|envelope| protobuf::status_message(envelope.raw, envelope.raw_at))
                .map_err(|e| fail(payload(e), None))?;
            WatchEvent::Error(status)
        }
    };
    if let WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) = &event
        && o.held().object_resource_version().is_none_or(str::is_empty)
    {
        return Err(fail(FrameErrorKind::NoResourceVersion, None));
    }
    Ok(event)
}

/// How a decoded object is held: by value, or moved once into an `Arc` straight from the
/// decoder, so that the reflector and the store pass 8 bytes around instead of the whole view.
pub(crate) trait Hold<O>: Sized {
    fn hold(object: O) -> Self;
    fn held(&self) -> &O;
}

impl<O> Hold<O> for O {
    fn hold(object: O) -> O {
        object
    }
    fn held(&self) -> &O {
        self
    }
}

impl<O> Hold<O> for Arc<O> {
    fn hold(object: O) -> Arc<O> {
        Arc::new(object)
    }
    fn held(&self) -> &O {
        self
    }
}

/// [`parse_frame`], with the object held as `H`.
pub(crate) fn parse_frame_held<O: Object, H: Hold<O>>(
    line: &[u8],
) -> Result<WatchEvent<H>, FrameError> {
    let line = line.trim_ascii();
    let fast: Result<FastFrame<O, H>, _> = if line.len() > FRAME_CHECKED_ABOVE {
        // A long line may be an object of many tiny parts that each decode into much more
        // than their bytes: decoded under a budget, which stops it before it is built.
        let limit = FRAME_MULTIPLE
            .saturating_mul(line.len() as u64)
            .saturating_add(FRAME_ALLOWANCE);
        let (result, spent) = budget::within(limit, || from_json::<Budgeted<_>>(line));
        if spent.exceeded {
            let mut error = explain_frame_failure(
                line,
                &serde_json::Error::io(std::io::ErrorKind::OutOfMemory.into()),
            );
            error.kind = FrameErrorKind::TooLarge {
                line: line.len(),
                limit,
            };
            return Err(error);
        }
        result.map(|b| b.0)
    } else {
        from_json(line)
    };
    let frame = match fast {
        Ok(frame) => frame,
        Err(error) => return Err(explain_frame_failure(line, &error)),
    };
    let event_type = frame.event_type;
    let fail = |kind, resource_version| FrameError {
        event_type: event_type.map(|t| t.as_str().to_owned()),
        resource_version,
        kind,
    };
    let Some(event_type) = event_type else {
        return Err(fail(FrameErrorKind::MissingType, None));
    };
    let Some(payload) = frame.payload else {
        return Err(fail(FrameErrorKind::MissingObject, None));
    };
    let event = match payload {
        Payload::Object(object) => match event_type {
            EventType::Added => WatchEvent::Added(object),
            EventType::Modified => WatchEvent::Modified(object),
            _ => WatchEvent::Deleted(object),
        },
        Payload::Bookmark(resource_version, initial_events_end) => match resource_version {
            Some(rv) if !rv.is_empty() => WatchEvent::Bookmark {
                resource_version: rv,
                initial_events_end,
            },
            _ => return Err(fail(FrameErrorKind::NoResourceVersion, None)),
        },
        Payload::Error(status) => WatchEvent::Error(status),
    };
    if let WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) = &event
        && o.held().object_resource_version().is_none_or(str::is_empty)
    {
        return Err(fail(FrameErrorKind::NoResourceVersion, None));
    }
    Ok(event)
}

/// The one-pass failed: read the line again, leniently, to say why and where the stream is.
fn explain_frame_failure(line: &[u8], error: &serde_json::Error) -> FrameError {
    let Ok(lenient) = serde_json::from_slice::<LenientFrame>(line) else {
        return FrameError {
            event_type: None,
            resource_version: None,
            kind: FrameErrorKind::Malformed(error.to_string()),
        };
    };
    let resource_version = lenient
        .object
        .and_then(|o| o.metadata)
        .and_then(|m| m.resource_version)
        .filter(|rv| !rv.is_empty());
    let kind = match lenient.event_type.as_deref() {
        None => FrameErrorKind::MissingType,
        Some(t) if EventType::parse(t).is_none() => FrameErrorKind::UnknownType,
        Some(_) => FrameErrorKind::Payload(error.to_string()),
    };
    FrameError {
        event_type: lenient.event_type,
        resource_version,
        kind,
    }
}

/// Decodes JSON from bytes. The UTF-8 is validated once, whole, with SIMD, so that serde_json
/// reads a `str` and skips validating string by string; invalid UTF-8 takes serde_json's
/// byte path, whose error (and what it accepts) is unchanged.
pub(crate) fn from_json<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> serde_json::Result<T> {
    match simdutf8::basic::from_utf8(bytes) {
        Ok(text) => serde_json::from_str(text),
        Err(_) => serde_json::from_slice(bytes),
    }
}

/// Reads a `Status` from an error response body, JSON or enveloped protobuf (told apart by
/// the protobuf magic); `None` when the body is not one.
#[must_use]
pub fn parse_status(body: &[u8]) -> Option<Status> {
    if protobuf::is_protobuf(body) {
        return protobuf::parse_status(body).ok();
    }
    serde_json::from_slice::<RawStatus>(body)
        .ok()
        .map(RawStatus::into_status)
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum EventType {
    Added,
    Modified,
    Deleted,
    Bookmark,
    Error,
}

impl EventType {
    fn parse(s: &str) -> Option<EventType> {
        Some(match s {
            "ADDED" => EventType::Added,
            "MODIFIED" => EventType::Modified,
            "DELETED" => EventType::Deleted,
            "BOOKMARK" => EventType::Bookmark,
            "ERROR" => EventType::Error,
            _ => return None,
        })
    }

    fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
            EventType::Bookmark => "BOOKMARK",
            EventType::Error => "ERROR",
        }
    }
}

impl<'de> Deserialize<'de> for EventType {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct TypeVisitor;
        impl Visitor<'_> for TypeVisitor {
            type Value = EventType;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a watch event type")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<EventType, E> {
                EventType::parse(v).ok_or_else(|| E::custom(format!("unknown type {v:?}")))
            }
        }
        d.deserialize_str(TypeVisitor)
    }
}

enum Payload<H> {
    Object(H),
    /// The version and whether the initial-events-end annotation is set.
    Bookmark(Option<String>, bool),
    Error(Status),
}

struct FastFrame<O, H> {
    event_type: Option<EventType>,
    payload: Option<Payload<H>>,
    object: PhantomData<fn() -> O>,
}

impl<'de, O: Object, H: Hold<O>> Deserialize<'de> for FastFrame<O, H> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(FrameVisitor(PhantomData))
    }
}

struct FrameVisitor<O, H>(PhantomData<fn() -> (O, H)>);

#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "lowercase")]
enum FrameField {
    Type,
    Object,
    #[serde(other)]
    Other,
}

impl<'de, O: Object, H: Hold<O>> Visitor<'de> for FrameVisitor<O, H> {
    type Value = FastFrame<O, H>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a watch event object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<FastFrame<O, H>, A::Error> {
        let mut event_type = None;
        let mut payload = None;
        // The apiserver writes `type` first; if a producer did not, hold the object's bytes.
        let mut early_object: Option<&'de RawValue> = None;
        while let Some(field) = map.next_key::<FrameField>()? {
            match field {
                FrameField::Type => event_type = Some(map.next_value::<EventType>()?),
                FrameField::Object => match event_type {
                    Some(t) => payload = Some(map.next_value_seed(PayloadSeed::<O, H>::new(t))?),
                    None => early_object = Some(map.next_value::<&'de RawValue>()?),
                },
                FrameField::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        if let (Some(raw), Some(t), None) = (early_object, event_type, payload.as_ref()) {
            let mut de = serde_json::Deserializer::from_str(raw.get());
            // Charged like the rest of the frame when the frame is decoded under a budget.
            payload = Some(
                budget::deserialize_seed(PayloadSeed::<O, H>::new(t), &mut de)
                    .map_err(de::Error::custom)?,
            );
        }
        Ok(FastFrame {
            event_type,
            payload,
            object: PhantomData,
        })
    }
}

struct PayloadSeed<O, H> {
    event_type: EventType,
    object: PhantomData<fn() -> (O, H)>,
}

impl<O, H> PayloadSeed<O, H> {
    fn new(event_type: EventType) -> Self {
        PayloadSeed {
            event_type,
            object: PhantomData,
        }
    }
}

impl<'de, O: Object, H: Hold<O>> DeserializeSeed<'de> for PayloadSeed<O, H> {
    type Value = Payload<H>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Payload<H>, D::Error> {
        Ok(match self.event_type {
            EventType::Added | EventType::Modified | EventType::Deleted => {
                Payload::Object(H::hold(O::deserialize(d)?))
            }
            EventType::Bookmark => {
                let meta = LenientObject::deserialize(d)?.metadata;
                let end = meta
                    .as_ref()
                    .and_then(|m| m.annotations.as_ref())
                    .and_then(|a| a.initial_events_end.as_ref())
                    .is_some_and(|v| v.as_str() == Some("true"));
                Payload::Bookmark(meta.and_then(|m| m.resource_version), end)
            }
            EventType::Error => Payload::Error(RawStatus::deserialize(d)?.into_status()),
        })
    }
}

#[derive(Deserialize)]
struct LenientFrame {
    #[serde(rename = "type")]
    event_type: Option<String>,
    object: Option<LenientObject>,
}

#[derive(Deserialize)]
struct LenientObject {
    metadata: Option<LenientMeta>,
}

#[derive(Deserialize)]
struct LenientMeta {
    #[serde(rename = "resourceVersion")]
    resource_version: Option<String>,
    annotations: Option<BookmarkAnnotations>,
}

/// The one annotation a bookmark is read for; any other is ignored, and a value that is not
/// the string `"true"` does not mark the end.
#[derive(Deserialize)]
struct BookmarkAnnotations {
    #[serde(rename = "k8s.io/initial-events-end")]
    initial_events_end: Option<serde_json::Value>,
}

/// The annotation a bookmark carries at the end of a streaming list's initial events.
pub const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

#[derive(Deserialize)]
struct RawStatus {
    code: Option<i32>,
    reason: Option<String>,
    message: Option<String>,
    details: Option<RawDetails>,
}

#[derive(Deserialize)]
struct RawDetails {
    causes: Option<Vec<RawCause>>,
}

#[derive(Deserialize)]
struct RawCause {
    reason: Option<String>,
}

impl RawStatus {
    fn into_status(self) -> Status {
        Status {
            code: self.code,
            reason: self.reason.filter(|r| !r.is_empty()),
            message: self.message.filter(|m| !m.is_empty()),
            causes: self
                .details
                .and_then(|d| d.causes)
                .unwrap_or_default()
                .into_iter()
                .filter_map(|c| c.reason)
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::pod::PodView;

    fn frame(line: &str) -> Result<WatchEvent<PodView>, FrameError> {
        parse_frame(line.as_bytes())
    }

    #[test]
    fn object_frames_decode_with_their_type() {
        let ev = frame(
            r#"{"type":"MODIFIED","object":{"metadata":{"name":"a","resourceVersion":"7"}}}"#,
        )
        .unwrap();
        let WatchEvent::Modified(pod) = ev else {
            panic!("{ev:?}")
        };
        assert_eq!(pod.metadata.resource_version.as_deref(), Some("7"));
    }

    #[test]
    fn invalid_utf8_is_an_error_that_keeps_the_cursor() {
        // In a field the view reads, and in one it skips: the byte path rejects the first
        // with its position, and a skipped one is still never accepted as a `str`.
        let read = b"{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"a\xff\",\"resourceVersion\":\"7\"}}}";
        let error = parse_frame::<PodView>(read).unwrap_err();
        assert_eq!(error.resource_version.as_deref(), Some("7"), "{error}");
        assert!(error.to_string().contains("line 1"), "{error}");
        let skipped = b"{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"8\"},\"x\":\"\xff\"}}";
        let event = parse_frame::<PodView>(skipped).unwrap();
        assert!(
            matches!(event, WatchEvent::Modified(p) if p.metadata.name.as_deref() == Some("a"))
        );
    }

    #[test]
    fn object_before_type_still_decodes() {
        let ev =
            frame(r#"{"object":{"metadata":{"name":"a","resourceVersion":"7"}},"type":"DELETED"}"#)
                .unwrap();
        assert!(matches!(ev, WatchEvent::Deleted(_)));
    }

    #[test]
    fn pod_bookmark_with_null_containers_is_read_envelope_first() {
        let ev = frame(
            r#"{"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"550","annotations":{"k8s.io/initial-events-end":"true"}},"spec":{"containers":null},"status":{}}}"#,
        )
        .unwrap();
        assert_eq!(
            ev,
            WatchEvent::Bookmark {
                resource_version: "550".into(),
                initial_events_end: true,
            }
        );
    }

    #[test]
    fn error_frame_reads_code_reason_and_causes() {
        let ev = frame(
            r#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (2692711)","reason":"Expired","code":410}}"#,
        )
        .unwrap();
        let WatchEvent::Error(status) = ev else {
            panic!()
        };
        assert!(status.is_expired());
        assert_eq!(
            status.to_string(),
            "410 Expired: too old resource version: 1 (2692711)"
        );
        let st = parse_status(br#"{"code":504,"details":{"causes":[{"reason":"ResourceVersionTooLarge","message":"Too large"}]}}"#).unwrap();
        assert!(st.is_too_large() && st.cursor_unusable());
        let gone = parse_status(br#"{"reason":"Gone"}"#).unwrap();
        assert!(gone.is_expired());
    }

    #[test]
    fn undecodable_pod_frame_keeps_its_resource_version() {
        let err =
            frame(r#"{"type":"ADDED","object":{"metadata":{"name":5,"resourceVersion":"9"}}}"#)
                .unwrap_err();
        assert_eq!(err.event_type.as_deref(), Some("ADDED"));
        assert_eq!(err.resource_version.as_deref(), Some("9"));
        assert!(matches!(err.kind, FrameErrorKind::Payload(_)));
        assert!(
            err.to_string()
                .starts_with("ADDED frame at rv 9: payload does not decode"),
            "{err}"
        );
    }

    #[test]
    fn garbage_has_no_resource_version() {
        for line in [
            "",
            "{",
            "[]",
            "null",
            "{\"type\":\"ADDED\",\"object\":",
            "\u{0}\u{1}",
        ] {
            let err = frame(line).unwrap_err();
            assert_eq!(err.resource_version, None, "{line:?}");
        }
    }

    #[test]
    fn unknown_type_and_missing_members_are_named() {
        let err =
            frame(r#"{"type":"SYNC","object":{"metadata":{"resourceVersion":"3"}}}"#).unwrap_err();
        assert_eq!(err.kind, FrameErrorKind::UnknownType);
        assert_eq!(err.resource_version.as_deref(), Some("3"));
        assert_eq!(
            frame(r#"{"object":{}}"#).unwrap_err().kind,
            FrameErrorKind::MissingType
        );
        assert_eq!(
            frame(r#"{"type":"ADDED"}"#).unwrap_err().kind,
            FrameErrorKind::MissingObject
        );
        let no_rv = frame(r#"{"type":"ADDED","object":{"metadata":{"name":"a"}}}"#).unwrap_err();
        assert_eq!(no_rv.kind, FrameErrorKind::NoResourceVersion);
        let bm = frame(r#"{"type":"BOOKMARK","object":{"metadata":{}}}"#).unwrap_err();
        assert_eq!(bm.kind, FrameErrorKind::NoResourceVersion);
    }
}

#[cfg(test)]
mod bound_tests {
    use super::*;
    use crate::wire::pod::PodView;

    fn long_frame(object_first: bool, object: &str) -> String {
        if object_first {
            format!(r#"{{"object":{object},"type":"MODIFIED"}}"#)
        } else {
            format!(r#"{{"type":"MODIFIED","object":{object}}}"#)
        }
    }

    #[test]
    fn a_long_frame_of_real_shape_decodes_either_way_round() {
        // A pod with a 100 KB annotation: past the checked length, holds about its bytes.
        let object = format!(
            r#"{{"metadata":{{"name":"a","namespace":"n","resourceVersion":"7","annotations":{{"big":"{}"}}}},"status":{{"conditions":[{{"type":"Ready","status":"True"}}]}}}}"#,
            "x".repeat(100_000)
        );
        for object_first in [false, true] {
            let line = long_frame(object_first, &object);
            assert!(line.len() > FRAME_CHECKED_ABOVE);
            match parse_frame::<PodView>(line.as_bytes()) {
                Ok(WatchEvent::Modified(pod)) => {
                    assert_eq!(
                        pod.metadata.annotations.get("big").map(str::len),
                        Some(100_000)
                    );
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn a_long_frame_that_would_hold_too_much_is_refused_and_keeps_the_cursor() {
        // 40,000 empty containers: about 2 KB each as k8s-openapi Containers, 80 MB from a
        // 480 KB line.
        let containers = vec![r#"{"name":""}"#; 40_000].join(",");
        let object = format!(
            r#"{{"metadata":{{"name":"a","resourceVersion":"12"}},"spec":{{"containers":[{containers}]}}}}"#
        );
        for object_first in [false, true] {
            let line = long_frame(object_first, &object);
            let Err(error) = parse_frame::<k8s_openapi::api::core::v1::Pod>(line.as_bytes()) else {
                panic!("decoded (object first: {object_first})");
            };
            assert_eq!(error.resource_version.as_deref(), Some("12"));
            assert_eq!(error.event_type.as_deref(), Some("MODIFIED"));
            assert_eq!(
                error.kind,
                FrameErrorKind::TooLarge {
                    line: line.len(),
                    limit: FRAME_MULTIPLE * line.len() as u64 + FRAME_ALLOWANCE
                },
                "{error}"
            );
        }
        // The same containers in a short line are decoded unchecked.
        let short = vec![r#"{"name":""}"#; 100].join(",");
        let line = long_frame(
            false,
            &format!(
                r#"{{"metadata":{{"resourceVersion":"3"}},"spec":{{"containers":[{short}]}}}}"#
            ),
        );
        assert!(parse_frame::<k8s_openapi::api::core::v1::Pod>(line.as_bytes()).is_ok());
    }
}
