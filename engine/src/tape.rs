//! An in-memory [`Recorder`]: every record of a controller run, owned, to read while the
//! controller runs (tests, debugging) and to write the run as a simulator trace afterwards.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::recorder::{Record, Recorder};
use reconcile_core::{Instant, Outcome, RequestId, StreamEnd, StreamId, Ticket};

/// Records kept by [`Tape::default`]: an e2e case makes a few thousand.
pub const DEFAULT_LIMIT: usize = 1_000_000;

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

#[derive(Debug)]
struct Reel {
    records: Vec<(Instant, Taped)>,
    limit: usize,
    truncated: bool,
}

/// The shared tape; clone it to read while the controller writes.
///
/// Bounded: past its limit it keeps the prefix and marks itself truncated (a prefix of a
/// run still replays).
#[derive(Debug, Clone)]
pub struct Tape {
    reel: Arc<Mutex<Reel>>,
}

impl Default for Tape {
    fn default() -> Self {
        Tape::with_limit(DEFAULT_LIMIT)
    }
}

impl Tape {
    /// A tape that keeps at most `limit` records.
    #[must_use]
    pub fn with_limit(limit: usize) -> Self {
        Tape {
            reel: Arc::new(Mutex::new(Reel {
                records: Vec::new(),
                limit,
                truncated: false,
            })),
        }
    }

    fn reel(&self) -> MutexGuard<'_, Reel> {
        self.reel.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether records were dropped at the limit.
    #[must_use]
    pub fn truncated(&self) -> bool {
        self.reel().truncated
    }

    /// Everything so far.
    #[must_use]
    pub fn all(&self) -> Vec<(Instant, Taped)> {
        self.reel().records.clone()
    }

    /// Every watch line so far, decoded just enough to read its type, name and version.
    #[must_use]
    pub fn frames(&self) -> Vec<Frame> {
        self.reel()
            .records
            .iter()
            .filter_map(|(_, r)| match r {
                Taped::WatchLine(_, line) => Some(frame(line)),
                _ => None,
            })
            .collect()
    }

    /// How many watches were answered 200 and started streaming.
    #[must_use]
    pub fn watches_opened(&self) -> usize {
        self.reel()
            .records
            .iter()
            .filter(|(_, r)| matches!(r, Taped::WatchOpened(..)))
            .count()
    }

    /// How many watches ended (cleanly or not).
    #[must_use]
    pub fn watch_ends(&self) -> usize {
        self.reel()
            .records
            .iter()
            .filter(|(_, r)| matches!(r, Taped::WatchEnd(..)))
            .count()
    }

    /// The cursor of every WATCH sent, in order.
    #[must_use]
    pub fn watch_cursors(&self) -> Vec<String> {
        self.reel()
            .records
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

impl Recorder for Tape {
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
        let mut reel = self.reel();
        if reel.records.len() < reel.limit {
            reel.records.push((now, taped));
        } else {
            reel.truncated = true;
        }
    }
}
