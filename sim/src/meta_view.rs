//! How the simulator decodes a secondary source's objects: metadata only, with every owner
//! reference, so that both `owner:` and `any-owner:` sources map them as the controller did.

use std::collections::BTreeMap;

use serde::Deserialize;

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

impl Object for MetaView {
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
}
