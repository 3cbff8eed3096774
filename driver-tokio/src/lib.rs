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
//! The choreography (draining the core, routing LIST / WATCH responses, timers,
//! concurrent reconciles, the handle, recording) is the runtime-agnostic [`engine`]
//! (the `reconcile-engine` crate, re-exported; its docs list what it adds to the core);
//! this crate supplies only the tokio pair:
//!
//! | module | what |
//! |---|---|
//! | [`runtime`] | [`TokioRuntime`]: `tokio::spawn`, tokio timers, tokio's clock (paused time in tests applies); [`shutdown_signal`] via `tokio::signal` |
//! | [`transport`] | [`KubeTransport`]: the engine's requests through a `kube::Client` (kubeconfig or in-cluster config, TLS and auth from kube) |
//!
//! Both run on the ambient tokio runtime: `#[tokio::main]`, or any runtime with the time
//! driver enabled.

pub mod runtime;
pub mod transport;

pub use engine::{Action, Error, Handle, Limits, Recorder, Running, Source, Tape, TraceRecorder};
pub use reconcile_engine as engine;
pub use runtime::{TokioRuntime, TokioTask, shutdown_signal};
pub use transport::KubeTransport;

/// The controller on tokio with a `kube::Client`: [`Controller::new`](engine::Controller::new)
/// runs it on the ambient tokio runtime, and
/// [`shutdown_on_signal`](engine::Controller::shutdown_on_signal) stops it on SIGINT or
/// SIGTERM.
pub type Controller<O, P> = engine::Controller<O, P, TokioRuntime, KubeTransport>;
