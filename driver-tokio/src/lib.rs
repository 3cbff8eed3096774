//! # reconcile-tokio
//!
//! Runs the [`reconcile_core`] state machine on tokio, with `kube` for HTTP: a thin shell
//! that performs the core's commands (LIST, WATCH, reconcile) and feeds the results back.
//!
//! ```no_run
//! use std::sync::Arc;
//! use reconcile_core::{KeyMap, pod::PodView};
//! use reconcile_tokio::{Action, Controller, KubeTransport, Source};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let client = kube::Client::try_default().await?;
//! let source = Source::pods(client, Some("default")).labels("cell");
//! let controller = Controller::new(source, KeyMap::by_label("cell"))
//!     .concurrency(4)
//!     .shutdown_on_signal();
//! controller
//!     .run(
//!         |cell: String, members: Vec<Arc<PodView>>, _ctx: Arc<()>| async move {
//!             println!("{cell}: {} pods", members.len());
//!             Ok::<_, std::convert::Infallible>(Action::await_change())
//!         },
//!         Arc::new(()),
//!     )
//!     .await?;
//! # Ok(())
//! # }
//! ```
//!
//! The choreography lives in [`engine`] (the `reconcile-engine` crate, re-exported), which
//! knows no runtime: it is built on futures-lite against a small [`engine::Runtime`] trait
//! (spawn, sleep, clock) and an [`engine::Transport`] trait (send a request, stream the
//! body). This crate supplies the tokio pair ([`TokioRuntime`], [`KubeTransport`]).
//!
//! What the driver adds to the core:
//! - LIST / WATCH URLs from kube-core's `Request` (label selector, `timeoutSeconds`,
//!   `allowWatchBookmarks`); bodies are split into raw lines for the core, never decoded here;
//! - a read-idle timeout on every watch (`timeoutSeconds` + a margin) and on LIST bodies;
//! - reconciles as tasks, at most the core's concurrency, each in a `reconcile` span with
//!   its key and attempt; a panicking reconcile counts as failed;
//! - the core's deadlines on the runtime's timers, with the clock as the judge;
//! - a [`Handle`] that stops from anywhere and pushes in-process events.

pub use reconcile_engine as engine;

mod kube_transport;
mod tokio_runtime;

pub use engine::{Action, Error, Handle, Limits, Recorder, Running, Source, Tape, TraceRecorder};
pub use kube_transport::KubeTransport;
pub use tokio_runtime::{TokioRuntime, TokioTask, shutdown_signal};

/// The controller on tokio with a `kube::Client`: [`Controller::new`](engine::Controller::new)
/// runs it on the ambient tokio runtime, and
/// [`shutdown_on_signal`](engine::Controller::shutdown_on_signal) stops it on SIGINT or
/// SIGTERM.
pub type Controller<O, P> = engine::Controller<O, P, TokioRuntime, KubeTransport>;
