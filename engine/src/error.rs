//! What can go wrong when running a controller.

use reconcile_core::ConfigError;

/// A controller could not run, or stopped without doing what was asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A setting is out of bounds.
    #[error("invalid controller configuration: {0}")]
    Config(#[from] ConfigError),
    /// `start` was awaited but the controller stopped before its first sync.
    #[error("the controller stopped before its first sync")]
    StoppedBeforeSync,
    /// The driver task panicked (a bug in the driver, never in reconcile: a reconcile's
    /// panic only fails that run).
    #[error("the driver task panicked")]
    Panicked,
    /// The controller has stopped; nothing can be pushed to it any more.
    #[error("the controller is not running")]
    NotRunning,
}
