//! `cargo fuzz run protobuf -s none` (from core/, on stable): the Kubernetes protobuf
//! decoders (issue 16) on arbitrary bytes, seeded with real protobuf (core/fuzz/seeds/
//! protobuf). Checked: no panic; every error renders; a decoded object frame has a
//! resourceVersion; a Pod decoded under a budget is the one decoded without, charged the
//! same and within the budget, and fails under it only for its size; a LIST body (the bytes,
//! after the magic if they lack it) decodes streamed in chunks exactly as whole.
#![no_main]

use libfuzzer_sys::fuzz_target;
use reconcile_core::frame::{WatchEvent, parse_frame_as, parse_status};
use reconcile_core::list::{ListDecoder, parse_list};
use reconcile_core::pod::PodView;
use reconcile_core::protobuf::{self, ProtobufErrorKind};
use reconcile_core::{Object, WireFormat};

const BUDGET: u64 = 4096;

fuzz_target!(|data: &[u8]| {
    match parse_frame_as::<PodView>(data, WireFormat::Protobuf) {
        Ok(WatchEvent::Added(p) | WatchEvent::Modified(p) | WatchEvent::Deleted(p)) => {
            assert!(p.object_resource_version().is_some_and(|rv| !rv.is_empty()));
        }
        Ok(_) => {}
        Err(e) => {
            let _ = e.to_string();
        }
    }
    match (
        protobuf::pod_view(data, 0, BUDGET),
        protobuf::pod_view(data, 0, u64::MAX),
    ) {
        (Ok((bounded, charged)), Ok((free, charged_free))) => {
            assert_eq!(bounded, free);
            assert_eq!(charged, charged_free);
            assert!(charged <= BUDGET);
        }
        (Err(e), Ok((_, charged))) => {
            assert!(
                matches!(e.kind, ProtobufErrorKind::TooLarge { .. }) && charged > BUDGET,
                "{e}"
            );
        }
        (Err(a), Err(_)) => {
            let _ = a.to_string();
        }
        (Ok(_), Err(e)) => panic!("decoded under a budget, not without: {e}"),
    }
    let body = if protobuf::is_protobuf(data) {
        data.to_vec()
    } else {
        [&protobuf::MAGIC[..], data].concat()
    };
    let whole = parse_list::<PodView>(&body);
    let chunk = usize::from(data.first().copied().unwrap_or(1)).max(1);
    let mut decoder = ListDecoder::<PodView>::new();
    let streamed = body
        .chunks(chunk)
        .try_for_each(|piece| decoder.push(piece))
        .and_then(|()| decoder.finish());
    assert_eq!(whole, streamed);
    if let Err(e) = &whole {
        let _ = e.to_string();
    }
    let _ = parse_status(&body);
});
