//! # reconcile-smol
//!
//! Runs the [`reconcile_core`] state machine on smol, with no tokio runtime, reactor or
//! timer anywhere in the process: the same controller, builder and handle as
//! `reconcile-tokio` (both are `reconcile-engine`'s), on smol's executor and `async-io`'s
//! timers.
//!
//! Add to `Cargo.toml`:
//!
//! ```toml
//! [dependencies]
//! reconcile-smol = "0.1"
//! # The binary picks the Kubernetes version (k8s-openapi builds only with one picked).
//! k8s-openapi = { version = "0.29", default-features = false, features = ["latest"] }
//! ```
//!
//! smol itself is re-exported (`reconcile_smol::smol`); `latest` is Kubernetes 1.37 in k8s-openapi
//! 0.29, or pick `v1_33` to `v1_36` for the oldest apiserver you run against.
//!
//! ```no_run
//! use std::sync::Arc;
//! use reconcile_smol::{
//!     Action, Controller, KeyMap, PodView, Reconcile, SmolTransport, Source, default_error_policy,
//! };
//! use reconcile_smol::smol;
//!
//! # fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! smol::block_on(async {
//!     let transport = SmolTransport::infer().await?;
//!     let source = Source::pods(transport, Some("default")).labels("cell");
//!     let controller = Controller::new(source, KeyMap::by_label("cell"))
//!         .concurrency(4)
//!         .shutdown_on_signal();
//!     controller
//!         .run(
//!             |cell: Reconcile<PodView, String>, _ctx: Arc<()>| async move {
//!                 println!("{}: {} pods", cell.parent(), cell.members().len());
//!                 Ok::<_, std::convert::Infallible>(Action::await_change())
//!             },
//!             default_error_policy,
//!             Arc::new(()),
//!         )
//!         .await?;
//!     Ok(())
//! })
//! # }
//! ```
//!
//! The choreography (draining the core, routing LIST / WATCH responses, timers,
//! concurrent reconciles, the handle, recording) is the runtime-agnostic [`engine`]
//! (the `reconcile-engine` crate, re-exported; its docs list what it adds to the core);
//! this crate supplies only the smol pair:
//!
//! | module | what |
//! |---|---|
//! | [`runtime`] | [`SmolRuntime`]: `smol::spawn`, `async-io` timers, the clock; [`shutdown_signal`] via `async-signal` |
//! | [`transport`] | [`SmolTransport`]: kube's config, auth and TLS pieces on hyper over smol sockets |
//!
//! `tokio` stays in the dependency tree as a library (hyper and kube use `tokio::sync`),
//! but nothing here starts a tokio runtime. Where kube would refresh a token on tokio,
//! exec plugins run as smol child processes instead, and the `gcp` auth provider is
//! refused up front with [`ClientError::RefreshingAuth`]; see [`transport`].

pub mod endpoints;
pub mod runtime;
pub mod transport;

/// The smol this driver runs on (for `smol::block_on` and friends without a second
/// dependency line).
pub use smol;

pub use engine::{
    Action, ApiClient, ApiError, Cache, CacheSnapshot, ControllerMetrics, ElectionConfig,
    Endpoints, Error, ErrorPolicy, Handle, Leadership, Limits, OnLost, Predicate, Reconcile,
    ReconcileResult, Recorder, Results, Running, SharedSource, Shutdown, Source, Tape,
    TraceRecorder, default_error_policy, default_identity,
};
pub use reconcile_core::pod::PodView;
pub use reconcile_core::{KeyMap, KeyMapError, Object, ObjectKey, WatchParams};
pub use reconcile_engine as engine;

/// The names a controller needs, none of which collides with `kube::prelude`, `kube::api`,
/// `kube::runtime` or `kube::ResourceExt` when both are glob-imported. [`Controller`] and
/// [`Action`] are named as kube-runtime names its own, so they are imported by path.
pub mod prelude {
    pub use reconcile_core::pod::PodView;
    // The trait's methods without its name: `kube::api` has an `Object` of its own.
    pub use reconcile_core::Object as _;
    pub use reconcile_core::{KeyMap, KeyMapError, ObjectKey};
    pub use reconcile_engine::{
        ApiClient, ApiError, Cache, CacheSnapshot, Reconcile, Source, default_error_policy,
    };
}
pub use endpoints::EndpointsServer;
pub use runtime::{SmolRuntime, SmolTask, shutdown_signal};
pub use transport::{ClientError, ExecError, SmolTransport, TransportOptions};

/// The controller on smol with a [`SmolTransport`]:
/// [`Controller::new`](engine::Controller::new) runs it on smol's global executor, and
/// [`shutdown_on_signal`](engine::Controller::shutdown_on_signal) stops it on SIGINT or
/// SIGTERM.
pub type Controller<O, P> = engine::Controller<O, P, SmolRuntime, SmolTransport>;

/// The standalone reflector on smol ([`engine::Reflector`]): a source's cache with no
/// controller, which controllers subscribe to with
/// [`Controller::for_shared`](engine::Controller::for_shared).
pub type Reflector<O> = engine::Reflector<O, SmolRuntime, SmolTransport>;
