//! Writes: create (`generateName`, uid, timestamps, generation), replace with its
//! resourceVersion precondition, patch, the `/status` subresource, and dry runs (computed
//! in full, committed never). Deletes are in `delete`.

use std::sync::Arc;

use reconcile_core::Instant;
use serde_json::{Map, Value};

use super::apply::{self, Scope, Writer};
use super::params::{PATCH_TYPES, Patch, PatchOptions, WriteOptions};
use super::patch::{MAX_JSON_PATCH_OPERATIONS, json_patch, merge_patch};
use super::secret;
use super::status::{ApiStatus, OPTIMISTIC_LOCK};
use super::store::{Key, finalizers, meta, meta_mut, meta_str, timestamp};
use super::strategic::{StrategicError, strategic_merge};
use super::{Cluster, KindDescriptor, KindId};

const DNS1123_SUBDOMAIN: &str = "a lowercase RFC 1123 subdomain must consist of lower case \
    alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character \
    (e.g. 'example.com', regex used for validation is \
    '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

fn is_dns1123_subdomain(name: &str) -> bool {
    name.len() <= 253
        && name.split('.').all(|label| {
            let b = label.as_bytes();
            !b.is_empty()
                && b.iter()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
                && b[0] != b'-'
                && b[b.len() - 1] != b'-'
        })
}

/// Whether two objects differ in the part a change to which bumps `metadata.generation`:
/// all but metadata (and status when it is a subresource). Compared in place, by key: a
/// write must not copy the object to learn this.
fn spec_differs(a: &Value, b: &Value, status_excluded: bool) -> bool {
    let empty = Map::new();
    let (a, b) = (
        a.as_object().unwrap_or(&empty),
        b.as_object().unwrap_or(&empty),
    );
    let counted = |k: &str| k != "metadata" && !(status_excluded && k == "status");
    let count = |m: &Map<String, Value>| m.keys().filter(|k| counted(k)).count();
    count(a) != count(b)
        || a.iter()
            .filter(|(k, _)| counted(k))
            .any(|(k, v)| b.get(k) != Some(v))
}

/// A built-in's metadata is Go's `ObjectMeta`, whose `omitempty` drops an empty finalizers
/// or ownerReferences list on the way to storage (a patch that removes the last element
/// leaves none).
fn omit_empty_meta_lists(desc: &KindDescriptor, body: &mut Value) {
    if !desc.is_typed() {
        return;
    }
    if let Some(m) = meta_mut(body) {
        for list in ["finalizers", "ownerReferences"] {
            if m.get(list)
                .and_then(Value::as_array)
                .is_some_and(Vec::is_empty)
            {
                m.remove(list);
            }
        }
    }
}

/// The CustomResourceDefinition kind's group and resource.
const CRD_RESOURCE: &str = "customresourcedefinitions.apiextensions.k8s.io";

impl Cluster {
    pub(super) fn writer_time(&self) -> String {
        timestamp(self.now)
    }

    /// Checks a body's `apiVersion` and `kind` (filling them in when absent).
    fn check_type(&self, kind: KindId, body: &mut Value) -> Result<(), ApiStatus> {
        let desc = &self.col(kind).desc;
        let Some(obj) = body.as_object_mut() else {
            return Err(ApiStatus::bad_request(
                "the body of the request was in an unknown format - accepted media types include: application/json",
            ));
        };
        let want = desc.api_version();
        match obj.get("apiVersion").and_then(Value::as_str) {
            Some(got) if !got.is_empty() && got != want => {
                return Err(ApiStatus::bad_request(format!(
                    "the API version in the data ({got}) does not match the expected API version ({want})"
                )));
            }
            _ => {
                obj.insert("apiVersion".into(), want.into());
            }
        }
        match obj.get("kind").and_then(Value::as_str) {
            Some(got) if !got.is_empty() && got != desc.kind => {
                return Err(ApiStatus::bad_request(format!(
                    "the kind in the data ({got}) does not match the expected kind ({})",
                    desc.kind
                )));
            }
            _ => {
                obj.insert("kind".into(), desc.kind.clone().into());
            }
        }
        Ok(())
    }

    /// What the apiserver's decoder does to a body of this kind beyond its type: a Secret's
    /// `stringData` folded into `data` (see `secret`).
    fn decode_fields(&self, kind: KindId, body: &mut Value) -> Result<(), ApiStatus> {
        match secret::DataKind::of(&self.col(kind).desc) {
            Some(secret::DataKind::Secret) => secret::fold(body),
            _ => Ok(()),
        }
    }

    /// The namespace a write lands in: the URL's, checked against the body's.
    fn namespace_for(
        &self,
        kind: KindId,
        namespace: Option<&str>,
        body: &mut Value,
    ) -> Result<String, ApiStatus> {
        let desc = &self.col(kind).desc;
        let in_body = meta_str(body, "namespace").to_owned();
        let m =
            meta_mut(body).ok_or_else(|| ApiStatus::bad_request("object is not a JSON object"))?;
        if !desc.namespaced {
            m.remove("namespace");
            return Ok(String::new());
        }
        let ns = match namespace {
            Some(ns) if !in_body.is_empty() && in_body != ns => {
                return Err(ApiStatus::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            Some(ns) => ns.to_owned(),
            None if !in_body.is_empty() => in_body,
            None => {
                return Err(ApiStatus::invalid_object(
                    desc,
                    meta_str(body, "name"),
                    &[(
                        "metadata.namespace",
                        "FieldValueRequired",
                        "Required value".into(),
                    )],
                ));
            }
        };
        if let Some(m) = meta_mut(body) {
            m.insert("namespace".into(), ns.clone().into());
        }
        Ok(ns)
    }

    /// The NamespaceLifecycle admission, when namespaces are served: a namespaced object
    /// needs a namespace that exists and is not terminating.
    fn admit_namespace(&self, kind: KindId, ns: &str, name: &str) -> Result<(), ApiStatus> {
        let (Some(namespaces), true) = (self.kind("", "namespaces"), !ns.is_empty()) else {
            return Ok(());
        };
        let found = self
            .col(namespaces)
            .objects
            .get(&(String::new(), ns.to_owned()))
            .ok_or_else(|| ApiStatus::namespace_not_found(ns))?;
        if found.head.deleting {
            return Err(ApiStatus::forbidden(
                &self.col(kind).desc,
                name,
                &format!(
                    "unable to create new content in namespace {ns} because it is being terminated"
                ),
            ));
        }
        Ok(())
    }

    /// POST: creates `body` in `namespace`.
    ///
    /// # Errors
    /// 409 `AlreadyExists`, 422 for a missing or invalid name, 404 for a missing
    /// namespace, 400 for a mismatched type or namespace, 500 for a resourceVersion set.
    pub fn create(
        &mut self,
        now: Instant,
        kind: KindId,
        namespace: Option<&str>,
        body: Value,
        options: &WriteOptions,
    ) -> Result<Value, ApiStatus> {
        self.create_shared(now, kind, namespace, body, options)
            .map(Arc::unwrap_or_clone)
    }

    /// [`Cluster::create`], answered with the stored object itself (shared, not copied).
    pub(super) fn create_shared(
        &mut self,
        now: Instant,
        kind: KindId,
        namespace: Option<&str>,
        body: Value,
        options: &WriteOptions,
    ) -> Result<Arc<Value>, ApiStatus> {
        self.advance(now);
        let manager = options
            .field_manager
            .clone()
            .unwrap_or_else(|| "unknown".into());
        let created = self.create_as(kind, namespace, body, Some(&manager), options.dry_run)?;
        if self.col(kind).desc.group_resource() == CRD_RESOURCE && !options.dry_run {
            self.establish(kind, &created);
        }
        Ok(created)
    }

    /// A CustomResourceDefinition just created: its kind is served from now on, and its
    /// status says so (`NamesAccepted` and `Established`, as the apiserver's controllers
    /// write them a moment later), so a controller that installs its CRD and waits for it
    /// runs here unchanged. A CRD this cluster cannot serve is left not established, with
    /// why; one already served (registered by a test) is established as it is.
    fn establish(&mut self, kind: KindId, crd: &Value) {
        let (established, reason, message) = match self.register_crd(crd) {
            Ok(_) | Err(super::ClusterError::Duplicate(_)) => (
                "True",
                "InitialNamesAccepted",
                "the initial names have been accepted".to_owned(),
            ),
            Err(super::ClusterError::Crd(e)) => ("False", "Invalid", e.0),
        };
        let name = meta_str(crd, "name").to_owned();
        let Ok(mut object) = self.get(kind, None, &name) else {
            return;
        };
        let time = timestamp(self.now);
        let condition = |ty: &str, status: &str, reason: &str, message: &str| {
            serde_json::json!({
                "type": ty, "status": status, "reason": reason, "message": message,
                "lastTransitionTime": time,
            })
        };
        let storage = crd
            .pointer("/spec/versions")
            .and_then(Value::as_array)
            .and_then(|vs| vs.iter().find(|v| v["storage"] == true))
            .and_then(|v| v.get("name"))
            .cloned()
            .unwrap_or(Value::Null);
        object["status"] = serde_json::json!({
            "conditions": [
                condition("NamesAccepted", "True", "NoConflicts", "no conflicts found"),
                condition("Established", established, reason, &message),
            ],
            "acceptedNames": crd.pointer("/spec/names").cloned().unwrap_or(Value::Null),
            "storedVersions": [storage],
        });
        let options = WriteOptions {
            field_manager: Some("kube-apiserver".into()),
            dry_run: false,
        };
        // The object was created just now, and its status is this cluster's own to write.
        let _ = self.replace_status(self.now, kind, None, &name, object, &options);
    }

    /// Creates; `manager` records an `Update` entry, `None` keeps the body's entries (an
    /// apply computed them).
    fn create_as(
        &mut self,
        kind: KindId,
        namespace: Option<&str>,
        mut body: Value,
        manager: Option<&str>,
        dry_run: bool,
    ) -> Result<Arc<Value>, ApiStatus> {
        self.check_type(kind, &mut body)?;
        self.decode_fields(kind, &mut body)?;
        let ns = self.namespace_for(kind, namespace, &mut body)?;
        let desc = self.col(kind).desc.clone();
        if !meta_str(&body, "resourceVersion").is_empty() {
            return Err(ApiStatus::internal(
                "resourceVersion should not be set on objects to be created",
            ));
        }
        let given = meta_str(&body, "name").to_owned();
        let generate = meta_str(&body, "generateName").to_owned();
        if given.is_empty() && generate.is_empty() {
            return Err(ApiStatus::invalid_object(
                &desc,
                "",
                &[(
                    "metadata.name",
                    "FieldValueRequired",
                    "Required value: name or generateName is required".into(),
                )],
            ));
        }
        self.admit_namespace(kind, &ns, &given)?;
        let mut name = given.clone();
        // The apiserver retries a generated name that exists a few times before giving up.
        for attempt in 0..8 {
            if given.is_empty() {
                let base: String = generate.chars().take(58).collect();
                name = format!("{base}{}", self.name_suffix());
            }
            if !is_dns1123_subdomain(&name) {
                let detail = if name.len() > 253 {
                    "must be no more than 253 characters".to_owned()
                } else {
                    DNS1123_SUBDOMAIN.to_owned()
                };
                return Err(ApiStatus::invalid_object(
                    &desc,
                    &name,
                    &[(
                        "metadata.name",
                        "FieldValueInvalid",
                        format!("Invalid value: {name:?}: {detail}"),
                    )],
                ));
            }
            if !self
                .col(kind)
                .objects
                .contains_key(&(ns.clone(), name.clone()))
            {
                break;
            }
            if given.is_empty() && attempt < 7 {
                continue;
            }
            return Err(if given.is_empty() {
                ApiStatus::generate_name_conflict(&desc, &name)
            } else {
                ApiStatus::already_exists(&desc, &name)
            });
        }
        let uid = self.next_uid();
        let time = self.writer_time();
        let m = meta_mut(&mut body)
            .ok_or_else(|| ApiStatus::bad_request("object is not a JSON object"))?;
        m.insert("name".into(), name.clone().into());
        m.insert("uid".into(), uid.into());
        m.insert("creationTimestamp".into(), time.clone().into());
        if desc.tracks_generation() {
            m.insert("generation".into(), 1.into());
        }
        for system in [
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "resourceVersion",
            "selfLink",
        ] {
            m.remove(system);
        }
        if desc.has_status_subresource
            && let Some(obj) = body.as_object_mut()
        {
            obj.remove("status");
        }
        omit_empty_meta_lists(&desc, &mut body);
        if let Some(manager) = manager {
            if let Some(m) = meta_mut(&mut body) {
                m.remove("managedFields");
            }
            let writer = Writer {
                manager,
                api_version: &desc.api_version(),
                time: &time,
                scope: Scope::Main {
                    status_excluded: desc.has_status_subresource,
                },
            };
            apply::record_update(&Value::Null, &mut body, &writer);
        }
        if dry_run {
            return Ok(Arc::new(body));
        }
        self.commit(kind, &(ns, name), body, false)
    }

    /// PUT: replaces the object; its `metadata.resourceVersion`, when set, must be the
    /// current one (409 `Conflict` otherwise); unset, the write is unconditional.
    ///
    /// # Errors
    /// 404, 409, 400 for a mismatched name, namespace or type, 422 for new finalizers on
    /// an object being deleted.
    pub fn replace(
        &mut self,
        now: Instant,
        kind: KindId,
        namespace: Option<&str>,
        name: &str,
        body: Value,
        options: &WriteOptions,
    ) -> Result<Value, ApiStatus> {
        self.replace_at(now, kind, namespace, name, body, options, false)
            .map(Arc::unwrap_or_clone)
    }

    /// PUT on `/status`: only `.status` of the body is taken; generation stays.
    ///
    /// # Errors
    /// As [`Cluster::replace`]; 404 when the kind has no status subresource.
    pub fn replace_status(
        &mut self,
        now: Instant,
        kind: KindId,
        namespace: Option<&str>,
        name: &str,
        body: Value,
        options: &WriteOptions,
    ) -> Result<Value, ApiStatus> {
        self.replace_at(now, kind, namespace, name, body, options, true)
            .map(Arc::unwrap_or_clone)
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn replace_at(
        &mut self,
        now: Instant,
        kind: KindId,
        namespace: Option<&str>,
        name: &str,
        mut body: Value,
        options: &WriteOptions,
        status: bool,
    ) -> Result<Arc<Value>, ApiStatus> {
        self.advance(now);
        self.check_status_subresource(kind, status)?;
        self.check_type(kind, &mut body)?;
        self.decode_fields(kind, &mut body)?;
        let ns = self.namespace_for(kind, namespace, &mut body)?;
        let key = (ns, name.to_owned());
        self.check_name(&body, name)?;
        let old = self.current(kind, &key)?;
        self.check_preconditions(kind, &key, &old, &body)?;
        let manager = options
            .field_manager
            .clone()
            .unwrap_or_else(|| "unknown".into());
        self.write_existing(
            kind,
            &key,
            &old,
            body,
            status,
            Some(&manager),
            options.dry_run,
        )
    }

    fn check_status_subresource(&self, kind: KindId, status: bool) -> Result<(), ApiStatus> {
        if status && !self.col(kind).desc.has_status_subresource {
            return Err(ApiStatus::no_resource());
        }
        Ok(())
    }

    fn check_name(&self, body: &Value, name: &str) -> Result<(), ApiStatus> {
        let in_body = meta_str(body, "name");
        if in_body != name {
            return Err(ApiStatus::bad_request(format!(
                "the name of the object ({in_body}) does not match the name on the URL ({name})"
            )));
        }
        Ok(())
    }

    /// The object stored under `key`, parsed.
    pub(super) fn current(&self, kind: KindId, key: &Key) -> Result<Value, ApiStatus> {
        let col = self.col(kind);
        col.objects
            .get(key)
            .map(|s| s.object.value())
            .ok_or_else(|| ApiStatus::not_found(&col.desc, &key.1))
    }

    /// The optimistic lock of a body's resourceVersion and uid.
    fn check_preconditions(
        &self,
        kind: KindId,
        key: &Key,
        old: &Value,
        body: &Value,
    ) -> Result<(), ApiStatus> {
        let desc = &self.col(kind).desc;
        let rv = meta_str(body, "resourceVersion");
        if !rv.is_empty() && rv != meta_str(old, "resourceVersion") {
            return Err(ApiStatus::conflict(desc, &key.1, OPTIMISTIC_LOCK));
        }
        let uid = meta_str(body, "uid");
        if !uid.is_empty() && uid != meta_str(old, "uid") {
            return Err(ApiStatus::precondition(
                desc,
                &key.0,
                &key.1,
                "UID",
                uid,
                meta_str(old, "uid"),
            ));
        }
        Ok(())
    }

    /// PATCH by content type; an apply creates the object when absent.
    ///
    /// # Errors
    /// 404; 400 for a body that is not JSON; 422 for a JSON patch that fails (a failed
    /// `test` included, as the apiserver answers); 409 for an apply conflict or a stale
    /// resourceVersion in the patch; 415 for a strategic merge patch of a custom resource
    /// (and 500 for one that does not fit its object); 422 for an apply without
    /// `fieldManager`.
    pub fn patch(
        &mut self,
        now: Instant,
        kind: KindId,
        namespace: Option<&str>,
        name: &str,
        patch: &Patch,
        options: &PatchOptions,
    ) -> Result<Value, ApiStatus> {
        self.patch_at(now, kind, namespace, name, patch, options, false)
            .map(Arc::unwrap_or_clone)
    }

    /// PATCH on `/status`: the patch applies to the whole object, then only `.status` of
    /// the result is taken.
    ///
    /// # Errors
    /// As [`Cluster::patch`]; 404 when the kind has no status subresource.
    pub fn patch_status(
        &mut self,
        now: Instant,
        kind: KindId,
        namespace: Option<&str>,
        name: &str,
        patch: &Patch,
        options: &PatchOptions,
    ) -> Result<Value, ApiStatus> {
        self.patch_at(now, kind, namespace, name, patch, options, true)
            .map(Arc::unwrap_or_clone)
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn patch_at(
        &mut self,
        now: Instant,
        kind: KindId,
        namespace: Option<&str>,
        name: &str,
        patch: &Patch,
        options: &PatchOptions,
        status: bool,
    ) -> Result<Arc<Value>, ApiStatus> {
        self.advance(now);
        self.check_status_subresource(kind, status)?;
        let desc = self.col(kind).desc.clone();
        if let Patch::Strategic(_) = patch
            && !desc.is_typed()
        {
            return Err(ApiStatus::unsupported_media_type(&PATCH_TYPES));
        }
        if let Patch::Apply(body) = patch {
            return self.apply(kind, namespace, name, body.clone(), options, status);
        }
        let key = self.key(kind, namespace, name);
        let old = self.current(kind, &key)?;
        let mut candidate = old.clone();
        match patch {
            Patch::Merge(p) => merge_patch(&mut candidate, p),
            Patch::Json(p) => {
                let Some(ops) = p.as_array() else {
                    return Err(ApiStatus::bad_request(
                        "json: cannot unmarshal object into Go value of type jsonpatch.Patch",
                    ));
                };
                if ops.len() > MAX_JSON_PATCH_OPERATIONS {
                    return Err(ApiStatus::too_large(&format!(
                        "The allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPERATIONS}, got {}",
                        ops.len()
                    )));
                }
                json_patch(&mut candidate, ops).map_err(|_| ApiStatus::unprocessable())?;
            }
            Patch::Strategic(p) => {
                strategic_merge(&desc.kind, &mut candidate, p).map_err(|e| match e {
                    StrategicError::NotAnObject(json_type) => ApiStatus::bad_request(format!(
                        "json: cannot unmarshal {json_type} into Go value of type map[string]interface {{}}"
                    )),
                    StrategicError::Other(message) => ApiStatus::unknown(message),
                })?;
            }
            Patch::Apply(_) => unreachable!("handled above"),
        }
        if !candidate.is_object() {
            return Err(ApiStatus::bad_request(
                "the patched object is not a JSON object",
            ));
        }
        self.check_type(kind, &mut candidate)?;
        self.decode_fields(kind, &mut candidate)
            .map_err(|e| secret::patch_error(&candidate, e))?;
        if meta_str(&candidate, "namespace") != key.0 {
            return Err(ApiStatus::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        self.check_name(&candidate, name)?;
        self.check_preconditions(kind, &key, &old, &candidate)?;
        let manager = options
            .field_manager
            .clone()
            .unwrap_or_else(|| "unknown".into());
        self.write_existing(
            kind,
            &key,
            &old,
            candidate,
            status,
            Some(&manager),
            options.dry_run,
        )
    }

    fn apply(
        &mut self,
        kind: KindId,
        namespace: Option<&str>,
        name: &str,
        mut body: Value,
        options: &PatchOptions,
        status: bool,
    ) -> Result<Arc<Value>, ApiStatus> {
        let desc = self.col(kind).desc.clone();
        let Some(manager) = options.field_manager.clone().filter(|m| !m.is_empty()) else {
            return Err(ApiStatus::invalid(
                ("meta.k8s.io", "PatchOptions"),
                "",
                &[(
                    "fieldManager",
                    "FieldValueRequired",
                    "Required value: is required for apply patch".into(),
                )],
            ));
        };
        if !body.is_object() {
            return Err(ApiStatus::bad_request(
                "error decoding YAML: the applied configuration is not an object",
            ));
        }
        for field in ["apiVersion", "kind"] {
            if body
                .get(field)
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                let missing = if field == "kind" {
                    "Kind"
                } else {
                    "apiVersion"
                };
                return Err(ApiStatus::bad_request(format!(
                    "Object '{missing}' is missing in '{body}'"
                )));
            }
        }
        self.check_type(kind, &mut body)?;
        if meta_str(&body, "name").is_empty()
            && let Some(m) = meta_mut(&mut body)
        {
            m.insert("name".into(), name.into());
        }
        self.check_name(&body, name)?;
        let ns = self.namespace_for(kind, namespace, &mut body)?;
        let key = (ns.clone(), name.to_owned());
        let current = self.col(kind).objects.get(&key).map(|s| s.object.value());
        let time = self.writer_time();
        let writer = Writer {
            manager: &manager,
            api_version: &desc.api_version(),
            time: &time,
            scope: if status {
                Scope::Status
            } else {
                Scope::Main {
                    status_excluded: desc.has_status_subresource,
                }
            },
        };
        let Some(old) = current else {
            if status {
                return Err(ApiStatus::not_found(&desc, name));
            }
            let mut created = apply::apply(&Value::Null, &body, &writer, options.force)
                .map_err(|c| ApiStatus::apply_conflict(&c))?;
            for field in ["apiVersion", "kind"] {
                created[field] = body[field].clone();
            }
            if let Some(m) = meta_mut(&mut created) {
                m.insert("name".into(), name.into());
                if desc.namespaced {
                    m.insert("namespace".into(), ns.into());
                }
            }
            return self.create_as(kind, namespace, created, None, options.dry_run);
        };
        let rv = meta_str(&body, "resourceVersion");
        if !rv.is_empty() && rv != meta_str(&old, "resourceVersion") {
            return Err(ApiStatus::conflict(&desc, name, OPTIMISTIC_LOCK));
        }
        let mut candidate = apply::apply(&old, &body, &writer, options.force)
            .map_err(|c| ApiStatus::apply_conflict(&c))?;
        // Folded after the merge, so the manager owns the `stringData` it applied.
        self.decode_fields(kind, &mut candidate)?;
        self.write_existing(kind, &key, &old, candidate, status, None, options.dry_run)
    }

    /// The common end of every update: `/status` or main-resource semantics, system
    /// metadata kept, generation, ownership, no-op detection, deletion once the last
    /// finalizer is gone, commit.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn write_existing(
        &mut self,
        kind: KindId,
        key: &Key,
        old: &Value,
        candidate: Value,
        status: bool,
        manager: Option<&str>,
        dry_run: bool,
    ) -> Result<Arc<Value>, ApiStatus> {
        let desc = self.col(kind).desc.clone();
        // An apply computed the entries on the candidate; keep them past the restore below.
        let applied_entries = manager.is_none().then(|| {
            meta(&candidate)
                .and_then(|m| m.get("managedFields"))
                .cloned()
        });
        let mut new = if status {
            let mut n = old.clone();
            if let (Some(obj), Some(s)) = (n.as_object_mut(), candidate.get("status")) {
                obj.insert("status".into(), s.clone());
            }
            n
        } else {
            let mut n = candidate;
            if desc.has_status_subresource
                && let Some(obj) = n.as_object_mut()
            {
                match old.get("status") {
                    Some(s) => obj.insert("status".into(), s.clone()),
                    None => obj.remove("status"),
                };
            }
            n
        };
        let empty = Map::new();
        let kept = meta(old).unwrap_or(&empty);
        if let Some(m) = meta_mut(&mut new) {
            for system in [
                "name",
                "namespace",
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
                "resourceVersion",
                "managedFields",
            ] {
                match kept.get(system) {
                    Some(v) => m.insert(system.into(), v.clone()),
                    None => m.remove(system),
                };
            }
        }
        omit_empty_meta_lists(&desc, &mut new);
        if let Some(data_kind) = secret::DataKind::of(&desc) {
            let errs = secret::validate_update(data_kind, old, &new);
            if !errs.is_empty() {
                return Err(ApiStatus::invalid_object(&desc, &key.1, &errs));
            }
        }
        if !meta_str(old, "deletionTimestamp").is_empty() {
            let before = finalizers(old);
            let added: Vec<String> = finalizers(&new)
                .into_iter()
                .filter(|f| !before.contains(f))
                .collect();
            if !added.is_empty() {
                return Err(ApiStatus::invalid_object(
                    &desc,
                    &key.1,
                    &[(
                        "metadata.finalizers",
                        "FieldValueForbidden",
                        format!(
                            "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
                            added
                                .iter()
                                .map(|f| format!("{f:?}"))
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    )],
                ));
            }
        }
        if desc.tracks_generation()
            && spec_differs(&new, old, desc.has_status_subresource)
            && let Some(m) = meta_mut(&mut new)
        {
            let generation = kept.get("generation").and_then(Value::as_i64).unwrap_or(0);
            m.insert("generation".into(), (generation + 1).into());
        }
        if let Some(manager) = manager {
            let time = self.writer_time();
            let writer = Writer {
                manager,
                api_version: &desc.api_version(),
                time: &time,
                scope: if status {
                    Scope::Status
                } else {
                    Scope::Main {
                        status_excluded: desc.has_status_subresource,
                    }
                },
            };
            apply::record_update(old, &mut new, &writer);
        } else if let Some(m) = meta_mut(&mut new) {
            match applied_entries.flatten() {
                Some(entries) => m.insert("managedFields".into(), entries),
                None => m.remove("managedFields"),
            };
        }
        if new == *old {
            return Ok(Arc::new(new));
        }
        let gone = !meta_str(&new, "deletionTimestamp").is_empty() && finalizers(&new).is_empty();
        if dry_run {
            return Ok(Arc::new(new));
        }
        if gone {
            // The update that removes the last finalizer is not stored: the object is deleted
            // as it was stored (its DELETED event carries the old finalizers at a new
            // version), and the answer is the update's result at the last stored version, as
            // the registry's `deleteWithoutFinalizers` does.
            self.commit(kind, key, old.clone(), true)?;
            return Ok(Arc::new(new));
        }
        self.commit(kind, key, new, false)
    }
}
