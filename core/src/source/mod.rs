//! Sources: where the loop's objects come from and where they are kept. What to LIST and
//! WATCH (`params`), the reflector, secondary sources, the in-process source, and the store
//! they all write to.
//!
//! Go writes to a store by method call; here the same operations travel as values
//! ([`SourceEvent`], and inside the core [`Change`]), so the reflector and in-process sources
//! (registries that live in the same process) feed one store the same way.

use std::sync::Arc;

use crate::vocabulary::SourceEvent;

pub(crate) mod in_process;
pub(crate) mod params;
pub(crate) mod reflector;
pub(crate) mod secondaries;
pub(crate) mod secondary;
pub(crate) mod store;
pub(crate) mod transform;

/// A store write inside the core, with objects already shared: the reflector moves each
/// decoded object into its `Arc` once, and nothing copies it afterwards; an in-process
/// source's shared events keep the pointers they came with.
#[derive(Debug)]
pub(crate) enum Change<O> {
    Upsert(Arc<O>),
    Delete(Arc<O>),
    Replace(Vec<Arc<O>>),
}

impl<O> From<SourceEvent<O>> for Change<O> {
    fn from(event: SourceEvent<O>) -> Self {
        match event {
            SourceEvent::Upsert(o) => Change::Upsert(Arc::new(o)),
            SourceEvent::Delete(o) => Change::Delete(Arc::new(o)),
            SourceEvent::Replace(objects) => {
                Change::Replace(objects.into_iter().map(Arc::new).collect())
            }
            SourceEvent::UpsertShared(o) => Change::Upsert(o),
            SourceEvent::DeleteShared(o) => Change::Delete(o),
            SourceEvent::ReplaceShared(objects) => Change::Replace(objects),
        }
    }
}
