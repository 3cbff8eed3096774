//! An in-memory [`Recorder`]: every record of a controller run, owned, for assertions and
//! for writing the run as a simulator trace afterwards.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use reconcile_core::{Instant, Outcome, RequestId, StreamEnd, StreamId, Ticket};
use reconcile_tokio::engine::{Record, Recorder};

/// Records kept per run; a case makes a few thousand at most.
const MAX_RECORDS: usize = 1_000_000;

/// An owned [`Record`].
#[derive(Debug, Clone, PartialEq)]
pub enum Taped {
    /// The core started.
    Start,
    /// A command, rendered.
    Command(String),
    /// A LIST was sent.
    ListRequested(RequestId),
    /// A WATCH was sent from this cursor.
    WatchRequested(StreamId, String),
    /// A reconcile was dispatched.
    Dispatched(Ticket, String),
    /// A LIST answered.
    ListResponse(RequestId, u16, Vec<u8>),
    /// A LIST got no answer.
    ListError(RequestId, String),
    /// A WATCH answered 200.
    WatchOpened(StreamId),
    /// A raw watch line.
    WatchLine(StreamId, Vec<u8>),
    /// A WATCH ended.
    WatchEnd(StreamId, StreamEnd),
    /// A reconcile finished.
    Reconciled(Ticket, String, Outcome),
    /// A timer fired.
    Timeout,
    /// The core was stopped.
    Stop,
}

/// One watch frame, as far as a case cares: type, pod name, resourceVersion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// `ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK`, `ERROR`.
    pub kind: String,
    /// `object.metadata.name`, or `""`.
    pub name: String,
    /// `object.metadata.resourceVersion`, or `""`.
    pub resource_version: String,
}

/// The shared tape; clone it to read while the controller writes.
#[derive(Debug, Clone, Default)]
pub struct Tap {
    records: Arc<Mutex<Vec<(Instant, Taped)>>>,
}

impl Tap {
    fn records(&self) -> MutexGuard<'_, Vec<(Instant, Taped)>> {
        self.records.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Everything so far.
    #[must_use]
    pub fn all(&self) -> Vec<(Instant, Taped)> {
        self.records().clone()
    }

    /// Every watch line so far, decoded just enough to read its type, name and version.
    #[must_use]
    pub fn frames(&self) -> Vec<Frame> {
        self.records()
            .iter()
            .filter_map(|(_, r)| match r {
                Taped::WatchLine(_, line) => Some(frame(line)),
                _ => None,
            })
            .collect()
    }

    /// How many watches ended (cleanly or not).
    #[must_use]
    pub fn watch_ends(&self) -> usize {
        self.records()
            .iter()
            .filter(|(_, r)| matches!(r, Taped::WatchEnd(..)))
            .count()
    }

    /// The cursor of every WATCH sent, in order.
    #[must_use]
    pub fn watch_cursors(&self) -> Vec<String> {
        self.records()
            .iter()
            .filter_map(|(_, r)| match r {
                Taped::WatchRequested(_, rv) => Some(rv.clone()),
                _ => None,
            })
            .collect()
    }
}

fn frame(line: &[u8]) -> Frame {
    let value: serde_json::Value = serde_json::from_slice(line).unwrap_or_default();
    let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_owned();
    Frame {
        kind: text(&value["type"]),
        name: text(&value["object"]["metadata"]["name"]),
        resource_version: text(&value["object"]["metadata"]["resourceVersion"]),
    }
}

impl Recorder for Tap {
    fn record(&mut self, now: Instant, record: Record<'_>) {
        let taped = match record {
            Record::Start => Taped::Start,
            Record::Command(c) => Taped::Command(c.to_owned()),
            Record::ListRequested { req } => Taped::ListRequested(req),
            Record::WatchRequested {
                stream,
                resource_version,
            } => Taped::WatchRequested(stream, resource_version.to_owned()),
            Record::Dispatched { ticket, parent } => Taped::Dispatched(ticket, parent.to_owned()),
            Record::ListResponse { req, status, body } => {
                Taped::ListResponse(req, status, body.to_vec())
            }
            Record::ListError { req, error } => Taped::ListError(req, error.to_owned()),
            Record::WatchOpened { stream } => Taped::WatchOpened(stream),
            Record::WatchLine { stream, line } => Taped::WatchLine(stream, line.to_vec()),
            Record::WatchEnd { stream, end } => Taped::WatchEnd(stream, end.clone()),
            Record::Reconciled {
                ticket,
                parent,
                outcome,
            } => Taped::Reconciled(ticket, parent.to_owned(), outcome.clone()),
            Record::Timeout => Taped::Timeout,
            Record::Stop => Taped::Stop,
        };
        let mut records = self.records();
        if records.len() < MAX_RECORDS {
            records.push((now, taped));
        }
    }
}
