//! Redaction of captured apiserver payloads before they are written to a trace.
//!
//! A trace keeps what the apiserver sent, byte for byte; a capture of a real cluster must not
//! keep its secrets. A [`Redaction`] rewrites LIST bodies ([`Redaction::list_body`]), watch
//! lines ([`Redaction::watch_line`]) and single objects ([`Redaction::object`]):
//!
//! - **Secrets** (an object of kind `Secret`, an item of a `SecretList`, an object whose
//!   last-applied-configuration names kind `Secret`, or any object of a source the writer
//!   says is Secrets: [`Redaction::resource_is_secret`], or per source through
//!   [`Redaction::entry`]; kinds are compared decoded, so `"Secr\u0065t"` is one): every
//!   value under `data` and `stringData` is replaced by [`MASK`] (the keys are kept), and so
//!   is the `kubectl.kubernetes.io/last-applied-configuration` annotation, which holds the
//!   whole object as applied (an annotation that is not JSON naming a kind is masked on any
//!   object: what it holds cannot be told). Any object with an `items` array is a list, each
//!   item judged too. On by default.
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
//! Kubernetes protobuf (issue 16: an enveloped LIST body, a `WatchEvent` frame) is redacted
//! field by field on the wire format and stays protobuf, so a recorded protobuf run replays:
//! a Secret's `data` and `stringData` values are masked and its (or a Secret's
//! `PartialObjectMetadata`'s) last-applied annotation masked and managedFields dropped;
//! other kinds are kept as received (managedFields too: field names, not values). A payload
//! that does not parse, a Secrets source's payload of an unknown kind, and any protobuf when
//! a [`Redaction::digest`] path is set are replaced whole by a digest.
//!
//! [`Redaction::entry`] is the one path every trace writer takes (the engine's recorder,
//! `reconcile-sim capture` and `import`).
//!
//! Every function is bounded: nesting deeper than [`MAX_DEPTH`] or a payload larger than
//! [`MAX_PAYLOAD`] is an error naming what was refused, never a panic.

use std::borrow::Cow;
use std::fmt::{self, Write as _};
use std::str::FromStr;

use serde::de::{Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use sha2::{Digest as _, Sha256};

mod protobuf;

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
        self.members_as(raw, &members, secret, 0, what)
    }

    /// Redacts an object, or a list of them (any object with an `items` array, whatever its
    /// kind says: a `List` may hold Secrets, and each item is judged by its own kind too).
    fn members_as(
        &self,
        raw: &str,
        members: &Members<'_>,
        secret: bool,
        lists: usize,
        what: &'static str,
    ) -> Result<Option<String>, RedactError> {
        if lists > MAX_DEPTH {
            return Err(RedactError::TooDeep { what });
        }
        let kind_is = |want: &str| {
            members
                .0
                .iter()
                .any(|(k, v)| k == "kind" && is_string(v, want))
        };
        let last = last_applied(members);
        let is_secret = secret || kind_is("Secret") || last == LastApplied::Secret;
        let items_secret = secret || kind_is("SecretList");
        let rules = self.rules(is_secret, last == LastApplied::Unknown);
        let own = if rules.is_empty() {
            None
        } else {
            let cursors: Vec<Cursor<'_>> = rules.iter().map(|r| (r, 0)).collect();
            self.rewrite_members(members, &cursors, 1, what)?
        };
        let has_items = members
            .0
            .iter()
            .any(|(k, v)| k == "items" && v.get().starts_with('['));
        if !has_items {
            return Ok(own);
        }
        let text: Cow<'_, str> = own.map_or(Cow::Borrowed(raw), Cow::Owned);
        let members = match serde_json::from_str::<Members<'_>>(&text) {
            Ok(m) => m,
            Err(_) => return Err(RedactError::TooDeep { what }),
        };
        let mut changed = matches!(text, Cow::Owned(_));
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
                    let redacted = match serde_json::from_str::<Members<'_>>(item.get()) {
                        Ok(m) => self.members_as(item.get(), &m, items_secret, lists + 1, what)?,
                        Err(_) => self.opaque(item.get(), what)?,
                    };
                    match redacted {
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
        Ok(changed.then_some(out))
    }

    /// Redacts a LIST response body: each of its `items`. `Ok(None)`: nothing to change.
    ///
    /// # Errors
    /// A payload too deep or too large.
    pub fn list_body(&self, body: &[u8]) -> Result<Option<Vec<u8>>, RedactError> {
        self.list_body_as(body, self.resource_is_secret)
    }

    fn list_body_as(&self, body: &[u8], secret: bool) -> Result<Option<Vec<u8>>, RedactError> {
        const WHAT: &str = "LIST body";
        if !self.enabled {
            return Ok(None);
        }
        check_size(WHAT, body.len())?;
        if protobuf::is_protobuf_payload(body) {
            return self.protobuf(body, secret, WHAT);
        }
        let Ok(text) = std::str::from_utf8(body) else {
            return Ok(self.opaque_bytes(body));
        };
        let Ok(members) = serde_json::from_str::<Members<'_>>(text) else {
            return Ok(self.opaque_bytes(body));
        };
        Ok(self
            .members_as(text, &members, secret, 0, WHAT)?
            .map(String::into_bytes))
    }

    /// Redacts one watch line (`{"type": ..., "object": ...}`): its object, whatever the
    /// event's type (an `ERROR` or `BOOKMARK` frame's object is redacted as any other; a
    /// Status has nothing to redact and comes back unchanged). `Ok(None)`: nothing to
    /// change. A trailing newline is kept.
    ///
    /// # Errors
    /// A payload too deep or too large.
    pub fn watch_line(&self, line: &[u8]) -> Result<Option<Vec<u8>>, RedactError> {
        self.watch_line_as(line, self.resource_is_secret)
    }

    fn watch_line_as(&self, line: &[u8], secret: bool) -> Result<Option<Vec<u8>>, RedactError> {
        const WHAT: &str = "watch line";
        if !self.enabled {
            return Ok(None);
        }
        check_size(WHAT, line.len())?;
        if protobuf::is_protobuf_payload(line) {
            return self.protobuf(line, secret, WHAT);
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
        let mut changed = false;
        let mut out = String::with_capacity(text.len());
        out.push('{');
        for (n, (key, value)) in members.0.iter().enumerate() {
            if n > 0 {
                out.push(',');
            }
            push_key(&mut out, key);
            if key == "object" {
                match self.object_as(value.get(), secret, WHAT)? {
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

    fn rules(&self, secret: bool, mask_last_applied: bool) -> Vec<Rule> {
        let mut rules = Vec::new();
        if self.secrets && mask_last_applied && !secret {
            rules.push(Rule {
                path: JsonPath::of(&["metadata", "annotations", LAST_APPLIED]),
                action: Action::Mask,
            });
        }
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

    /// A protobuf payload: Secrets redacted field by field ([`protobuf`]); one a chosen path
    /// applies to, or one that cannot be read, replaced whole by its digest.
    fn protobuf(
        &self,
        raw: &[u8],
        secret: bool,
        _what: &'static str,
    ) -> Result<Option<Vec<u8>>, RedactError> {
        if !self.digests.is_empty() {
            return Ok(self.opaque_bytes(raw));
        }
        let rules = protobuf::Rules {
            secret: self.secrets && secret,
            managed_fields: self.managed_fields,
        };
        Ok(match protobuf::payload(raw, rules) {
            Some(out) => out,
            None => self.opaque_bytes(raw),
        })
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

/// Whether `value` is the JSON string `want`, compared decoded (`"Secr\u0065t"` is
/// `Secret`).
fn is_string(value: &RawValue, want: &str) -> bool {
    serde_json::from_str::<Cow<'_, str>>(value.get()).is_ok_and(|s| s == want)
}

/// What an object's last-applied-configuration annotation says it was applied as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LastApplied {
    /// No such annotation.
    Absent,
    /// A JSON object of kind `Secret`: the object is a Secret, whatever its own kind says
    /// (a `PartialObjectMetadata` of one, for example).
    Secret,
    /// A JSON object of another kind.
    Other,
    /// Not a JSON object naming its kind: what it holds cannot be told, so it is masked.
    Unknown,
}

/// Reads the annotation's value as applied JSON.
fn classify_last_applied(text: &str) -> LastApplied {
    let Ok(members) = serde_json::from_str::<Members<'_>>(text) else {
        return LastApplied::Unknown;
    };
    let kinds: Vec<bool> = members
        .0
        .iter()
        .filter(|(k, _)| k == "kind")
        .map(|(_, v)| is_string(v, "Secret"))
        .collect();
    if kinds.is_empty() {
        LastApplied::Unknown
    } else if kinds.iter().any(|secret| *secret) {
        LastApplied::Secret
    } else {
        LastApplied::Other
    }
}

/// The strongest reading of every `metadata.annotations[LAST_APPLIED]` of `members`
/// (duplicate keys included: each is read).
fn last_applied(members: &Members<'_>) -> LastApplied {
    let mut seen = LastApplied::Absent;
    let mut note = |l: LastApplied| {
        seen = match (seen, l) {
            (LastApplied::Secret, _) | (_, LastApplied::Secret) => LastApplied::Secret,
            (LastApplied::Unknown, _) | (_, LastApplied::Unknown) => LastApplied::Unknown,
            (LastApplied::Other, _) | (_, LastApplied::Other) => LastApplied::Other,
            _ => LastApplied::Absent,
        };
    };
    for (key, meta) in &members.0 {
        if key != "metadata" {
            continue;
        }
        let Ok(meta) = serde_json::from_str::<Members<'_>>(meta.get()) else {
            continue;
        };
        for (key, annotations) in &meta.0 {
            if key != "annotations" {
                continue;
            }
            let Ok(annotations) = serde_json::from_str::<Members<'_>>(annotations.get()) else {
                continue;
            };
            for (key, value) in &annotations.0 {
                if key == LAST_APPLIED {
                    note(match serde_json::from_str::<Cow<'_, str>>(value.get()) {
                        Ok(text) => classify_last_applied(&text),
                        Err(_) => LastApplied::Unknown,
                    });
                }
            }
        }
    }
    seen
}

/// What [`Redaction::entry`] did to a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Redacted {
    /// Nothing in it needed redacting (or it carries no payload).
    Unchanged,
    /// Its payload was redacted.
    Changed,
    /// Its payload could not be redacted (too deep, too large) and was replaced whole by a
    /// stand-in naming why and its digest; the record's note says so.
    Withheld,
}

/// Which of a trace's sources are Secrets (index 0 the primary, `n` the `n`th secondary), as
/// a writer that knows the sources' resources tells [`Redaction::entry`]; a source past the
/// end is judged by its payloads alone.
pub type SecretSources = [bool];

/// Whether the resource `group` / `kind` / `plural` is core/v1 Secrets (either name suffices).
#[must_use]
pub fn is_secret_resource(group: &str, kind: Option<&str>, plural: Option<&str>) -> bool {
    group.is_empty() && (kind == Some("Secret") || plural == Some("secrets"))
}

impl Redaction {
    /// Redacts the payloads of one trace record in place: a LIST body, a watch frame (every
    /// type), an in-process source object. WATCH and stream-end bodies are Status answers
    /// and are kept. `secret_sources` says which sources are Secrets (see [`SecretSources`]);
    /// [`Redaction::resource_is_secret`] makes every source one.
    ///
    /// This is the one path every trace writer takes: the engine's `TraceRecorder`,
    /// `reconcile-sim capture` (which records through it) and `reconcile-sim import`.
    pub fn entry(&self, entry: &mut crate::Entry, secret_sources: &SecretSources) -> Redacted {
        use crate::{Payload, Record, SourceOp};
        if !self.enabled {
            return Redacted::Unchanged;
        }
        let index = usize::try_from(entry.source_index()).unwrap_or(usize::MAX);
        let secret = self.resource_is_secret || secret_sources.get(index).copied().unwrap_or(false);
        let mut result = Redacted::Unchanged;
        let mut withheld = None;
        let mut swap =
            |payload: &mut Payload, what: &str, done: Result<Option<Vec<u8>>, RedactError>| {
                match done {
                    Ok(None) => {}
                    Ok(Some(bytes)) => {
                        *payload = Payload::from_bytes(bytes);
                        result = Redacted::Changed;
                    }
                    Err(e) => {
                        *payload = Payload::from(withheld_stand_in(what, &e, payload.as_bytes()));
                        withheld = Some(format!("{what} withheld: {e}"));
                    }
                }
            };
        match &mut entry.record {
            Record::List { body, .. } if !body.is_empty() => {
                let done = self.list_body_as(body.as_bytes(), secret);
                swap(body, "LIST body", done);
            }
            Record::Frame { line } => {
                let done = self.watch_line_as(line.as_bytes(), secret);
                swap(line, "watch line", done);
            }
            Record::Source(op) => {
                let mut object = |raw: &mut String| match self.object_as(raw, secret, "object") {
                    Ok(None) => {}
                    Ok(Some(text)) => {
                        *raw = text;
                        result = Redacted::Changed;
                    }
                    Err(e) => {
                        *raw = withheld_stand_in("object", &e, raw.as_bytes());
                        withheld = Some(format!("object withheld: {e}"));
                    }
                };
                match op {
                    SourceOp::Upsert(o) | SourceOp::Delete(o) => object(o),
                    SourceOp::Replace(objects) => objects.iter_mut().for_each(object),
                }
            }
            _ => {}
        }
        if let Some(why) = withheld {
            entry.note = Some(match entry.note.take() {
                Some(note) => format!("{note}; {why}"),
                None => why,
            });
            return Redacted::Withheld;
        }
        result
    }

    /// Redacts every record of `trace` ([`Redaction::entry`]); returns how many changed and
    /// how many were withheld. When anything changed, the header's description says which
    /// redaction was applied.
    pub fn trace(
        &self,
        trace: &mut crate::Trace,
        secret_sources: &SecretSources,
    ) -> (usize, usize) {
        let (mut changed, mut withheld) = (0, 0);
        for entry in &mut trace.entries {
            match self.entry(entry, secret_sources) {
                Redacted::Unchanged => {}
                Redacted::Changed => changed += 1,
                Redacted::Withheld => withheld += 1,
            }
        }
        if changed + withheld > 0 {
            let text = trace.header.description.take().unwrap_or_default();
            trace.header.description = Some(format!("{text} ({})", self.describe()));
        }
        (changed, withheld)
    }
}

/// What stands in for a payload that could not be redacted: JSON naming why and the
/// payload's digest (still not a watch event, still not a list).
fn withheld_stand_in(what: &str, error: &RedactError, raw: &[u8]) -> String {
    serde_json::json!({ "redacted": format!("{what} withheld: {error}, {}", digest(raw)) })
        .to_string()
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
        // A Secret with nothing in it: nothing to redact.
        let secret = m::watch_frame("ADDED", m::envelope("Secret", pod.encode_to_vec()));
        assert_eq!(r.watch_line(&secret).unwrap(), None);
        // Another kind of a Secrets resource, or a chosen path: the whole payload is a
        // digest.
        let secrets = Redaction::default().resource_is_secret(true);
        assert!(secrets.list_body(&list).unwrap().is_some());
        let chosen = Redaction::default().digest("$.spec.nodeName".parse().unwrap());
        let redacted = chosen.watch_line(&frame).unwrap().unwrap();
        assert!(String::from_utf8(redacted).unwrap().contains("sha256:"));
    }

    /// A `core/v1.Secret` in protobuf: metadata (annotations, managedFields), data and
    /// stringData, each value `marker`-tagged.
    fn protobuf_secret(marker: &str) -> Vec<u8> {
        use super::protobuf::push_bytes;
        let entry = |k: &str, v: &str| {
            let mut e = Vec::new();
            push_bytes(&mut e, 1, k.as_bytes());
            push_bytes(&mut e, 2, v.as_bytes());
            e
        };
        let mut meta = Vec::new();
        push_bytes(&mut meta, 1, b"s");
        push_bytes(&mut meta, 6, b"7");
        push_bytes(
            &mut meta,
            12,
            &entry(LAST_APPLIED, &format!("{{\"x\":\"{marker}-la\"}}")),
        );
        push_bytes(&mut meta, 12, &entry("keep", "me"));
        let mut managed = Vec::new();
        push_bytes(&mut managed, 1, format!("{marker}-mf").as_bytes());
        push_bytes(&mut meta, 17, &managed);
        let mut secret = Vec::new();
        push_bytes(&mut secret, 1, &meta);
        push_bytes(
            &mut secret,
            2,
            &entry("password", &format!("{marker}-data")),
        );
        push_bytes(&mut secret, 3, b"Opaque");
        push_bytes(&mut secret, 4, &entry("token", &format!("{marker}-sd")));
        secret
    }

    fn metadata_only(marker: &str) -> Vec<u8> {
        use super::protobuf::push_bytes;
        let secret = protobuf_secret(marker);
        // Field 1 of the Secret is its ObjectMeta: a PartialObjectMetadata is just that.
        let meta_len = secret[1] as usize;
        let mut out = Vec::new();
        push_bytes(&mut out, 1, &secret[2..2 + meta_len]);
        out
    }

    #[test]
    fn protobuf_secrets_are_redacted_field_by_field_and_stay_protobuf() {
        use reconcile_core::protobuf::messages as m;
        let marker = "pb-m4rk3r";
        let r = Redaction::default();
        let frame = m::watch_frame("ADDED", m::envelope("Secret", protobuf_secret(marker)));
        let out = r.watch_line(&frame).unwrap().expect("changed");
        assert!(!out.windows(marker.len()).any(|w| w == marker.as_bytes()));
        assert_eq!(reconcile_core::protobuf::payload_kind(&out), Some("Secret"));
        assert!(
            out.windows(4).any(|w| w == b"keep"),
            "other annotations kept"
        );
        assert!(out.windows(6).any(|w| w == b"Opaque"), "type kept");
        // A SecretList body.
        let mut items = Vec::new();
        super::protobuf::push_bytes(&mut items, 2, &protobuf_secret(marker));
        let list = m::envelope("SecretList", items);
        let out = r.list_body(&list).unwrap().expect("changed");
        assert!(!out.windows(marker.len()).any(|w| w == marker.as_bytes()));
        // Metadata only of a Secrets source: the annotation and managedFields go.
        let pom = m::watch_frame(
            "MODIFIED",
            m::envelope_of(
                "meta.k8s.io/v1",
                "PartialObjectMetadata",
                metadata_only(marker),
            ),
        );
        // Not told it is a Secret: the annotation, which names no kind, is masked all the
        // same; managedFields (field names) are kept, as for any kind in protobuf.
        let out = r.watch_line(&pom).unwrap().expect("changed");
        let has = |out: &[u8], what: &str| out.windows(what.len()).any(|w| w == what.as_bytes());
        assert!(!has(&out, &format!("{marker}-la")) && has(&out, &format!("{marker}-mf")));
        let mut entry = crate::Entry::new(
            None,
            crate::Record::Frame {
                line: crate::Payload::from_bytes(pom.clone()),
            },
        );
        assert_eq!(r.entry(&mut entry, &[true]), Redacted::Changed);
        let crate::Record::Frame { line } = &entry.record else {
            unreachable!()
        };
        let out = line.as_bytes();
        assert!(!out.windows(marker.len()).any(|w| w == marker.as_bytes()));
        assert_eq!(
            reconcile_core::protobuf::payload_kind(out),
            Some("PartialObjectMetadata")
        );
        // Truncated protobuf of a Secret cannot be read: withheld whole.
        let cut = &frame[..frame.len() - 3];
        let out = r.watch_line(cut).unwrap().expect("changed");
        assert!(!out.windows(marker.len()).any(|w| w == marker.as_bytes()));
    }

    #[test]
    fn an_escaped_kind_is_still_a_secret() {
        for kind in [
            r#""Secr\u0065t""#,
            r#""\u0053ecret""#,
            r#""S\u0065cr\u0065t""#,
        ] {
            let object =
                format!(r#"{{"kind":{kind},"metadata":{{"name":"s"}},"data":{{"k":"dmFsdWU="}}}}"#);
            let out = Redaction::default()
                .object(&object)
                .unwrap()
                .expect("changed");
            assert!(!out.contains("dmFsdWU="), "{kind}: {out}");
            let list = r#"{"kind":"Secr\u0065tList","items":[{"metadata":{"name":"s"},"data":{"k":"dmFsdWU="}}]}"#;
            let out = Redaction::default()
                .list_body(list.as_bytes())
                .unwrap()
                .expect("changed");
            assert!(!String::from_utf8(out).unwrap().contains("dmFsdWU="));
        }
    }

    #[test]
    fn metadata_only_secrets_lose_their_last_applied_annotation() {
        let pom = r#"{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"s","annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"data\":{\"k\":\"c2VjcmV0LXZhbHVl\"}}\n","keep":"me"},"managedFields":[{"manager":"kubectl"}]}}"#;
        // Known by the annotation's own kind, without being told.
        let out = Redaction::default().object(pom).unwrap().expect("changed");
        assert!(
            !out.contains("c2VjcmV0LXZhbHVl") && !out.contains("managedFields"),
            "{out}"
        );
        assert!(out.contains(r#""keep":"me""#), "{out}");
        // Known from the source's resource: the list and a watch frame of it.
        let stripped = pom.replace(r#"\"kind\":\"Secret\","#, "");
        let list = format!(
            r#"{{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1","items":[{stripped}]}}"#
        );
        let mut entry = crate::Entry::new(
            None,
            crate::Record::List {
                status: 200,
                body: list.as_str().into(),
                transport_error: None,
            },
        );
        assert_eq!(
            Redaction::default().entry(&mut entry, &[true]),
            Redacted::Changed
        );
        let crate::Record::List { body, .. } = &entry.record else {
            unreachable!()
        };
        assert!(!body.contains("c2VjcmV0LXZhbHVl"));
        assert!(!body.contains("managedFields"));
        // A ConfigMap's own last-applied is kept.
        let cm = r#"{"kind":"ConfigMap","metadata":{"name":"c","annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{\"kind\":\"ConfigMap\",\"data\":{\"k\":\"v\"}}"}},"data":{"k":"v"}}"#;
        assert_eq!(Redaction::default().object(cm), Ok(None));
    }

    #[test]
    fn error_and_bookmark_frames_carrying_secrets_are_redacted() {
        for kind in ["ERROR", "BOOKMARK", "ADDED"] {
            let line = format!(r#"{{"type":"{kind}","object":{SECRET}}}"#);
            let out = Redaction::default()
                .watch_line(line.as_bytes())
                .unwrap()
                .expect("changed");
            assert!(
                !String::from_utf8(out).unwrap().contains("hunter2"),
                "{kind}"
            );
        }
        // A generic List of Secrets inside a frame.
        let line = format!(r#"{{"type":"ADDED","object":{{"kind":"List","items":[{SECRET}]}}}}"#);
        let out = Redaction::default()
            .watch_line(line.as_bytes())
            .unwrap()
            .expect("changed");
        assert!(!String::from_utf8(out).unwrap().contains("hunter2"));
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
