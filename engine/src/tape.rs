//! An in-memory [`Recorder`]: every input and command of a controller run, owned, to read
//! while the controller runs (tests, debugging) and to write the run as a trace afterwards.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use reconcile_core::{Command, Input, Instant, ListResponse, Members, StreamEnd};
use reconcile_trace::Recorded;

use super::recorder::Recorder;

/// Records kept by [`Tape::default`]: an e2e case makes a few thousand.
pub const DEFAULT_LIMIT: usize = 1_000_000;

/// Payload bytes (LIST bodies, watch lines, error bodies) kept by [`Tape::default`].
pub const DEFAULT_MAX_BYTES: usize = 256 << 20;

struct Reel<O, P> {
    records: Vec<(Instant, Recorded<O, P>)>,
    limit: usize,
    max_bytes: usize,
    bytes: usize,
    truncated: bool,
}

/// The bytes an input carries off the wire, which is what makes a tape large.
fn payload<O>(input: &Input<O>) -> usize {
    match input {
        Input::List {
            response: ListResponse::Response { body, .. },
            ..
        } => body.len(),
        Input::WatchLine { line, .. } => line.len(),
        Input::WatchEnd {
            end: StreamEnd::HttpStatus { body, .. },
            ..
        } => body.len(),
        _ => 0,
    }
}

/// The shared tape; clone it to read while the controller writes.
///
/// Bounded in records and in payload bytes: past either limit it keeps the prefix and marks
/// itself truncated (a prefix of a run still replays). A reconcile command is kept without its members, so the tape holds
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
        Tape::with_limits(DEFAULT_LIMIT, DEFAULT_MAX_BYTES)
    }
}

impl<O, P> Tape<O, P> {
    /// A tape that keeps at most `limit` records.
    #[must_use]
    pub fn with_limit(limit: usize) -> Self {
        Tape::with_limits(limit, DEFAULT_MAX_BYTES)
    }

    /// A tape that keeps at most `limit` records and `max_bytes` of payload.
    #[must_use]
    pub fn with_limits(limit: usize, max_bytes: usize) -> Self {
        Tape {
            reel: Arc::new(Mutex::new(Reel {
                records: Vec::new(),
                limit,
                max_bytes,
                bytes: 0,
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

    fn push(&self, now: Instant, bytes: usize, recorded: impl FnOnce() -> Recorded<O, P>) {
        let mut reel = self.reel();
        // Once truncated, nothing more is kept: the tape stays a prefix of the run.
        if !reel.truncated
            && reel.records.len() < reel.limit
            && reel.bytes.saturating_add(bytes) <= reel.max_bytes
        {
            reel.bytes += bytes;
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
        self.push(now, payload(input), || Recorded::Input(input.clone()));
    }

    fn command(&mut self, now: Instant, command: &Command<O, P>) {
        self.push(now, 0, || {
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
                    members: Members::new(),
                    related: Vec::new(),
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

    #[test]
    fn past_its_byte_limit_the_tape_keeps_the_prefix_and_says_so() {
        let tape = Tape::<PodView, String>::with_limits(100, 10);
        let mut writer = tape.clone();
        let stream = {
            // A stream id is minted by a core: take the one its first WATCH names.
            let mut core = reconcile_core::ReconcileLoop::new(
                reconcile_core::Config::kubernetes(
                    reconcile_core::WatchParams::default(),
                    reconcile_core::KeyMap::<PodView, String>::by_name(),
                ),
                Instant::ZERO,
            )
            .unwrap();
            core.handle_input(Instant::ZERO, Input::Start);
            let Some(reconcile_core::Output::Command(Command::List { req, .. })) =
                Some(core.poll_output())
            else {
                panic!("a LIST first")
            };
            let body = br#"{"metadata":{"resourceVersion":"1"},"items":[]}"#;
            let response = ListResponse::Response {
                status: 200,
                body: bytes::Bytes::from_static(body),
            };
            core.handle_input(Instant::ZERO, Input::List { req, response });
            loop {
                match core.poll_output() {
                    reconcile_core::Output::Command(Command::Watch { stream, .. }) => break stream,
                    reconcile_core::Output::Timeout(_) => panic!("a WATCH after the LIST"),
                    _ => {}
                }
            }
        };
        let line = |s: &'static str| Input::WatchLine {
            stream,
            line: bytes::Bytes::from_static(s.as_bytes()),
        };
        writer.input(Instant::ZERO, &line("123456"));
        writer.input(Instant::ZERO, &line("1234"));
        assert!(!tape.truncated());
        writer.input(Instant::ZERO, &line("1"));
        writer.input(Instant::ZERO, &Input::Stop);
        assert!(tape.truncated());
        assert_eq!(
            tape.all().len(),
            2,
            "the prefix within 10 bytes, nothing after it"
        );
    }
}
