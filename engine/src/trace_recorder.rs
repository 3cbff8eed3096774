//! The [`Recorder`] that writes a run as a `reconcile-sim` trace, so a production incident
//! replays in the simulator (`reconcile-sim replay <file>`).
//!
//! Mapping from the driver boundary ([`Taped`]) to trace records:
//!
//! | driver | trace |
//! |---|---|
//! | LIST answered / failed | `list` (status + body / `transport_error`) |
//! | WATCH answered 200 | `watch` (status 200, the cursor it was sent from) |
//! | WATCH answered non-200 | `watch` (that status and body) |
//! | WATCH failed before answering | `watch` 200 then `watch_end` transport (with a note) |
//! | watch line | `frame` (raw bytes as a string) |
//! | WATCH ended | `watch_end` (clean / transport) |
//! | reconcile finished | `reconcile` script, placed before the input that dispatched it |
//! | stop | `stop` |
//!
//! Timers, commands and dispatches are not written: the simulator's core derives them.
//! The trace is written when the run ends (a reconcile's script must precede the input
//! that dispatched it, which is only known once the outcome is in).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use reconcile_core::{Config, Instant, Outcome, SourceConfig, StreamEnd, StreamId, Ticket};
use reconcile_sim::trace::{
    Entry, Header, ParentBy, Record as SimRecord, RecordedEnd, ScriptedOutcome, Trace,
};

use super::recorder::{Record, Recorder};
use super::tape::{Tape, Taped};

/// The trace header for a controller built with `config`, its parents derived by `parent`.
#[must_use]
pub fn header<O, P>(description: &str, config: &Config<O, P>, parent: ParentBy) -> Header {
    let (in_process, params) = match &config.source {
        SourceConfig::Kubernetes(params) => (false, Some(params)),
        SourceConfig::InProcess => (true, None),
    };
    let defaults = Header::default();
    Header {
        description: Some(description.to_owned()),
        in_process,
        namespace: params.and_then(|p| p.namespace.clone()),
        label_selector: params.and_then(|p| p.label_selector.clone()),
        parent,
        concurrency: config.concurrency,
        timeout_seconds: params.map_or(defaults.timeout_seconds, |p| p.timeout_seconds),
        resync: config.resync,
        retry_delay: config.retry_delay,
        backoff: (config.backoff.base, config.backoff.cap),
        ..defaults
    }
}

/// Turns a tape into a trace named `name`.
#[must_use]
pub fn to_trace(name: &str, header: Header, records: &[(Instant, Taped)]) -> Trace {
    // Each entry with the reconcile scripts that must precede it.
    let mut entries: Vec<(Entry, Vec<Entry>)> = Vec::new();
    let mut asked: BTreeMap<StreamId, String> = BTreeMap::new();
    let mut opened: BTreeSet<StreamId> = BTreeSet::new();
    let mut dispatched: BTreeMap<Ticket, (Option<usize>, Instant)> = BTreeMap::new();
    // Scripts for reconciles dispatched before any input (none in practice: the first
    // dispatch needs a LIST or a source event).
    let mut leading: Vec<Entry> = Vec::new();
    for (at, taped) in records {
        let at = *at;
        let mut push = |record: SimRecord, note: Option<&str>| {
            let mut entry = Entry::new(Some(at), record);
            entry.note = note.map(str::to_owned);
            entries.push((entry, Vec::new()));
        };
        match taped {
            Taped::ListResponse(_, status, body) => push(
                SimRecord::List {
                    status: *status,
                    body: String::from_utf8_lossy(body).into_owned(),
                    transport_error: None,
                },
                None,
            ),
            Taped::ListError(_, error) => push(
                SimRecord::List {
                    status: 0,
                    body: String::new(),
                    transport_error: Some(error.clone()),
                },
                None,
            ),
            Taped::WatchRequested(stream, rv) => {
                asked.insert(*stream, rv.clone());
            }
            Taped::WatchOpened(stream) => {
                opened.insert(*stream);
                push(
                    SimRecord::Watch {
                        status: 200,
                        body: String::new(),
                        resource_version: asked.get(stream).cloned(),
                    },
                    None,
                );
            }
            Taped::WatchLine(_, line) => push(
                SimRecord::Frame {
                    line: String::from_utf8_lossy(line).into_owned(),
                },
                None,
            ),
            Taped::WatchEnd(stream, end) => {
                let was_open = opened.remove(stream);
                let rv = asked.remove(stream);
                match (end, was_open) {
                    (StreamEnd::HttpStatus { code, body }, _) => push(
                        SimRecord::Watch {
                            status: *code,
                            body: String::from_utf8_lossy(body).into_owned(),
                            resource_version: rv,
                        },
                        None,
                    ),
                    (StreamEnd::Clean, _) => push(SimRecord::WatchEnd(RecordedEnd::Clean), None),
                    (StreamEnd::TransportError(e), true) => {
                        push(SimRecord::WatchEnd(RecordedEnd::Transport(e.clone())), None);
                    }
                    (StreamEnd::TransportError(e), false) => {
                        push(
                            SimRecord::Watch {
                                status: 200,
                                body: String::new(),
                                resource_version: rv,
                            },
                            Some("transport error before the response head; open implied"),
                        );
                        push(SimRecord::WatchEnd(RecordedEnd::Transport(e.clone())), None);
                    }
                }
            }
            Taped::Dispatched(ticket, _) => {
                dispatched.insert(*ticket, (entries.len().checked_sub(1), at));
            }
            Taped::Reconciled(ticket, parent, outcome) => {
                let Some((before, since)) = dispatched.remove(ticket) else {
                    continue;
                };
                let when = before.map_or(since, |i| entries[i].0.at.unwrap_or(since));
                let script = Entry::new(
                    Some(when),
                    SimRecord::Reconcile {
                        parent: Some(parent.clone()),
                        outcome: match outcome {
                            Outcome::Success => ScriptedOutcome::Ok,
                            Outcome::RequeueAfter(d) => ScriptedOutcome::RequeueAfter(*d),
                            Outcome::Error(e) => ScriptedOutcome::Error(e.clone()),
                        },
                        duration: at.saturating_duration_since(since),
                    },
                );
                match before {
                    Some(i) => entries[i].1.push(script),
                    None => leading.push(script),
                }
            }
            Taped::Stop => push(SimRecord::Stop, None),
            Taped::Start | Taped::Command(_) | Taped::ListRequested(_) | Taped::Timeout => {}
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

/// Records a run and writes it to a file as a simulator trace when the run ends.
///
/// Memory is bounded by the tape's limit; a run past it is written as its prefix, and the
/// header's description says so.
#[derive(Debug)]
pub struct TraceRecorder {
    tape: Tape,
    path: PathBuf,
    header: Header,
}

impl TraceRecorder {
    /// Writes to `path` with `header` (see [`header`]).
    #[must_use]
    pub fn new(path: impl Into<PathBuf>, header: Header) -> Self {
        TraceRecorder {
            tape: Tape::default(),
            path: path.into(),
            header,
        }
    }

    /// Keeps at most `limit` records.
    #[must_use]
    pub fn limit(mut self, limit: usize) -> Self {
        self.tape = Tape::with_limit(limit);
        self
    }

    /// The tape, to read while the run goes on.
    #[must_use]
    pub fn tape(&self) -> Tape {
        self.tape.clone()
    }

    /// The trace so far.
    #[must_use]
    pub fn trace(&self) -> Trace {
        let mut header = self.header.clone();
        if self.tape.truncated() {
            let text = header.description.unwrap_or_default();
            header.description = Some(format!("{text} (truncated at the recorder's limit)"));
        }
        to_trace(&self.path.display().to_string(), header, &self.tape.all())
    }

    /// Writes the trace so far.
    ///
    /// # Errors
    /// The directory or file could not be written.
    pub fn write(&self) -> std::io::Result<()> {
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(&self.path, self.trace().to_jsonl())
    }
}

impl Recorder for TraceRecorder {
    fn record(&mut self, now: Instant, record: Record<'_>) {
        self.tape.record(now, record);
    }

    fn finish(&mut self, _now: Instant) {
        match self.write() {
            Ok(()) => tracing::info!(path = %self.path.display(), "trace written"),
            Err(e) => {
                tracing::error!(path = %self.path.display(), error = %e, "cannot write the trace")
            }
        }
    }
}
