//! The redaction property: no generated Secret, in any shape or spelling a writer may meet,
//! leaves a value in what a trace writer writes. Every writer takes the same path
//! (`Redaction::entry`: the engine's `TraceRecorder`, `reconcile-sim capture` through it,
//! and `Redaction::trace`, which `reconcile-sim import` writes with), so the property is
//! checked on both, on the written lines.
//!
//! Shapes: a full Secret, a metadata-only one (`PartialObjectMetadata`), a list of each
//! (`SecretList`, `PartialObjectMetadataList`, a generic `List`), each as a LIST body and
//! inside a watch frame (`ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK`, `ERROR`), and a
//! protobuf Secret frame and list. Spellings: keys and strings with characters written as
//! `\uXXXX` escapes (`"Secr\u0065t"`), members in any order, whitespace between tokens.
//! A metadata-only Secret is known by the source's resource, or (when the writer is not
//! told) by the `kind` its last-applied-configuration names, as `kubectl apply` writes it.
//!
//! Each value (data, stringData, the annotation, managedFields) holds a unique marker; the
//! output must not hold it in any form: as written, JSON-unescaped, inside a nested JSON
//! string, base64-decoded, or in raw protobuf bytes.

use base64::Engine as _;
use proptest::prelude::*;
use reconcile_trace::redact::Redaction;
use reconcile_trace::{Entry, Header, Payload, Record, Trace};

/// A deterministic choice stream (splitmix64) for the spelling of one case.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn one_in(&mut self, n: u64) -> bool {
        self.next().is_multiple_of(n)
    }
}

/// A JSON value before it is spelled.
#[derive(Clone)]
enum J {
    Obj(Vec<(&'static str, J)>),
    Arr(Vec<J>),
    Str(String),
}

fn obj(members: Vec<(&'static str, J)>) -> J {
    J::Obj(members)
}

fn s(text: impl Into<String>) -> J {
    J::Str(text.into())
}

fn spell_str(out: &mut String, text: &str, rng: &mut Rng) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c if rng.one_in(4) && (c as u32) < 0x10000 => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn ws(out: &mut String, rng: &mut Rng, newlines: bool) {
    if rng.one_in(3) {
        let choices: &[&str] = if newlines {
            &[" ", "\t", "\n", "  "]
        } else {
            &[" ", "\t", "  "]
        };
        out.push_str(choices[(rng.next() % choices.len() as u64) as usize]);
    }
}

fn spell(out: &mut String, value: &J, rng: &mut Rng, newlines: bool) {
    match value {
        J::Str(text) => spell_str(out, text, rng),
        J::Arr(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                ws(out, rng, newlines);
                spell(out, item, rng, newlines);
            }
            out.push(']');
        }
        J::Obj(members) => {
            let mut order: Vec<usize> = (0..members.len()).collect();
            // A shuffle (Fisher-Yates) of the members.
            for i in (1..order.len()).rev() {
                let j = (rng.next() % (i as u64 + 1)) as usize;
                order.swap(i, j);
            }
            out.push('{');
            for (n, i) in order.into_iter().enumerate() {
                if n > 0 {
                    out.push(',');
                }
                ws(out, rng, newlines);
                spell_str(out, members[i].0, rng);
                ws(out, rng, newlines);
                out.push(':');
                ws(out, rng, newlines);
                spell(out, &members[i].1, rng, newlines);
            }
            ws(out, rng, newlines);
            out.push('}');
        }
    }
}

fn spelled(value: &J, rng: &mut Rng, newlines: bool) -> String {
    let mut out = String::new();
    spell(&mut out, value, rng, newlines);
    out
}

const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// The planted values of one Secret.
struct Plant {
    marker: String,
}

impl Plant {
    fn data(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(format!("{}-data", self.marker))
    }
    fn string_data(&self) -> String {
        format!("{}-stringdata", self.marker)
    }
    /// The last-applied annotation: the whole object as applied; `kind` named or not.
    fn last_applied(&self, named: bool, rng: &mut Rng) -> String {
        let mut members = vec![
            ("apiVersion", s("v1")),
            ("data", obj(vec![("password", s(self.data()))])),
            (
                "stringData",
                obj(vec![("token", s(format!("{}-applied", self.marker)))]),
            ),
        ];
        if named {
            members.push(("kind", s("Secret")));
        }
        spelled(&obj(members), rng, true)
    }
    fn managed_fields(&self) -> J {
        J::Arr(vec![obj(vec![
            ("manager", s(format!("{}-manager", self.marker))),
            (
                "fieldsV1",
                obj(vec![("f:data", obj(vec![("f:password", obj(vec![]))]))]),
            ),
        ])])
    }
    fn metadata(&self, name: &str, named: bool, rng: &mut Rng) -> J {
        obj(vec![
            ("name", s(name)),
            ("namespace", s("ns")),
            ("resourceVersion", s("7")),
            (
                "annotations",
                obj(vec![
                    (LAST_APPLIED, s(self.last_applied(named, rng))),
                    ("keep", s("me")),
                ]),
            ),
            ("managedFields", self.managed_fields()),
        ])
    }
    fn full(&self, name: &str, with_kind: bool, rng: &mut Rng) -> J {
        let mut members = vec![
            ("apiVersion", s("v1")),
            ("metadata", self.metadata(name, rng.one_in(2), rng)),
            ("data", obj(vec![("password", s(self.data()))])),
            ("stringData", obj(vec![("token", s(self.string_data()))])),
            ("type", s("Opaque")),
        ];
        if with_kind {
            members.push(("kind", s("Secret")));
        }
        obj(members)
    }
    fn partial(&self, name: &str, named: bool, rng: &mut Rng) -> J {
        obj(vec![
            ("apiVersion", s("meta.k8s.io/v1")),
            ("kind", s("PartialObjectMetadata")),
            ("metadata", self.metadata(name, named, rng)),
        ])
    }
}

/// What a writer meets, and whether it is told the source is Secrets.
#[derive(Debug, Clone, Copy)]
enum Shape {
    Full,
    Partial,
    SecretList,
    PartialList,
    GenericList,
    Protobuf,
    ProtobufList,
}

fn shape() -> impl Strategy<Value = Shape> {
    prop_oneof![
        Just(Shape::Full),
        Just(Shape::Partial),
        Just(Shape::SecretList),
        Just(Shape::PartialList),
        Just(Shape::GenericList),
        Just(Shape::Protobuf),
        Just(Shape::ProtobufList),
    ]
}

fn push_len(out: &mut Vec<u8>, tag: u64, bytes: &[u8]) {
    let varint = |mut n: u64, out: &mut Vec<u8>| {
        loop {
            let b = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                out.push(b);
                break;
            }
            out.push(b | 0x80);
        }
    };
    varint((tag << 3) | 2, out);
    varint(bytes.len() as u64, out);
    out.extend_from_slice(bytes);
}

fn pb_entry(key: &str, value: &[u8]) -> Vec<u8> {
    let mut e = Vec::new();
    push_len(&mut e, 1, key.as_bytes());
    push_len(&mut e, 2, value);
    e
}

/// A `core/v1.Secret` message with the plant's values.
fn pb_secret(plant: &Plant, rng: &mut Rng) -> Vec<u8> {
    let mut meta = Vec::new();
    push_len(&mut meta, 1, b"s");
    push_len(&mut meta, 6, b"7");
    push_len(
        &mut meta,
        12,
        &pb_entry(
            LAST_APPLIED,
            plant.last_applied(rng.one_in(2), rng).as_bytes(),
        ),
    );
    let mut managed = Vec::new();
    push_len(
        &mut managed,
        1,
        format!("{}-manager", plant.marker).as_bytes(),
    );
    push_len(&mut meta, 17, &managed);
    let mut secret = Vec::new();
    push_len(&mut secret, 1, &meta);
    let data = format!("{}-data", plant.marker);
    push_len(&mut secret, 2, &pb_entry("password", data.as_bytes()));
    push_len(
        &mut secret,
        4,
        &pb_entry("token", plant.string_data().as_bytes()),
    );
    secret
}

/// The payload, as a LIST body or a frame, and whether the writer is told.
fn payload(plant: &Plant, shape: Shape, event: &str, rng: &mut Rng) -> (Vec<u8>, bool, bool) {
    use reconcile_core::protobuf::messages as m;
    let told = rng.one_in(2);
    // A metadata-only Secret the writer is not told about names its kind in its
    // last-applied annotation, as kubectl writes it.
    let named = !told || rng.one_in(2);
    let frame = |object: J, rng: &mut Rng| {
        let line = obj(vec![("type", s(event)), ("object", object)]);
        (spelled(&line, rng, false).into_bytes(), false)
    };
    let list = |kind: &str, items: Vec<J>, _rng: &mut Rng| {
        obj(vec![
            ("apiVersion", s("v1")),
            ("kind", s(kind.to_owned())),
            ("metadata", obj(vec![("resourceVersion", s("9"))])),
            ("items", J::Arr(items)),
        ])
    };
    let as_list = rng.one_in(2);
    let (bytes, is_list) = match shape {
        Shape::Full => {
            let o = plant.full("a", !told || rng.one_in(2), rng);
            if as_list {
                (
                    spelled(&list("SecretList", vec![o], rng), rng, true).into_bytes(),
                    true,
                )
            } else {
                frame(o, rng)
            }
        }
        Shape::Partial => frame(plant.partial("a", named, rng), rng),
        Shape::SecretList => {
            let items = vec![plant.full("a", false, rng), plant.full("b", true, rng)];
            let l = list("SecretList", items, rng);
            if as_list {
                (spelled(&l, rng, true).into_bytes(), true)
            } else {
                frame(l, rng)
            }
        }
        Shape::PartialList => {
            let items = vec![
                plant.partial("a", named, rng),
                plant.partial("b", named, rng),
            ];
            let l = list("PartialObjectMetadataList", items, rng);
            if as_list {
                (spelled(&l, rng, true).into_bytes(), true)
            } else {
                frame(l, rng)
            }
        }
        Shape::GenericList => {
            let items = vec![plant.full("a", true, rng), plant.partial("b", true, rng)];
            let l = list("List", items, rng);
            if as_list {
                (spelled(&l, rng, true).into_bytes(), true)
            } else {
                frame(l, rng)
            }
        }
        Shape::Protobuf => {
            let object = m::envelope("Secret", pb_secret(plant, rng));
            (m::watch_frame(event, object), false)
        }
        Shape::ProtobufList => {
            let mut items = Vec::new();
            push_len(&mut items, 2, &pb_secret(plant, rng));
            push_len(&mut items, 2, &pb_secret(plant, rng));
            (m::envelope("SecretList", items), true)
        }
    };
    (bytes, is_list, told)
}

/// Every form `marker` could survive in within `text`: fails the case when one is found.
fn assert_no_marker(text: &str, marker: &str) -> Result<(), TestCaseError> {
    let b64 = |t: &str| base64::engine::general_purpose::STANDARD.encode(t);
    for needle in [marker.to_owned(), b64(marker)] {
        prop_assert!(!text.contains(&needle), "{needle:?} in {text}");
    }
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let value: serde_json::Value = serde_json::from_str(line)
            .map_err(|e| TestCaseError::fail(format!("not JSON: {e}: {line}")))?;
        walk(&value, marker, 0)?;
    }
    Ok(())
}

fn walk(value: &serde_json::Value, marker: &str, depth: usize) -> Result<(), TestCaseError> {
    prop_assert!(depth < 64);
    match value {
        serde_json::Value::String(text) => {
            prop_assert!(!text.contains(marker), "{marker} in {text}");
            if let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(text) {
                prop_assert!(
                    !bytes.windows(marker.len()).any(|w| w == marker.as_bytes()),
                    "{marker} base64 in {text}"
                );
                // Base64 of protobuf, whose strings may themselves hold base64.
                let lossy = String::from_utf8_lossy(&bytes);
                let b64 = base64::engine::general_purpose::STANDARD.encode(marker);
                prop_assert!(!lossy.contains(&b64));
            }
            if let Ok(nested) = serde_json::from_str::<serde_json::Value>(text)
                && !nested.is_string()
            {
                walk(&nested, marker, depth + 1)?;
            }
        }
        serde_json::Value::Array(items) => {
            for item in items {
                walk(item, marker, depth + 1)?;
            }
        }
        serde_json::Value::Object(members) => {
            for (key, item) in members {
                prop_assert!(!key.contains(marker));
                walk(item, marker, depth + 1)?;
            }
        }
        _ => {}
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 192, ..ProptestConfig::default() })]

    #[test]
    fn no_secret_value_reaches_a_written_trace(
        marker in "[a-z0-9]{12}",
        shape in shape(),
        event in prop_oneof![
            Just("ADDED"), Just("MODIFIED"), Just("DELETED"), Just("BOOKMARK"), Just("ERROR")
        ],
        seed in any::<u64>(),
    ) {
        let plant = Plant { marker: format!("MRK{marker}") };
        let mut rng = Rng(seed);
        let (bytes, is_list, told) = payload(&plant, shape, event, &mut rng);
        let record = if is_list {
            Record::List { status: 200, body: Payload::from_bytes(bytes), transport_error: None }
        } else {
            Record::Frame { line: Payload::from_bytes(bytes) }
        };
        let secret_sources: &[bool] = if told { &[true] } else { &[] };
        let redaction = Redaction::default();

        // The recorder's path: one entry at a time, written as a line.
        let mut entry = Entry::new(None, record.clone());
        redaction.entry(&mut entry, secret_sources);
        assert_no_marker(&entry.to_line(), &plant.marker)?;

        // Import's path: the whole trace, written as JSON Lines.
        let mut trace = Trace {
            name: "generated".into(),
            header: Header::default(),
            entries: vec![Entry::new(None, record)],
        };
        redaction.trace(&mut trace, secret_sources);
        let text = trace.to_jsonl();
        assert_no_marker(&text, &plant.marker)?;
        // And what is written reads back as a trace.
        prop_assert!(Trace::parse("generated", &text).is_ok());
    }
}
