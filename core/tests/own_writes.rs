//! Read your own writes (KEP-5647) and the reconcile timeout, on the virtual clock: a key
//! whose reconcile wrote is held until the source's cursor reaches the write, released by a
//! watch frame, a bookmark or a relist, dispatched anyway when its wait ends, and not held at
//! all when the write cannot be compared (fail open).

mod harness;

use std::time::Duration;

use harness::{Scenario, kube_config, pod, pod_view};
use reconcile_core::{Config, Outcome, SourceEvent};

/// Synced at rv 10 with `a` in c1 and `b` in c2; c1 then runs (woken by a change of `a` at
/// rv 11) and reports a write answered with rv 13, say a patch of `a`.
fn c1_wrote_13(config: Config<reconcile_core::pod::PodView, String>) -> Scenario {
    let mut s = Scenario::new(config);
    s.start()
        .list_ok(10, &[pod("a", Some("c1"), 9), pod("b", Some("c2"), 8)])
        .settle()
        .at(1.0)
        .modified("a", Some("c1"), 11)
        .at(1.5)
        .ok_wrote("c1", &[(0, "13")]);
    s
}

#[test]
fn a_wake_before_the_echo_is_held_until_the_watch_frame_of_the_write() {
    let mut s = c1_wrote_13(kube_config());
    // Another pod of c1, written before our write: the cache is behind it.
    s.at(2.0).added("c", Some("c1"), 12);
    assert_eq!(s.core.in_flight(), 0, "{}", s.log);
    // The echo of our own write: the cursor reaches 13 and c1 runs, seeing it.
    s.at(2.5).modified("a", Some("c1"), 13).ok("c1");
    let stats = s.core.stats();
    assert_eq!(stats.own_write_holds, 1);
    assert_eq!(stats.own_write_timeouts, 0);
    let m = s.core.metrics();
    assert_eq!(m.own_write_holds_total, 1);
    assert_eq!(m.own_write_hold_seconds.count(), 1);
    assert!((m.own_write_hold_seconds.sum() - 0.5).abs() < 1e-9);
    assert_eq!(m.own_writes_waiting, 0);
    insta::assert_snapshot!(s.log);
}

#[test]
fn the_echo_alone_releases_without_a_hold() {
    let mut s = c1_wrote_13(kube_config());
    assert_eq!(s.core.metrics().own_writes_waiting, 1);
    s.at(2.0).modified("a", Some("c1"), 13).ok("c1");
    assert_eq!(s.core.stats().own_write_holds, 0);
    assert_eq!(s.core.metrics().own_writes_waiting, 0);
    insta::assert_snapshot!(s.log);
}

#[test]
fn a_bookmark_past_the_write_releases_the_held_key() {
    let mut s = c1_wrote_13(kube_config());
    s.at(2.0)
        .added("c", Some("c1"), 12)
        .at(3.0)
        .bookmark(12)
        .at(4.0)
        .bookmark(20)
        .ok("c1");
    assert_eq!(s.core.stats().own_write_holds, 1);
    insta::assert_snapshot!(s.log);
}

#[test]
fn a_relist_after_410_releases_when_the_new_listing_is_past_the_write() {
    let mut s = c1_wrote_13(kube_config());
    s.at(2.0)
        .added("c", Some("c1"), 12)
        .at(3.0)
        .error_frame(410, "Expired")
        .next_deadline()
        .at(4.5)
        .list_ok(
            30,
            &[
                pod("a", Some("c1"), 13),
                pod("b", Some("c2"), 8),
                pod("c", Some("c1"), 12),
            ],
        )
        .settle();
    assert_eq!(s.core.stats().own_write_holds, 1);
    assert_eq!(s.core.stats().own_write_timeouts, 0);
    insta::assert_snapshot!(s.log);
}

#[test]
fn a_write_never_observed_is_dispatched_anyway_when_the_wait_ends() {
    let mut s = c1_wrote_13(kube_config().read_own_writes(Some(Duration::from_secs(5))));
    s.at(2.0).added("c", Some("c1"), 12);
    // The next deadline is the end of the wait: 5 s after the write at 1.5 s.
    assert_eq!(
        s.core.poll_timeout().map(|d| d.to_string()),
        Some("+6.500s own-writes".to_owned())
    );
    s.next_deadline().ok("c1");
    let stats = s.core.stats();
    assert_eq!(stats.own_write_holds, 1);
    assert_eq!(stats.own_write_timeouts, 1);
    assert_eq!(s.core.metrics().own_write_timeouts_total, 1);
    insta::assert_snapshot!(s.log);
}

#[test]
fn writes_that_cannot_be_compared_or_do_not_fit_fail_open() {
    let mut s = Scenario::new(kube_config().max_own_writes(1));
    s.start()
        .list_ok(10, &[pod("a", Some("c1"), 9), pod("b", Some("c2"), 8)])
        .settle()
        .at(1.0)
        .modified("a", Some("c1"), 11)
        .modified("b", Some("c2"), 12)
        // Not a number: not waited for. Already observed (10 <= cursor 12): nothing to wait
        // for. A source not configured: no cursor.
        .ok_wrote("c1", &[(0, "x-13"), (0, "10"), (7, "14")])
        // Waited for: the one key the table holds.
        .ok_wrote("c2", &[(0, "15")])
        .at(2.0)
        .added("c", Some("c1"), 13);
    // c1 runs at once: nothing of it is tracked.
    assert_eq!(s.core.in_flight(), 1, "{}", s.log);
    s.ok_wrote("c1", &[(0, "16")]);
    assert_eq!(s.core.metrics().own_writes_untracked_total, 3);
    assert_eq!(s.core.metrics().own_writes_waiting, 1);
    insta::assert_snapshot!(s.log);
}

#[test]
fn turned_off_nothing_is_held() {
    let mut s = c1_wrote_13(kube_config().read_own_writes(None));
    s.at(2.0).added("c", Some("c1"), 12).ok("c1");
    assert_eq!(s.core.stats().own_write_holds, 0);
    assert_eq!(s.core.metrics().own_writes_waiting, 0);
    insta::assert_snapshot!(s.log);
}

#[test]
fn a_reconcile_past_its_deadline_is_cancelled_and_backs_off() {
    let config = kube_config()
        .concurrency(2)
        .reconcile_timeout(Some(Duration::from_secs(10)));
    let mut s = Scenario::new(config);
    s.start()
        .list_ok(10, &[pod("a", Some("c1"), 9), pod("b", Some("c2"), 8)])
        .ok("c2");
    // c1 hangs: at its deadline, 10 s after dispatch, it is cancelled and backs off 1 s.
    s.next_deadline();
    let late = s.cancelled("c1");
    // Its late outcome is stale; the retry runs, sets its own 2 s deadline, and ends in time.
    s.at(10.5)
        .late_outcome(late)
        .next_deadline()
        .run_timeout("c1", Some(Duration::from_secs(2)));
    assert_eq!(
        s.core.poll_timeout().map(|d| d.to_string()),
        Some("+13.000s reconcile-timeout".to_owned())
    );
    s.at(11.5).ok("c1");
    // A run may lift its deadline.
    s.at(20.0)
        .modified("b", Some("c2"), 11)
        .run_timeout("c2", None);
    assert_eq!(
        s.core.poll_timeout().map(|d| d.wake.to_string()),
        Some("resync".to_owned())
    );
    s.at(100.0).ok("c2");
    let stats = s.core.stats();
    assert_eq!(stats.reconcile_timeouts, 1);
    assert_eq!(stats.reconcile_errors, 1);
    assert_eq!(s.core.metrics().reconcile_timeouts_total, 1);
    insta::assert_snapshot!(s.log);
}

#[test]
fn a_zero_wait_or_timeout_is_refused() {
    use reconcile_core::{ConfigError, Instant, ReconcileLoop};
    let zero = |c: Config<_, _>| ReconcileLoop::new(c, Instant::ZERO).map(drop).unwrap_err();
    assert_eq!(
        zero(kube_config().read_own_writes(Some(Duration::ZERO))),
        ConfigError::ZeroDelay("read_own_writes")
    );
    assert_eq!(
        zero(kube_config().reconcile_timeout(Some(Duration::ZERO))),
        ConfigError::ZeroDelay("reconcile_timeout")
    );
    assert_eq!(
        zero(kube_config().max_own_writes(0)),
        ConfigError::MaxOwnWrites
    );
    let _ = Outcome::Success;
}

/// An in-process source fed from a shared cache, with its cursor: synced at rv 10 with `a`
/// in c1; c1 then runs (woken by `a` at rv 11) and reports a write answered with rv 13.
fn subscriber_c1_wrote_13() -> Scenario {
    let mut config = Config::in_process(harness::by_cell);
    config.read_own_writes = Some(Duration::from_secs(5));
    let mut s = Scenario::new(config);
    s.start()
        .source_event(
            SourceEvent::Replace(vec![pod_view("a", Some("c1"), 9)]),
            "Replace [a]",
        )
        .source_cursor(10)
        .settle()
        .at(1.0)
        .source_event(
            SourceEvent::Upsert(pod_view("a", Some("c1"), 11)),
            "Upsert a",
        )
        .source_cursor(11)
        .at(1.5)
        .ok_wrote("c1", &[(0, "13")]);
    s
}

#[test]
fn a_subscribers_write_is_held_until_the_shared_cursor_reaches_it() {
    let mut s = subscriber_c1_wrote_13();
    assert_eq!(s.core.cursor(), Some("11"));
    // Another pod of c1 reaches the subscriber, at a cursor still behind the write: held.
    s.at(2.0)
        .source_event(
            SourceEvent::Upsert(pod_view("c", Some("c1"), 12)),
            "Upsert c",
        )
        .source_cursor(12);
    assert!(!s.running.contains_key("c1"), "{}", s.log);
    assert_eq!(s.core.stats().own_write_holds, 1);
    // The echo of the write, then the cursor that covers it: c1 runs, seeing it.
    s.at(2.5)
        .source_event(
            SourceEvent::Upsert(pod_view("a", Some("c1"), 13)),
            "Upsert a",
        )
        .source_cursor(13);
    assert!(s.running.contains_key("c1"), "{}", s.log);
    let a = s
        .core
        .store()
        .get(&reconcile_core::ObjectKey::new(Some("ns"), "a"))
        .expect("a cached")
        .metadata
        .resource_version
        .clone();
    assert_eq!(a.as_deref(), Some("13"), "the run sees its own write");
    assert_eq!(s.core.metrics().own_writes_waiting, 0);
    assert_eq!(s.core.stats().own_write_timeouts, 0);
}

#[test]
fn a_reopened_subscriber_waits_for_the_new_streams_cursor() {
    let mut s = subscriber_c1_wrote_13();
    // The feed is cut off and reopened (a lagging subscriber resubscribes): until the new
    // stream says its cursor, the write is not observed.
    s.at(2.0).source_end(Some("cut off"));
    s.next_deadline().source_event(
        SourceEvent::Replace(vec![pod_view("a", Some("c1"), 13)]),
        "Replace [a]",
    );
    assert_eq!(s.core.cursor(), None);
    assert!(
        !s.running.contains_key("c1"),
        "held: no cursor yet\n{}",
        s.log
    );
    s.source_cursor(13);
    assert!(s.running.contains_key("c1"), "{}", s.log);
}

#[test]
fn an_in_process_source_without_a_cursor_does_not_wait_and_a_cursor_before_its_replace_is_stale() {
    let mut config = Config::in_process(harness::by_cell);
    config.read_own_writes = Some(Duration::from_secs(5));
    let mut s = Scenario::new(config);
    s.start().source_cursor(5);
    assert_eq!(s.core.cursor(), None, "refused before the Replace");
    assert_eq!(s.core.stats().stale_inputs, 1);
    s.source_event(
        SourceEvent::Replace(vec![pod_view("a", Some("c1"), 9)]),
        "Replace [a]",
    )
    .settle()
    .at(1.0)
    .source_event(
        SourceEvent::Upsert(pod_view("a", Some("c1"), 11)),
        "Upsert a",
    )
    .ok_wrote("c1", &[(0, "13")]);
    assert_eq!(
        s.core.metrics().own_writes_waiting,
        0,
        "no cursor: not tracked"
    );
    s.source_event(
        SourceEvent::Upsert(pod_view("c", Some("c1"), 12)),
        "Upsert c",
    );
    assert!(s.running.contains_key("c1"), "not held\n{}", s.log);
}
