//! The run log: one line per request, watch frame, collector action and reconcile, kept in
//! one growing buffer with the offsets of its lines, and bounded in bytes.
//!
//! One buffer rather than a `String` per line: a long run writes hundreds of thousands of
//! lines, and as many small allocations that live for the whole run, scattered among the
//! short-lived ones, fragment the heap. glibc's malloc then searches ever longer free lists,
//! and a run ten times the size cost fourteen times the time (issue 26).

use std::fmt::{self, Write as _};
use std::time::Duration;

/// The log's lines, in one buffer.
#[derive(Debug, Clone, Default)]
pub(crate) struct RunLog {
    text: String,
    /// Where each line starts in `text`; each ends where the next starts, with a `\n`.
    starts: Vec<usize>,
    /// Lines not kept because the log was full.
    dropped: u64,
}

impl RunLog {
    /// Appends a line stamped `at`, unless the log already holds `max_bytes`: then the
    /// line is counted as dropped, and the first one dropped leaves a line saying so.
    pub(crate) fn push(&mut self, at: Duration, line: impl fmt::Display, max_bytes: usize) {
        if self.dropped > 0 {
            self.dropped += 1;
            return;
        }
        let start = self.text.len();
        // Writing to a `String` cannot fail.
        let _ = writeln!(self.text, "{} {line}", Stamp(at));
        if self.text.len() <= max_bytes {
            self.starts.push(start);
            return;
        }
        self.text.truncate(start);
        self.dropped = 1;
        self.starts.push(start);
        let _ = writeln!(
            self.text,
            "{} log full: {start} bytes (SimConfig::max_log_bytes); later lines are dropped",
            Stamp(at)
        );
    }

    /// Lines kept.
    pub(crate) fn len(&self) -> usize {
        self.starts.len()
    }

    /// Lines dropped because the log was full.
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Line `i`, without its newline.
    fn line(&self, i: usize) -> &str {
        let start = self.starts[i];
        let end = self.starts.get(i + 1).copied().unwrap_or(self.text.len());
        &self.text[start..end - 1]
    }

    /// Lines from `from` on, one `String` each.
    pub(crate) fn lines_since(&self, from: usize) -> Vec<String> {
        (from.min(self.len())..self.len())
            .map(|i| self.line(i).to_owned())
            .collect()
    }

    /// The whole log, a newline after each line.
    pub(crate) fn text(&self) -> &str {
        &self.text
    }
}

/// A virtual time as the log shows it, written in place: `  12.345s`.
pub(crate) struct Stamp(pub(crate) Duration);

impl fmt::Display for Stamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0.as_millis();
        write!(f, "{:>4}.{:03}s", ms / 1000, ms % 1000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_come_back_as_they_went_in() {
        let mut log = RunLog::default();
        log.push(Duration::from_millis(12), "GET /a -> 200", 1 << 20);
        log.push(
            Duration::from_millis(1500),
            format_args!("watch#{}", 3),
            1 << 20,
        );
        assert_eq!(log.len(), 2);
        assert_eq!(
            log.lines_since(0),
            ["   0.012s GET /a -> 200", "   1.500s watch#3"]
        );
        assert_eq!(log.lines_since(1), ["   1.500s watch#3"]);
        assert!(log.lines_since(5).is_empty());
        assert_eq!(log.text(), "   0.012s GET /a -> 200\n   1.500s watch#3\n");
    }

    #[test]
    fn a_full_log_says_so_once_and_counts_what_it_drops() {
        let mut log = RunLog::default();
        let at = Duration::ZERO;
        log.push(at, "first", 30);
        log.push(at, "second, too long to fit", 30);
        log.push(at, "third", 30);
        assert_eq!(log.len(), 2);
        assert_eq!(log.dropped(), 2, "the second and the third");
        assert_eq!(
            log.lines_since(0),
            [
                "   0.000s first",
                "   0.000s log full: 16 bytes (SimConfig::max_log_bytes); later lines are dropped"
            ]
        );
    }
}
