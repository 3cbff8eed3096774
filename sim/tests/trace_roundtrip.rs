//! The trace writer cannot corrupt: for random records with random payloads (line breaks,
//! quotes, control characters, invalid UTF-8, JSON and not, huge bodies), every record is
//! one line, reading gives back every wire payload byte for byte, and write, read, write
//! gives identical bytes. Seeded with the simulator's own generator, so every case is the
//! same on every run; a failure names its case number.

use std::time::Duration;

use reconcile_core::Instant;
use reconcile_sim::replay::{ReplayOptions, replay};
use reconcile_sim::rng::Rng;
use reconcile_sim::trace::{
    Entry, Fault, Header, Payload, Record, RecordedEnd, ScriptedOutcome, SourceOp, Trace, base64,
};

/// Bytes that stress the writer: pieces of JSON, line breaks, quotes, escapes, control
/// characters, multi-byte characters, and bytes that are not UTF-8.
fn payload(rng: &mut Rng, max_len: u64) -> Vec<u8> {
    const PIECES: &[&[u8]] = &[
        b"{\"metadata\":{\"resourceVersion\":\"7\"},\"items\":[]}",
        b"{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\"}}}",
        b"\n",
        b"\r\n",
        b"\r",
        b" ",
        b"\t",
        b"\"",
        b"\\",
        b"\\u0000",
        b"\x00",
        b"\x1b[0m",
        b"\xe2\x80\xa8",
        b"\xf0\x9f\xa6\x80",
        b"\xff",
        b"\xc3",
        b"\xed\xa0\x80",
        b"[1, 2 ]",
        b"null",
        b"}",
        b"=",
    ];
    let len = rng.below(max_len + 1);
    let mut out = Vec::new();
    while (out.len() as u64) < len {
        if rng.chance(30) {
            out.push(rng.below(256) as u8);
        } else {
            let piece: &[u8] = PIECES[rng.below(PIECES.len() as u64) as usize];
            out.extend_from_slice(piece);
        }
    }
    out
}

fn random_record(rng: &mut Rng, case: u64) -> Record {
    // One body in fifty is huge (up to 1 MiB): the writer must not care.
    let max = if rng.chance(2) { 1 << 20 } else { 200 };
    let p = |rng: &mut Rng| Payload::from(payload(rng, max));
    match rng.below(8) {
        0 => Record::List {
            status: *rng.pick(&[200, 500, 410]),
            body: p(rng),
            transport_error: None,
        },
        1 => Record::List {
            status: 0,
            body: Payload::default(),
            transport_error: Some(String::from_utf8_lossy(&payload(rng, 40)).into_owned()),
        },
        2 => Record::Watch {
            status: *rng.pick(&[200, 410, 504]),
            body: p(rng),
            resource_version: rng.chance(50).then(|| format!("{case}")),
        },
        3 | 4 => Record::Frame { line: p(rng) },
        5 => Record::WatchEnd(RecordedEnd::Status(*rng.pick(&[410, 500]), p(rng))),
        6 => Record::Reconcile {
            parent: Some(String::from_utf8_lossy(&payload(rng, 20)).into_owned()),
            outcome: ScriptedOutcome::Error(String::from_utf8_lossy(&payload(rng, 30)).into()),
            duration: Duration::from_millis(rng.below(5000)),
            writes: (0..rng.below(3))
                .map(|n| {
                    reconcile_core::OwnWrite::new(
                        reconcile_core::SourceId::nth(n),
                        String::from_utf8_lossy(&payload(rng, 12)).into_owned(),
                    )
                })
                .collect(),
        },
        _ => Record::Fault(Fault::GoneStorm {
            count: rng.below(4) as u32,
        }),
    }
}

fn random_trace(case: u64) -> Trace {
    let mut rng = Rng::new(case);
    let mut t = 0;
    let entries = (0..rng.range(1, 12))
        .map(|_| {
            t += rng.below(3000);
            let mut entry = Entry::new(
                rng.chance(70)
                    .then(|| Instant::from_duration(Duration::from_millis(t))),
                random_record(&mut rng, case),
            );
            if rng.chance(10) {
                entry.note = Some(String::from_utf8_lossy(&payload(&mut rng, 30)).into());
            }
            entry
        })
        .collect();
    Trace {
        name: format!("case-{case}"),
        header: Header::default(),
        entries,
    }
}

/// What reading gives back: every record (with its wire payloads) and its time.
fn records(trace: &Trace) -> Vec<(Option<Instant>, Record, Option<String>)> {
    trace
        .entries
        .iter()
        .map(|e| (e.at, e.record.clone(), e.note.clone()))
        .collect()
}

#[test]
fn write_read_write_is_byte_identical_for_any_payload() {
    let mut binary = 0;
    let mut broken_lines = 0;
    for case in 0..400 {
        let trace = random_trace(case);
        let text = trace.to_jsonl();
        assert_eq!(
            text.lines().count(),
            trace.entries.len() + 1,
            "case {case}: a record spans lines"
        );
        let again = Trace::parse_bytes("again", text.as_bytes())
            .unwrap_or_else(|e| panic!("case {case}: written, then unreadable: {e}"));
        assert_eq!(records(&again), records(&trace), "case {case}");
        assert_eq!(again.to_jsonl(), text, "case {case}: write, read, write");
        for e in &trace.entries {
            if let Record::Frame { line } | Record::List { body: line, .. } = &e.record {
                binary += usize::from(line.as_str().is_none());
                broken_lines += usize::from(line.as_bytes().contains(&b'\n'));
            }
        }
    }
    // The generator did reach the cases that matter.
    assert!(binary > 50, "{binary} payloads that are not UTF-8");
    assert!(
        broken_lines > 50,
        "{broken_lines} payloads with a line break"
    );
}

#[test]
fn a_payload_that_is_not_utf8_is_written_as_base64_and_replayed_bit_identically() {
    let frame = b"{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"\xff\"}}}".to_vec();
    let body = b"\xfe\xff not json\n".to_vec();
    let text = [
        r#"{"reconcile_sim_trace":1,"parent":"name"}"#.to_owned(),
        Entry::new(
            Some(Instant::ZERO),
            Record::List {
                status: 200,
                body: r#"{"metadata":{"resourceVersion":"1"},"items":[]}"#.into(),
                transport_error: None,
            },
        )
        .to_line(),
        Entry::new(
            None,
            Record::Watch {
                status: 200,
                body: Payload::default(),
                resource_version: None,
            },
        )
        .to_line(),
        Entry::new(
            None,
            Record::Frame {
                line: frame.clone().into(),
            },
        )
        .to_line(),
        Entry::new(
            None,
            Record::WatchEnd(RecordedEnd::Status(500, body.clone().into())),
        )
        .to_line(),
    ]
    .join("\n");
    assert!(
        text.contains(&format!("\"raw_base64\":\"{}\"", base64::encode(&frame))),
        "{text}"
    );
    assert!(
        text.contains(&format!("\"body_base64\":\"{}\"", base64::encode(&body))),
        "{text}"
    );
    let trace = Trace::parse("bytes", &text).unwrap();
    assert_eq!(
        trace.entries[2].record,
        Record::Frame {
            line: frame.clone().into()
        }
    );
    // The replay feeds the core those bytes: the frame fails to decode as a pod the same way
    // on every run, and the replay does not diverge.
    let report = replay(&trace, &ReplayOptions::default()).unwrap();
    assert!(report.violations.is_empty(), "{:?}", report.violations);
    assert_eq!(report.stats.frames, 1, "{}", report.output);
}

#[test]
fn base64_round_trips_and_refuses_what_is_not_canonical() {
    let mut rng = Rng::new(7);
    for _ in 0..500 {
        let bytes = payload(&mut rng, 70);
        assert_eq!(base64::decode(&base64::encode(&bytes)).unwrap(), bytes);
    }
    assert_eq!(base64::encode(b"foobar"), "Zm9vYmFy");
    assert_eq!(base64::encode(b"fo"), "Zm8=");
    for bad in ["Zm8", "Zm9=", "Z===", "Zm8=Zm8=", "Zm\n8=", "Zm-_"] {
        assert!(base64::decode(bad).is_err(), "{bad}");
    }
}

#[test]
fn invalid_utf8_in_a_trace_file_names_the_line() {
    let bytes = b"{\"reconcile_sim_trace\":1}\n{\"record\":\"stop\"}\n{\"record\":\"frame\",\"raw\":\"\xff\"}\n";
    let e = Trace::parse_bytes("x.jsonl", bytes).unwrap_err();
    assert_eq!(e.line, 3, "{e}");
    assert!(
        e.to_string()
            .starts_with("x.jsonl:3: invalid UTF-8 at byte 26"),
        "{e}"
    );
}

#[test]
fn source_objects_that_are_not_json_still_write_a_readable_line() {
    let trace = Trace {
        name: "s".into(),
        header: Header::default(),
        entries: vec![
            Entry::new(None, Record::Source(SourceOp::Upsert("not json\n{".into()))),
            Entry::new(
                None,
                Record::Source(SourceOp::Delete("{\n \"a\": 1\n}".into())),
            ),
        ],
    };
    let text = trace.to_jsonl();
    assert_eq!(text.lines().count(), 3, "{text}");
    let again = Trace::parse("s", &text).unwrap();
    assert_eq!(again.to_jsonl(), text);
    assert_eq!(
        again.entries[1].record,
        Record::Source(SourceOp::Delete("{\"a\":1}".into()))
    );
}
