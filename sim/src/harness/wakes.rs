//! Which parents each step woke, at which priority, as the starvation check
//! ([`crate::starvation`]) needs them: the cache as the change log left it.

use std::collections::{BTreeMap, BTreeSet};

use crate::starvation::{StarvationCheck, StepWakes};

/// A cached object's parent and resourceVersion, as the starvation check follows them.
pub(super) type Placed = (String, Option<String>);

/// What the starvation check needs beyond the check itself: the cache as the change log
/// says (to tell which parents a change woke) and the step being taken.
#[derive(Debug)]
pub(super) struct Starvation {
    pub(super) check: StarvationCheck,
    /// Each cached object's parent and resourceVersion, as the core's change log left them.
    pub(super) cached: BTreeMap<String, Placed>,
    pub(super) step: StepWakes,
    /// A resync or a reconcile-all trigger in this step: every parent woken at low priority.
    pub(super) all_low: bool,
}

/// The parents a cache write woke, as the core's store decides: an object new to its
/// parent, gone from it, or under it at another resourceVersion (the same version, both
/// known, wakes nothing).
pub(super) fn woken_by(old: Option<&Placed>, new: Option<&Placed>, into: &mut BTreeSet<String>) {
    match (old, new) {
        (Some((po, rvo)), Some((pn, rvn))) if po == pn => {
            if !(rvo.is_some() && rvo == rvn) {
                into.insert(pn.clone());
            }
        }
        (old, new) => {
            for (parent, _) in old.into_iter().chain(new) {
                into.insert(parent.clone());
            }
        }
    }
}

/// Applies one step's change log to `cached` (each primary object's parent and version) and
/// adds the parents it changed to `woken`: after a replace, every parent whose objects differ
/// from before; otherwise every parent an object joined, left or changed version under.
pub(super) fn note_observed(
    cached: &mut BTreeMap<String, Placed>,
    cleared: bool,
    changed: &[(String, Option<Placed>)],
    woken: &mut BTreeSet<String>,
) {
    if cleared {
        let new: BTreeMap<String, Placed> = changed
            .iter()
            .filter_map(|(k, v)| v.clone().map(|v| (k.clone(), v)))
            .collect();
        for (key, old) in cached.iter() {
            woken_by(Some(old), new.get(key), woken);
        }
        for (key, value) in &new {
            if !cached.contains_key(key) {
                woken_by(None, Some(value), woken);
            }
        }
        *cached = new;
        return;
    }
    for (key, new) in changed {
        woken_by(cached.get(key), new.as_ref(), woken);
        match new {
            Some(value) => {
                cached.insert(key.clone(), value.clone());
            }
            None => {
                cached.remove(key);
            }
        }
    }
}

impl Starvation {
    /// Which parents this step's cache writes woke: at low priority when the cache was
    /// replaced (a listing of the primary), at normal otherwise (a live change).
    pub(super) fn note_changes(&mut self, cleared: bool, changed: Vec<(String, Option<Placed>)>) {
        if cleared {
            // The log lists the whole cache after a replace: diff it against the last one.
            let new: BTreeMap<String, Placed> = changed
                .into_iter()
                .filter_map(|(k, v)| v.map(|v| (k, v)))
                .collect();
            for (key, old) in &self.cached {
                woken_by(Some(old), new.get(key), &mut self.step.low);
            }
            for (key, value) in &new {
                if !self.cached.contains_key(key) {
                    woken_by(None, Some(value), &mut self.step.low);
                }
            }
            self.cached = new;
            return;
        }
        for (key, new) in changed {
            woken_by(self.cached.get(&key), new.as_ref(), &mut self.step.normal);
            match new {
                Some(value) => {
                    self.cached.insert(key, value);
                }
                None => {
                    self.cached.remove(&key);
                }
            }
        }
    }
}
