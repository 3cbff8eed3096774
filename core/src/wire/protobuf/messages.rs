//! The messages the decoder reads, declared as prost messages with the fields the views read
//! and no others (prost skips the rest), numbered as upstream declares them:
//! k8s.io/api `core/v1/generated.proto`, k8s.io/apimachinery `pkg/apis/meta/v1/generated.proto`
//! and `pkg/runtime/generated.proto`.
//!
//! The decoder does not build these (it walks the bytes straight into the views, see the
//! [module docs](super)); they encode real protobuf for tests, fuzz seeds and simulators, and
//! the tests decode what they encode, so the two declarations are checked against each other.
//! Strings are `optional` (proto2, as upstream), so a test can leave one out.

use std::collections::BTreeMap;

/// `runtime.Unknown`: the envelope after the `k8s\0` magic.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Unknown {
    /// 1: the kind and apiVersion of `raw`.
    #[prost(message, optional, tag = "1")]
    pub type_meta: Option<TypeMeta>,
    /// 2: the object's own message.
    #[prost(bytes = "vec", optional, tag = "2")]
    pub raw: Option<Vec<u8>>,
    /// 3: empty for plain protobuf.
    #[prost(string, optional, tag = "3")]
    pub content_encoding: Option<String>,
    /// 4: empty for plain protobuf.
    #[prost(string, optional, tag = "4")]
    pub content_type: Option<String>,
}

/// `runtime.TypeMeta`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TypeMeta {
    /// 1: `apiVersion`.
    #[prost(string, optional, tag = "1")]
    pub api_version: Option<String>,
    /// 2: `kind`.
    #[prost(string, optional, tag = "2")]
    pub kind: Option<String>,
}

/// `metav1.WatchEvent`: one WATCH frame, written without magic or envelope.
#[derive(Clone, PartialEq, prost::Message)]
pub struct WatchEvent {
    /// 1: `ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK` or `ERROR`.
    #[prost(string, optional, tag = "1")]
    pub r#type: Option<String>,
    /// 2: the enveloped object.
    #[prost(message, optional, tag = "2")]
    pub object: Option<RawExtension>,
}

/// `runtime.RawExtension`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RawExtension {
    /// 1: the bytes (here an enveloped object).
    #[prost(bytes = "vec", optional, tag = "1")]
    pub raw: Option<Vec<u8>>,
}

/// `metav1.Status`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Status {
    /// 1: list metadata (unused).
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<ListMeta>,
    /// 2: `Success` or `Failure`.
    #[prost(string, optional, tag = "2")]
    pub status: Option<String>,
    /// 3: human-readable.
    #[prost(string, optional, tag = "3")]
    pub message: Option<String>,
    /// 4: machine-readable, for example `Expired`.
    #[prost(string, optional, tag = "4")]
    pub reason: Option<String>,
    /// 5: details.
    #[prost(message, optional, tag = "5")]
    pub details: Option<StatusDetails>,
    /// 6: the HTTP status it stands for.
    #[prost(int32, optional, tag = "6")]
    pub code: Option<i32>,
}

/// `metav1.StatusDetails`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct StatusDetails {
    /// 4: causes.
    #[prost(message, repeated, tag = "4")]
    pub causes: Vec<StatusCause>,
}

/// `metav1.StatusCause`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct StatusCause {
    /// 1: `reason` (Go's `Type`).
    #[prost(string, optional, tag = "1")]
    pub reason: Option<String>,
    /// 2: message.
    #[prost(string, optional, tag = "2")]
    pub message: Option<String>,
}

/// `metav1.ListMeta`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ListMeta {
    /// 2: `resourceVersion`.
    #[prost(string, optional, tag = "2")]
    pub resource_version: Option<String>,
    /// 3: `continue`.
    #[prost(string, optional, tag = "3")]
    pub r#continue: Option<String>,
    /// 4: `remainingItemCount`.
    #[prost(int64, optional, tag = "4")]
    pub remaining_item_count: Option<i64>,
    /// 5: `shardInfo`.
    #[prost(message, optional, tag = "5")]
    pub shard_info: Option<ShardInfo>,
}

/// `metav1.ShardInfo` (KEP-5866).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ShardInfo {
    /// 1: `selector`, as the request asked.
    #[prost(string, optional, tag = "1")]
    pub selector: Option<String>,
}

/// `metav1.Time`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Time {
    /// 1: seconds from the epoch.
    #[prost(int64, optional, tag = "1")]
    pub seconds: Option<i64>,
    /// 2: nanoseconds (Go drops them).
    #[prost(int32, optional, tag = "2")]
    pub nanos: Option<i32>,
}

/// `metav1.ObjectMeta`, the fields the views read.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ObjectMeta {
    /// 1
    #[prost(string, optional, tag = "1")]
    pub name: Option<String>,
    /// 3
    #[prost(string, optional, tag = "3")]
    pub namespace: Option<String>,
    /// 5
    #[prost(string, optional, tag = "5")]
    pub uid: Option<String>,
    /// 6
    #[prost(string, optional, tag = "6")]
    pub resource_version: Option<String>,
    /// 9
    #[prost(message, optional, tag = "9")]
    pub deletion_timestamp: Option<Time>,
    /// 11
    #[prost(btree_map = "string, string", tag = "11")]
    pub labels: BTreeMap<String, String>,
    /// 12
    #[prost(btree_map = "string, string", tag = "12")]
    pub annotations: BTreeMap<String, String>,
    /// 13
    #[prost(message, repeated, tag = "13")]
    pub owner_references: Vec<OwnerReference>,
}

/// `metav1.OwnerReference`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct OwnerReference {
    /// 1
    #[prost(string, optional, tag = "1")]
    pub kind: Option<String>,
    /// 3
    #[prost(string, optional, tag = "3")]
    pub name: Option<String>,
    /// 4
    #[prost(string, optional, tag = "4")]
    pub uid: Option<String>,
    /// 5
    #[prost(string, optional, tag = "5")]
    pub api_version: Option<String>,
    /// 6
    #[prost(bool, optional, tag = "6")]
    pub controller: Option<bool>,
}

/// core/v1 `Pod`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Pod {
    /// 1
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<ObjectMeta>,
    /// 2
    #[prost(message, optional, tag = "2")]
    pub spec: Option<PodSpec>,
    /// 3
    #[prost(message, optional, tag = "3")]
    pub status: Option<PodStatus>,
}

/// core/v1 `PodList`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PodList {
    /// 1
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<ListMeta>,
    /// 2
    #[prost(message, repeated, tag = "2")]
    pub items: Vec<Pod>,
}

/// core/v1 `PodSpec`, the fields the view reads.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PodSpec {
    /// 7
    #[prost(btree_map = "string, string", tag = "7")]
    pub node_selector: BTreeMap<String, String>,
    /// 10
    #[prost(string, optional, tag = "10")]
    pub node_name: Option<String>,
    /// 17
    #[prost(string, optional, tag = "17")]
    pub subdomain: Option<String>,
    /// 38
    #[prost(message, repeated, tag = "38")]
    pub scheduling_gates: Vec<PodSchedulingGate>,
}

/// core/v1 `PodSchedulingGate`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PodSchedulingGate {
    /// 1
    #[prost(string, optional, tag = "1")]
    pub name: Option<String>,
}

/// core/v1 `PodStatus`, the fields the view reads.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PodStatus {
    /// 1
    #[prost(string, optional, tag = "1")]
    pub phase: Option<String>,
    /// 2
    #[prost(message, repeated, tag = "2")]
    pub conditions: Vec<PodCondition>,
    /// 6
    #[prost(string, optional, tag = "6")]
    pub pod_ip: Option<String>,
    /// 8
    #[prost(message, repeated, tag = "8")]
    pub container_statuses: Vec<ContainerStatus>,
}

/// core/v1 `PodCondition`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PodCondition {
    /// 1
    #[prost(string, optional, tag = "1")]
    pub r#type: Option<String>,
    /// 2
    #[prost(string, optional, tag = "2")]
    pub status: Option<String>,
    /// 5
    #[prost(string, optional, tag = "5")]
    pub reason: Option<String>,
}

/// core/v1 `ContainerStatus`, the fields the view reads.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ContainerStatus {
    /// 1
    #[prost(string, optional, tag = "1")]
    pub name: Option<String>,
    /// 2
    #[prost(message, optional, tag = "2")]
    pub state: Option<ContainerState>,
    /// 3
    #[prost(message, optional, tag = "3")]
    pub last_state: Option<ContainerState>,
    /// 5
    #[prost(int32, optional, tag = "5")]
    pub restart_count: Option<i32>,
    /// 8
    #[prost(string, optional, tag = "8")]
    pub container_id: Option<String>,
}

/// core/v1 `ContainerState`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ContainerState {
    /// 2
    #[prost(message, optional, tag = "2")]
    pub running: Option<ContainerStateRunning>,
    /// 3
    #[prost(message, optional, tag = "3")]
    pub terminated: Option<ContainerStateTerminated>,
}

/// core/v1 `ContainerStateRunning`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ContainerStateRunning {
    /// 1
    #[prost(message, optional, tag = "1")]
    pub started_at: Option<Time>,
}

/// core/v1 `ContainerStateTerminated`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ContainerStateTerminated {
    /// 7
    #[prost(string, optional, tag = "7")]
    pub container_id: Option<String>,
}

/// `metav1.PartialObjectMetadata`: an object's metadata only, as the apiserver sends it to a
/// client that asks for `as=PartialObjectMetadata` (any kind).
#[derive(Clone, PartialEq, prost::Message)]
pub struct PartialObjectMetadata {
    /// `metadata`.
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<ObjectMeta>,
}

/// `metav1.PartialObjectMetadataList`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PartialObjectMetadataList {
    /// `metadata`.
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<ListMeta>,
    /// `items`.
    #[prost(message, repeated, tag = "2")]
    pub items: Vec<PartialObjectMetadata>,
}

/// `k8s\0` and an `Unknown` of `kind` (`apiVersion` `v1`) around `raw`: an object or list
/// body as the apiserver writes it.
#[must_use]
pub fn envelope(kind: &str, raw: Vec<u8>) -> Vec<u8> {
    envelope_of("v1", kind, raw)
}

/// [`envelope`] of another `apiVersion` (`meta.k8s.io/v1` for `PartialObjectMetadata`).
#[must_use]
pub fn envelope_of(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
    use prost::Message as _;
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some(api_version.into()),
            kind: Some(kind.into()),
        }),
        raw: Some(raw),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    let mut out = super::codec::MAGIC.to_vec();
    unknown.encode(&mut out).unwrap_or_default();
    out
}

/// One WATCH frame (without its length prefix): a `WatchEvent` of `event_type` around
/// `object`, an enveloped object.
#[must_use]
pub fn watch_frame(event_type: &str, object: Vec<u8>) -> Vec<u8> {
    use prost::Message as _;
    WatchEvent {
        r#type: Some(event_type.into()),
        object: Some(RawExtension { raw: Some(object) }),
    }
    .encode_to_vec()
}

/// `frame` with its 4-byte big-endian length in front, as the stream carries it (a frame of
/// 4 GiB or more, which the prefix cannot say, is given a saturated length).
#[must_use]
pub fn length_prefixed(frame: &[u8]) -> Vec<u8> {
    let length = u32::try_from(frame.len()).unwrap_or(u32::MAX);
    let mut out = length.to_be_bytes().to_vec();
    out.extend_from_slice(frame);
    out
}
