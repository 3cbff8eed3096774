//! How steps are written: one line per step (text or JSON), notes between them, and the
//! output handed to a streaming sink in chunks.

use std::fmt::Write as _;

use crate::harness::*;

impl Harness {
    /// Streams every line rendered from now on to `sink`, in chunks of [`STREAM_CHUNK`]
    /// bytes, instead of keeping them: [`Harness::output`] then holds only what is not
    /// written yet. A write error stops the run ([`Harness::exhausted`]) and is returned by
    /// [`Harness::finish_output`].
    pub fn stream_to(&mut self, sink: Box<dyn std::io::Write>) {
        self.sink = Some(sink);
    }

    /// Whether writing to the sink failed (the run stops; not a step limit).
    #[must_use]
    pub fn output_failed(&self) -> bool {
        self.sink_error.is_some()
    }

    /// Hands the rendered output to the sink once it holds a chunk (all of it when `all`).
    pub(super) fn pass_on(&mut self, all: bool) {
        let Some(sink) = &mut self.sink else {
            return;
        };
        if self.sink_error.is_some() {
            self.out.clear();
            return;
        }
        if self.out.len() >= STREAM_CHUNK || (all && !self.out.is_empty()) {
            if let Err(e) = sink.write_all(self.out.as_bytes()) {
                self.sink_error = Some(e);
            }
            self.out.clear();
        }
    }

    /// Writes what is left to the sink and flushes it.
    ///
    /// # Errors
    /// The first error writing to the sink, if any.
    pub fn finish_output(&mut self) -> std::io::Result<()> {
        self.pass_on(true);
        if let Some(e) = self.sink_error.take() {
            return Err(e);
        }
        match &mut self.sink {
            Some(sink) => sink.flush(),
            None => Ok(()),
        }
    }

    /// Whether lines are being rendered (callers skip describing inputs otherwise).
    #[must_use]
    pub fn rendering(&self) -> bool {
        self.render != Render::Quiet
    }

    /// The rendered output so far.
    #[must_use]
    pub fn output(&self) -> &str {
        &self.out
    }

    /// Takes the rendered output.
    pub fn take_output(&mut self) -> String {
        std::mem::take(&mut self.out)
    }

    /// Writes a line that is not a step (notes, summaries).
    pub fn note(&mut self, text: &str) {
        match self.render {
            Render::Text => {
                let _ = writeln!(self.out, "{:>12}  # {text}", self.now.to_string());
            }
            Render::Json => {
                let _ = writeln!(
                    self.out,
                    "{}",
                    serde_json::json!({"t_ns": self.now.as_nanos(), "note": text})
                );
            }
            Render::Quiet => {}
        }
        self.pass_on(false);
    }

    /// `describe()` when rendering, nothing otherwise: a step's label, built before its input
    /// is moved into the core.
    pub fn label(&self, describe: impl FnOnce() -> String) -> String {
        if self.rendering() {
            describe()
        } else {
            String::new()
        }
    }

    /// A candidate's name on its lines, with its own clock's reading when that is not the
    /// real time.
    pub(super) fn tag(&self, c: &Candidate) -> String {
        if self.now == self.real {
            c.name.clone()
        } else {
            format!("{}@{}", c.name, self.now)
        }
    }
}
