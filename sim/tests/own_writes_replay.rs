//! A recorded run that read its own writes replays identically: the trace keeps each
//! reconcile's writes (`Input::ReconciledWrote`: the source and the answered
//! resourceVersion) and the header keeps `read_own_writes`, so the replaying core holds the
//! key exactly where the live one did. The live run is a core driven by hand, recorded as a
//! driver's recorder records it (`reconcile_trace::to_trace`).

use std::time::Duration;

use reconcile_core::pod::PodView;
use reconcile_core::{
    Command, Config, Event, Input, Instant, KeyMap, ListResponse, Outcome, Output, OwnWrite,
    ReconcileLoop, SourceEvent, SourceId, Stats, StreamId, Ticket, WatchParams,
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
    /// The in-process source's stream, once opened.
    source: Option<StreamId>,
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
            source: None,
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
                        Command::OpenSource { stream } => self.source = Some(stream),
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

/// A shared cache's subscriber: its in-process source gets the shared cache's events, each
/// batch followed by the cache's cursor (`Input::SourceCursor`). Its first run writes p1
/// (answered at rv 20); p2 at rv 15 wakes `a`, which is held until the cursor reaches 20.
/// The trace keeps each cursor as a `source_cursor` record, so the replay holds there too.
#[test]
fn a_subscribers_hold_on_the_shared_cursor_replays_identically() {
    let config =
        Config::in_process(KeyMap::by_label("cell")).read_own_writes(Some(Duration::from_secs(7)));
    let header = header_for("subscriber own writes", &config);
    let mut live = Live::new(config);
    let stream = live.source.expect("the in-process source opened");
    let view = |name: &str, rv: u64| -> PodView { serde_json::from_str(&pod(name, rv)).unwrap() };
    let cursor = |rv: &str| Input::SourceCursor {
        stream,
        resource_version: rv.into(),
    };
    live.feed(
        0.0,
        Input::SourceEvent {
            stream,
            event: SourceEvent::Replace(vec![view("p1", 5)]),
        },
    );
    live.feed(0.0, cursor("10"));
    assert_eq!(live.running.len(), 1, "a's first run");
    live.finish(0.1, vec![OwnWrite::new(SourceId::PRIMARY, "20")]);
    live.feed(
        0.2,
        Input::SourceEvent {
            stream,
            event: SourceEvent::Upsert(view("p2", 15)),
        },
    );
    live.feed(0.2, cursor("15"));
    assert!(live.running.is_empty(), "held");
    live.feed(
        0.3,
        Input::SourceEvent {
            stream,
            event: SourceEvent::Upsert(view("p1", 20)),
        },
    );
    assert!(live.running.is_empty(), "held until the cursor says 20");
    live.feed(0.3, cursor("20"));
    assert_eq!(live.running.len(), 1, "a's second run, once released");
    live.finish(0.4, Vec::new());
    live.feed(0.5, Input::Stop);
    assert_eq!((live.held, live.released), (1, 1), "the live run held once");
    // As the engine's recorder writes it: in-process objects as JSON (`to_trace` leaves
    // them out).
    let mut builder = reconcile_sim::trace::TraceBuilder::default();
    let to_json = |o: &PodView| {
        let rv = o.metadata.resource_version.as_deref()?.parse().ok()?;
        Some(pod(o.metadata.name.as_deref()?, rv))
    };
    for (at, recorded) in &live.records {
        match recorded {
            Recorded::Input(input) => builder.input(*at, input, &to_json),
            Recorded::Command(command) => builder.command(*at, command),
        }
    }
    let mut entries = Vec::new();
    builder.take_all(&mut entries);
    let trace = Trace {
        name: "subscriber.jsonl".into(),
        header,
        entries,
    };
    let text = trace.to_jsonl();
    assert!(
        text.contains(r#"{"record":"source_cursor","t":0.3,"resource_version":"20"}"#),
        "{text}"
    );
    let trace = Trace::parse("subscriber.jsonl", &text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let (stats, output) = replayed(&trace);
    assert_eq!(stats.own_write_holds, 1, "{output}");
    assert_eq!(stats.own_write_timeouts, 0, "{output}");
    assert!(output.contains("cursor 20"), "{output}");

    // Without its cursors the source has none: the write is not waited for.
    let mut trace = trace;
    trace
        .entries
        .retain(|e| !matches!(e.record, Record::SourceCursor { .. }));
    let (stats, output) = replayed(&trace);
    assert_eq!(stats.own_write_holds, 0, "{output}");
}
