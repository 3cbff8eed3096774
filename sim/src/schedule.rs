//! When each record happens: its own `t`, or right after the previous one, shifted by the
//! `advance` records before it (an advance happens at the end of the time it skips).

use reconcile_core::Instant;

use crate::trace::{Entry, Record};

/// Each entry with the instant it happens at, in file order (non-decreasing).
#[must_use]
pub fn timeline(entries: &[Entry]) -> Vec<(Instant, &Entry)> {
    let mut cursor = Instant::ZERO;
    entries
        .iter()
        .map(|entry| {
            if let Some(at) = entry.at {
                cursor = cursor.max(at);
            }
            if let Record::Advance { by } = entry.record {
                cursor = cursor + by;
            }
            (cursor, entry)
        })
        .collect()
}
