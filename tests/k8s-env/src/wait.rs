//! Polling a condition until it holds, with a clear message when it does not.

use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// Polls `check` until it returns `Ok`, or fails after `timeout`.
///
/// `check` returns `Err(description)` of what it saw while the condition does
/// not hold yet ("phase=Pending"); the last description ends up in the error,
/// so a failing test says what it waited for and what it got instead. Polls
/// start at 50 ms and back off to 500 ms.
///
/// # Errors
/// [`Error::Timeout`] naming `what` and the last description.
pub fn wait_for<T>(
    timeout: Duration,
    what: &str,
    mut check: impl FnMut() -> Result<T, String>,
) -> Result<T> {
    let deadline = Instant::now() + timeout;
    let mut pause = Duration::from_millis(50);
    loop {
        let last = match check() {
            Ok(value) => return Ok(value),
            Err(last) => last,
        };
        let now = Instant::now();
        if now >= deadline {
            return Err(Error::Timeout {
                what: what.to_owned(),
                timeout,
                last,
            });
        }
        std::thread::sleep(pause.min(deadline - now));
        pause = (pause * 2).min(Duration::from_millis(500));
    }
}
