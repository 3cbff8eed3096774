//! The world as oracles see it (the simulated cluster, read only, typed), and the user's
//! actions on it (create, edit, delete), which a schedule plays at their times.

use std::fmt;
use std::time::Duration;

use kube_core::Resource;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::cluster::{Cluster, DeleteOptions, KindId, ListOptions, WriteOptions};

/// The cluster at one instant, as an invariant or `converges_to` reads it.
pub struct World<'a> {
    pub(crate) cluster: &'a Cluster,
    pub(crate) now: Duration,
}

impl fmt::Debug for World<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("World")
            .field("now", &self.now)
            .finish_non_exhaustive()
    }
}

impl World<'_> {
    /// The virtual time.
    #[must_use]
    pub fn now(&self) -> Duration {
        self.now
    }

    /// Every object of `K`, in every namespace, in name order. An object that does not
    /// decode as `K` is left out (see [`World::objects`] for the raw JSON).
    #[must_use]
    pub fn list<K>(&self) -> Vec<K>
    where
        K: Resource<DynamicType = ()> + DeserializeOwned,
    {
        // Decoded in place: the convergence oracle lists every second of the settle time.
        let Some(kind) = self.cluster.kind_of(&K::api_version(&()), &K::kind(&())) else {
            return Vec::new();
        };
        self.cluster
            .current_objects(kind)
            .filter_map(|json| serde_json::from_slice(json).ok())
            .collect()
    }

    /// The object of `K` named `name` in `namespace` (`None` for a cluster-scoped kind).
    #[must_use]
    pub fn get<K>(&self, namespace: Option<&str>, name: &str) -> Option<K>
    where
        K: Resource<DynamicType = ()> + DeserializeOwned,
    {
        let kind = self.cluster.kind_of(&K::api_version(&()), &K::kind(&()))?;
        let json = self.cluster.get_json(kind, namespace, name).ok()?;
        serde_json::from_slice(&json).ok()
    }

    /// Every object of this apiVersion and kind, as JSON (empty for a kind not served).
    #[must_use]
    pub fn objects(&self, api_version: &str, kind: &str) -> Vec<Value> {
        let Some(kind) = self.cluster.kind_of(api_version, kind) else {
            return Vec::new();
        };
        list_all(self.cluster, kind)
    }
}

pub(crate) fn list_all(cluster: &Cluster, kind: KindId) -> Vec<Value> {
    match cluster.list(kind, None, &ListOptions::default()) {
        Ok(mut list) => match list.get_mut("items").map(Value::take) {
            Some(Value::Array(items)) => items,
            _ => Vec::new(),
        },
        Err(_) => Vec::new(),
    }
}

/// A user's action on the world, at a time of the schedule.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Creates the object.
    Create(Value),
    /// Sets every field of the object but `metadata` and `status` (and adds its labels
    /// and annotations) on the existing object of that name, as `kubectl edit` would.
    Edit(Value),
    /// Deletes the object of this apiVersion, kind, namespace and name.
    Delete {
        /// `apiVersion`.
        api_version: String,
        /// `kind`.
        kind: String,
        /// The namespace (`None`: cluster-scoped).
        namespace: Option<String>,
        /// The name.
        name: String,
    },
}

/// Creates `object` (its `apiVersion` and `kind` are set from `K`).
///
/// # Panics
/// When `object` does not serialize to a JSON object.
pub fn create<K: Resource<DynamicType = ()> + Serialize>(object: &K) -> Action {
    Action::Create(typed_json(object))
}

/// Edits the existing object of `object`'s name to `object`'s fields (see [`Action::Edit`]).
///
/// # Panics
/// When `object` does not serialize to a JSON object.
pub fn edit<K: Resource<DynamicType = ()> + Serialize>(object: &K) -> Action {
    Action::Edit(typed_json(object))
}

/// Deletes the `K` named `name` in the scenario's namespace (`default`), or
/// cluster-scoped for a cluster-scoped kind.
pub fn delete<K: Resource<DynamicType = ()>>(name: &str) -> Action {
    Action::Delete {
        api_version: K::api_version(&()).into_owned(),
        kind: K::kind(&()).into_owned(),
        namespace: None,
        name: name.to_owned(),
    }
}

/// Deletes the `K` named `name` in `namespace`.
pub fn delete_in<K: Resource<DynamicType = ()>>(namespace: &str, name: &str) -> Action {
    Action::Delete {
        api_version: K::api_version(&()).into_owned(),
        kind: K::kind(&()).into_owned(),
        namespace: Some(namespace.to_owned()),
        name: name.to_owned(),
    }
}

pub(crate) fn typed_json<K: Resource<DynamicType = ()> + Serialize>(object: &K) -> Value {
    let mut value = serde_json::to_value(object).expect("a Kubernetes object serializes");
    assert!(
        value.is_object(),
        "a Kubernetes object serializes to a JSON object"
    );
    value["apiVersion"] = Value::from(K::api_version(&()).into_owned());
    value["kind"] = Value::from(K::kind(&()).into_owned());
    value
}

fn meta<'v>(value: &'v Value, key: &str) -> Option<&'v str> {
    value
        .pointer(&format!("/metadata/{key}"))
        .and_then(Value::as_str)
}

impl Action {
    /// `create ConfigMapGenerator default/a`, as the schedule shows it.
    pub(crate) fn describe(&self, default_ns: &str) -> String {
        let what = |v: &Value| {
            let kind = v.get("kind").and_then(Value::as_str).unwrap_or("?");
            let name = meta(v, "name").unwrap_or("?");
            match meta(v, "namespace") {
                Some(ns) => format!("{kind} {ns}/{name}"),
                None => format!("{kind} {default_ns}/{name}"),
            }
        };
        match self {
            Action::Create(v) => format!("create {}", what(v)),
            Action::Edit(v) => format!("edit {}", what(v)),
            Action::Delete {
                kind,
                namespace,
                name,
                ..
            } => format!(
                "delete {kind} {}/{name}",
                namespace.as_deref().unwrap_or(default_ns)
            ),
        }
    }

    /// Plays the action on `cluster` at `now`: what happened, for the log.
    pub(crate) fn apply(
        &self,
        cluster: &mut Cluster,
        now: reconcile_core::Instant,
        default_ns: &str,
    ) -> String {
        let said = self.describe(default_ns);
        let located = |cluster: &Cluster, api_version: &str, kind: &str, ns: Option<&str>| {
            let id = cluster.kind_of(api_version, kind)?;
            let namespaced = cluster.descriptor(id).namespaced;
            Some((id, namespaced.then(|| ns.unwrap_or(default_ns).to_owned())))
        };
        let type_of = |v: &Value| {
            (
                v.get("apiVersion")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned(),
                v.get("kind")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned(),
            )
        };
        let outcome = match self {
            Action::Create(v) => {
                let (av, k) = type_of(v);
                match located(cluster, &av, &k, meta(v, "namespace")) {
                    None => Err(format!("{av} {k} is not served")),
                    Some((id, ns)) => cluster
                        .create(now, id, ns.as_deref(), v.clone(), &user())
                        .map(|_| ())
                        .map_err(|s| s.message),
                }
            }
            Action::Edit(v) => {
                let (av, k) = type_of(v);
                let name = meta(v, "name").unwrap_or("").to_owned();
                match located(cluster, &av, &k, meta(v, "namespace")) {
                    None => Err(format!("{av} {k} is not served")),
                    Some((id, ns)) => match cluster.get(id, ns.as_deref(), &name) {
                        Err(s) => Err(s.message),
                        Ok(current) => {
                            let body = edited(current, v);
                            cluster
                                .replace(now, id, ns.as_deref(), &name, body, &user())
                                .map(|_| ())
                                .map_err(|s| s.message)
                        }
                    },
                }
            }
            Action::Delete {
                api_version,
                kind,
                namespace,
                name,
            } => match located(cluster, api_version, kind, namespace.as_deref()) {
                None => Err(format!("{api_version} {kind} is not served")),
                Some((id, ns)) => cluster
                    .delete(now, id, ns.as_deref(), name, &DeleteOptions::default())
                    .map(|_| ())
                    .map_err(|s| s.message),
            },
        };
        match outcome {
            Ok(()) => format!("user: {said}"),
            Err(e) => format!("user: {said} failed: {e}"),
        }
    }
}

/// `current` with `wanted`'s fields but metadata and status, and its labels and
/// annotations added.
fn edited(mut current: Value, wanted: &Value) -> Value {
    if let (Some(current), Some(wanted)) = (current.as_object_mut(), wanted.as_object()) {
        for (key, value) in wanted {
            if key == "metadata" || key == "status" {
                continue;
            }
            current.insert(key.clone(), value.clone());
        }
        for part in ["labels", "annotations"] {
            if let Some(Value::Object(add)) = wanted.get("metadata").and_then(|m| m.get(part)) {
                let meta = current
                    .entry("metadata")
                    .or_insert_with(|| Value::Object(serde_json::Map::new()));
                if let Some(meta) = meta.as_object_mut() {
                    let into = meta
                        .entry(part)
                        .or_insert_with(|| Value::Object(serde_json::Map::new()));
                    if let Some(into) = into.as_object_mut() {
                        for (k, v) in add {
                            into.insert(k.clone(), v.clone());
                        }
                    }
                }
            }
        }
    }
    current
}

fn user() -> WriteOptions {
    WriteOptions {
        field_manager: Some("user".into()),
        dry_run: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_edit_sets_the_fields_and_adds_labels_keeping_the_rest() {
        let current = json!({"metadata": {"name": "a", "uid": "u", "labels": {"x": "1"}},
            "spec": {"content": "old", "other": 1}, "status": {"s": 1}});
        let wanted = json!({"metadata": {"name": "a", "labels": {"y": "2"}},
            "spec": {"content": "new"}, "status": {"s": 9}});
        let out = edited(current, &wanted);
        assert_eq!(out["spec"], json!({"content": "new"}));
        assert_eq!(out["status"], json!({"s": 1}));
        assert_eq!(out["metadata"]["uid"], "u");
        assert_eq!(out["metadata"]["labels"], json!({"x": "1", "y": "2"}));
    }
}
