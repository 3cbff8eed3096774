//! The discrete-event loop of world mode: at each step the earliest of (trace records,
//! apiserver deliveries, reconcile completions, the core's deadline) happens, in that fixed
//! order on ties. Records build the world; the core's commands are answered from it.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::time::Duration;

use serde_json::Value;

use reconcile_core::pod::PodView;
use reconcile_core::{
    Command, Input, Instant, ListResponse, Object, ParentsBy, SourceEvent, SourceId, StreamEnd,
    StreamId,
};

use crate::apiserver::world::{Frame, ListAnswer, WatchAnswer, World};
use crate::describe;
use crate::harness::{Harness, StepIo, Violation};
use crate::meta_view::MetaView;
use crate::schedule::timeline;
use crate::simulate::options::{
    INITIAL_EVENT_DELAY, JSON_ANSWER_EVERY, LARGE_LIST, MAX_AGENDA, MAX_SPAN, PAGE_DELAY,
    SimOptions, StreamingLists,
};
use crate::simulate::report::{RunError, RunReport};
use crate::simulate::validate::list_items;
use crate::trace::{Entry, Record, SourceOp, Trace};

#[derive(Debug)]
pub(super) enum Action {
    List(reconcile_core::RequestId),
    WatchOpen(StreamId, String),
    /// A streaming list (`sendInitialEvents=true`) to answer.
    WatchList(StreamId),
    Frame(StreamId, Frame),
    End(StreamId, StreamEnd, &'static str),
    Timeout(StreamId),
    Bookmark(StreamId),
    SourceOpen(StreamId),
    SourceEvent(StreamId, SourceOp),
}

pub(super) struct Sim<'a> {
    pub(super) trace: &'a Trace,
    pub(super) opts: &'a SimOptions,
    pub(super) h: Harness,
    /// One simulated resource per source, `S0` (the primary) first: each with its own
    /// versions, history, compaction and faults.
    pub(super) worlds: Vec<World>,
    /// How each secondary source maps its objects to parents (`S1` first).
    pub(super) parents_by: Vec<ParentsBy>,
    /// The source of each live LIST and WATCH.
    pub(super) list_source: BTreeMap<reconcile_core::RequestId, usize>,
    pub(super) stream_source: BTreeMap<StreamId, usize>,
    pub(super) agenda: BTreeMap<(Instant, u64), Action>,
    pub(super) seq: u64,
    /// Streams the core asked for and has not closed or seen end.
    pub(super) alive: BTreeSet<StreamId>,
    /// Streams answered 200 and streaming.
    pub(super) open: BTreeSet<StreamId>,
    /// The open streams by source, so a change is broadcast to its own source's watches
    /// without looking at every other source's ([`Sim::mark_open`], [`Sim::mark_closed`]).
    open_by_source: BTreeMap<usize, BTreeSet<StreamId>>,
    pub(super) cancelled_lists: BTreeSet<reconcile_core::RequestId>,
    /// Streaming lists whose initial events are still being sent: until when. Live changes
    /// queue behind them, as the apiserver sends them after the end bookmark.
    pub(super) initial_until: BTreeMap<StreamId, Instant>,
    /// Streams of a protobuf world answered in JSON ([`JSON_ANSWER_EVERY`]).
    pub(super) json_streams: BTreeSet<StreamId>,
    /// LISTs and WATCHes a protobuf world has answered.
    pub(super) protobuf_requests: u64,
    /// The page each LIST in flight asked for (`limit`, `continue`), when it asked for one.
    pub(super) list_pages: BTreeMap<reconcile_core::RequestId, (Option<u32>, Option<String>)>,
    pub(super) source: Option<StreamId>,
    pub(super) offset: Duration,
    pub(super) parents_seen: BTreeSet<String>,
    /// Changes still to be lost (the `lose_change` fault).
    pub(super) lose: u32,
    /// When each parent's membership, or any of its related objects, last changed in the
    /// world.
    pub(super) membership_changed: BTreeMap<String, Instant>,
}

/// The resource a secondary source watches, as a world: the settings of `base` (the
/// header without its secondaries, so that each copy costs the same however many sources
/// there are) with the source's namespace and selector.
fn secondary_header(
    base: &crate::trace::Header,
    params: &reconcile_core::WatchParams,
) -> crate::trace::Header {
    debug_assert!(base.secondaries.is_empty(), "copied once per source");
    crate::trace::Header {
        namespace: params.namespace.clone(),
        label_selector: params.label_selector.clone(),
        timeout_seconds: params.timeout_seconds,
        // Secondaries are decoded as metadata: on protobuf, asked for (and served) as
        // `PartialObjectMetadata`.
        wire_format: params.wire_format,
        // The header's kind is the primary's.
        kind: None,
        ..base.clone()
    }
}

pub(super) fn simulate_inner(
    trace: &Trace,
    opts: &SimOptions,
    sink: Option<Box<dyn std::io::Write>>,
) -> Result<RunReport, RunError> {
    simulate_recorded_inner(trace, opts, sink, false).map(|(report, _)| report)
}

/// [`simulate_inner`], with the run recorded as trace entries when `record` is set.
pub(super) fn simulate_recorded_inner(
    trace: &Trace,
    opts: &SimOptions,
    sink: Option<Box<dyn std::io::Write>>,
    record: bool,
) -> Result<(RunReport, Vec<crate::trace::Entry>), RunError> {
    let config = if opts.list_page_size.is_none() && opts.streaming_lists.is_none() {
        crate::harness::config(&trace.header)?
    } else {
        let mut header = trace.header.clone();
        let streaming = opts.streaming_lists.is_some();
        for s in &mut header.secondaries {
            s.params.list_page_size = opts.list_page_size;
            if streaming {
                s.params.initial_list = reconcile_core::InitialListStrategy::StreamingList;
            }
        }
        header.streaming_lists |= streaming;
        let mut config = crate::harness::config(&header)?;
        if let reconcile_core::SourceConfig::Kubernetes(params) = &mut config.source
            && opts.list_page_size.is_some()
        {
            params.list_page_size = opts.list_page_size;
        }
        config
    }
    .priority(opts.priority);
    let mut h = Harness::with_config(config, &trace.header, opts.render, opts.max_steps)?;
    if let Some(in_a_row) = opts.starvation {
        h.check_starvation(&trace.header, in_a_row);
    }
    h.set_default_duration(opts.reconcile_duration);
    h.check_cursors();
    if let Some(sink) = sink {
        h.stream_to(sink);
    }
    if record {
        h.record();
    }
    if let Some(from) = opts.lose_reconciles_from {
        h.lose_dispatches_from(from);
    }
    let base = crate::trace::Header {
        secondaries: Vec::new(),
        ..trace.header.clone()
    };
    let mut sim =
        Sim {
            trace,
            opts,
            h,
            worlds: std::iter::once(World::new(&trace.header))
                .chain(
                    trace.header.secondaries.iter().map(|s| {
                        World::new(&secondary_header(&base, &s.params)).serving_metadata()
                    }),
                )
                .collect(),
            parents_by: trace
                .header
                .secondaries
                .iter()
                .map(|s| s.parents_by.clone())
                .collect(),
            list_source: BTreeMap::new(),
            stream_source: BTreeMap::new(),
            agenda: BTreeMap::new(),
            seq: 0,
            alive: BTreeSet::new(),
            open: BTreeSet::new(),
            open_by_source: BTreeMap::new(),
            cancelled_lists: BTreeSet::new(),
            list_pages: BTreeMap::new(),
            initial_until: BTreeMap::new(),
            json_streams: BTreeSet::new(),
            protobuf_requests: 0,
            source: None,
            offset: Duration::ZERO,
            parents_seen: BTreeSet::new(),
            lose: 0,
            membership_changed: BTreeMap::new(),
        };
    if opts.streaming_lists == Some(StreamingLists::Refused) {
        for world in &mut sim.worlds {
            world.refuse_streaming_lists(true);
        }
    }
    sim.run();
    let entries = sim.h.take_recording();
    Ok((RunReport::finish(sim.h)?, entries))
}

impl Sim<'_> {
    pub(super) fn schedule(&mut self, at: Instant, action: Action) {
        self.seq += 1;
        self.agenda.insert((at, self.seq), action);
    }

    fn run(&mut self) {
        let mut records = timeline(&self.trace.entries);
        records.extend(
            self.opts
                .faults
                .iter()
                .map(|e| (e.at.unwrap_or(Instant::ZERO), e)),
        );
        // Stable: flag faults go after trace records at the same instant.
        records.sort_by_key(|(at, _)| *at);
        let last = records.last().map_or(Instant::ZERO, |(at, _)| *at);
        // Records at time zero are the world before the controller starts.
        let mut next = 0;
        while let Some((at, entry)) = records.get(next)
            && *at == Instant::ZERO
            && !matches!(
                entry.record,
                Record::Stop | Record::Fault(_) | Record::SourceEnd { .. }
            )
        {
            self.apply(entry);
            next += 1;
        }
        let io = self.h.start();
        self.handle_io(io);
        loop {
            if self.h.output_failed() {
                return;
            }
            if self.h.exhausted() {
                self.violation(
                    "step limit",
                    format!("{} steps without quiescence (livelock?)", self.h.steps()),
                );
                break;
            }
            if self.agenda.len() > MAX_AGENDA {
                self.violation(
                    "queue unbounded",
                    format!("{} apiserver deliveries queued", self.agenda.len()),
                );
                break;
            }
            let horizon = last + self.offset + self.opts.settle;
            let t_agenda = self.agenda.first_key_value().map(|((t, _), _)| *t);
            let t_done = self.h.next_completion();
            let t_rec = records.get(next).map(|(t, _)| *t + self.offset);
            let t_core = self.h.core_deadline().map(|d| d.at);
            let Some(t) = [t_agenda, t_done, t_rec, t_core]
                .into_iter()
                .flatten()
                .min()
            else {
                break;
            };
            if t > horizon && t_rec.is_none() {
                break;
            }
            if t > Instant::from_duration(MAX_SPAN) + self.offset {
                self.violation(
                    "simulated time past the horizon",
                    format!(
                        "the run reached {t}, past the {} s world mode simulates",
                        MAX_SPAN.as_secs()
                    ),
                );
                break;
            }
            self.h.set_now(t);
            let now = self.h.now();
            if t_rec.is_some_and(|t| t <= now) {
                let entry = records[next].1;
                next += 1;
                self.apply(entry);
            } else if t_agenda.is_some_and(|t| t <= now) {
                if let Some((_, action)) = self.agenda.pop_first() {
                    self.act(action);
                }
            } else if t_done.is_some_and(|t| t <= now) {
                if let Some(io) = self.h.complete_due() {
                    self.handle_io(io);
                }
            } else {
                let io = self.h.timeout();
                self.handle_io(io);
            }
        }
        if self.opts.check {
            self.check_quiescent();
        }
        let stats = self.h.core().stats();
        let summary = format!(
            "end: {} steps, {} frames, {} lists, {} watches, {} relists, {} reconciles ({} failed), world rv={}, {} objects in store",
            self.h.steps(),
            stats.frames,
            stats.lists,
            stats.watches,
            stats.relists,
            stats.reconciles,
            stats.reconcile_errors,
            self.worlds[0].rv(),
            self.h.core().store().len()
        );
        let mut summary = summary;
        for (n, world) in self.worlds.iter().enumerate().skip(1) {
            let held = self
                .h
                .core()
                .secondary_objects(SourceId::nth(n as u64))
                .map_or(0, |r| r.objects.len());
            let _ = write!(
                summary,
                "; S{n}: world rv={}, {held} objects held",
                world.rv()
            );
        }
        self.h.note(&summary);
    }

    pub(super) fn violation(&mut self, invariant: &'static str, detail: String) {
        self.h.violations.push(Violation {
            at: self.h.now(),
            invariant,
            detail,
        });
    }

    fn handle_io(&mut self, io: StepIo) {
        let now = self.h.now();
        for command in io.commands {
            match command {
                Command::List {
                    req,
                    source,
                    limit,
                    continue_token,
                    ..
                } => {
                    self.list_source.insert(req, source_index(source));
                    let at = if continue_token.is_some() {
                        now + PAGE_DELAY
                    } else {
                        now
                    };
                    if limit.is_some() || continue_token.is_some() {
                        self.list_pages.insert(req, (limit, continue_token));
                    }
                    self.schedule(at, Action::List(req));
                }
                Command::CancelList { req } => {
                    self.cancelled_lists.insert(req);
                }
                Command::Watch {
                    stream,
                    source,
                    resource_version,
                    send_initial_events,
                    ..
                } => {
                    self.alive.insert(stream);
                    self.stream_source.insert(stream, source_index(source));
                    let action = if send_initial_events {
                        Action::WatchList(stream)
                    } else {
                        Action::WatchOpen(stream, resource_version)
                    };
                    self.schedule(now, action);
                }
                Command::CloseWatch { stream } => {
                    self.alive.remove(&stream);
                    self.mark_closed(stream);
                    self.json_streams.remove(&stream);
                    self.json_streams.remove(&stream);
                    self.stream_source.remove(&stream);
                    self.initial_until.remove(&stream);
                }
                Command::OpenSource { stream } => {
                    self.source = Some(stream);
                    self.schedule(now, Action::SourceOpen(stream));
                }
                Command::CloseSource { stream } if self.source == Some(stream) => {
                    self.source = None;
                }
                // Closes of what is already gone, reconciles (the harness runs them).
                _ => {}
            }
        }
    }

    fn end_stream(&mut self, stream: StreamId, end: StreamEnd, why: &'static str) {
        self.initial_until.remove(&stream);
        self.alive.remove(&stream);
        self.mark_closed(stream);
        self.json_streams.remove(&stream);
        self.stream_source.remove(&stream);
        let rendering = self.h.rendering();
        let io = self.h.watch_end(stream, end.clone(), || {
            if rendering {
                match &end {
                    StreamEnd::Clean => format!("watch {stream} ended ({why})"),
                    StreamEnd::TransportError(e) => format!("watch {stream} failed ({e})"),
                    StreamEnd::HttpStatus { code, .. } => format!("watch {stream} answered {code}"),
                }
            } else {
                String::new()
            }
        });
        self.handle_io(io);
    }

    /// Whether this LIST or WATCH of `source` is answered in JSON: always, when its world
    /// does not serve protobuf; otherwise every [`JSON_ANSWER_EVERY`]-th request.
    fn answer_in_json(&mut self, source: usize, what: &'static str) -> bool {
        if !self.worlds[source].serves_protobuf() {
            return true;
        }
        self.protobuf_requests += 1;
        let json = self.protobuf_requests.is_multiple_of(JSON_ANSWER_EVERY);
        self.h.count(if json {
            "world: protobuf asked, answered in JSON"
        } else {
            what
        });
        if !json && self.worlds[source].serves_metadata() {
            self.h
                .count("world: protobuf metadata (PartialObjectMetadata)");
        }
        json
    }

    /// Answers the primary's unpaged LIST of a large world (a body over [`LARGE_LIST`]
    /// bytes, in JSON, the run not recorded) by feeding each piece of its body to the core's
    /// `ListDecoder` as it is written, as a driver decodes a body while it streams in: the
    /// body is never joined, so the LIST costs no second copy of every object's text
    /// (issue 31: world-mode memory within 3× the LIST's bytes). The step reads as the
    /// joined body's would. Returns false, having done nothing, for any other LIST.
    fn list_large(&mut self, req: reconcile_core::RequestId, source: usize, json: bool) -> bool {
        let world = &self.worlds[source];
        if source != 0
            || self.h.recording()
            || (!json && world.serves_protobuf())
            || world.list_json_len() <= LARGE_LIST
        {
            return false;
        }
        let now = self.h.now();
        let mut decoder = reconcile_core::list::ListDecoder::<PodView>::new();
        let mut decoded = Ok(());
        let world = &mut self.worlds[source];
        let items = world.list_in_pieces(now, |piece| {
            if decoded.is_ok() {
                decoded = decoder.push(piece.as_bytes());
            }
        });
        let items = match items {
            Ok(items) => items,
            Err(failed) => {
                let response = list_response(failed, json);
                let text = self.h.label(|| describe::list(req, &response));
                let io = self.h.step_input(|| text, Input::List { req, response });
                self.handle_io(io);
                return true;
            }
        };
        let rv = world.rv().to_string();
        self.h.served_rv(SourceId::nth(source as u64), &rv);
        let list = decoded.and_then(|()| decoder.finish());
        let text = self.h.label(|| describe::list_ok(req, items, &rv));
        let io = self.h.step_input(
            || text,
            Input::List {
                req,
                response: ListResponse::Decoded(list),
            },
        );
        self.handle_io(io);
        true
    }

    /// The source (index into `worlds`) a stream belongs to.
    pub(super) fn source_of(&self, stream: StreamId) -> usize {
        self.stream_source.get(&stream).copied().unwrap_or(0)
    }

    /// `stream` is open; its source is known from its `OpenWatch` until it is closed.
    fn mark_open(&mut self, stream: StreamId) {
        self.open.insert(stream);
        let source = self.source_of(stream);
        self.open_by_source
            .entry(source)
            .or_default()
            .insert(stream);
    }

    /// `stream` is no longer open (called before its source is forgotten).
    fn mark_closed(&mut self, stream: StreamId) {
        if !self.open.remove(&stream) {
            return;
        }
        let source = self.source_of(stream);
        if let Some(streams) = self.open_by_source.get_mut(&source) {
            streams.remove(&stream);
            if streams.is_empty() {
                self.open_by_source.remove(&source);
            }
        }
    }

    /// The open streams of the given sources, in stream order.
    pub(super) fn open_of(&self, sources: &[usize]) -> Vec<StreamId> {
        let streams: BTreeSet<StreamId> = sources
            .iter()
            .filter_map(|s| self.open_by_source.get(s))
            .flatten()
            .copied()
            .collect();
        streams.into_iter().collect()
    }

    fn deliver(&mut self, stream: StreamId, frame: &Frame) {
        if let Some(rv) = frame.rv {
            let source = SourceId::nth(self.source_of(stream) as u64);
            self.h.served_rv(source, &rv.to_string());
        }
        let line = frame.bytes(self.json_streams.contains(&stream));
        let text = self.h.label(|| describe::frame(stream, &line));
        let source = self.source_of(stream);
        let before = self.secondary_view(source);
        let io = self
            .h
            .step_input(|| text, Input::WatchLine { stream, line });
        self.observe_secondary(source, before);
        self.handle_io(io);
    }

    /// What secondary source `source` holds, per object: its version and the parents it
    /// wakes; `None` for the primary (whose changes the core's change log reports).
    fn secondary_view(&self, source: usize) -> Option<BTreeMap<String, (String, Vec<String>)>> {
        if source == 0 {
            return None;
        }
        let held = self
            .h
            .core()
            .secondary_objects(SourceId::nth(source as u64))
            .and_then(|r| r.downcast::<MetaView>())
            .unwrap_or_default();
        Some(
            held.iter()
                .map(|o| {
                    let rv = o.object_resource_version().unwrap_or("").to_owned();
                    (key(&**o), (rv, parents_by(&self.parents_by[source - 1], o)))
                })
                .collect(),
        )
    }

    /// Marks, as observed by the core in this step, every parent of an object that joined,
    /// left or changed in secondary source `source` since `before`.
    fn observe_secondary(
        &mut self,
        source: usize,
        before: Option<BTreeMap<String, (String, Vec<String>)>>,
    ) {
        let (Some(before), Some(after)) = (before, self.secondary_view(source)) else {
            return;
        };
        let mut woken = BTreeSet::new();
        for (key, old) in &before {
            if after.get(key) != Some(old) {
                woken.extend(old.1.iter().cloned());
                if let Some(new) = after.get(key) {
                    woken.extend(new.1.iter().cloned());
                }
            }
        }
        for (key, new) in &after {
            if !before.contains_key(key) {
                woken.extend(new.1.iter().cloned());
            }
        }
        for parent in woken {
            self.h.observed(parent);
        }
    }

    fn act(&mut self, action: Action) {
        let now = self.h.now();
        match action {
            Action::List(req) => {
                let source = self.list_source.remove(&req).unwrap_or(0);
                let page = self.list_pages.remove(&req);
                if self.cancelled_lists.remove(&req) {
                    return;
                }
                let json = self.answer_in_json(source, "world: protobuf LIST");
                if page.is_none() && self.list_large(req, source, json) {
                    return;
                }
                let world = &mut self.worlds[source];
                let answer = match page {
                    Some((limit, continue_token)) => {
                        let (answer, at) = world.list_page(now, limit, continue_token.as_deref());
                        if continue_token.is_some() {
                            self.h.count(match &answer {
                                ListAnswer::Response(410, _) => "list page: continue expired (410)",
                                _ => "list page (continue)",
                            });
                        }
                        if let Some(at) = at {
                            self.h
                                .served_rv(SourceId::nth(source as u64), &at.to_string());
                        }
                        answer
                    }
                    None => {
                        let answer = world.list(now);
                        if let ListAnswer::Response(200, _) = &answer {
                            let rv = world.rv().to_string();
                            self.h.served_rv(SourceId::nth(source as u64), &rv);
                        }
                        answer
                    }
                };
                let response = list_response(answer, json);
                // A driver streams a 200 body through the core's `ListDecoder`: half the
                // bodies (by length, so that no draw moves the seeded run) take that path, in
                // chunks whose size also follows the length, and must act as the whole body.
                // A secondary's objects are decoded by the source itself, from the raw body.
                let streamed = match &response {
                    ListResponse::Response { status: 200, body }
                        if source == 0 && body.len() % 2 == 0 =>
                    {
                        Some(decode_in_chunks(body, 1 + body.len() % 997))
                    }
                    _ => None,
                };
                let text = self.h.label(|| describe::list(req, &response));
                let before = self.secondary_view(source);
                let io = match streamed {
                    // Fed decoded, recorded as the body it was decoded from (a recording
                    // that dropped it would lose every LIST answer whose body has an even
                    // length).
                    Some(list) if self.h.recording() => self.h.step_input_recorded_as(
                        || text,
                        Input::List {
                            req,
                            response: ListResponse::Decoded(list),
                        },
                        &Input::List { req, response },
                    ),
                    Some(list) => self.h.step_input(
                        || text,
                        Input::List {
                            req,
                            response: ListResponse::Decoded(list),
                        },
                    ),
                    None => self.h.step_input(|| text, Input::List { req, response }),
                };
                self.observe_secondary(source, before);
                self.handle_io(io);
            }
            Action::WatchOpen(stream, cursor) => {
                if !self.alive.contains(&stream) {
                    return;
                }
                let source = self.source_of(stream);
                let json = self.answer_in_json(source, "world: protobuf WATCH");
                if json {
                    self.json_streams.insert(stream);
                }
                match self.worlds[source].watch(now, &cursor) {
                    WatchAnswer::Open(frames) => {
                        if cursor.is_empty() || cursor == "0" {
                            self.h.count("synthetic ADDED (no version)");
                        }
                        self.opened(stream);
                        for frame in frames {
                            self.schedule(now, Action::Frame(stream, frame));
                        }
                    }
                    WatchAnswer::GoneFrame(frame) => {
                        self.h.count("world: 410 as ERROR frame");
                        self.opened(stream);
                        self.schedule(now, Action::Frame(stream, frame));
                        self.schedule(now, Action::End(stream, StreamEnd::Clean, "after ERROR"));
                    }
                    WatchAnswer::Status(code, body) => {
                        self.h.count(match code {
                            410 => "world: 410 as HTTP status",
                            504 => "world: 504 too large",
                            _ => "world: other WATCH status",
                        });
                        self.end_stream(
                            stream,
                            StreamEnd::HttpStatus {
                                code,
                                body: body.bytes(json).to_vec(),
                            },
                            "status",
                        );
                    }
                    WatchAnswer::Transport(e) => {
                        self.end_stream(stream, StreamEnd::TransportError(e), "transport");
                    }
                }
            }
            Action::WatchList(stream) => {
                if !self.alive.contains(&stream) {
                    return;
                }
                let source = self.source_of(stream);
                let json = self.answer_in_json(source, "world: protobuf streaming list");
                if json {
                    self.json_streams.insert(stream);
                }
                match self.worlds[source].watch_list(now) {
                    WatchAnswer::Open(frames) => {
                        self.h.count("world: streaming list served");
                        self.opened(stream);
                        let mut at = now;
                        for frame in frames {
                            at = at + INITIAL_EVENT_DELAY;
                            self.schedule(at, Action::Frame(stream, frame));
                        }
                        self.initial_until.insert(stream, at);
                    }
                    WatchAnswer::Status(code, body) => {
                        self.h.count("world: streaming list refused (422)");
                        let end = StreamEnd::HttpStatus {
                            code,
                            body: body.bytes(json).to_vec(),
                        };
                        self.end_stream(stream, end, "status");
                    }
                    WatchAnswer::GoneFrame(frame) => {
                        self.opened(stream);
                        self.schedule(now, Action::Frame(stream, frame));
                        self.schedule(now, Action::End(stream, StreamEnd::Clean, "after ERROR"));
                    }
                    WatchAnswer::Transport(e) => {
                        self.end_stream(stream, StreamEnd::TransportError(e), "transport");
                    }
                }
            }
            Action::Frame(stream, frame) => {
                if self.open.contains(&stream) {
                    if self.initial_until.get(&stream).is_some_and(|t| *t <= now)
                        && frame.is_initial_events_end()
                    {
                        self.initial_until.remove(&stream);
                    }
                    self.deliver(stream, &frame);
                }
            }
            Action::End(stream, end, why) => {
                if self.open.contains(&stream) {
                    self.end_stream(stream, end, why);
                }
            }
            Action::Timeout(stream) => {
                if self.open.contains(&stream) {
                    self.h.count("watch timeoutSeconds -> rewatch");
                    self.end_stream(stream, StreamEnd::Clean, "timeoutSeconds");
                }
            }
            Action::Bookmark(stream) => {
                if self.open.contains(&stream) {
                    let pending = self
                        .agenda
                        .values()
                        .filter_map(|a| match a {
                            Action::Frame(s, f) if *s == stream => f.rv,
                            _ => None,
                        })
                        .min();
                    let frame = self.worlds[self.source_of(stream)].bookmark(pending);
                    self.deliver(stream, &frame);
                    if let Some(interval) = self.trace.header.bookmark_interval {
                        self.schedule(now + interval, Action::Bookmark(stream));
                    }
                }
            }
            Action::SourceOpen(stream) => {
                if self.source != Some(stream) {
                    return;
                }
                let objects = self.worlds[0].snapshot();
                self.source_event(stream, SourceOp::Replace(objects));
            }
            Action::SourceEvent(stream, op) => {
                if self.source == Some(stream) {
                    self.source_event(stream, op);
                }
            }
        }
    }

    fn opened(&mut self, stream: StreamId) {
        let now = self.h.now();
        self.mark_open(stream);
        let io = self.h.step_input(
            || format!("watch {stream} opened"),
            Input::WatchOpened { stream },
        );
        self.handle_io(io);
        let timeout_seconds = match self.source_of(stream) {
            0 => self.trace.header.timeout_seconds,
            n => self.trace.header.secondaries[n - 1].params.timeout_seconds,
        };
        let timeout = Duration::from_secs(u64::from(timeout_seconds));
        self.schedule(now + timeout, Action::Timeout(stream));
        if let Some(interval) = self.trace.header.bookmark_interval
            && interval < timeout
        {
            self.schedule(now + interval, Action::Bookmark(stream));
        }
    }

    fn source_event(&mut self, stream: StreamId, op: SourceOp) {
        let parse = |json: &str| serde_json::from_str::<PodView>(json).ok();
        let (what, event) = match &op {
            SourceOp::Upsert(o) => ("upsert", parse(o).map(SourceEvent::Upsert)),
            SourceOp::Delete(o) => ("delete", parse(o).map(SourceEvent::Delete)),
            SourceOp::Replace(objects) => (
                "replace",
                objects
                    .iter()
                    .map(|o| parse(o))
                    .collect::<Option<Vec<_>>>()
                    .map(SourceEvent::Replace),
            ),
        };
        let Some(event) = event else {
            self.h.note(&format!(
                "source {what}: an object does not decode as a pod; not sent"
            ));
            return;
        };
        let describe = || match &event {
            SourceEvent::Upsert(p) => format!("source {stream} upsert {}", key(p)),
            SourceEvent::Delete(p) => format!("source {stream} delete {}", key(p)),
            SourceEvent::Replace(ps) => format!("source {stream} replace objects={}", ps.len()),
            SourceEvent::UpsertShared(p) => format!("source {stream} upsert {}", key(&**p)),
            SourceEvent::DeleteShared(p) => format!("source {stream} delete {}", key(&**p)),
            SourceEvent::ReplaceShared(ps) => {
                format!("source {stream} replace objects={}", ps.len())
            }
        };
        let text = if self.h.rendering() {
            describe()
        } else {
            String::new()
        };
        let io = self
            .h
            .step_input(|| text, Input::SourceEvent { stream, event });
        self.handle_io(io);
    }

    /// Every open stream of `source` gets the frame for its world's last change.
    fn broadcast_last_change(&mut self, source: usize) {
        let now = self.h.now();
        let open = self.open_of(&[source]);
        if self.lose > 0 && !open.is_empty() {
            self.lose -= 1;
            self.h.count("world: change lost (injected bug)");
            return;
        }
        if let Some(frame) = self.worlds[source].frames_for_last_change() {
            for stream in open {
                let at = self
                    .initial_until
                    .get(&stream)
                    .map_or(now, |until| (*until).max(now));
                self.schedule(at, Action::Frame(stream, frame.clone()));
            }
        }
    }

    /// The parents the object under `object_key` in `source`'s world belongs to, as the core
    /// maps it: the primary's key map, a secondary's owner references (a custom map wakes
    /// nothing, as in a replay).
    fn parents_of(&self, source: usize, object_key: &str) -> Vec<String> {
        let world = &self.worlds[source];
        let Some(obj) = world.visible_object(object_key) else {
            return Vec::new();
        };
        match source {
            0 => serde_json::from_str::<PodView>(&obj.json)
                .ok()
                .and_then(|pod| self.trace.header.parent.parent_of(&pod).ok())
                .into_iter()
                .collect(),
            n => serde_json::from_str::<MetaView>(&obj.json)
                .map(|object| parents_by(&self.parents_by[n - 1], &object))
                .unwrap_or_default(),
        }
    }

    fn world_put(&mut self, source: usize, json: &str) {
        let now = self.h.now();
        let key = self.worlds[source].key_of(json).ok();
        let before = key
            .as_deref()
            .map(|k| self.parents_of(source, k))
            .unwrap_or_default();
        match self.worlds[source].put(now, json) {
            Ok(()) => {
                let after = key
                    .as_deref()
                    .map(|k| self.parents_of(source, k))
                    .unwrap_or_default();
                self.membership_moved(before, after);
                self.broadcast_last_change(source);
            }
            Err(e) => self.h.note(&format!("world refused an object: {e}")),
        }
    }

    fn world_delete(&mut self, source: usize, key: &str) {
        let before = self.parents_of(source, key);
        if self.worlds[source].delete(self.h.now(), key) {
            self.membership_moved(before, Vec::new());
            self.broadcast_last_change(source);
        }
    }

    fn membership_moved(&mut self, before: Vec<String>, after: Vec<String>) {
        let now = self.h.now();
        for parent in before.into_iter().chain(after) {
            self.parents_seen.insert(parent.clone());
            self.membership_changed.insert(parent, now);
        }
        self.h.set_queue_bound(self.parents_seen.len().max(1));
    }

    fn apply(&mut self, entry: &Entry) {
        let now = self.h.now();
        // The parser checked the source against the header.
        let source = usize::try_from(entry.source_index())
            .unwrap_or(0)
            .min(self.worlds.len() - 1);
        match &entry.record {
            Record::List {
                status: 200,
                body,
                transport_error: None,
            } => {
                let items = match list_items(body) {
                    Ok(Ok(items)) => items,
                    Ok(Err(why)) => {
                        // A wire fault (as a frame that does not decode), not a state of the
                        // world; a replay feeds it to the core as it is.
                        self.h
                            .note(&format!("line {}: LIST body {why}; ignored", entry.line));
                        return;
                    }
                    Err(e) => {
                        // `validate` refuses such a trace up front; a caller that skipped it
                        // still hears of the record instead of losing it silently.
                        self.violation(
                            "a record world mode cannot use",
                            format!("line {}: {e}", entry.line),
                        );
                        return;
                    }
                };
                // The core's own reading of the body: one it refuses whole is the wire fault
                // above; an item it cannot decode is left out of its listing, so out of the
                // world too.
                let skipped = match core_list_skips(source, body.as_bytes()) {
                    Ok(skipped) => skipped,
                    Err(why) => {
                        self.h.note(&format!(
                            "line {}: LIST body does not decode ({why}); ignored",
                            entry.line
                        ));
                        return;
                    }
                };
                for (index, why) in &skipped {
                    self.h.note(&format!(
                        "line {}: LIST item {index} does not decode ({why}); not part of the world",
                        entry.line
                    ));
                }
                let items: Vec<&str> = items
                    .into_iter()
                    .enumerate()
                    .filter(|(i, _)| !skipped.contains_key(i))
                    .map(|(_, item)| item)
                    .collect();
                let world = &self.worlds[source];
                let keep: BTreeSet<String> =
                    items.iter().filter_map(|i| world.key_of(i).ok()).collect();
                let gone: Vec<String> = world
                    .all_objects()
                    .map(|o| o.key.clone())
                    .filter(|k| !keep.contains(k))
                    .collect();
                for key in gone {
                    self.world_delete(source, &key);
                }
                for item in items {
                    if !self.worlds[source].unchanged(item) {
                        self.world_put(source, item);
                    }
                }
            }
            Record::Frame { line } => {
                let Ok(v) = serde_json::from_slice::<Value>(line.as_bytes()) else {
                    return;
                };
                let object = v["object"].to_string();
                // As the core decodes the source's objects: the primary's as pods (an object
                // of another kind is not one), a secondary's as metadata.
                let (decodes, what) = match source {
                    0 => (serde_json::from_str::<PodView>(&object).is_ok(), "a pod"),
                    _ => (
                        serde_json::from_str::<MetaView>(&object).is_ok(),
                        "metadata",
                    ),
                };
                if !decodes {
                    // A recorded frame the controller cannot read is a wire fault, not a
                    // state of the world; inject one with the malformed_frame fault.
                    self.h.note(&format!(
                        "line {}: frame object does not decode as {what}; not part of the world",
                        entry.line
                    ));
                    return;
                }
                // As the core's kind check skips it in a replay (the header's `kind`).
                if source == 0
                    && let Some(expected) = &self.trace.header.kind
                    && let Some(found) = v["object"]["kind"].as_str()
                    && found != expected
                {
                    self.h.note(&format!(
                        "line {}: frame object is a {found}, not a {expected}; not part of the world",
                        entry.line
                    ));
                    return;
                }
                match v["type"].as_str() {
                    Some("ADDED" | "MODIFIED") => self.world_put(source, &object),
                    Some("DELETED") => {
                        if let Ok(key) = self.worlds[source].key_of(&object) {
                            self.world_delete(source, &key);
                        }
                    }
                    _ => {}
                }
            }
            Record::List { .. } | Record::Watch { .. } | Record::WatchEnd(_) => {}
            // A recorded run's writes name the recorded apiserver's resourceVersions, which
            // the world here does not number alike: they are not waited for.
            Record::Reconcile {
                parent,
                outcome,
                duration,
                ..
            } => self.h.script(parent.clone(), outcome.clone(), *duration),
            Record::Source(op) => {
                match op {
                    SourceOp::Upsert(o) => self.world_put(0, o),
                    SourceOp::Delete(o) => {
                        if let Ok(key) = self.worlds[0].key_of(o) {
                            self.world_delete(0, &key);
                        }
                    }
                    SourceOp::Replace(objects) => {
                        let keys: Vec<String> = self.worlds[0]
                            .all_objects()
                            .map(|o| o.key.clone())
                            .collect();
                        for key in keys {
                            self.world_delete(0, &key);
                        }
                        for o in objects {
                            self.world_put(0, o);
                        }
                    }
                }
                if let Some(stream) = self.source {
                    self.schedule(now, Action::SourceEvent(stream, op.clone()));
                }
            }
            // The world numbers its own resourceVersions, and simulate does not wait for own
            // writes (as for a Kubernetes source's): a recorded cursor is not fed.
            Record::SourceCursor { .. } => {}
            Record::SourceEnd { error } => {
                if let Some(stream) = self.source.take() {
                    let error = error.clone();
                    let io = self.h.step_input(
                        || format!("source {stream} ended"),
                        Input::SourceEnd { stream, error },
                    );
                    self.handle_io(io);
                }
            }
            Record::Note => {
                if let Some(note) = &entry.note {
                    self.h.note(note);
                }
            }
            Record::Advance { .. } => {}
            Record::Fault(fault) => {
                // A fault naming a source hits that source's resource alone.
                let targets: Vec<usize> = match entry.source {
                    Some(n) => vec![source.min(usize::try_from(n).unwrap_or(0))],
                    None => (0..self.worlds.len()).collect(),
                };
                self.fault(fault, &targets);
            }
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
}

/// The parents a secondary's object wakes: the core's own rule.
pub(super) fn parents_by(how: &ParentsBy, object: &MetaView) -> Vec<String> {
    how.parents_of(object)
        .into_iter()
        .map(String::from)
        .collect()
}

/// The items of a LIST body the core leaves out of its listing, by index, with why; an error
/// when it refuses the body whole. The primary's objects are read as pods, a secondary's as
/// metadata, as the core reads them.
fn core_list_skips(source: usize, body: &[u8]) -> Result<BTreeMap<usize, String>, String> {
    let skipped = match source {
        0 => reconcile_core::list::parse_list::<PodView>(body).map(|l| l.skipped),
        _ => reconcile_core::list::parse_list::<MetaView>(body).map(|l| l.skipped),
    }
    .map_err(|e| e.to_string())?;
    Ok(skipped.into_iter().map(|e| (e.index, e.message)).collect())
}

/// A source's index in `worlds`.
fn source_index(source: SourceId) -> usize {
    usize::try_from(source.get()).unwrap_or(0)
}

pub(super) fn key(object: &impl Object) -> String {
    object.key().map_or_else(|| "?".into(), |k| k.to_string())
}

/// What the core is fed for the world's LIST `answer`: the body in JSON, or in protobuf
/// when the world serves it and `json` is false.
fn list_response(answer: ListAnswer, json: bool) -> ListResponse<PodView> {
    match answer {
        ListAnswer::Response(status, body) => ListResponse::Response {
            status,
            body: body.into_bytes(json),
        },
        ListAnswer::Transport(e) => ListResponse::TransportError(e),
    }
}

/// Decodes `body` as a driver does while it streams in, `chunk` bytes at a time.
fn decode_in_chunks(
    body: &[u8],
    chunk: usize,
) -> Result<reconcile_core::list::ObjectList<PodView>, reconcile_core::list::ListBodyError> {
    let mut decoder = reconcile_core::list::ListDecoder::new();
    body.chunks(chunk.max(1))
        .try_for_each(|piece| decoder.push(piece))?;
    decoder.finish()
}
