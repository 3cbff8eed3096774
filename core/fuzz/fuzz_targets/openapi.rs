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

/// The bytes as one object's message, under a budget and without, compared as `view`
/// shows them (`PartialObjectMeta` has no `PartialEq`).
fn bounded<O: Object, T: PartialEq + std::fmt::Debug>(data: &[u8], view: fn(O) -> T) {
    let codec = O::protobuf().expect("a built-in type has a codec");
    match ((codec.decode)(data, 0, BUDGET), (codec.decode)(data, 0, u64::MAX)) {
        (Ok((bounded, charged)), Ok((free, charged_free))) => {
            assert_eq!(view(bounded), view(free));
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

/// Metadata only: what a `PartialObjectMeta` holds.
type Meta = kube_core::PartialObjectMeta<Pod>;

fn meta_view(meta: Meta) -> (Option<kube_core::TypeMeta>, kube_core::ObjectMeta) {
    (meta.types, meta.metadata)
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
    bounded::<Pod, _>(data, |o| o);
    bounded::<Deployment, _>(data, |o| o);
    bounded::<Secret, _>(data, |o| o);
    bounded::<Meta, _>(data, meta_view);
    if let Err(e) = parse_frame_as::<Meta>(data, WireFormat::Protobuf) {
        let _ = e.to_string();
    }
    let body = if protobuf::is_protobuf(data) {
        data.to_vec()
    } else {
        [&protobuf::MAGIC[..], data].concat()
    };
    let chunk = usize::from(data.first().copied().unwrap_or(1)).max(1);
    listed::<Pod>(&body, chunk);
    listed::<Deployment>(&body, chunk);
});
