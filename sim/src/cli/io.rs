//! The command line's input and output: files read whole up to a bound (a regular file's
//! size checked from its metadata before any byte is read, a pipe's or a device's as it is
//! read, every line within [`trace::MAX_LINE`]), invalid UTF-8 named by line, and output written as it is produced, where a closed pipe ends the program
//! quietly and any other write error (a full disk) is a clear error, never a panic.

use std::io::{self, Write as _};
use std::path::Path;

use reconcile_sim::import::{self, Format};
use reconcile_sim::trace::{self, Trace};

/// Why the program stops with an error.
#[derive(Debug)]
pub enum Failure {
    /// The input cannot be used (exit 2, with the message).
    Input(String),
    /// The output cannot be written (exit 141 and no message for a closed pipe, exit 2 with
    /// the message otherwise).
    Output(io::Error),
}

impl From<String> for Failure {
    fn from(message: String) -> Self {
        Failure::Input(message)
    }
}

impl From<&str> for Failure {
    fn from(message: &str) -> Self {
        Failure::Input(message.to_owned())
    }
}

/// Exit status for a closed output pipe: 128 + SIGPIPE, what a shell reports for a program
/// a closed pipe killed (as `yes | head -1` does to `yes`).
pub const EXIT_BROKEN_PIPE: u8 = 141;

/// The exit status and the message (if any) for `failure`.
#[must_use]
pub fn exit_for(failure: &Failure) -> (u8, Option<String>) {
    match failure {
        Failure::Output(e) if e.kind() == io::ErrorKind::BrokenPipe => (EXIT_BROKEN_PIPE, None),
        Failure::Output(e) => (2, Some(format!("writing the output: {e}"))),
        Failure::Input(m) => (2, Some(m.clone())),
    }
}

/// Reads `path` whole, at most [`trace::MAX_INPUT`] bytes and [`trace::MAX_LINE`] on a line
/// ([`trace::read_bounded`]): a regular file larger than that is refused from its metadata
/// before a byte is read; anything else (a pipe, a device) is read up to the first byte past
/// a bound.
///
/// # Errors
/// When it cannot be read or is larger than the bound.
pub fn read_bytes(path: &Path) -> Result<Vec<u8>, String> {
    let limits = trace::Limits::default();
    let name = path.display().to_string();
    let file = std::fs::File::open(path).map_err(|e| format!("{name}: {e}"))?;
    let metadata = file.metadata().map_err(|e| format!("{name}: {e}"))?;
    let expected = if metadata.is_file() {
        if metadata.len() > limits.max_bytes {
            return Err(format!(
                "{name}: {} bytes, larger than {} bytes, the most reconcile-sim reads",
                metadata.len(),
                limits.max_bytes
            ));
        }
        metadata.len()
    } else {
        0
    };
    trace::read::read_bounded_with(&name, file, limits, expected).map_err(|e| e.to_string())
}

/// Reads a trace or an importable capture.
///
/// # Errors
/// When the file cannot be read, is not UTF-8 (naming the line), or does not parse.
pub fn read_trace(path: &Path, from: Option<Format>) -> Result<Trace, String> {
    let name = path.display().to_string();
    let bytes = read_bytes(path)?;
    let text = trace::utf8_text(&name, &bytes).map_err(|e| e.to_string())?;
    let trace = import::import(&name, trace::strip_bom(text), from).map_err(|e| e.to_string())?;
    tracing::info!(
        "read {name}: {} bytes, {} records{}",
        bytes.len(),
        trace.entries.len(),
        from.map_or_else(
            || " (format recognised by content)".to_owned(),
            |f| format!(" (--from {f})")
        )
    );
    Ok(trace)
}

/// The standard output as a run's sink (unbuffered beyond the run's own chunks).
#[must_use]
pub fn stdout_sink() -> Box<dyn io::Write> {
    Box::new(io::stdout())
}

/// Where a run's step lines go: stdout, or nowhere under `-q`.
#[must_use]
pub fn step_sink(quiet: bool) -> Box<dyn io::Write> {
    if quiet {
        Box::new(io::sink())
    } else {
        stdout_sink()
    }
}

/// Writes `text` to the standard output and flushes it.
///
/// # Errors
/// When writing fails.
pub fn print(text: &str) -> Result<(), Failure> {
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(Failure::Output)
}

/// Writes a line to the standard error, ignoring failure (there is nowhere left to say it).
pub fn warn(line: &str) {
    let _ = writeln!(io::stderr().lock(), "{line}");
}
