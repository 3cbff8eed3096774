//! `cargo +nightly fuzz run frame` (from core/): the frame and LIST parsers on arbitrary bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use reconcile_core::frame::{parse_frame, parse_list, parse_status};
use reconcile_core::pod::PodView;

fuzz_target!(|data: &[u8]| {
    if let Err(e) = parse_frame::<PodView>(data) {
        let _ = e.to_string();
    }
    let _ = parse_list::<PodView>(data);
    let _ = parse_status(data);
});
