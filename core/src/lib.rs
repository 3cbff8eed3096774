//! # reconcile-core
//!
//! A level-triggered, Kubernetes-style reconcile loop as a pure state machine: client-go's
//! informer stack (reflector, store, work queue, retry) plus controller-runtime's controller,
//! with no clock, no I/O, no threads and no async.
//!
//! Add to `Cargo.toml`:
//!
//! ```toml
//! [dependencies]
//! reconcile-core = "0.1"
//! # The binary picks the Kubernetes version (k8s-openapi builds only with one picked);
//! # `default-features = false` leaves the Kubernetes types, and k8s-openapi, out.
//! k8s-openapi = { version = "0.29", default-features = false, features = ["latest"] }
//! ```
//!
//! A driver comes with it: `reconcile-tokio` or `reconcile-smol` (their front pages show their
//! lines).
//!
//! The driver (tokio, smol, the simulator, a test) owns the sockets, timers and reconcile
//! tasks; the core decides everything else. See [`ReconcileLoop`] for the contract: feed
//! each [`Input`] stamped with `now`, drain [`ReconcileLoop::poll_output`] until
//! [`Output::Timeout`], then sleep until that deadline or the next input.
//!
//! ```
//! use std::time::Duration;
//!
//! use reconcile_core::pod::PodView;
//! use reconcile_core::{
//!     Command, Config, Input, Instant, KeyMap, ListResponse, Outcome, Output, ReconcileLoop,
//!     WatchParams,
//! };
//!
//! let params = WatchParams::namespaced("default").labels("app=cell");
//! let config = Config::kubernetes(params, KeyMap::<PodView, String>::by_label("cell"));
//! let mut core = ReconcileLoop::new(config, Instant::ZERO)?;
//! let mut now = Instant::ZERO;
//! let mut inputs = vec![Input::Start];
//! let mut reconciled = Vec::new();
//! for _turn in 0..3 {
//!     // Feed everything that arrived, then drain until the core says how long to sleep.
//!     for input in inputs.drain(..) {
//!         core.handle_input(now, input);
//!     }
//!     loop {
//!         match core.poll_output() {
//!             Output::Command(Command::List { req, .. }) => {
//!                 // A driver sends the LIST; here the apiserver answers with one pod.
//!                 let body = r#"{"metadata":{"resourceVersion":"7"},"items":[{"metadata":
//!                     {"name":"a","namespace":"default","resourceVersion":"7","labels":{"cell":"c1"}}}]}"#;
//!                 let response = ListResponse::Response { status: 200, body: body.into() };
//!                 inputs.push(Input::List { req, response });
//!             }
//!             Output::Command(Command::Reconcile { ticket, parent, members, .. }) => {
//!                 // A driver runs the user's reconcile; its outcome is the next input.
//!                 reconciled.push((parent, members.len()));
//!                 inputs.push(Input::Reconciled { ticket, outcome: Outcome::Success });
//!             }
//!             Output::Command(_) => {} // watch, close, cancel: perform it, feed its answers back
//!             Output::Event(_) => {}   // log it
//!             Output::Timeout(_deadline) => break, // sleep until the deadline or the next input
//!         }
//!     }
//!     now = now + Duration::from_millis(10);
//! }
//! assert_eq!(reconciled, [("c1".to_owned(), 1)]);
//! # Ok::<(), reconcile_core::ConfigError>(())
//! ```
//!
//! Layers, from the bottom: each module uses only those above it in this table. The folders
//! group them by what they are: `wire/` what the apiserver's bytes mean, `vocabulary/` what
//! crosses the boundary, `source/` where objects come from and are kept, `controller/` what
//! the loop does with them.
//!
//! | module | concept | upstream |
//! |---|---|---|
//! | `time`, `string_map`, `hashing` | the injected clock's instants; small string maps; fixed-seed hashing | |
//! | `wire::format`, `wire::status`, `wire::list::budget` | JSON or protobuf; the parts of a `Status` that decide what follows; a decode's memory budget | `ContentType`, `metav1.Status` |
//! | `wire::protobuf::{codec, reader, schema, de, builtin}` | protobuf's codec type and errors, its field reader, the embedded schemas and the decoder of built-in types by them | apimachinery's protobuf serializer |
//! | `wire::object` | what a cached object is (every `kube::Resource` is one) | `kube::Resource` |
//! | [`pod`] | the partial Pod view, from JSON and from protobuf | core/v1 types |
//! | [`protobuf`] | Kubernetes protobuf: envelope, watch events, `Status`, list metadata | apimachinery's protobuf serializer |
//! | [`frame`] | watch frame and `Status` parsing | `watch.Event` decoding |
//! | [`list`] | LIST bodies, whole or decoded while they stream in | `List` decoding |
//! | `source::params` | what to LIST and WATCH | `watcher::Config` |
//! | `controller::{key_map, predicate, members}` | object → parent key, with ready-made maps that name themselves; which updates wake a parent; a parent's members and their snapshot | `EnqueueRequestForOwner`, `predicate` |
//! | `vocabulary::{ids, lease, input, output}` | ids; Lease requests and answers; inputs; commands, events, deadlines | (the sans-IO boundary) |
//! | `source`, `source::in_process` | store writes as values; in-process sources | `Store` write methods |
//! | `source::store` | cache with a parent index; a change log a driver keeps a copy in step with | `cache.Store`, `DeltaFIFO.Replace` |
//! | `source::reflector` | cursor, LIST / WATCH, relist | `cache.Reflector` |
//! | `source::secondary` | sources of other kinds: own reflector and store, objects mapped to parents | `Owns`, `Watches` |
//! | [`election`], [`metrics`] | leader election on a Lease; the loop's metrics | `leaderelection`, controller-runtime's metrics |
//! | [`shard`] | parent keys split across replicas, a Lease per shard, balanced by membership Leases | timebertt's controller sharding, KEP-5866's `shardRange` |
//! | `controller::{queue, retry}` | dedup queue; per-key backoff | `workqueue`, rate limiter |
//! | `controller::own_writes` | a key waits until its sources' cursors reach its own writes | KEP-5647's consistency store |
//! | `controller::config` | settings and their bounds | `Options` |
//! | `controller::reconcile_loop` | lifecycle, sync barrier, dispatch at drain, resync | controller-runtime `Controller` |
//! | `step_line` | one readable line per step, for snapshots and the simulator | |

mod controller;
pub mod election;
mod hashing;
pub mod metrics;
pub mod shard;
mod source;
mod step_line;
mod string_map;
mod time;
mod vocabulary;
mod wire;

pub use wire::{frame, list, pod, protobuf};

pub use controller::config::{
    Config, ConfigError, DEFAULT_MAX_OWN_WRITES, DEFAULT_OWN_WRITES_WAIT, ParentsBy,
    SecondaryConfig, SourceConfig,
};
pub use controller::key_map::{KeyBy, KeyByParseError, KeyMap, KeyMapError};
pub use controller::members::{Members, MembersIntoIter, MembersIter};
pub use controller::predicate::Predicate;
pub use controller::reconcile_loop::{Lifecycle, ReconcileLoop, Stats};
pub use controller::retry::Backoff;
pub use election::{ElectionConfig, Leadership, OnLost};
pub use metrics::Metrics;
pub use shard::{ShardBy, ShardConfig, ShardKey, Sharding};
pub use source::params::{InitialListStrategy, WatchParams};
pub use source::reflector::{MAX_LISTING_BYTES, MAX_LISTING_ITEMS};
pub use source::store::{CacheChange, Store};
pub use source::transform::Transform;

/// Ready-made [`Transform`]s, and what they strip.
pub mod transform {
    pub use crate::source::transform::LAST_APPLIED_ANNOTATION;
    #[cfg(feature = "kube")]
    pub use crate::source::transform::{strip_last_applied, strip_managed_fields};
}
pub use step_line::StepLine;
pub use string_map::StringMap;
pub use time::Instant;
pub use vocabulary::{
    Command, Deadline, Event, InitialEventsFailure, Input, LeaseRequest, LeaseResponse,
    ListFailure, ListResponse, Outcome, Output, OwnWrite, Related, RelistReason, RequestId,
    SourceEvent, SourceId, StreamEnd, StreamId, StreamingFallback, Ticket, Untracked, Wake,
    WatchRetryReason,
};
pub use wire::format::WireFormat;
pub use wire::object::{Object, ObjectKey, OwnerRef};
