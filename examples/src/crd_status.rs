//! `crd-status`: a custom resource declared in Rust (`#[derive(CustomResource)]`), its CRD
//! installed through the API, and a controller that writes the resource's `status` with
//! `patch_status` only when it differs.
//!
//! ```text
//! cargo run -p reconcile-examples --example crd-status-tokio -- [--namespace NS] [--selector SEL]
//! cargo run -p reconcile-examples --example crd-status-smol -- [--namespace NS] [--selector SEL]
//! ```
//!
//! A status write does not change `metadata.generation` (the status subresource), but it
//! is a change all the same, and wakes the object once more: that run finds the status
//! already right and writes nothing, so there is no endless loop. A spec change bumps the
//! generation, and the next run writes a new status with it.

use std::sync::Arc;
use std::time::Duration;

use kube::CustomResource;
use kube::CustomResourceExt;
use kube::core::params::{Patch, PatchParams};
use reconcile_core::ObjectKey;
use reconcile_engine::{
    Action, ApiClient, Controller, Reconcile, Running, Runtime, ShutdownSignal, Source, Transport,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::{Args, Effect, Error, error_policy, scoped};

/// What a shop asks for.
#[derive(CustomResource, Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "example.reconcile-loop.dev",
    version = "v1",
    kind = "Shop",
    namespaced,
    status = "ShopStatus",
    doc = "A shop: the custom resource of the crd-status example."
)]
pub struct ShopSpec {
    /// How many replicas the shop wants.
    pub replicas: i32,
}

/// What the controller last made of a shop.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ShopStatus {
    /// The `metadata.generation` this status was computed from.
    pub observed_generation: Option<i64>,
    /// A line about the spec.
    pub summary: String,
}

/// The status `shop` should carry.
#[must_use]
pub fn desired(shop: &Shop) -> ShopStatus {
    ShopStatus {
        observed_generation: shop.metadata.generation,
        summary: format!("{} replica(s) wanted", shop.spec.replicas),
    }
}

/// Creates the `Shop` CRD (an existing one is fine) and waits, at most `limit`, until the
/// apiserver reports it `Established`, polling on `runtime`'s timers (see
/// [`crate::install_crd`]).
///
/// # Errors
/// [`Error::InstallCrd`] when the apiserver refuses, [`Error::NotEstablished`] after `limit`.
pub async fn install_crd<R: Runtime, T: Transport>(
    runtime: &R,
    transport: T,
    limit: Duration,
) -> Result<(), Error> {
    crate::install_crd(runtime, transport, &Shop::crd(), limit).await
}

/// What the reconcile needs (shared by the examples that write back).
pub use crate::Context;

/// The shops of `args.namespace` (scoped by `args.selector`).
pub fn source<T>(transport: T, args: &Args) -> Source<Shop, T> {
    scoped(Source::namespaced(transport, &args.namespace), args)
}

/// The controller: one reconcile per shop ([`KeyMap::by_object`](reconcile_core::KeyMap::by_object)) on `runtime`.
pub fn controller<R: Runtime, T: Transport>(
    runtime: R,
    source: Source<Shop, T>,
) -> Controller<Shop, ObjectKey, R, T> {
    Controller::for_objects_with(runtime, source).concurrency(2)
}

/// Brings the status of the shop under `request` up to date.
///
/// # Errors
/// [`Error::WriteBack`] when the status patch fails.
pub async fn reconcile<T: Transport>(
    request: Reconcile<Shop, ObjectKey>,
    ctx: Arc<Context<T>>,
) -> Result<Action, Error> {
    let key = request.parent();
    let Some(shop) = request.object() else {
        tracing::info!(%key, "deleted");
        ctx.observations.push(key, Effect::Deleted);
        return Ok(Action::await_change());
    };
    let want = desired(shop);
    if shop.status.as_ref() == Some(&want) {
        ctx.observations.push(key, Effect::Unchanged(want.summary));
        return Ok(Action::await_change());
    }
    let api = ApiClient::<Shop, T>::scoped(ctx.transport.clone(), key.namespace());
    let patch = json!({
        // A precondition: refused with 409 if the shop moved on since this copy.
        "metadata": { "resourceVersion": shop.metadata.resource_version },
        "status": want,
    });
    api.patch_status(key.name(), &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|source| Error::WriteBack {
            key: key.clone(),
            source,
        })?;
    tracing::info!(%key, summary = %want.summary, generation = ?want.observed_generation, "status written");
    ctx.observations.push(key, Effect::Wrote(want.summary));
    Ok(Action::await_change())
}

/// Spawns `controller` and returns once its first listing is in the cache.
///
/// # Errors
/// [`Error::Controller`] when it stopped before that.
pub async fn start<R: Runtime, T: Transport>(
    controller: Controller<Shop, ObjectKey, R, T>,
    ctx: Arc<Context<T>>,
) -> Result<Running<Shop, ObjectKey, R>, Error> {
    Ok(controller.start(reconcile, error_policy, ctx).await?)
}

/// Installs the CRD (waiting up to a minute for it), then runs the controller on `runtime`
/// with `transport` until SIGINT or SIGTERM.
///
/// # Errors
/// [`Error::InstallCrd`], [`Error::NotEstablished`], or [`Error::Controller`].
pub async fn run<R: ShutdownSignal, T: Transport>(
    runtime: R,
    transport: T,
    args: &Args,
) -> Result<(), Error> {
    install_crd(&runtime, transport.clone(), Duration::from_secs(60)).await?;
    let ctx = Arc::new(Context::new(transport.clone()));
    controller(runtime, source(transport, args))
        .shutdown_on_signal()
        .run(reconcile, error_policy, ctx)
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_crd_is_namespaced_with_a_status_subresource() {
        let crd = Shop::crd();
        assert_eq!(Shop::crd_name(), "shops.example.reconcile-loop.dev");
        assert_eq!(crd.spec.scope, "Namespaced");
        let version = &crd.spec.versions[0];
        assert_eq!(version.name, "v1");
        assert!(
            version
                .subresources
                .as_ref()
                .and_then(|s| s.status.as_ref())
                .is_some()
        );
    }

    #[test]
    fn the_status_follows_the_generation_and_the_spec() {
        let mut shop = Shop::new("corner", ShopSpec { replicas: 2 });
        shop.metadata.generation = Some(3);
        assert_eq!(
            desired(&shop),
            ShopStatus {
                observed_generation: Some(3),
                summary: "2 replica(s) wanted".into(),
            }
        );
    }
}
