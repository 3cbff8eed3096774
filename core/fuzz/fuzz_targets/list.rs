//! `cargo fuzz run list -s none` (from core/, on stable): the LIST body decoder on arbitrary
//! bytes, whole and streamed. Checked: no panic, and the same body pushed through the
//! streaming `ListDecoder` in chunks (sized by its first byte) decodes exactly as the whole
//! body does, or fails as it does.
#![no_main]

use libfuzzer_sys::fuzz_target;
use reconcile_core::list::{ListDecoder, parse_list};
use reconcile_core::pod::PodView;

fuzz_target!(|data: &[u8]| {
    let whole = parse_list::<PodView>(data);
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
        (Err(a), Err(_)) => {
            let _ = a.to_string();
        }
        _ => panic!("whole {whole:?} and streamed {streamed:?} disagree"),
    }
});
