//! `deployment-annotate`: kube-runtime's model on `Deployment`s. Every Deployment is
//! reconciled on its own ([`Controller::for_objects`]), and each run writes
//! `reconcile-loop.dev/replicas: "<ready>/<desired>"` onto it with a merge patch through
//! [`ApiClient`], only when the annotation differs.
//!
//! ```text
//! cargo run -p reconcile-examples --example deployment-annotate-tokio -- [--namespace NS] [--selector SEL] [--protobuf]
//! cargo run -p reconcile-examples --example deployment-annotate-smol -- [--namespace NS] [--selector SEL] [--protobuf]
//! ```
//!
//! With `--protobuf` the Deployments come in Kubernetes protobuf, as client-go's do, and
//! decode straight into k8s-openapi's `Deployment`.
//!
//! The write carries the `resourceVersion` the value was computed from, so a value read
//! from a stale copy is refused (409) rather than written; [`error_policy`] then waits for
//! the newer version, which the watch is about to deliver.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::Deployment;
use reconcile_core::ObjectKey;
use reconcile_engine::{
    Action, ApiClient, Controller, Reconcile, Running, Runtime, ShutdownSignal, Source, Transport,
};

use crate::{Args, Effect, Error, annotate, error_policy, scoped};

/// The annotation this controller owns.
pub const ANNOTATION: &str = "reconcile-loop.dev/replicas";

/// What the annotation should say for `deployment`: `<ready>/<desired>` (`status.readyReplicas`,
/// 0 when unset, over `spec.replicas`, 1 when unset as the apiserver defaults it).
#[must_use]
pub fn desired(deployment: &Deployment) -> String {
    let want = deployment.spec.replicas.unwrap_or(1);
    let ready = deployment
        .status
        .as_ref()
        .and_then(|s| s.ready_replicas)
        .unwrap_or(0);
    format!("{ready}/{want}")
}

/// The annotation `deployment` carries now.
#[must_use]
pub fn current(deployment: &Deployment) -> Option<&str> {
    deployment
        .metadata
        .annotations
        .as_ref()?
        .get(ANNOTATION)
        .map(String::as_str)
}

/// What the reconcile needs (shared by the examples that write back).
pub use crate::Context;

/// The Deployments of `args.namespace` (scoped by `args.selector`).
pub fn source<T>(transport: T, args: &Args) -> Source<Deployment, T> {
    scoped(Source::namespaced(transport, &args.namespace), args)
}

/// The controller: one reconcile per Deployment, on runtime `R`'s default value (the
/// ambient tokio runtime, smol's global executor).
pub fn controller<R, T>(source: Source<Deployment, T>) -> Controller<Deployment, ObjectKey, R, T>
where
    R: Runtime + Default,
    T: Transport,
{
    Controller::for_objects(source).concurrency(2)
}

/// Brings the annotation of the Deployment under `request` up to date.
///
/// # Errors
/// [`Error::WriteBack`] when the patch fails.
pub async fn reconcile<T: Transport>(
    request: Reconcile<Deployment, ObjectKey>,
    ctx: Arc<Context<T>>,
) -> Result<Action, Error> {
    let key = request.parent();
    let Some(deployment) = request.object() else {
        // Deleted: the annotation went with it, so there is nothing to clean up.
        tracing::info!(%key, "deleted");
        ctx.observations.push(key, Effect::Deleted);
        return Ok(Action::await_change());
    };
    let want = desired(deployment);
    if current(deployment) == Some(want.as_str()) {
        ctx.observations.push(key, Effect::Unchanged(want));
        return Ok(Action::await_change());
    }
    let api = ApiClient::<Deployment, T>::scoped(ctx.transport.clone(), key.namespace());
    let version = deployment.metadata.resource_version.as_deref();
    annotate(&api, key, version, ANNOTATION, &want).await?;
    tracing::info!(%key, replicas = %want, "annotated");
    ctx.observations.push(key, Effect::Wrote(want));
    Ok(Action::await_change())
}

/// Spawns `controller` and returns once its first listing is in the cache.
///
/// # Errors
/// [`Error::Controller`] when it stopped before that.
pub async fn start<R: Runtime, T: Transport>(
    controller: Controller<Deployment, ObjectKey, R, T>,
    ctx: Arc<Context<T>>,
) -> Result<Running<Deployment, ObjectKey, R>, Error> {
    Ok(controller.start(reconcile, error_policy, ctx).await?)
}

/// Runs the controller over `source` until SIGINT or SIGTERM: the form for a source named
/// another way, such as kube's `Api` on tokio (`Source::from_api`).
///
/// # Errors
/// [`Error::Controller`] when it could not run.
pub async fn run_with<R, T>(
    source: Source<Deployment, T>,
    ctx: Arc<Context<T>>,
) -> Result<(), Error>
where
    R: ShutdownSignal + Default,
    T: Transport,
{
    controller::<R, T>(source)
        .shutdown_on_signal()
        .run(reconcile, error_policy, ctx)
        .await?;
    Ok(())
}

/// Runs the example on runtime `R` with `transport` until SIGINT or SIGTERM.
///
/// # Errors
/// [`Error::Controller`] when it could not run.
pub async fn run<R, T>(transport: T, args: &Args) -> Result<(), Error>
where
    R: ShutdownSignal + Default,
    T: Transport,
{
    let ctx = Arc::new(Context::new(transport.clone()));
    run_with::<R, T>(source(transport, args), ctx).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment(
        replicas: Option<i32>,
        ready: Option<i32>,
        annotation: Option<&str>,
    ) -> Deployment {
        serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": "web",
                "annotations": annotation.map(|a| serde_json::json!({ ANNOTATION: a })),
            },
            "spec": {
                "replicas": replicas,
                "selector": {},
                "template": {},
            },
            "status": { "readyReplicas": ready },
        }))
        .expect("a Deployment")
    }

    #[test]
    fn the_annotation_is_ready_over_desired() {
        assert_eq!(desired(&deployment(Some(3), Some(2), None)), "2/3");
        assert_eq!(desired(&deployment(None, None, None)), "0/1");
        assert_eq!(current(&deployment(Some(3), None, None)), None);
        assert_eq!(
            current(&deployment(Some(3), None, Some("0/3"))),
            Some("0/3")
        );
    }
}
