//! Whole-loop scenarios, rendered one line per step and pinned as insta snapshots.

mod harness;

use std::time::Duration;

use harness::{Scenario, frame, kube_config, pod, pod_view};
use reconcile_core::{Config, Outcome, SourceEvent, StreamEnd};

#[test]
fn initial_sync_then_membership_changes() {
    let mut s = Scenario::new(kube_config());
    s.start()
        .at(0.1)
        .list_ok(
            100,
            &[
                pod("a", Some("c1"), 90),
                pod("b", Some("c1"), 91),
                pod("c", Some("c2"), 92),
            ],
        )
        .at(0.2)
        .ok("c1")
        .ok("c2")
        .at(1.0)
        .added("d", Some("c2"), 101)
        .ok("c2")
        .at(2.0)
        .deleted("a", Some("c1"), 102)
        .ok("c1")
        .at(3.0)
        .bookmark(110)
        .at(300.0)
        .watch_end(StreamEnd::Clean);
    assert_eq!(s.members("c1"), ["b"]);
    assert_eq!(s.members("c2"), ["c", "d"]);
    assert_eq!(s.core.cursor(), Some("110"));
    insta::assert_snapshot!(s.log);
}

#[test]
fn reparenting_by_a_label_patch_wakes_both_parents() {
    let mut s = Scenario::new(kube_config());
    s.start()
        .list_ok(10, &[pod("a", Some("c1"), 5), pod("b", Some("c1"), 6)])
        .ok("c1")
        .at(1.0)
        .modified("a", Some("c2"), 11)
        .ok("c1")
        .ok("c2")
        .at(2.0)
        .modified("b", None, 12)
        .ok("c1");
    assert!(s.members("c1").is_empty());
    assert_eq!(s.members("c2"), ["a"]);
    insta::assert_snapshot!(s.log);
}

#[test]
fn a_burst_read_in_one_go_wakes_each_parent_once_and_its_reconcile_sees_all_of_it() {
    let mut s = Scenario::new(kube_config().concurrency(4));
    s.start()
        .list_ok(10, &[pod("a", Some("c2"), 5)])
        .settle()
        .at(1.0);
    let burst = [
        frame("ADDED", &pod("b", Some("c2"), 11)),
        frame("ADDED", &pod("c", Some("c1"), 12)),
        frame("MODIFIED", &pod("a", Some("c2"), 13)),
        frame("ADDED", &pod("d", Some("c2"), 14)),
    ];
    s.burst(&burst, "4 frames in one read: b, c, a, d");
    assert_eq!(s.core.stats().reconciles, 3, "{}", s.log);
    s.settle();
    insta::assert_snapshot!(s.log);
}

#[test]
fn parents_woken_together_are_dispatched_in_ascending_order() {
    // A reparent from `b` to `a`, and a relist that empties `c3` and fills `c1`: each wakes
    // two parents at once, and both are dispatched smallest key first.
    let mut s = Scenario::new(kube_config().concurrency(4));
    s.start()
        .list_ok(10, &[pod("x", Some("b"), 5), pod("y", Some("c3"), 6)])
        .settle()
        .at(1.0)
        .modified("x", Some("a"), 11)
        .settle()
        .at(2.0)
        .error_frame(410, "Expired")
        .next_deadline()
        .list_ok(20, &[pod("x", Some("a"), 11), pod("y", Some("c1"), 19)])
        .settle();
    insta::assert_snapshot!(s.log);
}

#[test]
fn relist_after_410_synthesizes_the_deletion_missed_while_disconnected() {
    let mut s = Scenario::new(kube_config());
    s.start()
        .list_ok(10, &[pod("a", Some("c1"), 5), pod("b", Some("c2"), 6)])
        .settle()
        .at(5.0)
        .watch_end(StreamEnd::TransportError("connection reset".into()))
        .next_deadline()
        .error_frame(410, "Expired")
        .at(6.5)
        .added("late", Some("c1"), 99)
        .next_deadline()
        .list_ok(50, &[pod("a", Some("c1"), 5)]);
    assert!(
        s.members("c2").is_empty(),
        "b was deleted while disconnected"
    );
    assert_eq!(
        s.members("c1"),
        ["a"],
        "frames after the ERROR were discarded"
    );
    s.settle();
    insta::assert_snapshot!(s.log);
}

#[test]
fn watch_http_410_and_504_relist_other_statuses_rewatch() {
    let mut s = Scenario::new(kube_config());
    s.start()
        .list_ok(10, &[])
        .watch_end(StreamEnd::HttpStatus {
            code: 410,
            body: br#"{"kind":"Status","code":410,"reason":"Expired"}"#.to_vec(),
        })
        .next_deadline()
        .list_ok(20, &[])
        .at(2.0)
        .watch_end(StreamEnd::HttpStatus {
            code: 504,
            body: br#"{"kind":"Status","code":504,"details":{"causes":[{"reason":"ResourceVersionTooLarge"}]}}"#.to_vec(),
        })
        .next_deadline()
        .list_ok(30, &[])
        .at(4.0)
        .watch_end(StreamEnd::HttpStatus { code: 500, body: b"oops".to_vec() })
        .next_deadline()
        .at(6.0)
        .error_frame(500, "InternalError")
        .next_deadline();
    assert_eq!(s.core.stats().relists, 2);
    insta::assert_snapshot!(s.log);
}

#[test]
fn malformed_pod_frame_with_a_cursor_is_skipped_without_one_relists() {
    let mut s = Scenario::new(kube_config());
    s.start()
        .list_ok(10, &[pod("a", Some("c1"), 5)])
        .ok("c1")
        .at(1.0)
        .line(
            r#"{"type":"MODIFIED","object":{"metadata":{"name":"a","namespace":"ns","resourceVersion":"11","labels":{"cell":7}}}}"#,
            "MODIFIED a rv=11 (labels.cell is a number)",
        )
        .at(2.0)
        .modified("a", Some("c1"), 12)
        .ok("c1")
        .at(3.0)
        .line(r#"{"type":"MODIFIED","object":{"metadata":{"name":"a""#, "truncated frame")
        .next_deadline()
        .list_ok(20, &[pod("a", Some("c1"), 12)]);
    // The relist found `a` at the version the cache holds: nothing to reconcile.
    assert!(s.running.is_empty(), "{}", s.log);
    assert_eq!(s.core.stats().frames_skipped, 1);
    insta::assert_snapshot!(s.log);
}

#[test]
fn a_frame_of_another_kind_is_skipped_when_the_source_checks_its_kind() {
    let configmap = r#"{"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"cm","namespace":"ns","resourceVersion":"11","labels":{"app":"cell","cell":"c1"}},"data":{"k":"v"}}}"#;
    let pod_with_kind = r#"{"type":"MODIFIED","object":{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a","namespace":"ns","resourceVersion":"12","labels":{"app":"cell","cell":"c1"}}}}"#;
    let checked = reconcile_core::Config::kubernetes(
        reconcile_core::WatchParams::namespaced("ns")
            .labels("app=cell")
            .of_kind("Pod"),
        reconcile_core::KeyMap::by_label("cell"),
    );
    let mut s = Scenario::new(checked);
    s.start()
        .list_ok(10, &[pod("a", Some("c1"), 5)])
        .ok("c1")
        .at(1.0)
        .line(configmap, "ADDED ConfigMap cm rv=11")
        .at(2.0)
        .line(pod_with_kind, "MODIFIED a rv=12 (kind Pod)")
        .ok("c1");
    // The ConfigMap is not a member; its version is still the cursor it passed.
    assert_eq!(s.members("c1"), ["a"]);
    assert_eq!(s.core.stats().frames_skipped, 1);
    assert_eq!(s.core.cursor(), Some("12"));
    insta::assert_snapshot!(s.log);

    // Unchecked (the default), the ConfigMap decodes as a pod and joins c1: what the check
    // is there to stop.
    let mut s = Scenario::new(kube_config());
    s.start()
        .list_ok(10, &[pod("a", Some("c1"), 5)])
        .ok("c1")
        .at(1.0)
        .line(configmap, "ADDED ConfigMap cm rv=11")
        .ok("c1");
    assert_eq!(s.members("c1"), ["a", "cm"]);
}

#[test]
fn backoff_doubles_to_sixty_seconds_and_resets_on_success() {
    let mut s = Scenario::new(kube_config());
    s.start().list_ok(10, &[pod("a", Some("c1"), 5)]);
    for _ in 0..8 {
        s.done("c1", Outcome::Error("boom".into())).next_deadline();
    }
    s.ok("c1")
        .at(1000.0)
        .modified("a", Some("c1"), 11)
        .done("c1", Outcome::Error("again".into()));
    insta::assert_snapshot!(s.log);
}

#[test]
fn requeue_after_runs_again_unless_an_error_overrides_it() {
    let mut s = Scenario::new(kube_config());
    s.start()
        .list_ok(10, &[pod("a", Some("c1"), 5)])
        .done("c1", Outcome::RequeueAfter(Duration::from_secs(30)))
        .next_deadline()
        .done("c1", Outcome::RequeueAfter(Duration::from_secs(30)))
        .at(40.0)
        .modified("a", Some("c1"), 11)
        .done("c1", Outcome::Error("late".into()))
        .next_deadline()
        .ok("c1");
    assert_eq!(
        s.core.poll_timeout().map(|d| d.wake),
        Some(reconcile_core::Wake::Resync)
    );
    insta::assert_snapshot!(s.log);
}

#[test]
fn an_error_policy_picks_the_rerun_and_the_backoff_starts_over() {
    let handled = |requeue_after: Option<u64>| Outcome::ErrorHandled {
        error: "conflict".into(),
        requeue_after: requeue_after.map(Duration::from_secs),
    };
    let mut s = Scenario::new(kube_config());
    s.start().list_ok(10, &[pod("a", Some("c1"), 5)]);
    s.done("c1", Outcome::Error("boom".into()))
        .next_deadline()
        .done("c1", Outcome::Error("boom".into()))
        .next_deadline()
        // The policy's fixed delay replaces the third backoff (4 s).
        .done("c1", handled(Some(7)))
        .next_deadline()
        // The backoff started over: 1 s again.
        .done("c1", Outcome::Error("boom".into()))
        .next_deadline()
        // Await change: no rerun until the pod changes.
        .done("c1", handled(None));
    assert_eq!(
        s.core.poll_timeout().map(|d| d.wake),
        Some(reconcile_core::Wake::Resync)
    );
    s.at(500.0).modified("a", Some("c1"), 11).ok("c1");
    assert_eq!(s.core.stats().reconcile_errors, 5);
    insta::assert_snapshot!(s.log);
}

#[test]
fn resync_after_ten_hours_skips_parents_without_members() {
    let mut s = Scenario::new(kube_config());
    s.start()
        .list_ok(
            10,
            &[
                pod("a", Some("c1"), 5),
                pod("b", Some("c2"), 6),
                pod("c", Some("c3"), 7),
            ],
        )
        .settle()
        .at(60.0)
        .deleted("b", Some("c2"), 11)
        .settle()
        .next_deadline()
        .settle();
    insta::assert_snapshot!(s.log);
}

#[test]
fn stop_closes_everything_and_ignores_later_inputs() {
    let mut s = Scenario::new(kube_config().concurrency(2));
    s.start()
        .list_ok(10, &[pod("a", Some("c1"), 5), pod("b", Some("c2"), 6)])
        .at(1.0)
        .stop();
    // Late inputs after the stop: a frame, both outcomes, a timer.
    s.added("x", Some("c9"), 11)
        .ok("c1")
        .ok("c2")
        .at(99999.0)
        .tick()
        .stop();
    assert!(s.core.poll_timeout().is_none());
    insta::assert_snapshot!(s.log);
}

#[test]
fn stop_before_start_is_stale_and_stop_while_listing_cancels_the_list() {
    let mut s = Scenario::new(kube_config());
    s.stop().start().at(0.5).stop().start();
    s.list_ok(1, &[]);
    insta::assert_snapshot!(s.log);
}

fn busy_cells(concurrency: usize) -> String {
    let mut s = Scenario::new(kube_config().concurrency(concurrency));
    let pods: Vec<String> = (1..=6)
        .map(|i| pod(&format!("p{i}"), Some(&format!("c{i}")), i))
        .collect();
    s.start().list_ok(10, &pods);
    // While c1 runs, it changes three times: exactly one follow-up.
    s.at(1.0)
        .modified("p1", Some("c1"), 11)
        .modified("p1", Some("c1"), 12)
        .modified("p1", Some("c1"), 13);
    let mut t = 2.0;
    while !s.running.is_empty() {
        s.at(t).all_ok();
        t += 1.0;
    }
    s.log
}

#[test]
fn concurrency_one_against_four() {
    insta::assert_snapshot!("concurrency_1", busy_cells(1));
    insta::assert_snapshot!("concurrency_4", busy_cells(4));
}

#[test]
fn list_failures_retry_as_list_after_retry_delay() {
    let mut s = Scenario::new(kube_config());
    s.start()
        .list_transport_error()
        .next_deadline()
        .list_status(
            500,
            r#"{"kind":"Status","code":500,"reason":"InternalError","message":"etcd down"}"#,
        )
        .next_deadline()
        .list_status(200, "not json")
        .next_deadline()
        .list_ok(10, &[pod("a", Some("c1"), 5)]);
    assert!(s.core.is_synced());
    insta::assert_snapshot!(s.log);
}

#[test]
fn short_clean_watch_waits_and_long_one_rewatches_at_once() {
    let mut s = Scenario::new(kube_config());
    s.start()
        .list_ok(10, &[])
        .at(0.5)
        .watch_end(StreamEnd::Clean)
        .next_deadline()
        .at(301.5)
        .watch_end(StreamEnd::Clean);
    insta::assert_snapshot!(s.log);
}

#[test]
fn unmappable_pod_is_evicted_and_its_cell_woken() {
    let mut s = Scenario::new(kube_config());
    s.start()
        .list_ok(10, &[pod("a", Some("c1"), 5), pod("b", None, 6)])
        .ok("c1")
        .at(1.0)
        .modified("a", None, 11)
        .ok("c1");
    assert_eq!(s.core.store().len(), 0);
    insta::assert_snapshot!(s.log);
}

#[test]
fn in_process_source_must_open_with_a_replace() {
    let mut s = Scenario::new(Config::in_process(harness::by_cell));
    s.start()
        .source_event(
            SourceEvent::Upsert(pod_view("a", Some("c1"), 1)),
            "Upsert a",
        )
        .next_deadline()
        .source_event(
            SourceEvent::Replace(vec![pod_view("a", Some("c1"), 1)]),
            "Replace [a]",
        )
        .ok("c1")
        .source_event(
            SourceEvent::Upsert(pod_view("b", Some("c1"), 2)),
            "Upsert b",
        )
        .ok("c1")
        .source_event(
            SourceEvent::Delete(pod_view("a", Some("c1"), 3)),
            "Delete a",
        )
        .ok("c1");
    s.source_end(Some("registry gone"))
        .next_deadline()
        .source_event(SourceEvent::Replace(vec![]), "Replace []")
        .ok("c1");
    assert!(s.members("c1").is_empty());
    insta::assert_snapshot!(s.log);
}

#[test]
fn reconcile_reads_a_store_that_already_holds_the_event() {
    let mut s = Scenario::new(kube_config());
    s.start().list_ok(10, &[]).added("a", Some("c1"), 11);
    let members = s.members("c1");
    assert_eq!(members, ["a"]);
    assert!(
        s.log.contains("reconcile c1 R3 attempt=1 members=[a]"),
        "{}",
        s.log
    );
}
