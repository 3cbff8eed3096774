//! The prelude glob-imports next to kube's own globs without a clash: `kube::prelude`,
//! `kube::api`, `kube::runtime` and kube-runtime's `controller` module (its `Action`,
//! `Controller`, `Config` and `ReconcileRequest`) all in scope, every name used, and
//! `ResourceExt`'s methods still resolving on a type that is also our `Object`. A clash is a
//! compile error, so this file is the test.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::*;
// Its traits come as `_`, so it cannot clash; `kube::api` brings the same ones by name.
#[allow(unused_imports)]
use kube::prelude::*;
use kube::runtime::controller::*;
use kube::runtime::watcher;
use reconcile_tokio::prelude::*;

#[test]
fn kube_and_reconcile_names_coexist() {
    let mut deployment = Deployment::default();
    deployment.metadata.name = Some("web".into());
    deployment.metadata.namespace = Some("shop".into());
    // kube's accessors: no E0034 although `Object` is in scope too.
    assert_eq!(deployment.namespace().as_deref(), Some("shop"));
    assert_eq!(deployment.name_any(), "web");
    // Ours, under their own names.
    assert_eq!(deployment.object_namespace(), Some("shop"));
    assert_eq!(deployment.key(), Some(ObjectKey::new(Some("shop"), "web")));
    let _: KeyMap<Deployment, ObjectKey> = KeyMap::by_object();
    // kube-runtime's names are the globs', unambiguous.
    let _ = watcher::Config::default().labels("app=web");
    let _ = Config::default().concurrency(2);
    let _ = Action::requeue(std::time::Duration::from_secs(1));
    let _: Option<ReconcileRequest<Deployment>> = None;
    let _ = ListParams::default();
    // Ours: the prelude's, and `Controller` / `Action` by path.
    let _ = reconcile_tokio::Action::await_change();
    let _ = default_error_policy::<Deployment, ObjectKey, String, ()>;
    let _: Option<Cache<Deployment, ObjectKey>> = None;
    let _: Option<Arc<Reconcile<Deployment, ObjectKey>>> = None;
    let _: Option<Source<Deployment, reconcile_tokio::KubeTransport>> = None;
    let _: Option<reconcile_tokio::Controller<Deployment, ObjectKey>> = None;
}
