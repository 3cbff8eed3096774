//! What a run observed, in the order the core saw it, for a comparison against another
//! client fed the same trace (issue 30, `sim/tests/client_go_diff.rs`): the primary
//! source's LIST and WATCH requests, and after each step that changed the cache, which
//! objects and parents it woke; and the same of each secondary source. Off unless [`Harness::observe`](super::Harness::observe)
//! turns it on.

use std::collections::{BTreeMap, BTreeSet};

/// One thing the core did, in step order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observation {
    /// The primary source asked for a LIST (the core never sends a `resourceVersion`).
    List,
    /// The primary source asked for a WATCH from `resource_version`.
    Watch {
        /// The cursor sent.
        resource_version: String,
        /// Whether it is a streaming list (`sendInitialEvents`).
        send_initial_events: bool,
    },
    /// A step's cache writes woke these objects (new, gone, moved or at another
    /// resourceVersion) and these parents, as the core's store decides. Written before the
    /// requests the same step issued.
    Woke {
        /// `namespace/name` of each object woken.
        objects: BTreeSet<String>,
        /// Each parent woken.
        parents: BTreeSet<String>,
    },
    /// Secondary source `source` (1 for the header's first) asked for a LIST.
    SecondaryList {
        /// The source, counted from 1.
        source: u64,
    },
    /// Secondary source `source` asked for a WATCH from `resource_version`.
    SecondaryWatch {
        /// The source, counted from 1.
        source: u64,
        /// The cursor sent.
        resource_version: String,
        /// Whether it is a streaming list (`sendInitialEvents`).
        send_initial_events: bool,
    },
    /// A step changed what secondary source `source` holds: these objects joined it, left
    /// it, or are held at another resourceVersion or under other parents, waking the parents
    /// they were held under and the parents they are held under now. Written before the
    /// requests the same step issued.
    SecondaryWoke {
        /// The source, counted from 1.
        source: u64,
        /// `namespace/name` of each object changed.
        objects: BTreeSet<String>,
        /// Each parent woken.
        parents: BTreeSet<String>,
    },
}

/// What a secondary source holds: `namespace/name` → its resourceVersion and the parents
/// it wakes (sorted), as its key map maps it.
pub type SecondaryHeld = BTreeMap<String, (Option<String>, Vec<String>)>;

/// Objects that differ between two views of a secondary source, and the parents they
/// wake (those held before and those held after).
pub(super) fn secondary_woken(
    before: &SecondaryHeld,
    after: &SecondaryHeld,
) -> (BTreeSet<String>, BTreeSet<String>) {
    let (mut objects, mut parents) = (BTreeSet::new(), BTreeSet::new());
    let keys: BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    for key in keys {
        let (b, a) = (before.get(key), after.get(key));
        if b == a {
            continue;
        }
        objects.insert(key.clone());
        for (_, held) in b.into_iter().chain(a) {
            parents.extend(held.iter().cloned());
        }
    }
    (objects, parents)
}
