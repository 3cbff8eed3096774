//! The controller: what a loop is configured with, which parent an object wakes and which
//! updates do, each parent's members, the work queue and its retries, and the loop itself
//! (controller-runtime's `Controller` over client-go's informer).

pub(crate) mod config;
pub(crate) mod key_map;
pub(crate) mod members;
pub(crate) mod own_writes;
pub(crate) mod predicate;
pub(crate) mod queue;
pub(crate) mod reconcile_loop;
pub(crate) mod retry;
