//! The one error type of this crate.

use std::path::PathBuf;
use std::time::Duration;

/// Everything that can go wrong while provisioning or using the environment.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No Go toolchain was found, so the pinned binaries cannot be built.
    #[error("cannot build the test binaries: {0}")]
    NoGo(String),
    /// `tests/go/build.sh` failed.
    #[error("tests/go/build.sh failed ({status}); log {log}:\n{tail}")]
    Build {
        /// How the script ended.
        status: String,
        /// Full build log.
        log: PathBuf,
        /// Last lines of the log.
        tail: String,
    },
    /// A file or process operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A child process (etcd, kube-apiserver, ...) exited while it should run.
    #[error("{name} exited ({status}); last lines of {log}:\n{tail}")]
    ChildExited {
        /// Which component.
        name: String,
        /// Its exit status.
        status: String,
        /// Its log file.
        log: PathBuf,
        /// Last lines of the log.
        tail: String,
    },
    /// A condition did not hold within its deadline.
    #[error("timed out after {timeout:?} waiting for {what}; last seen: {last}")]
    Timeout {
        /// What was awaited.
        what: String,
        /// How long we waited.
        timeout: Duration,
        /// The last observed state, as described by the condition.
        last: String,
    },
    /// The server answered with a non-success HTTP status.
    #[error("{method} {url}: HTTP {status}: {body}")]
    Api {
        /// Request method.
        method: String,
        /// Request URL.
        url: String,
        /// HTTP status code.
        status: u16,
        /// Response body (a `Status` object for the apiserver).
        body: String,
    },
    /// The request did not get an HTTP answer at all.
    #[error("{method} {url}: {source}")]
    Http {
        /// Request method.
        method: String,
        /// Request URL.
        url: String,
        /// The transport error.
        #[source]
        source: Box<ureq::Error>,
    },
    /// A body was not the JSON we expected.
    #[error("{what}: {reason}")]
    BadResponse {
        /// What was being parsed.
        what: String,
        /// Why it was rejected.
        reason: String,
    },
    /// Certificate or key generation failed.
    #[error("certificate generation: {0}")]
    Cert(#[from] rcgen::Error),
    /// A kubeconfig given in `RECONCILE_K8S_KUBECONFIG` cannot be used.
    #[error("kubeconfig {path}: {reason}")]
    Kubeconfig {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The operation needs a cluster this process provisioned itself.
    #[error("{0} needs an environment provisioned by this crate, not a reused cluster")]
    Unsupported(&'static str),
    /// Provisioning of the shared environment failed earlier in this process.
    #[error("the shared environment failed to start: {0}")]
    SharedFailed(String),
}

impl Error {
    /// The HTTP status if the apiserver (or etcd) answered with an error status.
    #[must_use]
    pub fn http_status(&self) -> Option<u16> {
        match self {
            Error::Api { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// True for `410 Gone`: the requested resourceVersion was compacted away.
    #[must_use]
    pub fn is_gone(&self) -> bool {
        self.http_status() == Some(410)
    }

    /// True for `404 Not Found`.
    #[must_use]
    pub fn is_not_found(&self) -> bool {
        self.http_status() == Some(404)
    }

    pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
        let what = what.into();
        move |source| Error::Io { what, source }
    }
}

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
