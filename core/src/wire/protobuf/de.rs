//! Kubernetes protobuf into any serde type, by the schema: a `Deserializer` that walks a
//! message's bytes and hands its fields to the type being built as the JSON object the
//! apiserver would have sent, with nothing built in between. This is how a k8s-openapi type
//! (its own `Deserialize`) decodes from protobuf.
//!
//! How a message reads as its JSON:
//! - each known field is a key named as in JSON (the `.proto` names are the JSON names);
//!   fields the schema does not know (a newer server's) are skipped by their length, and so
//!   are those the struct being built does not name;
//! - a repeated field's occurrences are one array (packed or not); a map field's entries one
//!   object;
//! - a struct Go embeds inline (`Volume`'s `VolumeSource`) is a field of its own in protobuf
//!   but flat in JSON: a message field that the struct does not name, but whose own fields it
//!   does, is flattened into it;
//! - a value field tagged `omitempty` in Go is left out when zero, as Go's JSON does (protobuf
//!   writes it); a pointer set to zero (`replicas: 0`) is kept;
//! - `bytes` are base64 text; [`Special`] messages read as apimachinery writes them.

use std::cell::Cell;
use std::fmt::{self, Write as _};

use base64::Engine as _;
use prost::encoding::{WireType, decode_varint};
use serde::de::value::BorrowedStrDeserializer;
use serde::de::{
    self, DeserializeOwned, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor,
};

use super::codec::{ProtobufError, ProtobufErrorKind};
use super::reader::{Budget, Reader, Value, rfc3339};
use super::schema::{
    FieldSchema, Fixed, InJson, Kind, MessageId, MessageSchema, Schema, Special, schema,
};
use crate::wire::list::budget::{self, Budgeted};

/// Messages nested deeper than this are refused (Kubernetes' deepest are about a dozen).
const MAX_DEPTH: u32 = 64;

/// Structs embedded inline in one another deeper than this are refused (Kubernetes nests
/// two: `NamedRuleWithOperations` in `RuleWithOperations` in `Rule`).
const MAX_INLINE: usize = 4;

/// Decodes the message `message` of the schemas from `bytes` (whose first byte is `base`
/// bytes into what the caller was handed) into a `T`, charging what it holds against `limit`
/// bytes (as the JSON path charges). Returns the value and its charge.
pub(crate) fn decode<T: DeserializeOwned>(
    message: MessageId,
    bytes: &[u8],
    base: usize,
    limit: u64,
) -> Result<(T, u64), ProtobufError> {
    decode_typed(message, &[], bytes, base, limit)
}

/// [`decode`], with `types` as the object's first members: the `apiVersion` and `kind` JSON
/// gives a message that protobuf writes without them (a `PartialObjectMetadata` in a list
/// or a watch event carries no `TypeMeta` of its own).
pub(crate) fn decode_typed<T: DeserializeOwned>(
    message: MessageId,
    types: &'static [(&'static str, &'static str)],
    bytes: &[u8],
    base: usize,
    limit: u64,
) -> Result<(T, u64), ProtobufError> {
    let schema = schema();
    let message = schema.message(message);
    // The readers' own budget is not used: the value is charged by serde's view of it.
    let unlimited = Budget::new(u64::MAX);
    let scattered = Cell::new(false);
    let attempt = |careful: bool| {
        let de = MessageDe {
            bytes,
            at: base,
            message,
            ctx: Ctx {
                schema,
                budget: &unlimited,
                depth: 0,
                careful,
                scattered: &scattered,
            },
        };
        budget::within(limit, || {
            if types.is_empty() {
                <Budgeted<T> as de::Deserialize>::deserialize(de)
            } else {
                <Budgeted<T> as de::Deserialize>::deserialize(TypedDe { types, message: de })
            }
        })
    };
    // Go writes a repeated field's elements together, so the first attempt reads them as one
    // run; a repeated field found again later (valid protobuf, from another writer) makes it
    // start over, looking ahead for every element.
    let (mut result, mut spent) = attempt(false);
    if scattered.get() {
        (result, spent) = attempt(true);
    }
    match result {
        Ok(Budgeted(value)) => Ok((value, spent.used)),
        Err(_) if spent.exceeded => Err(ProtobufError::new(
            base,
            &message.name,
            ProtobufErrorKind::TooLarge { limit },
        )),
        Err(e) => Err(e.into_inner(base, &message.name)),
    }
}

/// A decoding error; where it happened is filled in by the innermost field that knows.
#[derive(Debug)]
pub(crate) struct Error(ProtobufError);

/// The offset of an error not yet placed.
const UNPLACED: usize = usize::MAX;

impl Error {
    /// Places the error at `at` in `context`, unless a field inside placed it already.
    fn placed(mut self, at: usize, context: &'static str) -> Self {
        if self.0.at == UNPLACED {
            self.0.at = at;
            self.0.context = context;
        }
        self
    }

    fn into_inner(self, at: usize, context: &'static str) -> ProtobufError {
        self.placed(at, context).0
    }
}

impl From<ProtobufError> for Error {
    fn from(e: ProtobufError) -> Self {
        Error(e)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for Error {}

impl de::Error for Error {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Error(ProtobufError::new(
            UNPLACED,
            "",
            ProtobufErrorKind::Value(msg.to_string()),
        ))
    }
}

/// What every value of one decode shares.
#[derive(Clone, Copy)]
struct Ctx<'b> {
    schema: &'static Schema,
    budget: &'b Budget,
    /// How deep the message being read is.
    depth: u32,
    /// Whether a repeated field's elements may be apart (the decode's second attempt), so
    /// that each run looks ahead for the rest.
    careful: bool,
    /// Set when a first attempt finds a repeated field apart from its earlier elements.
    scattered: &'b Cell<bool>,
}

impl<'b> Ctx<'b> {
    fn reader<'de>(
        &self,
        bytes: &'de [u8],
        at: usize,
        message: &'static MessageSchema,
    ) -> Reader<'de, 'b> {
        Reader::new(bytes, at, &message.name, self.budget)
    }

    fn deeper(self, at: usize, context: &'static str) -> Result<Self, Error> {
        if self.depth >= MAX_DEPTH {
            return Err(Error(ProtobufError::new(
                at,
                context,
                ProtobufErrorKind::Depth(MAX_DEPTH),
            )));
        }
        Ok(Ctx {
            depth: self.depth + 1,
            ..self
        })
    }
}

// ---------------------------------------------------------------------------------------------
// A message.

struct MessageDe<'de, 'b> {
    bytes: &'de [u8],
    at: usize,
    message: &'static MessageSchema,
    ctx: Ctx<'b>,
}

impl<'de, 'b> MessageDe<'de, 'b> {
    fn fields(self) -> Result<FieldsAccess<'de, 'b>, Error> {
        let ctx = self.ctx.deeper(self.at, &self.message.name)?;
        Ok(FieldsAccess {
            top: Frame::new(ctx.reader(self.bytes, self.at, self.message), self.message),
            inline: [const { None }; MAX_INLINE],
            inline_depth: 0,
            pending: None,
            ctx,
        })
    }

    /// The fields of a hand-marshalled message, last one winning, as protobuf merges them.
    fn scalars<const N: usize>(&self) -> Result<[Option<Value<'de>>; N], Error> {
        let mut values = [None; N];
        let mut r = self.ctx.reader(self.bytes, self.at, self.message);
        while let Some((number, value)) = r.next()? {
            if let Some(slot) = (number as usize)
                .checked_sub(1)
                .and_then(|i| values.get_mut(i))
            {
                *slot = Some(value);
            }
        }
        Ok(values)
    }

    /// Whether this message is JSON's `null`: a zero time, an empty raw extension.
    fn is_null(&self) -> Result<bool, Error> {
        Ok(match self.message.special {
            Some(Special::Time | Special::MicroTime) => self.instant()?.is_none(),
            Some(Special::RawJson) => self.raw()?.is_empty(),
            Some(Special::SchemaOrArray | Special::SchemaOrStrings) => {
                self.scalars::<2>()?.iter().all(Option::is_none)
            }
            _ => false,
        })
    }

    /// A `Time` or `MicroTime`'s seconds and nanoseconds; `None` for Go's zero time.
    fn instant(&self) -> Result<Option<(i64, u32)>, Error> {
        let [seconds, nanos] = self.scalars::<2>()?;
        let seconds = self.varint(1, seconds)? as i64;
        let nanos = self.varint(2, nanos)? as i64;
        // Go's `Time` drops the nanoseconds when it reads protobuf; `MicroTime` keeps them.
        let kept = if self.message.special == Some(Special::Time) {
            0
        } else {
            nanos
        };
        let Some(seconds) = super::reader::go_seconds(self.bytes.is_empty(), seconds, kept)
            .map_err(|kind| self.error(kind))?
        else {
            return Ok(None);
        };
        if !(0..1_000_000_000).contains(&nanos) {
            return Err(self.error(ProtobufErrorKind::Value(format!(
                "nanos {nanos} out of range"
            ))));
        }
        Ok(Some((seconds, nanos as u32)))
    }

    /// A raw extension's (or `FieldsV1`'s) bytes.
    fn raw(&self) -> Result<&'de [u8], Error> {
        let [raw] = self.scalars::<1>()?;
        match raw {
            None => Ok(&[]),
            Some(Value::Bytes(bytes, _)) => Ok(bytes),
            Some(other) => Err(self.wire_error(1, other, WireType::LengthDelimited)),
        }
    }

    fn varint(&self, number: u32, value: Option<Value<'de>>) -> Result<u64, Error> {
        match value {
            None => Ok(0),
            Some(Value::Varint(v)) => Ok(v),
            Some(other) => Err(self.wire_error(number, other, WireType::Varint)),
        }
    }

    fn text(&self, number: u32, value: Option<Value<'de>>) -> Result<&'de str, Error> {
        match value {
            None => Ok(""),
            Some(Value::Bytes(bytes, at)) => utf8(bytes, at, number, &self.message.name),
            Some(other) => Err(self.wire_error(number, other, WireType::LengthDelimited)),
        }
    }

    fn error(&self, kind: ProtobufErrorKind) -> Error {
        Error(ProtobufError::new(self.at, &self.message.name, kind))
    }

    fn wire_error(&self, number: u32, got: Value<'_>, expected: WireType) -> Error {
        wire_error(self.at, &self.message.name, number, got, expected)
    }

    /// A hand-marshalled message, as apimachinery writes it to JSON.
    fn special<V: Visitor<'de>>(self, special: Special, visitor: V) -> Result<V::Value, Error> {
        match special {
            Special::Time | Special::MicroTime => match self.instant()? {
                None => visitor.visit_unit(),
                Some((seconds, nanos)) => {
                    let mut text = rfc3339(seconds);
                    if special == Special::MicroTime {
                        // Go's RFC3339Micro: always six digits.
                        text.truncate(text.len() - 1);
                        let _ = write!(text, ".{:06}Z", nanos / 1_000);
                    }
                    visitor.visit_str(&text)
                }
            },
            Special::IntOrString => {
                let [kind, int, text] = self.scalars::<3>()?;
                if self.varint(1, kind)? == 1 {
                    visitor.visit_borrowed_str(self.text(3, text)?)
                } else {
                    visitor.visit_i32(self.varint(2, int)? as i32)
                }
            }
            Special::Quantity => {
                let [text] = self.scalars::<1>()?;
                visitor.visit_borrowed_str(self.text(1, text)?)
            }
            Special::RawJson => {
                let raw = self.raw()?;
                if raw.is_empty() {
                    return visitor.visit_unit();
                }
                if super::codec::is_protobuf(raw) {
                    return Err(self.error(ProtobufErrorKind::Value(
                        "the raw extension holds protobuf, not JSON".into(),
                    )));
                }
                let json =
                    |e: serde_json::Error| self.error(ProtobufErrorKind::Value(e.to_string()));
                // Validated once, whole, so that serde_json reads a `str` and skips validating
                // each string (as the JSON path does for a whole frame).
                let Ok(text) = simdutf8::basic::from_utf8(raw) else {
                    return Err(self.error(ProtobufErrorKind::Value(
                        "the raw extension is not UTF-8".into(),
                    )));
                };
                let mut de = serde_json::Deserializer::from_str(text);
                let value = de.deserialize_any(visitor).map_err(json)?;
                de.end().map_err(json)?;
                Ok(value)
            }
            Special::Slice => self.repeated(1, visitor),
            Special::SchemaOrArray | Special::SchemaOrStrings => {
                let [schema, many] = self.scalars::<2>()?;
                if many.is_some() {
                    self.repeated(2, visitor)
                } else if let Some(schema) = schema {
                    self.part(1, schema)?.deserialize_any(visitor)
                } else {
                    visitor.visit_unit()
                }
            }
            Special::SchemaOrBool => {
                let [allows, schema] = self.scalars::<2>()?;
                match schema {
                    Some(schema) => self.part(2, schema)?.deserialize_any(visitor),
                    None => visitor.visit_bool(self.varint(1, allows)? != 0),
                }
            }
        }
    }

    /// Field `number` of this message, as a value.
    fn part(&self, number: u32, value: Value<'de>) -> Result<ValueDe<'de, 'b>, Error> {
        let field = self.message.field(number).ok_or_else(|| {
            self.error(ProtobufErrorKind::Value(format!(
                "no field {number} in the schema"
            )))
        })?;
        Ok(ValueDe {
            kind: field.kind,
            value,
            number,
            at: self.at,
            context: &self.message.name,
            ctx: self.ctx,
        })
    }

    /// The elements of repeated field `number`, as an array (empty when there are none).
    fn repeated<V: Visitor<'de>>(self, number: u32, visitor: V) -> Result<V::Value, Error> {
        let empty =
            || de::value::SeqDeserializer::<std::iter::Empty<()>, Error>::new(std::iter::empty());
        let Some(field) = self.message.field(number) else {
            return visitor.visit_seq(empty());
        };
        let ctx = self.ctx.deeper(self.at, &self.message.name)?;
        let mut frame = Frame::new(ctx.reader(self.bytes, self.at, self.message), self.message);
        let mut first = None;
        while let Some((n, value)) = frame.reader.next()? {
            if n == number {
                first = Some((value, frame.reader.field_at));
                break;
            }
        }
        let Some(first) = first else {
            return visitor.visit_seq(empty());
        };
        // Looking ahead for every element: these messages are small, and nothing else in them
        // would notice a scattered one.
        let mut occurrences = Occurrences::new(&mut frame, field, first, true)?;
        visitor.visit_seq(Elements {
            occurrences: &mut occurrences,
            packed: None,
            ctx,
        })
    }
}

impl<'de> Deserializer<'de> for MessageDe<'de, '_> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.message.special {
            Some(special) => self.special(special, visitor),
            None => visitor.visit_map(self.fields()?),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        if self.is_null()? {
            visitor.visit_none()
        } else {
            visitor.visit_some(self)
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        unit unit_struct seq tuple tuple_struct map struct enum identifier
    }
}

/// A top-level message with members protobuf does not carry put first (see
/// [`decode_typed`]).
struct TypedDe<'de, 'b> {
    types: &'static [(&'static str, &'static str)],
    message: MessageDe<'de, 'b>,
}

impl<'de> Deserializer<'de> for TypedDe<'de, '_> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_map(TypedAccess {
            types: self.types,
            pending: None,
            fields: self.message.fields()?,
        })
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map struct enum
        identifier ignored_any
    }
}

struct TypedAccess<'de, 'b> {
    /// The members still to hand out.
    types: &'static [(&'static str, &'static str)],
    /// The value of the member whose key was handed out.
    pending: Option<&'static str>,
    fields: FieldsAccess<'de, 'b>,
}

impl<'de> MapAccess<'de> for TypedAccess<'de, '_> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        if let Some(((key, value), rest)) = self.types.split_first() {
            self.types = rest;
            self.pending = Some(value);
            return seed
                .deserialize(BorrowedStrDeserializer::<Error>::new(key))
                .map(Some);
        }
        self.fields.next_key_seed(seed)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        match self.pending.take() {
            Some(value) => seed.deserialize(BorrowedStrDeserializer::<Error>::new(value)),
            None => self.fields.next_value_seed(seed),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// A message's fields, as an object.

/// One message being read, or a struct embedded inline in it.
struct Frame<'de, 'b> {
    reader: Reader<'de, 'b>,
    /// The message from its start, to look for a repeated field's later occurrences.
    start: Reader<'de, 'b>,
    message: &'static MessageSchema,
    /// Whether some repeated field's occurrences are not all adjacent (never, as the
    /// apiserver writes them), found on first need (in a careful decode).
    scattered: Option<bool>,
    /// The repeated fields already read whole, when scattered.
    taken: Vec<u32>,
    /// The repeated fields (numbers below 128) whose run was read (in a first attempt).
    runs: u128,
}

impl<'de, 'b> Frame<'de, 'b> {
    fn new(reader: Reader<'de, 'b>, message: &'static MessageSchema) -> Self {
        Frame {
            start: reader.clone(),
            reader,
            message,
            scattered: None,
            taken: Vec::new(),
            runs: 0,
        }
    }

    fn scattered(&mut self) -> Result<bool, Error> {
        if let Some(scattered) = self.scattered {
            return Ok(scattered);
        }
        // Numbers below 128 (all of Kubernetes') in a bit set; any other is taken for
        // scattered, which only costs the slower path.
        let (mut seen, mut last) = (0u128, 0u32);
        let mut r = self.start.clone();
        let mut scattered = false;
        while let Some((number, _)) = r.next()? {
            if number == last {
                continue;
            }
            if number >= 128 || seen & (1 << number) != 0 {
                scattered = true;
                break;
            }
            seen |= 1 << number;
            last = number;
        }
        self.scattered = Some(scattered);
        Ok(scattered)
    }
}

struct FieldsAccess<'de, 'b> {
    top: Frame<'de, 'b>,
    /// Structs embedded inline, innermost last (held here, not on the heap: one pod has
    /// several, each a few hundred bytes; Kubernetes nests them two deep at most).
    inline: [Option<Frame<'de, 'b>>; MAX_INLINE],
    /// How many of `inline` are in use.
    inline_depth: usize,
    /// The field whose key was handed out, with its offset and message.
    pending: Option<(&'static FieldSchema, Value<'de>, usize, &'static str)>,
    ctx: Ctx<'b>,
}

impl<'de, 'b> FieldsAccess<'de, 'b> {
    fn frame(&mut self) -> &mut Frame<'de, 'b> {
        match self.inline_depth.checked_sub(1) {
            Some(i) => self.inline[i].as_mut().unwrap_or(&mut self.top),
            None => &mut self.top,
        }
    }
}

impl<'de> MapAccess<'de> for FieldsAccess<'de, '_> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        let (schema, careful, scattered) = (self.ctx.schema, self.ctx.careful, self.ctx.scattered);
        loop {
            let frame = self.frame();
            let Some((number, value)) = frame.reader.next()? else {
                if let Some(i) = self.inline_depth.checked_sub(1) {
                    self.inline[i] = None;
                    self.inline_depth = i;
                    continue;
                }
                return Ok(None);
            };
            let at = frame.reader.field_at;
            let context: &'static str = &frame.message.name;
            let Some(field) = frame.message.field(number) else {
                continue;
            };
            if !frame.taken.is_empty() && frame.taken.contains(&number) {
                continue;
            }
            if field.repeated && !careful {
                // A repeated field met again after its run: start over, carefully.
                if number >= 128 || frame.runs & (1 << number) != 0 {
                    scattered.set(true);
                    return Err(de::Error::custom("a repeated field apart from its run"));
                }
                frame.runs |= 1 << number;
            }
            // Go's JSON never leaves a struct out, `omitempty` or not.
            if !field.repeated
                && field.omit_zero
                && !matches!(field.kind, Kind::Message(_))
                && is_zero(value)
            {
                continue;
            }
            match field.json {
                InJson::Absent => continue,
                InJson::Inline => {
                    // A struct embedded inline: its fields are the enclosing object's.
                    let Kind::Message(id) = field.kind else {
                        continue;
                    };
                    let Value::Bytes(bytes, bytes_at) = value else {
                        return Err(wire_error(
                            at,
                            context,
                            number,
                            value,
                            WireType::LengthDelimited,
                        ));
                    };
                    let Some(slot) = self.inline.get_mut(self.inline_depth) else {
                        return Err(Error(ProtobufError::new(
                            at,
                            context,
                            ProtobufErrorKind::Depth(MAX_INLINE as u32),
                        )));
                    };
                    self.ctx = self.ctx.deeper(at, context)?;
                    let reader = self.ctx.reader(bytes, bytes_at, schema.message(id));
                    *slot = Some(Frame::new(reader, schema.message(id)));
                    self.inline_depth += 1;
                    continue;
                }
                InJson::Member => {}
            }
            if let (Kind::Message(id), false) = (field.kind, field.repeated) {
                // A zero time is JSON's `null`: left out, as a missing field reads the same.
                let inner = schema.message(id);
                if matches!(inner.special, Some(Special::Time | Special::MicroTime))
                    && let Value::Bytes(bytes, bytes_at) = value
                    && (MessageDe {
                        bytes,
                        at: bytes_at,
                        message: inner,
                        ctx: self.ctx,
                    })
                    .instant()?
                    .is_none()
                {
                    continue;
                }
            }
            self.pending = Some((field, value, at, context));
            return seed
                .deserialize(BorrowedStrDeserializer::<Error>::new(&field.name))
                .map(Some);
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        let Some((field, value, at, context)) = self.pending.take() else {
            return Err(de::Error::custom("a value asked for before its key"));
        };
        let ctx = self.ctx;
        let result = if field.repeated {
            let frame = self.frame();
            let mut occurrences = Occurrences::new(frame, field, (value, at), ctx.careful)?;
            let value = seed.deserialize(RepeatedDe {
                occurrences: &mut occurrences,
                ctx,
            });
            // Whatever the value left unread is not read again as keys (the value's own error
            // comes first).
            let drained = occurrences.drain();
            value.and_then(|value| drained.map(|()| value))
        } else {
            seed.deserialize(ValueDe {
                kind: field.kind,
                value,
                number: field.number,
                at,
                context,
                ctx,
            })
        };
        result.map_err(|e| e.placed(at, context))
    }
}

/// Whether a scalar is its type's zero (Go's JSON leaves such a value out when `omitempty`).
fn is_zero(value: Value<'_>) -> bool {
    match value {
        Value::Varint(v) | Value::Fixed64(v) => v == 0,
        Value::Fixed32(v) => v == 0,
        Value::Bytes(bytes, _) => bytes.is_empty(),
    }
}

// ---------------------------------------------------------------------------------------------
// A repeated field: an array, or a map's entries.

/// The occurrences of one repeated field in its message, in order.
struct Occurrences<'f, 'de, 'b> {
    frame: &'f mut Frame<'de, 'b>,
    field: &'static FieldSchema,
    first: Option<(Value<'de>, usize)>,
    /// Past the adjacent run, when the field's occurrences are scattered: a reader of the
    /// rest of the message that looks for the others.
    search: Option<Reader<'de, 'b>>,
}

impl<'f, 'de, 'b> Occurrences<'f, 'de, 'b> {
    fn new(
        frame: &'f mut Frame<'de, 'b>,
        field: &'static FieldSchema,
        first: (Value<'de>, usize),
        careful: bool,
    ) -> Result<Self, Error> {
        let search = if careful && frame.scattered()? {
            frame.taken.push(field.number);
            Some(frame.reader.clone())
        } else {
            None
        };
        Ok(Occurrences {
            frame,
            field,
            first: Some(first),
            search,
        })
    }

    fn context(&self) -> &'static str {
        &self.frame.message.name
    }

    /// The next occurrence and its offset.
    fn next(&mut self) -> Result<Option<(Value<'de>, usize)>, Error> {
        if let Some(first) = self.first.take() {
            return Ok(Some(first));
        }
        if let Some(search) = &mut self.search {
            while let Some((number, value)) = search.next()? {
                if number == self.field.number {
                    return Ok(Some((value, search.field_at)));
                }
            }
            return Ok(None);
        }
        let mut probe = self.frame.reader.clone();
        match probe.next()? {
            Some((number, value)) if number == self.field.number => {
                let at = probe.field_at;
                self.frame.reader = probe;
                Ok(Some((value, at)))
            }
            _ => Ok(None),
        }
    }

    /// Reads past the occurrences left.
    fn drain(&mut self) -> Result<(), Error> {
        while self.next()?.is_some() {}
        Ok(())
    }
}

struct RepeatedDe<'o, 'f, 'de, 'b> {
    occurrences: &'o mut Occurrences<'f, 'de, 'b>,
    ctx: Ctx<'b>,
}

impl<'de> Deserializer<'de> for RepeatedDe<'_, '_, 'de, '_> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let field = self.occurrences.field;
        if let Kind::Message(id) = field.kind {
            let entry = self.ctx.schema.message(id);
            if entry.map_entry {
                return visitor.visit_map(Entries {
                    occurrences: self.occurrences,
                    entry,
                    pending: None,
                    ctx: self.ctx,
                });
            }
        }
        visitor.visit_seq(Elements {
            occurrences: self.occurrences,
            packed: None,
            ctx: self.ctx,
        })
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_some(self)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.occurrences.drain()?;
        visitor.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        unit unit_struct seq tuple tuple_struct map struct enum identifier
    }
}

/// A repeated field's elements.
struct Elements<'o, 'f, 'de, 'b> {
    occurrences: &'o mut Occurrences<'f, 'de, 'b>,
    /// The rest of a packed occurrence (many scalars in one length-delimited field).
    packed: Option<(&'de [u8], usize)>,
    ctx: Ctx<'b>,
}

impl<'de> SeqAccess<'de> for Elements<'_, '_, 'de, '_> {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Error> {
        let field = self.occurrences.field;
        let context = self.occurrences.context();
        loop {
            if let Some((bytes, at)) = self.packed.take()
                && !bytes.is_empty()
            {
                let (value, rest) = packed_scalar(field, bytes, at, context)?;
                let consumed = bytes.len() - rest.len();
                self.packed = Some((rest, at + consumed));
                return seed
                    .deserialize(ValueDe {
                        kind: field.kind,
                        value,
                        number: field.number,
                        at,
                        context,
                        ctx: self.ctx,
                    })
                    .map(Some)
                    .map_err(|e| e.placed(at, context));
            }
            let Some((value, at)) = self.occurrences.next()? else {
                return Ok(None);
            };
            if let (Value::Bytes(bytes, bytes_at), true) = (value, packable(field.kind)) {
                self.packed = Some((bytes, bytes_at));
                continue;
            }
            return seed
                .deserialize(ValueDe {
                    kind: field.kind,
                    value,
                    number: field.number,
                    at,
                    context,
                    ctx: self.ctx,
                })
                .map(Some)
                .map_err(|e| e.placed(at, context));
        }
    }
}

/// Whether a repeated field of this type may be packed (scalars that are not text).
fn packable(kind: Kind) -> bool {
    !matches!(kind, Kind::String | Kind::Bytes | Kind::Message(_))
}

/// One scalar off the front of a packed field.
fn packed_scalar<'de>(
    field: &FieldSchema,
    bytes: &'de [u8],
    at: usize,
    context: &'static str,
) -> Result<(Value<'de>, &'de [u8]), Error> {
    let short = |width: usize| {
        Error(ProtobufError::new(
            at,
            context,
            ProtobufErrorKind::PastTheEnd {
                field: field.number,
                length: width as u64,
                left: bytes.len(),
            },
        ))
    };
    match field.kind {
        Kind::Fixed32(_) => {
            let (word, rest) = bytes.split_first_chunk::<4>().ok_or_else(|| short(4))?;
            Ok((Value::Fixed32(u32::from_le_bytes(*word)), rest))
        }
        Kind::Fixed64(_) => {
            let (word, rest) = bytes.split_first_chunk::<8>().ok_or_else(|| short(8))?;
            Ok((Value::Fixed64(u64::from_le_bytes(*word)), rest))
        }
        _ => {
            let mut rest = bytes;
            let v = decode_varint(&mut rest).map_err(|e| {
                Error(ProtobufError::new(
                    at,
                    context,
                    ProtobufErrorKind::Wire(e.to_string()),
                ))
            })?;
            Ok((Value::Varint(v), rest))
        }
    }
}

/// A map field's entries (each an entry message: key 1, value 2).
struct Entries<'o, 'f, 'de, 'b> {
    occurrences: &'o mut Occurrences<'f, 'de, 'b>,
    entry: &'static MessageSchema,
    /// The value of the entry whose key was handed out (`None` when it has none), and the
    /// entry's offset.
    pending: Option<(Option<(Value<'de>, usize)>, usize)>,
    ctx: Ctx<'b>,
}

impl<'de> Entries<'_, '_, 'de, '_> {
    /// A key or value of an entry, its type's zero when the entry leaves it out.
    fn part(
        &self,
        number: u32,
        value: Option<(Value<'de>, usize)>,
        at: usize,
    ) -> Result<ValueDe<'de, '_>, Error> {
        let context: &'static str = &self.entry.name;
        let Some(field) = self.entry.field(number) else {
            return Err(Error(ProtobufError::new(
                at,
                context,
                ProtobufErrorKind::Value(format!("a map entry without field {number}")),
            )));
        };
        let (value, at) = value.unwrap_or_else(|| (zero(field.kind), at));
        Ok(ValueDe {
            kind: field.kind,
            value,
            number,
            at,
            context,
            ctx: self.ctx,
        })
    }
}

/// The zero of a type, for a map entry that leaves its key or value out.
fn zero(kind: Kind) -> Value<'static> {
    match kind {
        Kind::Fixed32(_) => Value::Fixed32(0),
        Kind::Fixed64(_) => Value::Fixed64(0),
        Kind::String | Kind::Bytes | Kind::Message(_) => Value::Bytes(&[], 0),
        Kind::Bool | Kind::Varint { .. } | Kind::ZigZag => Value::Varint(0),
    }
}

impl<'de> MapAccess<'de> for Entries<'_, '_, 'de, '_> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        let Some((entry, at)) = self.occurrences.next()? else {
            return Ok(None);
        };
        let context = self.occurrences.context();
        let Value::Bytes(bytes, bytes_at) = entry else {
            return Err(wire_error(
                at,
                context,
                self.occurrences.field.number,
                entry,
                WireType::LengthDelimited,
            ));
        };
        let mut r = self.ctx.reader(bytes, bytes_at, self.entry);
        let (mut key, mut value) = (None, None);
        while let Some((number, v)) = r.next()? {
            match number {
                1 => key = Some((v, r.field_at)),
                2 => value = Some((v, r.field_at)),
                _ => {}
            }
        }
        self.pending = Some((value, bytes_at));
        let key = self.part(1, key, bytes_at)?;
        seed.deserialize(key)
            .map(Some)
            .map_err(|e| e.placed(at, context))
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        let Some((value, at)) = self.pending.take() else {
            return Err(de::Error::custom("a value asked for before its key"));
        };
        let part = self.part(2, value, at)?;
        seed.deserialize(part)
    }
}

// ---------------------------------------------------------------------------------------------
// One value.

struct ValueDe<'de, 'b> {
    kind: Kind,
    value: Value<'de>,
    number: u32,
    /// The field's offset, and its message, for errors.
    at: usize,
    context: &'static str,
    ctx: Ctx<'b>,
}

impl<'de, 'b> ValueDe<'de, 'b> {
    fn message(&self, id: MessageId) -> Result<MessageDe<'de, 'b>, Error> {
        match self.value {
            Value::Bytes(bytes, at) => Ok(MessageDe {
                bytes,
                at,
                message: self.ctx.schema.message(id),
                ctx: self.ctx,
            }),
            other => Err(self.wire_error(other, WireType::LengthDelimited)),
        }
    }

    fn wire_error(&self, got: Value<'_>, expected: WireType) -> Error {
        wire_error(self.at, self.context, self.number, got, expected)
    }
}

impl<'de> Deserializer<'de> for ValueDe<'de, '_> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match (self.kind, self.value) {
            (Kind::Bool, Value::Varint(v)) => visitor.visit_bool(v != 0),
            (Kind::Varint { signed, narrow }, Value::Varint(v)) => match (signed, narrow) {
                // A negative int32 is written sign-extended to 64 bits.
                (true, true) => visitor.visit_i32(v as i64 as i32),
                (true, false) => visitor.visit_i64(v as i64),
                (false, true) => visitor.visit_u32(v as u32),
                (false, false) => visitor.visit_u64(v),
            },
            (Kind::ZigZag, Value::Varint(v)) => {
                visitor.visit_i64(((v >> 1) as i64) ^ -((v & 1) as i64))
            }
            (Kind::Fixed32(fixed), Value::Fixed32(v)) => match fixed {
                Fixed::Unsigned => visitor.visit_u32(v),
                Fixed::Signed => visitor.visit_i32(v as i32),
                Fixed::Float => visitor.visit_f32(f32::from_bits(v)),
            },
            (Kind::Fixed64(fixed), Value::Fixed64(v)) => match fixed {
                Fixed::Unsigned => visitor.visit_u64(v),
                Fixed::Signed => visitor.visit_i64(v as i64),
                Fixed::Float => visitor.visit_f64(f64::from_bits(v)),
            },
            (Kind::String, Value::Bytes(bytes, at)) => {
                visitor.visit_borrowed_str(utf8(bytes, at, self.number, self.context)?)
            }
            (Kind::Bytes, Value::Bytes(bytes, _)) => {
                visitor.visit_string(base64::engine::general_purpose::STANDARD.encode(bytes))
            }
            (Kind::Message(id), _) => self.message(id)?.deserialize_any(visitor),
            (Kind::Bool | Kind::Varint { .. } | Kind::ZigZag, other) => {
                Err(self.wire_error(other, WireType::Varint))
            }
            (Kind::Fixed32(_), other) => Err(self.wire_error(other, WireType::ThirtyTwoBit)),
            (Kind::Fixed64(_), other) => Err(self.wire_error(other, WireType::SixtyFourBit)),
            (Kind::String | Kind::Bytes, other) => {
                Err(self.wire_error(other, WireType::LengthDelimited))
            }
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self.kind {
            Kind::Message(id) => self.message(id)?.deserialize_struct(name, fields, visitor),
            _ => self.deserialize_any(visitor),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.kind {
            Kind::Message(id) => self.message(id)?.deserialize_option(visitor),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        unit unit_struct seq tuple tuple_struct map enum identifier
    }
}

fn utf8<'de>(
    bytes: &'de [u8],
    at: usize,
    number: u32,
    context: &'static str,
) -> Result<&'de str, Error> {
    simdutf8::basic::from_utf8(bytes).map_err(|_| {
        Error(ProtobufError::new(
            at,
            context,
            ProtobufErrorKind::Utf8(number),
        ))
    })
}

fn wire_error(
    at: usize,
    context: &'static str,
    number: u32,
    got: Value<'_>,
    expected: WireType,
) -> Error {
    Error(ProtobufError::new(
        at,
        context,
        ProtobufErrorKind::WireType {
            field: number,
            got: got.wire_type() as u8,
            expected: expected as u8,
        },
    ))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::ControllerRevision;
    use k8s_openapi::api::core::v1::{ConfigMap, Pod};
    use prost::encoding::{WireType, encode_key, encode_varint};

    use super::super::{ProtobufErrorKind, builtin};
    use crate::Object;

    /// Protobuf written by hand, field by field.
    #[derive(Default)]
    struct Msg(Vec<u8>);

    impl Msg {
        fn varint(mut self, field: u32, v: u64) -> Self {
            encode_key(field, WireType::Varint, &mut self.0);
            encode_varint(v, &mut self.0);
            self
        }
        fn bytes(mut self, field: u32, b: &[u8]) -> Self {
            encode_key(field, WireType::LengthDelimited, &mut self.0);
            encode_varint(b.len() as u64, &mut self.0);
            self.0.extend_from_slice(b);
            self
        }
        fn text(self, field: u32, s: &str) -> Self {
            self.bytes(field, s.as_bytes())
        }
        fn msg(self, field: u32, m: Msg) -> Self {
            self.bytes(field, &m.0)
        }
        fn fixed32(mut self, field: u32, v: u32) -> Self {
            encode_key(field, WireType::ThirtyTwoBit, &mut self.0);
            self.0.extend_from_slice(&v.to_le_bytes());
            self
        }
        fn fixed64(mut self, field: u32, v: u64) -> Self {
            encode_key(field, WireType::SixtyFourBit, &mut self.0);
            self.0.extend_from_slice(&v.to_le_bytes());
            self
        }
    }

    fn decode<O: Object>(m: &Msg, limit: u64) -> Result<O, super::ProtobufError> {
        let codec = O::protobuf().expect("a built-in type");
        (codec.decode)(&m.0, 0, limit).map(|(o, _)| o)
    }

    #[test]
    fn a_repeated_field_apart_from_its_run_keeps_every_element_in_order() {
        // finalizers (14) a, then name (1), then finalizers b: valid protobuf, though Go
        // writes the elements together.
        let meta = Msg::default()
            .text(14, "a")
            .text(1, "cm")
            .text(14, "b")
            .text(3, "ns")
            .text(14, "c");
        let cm: ConfigMap = decode(&Msg::default().msg(1, meta), u64::MAX).unwrap();
        assert_eq!(cm.metadata.name.as_deref(), Some("cm"));
        assert_eq!(cm.metadata.namespace.as_deref(), Some("ns"));
        assert_eq!(
            cm.metadata.finalizers,
            Some(vec!["a".into(), "b".into(), "c".into()])
        );
        // Map entries apart too.
        let entry = |k: &str, v: &str| Msg::default().text(1, k).text(2, v);
        let cm = Msg::default()
            .msg(2, entry("x", "1"))
            .msg(1, Msg::default().text(1, "cm"))
            .msg(2, entry("y", "2"));
        let cm: ConfigMap = decode(&cm, u64::MAX).unwrap();
        let data = cm.data.unwrap();
        assert_eq!((data["x"].as_str(), data["y"].as_str()), ("1", "2"));
    }

    #[test]
    fn packed_and_unpacked_scalars_are_one_array() {
        let mut packed = Vec::new();
        for v in [1u64, 2, 300] {
            encode_varint(v, &mut packed);
        }
        let security = Msg::default().varint(4, 7).bytes(4, &packed).varint(4, 8);
        let spec = Msg::default().msg(14, security);
        let pod: Pod = decode(&Msg::default().msg(2, spec), u64::MAX).unwrap();
        let groups = pod
            .spec
            .unwrap()
            .security_context
            .unwrap()
            .supplemental_groups;
        assert_eq!(groups, Some(vec![7, 1, 2, 300, 8]));
    }

    #[test]
    fn unknown_fields_of_every_wire_type_are_skipped() {
        let meta = Msg::default()
            .varint(99, 5)
            .text(1, "cm")
            .fixed32(98, 1)
            .fixed64(97, 2)
            .bytes(96, b"\xff\xfe");
        let cm = Msg::default().varint(500, 1).msg(1, meta).varint(4, 1);
        let cm: ConfigMap = decode(&cm, u64::MAX).unwrap();
        assert_eq!(cm.metadata.name.as_deref(), Some("cm"));
        assert_eq!(cm.immutable, Some(true));
    }

    #[test]
    fn a_map_entry_without_its_value_holds_the_empty_value() {
        let cm = Msg::default().msg(2, Msg::default().text(1, "k"));
        let cm: ConfigMap = decode(&cm, u64::MAX).unwrap();
        assert_eq!(cm.data.unwrap()["k"], "");
        let cm = Msg::default().msg(3, Msg::default().text(1, "bin"));
        let cm: ConfigMap = decode(&cm, u64::MAX).unwrap();
        assert!(cm.binary_data.unwrap()["bin"].0.is_empty());
    }

    #[test]
    fn bad_input_is_a_typed_error_that_says_where() {
        // name (ObjectMeta 1) as a varint: the wrong wire type, at the field's offset.
        let cm = Msg::default().msg(1, Msg::default().text(3, "ns").varint(1, 5));
        let e = decode::<ConfigMap>(&cm, u64::MAX).unwrap_err();
        assert_eq!(e.context, "k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta");
        assert_eq!(e.at, 6, "{e}");
        assert!(matches!(
            e.kind,
            ProtobufErrorKind::WireType {
                field: 1,
                got: 0,
                expected: 2
            }
        ));
        // A string that is not UTF-8.
        let cm = Msg::default().msg(1, Msg::default().bytes(1, b"\xff"));
        let e = decode::<ConfigMap>(&cm, u64::MAX).unwrap_err();
        assert!(matches!(e.kind, ProtobufErrorKind::Utf8(1)), "{e}");
        // A length past the end.
        let e = decode::<ConfigMap>(&Msg(vec![0x0a, 0x05, 0x0a]), u64::MAX).unwrap_err();
        assert!(
            matches!(e.kind, ProtobufErrorKind::PastTheEnd { .. }),
            "{e}"
        );
        // A time out of metav1.Time's range.
        let time = Msg::default().varint(1, i64::MAX as u64);
        let cm = Msg::default().msg(1, Msg::default().msg(8, time));
        let e = decode::<ConfigMap>(&cm, u64::MAX).unwrap_err();
        assert!(matches!(e.kind, ProtobufErrorKind::Time(_)), "{e}");
        // Raw JSON that does not parse, and JSON nested past serde_json's limit.
        for raw in [&b"{"[..], "[".repeat(10_000).as_bytes()] {
            let revision = Msg::default().msg(2, Msg::default().bytes(1, raw));
            let e = decode::<ControllerRevision>(&revision, u64::MAX).unwrap_err();
            assert!(matches!(e.kind, ProtobufErrorKind::Value(_)), "{e}");
        }
        // A raw extension holding protobuf, which the JSON type cannot take.
        let revision = Msg::default().msg(2, Msg::default().bytes(1, b"k8s\0\x0a\x00"));
        let e = decode::<ControllerRevision>(&revision, u64::MAX).unwrap_err();
        assert!(e.to_string().contains("holds protobuf"), "{e}");
    }

    #[test]
    fn zero_times_are_absent_and_set_ones_read_as_go_writes_them() {
        let stamp = |seconds: i64| Msg::default().varint(1, seconds as u64);
        for zero in [Msg::default(), stamp(super::super::reader::GO_ZERO_TIME)] {
            let cm = Msg::default().msg(1, Msg::default().msg(8, zero));
            let cm: ConfigMap = decode(&cm, u64::MAX).unwrap();
            assert_eq!(cm.metadata.creation_timestamp, None);
        }
        // The epoch is a time, not Go's zero; nanoseconds are dropped, as Go's decoder does.
        let epoch = Msg::default().varint(1, 0).varint(2, 5);
        let cm = Msg::default().msg(1, Msg::default().msg(8, epoch));
        let cm: ConfigMap = decode(&cm, u64::MAX).unwrap();
        let created = cm.metadata.creation_timestamp.unwrap();
        assert_eq!(created.0.to_string(), "1970-01-01T00:00:00Z");
    }

    #[test]
    fn schema_unions_read_as_the_json_apiextensions_writes() {
        use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
            CustomResourceValidation, JSONSchemaProps, JSONSchemaPropsOrArray,
            JSONSchemaPropsOrBool, JSONSchemaPropsOrStringArray,
        };
        // Decoded as the `openAPIV3Schema` (1) of a CustomResourceValidation.
        let props = |m: Msg| -> JSONSchemaProps {
            let v = Msg::default().msg(1, m);
            let decoded: CustomResourceValidation =
                serde::Deserialize::deserialize(super::MessageDe {
                    bytes: &v.0,
                    at: 0,
                    message: validation_schema(),
                    ctx: super::Ctx {
                        schema: super::schema(),
                        budget: &super::Budget::new(u64::MAX),
                        depth: 0,
                        careful: true,
                        scattered: &std::cell::Cell::new(false),
                    },
                })
                .unwrap();
            decoded.open_api_v3_schema.unwrap()
        };
        let string = || Msg::default().text(5, "string");
        // additionalProperties: a schema, or a bool when there is none.
        let with_schema = props(Msg::default().msg(30, Msg::default().msg(2, string())));
        assert!(matches!(
            with_schema.additional_properties,
            Some(JSONSchemaPropsOrBool::Schema(ref s)) if s.type_.as_deref() == Some("string")
        ));
        let allowed = props(Msg::default().msg(30, Msg::default().varint(1, 1)));
        assert_eq!(
            allowed.additional_properties,
            Some(JSONSchemaPropsOrBool::Bool(true))
        );
        let refused = props(Msg::default().msg(30, Msg::default()));
        assert_eq!(
            refused.additional_properties,
            Some(JSONSchemaPropsOrBool::Bool(false))
        );
        // items: the array when it has elements, else the schema, else null.
        let array = props(Msg::default().msg(24, Msg::default().msg(2, string()).msg(2, string())));
        assert!(
            matches!(array.items, Some(JSONSchemaPropsOrArray::Schemas(ref v)) if v.len() == 2)
        );
        let one = props(Msg::default().msg(24, Msg::default().msg(1, string())));
        assert!(matches!(one.items, Some(JSONSchemaPropsOrArray::Schema(_))));
        assert_eq!(props(Msg::default().msg(24, Msg::default())).items, None);
        // dependencies: strings, or a schema.
        let entry = |k: &str, v: Msg| Msg::default().text(1, k).msg(2, v);
        let deps = props(
            Msg::default()
                .msg(32, entry("a", Msg::default().text(2, "b").text(2, "c")))
                .msg(32, entry("d", Msg::default().msg(1, string()))),
        )
        .dependencies
        .unwrap();
        assert_eq!(
            deps["a"],
            JSONSchemaPropsOrStringArray::Strings(vec!["b".into(), "c".into()])
        );
        assert!(matches!(deps["d"], JSONSchemaPropsOrStringArray::Schema(_)));
        // A double, and a default as raw JSON.
        let numbers = props(
            Msg::default()
                .fixed64(19, 0.5f64.to_bits())
                .msg(8, Msg::default().text(1, "{\"x\":[1,2]}")),
        );
        assert_eq!(numbers.multiple_of, Some(0.5));
        assert_eq!(numbers.default.unwrap().0, serde_json::json!({"x": [1, 2]}));
    }

    fn validation_schema() -> &'static super::MessageSchema {
        let schema = super::schema();
        let crd = schema
            .resource("apiextensions.k8s.io", "v1", "CustomResourceDefinition")
            .unwrap();
        // CustomResourceDefinition.spec (2) .versions (7) .schema (4).
        let mut message = schema.message(crd.message);
        for number in [2, 7, 4] {
            let super::Kind::Message(id) = message.field(number).unwrap().kind else {
                panic!("field {number} of {} is a message", message.name);
            };
            message = schema.message(id);
        }
        assert_eq!(
            &*message.name,
            "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.CustomResourceValidation"
        );
        message
    }

    #[test]
    fn a_value_over_its_budget_is_too_large_and_the_charge_is_the_same_under_any_budget() {
        let entry = |k: &str| Msg::default().text(1, k).text(2, &"v".repeat(100));
        let mut cm = Msg::default();
        for i in 0..50 {
            cm = cm.msg(2, entry(&format!("key-{i}")));
        }
        let codec = builtin::codec::<ConfigMap>().unwrap();
        let (_, charged) = (codec.decode)(&cm.0, 0, u64::MAX).unwrap();
        assert!(charged > 5_000, "{charged}");
        let (_, again) = (codec.decode)(&cm.0, 0, charged).unwrap();
        assert_eq!(again, charged);
        let e = (codec.decode)(&cm.0, 0, 1_000).unwrap_err();
        assert!(
            matches!(e.kind, ProtobufErrorKind::TooLarge { limit: 1_000 }),
            "{e}"
        );
    }
}
