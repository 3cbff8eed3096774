//! The one-line rendering of a step: the input fed, everything the core answered, and when it
//! next needs waking. Snapshot tests and the simulator print these, one line per step, so a
//! run reads as a table:
//!
//! ```text
//!     +1.000s  W2 ADDED d cell=c2 rv=101  ->  reconcile c2 R5 attempt=1 members=[c,d]  | next +36000.100s resync
//! ```

use std::fmt::{self, Write as _};

use crate::time::Instant;
use crate::vocabulary::{Deadline, Output};
use crate::wire::object::Object;

/// Builds one step line: feed it the outputs of one drain, in order, then finish it with the
/// deadline the drain ended on.
#[derive(Debug, Clone)]
pub struct StepLine {
    line: String,
    outputs: usize,
}

impl StepLine {
    /// A line for the input described by `input`, fed at `now`.
    #[must_use]
    pub fn new(now: Instant, input: &str) -> Self {
        let mut line = String::with_capacity(96);
        let _ = write!(line, "{:>12}  {input}  ->  ", now.to_string());
        StepLine { line, outputs: 0 }
    }

    /// Adds one command or event (an [`Output::Timeout`] is given to
    /// [`finish`](Self::finish) instead). Events are in parentheses.
    pub fn push<O: Object, P: fmt::Display>(&mut self, output: &Output<O, P>) {
        if self.outputs > 0 {
            self.line.push_str("; ");
        }
        self.outputs += 1;
        let _ = match output {
            Output::Command(command) => write!(self.line, "{command}"),
            Output::Event(event) => write!(self.line, "({event})"),
            Output::Timeout(deadline) => write!(self.line, "(timeout {})", Next(*deadline)),
        };
    }

    /// The finished line, without a newline: `-` when the step had no output, then the next
    /// deadline and its reason, or `none`.
    #[must_use]
    pub fn finish(mut self, next: Option<Deadline>) -> String {
        if self.outputs == 0 {
            self.line.push('-');
        }
        let _ = write!(self.line, "  | next {}", Next(next));
        self.line
    }
}

struct Next(Option<Deadline>);

impl fmt::Display for Next {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(deadline) => write!(f, "{deadline}"),
            None => f.write_str("none"),
        }
    }
}
