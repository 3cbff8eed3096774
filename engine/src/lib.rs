//! # reconcile-engine
//!
//! The runtime-agnostic driver of [`reconcile_core`]: everything but spawning, sleeping, the
//! clock and HTTP.
//!
//! Add to `Cargo.toml`:
//!
//! ```toml
//! [dependencies]
//! reconcile-engine = "0.1"
//! # The binary picks the Kubernetes version (k8s-openapi builds only with one picked).
//! k8s-openapi = { version = "0.29", default-features = false, features = ["latest"] }
//! ```
//!
//! A controller usually depends on a driver (`reconcile-tokio`, `reconcile-smol`), which
//! re-exports this crate as `engine`; depend on it directly to write a runtime of your own, or one
//! controller body over any runtime.
//!
//! Built on futures-lite and async-channel only, so any runtime can host it by implementing
//! [`Runtime`] (spawn, sleep, clock) and [`Transport`] (send a request, stream the body), as
//! quinn hosts its protocol with a file per runtime. `reconcile-tokio` (tokio, `kube::Client`)
//! and `reconcile-smol` (smol, hyper over smol sockets) are the two pairs in this workspace;
//! each re-exports this crate as its `engine` module.
//!
//! What the engine adds to the core:
//! - LIST / WATCH URLs from kube-core's `Request` (label selector, `timeoutSeconds`,
//!   `allowWatchBookmarks`); watch bodies are split into raw lines for the core, and a LIST
//!   body is decoded as it arrives, on its own task;
//! - a read-idle timeout on every watch (`timeoutSeconds` + a margin) and on LIST bodies;
//! - reconciles as tasks, at most the core's concurrency, each in a `reconcile` span with
//!   its key and attempt; a panicking reconcile counts as failed;
//! - the core's deadlines on the runtime's timers, with the clock as the judge;
//! - a [`Handle`] that stops from anywhere and pushes in-process events.
//!
//! | module | concept |
//! |---|---|
//! | [`runtime`] | the runtime trait, and [`ShutdownSignal`] for SIGINT / SIGTERM |
//! | [`transport`] | the HTTP trait and kube-core request building |
//! | [`lines`] | body → raw watch lines |
//! | [`source`] | where objects come from: a kube resource type's collection, a hand-made URL, in-process |
//! | [`reconcile`] | what a reconcile gets ([`Reconcile`]) and returns ([`Action`]); the error policy |
//! | [`cache`] | the cache outside the driver: a snapshot per reconcile, a live [`Cache`] reader |
//! | [`controller`] | the builder, `run` / `start`, `Running` |
//! | [`streams`] | any `Stream` of objects or store writes as a controller's source ([`Controller::for_stream`]) |
//! | [`shared`] | shared sources ([`Controller::for_shared`]) and the standalone [`Reflector`] |
//! | [`api`] | [`ApiClient`]: get, create, replace, patch, `patch_status`, delete of one resource type over any transport |
//! | [`handle`] | stop, wait, read the cache, push |
//! | [`writes`] | the writes a reconcile made, recorded for read your own writes |
//! | [`finalizer`](mod@finalizer) | kube-runtime's finalizer helper over [`ApiClient`]: [`finalizer::Event`] `Apply` / `Cleanup`, a JSON patch with a `test` op |
//! | [`events`] | kube-runtime's events [`Recorder`](events::Recorder) over any transport: `events.k8s.io/v1` Events with series |
//! | [`recorder`] | the tap for trace recording: every [`Input`](reconcile_core::Input) fed and [`Command`](reconcile_core::Command) issued |
//! | [`tape`] | an in-memory recorder |
//! | [`trace_recorder`] | the recorder writing `reconcile-trace` traces, replayable in `reconcile-sim` |
//! | `driver` | the choreography: drain, route, time |
//! | `example` | the `cell-pool` example's body, over any runtime and transport (feature `example`) |

pub mod api;
pub mod cache;
pub mod controller;
mod driver;
pub mod election;
pub mod endpoints;
pub mod error;
pub mod events;
#[cfg(feature = "example")]
pub mod example;
#[cfg(feature = "exec")]
pub mod exec;
pub mod finalizer;
mod future_slots;
pub mod handle;
pub mod lines;
pub mod metrics;
pub mod reconcile;
pub mod recorder;
pub mod results;
pub mod runtime;
pub mod shared;
pub mod source;
pub mod streams;
pub mod tape;
pub mod trace_recorder;
pub mod transport;
pub mod writes;

pub use api::{ApiClient, ApiError};
pub use cache::{Cache, CacheSnapshot, NeverReady, ShareStats};
pub use controller::{Controller, ParentKey, Running};
pub use driver::{Limits, Shutdown};
pub use election::default_identity;
pub use endpoints::Endpoints;
pub use error::Error;
pub use finalizer::finalizer;
pub use handle::Handle;
pub use metrics::ControllerMetrics;
pub use reconcile::{Action, ErrorPolicy, Reconcile, default_error_policy};
pub use reconcile_core::{ElectionConfig, Leadership, OnLost, Predicate};
/// What a [`Tape`] keeps: an input fed or a command issued (from `reconcile-trace`).
pub use reconcile_trace::Recorded;
pub use recorder::{Recorder, SourceResource};
pub use results::{ReconcileResult, Results};
pub use runtime::{BoxFuture, Runtime, ShutdownSignal, Task};
pub use shared::{Reflector, SharedSource, Whole};
pub use source::{IntoSource, Source};
pub use tape::Tape;
pub use trace_recorder::TraceRecorder;
pub use transport::{BodyStream, Requests, Transport, TransportError};
pub use writes::Written;
