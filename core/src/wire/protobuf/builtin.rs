//! Protobuf for every built-in Kubernetes type (k8s-openapi's): its message found in the
//! schemas by the type's group, version and kind, and decoded by the type's own
//! `Deserialize` through [`de`](super::de).

use std::any::Any;
use std::sync::OnceLock;

use serde::de::{self, DeserializeOwned, Visitor};

use super::codec::{ProtobufCodec, ProtobufError, ProtobufErrorKind};
use super::schema::{MessageId, Resource, schema};

/// The codec of `K`, when `K` is metadata only (`PartialObjectMeta<_>` of any kind, custom
/// resources and `DynamicObject` too: the apiserver writes `PartialObjectMetadata` in
/// protobuf for every resource) or a built-in type: one whose kind is known without a value
/// (`DynamicType = ()`, as k8s-openapi's and derived custom resources' are), that decodes as
/// the struct of its kind (as k8s-openapi's do), and whose group, version and kind the
/// schemas serve.
pub(crate) fn codec<K>() -> Option<ProtobufCodec<K>>
where
    K: kube_core::Resource + DeserializeOwned + 'static,
{
    if K::metadata_api() {
        partial_object_metadata()?;
        return Some(ProtobufCodec {
            kind: PARTIAL_OBJECT_METADATA.1,
            list_kind: "PartialObjectMetadataList",
            decode: decode_metadata::<K>,
        });
    }
    let unit: Box<dyn Any> = Box::new(());
    let known = unit.downcast::<K::DynamicType>().ok()?;
    if !decodes_as_struct::<K>(&K::kind(&known)) {
        return None;
    }
    let resource = resource::<K>()?;
    Some(ProtobufCodec {
        kind: &resource.kind,
        list_kind: &resource.list_kind,
        decode: decode::<K>,
    })
}

/// `K`'s resource in the schemas, by its group, version and kind (no allocation: a
/// k8s-openapi type's are static; found again for each object decoded, as a plain
/// function pointer, the codec's `decode` cannot carry it).
fn resource<K>() -> Option<&'static Resource>
where
    K: kube_core::Resource + 'static,
{
    let unit: Box<dyn Any> = Box::new(());
    let known = unit.downcast::<K::DynamicType>().ok()?;
    schema().resource(&K::group(&known), &K::version(&known), &K::kind(&known))
}

fn decode<K>(message: &[u8], base: usize, limit: u64) -> Result<(K, u64), ProtobufError>
where
    K: kube_core::Resource + DeserializeOwned + 'static,
{
    let Some(resource) = resource::<K>() else {
        return Err(ProtobufError::new(
            base,
            "object",
            ProtobufErrorKind::Unsupported(std::any::type_name::<K>()),
        ));
    };
    super::de::decode(resource.message, message, base, limit)
}

/// The `apiVersion` and `kind` of metadata only (`meta.k8s.io/v1`, `PartialObjectMetadata`).
const PARTIAL_OBJECT_METADATA: (&str, &str) = ("meta.k8s.io/v1", "PartialObjectMetadata");

/// The message of metadata only, looked up once.
fn partial_object_metadata() -> Option<MessageId> {
    static MESSAGE: OnceLock<Option<MessageId>> = OnceLock::new();
    *MESSAGE.get_or_init(|| {
        schema().message_named("k8s.io.apimachinery.pkg.apis.meta.v1.PartialObjectMetadata")
    })
}

/// Decodes a `PartialObjectMetadata` into `K` (a `PartialObjectMeta<_>`), with the
/// `apiVersion` and `kind` that JSON gives each one (in a list too) and protobuf leaves out,
/// so that both wire formats decode to the same value.
fn decode_metadata<K>(message: &[u8], base: usize, limit: u64) -> Result<(K, u64), ProtobufError>
where
    K: DeserializeOwned,
{
    const TYPES: &[(&str, &str)] = &[
        ("apiVersion", PARTIAL_OBJECT_METADATA.0),
        ("kind", PARTIAL_OBJECT_METADATA.1),
    ];
    let Some(id) = partial_object_metadata() else {
        return Err(ProtobufError::new(
            base,
            "object",
            ProtobufErrorKind::Unsupported(std::any::type_name::<K>()),
        ));
    };
    super::de::decode_typed(id, TYPES, message, base, limit)
}

/// Whether `T`'s `Deserialize` asks for the struct named `kind` (and not a map, as a type
/// with flattened fields does): asked of a deserializer that only records the question.
fn decodes_as_struct<T: DeserializeOwned>(kind: &str) -> bool {
    let mut asked = None;
    let _ = T::deserialize(Probe(&mut asked));
    asked.is_some_and(|name| name == kind)
}

/// Records the name of the struct asked for, and refuses.
struct Probe<'p>(&'p mut Option<&'static str>);

#[derive(Debug)]
struct Refused;

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("probe")
    }
}

impl std::error::Error for Refused {}

impl de::Error for Refused {
    fn custom<M: std::fmt::Display>(_: M) -> Self {
        Refused
    }
}

impl<'de> de::Deserializer<'de> for Probe<'_> {
    type Error = Refused;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Refused> {
        Err(Refused)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        _: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Refused> {
        *self.0 = Some(name);
        Err(Refused)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_types_have_a_codec_and_others_do_not() {
        use k8s_openapi::api::apps::v1::Deployment;
        use k8s_openapi::api::core::v1::{Pod, Secret};
        let pod = codec::<Pod>().expect("Pod");
        assert_eq!((pod.kind, pod.list_kind), ("Pod", "PodList"));
        let deployment = codec::<Deployment>().expect("Deployment");
        assert_eq!(deployment.list_kind, "DeploymentList");
        assert!(codec::<Secret>().is_some());
        // A DynamicObject's kind is known only at run time.
        assert!(codec::<kube_core::DynamicObject>().is_none());
        // Metadata only is the same message for every kind, custom resources' too.
        for metadata in [
            codec::<kube_core::PartialObjectMeta<Pod>>().map(|c| (c.kind, c.list_kind)),
            codec::<kube_core::PartialObjectMeta<kube_core::DynamicObject>>()
                .map(|c| (c.kind, c.list_kind)),
        ] {
            assert_eq!(
                metadata,
                Some(("PartialObjectMetadata", "PartialObjectMetadataList"))
            );
        }
    }
}
