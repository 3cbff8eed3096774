//! The cache's change log: a copy kept in step from `drain_cache_changes` alone always equals
//! the cache, through watch writes, reparenting, evictions and relists.

mod harness;

use std::collections::BTreeMap;
use std::sync::Arc;

use harness::{Scenario, kube_config, pod};
use reconcile_core::pod::PodView;
use reconcile_core::{CacheChange, ObjectKey};

/// A copy of the cache built only from reported changes.
#[derive(Default)]
struct Copy {
    objects: BTreeMap<ObjectKey, (Arc<PodView>, String)>,
    reports: usize,
}

impl Copy {
    fn catch_up(&mut self, s: &mut Scenario) -> &mut Self {
        s.core.drain_cache_changes(|change| {
            self.reports += 1;
            match change {
                CacheChange::Cleared => self.objects.clear(),
                CacheChange::Set {
                    key,
                    object,
                    parent,
                } => {
                    self.objects
                        .insert(key.clone(), (Arc::clone(object), parent.clone()));
                }
                CacheChange::Removed { key } => {
                    self.objects.remove(key);
                }
            }
        });
        let cached: BTreeMap<_, _> = s
            .core
            .store()
            .iter()
            .map(|(k, o, p)| (k.clone(), (Arc::clone(o), p.clone())))
            .collect();
        assert_eq!(
            self.objects.keys().collect::<Vec<_>>(),
            cached.keys().collect::<Vec<_>>()
        );
        for (key, (object, parent)) in &cached {
            let (copied, copied_parent) = &self.objects[key];
            assert!(Arc::ptr_eq(object, copied), "{key} is stale in the copy");
            assert_eq!(parent, copied_parent, "{key} has a stale parent");
        }
        self
    }
}

#[test]
fn a_copy_kept_from_the_change_log_equals_the_cache_at_every_turn() {
    let mut s = Scenario::new(kube_config());
    s.core.log_cache_changes(true);
    let mut copy = Copy::default();
    s.start()
        .list_ok(10, &[pod("a", Some("c1"), 5), pod("b", Some("c2"), 6)]);
    copy.catch_up(&mut s);
    s.added("c", Some("c1"), 11).modified("a", Some("c2"), 12);
    copy.catch_up(&mut s);
    // Reparented out of every cell: evicted.
    s.modified("b", None, 13).deleted("c", Some("c1"), 14);
    copy.catch_up(&mut s);
    // An unchanged resourceVersion writes nothing, so nothing is reported.
    let before = copy.reports;
    s.modified("a", Some("c2"), 12);
    copy.catch_up(&mut s);
    assert_eq!(copy.reports, before);
    // A relist replaces everything, including a deletion missed while disconnected.
    s.settle()
        .error_frame(410, "Expired")
        .next_deadline()
        .list_ok(20, &[pod("d", Some("c3"), 19)]);
    copy.catch_up(&mut s);
    assert_eq!(copy.objects.len(), 1);
}

#[test]
fn nothing_is_logged_unless_asked() {
    let mut s = Scenario::new(kube_config());
    s.start().list_ok(10, &[pod("a", Some("c1"), 5)]);
    let mut reports = 0;
    s.core.drain_cache_changes(|_| reports += 1);
    assert_eq!(reports, 0);
}
