//! The tap a recorder sits on: every input the driver feeds the core, stamped with `now`,
//! and every command the core issued, in order.
//!
//! Recording inputs rather than decoded objects is what lets a trace replay exactly: the
//! simulator feeds the same bytes to the same core and must reach the same store.

use reconcile_core::{Instant, Outcome, RequestId, StreamEnd, StreamId, Ticket};

/// One thing that happened at the driver's boundary.
#[derive(Debug, Clone, Copy)]
pub enum Record<'a> {
    /// The core started.
    Start,
    /// A command the core issued, as the core renders it (`Display`).
    Command(&'a str),
    /// A LIST was sent.
    ListRequested {
        /// The request.
        req: RequestId,
    },
    /// A WATCH was sent.
    WatchRequested {
        /// The stream.
        stream: StreamId,
        /// The cursor it watches from.
        resource_version: &'a str,
    },
    /// A reconcile was dispatched.
    Dispatched {
        /// The run.
        ticket: Ticket,
        /// The key, as displayed.
        parent: &'a str,
    },
    /// A LIST answered.
    ListResponse {
        /// The request.
        req: RequestId,
        /// HTTP status.
        status: u16,
        /// The body as received.
        body: &'a [u8],
    },
    /// A LIST got no answer.
    ListError {
        /// The request.
        req: RequestId,
        /// Why.
        error: &'a str,
    },
    /// A WATCH answered 200.
    WatchOpened {
        /// The stream.
        stream: StreamId,
    },
    /// One line of a WATCH body, exactly as received.
    WatchLine {
        /// The stream.
        stream: StreamId,
        /// The line, without its newline.
        line: &'a [u8],
    },
    /// A WATCH ended.
    WatchEnd {
        /// The stream.
        stream: StreamId,
        /// How.
        end: &'a StreamEnd,
    },
    /// A reconcile finished.
    Reconciled {
        /// The run.
        ticket: Ticket,
        /// The key it ran for, as displayed.
        parent: &'a str,
        /// Its outcome.
        outcome: &'a Outcome,
    },
    /// A timer fired.
    Timeout,
    /// The core was stopped.
    Stop,
}

/// Receives every [`Record`] of one controller run, in order.
///
/// Called on the driver task: keep it cheap (buffer, write in batches).
pub trait Recorder: Send + 'static {
    /// One record at `now`.
    fn record(&mut self, now: Instant, record: Record<'_>);

    /// The run ended; flush.
    fn finish(&mut self, now: Instant) {
        let _ = now;
    }
}
