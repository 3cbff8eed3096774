//! `core/proto/k8s.binpb`, the descriptor set the core decodes built-in types with, is the
//! vendored `.proto` files compiled: this test compiles them again (protox, pure Rust) and
//! compares. `RECONCILE_REGENERATE_PROTO=1` writes it instead, after
//! `scripts/vendor-k8s-protos.sh` vendored new schemas.

use std::path::{Path, PathBuf};

use prost::Message;

fn proto_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("proto")
}

/// Every vendored `generated.proto`, as import paths (`k8s.io/api/core/v1/generated.proto`),
/// sorted so that the descriptor set is the same on every machine.
fn vendored_files(dir: &Path, root: &Path, out: &mut Vec<String>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("core/proto is readable")
        .map(|e| e.expect("a directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            vendored_files(&path, root, out);
        } else if path.extension().is_some_and(|e| e == "proto") {
            let relative = path.strip_prefix(root).expect("under core/proto");
            out.push(relative.to_string_lossy().replace('\\', "/"));
        }
    }
}

fn compile() -> Vec<u8> {
    let root = proto_dir();
    let mut files = Vec::new();
    vendored_files(&root.join("k8s.io"), &root, &mut files);
    assert!(
        files.len() > 50,
        "the vendored schemas are there: {files:?}"
    );
    let mut set = protox::compile(&files, [&root]).expect("the vendored schemas compile");
    // Comments are not needed to decode, and would only make the file larger.
    for file in &mut set.file {
        file.source_code_info = None;
    }
    set.encode_to_vec()
}

#[test]
fn the_embedded_descriptor_set_is_the_vendored_schemas_compiled() {
    let compiled = compile();
    let path = proto_dir().join("k8s.binpb");
    if std::env::var_os("RECONCILE_REGENERATE_PROTO").is_some() {
        std::fs::write(&path, &compiled).expect("core/proto/k8s.binpb is writable");
        return;
    }
    let embedded = std::fs::read(&path).expect("core/proto/k8s.binpb exists");
    assert!(
        embedded == compiled,
        "core/proto/k8s.binpb ({} bytes) is not the vendored schemas compiled ({} bytes): \
         run RECONCILE_REGENERATE_PROTO=1 cargo test -p reconcile-core --test protobuf_schema",
        embedded.len(),
        compiled.len()
    );
}
