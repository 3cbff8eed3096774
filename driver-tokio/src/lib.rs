//! # reconcile-tokio
//!
//! Runs the [`reconcile_core`] state machine on tokio, with `kube` for HTTP: a thin shell
//! that performs the core's commands (LIST, WATCH, reconcile) and feeds the results back.
//!
//! Add to `Cargo.toml`:
//!
//! ```toml
//! [dependencies]
//! reconcile-tokio = "0.1"
//! kube = { version = "5", default-features = false, features = ["client", "rustls-tls", "ring"] }
//! # The binary picks the Kubernetes version (k8s-openapi builds only with one picked).
//! k8s-openapi = { version = "0.29", default-features = false, features = ["latest"] }
//! tokio = { version = "1", features = ["macros", "rt-multi-thread"] }
//! ```
//!
//! `latest` is Kubernetes 1.37 in k8s-openapi 0.29, or pick `v1_33` to `v1_36` for the oldest
//! apiserver you run against; a library enables no version feature, only its dev-dependencies do.
//!
//! kube-runtime's model, one object per reconcile, with the source named by kube's `Api`:
//!
//! ```no_run
//! use std::sync::Arc;
//! use k8s_openapi::api::apps::v1::Deployment;
//! use kube::Api;
//! use reconcile_tokio::{Action, Controller, Reconcile, Source, default_error_policy};
//! use reconcile_tokio::ObjectKey;
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let client = kube::Client::try_default().await?;
//! let deployments = Api::<Deployment>::namespaced(client, "default");
//! Controller::for_objects(Source::from_api(deployments))
//!     .shutdown_on_signal()
//!     .run(
//!         |req: Reconcile<Deployment, ObjectKey>, _ctx: Arc<()>| async move {
//!             match req.object() {
//!                 Some(d) => println!("{}: {:?} replicas", req.parent(), d.spec.replicas),
//!                 None => println!("{} was deleted", req.parent()),
//!             }
//!             Ok::<_, kube::Error>(Action::await_change())
//!         },
//!         default_error_policy,
//!         Arc::new(()),
//!     )
//!     .await?;
//! # Ok(())
//! # }
//! ```
//!
//! The grouping model: pods grouped into cells by a label, as the compact `PodView`.
//!
//! ```no_run
//! use std::sync::Arc;
//! use reconcile_tokio::{Action, Controller, KeyMap, PodView, Reconcile, Source, default_error_policy};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let client = kube::Client::try_default().await?;
//! let source = Source::pods(client, Some("default")).labels("cell");
//! Controller::new(source, KeyMap::by_label("cell"))
//!     .concurrency(4)
//!     .shutdown_on_signal()
//!     .run(
//!         |cell: Reconcile<PodView, String>, _ctx: Arc<()>| async move {
//!             println!("{}: {} pods", cell.parent(), cell.members().len());
//!             Ok::<_, std::convert::Infallible>(Action::await_change())
//!         },
//!         default_error_policy,
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

pub mod endpoints;
pub mod runtime;
pub mod transport;

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
pub use runtime::{TokioRuntime, TokioTask, shutdown_signal};
pub use transport::{KubeTransport, KubeTransportOptions};

/// The controller on tokio with a `kube::Client`: [`Controller::new`](engine::Controller::new)
/// runs it on the ambient tokio runtime, and
/// [`shutdown_on_signal`](engine::Controller::shutdown_on_signal) stops it on SIGINT or
/// SIGTERM.
pub type Controller<O, P> = engine::Controller<O, P, TokioRuntime, KubeTransport>;

/// The standalone reflector on tokio ([`engine::Reflector`]): a source's cache with no
/// controller, which controllers subscribe to with
/// [`Controller::for_shared`](engine::Controller::for_shared).
pub type Reflector<O> = engine::Reflector<O, TokioRuntime, KubeTransport>;
