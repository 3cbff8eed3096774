//! What the core needs to know about a cached object: its key and its resourceVersion.

use std::fmt;
use std::sync::Arc;

use serde::de::DeserializeOwned;

/// An object the loop can cache: any serde-decodable type that can name itself.
///
/// Every `kube::Resource` is one already (feature `kube`, on by default): k8s-openapi's
/// types, `#[derive(CustomResource)]` types, `DynamicObject` and `PartialObjectMeta<K>`.
/// A small partial view (like [`PodView`](crate::pod::PodView)) implements it by hand, to
/// cache only the fields a controller reads.
///
/// The accessors are prefixed `object_` so that they never clash with
/// `kube::ResourceExt::namespace` and friends when both traits are in scope.
#[doc(alias = "Resource")]
pub trait Object: DeserializeOwned + 'static {
    /// `metadata.namespace`; `None` for a cluster-scoped object.
    fn object_namespace(&self) -> Option<&str>;

    /// `metadata.name`; `None` when the object carries no name, which the store rejects.
    fn object_name(&self) -> Option<&str>;

    /// `metadata.resourceVersion`: opaque, compared for equality only.
    fn object_resource_version(&self) -> Option<&str>;

    /// The value of the label `key` in `metadata.labels`, if set.
    fn label(&self, key: &str) -> Option<&str>;

    /// The entry of `metadata.ownerReferences` with `controller: true`, if any: the object
    /// that manages this one (a Pod's ReplicaSet, a ReplicaSet's Deployment).
    fn controller_owner(&self) -> Option<OwnerRef<'_>>;

    /// Every entry of `metadata.ownerReferences`, controller or not. A view that keeps only
    /// the controller owner (as [`PodView`](crate::pod::PodView) does) reports that one.
    fn owner_refs(&self) -> Vec<OwnerRef<'_>> {
        self.controller_owner().into_iter().collect()
    }

    /// `metadata.generation`, when the view keeps it (for
    /// [`Predicate::GenerationChanged`](crate::Predicate::GenerationChanged)).
    fn object_generation(&self) -> Option<i64> {
        None
    }

    /// Whether `other` carries the same `metadata.labels`; `None` when the view cannot tell
    /// (then a labels predicate lets the change through).
    fn same_labels(&self, other: &Self) -> Option<bool>
    where
        Self: Sized,
    {
        let _ = other;
        None
    }

    /// Whether `other` carries the same `metadata.annotations`; `None` when the view cannot
    /// tell.
    fn same_annotations(&self, other: &Self) -> Option<bool>
    where
        Self: Sized,
    {
        let _ = other;
        None
    }

    /// How the type decodes from Kubernetes protobuf (`application/vnd.kubernetes.protobuf`),
    /// if it does: `None` (the default) keeps it on JSON, and asking for protobuf on a source
    /// of it is a configuration error. [`PodView`](crate::pod::PodView) has one, and so has
    /// every built-in k8s-openapi type (by the Kubernetes schemas the crate embeds).
    #[must_use]
    fn protobuf() -> Option<crate::wire::protobuf::codec::ProtobufCodec<Self>>
    where
        Self: Sized,
    {
        None
    }

    /// The store key, `namespace/name`; `None` when the object has no name.
    #[must_use]
    fn key(&self) -> Option<ObjectKey> {
        self.object_name()
            .filter(|name| !name.is_empty())
            .map(|name| ObjectKey::new(self.object_namespace(), name))
    }
}

/// One owner reference, borrowed from the object that carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OwnerRef<'a> {
    /// The owner's `apiVersion`, for example `apps/v1`.
    pub api_version: &'a str,
    /// The owner's `kind`, for example `ReplicaSet`.
    pub kind: &'a str,
    /// The owner's name, in the namespace of the object that refers to it.
    pub name: &'a str,
    /// The owner's uid.
    pub uid: &'a str,
}

/// An object's identity in the store: `namespace/name`, or `name` when cluster-scoped.
///
/// One shared allocation, so the store, the parent index and snapshots hold the same bytes.
/// Kubernetes names and namespaces cannot contain `/`, so the joined form is unambiguous.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectKey(Arc<str>);

impl ObjectKey {
    /// The key of `name` in `namespace` (or cluster-scoped when `namespace` is `None` or empty).
    #[must_use]
    pub fn new(namespace: Option<&str>, name: &str) -> Self {
        let mut buf = String::new();
        write_key(&mut buf, namespace, name);
        ObjectKey::from_joined(&buf)
    }

    /// The key whose joined form is `joined`.
    pub(crate) fn from_joined(joined: &str) -> Self {
        ObjectKey(Arc::from(joined))
    }

    /// The namespace part, if any.
    #[must_use]
    pub fn namespace(&self) -> Option<&str> {
        self.0.split_once('/').map(|(ns, _)| ns)
    }

    /// The name part.
    #[must_use]
    pub fn name(&self) -> &str {
        self.0.split_once('/').map_or(&self.0, |(_, name)| name)
    }

    /// Whether `self` and `other` are clones of one key (a pointer comparison). Equal keys
    /// made separately are not.
    pub(crate) fn same_allocation(&self, other: &ObjectKey) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// The joined form, `namespace/name`.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Lookups by the joined `&str` form, so the store can find an object without allocating a key.
impl std::borrow::Borrow<str> for ObjectKey {
    fn borrow(&self) -> &str {
        &self.0
    }
}

/// Writes `namespace/name` (or `name`) into `buf`, the allocation-free form of [`ObjectKey::new`].
pub(crate) fn write_key(buf: &mut String, namespace: Option<&str>, name: &str) {
    buf.clear();
    if let Some(ns) = namespace.filter(|ns| !ns.is_empty()) {
        buf.push_str(ns);
        buf.push('/');
    }
    buf.push_str(name);
}

/// The joined form, `namespace/name`: the parent key of a loop keyed by `String`.
impl From<ObjectKey> for String {
    fn from(key: ObjectKey) -> String {
        key.0.as_ref().to_owned()
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", &*self.0)
    }
}

/// Every `kube::Resource` whose metadata is the standard `ObjectMeta`: built-in types,
/// custom resources, `DynamicObject`, and `PartialObjectMeta<K>` for metadata-only watches.
#[cfg(feature = "kube")]
impl<K> Object for K
where
    K: kube_core::Resource + DeserializeOwned + 'static,
{
    fn object_namespace(&self) -> Option<&str> {
        self.meta().namespace.as_deref()
    }

    fn object_name(&self) -> Option<&str> {
        self.meta().name.as_deref()
    }

    fn object_resource_version(&self) -> Option<&str> {
        self.meta().resource_version.as_deref()
    }

    fn label(&self, key: &str) -> Option<&str> {
        self.meta().labels.as_ref()?.get(key).map(String::as_str)
    }

    fn object_generation(&self) -> Option<i64> {
        self.meta().generation
    }

    /// Built-in types (k8s-openapi's) decode from protobuf by the Kubernetes schemas the
    /// crate embeds, and so does metadata only (`PartialObjectMeta` of any kind, as
    /// `PartialObjectMetadata`); custom resources and `DynamicObject` stay on JSON.
    fn protobuf() -> Option<crate::wire::protobuf::codec::ProtobufCodec<Self>> {
        crate::wire::protobuf::builtin::codec::<K>()
    }

    fn same_labels(&self, other: &Self) -> Option<bool> {
        Some(self.meta().labels == other.meta().labels)
    }

    fn same_annotations(&self, other: &Self) -> Option<bool> {
        Some(self.meta().annotations == other.meta().annotations)
    }

    fn controller_owner(&self) -> Option<OwnerRef<'_>> {
        let owner = self
            .meta()
            .owner_references
            .as_ref()?
            .iter()
            .find(|o| o.controller == Some(true))?;
        Some(OwnerRef {
            api_version: &owner.api_version,
            kind: &owner.kind,
            name: &owner.name,
            uid: &owner.uid,
        })
    }

    fn owner_refs(&self) -> Vec<OwnerRef<'_>> {
        self.meta()
            .owner_references
            .iter()
            .flatten()
            .map(|owner| OwnerRef {
                api_version: &owner.api_version,
                kind: &owner.kind,
                name: &owner.name,
                uid: &owner.uid,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_joins_namespace_and_name() {
        let key = ObjectKey::new(Some("kube-system"), "etcd-kind");
        assert_eq!(key.as_str(), "kube-system/etcd-kind");
        assert_eq!(key.namespace(), Some("kube-system"));
        assert_eq!(key.name(), "etcd-kind");
    }

    #[test]
    fn cluster_scoped_key_has_no_namespace() {
        for key in [
            ObjectKey::new(None, "node-1"),
            ObjectKey::new(Some(""), "node-1"),
        ] {
            assert_eq!(key.as_str(), "node-1");
            assert_eq!(key.namespace(), None);
            assert_eq!(key.name(), "node-1");
        }
    }
}
