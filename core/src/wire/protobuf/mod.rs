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
//! [`CompactString`]s, inline when short, as the JSON path does, so a pod decoded from
//! protobuf holds and allocates what the same pod decoded from JSON does. Fields the view does
//! not read are skipped by their length. Field numbers are those of k8s.io/api `core/v1`
//! `generated.proto` and k8s.io/apimachinery `pkg/apis/meta/v1` and `pkg/runtime`
//! `generated.proto`; [`messages`] declares the same fields as prost messages, from which the
//! tests build real protobuf to check the decoder against the JSON one.
//!
//! Go's JSON leaves out empty strings (`omitempty`) where protobuf (proto2, gogo) writes them,
//! so an empty string reads as `None` here, as it does when JSON leaves the field out; an
//! empty `metav1.Time` (Go's zero time, JSON `null`) reads as `None`, and a set one as the
//! RFC 3339 text, seconds only, that Go's JSON writes.

use std::fmt;

use compact_str::CompactString;
use prost::encoding::{WireType, decode_key, decode_varint};

use crate::string_map::StringMap;
use crate::wire::pod::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStatus,
    ControllerRef, PodCondition, PodMetadata, PodSpec, PodStatus, PodView, SchedulingGate,
};
use crate::wire::status::Status;

// The schemas and the decoder by them serve k8s-openapi's types, so they come with them.
#[cfg(feature = "kube")]
pub(crate) mod builtin;
#[cfg(feature = "kube")]
mod de;
pub mod messages;
#[cfg(feature = "kube")]
mod schema;

/// The magic that starts every enveloped protobuf body: `k8s\0`.
pub const MAGIC: [u8; 4] = *b"k8s\0";

/// The media type of Kubernetes protobuf.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// Protobuf that could not be decoded: what was being read, where, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("protobuf {context} at byte {at}: {kind}")]
pub struct ProtobufError {
    /// The offset, from the start of the bytes handed to the decoder, of the field (or
    /// byte) at fault.
    pub at: usize,
    /// The message being read, for example `Pod.status.containerStatuses`.
    pub context: &'static str,
    /// What was wrong.
    pub kind: ProtobufErrorKind,
}

/// Why protobuf could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtobufErrorKind {
    /// The body does not start with `k8s\0`.
    #[error("no k8s\\0 magic prefix")]
    BadMagic,
    /// A field key or varint does not decode.
    #[error("{0}")]
    Wire(String),
    /// A length-delimited field runs past the end of its message.
    #[error("field {field} is {length} bytes long, {left} left")]
    PastTheEnd {
        /// The field number.
        field: u32,
        /// Its declared length.
        length: u64,
        /// The bytes left in the enclosing message.
        left: usize,
    },
    /// A known field with the wrong wire type.
    #[error("field {field} has wire type {got}, expected {expected}")]
    WireType {
        /// The field number.
        field: u32,
        /// The wire type found.
        got: u8,
        /// The wire type the schema says.
        expected: u8,
    },
    /// A group (wire types 3 and 4, deprecated; no Kubernetes message has one).
    #[error("field {0} is a group")]
    Group(u32),
    /// A string field that is not UTF-8.
    #[error("field {0} is not UTF-8")]
    Utf8(u32),
    /// The envelope names another kind than the one expected.
    #[error("the envelope holds a {got:?}, expected a {expected}")]
    Kind {
        /// The kind expected.
        expected: &'static str,
        /// `typeMeta.kind` as sent.
        got: String,
    },
    /// The envelope's `contentEncoding` or `contentType` is not plain protobuf.
    #[error("the envelope says {0}: not plain protobuf")]
    Encoding(String),
    /// The value would hold more than the decoder allows for the bytes it came from.
    #[error("the decoded value would hold more than {limit} bytes")]
    TooLarge {
        /// What it may hold.
        limit: u64,
    },
    /// A time outside what `metav1.Time` allows (years 1 to 9999).
    #[error("time {0} s from the epoch is out of range")]
    Time(i64),
    /// The object type has no protobuf decoder.
    #[error("{0} has no protobuf decoder")]
    Unsupported(&'static str),
    /// A value the type being built refuses (k8s-openapi's own check, such as a field of the
    /// wrong kind), or embedded JSON that does not parse.
    #[error("{0}")]
    Value(String),
    /// Messages nested deeper than the decoder follows.
    #[error("messages nest deeper than {0}")]
    Depth(u32),
}

impl ProtobufError {
    fn new(at: usize, context: &'static str, kind: ProtobufErrorKind) -> Self {
        ProtobufError { at, context, kind }
    }
}

/// How an object type decodes from Kubernetes protobuf (see
/// [`Object::protobuf`](crate::Object::protobuf)).
pub struct ProtobufCodec<O> {
    /// The object's `kind` in the envelope (`Pod`).
    pub kind: &'static str,
    /// Its list's `kind` (`PodList`).
    pub list_kind: &'static str,
    /// Decodes the object's own message (the envelope's `raw`), whose first byte is `base`
    /// bytes into what the caller was handed (error offsets count from there), holding at
    /// most `limit` bytes beyond `size_of::<O>()` as charged: `size_of` each list element,
    /// each string too long to live inline, each map's text and offsets. Returns the object
    /// and its charge.
    pub decode: DecodeFn<O>,
}

/// See [`ProtobufCodec::decode`].
pub type DecodeFn<O> =
    fn(message: &[u8], base: usize, limit: u64) -> Result<(O, u64), ProtobufError>;

impl<O> Clone for ProtobufCodec<O> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<O> Copy for ProtobufCodec<O> {}

impl<O> fmt::Debug for ProtobufCodec<O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProtobufCodec")
            .field("kind", &self.kind)
            .field("list_kind", &self.list_kind)
            .finish_non_exhaustive()
    }
}

// ---------------------------------------------------------------------------------------------
// The wire format.

/// One field's value, borrowed.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Value<'a> {
    Varint(u64),
    /// Fixed 32 bits, little-endian (no field of a view has one; read by the schemas'
    /// decoder).
    Fixed32(#[cfg_attr(not(feature = "kube"), allow(dead_code))] u32),
    /// Fixed 64 bits, little-endian.
    Fixed64(#[cfg_attr(not(feature = "kube"), allow(dead_code))] u64),
    /// Length-delimited, with its first byte's offset.
    Bytes(&'a [u8], usize),
}

impl Value<'_> {
    /// The wire type the value came as (either fixed width for a fixed one).
    pub(crate) fn wire_type(self) -> WireType {
        match self {
            Value::Varint(_) => WireType::Varint,
            Value::Fixed32(_) => WireType::ThirtyTwoBit,
            Value::Fixed64(_) => WireType::SixtyFourBit,
            Value::Bytes(..) => WireType::LengthDelimited,
        }
    }
}

/// Walks the fields of one message.
#[derive(Clone)]
pub(crate) struct Reader<'a, 'b> {
    buf: &'a [u8],
    pos: usize,
    /// Offset of `buf` in what the caller was handed.
    base: usize,
    context: &'static str,
    /// The offset of the field last returned.
    field_at: usize,
    /// What the value being built may hold, shared by the readers of its nested messages.
    budget: &'b Budget,
}

/// What a decoded value may hold, charged as it is built (as the JSON path's budget does):
/// `size_of` each element pushed onto a list, the length of each string too long to live
/// inline, a map's text and offsets.
#[derive(Debug)]
pub(crate) struct Budget {
    used: std::cell::Cell<u64>,
    limit: u64,
}

impl Budget {
    pub(crate) fn new(limit: u64) -> Self {
        Budget {
            used: std::cell::Cell::new(0),
            limit,
        }
    }

    /// What was charged.
    pub(crate) fn used(&self) -> u64 {
        self.used.get()
    }
}

/// Strings up to this long live inline in a `CompactString`.
const INLINE: usize = std::mem::size_of::<CompactString>();

impl<'a, 'b> Reader<'a, 'b> {
    pub(crate) fn new(
        buf: &'a [u8],
        base: usize,
        context: &'static str,
        budget: &'b Budget,
    ) -> Self {
        Reader {
            buf,
            pos: 0,
            base,
            context,
            field_at: base,
            budget,
        }
    }

    /// A reader of a nested message, charging the same budget.
    fn child(&self, (buf, base): (&'a [u8], usize), context: &'static str) -> Reader<'a, 'b> {
        Reader::new(buf, base, context, self.budget)
    }

    /// Charges `bytes` to the budget.
    fn charge(&self, bytes: usize) -> Result<(), ProtobufError> {
        let used = self.budget.used.get().saturating_add(bytes as u64);
        self.budget.used.set(used);
        if used > self.budget.limit {
            return Err(self.error(ProtobufErrorKind::TooLarge {
                limit: self.budget.limit,
            }));
        }
        Ok(())
    }

    /// A string field as a `CompactString`, charged when it does not fit inline.
    fn compact(&self, field: u32, value: Value<'a>) -> Result<CompactString, ProtobufError> {
        let text = self.str(field, value)?;
        if text.len() > INLINE {
            self.charge(text.len())?;
        }
        Ok(CompactString::from(text))
    }

    fn error(&self, kind: ProtobufErrorKind) -> ProtobufError {
        ProtobufError::new(self.field_at, self.context, kind)
    }

    /// The next field, `None` at the end of the message.
    pub(crate) fn next(&mut self) -> Result<Option<(u32, Value<'a>)>, ProtobufError> {
        if self.pos >= self.buf.len() {
            return Ok(None);
        }
        self.field_at = self.base + self.pos;
        let mut rest = &self.buf[self.pos..];
        let (field, wire) = decode_key(&mut rest)
            .map_err(|e| self.error(ProtobufErrorKind::Wire(e.to_string())))?;
        let value = match wire {
            WireType::Varint => Value::Varint(
                decode_varint(&mut rest)
                    .map_err(|e| self.error(ProtobufErrorKind::Wire(e.to_string())))?,
            ),
            WireType::SixtyFourBit | WireType::ThirtyTwoBit => {
                let width = if wire == WireType::SixtyFourBit { 8 } else { 4 };
                let Some((bits, tail)) = rest.split_at_checked(width) else {
                    return Err(self.error(ProtobufErrorKind::PastTheEnd {
                        field,
                        length: width as u64,
                        left: rest.len(),
                    }));
                };
                rest = tail;
                let mut word = [0u8; 8];
                word[..width].copy_from_slice(bits);
                let word = u64::from_le_bytes(word);
                if width == 8 {
                    Value::Fixed64(word)
                } else {
                    Value::Fixed32(word as u32)
                }
            }
            WireType::LengthDelimited => {
                let length = decode_varint(&mut rest)
                    .map_err(|e| self.error(ProtobufErrorKind::Wire(e.to_string())))?;
                let n = usize::try_from(length)
                    .ok()
                    .filter(|&n| n <= rest.len())
                    .ok_or_else(|| {
                        self.error(ProtobufErrorKind::PastTheEnd {
                            field,
                            length,
                            left: rest.len(),
                        })
                    })?;
                let at = self.base + (self.buf.len() - rest.len());
                let (bytes, tail) = rest.split_at(n);
                rest = tail;
                Value::Bytes(bytes, at)
            }
            WireType::StartGroup | WireType::EndGroup => {
                return Err(self.error(ProtobufErrorKind::Group(field)));
            }
        };
        self.pos = self.buf.len() - rest.len();
        Ok(Some((field, value)))
    }

    fn wire_type(&self, field: u32, value: Value<'_>, expected: WireType) -> ProtobufError {
        let got = value.wire_type();
        self.error(ProtobufErrorKind::WireType {
            field,
            got: got as u8,
            expected: expected as u8,
        })
    }

    /// A length-delimited field's bytes and their offset.
    pub(crate) fn bytes(
        &self,
        field: u32,
        value: Value<'a>,
    ) -> Result<(&'a [u8], usize), ProtobufError> {
        match value {
            Value::Bytes(bytes, at) => Ok((bytes, at)),
            other => Err(self.wire_type(field, other, WireType::LengthDelimited)),
        }
    }

    /// A string field.
    pub(crate) fn str(&self, field: u32, value: Value<'a>) -> Result<&'a str, ProtobufError> {
        let (bytes, _) = self.bytes(field, value)?;
        simdutf8::basic::from_utf8(bytes).map_err(|_| self.error(ProtobufErrorKind::Utf8(field)))
    }

    /// A string field, `None` when empty (Go's JSON leaves empty strings out).
    fn opt_str(
        &self,
        field: u32,
        value: Value<'a>,
    ) -> Result<Option<CompactString>, ProtobufError> {
        let text = self.compact(field, value)?;
        Ok((!text.is_empty()).then_some(text))
    }

    /// A varint field.
    pub(crate) fn varint(&self, field: u32, value: Value<'a>) -> Result<u64, ProtobufError> {
        match value {
            Value::Varint(v) => Ok(v),
            other => Err(self.wire_type(field, other, WireType::Varint)),
        }
    }
}

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

/// Whether `body` starts with the protobuf magic (JSON cannot: it starts with `{`,
/// whitespace or nothing).
#[must_use]
pub fn is_protobuf(body: &[u8]) -> bool {
    body.starts_with(&MAGIC)
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
/// remainingItemCount 4).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ListMeta {
    pub(crate) resource_version: Option<String>,
    pub(crate) continue_token: Option<String>,
    pub(crate) remaining_item_count: Option<i64>,
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
            _ => {}
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The partial Pod view.

/// How [`PodView`] decodes from protobuf.
pub(crate) const POD_VIEW: ProtobufCodec<PodView> = ProtobufCodec {
    kind: "Pod",
    list_kind: "PodList",
    decode: pod_view,
};

/// Decodes a core/v1 `Pod` message into the view (core/v1 `generated.proto`: Pod metadata 1,
/// spec 2, status 3), holding at most `limit` bytes beyond the view itself (as charged, see
/// [`ProtobufCodec::decode`]); returns the view and its charge. A field that occurs twice
/// merges, as protobuf says.
///
/// # Errors
/// The message is not a well-formed `Pod`, or would hold more than `limit`.
pub fn pod_view(message: &[u8], base: usize, limit: u64) -> Result<(PodView, u64), ProtobufError> {
    let budget = Budget::new(limit);
    let mut pod = PodView::default();
    let mut r = Reader::new(message, base, "Pod", &budget);
    while let Some((field, value)) = r.next()? {
        match field {
            1 => object_meta(
                &mut pod.metadata,
                r.child(r.bytes(field, value)?, "Pod.metadata"),
            )?,
            2 => pod_spec(&mut pod.spec, r.child(r.bytes(field, value)?, "Pod.spec"))?,
            3 => pod_status(
                &mut pod.status,
                r.child(r.bytes(field, value)?, "Pod.status"),
            )?,
            _ => {}
        }
    }
    Ok((pod, budget.used()))
}

/// meta/v1 `ObjectMeta`: name 1, namespace 3, uid 5, resourceVersion 6, deletionTimestamp 9,
/// labels 11, annotations 12, ownerReferences 13.
fn object_meta(meta: &mut PodMetadata, mut r: Reader<'_, '_>) -> Result<(), ProtobufError> {
    let mut labels: Vec<(&str, &str)> = Vec::new();
    let mut annotations: Vec<(&str, &str)> = Vec::new();
    while let Some((field, value)) = r.next()? {
        match field {
            1 => meta.name = r.opt_str(field, value)?,
            3 => meta.namespace = r.opt_str(field, value)?,
            5 => meta.uid = r.opt_str(field, value)?,
            6 => meta.resource_version = r.opt_str(field, value)?,
            9 => {
                let time_at = r.bytes(field, value)?;
                meta.deletion_timestamp = time(r.child(time_at, "Pod.metadata.deletionTimestamp"))?;
            }
            11 => labels.push(map_entry(
                r.child(r.bytes(field, value)?, "Pod.metadata.labels"),
            )?),
            12 => annotations.push(map_entry(
                r.child(r.bytes(field, value)?, "Pod.metadata.annotations"),
            )?),
            13 => {
                let owner = owner_reference(
                    r.child(r.bytes(field, value)?, "Pod.metadata.ownerReferences"),
                )?;
                if meta.controller.is_none() {
                    meta.controller = owner;
                }
            }
            _ => {}
        }
    }
    merge_map(&r, &mut meta.labels, labels)?;
    merge_map(&r, &mut meta.annotations, annotations)
}

/// Sets `map` to its entries followed by `more` (a later entry of a key wins, as in protobuf
/// and JSON), charging its text and offsets; leaves it untouched when there is nothing more.
fn merge_map(
    r: &Reader<'_, '_>,
    map: &mut StringMap,
    more: Vec<(&str, &str)>,
) -> Result<(), ProtobufError> {
    if more.is_empty() {
        return Ok(());
    }
    let text: usize = more.iter().map(|(k, v)| k.len() + v.len()).sum();
    r.charge(text + 8 * more.len())?;
    *map = if map.is_empty() {
        more.into_iter().collect()
    } else {
        map.iter().chain(more).collect()
    };
    Ok(())
}

/// One entry of a `map<string, string>`: a message of key 1 and value 2.
fn map_entry<'a>(mut e: Reader<'a, '_>) -> Result<(&'a str, &'a str), ProtobufError> {
    let (mut key, mut val) = ("", "");
    while let Some((field, value)) = e.next()? {
        match field {
            1 => key = e.str(field, value)?,
            2 => val = e.str(field, value)?,
            _ => {}
        }
    }
    Ok((key, val))
}

/// meta/v1 `OwnerReference`: kind 1, name 3, controller 6; `Some` only for the controller.
fn owner_reference(mut r: Reader<'_, '_>) -> Result<Option<ControllerRef>, ProtobufError> {
    let (mut kind, mut name, mut controller) =
        (CompactString::default(), CompactString::default(), false);
    while let Some((field, value)) = r.next()? {
        match field {
            1 => kind = r.compact(field, value)?,
            3 => name = r.compact(field, value)?,
            6 => controller = r.varint(field, value)? != 0,
            _ => {}
        }
    }
    Ok(controller.then_some(ControllerRef { kind, name }))
}

/// core/v1 `PodSpec`: nodeSelector 7, nodeName 10, subdomain 17, schedulingGates 38
/// (PodSchedulingGate: name 1).
fn pod_spec(spec: &mut PodSpec, mut r: Reader<'_, '_>) -> Result<(), ProtobufError> {
    let mut selector: Vec<(&str, &str)> = Vec::new();
    let mut gates = std::mem::take(&mut spec.scheduling_gates).into_vec();
    while let Some((field, value)) = r.next()? {
        match field {
            7 => selector.push(map_entry(
                r.child(r.bytes(field, value)?, "Pod.spec.nodeSelector"),
            )?),
            10 => spec.node_name = r.opt_str(field, value)?,
            17 => spec.subdomain = r.opt_str(field, value)?,
            38 => {
                r.charge(size_of::<SchedulingGate>())?;
                let mut g = r.child(r.bytes(field, value)?, "Pod.spec.schedulingGates");
                let mut gate = SchedulingGate::default();
                while let Some((field, value)) = g.next()? {
                    if field == 1 {
                        gate.name = g.compact(field, value)?;
                    }
                }
                gates.push(gate);
            }
            _ => {}
        }
    }
    merge_map(&r, &mut spec.node_selector, selector)?;
    spec.scheduling_gates = gates.into_boxed_slice();
    Ok(())
}

/// core/v1 `PodStatus`: phase 1, conditions 2, podIP 6, containerStatuses 8.
fn pod_status(status: &mut PodStatus, mut r: Reader<'_, '_>) -> Result<(), ProtobufError> {
    let mut conditions = std::mem::take(&mut status.conditions).into_vec();
    let mut containers = std::mem::take(&mut status.container_statuses).into_vec();
    while let Some((field, value)) = r.next()? {
        match field {
            1 => status.phase = r.opt_str(field, value)?,
            6 => status.pod_ip = r.opt_str(field, value)?,
            2 => {
                r.charge(size_of::<PodCondition>())?;
                conditions.push(pod_condition(
                    r.child(r.bytes(field, value)?, "Pod.status.conditions"),
                )?);
            }
            8 => {
                r.charge(size_of::<ContainerStatus>())?;
                containers.push(container_status(
                    r.child(r.bytes(field, value)?, "Pod.status.containerStatuses"),
                )?);
            }
            _ => {}
        }
    }
    status.conditions = conditions.into_boxed_slice();
    status.container_statuses = containers.into_boxed_slice();
    Ok(())
}

/// core/v1 `PodCondition`: type 1, status 2, reason 5.
fn pod_condition(mut r: Reader<'_, '_>) -> Result<PodCondition, ProtobufError> {
    let mut condition = PodCondition::default();
    while let Some((field, value)) = r.next()? {
        match field {
            1 => condition.type_ = r.compact(field, value)?,
            2 => condition.status = r.compact(field, value)?,
            5 => condition.reason = r.opt_str(field, value)?.map(|text| text.as_str().into()),
            _ => {}
        }
    }
    Ok(condition)
}

/// core/v1 `ContainerStatus`: name 1, state 2, lastState 3, restartCount 5, containerID 8.
fn container_status(mut r: Reader<'_, '_>) -> Result<ContainerStatus, ProtobufError> {
    let mut c = ContainerStatus::default();
    while let Some((field, value)) = r.next()? {
        match field {
            1 => c.name = r.compact(field, value)?,
            2 => container_state(
                &mut c.state,
                r.child(r.bytes(field, value)?, "ContainerStatus.state"),
            )?,
            3 => container_state(
                &mut c.last_state,
                r.child(r.bytes(field, value)?, "ContainerStatus.lastState"),
            )?,
            // int32: Go truncates the varint to 32 bits.
            5 => c.restart_count = r.varint(field, value)? as i32,
            8 => c.container_id = r.opt_str(field, value)?,
            _ => {}
        }
    }
    Ok(c)
}

/// core/v1 `ContainerState`: running 2 (ContainerStateRunning: startedAt 1), terminated 3
/// (ContainerStateTerminated: containerID 7).
fn container_state(state: &mut ContainerState, mut r: Reader<'_, '_>) -> Result<(), ProtobufError> {
    while let Some((field, value)) = r.next()? {
        match field {
            2 => {
                let running = state
                    .running
                    .get_or_insert_with(ContainerStateRunning::default);
                let mut s = r.child(r.bytes(field, value)?, "ContainerState.running");
                while let Some((field, value)) = s.next()? {
                    if field == 1 {
                        let at = s.bytes(field, value)?;
                        running.started_at = time(s.child(at, "ContainerState.running.startedAt"))?;
                    }
                }
            }
            3 => {
                let terminated = state
                    .terminated
                    .get_or_insert_with(ContainerStateTerminated::default);
                let mut t = r.child(r.bytes(field, value)?, "ContainerState.terminated");
                while let Some((field, value)) = t.next()? {
                    if field == 7 {
                        terminated.container_id = t.opt_str(field, value)?;
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// Seconds from the epoch of Go's zero `time.Time` (0001-01-01T00:00:00Z), which JSON writes
/// as `null`.
const GO_ZERO_TIME: i64 = -62_135_596_800;

/// Seconds from the epoch of 9999-12-31T23:59:59Z, the last instant `metav1.Time` allows.
const LAST_TIME: i64 = 253_402_300_799;

/// A `metav1.Time` or `MicroTime`'s seconds as Go reads them: `None` for Go's zero time (an
/// empty message, or the zero time's seconds and no nanoseconds; a `Time`'s are dropped, so
/// pass 0), an error outside years 1 to 9999.
pub(crate) fn go_seconds(
    empty: bool,
    seconds: i64,
    nanos: i64,
) -> Result<Option<i64>, ProtobufErrorKind> {
    if empty || seconds == GO_ZERO_TIME && nanos == 0 {
        return Ok(None);
    }
    if !(GO_ZERO_TIME..=LAST_TIME).contains(&seconds) {
        return Err(ProtobufErrorKind::Time(seconds));
    }
    Ok(Some(seconds))
}

/// A `metav1.Time` message (seconds 1, nanos 2) as Go's JSON writes it: RFC 3339 in UTC,
/// whole seconds (Go's protobuf decoder drops the nanoseconds too). An empty message is Go's
/// zero time, which JSON writes as `null`.
fn time(mut r: Reader<'_, '_>) -> Result<Option<CompactString>, ProtobufError> {
    let empty = r.buf.is_empty();
    let mut seconds = 0i64;
    while let Some((field, value)) = r.next()? {
        if field == 1 {
            seconds = r.varint(field, value)? as i64;
        }
    }
    let seconds = go_seconds(empty, seconds, 0)
        .map_err(|kind| ProtobufError::new(r.base, r.context, kind))?;
    Ok(seconds.map(rfc3339))
}

/// `seconds` from the epoch as `YYYY-MM-DDTHH:MM:SSZ` (years 1 to 9999), by the proleptic
/// Gregorian calendar (Howard Hinnant's `civil_from_days`).
fn rfc3339(seconds: i64) -> CompactString {
    let days = seconds.div_euclid(86_400);
    let of_day = seconds.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    compact_str::format_compact!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        of_day / 3600,
        of_day / 60 % 60,
        of_day % 60
    )
}

#[cfg(test)]
mod tests;
