//! The Kubernetes protobuf schemas, compiled: every message of k8s.io/api and the
//! apimachinery types they use, with its fields' numbers, names and types, so that any
//! built-in type can be decoded from protobuf by walking its bytes (see [`de`](super::de)).
//!
//! The schemas are vendored in `core/proto/` (`scripts/vendor-k8s-protos.sh`) and compiled
//! into a `FileDescriptorSet`, `core/proto/k8s.binpb`, which a test checks against the
//! vendored files. It is embedded, and read once, on first use, into the tables below.
//!
//! A Kubernetes `.proto` field is named as its JSON field is (go-to-protobuf takes the name from
//! the Go field's `json` tag), so a message reads as the JSON object k8s-openapi expects,
//! except for the few types apimachinery marshals by hand ([`Special`]) and the structs Go
//! embeds inline, which the decoder flattens.

use std::collections::HashMap as StdHashMap;
use std::sync::OnceLock;

use prost::Message;
use prost_types::FileDescriptorSet;
use prost_types::field_descriptor_proto::{Label, Type};

use crate::hashing::FixedState;

/// The core's maps use a fixed seed: no randomness, even in building these tables.
type HashMap<K, V> = StdHashMap<K, V, FixedState>;

/// The compiled schemas.
static DESCRIPTORS: &[u8] = include_bytes!("../../../proto/k8s.binpb");
/// Each proto package and the API group it serves.
static GROUPS: &str = include_str!("../../../proto/groups.tsv");
/// The messages that are Go slices (arrays in JSON).
static SLICES: &str = include_str!("../../../proto/slices.tsv");
/// What the Go tags say of a field: its JSON name where it differs, inline structs, and the
/// fields Go's JSON leaves out when zero.
static FIELDS: &str = include_str!("../../../proto/fields.tsv");

/// A message's index in [`Schema::messages`].
pub(crate) type MessageId = u32;

/// Field numbers below this are found by a direct index; Kubernetes numbers its fields
/// densely from 1 (the largest is in the forties), so the rest are a binary search.
const DENSE: u32 = 128;

/// Every message, and the built-in resources among them.
#[derive(Debug)]
pub(crate) struct Schema {
    messages: Vec<MessageSchema>,
    /// Lookup only (never iterated): a kind to its resources, by group and version. Keyed
    /// by kind alone so that a lookup (one per decoded object) borrows and allocates nothing.
    resources: HashMap<Box<str>, Vec<GroupVersionResource>>,
}

/// A resource with its group and version.
type GroupVersionResource = (Box<str>, Box<str>, Resource);

/// A built-in resource: its message, and the kinds its envelopes name.
#[derive(Debug)]
pub(crate) struct Resource {
    /// The object's message.
    pub(crate) message: MessageId,
    /// The object's kind (`Deployment`).
    pub(crate) kind: Box<str>,
    /// Its list's kind (`DeploymentList`).
    pub(crate) list_kind: Box<str>,
}

/// One message.
#[derive(Debug)]
pub(crate) struct MessageSchema {
    /// The full name, `k8s.io.api.core.v1.Pod`: the context of a decoding error.
    pub(crate) name: Box<str>,
    /// How JSON writes it, when not as an object of its fields.
    pub(crate) special: Option<Special>,
    /// A map field's entry (key 1, value 2).
    pub(crate) map_entry: bool,
    /// Sorted by number.
    fields: Box<[FieldSchema]>,
    /// `fields`' index of each number below [`DENSE`], or `u16::MAX`.
    by_number: Box<[u16]>,
}

/// One field of a message.
#[derive(Debug)]
pub(crate) struct FieldSchema {
    /// Its number.
    pub(crate) number: u32,
    /// Its JSON name (most often its protobuf name too).
    pub(crate) name: Box<str>,
    /// How JSON holds it.
    pub(crate) json: InJson,
    /// Its type.
    pub(crate) kind: Kind,
    /// `repeated` (a list, or a map's entries).
    pub(crate) repeated: bool,
    /// A Go value field tagged `omitempty`: JSON leaves it out when zero, where protobuf
    /// writes it. (A pointer set to zero, `replicas: 0`, is written by both.)
    pub(crate) omit_zero: bool,
}

/// How JSON holds a protobuf field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum InJson {
    /// As a member of its name.
    Member,
    /// A struct Go embeds inline: its fields are members of the enclosing object.
    Inline,
    /// Not at all (`json:"-"`).
    Absent,
}

/// A field's protobuf type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `bool`.
    Bool,
    /// `int32`, `int64`, `uint32`, `uint64`, `enum`: a plain varint.
    Varint {
        /// Whether it is signed (two's complement).
        signed: bool,
        /// Whether it is 32 bits wide.
        narrow: bool,
    },
    /// `sint32`, `sint64`: a zigzag varint.
    ZigZag,
    /// `fixed32`, `sfixed32`, `float`.
    Fixed32(Fixed),
    /// `fixed64`, `sfixed64`, `double`.
    Fixed64(Fixed),
    /// `string`.
    String,
    /// `bytes`: base64 in JSON.
    Bytes,
    /// A message (or a map, when repeated and the message is a map entry).
    Message(MessageId),
}

/// How a fixed-width field reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fixed {
    /// Unsigned.
    Unsigned,
    /// Signed.
    Signed,
    /// IEEE 754.
    Float,
}

/// Messages that apimachinery marshals to JSON by hand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Special {
    /// `metav1.Time` (seconds 1, nanos 2): RFC 3339 in whole seconds, `null` when zero.
    Time,
    /// `metav1.MicroTime`: RFC 3339 with microseconds, `null` when zero.
    MicroTime,
    /// `intstr.IntOrString` (type 1, intVal 2, strVal 3): a number or a string.
    IntOrString,
    /// `resource.Quantity` (string 1): its text.
    Quantity,
    /// `runtime.RawExtension` (raw 1), `metav1.FieldsV1` (Raw 1): the JSON it carries.
    RawJson,
    /// A Go slice (`ExtraValue`, `Verbs`): the array of its `items` (1).
    Slice,
    /// `JSONSchemaPropsOrArray` (schema 1, jSONSchemas 2): the array when it has elements,
    /// else the schema, else `null`.
    SchemaOrArray,
    /// `JSONSchemaPropsOrBool` (allows 1, schema 2): the schema when set, else the bool.
    SchemaOrBool,
    /// `JSONSchemaPropsOrStringArray` (schema 1, property 2): the strings when there are
    /// some, else the schema, else `null`.
    SchemaOrStrings,
}

impl Special {
    fn of(name: &str, slices: &[&str]) -> Option<Special> {
        Some(match name {
            "k8s.io.apimachinery.pkg.apis.meta.v1.Time" => Special::Time,
            "k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime" => Special::MicroTime,
            "k8s.io.apimachinery.pkg.util.intstr.IntOrString" => Special::IntOrString,
            "k8s.io.apimachinery.pkg.api.resource.Quantity" => Special::Quantity,
            "k8s.io.apimachinery.pkg.runtime.RawExtension"
            | "k8s.io.apimachinery.pkg.apis.meta.v1.FieldsV1"
            | "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.JSON" => Special::RawJson,
            "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrArray" => {
                Special::SchemaOrArray
            }
            "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrBool" => {
                Special::SchemaOrBool
            }
            "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrStringArray" => {
                Special::SchemaOrStrings
            }
            _ if slices.contains(&name) => Special::Slice,
            _ => return None,
        })
    }
}

impl MessageSchema {
    /// The field numbered `number`, if the schema knows it.
    pub(crate) fn field(&self, number: u32) -> Option<&FieldSchema> {
        if number < DENSE {
            let index = *self.by_number.get(number as usize)?;
            return self.fields.get(usize::from(index));
        }
        self.fields
            .binary_search_by_key(&number, |f| f.number)
            .ok()
            .map(|i| &self.fields[i])
    }

    /// The fields, by number.
    #[cfg(test)]
    pub(crate) fn fields(&self) -> &[FieldSchema] {
        &self.fields
    }
}

impl Schema {
    /// The message `id`.
    pub(crate) fn message(&self, id: MessageId) -> &MessageSchema {
        &self.messages[id as usize]
    }

    /// The message named `name` (`k8s.io.apimachinery.pkg.apis.meta.v1.PartialObjectMetadata`),
    /// by a walk over every message: for a caller that looks once and keeps the answer.
    pub(crate) fn message_named(&self, name: &str) -> Option<MessageId> {
        let index = self.messages.iter().position(|m| *m.name == *name)?;
        MessageId::try_from(index).ok()
    }

    /// The built-in resource of `group` (empty for the core group), `version` and `kind`.
    pub(crate) fn resource(&self, group: &str, version: &str, kind: &str) -> Option<&Resource> {
        self.resources
            .get(kind)?
            .iter()
            .find(|(g, v, _)| **g == *group && **v == *version)
            .map(|(_, _, resource)| resource)
    }
}

/// The schemas, read on first use.
pub(crate) fn schema() -> &'static Schema {
    static SCHEMA: OnceLock<Schema> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        build(DESCRIPTORS, GROUPS, SLICES, FIELDS)
            .expect("core/proto/k8s.binpb is a valid descriptor set")
    })
}

/// What is wrong with a descriptor set (only ever the embedded one, which a test reads).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct SchemaError(String);

fn tsv(text: &str) -> impl Iterator<Item = Vec<&str>> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.split('\t').collect())
}

fn build(
    descriptors: &[u8],
    groups: &str,
    slices: &str,
    tags: &str,
) -> Result<Schema, SchemaError> {
    let set = FileDescriptorSet::decode(descriptors)
        .map_err(|e| SchemaError(format!("not a FileDescriptorSet: {e}")))?;
    let slices: Vec<&str> = tsv(slices).filter_map(|row| row.first().copied()).collect();
    let groups: HashMap<&str, &str> = tsv(groups)
        .map(|row| (row[0], row.get(1).copied().unwrap_or("")))
        .collect();
    // (message, protobuf name) to (JSON name, omitempty).
    let tags: HashMap<(&str, &str), (&str, bool)> = tsv(tags)
        .filter_map(|row| {
            let json = row.get(2).copied().unwrap_or_default();
            let omitempty = row.get(3).is_some_and(|o| *o == "omitempty");
            Some(((row[0], *row.get(1)?), (json, omitempty)))
        })
        .collect();

    // First every message's name, so that fields can refer to any of them.
    let mut ids: HashMap<String, MessageId> = HashMap::default();
    let mut names = Vec::new();
    for file in &set.file {
        let package = file.package();
        for message in &file.message_type {
            let mut stack = vec![(format!("{package}.{}", message.name()), message)];
            while let Some((name, message)) = stack.pop() {
                for nested in &message.nested_type {
                    stack.push((format!("{name}.{}", nested.name()), nested));
                }
                let id = MessageId::try_from(names.len())
                    .map_err(|_| SchemaError("too many messages".into()))?;
                ids.insert(format!(".{name}"), id);
                names.push((name, message, package));
            }
        }
    }

    let mut messages = Vec::with_capacity(names.len());
    let mut resources: HashMap<Box<str>, Vec<GroupVersionResource>> = HashMap::default();
    for (name, message, package) in &names {
        let mut fields = Vec::with_capacity(message.field.len());
        for field in &message.field {
            let kind = match field.r#type() {
                Type::Bool => Kind::Bool,
                Type::Int32 | Type::Enum => Kind::Varint {
                    signed: true,
                    narrow: true,
                },
                Type::Int64 => Kind::Varint {
                    signed: true,
                    narrow: false,
                },
                Type::Uint32 => Kind::Varint {
                    signed: false,
                    narrow: true,
                },
                Type::Uint64 => Kind::Varint {
                    signed: false,
                    narrow: false,
                },
                Type::Sint32 | Type::Sint64 => Kind::ZigZag,
                Type::Fixed32 => Kind::Fixed32(Fixed::Unsigned),
                Type::Sfixed32 => Kind::Fixed32(Fixed::Signed),
                Type::Float => Kind::Fixed32(Fixed::Float),
                Type::Fixed64 => Kind::Fixed64(Fixed::Unsigned),
                Type::Sfixed64 => Kind::Fixed64(Fixed::Signed),
                Type::Double => Kind::Fixed64(Fixed::Float),
                Type::String => Kind::String,
                Type::Bytes => Kind::Bytes,
                Type::Message => Kind::Message(*ids.get(field.type_name()).ok_or_else(|| {
                    SchemaError(format!(
                        "{name}.{}: no message {}",
                        field.name(),
                        field.type_name()
                    ))
                })?),
                Type::Group => {
                    return Err(SchemaError(format!("{name}.{} is a group", field.name())));
                }
            };
            let (json_name, omit_zero) = tags
                .get(&(name.as_str(), field.name()))
                .copied()
                .unwrap_or((field.name(), false));
            let (json_name, json) = match json_name {
                ",inline" => (field.name(), InJson::Inline),
                "-" => (field.name(), InJson::Absent),
                "" => (field.name(), InJson::Member),
                other => (other, InJson::Member),
            };
            fields.push(FieldSchema {
                number: u32::try_from(field.number())
                    .map_err(|_| SchemaError(format!("{name}.{}: bad number", field.name())))?,
                name: json_name.into(),
                json,
                kind,
                repeated: field.label() == Label::Repeated,
                omit_zero,
            });
        }
        fields.sort_by_key(|f| f.number);
        let dense = fields
            .iter()
            .map(|f| f.number)
            .filter(|&n| n < DENSE)
            .max()
            .map_or(0, |n| n as usize + 1);
        let mut by_number = vec![u16::MAX; dense];
        for (i, field) in fields.iter().enumerate() {
            if field.number < DENSE {
                by_number[field.number as usize] = u16::try_from(i)
                    .map_err(|_| SchemaError(format!("{name}: too many fields")))?;
            }
        }
        let id = messages.len() as MessageId;
        // A resource is a message with `metadata` (an ObjectMeta) whose list (`<Kind>List`)
        // exists in the same package, in a package that serves an API group.
        let short = name.rsplit('.').next().unwrap_or(name);
        if let Some(group) = groups.get(package)
            && ids.contains_key(&format!(".{name}List"))
            && message.field.iter().any(|f| {
                f.name() == "metadata"
                    && f.type_name() == ".k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta"
            })
        {
            let version = package.rsplit('.').next().unwrap_or(package);
            let resource = Resource {
                message: id,
                kind: short.into(),
                list_kind: format!("{short}List").into(),
            };
            resources.entry(Box::from(short)).or_default().push((
                Box::from(*group),
                Box::from(version),
                resource,
            ));
        }
        messages.push(MessageSchema {
            name: name.as_str().into(),
            special: Special::of(name, &slices),
            map_entry: message
                .options
                .as_ref()
                .is_some_and(|o| o.map_entry.unwrap_or(false)),
            fields: fields.into(),
            by_number: by_number.into(),
        });
    }
    Ok(Schema {
        messages,
        resources,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_schemas_know_the_built_in_resources() {
        let schema = schema();
        for (group, version, kind) in [
            ("", "v1", "Pod"),
            ("", "v1", "Secret"),
            ("apps", "v1", "Deployment"),
            ("batch", "v1", "Job"),
            ("rbac.authorization.k8s.io", "v1", "ClusterRole"),
            ("internal.apiserver.k8s.io", "v1alpha1", "StorageVersion"),
            ("coordination.k8s.io", "v1", "Lease"),
            ("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
            ("apiregistration.k8s.io", "v1", "APIService"),
        ] {
            let resource = schema
                .resource(group, version, kind)
                .unwrap_or_else(|| panic!("{group}/{version} {kind}"));
            assert_eq!(&*resource.kind, kind);
            assert_eq!(&*resource.list_kind, format!("{kind}List"));
        }
        // Not resources: a list, a part of a resource, a kind of another group.
        assert!(schema.resource("", "v1", "PodList").is_none());
        assert!(schema.resource("", "v1", "PodSpec").is_none());
        assert!(schema.resource("apps", "v1", "Pod").is_none());
    }

    #[test]
    fn fields_are_found_by_number_with_their_json_names() {
        let schema = schema();
        let pod = schema.resource("", "v1", "Pod").expect("Pod");
        let pod = schema.message(pod.message);
        assert_eq!(&*pod.name, "k8s.io.api.core.v1.Pod");
        let names: Vec<_> = pod.fields().iter().map(|f| &*f.name).collect();
        assert_eq!(names, ["metadata", "spec", "status"]);
        let Kind::Message(spec) = pod.field(2).expect("spec").kind else {
            panic!("spec is a message");
        };
        let spec = schema.message(spec);
        let containers = spec.field(2).expect("containers");
        assert_eq!(&*containers.name, "containers");
        assert!(containers.repeated);
        assert!(spec.field(0).is_none());
        assert!(spec.field(1_000).is_none());
        let Kind::Message(node_selector) = spec.field(7).expect("nodeSelector").kind else {
            panic!("a map is a message of entries");
        };
        assert!(schema.message(node_selector).map_entry);
        // `hostname` is a value tagged omitempty; `replicas` of a Deployment is a pointer.
        assert!(
            spec.field(16)
                .is_some_and(|f| &*f.name == "hostname" && f.omit_zero)
        );
        let deployment = schema
            .resource("apps", "v1", "Deployment")
            .expect("Deployment");
        let Kind::Message(deployment_spec) = schema
            .message(deployment.message)
            .field(2)
            .expect("spec")
            .kind
        else {
            panic!("spec is a message");
        };
        let replicas = schema.message(deployment_spec).field(1).expect("replicas");
        assert!(&*replicas.name == "replicas" && !replicas.omit_zero);
        // Named after its Go field in protobuf (`Webhooks`), and as JSON names it.
        let webhooks = schema
            .resource(
                "admissionregistration.k8s.io",
                "v1",
                "ValidatingWebhookConfiguration",
            )
            .expect("ValidatingWebhookConfiguration");
        let webhooks = schema.message(webhooks.message).field(2).expect("webhooks");
        assert_eq!(&*webhooks.name, "webhooks");
        // A Volume's source is inline in JSON.
        let Kind::Message(volumes) = spec.field(1).expect("volumes").kind else {
            panic!("volumes are messages");
        };
        let source = schema.message(volumes).field(2).expect("volumeSource");
        assert_eq!(source.json, InJson::Inline);
    }

    #[test]
    fn hand_marshalled_types_are_special() {
        let schema = schema();
        let specials: Vec<_> = schema
            .messages
            .iter()
            .filter_map(|m| m.special.map(|s| (&*m.name, s)))
            .collect();
        assert!(specials.contains(&("k8s.io.apimachinery.pkg.apis.meta.v1.Time", Special::Time)));
        assert!(specials.contains(&("k8s.io.api.certificates.v1.ExtraValue", Special::Slice)));
        assert_eq!(specials.len(), 7 + 7 + 3, "{specials:?}");
    }

    #[test]
    fn a_damaged_descriptor_set_is_an_error() {
        assert!(build(b"\xff\xff", "", "", "").is_err());
    }
}
