//! What a protobuf decoder is and how it fails: the magic and the media type, the codec an
//! [`Object`](crate::Object) names, and the error every decoder returns.

use std::fmt;

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
    pub(crate) fn new(at: usize, context: &'static str, kind: ProtobufErrorKind) -> Self {
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

/// Whether `body` starts with the protobuf magic (JSON cannot: it starts with `{`,
/// whitespace or nothing).
#[must_use]
pub fn is_protobuf(body: &[u8]) -> bool {
    body.starts_with(&MAGIC)
}
