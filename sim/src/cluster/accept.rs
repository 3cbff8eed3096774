//! Content negotiation: which of `Accept`'s alternatives an answer takes, and the
//! conversion it asks (`as=PartialObjectMetadata;g=meta.k8s.io;v=v1`, the metadata-only
//! answers of kube's `get_metadata`, `list_metadata` and `metadata_watcher`, and of
//! client-go's metadata client).
//!
//! The rules are the apiserver's (`handlers/negotiation` and `handlers/response.go`): the
//! clauses are tried in order; a clause is taken when its media type is served and its `as`,
//! `g` and `v` name a conversion the endpoint can make, else the next is tried. A list asked
//! as `PartialObjectMetadata`, or one object as `PartialObjectMetadataList`, is a 406
//! `NotAcceptable` after negotiation, with apiserver's words.
//!
//! The cluster writes JSON only. A clause asking for protobuf or YAML, which the apiserver
//! would serve, is answered in JSON with its conversion when no later clause asks for JSON;
//! `Table` is not modelled, so a clause asking for it is passed over (docs/alignment.md).

use serde_json::{Map, Value, json};

use super::kinds::KindDescriptor;
use super::status::ApiStatus;

/// The media types the apiserver names when nothing in `Accept` is served.
const SERVED: &str = "application/json, application/yaml, application/vnd.kubernetes.protobuf";

/// Whether go-restful, which routes the built-in kinds before the apiserver negotiates,
/// finds a route producing one of `accept`'s media types: only `*/*` or a type named
/// exactly, parameters ignored (`Route.matchesAccept`). Custom resources are served by the
/// apiserver's own handler, which has no such step.
fn routable(accept: &str) -> bool {
    accept.split(',').any(|clause| {
        let media = clause.split(';').next().unwrap_or("").trim();
        media == "*/*" || SERVED.split(", ").any(|served| served == media)
    })
}

/// What an answer's objects are turned into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Conversion {
    /// The objects as stored.
    #[default]
    Full,
    /// `as=PartialObjectMetadata`: one object's metadata (a single object, or each event of
    /// a WATCH).
    PartialObjectMetadata(MetaVersion),
    /// `as=PartialObjectMetadataList`: a list's items' metadata (a LIST).
    PartialObjectMetadataList(MetaVersion),
}

/// The `meta.k8s.io` version a metadata conversion names (`v=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetaVersion {
    /// `meta.k8s.io/v1`.
    V1,
    /// `meta.k8s.io/v1beta1`.
    V1beta1,
}

impl MetaVersion {
    fn api_version(self) -> &'static str {
        match self {
            MetaVersion::V1 => "meta.k8s.io/v1",
            MetaVersion::V1beta1 => "meta.k8s.io/v1beta1",
        }
    }
}

/// What a WATCH makes of each event's object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventView {
    /// The object as stored.
    AsStored,
    /// `PartialObjectMetadata` of this version.
    Metadata(MetaVersion),
    /// A list conversion, which no event's object takes: the apiserver's watch encoder fails
    /// on the first event and closes the stream (a 200 with no events), and so does this.
    Unencodable,
}

/// How one clause's media type is served here.
enum Media {
    /// `application/json`, `application/*`, `*/*`.
    Json,
    /// Served by the apiserver in a format the cluster does not write (protobuf, YAML).
    OtherServed,
    /// Not served by the apiserver either.
    Unserved,
}

fn media(type_and_subtype: &str) -> Media {
    match type_and_subtype.to_ascii_lowercase().as_str() {
        "application/json" | "application/*" | "*/*" => Media::Json,
        "application/yaml" | "application/vnd.kubernetes.protobuf" => Media::OtherServed,
        _ => Media::Unserved,
    }
}

/// The conversion a clause's parameters ask, `None` when the endpoint cannot make it (the
/// clause is then passed over).
fn conversion(params: &[(&str, &str)]) -> Option<Conversion> {
    let get = |key: &str| params.iter().find(|(k, _)| *k == key).map(|(_, v)| *v);
    let (Some(kind), group, version) = (get("as"), get("g"), get("v")) else {
        // Without `as`, nothing is converted; `g` or `v` alone names a kind "", which no
        // endpoint converts to.
        return (get("g").is_none() && get("v").is_none()).then_some(Conversion::Full);
    };
    let version = match (group, version) {
        (Some("meta.k8s.io"), Some("v1")) => MetaVersion::V1,
        (Some("meta.k8s.io"), Some("v1beta1")) => MetaVersion::V1beta1,
        _ => return None,
    };
    match kind {
        "PartialObjectMetadata" => Some(Conversion::PartialObjectMetadata(version)),
        "PartialObjectMetadataList" => Some(Conversion::PartialObjectMetadataList(version)),
        _ => None,
    }
}

/// The conversion `Accept` asks of a kind, or the 406 the apiserver answers when no clause
/// can be served. An empty header takes the first served type, JSON, unconverted.
///
/// # Errors
/// 406 `NotAcceptable` when no clause names a served media type with a conversion the
/// endpoint can make: go-restful's words for a built-in kind none of whose media types is
/// served, else the apiserver's negotiation's.
pub fn negotiate(desc: &KindDescriptor, accept: &str) -> Result<Conversion, ApiStatus> {
    if accept.trim().is_empty() {
        return Ok(Conversion::Full);
    }
    if desc.is_typed() && !routable(accept) {
        return Err(ApiStatus::not_acceptable_route(format!(
            "406: Not Acceptable\n\nAvailable representations: {SERVED}"
        )));
    }
    let mut fallback = None;
    for clause in accept.split(',') {
        let mut parts = clause.split(';').map(str::trim);
        let kind = media(parts.next().unwrap_or(""));
        let params: Vec<(&str, &str)> = parts
            .filter_map(|p| p.split_once('='))
            .map(|(k, v)| (k.trim(), v.trim()))
            .filter(|(k, _)| *k != "q")
            .collect();
        let Some(conversion) = conversion(&params) else {
            continue;
        };
        match kind {
            Media::Json => return Ok(conversion),
            Media::OtherServed => {
                fallback.get_or_insert(conversion);
            }
            Media::Unserved => {}
        }
    }
    fallback.ok_or_else(|| {
        ApiStatus::not_acceptable(format!(
            "only the following media types are accepted: {SERVED}"
        ))
    })
}

/// The apiserver's name for the Go type an answer holds, as its 406 messages print it.
fn go_type(desc: &KindDescriptor, list: bool) -> String {
    let suffix = if list { "List" } else { "" };
    if desc.is_typed() {
        // The internal API package: `core` for the legacy group, else the group's first label.
        let package = desc.group.split('.').next().filter(|g| !g.is_empty());
        format!("*{}.{}{suffix}", package.unwrap_or("core"), desc.kind)
    } else {
        format!("*unstructured.Unstructured{suffix}")
    }
}

/// `PartialObjectMetadata` of an object, given its whole `metadata` (taken from an owned
/// answer, copied from a stored object).
pub(super) fn partial(version: MetaVersion, metadata: Option<Value>) -> Value {
    let metadata = metadata.unwrap_or_else(|| json!({}));
    json!({"kind": "PartialObjectMetadata", "apiVersion": version.api_version(), "metadata": metadata})
}

/// The `metadata` of an owned object, moved out.
fn take_metadata(mut object: Value) -> Option<Value> {
    object.as_object_mut()?.remove("metadata")
}

impl Conversion {
    /// Whether anything is converted.
    #[must_use]
    pub fn is_full(self) -> bool {
        self == Conversion::Full
    }

    /// One object (a GET or a write's answer, or a WATCH event's object) as asked.
    ///
    /// # Errors
    /// 406 when a list was asked for.
    pub fn object(self, desc: &KindDescriptor, object: Value) -> Result<Value, ApiStatus> {
        match self {
            Conversion::Full => Ok(object),
            Conversion::PartialObjectMetadata(version) => {
                Ok(partial(version, take_metadata(object)))
            }
            Conversion::PartialObjectMetadataList(_) => Err(ApiStatus::not_acceptable(format!(
                "you requested PartialObjectMetadataList, but the requested object is not a list ({})",
                go_type(desc, false)
            ))),
        }
    }

    /// What a WATCH makes of each event's object.
    #[must_use]
    pub fn for_events(self) -> EventView {
        match self {
            Conversion::Full => EventView::AsStored,
            Conversion::PartialObjectMetadata(version) => EventView::Metadata(version),
            Conversion::PartialObjectMetadataList(_) => EventView::Unencodable,
        }
    }

    /// A list (a LIST or a collection DELETE's answer) as asked: its `metadata` kept, each
    /// item converted.
    ///
    /// # Errors
    /// 406 when one object was asked for.
    pub fn list(self, desc: &KindDescriptor, list: Value) -> Result<Value, ApiStatus> {
        match self {
            Conversion::Full => Ok(list),
            Conversion::PartialObjectMetadata(_) => Err(ApiStatus::not_acceptable(format!(
                "you requested PartialObjectMetadata, but the requested object is a list ({})",
                go_type(desc, true)
            ))),
            Conversion::PartialObjectMetadataList(version) => {
                let Value::Object(mut list) = list else {
                    return Ok(list);
                };
                let items = match list.remove("items") {
                    Some(Value::Array(items)) => items
                        .into_iter()
                        .map(|i| partial(version, take_metadata(i)))
                        .collect(),
                    _ => Vec::new(),
                };
                let mut out = Map::new();
                out.insert("kind".into(), "PartialObjectMetadataList".into());
                out.insert("apiVersion".into(), version.api_version().into());
                // metav1.ListMeta: every field `omitempty` (a custom resource's unstructured
                // list writes an empty `continue`).
                let mut metadata = match list.remove("metadata") {
                    Some(Value::Object(m)) => m,
                    _ => Map::new(),
                };
                metadata.retain(|_, v| !matches!(v, Value::String(s) if s.is_empty()));
                out.insert("metadata".into(), Value::Object(metadata));
                out.insert("items".into(), Value::Array(items));
                Ok(Value::Object(out))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIST: &str = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;\
        g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,\
        application/json";

    fn configmaps() -> KindDescriptor {
        KindDescriptor::new("", "v1", "ConfigMap", "configmaps", true, false)
    }

    fn widgets() -> KindDescriptor {
        KindDescriptor::new("example.com", "v1", "Widget", "widgets", true, true)
    }

    fn negotiate(accept: &str) -> Result<Conversion, ApiStatus> {
        super::negotiate(&configmaps(), accept)
    }

    #[test]
    fn the_first_servable_clause_wins() {
        let v1 = MetaVersion::V1;
        assert_eq!(negotiate(""), Ok(Conversion::Full));
        assert_eq!(negotiate("application/json"), Ok(Conversion::Full));
        assert_eq!(negotiate("*/*"), Ok(Conversion::Full));
        assert_eq!(
            negotiate(LIST),
            Ok(Conversion::PartialObjectMetadataList(v1))
        );
        assert_eq!(
            negotiate("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1beta1"),
            Ok(Conversion::PartialObjectMetadata(MetaVersion::V1beta1))
        );
        // Table is passed over for the next clause; an unknown `as` or group too.
        assert_eq!(
            negotiate("application/json;as=Table;g=meta.k8s.io;v=v1,application/json"),
            Ok(Conversion::Full)
        );
        assert_eq!(
            negotiate("application/json;as=PartialObjectMetadata;g=apps;v=v1,*/*;q=0.5"),
            Ok(Conversion::Full)
        );
        // Protobuf only: served here in JSON, with its conversion.
        assert_eq!(
            negotiate(
                "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
            ),
            Ok(Conversion::PartialObjectMetadata(v1))
        );
        assert_eq!(
            negotiate("application/vnd.kubernetes.protobuf, application/json"),
            Ok(Conversion::Full)
        );
    }

    #[test]
    fn nothing_servable_is_a_406_in_the_apiservers_words() {
        let negotiation = "only the following media types are accepted: application/json, \
                           application/yaml, application/vnd.kubernetes.protobuf";
        let routing = "406: Not Acceptable\n\nAvailable representations: application/json, \
                       application/yaml, application/vnd.kubernetes.protobuf";
        for (desc, accept, message) in [
            (configmaps(), "text/html", routing),
            (configmaps(), "application/*", routing),
            (
                configmaps(),
                "application/json;as=Foo;g=meta.k8s.io;v=v1",
                negotiation,
            ),
            (widgets(), "text/html", negotiation),
            (
                widgets(),
                "application/json;as=Table;g=meta.k8s.io;v=v1",
                negotiation,
            ),
        ] {
            let err = super::negotiate(&desc, accept).unwrap_err();
            assert_eq!((err.code, err.reason), (406, "NotAcceptable"), "{accept}");
            assert_eq!(err.message, message, "{accept}");
        }
    }

    #[test]
    fn metadata_conversions_keep_every_metadata_field_and_refuse_the_wrong_shape() {
        let desc = KindDescriptor::new("", "v1", "ConfigMap", "configmaps", true, false);
        let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "resourceVersion": "7", "labels": {"x": "y"}},
            "data": {"k": "v"}});
        let v1 = MetaVersion::V1;
        assert_eq!(
            Conversion::PartialObjectMetadata(v1).object(&desc, object.clone()),
            Ok(
                json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                "metadata": {"name": "a", "resourceVersion": "7", "labels": {"x": "y"}}})
            )
        );
        let list = json!({"apiVersion": "v1", "kind": "ConfigMapList",
            "metadata": {"resourceVersion": "9", "continue": "c"}, "items": [object.clone()]});
        let converted = Conversion::PartialObjectMetadataList(v1)
            .list(&desc, list.clone())
            .unwrap();
        assert_eq!(converted["kind"], "PartialObjectMetadataList");
        assert_eq!(
            converted["metadata"],
            json!({"resourceVersion": "9", "continue": "c"})
        );
        assert_eq!(converted["items"][0]["kind"], "PartialObjectMetadata");
        assert_eq!(
            converted["items"][0]["metadata"]["labels"],
            json!({"x": "y"})
        );
        assert!(converted["items"][0].get("data").is_none());

        let err = Conversion::PartialObjectMetadata(v1)
            .list(&desc, list)
            .unwrap_err();
        assert_eq!(err.code, 406);
        assert_eq!(
            err.message,
            "you requested PartialObjectMetadata, but the requested object is a list (*core.ConfigMapList)"
        );
        let err = Conversion::PartialObjectMetadataList(v1)
            .object(&desc, object)
            .unwrap_err();
        assert!(
            err.message.ends_with("is not a list (*core.ConfigMap)"),
            "{}",
            err.message
        );
    }
}
