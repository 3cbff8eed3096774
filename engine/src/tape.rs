//! An in-memory [`Recorder`]: every input and command of a controller run, owned, to read
//! while the controller runs (tests, debugging) and to write the run as a trace afterwards.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use reconcile_core::{Command, Input, Instant};
use reconcile_trace::Recorded;

use super::recorder::Recorder;

/// Records kept by [`Tape::default`]: an e2e case makes a few thousand.
pub const DEFAULT_LIMIT: usize = 1_000_000;

struct Reel<O, P> {
    records: Vec<(Instant, Recorded<O, P>)>,
    limit: usize,
    truncated: bool,
}

/// The shared tape; clone it to read while the controller writes.
///
/// Bounded: past its limit it keeps the prefix and marks itself truncated (a prefix of a
/// run still replays). A reconcile command is kept without its members, so the tape holds
/// no cached object alive.
pub struct Tape<O, P> {
    reel: Arc<Mutex<Reel<O, P>>>,
}

impl<O, P> Clone for Tape<O, P> {
    fn clone(&self) -> Self {
        Tape {
            reel: Arc::clone(&self.reel),
        }
    }
}

impl<O, P> std::fmt::Debug for Tape<O, P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let reel = self.reel();
        f.debug_struct("Tape")
            .field("records", &reel.records.len())
            .field("limit", &reel.limit)
            .field("truncated", &reel.truncated)
            .finish()
    }
}

impl<O, P> Default for Tape<O, P> {
    fn default() -> Self {
        Tape::with_limit(DEFAULT_LIMIT)
    }
}

impl<O, P> Tape<O, P> {
    /// A tape that keeps at most `limit` records.
    #[must_use]
    pub fn with_limit(limit: usize) -> Self {
        Tape {
            reel: Arc::new(Mutex::new(Reel {
                records: Vec::new(),
                limit,
                truncated: false,
            })),
        }
    }

    fn reel(&self) -> MutexGuard<'_, Reel<O, P>> {
        self.reel.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether records were dropped at the limit.
    #[must_use]
    pub fn truncated(&self) -> bool {
        self.reel().truncated
    }

    fn push(&self, now: Instant, recorded: impl FnOnce() -> Recorded<O, P>) {
        let mut reel = self.reel();
        if reel.records.len() < reel.limit {
            reel.records.push((now, recorded()));
        } else {
            reel.truncated = true;
        }
    }
}

impl<O: Clone, P: Clone> Tape<O, P> {
    /// Everything so far.
    #[must_use]
    pub fn all(&self) -> Vec<(Instant, Recorded<O, P>)> {
        self.reel().records.clone()
    }
}

impl<O, P> Recorder<O, P> for Tape<O, P>
where
    O: Clone + Send + Sync + 'static,
    P: Clone + Send + Sync + 'static,
{
    fn input(&mut self, now: Instant, input: &Input<O>) {
        self.push(now, || Recorded::Input(input.clone()));
    }

    fn command(&mut self, now: Instant, command: &Command<O, P>) {
        self.push(now, || {
            Recorded::Command(match command {
                Command::Reconcile {
                    ticket,
                    parent,
                    attempt,
                    ..
                } => Command::Reconcile {
                    ticket: *ticket,
                    parent: parent.clone(),
                    attempt: *attempt,
                    members: Vec::new(),
                },
                other => other.clone(),
            })
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reconcile_core::pod::PodView;

    #[test]
    fn past_its_limit_the_tape_keeps_the_prefix_and_says_so() {
        let tape = Tape::<PodView, String>::with_limit(2);
        let mut writer = tape.clone();
        writer.input(Instant::ZERO, &Input::Start);
        writer.input(Instant::ZERO, &Input::Timeout);
        assert!(!tape.truncated());
        writer.input(Instant::ZERO, &Input::Stop);
        assert!(tape.truncated());
        let kinds: Vec<_> = tape
            .all()
            .into_iter()
            .map(|(_, r)| match r {
                Recorded::Input(input) => input.kind(),
                Recorded::Command(_) => "command",
            })
            .collect();
        assert_eq!(kinds, ["start", "timeout"]);
    }
}
