//! Redaction of captured apiserver payloads before they are written to a trace.
//!
//! A trace keeps what the apiserver sent, byte for byte; a capture of a real cluster must not
//! keep its secrets. A [`Redaction`] rewrites LIST bodies ([`Redaction::list_body`]), watch
//! lines ([`Redaction::watch_line`]) and single objects ([`Redaction::object`]):
//!
//! - **Secrets** (an object of kind `Secret`, an item of a `SecretList`, or any object when
//!   [`Redaction::resource_is_secret`] says the captured resource is Secrets): every value
//!   under `data` and `stringData` is replaced by [`MASK`] (the keys are kept), and so is
//!   the `kubectl.kubernetes.io/last-applied-configuration` annotation, which holds the whole
//!   object as applied. On by default.
//! - **managedFields** (`metadata.managedFields`) are dropped: large, and nothing a
//!   controller reads. On by default; [`Redaction::keep_managed_fields`] keeps them.
//! - **Chosen fields** ([`Redaction::digest`] with a [`JsonPath`], for example
//!   `$.spec.template.spec.containers[*].env[*].value`) are replaced by a digest of their
//!   JSON text, `sha256:` and the first 16 hex digits ([`digest`]): equal values keep equal
//!   digests, so a change is still a change in a replay.
//!
//! Everything else is kept as received: members in their order, untouched values byte for
//! byte (an object is re-written only along the paths that lead to a redacted field; one
//! with nothing to redact comes back as `None`, meaning "unchanged"). A payload that is not
//! JSON cannot be inspected, so it is replaced whole by a digest (a watch line then stays
//! undecodable, as it was). [`Redaction::none`] keeps everything.
//!
//! Kubernetes protobuf (issue 16: an enveloped LIST body, a `WatchEvent` frame) is not
//! rewritten field by field: it is kept as received when nothing in it may need redacting
//! (its envelope names a kind other than `Secret` / `SecretList`, the resource is not
//! Secrets, and no [`Redaction::digest`] path is set; `managedFields` are then kept, as they
//! hold field names, not values), so a recorded protobuf run replays; otherwise it is
//! replaced whole by its digest.
//!
//! Every function is bounded: nesting deeper than [`MAX_DEPTH`] or a payload larger than
//! [`MAX_PAYLOAD`] is an error naming what was refused, never a panic.

use std::borrow::Cow;
use std::fmt::{self, Write as _};
use std::str::FromStr;

use serde::de::{Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use sha2::{Digest as _, Sha256};

/// What a masked Secret value is replaced with (not base64, so it cannot be mistaken for
/// data).
pub const MASK: &str = "<redacted>";

/// The annotation `kubectl apply` keeps the applied object in (a Secret's data included).
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Deepest JSON nesting a payload may have.
pub const MAX_DEPTH: usize = 128;

/// Largest payload (a LIST body) redacted, in bytes.
pub const MAX_PAYLOAD: usize = 1 << 30;

/// Hex digits of a digest kept after `sha256:`.
pub const DIGEST_HEX: usize = 16;

/// Why a payload or a path could not be redacted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RedactError {
    /// A `--redact` path that does not parse.
    #[error("JSONPath {path:?}, at byte {at}: {message}")]
    Path {
        /// The path as given.
        path: String,
        /// Byte offset of the problem.
        at: usize,
        /// What is wrong.
        message: String,
    },
    /// A payload nested deeper than [`MAX_DEPTH`].
    #[error("{what}: nested deeper than {MAX_DEPTH} levels")]
    TooDeep {
        /// The payload (`LIST body`, `watch line`, `object`).
        what: &'static str,
    },
    /// A payload larger than [`MAX_PAYLOAD`].
    #[error("{what}: {size} bytes, more than {MAX_PAYLOAD}")]
    TooLarge {
        /// The payload.
        what: &'static str,
        /// Its size.
        size: usize,
    },
}

/// One step of a [`JsonPath`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    /// A member of an object, by name.
    Key(String),
    /// Every member of an object, or every element of an array (`*`, `[*]`).
    Any,
    /// One element of an array (`[3]`).
    Index(usize),
}

/// A field path in the JSONPath subset `kubectl -o jsonpath` users write: an optional `$`,
/// then `.name`, `['name']` / `["name"]` (for names with dots, such as annotation keys),
/// `[n]`, `[*]` or `.*`. The leading dot may be left out: `spec.data`, `.spec.data` and
/// `$.spec.data` are the same path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonPath {
    text: String,
    segments: Vec<Segment>,
}

impl JsonPath {
    /// The steps, outermost first.
    #[must_use]
    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    fn of(segments: &[&str]) -> JsonPath {
        JsonPath {
            text: segments.join("."),
            segments: segments
                .iter()
                .map(|s| {
                    if *s == "*" {
                        Segment::Any
                    } else {
                        Segment::Key((*s).to_owned())
                    }
                })
                .collect(),
        }
    }
}

impl fmt::Display for JsonPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl FromStr for JsonPath {
    type Err = RedactError;

    fn from_str(text: &str) -> Result<Self, RedactError> {
        let err = |at: usize, message: &str| RedactError::Path {
            path: text.to_owned(),
            at,
            message: message.to_owned(),
        };
        let bytes = text.as_bytes();
        let mut i = 0;
        if bytes.first() == Some(&b'$') {
            i = 1;
        }
        let mut segments = Vec::new();
        let mut first = true;
        while i < bytes.len() {
            match bytes[i] {
                b'.' => {
                    i += 1;
                    let start = i;
                    while i < bytes.len() && bytes[i] != b'.' && bytes[i] != b'[' {
                        i += 1;
                    }
                    let name = &text[start..i];
                    if name.is_empty() {
                        return Err(err(start, "an empty name"));
                    }
                    if let Some(at) = name.find(']') {
                        return Err(err(start + at, "']' without '['"));
                    }
                    segments.push(if name == "*" {
                        Segment::Any
                    } else {
                        Segment::Key(name.to_owned())
                    });
                }
                b'[' => {
                    let close = text[i..]
                        .find(']')
                        .map(|c| i + c)
                        .ok_or_else(|| err(i, "'[' without ']'"))?;
                    let inner = text[i + 1..close].trim();
                    let segment = if inner == "*" {
                        Segment::Any
                    } else if let Some(q) = inner
                        .strip_prefix('\'')
                        .and_then(|s| s.strip_suffix('\''))
                        .or_else(|| inner.strip_prefix('"').and_then(|s| s.strip_suffix('"')))
                    {
                        Segment::Key(q.to_owned())
                    } else if let Ok(n) = inner.parse::<usize>() {
                        Segment::Index(n)
                    } else {
                        return Err(err(
                            i,
                            "expected [*], [n], ['name'] or [\"name\"] inside brackets",
                        ));
                    };
                    // `['a.b']` may hold a ']' only when quoted, which `find` would cut: refuse.
                    if inner.starts_with('\'') != inner.ends_with('\'') {
                        return Err(err(i, "unbalanced quotes"));
                    }
                    segments.push(segment);
                    i = close + 1;
                }
                _ if first => {
                    // `spec.data`: a first name without its dot.
                    let start = i;
                    while i < bytes.len() && bytes[i] != b'.' && bytes[i] != b'[' {
                        i += 1;
                    }
                    let name = &text[start..i];
                    if let Some(at) = name.find(']') {
                        return Err(err(start + at, "']' without '['"));
                    }
                    segments.push(if name == "*" {
                        Segment::Any
                    } else {
                        Segment::Key(name.to_owned())
                    });
                }
                _ => return Err(err(i, "expected '.' or '['")),
            }
            first = false;
        }
        if segments.is_empty() {
            return Err(err(0, "a path names at least one field"));
        }
        if segments.len() > MAX_DEPTH {
            return Err(err(0, "too many steps"));
        }
        Ok(JsonPath {
            text: text.to_owned(),
            segments,
        })
    }
}

/// `sha256:` and the first [`DIGEST_HEX`] hex digits of the SHA-256 of `bytes`.
#[must_use]
pub fn digest(bytes: &[u8]) -> String {
    let hash = Sha256::digest(bytes);
    let mut out = String::with_capacity(7 + DIGEST_HEX);
    out.push_str("sha256:");
    for b in hash.iter().take(DIGEST_HEX / 2) {
        let _ = write!(out, "{b:02x}");
    }
    out
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    /// The member is left out.
    Drop,
    /// The value becomes [`MASK`].
    Mask,
    /// The value becomes its [`digest`].
    Digest,
}

#[derive(Debug, Clone)]
struct Rule {
    path: JsonPath,
    action: Action,
}

/// What to redact; see the [module docs](self). [`Redaction::default`] masks Secrets and drops
/// managedFields.
#[derive(Debug, Clone)]
pub struct Redaction {
    enabled: bool,
    secrets: bool,
    managed_fields: bool,
    resource_is_secret: bool,
    digests: Vec<Rule>,
}

impl Default for Redaction {
    fn default() -> Self {
        Redaction {
            enabled: true,
            secrets: true,
            managed_fields: true,
            resource_is_secret: false,
            digests: Vec::new(),
        }
    }
}

/// An object's members in their order, each value's JSON text as received.
struct Members<'a>(Vec<(String, &'a RawValue)>);

impl<'de: 'a, 'a> serde::Deserialize<'de> for Members<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Members<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Members<'a>, M::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, &'a RawValue>()? {
                    out.push((k, v));
                }
                Ok(Members(out))
            }
        }
        d.deserialize_map(V(std::marker::PhantomData))
    }
}

/// An array's elements, each as received.
struct Elements<'a>(Vec<&'a RawValue>);

impl<'de: 'a, 'a> serde::Deserialize<'de> for Elements<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Elements<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON array")
            }
            fn visit_seq<S: SeqAccess<'de>>(self, mut seq: S) -> Result<Elements<'a>, S::Error> {
                let mut out = Vec::new();
                while let Some(v) = seq.next_element::<&'a RawValue>()? {
                    out.push(v);
                }
                Ok(Elements(out))
            }
        }
        d.deserialize_seq(V(std::marker::PhantomData))
    }
}

/// A rule part-way down its path: the rule and how many steps it has matched.
type Cursor<'r> = (&'r Rule, usize);

impl Redaction {
    /// Keeps everything, byte for byte (`--no-redact`).
    #[must_use]
    pub fn none() -> Self {
        Redaction {
            enabled: false,
            ..Redaction::default()
        }
    }

    /// Keeps `metadata.managedFields` (`--keep-managed-fields`).
    #[must_use]
    pub fn keep_managed_fields(mut self) -> Self {
        self.managed_fields = false;
        self
    }

    /// Treats every object as a Secret even without a `kind` (a LIST's items have none): set
    /// it when the captured resource is `secrets`.
    #[must_use]
    pub fn resource_is_secret(mut self, yes: bool) -> Self {
        self.resource_is_secret = yes;
        self
    }

    /// Replaces the value at `path` in every object by its [`digest`] (`--redact PATH`).
    #[must_use]
    pub fn digest(mut self, path: JsonPath) -> Self {
        self.digests.push(Rule {
            path,
            action: Action::Digest,
        });
        self
    }

    /// Whether anything is redacted at all.
    #[must_use]
    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// What this redaction does, in words (for a trace's description).
    #[must_use]
    pub fn describe(&self) -> String {
        if !self.enabled {
            return "not redacted (--no-redact)".into();
        }
        let mut parts = Vec::new();
        if self.secrets {
            parts.push("Secret data, stringData and last-applied-configuration masked".to_owned());
        }
        if self.managed_fields {
            parts.push("managedFields dropped".to_owned());
        }
        for r in &self.digests {
            parts.push(format!("{} digested", r.path));
        }
        format!("redacted: {}", parts.join(", "))
    }

    /// Redacts one object (its JSON text). `Ok(None)`: nothing to change.
    ///
    /// # Errors
    /// A payload too deep or too large. Text that is not JSON is replaced by its digest.
    pub fn object(&self, raw: &str) -> Result<Option<String>, RedactError> {
        self.object_as(raw, self.resource_is_secret, "object")
    }

    fn object_as(
        &self,
        raw: &str,
        secret: bool,
        what: &'static str,
    ) -> Result<Option<String>, RedactError> {
        if !self.enabled {
            return Ok(None);
        }
        check_size(what, raw.len())?;
        let Ok(members) = serde_json::from_str::<Members<'_>>(raw) else {
            return self.opaque(raw, what);
        };
        let is_secret = secret
            || members.0.iter().any(|(k, v)| {
                k == "kind" && serde_json::from_str::<&str>(v.get()).ok() == Some("Secret")
            });
        let rules = self.rules(is_secret);
        if rules.is_empty() {
            return Ok(None);
        }
        let cursors: Vec<Cursor<'_>> = rules.iter().map(|r| (r, 0)).collect();
        self.rewrite_members(&members, &cursors, 1, what)
    }

    /// Redacts a LIST response body: each of its `items`. `Ok(None)`: nothing to change.
    ///
    /// # Errors
    /// A payload too deep or too large.
    pub fn list_body(&self, body: &[u8]) -> Result<Option<Vec<u8>>, RedactError> {
        const WHAT: &str = "LIST body";
        if !self.enabled {
            return Ok(None);
        }
        check_size(WHAT, body.len())?;
        if let Some(kind) = reconcile_core::protobuf::payload_kind(body) {
            return Ok(self.protobuf(kind, body));
        }
        let Ok(text) = std::str::from_utf8(body) else {
            return Ok(self.opaque_bytes(body));
        };
        let Ok(members) = serde_json::from_str::<Members<'_>>(text) else {
            return Ok(self.opaque_bytes(body));
        };
        let secret = self.resource_is_secret
            || members.0.iter().any(|(k, v)| {
                k == "kind" && serde_json::from_str::<&str>(v.get()).ok() == Some("SecretList")
            });
        let mut changed = false;
        let mut out = String::with_capacity(text.len());
        out.push('{');
        for (n, (key, value)) in members.0.iter().enumerate() {
            if n > 0 {
                out.push(',');
            }
            push_key(&mut out, key);
            if key == "items"
                && let Ok(items) = serde_json::from_str::<Elements<'_>>(value.get())
            {
                out.push('[');
                for (i, item) in items.0.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    match self.object_as(item.get(), secret, WHAT)? {
                        Some(new) => {
                            changed = true;
                            out.push_str(&new);
                        }
                        None => out.push_str(item.get()),
                    }
                }
                out.push(']');
            } else {
                out.push_str(value.get());
            }
        }
        out.push('}');
        Ok(changed.then(|| out.into_bytes()))
    }

    /// Redacts one watch line (`{"type": ..., "object": ...}`): its object, unless the event
    /// is an `ERROR` (a Status). `Ok(None)`: nothing to change. A trailing newline is kept.
    ///
    /// # Errors
    /// A payload too deep or too large.
    pub fn watch_line(&self, line: &[u8]) -> Result<Option<Vec<u8>>, RedactError> {
        const WHAT: &str = "watch line";
        if !self.enabled {
            return Ok(None);
        }
        check_size(WHAT, line.len())?;
        if let Some(kind) = reconcile_core::protobuf::payload_kind(line) {
            return Ok(self.protobuf(kind, line));
        }
        let (body, newline) = match line.strip_suffix(b"\n") {
            Some(b) => (b, true),
            None => (line, false),
        };
        let Ok(text) = std::str::from_utf8(body) else {
            return Ok(self.opaque_bytes(line));
        };
        if text.trim().is_empty() {
            return Ok(None);
        }
        let Ok(members) = serde_json::from_str::<Members<'_>>(text) else {
            return Ok(self.opaque_bytes(line));
        };
        let is_error = members.0.iter().any(|(k, v)| {
            k == "type" && serde_json::from_str::<&str>(v.get()).ok() == Some("ERROR")
        });
        if is_error {
            return Ok(None);
        }
        let mut changed = false;
        let mut out = String::with_capacity(text.len());
        out.push('{');
        for (n, (key, value)) in members.0.iter().enumerate() {
            if n > 0 {
                out.push(',');
            }
            push_key(&mut out, key);
            if key == "object" {
                match self.object_as(value.get(), self.resource_is_secret, WHAT)? {
                    Some(new) => {
                        changed = true;
                        out.push_str(&new);
                    }
                    None => out.push_str(value.get()),
                }
            } else {
                out.push_str(value.get());
            }
        }
        out.push('}');
        if newline {
            out.push('\n');
        }
        Ok(changed.then(|| out.into_bytes()))
    }

    fn rules(&self, secret: bool) -> Vec<Rule> {
        let mut rules = Vec::new();
        if self.managed_fields {
            rules.push(Rule {
                path: JsonPath::of(&["metadata", "managedFields"]),
                action: Action::Drop,
            });
        }
        if self.secrets && secret {
            for path in [
                JsonPath::of(&["data", "*"]),
                JsonPath::of(&["stringData", "*"]),
                JsonPath::of(&["metadata", "annotations", LAST_APPLIED]),
            ] {
                rules.push(Rule {
                    path,
                    action: Action::Mask,
                });
            }
        }
        rules.extend(self.digests.iter().cloned());
        rules
    }

    /// A protobuf payload carrying `kind`: kept (`None`) unless it may hold a Secret or a
    /// chosen path, which cannot be redacted field by field here: then its digest.
    fn protobuf(&self, kind: &str, raw: &[u8]) -> Option<Vec<u8>> {
        let secret = self.resource_is_secret || matches!(kind, "Secret" | "SecretList");
        if (self.secrets && secret) || !self.digests.is_empty() {
            self.opaque_bytes(raw)
        } else {
            None
        }
    }

    /// A payload that cannot be inspected: replaced whole by its digest.
    fn opaque(&self, raw: &str, _what: &'static str) -> Result<Option<String>, RedactError> {
        Ok(Some(
            serde_json::Value::String(digest(raw.as_bytes())).to_string(),
        ))
    }

    fn opaque_bytes(&self, raw: &[u8]) -> Option<Vec<u8>> {
        let mut out = format!(
            "{{\"redacted\":\"undecodable payload, {} bytes, {}\"}}",
            raw.len(),
            digest(raw)
        )
        .into_bytes();
        if raw.ends_with(b"\n") {
            out.push(b'\n');
        }
        Some(out)
    }

    /// Re-writes an object's members where some rule's next step matches; `None` when
    /// nothing changed.
    fn rewrite_members(
        &self,
        members: &Members<'_>,
        cursors: &[Cursor<'_>],
        depth: usize,
        what: &'static str,
    ) -> Result<Option<String>, RedactError> {
        if depth > MAX_DEPTH {
            return Err(RedactError::TooDeep { what });
        }
        let mut changed = false;
        let mut out = String::new();
        out.push('{');
        let mut first = true;
        for (key, value) in &members.0 {
            let next: Vec<Cursor<'_>> = cursors
                .iter()
                .filter(|(rule, at)| match &rule.path.segments[*at] {
                    Segment::Key(k) => k == key,
                    Segment::Any => true,
                    Segment::Index(_) => false,
                })
                .map(|(rule, at)| (*rule, at + 1))
                .collect();
            let replaced = self.rewrite_value(value, &next, depth, what)?;
            match replaced {
                Replaced::Dropped => {
                    changed = true;
                    continue;
                }
                Replaced::Same => {
                    if !first {
                        out.push(',');
                    }
                    push_key(&mut out, key);
                    out.push_str(value.get());
                }
                Replaced::With(text) => {
                    changed = true;
                    if !first {
                        out.push(',');
                    }
                    push_key(&mut out, key);
                    out.push_str(&text);
                }
            }
            first = false;
        }
        out.push('}');
        Ok(changed.then_some(out))
    }

    fn rewrite_elements(
        &self,
        elements: &Elements<'_>,
        cursors: &[Cursor<'_>],
        depth: usize,
        what: &'static str,
    ) -> Result<Option<String>, RedactError> {
        if depth > MAX_DEPTH {
            return Err(RedactError::TooDeep { what });
        }
        let mut changed = false;
        let mut out = String::new();
        out.push('[');
        let mut first = true;
        for (i, value) in elements.0.iter().enumerate() {
            let next: Vec<Cursor<'_>> = cursors
                .iter()
                .filter(|(rule, at)| match &rule.path.segments[*at] {
                    Segment::Index(n) => *n == i,
                    Segment::Any => true,
                    Segment::Key(_) => false,
                })
                .map(|(rule, at)| (*rule, at + 1))
                .collect();
            let text: Cow<'_, str> = match self.rewrite_value(value, &next, depth, what)? {
                // An array element cannot be left out without shifting the others: masked.
                Replaced::Dropped => {
                    changed = true;
                    Cow::Borrowed("null")
                }
                Replaced::Same => Cow::Borrowed(value.get()),
                Replaced::With(t) => {
                    changed = true;
                    Cow::Owned(t)
                }
            };
            if !first {
                out.push(',');
            }
            out.push_str(&text);
            first = false;
        }
        out.push(']');
        Ok(changed.then_some(out))
    }

    fn rewrite_value(
        &self,
        value: &RawValue,
        cursors: &[Cursor<'_>],
        depth: usize,
        what: &'static str,
    ) -> Result<Replaced, RedactError> {
        if cursors.is_empty() {
            return Ok(Replaced::Same);
        }
        // A rule that ends here decides; the first in order wins (drop, mask, then digests).
        if let Some((rule, _)) = cursors.iter().find(|(r, at)| *at == r.path.segments.len()) {
            let text = value.get();
            return Ok(match rule.action {
                Action::Drop => Replaced::Dropped,
                Action::Mask => Replaced::With(format!("\"{MASK}\"")),
                Action::Digest => {
                    // A string's digest is of its characters, so it matches what a user
                    // hashes by hand; anything else's of its JSON text.
                    let bytes = serde_json::from_str::<Cow<'_, str>>(text)
                        .map(|s| s.into_owned().into_bytes())
                        .unwrap_or_else(|_| text.as_bytes().to_vec());
                    Replaced::With(format!("\"{}\"", digest(&bytes)))
                }
            });
        }
        let text = value.get();
        let rewritten = match text.as_bytes().first() {
            Some(b'{') => match serde_json::from_str::<Members<'_>>(text) {
                Ok(m) => self.rewrite_members(&m, cursors, depth + 1, what)?,
                Err(_) => return Err(RedactError::TooDeep { what }),
            },
            Some(b'[') => match serde_json::from_str::<Elements<'_>>(text) {
                Ok(e) => self.rewrite_elements(&e, cursors, depth + 1, what)?,
                Err(_) => return Err(RedactError::TooDeep { what }),
            },
            _ => None,
        };
        Ok(rewritten.map_or(Replaced::Same, Replaced::With))
    }
}

enum Replaced {
    Same,
    Dropped,
    With(String),
}

fn push_key(out: &mut String, key: &str) {
    out.push_str(&serde_json::Value::String(key.to_owned()).to_string());
    out.push(':');
}

fn check_size(what: &'static str, size: usize) -> Result<(), RedactError> {
    if size > MAX_PAYLOAD {
        return Err(RedactError::TooLarge { what, size });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = r#"{"kind":"Secret","apiVersion":"v1","metadata":{"name":"s","namespace":"ns","resourceVersion":"7","annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{\"data\":{\"password\":\"aHVudGVyMg==\"}}","keep":"me"},"managedFields":[{"manager":"kubectl","fieldsV1":{"f:data":{}}}]},"data":{"password":"aHVudGVyMg==","user":"YWRtaW4="},"stringData":{"token":"hunter2"},"type":"Opaque"}"#;

    #[test]
    fn a_secret_keeps_its_keys_and_loses_its_values_and_managed_fields() {
        let out = Redaction::default()
            .object(SECRET)
            .expect("redacts")
            .expect("changed");
        assert!(!out.contains("aHVudGVyMg=="), "{out}");
        assert!(!out.contains("hunter2"), "{out}");
        assert!(!out.contains("YWRtaW4="), "{out}");
        assert!(!out.contains("managedFields"), "{out}");
        assert_eq!(
            out,
            r#"{"kind":"Secret","apiVersion":"v1","metadata":{"name":"s","namespace":"ns","resourceVersion":"7","annotations":{"kubectl.kubernetes.io/last-applied-configuration":"<redacted>","keep":"me"}},"data":{"password":"<redacted>","user":"<redacted>"},"stringData":{"token":"<redacted>"},"type":"Opaque"}"#
        );
    }

    #[test]
    fn managed_fields_can_be_kept_and_nothing_is_touched_without_redaction() {
        let out = Redaction::default()
            .keep_managed_fields()
            .object(SECRET)
            .expect("redacts")
            .expect("changed");
        assert!(out.contains("managedFields") && !out.contains("hunter2"));
        assert_eq!(Redaction::none().object(SECRET), Ok(None));
        assert_eq!(Redaction::none().watch_line(b"not json"), Ok(None));
    }

    #[test]
    fn an_object_with_nothing_to_redact_is_unchanged_byte_for_byte() {
        let pod = r#"{"metadata":{"name":"a",  "labels":{"x":"y"}},"spec":{}}"#;
        assert_eq!(Redaction::default().object(pod), Ok(None));
    }

    #[test]
    fn list_items_without_kind_are_secrets_when_the_list_says_so() {
        let body = br#"{"kind":"SecretList","apiVersion":"v1","metadata":{"resourceVersion":"9"},"items":[{"metadata":{"name":"s"},"data":{"k":"c2VjcmV0"}}]}"#;
        let out = Redaction::default()
            .list_body(body)
            .expect("redacts")
            .expect("changed");
        let out = String::from_utf8(out).expect("utf8");
        assert_eq!(
            out,
            r#"{"kind":"SecretList","apiVersion":"v1","metadata":{"resourceVersion":"9"},"items":[{"metadata":{"name":"s"},"data":{"k":"<redacted>"}}]}"#
        );
        // A ConfigMapList's data is kept.
        let cm =
            br#"{"kind":"ConfigMapList","items":[{"metadata":{"name":"c"},"data":{"k":"v"}}]}"#;
        assert_eq!(Redaction::default().list_body(cm), Ok(None));
        // Unless the captured resource is Secrets.
        assert!(
            Redaction::default()
                .resource_is_secret(true)
                .list_body(cm)
                .expect("ok")
                .is_some()
        );
    }

    #[test]
    fn a_watch_line_is_redacted_and_keeps_its_newline_and_an_error_is_kept() {
        let line = format!("{{\"type\":\"MODIFIED\",\"object\":{SECRET}}}\n");
        let out = Redaction::default()
            .watch_line(line.as_bytes())
            .expect("ok")
            .expect("changed");
        let out = String::from_utf8(out).expect("utf8");
        assert!(out.ends_with("}\n") && !out.contains("hunter2"), "{out}");
        let error = br#"{"type":"ERROR","object":{"kind":"Status","code":410}}"#;
        assert_eq!(Redaction::default().watch_line(error), Ok(None));
        // Not JSON: replaced by a digest, still not an event.
        let out = Redaction::default()
            .watch_line(b"garbage hunter2\n")
            .expect("ok")
            .expect("changed");
        let out = String::from_utf8(out).expect("utf8");
        assert!(!out.contains("hunter2") && out.ends_with('\n'), "{out}");
    }

    #[test]
    fn chosen_paths_become_digests_so_equality_survives() {
        let r = Redaction::default()
            .digest("$.spec.containers[*].env[*].value".parse().expect("a path"));
        let a = r#"{"spec":{"containers":[{"name":"c","env":[{"name":"A","value":"one"},{"name":"B","value":"one"},{"name":"C","value":"two"}]}]}}"#;
        let out = r.object(a).expect("ok").expect("changed");
        let one = digest(b"one");
        let two = digest(b"two");
        assert_eq!(
            out,
            format!(
                r#"{{"spec":{{"containers":[{{"name":"c","env":[{{"name":"A","value":"{one}"}},{{"name":"B","value":"{one}"}},{{"name":"C","value":"{two}"}}]}}]}}}}"#
            )
        );
        assert_eq!(one.len(), 7 + DIGEST_HEX);
        // Annotation keys with dots, quoted.
        let r = Redaction::default().digest(
            "metadata.annotations['example.com/token']"
                .parse()
                .expect("a path"),
        );
        let out = r
            .object(r#"{"metadata":{"annotations":{"example.com/token":"t0k3n","x":"y"}}}"#)
            .expect("ok")
            .expect("changed");
        assert!(
            !out.contains("t0k3n") && out.contains("\"x\":\"y\""),
            "{out}"
        );
    }

    #[test]
    fn bad_paths_say_where() {
        for (path, at) in [("", 0), ("$.a..b", 4), ("a[", 1), ("a[x]", 1), ("a]b", 1)] {
            match path.parse::<JsonPath>() {
                Err(RedactError::Path { at: got, .. }) => assert_eq!(got, at, "{path}"),
                other => panic!("{path}: {other:?}"),
            }
        }
        let ok: JsonPath = ".data['a.b'][0].*".parse().expect("a path");
        assert_eq!(
            ok.segments(),
            [
                Segment::Key("data".into()),
                Segment::Key("a.b".into()),
                Segment::Index(0),
                Segment::Any
            ]
        );
    }

    #[test]
    fn protobuf_is_kept_unless_it_may_hold_a_secret() {
        use prost::Message as _;
        use reconcile_core::protobuf::messages as m;
        let pod = m::Pod {
            metadata: Some(m::ObjectMeta {
                name: Some("a".into()),
                resource_version: Some("3".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let list = m::envelope(
            "PodList",
            m::PodList {
                metadata: None,
                items: vec![pod.clone()],
            }
            .encode_to_vec(),
        );
        let frame = m::watch_frame("ADDED", m::envelope("Pod", pod.encode_to_vec()));
        let r = Redaction::default();
        assert_eq!(r.list_body(&list).unwrap(), None);
        assert_eq!(r.watch_line(&frame).unwrap(), None);
        // A Secret, a Secrets resource, or a chosen path: the whole payload is a digest.
        let secret = m::watch_frame("ADDED", m::envelope("Secret", pod.encode_to_vec()));
        assert!(r.watch_line(&secret).unwrap().is_some());
        let secrets = Redaction::default().resource_is_secret(true);
        assert!(secrets.list_body(&list).unwrap().is_some());
        let chosen = Redaction::default().digest("$.spec.nodeName".parse().unwrap());
        let redacted = chosen.watch_line(&frame).unwrap().unwrap();
        assert!(String::from_utf8(redacted).unwrap().contains("sha256:"));
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_stack_overflow() {
        let mut deep = String::new();
        for _ in 0..10_000 {
            deep.push_str("{\"a\":");
        }
        deep.push('1');
        for _ in 0..10_000 {
            deep.push('}');
        }
        let r = Redaction::default().digest("a".parse().expect("path"));
        // serde_json refuses past its own recursion limit: the text is not inspectable and
        // is replaced whole; either way no panic.
        let _ = r.object(&deep);
        let path = std::iter::repeat_n("a", 120).collect::<Vec<_>>().join(".");
        let r = Redaction::default().digest(path.parse().expect("path"));
        let mut nested = String::new();
        for _ in 0..120 {
            nested.push_str("{\"a\":");
        }
        nested.push('1');
        for _ in 0..120 {
            nested.push('}');
        }
        assert!(r.object(&nested).expect("within bounds").is_some());
    }
}
