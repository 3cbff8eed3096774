//! # reconcile-bench
//!
//! Issue 7: our core and tokio driver side by side with kube-runtime 5 and client-go, on one
//! machine, in one run, on the same inputs. `bash bench/run.sh` (or
//! `cargo bench -p reconcile-bench`) runs everything and regenerates `docs/benchmarks.md`.
//!
//! | module | what |
//! |---|---|
//! | [`workload`] | real-shaped pods (and the ReplicaSets owning them) and watch frames |
//! | [`replay`] | the loopback replay server |
//! | [`peers`] | the Rust peers, each in its own process |
//! | [`replica_set`] | our peers' partial ReplicaSet view (the two-source scenario) |
//! | [`scale`] | the core alone at scale: relist, a 100k-member parent, resync |
//! | `runs` | what one measurement is: settings, peer binaries and processes, results, medians |
//! | [`orchestrate`] | every phase in order, several times: replay server, scale, the real apiserver |
//! | [`real`] | the real apiserver: its pods, paging, throughput under a load generator |
//! | [`doc`] | `docs/benchmarks.md` and its SVG plot |
//! | [`doc_scale`] | its scaling section and log-log plot |
//! | [`cli`] | the command line both binaries share |

pub mod cli;
pub mod doc;
pub mod doc_scale;
pub mod orchestrate;
pub mod peers;
pub mod real;
pub mod replay;
pub mod replica_set;
mod runs;
pub mod scale;
pub mod workload;

/// Everything that can go wrong in the harness.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A file or socket failed.
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    /// The captured trace or a setting is unusable.
    #[error("input: {0}")]
    Input(String),
    /// A peer failed or printed no report.
    #[error("peer: {0}")]
    Peer(String),
    /// A request through the driver's transport failed.
    #[error("transport: {0}")]
    Transport(#[from] reconcile_tokio::engine::TransportError),
    /// The real cluster could not be provisioned or used.
    #[error("cluster: {0}")]
    Cluster(String),
}
