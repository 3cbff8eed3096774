//! Field-level redaction of Kubernetes protobuf payloads (issue 16): an enveloped body
//! (`k8s\0` and a `runtime.Unknown`) or a `metav1.WatchEvent` frame around one.
//!
//! The wire format is walked field by field and copied as received, except where a Secret's
//! values sit: the envelope's `raw` (2), a frame's `RawExtension.raw` (2.1), a list's items
//! (2), an object's `ObjectMeta` (1) and, in a `core/v1.Secret`, `data` (2) and `stringData`
//! (4). In an `ObjectMeta` the `kubectl.kubernetes.io/last-applied-configuration` entry of
//! `annotations` (12) is masked and `managedFields` (17) are dropped. Field numbers are
//! upstream's (k8s.io/api `core/v1/generated.proto`, k8s.io/apimachinery
//! `pkg/apis/meta/v1/generated.proto`, `pkg/runtime/generated.proto`).
//!
//! Anything this walk cannot read (a truncated varint, a group, a length past the end) makes
//! the caller replace the payload whole: it is never written as received.

use super::{LAST_APPLIED, LastApplied, MASK, classify_last_applied};

/// The envelope's magic.
const MAGIC: [u8; 4] = reconcile_core::protobuf::MAGIC;

/// What to do with the `ObjectMeta` of an object.
#[derive(Debug, Clone, Copy)]
pub(super) struct Rules {
    /// The object is (or may be) a Secret: mask its values and its last-applied annotation.
    pub(super) secret: bool,
    /// Drop `managedFields` (of Secrets; other kinds keep theirs, as field names).
    pub(super) managed_fields: bool,
}

/// Whether `payload` is protobuf (an envelope, or a watch frame around one).
pub(super) fn is_protobuf_payload(payload: &[u8]) -> bool {
    reconcile_core::protobuf::payload_kind(payload).is_some()
}

/// One field of a message: its number, wire type, the whole field's bytes (key included) and,
/// for a length-delimited field, its payload.
struct Field<'a> {
    tag: u64,
    wire: u8,
    whole: &'a [u8],
    value: &'a [u8],
}

fn varint(bytes: &[u8], at: &mut usize) -> Option<u64> {
    let mut out = 0u64;
    for shift in 0..10 {
        let b = *bytes.get(*at)?;
        *at += 1;
        out |= u64::from(b & 0x7f) << (7 * shift);
        if b & 0x80 == 0 {
            return Some(out);
        }
    }
    None
}

fn fields(message: &[u8]) -> Option<Vec<Field<'_>>> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < message.len() {
        let start = at;
        let key = varint(message, &mut at)?;
        let (tag, wire) = (key >> 3, (key & 7) as u8);
        let value = match wire {
            0 => {
                varint(message, &mut at)?;
                &message[at..at]
            }
            1 | 5 => {
                let n = if wire == 1 { 8 } else { 4 };
                let end = at.checked_add(n).filter(|e| *e <= message.len())?;
                at = end;
                &message[at..at]
            }
            2 => {
                let n = usize::try_from(varint(message, &mut at)?).ok()?;
                let end = at.checked_add(n).filter(|e| *e <= message.len())?;
                let value = &message[at..end];
                at = end;
                value
            }
            // Groups (3, 4) are not used by Kubernetes; anything else is not protobuf.
            _ => return None,
        };
        out.push(Field {
            tag,
            wire,
            whole: &message[start..at],
            value,
        });
    }
    Some(out)
}

fn push_varint(out: &mut Vec<u8>, mut n: u64) {
    loop {
        let b = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

/// Appends a length-delimited field.
pub(super) fn push_bytes(out: &mut Vec<u8>, tag: u64, bytes: &[u8]) {
    push_varint(out, (tag << 3) | 2);
    push_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// Rewrites the length-delimited fields of `message` through `f` (`Ok(None)`: unchanged,
/// `Ok(Some(None))`: dropped, `Ok(Some(Some(bytes)))`: replaced); `None` when the message does
/// not parse, or `f` says so. `Some(None)` when nothing changed.
#[allow(clippy::type_complexity)]
fn rewrite(
    message: &[u8],
    mut f: impl FnMut(u64, &[u8]) -> Option<Option<Option<Vec<u8>>>>,
) -> Option<Option<Vec<u8>>> {
    let mut out = Vec::with_capacity(message.len());
    let mut changed = false;
    for field in fields(message)? {
        if field.wire != 2 {
            out.extend_from_slice(field.whole);
            continue;
        }
        match f(field.tag, field.value)? {
            None => out.extend_from_slice(field.whole),
            Some(None) => changed = true,
            Some(Some(bytes)) => {
                changed = true;
                push_bytes(&mut out, field.tag, &bytes);
            }
        }
    }
    Some(changed.then_some(out))
}

/// A map entry's key (1) and value (2).
fn entry(entry: &[u8]) -> Option<(&[u8], &[u8])> {
    let mut key: &[u8] = &[];
    let mut value: &[u8] = &[];
    for field in fields(entry)? {
        match (field.tag, field.wire) {
            (1, 2) => key = field.value,
            (2, 2) => value = field.value,
            _ => {}
        }
    }
    Some((key, value))
}

/// A map entry with its value masked.
fn masked(entry_bytes: &[u8]) -> Option<Vec<u8>> {
    let (key, _) = entry(entry_bytes)?;
    let mut out = Vec::new();
    push_bytes(&mut out, 1, key);
    push_bytes(&mut out, 2, MASK.as_bytes());
    Some(out)
}

/// How an `ObjectMeta`'s last-applied annotation reads.
fn meta_last_applied(meta: &[u8]) -> Option<LastApplied> {
    let mut seen = LastApplied::Absent;
    for field in fields(meta)? {
        if field.tag == 12 && field.wire == 2 {
            let (key, value) = entry(field.value)?;
            if key == LAST_APPLIED.as_bytes() {
                seen = match std::str::from_utf8(value) {
                    Ok(text) => classify_last_applied(text),
                    Err(_) => LastApplied::Unknown,
                };
            }
        }
    }
    Some(seen)
}

/// Redacts an `ObjectMeta`; `secret` as [`Rules::secret`], or found in its last-applied
/// annotation. Returns whether the object turned out to be a Secret too.
fn meta(meta: &[u8], rules: Rules) -> Option<(Option<Vec<u8>>, bool)> {
    let last = meta_last_applied(meta)?;
    let secret = rules.secret || last == LastApplied::Secret;
    let mask_last = secret || last == LastApplied::Unknown;
    let out = rewrite(meta, |tag, value| match tag {
        12 if mask_last => {
            let (key, _) = entry(value)?;
            Some(if key == LAST_APPLIED.as_bytes() {
                Some(Some(masked(value)?))
            } else {
                None
            })
        }
        17 if secret && rules.managed_fields => Some(Some(None)),
        _ => Some(None),
    })?;
    Some((out, secret))
}

/// Redacts an object's message of `kind`.
fn object(kind: &str, message: &[u8], rules: Rules) -> Option<Option<Vec<u8>>> {
    match kind {
        "Secret" => {
            let rules = Rules {
                secret: true,
                ..rules
            };
            rewrite(message, |tag, value| match tag {
                1 => Some(meta(value, rules)?.0.map(Some)),
                2 | 4 => Some(Some(Some(masked(value)?))),
                _ => Some(None),
            })
        }
        "PartialObjectMetadata" => rewrite(message, |tag, value| match tag {
            1 => Some(meta(value, rules)?.0.map(Some)),
            _ => Some(None),
        }),
        "SecretList" | "PartialObjectMetadataList" => {
            let item = if kind == "SecretList" {
                "Secret"
            } else {
                "PartialObjectMetadata"
            };
            rewrite(message, |tag, value| match tag {
                2 => Some(object(item, value, rules)?.map(Some)),
                _ => Some(None),
            })
        }
        // A Status (an ERROR frame, a failed request) holds no object.
        "Status" => Some(None),
        // Any other kind of a Secrets resource cannot be read here: withheld whole.
        _ if rules.secret => None,
        _ => Some(None),
    }
}

/// Redacts an enveloped object (`k8s\0` + `runtime.Unknown`).
fn envelope(body: &[u8], rules: Rules) -> Option<Option<Vec<u8>>> {
    let message = body.strip_prefix(&MAGIC)?;
    let mut kind = String::new();
    for field in fields(message)? {
        if field.tag == 1 && field.wire == 2 {
            for f in fields(field.value)? {
                if f.tag == 2 && f.wire == 2 {
                    kind = String::from_utf8_lossy(f.value).into_owned();
                }
            }
        }
    }
    let rewritten = rewrite(message, |tag, value| match tag {
        2 => Some(object(&kind, value, rules)?.map(Some)),
        _ => Some(None),
    })?;
    Some(rewritten.map(|m| {
        let mut out = MAGIC.to_vec();
        out.extend_from_slice(&m);
        out
    }))
}

/// Redacts a protobuf payload: an envelope, or a watch frame around one. `None`: it could
/// not be read, and must be withheld whole; `Some(None)`: unchanged.
pub(super) fn payload(payload: &[u8], rules: Rules) -> Option<Option<Vec<u8>>> {
    if payload.starts_with(&MAGIC) {
        return envelope(payload, rules);
    }
    rewrite(payload, |tag, value| match tag {
        2 => Some(
            rewrite(value, |tag, raw| match tag {
                1 => Some(envelope(raw, rules)?.map(Some)),
                _ => Some(None),
            })?
            .map(Some),
        ),
        _ => Some(None),
    })
}
