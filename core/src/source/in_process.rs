//! The in-process source's stream lifecycle: a registry that lives in the same process
//! feeds the store through the loop, opening each stream with a whole-world `Replace`.

use std::time::Duration;

use crate::time::Instant;
use crate::vocabulary::{Command, Deadline, Event, Outbox, Output, SourceEvent, StreamId, Wake};

#[derive(Debug)]
enum Phase {
    Idle,
    Open { stream: StreamId, replaced: bool },
    Waiting { at: Instant },
    Stopped,
}

/// An in-process source: each stream must open with a `Replace`, and a stream that does not,
/// or that ends, is reopened after `retry_delay` (the outer retry net, for a stream that dies for good).
#[derive(Debug)]
pub(crate) struct InProcessSource {
    retry_delay: Duration,
    phase: Phase,
    /// The resourceVersion the open stream's events reflect, as it last said
    /// ([`Input::SourceCursor`](crate::Input::SourceCursor)); `None` before it said one.
    cursor: Option<String>,
    /// A stream of this source has carried a cursor: from then on the source mirrors a
    /// collection with one, and a reopened stream has no cursor until it sends one
    /// (as a reflector has none while it relists).
    mirrors: bool,
    /// Inputs for a stream that is no longer open.
    pub(crate) stale_inputs: u64,
}

impl InProcessSource {
    pub(crate) fn new(retry_delay: Duration) -> Self {
        InProcessSource {
            retry_delay,
            phase: Phase::Idle,
            cursor: None,
            mirrors: false,
            stale_inputs: 0,
        }
    }

    pub(crate) fn start<O, P>(&mut self, stream: StreamId, out: &mut Outbox<O, P>) {
        self.cursor = None;
        self.phase = Phase::Open {
            stream,
            replaced: false,
        };
        out.push_back(Output::Command(Command::OpenSource { stream }));
    }

    /// Returns the event to apply, or `None` if it is stale or refused.
    pub(crate) fn handle_event<O, P>(
        &mut self,
        now: Instant,
        stream: StreamId,
        event: SourceEvent<O>,
        out: &mut Outbox<O, P>,
    ) -> Option<SourceEvent<O>> {
        let Phase::Open {
            stream: current,
            replaced,
        } = &mut self.phase
        else {
            self.stale_inputs += 1;
            out.push_back(Output::Event(Event::Stale {
                input: "source event",
            }));
            return None;
        };
        if *current != stream {
            self.stale_inputs += 1;
            out.push_back(Output::Event(Event::Stale {
                input: "source event",
            }));
            return None;
        }
        if !*replaced && !event.is_replace() {
            out.push_back(Output::Event(Event::SourceNotSynced { stream }));
            out.push_back(Output::Command(Command::CloseSource { stream }));
            self.phase = Phase::Waiting {
                at: now + self.retry_delay,
            };
            return None;
        }
        *replaced = true;
        Some(event)
    }

    /// Takes the open stream's cursor. Refused (stale) for another stream, and before the
    /// stream's first `Replace`: a cursor means the store holds the collection up to it.
    pub(crate) fn handle_cursor<O, P>(
        &mut self,
        stream: StreamId,
        resource_version: String,
        out: &mut Outbox<O, P>,
    ) {
        match self.phase {
            Phase::Open {
                stream: current,
                replaced: true,
            } if current == stream => {
                self.mirrors = true;
                self.cursor = Some(resource_version);
            }
            _ => {
                self.stale_inputs += 1;
                out.push_back(Output::Event(Event::Stale {
                    input: "source cursor",
                }));
            }
        }
    }

    /// The open stream's cursor, as its last [`Input::SourceCursor`](crate::Input::SourceCursor)
    /// said.
    pub(crate) fn cursor(&self) -> Option<&str> {
        self.cursor.as_deref()
    }

    /// Whether a stream of it has ever carried a cursor.
    pub(crate) fn mirrors(&self) -> bool {
        self.mirrors
    }

    pub(crate) fn handle_end<O, P>(
        &mut self,
        now: Instant,
        stream: StreamId,
        error: Option<String>,
        out: &mut Outbox<O, P>,
    ) {
        match self.phase {
            Phase::Open {
                stream: current, ..
            } if current == stream => {
                self.cursor = None;
                out.push_back(Output::Event(Event::SourceEnded { stream, error }));
                self.phase = Phase::Waiting {
                    at: now + self.retry_delay,
                };
            }
            _ => {
                self.stale_inputs += 1;
                out.push_back(Output::Event(Event::Stale {
                    input: "source end",
                }));
            }
        }
    }

    /// Reopens when the wait is over.
    pub(crate) fn handle_timeout<O, P>(
        &mut self,
        now: Instant,
        next_stream: impl FnOnce() -> StreamId,
        out: &mut Outbox<O, P>,
    ) {
        if let Phase::Waiting { at } = self.phase
            && at <= now
        {
            self.start(next_stream(), out);
        }
    }

    pub(crate) fn deadline(&self) -> Option<Deadline> {
        match self.phase {
            Phase::Waiting { at } => Some(Deadline {
                at,
                wake: Wake::SourceReopen,
            }),
            _ => None,
        }
    }

    pub(crate) fn stop<O, P>(&mut self, out: &mut Outbox<O, P>) {
        if let Phase::Open { stream, .. } = self.phase {
            out.push_back(Output::Command(Command::CloseSource { stream }));
        }
        self.phase = Phase::Stopped;
    }
}
