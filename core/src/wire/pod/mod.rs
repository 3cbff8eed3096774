//! A partial Pod view: the fields a process-pool controller reads, and nothing else.
//!
//! Every other field of the apiserver's Pod is skipped while parsing, which is what keeps a
//! cached pod near 1 KB of heap instead of the tens of KB a full `k8s_openapi` Pod costs.
//! Strings are `CompactString`s: up to 24 bytes inline, so most fields cost no allocation.
//! `null` maps and lists read as empty (no consumer tells an unset map from an empty one); absent
//! optional scalars read as `None`.

// The fields and their JSON decoding are in `view`, the decoder of the same view from
// Kubernetes protobuf in `protobuf`; what makes the view an `Object` is here, as it names both.
pub(crate) mod protobuf;
mod view;

pub use view::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStatus,
    ControllerRef, PodCondition, PodMetadata, PodSpec, PodStatus, PodView, SchedulingGate,
};

use crate::wire::object::{Object, OwnerRef};
use crate::wire::protobuf::codec::ProtobufCodec;

impl Object for PodView {
    fn protobuf() -> Option<ProtobufCodec<Self>> {
        Some(protobuf::POD_VIEW)
    }

    fn same_labels(&self, other: &Self) -> Option<bool> {
        Some(self.metadata.labels == other.metadata.labels)
    }

    fn same_annotations(&self, other: &Self) -> Option<bool> {
        Some(self.metadata.annotations == other.metadata.annotations)
    }

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

    fn controller_owner(&self) -> Option<OwnerRef<'_>> {
        // The view keeps no apiVersion or uid: those read as empty.
        self.metadata.controller.as_ref().map(|c| OwnerRef {
            api_version: "",
            kind: &c.kind,
            name: &c.name,
            uid: "",
        })
    }
}
