//! A recorded protobuf run (issue 16) replays: the header says `wire_format: protobuf`, the
//! LIST bodies and WATCH frames are the apiserver's protobuf bytes (base64 in the trace),
//! and the replay decodes them as a live run does, without divergence, byte-identically on
//! every run and after a write and read of the trace; the same run recorded in JSON
//! reconciles the same parents with the same members.

use prost::Message as _;
use reconcile_core::WireFormat;
use reconcile_core::protobuf::messages as m;
use reconcile_sim::replay::DIVERGENCE;
use reconcile_sim::trace::{Trace, base64};
use reconcile_sim::{ReplayOptions, replay};

fn pod(name: &str, rv: &str, cell: &str) -> m::Pod {
    m::Pod {
        metadata: Some(m::ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            resource_version: Some(rv.into()),
            labels: [("cell".to_owned(), cell.to_owned())].into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn list(rv: &str, pods: Vec<m::Pod>) -> String {
    let body = m::PodList {
        metadata: Some(m::ListMeta {
            resource_version: Some(rv.into()),
            ..Default::default()
        }),
        items: pods,
    };
    base64::encode(&m::envelope("PodList", body.encode_to_vec()))
}

fn frame(event_type: &str, kind: &str, object: Vec<u8>) -> String {
    base64::encode(&m::watch_frame(event_type, m::envelope(kind, object)))
}

fn expired() -> Vec<u8> {
    m::Status {
        message: Some("too old resource version: 12 (40)".into()),
        reason: Some("Expired".into()),
        code: Some(410),
        ..Default::default()
    }
    .encode_to_vec()
}

/// Lists `a` and `b`, watches: `c` joins cell x, a bookmark, an ERROR 410, a relist
/// without `b`, and `a` moves to cell y.
fn protobuf_trace() -> String {
    let header = r#"{"reconcile_sim_trace":1,"description":"protobuf","namespace":"ns","wire_format":"protobuf","parent":"label:cell"}"#;
    let records = [
        format!(
            r#"{{"record":"list","t":0.1,"status":200,"body_base64":"{}"}}"#,
            list("10", vec![pod("a", "5", "x"), pod("b", "6", "y")])
        ),
        r#"{"record":"watch","t":0.2,"resource_version":"10"}"#.to_owned(),
        format!(
            r#"{{"record":"frame","t":1,"raw_base64":"{}"}}"#,
            frame("ADDED", "Pod", pod("c", "11", "x").encode_to_vec())
        ),
        format!(
            r#"{{"record":"frame","t":2,"raw_base64":"{}"}}"#,
            frame("BOOKMARK", "Pod", pod("", "12", "").encode_to_vec())
        ),
        format!(
            r#"{{"record":"frame","t":3,"raw_base64":"{}"}}"#,
            frame("ERROR", "Status", expired())
        ),
        format!(
            r#"{{"record":"list","t":3.5,"status":200,"body_base64":"{}"}}"#,
            list("40", vec![pod("a", "5", "x"), pod("c", "11", "x")])
        ),
        r#"{"record":"watch","t":3.6,"resource_version":"40"}"#.to_owned(),
        format!(
            r#"{{"record":"frame","t":5,"raw_base64":"{}"}}"#,
            frame("MODIFIED", "Pod", pod("a", "41", "y").encode_to_vec())
        ),
    ];
    format!("{header}\n{}\n", records.join("\n"))
}

/// The same run as the apiserver sends it in JSON.
const JSON_TRACE: &str = r#"{"reconcile_sim_trace":1,"description":"json","namespace":"ns","parent":"label:cell"}
{"record":"list","t":0.1,"status":200,"body":{"metadata":{"resourceVersion":"10"},"items":[{"metadata":{"name":"a","namespace":"ns","resourceVersion":"5","labels":{"cell":"x"}}},{"metadata":{"name":"b","namespace":"ns","resourceVersion":"6","labels":{"cell":"y"}}}]}}
{"record":"watch","t":0.2,"resource_version":"10"}
{"record":"frame","t":1,"event":{"type":"ADDED","object":{"metadata":{"name":"c","namespace":"ns","resourceVersion":"11","labels":{"cell":"x"}}}}}
{"record":"frame","t":2,"event":{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"12"}}}}
{"record":"frame","t":3,"event":{"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired","message":"too old resource version: 12 (40)"}}}
{"record":"list","t":3.5,"status":200,"body":{"metadata":{"resourceVersion":"40"},"items":[{"metadata":{"name":"a","namespace":"ns","resourceVersion":"5","labels":{"cell":"x"}}},{"metadata":{"name":"c","namespace":"ns","resourceVersion":"11","labels":{"cell":"x"}}}]}}
{"record":"watch","t":3.6,"resource_version":"40"}
{"record":"frame","t":5,"event":{"type":"MODIFIED","object":{"metadata":{"name":"a","namespace":"ns","resourceVersion":"41","labels":{"cell":"y"}}}}}
"#;

/// The reconcile lines of a replay, without the body sizes that differ between encodings.
fn reconciles(output: &str) -> Vec<String> {
    output
        .lines()
        .filter_map(|l| l.find("reconcile ").map(|at| l[at..].to_owned()))
        .collect()
}

#[test]
fn a_protobuf_run_replays_as_its_json_twin() {
    let trace = Trace::parse("protobuf.jsonl", &protobuf_trace()).unwrap();
    assert_eq!(trace.header.wire_format, WireFormat::Protobuf);
    let first = replay(&trace, &ReplayOptions::default()).unwrap();
    assert!(
        first.violations.iter().all(|v| v.invariant != DIVERGENCE),
        "{:?}\n{}",
        first.violations,
        first.output
    );
    assert_eq!(first.stats.frames_skipped, 0, "{}", first.output);
    for step in [
        "list L1 200 items=2 rv=10 (protobuf)",
        "frame W2 ADDED ns/c rv=11 (protobuf)",
        "frame W2 BOOKMARK rv=12 (protobuf)",
        "frame W2 ERROR 410 Expired (protobuf)",
        "frame W7 MODIFIED ns/a rv=41 (protobuf)",
    ] {
        assert!(first.output.contains(step), "{step}:\n{}", first.output);
    }
    assert_eq!(
        first.stats.relists, 1,
        "the ERROR 410 frame forced a relist"
    );
    assert_eq!(first.cursor.as_deref(), Some("41"));
    // Written and read back, the trace replays byte-identically.
    let again = Trace::parse("again.jsonl", &trace.to_jsonl()).unwrap();
    assert_eq!(again.header.wire_format, WireFormat::Protobuf);
    let second = replay(&again, &ReplayOptions::default()).unwrap();
    assert_eq!(first.output, second.output);
    let json = replay(
        &Trace::parse("json.jsonl", JSON_TRACE).unwrap(),
        &ReplayOptions::default(),
    )
    .unwrap();
    assert_eq!(reconciles(&first.output), reconciles(&json.output));
    assert!(!reconciles(&first.output).is_empty());
    assert_eq!(first.stats.relists, json.stats.relists);
}

#[test]
fn a_protobuf_frame_replayed_without_the_header_saying_so_is_skipped_not_trusted() {
    // The same bytes under a JSON header: undecodable frames, never a wrong object.
    let text = protobuf_trace().replacen(r#""wire_format":"protobuf","#, "", 1);
    let trace = Trace::parse("no-header.jsonl", &text).unwrap();
    assert_eq!(trace.header.wire_format, WireFormat::Json);
    let report = replay(&trace, &ReplayOptions::default()).unwrap();
    assert!(
        report.stats.frames_skipped + report.stats.relists > 0,
        "{}",
        report.output
    );
    assert!(
        !report.output.contains("members=[a,c]"),
        "{}",
        report.output
    );
}

#[test]
fn a_header_names_its_wire_format_or_is_refused() {
    let bad = r#"{"reconcile_sim_trace":1,"wire_format":"xml"}"#;
    let error = Trace::parse("bad.jsonl", bad).unwrap_err().to_string();
    assert!(error.contains("wire_format must be"), "{error}");
    let header = Trace::parse("h.jsonl", &protobuf_trace()).unwrap().header;
    assert!(header.to_line().contains(r#""wire_format":"protobuf""#));
    let json = Trace::parse("j.jsonl", JSON_TRACE).unwrap().header;
    assert!(
        !json.to_line().contains("wire_format"),
        "JSON is the default, unwritten"
    );
}
