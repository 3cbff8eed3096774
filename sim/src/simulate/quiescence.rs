//! The invariants world mode checks once a run has settled: every cache equals its world, and
//! every parent whose members or related objects changed was reconciled with what it holds.

use std::collections::BTreeMap;
use std::sync::Arc;

use reconcile_core::pod::PodView;
use reconcile_core::{Instant, Object, SourceId};

use crate::meta_view::MetaView;
use crate::simulate::event_loop::{Sim, key, parents_by};

impl Sim<'_> {
    /// At the end, per source: the cache equals the world for the source's selector (no
    /// ghost, missing or stale object); and every parent whose members or related objects
    /// changed was last dispatched after its last change, with what the world holds for it
    /// in every source.
    pub(super) fn check_quiescent(&mut self) {
        if self.h.core().lifecycle() != reconcile_core::Lifecycle::Running {
            return;
        }
        self.h.finish_starvation();
        let parent_by = self.trace.header.parent.clone();
        let mut world: BTreeMap<String, (String, String)> = BTreeMap::new();
        let mut members: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
        for obj in self.worlds[0].visible_objects() {
            let Ok(pod) = serde_json::from_str::<PodView>(&obj.json) else {
                continue;
            };
            let Ok(parent) = parent_by.parent_of(&pod) else {
                continue;
            };
            let rv = pod.object_resource_version().unwrap_or("").to_owned();
            members
                .entry(parent.clone())
                .or_default()
                .push((obj.key.clone(), rv.clone()));
            world.insert(obj.key.clone(), (parent, rv));
        }
        let store: BTreeMap<String, (String, String)> = self
            .h
            .core()
            .store()
            .iter()
            .map(|(k, o, p)| {
                (
                    k.to_string(),
                    (
                        p.clone(),
                        o.object_resource_version().unwrap_or("").to_owned(),
                    ),
                )
            })
            .collect();
        let copied = self.h.cache_copy.len() == self.h.core().store().len()
            && self
                .h
                .core()
                .store()
                .iter()
                .all(|(k, o, _)| self.h.cache_copy.get(k).is_some_and(|c| Arc::ptr_eq(c, o)));
        if !copied {
            self.violation(
                "a copy kept from the change log differs from the cache",
                format!(
                    "{} objects copied, {} cached",
                    self.h.cache_copy.len(),
                    self.h.core().store().len()
                ),
            );
        }
        if store != world {
            let detail = differences(&store, &world);
            self.violation("store differs from the world at quiescence", detail);
        }
        // Each secondary: what it holds against its world, and each parent's related objects
        // as the world has them.
        let mut related: Vec<BTreeMap<String, Vec<(String, String)>>> = Vec::new();
        for n in 1..self.worlds.len() {
            let mut world: BTreeMap<String, (String, String)> = BTreeMap::new();
            let mut by_parent: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
            for obj in self.worlds[n].visible_objects() {
                let Ok(object) = serde_json::from_str::<MetaView>(&obj.json) else {
                    continue;
                };
                let rv = object.object_resource_version().unwrap_or("").to_owned();
                for parent in parents_by(&self.parents_by[n - 1], &object) {
                    by_parent
                        .entry(parent)
                        .or_default()
                        .push((obj.key.clone(), rv.clone()));
                }
                world.insert(obj.key.clone(), (String::new(), rv));
            }
            let held: BTreeMap<String, (String, String)> = self
                .h
                .core()
                .secondary_objects(SourceId::nth(n as u64))
                .and_then(|r| r.downcast::<MetaView>())
                .unwrap_or_default()
                .iter()
                .map(|o| {
                    let rv = o.object_resource_version().unwrap_or("").to_owned();
                    (key(&**o), (String::new(), rv))
                })
                .collect();
            if held != world {
                let detail = format!("S{n}: {}", differences(&held, &world));
                self.violation("source differs from the world at quiescence", detail);
            }
            related.push(by_parent);
        }
        // Every parent the world changed, and every parent the core saw change (the same
        // ones, unless the check's own bookkeeping is wrong).
        let mut changed: BTreeMap<String, Instant> = self.membership_changed.clone();
        for parent in self.h.observed_change.keys() {
            changed.entry(parent.clone()).or_insert(Instant::ZERO);
        }
        for (parent, changed_at) in changed {
            let observed = self.h.observed_change.get(&parent).copied();
            let want = members.get(&parent).cloned().unwrap_or_default();
            let want_related: Vec<Vec<(String, String)>> = related
                .iter()
                .map(|r| r.get(&parent).cloned().unwrap_or_default())
                .collect();
            let ever_reconciled = self.h.last_dispatch.contains_key(&parent);
            if want.is_empty() && want_related.iter().all(Vec::is_empty) && !ever_reconciled {
                // The core never saw this parent with members: nothing to converge.
                continue;
            }
            let last = self.h.last_dispatch.get(&parent).map(|d| {
                let keys: Vec<(String, String)> = d
                    .members
                    .iter()
                    .map(|m| {
                        let rv = m.object_resource_version().unwrap_or("").to_owned();
                        (key(&**m), rv)
                    })
                    .collect();
                let related: Vec<Vec<(String, String)>> = d
                    .related
                    .iter()
                    .map(|r| {
                        r.downcast::<MetaView>()
                            .unwrap_or_default()
                            .iter()
                            .map(|o| {
                                let rv = o.object_resource_version().unwrap_or("").to_owned();
                                (key(&**o), rv)
                            })
                            .collect()
                    })
                    .collect();
                (d.at, d.step, keys, related)
            });
            // Converged when the last reconcile came after the last change the core observed
            // and saw every object of the parent at its final version. Not necessarily after
            // the world's last change: one the world made and undid while a source had no
            // watch open (a pod added then removed, a child owned then disowned, between two
            // LISTs) never reached the controller: its inputs are those of a run without the
            // change, so no controller could act on it, and level-triggered, it needs not.
            match last {
                Some((_, step, seen, seen_related))
                    if seen == want
                        && seen_related == want_related
                        && observed.is_none_or(|o| step >= o) => {}
                Some((at, _, seen, seen_related)) if seen == want && seen_related == want_related => {
                    self.violation(
                        "parent not reconciled after its last change",
                        format!(
                            "{parent}: last reconcile at {at}, before the last change the core observed (step {}), membership is {want:?}",
                            observed.unwrap_or(0)
                        ),
                    );
                }
                Some((at, _, seen, seen_related)) => {
                    let detail = if seen_related == want_related {
                        format!(
                            "{parent}: last reconcile at {at} saw {seen:?}, membership is {want:?} since {changed_at}"
                        )
                    } else {
                        format!(
                            "{parent}: last reconcile at {at} saw related {seen_related:?}, the world has {want_related:?} since {changed_at}"
                        )
                    };
                    self.violation("parent not reconciled after its last change", detail);
                }
                None => self.violation(
                    "parent not reconciled after its last change",
                    format!("{parent}: never reconciled, membership is {want:?}, related {want_related:?}"),
                ),
            }
        }
    }
}

/// What a cache holds that the world does not, what it misses, and what it holds stale.
pub(crate) fn differences(
    held: &BTreeMap<String, (String, String)>,
    world: &BTreeMap<String, (String, String)>,
) -> String {
    let ghosts: Vec<&String> = held.keys().filter(|k| !world.contains_key(*k)).collect();
    let missing: Vec<&String> = world.keys().filter(|k| !held.contains_key(*k)).collect();
    let stale: Vec<&String> = world
        .iter()
        .filter(|(k, v)| held.get(*k).is_some_and(|s| s != *v))
        .map(|(k, _)| k)
        .collect();
    format!("ghosts {ghosts:?}, missing {missing:?}, stale {stale:?}")
}
