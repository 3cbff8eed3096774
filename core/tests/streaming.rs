//! Streaming lists (`sendInitialEvents=true`, issue 16): the initial events are gathered and
//! applied as one `Replace` at the bookmark annotated `k8s.io/initial-events-end`; nothing
//! reaches the store before it. A refusal, or no end bookmark within the bounds, falls back to
//! LIST+WATCH for good.

mod harness;

use std::time::Duration;

use harness::{Scenario, frame, pod};
use reconcile_core::pod::PodView;
use reconcile_core::{Config, KeyMap, StreamEnd, WatchParams};

/// What an apiserver whose `WatchList` feature gate is off (or one older than 1.27, which
/// forbids `resourceVersionMatch` on a watch) answers a streaming list.
const REFUSED: &str = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled","reason":"Invalid","details":{"group":"meta.k8s.io","kind":"ListOptions","causes":[{"reason":"FieldValueForbidden","message":"Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled","field":"sendInitialEvents"}]},"code":422}"#;

const GONE: &str = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 5 (40)","reason":"Expired","code":410}"#;

fn streaming_config() -> Config<PodView, String> {
    Config::kubernetes(
        WatchParams::namespaced("ns")
            .labels("app=cell")
            .streaming_lists(),
        KeyMap::by_label("cell"),
    )
}

#[test]
fn the_initial_events_are_applied_once_at_the_end_bookmark_and_the_stream_goes_on() {
    let mut s = Scenario::new(streaming_config());
    s.start()
        .added("a", Some("c1"), 5)
        .added("b", Some("c1"), 6)
        .burst(
            &[
                frame("ADDED", &pod("c", Some("c2"), 7)),
                frame("ADDED", &pod("d", Some("c2"), 8)),
            ],
            "ADDED c, d",
        );
    assert_eq!(s.core.store().len(), 0, "nothing applied before the end");
    assert!(!s.core.is_synced());
    assert_eq!(s.core.cursor(), None);
    s.bookmark(9);
    assert_eq!(
        s.core.store().len(),
        0,
        "a bookmark without the annotation does not end the initial events"
    );
    s.initial_events_end(10);
    assert!(s.core.is_synced());
    assert_eq!(s.core.store().len(), 4);
    assert_eq!(s.core.cursor(), Some("10"));
    // The same stream is the watch now.
    s.settle().at(3.0).modified("a", Some("c3"), 11);
    assert_eq!(s.members("c3"), ["a"]);
    s.settle().at(300.0).watch_end(StreamEnd::Clean);
    let m = s.core.metrics();
    assert_eq!(
        (
            m.streaming_lists_total,
            m.streaming_list_fallbacks_total,
            m.lists_total
        ),
        (1, 0, 0)
    );
    insta::assert_snapshot!(s.log);
}

#[test]
fn a_refused_streaming_list_falls_back_to_list_and_watch_for_good() {
    let mut s = Scenario::new(streaming_config());
    s.start().watch_status(422, REFUSED);
    s.list_ok(20, &[pod("a", Some("c1"), 5), pod("b", Some("c2"), 6)]);
    assert!(s.core.is_synced());
    assert_eq!(s.core.store().len(), 2);
    // A later 410 relists with a LIST: the fallback is remembered.
    s.settle()
        .at(60.0)
        .error_frame(410, "Expired")
        .next_deadline()
        .list_ok(40, &[pod("a", Some("c1"), 5)]);
    assert_eq!(s.core.store().len(), 1);
    let m = s.core.metrics();
    assert_eq!(
        (
            m.streaming_lists_total,
            m.streaming_list_fallbacks_total,
            m.lists_total
        ),
        (0, 1, 2)
    );
    insta::assert_snapshot!(s.log);
}

#[test]
fn a_bad_request_also_falls_back_but_a_server_error_streams_again() {
    let mut s = Scenario::new(streaming_config());
    s.start()
        .watch_status(
            503,
            r#"{"kind":"Status","code":503,"reason":"ServiceUnavailable","message":"etcd leader changed"}"#,
        )
        .next_deadline()
        .watch_end(StreamEnd::TransportError("connection reset".into()))
        .next_deadline()
        .watch_status(
            400,
            r#"{"kind":"Status","code":400,"reason":"BadRequest","message":"unknown parameter sendInitialEvents"}"#,
        )
        .list_ok(7, &[pod("a", Some("c1"), 5)]);
    assert!(s.core.is_synced());
    insta::assert_snapshot!(s.log);
}

#[test]
fn no_end_bookmark_within_the_list_deadline_falls_back() {
    // A server that ignores sendInitialEvents: synthetic ADDED events, bookmarks without the
    // annotation, and no end.
    let mut s = Scenario::new(streaming_config().list_deadline(Duration::from_secs(120)));
    s.start()
        .added("a", Some("c1"), 5)
        .at(60.0)
        .bookmark(6)
        .at(90.0)
        .added("b", Some("c1"), 7);
    assert_eq!(s.core.store().len(), 0);
    s.next_deadline();
    assert_eq!(s.core.store().len(), 0, "the gathered events are dropped");
    s.list_ok(8, &[pod("a", Some("c1"), 5), pod("b", Some("c1"), 7)]);
    assert!(s.core.is_synced());
    assert_eq!(s.core.store().len(), 2);
    insta::assert_snapshot!(s.log);
}

#[test]
fn a_410_during_the_initial_events_streams_again_from_scratch() {
    let mut s = Scenario::new(streaming_config());
    s.start()
        .added("a", Some("c1"), 5)
        .added("b", Some("c1"), 6)
        .error_frame(410, "Expired");
    assert_eq!(s.core.store().len(), 0, "the gathered events are dropped");
    s.next_deadline()
        .added("a", Some("c1"), 5)
        .added("c", Some("c2"), 30)
        .initial_events_end(31);
    assert_eq!(s.core.store().len(), 2);
    assert_eq!(s.members("c1"), ["a"]);
    // An HTTP 410 on the streaming WATCH itself does the same.
    s.settle()
        .at(100.0)
        .watch_status(410, GONE)
        .next_deadline()
        .watch_status(410, GONE)
        .next_deadline()
        .added("c", Some("c2"), 30)
        .initial_events_end(45);
    assert_eq!(
        s.core.store().len(),
        1,
        "a was deleted while the cursor was dead"
    );
    insta::assert_snapshot!(s.log);
}

#[test]
fn events_for_one_object_before_the_end_collapse_and_a_deletion_removes_it() {
    let mut s = Scenario::new(streaming_config());
    s.start()
        .added("a", Some("c1"), 5)
        .modified("a", Some("c2"), 6)
        .added("b", Some("c1"), 7)
        .deleted("b", Some("c1"), 8)
        .initial_events_end(9);
    assert_eq!(s.core.store().len(), 1);
    assert_eq!(s.members("c2"), ["a"]);
    insta::assert_snapshot!(s.log);
}

#[test]
fn stop_during_the_initial_events_closes_the_stream_and_applies_nothing() {
    let mut s = Scenario::new(streaming_config());
    s.start().added("a", Some("c1"), 5).stop();
    assert_eq!(s.core.store().len(), 0);
    insta::assert_snapshot!(s.log);
}

/// k8s-openapi's recording of a streaming list against a real 1.36 apiserver (kind): eight
/// pods as ADDED events, then the Pod-kinded end bookmark at 550.
#[test]
fn a_recorded_streaming_list_syncs_at_its_end_bookmark() {
    let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(
        "../testdata/real/k8s-openapi/v1-36_watch_event-watch_pods_without_initial_events.body.ndjson",
    );
    let body = std::fs::read_to_string(&path).unwrap();
    let mut s = Scenario::new(Config::kubernetes(
        WatchParams::namespaced("kube-system").streaming_lists(),
        KeyMap::by_namespace(),
    ));
    s.start();
    let lines: Vec<&str> = body.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(lines.len(), 9);
    for (i, line) in lines.iter().enumerate() {
        s.line(line, &format!("recorded line {}", i + 1));
        assert_eq!(
            s.core.is_synced(),
            i == 8,
            "synced only at the end bookmark"
        );
    }
    assert_eq!(s.core.store().len(), 8);
    assert_eq!(s.core.cursor(), Some("550"));
    insta::assert_snapshot!(s.log);
}
