//! Minimization: delta debugging (Zeller's ddmin) over a failing seed's records, or any
//! list of items, within a bounded number of runs.

use crate::explore::run::run;
use crate::trace::{Entry, Trace};

/// Runs the minimizer may spend on one failing seed.
pub const MAX_MINIMIZE_RUNS: usize = 2_000;

/// Delta debugging (Zeller's ddmin) over the trace's records: the smallest subset found that
/// still breaks the same invariant.
#[must_use]
pub fn minimize(trace: &Trace, invariant: &str, long: bool) -> Trace {
    minimize_with(trace, invariant, |t| run(t, long))
}

/// [`minimize`] with the run of one candidate trace given (a busy seed's, say).
pub fn minimize_with(
    trace: &Trace,
    invariant: &str,
    run: impl Fn(&Trace) -> crate::simulate::RunReport,
) -> Trace {
    let fails = |entries: &[Entry]| {
        let candidate = Trace {
            entries: entries.to_vec(),
            ..trace.clone()
        };
        run(&candidate)
            .violations
            .iter()
            .any(|v| v.invariant == invariant)
    };
    Trace {
        entries: ddmin(&trace.entries, fails),
        ..trace.clone()
    }
}

/// Delta debugging (Zeller's ddmin) over `items`: the smallest subset found, within
/// [`MAX_MINIMIZE_RUNS`] runs, for which `fails` still holds.
pub fn ddmin<T: Clone>(items: &[T], fails: impl FnMut(&[T]) -> bool) -> Vec<T> {
    ddmin_within(items, MAX_MINIMIZE_RUNS, fails)
}

/// [`ddmin`] within `max_runs` runs of `fails`.
pub fn ddmin_within<T: Clone>(
    items: &[T],
    max_runs: usize,
    mut fails: impl FnMut(&[T]) -> bool,
) -> Vec<T> {
    let mut entries = items.to_vec();
    let mut n = 2usize;
    let mut runs = 0;
    while entries.len() >= 2 && runs < max_runs {
        let chunk = entries.len().div_ceil(n);
        let mut reduced = None;
        for i in 0..n {
            let lo = i * chunk;
            if lo >= entries.len() {
                break;
            }
            let hi = (lo + chunk).min(entries.len());
            let complement: Vec<T> = entries[..lo]
                .iter()
                .chain(&entries[hi..])
                .cloned()
                .collect();
            runs += 1;
            if fails(&complement) {
                reduced = Some(complement);
                break;
            }
        }
        if let Some(complement) = reduced {
            entries = complement;
            n = (n - 1).max(2);
        } else {
            if n >= entries.len() {
                break;
            }
            n = (n * 2).min(entries.len());
        }
    }
    if entries.len() == 1 && fails(&[]) {
        entries.clear();
    }
    entries
}
