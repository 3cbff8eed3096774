//! Errors as the apiserver sends them: a `metav1.Status` with the code, reason, message and
//! details of apimachinery's `errors.go` constructors (`NewNotFound`, `NewConflict`, …),
//! worded as they word them.

use serde_json::{Value, json};

use super::kinds::KindDescriptor;

/// `metav1.Status` with the `Failure` status: what a failed request gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiStatus {
    /// HTTP status code.
    pub code: u16,
    /// `reason` (`NotFound`, `Conflict`, …).
    pub reason: &'static str,
    /// `message`.
    pub message: String,
    /// `details`, when the constructor sets it (`None` leaves the field out).
    pub details: Option<Box<Details>>,
    /// `metadata.continue` (an expired continue token's fresh, inconsistent, token).
    pub continue_token: Option<String>,
}

/// `metav1.StatusDetails`; empty fields are left out, as Go's `omitempty` does.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Details {
    /// `name`.
    pub name: String,
    /// `group`.
    pub group: String,
    /// `kind`: the *resource* (`configmaps`) for most errors, the kind for `Invalid`.
    pub kind: String,
    /// `causes`: `(reason, message, field)`.
    pub causes: Vec<(String, String, String)>,
}

/// The optimistic-lock message of apimachinery's storage (`OptimisticLockErrorMsg`).
pub const OPTIMISTIC_LOCK: &str =
    "the object has been modified; please apply your changes to the latest version and try again";

/// The message of a 404 for a path that names nothing.
pub const NO_RESOURCE: &str = "the server could not find the requested resource";

impl ApiStatus {
    fn new(code: u16, reason: &'static str, message: String, details: Option<Details>) -> Self {
        ApiStatus {
            code,
            reason,
            message,
            details: details.map(Box::new),
            continue_token: None,
        }
    }

    fn on(kind: &KindDescriptor, name: &str) -> Details {
        Details {
            name: name.to_owned(),
            group: kind.group.clone(),
            kind: kind.plural.clone(),
            causes: Vec::new(),
        }
    }

    /// `NewNotFound`: `configmaps "x" not found`.
    #[must_use]
    pub fn not_found(kind: &KindDescriptor, name: &str) -> Self {
        let message = format!("{} {name:?} not found", kind.group_resource());
        Self::new(404, "NotFound", message, Some(Self::on(kind, name)))
    }

    /// A path naming no resource (go-restful's 404 through `NewGenericServerResponse`).
    #[must_use]
    pub fn no_resource() -> Self {
        Self::new(
            404,
            "NotFound",
            NO_RESOURCE.into(),
            Some(Details::default()),
        )
    }

    /// A namespace that does not exist (the NamespaceLifecycle admission's `NewNotFound`).
    #[must_use]
    pub fn namespace_not_found(namespace: &str) -> Self {
        let ns = KindDescriptor::new("", "v1", "Namespace", "namespaces", false, true);
        Self::not_found(&ns, namespace)
    }

    /// `NewAlreadyExists`.
    #[must_use]
    pub fn already_exists(kind: &KindDescriptor, name: &str) -> Self {
        let message = format!("{} {name:?} already exists", kind.group_resource());
        Self::new(409, "AlreadyExists", message, Some(Self::on(kind, name)))
    }

    /// `NewGenerateNameConflict`, after the apiserver's retries ran out.
    #[must_use]
    pub fn generate_name_conflict(kind: &KindDescriptor, name: &str) -> Self {
        let message = format!(
            "{} {name:?} already exists, the server was not able to generate a unique name for \
             the object",
            kind.group_resource()
        );
        Self::new(409, "AlreadyExists", message, Some(Self::on(kind, name)))
    }

    /// `NewConflict(resource, name, err)`.
    #[must_use]
    pub fn conflict(kind: &KindDescriptor, name: &str, err: &str) -> Self {
        let message = format!(
            "Operation cannot be fulfilled on {} {name:?}: {err}",
            kind.group_resource()
        );
        Self::new(409, "Conflict", message, Some(Self::on(kind, name)))
    }

    /// A failed delete or update precondition: the storage layer's `InvalidObj` error
    /// through `NewConflict`, as etcd3's store words it.
    #[must_use]
    pub fn precondition(
        kind: &KindDescriptor,
        namespace: &str,
        name: &str,
        what: &str,
        wanted: &str,
        actual: &str,
    ) -> Self {
        let prefix = if kind.group.is_empty() {
            String::new()
        } else {
            format!("{}/", kind.group)
        };
        let key = if namespace.is_empty() {
            format!("/registry/{prefix}{}/{name}", kind.plural)
        } else {
            format!("/registry/{prefix}{}/{namespace}/{name}", kind.plural)
        };
        let err = format!(
            "StorageError: invalid object, Code: 4, Key: {key}, ResourceVersion: 0, \
             AdditionalErrorMsg: Precondition failed: {what} in precondition: {wanted}, {what} \
             in object meta: {actual}"
        );
        Self::conflict(kind, name, &err)
    }

    /// `NewApplyConflict`: server-side apply found fields another manager owns.
    /// `conflicts` are `(manager as printed, field path)`.
    #[must_use]
    pub fn apply_conflict(conflicts: &[(String, String)]) -> Self {
        let message = if let [(manager, path)] = conflicts {
            format!("Apply failed with 1 conflict: conflict with {manager}: {path}")
        } else {
            // Grouped by manager in sorted order, as structured-merge-diff prints them.
            let mut by_manager: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
            for (m, p) in conflicts {
                by_manager.entry(m).or_default().push(p);
            }
            let mut lines = Vec::new();
            for (m, paths) in by_manager {
                lines.push(format!("conflicts with {m}:"));
                lines.extend(paths.iter().map(|p| format!("- {p}")));
            }
            format!(
                "Apply failed with {} conflicts: {}",
                conflicts.len(),
                lines.join("\n")
            )
        };
        let causes = conflicts
            .iter()
            .map(|(m, p)| {
                (
                    "FieldManagerConflict".to_owned(),
                    format!("conflict with {m}"),
                    p.clone(),
                )
            })
            .collect();
        Self::new(
            409,
            "Conflict",
            message,
            Some(Details {
                causes,
                ..Details::default()
            }),
        )
    }

    /// `NewInvalid(groupKind, name, errs)`; each error is `(field, type, detail)`, e.g.
    /// `("metadata.name", "FieldValueRequired", "Required value: name or generateName is
    /// required")`.
    #[must_use]
    pub fn invalid(group_kind: (&str, &str), name: &str, errs: &[(&str, &str, String)]) -> Self {
        let (group, kind) = group_kind;
        let qualified = qualified_kind(kind, group);
        let listed: Vec<String> = errs.iter().map(|(f, _, d)| format!("{f}: {d}")).collect();
        let message = match listed.as_slice() {
            [] => format!("{qualified} {name:?} is invalid"),
            [one] => format!("{qualified} {name:?} is invalid: {one}"),
            many => format!("{qualified} {name:?} is invalid: [{}]", many.join(", ")),
        };
        let causes = errs
            .iter()
            .map(|(f, t, d)| ((*t).to_owned(), d.clone(), (*f).to_owned()))
            .collect();
        let details = Details {
            name: name.to_owned(),
            group: group.to_owned(),
            kind: kind.to_owned(),
            causes,
        };
        Self::new(422, "Invalid", message, Some(details))
    }

    /// `NewInvalid` on one of the kind's own objects.
    #[must_use]
    pub fn invalid_object(
        kind: &KindDescriptor,
        name: &str,
        errs: &[(&str, &str, String)],
    ) -> Self {
        Self::invalid((&kind.group, &kind.kind), name, errs)
    }

    /// A 422 through `NewGenericServerResponse`, as a failed JSON patch gets it: the
    /// generic message, empty details, the patch library's own error dropped.
    #[must_use]
    pub fn unprocessable() -> Self {
        Self::new(
            422,
            "Invalid",
            "the server rejected our request due to an error in our request".into(),
            Some(Details::default()),
        )
    }

    /// `NewBadRequest`.
    #[must_use]
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message.into(), None)
    }

    /// A method the route does not take (go-restful's 405 through
    /// `NewGenericServerResponse`).
    #[must_use]
    pub fn method_not_allowed() -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource".into(),
            Some(Details::default()),
        )
    }

    /// `NotAcceptable` (406): `Accept` names nothing served (`negotiation.NewNotAcceptableError`),
    /// or a conversion of the wrong shape (`handlers.newNotAcceptableError`).
    #[must_use]
    pub fn not_acceptable(message: String) -> Self {
        Self::new(406, "NotAcceptable", message, None)
    }

    /// `NotAcceptable` (406) from go-restful's routing, as the apiserver's service error
    /// handler wraps it (empty `details`).
    #[must_use]
    pub fn not_acceptable_route(message: String) -> Self {
        Self::new(406, "NotAcceptable", message, Some(Details::default()))
    }

    /// A content type the route does not consume, for a built-in kind: go-restful's 415,
    /// before any handler runs.
    #[must_use]
    pub fn unsupported_media_type_route() -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            "415: Unsupported Media Type".into(),
            Some(Details::default()),
        )
    }

    /// An error that is no `APIStatus` (`ErrorToAPIStatus`'s default): a 500 with the
    /// error's text and no reason.
    #[must_use]
    pub fn unknown(message: String) -> Self {
        Self::new(500, "", message, None)
    }

    /// `negotiation.NewUnsupportedMediaTypeError(accepted)`.
    #[must_use]
    pub fn unsupported_media_type(accepted: &[&str]) -> Self {
        let message = format!(
            "the body of the request was in an unknown format - accepted media types include: {}",
            accepted.join(", ")
        );
        Self::new(415, "UnsupportedMediaType", message, None)
    }

    /// `NewResourceExpired`: 410 `Expired`.
    #[must_use]
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message.into(), None)
    }

    /// A resourceVersion the store has not reached (`NewTooLargeResourceVersionError`
    /// after the wait): 504 `Timeout`.
    #[must_use]
    pub fn too_large_resource_version(wanted: u64, current: u64) -> Self {
        let details = Details {
            causes: vec![(
                "ResourceVersionTooLarge".into(),
                "Too large resource version".into(),
                String::new(),
            )],
            ..Details::default()
        };
        let message = format!("Timeout: Too large resource version: {wanted}, current: {current}");
        Self::new(504, "Timeout", message, Some(details))
    }

    /// `NewRequestEntityTooLargeError`.
    #[must_use]
    pub fn too_large(message: &str) -> Self {
        Self::new(
            413,
            "RequestEntityTooLarge",
            format!("Request entity too large: {message}"),
            None,
        )
    }

    /// `NewInternalError`.
    #[must_use]
    pub fn internal(err: &str) -> Self {
        let details = Details {
            causes: vec![(String::new(), err.to_owned(), String::new())],
            ..Details::default()
        };
        Self::new(
            500,
            "InternalError",
            format!("Internal error occurred: {err}"),
            Some(details),
        )
    }

    /// `NewForbidden`.
    #[must_use]
    pub fn forbidden(kind: &KindDescriptor, name: &str, err: &str) -> Self {
        let message = if name.is_empty() {
            format!("{} is forbidden: {err}", kind.group_resource())
        } else {
            format!("{} {name:?} is forbidden: {err}", kind.group_resource())
        };
        Self::new(403, "Forbidden", message, Some(Self::on(kind, name)))
    }

    /// A bound of the simulated cluster was reached. The apiserver has no such error: this
    /// is the simulator telling the scenario, as a 507 (Insufficient Storage) with reason
    /// `InsufficientStorage`, never a silent drop.
    #[must_use]
    pub fn bound_exceeded(what: &str) -> Self {
        Self::new(
            507,
            "InsufficientStorage",
            format!("simulated cluster bound exceeded: {what}"),
            None,
        )
    }

    /// Whether this is [`ApiStatus::bound_exceeded`].
    #[must_use]
    pub fn is_bound_exceeded(&self) -> bool {
        self.code == 507
    }

    /// The `Status` object (keys in serde_json's sorted order, not Go's field order).
    #[must_use]
    pub fn to_value(&self) -> Value {
        let mut metadata = serde_json::Map::new();
        if let Some(token) = &self.continue_token {
            metadata.insert("continue".into(), token.clone().into());
        }
        let mut v = json!({
            "kind": "Status", "apiVersion": "v1", "metadata": metadata,
            "status": "Failure", "message": self.message, "reason": self.reason,
        });
        if self.reason.is_empty() {
            // `StatusReasonUnknown` is the empty string, left out by `omitempty`.
            if let Some(m) = v.as_object_mut() {
                m.remove("reason");
            }
        }
        if let Some(d) = &self.details {
            let mut details = serde_json::Map::new();
            for (key, value) in [("name", &d.name), ("group", &d.group), ("kind", &d.kind)] {
                if !value.is_empty() {
                    details.insert(key.into(), value.clone().into());
                }
            }
            if !d.causes.is_empty() {
                let causes = d.causes.iter().map(|(reason, message, field)| {
                    let mut c = serde_json::Map::new();
                    for (key, value) in [("reason", reason), ("message", message), ("field", field)]
                    {
                        if !value.is_empty() {
                            c.insert(key.into(), value.clone().into());
                        }
                    }
                    Value::Object(c)
                });
                details.insert("causes".into(), causes.collect());
            }
            v["details"] = Value::Object(details);
        }
        v["code"] = self.code.into();
        v
    }

    /// The `Status` body as bytes.
    #[must_use]
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(&self.to_value()).unwrap_or_default()
    }
}

impl std::fmt::Display for ApiStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.code, self.reason, self.message)
    }
}

impl std::error::Error for ApiStatus {}

fn qualified_kind(kind: &str, group: &str) -> String {
    if group.is_empty() {
        kind.to_owned()
    } else {
        format!("{kind}.{group}")
    }
}

/// A JSON value's type as Go's `encoding/json` names it in an unmarshal error (`json: cannot
/// unmarshal number into …`).
pub(super) fn go_json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}
