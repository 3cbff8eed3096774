//! Event filters (controller-runtime's predicates): which changes of an object the cache
//! already holds wake its parent. A filtered change still updates the cache; only the wake
//! is skipped. A new object, a deletion and a move to another parent always wake.

use std::fmt;
use std::sync::Arc;

use crate::wire::object::Object;

/// A function of (cached, incoming) deciding whether an update wakes.
pub type PredicateFn<O> = Arc<dyn Fn(&O, &O) -> bool + Send + Sync>;

/// Decides whether an update of a cached object wakes its parent.
pub enum Predicate<O> {
    /// Any new resourceVersion (the default, and the rule without a predicate).
    ResourceVersionChanged,
    /// `metadata.generation` changed: spec edits wake, status writes do not
    /// (controller-runtime's `GenerationChangedPredicate`). An object whose view keeps no
    /// generation always wakes.
    GenerationChanged,
    /// `metadata.labels` changed (`LabelChangedPredicate`).
    LabelsChanged,
    /// `metadata.annotations` changed (`AnnotationChangedPredicate`).
    AnnotationsChanged,
    /// A function of (cached, incoming): true wakes.
    Custom(PredicateFn<O>),
    /// Wakes when any of these would (`predicate.Or`).
    Any(Vec<Predicate<O>>),
    /// Wakes when all of these would (`predicate.And`).
    All(Vec<Predicate<O>>),
}

impl<O> Clone for Predicate<O> {
    fn clone(&self) -> Self {
        match self {
            Predicate::ResourceVersionChanged => Predicate::ResourceVersionChanged,
            Predicate::GenerationChanged => Predicate::GenerationChanged,
            Predicate::LabelsChanged => Predicate::LabelsChanged,
            Predicate::AnnotationsChanged => Predicate::AnnotationsChanged,
            Predicate::Custom(f) => Predicate::Custom(Arc::clone(f)),
            Predicate::Any(list) => Predicate::Any(list.clone()),
            Predicate::All(list) => Predicate::All(list.clone()),
        }
    }
}

impl<O> fmt::Display for Predicate<O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |f: &mut fmt::Formatter<'_>, name: &str, list: &[Predicate<O>]| {
            write!(f, "{name}(")?;
            for (i, p) in list.iter().enumerate() {
                if i > 0 {
                    f.write_str(",")?;
                }
                write!(f, "{p}")?;
            }
            f.write_str(")")
        };
        match self {
            Predicate::ResourceVersionChanged => f.write_str("resource-version"),
            Predicate::GenerationChanged => f.write_str("generation"),
            Predicate::LabelsChanged => f.write_str("labels"),
            Predicate::AnnotationsChanged => f.write_str("annotations"),
            Predicate::Custom(_) => f.write_str("custom"),
            Predicate::Any(l) => list(f, "any", l),
            Predicate::All(l) => list(f, "all", l),
        }
    }
}

impl<O> fmt::Debug for Predicate<O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Predicate({self})")
    }
}

impl<O: Object> Predicate<O> {
    /// A predicate from a function of (cached, incoming).
    pub fn custom(f: impl Fn(&O, &O) -> bool + Send + Sync + 'static) -> Self {
        Predicate::Custom(Arc::new(f))
    }

    /// Whether the update from `cached` to `incoming` wakes the parent. The core calls it
    /// only for a new resourceVersion of an object staying under the same parent.
    #[must_use]
    pub fn wakes(&self, cached: &O, incoming: &O) -> bool {
        match self {
            Predicate::ResourceVersionChanged => true,
            Predicate::GenerationChanged => {
                match (cached.object_generation(), incoming.object_generation()) {
                    (Some(a), Some(b)) => a != b,
                    _ => true,
                }
            }
            Predicate::LabelsChanged => cached.same_labels(incoming) != Some(true),
            Predicate::AnnotationsChanged => cached.same_annotations(incoming) != Some(true),
            Predicate::Custom(f) => f(cached, incoming),
            Predicate::Any(list) => list.iter().any(|p| p.wakes(cached, incoming)),
            Predicate::All(list) => list.iter().all(|p| p.wakes(cached, incoming)),
        }
    }
}
