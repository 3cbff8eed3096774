//! A real Kubernetes control plane on loopback for the e2e suites.
//!
//! [`K8sEnv`] runs etcd, two kube-apiservers against it (watch cache on and
//! off), kube-controller-manager (namespace, garbage-collector and
//! service-account controllers) and kwok in place of a kubelet, all as local
//! processes built from pinned Go modules by `tests/go/build.sh`. Nothing is a
//! hand-written fake: the API semantics under test (resourceVersions, watch
//! timeouts, `410 Gone`, relists) are the real apiserver's.
//!
//! The crate depends on nothing from the reconcile crates and starts no async
//! runtime (all I/O is blocking), so it can be verified on its own and used
//! under any driver.
//!
//! Environment variables:
//! - `RECONCILE_K8S_KEEP=1`: leave the environment up, print its kubeconfigs.
//! - `RECONCILE_K8S_KUBECONFIG=path`: reuse an existing cluster.
//! - `RECONCILE_K8S_REQUIRE=1` (default when `CI` is set): a failed
//!   provisioning fails tests instead of skipping them.
//! - `RECONCILE_K8S_CACHE=dir`: binary cache root (read by `build.sh`).
//! - `RECONCILE_K8S_BIN_DIR=dir`: use prebuilt binaries, skip `build.sh`.
//!
//! See `docs/testing.md` for what kwok does and does not reproduce.

mod bins;
mod captures;
mod certs;
mod client;
mod env;
mod error;
mod process;
mod wait;

pub use bins::{Binaries, build_script, ensure as ensure_binaries};
pub use captures::{keep_capture, protobuf_frames};
pub use client::{
    Client, KWOK_NODE, Watch, WatchEvent, WatchParams, encode_query, pod_manifest, pod_phase,
    resource_version,
};
pub use env::{ApiServer, ExtraApiServer, K8sEnv, condition_true, require, shared_or_skip};
pub use error::{Error, Result};
pub use wait::wait_for;
