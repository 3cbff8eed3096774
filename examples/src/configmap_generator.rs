//! `configmap-generator`: an operator, after kube-runtime's `configmapgen_controller`. A
//! custom resource, `ConfigMapGenerator`, asks for a ConfigMap; the controller makes sure
//! that ConfigMap exists, named `<generator>-cm`, with `data.content` from the spec and the
//! generator as its controller owner.
//!
//! ```text
//! cargo run -p reconcile-examples --example configmap-generator-tokio -- [--namespace NS] [--selector SEL]
//! cargo run -p reconcile-examples --example configmap-generator-smol -- [--namespace NS] [--selector SEL]
//! ```
//!
//! The controller is for generators and [`owns`](reconcile_engine::Controller::owns) the
//! ConfigMaps of the namespace: a ConfigMap whose controller owner is a generator wakes
//! that generator when it is added, changed or deleted, and reaches its reconcile through
//! [`Reconcile::related`]. So a generated ConfigMap deleted or edited behind the
//! controller's back is put back, with no resync.
//!
//! The write is a server-side apply (field manager [`FIELD_MANAGER`], forced): it creates
//! the ConfigMap or brings the fields this controller owns back, and leaves fields others
//! set alone. It is sent only when the child the reconcile was handed differs from what it
//! should be, so the run its own write wakes finds nothing to do, and the controller
//! settles.
//!
//! Each line typed on standard input reconciles every generator once, as the original's
//! "press `<enter>`" does (`reconcile_all_on` over [`crate::stdin_lines`]).
//!
//! Nothing is done when the generator is gone: its ConfigMap carries an owner reference
//! with `blockOwnerDeletion`, so the cluster's garbage collector deletes the child after
//! its owner.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::core::params::{Patch, PatchParams};
use kube::{CustomResource, CustomResourceExt, Resource, ResourceExt};
use reconcile_core::ObjectKey;
use reconcile_engine::{
    Action, ApiClient, Controller, Reconcile, Running, Runtime, ShutdownSignal, Source, Transport,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{Args, Effect, Error, error_policy, scoped};

/// What a generator asks for.
#[derive(CustomResource, Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "example.reconcile-loop.dev",
    version = "v1",
    kind = "ConfigMapGenerator",
    namespaced,
    doc = "A ConfigMap generator: the custom resource of the configmap-generator example."
)]
pub struct ConfigMapGeneratorSpec {
    /// What the generated ConfigMap's `data.content` holds.
    pub content: String,
}

/// The field manager of the server-side apply.
pub const FIELD_MANAGER: &str = "configmap-generator";

/// The data key the generated ConfigMap carries the content under.
pub const CONTENT: &str = "content";

/// The name of the ConfigMap `generator` owns: `<generator-name>-cm`.
#[must_use]
pub fn child_name(generator: &ConfigMapGenerator) -> String {
    format!("{}-cm", generator.name_any())
}

/// The ConfigMap `generator` should own: [`child_name`], in its namespace, with
/// `data.content` from the spec and the generator as its controller owner (`controller`
/// and `blockOwnerDeletion` true). `None` for a generator with no name or uid, which one
/// read from the apiserver always has.
#[must_use]
pub fn desired(generator: &ConfigMapGenerator) -> Option<ConfigMap> {
    let owner = OwnerReference {
        // kube's controller_owner_ref leaves blockOwnerDeletion unset.
        block_owner_deletion: Some(true),
        ..generator.controller_owner_ref(&())?
    };
    Some(ConfigMap {
        metadata: ObjectMeta {
            name: Some(child_name(generator)),
            namespace: generator.namespace(),
            owner_references: Some(vec![owner]),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([(
            CONTENT.to_owned(),
            generator.spec.content.clone(),
        )])),
        ..ConfigMap::default()
    })
}

/// Whether `child` already is what `want` (from [`desired`]) asks for: the same content,
/// and the same controller owner reference. Other keys, labels and owners are left to
/// whoever set them, and do not count.
#[must_use]
pub fn in_step(child: &ConfigMap, want: &ConfigMap) -> bool {
    let content = |c: &ConfigMap| c.data.as_ref().and_then(|d| d.get(CONTENT)).cloned();
    let owners = |c: &ConfigMap| c.metadata.owner_references.clone().unwrap_or_default();
    content(child) == content(want) && owners(want).iter().all(|o| owners(child).contains(o))
}

/// Creates the `ConfigMapGenerator` CRD (an existing one is fine) and waits, at most
/// `limit`, until the apiserver reports it `Established`, polling on `runtime`'s timers
/// (see [`crate::install_crd`]).
///
/// # Errors
/// [`Error::InstallCrd`] when the apiserver refuses, [`Error::NotEstablished`] after `limit`.
pub async fn install_crd<R: Runtime, T: Transport>(
    runtime: &R,
    transport: T,
    limit: Duration,
) -> Result<(), Error> {
    crate::install_crd(runtime, transport, &ConfigMapGenerator::crd(), limit).await
}

/// What the reconcile needs (shared by the examples that write back).
pub use crate::Context;

/// The generators of `args.namespace` (scoped by `args.selector`).
pub fn source<T>(transport: T, args: &Args) -> Source<ConfigMapGenerator, T> {
    scoped(Source::namespaced(transport, &args.namespace), args)
}

/// The ConfigMaps of `args.namespace`, where the generated ones are: all of them, since a
/// child is told from the others by its owner reference, which no selector can name.
pub fn children<T>(transport: T, args: &Args) -> Source<ConfigMap, T> {
    Source::namespaced(transport, &args.namespace)
}

/// The controller on `runtime`: one reconcile per generator, woken as well by every
/// ConfigMap of `children` whose controller owner is a generator.
pub fn controller<R: Runtime, T: Transport>(
    runtime: R,
    source: Source<ConfigMapGenerator, T>,
    children: Source<ConfigMap, T>,
) -> Controller<ConfigMapGenerator, ObjectKey, R, T> {
    Controller::for_objects_with(runtime, source)
        .owns(children)
        .concurrency(2)
}

/// Makes sure the ConfigMap of the generator under `request` is what the generator asks
/// for, applying it when the child the reconcile was handed differs (or is missing).
///
/// # Errors
/// [`Error::WriteBack`] when the apply fails.
pub async fn reconcile<T: Transport>(
    request: Reconcile<ConfigMapGenerator, ObjectKey>,
    ctx: Arc<Context<T>>,
) -> Result<Action, Error> {
    let key = request.parent();
    let Some(generator) = request.object() else {
        // The garbage collector deletes the child after its owner: nothing to do here.
        tracing::info!(%key, "deleted");
        ctx.observations.push(key, Effect::Deleted);
        return Ok(Action::await_change());
    };
    let content = generator.spec.content.clone();
    let Some(want) = desired(generator) else {
        tracing::warn!(%key, "a generator with no uid cannot own a ConfigMap");
        ctx.observations
            .push(key, Effect::Observed("no uid".to_owned()));
        return Ok(Action::await_change());
    };
    let name = want.name_any();
    let children = request.related::<ConfigMap>();
    if children
        .iter()
        .any(|child| child.name_any() == name && in_step(child, &want))
    {
        ctx.observations.push(key, Effect::Unchanged(content));
        return Ok(Action::await_change());
    }
    let api = ApiClient::<ConfigMap, T>::scoped(ctx.transport.clone(), key.namespace());
    api.patch(
        &name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&want),
    )
    .await
    .map_err(|source| Error::WriteBack {
        key: ObjectKey::new(key.namespace(), &name),
        source,
    })?;
    tracing::info!(%key, configmap = %name, %content, "applied");
    ctx.observations.push(key, Effect::Wrote(content));
    Ok(Action::await_change())
}

/// Spawns `controller` and returns once the first listing of both sources is in its cache.
///
/// # Errors
/// [`Error::Controller`] when it stopped before that.
pub async fn start<R: Runtime, T: Transport>(
    controller: Controller<ConfigMapGenerator, ObjectKey, R, T>,
    ctx: Arc<Context<T>>,
) -> Result<Running<ConfigMapGenerator, ObjectKey, R>, Error> {
    Ok(controller.start(reconcile, error_policy, ctx).await?)
}

/// Installs the CRD (waiting up to a minute for it), then runs the controller on `runtime`
/// with `transport` until SIGINT or SIGTERM; each line on standard input reconciles every
/// generator once ([`crate::stdin_lines`], kube-runtime's example's `reconcile_all_on`).
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
    tracing::info!("press <enter> to force a reconciliation of all objects");
    controller(
        runtime,
        source(transport.clone(), args),
        children(transport, args),
    )
    .reconcile_all_on(crate::stdin_lines())
    .shutdown_on_signal()
    .run(reconcile, error_policy, ctx)
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn generator(content: &str) -> ConfigMapGenerator {
        let mut generator = ConfigMapGenerator::new(
            "settings",
            ConfigMapGeneratorSpec {
                content: content.to_owned(),
            },
        );
        generator.metadata.namespace = Some("shop".into());
        generator.metadata.uid = Some("0b5c6a52-1f8e-4c1e-9a57-6d0d8c3e2f10".into());
        generator
    }

    #[test]
    fn the_crd_is_namespaced_and_has_no_status() {
        let crd = ConfigMapGenerator::crd();
        assert_eq!(
            ConfigMapGenerator::crd_name(),
            "configmapgenerators.example.reconcile-loop.dev"
        );
        assert_eq!(crd.spec.scope, "Namespaced");
        assert_eq!(crd.spec.versions[0].name, "v1");
        assert!(crd.spec.versions[0].subresources.is_none());
    }

    #[test]
    fn the_child_is_named_for_its_owner_and_points_back_at_it() {
        let want = desired(&generator("a=1")).expect("a uid and a name");
        assert_eq!(want.metadata.name.as_deref(), Some("settings-cm"));
        assert_eq!(want.metadata.namespace.as_deref(), Some("shop"));
        assert_eq!(
            want.data.as_ref().and_then(|d| d.get(CONTENT)).cloned(),
            Some("a=1".to_owned())
        );
        let owner = OwnerReference {
            api_version: "example.reconcile-loop.dev/v1".into(),
            kind: "ConfigMapGenerator".into(),
            name: "settings".into(),
            uid: "0b5c6a52-1f8e-4c1e-9a57-6d0d8c3e2f10".into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        };
        assert_eq!(want.metadata.owner_references, Some(vec![owner]));
        // The apply body names its kind, as server-side apply requires.
        let body = serde_json::to_value(&want).expect("serializes");
        assert_eq!(
            (body["apiVersion"].as_str(), body["kind"].as_str()),
            (Some("v1"), Some("ConfigMap"))
        );
        let mut nameless = generator("a=1");
        nameless.metadata.uid = None;
        assert!(desired(&nameless).is_none());
    }

    #[test]
    fn a_child_is_in_step_with_the_content_and_the_owner_whatever_else_it_carries() {
        let want = desired(&generator("a=1")).expect("a uid and a name");
        let mut child = want.clone();
        child.metadata.resource_version = Some("7".into());
        child
            .data
            .get_or_insert_default()
            .insert("extra".into(), "kept".into());
        assert!(in_step(&child, &want));
        let stale = desired(&generator("a=2")).expect("a uid and a name");
        assert!(!in_step(&stale, &want), "other content");
        child.metadata.owner_references = None;
        assert!(!in_step(&child, &want), "no owner reference");
    }
}
