//! How the simulator decodes a secondary source's objects: metadata only, with every owner
//! reference, so that both `owner:` and `any-owner:` sources map them as the controller did.

use std::collections::BTreeMap;

use serde::Deserialize;

use reconcile_core::protobuf::{ProtobufCodec, ProtobufError, ProtobufErrorKind, messages};
use reconcile_core::{Object, OwnerRef};

/// An object's metadata: name, namespace, version, labels and every owner reference.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct MetaView {
    /// `metadata`.
    #[serde(default)]
    pub metadata: Meta,
}

/// The fields of `metadata` a secondary source is mapped by.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Meta {
    /// `metadata.name`.
    pub name: Option<String>,
    /// `metadata.namespace`.
    pub namespace: Option<String>,
    /// `metadata.resourceVersion`.
    pub resource_version: Option<String>,
    /// `metadata.labels` (`null` reads as none).
    #[serde(default, deserialize_with = "null_as_default")]
    pub labels: BTreeMap<String, String>,
    /// `metadata.ownerReferences` (`null` reads as none).
    #[serde(default, deserialize_with = "null_as_default")]
    pub owner_references: Vec<Owner>,
}

/// One entry of `metadata.ownerReferences`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Owner {
    /// `apiVersion`.
    #[serde(default)]
    pub api_version: String,
    /// `kind`.
    pub kind: String,
    /// `name`.
    pub name: String,
    /// `uid`.
    #[serde(default)]
    pub uid: String,
    /// `controller`.
    #[serde(default)]
    pub controller: Option<bool>,
}

fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

impl Owner {
    fn as_ref(&self) -> OwnerRef<'_> {
        OwnerRef {
            api_version: &self.api_version,
            kind: &self.kind,
            name: &self.name,
            uid: &self.uid,
        }
    }
}

/// Decodes a `PartialObjectMetadata` message into a `MetaView` (by prost: the simulator's
/// secondaries are small), charging what it holds against `limit`: the message's bytes (its
/// strings are copies of them) and each owner's and label's `size_of`.
fn decode_protobuf(
    message: &[u8],
    base: usize,
    limit: u64,
) -> Result<(MetaView, u64), ProtobufError> {
    use prost::Message as _;
    let partial = messages::PartialObjectMetadata::decode(message).map_err(|e| ProtobufError {
        at: base,
        context: "PartialObjectMetadata",
        kind: ProtobufErrorKind::Wire(e.to_string()),
    })?;
    let meta = partial.metadata.unwrap_or_default();
    let owners = meta.owner_references.len() as u64;
    let labels = meta.labels.len() as u64;
    let charge = (message.len() as u64)
        .saturating_add(owners.saturating_mul(std::mem::size_of::<Owner>() as u64))
        .saturating_add(labels.saturating_mul(2 * std::mem::size_of::<String>() as u64));
    if charge > limit {
        return Err(ProtobufError {
            at: base,
            context: "PartialObjectMetadata",
            kind: ProtobufErrorKind::TooLarge { limit },
        });
    }
    let view = MetaView {
        metadata: Meta {
            name: meta.name,
            namespace: meta.namespace,
            resource_version: meta.resource_version,
            labels: meta.labels,
            owner_references: meta
                .owner_references
                .into_iter()
                .map(|o| Owner {
                    api_version: o.api_version.unwrap_or_default(),
                    kind: o.kind.unwrap_or_default(),
                    name: o.name.unwrap_or_default(),
                    uid: o.uid.unwrap_or_default(),
                    controller: o.controller,
                })
                .collect(),
        },
    };
    Ok((view, charge))
}

impl Object for MetaView {
    /// Metadata only, as the apiserver sends it to a source that asks for
    /// `PartialObjectMetadata` in protobuf.
    fn protobuf() -> Option<ProtobufCodec<Self>> {
        Some(ProtobufCodec {
            kind: "PartialObjectMetadata",
            list_kind: "PartialObjectMetadataList",
            decode: decode_protobuf,
        })
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
        self.metadata.labels.get(key).map(String::as_str)
    }

    fn controller_owner(&self) -> Option<OwnerRef<'_>> {
        self.metadata
            .owner_references
            .iter()
            .find(|o| o.controller == Some(true))
            .map(Owner::as_ref)
    }

    fn owner_refs(&self) -> Vec<OwnerRef<'_>> {
        self.metadata
            .owner_references
            .iter()
            .map(Owner::as_ref)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_every_owner_and_finds_the_controller() {
        let v: MetaView = serde_json::from_str(
            r#"{"metadata":{"name":"c","namespace":"ns","resourceVersion":"7","labels":null,
                "ownerReferences":[{"apiVersion":"v1","kind":"Cell","name":"a","uid":"u1"},
                                   {"apiVersion":"v1","kind":"Cell","name":"b","uid":"u2","controller":true}]}}"#,
        )
        .unwrap();
        assert_eq!(v.owner_refs().len(), 2);
        assert_eq!(v.controller_owner().map(|o| o.name), Some("b"));
        assert_eq!(v.key().map(|k| k.to_string()).as_deref(), Some("ns/c"));
        let bare: MetaView = serde_json::from_str(r#"{"metadata":{"name":"x"}}"#).unwrap();
        assert!(bare.owner_refs().is_empty());
    }

    #[test]
    fn protobuf_metadata_decodes_as_its_json() {
        use prost::Message as _;
        let json = serde_json::json!({"metadata": {"name": "c", "namespace": "ns",
            "resourceVersion": "7", "labels": {"app": "web"}, "annotations": {"a": "b"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Cell", "name": "a", "uid": "u1"},
                {"apiVersion": "v1", "kind": "Cell", "name": "b", "uid": "u2", "controller": true}]},
            "spec": {"ignored": true}});
        let message = crate::apiserver::wire::partial_object_metadata(&json).encode_to_vec();
        let codec = MetaView::protobuf().expect("a codec");
        assert_eq!(
            (codec.kind, codec.list_kind),
            ("PartialObjectMetadata", "PartialObjectMetadataList")
        );
        let (view, charge) = (codec.decode)(&message, 0, u64::MAX).unwrap();
        assert_eq!(view, serde_json::from_value::<MetaView>(json).unwrap());
        assert!(charge >= message.len() as u64);
        // Over the budget: typed, not a panic.
        let refused = (codec.decode)(&message, 10, charge - 1).unwrap_err();
        assert_eq!(
            refused.kind,
            ProtobufErrorKind::TooLarge { limit: charge - 1 }
        );
        // Cut short: a wire error at the message's offset.
        let cut = (codec.decode)(&message[..message.len() / 2], 10, u64::MAX).unwrap_err();
        assert!(matches!(cut.kind, ProtobufErrorKind::Wire(_)), "{cut}");
        assert_eq!(cut.at, 10);
    }

    #[test]
    fn a_metadata_list_and_frames_decode_through_the_core() {
        use crate::apiserver::wire::{Served, bookmark, frame, list_body, malformed_frame};
        use reconcile_core::frame::{WatchEvent, parse_frame_as};
        use reconcile_core::{WireFormat, list::parse_list};
        let objects = [
            serde_json::json!({"metadata": {"name": "a", "resourceVersion": "5"}}),
            serde_json::json!({"metadata": {"name": "b", "resourceVersion": "6",
                "labels": {"cell": "x"}}}),
        ];
        let body = list_body(Served::Metadata, 6, None, objects.iter().cloned());
        let listed = parse_list::<MetaView>(&body).unwrap();
        assert_eq!(listed.resource_version, "6");
        assert_eq!(listed.items.len(), 2);
        assert_eq!(listed.items[1].label("cell"), Some("x"));
        // A pod list is not metadata: the envelope's kind is checked.
        assert!(
            parse_list::<MetaView>(&list_body(Served::Pods, 6, None, objects.iter().cloned()))
                .is_err()
        );
        let added = parse_frame_as::<MetaView>(
            &frame(Served::Metadata, "ADDED", &objects[0]),
            WireFormat::Protobuf,
        )
        .unwrap();
        assert!(matches!(added, WatchEvent::Added(v) if v.object_name() == Some("a")));
        let mark =
            parse_frame_as::<MetaView>(&bookmark(Served::Metadata, 9, true), WireFormat::Protobuf)
                .unwrap();
        assert!(matches!(
            mark,
            WatchEvent::Bookmark {
                initial_events_end: true,
                ..
            }
        ));
        // A malformed frame still names its version, as the core's recovery needs.
        let bad = parse_frame_as::<MetaView>(
            &malformed_frame(Served::Metadata, Some(11)),
            WireFormat::Protobuf,
        )
        .unwrap_err();
        assert_eq!(bad.resource_version.as_deref(), Some("11"), "{bad}");
    }
}
