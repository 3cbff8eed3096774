//! The view's fields, and how they read from JSON.

use compact_str::CompactString;
use serde::{Deserialize, Deserializer};

use crate::string_map::StringMap;

/// Reads `null` as the type's default, for the maps and lists an apiserver may spell as `null`.
fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// The parts of a Pod the reconcile loop reads.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodView {
    /// Identity and labels.
    #[serde(default, deserialize_with = "null_as_default")]
    pub metadata: PodMetadata,
    /// Placement.
    #[serde(default, deserialize_with = "null_as_default")]
    pub spec: PodSpec,
    /// Lifecycle as reported by the kubelet.
    #[serde(default, deserialize_with = "null_as_default")]
    pub status: PodStatus,
}

/// `metadata`: identity, version and labels.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodMetadata {
    /// `metadata.name`.
    pub name: Option<CompactString>,
    /// `metadata.namespace`: part of the store key.
    pub namespace: Option<CompactString>,
    /// `metadata.uid`: a pod recreated under the same name gets a new one.
    pub uid: Option<CompactString>,
    /// `metadata.resourceVersion`: opaque, equality only.
    pub resource_version: Option<CompactString>,
    /// `metadata.deletionTimestamp` (RFC 3339), set once a graceful deletion started.
    pub deletion_timestamp: Option<CompactString>,
    /// `metadata.labels`.
    #[serde(default)]
    pub labels: StringMap,
    /// `metadata.annotations`.
    #[serde(default)]
    pub annotations: StringMap,
    /// The controller among `metadata.ownerReferences` (the entry with `controller: true`),
    /// by kind and name; the other owners are not kept.
    #[serde(
        default,
        rename = "ownerReferences",
        deserialize_with = "controller_owner"
    )]
    pub controller: Option<ControllerRef>,
}

/// The controller owner of a pod: the kind and name of its entry of
/// `metadata.ownerReferences` with `controller: true` (inline: no allocation for names of up
/// to 24 bytes).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct ControllerRef {
    /// `kind`, for example `ReplicaSet`.
    pub kind: CompactString,
    /// The owner's name.
    pub name: CompactString,
}

/// One entry of `metadata.ownerReferences`: the fields the view keeps, required as the
/// schema says; `apiVersion` and `uid` are skipped unread.
#[derive(Deserialize)]
struct OwnerEntry {
    kind: CompactString,
    name: CompactString,
    controller: Option<bool>,
}

/// Reads `metadata.ownerReferences` (or `null`), keeping only the controller: no list is
/// built, and a pod without a controller costs nothing.
fn controller_owner<'de, D>(deserializer: D) -> Result<Option<ControllerRef>, D::Error>
where
    D: Deserializer<'de>,
{
    struct Owners;
    impl<'de> serde::de::Visitor<'de> for Owners {
        type Value = Option<ControllerRef>;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a list of owner references")
        }

        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_none<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_seq(self)
        }

        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Self::Value, A::Error> {
            let mut controller = None;
            while let Some(entry) = seq.next_element::<OwnerEntry>()? {
                if controller.is_none() && entry.controller == Some(true) {
                    controller = Some(ControllerRef {
                        kind: entry.kind,
                        name: entry.name,
                    });
                }
            }
            Ok(controller)
        }
    }
    deserializer.deserialize_option(Owners)
}

/// `spec`: where the pod runs.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSpec {
    /// `spec.nodeName`, once scheduled.
    pub node_name: Option<CompactString>,
    /// `spec.subdomain`.
    pub subdomain: Option<CompactString>,
    /// `spec.nodeSelector`.
    #[serde(default)]
    pub node_selector: StringMap,
    /// `spec.schedulingGates[].name`.
    #[serde(default, deserialize_with = "null_as_default")]
    pub scheduling_gates: Box<[SchedulingGate]>,
}

/// One entry of `spec.schedulingGates`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct SchedulingGate {
    /// The gate's name.
    pub name: CompactString,
}

/// `status`: what the kubelet reports.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodStatus {
    /// `status.phase`: Pending, Running, Succeeded, Failed or Unknown.
    pub phase: Option<CompactString>,
    /// `status.podIP`.
    #[serde(rename = "podIP")]
    pub pod_ip: Option<CompactString>,
    /// `status.conditions`.
    #[serde(default, deserialize_with = "null_as_default")]
    pub conditions: Box<[PodCondition]>,
    /// `status.containerStatuses`.
    #[serde(default, deserialize_with = "null_as_default")]
    pub container_statuses: Box<[ContainerStatus]>,
}

impl PodStatus {
    /// The status (`"True"`, `"False"`, `"Unknown"`) of the condition of type `type_`.
    #[must_use]
    pub fn condition(&self, type_: &str) -> Option<&str> {
        self.conditions
            .iter()
            .find(|c| c.type_ == type_)
            .map(|c| c.status.as_str())
    }

    /// Whether the pod is Running and its `Ready` condition is `True`.
    #[must_use]
    pub fn is_running_and_ready(&self) -> bool {
        self.phase.as_deref() == Some("Running") && self.condition("Ready") == Some("True")
    }
}

/// One entry of `status.conditions`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct PodCondition {
    /// `type`, for example `Ready`.
    #[serde(rename = "type")]
    pub type_: CompactString,
    /// `status`: `True`, `False` or `Unknown`.
    pub status: CompactString,
    /// `reason`, machine-readable. Boxed, not inline: most conditions have none, and the
    /// 8 bytes an inline string would add to each of a pod's five or so conditions are
    /// 40 B of every cached pod (issue 16's 1.5 KB per pod).
    pub reason: Option<Box<str>>,
}

/// One entry of `status.containerStatuses`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerStatus {
    /// The container's name.
    pub name: CompactString,
    /// The runtime's container id, for example `containerd://…`.
    #[serde(rename = "containerID")]
    pub container_id: Option<CompactString>,
    /// Restarts so far. Required, as in the Kubernetes schema: a status without it does not
    /// decode (it is not read as 0).
    pub restart_count: i32,
    /// Current state.
    #[serde(default, deserialize_with = "null_as_default")]
    pub state: ContainerState,
    /// The previous state, set after a restart.
    #[serde(default, deserialize_with = "null_as_default")]
    pub last_state: ContainerState,
}

/// `state` / `lastState` of a container: at most one of the members is set.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct ContainerState {
    /// Set while running.
    pub running: Option<ContainerStateRunning>,
    /// Set once exited.
    pub terminated: Option<ContainerStateTerminated>,
}

/// `state.running`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerStateRunning {
    /// When the container (re)started, RFC 3339.
    pub started_at: Option<CompactString>,
}

/// `state.terminated`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct ContainerStateTerminated {
    /// The id of the container that exited.
    #[serde(rename = "containerID")]
    pub container_id: Option<CompactString>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_fields_are_ignored_and_nulls_read_as_empty() {
        let pod: PodView = serde_json::from_str(
            r#"{"kind":"Pod","metadata":{"name":"a","namespace":"ns","labels":null,
                "annotations":null,"managedFields":[{"x":1}]},
                "spec":{"containers":null,"nodeSelector":null,"schedulingGates":null},
                "status":{"conditions":null,"containerStatuses":null,"hostIP":"1.2.3.4"}}"#,
        )
        .unwrap();
        assert_eq!(pod.metadata.name.as_deref(), Some("a"));
        assert!(pod.metadata.labels.is_empty());
        assert!(pod.spec.scheduling_gates.is_empty());
        assert!(pod.status.conditions.is_empty());
    }

    #[test]
    fn null_sections_read_as_empty() {
        let pod: PodView =
            serde_json::from_str(r#"{"metadata":null,"spec":null,"status":null}"#).unwrap();
        assert_eq!(pod, PodView::default());
    }

    #[test]
    fn reads_container_state_and_readiness() {
        let pod: PodView = serde_json::from_str(
            r#"{"status":{"phase":"Running","podIP":"10.0.0.1",
                "conditions":[{"type":"Ready","status":"True","lastProbeTime":null}],
                "containerStatuses":[{"name":"c","containerID":"containerd://1","restartCount":2,
                  "state":{"running":{"startedAt":"2026-01-01T00:00:00Z"}},
                  "lastState":{"terminated":{"containerID":"containerd://0","exitCode":1}}}]}}"#,
        )
        .unwrap();
        assert!(pod.status.is_running_and_ready());
        assert_eq!(pod.status.pod_ip.as_deref(), Some("10.0.0.1"));
        let c = &pod.status.container_statuses[0];
        assert_eq!(c.restart_count, 2);
        assert_eq!(
            c.last_state
                .terminated
                .as_ref()
                .unwrap()
                .container_id
                .as_deref(),
            Some("containerd://0")
        );
    }

    #[test]
    fn required_fields_follow_the_kubernetes_schema() {
        let status = |c: &str| {
            serde_json::from_str::<PodView>(&format!(
                r#"{{"status":{{"containerStatuses":[{c}]}}}}"#
            ))
        };
        assert!(status(r#"{"name":"c","restartCount":0}"#).is_ok());
        assert!(status(r#"{"restartCount":0}"#).is_err(), "name is required");
        assert!(
            status(r#"{"name":"c"}"#).is_err(),
            "restartCount is required"
        );
        let condition = |c: &str| {
            serde_json::from_str::<PodView>(&format!(r#"{{"status":{{"conditions":[{c}]}}}}"#))
        };
        assert!(condition(r#"{"type":"Ready","status":"True"}"#).is_ok());
        assert!(
            condition(r#"{"status":"True"}"#).is_err(),
            "type is required"
        );
        assert!(
            condition(r#"{"type":"Ready"}"#).is_err(),
            "status is required"
        );
        assert!(serde_json::from_str::<PodView>(r#"{"spec":{"schedulingGates":[{}]}}"#).is_err());
    }

    #[test]
    fn a_wrongly_typed_field_is_an_error_not_a_default() {
        assert!(serde_json::from_str::<PodView>(r#"{"metadata":{"name":5}}"#).is_err());
    }
}
