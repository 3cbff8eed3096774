//! A partial ReplicaSet view for our peers in the two-source scenario: the fields a
//! controller of ReplicaSets reads (identity, labels, annotations, desired and observed
//! replicas), as a user of reconcile-core writes one for a kind the core has no view of.
//! Everything else (the pod template, managedFields) is skipped while parsing, as
//! [`PodView`](reconcile_core::pod::PodView) skips what it does not keep.

use compact_str::CompactString;
use reconcile_core::{Object, OwnerRef, StringMap};
use serde::{Deserialize, Deserializer};

/// Reads `null` as the type's default: the apiserver spells an unset section or selector as
/// `null` (its bookmarks carry `"selector":null`).
fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// The parts of an `apps/v1` ReplicaSet our peers keep.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct ReplicaSetView {
    /// Identity, labels and annotations.
    #[serde(default, deserialize_with = "null_as_default")]
    pub metadata: ReplicaSetMetadata,
    /// What is wanted.
    #[serde(default, deserialize_with = "null_as_default")]
    pub spec: ReplicaSetSpec,
    /// What the ReplicaSet controller last observed.
    #[serde(default, deserialize_with = "null_as_default")]
    pub status: ReplicaSetStatus,
}

/// `metadata`: identity, version, labels and annotations.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaSetMetadata {
    /// `metadata.name`.
    pub name: Option<CompactString>,
    /// `metadata.namespace`: part of the store key.
    pub namespace: Option<CompactString>,
    /// `metadata.uid`: what its pods' owner references name.
    pub uid: Option<CompactString>,
    /// `metadata.resourceVersion`: opaque, equality only.
    pub resource_version: Option<CompactString>,
    /// `metadata.generation`, compared with `status.observedGeneration`.
    pub generation: Option<i64>,
    /// `metadata.labels`.
    #[serde(default)]
    pub labels: StringMap,
    /// `metadata.annotations`.
    #[serde(default)]
    pub annotations: StringMap,
}

/// `spec`: desired replicas and the pod selector.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaSetSpec {
    /// `spec.replicas` (the apiserver defaults it to 1).
    pub replicas: Option<i32>,
    /// `spec.selector.matchLabels`.
    #[serde(default, deserialize_with = "null_as_default")]
    pub selector: LabelSelector,
}

/// `spec.selector`, its `matchLabels` only.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LabelSelector {
    /// `matchLabels`.
    #[serde(default)]
    pub match_labels: StringMap,
}

/// `status`: what the ReplicaSet controller observed.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaSetStatus {
    /// `status.replicas`.
    #[serde(default)]
    pub replicas: i32,
    /// `status.readyReplicas`.
    pub ready_replicas: Option<i32>,
    /// `status.availableReplicas`.
    pub available_replicas: Option<i32>,
    /// `status.observedGeneration`.
    pub observed_generation: Option<i64>,
}

impl Object for ReplicaSetView {
    fn object_namespace(&self) -> Option<&str> {
        self.metadata.namespace.as_deref()
    }

    fn object_name(&self) -> Option<&str> {
        self.metadata.name.as_deref()
    }

    fn object_resource_version(&self) -> Option<&str> {
        self.metadata.resource_version.as_deref()
    }

    fn label(&self, key: &str) -> Option<&str> {
        self.metadata.labels.get(key)
    }

    /// The view keeps no owner references: nothing in the scenario maps a ReplicaSet to
    /// its Deployment.
    fn controller_owner(&self) -> Option<OwnerRef<'_>> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_workload_replica_set_and_a_bookmark_shaped_one() {
        let templates = crate::workload::templates().unwrap();
        let rs = crate::workload::replica_set(&templates, 4, 77);
        let view: ReplicaSetView = serde_json::from_value(rs).unwrap();
        assert_eq!(view.object_name(), Some("cell-00004"));
        assert_eq!(view.object_namespace(), Some(crate::workload::NAMESPACE));
        assert_eq!(view.object_resource_version(), Some("77"));
        assert_eq!(view.label("cell"), Some("cell-00004"));
        assert_eq!(view.spec.replicas, Some(10));
        assert_eq!(
            view.spec.selector.match_labels.get("cell"),
            Some("cell-00004")
        );
        assert_eq!(view.status.ready_replicas, Some(10));
        let empty: ReplicaSetView = serde_json::from_str(
            r#"{"metadata":{"resourceVersion":"3"},"spec":{"selector":null,"template":{"metadata":{},"spec":{"containers":null}}},"status":{"replicas":0}}"#,
        )
        .unwrap();
        assert_eq!(empty.object_resource_version(), Some("3"));
        assert!(empty.spec.selector.match_labels.is_empty());
    }
}
