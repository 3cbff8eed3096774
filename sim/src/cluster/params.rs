//! The options of each request, as the query string (and a DELETE's body) carries them;
//! the typed API takes the same structs the HTTP entry point parses.

use std::time::Duration;

use serde_json::Value;

/// LIST options.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListOptions {
    /// `labelSelector`.
    pub label_selector: String,
    /// `fieldSelector`.
    pub field_selector: String,
    /// `limit` (0 or absent: all).
    pub limit: Option<u64>,
    /// `continue`.
    pub continue_token: Option<String>,
    /// `resourceVersion`: absent or `""` most recent, `"0"` any, else a version.
    pub resource_version: Option<String>,
    /// `resourceVersionMatch`: `NotOlderThan` or `Exact`.
    pub resource_version_match: Option<String>,
}

/// WATCH options.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WatchOptions {
    /// `labelSelector`.
    pub label_selector: String,
    /// `fieldSelector`.
    pub field_selector: String,
    /// `resourceVersion`: absent, `""` or `"0"` start with the current objects as `ADDED`;
    /// a version: the changes after it.
    pub resource_version: Option<String>,
    /// `resourceVersionMatch` (only `NotOlderThan`, with `sendInitialEvents`).
    pub resource_version_match: Option<String>,
    /// `allowWatchBookmarks`.
    pub allow_bookmarks: bool,
    /// `timeoutSeconds`; absent: [`super::ClusterConfig::default_watch_timeout`].
    pub timeout: Option<Duration>,
    /// `sendInitialEvents` (a streaming list).
    pub send_initial_events: Option<bool>,
    /// What each event's object is turned into (`Accept`'s `as=PartialObjectMetadata`; a
    /// list conversion ends the watch at its first event, as the apiserver's encoder does).
    pub conversion: super::Conversion,
}

/// Options of a create or replace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteOptions {
    /// `fieldManager`; without it the manager is the `User-Agent`'s product, else
    /// `unknown`.
    pub field_manager: Option<String>,
    /// `dryRun=All`: answer as if written, write nothing.
    pub dry_run: bool,
}

/// Options of a PATCH.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PatchOptions {
    /// `fieldManager` (required for apply).
    pub field_manager: Option<String>,
    /// `force` (apply only): take the conflicting fields.
    pub force: bool,
    /// `dryRun=All`.
    pub dry_run: bool,
}

/// A PATCH body by its content type.
#[derive(Debug, Clone, PartialEq)]
pub enum Patch {
    /// `application/merge-patch+json` (RFC 7386).
    Merge(Value),
    /// `application/json-patch+json` (RFC 6902).
    Json(Value),
    /// `application/apply-patch+yaml` with a JSON body: server-side apply.
    Apply(Value),
    /// `application/strategic-merge-patch+json`: by each list field's patch strategy for a
    /// built-in kind; 415 for a custom resource, as the apiserver answers.
    Strategic(Value),
}

/// The content types a PATCH may carry, as the apiserver lists them for a custom resource
/// (strategic merge is not modelled for any kind).
pub const PATCH_TYPES: [&str; 3] = [
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/apply-patch+yaml",
];

/// `propagationPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Propagation {
    /// Delete the object now; the garbage collector deletes dependents afterwards.
    Background,
    /// `foregroundDeletion` finalizer: the owner waits for its blocking dependents.
    Foreground,
    /// `orphan` finalizer: dependents lose their ownerReferences to the owner.
    Orphan,
}

impl Propagation {
    /// Parses `Background`, `Foreground`, `Orphan`.
    #[must_use]
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "Background" => Some(Propagation::Background),
            "Foreground" => Some(Propagation::Foreground),
            "Orphan" => Some(Propagation::Orphan),
            _ => None,
        }
    }

    /// The wire spelling.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Propagation::Background => "Background",
            Propagation::Foreground => "Foreground",
            Propagation::Orphan => "Orphan",
        }
    }
}

/// DELETE options (a `DeleteOptions` body and the query merged).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeleteOptions {
    /// `propagationPolicy` (default `Background`).
    pub propagation: Option<Propagation>,
    /// `preconditions.uid`.
    pub precondition_uid: Option<String>,
    /// `preconditions.resourceVersion`.
    pub precondition_resource_version: Option<String>,
    /// `dryRun=All`.
    pub dry_run: bool,
}

impl DeleteOptions {
    /// Reads a `DeleteOptions` JSON body (empty: defaults).
    ///
    /// # Errors
    /// The reason, for a 400.
    pub fn from_body(body: &[u8]) -> Result<Self, String> {
        if body.iter().all(u8::is_ascii_whitespace) {
            return Ok(DeleteOptions::default());
        }
        let v: Value = serde_json::from_slice(body).map_err(|e| e.to_string())?;
        let obj = v.as_object().ok_or("DeleteOptions is not an object")?;
        let mut options = DeleteOptions::default();
        if let Some(p) = obj.get("propagationPolicy").and_then(Value::as_str) {
            options.propagation = Some(
                Propagation::parse(p)
                    .ok_or_else(|| format!("unsupported propagationPolicy {p:?}"))?,
            );
        } else if let Some(orphan) = obj.get("orphanDependents").and_then(Value::as_bool) {
            // The deprecated spelling, still honoured by the apiserver.
            options.propagation = Some(if orphan {
                Propagation::Orphan
            } else {
                Propagation::Background
            });
        }
        if let Some(pre) = obj.get("preconditions") {
            let text = |k| pre.get(k).and_then(Value::as_str).map(str::to_owned);
            options.precondition_uid = text("uid");
            options.precondition_resource_version = text("resourceVersion");
        }
        if let Some(d) = obj.get("dryRun").and_then(Value::as_array) {
            options.dry_run = dry_run_all(d.iter().filter_map(Value::as_str))?;
        }
        Ok(options)
    }
}

/// `dryRun` values: `All` is a dry run, nothing is a write, anything else is refused.
///
/// # Errors
/// The unsupported value, worded for a 400.
pub fn dry_run_all<'a>(values: impl IntoIterator<Item = &'a str>) -> Result<bool, String> {
    let mut dry = false;
    for v in values {
        match v {
            "All" => dry = true,
            "" => {}
            other => {
                return Err(format!(
                    "dryRun: Unsupported value: {other:?}: supported values: \"All\""
                ));
            }
        }
    }
    Ok(dry)
}
