//! What the cluster serves: one [`KindDescriptor`] per resource, from a plain struct, a table
//! of built-ins, or a CustomResourceDefinition's JSON (what `CustomResourceExt::crd()`
//! serializes to), so the cluster itself never names a kube type.

use serde_json::Value;

/// One resource the cluster serves, as discovery would describe it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KindDescriptor {
    /// API group, `""` for the core group.
    pub group: String,
    /// The one version served (a CRD's storage version).
    pub version: String,
    /// `Kind`, e.g. `ConfigMap`.
    pub kind: String,
    /// The resource name in URLs, e.g. `configmaps`.
    pub plural: String,
    /// Namespaced (`/namespaces/{ns}/...`) or cluster-scoped.
    pub namespaced: bool,
    /// Whether `/status` is a subresource: the main resource then ignores `.status`.
    pub has_status_subresource: bool,
    /// Field selectors beyond `metadata.name` and `metadata.namespace`, as dotted paths
    /// (`spec.nodeName`, `status.phase`); a CRD's `selectableFields`.
    pub selectable_fields: Vec<String>,
}

/// A CRD JSON value that cannot be served.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unusable CustomResourceDefinition: {0}")]
pub struct CrdError(pub String);

impl KindDescriptor {
    /// A descriptor with no extra selectable fields.
    #[must_use]
    pub fn new(
        group: &str,
        version: &str,
        kind: &str,
        plural: &str,
        namespaced: bool,
        has_status_subresource: bool,
    ) -> Self {
        KindDescriptor {
            group: group.to_owned(),
            version: version.to_owned(),
            kind: kind.to_owned(),
            plural: plural.to_owned(),
            namespaced,
            has_status_subresource,
            selectable_fields: Vec::new(),
        }
    }

    /// The same with these extra field selectors.
    #[must_use]
    pub fn with_selectable_fields(mut self, fields: &[&str]) -> Self {
        self.selectable_fields = fields.iter().map(|f| (*f).to_owned()).collect();
        self
    }

    /// `apiVersion`: `v1` or `group/version`.
    #[must_use]
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The group-qualified resource as apimachinery prints it in messages: `configmaps`,
    /// `deployments.apps`.
    #[must_use]
    pub fn group_resource(&self) -> String {
        qualified(&self.plural, &self.group)
    }

    /// The group-qualified kind (`ConfigMap`, `Deployment.apps`), as `Invalid` names it.
    #[must_use]
    pub fn group_kind(&self) -> String {
        qualified(&self.kind, &self.group)
    }

    /// The URL of the collection, in `namespace` when given.
    #[must_use]
    pub fn collection_path(&self, namespace: Option<&str>) -> String {
        let root = if self.group.is_empty() {
            format!("/api/{}", self.version)
        } else {
            format!("/apis/{}/{}", self.group, self.version)
        };
        match namespace {
            Some(ns) if self.namespaced => format!("{root}/namespaces/{ns}/{}", self.plural),
            _ => format!("{root}/{}", self.plural),
        }
    }

    /// The served version of a CustomResourceDefinition (`apiextensions.k8s.io/v1`, as
    /// `CustomResourceExt::crd()` serializes): group, `names.plural` / `names.kind`,
    /// `scope`, and of the storage version (else the first served one) its `status`
    /// subresource and `selectableFields`.
    ///
    /// # Errors
    /// [`CrdError`] naming the missing field.
    pub fn from_crd(crd: &Value) -> Result<Self, CrdError> {
        let spec = crd.get("spec").ok_or_else(|| CrdError("no spec".into()))?;
        let text = |v: &Value, key: &str| {
            v.get(key)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .ok_or_else(|| CrdError(format!("no {key}")))
        };
        let group = text(spec, "group")?;
        let names = spec
            .get("names")
            .ok_or_else(|| CrdError("no spec.names".into()))?;
        let versions = spec
            .get("versions")
            .and_then(Value::as_array)
            .ok_or_else(|| CrdError("no spec.versions".into()))?;
        let flag = |v: &Value, key: &str| v.get(key).and_then(Value::as_bool).unwrap_or(false);
        let version = versions
            .iter()
            .find(|v| flag(v, "storage"))
            .or_else(|| versions.iter().find(|v| flag(v, "served")))
            .ok_or_else(|| CrdError("no served version".into()))?;
        let scope = text(spec, "scope")?;
        let namespaced = match scope.as_str() {
            "Namespaced" => true,
            "Cluster" => false,
            other => return Err(CrdError(format!("scope {other:?}"))),
        };
        let selectable_fields = version
            .get("selectableFields")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|f| f.get("jsonPath").and_then(Value::as_str))
            .map(|p| p.trim_start_matches('.').to_owned())
            .collect();
        Ok(KindDescriptor {
            group,
            version: text(version, "name")?,
            kind: text(names, "kind")?,
            plural: text(names, "plural")?,
            namespaced,
            has_status_subresource: version
                .get("subresources")
                .and_then(|s| s.get("status"))
                .is_some(),
            selectable_fields,
        })
    }

    /// The descriptor of the CustomResourceDefinition kind itself
    /// (`apiextensions.k8s.io/v1`), to store CRDs as objects too.
    #[must_use]
    pub fn custom_resource_definitions() -> Self {
        KindDescriptor::new(
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
            false,
            true,
        )
    }
}

/// The kinds the apiserver serves from Go types, as `(group, version, kind)`: those of
/// [`builtin_kinds`] and the CustomResourceDefinition kind.
const TYPED: [(&str, &str, &str); 10] = [
    ("", "v1", "Pod"),
    ("", "v1", "ConfigMap"),
    ("", "v1", "Secret"),
    ("", "v1", "Service"),
    ("", "v1", "Namespace"),
    ("apps", "v1", "Deployment"),
    ("apps", "v1", "ReplicaSet"),
    ("events.k8s.io", "v1", "Event"),
    ("coordination.k8s.io", "v1", "Lease"),
    ("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
];

/// Of [`TYPED`], the kinds whose strategy never sets `metadata.generation`.
const NO_GENERATION: [(&str, &str); 6] = [
    ("", "ConfigMap"),
    ("", "Secret"),
    ("", "Service"),
    ("", "Namespace"),
    ("events.k8s.io", "Event"),
    ("coordination.k8s.io", "Lease"),
];

impl KindDescriptor {
    /// Served from a Go type (a built-in): its list items then carry no `kind` and
    /// `apiVersion`, as a typed list's items are serialized without them.
    pub(crate) fn is_typed(&self) -> bool {
        TYPED.iter().any(|(g, v, k)| {
            *g == self.group.as_str() && *v == self.version.as_str() && *k == self.kind.as_str()
        })
    }

    /// Whether the apiserver keeps `metadata.generation` for this kind: custom resources
    /// and built-ins with a spec do; ConfigMaps, Secrets, Services, Namespaces, Events and
    /// Leases do not (their strategies never set it).
    pub(crate) fn tracks_generation(&self) -> bool {
        !(self.is_typed()
            && NO_GENERATION
                .iter()
                .any(|(g, k)| *g == self.group.as_str() && *k == self.kind.as_str()))
    }
}

fn qualified(name: &str, group: &str) -> String {
    if group.is_empty() {
        name.to_owned()
    } else {
        format!("{name}.{group}")
    }
}

/// The built-in kinds a typical operator touches, as the apiserver serves them: pods,
/// configmaps, secrets, services, namespaces, deployments, replicasets, `events.k8s.io`
/// events, `coordination.k8s.io` leases. Field selectors are the ones the apiserver
/// supports for each beyond `metadata.*` (a subset for pods).
#[must_use]
pub fn builtin_kinds() -> Vec<KindDescriptor> {
    vec![
        KindDescriptor::new("", "v1", "Pod", "pods", true, true).with_selectable_fields(&[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ]),
        KindDescriptor::new("", "v1", "ConfigMap", "configmaps", true, false),
        KindDescriptor::new("", "v1", "Secret", "secrets", true, false)
            .with_selectable_fields(&["type"]),
        KindDescriptor::new("", "v1", "Service", "services", true, true),
        KindDescriptor::new("", "v1", "Namespace", "namespaces", false, true)
            .with_selectable_fields(&["status.phase"]),
        KindDescriptor::new("apps", "v1", "Deployment", "deployments", true, true),
        KindDescriptor::new("apps", "v1", "ReplicaSet", "replicasets", true, true)
            .with_selectable_fields(&["status.replicas"]),
        KindDescriptor::new("events.k8s.io", "v1", "Event", "events", true, false)
            .with_selectable_fields(&["reason", "type", "reportingController"]),
        KindDescriptor::new("coordination.k8s.io", "v1", "Lease", "leases", true, false),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crd_value_gives_its_storage_version_scope_and_status_subresource() {
        let crd = serde_json::json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "kind": "Widget", "singular": "widget"},
                "versions": [
                    {"name": "v1alpha1", "served": true, "storage": false},
                    {"name": "v1", "served": true, "storage": true,
                     "subresources": {"status": {}},
                     "selectableFields": [{"jsonPath": ".spec.color"}]}]}
        });
        let d = KindDescriptor::from_crd(&crd).unwrap();
        assert_eq!(
            (d.api_version(), d.kind.as_str(), d.plural.as_str()),
            ("example.com/v1".to_owned(), "Widget", "widgets")
        );
        assert!(d.namespaced && d.has_status_subresource);
        assert_eq!(d.selectable_fields, ["spec.color"]);
        assert_eq!(d.group_resource(), "widgets.example.com");
        assert_eq!(
            d.collection_path(Some("ns")),
            "/apis/example.com/v1/namespaces/ns/widgets"
        );
    }

    #[test]
    fn a_crd_without_the_needed_fields_is_refused() {
        for bad in [
            serde_json::json!({}),
            serde_json::json!({"spec": {"group": "g", "scope": "Namespaced", "names": {}, "versions": []}}),
            serde_json::json!({"spec": {"group": "g", "scope": "Galaxy", "names": {"kind": "K", "plural": "ks"}, "versions": [{"name": "v1", "served": true}]}}),
        ] {
            assert!(KindDescriptor::from_crd(&bad).is_err(), "{bad}");
        }
    }
}
