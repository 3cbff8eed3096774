//! # reconcile-examples
//!
//! Controllers of kube's own types, each written once over any [`Runtime`] and
//! [`Transport`], with a few lines of `main` per runtime:
//!
//! | example | what it shows |
//! |---|---|
//! | [`deployment_annotate`] | `Controller::for_objects` over `Deployment`s; a merge patch through [`ApiClient`] only when the annotation differs, so it settles |
//! | [`crd_status`] | a `#[derive(CustomResource)]` type, its CRD installed through the API, status written with `patch_status` only when it differs |
//! | [`configmap_generator`] | an operator (kube-runtime's `configmapgen`): a custom resource that `owns` the ConfigMap it generates, written by server-side apply with an owner reference only when the child differs; the child's changes wake its owner, and the garbage collector removes it with its owner |
//! | [`dynamic_configmaps`] | a `DynamicObject` controller named by an `ApiResource`, writing back through the same `ApiResource` |
//! | [`secret_metadata`] | a metadata-only watch (`PartialObjectMeta<Secret>`): no secret data ever enters the process |
//!
//! and the ports of kube-rs's examples of the same names (issue 29):
//!
//! | example | what it shows |
//! |---|---|
//! | [`pod_reflector`] | a cache of pods slimmed by `Source::modify`, read every five seconds; each pod that comes in is logged |
//! | [`crd_reflector`] | the same over a custom resource whose CRD it installs |
//! | [`secret_syncer`] | the finalizer helper: each labelled ConfigMap copied to a Secret, deleted before the ConfigMap may go |
//! | [`shared_stream_controllers`] | one watch of pods (a `Reflector`) shared by a pod controller (`for_shared`) and a Deployment controller that owns pods through it (`owns_shared_any_owner`) |
//!
//! kube-rs's `configmapgen_controller` is [`configmap_generator`] (its "press enter to
//! reconcile everything" is [`stdin_lines`]). The differences from each original are in
//! `docs/from-kube-runtime.md`, "Porting kube-rs's examples".
//!
//! ```text
//! cargo run -p reconcile-examples --example deployment-annotate-tokio -- [--namespace NS] [--selector SEL]
//! cargo run -p reconcile-examples --example deployment-annotate-smol -- [--namespace NS] [--selector SEL]
//! ```
//!
//! and the same for `crd-status`, `configmap-generator`, `dynamic-configmaps`,
//! `secret-metadata`, `pod-reflector`, `crd-reflector`, `secret-syncer` and
//! `shared-stream-controllers`. The smol mains start no tokio runtime (`smol::block_on`,
//! `SmolTransport`); the tokio ones use `#[tokio::main]` and a `kube::Client`.
//!
//! Each module has the same shape, so a test can drive the very body a main runs (the
//! e2e suite's `kinds` cases do, on both drivers):
//! - `source(transport, &args)`: what it lists and watches;
//! - `controller(runtime, source)`: the controller and its settings (`deployment_annotate`
//!   uses `Controller::for_objects`, which runs on the runtime's default value, so there the
//!   runtime is a type parameter: `controller::<R, _>(source)`; `configmap_generator` also
//!   watches what it owns, from `children(transport, &args)`, so it takes
//!   `controller(runtime, source, children)`);
//! - `install_crd(&runtime, transport, limit)` for the examples with a custom resource,
//!   over the shared [`install_crd`];
//! - `Context`: what the reconcile needs, and the [`Observations`] it leaves;
//! - `reconcile`, and [`error_policy`] (the metadata-only one and the reflectors cannot
//!   fail, so they keep `default_error_policy`; `secret_syncer` keeps its original's, a
//!   retry after 2 s);
//! - `start(controller, ctx)`: spawned and synced, returning the `Running` controller
//!   (`shared_stream_controllers` has three parts, so its `pods`, `deployments`, `reflector`
//!   and two controller functions, and a `start` that starts them all);
//! - `run(runtime, transport, &args)`: until SIGINT or SIGTERM, what the mains call.
//!
//! The reconciles are level-triggered and idempotent: each computes what the object should
//! carry from what it is now, and writes only when that differs. Its own write wakes the
//! object once more; that run finds nothing to change, so the controller settles.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::core::params::{Patch, PatchParams, PostParams};
use reconcile_core::Object;
use reconcile_core::ObjectKey;
use reconcile_engine::{Action, ApiClient, ApiError, Cache, Reconcile, Runtime, Source, Transport};
use serde_json::json;

pub mod buggy;
pub mod configmap_generator;
pub mod crd_reflector;
pub mod crd_status;
pub mod deployment_annotate;
pub mod dynamic_configmaps;
pub mod pod_reflector;
pub mod secret_metadata;
pub mod secret_syncer;
pub mod shared_stream_controllers;

/// The examples' command line: `[--namespace NS] [--selector SEL] [--protobuf]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Args {
    /// The namespace to watch (`-n`, `--namespace`; default `default`).
    pub namespace: String,
    /// A label selector scoping LIST and WATCH (`-l`, `--selector`); everything when `None`.
    pub selector: Option<String>,
    /// Ask for Kubernetes protobuf on LIST and WATCH (`--protobuf`): built-in kinds, and
    /// metadata only of any kind (a custom resource's or a `DynamicObject`'s full objects
    /// refuse it at start).
    pub protobuf: bool,
}

impl Default for Args {
    fn default() -> Self {
        Args {
            namespace: "default".to_owned(),
            selector: None,
            protobuf: false,
        }
    }
}

impl Args {
    /// The arguments for `namespace`, with no selector.
    #[must_use]
    pub fn namespace(namespace: impl Into<String>) -> Self {
        Args {
            namespace: namespace.into(),
            ..Args::default()
        }
    }

    /// Reads the arguments after the program name.
    ///
    /// # Errors
    /// An unknown argument, or a flag without its value.
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Self, String> {
        let mut parsed = Args::default();
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--namespace" | "-n" => {
                    parsed.namespace = args.next().ok_or("--namespace needs a value")?;
                }
                "--selector" | "-l" => {
                    parsed.selector = Some(args.next().ok_or("--selector needs a value")?);
                }
                "--protobuf" => parsed.protobuf = true,
                other => return Err(format!("unknown argument {other:?}")),
            }
        }
        Ok(parsed)
    }
}

/// Why an example stopped, or one of its reconciles failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The controller could not run (a setting out of bounds, stopped before its sync).
    #[error(transparent)]
    Controller(#[from] reconcile_engine::Error),
    /// Writing back to `key` failed.
    #[error("writing back to {key}: {source}")]
    WriteBack {
        /// The object written.
        key: ObjectKey,
        /// The apiserver's answer, or why there was none.
        source: ApiError,
    },
    /// A CRD could not be created or read.
    #[error("installing the CRD {name}: {source}")]
    InstallCrd {
        /// The CRD's name (`plural.group`).
        name: String,
        /// The apiserver's answer, or why there was none.
        source: ApiError,
    },
    /// A CRD was created but not `Established` in time.
    #[error("the CRD {name} is not Established after {}s; its conditions: {conditions}", .waited.as_secs())]
    NotEstablished {
        /// The CRD's name.
        name: String,
        /// How long it was polled.
        waited: Duration,
        /// Its last `status.conditions`, as JSON.
        conditions: String,
    },
}

impl Error {
    /// The apiserver's error behind a failed write-back, if that is what this is.
    #[must_use]
    pub fn write_back(&self) -> Option<&ApiError> {
        match self {
            Error::WriteBack { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// The examples' error policy (kube-runtime's `error_policy`): a write that found the
/// object gone (404) waits for the change the watch is about to deliver, which wakes the
/// key again; anything else retries with the key's exponential backoff, a 409 `Conflict`
/// included. A conflict need not come with a change to wait for: an apply can lose a
/// create race, and the test kit's injected 409 on a write that would have passed left
/// configmap-generator's ConfigMap stale for good when this policy waited on conflicts.
pub fn error_policy<O, P: std::fmt::Display, C>(
    request: &Reconcile<O, P>,
    error: &Error,
    _ctx: Arc<C>,
) -> Action {
    match error.write_back() {
        Some(e) if e.is_not_found() => {
            tracing::info!(key = %request.parent(), %error, "gone; waiting for the change");
            Action::await_change()
        }
        Some(e) if e.is_conflict() => {
            tracing::info!(key = %request.parent(), %error, "conflict; retrying with backoff");
            Action::backoff()
        }
        _ => {
            tracing::warn!(key = %request.parent(), %error, "reconcile failed; backing off");
            Action::backoff()
        }
    }
}

/// `source` scoped by the arguments' label selector, if any.
fn scoped<O, T>(source: Source<O, T>, args: &Args) -> Source<O, T> {
    let source = match &args.selector {
        Some(selector) => source.labels(selector.clone()),
        None => source,
    };
    if args.protobuf {
        source.protobuf()
    } else {
        source
    }
}

/// What one reconcile did with its object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// It wrote this value back (an annotation, a status summary).
    Wrote(String),
    /// The object already carried this value; nothing was written.
    Unchanged(String),
    /// It only looked (the metadata-only example): what it logged.
    Observed(String),
    /// The object was deleted: the reconcile ran with no object.
    Deleted,
}

impl Effect {
    /// Whether the run wrote to the apiserver.
    #[must_use]
    pub fn wrote(&self) -> bool {
        matches!(self, Effect::Wrote(_))
    }
}

/// One reconcile: its key and what it did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observation {
    /// The object's `namespace/name`.
    pub key: ObjectKey,
    /// What the run did.
    pub effect: Effect,
}

/// Observations kept; an example's run makes a handful per object, so the bound only stops
/// a runaway loop from growing memory without end (the oldest are dropped).
pub const MAX_OBSERVATIONS: usize = 100_000;

/// What a reconcile that writes back needs: a transport to write with, and the log of its
/// runs.
#[derive(Debug)]
pub struct Context<T> {
    pub(crate) transport: T,
    pub(crate) observations: Observations,
}

impl<T: Transport> Context<T> {
    /// A context writing back through `transport`.
    pub fn new(transport: T) -> Self {
        Context {
            transport,
            observations: Observations::default(),
        }
    }

    /// What the reconciles did, by key.
    #[must_use]
    pub fn observations(&self) -> &Observations {
        &self.observations
    }
}

/// Sets the annotation `name` of the object at `key` to `value` through `api`, with the
/// `resourceVersion` the value was computed from as a precondition: a copy that is out of
/// date gets a 409 rather than writing over a newer object.
///
/// # Errors
/// [`Error::WriteBack`] when the apiserver refuses.
pub(crate) async fn annotate<K, T>(
    api: &ApiClient<K, T>,
    key: &ObjectKey,
    resource_version: Option<&str>,
    name: &str,
    value: &str,
) -> Result<(), Error>
where
    K: kube::Resource + serde::de::DeserializeOwned + serde::Serialize,
    T: Transport,
{
    let patch = json!({
        "metadata": {
            "resourceVersion": resource_version,
            "annotations": { name: value },
        }
    });
    api.patch(key.name(), &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|source| Error::WriteBack {
            key: key.clone(),
            source,
        })?;
    Ok(())
}

/// Creates `crd` (an existing one is fine: a restarted example finds it there) and waits,
/// at most `limit`, until the apiserver reports it `Established`, polling on `runtime`'s
/// timers: what the examples with a custom resource do before they start their controller
/// (`crd_status::install_crd`, `configmap_generator::install_crd`).
///
/// # Errors
/// [`Error::InstallCrd`] when the apiserver refuses, [`Error::NotEstablished`] after `limit`.
pub async fn install_crd<R: Runtime, T: Transport>(
    runtime: &R,
    transport: T,
    crd: &CustomResourceDefinition,
    limit: Duration,
) -> Result<(), Error> {
    let name = crd.metadata.name.as_deref().unwrap_or_default();
    let failed = |source| Error::InstallCrd {
        name: name.to_owned(),
        source,
    };
    let crds = ApiClient::<CustomResourceDefinition, T>::all(transport);
    match crds.create(&PostParams::default(), crd).await {
        Ok(_) => tracing::info!(name, "CRD created"),
        Err(e) if e.is_already_exists() => tracing::info!(name, "CRD already there"),
        Err(e) => return Err(failed(e)),
    }
    let began = runtime.now();
    let mut pause = Duration::from_millis(50);
    loop {
        let crd = crds.get(name).await.map_err(failed)?;
        let conditions = crd.status.and_then(|s| s.conditions).unwrap_or_default();
        if conditions
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True")
        {
            return Ok(());
        }
        let waited = runtime.now().duration_since(began);
        if waited >= limit {
            return Err(Error::NotEstablished {
                name: name.to_owned(),
                waited,
                conditions: serde_json::to_string(&conditions).unwrap_or_default(),
            });
        }
        runtime.sleep_until(runtime.now() + pause).await;
        pause = (pause * 2).min(Duration::from_millis(500));
    }
}

/// Once `cache` has synced, calls `look` with everything it holds every `period`, for as
/// long as the future is polled (kube-runtime's examples' `loop { sleep; reader.state() }`,
/// on `runtime`'s timers); returns only if the cache's controller ended before its sync.
pub async fn periodically<R: Runtime, O: Object, P: Ord>(
    runtime: &R,
    cache: &Cache<O, P>,
    period: Duration,
    mut look: impl FnMut(&[Arc<O>]),
) {
    if cache.wait_until_ready().await.is_err() {
        return;
    }
    loop {
        runtime.sleep_until(runtime.now() + period).await;
        look(&cache.state());
    }
}

/// A line-triggered stream: one `()` for each line read from standard input, from a thread
/// of its own, so that it works on any runtime (kube-runtime's configmapgen reads stdin the
/// same way, on a thread, for its "press enter to reconcile everything"). A line that finds
/// the last one still unread is dropped: one pending trigger reconciles everything anyway.
/// The stream ends with standard input.
#[must_use]
pub fn stdin_lines() -> async_channel::Receiver<()> {
    let (tx, rx) = async_channel::bounded(1);
    std::thread::spawn(move || {
        for line in std::io::stdin().lines() {
            if line.is_err() || tx.is_closed() {
                break;
            }
            let _ = tx.try_send(());
        }
    });
    rx
}

/// What the reconciles of one controller did, in order: a hook for tests (and a log for a
/// reader). Clones share one list.
#[derive(Debug, Clone, Default)]
pub struct Observations {
    log: Arc<Mutex<VecDeque<Observation>>>,
}

impl Observations {
    fn log(&self) -> MutexGuard<'_, VecDeque<Observation>> {
        // Pushes and reads never leave the list half-changed, so a poisoned lock is usable.
        self.log.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records one reconcile of `key`.
    pub fn push(&self, key: &ObjectKey, effect: Effect) {
        let mut log = self.log();
        if log.len() == MAX_OBSERVATIONS {
            log.pop_front();
        }
        log.push_back(Observation {
            key: key.clone(),
            effect,
        });
    }

    /// Every observation so far, oldest first.
    #[must_use]
    pub fn all(&self) -> Vec<Observation> {
        self.log().iter().cloned().collect()
    }

    /// What the reconciles of `key` did, oldest first.
    #[must_use]
    pub fn of(&self, key: &ObjectKey) -> Vec<Effect> {
        self.log()
            .iter()
            .filter(|o| &o.key == key)
            .map(|o| o.effect.clone())
            .collect()
    }

    /// How many times `key` was reconciled.
    #[must_use]
    pub fn count(&self, key: &ObjectKey) -> usize {
        self.log().iter().filter(|o| &o.key == key).count()
    }

    /// What the latest reconcile of `key` did.
    #[must_use]
    pub fn latest(&self, key: &ObjectKey) -> Option<Effect> {
        self.log()
            .iter()
            .rev()
            .find(|o| &o.key == key)
            .map(|o| o.effect.clone())
    }

    /// Every key reconciled at least once, in key order.
    #[must_use]
    pub fn keys(&self) -> Vec<ObjectKey> {
        let keys: std::collections::BTreeSet<ObjectKey> =
            self.log().iter().map(|o| o.key.clone()).collect();
        keys.into_iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_default_to_the_default_namespace_and_no_selector() {
        let parse = |args: &[&str]| Args::parse(args.iter().map(|&a| a.to_owned()));
        assert_eq!(parse(&[]), Ok(Args::default()));
        assert_eq!(
            parse(&["-n", "shop", "--selector", "app=web"]),
            Ok(Args {
                namespace: "shop".into(),
                selector: Some("app=web".into()),
                protobuf: false,
            })
        );
        assert!(parse(&["--protobuf"]).is_ok_and(|a| a.protobuf));
        assert!(parse(&["--namespace"]).is_err());
        assert!(parse(&["--verbose"]).is_err());
    }

    #[test]
    fn observations_answer_per_key_and_stay_bounded() {
        let seen = Observations::default();
        let a = ObjectKey::new(Some("ns"), "a");
        let b = ObjectKey::new(Some("ns"), "b");
        seen.push(&a, Effect::Wrote("1/2".into()));
        seen.push(&b, Effect::Deleted);
        seen.push(&a, Effect::Unchanged("1/2".into()));
        assert_eq!(seen.count(&a), 2);
        assert_eq!(seen.latest(&a), Some(Effect::Unchanged("1/2".into())));
        assert_eq!(seen.of(&b), [Effect::Deleted]);
        assert_eq!(seen.keys(), [a.clone(), b]);
        for _ in 0..MAX_OBSERVATIONS {
            seen.push(&a, Effect::Deleted);
        }
        assert_eq!(seen.all().len(), MAX_OBSERVATIONS);
    }
}
