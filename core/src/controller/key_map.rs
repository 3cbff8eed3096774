//! Which parent an object belongs to: the map from a cached object to the key its reconcile
//! runs under (controller-runtime's `EnqueueRequestForOwner`, kube-runtime's mappers).
//!
//! A [`KeyMap`] is a function plus, for the ready-made ones, a [`KeyBy`] that names it, so a
//! recorder can write the map into a trace header and a replay can rebuild it.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use crate::wire::object::{Object, ObjectKey};

/// Why an object has no parent; the store evicts such an object rather than serve it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct KeyMapError(pub String);

impl KeyMapError {
    /// An error with this message.
    pub fn new(message: impl Into<String>) -> Self {
        KeyMapError(message.into())
    }
}

/// A ready-made key map, named: how a parent key (a `String`) is derived from an object.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum KeyBy {
    /// The value of this label; an object without it has no parent and is evicted.
    Label(String),
    /// The object's own key, `namespace/name`: one parent per object.
    Name,
    /// The object's namespace (`""` for a cluster-scoped object).
    Namespace,
    /// The object's controller owner (its `ownerReferences` entry with `controller: true`),
    /// as `namespace/name` in the object's namespace: Pods by their ReplicaSet, ReplicaSets
    /// by their Deployment (controller-runtime's `EnqueueRequestForOwner` with
    /// `OnlyControllerOwner`). With a kind, an owner of another kind does not count. An
    /// object without one has no parent and is evicted.
    Owner(Option<String>),
}

impl fmt::Display for KeyBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyBy::Label(l) => write!(f, "label:{l}"),
            KeyBy::Name => f.write_str("name"),
            KeyBy::Namespace => f.write_str("namespace"),
            KeyBy::Owner(None) => f.write_str("owner"),
            KeyBy::Owner(Some(kind)) => write!(f, "owner:{kind}"),
        }
    }
}

/// A [`KeyBy`] spelled wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "a key map is \"name\", \"namespace\", \"label:<key>\", \"owner\" or \"owner:<kind>\", got {0:?}"
)]
pub struct KeyByParseError(pub String);

impl FromStr for KeyBy {
    type Err = KeyByParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "name" => Ok(KeyBy::Name),
            "namespace" => Ok(KeyBy::Namespace),
            "owner" => Ok(KeyBy::Owner(None)),
            _ => match (s.strip_prefix("label:"), s.strip_prefix("owner:")) {
                (Some(l), _) if !l.is_empty() => Ok(KeyBy::Label(l.to_owned())),
                (_, Some(k)) if !k.is_empty() => Ok(KeyBy::Owner(Some(k.to_owned()))),
                _ => Err(KeyByParseError(s.to_owned())),
            },
        }
    }
}

impl KeyBy {
    /// The parent of `object` under this map.
    ///
    /// # Errors
    /// [`KeyMapError`] when the object lacks what the map reads (the label, or a name).
    pub fn parent_of<O: Object>(&self, object: &O) -> Result<String, KeyMapError> {
        match self {
            KeyBy::Label(label) => object
                .label(label)
                .map(str::to_owned)
                .ok_or_else(|| KeyMapError::new(format!("no {label} label"))),
            KeyBy::Name => object
                .key()
                .map(|k| k.as_str().to_owned())
                .ok_or_else(|| KeyMapError::new("no name")),
            KeyBy::Namespace => Ok(object.object_namespace().unwrap_or("").to_owned()),
            KeyBy::Owner(kind) => {
                let owner = object
                    .controller_owner()
                    .ok_or_else(|| KeyMapError::new("no controller owner"))?;
                if let Some(kind) = kind
                    && owner.kind != kind
                {
                    return Err(KeyMapError::new(format!(
                        "controlled by a {}, not a {kind}",
                        owner.kind
                    )));
                }
                Ok(ObjectKey::new(object.object_namespace(), owner.name)
                    .as_str()
                    .to_owned())
            }
        }
    }
}

type MapFn<O, P> = dyn Fn(&O) -> Result<P, KeyMapError> + Send + Sync;

/// Maps an object to its parent key; cheap to clone.
pub struct KeyMap<O, P> {
    map: Arc<MapFn<O, P>>,
    by: Option<KeyBy>,
}

impl<O, P> Clone for KeyMap<O, P> {
    fn clone(&self) -> Self {
        KeyMap {
            map: Arc::clone(&self.map),
            by: self.by.clone(),
        }
    }
}

impl<O, P> fmt::Debug for KeyMap<O, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.by {
            Some(by) => write!(f, "KeyMap({by})"),
            None => f.write_str("KeyMap(custom)"),
        }
    }
}

impl<O, P> KeyMap<O, P> {
    /// A map by any function; it describes itself as custom ([`KeyMap::describe`] is `None`).
    pub fn new(map: impl Fn(&O) -> Result<P, KeyMapError> + Send + Sync + 'static) -> Self {
        KeyMap {
            map: Arc::new(map),
            by: None,
        }
    }

    /// The parent of `object`.
    ///
    /// # Errors
    /// Whatever the map says when it cannot place the object.
    pub fn parent_of(&self, object: &O) -> Result<P, KeyMapError> {
        (self.map)(object)
    }

    /// The ready-made map this is, or `None` for a custom function.
    #[must_use]
    pub fn describe(&self) -> Option<&KeyBy> {
        self.by.as_ref()
    }
}

impl<O: Object> KeyMap<O, ObjectKey> {
    /// Parent = the object itself, as its [`ObjectKey`]: kube-runtime's model, where every
    /// object is reconciled on its own. A trace header names it `name`, as
    /// [`KeyMap::by_name`], whose parents are the same keys as strings.
    #[must_use]
    pub fn by_object() -> Self {
        KeyMap {
            map: Arc::new(|object: &O| object.key().ok_or_else(|| KeyMapError::new("no name"))),
            by: Some(KeyBy::Name),
        }
    }
}

impl<O: Object> KeyMap<O, String> {
    /// The ready-made map `by`.
    #[must_use]
    pub fn by(by: KeyBy) -> Self {
        let described = by.clone();
        KeyMap {
            map: Arc::new(move |object: &O| by.parent_of(object)),
            by: Some(described),
        }
    }

    /// Parent = the value of `label`; an object without it is evicted with [`KeyMapError`].
    #[must_use]
    pub fn by_label(label: impl Into<String>) -> Self {
        KeyMap::by(KeyBy::Label(label.into()))
    }

    /// Parent = the object's own `namespace/name`.
    #[must_use]
    pub fn by_name() -> Self {
        KeyMap::by(KeyBy::Name)
    }

    /// Parent = the object's namespace.
    #[must_use]
    pub fn by_namespace() -> Self {
        KeyMap::by(KeyBy::Namespace)
    }

    /// Parent = the object's controller owner, `namespace/name`, of any kind.
    #[must_use]
    pub fn by_owner() -> Self {
        KeyMap::by(KeyBy::Owner(None))
    }

    /// Parent = the object's controller owner, `namespace/name`, when it is of `kind`.
    #[must_use]
    pub fn by_owner_of_kind(kind: impl Into<String>) -> Self {
        KeyMap::by(KeyBy::Owner(Some(kind.into())))
    }
}

impl<O, P, F> From<F> for KeyMap<O, P>
where
    F: Fn(&O) -> Result<P, KeyMapError> + Send + Sync + 'static,
{
    fn from(map: F) -> Self {
        KeyMap::new(map)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::pod::PodView;

    fn pod(json: &str) -> PodView {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn ready_made_maps_describe_themselves_and_round_trip() {
        for by in [
            KeyBy::Label("cell".into()),
            KeyBy::Name,
            KeyBy::Namespace,
            KeyBy::Owner(None),
            KeyBy::Owner(Some("ReplicaSet".into())),
        ] {
            let map = KeyMap::<PodView, String>::by(by.clone());
            assert_eq!(map.describe(), Some(&by));
            assert_eq!(by.to_string().parse::<KeyBy>(), Ok(by));
        }
        assert!(
            KeyMap::<PodView, String>::new(|_| Ok(String::new()))
                .describe()
                .is_none()
        );
        assert!("label:".parse::<KeyBy>().is_err());
        assert!("owner:".parse::<KeyBy>().is_err());
        assert!("parent".parse::<KeyBy>().is_err());
    }

    #[test]
    fn ready_made_maps_place_objects() {
        let p = pod(r#"{"metadata":{"name":"a","namespace":"ns","labels":{"cell":"c1"}}}"#);
        assert_eq!(KeyMap::by_label("cell").parent_of(&p).unwrap(), "c1");
        assert_eq!(KeyMap::by_name().parent_of(&p).unwrap(), "ns/a");
        assert_eq!(KeyMap::by_namespace().parent_of(&p).unwrap(), "ns");
        let err = KeyMap::<PodView, String>::by_label("other").parent_of(&p);
        assert_eq!(err, Err(KeyMapError::new("no other label")));
        assert_eq!(
            KeyMap::by_owner().parent_of(&p),
            Err(KeyMapError::new("no controller owner"))
        );
    }

    #[test]
    fn by_owner_follows_the_controller_reference_only() {
        let owned = pod(
            r#"{"metadata":{"name":"web-1","namespace":"ns","ownerReferences":[
                {"apiVersion":"v1","kind":"Node","name":"n1","uid":"u0"},
                {"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web","uid":"u1","controller":true}]}}"#,
        );
        assert_eq!(KeyMap::by_owner().parent_of(&owned).unwrap(), "ns/web");
        let by_rs = KeyMap::by_owner_of_kind("ReplicaSet");
        assert_eq!(by_rs.parent_of(&owned).unwrap(), "ns/web");
        assert_eq!(
            KeyMap::by_owner_of_kind("StatefulSet").parent_of(&owned),
            Err(KeyMapError::new(
                "controlled by a ReplicaSet, not a StatefulSet"
            ))
        );
        let only_owned = pod(
            r#"{"metadata":{"name":"a","namespace":"ns","ownerReferences":[
                {"apiVersion":"v1","kind":"Node","name":"n1","uid":"u0"}]}}"#,
        );
        assert!(
            KeyMap::<PodView, String>::by_owner()
                .parent_of(&only_owned)
                .is_err()
        );
        // The schema requires kind and name (the fields the view keeps) in every reference.
        let broken = r#"{"metadata":{"ownerReferences":[{"kind":"ReplicaSet","uid":"w"}]}}"#;
        assert!(serde_json::from_str::<PodView>(broken).is_err());
        let null = pod(r#"{"metadata":{"name":"a","ownerReferences":null}}"#);
        assert!(null.controller_owner().is_none());
    }

    #[test]
    fn by_owner_reads_full_kubernetes_types_too() {
        let rs: k8s_openapi::api::apps::v1::ReplicaSet = serde_json::from_str(
            r#"{"metadata":{"name":"web-5d","namespace":"ns","ownerReferences":[
                {"apiVersion":"apps/v1","kind":"Deployment","name":"web","uid":"u1","controller":true}]}}"#,
        )
        .unwrap();
        assert_eq!(
            KeyMap::by_owner_of_kind("Deployment")
                .parent_of(&rs)
                .unwrap(),
            "ns/web"
        );
    }
}
