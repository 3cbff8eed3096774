//! `secret-metadata`: a metadata-only watch. A source of `PartialObjectMeta<Secret>` asks
//! the apiserver for `PartialObjectMetadata` on LIST and WATCH, so only each Secret's
//! metadata crosses the wire: no secret data ever enters the process. Each run logs the
//! Secret's name and how many labels it has.
//!
//! ```text
//! cargo run -p reconcile-examples --example secret-metadata-tokio -- [--namespace NS] [--selector SEL] [--protobuf]
//! cargo run -p reconcile-examples --example secret-metadata-smol -- [--namespace NS] [--selector SEL] [--protobuf]
//! ```
//!
//! With `--protobuf` the metadata comes in Kubernetes protobuf, as client-go's metadata
//! client asks for it (the apiserver writes `PartialObjectMetadata` in protobuf for every
//! resource, custom resources' too).
//!
//! The same holds for any kind whose bodies are large or sensitive: a controller that
//! reacts to labels, owners or deletions needs only the metadata.

use std::convert::Infallible;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use kube::core::PartialObjectMeta;
use reconcile_core::ObjectKey;
use reconcile_engine::{
    Action, Controller, Reconcile, Running, Runtime, ShutdownSignal, Source, Transport,
    default_error_policy,
};

use crate::{Args, Effect, Error, Observations, scoped};

/// A Secret as the metadata-only watch delivers it: `metadata`, no `data`.
pub type SecretMeta = PartialObjectMeta<Secret>;

/// The log line of one Secret.
#[must_use]
pub fn describe(secret: &SecretMeta) -> String {
    let labels = secret.metadata.labels.as_ref().map_or(0, |l| l.len());
    format!("{labels} label(s)")
}

/// What the reconcile keeps: the log of its runs (the keys it reconciled, and what it saw).
#[derive(Debug, Default)]
pub struct Context {
    observations: Observations,
}

impl Context {
    /// What the reconciles did.
    #[must_use]
    pub fn observations(&self) -> &Observations {
        &self.observations
    }
}

/// The Secrets of `args.namespace` (scoped by `args.selector`), metadata only.
pub fn source<T>(transport: T, args: &Args) -> Source<SecretMeta, T> {
    scoped(Source::namespaced(transport, &args.namespace), args)
}

/// The controller: one reconcile per Secret ([`KeyMap::by_object`](reconcile_core::KeyMap::by_object)) on `runtime`.
pub fn controller<R: Runtime, T: Transport>(
    runtime: R,
    source: Source<SecretMeta, T>,
) -> Controller<SecretMeta, ObjectKey, R, T> {
    Controller::for_objects_with(runtime, source).concurrency(2)
}

/// Logs the Secret under `request` (its name and label count). Nothing to write, so
/// nothing can fail.
///
/// # Errors
/// None.
pub async fn reconcile(
    request: Reconcile<SecretMeta, ObjectKey>,
    ctx: Arc<Context>,
) -> Result<Action, Infallible> {
    let key = request.parent();
    match request.object() {
        Some(secret) => {
            let line = describe(secret);
            tracing::info!(%key, "{line}");
            ctx.observations.push(key, Effect::Observed(line));
        }
        None => {
            tracing::info!(%key, "deleted");
            ctx.observations.push(key, Effect::Deleted);
        }
    }
    Ok(Action::await_change())
}

/// Spawns `controller` and returns once its first listing is in the cache.
///
/// # Errors
/// [`Error::Controller`] when it stopped before that.
pub async fn start<R: Runtime, T: Transport>(
    controller: Controller<SecretMeta, ObjectKey, R, T>,
    ctx: Arc<Context>,
) -> Result<Running<SecretMeta, ObjectKey, R>, Error> {
    Ok(controller
        .start(reconcile, default_error_policy, ctx)
        .await?)
}

/// Runs the example on `runtime` with `transport` until SIGINT or SIGTERM.
///
/// # Errors
/// [`Error::Controller`] when it could not run.
pub async fn run<R: ShutdownSignal, T: Transport>(
    runtime: R,
    transport: T,
    args: &Args,
) -> Result<(), Error> {
    controller(runtime, source(transport, args))
        .shutdown_on_signal()
        .run(
            reconcile,
            default_error_policy,
            Arc::new(Context::default()),
        )
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_source_asks_for_metadata_only_and_the_line_counts_labels() {
        let source = source::<()>((), &Args::namespace("vault"));
        assert!(source.is_metadata_only());
        assert_eq!(source.url_path(), Some("/api/v1/namespaces/vault/secrets"));
        let secret: SecretMeta = serde_json::from_value(serde_json::json!({
            "apiVersion": "meta.k8s.io/v1",
            "kind": "PartialObjectMetadata",
            "metadata": { "name": "s", "labels": { "a": "1", "b": "2" } },
        }))
        .expect("a PartialObjectMetadata");
        assert_eq!(describe(&secret), "2 label(s)");
    }
}
