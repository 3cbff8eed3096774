//! What a run observed, in the order the core saw it, for a comparison against another
//! client fed the same trace (issue 30, `sim/tests/client_go_diff.rs`): the primary
//! source's LIST and WATCH requests, and after each step that changed the cache, which
//! objects and parents it woke. Off unless [`Harness::observe`](super::Harness::observe)
//! turns it on.

use std::collections::BTreeSet;

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
}
