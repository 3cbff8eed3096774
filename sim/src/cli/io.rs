//! The command line's input and output: files read whole up to a bound, invalid UTF-8
//! named by line, and output written as it is produced, where a closed pipe ends the program
//! quietly and any other write error (a full disk) is a clear error, never a panic.

use std::io::{self, Read as _, Write as _};
use std::path::Path;

use reconcile_sim::import::{self, Format};
use reconcile_sim::trace::{self, Trace};

/// The largest input file read: far above any capture, low enough that a stray argument
/// (a disk image, `/dev/zero`) is refused instead of filling memory.
pub const MAX_INPUT: u64 = 1 << 30;

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

/// Reads `path` whole, at most [`MAX_INPUT`] bytes.
///
/// # Errors
/// When it cannot be read or is larger than the bound.
pub fn read_bytes(path: &Path) -> Result<Vec<u8>, String> {
    let name = path.display();
    let file = std::fs::File::open(path).map_err(|e| format!("{name}: {e}"))?;
    let mut bytes = Vec::new();
    file.take(MAX_INPUT + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{name}: {e}"))?;
    if bytes.len() as u64 > MAX_INPUT {
        return Err(format!(
            "{name}: larger than {MAX_INPUT} bytes, the most reconcile-sim reads"
        ));
    }
    Ok(bytes)
}

/// Reads a trace or an importable capture.
///
/// # Errors
/// When the file cannot be read, is not UTF-8 (naming the line), or does not parse.
pub fn read_trace(path: &Path, from: Option<Format>) -> Result<Trace, String> {
    let name = path.display().to_string();
    let bytes = read_bytes(path)?;
    let text = trace::utf8_text(&name, &bytes).map_err(|e| e.to_string())?;
    import::import(&name, text, from).map_err(|e| e.to_string())
}

/// The standard output as a run's sink (unbuffered beyond the run's own chunks).
#[must_use]
pub fn stdout_sink() -> Box<dyn io::Write> {
    Box::new(io::stdout())
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
