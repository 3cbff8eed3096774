//! Priorities: a listing's wakes wait behind live changes, yet never starve. The case of
//! controller-runtime issue #3496: one worker, a whole initial list, and a steady stream of
//! live changes that never lets the queue of normal keys run dry.

use reconcile_core::pod::PodView;
use std::fmt::Write as _;

use reconcile_core::{
    Command, Config, Input, Instant, KeyMap, ObjectKey, Outcome, Output, ReconcileLoop,
    SourceEvent, StepLine, StreamId, Ticket,
};

fn pod(name: &str, rv: u64) -> PodView {
    serde_json::from_str(&format!(
        r#"{{"metadata":{{"name":"{name}","namespace":"ns","resourceVersion":"{rv}"}}}}"#
    ))
    .unwrap()
}

/// Runs the busy scenario; returns the parents in dispatch order.
fn busy(priority: bool, listed: usize, steps: usize) -> Vec<String> {
    busy_logged(priority, listed, steps).0
}

/// Runs the busy scenario; returns the parents in dispatch order and one line per step.
fn busy_logged(priority: bool, listed: usize, steps: usize) -> (Vec<String>, String) {
    let config = Config::in_process(KeyMap::by_object()).priority(priority);
    let mut core: ReconcileLoop<PodView, ObjectKey> =
        ReconcileLoop::new(config, Instant::ZERO).unwrap();
    let mut stream: Option<StreamId> = None;
    let mut running: Option<Ticket> = None;
    let mut order = Vec::new();
    let mut log = String::new();
    let mut drain = |core: &mut ReconcileLoop<PodView, ObjectKey>,
                     running: &mut Option<Ticket>,
                     order: &mut Vec<String>,
                     stream: &mut Option<StreamId>,
                     label: &str| {
        let mut line = StepLine::new(Instant::ZERO, label);
        let next = loop {
            let output = core.poll_output();
            match &output {
                Output::Command(Command::OpenSource { stream: s }) => *stream = Some(*s),
                Output::Command(Command::Reconcile { ticket, parent, .. }) => {
                    *running = Some(*ticket);
                    order.push(parent.name().to_owned());
                }
                Output::Timeout(deadline) => break *deadline,
                _ => {}
            }
            line.push(&output);
        };
        writeln!(log, "{}", line.finish(next)).unwrap();
    };
    core.handle_input(Instant::ZERO, Input::Start);
    drain(&mut core, &mut running, &mut order, &mut stream, "start");
    let s = stream.unwrap();
    let initial = (0..listed)
        .map(|i| pod(&format!("listed-{i:02}"), 1))
        .collect();
    core.handle_input(
        Instant::ZERO,
        Input::SourceEvent {
            stream: s,
            event: SourceEvent::Replace(initial),
        },
    );
    drain(
        &mut core,
        &mut running,
        &mut order,
        &mut stream,
        &format!("replace {listed} listed"),
    );
    for step in 0..steps {
        // A live change to one of three hot objects before every completion: normal keys
        // never run out.
        let name = format!("hot-{}", step % 3);
        let hot = pod(&name, 2 + step as u64);
        core.handle_input(
            Instant::ZERO,
            Input::SourceEvent {
                stream: s,
                event: SourceEvent::Upsert(hot),
            },
        );
        let ticket = running.take().expect("one reconcile always runs");
        core.handle_input(
            Instant::ZERO,
            Input::Reconciled {
                ticket,
                outcome: Outcome::Success,
            },
        );
        drain(
            &mut core,
            &mut running,
            &mut order,
            &mut stream,
            &format!("upsert {name}, reconciled {ticket} ok"),
        );
    }
    (order, log)
}

#[test]
fn a_steady_stream_of_live_changes_goes_first_and_starves_no_listed_object() {
    let listed = 20;
    let order = busy(true, listed, 200);
    // Live changes go first: the first hot object runs right after the first listed one.
    assert_eq!(order[1], "hot-0", "{order:?}");
    // And every listed object runs within 4 dispatches per listed object ahead of it.
    for i in 0..listed {
        let name = format!("listed-{i:02}");
        let at = order.iter().position(|p| *p == name).unwrap_or(usize::MAX);
        assert!(at <= 4 * (i + 1), "{name} dispatched at {at}: {order:?}");
    }
}

#[test]
fn without_priorities_the_queue_is_first_in_first_out() {
    let order = busy(false, 20, 40);
    let listed: Vec<&String> = order.iter().take(20).collect();
    assert!(
        listed.iter().all(|p| p.starts_with("listed-")),
        "the whole list before any live change: {order:?}"
    );
}

#[test]
fn four_listed_objects_among_three_hot_ones_step_by_step() {
    // Each step: a live change, then the running reconcile's success. Low keys (listed-*)
    // take every fourth dispatch while live ones wait.
    let (order, log) = busy_logged(true, 4, 16);
    assert!(order.iter().filter(|p| p.starts_with("listed-")).count() == 4);
    insta::assert_snapshot!(log);
}
