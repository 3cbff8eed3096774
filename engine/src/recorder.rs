//! The tap a recorder sits on: every [`Input`] the driver feeds the core, stamped with `now`,
//! and every [`Command`] the core issued, in order.
//!
//! Recording inputs rather than decoded objects is what lets a trace replay exactly: the
//! simulator feeds the same bytes to the same core and must reach the same store. The
//! vocabulary is the core's own, so what a recorder keeps is what a replay feeds back.

use reconcile_core::{Command, Input, Instant};

/// Receives every input and command of one controller run, in order.
///
/// Called on the driver task: keep it cheap (buffer, write in batches).
///
/// A LIST the driver decoded while it streamed in is recorded as the raw body it kept
/// ([`ListResponse::Response`](reconcile_core::ListResponse::Response) with status 200),
/// not as the decoded list it fed.
pub trait Recorder<O, P>: Send + 'static {
    /// The driver fed `input` at `now`.
    fn input(&mut self, now: Instant, input: &Input<O>);

    /// The core issued `command` at `now`.
    fn command(&mut self, now: Instant, command: &Command<O, P>);

    /// The run ended; flush.
    fn finish(&mut self, now: Instant) {
        let _ = now;
    }
}
