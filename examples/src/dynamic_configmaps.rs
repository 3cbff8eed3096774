//! `dynamic-configmaps`: a controller over a type known only at run time. ConfigMaps are
//! watched as `DynamicObject`s named by an [`ApiResource`], and each run writes
//! `reconcile-loop.dev/data-keys: "<n>"` (the number of keys under `data` and
//! `binaryData`) back through the same `ApiResource`, only when it differs.
//!
//! ```text
//! cargo run -p reconcile-examples --example dynamic-configmaps-tokio -- [--namespace NS] [--selector SEL]
//! cargo run -p reconcile-examples --example dynamic-configmaps-smol -- [--namespace NS] [--selector SEL]
//! ```
//!
//! Here the `ApiResource` comes from a compiled-in type (`ApiResource::erase`); for a kind
//! found by discovery, `ApiResource::from_gvk_with_plural` builds the same thing.

use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::core::{ApiResource, DynamicObject};
use reconcile_core::ObjectKey;
use reconcile_engine::{
    Action, ApiClient, Controller, Reconcile, Running, Runtime, ShutdownSignal, Source, Transport,
};

use crate::{Args, Effect, Error, Observations, annotate, error_policy, scoped};

/// The annotation this controller owns.
pub const ANNOTATION: &str = "reconcile-loop.dev/data-keys";

/// The resource watched and written: ConfigMaps (`v1`, `configmaps`).
#[must_use]
pub fn resource() -> ApiResource {
    ApiResource::erase::<ConfigMap>(&())
}

/// How many keys `object` holds under `data` and `binaryData` (read from the untyped body).
#[must_use]
pub fn data_keys(object: &DynamicObject) -> usize {
    ["data", "binaryData"]
        .iter()
        .filter_map(|field| object.data.get(field)?.as_object())
        .map(serde_json::Map::len)
        .sum()
}

/// The annotation `object` carries now.
#[must_use]
pub fn current(object: &DynamicObject) -> Option<&str> {
    object
        .metadata
        .annotations
        .as_ref()?
        .get(ANNOTATION)
        .map(String::as_str)
}

/// What the reconcile needs: the resource, a transport to write back with, and the log of
/// its runs.
#[derive(Debug)]
pub struct Context<T> {
    transport: T,
    resource: ApiResource,
    observations: Observations,
}

impl<T: Transport> Context<T> {
    /// A context writing `resource` back through `transport`.
    pub fn new(transport: T, resource: ApiResource) -> Self {
        Context {
            transport,
            resource,
            observations: Observations::default(),
        }
    }

    /// What the reconciles did.
    #[must_use]
    pub fn observations(&self) -> &Observations {
        &self.observations
    }
}

/// The objects of `resource` in `args.namespace` (scoped by `args.selector`).
pub fn source<T>(transport: T, resource: &ApiResource, args: &Args) -> Source<DynamicObject, T> {
    scoped(
        Source::namespaced_with(transport, &args.namespace, resource),
        args,
    )
}

/// The controller: one reconcile per object ([`KeyMap::by_object`](reconcile_core::KeyMap::by_object)) on `runtime`.
pub fn controller<R: Runtime, T: Transport>(
    runtime: R,
    source: Source<DynamicObject, T>,
) -> Controller<DynamicObject, ObjectKey, R, T> {
    Controller::for_objects_with(runtime, source).concurrency(2)
}

/// Brings the annotation of the object under `request` up to date.
///
/// # Errors
/// [`Error::WriteBack`] when the patch fails.
pub async fn reconcile<T: Transport>(
    request: Reconcile<DynamicObject, ObjectKey>,
    ctx: Arc<Context<T>>,
) -> Result<Action, Error> {
    let key = request.parent();
    let Some(object) = request.object() else {
        tracing::info!(%key, "deleted");
        ctx.observations.push(key, Effect::Deleted);
        return Ok(Action::await_change());
    };
    let want = data_keys(object).to_string();
    if current(object) == Some(want.as_str()) {
        ctx.observations.push(key, Effect::Unchanged(want));
        return Ok(Action::await_change());
    }
    let api = ApiClient::<DynamicObject, T>::namespaced_with(
        ctx.transport.clone(),
        key.namespace().unwrap_or_default(),
        &ctx.resource,
    );
    let version = object.metadata.resource_version.as_deref();
    annotate(&api, key, version, ANNOTATION, &want).await?;
    tracing::info!(%key, keys = %want, "annotated");
    ctx.observations.push(key, Effect::Wrote(want));
    Ok(Action::await_change())
}

/// Spawns `controller` and returns once its first listing is in the cache.
///
/// # Errors
/// [`Error::Controller`] when it stopped before that.
pub async fn start<R: Runtime, T: Transport>(
    controller: Controller<DynamicObject, ObjectKey, R, T>,
    ctx: Arc<Context<T>>,
) -> Result<Running<DynamicObject, ObjectKey, R>, Error> {
    Ok(controller.start(reconcile, error_policy, ctx).await?)
}

/// Runs the example over ConfigMaps on `runtime` with `transport` until SIGINT or SIGTERM.
///
/// # Errors
/// [`Error::Controller`] when it could not run.
pub async fn run<R: ShutdownSignal, T: Transport>(
    runtime: R,
    transport: T,
    args: &Args,
) -> Result<(), Error> {
    let resource = resource();
    let ctx = Arc::new(Context::new(transport.clone(), resource.clone()));
    controller(runtime, source(transport, &resource, args))
        .shutdown_on_signal()
        .run(reconcile, error_policy, ctx)
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_and_binary_data_keys_are_counted_from_the_untyped_body() {
        let object: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": { "name": "c", "annotations": { ANNOTATION: "3" } },
            "data": { "a": "1", "b": "2" },
            "binaryData": { "c": "AA==" },
        }))
        .expect("a ConfigMap");
        assert_eq!(data_keys(&object), 3);
        assert_eq!(current(&object), Some("3"));
        let empty: DynamicObject =
            serde_json::from_value(serde_json::json!({ "metadata": { "name": "e" } }))
                .expect("an object");
        assert_eq!(data_keys(&empty), 0);
        assert_eq!(resource().plural, "configmaps");
    }
}
