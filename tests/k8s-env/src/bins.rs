//! Locating (and, on a fresh machine, building) the pinned binaries.
//!
//! `tests/go/build.sh` is the single source of the build: it knows the pins,
//! the flags and the cache layout. This module only runs it and reads the
//! directory it prints. The script itself takes a file lock, so concurrent
//! test binaries wait for one build instead of racing.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;

use crate::error::{Error, Result};
use crate::process::tail;

/// Directory with `kube-apiserver`, `kube-controller-manager`, `etcd` and `kwok`.
#[derive(Debug, Clone)]
pub struct Binaries {
    dir: PathBuf,
}

impl Binaries {
    /// Path of one binary, e.g. `path("etcd")`.
    #[must_use]
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// The directory holding the binaries.
    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Binaries {
    /// The names of the binaries the environment runs.
    pub const NAMES: [&str; 4] = ["etcd", "kube-apiserver", "kube-controller-manager", "kwok"];

    fn checked(self) -> Result<Self> {
        for name in Self::NAMES {
            let path = self.path(name);
            if !path.is_file() {
                return Err(Error::Io {
                    what: format!("looking for {}", path.display()),
                    source: std::io::Error::from(std::io::ErrorKind::NotFound),
                });
            }
        }
        Ok(self)
    }
}

/// `tests/go/build.sh` in this checkout.
#[must_use]
pub fn build_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../go/build.sh")
}

/// Returns the cached binaries, running `tests/go/build.sh` first (a no-op
/// when the cache is warm; a cold build takes many minutes).
///
/// `RECONCILE_K8S_BIN_DIR` skips the script and uses that directory as is.
///
/// # Errors
/// [`Error::NoGo`] without a Go toolchain, [`Error::Build`] if the build fails.
pub fn ensure() -> Result<Binaries> {
    static BUILD: Mutex<()> = Mutex::new(());
    if let Some(dir) = std::env::var_os("RECONCILE_K8S_BIN_DIR") {
        return Binaries { dir: dir.into() }.checked();
    }
    let _one_build_per_process = BUILD.lock().unwrap_or_else(|e| e.into_inner());
    let script = build_script();
    let log = std::env::temp_dir().join(format!("reconcile-k8s-build-{}.log", std::process::id()));
    let log_file =
        std::fs::File::create(&log).map_err(Error::io(format!("creating {}", log.display())))?;
    // Straight to stderr, not through print macros: libtest captures those, and
    // a silent 20-minute first test looks like a hang.
    let _ = writeln!(
        std::io::stderr(),
        "reconcile-k8s-env: checking/building test binaries with {} (log: {})",
        script.display(),
        log.display()
    );
    let output = Command::new("bash")
        .arg(&script)
        .stdin(Stdio::null())
        .stderr(log_file)
        .output()
        .map_err(Error::io(format!("running bash {}", script.display())))?;
    let status = output.status;
    if status.code() == Some(3) {
        return Err(Error::NoGo(tail(&log, 3)));
    }
    if !status.success() {
        return Err(Error::Build {
            status: status.to_string(),
            tail: tail(&log, 40),
            log,
        });
    }
    let _ = std::fs::remove_file(&log);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let dir = stdout.lines().last().unwrap_or("").trim();
    if dir.is_empty() || !Path::new(dir).is_dir() {
        return Err(Error::BadResponse {
            what: format!("output of {}", script.display()),
            reason: format!("expected the binary directory as the last line, got {stdout:?}"),
        });
    }
    Binaries { dir: dir.into() }.checked()
}
