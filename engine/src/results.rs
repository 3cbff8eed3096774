//! The result of each reconcile as a stream: what kube-runtime's `Controller::run` yields
//! (`Result<(ObjectRef, Action), Error>`), for [`Controller::run_stream`](crate::Controller::run_stream).
//!
//! The stream is bounded ([`RESULTS_CAPACITY`]): a reconcile's result is offered to it
//! without waiting, and when the consumer is behind by that many, the result is dropped and
//! counted ([`Results::dropped`]) rather than slowing the controller. A controller never
//! waits for its results' reader.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use reconcile_core::Outcome;

use super::handle::Handle;
use super::runtime::Runtime;

/// How many results may wait unread before the next is dropped.
pub const RESULTS_CAPACITY: usize = 1024;

/// One reconcile's result: its key, and how it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReconcileResult<P> {
    /// The key reconciled (kube-runtime's `ObjectRef`).
    pub parent: P,
    /// How the run ended, as the core is told: success (and any requeue), or the error's
    /// text and what the error policy chose. A panic in the reconcile or the error policy
    /// is an [`Outcome::Error`] naming it.
    pub outcome: Outcome,
}

impl<P> ReconcileResult<P> {
    /// The reconcile's error, as its `Display` printed it; `None` when it succeeded.
    #[must_use]
    pub fn error(&self) -> Option<&str> {
        match &self.outcome {
            Outcome::Error(e) | Outcome::ErrorHandled { error: e, .. } => Some(e),
            Outcome::Success | Outcome::RequeueAfter(_) => None,
        }
    }

    /// Whether the reconcile succeeded.
    #[must_use]
    pub fn is_ok(&self) -> bool {
        self.error().is_none()
    }
}

/// The sending side, kept by the reconcile wrapper.
pub(crate) struct ResultSink<P> {
    tx: async_channel::Sender<ReconcileResult<P>>,
    dropped: Arc<AtomicU64>,
}

impl<P> Clone for ResultSink<P> {
    fn clone(&self) -> Self {
        ResultSink {
            tx: self.tx.clone(),
            dropped: Arc::clone(&self.dropped),
        }
    }
}

impl<P> ResultSink<P> {
    /// Offers `result` without waiting; counts it as dropped when the stream is full. A
    /// reader gone (the stream dropped) drops nothing worth counting.
    pub(crate) fn offer(&self, result: ReconcileResult<P>) {
        if let Err(async_channel::TrySendError::Full(_)) = self.tx.try_send(result) {
            let n = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            if n.is_power_of_two() {
                tracing::warn!(
                    dropped = n,
                    "reconcile results dropped: the stream's reader is behind"
                );
            }
        }
    }
}

/// The reading side before the controller is spawned.
pub(crate) struct Unread<P> {
    rx: async_channel::Receiver<ReconcileResult<P>>,
    dropped: Arc<AtomicU64>,
}

impl<P> Unread<P> {
    /// The stream of the controller behind `handle`, running as `task`.
    pub(crate) fn attach<O, R: Runtime>(
        self,
        handle: Handle<O, P>,
        task: R::Task,
    ) -> Results<O, P, R> {
        Results {
            rx: Box::pin(self.rx),
            dropped: self.dropped,
            handle,
            _task: task,
        }
    }
}

/// A bounded sink and the stream that reads it.
pub(crate) fn channel<P>() -> (ResultSink<P>, Unread<P>) {
    let (tx, rx) = async_channel::bounded(RESULTS_CAPACITY);
    let dropped = Arc::new(AtomicU64::new(0));
    let sink = ResultSink {
        tx,
        dropped: Arc::clone(&dropped),
    };
    (sink, Unread { rx, dropped })
}

/// Each reconcile's result, in the order they ended: a [`Stream`](futures_core::Stream) on
/// any runtime, which ends once the controller has ended. Dropping it stops the controller,
/// as dropping kube-runtime's stream does.
///
/// Bounded at [`RESULTS_CAPACITY`]; a result that finds it full is dropped and counted in
/// [`Results::dropped`], so a slow reader never slows the controller.
pub struct Results<O, P, R: Runtime> {
    rx: Pin<Box<async_channel::Receiver<ReconcileResult<P>>>>,
    dropped: Arc<AtomicU64>,
    handle: Handle<O, P>,
    /// The driver task; dropped (detached) with the stream, after the stop.
    _task: R::Task,
}

impl<O, P, R: Runtime> std::fmt::Debug for Results<O, P, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Results")
            .field("dropped", &self.dropped())
            .finish_non_exhaustive()
    }
}

impl<O, P, R: Runtime> Results<O, P, R> {
    /// How many results were dropped because the stream was full.
    #[must_use]
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// A handle on the controller (stop, wait, the cache, in-process pushes).
    #[must_use]
    pub fn handle(&self) -> &Handle<O, P> {
        &self.handle
    }
}

impl<O, P, R: Runtime> futures_core::Stream for Results<O, P, R> {
    type Item = ReconcileResult<P>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.get_mut().rx.as_mut().poll_next(cx)
    }
}

// No field is pinned structurally: the receiver is boxed and pinned on its own.
impl<O, P, R: Runtime> Unpin for Results<O, P, R> {}

impl<O, P, R: Runtime> Drop for Results<O, P, R> {
    fn drop(&mut self) {
        // The task is detached, not cancelled: the driver ends in order after the stop.
        self.handle.stop();
    }
}
