//! `shared-stream-controllers`: kube-runtime's `shared_stream_controllers` example. One
//! watch of the pods of a namespace fills one shared cache, and two controllers run on it:
//! one reconciles each pod, the other reconciles Deployments and is woken by the pods they
//! own. Both reconciles only log.
//!
//! ```text
//! cargo run -p reconcile-examples --example shared-stream-controllers-tokio -- [--namespace NS] [--selector SEL]
//! cargo run -p reconcile-examples --example shared-stream-controllers-smol -- [--namespace NS] [--selector SEL]
//! ```
//!
//! kube-runtime's `reflector::store_shared` and `reflect_shared` are a [`Reflector`] and
//! its [`shared`](Reflector::shared) source; `Controller::for_shared_stream` is
//! [`Controller::for_shared_with`], and `owns_shared_stream` is
//! [`Controller::owns_shared_any_owner`], which, as kube-runtime's, wakes every owner of the
//! controller's kind among a pod's `ownerReferences`. The Deployment controller lists and
//! watches its Deployments itself, as the original's does. The original's subscriber
//! filters with `predicates::resource_version`, which is the pod controller's default rule.
//!
//! As in the original, a pod made by a Deployment is owned by a ReplicaSet, not by the
//! Deployment, so only a pod whose owner reference names a Deployment wakes one.

use std::convert::Infallible;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::{Resource, ResourceExt};
use reconcile_core::{KeyMap, ObjectKey};
use reconcile_engine::{
    Action, Controller, Reconcile, Reflector, Running, Runtime, SharedSource, ShutdownSignal,
    Source, Transport, Whole, default_error_policy,
};

use crate::{Args, Effect, Error, Observations, scoped};

/// Each subscriber's buffer, in changes (the original's `SUBSCRIBE_BUFFER_SIZE`).
pub const SUBSCRIBE_BUFFER_SIZE: usize = 256;

/// The pods of `args.namespace` (scoped by `args.selector`): the one watch.
pub fn pods<T>(transport: T, args: &Args) -> Source<Pod, T> {
    scoped(Source::namespaced(transport, &args.namespace), args)
}

/// The Deployments of `args.namespace` (scoped by `args.selector`).
pub fn deployments<T>(transport: T, args: &Args) -> Source<Deployment, T> {
    scoped(Source::namespaced(transport, &args.namespace), args)
}

/// The reflector of `pods` on `runtime`, which the two controllers share.
pub fn reflector<R: Runtime, T: Transport>(
    runtime: R,
    pods: Source<Pod, T>,
) -> Reflector<Pod, R, T> {
    Reflector::with_runtime(runtime, pods).name("pods")
}

/// The pod controller on `runtime`: one reconcile per pod of `shared`, two at a time.
pub fn pod_controller<R: Runtime, T: Transport>(
    runtime: R,
    shared: SharedSource<Pod, Whole>,
) -> Controller<Pod, ObjectKey, R, T> {
    Controller::for_shared_with(runtime, shared, KeyMap::by_object())
        .name("pod-controller")
        .concurrency(2)
}

/// The Deployment controller on `runtime`: one reconcile per Deployment of `deployments`,
/// two at a time, each also woken by the pods of `shared` it owns.
pub fn deployment_controller<R: Runtime, T: Transport>(
    runtime: R,
    deployments: Source<Deployment, T>,
    shared: SharedSource<Pod, Whole>,
) -> Controller<Deployment, ObjectKey, R, T> {
    Controller::for_objects_with(runtime, deployments)
        .owns_shared_any_owner(shared)
        .name("deployment-controller")
        .concurrency(2)
}

/// Either controller's reconcile: logs the kind it reconciled (the original's generic
/// reconcile), and notes it, or the deletion, in `seen`.
///
/// # Errors
/// None.
pub async fn reconcile<K>(
    request: Reconcile<K, ObjectKey>,
    seen: Arc<Observations>,
) -> Result<Action, Infallible>
where
    K: Resource<DynamicType = ()>,
{
    let kind = K::kind(&());
    match request.object() {
        Some(object) => {
            tracing::info!(name = %object.name_any(), "Reconciled {kind}");
            seen.push(request.parent(), Effect::Observed(kind.into_owned()));
        }
        None => seen.push(request.parent(), Effect::Deleted),
    }
    Ok(Action::await_change())
}

/// The reflector and the two controllers on it, started.
pub struct Started<R: Runtime> {
    /// The shared watch of pods.
    pub reflector: Running<Pod, Whole, R>,
    /// The pod controller.
    pub pods: Running<Pod, ObjectKey, R>,
    /// The Deployment controller.
    pub deployments: Running<Deployment, ObjectKey, R>,
}

impl<R: Runtime> std::fmt::Debug for Started<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Started")
            .field("pods", self.pods.handle())
            .field("deployments", self.deployments.handle())
            .finish_non_exhaustive()
    }
}

impl<R: Runtime> Started<R> {
    /// Stops the controllers, then the reflector, each waiting for its end.
    ///
    /// # Errors
    /// The first error one of them ended with.
    pub async fn shutdown(self) -> Result<(), Error> {
        let pods = self.pods.shutdown().await;
        let deployments = self.deployments.shutdown().await;
        let reflector = self.reflector.shutdown().await;
        Ok(pods.and(deployments).and(reflector)?)
    }
}

/// Starts the reflector of `pods`, then the two controllers on it (the Deployment one over
/// `deployments`), each once synced, noting every reconcile in `seen`.
///
/// # Errors
/// [`Error::Controller`] when one stopped before its sync.
pub async fn start<R: Runtime, T: Transport>(
    runtime: R,
    pods: Source<Pod, T>,
    deployments: Source<Deployment, T>,
    seen: Arc<Observations>,
) -> Result<Started<R>, Error> {
    let reflector = reflector(runtime.clone(), pods);
    let shared = reflector.shared().buffer(SUBSCRIBE_BUFFER_SIZE);
    let reflector = reflector.start().await?;
    let pods = pod_controller::<R, T>(runtime.clone(), shared.clone())
        .start(reconcile, default_error_policy, Arc::clone(&seen))
        .await?;
    let deployments = deployment_controller(runtime, deployments, shared)
        .start(reconcile, default_error_policy, seen)
        .await?;
    Ok(Started {
        reflector,
        pods,
        deployments,
    })
}

/// Runs the reflector and both controllers on `runtime` with `transport` until SIGINT or
/// SIGTERM stops the controllers; then stops the reflector.
///
/// # Errors
/// [`Error::Controller`] for a setting out of bounds.
pub async fn run<R: ShutdownSignal, T: Transport>(
    runtime: R,
    transport: T,
    args: &Args,
) -> Result<(), Error> {
    let reflector = reflector(runtime.clone(), pods(transport.clone(), args));
    let shared = reflector.shared().buffer(SUBSCRIBE_BUFFER_SIZE);
    let reflecting = reflector.start().await?;
    let seen = Arc::new(Observations::default());
    let pods = pod_controller::<R, T>(runtime.clone(), shared.clone())
        .shutdown_on_signal()
        .start(reconcile, default_error_policy, Arc::clone(&seen))
        .await?;
    let deployments = deployment_controller(runtime, deployments(transport, args), shared)
        .shutdown_on_signal()
        .start(reconcile, default_error_policy, seen)
        .await?;
    let (pods, deployments) = (pods.join().await, deployments.join().await);
    reflecting.shutdown().await?;
    Ok(pods.and(deployments)?)
}
