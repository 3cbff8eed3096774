//! The sans-IO contract: time, ids, draining, deadlines.

mod harness;

use std::time::Duration;

use harness::{Scenario, kube_config, pod};
use reconcile_core::{
    Command, Config, ConfigError, Event, Input, Instant, ListResponse, Outcome, Output,
    ReconcileLoop, Wake, WatchParams,
};

#[test]
fn time_never_goes_backwards_inside_the_core() {
    let mut s = Scenario::new(kube_config());
    s.at(10.0).start().list_ok(1, &[pod("a", Some("c1"), 1)]);
    s.done("c1", Outcome::Error("x".into()));
    assert_eq!(
        s.core.poll_timeout().unwrap().at,
        Instant::from_duration(Duration::from_secs(11))
    );
    // An input stamped earlier is clamped to the latest now.
    s.at(3.0).modified("a", Some("c1"), 2);
    assert_eq!(
        s.core.now(),
        Instant::from_duration(Duration::from_secs(10))
    );
}

#[test]
fn a_second_outcome_for_one_ticket_is_ignored() {
    let mut s = Scenario::new(kube_config());
    s.start().list_ok(1, &[pod("a", Some("c1"), 1)]);
    let ticket = s.running["c1"];
    s.ok("c1");
    let outcome = Outcome::Error("late duplicate".into());
    s.core
        .handle_input(s.now, Input::Reconciled { ticket, outcome });
    let mut stale = false;
    loop {
        match s.core.poll_output() {
            Output::Timeout(_) => break,
            Output::Event(e) => {
                stale |= e
                    == Event::Stale {
                        input: "reconcile outcome",
                    }
            }
            Output::Command(c) => panic!("no command expected, got {c:?}"),
        }
    }
    assert!(stale);
    assert_eq!(s.core.stats().reconcile_errors, 0, "never applied");
}

#[test]
fn early_and_spurious_timeouts_do_nothing() {
    let mut s = Scenario::new(kube_config());
    s.start()
        .list_ok(1, &[pod("a", Some("c1"), 1)])
        .done("c1", Outcome::Error("x".into()));
    let before = s.log.clone();
    s.at(0.5).tick().tick();
    assert!(
        s.log[before.len()..]
            .lines()
            .all(|l| l.contains("timeout  ->  -")),
        "{}",
        s.log
    );
}

#[test]
fn the_deadline_is_only_reported_once_output_is_drained() {
    // Lost-wakeup guard: Timeout is the last output, after every queued command.
    let mut core = ReconcileLoop::new(kube_config().concurrency(3), Instant::ZERO).unwrap();
    core.handle_input(Instant::ZERO, Input::Start);
    let Output::Command(Command::List { req, .. }) = core.poll_output() else {
        panic!()
    };
    let body = harness::list_body(1, &[pod("a", Some("c1"), 1), pod("b", Some("c2"), 1)]);
    let response = ListResponse::Response {
        status: 200,
        body: body.into(),
    };
    core.handle_input(Instant::ZERO, Input::List { req, response });
    let mut commands = 0;
    loop {
        match core.poll_output() {
            Output::Command(_) => commands += 1,
            Output::Event(_) => {}
            Output::Timeout(deadline) => {
                assert_eq!(deadline.map(|d| d.wake), Some(Wake::Resync));
                break;
            }
        }
    }
    assert_eq!(
        commands, 3,
        "watch + two reconciles, all before the timeout"
    );
    assert!(
        matches!(core.poll_output(), Output::Timeout(_)),
        "stays drained"
    );
}

#[test]
fn no_reconcile_before_the_first_whole_world_listing() {
    let mut s = Scenario::new(kube_config());
    s.start().list_transport_error();
    assert!(!s.core.is_synced());
    assert!(s.running.is_empty());
}

#[test]
fn config_bounds_are_checked() {
    let base = || Config::kubernetes(WatchParams::default(), harness::by_cell);
    let err = |c: Config<_, _>| ReconcileLoop::new(c, Instant::ZERO).unwrap_err();
    assert_eq!(err(base().concurrency(0)), ConfigError::Concurrency(0));
    assert_eq!(
        err(base().concurrency(1_000_000)),
        ConfigError::Concurrency(1_000_000)
    );
    assert!(matches!(
        err(base().backoff(Duration::from_secs(5), Duration::from_secs(1))),
        ConfigError::Backoff(_)
    ));
    assert_eq!(
        err(base().retry_delay(Duration::ZERO)),
        ConfigError::ZeroDelay("retry_delay")
    );
    assert_eq!(
        err(base().resync(Some(Duration::ZERO))),
        ConfigError::ZeroDelay("resync")
    );
    assert_eq!(
        err(Config::kubernetes(
            WatchParams::default().timeout(0),
            harness::by_cell
        )),
        ConfigError::WatchTimeout
    );
}

#[test]
fn resync_can_be_turned_off() {
    let mut s = Scenario::new(kube_config().resync(None));
    s.start().list_ok(1, &[pod("a", Some("c1"), 1)]).ok("c1");
    assert_eq!(s.core.poll_timeout(), None);
}

#[test]
fn every_watch_carries_a_cursor_from_a_list_or_a_frame() {
    let mut s = Scenario::new(kube_config());
    s.start()
        .list_ok(7, &[])
        .added("a", Some("c1"), 8)
        .ok("c1")
        .bookmark(9)
        .watch_end(reconcile_core::StreamEnd::TransportError("reset".into()))
        .next_deadline();
    let watches: Vec<&str> = s.log.lines().filter(|l| l.contains("watch W")).collect();
    assert!(watches.iter().any(|l| l.contains("rv=7")));
    assert!(
        watches.last().unwrap().contains("watch W") && s.log.contains("rv=9 timeout"),
        "{}",
        s.log
    );
}

/// Every output until the deadline, rendered.
fn drain(core: &mut ReconcileLoop<reconcile_core::pod::PodView, String>) -> Vec<String> {
    let mut outputs = Vec::new();
    loop {
        match core.poll_output() {
            Output::Command(c) => outputs.push(format!("{c}")),
            Output::Event(e) => outputs.push(format!("{e}")),
            Output::Timeout(deadline) => {
                outputs.push(format!("timeout {deadline:?}"));
                return outputs;
            }
        }
    }
}

#[test]
fn a_list_decoded_while_streaming_acts_as_the_whole_body() {
    use reconcile_core::list::ListDecoder;
    let body = harness::list_body(
        4,
        &[
            pod("a", Some("c1"), 1),
            pod("b", Some("c2"), 2),
            pod("c", Some("c1"), 3),
        ],
    );
    // The same loop, fed the whole body or the driver's streamed decode, and then a body
    // that is not a list each way.
    let run = |streamed: bool, body: &[u8]| {
        let mut core = ReconcileLoop::new(kube_config().concurrency(3), Instant::ZERO).unwrap();
        core.handle_input(Instant::ZERO, Input::Start);
        let Output::Command(Command::List { req, .. }) = core.poll_output() else {
            panic!()
        };
        let response = if streamed {
            let mut decoder = ListDecoder::new();
            let pushed = body.chunks(3).try_for_each(|chunk| decoder.push(chunk));
            ListResponse::Decoded(pushed.and_then(|()| decoder.finish()))
        } else {
            ListResponse::Response {
                status: 200,
                body: body.to_vec().into(),
            }
        };
        core.handle_input(Instant::ZERO, Input::List { req, response });
        let outputs = drain(&mut core);
        (outputs, core.store().len(), core.is_synced())
    };
    let whole = run(false, body.as_bytes());
    assert_eq!(whole.1, 3);
    assert!(whole.2);
    assert_eq!(run(true, body.as_bytes()), whole);
    let broken = run(false, b"{\"items\":[1,");
    assert!(
        broken.0.iter().any(|o| o.contains("list-failed")),
        "{broken:?}"
    );
    assert_eq!(run(true, b"{\"items\":[1,"), broken);
}

#[test]
fn a_decoded_list_for_a_dead_request_is_stale() {
    let mut core = ReconcileLoop::new(kube_config(), Instant::ZERO).unwrap();
    core.handle_input(Instant::ZERO, Input::Start);
    let Output::Command(Command::List { req, .. }) = core.poll_output() else {
        panic!()
    };
    let response = ListResponse::TransportError("reset".into());
    core.handle_input(Instant::ZERO, Input::List { req, response });
    drain(&mut core);
    let list = reconcile_core::list::parse_list(harness::list_body(1, &[]).as_bytes());
    let response = ListResponse::Decoded(list);
    core.handle_input(Instant::ZERO, Input::List { req, response });
    let outputs = drain(&mut core);
    assert!(outputs[0].contains("stale"), "{outputs:?}");
    assert!(!core.is_synced());
}
