//! The [`Recorder`] that writes a run as a `reconcile-trace` trace while it goes, so a
//! production incident replays in the simulator (`reconcile-sim replay <file>`).
//!
//! What is written is what [`reconcile_trace::TraceBuilder`] makes of the run's inputs and
//! commands; the header comes from the controller's own configuration
//! ([`reconcile_trace::header_for`]), key map included when it is one of the core's
//! ready-made maps.
//!
//! - **Streamed.** Each record is written once it is final (a reconcile's script must
//!   precede the input that dispatched it, so what follows that input waits for its
//!   outcome, up to [`TraceRecorder::max_held`] records). Writes are buffered and flushed
//!   every second of the run and at its end, so a crash, a kill or an out-of-memory kill
//!   keeps everything up to the last flush, each line whole.
//! - **Bounded.** At most [`TraceRecorder::max_bytes`] bytes (256 MiB by default) are
//!   written; the trace is then a prefix of the run, and a log line says so.
//! - **Redacted by default.** Payloads pass through a [`Redaction`] before they are written
//!   ([`Redaction::entry`], the path every trace writer takes): Secret `data` and
//!   `stringData` and the last-applied-configuration annotation are masked, `managedFields`
//!   are dropped, and any field named with [`Redaction::digest`] is replaced by its digest.
//!   The controller tells the recorder each source's resource ([`Recorder::sources`]), so
//!   every payload of a Secrets source is a Secret's, a metadata-only one
//!   (`PartialObjectMeta<Secret>`) included. Recording secrets must be asked for with
//!   [`TraceRecorder::redaction`]`(Redaction::none())`.
//! - **Private.** The file has mode 0600 (on Unix), whether it is new or replaces one.

use std::fmt;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use reconcile_core::{Command, Input, Instant};
use reconcile_trace::redact::Redaction;
use reconcile_trace::{Entry, Header, Trace, TraceBuilder};

use super::recorder::{Recorder, SourceResource};
use super::tape::Tape;

/// Writes an in-process object as JSON, for [`TraceRecorder::objects_as_json`].
pub type ToJson<O> = Arc<dyn Fn(&O) -> Option<String> + Send + Sync>;

/// How often buffered records reach the file, in the run's time.
const FLUSH_EVERY: Duration = Duration::from_secs(1);

/// Records a run and writes it to a file as a trace while it goes (see the module docs).
pub struct TraceRecorder<O, P> {
    path: PathBuf,
    header: Header,
    builder: TraceBuilder,
    redaction: Redaction,
    /// Which sources are Secrets, as [`Recorder::sources`] said (primary first).
    secret_sources: Vec<bool>,
    to_json: Option<ToJson<O>>,
    tape: Option<Tape<O, P>>,
    max_bytes: u64,
    max_held: usize,
    out: Output,
    ready: Vec<Entry>,
    flush_every: Duration,
    /// Records whose payload could not be redacted and was withheld whole.
    withheld: u64,
    /// Whether the byte bound cut the trace short.
    cut_short: bool,
    /// Why writing stopped, when it failed.
    failure: Option<String>,
}

/// Where the file stands.
enum Output {
    /// Not opened yet: opened at the first record.
    Closed,
    Open {
        file: BufWriter<File>,
        written: u64,
        flushed_at: Instant,
    },
    /// Over the byte bound, or a write failed: nothing more is written.
    Done,
}

impl<O, P> fmt::Debug for TraceRecorder<O, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TraceRecorder")
            .field("path", &self.path)
            .field("header", &self.header)
            .field("redaction", &self.redaction.describe())
            .field("max_bytes", &self.max_bytes)
            .field("held", &self.builder.held())
            .finish_non_exhaustive()
    }
}

impl<O, P> TraceRecorder<O, P> {
    /// Writes to `path` with `header` (see [`reconcile_trace::header_for`]), redacted by
    /// default.
    #[must_use]
    pub fn new(path: impl Into<PathBuf>, header: Header) -> Self {
        TraceRecorder {
            path: path.into(),
            header,
            builder: TraceBuilder::default(),
            redaction: Redaction::default(),
            secret_sources: Vec::new(),
            to_json: None,
            tape: None,
            max_bytes: 256 << 20,
            max_held: 100_000,
            out: Output::Closed,
            ready: Vec::new(),
            flush_every: FLUSH_EVERY,
            withheld: 0,
            cut_short: false,
            failure: None,
        }
    }

    /// Sets what is redacted; `Redaction::none()` writes secrets as received.
    #[must_use]
    pub fn redaction(mut self, redaction: Redaction) -> Self {
        self.redaction = redaction;
        self
    }

    /// Writes at most `bytes` to the file (default 256 MiB); the rest of the run is left out.
    #[must_use]
    pub fn max_bytes(mut self, bytes: u64) -> Self {
        self.max_bytes = bytes;
        self
    }

    /// Holds at most `records` waiting for a reconcile's outcome (default 100,000); past
    /// that they are written, and the reconciles still running get no script (a replay
    /// runs them as instant successes).
    #[must_use]
    pub fn max_held(mut self, records: usize) -> Self {
        self.max_held = records.max(1);
        self
    }

    /// Flushes the file at most every `period` of the run (default 1 s); `Duration::ZERO`
    /// flushes after every input (what `reconcile-sim capture` does).
    #[must_use]
    pub fn flush_every(mut self, period: Duration) -> Self {
        self.flush_every = period;
        self
    }

    /// Records written so far whose payload could not be redacted (too deep, too large) and
    /// was replaced whole.
    #[must_use]
    pub fn withheld(&self) -> u64 {
        self.withheld
    }

    /// Whether [`TraceRecorder::max_bytes`] cut the trace short.
    #[must_use]
    pub fn cut_short(&self) -> bool {
        self.cut_short
    }

    /// Why the trace could not be written (opened, written or flushed), if it could not.
    #[must_use]
    pub fn failure(&self) -> Option<&str> {
        self.failure.as_deref()
    }

    /// Writes in-process source events too, their objects through `to_json` (an object it
    /// gives nothing for is left out). Without it, an in-process run's events are not
    /// written, only its stream ends.
    #[must_use]
    pub fn objects_as_json(
        mut self,
        to_json: impl Fn(&O) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        self.to_json = Some(Arc::new(to_json));
        self
    }

    /// Also keeps the run in memory (bounded by the tape's own limit), to read while it
    /// goes; the same tape on every call.
    pub fn tape(&mut self) -> Tape<O, P> {
        self.tape.get_or_insert_with(Tape::default).clone()
    }

    /// The header the trace is written with.
    #[must_use]
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// Where the trace is written.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn write_ready(&mut self, now: Instant, flush: bool) {
        if self.ready.is_empty() && !flush {
            return;
        }
        if matches!(self.out, Output::Closed) {
            self.out = match self.open() {
                Ok(out) => out,
                Err(e) => {
                    tracing::error!(path = %self.path.display(), error = %e, "cannot write the trace");
                    self.failure = Some(e.to_string());
                    Output::Done
                }
            };
        }
        let Output::Open {
            file,
            written,
            flushed_at,
        } = &mut self.out
        else {
            self.ready.clear();
            return;
        };
        let mut over = false;
        let mut failed = None;
        for mut entry in self.ready.drain(..) {
            if self.redaction.entry(&mut entry, &self.secret_sources)
                == reconcile_trace::redact::Redacted::Withheld
            {
                self.withheld += 1;
            }
            let mut line = entry.to_line();
            line.push('\n');
            if *written + line.len() as u64 > self.max_bytes {
                over = true;
                break;
            }
            if let Err(e) = file.write_all(line.as_bytes()) {
                failed = Some(e);
                break;
            }
            *written += line.len() as u64;
        }
        if failed.is_none()
            && (flush || over || now.saturating_duration_since(*flushed_at) >= self.flush_every)
        {
            *flushed_at = now;
            failed = file.flush().err();
        }
        if let Some(e) = failed {
            tracing::error!(path = %self.path.display(), error = %e, "cannot write the trace; recording stops");
            self.failure = Some(e.to_string());
            self.out = Output::Done;
        } else if over {
            let _ = file.flush();
            tracing::warn!(
                path = %self.path.display(),
                max_bytes = self.max_bytes,
                "the trace reached its byte limit: the rest of the run is not written"
            );
            self.cut_short = true;
            self.out = Output::Done;
        }
    }

    fn open(&self) -> io::Result<Output> {
        let mut file =
            BufWriter::with_capacity(64 << 10, reconcile_trace::create_private(&self.path)?);
        let mut header = self.header.clone();
        if self.redaction.is_enabled() {
            let text = header.description.unwrap_or_default();
            header.description = Some(format!("{text} ({})", self.redaction.describe()));
        }
        let line = format!("{}\n", header.to_line());
        file.write_all(line.as_bytes())?;
        Ok(Output::Open {
            file,
            written: line.len() as u64,
            flushed_at: Instant::ZERO,
        })
    }
}

impl<O: Clone, P: Clone + fmt::Display> TraceRecorder<O, P> {
    /// The trace so far, from the tape ([`TraceRecorder::tape`] must have been called
    /// before the run; without it, the header alone). Not redacted.
    #[must_use]
    pub fn trace(&self) -> Trace {
        let records = self.tape.as_ref().map(Tape::all).unwrap_or_default();
        reconcile_trace::to_trace(
            &self.path.display().to_string(),
            self.header.clone(),
            &records,
        )
    }
}

impl<O, P> Recorder<O, P> for TraceRecorder<O, P>
where
    O: Clone + Send + Sync + 'static,
    P: Clone + fmt::Display + Send + Sync + 'static,
{
    fn input(&mut self, now: Instant, input: &Input<O>) {
        if let Some(tape) = &mut self.tape {
            tape.input(now, input);
        }
        if matches!(self.out, Output::Done) {
            return;
        }
        match &self.to_json {
            Some(to_json) => self.builder.input(now, input, &**to_json),
            None => self.builder.input(now, input, &|_: &O| None),
        }
        if self.builder.held() > self.max_held {
            self.builder.take_all(&mut self.ready);
        } else {
            self.builder.take_ready(&mut self.ready);
        }
        self.write_ready(now, false);
    }

    fn command(&mut self, now: Instant, command: &Command<O, P>) {
        if let Some(tape) = &mut self.tape {
            tape.command(now, command);
        }
        self.builder.command(now, command);
    }

    fn sources(&mut self, sources: &[SourceResource]) {
        self.secret_sources = sources.iter().map(SourceResource::is_secrets).collect();
    }

    fn finish(&mut self, now: Instant) {
        if !matches!(self.out, Output::Done) {
            self.builder.take_all(&mut self.ready);
            self.write_ready(now, true);
        }
        if let Output::Open { written, .. } = &self.out {
            tracing::info!(path = %self.path.display(), bytes = written, "trace written");
        }
        let orphaned = self.builder.orphaned();
        if orphaned > 0 {
            tracing::warn!(
                orphaned,
                "reconciles outlasted the recorder's hold: written without their outcome"
            );
        }
    }
}
