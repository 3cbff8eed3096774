//! Transforms: a per-source function applied to each object after it is decoded and before
//! it is cached (kube-runtime's `watcher(..).modify(..)`, controller-runtime's
//! `cache.Options.DefaultTransform` and `TransformStripManagedFields`).
//!
//! Where it runs and why: see [`Transform`].

use std::fmt;
use std::sync::Arc;

use super::Change;

/// A function applied to each object of one source after decoding and before caching.
///
/// # Where it runs, and why there
///
/// An object becomes an `O` in five places: a LIST body (decoded on a driver's task, while it
/// streams in), a paged LIST, a streaming list's initial events, a WATCH frame (parsed in
/// the core) and an in-process push. Each reaches a cache as one store write inside the
/// core, and every write passes through one function before any cache reads it, called for
/// the primary's store and by each secondary source. Putting the transform there,
/// rather than at each decode point, covers all five paths (and any later one) with one
/// call, and fixes the order for every path: decode, transform, predicate, cache. The core
/// stays pure: a transform is a plain function of the object, which the core calls as it
/// calls a [`KeyMap`](crate::KeyMap); it must be deterministic (no clock, no I/O), as a
/// replay feeds the same objects through it again.
///
/// A tombstone (a DELETED frame, an in-process delete) is transformed too, as kube-runtime
/// applies `modify` to every event: the store looks it up by key alone.
///
/// Cloning shares the function. [`Transform::then`] chains two, in order.
///
/// The ready-made ones for any `kube::Resource` (feature `kube`):
/// [`strip_managed_fields`](crate::transform::strip_managed_fields) and
/// [`strip_last_applied`](crate::transform::strip_last_applied).
#[doc(alias = "modify")]
#[doc(alias = "DefaultTransform")]
pub struct Transform<O> {
    f: Arc<dyn Fn(&mut O) + Send + Sync>,
}

impl<O> Clone for Transform<O> {
    fn clone(&self) -> Self {
        Transform {
            f: Arc::clone(&self.f),
        }
    }
}

impl<O> fmt::Debug for Transform<O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Transform")
    }
}

impl<O: 'static> Transform<O> {
    /// The transform `f`; it must be deterministic.
    pub fn new(f: impl Fn(&mut O) + Send + Sync + 'static) -> Self {
        Transform { f: Arc::new(f) }
    }

    /// This transform, then `next`.
    #[must_use]
    pub fn then(self, next: Transform<O>) -> Self {
        Transform::new(move |o: &mut O| {
            (self.f)(o);
            (next.f)(o);
        })
    }

    /// Applies the transform to `object`.
    pub fn apply(&self, object: &mut O) {
        (self.f)(object);
    }

    /// Applies the transform to every object of `change`, in place. The objects the reflector
    /// and the in-process source's plain events bring are not shared yet (each decoded object
    /// was moved into a fresh `Arc`), so each is changed; one that is shared (an in-process
    /// `*Shared` event's, still held by another cache) is left as it is rather than copied
    /// (`O` need not be `Clone`): see [`SourceEvent`](crate::SourceEvent) and the test
    /// `a_shared_object_is_left_untouched`.
    pub(crate) fn change(&self, change: &mut Change<O>) {
        let apply = |object: &mut Arc<O>| {
            if let Some(object) = Arc::get_mut(object) {
                self.apply(object);
            }
        };
        match change {
            Change::Upsert(object) | Change::Delete(object) => apply(object),
            Change::Replace(objects) => objects.iter_mut().for_each(apply),
        }
    }
}

/// Applies `transform`, if any, to `change`.
pub(crate) fn apply_to<O: 'static>(transform: Option<&Transform<O>>, change: &mut Change<O>) {
    if let Some(transform) = transform {
        transform.change(change);
    }
}

/// The annotation `kubectl apply` (client-side) writes: the whole last applied manifest, as
/// JSON, on every object it applied.
pub const LAST_APPLIED_ANNOTATION: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Drops `metadata.managedFields` (controller-runtime's `TransformStripManagedFields`): the
/// server-side apply bookkeeping, which a controller rarely reads and which is often the
/// largest part of an object's metadata.
///
/// Measured on 10,000 full k8s-openapi `Pod`s (real pods of a kube-apiserver 1.36, 3-4 KB of
/// managedFields each, with a last-applied annotation; 12 KB of JSON per pod) cached by a
/// `ReconcileLoop`: 60,209 B of heap per pod without it, 26,800 B with it (55 % saved), and
/// 23,482 B with [`strip_last_applied`] too (61 %). The managedFields decode into
/// `serde_json::Value` trees, about 33 KB a pod. See `docs/benchmarks.md`, "Transforms", and
/// `core/tests/transform_memory.rs`.
#[cfg(feature = "kube")]
pub fn strip_managed_fields<K: kube_core::Resource>(object: &mut K) {
    object.meta_mut().managed_fields = None;
}

/// Drops the `kubectl.kubernetes.io/last-applied-configuration` annotation (a copy of the
/// whole manifest `kubectl apply` last sent), and the annotations map with it when nothing
/// else is left in it. On the 10,000 Pods of [`strip_managed_fields`], after it: 26,800 B
/// of heap per pod, 23,482 B with this one too (the annotation, about 3 KB a pod there).
#[cfg(feature = "kube")]
pub fn strip_last_applied<K: kube_core::Resource>(object: &mut K) {
    let meta = object.meta_mut();
    if let Some(annotations) = &mut meta.annotations {
        annotations.remove(LAST_APPLIED_ANNOTATION);
        if annotations.is_empty() {
            meta.annotations = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pod::PodView;

    fn pod(name: &str) -> PodView {
        serde_json::from_str(&format!(
            r#"{{"metadata":{{"name":"{name}","namespace":"ns","resourceVersion":"1","labels":{{"cell":"a"}}}}}}"#
        ))
        .expect("a pod")
    }

    fn rename(o: &mut PodView) {
        let name = o.metadata.name.take().unwrap_or_default();
        o.metadata.name = Some(format!("{name}-t").into());
    }

    fn names(change: &Change<PodView>) -> Vec<String> {
        let name = |o: &PodView| o.metadata.name.as_deref().unwrap_or("").to_owned();
        match change {
            Change::Upsert(o) | Change::Delete(o) => vec![name(o)],
            Change::Replace(objects) => objects.iter().map(|o| name(o)).collect(),
        }
    }

    #[test]
    fn every_object_of_every_change_is_transformed_once() {
        let t = Transform::new(rename);
        for (mut change, want) in [
            (Change::Upsert(Arc::new(pod("a"))), vec!["a-t"]),
            (Change::Delete(Arc::new(pod("b"))), vec!["b-t"]),
            (
                Change::Replace(vec![Arc::new(pod("c")), Arc::new(pod("d"))]),
                vec!["c-t", "d-t"],
            ),
        ] {
            t.change(&mut change);
            assert_eq!(names(&change), want);
        }
    }

    #[test]
    fn then_applies_both_in_order() {
        let t = Transform::new(rename).then(Transform::new(|o: &mut PodView| {
            let name = o.metadata.name.take().unwrap_or_default();
            o.metadata.name = Some(name.to_uppercase());
        }));
        let mut o = pod("a");
        t.apply(&mut o);
        assert_eq!(o.metadata.name.as_deref(), Some("A-T"));
    }

    #[test]
    fn a_shared_object_is_left_untouched() {
        let t = Transform::new(rename);
        let shared = Arc::new(pod("a"));
        let mut change = Change::Upsert(Arc::clone(&shared));
        t.change(&mut change);
        assert_eq!(names(&change), ["a"]);
        let mut none = Change::Upsert(Arc::new(pod("b")));
        apply_to(None, &mut none);
        assert_eq!(names(&none), ["b"]);
    }

    #[cfg(feature = "kube")]
    #[test]
    fn the_ready_made_transforms_strip_what_they_name_and_nothing_else() {
        use k8s_openapi::api::core::v1::Pod;
        let mut pod: Pod = serde_json::from_str(&format!(
            r#"{{"metadata":{{"name":"p","namespace":"ns","labels":{{"a":"b"}},
                "annotations":{{"{LAST_APPLIED_ANNOTATION}":"{{}}","keep":"me"}},
                "managedFields":[{{"manager":"kubectl","operation":"Apply"}}]}}}}"#
        ))
        .expect("a pod");
        strip_managed_fields(&mut pod);
        assert!(pod.metadata.managed_fields.is_none());
        assert!(
            pod.metadata
                .annotations
                .as_ref()
                .unwrap()
                .contains_key(LAST_APPLIED_ANNOTATION)
        );
        strip_last_applied(&mut pod);
        let annotations = pod.metadata.annotations.as_ref().expect("one is left");
        assert_eq!(annotations.keys().collect::<Vec<_>>(), ["keep"]);
        assert_eq!(pod.metadata.labels.as_ref().unwrap().len(), 1);
        // The last annotation gone takes the map with it.
        pod.metadata.annotations.as_mut().unwrap().remove("keep");
        pod.metadata
            .annotations
            .as_mut()
            .unwrap()
            .insert(LAST_APPLIED_ANNOTATION.into(), "{}".into());
        strip_last_applied(&mut pod);
        assert!(pod.metadata.annotations.is_none());
    }
}
