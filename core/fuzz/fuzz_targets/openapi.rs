//! `cargo fuzz run openapi -s none` (from core/, on stable): protobuf into k8s-openapi's
//! types by the embedded Kubernetes schemas (issue 16), on arbitrary bytes, seeded with real
//! LISTs of 34 kinds (testdata/apiserver-protobuf/kinds); metadata only (`PartialObjectMeta`)
//! too. Checked: no panic; every error
//! renders; an object decoded under a budget is the one decoded without, charged the same
//! and within the budget, and fails under it only for its size; a LIST body decodes streamed
//! in chunks exactly as whole.
#![no_main]

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Pod, Secret};
use libfuzzer_sys::fuzz_target;
use reconcile_core::frame::parse_frame_as;
use reconcile_core::list::{ListDecoder, parse_list};
use reconcile_core::protobuf::{self, ProtobufErrorKind};
use reconcile_core::{Object, WireFormat};

const BUDGET: u64 = 4096;

/// The bytes as one object's message, under a budget and without.
fn bounded<O: Object + PartialEq + std::fmt::Debug>(data: &[u8]) {
    let codec = O::protobuf().expect("a built-in type has a codec");
    match ((codec.decode)(data, 0, BUDGET), (codec.decode)(data, 0, u64::MAX)) {
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
}

/// The bytes as one `PartialObjectMetadata`, under a budget and without (it has no
/// `PartialEq`: what it holds is compared).
fn bounded_metadata(data: &[u8]) {
    type Meta = kube_core::PartialObjectMeta<Pod>;
    let codec = Meta::protobuf().expect("metadata only has a codec");
    match ((codec.decode)(data, 0, BUDGET), (codec.decode)(data, 0, u64::MAX)) {
        (Ok((bounded, charged)), Ok((free, charged_free))) => {
            assert_eq!(
                (bounded.types, bounded.metadata),
                (free.types, free.metadata)
            );
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
    if let Err(e) = parse_frame_as::<Meta>(data, WireFormat::Protobuf) {
        let _ = e.to_string();
    }
}

/// The bytes as a LIST body, whole and in chunks.
fn listed<O: Object + PartialEq + std::fmt::Debug>(body: &[u8], chunk: usize) {
    let whole = parse_list::<O>(body);
    let mut decoder = ListDecoder::<O>::new();
    let streamed = body
        .chunks(chunk)
        .try_for_each(|piece| decoder.push(piece))
        .and_then(|()| decoder.finish());
    assert_eq!(whole, streamed);
    if let Err(e) = &whole {
        let _ = e.to_string();
    }
}

fuzz_target!(|data: &[u8]| {
    if let Err(e) = parse_frame_as::<Pod>(data, WireFormat::Protobuf) {
        let _ = e.to_string();
    }
    bounded::<Pod>(data);
    bounded::<Deployment>(data);
    bounded::<Secret>(data);
    bounded_metadata(data);
    let body = if protobuf::is_protobuf(data) {
        data.to_vec()
    } else {
        [&protobuf::MAGIC[..], data].concat()
    };
    let chunk = usize::from(data.first().copied().unwrap_or(1)).max(1);
    listed::<Pod>(&body, chunk);
    listed::<Deployment>(&body, chunk);
});
