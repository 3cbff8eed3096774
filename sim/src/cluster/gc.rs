//! The garbage collector of kube-controller-manager, as explicit steps: each
//! [`Cluster::collect_garbage`] looks at the cluster once, does what the collector would,
//! and says what it did, so a scheduler interleaves it with everything else.
//!
//! Modelled, after `garbagecollector.attemptToDeleteItem` and `orphanDependents`: an
//! object whose owners (by uid) are all gone is deleted, with the propagation its own
//! finalizers ask for; a dependent with some owners still there loses only its references
//! to the gone ones; an owner with the `orphan` finalizer has its dependents' references
//! to it removed, then the finalizer; an owner with `foregroundDeletion` has its dependents
//! deleted (foreground when they have dependents of their own), and loses the finalizer
//! once no dependent with `blockOwnerDeletion: true` is left. Not modelled: the owner's
//! kind and apiVersion (owners are matched by uid alone), cluster-scoped dependents of
//! namespaced owners being refused, and the collector's retries and delays.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use reconcile_core::Instant;
use serde_json::Value;

use super::delete::{Deleted, FOREGROUND, ORPHAN};
use super::params::{DeleteOptions, Propagation};
use super::status::ApiStatus;
use super::store::{Head, Key};
use super::{Cluster, KindId};

/// The manager the collector's writes are recorded under.
const GC_MANAGER: &str = "generic-garbage-collector";

/// One thing the collector did; `resource` is `configmaps`, `deployments.apps`, ….
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GcAction {
    /// Deleted an object whose owners are gone, or a dependent of a foreground deletion.
    Delete {
        /// The group-qualified resource.
        resource: String,
        /// `namespace/name` or `name`.
        object: String,
        /// The propagation it was deleted with.
        propagation: Propagation,
        /// Whether finalizers hold it (`deletionTimestamp` set, not gone yet).
        pending: bool,
    },
    /// Removed the dependent's ownerReference to an owner (orphaned, or a dangling one).
    RemoveOwnerReference {
        /// The dependent's resource.
        resource: String,
        /// The dependent.
        object: String,
        /// The owner's uid.
        owner_uid: String,
    },
    /// Removed `orphan` or `foregroundDeletion` from an owner.
    RemoveFinalizer {
        /// The owner's resource.
        resource: String,
        /// The owner.
        object: String,
        /// The finalizer.
        finalizer: String,
        /// Whether that was its last finalizer, so it is gone.
        gone: bool,
    },
    /// A write the collector wanted was refused (a bound): nothing is dropped silently.
    Refused {
        /// The object.
        object: String,
        /// Why.
        status: ApiStatus,
    },
}

impl fmt::Display for GcAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GcAction::Delete {
                resource,
                object,
                propagation,
                pending,
            } => write!(
                f,
                "gc: delete {resource} {object} ({}){}",
                propagation.as_str(),
                if *pending { ", pending finalizers" } else { "" }
            ),
            GcAction::RemoveOwnerReference {
                resource,
                object,
                owner_uid,
            } => {
                write!(
                    f,
                    "gc: {resource} {object} drops ownerReference {owner_uid}"
                )
            }
            GcAction::RemoveFinalizer {
                resource,
                object,
                finalizer,
                gone,
            } => write!(
                f,
                "gc: {resource} {object} drops finalizer {finalizer}{}",
                if *gone { ", gone" } else { "" }
            ),
            GcAction::Refused { object, status } => write!(f, "gc: {object} refused: {status}"),
        }
    }
}

fn printed(key: &Key) -> String {
    if key.0.is_empty() {
        key.1.clone()
    } else {
        format!("{}/{}", key.0, key.1)
    }
}

type ObjRef = (KindId, Key);

/// What the next pass must look at, kept by every commit, so that a pass after a change
/// that gives the collector nothing to do costs that change rather than the whole cluster
/// (a pass runs after every change: scanning everything made a run quadratic in its
/// objects). The live objects' uids; the objects changed since the last pass; and whether
/// everything must be looked at (after a removal, whose dependents may now be left without
/// owners, or after a pass that acted, which may have been refused).
#[derive(Debug, Default)]
pub(super) struct Tracker {
    uids: BTreeMap<String, u32>,
    changed: BTreeSet<ObjRef>,
    rescan: bool,
}

impl Tracker {
    /// Records one commit of the object at `at`, by its uid before (`None`: it was created)
    /// and after (`None`: it was deleted); `""` is an object without one.
    pub(super) fn note(&mut self, at: ObjRef, before: Option<&str>, after: Option<&str>) {
        if before != after {
            if let Some(uid) = before {
                self.forget(uid);
            }
            if let Some(uid) = after {
                *self.uids.entry(uid.to_owned()).or_default() += 1;
            }
        }
        if after.is_none() || (before.is_some() && before != after) {
            self.rescan = true;
        } else {
            self.changed.insert(at);
        }
    }

    fn forget(&mut self, uid: &str) {
        if let Some(n) = self.uids.get_mut(uid) {
            *n -= 1;
            if *n == 0 {
                self.uids.remove(uid);
            }
        }
    }
}

/// What a pass acts on in one object: an owner being deleted with the orphan or foreground
/// finalizer, or a live dependent with an owner not among `uids`.
fn collectable(head: &Head, uids: &BTreeMap<String, u32>) -> bool {
    if head.deleting {
        head.finalizers
            .iter()
            .any(|f| f == ORPHAN || f == FOREGROUND)
    } else {
        head.owners.iter().any(|(uid, _)| !uids.contains_key(uid))
    }
}

impl Cluster {
    fn uid_index(&self) -> BTreeMap<String, ObjRef> {
        let mut index = BTreeMap::new();
        for (i, col) in self.collections.iter().enumerate() {
            for (key, s) in &col.objects {
                index.insert(s.head.uid.clone(), (KindId(i), key.clone()));
            }
        }
        index
    }

    fn dependents(&self) -> BTreeMap<String, Vec<(ObjRef, bool)>> {
        let mut deps: BTreeMap<String, Vec<(ObjRef, bool)>> = BTreeMap::new();
        for (i, col) in self.collections.iter().enumerate() {
            for (key, s) in &col.objects {
                for (uid, block) in &s.head.owners {
                    deps.entry(uid.clone())
                        .or_default()
                        .push(((KindId(i), key.clone()), *block));
                }
            }
        }
        deps
    }

    /// The stored object, parsed, for a write that needs the old and the new.
    fn stored(&self, (kind, key): &ObjRef) -> Option<Value> {
        self.col(*kind).objects.get(key).map(|s| s.object.value())
    }

    /// What the collector reads of the stored object, in place: a pass reads every object,
    /// and parsing each would cost more than the pass.
    fn peek(&self, (kind, key): &ObjRef) -> Option<&Head> {
        self.col(*kind).objects.get(key).map(|s| &s.head)
    }

    fn resource(&self, kind: KindId) -> String {
        self.col(kind).desc.group_resource()
    }

    /// Removes `owner_uid` from the object's ownerReferences.
    fn drop_owner(&mut self, at: &ObjRef, owner_uid: &str, done: &mut Vec<GcAction>) {
        let Some(old) = self.stored(at) else { return };
        let mut new = old.clone();
        if let Some(m) = new.get_mut("metadata").and_then(Value::as_object_mut)
            && let Some(Value::Array(refs)) = m.get_mut("ownerReferences")
        {
            refs.retain(|r| r.get("uid").and_then(Value::as_str) != Some(owner_uid));
            if refs.is_empty() {
                m.remove("ownerReferences");
            }
        }
        match self.write_existing(at.0, &at.1, &old, new, false, Some(GC_MANAGER), false) {
            Ok(_) => done.push(GcAction::RemoveOwnerReference {
                resource: self.resource(at.0),
                object: printed(&at.1),
                owner_uid: owner_uid.to_owned(),
            }),
            Err(status) => done.push(GcAction::Refused {
                object: printed(&at.1),
                status,
            }),
        }
    }

    fn drop_finalizer(&mut self, at: &ObjRef, finalizer: &str, done: &mut Vec<GcAction>) {
        let Some(old) = self.stored(at) else { return };
        let mut new = old.clone();
        if let Some(Value::Array(list)) = new.pointer_mut("/metadata/finalizers") {
            list.retain(|f| f.as_str() != Some(finalizer));
        }
        match self.write_existing(at.0, &at.1, &old, new, false, Some(GC_MANAGER), false) {
            Ok(_) => done.push(GcAction::RemoveFinalizer {
                resource: self.resource(at.0),
                object: printed(&at.1),
                finalizer: finalizer.to_owned(),
                gone: self.stored(at).is_none(),
            }),
            Err(status) => done.push(GcAction::Refused {
                object: printed(&at.1),
                status,
            }),
        }
    }

    fn gc_delete(&mut self, at: &ObjRef, propagation: Propagation, done: &mut Vec<GcAction>) {
        let options = DeleteOptions {
            propagation: Some(propagation),
            ..DeleteOptions::default()
        };
        match self.delete_key(at.0, &at.1, &options) {
            Ok(d) => done.push(GcAction::Delete {
                resource: self.resource(at.0),
                object: printed(&at.1),
                propagation,
                pending: matches!(d, Deleted::Pending(_)),
            }),
            Err(status) => done.push(GcAction::Refused {
                object: printed(&at.1),
                status,
            }),
        }
    }

    /// Whether a pass would do anything (see [`collectable`]): the objects changed since the
    /// last pass, or all of them when the tracker asks, read in place. Takes the changes.
    fn anything_to_collect(&mut self) -> bool {
        let changed = std::mem::take(&mut self.gc.changed);
        let uids = &self.gc.uids;
        if self.gc.rescan {
            return self
                .collections
                .iter()
                .any(|col| col.objects.values().any(|s| collectable(&s.head, uids)));
        }
        changed.iter().any(|(kind, key)| {
            self.col(*kind)
                .objects
                .get(key)
                .is_some_and(|s| collectable(&s.head, uids))
        })
    }

    /// One pass of the garbage collector at `now`; what it did, in a deterministic order
    /// (owners being deleted first, by kind and key, then dependents left without owners).
    /// Empty when there is nothing to collect.
    pub fn collect_garbage(&mut self, now: Instant) -> Vec<GcAction> {
        self.advance(now);
        let mut done = Vec::new();
        if !self.anything_to_collect() {
            self.gc.rescan = false;
            return done;
        }
        // What this pass does may be refused: the next one looks at everything again.
        self.gc.rescan = true;
        self.gc.changed.clear();
        let index = self.uid_index();
        let dependents = self.dependents();
        // Owners being deleted with an orphan or foreground finalizer.
        for (uid, at) in &index {
            let Some(owner) = self.peek(at) else {
                continue;
            };
            if !owner.deleting {
                continue;
            }
            let list = owner.finalizers.clone();
            let deps = dependents.get(uid).cloned().unwrap_or_default();
            if list.iter().any(|f| f == ORPHAN) {
                for (dep, _) in &deps {
                    self.drop_owner(dep, uid, &mut done);
                }
                self.drop_finalizer(at, ORPHAN, &mut done);
            } else if list.iter().any(|f| f == FOREGROUND) {
                for (dep, _) in &deps {
                    let Some(d) = self.peek(dep) else { continue };
                    if d.deleting {
                        continue;
                    }
                    let policy = if dependents.contains_key(&d.uid) {
                        Propagation::Foreground
                    } else {
                        Propagation::Background
                    };
                    self.gc_delete(dep, policy, &mut done);
                }
                let blocked = deps
                    .iter()
                    .any(|(dep, block)| *block && self.peek(dep).is_some());
                if !blocked {
                    self.drop_finalizer(at, FOREGROUND, &mut done);
                }
            }
        }
        // Dependents whose owners are gone.
        let mut all: Vec<ObjRef> = Vec::new();
        for (i, col) in self.collections.iter().enumerate() {
            all.extend(col.objects.keys().map(|k| (KindId(i), k.clone())));
        }
        for at in all {
            let Some(d) = self.peek(&at) else { continue };
            let refs = d.owners.clone();
            if refs.is_empty() || d.deleting {
                continue;
            }
            let dangling: Vec<&String> = refs
                .iter()
                .map(|(u, _)| u)
                .filter(|u| !index.contains_key(*u))
                .collect();
            if dangling.is_empty() {
                continue;
            }
            let list = d.finalizers.clone();
            if dangling.len() < refs.len() {
                for uid in dangling {
                    self.drop_owner(&at, uid, &mut done);
                }
                continue;
            }
            let policy = if list.iter().any(|f| f == ORPHAN) {
                Propagation::Orphan
            } else if list.iter().any(|f| f == FOREGROUND) {
                Propagation::Foreground
            } else {
                Propagation::Background
            };
            self.gc_delete(&at, policy, &mut done);
        }
        done
    }
}
