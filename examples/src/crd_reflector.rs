//! `crd-reflector`: kube-runtime's `crd_reflector` example. It installs the CRD of a custom
//! resource, `Foo`, then caches the `Foo`s of a namespace, logs every one that comes in,
//! and their names every five seconds.
//!
//! ```text
//! cargo run -p reconcile-examples --example crd-reflector-tokio -- [--namespace NS] [--selector SEL]
//! cargo run -p reconcile-examples --example crd-reflector-smol -- [--namespace NS] [--selector SEL]
//! ```
//!
//! The original applies the CRD and sleeps two seconds for the apiserver to serve it; here
//! [`install_crd`] creates it and polls until it is `Established`. As in `pod-reflector`,
//! kube-runtime's store is the controller's [`Cache`], and its stream of applied objects
//! the controller's reconcile, which only logs.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use kube::{CustomResource, CustomResourceExt, ResourceExt};
use reconcile_core::ObjectKey;
use reconcile_engine::{
    Action, Cache, Controller, Reconcile, Running, Runtime, ShutdownSignal, Source, Task,
    Transport, default_error_policy,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{Args, Effect, Error, Observations, periodically, scoped};

/// What a `Foo` holds: two strings, as in kube-rs's example.
#[derive(CustomResource, Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "example.reconcile-loop.dev",
    version = "v1",
    kind = "Foo",
    namespaced,
    doc = "A Foo: the custom resource of the crd-reflector example."
)]
pub struct FooSpec {
    /// A name.
    pub name: String,
    /// Anything.
    pub info: String,
}

/// How often [`report`] logs the cache.
pub const REPORT_EVERY: Duration = Duration::from_secs(5);

/// Creates the `Foo` CRD (an existing one is fine) and waits, at most `limit`, until the
/// apiserver reports it `Established` (see [`crate::install_crd`]).
///
/// # Errors
/// [`Error::InstallCrd`] when the apiserver refuses, [`Error::NotEstablished`] after `limit`.
pub async fn install_crd<R: Runtime, T: Transport>(
    runtime: &R,
    transport: T,
    limit: Duration,
) -> Result<(), Error> {
    crate::install_crd(runtime, transport, &Foo::crd(), limit).await
}

/// The `Foo`s of `args.namespace` (scoped by `args.selector`).
pub fn source<T>(transport: T, args: &Args) -> Source<Foo, T> {
    scoped(Source::namespaced(transport, &args.namespace), args)
}

/// The reflector on `runtime`: one reconcile per `Foo`, which only logs it.
pub fn controller<R: Runtime, T: Transport>(
    runtime: R,
    source: Source<Foo, T>,
) -> Controller<Foo, ObjectKey, R, T> {
    Controller::for_objects_with(runtime, source).name("crd-reflector")
}

/// Logs the `Foo` that came in (kube-runtime's `saw {name}`); a deleted one is only noted.
///
/// # Errors
/// None: a reflector's reconcile cannot fail.
pub async fn reconcile(
    request: Reconcile<Foo, ObjectKey>,
    seen: Arc<Observations>,
) -> Result<Action, Infallible> {
    let key = request.parent();
    match request.object() {
        Some(object) => {
            tracing::info!("saw {}", object.name_any());
            seen.push(key, Effect::Observed(object.spec.info.clone()));
        }
        None => seen.push(key, Effect::Deleted),
    }
    Ok(Action::await_change())
}

/// Logs the names of the `Foo`s `cache` holds every [`REPORT_EVERY`] once it has synced;
/// returns only if the controller ended before its sync.
pub async fn report<R: Runtime>(runtime: R, cache: Cache<Foo, ObjectKey>) {
    periodically(&runtime, &cache, REPORT_EVERY, |foos| {
        let names: Vec<String> = foos.iter().map(|f| f.name_any()).collect();
        tracing::info!("Current crds: {names:?}");
    })
    .await;
}

/// Spawns `controller` and returns once the first listing is in its cache.
///
/// # Errors
/// [`Error::Controller`] when it stopped before that.
pub async fn start<R: Runtime, T: Transport>(
    controller: Controller<Foo, ObjectKey, R, T>,
    seen: Arc<Observations>,
) -> Result<Running<Foo, ObjectKey, R>, Error> {
    Ok(controller
        .start(reconcile, default_error_policy, seen)
        .await?)
}

/// Installs the CRD (waiting up to a minute for it), then runs the reflector and its
/// [`report`] on `runtime` with `transport` until SIGINT or SIGTERM.
///
/// # Errors
/// [`Error::InstallCrd`], [`Error::NotEstablished`], or [`Error::Controller`].
pub async fn run<R: ShutdownSignal, T: Transport>(
    runtime: R,
    transport: T,
    args: &Args,
) -> Result<(), Error> {
    install_crd(&runtime, transport.clone(), Duration::from_secs(60)).await?;
    let controller = controller(runtime.clone(), source(transport, args));
    let reporting = runtime.spawn(Box::pin(report(runtime.clone(), controller.cache())));
    let ran = controller
        .shutdown_on_signal()
        .run(reconcile, default_error_policy, Arc::default())
        .await;
    reporting.abort();
    Ok(ran?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_crd_is_namespaced_and_named_for_its_group() {
        assert_eq!(Foo::crd_name(), "foos.example.reconcile-loop.dev");
        assert_eq!(Foo::crd().spec.scope, "Namespaced");
    }
}
