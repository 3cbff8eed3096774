//! The hasher of the core's lookup-only hash maps and sets.
//!
//! Fixed-seed foldhash: deterministic (no random seed in the core), and several times cheaper
//! than SipHash on short keys, which every frame pays for its object key, its parent, and the
//! parent again in the work queue. These maps are never iterated on a path that reaches an
//! output, so their order never shows.

/// Builds the hasher of every hash map and set in the core.
pub(crate) type FixedState = foldhash::fast::FixedState;
