//! The writes a reconcile made, for the core's read your own writes (KEP-5647): each
//! successful [`ApiClient`](crate::ApiClient) write inside a reconcile is recorded
//! automatically; a write made another way (kube's `Api`) is reported with
//! [`Reconcile::wrote`](crate::Reconcile::wrote). With the outcome, the driver names the
//! source that caches each written resource, and the core holds the key's next dispatch
//! until that source has observed the write.
//!
//! The automatic recording works through the reconcile's own future: while the driver polls
//! it, a thread-local names the run's log, so a write made by a task the reconcile spawned
//! elsewhere is not seen (report it with `wrote`).

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use kube_core::Resource;

/// One write a reconcile made, as the apiserver answered it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// The written resource's API group (`""` for the core group).
    pub group: String,
    /// Its plural resource name (`pods`).
    pub plural: String,
    /// The object's namespace, if namespaced.
    pub namespace: Option<String>,
    /// The object's name.
    pub name: String,
    /// The `metadata.resourceVersion` the apiserver answered.
    pub resource_version: String,
}

impl Written {
    /// The write that answered `object` (its resourceVersion is the answer's); `None` when
    /// the answer carries no resourceVersion.
    #[must_use]
    pub fn of<K: Resource>(object: &K) -> Option<Self>
    where
        K::DynamicType: Default,
    {
        Self::of_with(object, &K::DynamicType::default())
    }

    /// As [`Written::of`], for a type whose resource needs `dyntype`.
    #[must_use]
    pub fn of_with<K: Resource>(object: &K, dyntype: &K::DynamicType) -> Option<Self> {
        let meta = object.meta();
        Some(Written {
            group: K::group(dyntype).into_owned(),
            plural: K::plural(dyntype).into_owned(),
            namespace: meta.namespace.clone(),
            name: meta.name.clone().unwrap_or_default(),
            resource_version: meta.resource_version.clone()?,
        })
    }
}

/// The most resources one run keeps writes for: only the latest write per resource matters
/// (a later answer has the higher version), so this bounds the log by resource types.
const MAX_RESOURCES: usize = 64;

/// One run's writes: the latest per resource.
#[derive(Debug, Clone, Default)]
pub(crate) struct WriteLog(Arc<Mutex<Vec<Written>>>);

impl WriteLog {
    pub(crate) fn push(&self, write: Written) {
        let mut log = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(w) = log
            .iter_mut()
            .find(|w| w.group == write.group && w.plural == write.plural)
        {
            *w = write;
        } else if log.len() < MAX_RESOURCES {
            log.push(write);
        }
    }

    pub(crate) fn take(&self) -> Vec<Written> {
        std::mem::take(
            &mut *self
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }
}

thread_local! {
    static CURRENT: RefCell<Option<WriteLog>> = const { RefCell::new(None) };
}

/// Records `write` in the log of the reconcile being polled on this thread, if any.
pub(crate) fn record(write: Written) {
    CURRENT.with(|current| {
        if let Some(log) = &*current.borrow() {
            log.push(write);
        }
    });
}

/// Whether this thread is polling a reconcile's future now. A simulated transport uses it
/// to aim a fault at reconciles only (the test kit's `reconcile-panic`).
#[must_use]
pub fn polling_a_reconcile() -> bool {
    CURRENT.with(|current| current.borrow().is_some())
}

/// A reconcile's future, polled with its log named as the current one.
pub(crate) struct Recording<F: ?Sized> {
    pub(crate) log: WriteLog,
    pub(crate) inner: Pin<Box<F>>,
}

impl<F: Future + ?Sized> Future for Recording<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let previous = CURRENT.with(|c| c.replace(Some(self.log.clone())));
        // Restored even if the inner future panics (the driver catches that).
        struct Restore(Option<WriteLog>);
        impl Drop for Restore {
            fn drop(&mut self) {
                let previous = self.0.take();
                CURRENT.with(|c| *c.borrow_mut() = previous);
            }
        }
        let _restore = Restore(previous);
        self.inner.as_mut().poll(cx)
    }
}
