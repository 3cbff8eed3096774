//! The wire format: one message's fields read over borrowed bytes with prost's primitives
//! (`decode_key`, `decode_varint`), charged to what the value built from them may hold; and
//! `metav1.Time` as Go's JSON writes it.

use compact_str::CompactString;
use prost::encoding::{WireType, decode_key, decode_varint};

use super::codec::{ProtobufError, ProtobufErrorKind};

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
    pub(super) field_at: usize,
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
    pub(crate) fn child(
        &self,
        (buf, base): (&'a [u8], usize),
        context: &'static str,
    ) -> Reader<'a, 'b> {
        Reader::new(buf, base, context, self.budget)
    }

    /// Charges `bytes` to the budget.
    pub(crate) fn charge(&self, bytes: usize) -> Result<(), ProtobufError> {
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
    pub(crate) fn compact(
        &self,
        field: u32,
        value: Value<'a>,
    ) -> Result<CompactString, ProtobufError> {
        let text = self.str(field, value)?;
        if text.len() > INLINE {
            self.charge(text.len())?;
        }
        Ok(CompactString::from(text))
    }

    pub(crate) fn error(&self, kind: ProtobufErrorKind) -> ProtobufError {
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
    pub(crate) fn opt_str(
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

/// One entry of a `map<string, string>`: a message of key 1 and value 2.
pub(crate) fn map_entry<'a>(mut e: Reader<'a, '_>) -> Result<(&'a str, &'a str), ProtobufError> {
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

/// Seconds from the epoch of Go's zero `time.Time` (0001-01-01T00:00:00Z), which JSON writes
/// as `null`.
pub(super) const GO_ZERO_TIME: i64 = -62_135_596_800;

/// Seconds from the epoch of 9999-12-31T23:59:59Z, the last instant `metav1.Time` allows.
pub(super) const LAST_TIME: i64 = 253_402_300_799;

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
pub(crate) fn time(mut r: Reader<'_, '_>) -> Result<Option<CompactString>, ProtobufError> {
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
pub(super) fn rfc3339(seconds: i64) -> CompactString {
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
