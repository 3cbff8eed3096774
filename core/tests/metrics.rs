//! Metrics as plain data: the figures follow from the inputs and their injected instants
//! alone (controller-runtime's names; see `reconcile_core::metrics`).

use std::time::Duration;

use reconcile_core::metrics::{RECONCILE_TIME_BUCKETS, ResultLabel};
use reconcile_core::pod::PodView;
use reconcile_core::{
    Command, Config, Input, Instant, KeyMap, ListResponse, ObjectKey, Outcome, Output, Predicate,
    ReconcileLoop, SourceEvent, StreamId, Ticket, WatchParams,
};

fn pod(name: &str, rv: u64) -> PodView {
    serde_json::from_str(&format!(
        r#"{{"metadata":{{"name":"{name}","namespace":"ns","resourceVersion":"{rv}"}}}}"#
    ))
    .unwrap()
}

fn at(secs: f64) -> Instant {
    Instant::from_duration(Duration::from_secs_f64(secs))
}

/// Drains; returns the source's stream (if opened) and the tickets dispatched.
fn drain(core: &mut ReconcileLoop<PodView, ObjectKey>) -> (Option<StreamId>, Vec<Ticket>) {
    let mut stream = None;
    let mut tickets = Vec::new();
    loop {
        match core.poll_output() {
            Output::Command(Command::OpenSource { stream: s }) => stream = Some(s),
            Output::Command(Command::Reconcile { ticket, .. }) => tickets.push(ticket),
            Output::Timeout(_) => return (stream, tickets),
            _ => {}
        }
    }
}

#[test]
fn durations_come_from_the_injected_instants() {
    let config = Config::in_process(KeyMap::by_object()).concurrency(2);
    let mut core: ReconcileLoop<PodView, ObjectKey> =
        ReconcileLoop::new(config, Instant::ZERO).unwrap();
    core.handle_input(Instant::ZERO, Input::Start);
    let stream = drain(&mut core).0.unwrap();
    let objects = (0..3).map(|i| pod(&format!("p{i}"), 1)).collect();
    core.handle_input(
        at(1.0),
        Input::SourceEvent {
            stream,
            event: SourceEvent::Replace(objects),
        },
    );
    let (_, first) = drain(&mut core);
    assert_eq!(first.len(), 2, "two slots");

    let m = core.metrics();
    assert_eq!(m.workqueue_adds_total, 3);
    assert_eq!(m.workqueue_depth, 1);
    assert_eq!(m.active_workers, 2);
    assert_eq!(m.max_concurrent_reconciles, 2);
    assert!(m.synced);
    assert_eq!(m.leader, None);
    // Both dispatched at the instant they were queued.
    assert_eq!(m.workqueue_queue_duration.count(), 2);
    assert_eq!(m.workqueue_queue_duration.sum(), 0.0);

    // Two seconds later, both still run: 4 s of unfinished work, the longest 2 s.
    core.handle_input(at(3.0), Input::Timeout);
    drain(&mut core);
    let m = core.metrics();
    assert!((m.workqueue_unfinished_work_seconds - 4.0).abs() < 1e-9);
    assert!((m.workqueue_longest_running_processor_seconds - 2.0).abs() < 1e-9);

    // One succeeds at 3 s, one fails at 3.5 s; the third waited 2 s for its slot.
    core.handle_input(
        at(3.0),
        Input::Reconciled {
            ticket: first[0],
            outcome: Outcome::Success,
        },
    );
    let (_, third) = drain(&mut core);
    core.handle_input(
        at(3.5),
        Input::Reconciled {
            ticket: first[1],
            outcome: Outcome::Error("boom".into()),
        },
    );
    drain(&mut core);
    core.handle_input(
        at(3.75),
        Input::Reconciled {
            ticket: third[0],
            outcome: Outcome::RequeueAfter(Duration::from_secs(30)),
        },
    );
    drain(&mut core);

    let m = core.metrics();
    assert_eq!(m.reconciles(ResultLabel::Success), 1);
    assert_eq!(m.reconciles(ResultLabel::Error), 1);
    assert_eq!(m.reconciles(ResultLabel::RequeueAfter), 1);
    assert_eq!(m.reconciles(ResultLabel::Requeue), 0);
    assert_eq!(m.reconcile_errors_total, 1);
    assert_eq!(m.workqueue_retries_total, 1);
    assert_eq!(m.active_workers, 0);
    assert_eq!(m.workqueue_unfinished_work_seconds, 0.0);
    assert_eq!(m.workqueue_longest_running_processor_seconds, 0.0);
    assert_eq!(m.workqueue_queue_duration.count(), 3);
    assert!((m.workqueue_queue_duration.sum() - 2.0).abs() < 1e-9);
    // Runs of 2 s, 2.5 s and 0.75 s.
    assert_eq!(m.reconcile_time.count(), 3);
    assert!((m.reconcile_time.sum() - 5.25).abs() < 1e-9);
    assert_eq!(m.workqueue_work_duration.count(), 3);
    let buckets: Vec<(f64, u64)> = m.reconcile_time.buckets().collect();
    assert_eq!(buckets.len(), RECONCILE_TIME_BUCKETS.len());
    let le = |bound: f64| buckets.iter().find(|(b, _)| *b == bound).unwrap().1;
    assert_eq!(le(0.7), 0);
    assert_eq!(le(0.8), 1);
    assert_eq!(le(2.0), 2);
    assert_eq!(le(2.5), 3);
    assert_eq!(le(60.0), 3);
}

#[test]
fn a_key_wanted_again_while_queued_is_one_add() {
    let config = Config::in_process(KeyMap::by_object());
    let mut core: ReconcileLoop<PodView, ObjectKey> =
        ReconcileLoop::new(config, Instant::ZERO).unwrap();
    core.handle_input(Instant::ZERO, Input::Start);
    let stream = drain(&mut core).0.unwrap();
    core.handle_input(
        Instant::ZERO,
        Input::SourceEvent {
            stream,
            event: SourceEvent::Replace(vec![pod("a", 1), pod("b", 1)]),
        },
    );
    let (_, running) = drain(&mut core);
    // b waits; changes to b (queued) and a (running) while a runs.
    for rv in 2..5 {
        for name in ["a", "b"] {
            core.handle_input(
                at(1.0),
                Input::SourceEvent {
                    stream,
                    event: SourceEvent::Upsert(pod(name, rv)),
                },
            );
            drain(&mut core);
        }
    }
    // a, b listed; a wanted again while it ran: one more add, however many changes.
    assert_eq!(core.metrics().workqueue_adds_total, 3);
    core.handle_input(
        at(2.0),
        Input::Reconciled {
            ticket: running[0],
            outcome: Outcome::RequeueAfter(Duration::ZERO),
        },
    );
    drain(&mut core);
    let m = core.metrics();
    assert_eq!(m.reconciles(ResultLabel::Requeue), 1);
    // b dispatched after waiting 2 s since the listing.
    assert!((m.workqueue_queue_duration.sum() - 2.0).abs() < 1e-9);
}

#[test]
fn list_bytes_and_the_cursor_age_follow_the_listing_frames_and_bookmarks() {
    let config = Config::kubernetes(WatchParams::namespaced("ns"), KeyMap::by_object())
        .predicate(Predicate::LabelsChanged);
    let mut core: ReconcileLoop<PodView, ObjectKey> =
        ReconcileLoop::new(config, Instant::ZERO).unwrap();
    core.handle_input(Instant::ZERO, Input::Start);
    let mut list = None;
    let mut watch = None;
    let mut poll = |core: &mut ReconcileLoop<PodView, ObjectKey>| loop {
        match core.poll_output() {
            Output::Command(Command::List { req, .. }) => list = Some(req),
            Output::Command(Command::Watch { stream, .. }) => watch = Some(stream),
            Output::Timeout(_) => return (list, watch),
            _ => {}
        }
    };
    let (req, _) = poll(&mut core);
    assert_eq!(core.metrics().cursor_age_seconds, 0.0);
    // Nothing listed yet: the age counts from the start.
    core.handle_input(at(2.0), Input::Timeout);
    poll(&mut core);
    assert_eq!(core.metrics().cursor_age_seconds, 2.0);
    let body = r#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"10"},"items":[{"metadata":{"name":"a","namespace":"ns","resourceVersion":"5"}}]}"#;
    core.handle_input(
        at(3.0),
        Input::List {
            req: req.unwrap(),
            response: ListResponse::Response {
                status: 200,
                body: body.into(),
            },
        },
    );
    let (_, stream) = poll(&mut core);
    let m = core.metrics();
    assert_eq!(m.list_bytes_total, body.len() as u64);
    assert_eq!(m.cursor_age_seconds, 0.0);
    let stream = stream.unwrap();
    core.handle_input(at(10.0), Input::WatchOpened { stream });
    poll(&mut core);
    assert_eq!(
        core.metrics().cursor_age_seconds,
        7.0,
        "open is no progress"
    );
    let bookmark = r#"{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"12"}}}"#;
    core.handle_input(
        at(70.0),
        Input::WatchLine {
            stream,
            line: bookmark.into(),
        },
    );
    poll(&mut core);
    core.handle_input(at(75.5), Input::Timeout);
    poll(&mut core);
    assert_eq!(core.metrics().cursor_age_seconds, 5.5);
    // A status-only change is filtered by the labels predicate: counted, still cached.
    let modified = r#"{"type":"MODIFIED","object":{"metadata":{"name":"a","namespace":"ns","resourceVersion":"13"},"status":{"phase":"Running"}}}"#;
    core.handle_input(
        at(80.0),
        Input::WatchLine {
            stream,
            line: modified.into(),
        },
    );
    poll(&mut core);
    let m = core.metrics();
    assert_eq!(m.filtered_total, 1);
    assert_eq!(m.cursor_age_seconds, 0.0);
}
