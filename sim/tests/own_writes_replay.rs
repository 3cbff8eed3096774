//! A recorded run that read its own writes replays identically: the trace keeps each
//! reconcile's writes (`Input::ReconciledWrote`: the source and the answered
//! resourceVersion) and the header keeps `read_own_writes`, so the replaying core holds the
//! key exactly where the live one did. The live run is a core driven by hand, recorded as a
//! driver's recorder records it (`reconcile_trace::to_trace`).

use std::time::Duration;

use reconcile_core::pod::PodView;
use reconcile_core::{
    Command, Config, Event, Input, Instant, KeyMap, ListResponse, Outcome, Output, OwnWrite,
    ReconcileLoop, SourceId, Stats, StreamId, Ticket, WatchParams,
};
use reconcile_sim::replay::{ReplayOptions, replay};
use reconcile_sim::trace::{Record, Trace};
use reconcile_sim::trace::{Recorded, header_for, to_trace};

/// A core and everything that crossed its boundary, as a driver's recorder sees it.
struct Live {
    core: ReconcileLoop<PodView, String>,
    records: Vec<(Instant, Recorded<PodView, String>)>,
    now: Instant,
    watch: Option<StreamId>,
    running: Vec<Ticket>,
    held: usize,
    released: usize,
}

impl Live {
    fn new(config: Config<PodView, String>) -> Self {
        let mut live = Live {
            core: ReconcileLoop::new(config, Instant::ZERO).unwrap(),
            records: Vec::new(),
            now: Instant::ZERO,
            watch: None,
            running: Vec::new(),
            held: 0,
            released: 0,
        };
        live.feed(0.0, Input::Start);
        live
    }

    fn feed(&mut self, at: f64, input: Input<PodView>) {
        self.now = Instant::from_duration(Duration::from_secs_f64(at));
        self.records
            .push((self.now, Recorded::Input(input.clone())));
        self.core.handle_input(self.now, input);
        let mut list = None;
        loop {
            match self.core.poll_output() {
                Output::Command(command) => {
                    self.records
                        .push((self.now, Recorded::Command(command.clone())));
                    match command {
                        Command::List { req, .. } => list = Some(req),
                        Command::Watch { stream, .. } => self.watch = Some(stream),
                        Command::Reconcile { ticket, .. } => self.running.push(ticket),
                        _ => {}
                    }
                }
                Output::Event(Event::HeldForOwnWrites { .. }) => self.held += 1,
                Output::Event(Event::OwnWritesObserved { .. }) => self.released += 1,
                Output::Event(_) => {}
                Output::Timeout(_) => break,
            }
        }
        if let Some(req) = list {
            let body = format!(
                r#"{{"kind":"PodList","apiVersion":"v1","metadata":{{"resourceVersion":"10"}},"items":[{}]}}"#,
                pod("p1", 5)
            );
            let response = ListResponse::Response {
                status: 200,
                body: body.into(),
            };
            self.feed(at, Input::List { req, response });
            let stream = self.watch.expect("a WATCH after the LIST");
            self.feed(at, Input::WatchOpened { stream });
        }
    }

    fn frame(&mut self, at: f64, kind: &str, name: &str, rv: u64) {
        let stream = self.watch.expect("an open watch");
        let line = format!(r#"{{"type":"{kind}","object":{}}}"#, pod(name, rv));
        self.feed(
            at,
            Input::WatchLine {
                stream,
                line: line.into(),
            },
        );
    }

    fn finish(&mut self, at: f64, writes: Vec<OwnWrite>) {
        let ticket = self.running.remove(0);
        let outcome = Outcome::Success;
        let input = if writes.is_empty() {
            Input::Reconciled { ticket, outcome }
        } else {
            Input::ReconciledWrote {
                ticket,
                outcome,
                writes,
            }
        };
        self.feed(at, input);
    }
}

fn pod(name: &str, rv: u64) -> String {
    format!(
        r#"{{"metadata":{{"name":"{name}","namespace":"ns","resourceVersion":"{rv}","labels":{{"cell":"a"}}}}}}"#
    )
}

/// The run: the first reconcile of `a` writes p1 (answered at rv 20); p2's frame at rv 15
/// wakes `a`, which is held until p1's echo at rv 20 arrives, then runs.
fn live_run(wait: Option<Duration>) -> (Live, Trace) {
    let config = Config::kubernetes(WatchParams::namespaced("ns"), KeyMap::by_label("cell"))
        .read_own_writes(wait);
    let header = header_for("own writes", &config);
    let mut live = Live::new(config);
    assert_eq!(live.running.len(), 1, "a's first run");
    live.finish(0.1, vec![OwnWrite::new(SourceId::PRIMARY, "20")]);
    live.frame(0.2, "ADDED", "p2", 15);
    live.frame(0.3, "MODIFIED", "p1", 20);
    assert_eq!(live.running.len(), 1, "a's second run, once released");
    live.finish(0.4, Vec::new());
    live.feed(0.5, Input::Stop);
    let trace = to_trace("own-writes.jsonl", header, &live.records);
    // Through the file format: written, then read back.
    let text = trace.to_jsonl();
    let trace = Trace::parse("own-writes.jsonl", &text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    (live, trace)
}

fn replayed(trace: &Trace) -> (Stats, String) {
    let report = replay(trace, &ReplayOptions::default()).expect("a valid header");
    assert!(
        report.violations.is_empty(),
        "{:?}\n{}",
        report.violations,
        report.output
    );
    (report.stats, report.output)
}

#[test]
fn a_recorded_hold_for_own_writes_replays_identically() {
    let (live, trace) = live_run(Some(Duration::from_secs(7)));
    assert_eq!((live.held, live.released), (1, 1), "the live run held once");
    let text = trace.to_jsonl();
    assert!(
        text.contains(r#""writes":[{"resource_version":"20"}]"#),
        "{text}"
    );
    assert!(text.contains(r#""read_own_writes_s":7.0"#), "{text}");
    assert_eq!(
        trace.header.read_own_writes,
        Some(Duration::from_secs(7)),
        "the header keeps the wait"
    );

    let (stats, output) = replayed(&trace);
    let pick = |s: Stats| (s.own_write_holds, s.own_write_timeouts, s.frames);
    assert_eq!(pick(stats), pick(live.core.stats()), "{output}");
    assert_eq!(stats.own_write_holds, 1, "{output}");
    assert!(output.contains("wrote S0@20"), "{output}");
}

#[test]
fn without_its_writes_the_replay_would_not_hold() {
    // The same trace with the writes dropped is what a trace without them replayed as: the
    // key runs on p2's frame, before the echo, so the check above can fail.
    let (live, mut trace) = live_run(Some(Duration::from_secs(7)));
    for entry in &mut trace.entries {
        if let Record::Reconcile { writes, .. } = &mut entry.record {
            writes.clear();
        }
    }
    let (stats, output) = replayed(&trace);
    assert_eq!(live.core.stats().own_write_holds, 1);
    assert_eq!(stats.own_write_holds, 0, "{output}");
}

#[test]
fn the_wait_is_written_only_when_it_is_not_the_default() {
    let (_, trace) = live_run(Some(reconcile_core::DEFAULT_OWN_WRITES_WAIT));
    assert!(!trace.to_jsonl().contains("read_own_writes_s"));
    // Turned off, the live run does not hold, and neither does its replay.
    let (live, trace) = live_run(None);
    assert!(trace.to_jsonl().contains(r#""read_own_writes_s":null"#));
    assert_eq!(trace.header.read_own_writes, None);
    let (stats, output) = replayed(&trace);
    assert_eq!(live.held, 0);
    assert_eq!(stats.own_write_holds, 0, "{output}");
}
