//! World mode's fault handling: what each injected fault does to the worlds it targets, the
//! streams open on them, and the reconciles.

use reconcile_core::{Instant, StreamEnd, StreamId};

use crate::simulate::event_loop::{Action, Sim};
use crate::trace::Fault;

impl Sim<'_> {
    /// Ends each of `open` with a transport error, as a dropped connection would.
    pub(super) fn cut_streams(
        &mut self,
        now: Instant,
        open: Vec<StreamId>,
        error: &str,
        label: &'static str,
    ) {
        for s in open {
            self.schedule(
                now,
                Action::End(s, StreamEnd::TransportError(error.into()), label),
            );
        }
    }

    pub(super) fn fault(&mut self, fault: &Fault, targets: &[usize]) {
        let now = self.h.now();
        if self.worlds.len() > 1 && targets.len() == 1 {
            self.h.note(&format!("fault on S{}: {fault}", targets[0]));
        } else {
            self.h.note(&format!("fault: {fault}"));
        }
        let open = self.open_of(targets);
        match fault {
            Fault::WatchDrop => {
                self.cut_streams(now, open, "connection reset (injected)", "drop");
            }
            Fault::GoneStorm { count } => {
                for &t in targets {
                    self.worlds[t].gone_storm(*count);
                }
                for s in open {
                    let error = self.worlds[self.source_of(s)].error_frame(
                        410,
                        "Expired",
                        "too old resource version",
                    );
                    if self.initial_until.contains_key(&s) {
                        self.h
                            .count("streaming list: 410 during the initial events");
                    }
                    self.schedule(now, Action::Frame(s, error.clone()));
                    self.schedule(now, Action::End(s, StreamEnd::Clean, "after ERROR"));
                }
            }
            Fault::TooLarge { count } => {
                for &t in targets {
                    self.worlds[t].too_large_storm(*count);
                }
                self.cut_streams(now, open, "connection reset (injected)", "drop");
            }
            Fault::MalformedFrame { cursor } => {
                for &t in targets {
                    let frame = self.worlds[t].malformed_frame(now, *cursor);
                    for &s in &open {
                        if self.source_of(s) == t {
                            self.schedule(now, Action::Frame(s, frame.clone()));
                        }
                    }
                }
            }
            Fault::Restart { down } => {
                for &t in targets {
                    self.worlds[t].restart(now, *down);
                }
                self.cut_streams(now, open, "apiserver restarted", "restart");
            }
            Fault::Compact => {
                for &t in targets {
                    self.worlds[t].compact();
                }
            }
            Fault::ListFail { count, status } => {
                for &t in targets {
                    self.worlds[t].fail_lists(*count, *status);
                }
            }
            Fault::SlowReconcile { count, duration } => self.h.slow_reconciles(*count, *duration),
            Fault::FailReconcile { count } => self.h.fail_reconciles(*count),
            Fault::LoseChange { count } => self.lose = self.lose.saturating_add(*count),
            Fault::ClockJump { by } => {
                // The controller's clock, not the conversation: a recording says so, or its
                // replay would fire the timers the jump skipped (a streaming list's deadline).
                self.h.record_fault(fault);
                self.offset += *by;
                self.h.set_now(now + *by);
                self.h.count("clock jump");
            }
        }
    }
}
