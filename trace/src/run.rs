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
//! | [`Input::ReconcileAll`] | `reconcile_all` |
//! | [`Input::Stop`] | `stop` |
//!
//! Timers, commands and dispatches are not written: the replaying core derives them. A
//! reconcile's script must precede the input that dispatched it, which is only known once
//! its outcome is in, so a trace is built from the whole run.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use reconcile_core::{
    Command, Config, Input, Instant, KeyBy, ListResponse, Outcome, RequestId, SourceConfig,
    StreamEnd, StreamId, Ticket,
};

use crate::{Entry, Header, Payload, Record, RecordedEnd, ScriptedOutcome, Trace};

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
        parent,
        concurrency: config.concurrency,
        timeout_seconds: params.map_or(defaults.timeout_seconds, |p| p.timeout_seconds),
        resync: config.resync,
        retry_delay: config.retry_delay,
        backoff: (config.backoff.base, config.backoff.cap),
        secondaries: config.secondaries().cloned().collect(),
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
    // Each entry with the reconcile scripts that must precede it.
    let mut entries: Vec<(Entry, Vec<Entry>)> = Vec::new();
    let mut asked: BTreeMap<StreamId, String> = BTreeMap::new();
    let mut opened: BTreeSet<StreamId> = BTreeSet::new();
    let mut dispatched: BTreeMap<Ticket, (Option<usize>, Instant, String)> = BTreeMap::new();
    // Scripts for reconciles dispatched before any input was written.
    let mut leading: Vec<Entry> = Vec::new();
    // Which source each LIST and WATCH belongs to: every answer names it (version 2).
    let mut list_source: BTreeMap<RequestId, u64> = BTreeMap::new();
    let mut stream_source: BTreeMap<StreamId, u64> = BTreeMap::new();
    for (at, recorded) in records {
        let at = *at;
        let source = match recorded {
            Recorded::Input(Input::List { req, .. }) => list_source.get(req).copied().unwrap_or(0),
            Recorded::Input(
                Input::WatchOpened { stream }
                | Input::WatchLine { stream, .. }
                | Input::WatchEnd { stream, .. },
            ) => stream_source.get(stream).copied().unwrap_or(0),
            _ => 0,
        };
        let mut push = |record: Record, note: Option<&str>| {
            let mut entry = Entry::new(Some(at), record);
            entry.note = note.map(str::to_owned);
            entry.source = (source != 0).then_some(source);
            entries.push((entry, Vec::new()));
        };
        let input = match recorded {
            Recorded::Command(Command::List { req, source, .. }) => {
                list_source.insert(*req, source.get());
                continue;
            }
            Recorded::Command(Command::Watch {
                stream,
                source,
                resource_version,
                ..
            }) => {
                stream_source.insert(*stream, source.get());
                asked.insert(*stream, resource_version.clone());
                continue;
            }
            Recorded::Command(Command::Reconcile { ticket, parent, .. }) => {
                let before = entries.len().checked_sub(1);
                dispatched.insert(*ticket, (before, at, parent.to_string()));
                continue;
            }
            Recorded::Command(_) => continue,
            Recorded::Input(input) => input,
        };
        match input {
            Input::List { response, .. } => match response {
                ListResponse::Response { status, body } => push(
                    Record::List {
                        status: *status,
                        body: text(body),
                        transport_error: None,
                    },
                    None,
                ),
                ListResponse::TransportError(error) => push(
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
                opened.insert(*stream);
                push(
                    Record::Watch {
                        status: 200,
                        body: Payload::default(),
                        resource_version: asked.get(stream).cloned(),
                    },
                    None,
                );
            }
            Input::WatchLine { line, .. } => push(Record::Frame { line: text(line) }, None),
            Input::WatchEnd { stream, end } => {
                let was_open = opened.remove(stream);
                let rv = asked.remove(stream);
                match (end, was_open) {
                    (StreamEnd::HttpStatus { code, body }, _) => push(
                        Record::Watch {
                            status: *code,
                            body: text(body),
                            resource_version: rv,
                        },
                        None,
                    ),
                    (StreamEnd::Clean, _) => push(Record::WatchEnd(RecordedEnd::Clean), None),
                    (StreamEnd::TransportError(e), true) => {
                        push(Record::WatchEnd(RecordedEnd::Transport(e.clone())), None);
                    }
                    (StreamEnd::TransportError(e), false) => {
                        push(
                            Record::Watch {
                                status: 200,
                                body: Payload::default(),
                                resource_version: rv,
                            },
                            Some("transport error before the response head; open implied"),
                        );
                        push(Record::WatchEnd(RecordedEnd::Transport(e.clone())), None);
                    }
                }
            }
            Input::Reconciled { ticket, outcome } => {
                let Some((before, since, parent)) = dispatched.remove(ticket) else {
                    continue;
                };
                let when = before.map_or(since, |i| entries[i].0.at.unwrap_or(since));
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
                    },
                );
                match before {
                    Some(i) => entries[i].1.push(script),
                    None => leading.push(script),
                }
            }
            Input::Stop => push(Record::Stop, None),
            Input::ReconcileAll => push(Record::ReconcileAll, None),
            // Derived by the replaying core, or (in-process objects) not recorded. Lease
            // answers have no record kind yet: a recorded election replays as a controller
            // that always leads. A drain only closes and waits: its trace ends as a stop's.
            Input::Drain
            | Input::Start
            | Input::Timeout
            | Input::SourceEvent { .. }
            | Input::SourceEnd { .. }
            | Input::Lease { .. } => {}
        }
    }
    let mut flat = leading;
    for (entry, scripts) in entries {
        flat.extend(scripts);
        flat.push(entry);
    }
    Trace {
        name: name.to_owned(),
        header,
        entries: flat,
    }
}
