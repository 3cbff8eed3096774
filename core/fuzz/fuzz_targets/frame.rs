//! `cargo fuzz run frame -s none` (from core/, on stable): the watch frame and Status
//! decoders on arbitrary bytes. Checked: no panic; every error renders.
#![no_main]

use libfuzzer_sys::fuzz_target;
use reconcile_core::frame::{parse_frame, parse_status};
use reconcile_core::pod::PodView;

fuzz_target!(|data: &[u8]| {
    if let Err(e) = parse_frame::<PodView>(data) {
        let _ = e.to_string();
    }
    let _ = parse_status(data);
});
