//! What the protobuf tests share: a WATCH body's frames, and the captures they keep as
//! fixtures in `testdata/apiserver-protobuf`.

use std::path::Path;

/// The frames of a protobuf WATCH body (`;stream=watch`): each after its 4-byte big-endian
/// length. A body cut inside a prefix or a frame panics: it came whole from the apiserver.
///
/// # Panics
/// On a cut body.
#[must_use]
pub fn protobuf_frames(mut body: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    while !body.is_empty() {
        assert!(body.len() >= 4, "a cut prefix");
        let n = u32::from_be_bytes([body[0], body[1], body[2], body[3]]) as usize;
        assert!(body.len() >= 4 + n, "a cut frame");
        out.push(&body[4..4 + n]);
        body = &body[4 + n..];
    }
    out
}

/// Writes `bytes` as `testdata/apiserver-protobuf/<dir>/<name>` when
/// `RECONCILE_WRITE_PROTOBUF_FIXTURES` is set (`dir` empty: the folder itself); otherwise
/// does nothing.
///
/// # Panics
/// When the file cannot be written.
pub fn keep_capture(dir: &str, name: &str, bytes: &[u8]) {
    if std::env::var_os("RECONCILE_WRITE_PROTOBUF_FIXTURES").is_none() {
        return;
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/apiserver-protobuf")
        .join(dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(name), bytes).unwrap();
}
