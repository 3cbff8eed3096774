//! Replay mode: answer each command the core emits with the next recorded response for it,
//! in trace order, and report a divergence when the core asks for something the trace
//! cannot answer.

use reconcile_core::pod::PodView;
use reconcile_core::{
    Command, Input, Instant, ListResponse, Object, RequestId, SourceEvent, SourceId, StreamEnd,
    StreamId, Wake,
};

use bytes::Bytes;

use crate::describe;
use std::collections::BTreeMap;

use crate::harness::{Harness, Observation, Render, StepIo, Violation};
use crate::schedule::timeline;
use crate::simulate::{RunError, RunReport};
use crate::trace::{Entry, Fault, Record, RecordedEnd, SourceOp, Trace};

/// Options of a replay.
#[derive(Debug, Clone)]
pub struct ReplayOptions {
    /// How steps are written.
    pub render: Render,
    /// Step budget.
    pub max_steps: u64,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        ReplayOptions {
            render: Render::Text,
            max_steps: 10_000_000,
        }
    }
}

/// The invariant name a divergence is reported under.
pub const DIVERGENCE: &str = "divergence";

#[derive(Default)]
struct Pending {
    list: Option<RequestId>,
    /// Asked for, not yet answered.
    watch: Option<(StreamId, String)>,
    /// Answered 200 and streaming.
    open: Option<StreamId>,
    /// The last stream the core closed itself (its recorded end is then expected and ignored).
    closed_by_core: Option<StreamId>,
    source: Option<StreamId>,
}

struct Replay<'a> {
    trace: &'a Trace,
    h: Harness,
    /// What each source waits for: index 0 the primary (and an in-process source), `n` the
    /// header's `n`th secondary.
    p: Vec<Pending>,
    diverged: bool,
}

/// Replays `trace`, its rendered lines kept in [`RunReport::output`].
///
/// # Errors
/// When the header's settings are out of the core's bounds.
pub fn replay(
    trace: &Trace,
    opts: &ReplayOptions,
) -> Result<RunReport, reconcile_core::ConfigError> {
    match replay_inner(trace, opts, None, false) {
        Ok((report, _)) => Ok(report),
        Err(RunError::Config(e)) => Err(e),
        Err(RunError::Output(_)) => unreachable!("a run without a sink writes nothing"),
    }
}

/// Replays `trace`, writing each rendered line to `sink` as the run goes (see
/// [`crate::simulate::simulate_to`]); [`RunReport::output`] is empty.
///
/// # Errors
/// When the header's settings are out of the core's bounds, or writing fails.
pub fn replay_to(
    trace: &Trace,
    opts: &ReplayOptions,
    sink: Box<dyn std::io::Write>,
) -> Result<RunReport, RunError> {
    replay_inner(trace, opts, Some(sink), false).map(|(report, _)| report)
}

/// What a replay observed, for a comparison against another client fed the same trace
/// (issue 30): the run's report, the core's requests and wakes in step order, and the
/// final cache with each object's resourceVersion.
#[derive(Debug)]
pub struct Observed {
    /// The run, as [`replay`] reports it.
    pub report: RunReport,
    /// The primary source's requests and each step's wakes, in order.
    pub log: Vec<Observation>,
    /// `namespace/name` → resourceVersion of every object cached at the end.
    pub store: BTreeMap<String, Option<String>>,
    /// Each secondary source at the end, in the header's order.
    pub secondaries: Vec<SecondaryObserved>,
}

/// What a secondary source ended with.
#[derive(Debug, Clone, Default)]
pub struct SecondaryObserved {
    /// Every object it holds: its resourceVersion and the parents its key map maps it to.
    pub held: crate::harness::SecondaryHeld,
    /// Its cursor (`None` while it lists).
    pub cursor: Option<String>,
}

/// Replays `trace` as [`replay`] does, recording what the core did ([`Observed`]).
///
/// # Errors
/// When the header's settings are out of the core's bounds.
pub fn replay_observed(
    trace: &Trace,
    opts: &ReplayOptions,
) -> Result<Observed, reconcile_core::ConfigError> {
    match replay_inner(trace, opts, None, true) {
        Ok((report, Some((log, store, secondaries)))) => Ok(Observed {
            report,
            log,
            store,
            secondaries,
        }),
        Ok((_, None)) => unreachable!("an observed replay returns its observations"),
        Err(RunError::Config(e)) => Err(e),
        Err(RunError::Output(_)) => unreachable!("a run without a sink writes nothing"),
    }
}

/// The observation log, the final cache's versions and each secondary's end, of an
/// observed run.
type Observations = (
    Vec<Observation>,
    BTreeMap<String, Option<String>>,
    Vec<SecondaryObserved>,
);

fn replay_inner(
    trace: &Trace,
    opts: &ReplayOptions,
    sink: Option<Box<dyn std::io::Write>>,
    observe: bool,
) -> Result<(RunReport, Option<Observations>), RunError> {
    let mut h = Harness::new(&trace.header, opts.render, opts.max_steps)?;
    if let Some(sink) = sink {
        h.stream_to(sink);
    }
    if observe {
        h.observe();
    }
    let mut r = Replay {
        trace,
        h,
        p: std::iter::repeat_with(Pending::default)
            .take(trace.header.secondaries.len() + 1)
            .collect(),
        diverged: false,
    };
    r.run();
    let observed = observe.then(|| {
        let store =
            r.h.core()
                .store()
                .iter()
                .map(|(k, o, _)| {
                    (
                        k.to_string(),
                        o.object_resource_version().map(str::to_owned),
                    )
                })
                .collect();
        let secondaries = (1..=trace.header.secondaries.len())
            .map(|n| SecondaryObserved {
                held: r.h.secondary_held(n),
                cursor: r
                    .h
                    .core()
                    .secondary_cursor(SourceId::nth(n as u64))
                    .map(str::to_owned),
            })
            .collect();
        (r.h.take_observations(), store, secondaries)
    });
    Ok((RunReport::finish(r.h)?, observed))
}

impl Replay<'_> {
    fn run(&mut self) {
        let io = self.h.start();
        self.handle_io(io);
        for (at, entry) in timeline(&self.trace.entries) {
            // A clock jump goes before the timers due at its instant, as in world mode (where
            // records go first, and a recording writes the jump at the instant it came): a
            // timer it carries past fires at the far side, as it did in the run.
            if matches!(entry.record, Record::Fault(Fault::ClockJump { .. })) {
                self.advance_before(at);
            } else {
                self.advance_to(at);
            }
            self.apply(entry);
            if self.diverged || self.h.exhausted() {
                break;
            }
        }
        if self.h.exhausted() && !self.h.output_failed() {
            self.h.violations.push(Violation {
                at: self.h.now(),
                invariant: "step limit",
                detail: format!(
                    "{} steps: the replay stopped before the end of the trace",
                    self.h.steps()
                ),
            });
            return;
        }
        if self.h.output_failed() {
            return;
        }
        if !self.diverged {
            self.settle();
            let mut pending = Vec::new();
            for p in &self.p {
                if let Some(req) = p.list {
                    pending.push(format!("LIST {req}"));
                }
                if let Some((s, rv)) = &p.watch {
                    pending.push(format!("WATCH {s} rv={rv}"));
                }
                if let Some(s) = p.open {
                    pending.push(format!("open watch {s}"));
                }
            }
            let stats = self.h.core().stats();
            let text = format!(
                "end of trace: {} frames, {} lists, {} watches, {} relists, {} reconciles; waiting on: {}",
                stats.frames,
                stats.lists,
                stats.watches,
                stats.relists,
                stats.reconciles,
                if pending.is_empty() {
                    "nothing".to_owned()
                } else {
                    pending.join(", ")
                }
            );
            self.h.note(&text);
        }
    }

    fn diverge(&mut self, entry: &Entry, why: String) {
        // `file:line: why`, or `file: why` for a generated record (no line 0).
        let detail = crate::trace::at(&self.trace.name, entry.line, &why);
        self.h.note(&format!("DIVERGENCE at {detail}"));
        self.h.violations.push(Violation {
            at: self.h.now(),
            invariant: DIVERGENCE,
            detail,
        });
        self.diverged = true;
    }

    fn handle_io(&mut self, io: StepIo) {
        for command in io.commands {
            match command {
                Command::List { req, source, .. } => {
                    if let Some(p) = self.p.get_mut(source_index(source)) {
                        p.list = Some(req);
                    }
                }
                Command::CancelList { req } => {
                    for p in &mut self.p {
                        if p.list == Some(req) {
                            p.list = None;
                        }
                    }
                }
                Command::Watch {
                    stream,
                    source,
                    resource_version,
                    ..
                } => {
                    if let Some(p) = self.p.get_mut(source_index(source)) {
                        p.watch = Some((stream, resource_version));
                    }
                }
                Command::CloseWatch { stream } => {
                    for p in &mut self.p {
                        let mine = p.open == Some(stream)
                            || p.watch.as_ref().is_some_and(|(s, _)| *s == stream);
                        if p.open == Some(stream) {
                            p.open = None;
                        }
                        if p.watch.as_ref().is_some_and(|(s, _)| *s == stream) {
                            p.watch = None;
                        }
                        if mine {
                            p.closed_by_core = Some(stream);
                        }
                    }
                }
                Command::OpenSource { stream } => self.p[0].source = Some(stream),
                Command::CloseSource { stream } if self.p[0].source == Some(stream) => {
                    self.p[0].source = None;
                }
                // Cancels of what is already gone, reconciles (the harness runs them).
                _ => {}
            }
        }
    }

    /// Runs reconcile completions and the core's timers due up to `at`, then moves to `at`.
    fn advance_to(&mut self, at: Instant) {
        self.advance(at, true);
    }

    /// [`Replay::advance_to`], leaving what is due at `at` itself for after the record.
    fn advance_before(&mut self, at: Instant) {
        self.advance(at, false);
    }

    fn advance(&mut self, at: Instant, inclusive: bool) {
        let due = |t: Instant| t < at || (inclusive && t == at);
        while !self.h.exhausted() {
            let t_done = self.h.next_completion();
            let t_core = self.h.core_deadline().map(|d| d.at);
            match (t_done, t_core) {
                (Some(d), c) if due(d) && c.is_none_or(|c| d <= c) => {
                    self.h.set_now(d);
                    if let Some(io) = self.h.complete_due() {
                        self.handle_io(io);
                    }
                }
                (_, Some(c)) if due(c) => {
                    self.h.set_now(c);
                    let io = self.h.timeout();
                    self.handle_io(io);
                }
                _ => break,
            }
        }
        self.h.set_now(at);
    }

    /// After the last record: finish running reconciles and their retries, but fire no
    /// reflector or resync timer (those would need records the trace does not have).
    fn settle(&mut self) {
        while !self.h.exhausted() {
            let t_done = self.h.next_completion();
            let deadline = self.h.core_deadline();
            let requeue = deadline.filter(|d| d.wake == Wake::Requeue).map(|d| d.at);
            let other = deadline.filter(|d| d.wake != Wake::Requeue).map(|d| d.at);
            let Some(t) = [t_done, requeue].into_iter().flatten().min() else {
                break;
            };
            if other.is_some_and(|o| o < t) {
                break;
            }
            self.h.set_now(t);
            if t_done == Some(t) {
                if let Some(io) = self.h.complete_due() {
                    self.handle_io(io);
                }
            } else {
                let io = self.h.timeout();
                self.handle_io(io);
            }
        }
    }

    /// When the core is waiting out a reflector delay, the record that answers the command
    /// after it is due: move time to that deadline so the command is issued.
    fn meet(&mut self, wake: Wake) {
        if let Some(d) = self.h.core_deadline()
            && d.wake == wake
        {
            self.advance_to(d.at);
        }
    }

    fn what_core_waits_for(&self) -> String {
        let mut parts = Vec::new();
        for p in &self.p {
            if let Some(req) = p.list {
                parts.push(format!("the answer to LIST {req}"));
            }
            if let Some((s, rv)) = &p.watch {
                parts.push(format!("the answer to WATCH {s} from rv={rv}"));
            }
            if let Some(s) = p.open {
                parts.push(format!("frames on watch {s}"));
            }
        }
        if let Some(d) = self.h.core_deadline() {
            parts.push(format!("its {} timer at {}", d.wake, d.at));
        }
        if parts.is_empty() {
            "nothing".into()
        } else {
            parts.join(", ")
        }
    }

    fn apply(&mut self, entry: &Entry) {
        // The parser checked the source against the header.
        let s = usize::try_from(entry.source_index())
            .unwrap_or(0)
            .min(self.p.len() - 1);
        match &entry.record {
            Record::List {
                status,
                body,
                transport_error,
            } => {
                if self.p[s].list.is_none() {
                    self.meet(Wake::ListRetry);
                }
                if self.p[s].list.is_none() {
                    // A streaming list that gathered too long falls back to a LIST.
                    self.meet(Wake::ListDeadline);
                }
                let Some(req) = self.p[s].list.take() else {
                    let waits = self.what_core_waits_for();
                    return self.diverge(
                        entry,
                        format!(
                            "the trace answers a LIST, but the core sent none; it waits for {waits}"
                        ),
                    );
                };
                let response = match transport_error {
                    Some(e) => ListResponse::TransportError(e.clone()),
                    None => ListResponse::Response {
                        status: *status,
                        body: Bytes::copy_from_slice(body.as_bytes()),
                    },
                };
                let text = self.h.label(|| describe::list(req, &response));
                let io = self.h.step(
                    || text,
                    |core, now| core.handle_input(now, Input::List { req, response }),
                );
                self.handle_io(io);
            }
            Record::Watch {
                status,
                body,
                resource_version,
            } => {
                if self.p[s].watch.is_none() {
                    self.meet(Wake::WatchRetry);
                }
                if self.p[s].watch.is_none() {
                    // A streaming list is the listing: asked for again after a relist.
                    self.meet(Wake::ListRetry);
                }
                let Some((stream, asked)) = self.p[s].watch.take() else {
                    let waits = self.what_core_waits_for();
                    return self.diverge(
                        entry,
                        format!("the trace answers a WATCH, but the core opened none; it waits for {waits}"),
                    );
                };
                if let Some(recorded) = resource_version
                    && *recorded != asked
                {
                    return self.diverge(
                        entry,
                        format!("the core watches {stream} from rv={asked}, the trace recorded rv={recorded}"),
                    );
                }
                if *status == 200 {
                    self.p[s].open = Some(stream);
                    let io = self.h.step(
                        || format!("watch {stream} opened"),
                        |core, now| core.handle_input(now, Input::WatchOpened { stream }),
                    );
                    self.handle_io(io);
                } else {
                    let end = StreamEnd::HttpStatus {
                        code: *status,
                        body: body.clone().into_bytes(),
                    };
                    let io = self
                        .h
                        .watch_end(stream, end, || format!("watch {stream} answered {status}"));
                    self.handle_io(io);
                }
            }
            Record::Frame { line } => {
                if self.p[s].open.is_none()
                    && let Some((stream, _)) = self.p[s].watch.take()
                {
                    // A frame with no recorded open: the 200 is implied.
                    self.p[s].open = Some(stream);
                }
                let Some(stream) = self.p[s].open else {
                    let waits = self.what_core_waits_for();
                    return self.diverge(
                        entry,
                        format!("the trace has a watch frame, but no watch is open; the core waits for {waits}"),
                    );
                };
                let line = Bytes::copy_from_slice(line.as_bytes());
                let text = self.h.label(|| describe::frame(stream, &line));
                let io = self.h.step(
                    || text,
                    |core, now| core.handle_input(now, Input::WatchLine { stream, line }),
                );
                self.handle_io(io);
            }
            Record::WatchEnd(end) => {
                let Some(stream) = self.p[s].open.take() else {
                    if self.p[s].closed_by_core.take().is_some() {
                        self.h
                            .note("recorded stream end after the core closed the stream: ignored");
                        return;
                    }
                    let waits = self.what_core_waits_for();
                    return self.diverge(
                        entry,
                        format!(
                            "the trace ends a watch, but none is open; the core waits for {waits}"
                        ),
                    );
                };
                let end = match end {
                    RecordedEnd::Clean => StreamEnd::Clean,
                    RecordedEnd::Transport(e) => StreamEnd::TransportError(e.clone()),
                    RecordedEnd::Status(code, body) => StreamEnd::HttpStatus {
                        code: *code,
                        body: body.clone().into_bytes(),
                    },
                };
                let text = match &end {
                    StreamEnd::Clean => format!("watch {stream} ended"),
                    StreamEnd::TransportError(e) => format!("watch {stream} failed ({e})"),
                    StreamEnd::HttpStatus { code, .. } => format!("watch {stream} answered {code}"),
                };
                let io = self.h.watch_end(stream, end, || text);
                self.handle_io(io);
            }
            Record::Reconcile {
                parent,
                outcome,
                duration,
                writes,
            } => self
                .h
                .script_writing(parent.clone(), outcome.clone(), *duration, writes.clone()),
            Record::Source(op) => {
                if self.p[s].source.is_none() {
                    self.meet(Wake::SourceReopen);
                }
                let Some(stream) = self.p[s].source else {
                    return self.diverge(
                        entry,
                        "the trace has a source event, but no source stream is open".into(),
                    );
                };
                let parse = |o: &str| serde_json::from_str::<PodView>(o).map_err(|e| e.to_string());
                let event = match op {
                    SourceOp::Upsert(o) => parse(o).map(SourceEvent::Upsert),
                    SourceOp::Delete(o) => parse(o).map(SourceEvent::Delete),
                    SourceOp::Replace(objects) => objects
                        .iter()
                        .map(|o| parse(o))
                        .collect::<Result<Vec<_>, _>>()
                        .map(SourceEvent::Replace),
                };
                let event = match event {
                    Ok(e) => e,
                    Err(e) => {
                        return self.diverge(
                            entry,
                            format!("source object does not decode as a pod: {e}"),
                        );
                    }
                };
                let text = match &event {
                    SourceEvent::Upsert(_) | SourceEvent::UpsertShared(_) => {
                        format!("source {stream} upsert")
                    }
                    SourceEvent::Delete(_) | SourceEvent::DeleteShared(_) => {
                        format!("source {stream} delete")
                    }
                    SourceEvent::Replace(o) => {
                        format!("source {stream} replace objects={}", o.len())
                    }
                    SourceEvent::ReplaceShared(o) => {
                        format!("source {stream} replace objects={}", o.len())
                    }
                };
                let io = self.h.step(
                    || text,
                    |core, now| core.handle_input(now, Input::SourceEvent { stream, event }),
                );
                self.handle_io(io);
            }
            Record::SourceCursor { resource_version } => {
                let Some(stream) = self.p[s].source else {
                    return self.diverge(
                        entry,
                        "the trace gives a source cursor, but no source stream is open".into(),
                    );
                };
                let label = format!("source {stream} cursor {resource_version}");
                let resource_version = resource_version.clone();
                let io = self.h.step(
                    || label,
                    |core, now| {
                        core.handle_input(
                            now,
                            Input::SourceCursor {
                                stream,
                                resource_version,
                            },
                        )
                    },
                );
                self.handle_io(io);
            }
            Record::SourceEnd { error } => {
                let Some(stream) = self.p[s].source.take() else {
                    return self.diverge(
                        entry,
                        "the trace ends a source stream, but none is open".into(),
                    );
                };
                let error = error.clone();
                let io = self.h.step(
                    || format!("source {stream} ended"),
                    |core, now| core.handle_input(now, Input::SourceEnd { stream, error }),
                );
                self.handle_io(io);
            }
            Record::Note => {
                if let Some(note) = &entry.note {
                    self.h.note(note);
                }
            }
            Record::Advance { .. } => {}
            Record::Fault(fault) => self.fault(fault),
            Record::ReconcileAll => {
                let io = self.h.reconcile_all();
                self.handle_io(io);
            }
            Record::ReconcileOn { key } => {
                let io = self.h.reconcile_on(key);
                self.handle_io(io);
            }
            Record::Stop => {
                let io = self.h.stop();
                self.handle_io(io);
            }
        }
    }

    /// Replay has no apiserver to compact or restart: stream faults act on the open watch,
    /// reconcile and clock faults act as in world mode, the rest only leave a note.
    fn fault(&mut self, fault: &Fault) {
        self.h.note(&format!("fault: {fault}"));
        let stream = self.p[0].open;
        let line = match fault {
            Fault::GoneStorm { .. } => Some(
                "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"reason\":\"Expired\",\"code\":410}}".to_owned(),
            ),
            Fault::TooLarge { .. } => Some(
                "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"reason\":\"Timeout\",\"code\":504}}".to_owned(),
            ),
            Fault::MalformedFrame { cursor: true } => Some(format!(
                "{{\"type\":\"MODIFIED\",\"object\":{{\"metadata\":{{\"name\":\"corrupt\",\"resourceVersion\":\"{}\",\"labels\":\"not-a-map\"}}}}}}",
                self.h.core().cursor().unwrap_or("0")
            )),
            Fault::MalformedFrame { cursor: false } => Some("{\"type\":\"MODIFIED\",\"object\":".to_owned()),
            _ => None,
        };
        match fault {
            Fault::WatchDrop | Fault::Restart { .. } => {
                if let Some(stream) = self.p[0].open.take() {
                    let io = self.h.watch_end(
                        stream,
                        StreamEnd::TransportError("connection reset (injected)".into()),
                        || format!("watch {stream} failed (injected)"),
                    );
                    self.handle_io(io);
                }
            }
            Fault::SlowReconcile { count, duration } => self.h.slow_reconciles(*count, *duration),
            Fault::FailReconcile { count } => self.h.fail_reconciles(*count),
            Fault::ClockJump { by } => {
                let to = self.h.now() + *by;
                self.h.set_now(to);
            }
            Fault::Compact | Fault::ListFail { .. } | Fault::LoseChange { .. } => {
                self.h.note("no apiserver to act on in replay: no effect");
            }
            Fault::GoneStorm { .. } | Fault::TooLarge { .. } | Fault::MalformedFrame { .. } => {
                if let (Some(stream), Some(line)) = (stream, line) {
                    let line = Bytes::copy_from_slice(line.as_bytes());
                    let text = self.h.label(|| describe::frame(stream, &line));
                    let io = self.h.step(
                        || text,
                        |core, now| core.handle_input(now, Input::WatchLine { stream, line }),
                    );
                    self.handle_io(io);
                }
            }
        }
    }
}

/// The index of `source` among the replay's pendings.
fn source_index(source: reconcile_core::SourceId) -> usize {
    usize::try_from(source.get()).unwrap_or(usize::MAX)
}
