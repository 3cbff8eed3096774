//! What a driver feeds the loop: the inputs, and the answers they carry.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use super::ids::{RequestId, SourceId, StreamId, Ticket};
use super::lease::LeaseResponse;
use crate::wire::list::{ListBodyError, ObjectList};
use crate::wire::object::ObjectKey;

/// Everything a driver feeds the loop: one owned value per input, for
/// [`ReconcileLoop::handle_input`](crate::ReconcileLoop::handle_input). The same type is
/// what a recorder keeps and what a trace replays, so a recorded run is fed back exactly as
/// it was first fed.
///
/// Which input answers which command is in the table on
/// [`ReconcileLoop`](crate::ReconcileLoop).
#[derive(Debug, Clone)]
pub enum Input<O> {
    /// Start: the first LIST (or the in-process source) is requested. Ignored as stale
    /// unless the loop is new.
    Start,
    /// The answer to [`Command::List`](crate::Command::List) `req`.
    List {
        /// The request answered.
        req: RequestId,
        /// What came back.
        response: ListResponse<O>,
    },
    /// The WATCH `stream` was answered with 200 and is streaming (optional; it marks when the
    /// stream really started, for the short-watch rule).
    WatchOpened {
        /// The stream.
        stream: StreamId,
    },
    /// One line of WATCH `stream`: a JSON watch event, raw, with or without its newline.
    WatchLine {
        /// The stream.
        stream: StreamId,
        /// The line, exactly as received.
        line: Bytes,
    },
    /// WATCH `stream` ended.
    WatchEnd {
        /// The stream.
        stream: StreamId,
        /// How.
        end: StreamEnd,
    },
    /// An event from the in-process source's `stream`.
    SourceEvent {
        /// The stream.
        stream: StreamId,
        /// The store write.
        event: SourceEvent<O>,
    },
    /// The in-process source's `stream` has delivered the collection it mirrors up to
    /// `resource_version`: every change the apiserver made up to that version is in the
    /// events sent before this one. A source fed from a shared cache sends it after each
    /// batch, so that read your own writes can wait on it as on a reflector's cursor. Until
    /// a stream sends one, the in-process source has no cursor and a write to it is not
    /// waited for.
    SourceCursor {
        /// The stream.
        stream: StreamId,
        /// The apiserver's resourceVersion the events so far reflect.
        resource_version: String,
    },
    /// The in-process source's `stream` ended, with an error or without.
    SourceEnd {
        /// The stream.
        stream: StreamId,
        /// The error it ended with.
        error: Option<String>,
    },
    /// The outcome of [`Command::Reconcile`](crate::Command::Reconcile) `ticket`.
    Reconciled {
        /// The run.
        ticket: Ticket,
        /// How it ended.
        outcome: Outcome,
    },
    /// The outcome of [`Command::Reconcile`](crate::Command::Reconcile) `ticket`, with the
    /// writes the run made: [`Input::Reconciled`] is this with no writes. Until every
    /// source named has observed its write (its cursor reached the version), the key is
    /// not dispatched again, for at most `Config::read_own_writes` (Kubernetes' KEP-5647
    /// "read your own writes").
    ReconciledWrote {
        /// The run.
        ticket: Ticket,
        /// How it ended.
        outcome: Outcome,
        /// What it wrote, each as the source caching the written kind and the
        /// resourceVersion the apiserver answered.
        writes: Vec<OwnWrite>,
    },
    /// Sets the deadline of the running reconcile `ticket` to `timeout` after its dispatch
    /// (`None`: no deadline), overriding `Config::reconcile_timeout` for this run. A run
    /// past its deadline is cancelled ([`Command::CancelReconcile`](crate::Command::CancelReconcile))
    /// and counts as failed. Stale once the run has ended.
    ReconcileTimeout {
        /// The run.
        ticket: Ticket,
        /// From its dispatch; `None` lifts the deadline.
        timeout: Option<Duration>,
    },
    /// A deadline may have passed: fires every timer that is due. An early or spurious one
    /// does nothing.
    Timeout,
    /// A reconcile-all trigger (kube-runtime's `reconcile_all_on`): every parent with
    /// members is queued, each once.
    ReconcileAll,
    /// A one-key trigger (kube-runtime's `reconcile_on`, controller-runtime's channel source
    /// for one object): the parent of the cached primary object `object` is queued, as a
    /// watch event for it would queue it. An object not in the primary cache queues nothing
    /// ([`Event::ReconcileOn`](crate::Event::ReconcileOn) says so), as kube-runtime drops a
    /// request for an object its store lacks. The key names an object rather than a parent
    /// so that `Input` stays free of the parent type; with
    /// [`KeyMap::by_object`](crate::KeyMap::by_object) the two are the same.
    ReconcileOn {
        /// The primary object whose parent is woken.
        object: ObjectKey,
    },
    /// Stop: closes the open LIST / WATCH / source and cancels running reconciles. Nothing
    /// but those closes (and a leader's release of its Lease) is emitted afterwards, and
    /// every later input is ignored. Stopping twice is a no-op; it may come while a
    /// reconcile runs, or as its outcome. Ignored as stale before [`Input::Start`].
    Stop,
    /// Graceful stop: the sources are closed and no reconcile starts; the running ones
    /// finish (their outcomes are fed as usual), and when the last has, the loop stops as on
    /// [`Input::Stop`] (an elected leader keeps renewing meanwhile, then releases). An
    /// [`Input::Stop`] while draining cancels what still runs. Ignored as stale unless
    /// running.
    Drain,
    /// The answer to [`Command::Lease`](crate::Command::Lease) `req`.
    Lease {
        /// The request answered.
        req: RequestId,
        /// What came back.
        response: LeaseResponse,
    },
}

impl<O> Input<O> {
    /// A short name of the input's kind, for logs and stale reports.
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            Input::Start => "start",
            Input::List { .. } => "list response",
            Input::WatchOpened { .. } => "watch opened",
            Input::WatchLine { .. } => "watch frame",
            Input::WatchEnd { .. } => "watch end",
            Input::SourceEvent { .. } => "source event",
            Input::SourceCursor { .. } => "source cursor",
            Input::SourceEnd { .. } => "source end",
            Input::Reconciled { .. } | Input::ReconciledWrote { .. } => "reconcile outcome",
            Input::ReconcileTimeout { .. } => "reconcile timeout",
            Input::Timeout => "timeout",
            Input::ReconcileAll => "reconcile all",
            Input::ReconcileOn { .. } => "reconcile on",
            Input::Stop => "stop",
            Input::Lease { .. } => "lease response",
            Input::Drain => "drain",
        }
    }
}

/// The response to a `List` command.
#[derive(Debug, Clone)]
pub enum ListResponse<O> {
    /// The apiserver answered; the body exactly as received.
    Response {
        /// HTTP status.
        status: u16,
        /// The body, however long.
        body: Bytes,
    },
    /// The apiserver answered `200`, and the driver decoded the body while it streamed in
    /// with a [`ListDecoder`](crate::list::ListDecoder), so that the parse overlapped the
    /// transfer. Equivalent to `Response` with status 200 and the whole body: the same
    /// decoder reads both.
    Decoded(Result<ObjectList<O>, ListBodyError>),
    /// No answer: connection refused, reset, timed out.
    TransportError(String),
}

/// How a WATCH stream ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamEnd {
    /// The server closed it without error (its `timeoutSeconds` elapsed).
    Clean,
    /// The connection failed, or the driver's read-idle timeout fired.
    TransportError(String),
    /// The WATCH request was answered with a non-200 status.
    HttpStatus {
        /// The status.
        code: u16,
        /// The response body, usually a `Status`.
        body: Vec<u8>,
    },
}

/// One write to the store.
///
/// The `*Shared` variants carry objects another cache in the process already holds (a
/// shared source's subscriber is fed them): the store keeps the pointer it is given, so
/// every store fed the same `Arc` holds one copy of the object between them. They mean
/// exactly what the plain variants mean; a trace records them as it records those.
///
/// A [`Transform`](crate::Transform) changes an object in place, so it can change only an
/// object nothing else points to (the core cannot copy one: `O` need not be `Clone`). A
/// loop with a transform should be pushed plain events, or shared ones whose pointers it
/// holds alone; a shared object it cannot change is cached as it came.
#[derive(Debug, Clone, PartialEq)]
pub enum SourceEvent<O> {
    /// Insert or update.
    Upsert(O),
    /// Remove; the object is the last known state (a tombstone).
    Delete(O),
    /// The whole world: everything not in it is deleted.
    Replace(Vec<O>),
    /// [`SourceEvent::Upsert`] of an object shared with another cache.
    UpsertShared(Arc<O>),
    /// [`SourceEvent::Delete`] of an object shared with another cache.
    DeleteShared(Arc<O>),
    /// [`SourceEvent::Replace`] with objects shared with another cache.
    ReplaceShared(Vec<Arc<O>>),
}

impl<O> SourceEvent<O> {
    /// Whether this is the whole world ([`SourceEvent::Replace`] or
    /// [`SourceEvent::ReplaceShared`]).
    #[must_use]
    pub fn is_replace(&self) -> bool {
        matches!(
            self,
            SourceEvent::Replace(_) | SourceEvent::ReplaceShared(_)
        )
    }
}

/// How a reconcile run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Done; run again only when something changes (kube-runtime's `Action::await_change`).
    Success,
    /// Done; run again after this long unless something changes first
    /// (kube-runtime's `Action::requeue`, controller-runtime's `Result{RequeueAfter}`).
    RequeueAfter(Duration),
    /// Failed; retried with the key's exponential backoff (the default error policy).
    Error(String),
    /// Failed, and an error policy chose what follows instead of the backoff: a rerun after
    /// `requeue_after`, or none until something changes. Counts as an error; the key's
    /// backoff starts over (kube-runtime's `error_policy` returning an `Action`).
    ErrorHandled {
        /// The reconcile's error.
        error: String,
        /// Until the rerun; `None` waits for a change.
        requeue_after: Option<Duration>,
    },
}

/// One write a reconcile made, as the loop waits for it: the source that caches the written
/// kind, and the `metadata.resourceVersion` the apiserver answered the write with.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OwnWrite {
    /// The source whose cursor must reach the version (primary or secondary).
    pub source: SourceId,
    /// The written object's resourceVersion, as answered.
    pub resource_version: String,
}

impl OwnWrite {
    /// A write cached by `source` at `resource_version`.
    pub fn new(source: SourceId, resource_version: impl Into<String>) -> Self {
        OwnWrite {
            source,
            resource_version: resource_version.into(),
        }
    }
}
