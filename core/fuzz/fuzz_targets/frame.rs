//! `cargo +nightly fuzz run frame` (from core/): the frame and LIST parsers on arbitrary bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use reconcile_core::frame::{parse_frame, parse_list, parse_status};
use reconcile_core::list_decoder::ListDecoder;
use reconcile_core::pod::PodView;

fuzz_target!(|data: &[u8]| {
    if let Err(e) = parse_frame::<PodView>(data) {
        let _ = e.to_string();
    }
    let whole = parse_list::<PodView>(data);
    let _ = parse_status(data);
    // The same body streamed in chunks (sized by its first byte) must decode the same.
    let chunk = usize::from(data.first().copied().unwrap_or(1)).max(1);
    let mut decoder = ListDecoder::<PodView>::new();
    let streamed = data
        .chunks(chunk)
        .try_for_each(|piece| decoder.push(piece))
        .and_then(|()| decoder.finish());
    match (&whole, &streamed) {
        (Ok(a), Ok(b)) => {
            assert_eq!(a.resource_version, b.resource_version);
            assert_eq!(a.items, b.items);
            assert_eq!(a.skipped, b.skipped);
        }
        (Err(_), Err(_)) => {}
        _ => panic!("whole {whole:?} and streamed {streamed:?} disagree"),
    }
});
