//! The [`Recorder`] that writes a run as a `reconcile-trace` trace, so a production incident
//! replays in the simulator (`reconcile-sim replay <file>`).
//!
//! What is written is [`reconcile_trace::to_trace`] of the run's inputs and commands; the
//! header comes from the controller's own configuration ([`reconcile_trace::header_for`]),
//! key map included when it is one of the core's ready-made maps. The trace is written when
//! the run ends (a reconcile's script must precede the input that dispatched it, which is
//! only known once the outcome is in).

use std::fmt;
use std::path::PathBuf;

use reconcile_core::{Command, Input, Instant};
use reconcile_trace::{Header, Trace, to_trace};

use super::recorder::Recorder;
use super::tape::Tape;

/// Records a run and writes it to a file as a trace when the run ends.
///
/// Memory is bounded by the tape's limit; a run past it is written as its prefix, and the
/// header's description says so.
pub struct TraceRecorder<O, P> {
    tape: Tape<O, P>,
    path: PathBuf,
    header: Header,
}

impl<O, P> fmt::Debug for TraceRecorder<O, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TraceRecorder")
            .field("tape", &self.tape)
            .field("path", &self.path)
            .field("header", &self.header)
            .finish()
    }
}

impl<O, P> TraceRecorder<O, P> {
    /// Writes to `path` with `header` (see [`reconcile_trace::header_for`]).
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
    pub fn tape(&self) -> Tape<O, P> {
        self.tape.clone()
    }

    /// The header the trace is written with.
    #[must_use]
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// Where the trace is written.
    #[must_use]
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }
}

impl<O: Clone, P: Clone + fmt::Display> TraceRecorder<O, P> {
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

impl<O, P> Recorder<O, P> for TraceRecorder<O, P>
where
    O: Clone + Send + Sync + 'static,
    P: Clone + fmt::Display + Send + Sync + 'static,
{
    fn input(&mut self, now: Instant, input: &Input<O>) {
        self.tape.input(now, input);
    }

    fn command(&mut self, now: Instant, command: &Command<O, P>) {
        self.tape.command(now, command);
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
