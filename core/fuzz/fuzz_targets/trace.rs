//! `cargo fuzz run trace -s none` (from core/, on stable): any bytes as a capture, through
//! import (every format, recognised by content), write, read and replay, and world mode.
//!
//! Checked: bytes that are not UTF-8 are an error naming a line; whatever imports is written
//! as one line per record and reads back with every wire payload byte for byte; write, read,
//! write gives the same bytes; replay and world mode end (small step budgets) without a
//! panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use reconcile_sim::harness::Render;
use reconcile_sim::replay::{ReplayOptions, replay};
use reconcile_sim::simulate::{SimOptions, simulate, validate};
use reconcile_sim::trace::{Record, Trace, utf8_text};

fuzz_target!(|data: &[u8]| {
    let text = match utf8_text("fuzz", data) {
        Ok(text) => text,
        Err(e) => {
            assert!(e.line >= 1, "{e}");
            return;
        }
    };
    let Ok(trace) = reconcile_sim::import::import("fuzz", text, None) else {
        return;
    };
    let written = trace.to_jsonl();
    assert_eq!(
        written.lines().count(),
        trace.entries.len() + 1,
        "a record spans lines"
    );
    let again = Trace::parse("again", &written).expect("a written trace reads back");
    assert_eq!(again.entries.len(), trace.entries.len());
    for (a, b) in trace.entries.iter().zip(&again.entries) {
        // In-process source objects are written compacted when they span lines; every other
        // record, wire payloads above all, comes back exactly.
        if !matches!(a.record, Record::Source(_)) {
            assert_eq!(a.record, b.record);
        }
        assert_eq!((a.at, &a.note, a.source), (b.at, &b.note, b.source));
    }
    assert_eq!(again.to_jsonl(), written, "write, read, write");
    let _ = replay(
        &again,
        &ReplayOptions {
            render: Render::Text,
            max_steps: 2_000,
        },
    );
    let opts = SimOptions {
        render: Render::Quiet,
        max_steps: 2_000,
        check: true,
        ..SimOptions::default()
    };
    if validate(&again, &opts).is_ok() {
        let _ = simulate(&again, &opts);
    }
});
