//! # reconcile-engine
//!
//! The runtime-agnostic driver of [`reconcile_core`]: everything but spawning, sleeping, the
//! clock and HTTP.
//!
//! Built on futures-lite and async-channel only, so any runtime can host it by implementing
//! [`Runtime`] (spawn, sleep, clock) and [`Transport`] (send a request, stream the body), as
//! quinn hosts its protocol with a file per runtime. `reconcile-tokio` (tokio, `kube::Client`)
//! and `reconcile-smol` (smol, hyper over smol sockets) are the two pairs in this workspace;
//! each re-exports this crate as its `engine` module.
//!
//! | module | concept |
//! |---|---|
//! | [`runtime`] | the runtime trait, and [`ShutdownSignal`] for SIGINT / SIGTERM |
//! | [`transport`] | the HTTP trait and kube-core request building |
//! | [`lines`] | body → raw watch lines |
//! | [`controller`] | the builder, `Action`, `Source`, `Running` |
//! | [`handle`] | stop, wait, push |
//! | [`recorder`] | the tap for trace recording |
//! | [`tape`] | an in-memory recorder |
//! | `sim_trace` | the recorder writing `reconcile-sim` traces (feature `sim-trace`) |
//! | `driver` | the choreography: drain, route, time |

pub mod controller;
mod driver;
pub mod error;
pub mod handle;
pub mod lines;
pub mod recorder;
pub mod runtime;
#[cfg(feature = "sim-trace")]
pub mod sim_trace;
pub mod tape;
pub mod transport;

pub use controller::{Action, Controller, Running, Source};
pub use driver::Limits;
pub use error::Error;
pub use handle::Handle;
pub use recorder::{Record, Recorder};
pub use runtime::{BoxFuture, Runtime, ShutdownSignal, Task};
pub use tape::{Tape, Taped};
pub use transport::{BodyStream, Requests, Transport, TransportError};
