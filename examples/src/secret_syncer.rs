//! `secret-syncer`: kube-runtime's `secret_syncer` example. Every ConfigMap labelled
//! [`SYNC_LABEL`] is copied into a Secret named `cmsyncer-<configmap>`; a finalizer on the
//! ConfigMap holds its deletion until that Secret has been deleted.
//!
//! ```text
//! cargo run -p reconcile-examples --example secret-syncer-tokio -- [--namespace NS] [--selector SEL]
//! cargo run -p reconcile-examples --example secret-syncer-smol -- [--namespace NS] [--selector SEL]
//! ```
//!
//! As the original says, this shows the finalizer helper ([`finalizer()`]); a real controller
//! would give the Secret an owner reference and let the garbage collector delete it. The
//! copy is a server-side apply (field manager [`FIELD_MANAGER`]) of the ConfigMap's `data`
//! as the Secret's `stringData` and its `binaryData` as `data`, sent on every run, as the
//! original does: an apply that changes nothing leaves the Secret as it was.
//!
//! The original watches the ConfigMaps of every namespace; this one those of
//! `--namespace`, as the other examples. `--selector` narrows [`SYNC_LABEL`] further.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use kube::core::params::{DeleteParams, Patch, PatchParams};
use reconcile_core::ObjectKey;
use reconcile_engine::finalizer::{self, Event, finalizer};
use reconcile_engine::{
    Action, ApiClient, ApiError, Controller, Reconcile, Running, Runtime, ShutdownSignal, Source,
    Transport,
};

use crate::{Args, Effect, Error, scoped};

/// What the reconcile needs (shared by the examples that write back).
pub use crate::Context;

/// The label selecting the ConfigMaps to copy.
pub const SYNC_LABEL: &str = "configmap-secret-syncer.nullable.se/sync=true";

/// The finalizer held on each ConfigMap until its Secret is gone.
pub const FINALIZER: &str = "configmap-secret-syncer.nullable.se/cleanup";

/// The field manager of the Secret's server-side apply.
pub const FIELD_MANAGER: &str = "configmap-secret-syncer.nullable.se";

/// How long a failed run waits before the next (the original's error policy).
pub const RETRY: Duration = Duration::from_secs(2);

/// Why a run failed (the original's error, with the engine's `ApiError`).
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    /// The ConfigMap has no name.
    #[error("NoName")]
    NoName,
    /// The ConfigMap has no namespace.
    #[error("NoNamespace")]
    NoNamespace,
    /// The apply of the Secret failed.
    #[error("UpdateSecret: {0}")]
    UpdateSecret(#[source] ApiError),
    /// The delete of the Secret failed (other than with 404).
    #[error("DeleteSecret: {0}")]
    DeleteSecret(#[source] ApiError),
}

/// The name of the Secret `cm` is copied to: `cmsyncer-<name>`.
///
/// # Errors
/// [`SyncError::NoName`] for a ConfigMap with no name.
pub fn secret_name(cm: &ConfigMap) -> Result<String, SyncError> {
    let name = cm.metadata.name.as_deref().ok_or(SyncError::NoName)?;
    Ok(format!("cmsyncer-{name}"))
}

/// The Secret `cm` is copied to: [`secret_name`], `stringData` from `data`, `data` from
/// `binaryData`.
///
/// # Errors
/// [`SyncError::NoName`] for a ConfigMap with no name.
pub fn desired(cm: &ConfigMap) -> Result<Secret, SyncError> {
    Ok(Secret {
        metadata: ObjectMeta {
            name: Some(secret_name(cm)?),
            ..ObjectMeta::default()
        },
        string_data: cm.data.clone(),
        data: cm.binary_data.clone(),
        ..Secret::default()
    })
}

/// The ConfigMaps of `args.namespace` labelled [`SYNC_LABEL`] (and `args.selector`).
pub fn source<T>(transport: T, args: &Args) -> Source<ConfigMap, T> {
    let selector = match &args.selector {
        Some(more) => format!("{SYNC_LABEL},{more}"),
        None => SYNC_LABEL.to_owned(),
    };
    let args = Args {
        selector: Some(selector),
        ..args.clone()
    };
    scoped(Source::namespaced(transport, &args.namespace), &args)
}

/// The controller on `runtime`: one reconcile per ConfigMap.
pub fn controller<R: Runtime, T: Transport>(
    runtime: R,
    source: Source<ConfigMap, T>,
) -> Controller<ConfigMap, ObjectKey, R, T> {
    Controller::for_objects_with(runtime, source).name("secret-syncer")
}

/// The ConfigMap under `request` through [`finalizer()`]: once the finalizer is on it, its
/// Secret is applied while it lives, and deleted once it is being deleted (which lets the
/// finalizer go). A ConfigMap already gone needs nothing: its finalizer saw to the Secret.
///
/// # Errors
/// [`finalizer::Error`] around a [`SyncError`], or a failed finalizer patch.
pub async fn reconcile<T: Transport>(
    request: Reconcile<ConfigMap, ObjectKey>,
    ctx: Arc<Context<T>>,
) -> Result<Action, finalizer::Error<SyncError>> {
    let key = request.parent();
    let Some(cm) = request.object().cloned() else {
        ctx.observations.push(key, Effect::Deleted);
        return Ok(Action::await_change());
    };
    let Some(namespace) = key.namespace() else {
        return Err(finalizer::Error::ApplyFailed(SyncError::NoNamespace));
    };
    let configmaps = ApiClient::<ConfigMap, T>::namespaced(ctx.transport.clone(), namespace);
    let secrets = ApiClient::<Secret, T>::namespaced(ctx.transport.clone(), namespace);
    finalizer(&configmaps, FINALIZER, cm, |event| async {
        match event {
            Event::Apply(cm) => apply(&cm, &secrets, &ctx, key).await,
            Event::Cleanup(cm) => cleanup(&cm, &secrets, &ctx, key).await,
        }
    })
    .await
}

/// Applies the Secret [`desired`] for `cm`.
async fn apply<T: Transport>(
    cm: &ConfigMap,
    secrets: &ApiClient<Secret, T>,
    ctx: &Context<T>,
    key: &ObjectKey,
) -> Result<Action, SyncError> {
    tracing::info!(%key, "Reconciling");
    let secret = desired(cm)?;
    let name = secret.name_any();
    secrets
        .patch(
            &name,
            &PatchParams::apply(FIELD_MANAGER),
            &Patch::Apply(&secret),
        )
        .await
        .map_err(SyncError::UpdateSecret)?;
    ctx.observations.push(key, Effect::Wrote(name));
    Ok(Action::await_change())
}

/// Deletes the Secret of `cm`; one already gone is fine.
async fn cleanup<T: Transport>(
    cm: &ConfigMap,
    secrets: &ApiClient<Secret, T>,
    ctx: &Context<T>,
    key: &ObjectKey,
) -> Result<Action, SyncError> {
    tracing::info!(%key, "Cleaning up");
    let name = secret_name(cm)?;
    match secrets.delete(&name, &DeleteParams::default()).await {
        Ok(()) => {}
        Err(e) if e.is_not_found() => {}
        Err(e) => return Err(SyncError::DeleteSecret(e)),
    }
    ctx.observations
        .push(key, Effect::Observed(format!("deleted {name}")));
    Ok(Action::await_change())
}

/// The original's error policy: log, and run again after [`RETRY`].
pub fn error_policy<T>(
    request: &Reconcile<ConfigMap, ObjectKey>,
    error: &finalizer::Error<SyncError>,
    _ctx: Arc<Context<T>>,
) -> Action {
    tracing::warn!(key = %request.parent(), %error, "reconcile failed");
    Action::requeue(RETRY)
}

/// Spawns `controller` and returns once the first listing is in its cache.
///
/// # Errors
/// [`Error::Controller`] when it stopped before that.
pub async fn start<R: Runtime, T: Transport>(
    controller: Controller<ConfigMap, ObjectKey, R, T>,
    ctx: Arc<Context<T>>,
) -> Result<Running<ConfigMap, ObjectKey, R>, Error> {
    Ok(controller.start(reconcile, error_policy, ctx).await?)
}

/// Runs the controller on `runtime` with `transport` until SIGINT or SIGTERM.
///
/// # Errors
/// [`Error::Controller`] for a setting out of bounds.
pub async fn run<R: ShutdownSignal, T: Transport>(
    runtime: R,
    transport: T,
    args: &Args,
) -> Result<(), Error> {
    let ctx = Arc::new(Context::new(transport.clone()));
    controller(runtime, source(transport, args))
        .shutdown_on_signal()
        .run(reconcile, error_policy, ctx)
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::ByteString;

    use super::*;

    #[test]
    fn the_secret_carries_the_data_as_string_data_and_the_binary_data_as_data() {
        let cm = ConfigMap {
            metadata: ObjectMeta {
                name: Some("settings".into()),
                ..ObjectMeta::default()
            },
            data: Some(BTreeMap::from([("a".into(), "1".into())])),
            binary_data: Some(BTreeMap::from([("b".into(), ByteString(vec![0, 1]))])),
            ..ConfigMap::default()
        };
        let secret = desired(&cm).expect("a name");
        assert_eq!(secret.metadata.name.as_deref(), Some("cmsyncer-settings"));
        assert_eq!(secret.string_data, cm.data);
        assert_eq!(secret.data, cm.binary_data);
        assert!(matches!(
            desired(&ConfigMap::default()),
            Err(SyncError::NoName)
        ));
    }
}
