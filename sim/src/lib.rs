//! # reconcile-sim
//!
//! Deterministic simulation for [`reconcile_core`]: replay what a real apiserver said, or
//! let a simulated apiserver answer whatever the core asks while faults are injected, and
//! throw thousands of seeded fault schedules at the same controller.
//!
//! | module | concept |
//! |---|---|
//! | [`trace`] | the JSON Lines trace format: header, records, faults |
//! | [`import`] | other capture formats into traces, recognised by content |
//! | [`meta_view`] | how a secondary source's objects are decoded: metadata, every owner |
//! | [`harness`] | drives the core one input per step, renders lines, runs reconciles, checks invariants |
//! | [`replay`](mod@replay) | replay mode: recorded answers in order, divergence reports |
//! | [`world`], [`selector`] | the simulated apiserver: history, compaction, LIST / WATCH, selectors |
//! | [`cluster`] | a simulated cluster for any kind: reads, writes, patches, apply, `/status`, finalizers, GC, over HTTP or typed |
//! | [`simulate`](mod@simulate) | world mode: a discrete-event loop over the world, the core and the faults |
//! | [`explore`] | swarm testing: seeded workloads and fault profiles, invariants, minimization |
//! | `capture` (feature `capture`) | record a cluster's LIST and WATCH of one resource type as a trace, redacted |
//! | [`report`](mod@report) | a run as a self-contained HTML timeline: lanes per stream and parent, zoom, step lines |
//! | [`starvation`] | the priority queue's starvation invariant: a low key n-th in line goes within (k + 1) · n dispatches, every wake is served |
//! | [`election`], [`lease`], [`clock`] | election mode: candidates on drifting clocks share a simulated Lease; no two leaders, a leader once faults heal |
//!
//! Every run is a pure function of its trace, its options and its seed: no clock is read, no
//! hash order reaches the output, and two runs give byte-identical output.
//!
//! The `reconcile-sim` command line (and clap with it) is the default `cli` feature; with
//! `default-features = false` the crate is the library and the trace format alone.

#[cfg(feature = "capture")]
pub mod capture;
pub mod clock;
pub mod cluster;
pub mod describe;
pub mod election;
pub mod explore;
pub mod harness;
pub mod import;
pub mod lease;
pub mod meta_view;
pub mod replay;
pub mod report;
pub mod rng;
pub mod schedule;
pub mod simulate;
pub mod starvation;
pub mod wire;
pub mod world;

/// The trace format, from its own crate ([`reconcile_trace`]).
pub use reconcile_trace as trace;
pub use reconcile_trace::selector;

pub use harness::{Render, Violation};
pub use replay::{ReplayOptions, replay};
pub use simulate::{RunReport, SimOptions, simulate};
pub use trace::{Trace, TraceError};
