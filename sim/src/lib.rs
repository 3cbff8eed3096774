//! # reconcile-sim
//!
//! Deterministic simulation for [`reconcile_core`]: replay what a real apiserver said, or
//! let a simulated apiserver answer whatever the core asks while faults are injected, and
//! throw thousands of seeded fault schedules at the same controller.
//!
//! Add to `Cargo.toml`:
//!
//! ```toml
//! [dev-dependencies]
//! # The deterministic runtime, the simulated cluster and the test kit, without the CLI.
//! reconcile-sim = { version = "0.1", default-features = false, features = ["runtime"] }
//! # A test binary is a final build: it picks the Kubernetes version.
//! k8s-openapi = { version = "0.29", default-features = false, features = ["latest"] }
//! ```
//!
//! The command line installs with `cargo install reconcile-sim`.
//!
//! | module | file(s) | concept |
//! |---|---|---|
//! | [`trace`] | (the `reconcile-trace` crate) | the JSON Lines trace format: header, records, faults |
//! | [`import`] | `import.rs` | other capture formats into traces, recognised by content |
//! | [`meta_view`] | `meta_view.rs` | how a secondary source's objects are decoded: metadata, every owner |
//! | [`describe`], [`schedule`], [`rng`] | `describe.rs`, `schedule.rs`, `rng.rs` | step lines' short descriptions, when each record happens, the seeded generator |
//! | [`harness`] | `harness/`: stepping (`mod.rs`), `render.rs`, `reconciles.rs`, `invariants.rs`, `wakes.rs` | drives the core one input per step, renders lines, runs reconciles, checks invariants |
//! | [`starvation`] | `starvation.rs` | the priority queue's starvation invariant: a low key n-th in line goes within (k + 1) · n dispatches, every wake is served |
//! | [`world`], [`wire`], [`lease`], [`selector`] | `apiserver/`: `world.rs`, `wire.rs`, `lease.rs` (selectors from `reconcile-trace`) | the simulated apiserver: history, compaction, LIST / WATCH, selectors, protobuf, the Lease |
//! | [`cluster`] | `cluster/`: `mod.rs`, `kinds.rs`, `store.rs`, `path.rs`, `params.rs`, `serve.rs`, `read.rs`, `watch.rs`, `write.rs`, `patch.rs`, `apply.rs`, `delete.rs`, `gc.rs`, `status.rs` | a simulated cluster for any kind: reads, writes, patches, apply, `/status`, finalizers, GC, over HTTP or typed |
//! | `runtime` (feature `runtime`) | `runtime/`: `mod.rs`, `executor.rs`, `transport.rs`, `tap.rs` | a deterministic `Runtime` and `Transport` for the engine: seeded executor, virtual time, the cluster behind the transport, a run log |
//! | [`replay`](mod@replay) | `replay.rs` | replay mode: recorded answers in order, divergence reports |
//! | [`simulate`](mod@simulate) | `simulate/`: `options.rs`, `event_loop.rs`, `faults.rs`, `quiescence.rs`, `validate.rs`, `report.rs` | world mode: a discrete-event loop over the world, the core and the faults |
//! | [`explore`] | `explore/`: `options.rs`, `profiles.rs`, `generate.rs`, `many.rs`, `busy.rs`, `run.rs`, `minimize.rs`, `report.rs` | swarm testing: seeded workloads and fault profiles, invariants, minimization |
//! | [`election`], [`clock`] | `election/`: `scenario.rs`, `generate.rs`, `state.rs`, `run.rs`, `terms.rs`, `network.rs`, `pods.rs`, `faults.rs`, `explore.rs`; `clock.rs` | election mode: candidates on drifting clocks share a simulated Lease; no two leaders, a leader once faults heal |
//! | [`report`](mod@report) | `report/` | a run as a self-contained HTML timeline: lanes per stream and parent, zoom, step lines |
//! | `capture` (feature `capture`) | `capture/` | record a cluster's LIST and WATCH of one resource type as a trace, redacted |
//! | the `reconcile-sim` binary (feature `cli`) | `cli/`: `main.rs`, `capture.rs`, `io.rs` | the command line |
//!
//! No file imports one that imports it back: the apiserver and the shared modules know no
//! mode, the modes know the harness and the apiserver, and the HTML report sits above replay
//! and world mode. Explore and election meet through explore's options, minimization and
//! report files, which election's own exploration uses and which use nothing of election's
//! but the default drift. A new concept gets its own folder beside these (the cluster above; next a
//! deterministic executor and an operator test kit), with any old
//! path kept by re-export.
//!
//! Every run is a pure function of its trace, its options and its seed: no clock is read, no
//! hash order reaches the output, and two runs give byte-identical output.
//!
//! The `reconcile-sim` command line (and clap with it) is the default `cli` feature; with
//! `default-features = false` the crate is the library and the trace format alone.

mod apiserver;
#[cfg(feature = "capture")]
pub mod capture;
pub mod clock;
pub mod cluster;
pub mod describe;
pub mod election;
pub mod explore;
pub mod harness;
pub mod import;
pub mod meta_view;
pub mod replay;
pub mod report;
pub mod rng;
#[cfg(feature = "runtime")]
pub mod runtime;
#[cfg(feature = "runtime")]
pub mod scenario;
pub mod schedule;
pub mod simulate;
pub mod starvation;

pub use apiserver::{lease, wire, world};

/// The trace format, from its own crate ([`reconcile_trace`]).
pub use reconcile_trace as trace;
pub use reconcile_trace::selector;

pub use harness::{Render, Violation};
pub use replay::{Observed, ReplayOptions, SecondaryObserved, replay, replay_observed};
pub use simulate::{RunReport, SimOptions, simulate, simulate_recorded};
pub use trace::{Trace, TraceError};
