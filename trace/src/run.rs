//! A recorded run as a trace: what crossed the core's boundary, in order, turned into the
//! records a replay feeds back.
//!
//! | at the boundary | in the trace |
//! |---|---|
//! | [`Input::List`] answered / failed | `list` (status + body / `transport_error`), with its `source` when not the primary |
//! | [`Input::WatchOpened`] | `watch` (status 200, the cursor its [`Command::Watch`] asked from) |
//! | [`Input::WatchEnd`] with a non-200 status | `watch` (that status and body) |
//! | [`Input::WatchEnd`] with a transport error before the head | `watch` 200, then `watch_end` transport (with a note) |
//! | [`Input::WatchLine`] | `frame` (the exact bytes) |
//! | [`Input::WatchEnd`] | `watch_end` (clean / transport) |
//! | [`Input::Reconciled`] | a `reconcile` script, placed before the input that dispatched it |
//! | [`Input::ReconciledWrote`] | the same, with its `writes` (source and resourceVersion of each) |
//! | [`Input::ReconcileAll`] | `reconcile_all` |
//! | [`Input::ReconcileOn`] | `reconcile_on` (its `key`) |
//! | [`Input::Stop`] | `stop` |
//! | [`Input::SourceEvent`] | `source` (upsert / delete / replace), when the recorder can write the objects as JSON |
//! | [`Input::SourceCursor`] | `source_cursor` (its `resource_version`) |
//! | [`Input::SourceEnd`] | `source_end` |
//!
//! Timers, commands and dispatches are not written: the replaying core derives them. A
//! reconcile's script must precede the input that dispatched it, which is only known once
//! its outcome is in; [`TraceBuilder`] holds what follows that input until then.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;

use reconcile_core::{
    Command, Config, Input, Instant, KeyBy, ListResponse, Outcome, OwnWrite, RequestId,
    SourceConfig, SourceEvent, StreamEnd, StreamId, Ticket,
};

use crate::{Entry, Header, Payload, Record, RecordedEnd, ScriptedOutcome, SourceOp, Trace};

/// One thing that crossed the core's boundary: an input the driver fed, or a command the
/// core issued. A recorder keeps these, in order.
#[derive(Debug, Clone)]
pub enum Recorded<O, P> {
    /// An input, as fed (a LIST decoded while it streamed in is kept as its raw body).
    Input(Input<O>),
    /// A command, as issued (a reconcile's members are not kept).
    Command(Command<O, P>),
}

/// The trace header for a controller built with `config`. Its key map is written when it is
/// one of the core's ready-made maps; a custom map cannot be rebuilt by a replay, so the
/// header then says parents are keyed by name and the description says why.
#[must_use]
pub fn header_for<O, P>(description: &str, config: &Config<O, P>) -> Header {
    let (in_process, params) = match &config.source {
        SourceConfig::Kubernetes(params) => (false, Some(params)),
        SourceConfig::InProcess => (true, None),
    };
    let defaults = Header::default();
    let (parent, description) = match config.key_map.describe() {
        Some(by) => (by.clone(), description.to_owned()),
        None => (
            KeyBy::Name,
            format!("{description} (custom key map: replayed with parents by name)"),
        ),
    };
    Header {
        description: Some(description),
        in_process,
        namespace: params.and_then(|p| p.namespace.clone()),
        label_selector: params.and_then(|p| p.label_selector.clone()),
        wire_format: params.map_or(defaults.wire_format, |p| p.wire_format),
        parent,
        concurrency: config.concurrency,
        timeout_seconds: params.map_or(defaults.timeout_seconds, |p| p.timeout_seconds),
        streaming_lists: params
            .is_some_and(|p| p.initial_list == reconcile_core::InitialListStrategy::StreamingList),
        resync: config.resync,
        debounce: config.debounce,
        retry_delay: config.retry_delay,
        backoff: (config.backoff.base, config.backoff.cap),
        secondaries: config.secondaries().cloned().collect(),
        read_own_writes: config.read_own_writes,
        ..defaults
    }
}

/// A payload as recorded, byte for byte (bytes that are not UTF-8 stay bytes).
fn text(bytes: &[u8]) -> Payload {
    Payload::from(bytes)
}

/// Turns a recorded run into a trace named `name`.
#[must_use]
pub fn to_trace<O, P: fmt::Display>(
    name: &str,
    header: Header,
    records: &[(Instant, Recorded<O, P>)],
) -> Trace {
    let mut builder = TraceBuilder::default();
    for (at, recorded) in records {
        match recorded {
            Recorded::Input(input) => builder.input(*at, input, &|_: &O| None),
            Recorded::Command(command) => builder.command(*at, command),
        }
    }
    let mut entries = Vec::new();
    builder.take_all(&mut entries);
    Trace {
        name: name.to_owned(),
        header,
        entries,
    }
}

/// Turns a run into trace entries as it goes, so a recorder can write them out while the
/// run lasts instead of holding it whole.
///
/// A reconcile's script must precede the input that dispatched it, and is known only once
/// its outcome is in: every entry from that input on is held until then
/// ([`take_ready`](Self::take_ready)). [`take_all`](Self::take_all) hands out everything
/// held (at the end, or when a recorder's bound is reached); a reconcile still running then
/// gets no script (a replay runs it as an instant success) and its outcome, when it comes,
/// is counted in [`orphaned`](Self::orphaned) instead.
#[derive(Debug, Default)]
pub struct TraceBuilder {
    /// Entries not handed out yet, each with the scripts that must precede it; `held[0]` is
    /// entry number `base` of the run.
    held: VecDeque<(Entry, Vec<Entry>)>,
    base: usize,
    /// Scripts of reconciles dispatched before any entry, and whether they were handed out.
    leading: Vec<Entry>,
    leading_out: bool,
    asked: BTreeMap<StreamId, String>,
    opened: BTreeSet<StreamId>,
    /// Running reconciles: the entry before whose place their script goes, since, parent.
    dispatched: BTreeMap<Ticket, (Option<usize>, Instant, String)>,
    /// Which source each LIST and WATCH belongs to: every answer names it (version 2).
    list_source: BTreeMap<RequestId, u64>,
    stream_source: BTreeMap<StreamId, u64>,
    orphaned: u64,
    skipped_objects: u64,
}

impl TraceBuilder {
    /// Entries held, waiting for a reconcile's outcome or a `take_*` call.
    #[must_use]
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// Outcomes that came after their reconcile's place had been handed out.
    #[must_use]
    pub fn orphaned(&self) -> u64 {
        self.orphaned
    }

    /// In-process objects left out because `to_json` gave nothing for them.
    #[must_use]
    pub fn skipped_objects(&self) -> u64 {
        self.skipped_objects
    }

    /// The core issued `command` at `at`.
    pub fn command<O, P: fmt::Display>(&mut self, at: Instant, command: &Command<O, P>) {
        match command {
            Command::List { req, source, .. } => {
                self.list_source.insert(*req, source.get());
            }
            Command::Watch {
                stream,
                source,
                resource_version,
                ..
            } => {
                self.stream_source.insert(*stream, source.get());
                self.asked.insert(*stream, resource_version.clone());
            }
            Command::Reconcile { ticket, parent, .. } => {
                let before = (self.base + self.held.len()).checked_sub(1);
                self.dispatched
                    .insert(*ticket, (before, at, parent.to_string()));
            }
            _ => {}
        }
    }

    /// The driver fed `input` at `at`. `to_json` writes an in-process object as JSON; one it
    /// gives nothing for is left out (and counted).
    pub fn input<O>(
        &mut self,
        at: Instant,
        input: &Input<O>,
        to_json: &dyn Fn(&O) -> Option<String>,
    ) {
        let source = match input {
            Input::List { req, .. } => self.list_source.remove(req).unwrap_or(0),
            Input::WatchOpened { stream }
            | Input::WatchLine { stream, .. }
            | Input::WatchEnd { stream, .. } => {
                let source = self.stream_source.get(stream).copied().unwrap_or(0);
                if matches!(input, Input::WatchEnd { .. }) {
                    self.stream_source.remove(stream);
                }
                source
            }
            _ => 0,
        };
        let push =
            |held: &mut VecDeque<(Entry, Vec<Entry>)>, record: Record, note: Option<&str>| {
                let mut entry = Entry::new(Some(at), record);
                entry.note = note.map(str::to_owned);
                entry.source = (source != 0).then_some(source);
                held.push_back((entry, Vec::new()));
            };
        match input {
            Input::List { response, .. } => match response {
                ListResponse::Response { status, body } => push(
                    &mut self.held,
                    Record::List {
                        status: *status,
                        body: text(body),
                        transport_error: None,
                    },
                    None,
                ),
                ListResponse::TransportError(error) => push(
                    &mut self.held,
                    Record::List {
                        status: 0,
                        body: Payload::default(),
                        transport_error: Some(error.clone()),
                    },
                    None,
                ),
                // A recorder keeps the raw body instead; a decoded list has no bytes to write.
                ListResponse::Decoded(_) => {}
            },
            Input::WatchOpened { stream } => {
                self.opened.insert(*stream);
                let resource_version = self.asked.get(stream).cloned();
                push(
                    &mut self.held,
                    Record::Watch {
                        status: 200,
                        body: Payload::default(),
                        resource_version,
                    },
                    None,
                );
            }
            Input::WatchLine { line, .. } => {
                push(&mut self.held, Record::Frame { line: text(line) }, None);
            }
            Input::WatchEnd { stream, end } => {
                let was_open = self.opened.remove(stream);
                let rv = self.asked.remove(stream);
                match (end, was_open) {
                    (StreamEnd::HttpStatus { code, body }, _) => push(
                        &mut self.held,
                        Record::Watch {
                            status: *code,
                            body: text(body),
                            resource_version: rv,
                        },
                        None,
                    ),
                    (StreamEnd::Clean, _) => {
                        push(&mut self.held, Record::WatchEnd(RecordedEnd::Clean), None);
                    }
                    (StreamEnd::TransportError(e), true) => push(
                        &mut self.held,
                        Record::WatchEnd(RecordedEnd::Transport(e.clone())),
                        None,
                    ),
                    (StreamEnd::TransportError(e), false) => {
                        push(
                            &mut self.held,
                            Record::Watch {
                                status: 200,
                                body: Payload::default(),
                                resource_version: rv,
                            },
                            Some("transport error before the response head; open implied"),
                        );
                        push(
                            &mut self.held,
                            Record::WatchEnd(RecordedEnd::Transport(e.clone())),
                            None,
                        );
                    }
                }
            }
            Input::Reconciled { ticket, outcome } => self.reconciled(at, *ticket, outcome, &[]),
            // The writes go with the outcome, so a replay holds the key for them too.
            Input::ReconciledWrote {
                ticket,
                outcome,
                writes,
            } => self.reconciled(at, *ticket, outcome, writes),
            Input::Stop => push(&mut self.held, Record::Stop, None),
            Input::ReconcileAll => push(&mut self.held, Record::ReconcileAll, None),
            Input::ReconcileOn { object } => push(
                &mut self.held,
                Record::ReconcileOn {
                    key: object.to_string(),
                },
                None,
            ),
            Input::SourceEvent { event, .. } => {
                let op = match event {
                    SourceEvent::Upsert(o) => to_json(o).map(SourceOp::Upsert),
                    SourceEvent::Delete(o) => to_json(o).map(SourceOp::Delete),
                    SourceEvent::Replace(objects) => objects
                        .iter()
                        .map(to_json)
                        .collect::<Option<Vec<_>>>()
                        .map(SourceOp::Replace),
                    // A shared object is recorded as the object: a replay feeds it back as a
                    // plain event, which the core takes the same way.
                    SourceEvent::UpsertShared(o) => to_json(&**o).map(SourceOp::Upsert),
                    SourceEvent::DeleteShared(o) => to_json(&**o).map(SourceOp::Delete),
                    SourceEvent::ReplaceShared(objects) => objects
                        .iter()
                        .map(|o| to_json(&**o))
                        .collect::<Option<Vec<_>>>()
                        .map(SourceOp::Replace),
                };
                match op {
                    Some(op) => push(&mut self.held, Record::Source(op), None),
                    None => self.skipped_objects += 1,
                }
            }
            Input::SourceCursor {
                resource_version, ..
            } => push(
                &mut self.held,
                Record::SourceCursor {
                    resource_version: resource_version.clone(),
                },
                None,
            ),
            Input::SourceEnd { error, .. } => push(
                &mut self.held,
                Record::SourceEnd {
                    error: error.clone(),
                },
                None,
            ),
            // Derived by the replaying core. Lease answers have no record kind yet: a
            // recorded election replays as a controller that always leads. A drain only
            // closes and waits: its trace ends as a stop's.
            // A run's own deadline has no record kind yet either.
            Input::Drain
            | Input::Start
            | Input::Timeout
            | Input::Lease { .. }
            | Input::ReconcileTimeout { .. } => {}
        }
    }

    fn reconciled(&mut self, at: Instant, ticket: Ticket, outcome: &Outcome, writes: &[OwnWrite]) {
        let Some((before, since, parent)) = self.dispatched.remove(&ticket) else {
            return;
        };
        let when = match before {
            Some(i) if i >= self.base => self.held[i - self.base].0.at.unwrap_or(since),
            _ => since,
        };
        let script = Entry::new(
            Some(when),
            Record::Reconcile {
                parent: Some(parent),
                outcome: match outcome {
                    Outcome::Success => ScriptedOutcome::Ok,
                    Outcome::RequeueAfter(d) => ScriptedOutcome::RequeueAfter(*d),
                    Outcome::Error(e) => ScriptedOutcome::Error(e.clone()),
                    Outcome::ErrorHandled {
                        error,
                        requeue_after,
                    } => ScriptedOutcome::ErrorHandled {
                        error: error.clone(),
                        requeue_after: *requeue_after,
                    },
                },
                duration: at.saturating_duration_since(since),
                writes: writes.to_vec(),
            },
        );
        match before {
            Some(i) if i >= self.base => self.held[i - self.base].1.push(script),
            None if !self.leading_out => self.leading.push(script),
            // Its place was handed out already.
            _ => self.orphaned += 1,
        }
    }

    /// A fault that acted on the controller itself at `at`, not on the conversation (a jump
    /// of its clock): written as the fault, so a replay acts it out where the run did. What
    /// a fault does to the apiserver is already in the answers recorded.
    pub fn fault(&mut self, at: Instant, fault: &crate::Fault) {
        self.held.push_back((
            Entry::new(Some(at), Record::Fault(fault.clone())),
            Vec::new(),
        ));
    }

    /// Hands out, in order, the entries no running reconcile's script must precede. The
    /// latest entry is always kept: a dispatch it caused may not have been seen yet.
    pub fn take_ready(&mut self, out: &mut Vec<Entry>) {
        // The earliest place a running reconcile's script goes; none pins nothing.
        let pin = self.dispatched.values().map(|(before, _, _)| *before).min();
        let latest = self.held.len().saturating_sub(1);
        let ready = match pin {
            None => latest,
            Some(None) => return,
            Some(Some(i)) => i.saturating_sub(self.base).min(latest),
        };
        self.hand_out(ready, out);
    }

    /// Hands out every entry held, whether or not its reconciles have ended.
    pub fn take_all(&mut self, out: &mut Vec<Entry>) {
        self.hand_out(self.held.len(), out);
    }

    fn hand_out(&mut self, n: usize, out: &mut Vec<Entry>) {
        if !self.leading_out {
            out.append(&mut self.leading);
            self.leading_out = true;
        }
        for (entry, scripts) in self.held.drain(..n) {
            out.extend(scripts);
            out.push(entry);
        }
        self.base += n;
    }
}
