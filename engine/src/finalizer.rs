//! kube-runtime's finalizer helper over [`ApiClient`]: cleanup that must finish before an
//! object may go, on any runtime and transport (tokio, smol, the simulator).
//!
//! [`finalizer`] keeps one entry of the object's `metadata.finalizers`, which holds the
//! apiserver's delete until the entry is removed, and tells the reconcile what to do with an
//! [`Event`]: [`Event::Apply`] while the object lives (once the entry is there),
//! [`Event::Cleanup`] once its `deletionTimestamp` is set. The entry is removed only after a
//! successful cleanup.
//!
//! Both writes are JSON patches that start with a `test` of what the object was read with,
//! as kube-runtime sends them: adding tests the whole finalizers list, removing tests the
//! entry at its index. A list changed in the meantime (another controller's finalizer, a
//! cleanup that already ran) fails the patch instead of losing an entry or removing someone
//! else's; the apiserver answers a failed `test` with 422. [`Error::is_conflict`] tells such a
//! lost race from other failures, so an error policy can read again at once.
//!
//! Differences from kube-runtime are listed in `docs/alignment.md` (Finalizers and events).

use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, PatchOperation, RemoveOperation, TestOperation};
use kube_core::Resource;
use kube_core::params::{Patch, PatchParams};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::api::{ApiClient, ApiError};
use super::reconcile::Action;
use super::transport::Transport;

/// The longest finalizer name the apiserver takes: a qualified name, a DNS subdomain prefix
/// (253) plus `/` plus a name (63).
pub const MAX_FINALIZER_NAME: usize = 253 + 1 + 63;

/// Why [`finalizer`] failed (kube-runtime's `finalizer::Error`).
///
/// It takes the reconcile's own error type as a parameter: use an error enum (thiserror),
/// as kube-runtime advises.
#[derive(Debug, thiserror::Error)]
pub enum Error<ReconcileErr>
where
    ReconcileErr: std::error::Error + 'static,
{
    /// The reconcile's [`Event::Apply`] branch failed.
    #[error("failed to apply object: {0}")]
    ApplyFailed(#[source] ReconcileErr),
    /// The reconcile's [`Event::Cleanup`] branch failed; the finalizer stays, so the object
    /// is not deleted.
    #[error("failed to clean up object: {0}")]
    CleanupFailed(#[source] ReconcileErr),
    /// The patch adding the finalizer failed (its error names the method and the object's
    /// path).
    #[error("failed to add finalizer: {0}")]
    AddFinalizer(#[source] ApiError),
    /// The patch removing the finalizer failed (its error names the method and the object's
    /// path).
    #[error("failed to remove finalizer: {0}")]
    RemoveFinalizer(#[source] ApiError),
    /// The object has no `metadata.name`, so there is nothing to patch (a hand-made object).
    #[error("object has no name")]
    UnnamedObject,
    /// The finalizer name is not one the apiserver takes (a qualified name such as
    /// `example.com/cleanup`); checked before any request.
    #[error("invalid finalizer name {name:?}: {reason}")]
    InvalidFinalizer {
        /// The name given.
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },
}

impl<E: std::error::Error + 'static> Error<E> {
    /// The finalizer write lost a race: the object changed after it was read (a failed
    /// `test`, which the apiserver answers with 422, or a 409 conflict). Reading it again and
    /// running [`finalizer`] once more is the fix; the watch event of the change usually
    /// does that by itself.
    #[must_use]
    pub fn is_conflict(&self) -> bool {
        match self {
            Error::AddFinalizer(e) | Error::RemoveFinalizer(e) => e.is_conflict() || e.is_invalid(),
            _ => false,
        }
    }
}

/// What the reconcile is asked to do with the object (kube-runtime's `finalizer::Event`).
#[derive(Debug)]
pub enum Event<K> {
    /// Make the world match the object. Must be idempotent: it runs again after a restart,
    /// on every change, after a failure.
    Apply(Arc<K>),
    /// The object is being deleted: remove what it owns outside Kubernetes. Must be
    /// idempotent, and must tolerate [`Event::Apply`] never having run or never having
    /// succeeded.
    Cleanup(Arc<K>),
}

/// Reconciles `obj` through a finalizer named `finalizer_name` (kube-runtime's
/// `finalizer`): the object cannot be deleted before `reconcile` has cleaned up after it.
///
/// Use it as the whole body of a reconcile, and let `reconcile` work on the object its
/// [`Event`] carries.
///
/// # The flow
///
/// | object | does | returns |
/// |---|---|---|
/// | live, without the finalizer | adds it (JSON patch: `test` the list as read, then `add`) | [`Action::await_change`]: the patch's own watch event runs the reconcile again |
/// | live, with it | [`Event::Apply`] | what `reconcile` returns |
/// | deleting, with it | [`Event::Cleanup`]; on success removes it (`test` the entry at its index, then `remove`) | what `reconcile` returns |
/// | deleting, without it | nothing | [`Action::await_change`] |
///
/// Once [`Event::Apply`] has started, [`Event::Cleanup`] succeeds before the object goes.
/// Every step starts from what the object says, so a restart anywhere in between resumes
/// where it stood. While the controller is not running, or cleanup keeps failing, the
/// object's deletion waits.
///
/// `finalizer_name` must be unique among the controllers that touch the object.
///
/// # Errors
///
/// [`Error::ApplyFailed`] / [`Error::CleanupFailed`] carry `reconcile`'s error;
/// [`Error::AddFinalizer`] / [`Error::RemoveFinalizer`] the patch's (see
/// [`Error::is_conflict`] for a lost race); [`Error::InvalidFinalizer`] for a name the
/// apiserver would refuse, before anything is sent; [`Error::UnnamedObject`].
pub async fn finalizer<K, T, F, Fut, E>(
    api: &ApiClient<K, T>,
    finalizer_name: &str,
    obj: Arc<K>,
    reconcile: F,
) -> Result<Action, Error<E>>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug,
    T: Transport,
    F: FnOnce(Event<K>) -> Fut,
    Fut: Future<Output = Result<Action, E>>,
    E: std::error::Error + 'static,
{
    validate_finalizer_name(finalizer_name).map_err(|reason| Error::InvalidFinalizer {
        name: finalizer_name.to_owned(),
        reason,
    })?;
    let meta = obj.meta();
    let finalizers = meta.finalizers.as_deref().unwrap_or_default();
    let index = finalizers.iter().position(|f| f == finalizer_name);
    let deleting = meta.deletion_timestamp.is_some();
    match (index, deleting) {
        (Some(_), false) => reconcile(Event::Apply(obj))
            .await
            .map_err(Error::ApplyFailed),
        (Some(index), true) => {
            let name = meta.name.clone().ok_or(Error::UnnamedObject)?;
            // Cleanup must succeed before the finalizer may go: a failure keeps it.
            let action = reconcile(Event::Cleanup(obj))
                .await
                .map_err(Error::CleanupFailed)?;
            let patch = remove_patch(finalizer_name, index);
            api.patch(&name, &PatchParams::default(), &Patch::<()>::Json(patch))
                .await
                .map_err(Error::RemoveFinalizer)?;
            Ok(action)
        }
        (None, false) => {
            let name = meta.name.as_deref().ok_or(Error::UnnamedObject)?;
            let patch = add_patch(finalizer_name, finalizers);
            api.patch(name, &PatchParams::default(), &Patch::<()>::Json(patch))
                .await
                .map_err(Error::AddFinalizer)?;
            // No apply now: the patch's watch event runs the reconcile again, with the
            // finalizer in place.
            Ok(Action::await_change())
        }
        // Being deleted and not ours (any more): nothing to do.
        (None, true) => Ok(Action::await_change()),
    }
}

/// A JSON pointer from a path this module builds (`/metadata/finalizers...`), which always
/// parses.
fn pointer(path: &str) -> PointerBuf {
    PointerBuf::parse(path).unwrap_or_else(|_| PointerBuf::new())
}

/// The patch adding `name` to an object whose finalizers were `current` when read: the
/// `test` makes it fail if the list changed since (the apiserver does not deduplicate
/// finalizers, kube-rs issue 964). An empty list is tested as absent (`null`), which is how
/// the apiserver stores it.
fn add_patch(name: &str, current: &[String]) -> json_patch::Patch {
    let ops = if current.is_empty() {
        vec![
            PatchOperation::Test(TestOperation {
                path: pointer("/metadata/finalizers"),
                value: serde_json::Value::Null,
            }),
            PatchOperation::Add(AddOperation {
                path: pointer("/metadata/finalizers"),
                value: serde_json::json!([name]),
            }),
        ]
    } else {
        vec![
            PatchOperation::Test(TestOperation {
                path: pointer("/metadata/finalizers"),
                value: serde_json::json!(current),
            }),
            PatchOperation::Add(AddOperation {
                path: pointer("/metadata/finalizers/-"),
                value: serde_json::json!(name),
            }),
        ]
    };
    json_patch::Patch(ops)
}

/// The patch removing `name` at `index`: the `test` makes it fail instead of removing
/// another controller's entry when the list moved.
fn remove_patch(name: &str, index: usize) -> json_patch::Patch {
    let path = format!("/metadata/finalizers/{index}");
    json_patch::Patch(vec![
        PatchOperation::Test(TestOperation {
            path: pointer(&path),
            value: serde_json::json!(name),
        }),
        PatchOperation::Remove(RemoveOperation {
            path: pointer(&path),
        }),
    ])
}

/// The apiserver's check of a finalizer name (apimachinery's `IsQualifiedName`): an
/// optional DNS subdomain prefix and `/`, then 1 to 63 characters of `[A-Za-z0-9_.-]`,
/// starting and ending alphanumeric.
fn validate_finalizer_name(name: &str) -> Result<(), &'static str> {
    if name.len() > MAX_FINALIZER_NAME {
        return Err("longer than a qualified name can be");
    }
    let (prefix, local) = match name.split_once('/') {
        Some((prefix, local)) => (Some(prefix), local),
        None => (None, name),
    };
    if let Some(prefix) = prefix {
        if prefix.is_empty() {
            return Err("the prefix before '/' is empty");
        }
        if prefix.len() > 253 {
            return Err("the prefix is longer than 253 characters");
        }
        let label_ok = |l: &str| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        };
        if !prefix.split('.').all(label_ok) {
            return Err("the prefix is not a lowercase DNS subdomain");
        }
    }
    if local.is_empty() {
        return Err("the name is empty");
    }
    if local.len() > 63 {
        return Err("the name after the prefix is longer than 63 characters");
    }
    let bytes = local.as_bytes();
    let alnum = |b: u8| b.is_ascii_alphanumeric();
    if !alnum(bytes[0]) || !alnum(bytes[bytes.len() - 1]) {
        return Err("the name must start and end with a letter or digit");
    }
    if !bytes
        .iter()
        .all(|&b| alnum(b) || matches!(b, b'-' | b'_' | b'.'))
    {
        return Err("the name may hold only letters, digits, '-', '_' and '.'");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adding_to_an_empty_list_tests_it_absent() {
        let patch = serde_json::to_value(add_patch("example.com/cleanup", &[])).unwrap();
        assert_eq!(
            patch,
            serde_json::json!([
                {"op": "test", "path": "/metadata/finalizers", "value": null},
                {"op": "add", "path": "/metadata/finalizers", "value": ["example.com/cleanup"]},
            ])
        );
    }

    #[test]
    fn adding_to_a_list_tests_the_whole_list_then_appends() {
        let current = vec!["other.io/x".to_owned()];
        let patch = serde_json::to_value(add_patch("example.com/cleanup", &current)).unwrap();
        assert_eq!(
            patch,
            serde_json::json!([
                {"op": "test", "path": "/metadata/finalizers", "value": ["other.io/x"]},
                {"op": "add", "path": "/metadata/finalizers/-", "value": "example.com/cleanup"},
            ])
        );
    }

    #[test]
    fn removing_tests_the_entry_at_its_index() {
        let patch = serde_json::to_value(remove_patch("example.com/cleanup", 2)).unwrap();
        assert_eq!(
            patch,
            serde_json::json!([
                {"op": "test", "path": "/metadata/finalizers/2", "value": "example.com/cleanup"},
                {"op": "remove", "path": "/metadata/finalizers/2"},
            ])
        );
    }

    #[test]
    fn names_the_apiserver_takes_pass() {
        for name in [
            "example.com/cleanup",
            "cleanup",
            "a",
            "x.y-z/A_b.c-9",
            "kubernetes.io/pv-protection",
        ] {
            assert_eq!(validate_finalizer_name(name), Ok(()), "{name}");
        }
    }

    #[test]
    fn names_the_apiserver_refuses_fail_with_a_reason() {
        let long_local = format!("example.com/{}", "a".repeat(64));
        let long_prefix = format!("{}.com/x", "a".repeat(250));
        for (name, reason) in [
            ("", "the name is empty"),
            ("example.com/", "the name is empty"),
            ("/cleanup", "the prefix before '/' is empty"),
            (
                "Example.com/cleanup",
                "the prefix is not a lowercase DNS subdomain",
            ),
            (
                "a..b/cleanup",
                "the prefix is not a lowercase DNS subdomain",
            ),
            (
                "a/b/c",
                "the name may hold only letters, digits, '-', '_' and '.'",
            ),
            (
                "example.com/-x",
                "the name must start and end with a letter or digit",
            ),
            (
                "example.com/x y",
                "the name may hold only letters, digits, '-', '_' and '.'",
            ),
            (
                &long_local,
                "the name after the prefix is longer than 63 characters",
            ),
            (&long_prefix, "the prefix is longer than 253 characters"),
        ] {
            assert_eq!(validate_finalizer_name(name), Err(reason), "{name:?}");
        }
    }
}
