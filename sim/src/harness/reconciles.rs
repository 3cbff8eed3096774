//! The reconciles the core asks for: run for their scripted (or faulted) outcome and
//! duration, completed when due.

use std::time::Duration;

use reconcile_core::{Input, Instant, Outcome, OwnWrite};

use crate::trace::ScriptedOutcome;

use crate::harness::*;

impl Harness {
    /// From `from` on, every reconcile the core dispatches is acknowledged as a success but
    /// never recorded as run: a driver bug, injected to show the convergence check fires.
    pub fn lose_dispatches_from(&mut self, from: Instant) {
        self.lose_dispatches_from = Some(from);
    }

    /// Queues a scripted outcome for the next reconcile of `parent` (any when `None`).
    pub fn script(&mut self, parent: Option<String>, outcome: ScriptedOutcome, d: Duration) {
        self.script_writing(parent, outcome, d, Vec::new());
    }

    /// As [`Harness::script`], for a run that wrote `writes` (a recorded run's): its outcome
    /// goes back as [`Input::ReconciledWrote`], so the core holds the key for them.
    pub fn script_writing(
        &mut self,
        parent: Option<String>,
        outcome: ScriptedOutcome,
        d: Duration,
        writes: Vec<OwnWrite>,
    ) {
        self.scripts.push_back(Script {
            parent,
            outcome,
            duration: d,
            writes,
        });
    }

    /// The next `count` reconciles take `d`.
    pub fn slow_reconciles(&mut self, count: u32, d: Duration) {
        self.slow.extend(std::iter::repeat_n(d, count as usize));
    }

    /// The next `count` reconciles fail.
    pub fn fail_reconciles(&mut self, count: u32) {
        self.failing = self.failing.saturating_add(count);
    }

    /// The earliest reconcile completion.
    #[must_use]
    pub fn next_completion(&self) -> Option<Instant> {
        self.completions.first().map(|(at, _)| *at)
    }

    /// Reconciles running now.
    #[must_use]
    pub fn running(&self) -> usize {
        self.running.len()
    }

    /// Completes the earliest reconcile if it is due at `now`.
    pub fn complete_due(&mut self) -> Option<StepIo> {
        let &(at, ticket) = self.completions.first()?;
        if at > self.now {
            return None;
        }
        self.completions.remove(&(at, ticket));
        let running = self.running.remove(&ticket)?;
        let outcome = running.outcome;
        let writes = running.writes;
        let parent = running.parent;
        if let Some(s) = &mut self.starvation {
            s.step.completed = Some(parent.clone());
        }
        match &outcome {
            Outcome::Error(_) => *self.failures_in_a_row.entry(parent.clone()).or_default() += 1,
            _ => {
                self.failures_in_a_row.remove(&parent);
            }
        }
        let text = if self.rendering() {
            let how = match &outcome {
                Outcome::Success => "ok".to_owned(),
                Outcome::RequeueAfter(d) => format!("requeue-after {}s", d.as_secs_f64()),
                Outcome::Error(e) => format!("error ({e})"),
                Outcome::ErrorHandled {
                    error,
                    requeue_after: Some(d),
                } => format!("error-handled requeue-after {}s ({error})", d.as_secs_f64()),
                Outcome::ErrorHandled {
                    error,
                    requeue_after: None,
                } => format!("error-handled await-change ({error})"),
            };
            let wrote: String = writes
                .iter()
                .map(|w| format!(" wrote {}@{}", w.source, w.resource_version))
                .collect();
            format!("reconciled {ticket} {parent} {how}{wrote}")
        } else {
            String::new()
        };
        let input = if writes.is_empty() {
            Input::Reconciled { ticket, outcome }
        } else {
            Input::ReconciledWrote {
                ticket,
                outcome,
                writes,
            }
        };
        Some(self.step_input(|| text, input))
    }

    pub(super) fn outcome_for(&mut self, parent: &str) -> (Outcome, Duration, Vec<OwnWrite>) {
        let scripted = self
            .scripts
            .iter()
            .position(|s| s.parent.as_deref().is_none_or(|p| p == parent));
        if let Some(i) = scripted
            && let Some(Script {
                outcome,
                duration: d,
                writes,
                ..
            }) = self.scripts.remove(i)
        {
            let outcome = match outcome {
                ScriptedOutcome::Ok => Outcome::Success,
                ScriptedOutcome::Error(e) => Outcome::Error(e),
                ScriptedOutcome::RequeueAfter(d) => Outcome::RequeueAfter(d),
                ScriptedOutcome::ErrorHandled {
                    error,
                    requeue_after,
                } => Outcome::ErrorHandled {
                    error,
                    requeue_after,
                },
            };
            return (outcome, d, writes);
        }
        let duration = self.slow.pop_front().unwrap_or(self.default_duration);
        if self.failing > 0 {
            self.failing -= 1;
            return (
                Outcome::Error("injected failure".into()),
                duration,
                Vec::new(),
            );
        }
        (Outcome::Success, duration, Vec::new())
    }
}
