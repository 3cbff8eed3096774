//! DELETE: preconditions, the propagation finalizers, `deletionTimestamp` while
//! finalizers hold the object, and its removal once they are gone.

use std::sync::Arc;

use reconcile_core::Instant;
use serde_json::Value;

use super::params::{DeleteOptions, Propagation};
use super::status::ApiStatus;
use super::store::{Key, finalizers, meta_mut, meta_str};
use super::{Cluster, KindId};

/// What a DELETE did.
#[derive(Debug, Clone, PartialEq)]
pub enum Deleted {
    /// The object is gone; its last state.
    Gone(Value),
    /// Finalizers hold it: `deletionTimestamp` is set and it stays until they are removed.
    Pending(Value),
}

/// The finalizer the garbage collector honours for `propagationPolicy: Orphan`.
pub const ORPHAN: &str = "orphan";
/// The finalizer for `propagationPolicy: Foreground`.
pub const FOREGROUND: &str = "foregroundDeletion";

impl Cluster {
    /// DELETE: preconditions, propagation finalizers, then either gone now or pending.
    ///
    /// # Errors
    /// 404; 409 for a failed precondition.
    pub fn delete(
        &mut self,
        now: Instant,
        kind: KindId,
        namespace: Option<&str>,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<Deleted, ApiStatus> {
        self.advance(now);
        let key = self.key(kind, namespace, name);
        self.delete_key(kind, &key, options)
    }

    pub(super) fn delete_key(
        &mut self,
        kind: KindId,
        key: &Key,
        options: &DeleteOptions,
    ) -> Result<Deleted, ApiStatus> {
        let desc = self.col(kind).desc.clone();
        let old = self.current(kind, key)?;
        if let Some(uid) = &options.precondition_uid
            && uid != meta_str(&old, "uid")
        {
            return Err(ApiStatus::precondition(
                &desc,
                &key.0,
                &key.1,
                "UID",
                uid,
                meta_str(&old, "uid"),
            ));
        }
        if let Some(rv) = &options.precondition_resource_version
            && rv != meta_str(&old, "resourceVersion")
        {
            return Err(ApiStatus::precondition(
                &desc,
                &key.0,
                &key.1,
                "ResourceVersion",
                rv,
                meta_str(&old, "resourceVersion"),
            ));
        }
        let mut list = finalizers(&old);
        match options.propagation {
            Some(Propagation::Orphan) => {
                list.retain(|f| f != FOREGROUND);
                if !list.iter().any(|f| f == ORPHAN) {
                    list.push(ORPHAN.into());
                }
            }
            Some(Propagation::Foreground) => {
                list.retain(|f| f != ORPHAN);
                if !list.iter().any(|f| f == FOREGROUND) {
                    list.push(FOREGROUND.into());
                }
            }
            Some(Propagation::Background) => list.retain(|f| f != ORPHAN && f != FOREGROUND),
            None => {}
        }
        if list.is_empty() {
            if options.dry_run {
                return Ok(Deleted::Gone(old));
            }
            let last = self.commit(kind, key, old, true)?;
            return Ok(Deleted::Gone(Arc::unwrap_or_clone(last)));
        }
        let mut new = old.clone();
        let time = self.writer_time();
        if let Some(m) = meta_mut(&mut new) {
            m.insert(
                "finalizers".into(),
                list.into_iter().map(Value::from).collect(),
            );
            if !m.contains_key("deletionTimestamp") {
                m.insert("deletionTimestamp".into(), time.into());
                m.insert("deletionGracePeriodSeconds".into(), 0.into());
                // rest.BeforeDelete bumps the generation of an object that has one, so a
                // controller sees the deletion as a change of intent.
                if let Some(g) = m
                    .get("generation")
                    .and_then(Value::as_i64)
                    .filter(|g| *g > 0)
                {
                    m.insert("generation".into(), (g + 1).into());
                }
            }
        }
        if new == old || options.dry_run {
            return Ok(Deleted::Pending(new));
        }
        let stored = self.commit(kind, key, new, false)?;
        Ok(Deleted::Pending(Arc::unwrap_or_clone(stored)))
    }
}
