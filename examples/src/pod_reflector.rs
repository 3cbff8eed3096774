//! `pod-reflector`: kube-runtime's `pod_reflector` example. The pods of a namespace are
//! cached with what this process does not read stripped off (managed fields, annotations,
//! status); every pod that comes in is logged, and the cache's size every five seconds.
//!
//! ```text
//! cargo run -p reconcile-examples --example pod-reflector-tokio -- [--namespace NS] [--selector SEL]
//! cargo run -p reconcile-examples --example pod-reflector-smol -- [--namespace NS] [--selector SEL]
//! ```
//!
//! kube-runtime's reflector writes a store and hands on each applied object as a stream;
//! here the store is a controller's [`Cache`] and the stream is its reconcile, which only
//! logs. The source's [`modify`](Source::modify) is `watcher(..).modify(..)`: it runs
//! before anything is cached. kube-runtime's `predicate_filter(predicates::resource_version)`
//! is the controller's default rule: only a new resourceVersion wakes a pod.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use reconcile_core::ObjectKey;
use reconcile_engine::{
    Action, Cache, Controller, Reconcile, Running, Runtime, ShutdownSignal, Source, Task,
    Transport, default_error_policy,
};

use crate::{Args, Effect, Error, Observations, periodically, scoped};

/// How often [`report`] logs the cache.
pub const REPORT_EVERY: Duration = Duration::from_secs(5);

/// Strips what this process does not read before the pod is cached: its managed fields,
/// its annotations and its status (kube-runtime's example's `modify`).
pub fn slim(pod: &mut Pod) {
    pod.managed_fields_mut().clear();
    pod.annotations_mut().clear();
    pod.status = None;
}

/// The pods of `args.namespace` (scoped by `args.selector`), [`slim`]med.
pub fn source<T>(transport: T, args: &Args) -> Source<Pod, T> {
    scoped(Source::namespaced(transport, &args.namespace), args).modify(slim)
}

/// The reflector on `runtime`: one reconcile per pod, which only logs it.
pub fn controller<R: Runtime, T: Transport>(
    runtime: R,
    source: Source<Pod, T>,
) -> Controller<Pod, ObjectKey, R, T> {
    Controller::for_objects_with(runtime, source).name("pod-reflector")
}

/// Logs the pod that came in (kube-runtime's `saw {name}`); a deleted one is only noted.
///
/// # Errors
/// None: a reflector's reconcile cannot fail.
pub async fn reconcile(
    request: Reconcile<Pod, ObjectKey>,
    seen: Arc<Observations>,
) -> Result<Action, Infallible> {
    let key = request.parent();
    match request.object() {
        Some(pod) => {
            tracing::info!("saw {}", pod.name_any());
            seen.push(key, Effect::Observed(pod.name_any()));
        }
        None => seen.push(key, Effect::Deleted),
    }
    Ok(Action::await_change())
}

/// Logs how many pods `cache` holds every [`REPORT_EVERY`] once it has synced, and each pod
/// as JSON at debug level; returns only if the controller ended before its sync.
pub async fn report<R: Runtime>(runtime: R, cache: Cache<Pod, ObjectKey>) {
    periodically(&runtime, &cache, REPORT_EVERY, |pods| {
        tracing::info!("Current pod count: {}", pods.len());
        for pod in pods {
            let json = serde_json::to_string_pretty(&**pod).unwrap_or_default();
            tracing::debug!("Pod {}: \n{json}", pod.name_any());
        }
    })
    .await;
}

/// Spawns `controller` and returns once the first listing is in its cache.
///
/// # Errors
/// [`Error::Controller`] when it stopped before that.
pub async fn start<R: Runtime, T: Transport>(
    controller: Controller<Pod, ObjectKey, R, T>,
    seen: Arc<Observations>,
) -> Result<Running<Pod, ObjectKey, R>, Error> {
    Ok(controller
        .start(reconcile, default_error_policy, seen)
        .await?)
}

/// Runs the reflector and its [`report`] on `runtime` with `transport` until SIGINT or
/// SIGTERM.
///
/// # Errors
/// [`Error::Controller`] for a setting out of bounds.
pub async fn run<R: ShutdownSignal, T: Transport>(
    runtime: R,
    transport: T,
    args: &Args,
) -> Result<(), Error> {
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
    fn a_slim_pod_keeps_its_spec_and_labels_only() {
        let mut pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": "web",
                "labels": {"app": "web"},
                "annotations": {"note": "long"},
                "managedFields": [{"manager": "kubectl", "operation": "Apply"}],
            },
            "spec": {"containers": [{"name": "c", "image": "nginx"}]},
            "status": {"phase": "Running"},
        }))
        .expect("a pod");
        slim(&mut pod);
        assert!(pod.status.is_none());
        assert!(pod.annotations().is_empty() && pod.managed_fields().is_empty());
        assert_eq!(pod.labels().get("app").map(String::as_str), Some("web"));
        assert_eq!(pod.spec.map(|s| s.containers.len()), Some(1));
    }
}
