//! The protobuf captured from a real kube-apiserver (`testdata/apiserver-protobuf`), as the
//! protobuf tests read it.

use reconcile_core::Object;
use reconcile_core::frame::WatchEvent;

/// A file of `testdata/apiserver-protobuf`.
pub fn fixture(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/../testdata/apiserver-protobuf/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The frames of a protobuf watch body: 4-byte big-endian lengths.
pub fn frames(mut body: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    while !body.is_empty() {
        let n = u32::from_be_bytes([body[0], body[1], body[2], body[3]]) as usize;
        out.push(&body[4..4 + n]);
        body = &body[4 + n..];
    }
    out
}

/// An event's object's resourceVersion as a number; 0 for an event without an object.
pub fn rv_of<O: Object>(event: &WatchEvent<O>) -> u64 {
    match event {
        WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) => o
            .object_resource_version()
            .and_then(|rv| rv.parse().ok())
            .unwrap_or(0),
        _ => 0,
    }
}

/// The LIST's resourceVersion the captures were taken at (`list-rv`).
pub fn list_rv() -> u64 {
    String::from_utf8(fixture("list-rv"))
        .expect("list-rv is text")
        .trim()
        .parse()
        .expect("list-rv is a number")
}
