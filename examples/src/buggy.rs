//! Small operators, each with one classic bug from the published bug lists of Sieve
//! (OSDI'22) and Acto (SOSP'23), and its fixed twin: the proof that the test kit's
//! oracles (`reconcile_sim::scenario`) bite. `examples/tests/buggy.rs` explores each pair.
//!
//! Every operator reconciles a [`Widget`] and owns ConfigMaps (its children). The
//! [`Variant`] picks the bug or its fix; the rest of the code is shared.
//!
//! | [`Bug`] | the buggy variant | the fix |
//! |---|---|---|
//! | [`Bug::StaleDuplicate`] | creates a child with `generateName` when its cache shows none | one child under a fixed name, applied |
//! | [`Bug::StuckFinalizer`] | the finalizer's cleanup fails on a child already gone (404) | a 404 is a clean-up done; and the child is made only after a live read of the widget |
//! | [`Bug::StatusHotLoop`] | writes a timestamp into the status on every reconcile | writes the status only when it changes |
//! | [`Bug::IgnoredConflict`] | treats a 409 on its update as done | retries a 409 with backoff |
//! | [`Bug::StaleListDelete`] | deletes a widget's children when the widget is not in its cache | leaves orphans to the garbage collector |
//! | [`Bug::MemoryOnly`] | counts the children it made in memory, never in the world | names the children `<widget>-<i>` and applies each |

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::CustomResource;
use kube::core::params::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use reconcile_core::ObjectKey;
use reconcile_engine::finalizer::{self, finalizer};
use reconcile_engine::{
    Action, ApiClient, ApiError, Controller, Reconcile, Runtime, ShutdownSignal, Source, Transport,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

/// What a widget asks for.
#[derive(CustomResource, Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "buggy.reconcile-loop.dev",
    version = "v1",
    kind = "Widget",
    namespaced,
    status = "WidgetStatus",
    doc = "A widget: the custom resource of the buggy operators."
)]
pub struct WidgetSpec {
    /// What each child ConfigMap holds under `content`.
    pub content: String,
    /// How many children ([`Bug::MemoryOnly`]; the others make one).
    #[serde(default = "one")]
    pub replicas: u32,
}

fn one() -> u32 {
    1
}

/// What the operator last made of a widget.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WidgetStatus {
    /// The `metadata.generation` this status was computed from.
    pub observed_generation: Option<i64>,
    /// When the widget was last reconciled ([`Bug::StatusHotLoop`]'s buggy variant only).
    pub last_reconciled: Option<String>,
}

/// Creates the `Widget` CRD (an existing one is fine) and waits, at most `limit`, until the
/// apiserver reports it `Established` (see [`crate::install_crd`]).
///
/// # Errors
/// [`crate::Error::InstallCrd`] when the apiserver refuses, [`crate::Error::NotEstablished`]
/// after `limit`.
pub async fn install_crd<R: Runtime, T: Transport>(
    runtime: &R,
    transport: T,
    limit: std::time::Duration,
) -> Result<(), crate::Error> {
    use kube::CustomResourceExt;
    crate::install_crd(runtime, transport, &Widget::crd(), limit).await
}

/// Which bug.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Bug {
    /// Sieve's stale-cache class: a duplicate create when the cache lags.
    StaleDuplicate,
    /// A finalizer never removed when the child is already gone.
    StuckFinalizer,
    /// A status timestamp written on every reconcile: a hot loop.
    StatusHotLoop,
    /// A 409 ignored, so an update is lost.
    IgnoredConflict,
    /// Children deleted on the strength of a stale list.
    StaleListDelete,
    /// State kept only in memory, lost on a restart.
    MemoryOnly,
}

impl Bug {
    /// Every bug.
    pub const ALL: [Bug; 6] = [
        Bug::StaleDuplicate,
        Bug::StuckFinalizer,
        Bug::StatusHotLoop,
        Bug::IgnoredConflict,
        Bug::StaleListDelete,
        Bug::MemoryOnly,
    ];

    /// Its name: `stale-duplicate`, …
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Bug::StaleDuplicate => "stale-duplicate",
            Bug::StuckFinalizer => "stuck-finalizer",
            Bug::StatusHotLoop => "status-hot-loop",
            Bug::IgnoredConflict => "ignored-conflict",
            Bug::StaleListDelete => "stale-list-delete",
            Bug::MemoryOnly => "memory-only",
        }
    }
}

/// The bug, or its fix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// With the bug.
    Buggy,
    /// Its fixed twin.
    Fixed,
}

/// The field manager the operators write with.
pub const FIELD_MANAGER: &str = "buggy-operator";
/// [`Bug::StuckFinalizer`]'s finalizer.
pub const FINALIZER: &str = "buggy.reconcile-loop.dev/cleanup";

/// What the reconcile needs.
#[derive(Debug)]
pub struct Context<R, T> {
    runtime: R,
    transport: T,
    bug: Bug,
    variant: Variant,
    started: std::time::Instant,
    /// [`Bug::MemoryOnly`]'s buggy memory: children made, by widget uid.
    made: Mutex<BTreeMap<String, u32>>,
    /// When set, a reconcile that succeeded comes back this soon (polling), instead of
    /// waiting for a change.
    pub requeue: Option<std::time::Duration>,
}

/// Why a reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A write failed.
    #[error("{what}: {source}")]
    Write {
        /// What was written.
        what: String,
        /// The apiserver's answer.
        #[source]
        source: ApiError,
    },
    /// The finalizer helper failed.
    #[error(transparent)]
    Finalizer(#[from] Box<finalizer::Error<Error>>),
}

fn write(what: impl Into<String>) -> impl FnOnce(ApiError) -> Error {
    let what = what.into();
    move |source| Error::Write { what, source }
}

/// The widgets and the ConfigMaps of `namespace`, and the controller over them.
pub fn controller<R: Runtime, T: Transport>(
    runtime: R,
    transport: T,
    namespace: &str,
) -> Controller<Widget, ObjectKey, R, T> {
    Controller::for_objects_with(runtime, Source::namespaced(transport.clone(), namespace))
        .owns(Source::<ConfigMap, T>::namespaced(transport, namespace))
        .concurrency(2)
}

/// What [`reconcile`] needs, for `bug` as `variant`.
pub fn context<R: Runtime, T: Transport>(
    runtime: &R,
    transport: T,
    bug: Bug,
    variant: Variant,
) -> Context<R, T> {
    Context {
        runtime: runtime.clone(),
        transport,
        bug,
        variant,
        started: runtime.now(),
        made: Mutex::new(BTreeMap::new()),
        requeue: None,
    }
}

/// Runs the operator with `bug` as `variant` until the shutdown signal.
///
/// # Errors
/// When the controller cannot start.
pub async fn run<R: ShutdownSignal, T: Transport>(
    runtime: R,
    transport: T,
    namespace: &str,
    bug: Bug,
    variant: Variant,
) -> Result<(), reconcile_engine::Error> {
    let ctx = Arc::new(context(&runtime, transport.clone(), bug, variant));
    controller(runtime, transport, namespace)
        .shutdown_on_signal()
        .run(reconcile, error_policy, ctx)
        .await
}

/// A 409 backs off, and so does anything else but a 404, which waits for the change
/// the watch brings. ([`Bug::IgnoredConflict`]'s bug is in the reconcile, not here.)
pub fn error_policy<R, T>(
    _request: &Reconcile<Widget, ObjectKey>,
    error: &Error,
    _ctx: Arc<Context<R, T>>,
) -> Action {
    match error {
        Error::Write { source, .. } if source.is_not_found() => Action::await_change(),
        _ => Action::backoff(),
    }
}

/// The child `name` of `widget`, holding its content.
fn child(widget: &Widget, name: Option<&str>, generate: bool) -> ConfigMap {
    let owner = widget
        .controller_owner_ref(&())
        .map(|mut o: OwnerReference| {
            o.block_owner_deletion = Some(true);
            o
        });
    ConfigMap {
        metadata: ObjectMeta {
            name: name.map(str::to_owned),
            generate_name: generate.then(|| format!("{}-", widget.name_any())),
            namespace: widget.namespace(),
            owner_references: owner.map(|o| vec![o]),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([(
            "content".to_owned(),
            widget.spec.content.clone(),
        )])),
        ..ConfigMap::default()
    }
}

/// The name of a widget's one child.
#[must_use]
pub fn child_name(widget: &str) -> String {
    format!("{widget}-child")
}

/// One reconcile, by bug and variant.
///
/// # Errors
/// A failed write.
pub async fn reconcile<R: Runtime, T: Transport>(
    request: Reconcile<Widget, ObjectKey>,
    ctx: Arc<Context<R, T>>,
) -> Result<Action, Error> {
    let key = request.parent().clone();
    let children_api = ApiClient::<ConfigMap, T>::scoped(ctx.transport.clone(), key.namespace());
    let widgets = ApiClient::<Widget, T>::scoped(ctx.transport.clone(), key.namespace());
    let children = request.related::<ConfigMap>();
    let buggy = ctx.variant == Variant::Buggy;
    let Some(widget) = request.object().cloned() else {
        if ctx.bug == Bug::StaleListDelete && buggy {
            // The bug: "not in my cache" is taken for "gone", and its children go with it.
            for c in &children {
                children_api
                    .delete(&c.name_any(), &DeleteParams::default())
                    .await
                    .map_err(write(format!("deleting {}", c.name_any())))?;
            }
        }
        return Ok(Action::await_change());
    };
    let apply = PatchParams::apply(FIELD_MANAGER).force();
    match ctx.bug {
        Bug::StaleDuplicate => {
            if buggy {
                // The bug: the cache decides whether the child exists.
                if children.is_empty() {
                    let c = child(&widget, None, true);
                    children_api
                        .create(&PostParams::default(), &c)
                        .await
                        .map_err(write("creating the child"))?;
                }
                update_content(&children_api, &widget, &children).await?;
            } else {
                apply_child(
                    &children_api,
                    &widget,
                    &child_name(&widget.name_any()),
                    &apply,
                )
                .await?;
            }
        }
        Bug::StuckFinalizer => {
            let name = child_name(&widget.name_any());
            let action = finalizer(&widgets, FINALIZER, widget, |event| async {
                match event {
                    finalizer::Event::Apply(w) => {
                        if !buggy {
                            // A restart's stale LIST can show a widget that is already gone:
                            // the child (the stand-in for state outside the cluster, which no
                            // collector removes) is made only once a live read confirms it.
                            // The 10,000-seed run of this twin found that second bug.
                            let live = widgets
                                .get_opt(&w.name_any())
                                .await
                                .map_err(write("reading the widget"))?;
                            if live.is_none_or(|l| l.metadata.deletion_timestamp.is_some()) {
                                return Ok(Action::await_change());
                            }
                        }
                        // No owner reference: the finalizer is what removes the child.
                        let mut c = child(&w, Some(&name), false);
                        c.metadata.owner_references = None;
                        children_api
                            .patch(&name, &apply, &Patch::Apply(&c))
                            .await
                            .map_err(write(format!("applying {name}")))?;
                        Ok(Action::await_change())
                    }
                    finalizer::Event::Cleanup(_) => {
                        match children_api.delete(&name, &DeleteParams::default()).await {
                            Ok(()) => Ok(Action::await_change()),
                            // The fix: the child is already gone, which is what cleanup wants.
                            Err(e) if e.is_not_found() && !buggy => Ok(Action::await_change()),
                            Err(e) => Err(write(format!("deleting {name}"))(e)),
                        }
                    }
                }
            })
            .await
            .map_err(Box::new)?;
            return Ok(action);
        }
        Bug::StatusHotLoop => {
            apply_child(
                &children_api,
                &widget,
                &child_name(&widget.name_any()),
                &apply,
            )
            .await?;
            let status = WidgetStatus {
                observed_generation: widget.metadata.generation,
                last_reconciled: buggy.then(|| {
                    let at = ctx.runtime.now().saturating_duration_since(ctx.started);
                    format!("+{:.3}s", at.as_secs_f64())
                }),
            };
            if buggy || widget.status.as_ref() != Some(&status) {
                widgets
                    .patch_status(
                        &widget.name_any(),
                        &PatchParams::default(),
                        &Patch::Merge(&json!({ "status": status })),
                    )
                    .await
                    .map_err(write("writing the status"))?;
            }
        }
        Bug::IgnoredConflict => {
            let name = child_name(&widget.name_any());
            let current = children.iter().find(|c| c.name_any() == name);
            let want = child(&widget, Some(&name), false);
            match current {
                None => match children_api.create(&PostParams::default(), &want).await {
                    Ok(_) => {}
                    Err(e) if e.is_already_exists() => return Ok(Action::backoff()),
                    Err(e) => return Err(write(format!("creating {name}"))(e)),
                },
                Some(c) if c.data == want.data => {}
                Some(c) => {
                    let mut updated = (**c).clone();
                    updated.data = want.data.clone();
                    match children_api
                        .replace(&name, &PostParams::default(), &updated)
                        .await
                    {
                        Ok(_) => {}
                        // The bug: a conflict is taken for "someone else did it".
                        Err(e) if e.is_conflict() && buggy => {}
                        Err(e) => return Err(write(format!("updating {name}"))(e)),
                    }
                }
            }
        }
        Bug::StaleListDelete => {
            apply_child(
                &children_api,
                &widget,
                &child_name(&widget.name_any()),
                &apply,
            )
            .await?;
        }
        Bug::MemoryOnly => {
            if buggy {
                let uid = widget.uid().unwrap_or_default();
                let made = *ctx
                    .made
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .get(&uid)
                    .unwrap_or(&0);
                for _ in made..widget.spec.replicas {
                    children_api
                        .create(&PostParams::default(), &child(&widget, None, true))
                        .await
                        .map_err(write("creating a child"))?;
                    *ctx.made
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .entry(uid.clone())
                        .or_default() += 1;
                }
                update_content(&children_api, &widget, &children).await?;
            } else {
                for i in 0..widget.spec.replicas {
                    let name = format!("{}-{i}", widget.name_any());
                    apply_child(&children_api, &widget, &name, &apply).await?;
                }
            }
        }
    }
    Ok(ctx
        .requeue
        .map_or_else(Action::await_change, Action::requeue))
}

/// Sets the content of each of `children` that holds another.
async fn update_content<T: Transport>(
    api: &ApiClient<ConfigMap, T>,
    widget: &Widget,
    children: &[Arc<ConfigMap>],
) -> Result<(), Error> {
    for c in children {
        if c.data.as_ref().and_then(|d| d.get("content")) != Some(&widget.spec.content) {
            let patch = json!({ "data": { "content": widget.spec.content } });
            api.patch(
                &c.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
            .map_err(write(format!("updating {}", c.name_any())))?;
        }
    }
    Ok(())
}

async fn apply_child<T: Transport>(
    api: &ApiClient<ConfigMap, T>,
    widget: &Widget,
    name: &str,
    params: &PatchParams,
) -> Result<(), Error> {
    api.patch(
        name,
        params,
        &Patch::Apply(&child(widget, Some(name), false)),
    )
    .await
    .map_err(write(format!("applying {name}")))?;
    Ok(())
}

/// A widget named `name` in `default` holding `content`, with `replicas` children.
#[must_use]
pub fn widget(name: &str, content: &str, replicas: u32) -> Widget {
    let mut w = Widget::new(
        name,
        WidgetSpec {
            content: content.to_owned(),
            replicas,
        },
    );
    w.metadata.namespace = Some("default".to_owned());
    w
}

/// The children of the widget named `name` (by owner reference or by the name
/// [`Bug::StuckFinalizer`] gives its unowned child), in `configmaps`.
#[must_use]
pub fn children_of<'a>(configmaps: &'a [ConfigMap], name: &str) -> Vec<&'a ConfigMap> {
    configmaps
        .iter()
        .filter(|c| {
            c.owner_references()
                .iter()
                .any(|o| o.kind == Widget::kind(&()) && o.name == name)
                || c.name_any() == child_name(name)
        })
        .collect()
}
