//! What a reconcile gets and returns: [`Reconcile`] in, [`Action`] out, and the
//! error policy that turns a reconcile's own error type into the next [`Action`].

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use reconcile_core::{Members, Outcome, Related, Ticket};

use super::cache::CacheSnapshot;
use super::handle::Msg;
use super::writes::{WriteLog, Written};

/// What a reconcile asks for next (kube-runtime's `Action`); also what an error policy
/// returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Action {
    next: Next,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Next {
    AwaitChange,
    Requeue(Duration),
    Backoff,
}

impl Action {
    /// Run again only when something changes.
    #[must_use]
    pub fn await_change() -> Self {
        Action {
            next: Next::AwaitChange,
        }
    }

    /// Run again after `duration`, unless something changes first.
    #[must_use]
    pub fn requeue(duration: Duration) -> Self {
        Action {
            next: Next::Requeue(duration),
        }
    }

    /// Run again after this key's exponential backoff (the controller's `backoff` setting),
    /// which grows with each failure in a row: what [`default_error_policy`] returns. Returned
    /// from a reconcile that succeeded, the run counts as failed.
    #[must_use]
    pub fn backoff() -> Self {
        Action {
            next: Next::Backoff,
        }
    }

    /// The core's outcome for a reconcile that returned `Ok(self)`.
    pub(crate) fn after_success(self) -> Outcome {
        match self.next {
            Next::AwaitChange => Outcome::Success,
            Next::Requeue(delay) => Outcome::RequeueAfter(delay),
            Next::Backoff => Outcome::Error("the reconcile asked for a backoff".into()),
        }
    }

    /// The core's outcome for a reconcile that failed with `error`, when the error policy
    /// chose `self`.
    pub(crate) fn after_error(self, error: String) -> Outcome {
        match self.next {
            Next::Backoff => Outcome::Error(error),
            Next::Requeue(delay) => Outcome::ErrorHandled {
                error,
                requeue_after: Some(delay),
            },
            Next::AwaitChange => Outcome::ErrorHandled {
                error,
                requeue_after: None,
            },
        }
    }
}

/// What [`Controller::run`](crate::Controller::run) and its siblings take as the error
/// policy: any `Fn(&Reconcile<O, P>, &E, Arc<C>) -> Action` (kube-runtime's
/// `error_policy(Arc<K>, &E, Arc<Ctx>) -> Action`), such as [`default_error_policy`]. Not
/// implemented by hand: every such function is one. A named trait only so that a
/// controller run without an error policy (the context passed in its place) is told so,
/// rather than that an `Arc<Ctx>` is not a closure.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an error policy",
    label = "the error policy goes here, before the context",
    note = "an error policy is a `Fn(&Reconcile<O, P>, &E, Arc<Ctx>) -> Action`: \
            `controller.run(reconcile, default_error_policy, ctx)`, as kube-runtime's \
            `Controller::run(reconcile, error_policy, ctx)`"
)]
pub trait ErrorPolicy<O, P, E, C>:
    Fn(&Reconcile<O, P>, &E, Arc<C>) -> Action + Send + Sync + 'static
{
}

impl<O, P, E, C, F> ErrorPolicy<O, P, E, C> for F where
    F: Fn(&Reconcile<O, P>, &E, Arc<C>) -> Action + Send + Sync + 'static
{
}

/// The error policy every controller had before it could choose one: retry the key with its
/// exponential backoff, whatever the error.
pub fn default_error_policy<O, P, E, C>(
    _request: &Reconcile<O, P>,
    _error: &E,
    _ctx: Arc<C>,
) -> Action {
    Action::backoff()
}

/// One reconcile's input: the parent key, its members at dispatch, and the whole cache as of
/// dispatch (controller-runtime's `reconcile.Request`, with the cache read attached).
pub struct Reconcile<O, P> {
    parent: P,
    members: Members<O>,
    related: Vec<Related>,
    attempt: u32,
    cache: CacheSnapshot<O, P>,
    run: Option<Run<O>>,
}

/// What ties a [`Reconcile`] to its run in the driver: its writes and its deadline.
pub(crate) struct Run<O> {
    pub(crate) ticket: Ticket,
    pub(crate) writes: WriteLog,
    pub(crate) inbox: async_channel::Sender<Msg<O>>,
}

impl<O> Clone for Run<O> {
    fn clone(&self) -> Self {
        Run {
            ticket: self.ticket,
            writes: self.writes.clone(),
            inbox: self.inbox.clone(),
        }
    }
}

impl<O, P: Clone> Clone for Reconcile<O, P> {
    fn clone(&self) -> Self {
        Reconcile {
            parent: self.parent.clone(),
            members: self.members.clone(),
            related: self.related.clone(),
            attempt: self.attempt,
            cache: self.cache.clone(),
            run: self.run.clone(),
        }
    }
}

impl<O, P: fmt::Debug> fmt::Debug for Reconcile<O, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reconcile")
            .field("parent", &self.parent)
            .field("members", &self.members.len())
            .field("attempt", &self.attempt)
            .finish_non_exhaustive()
    }
}

impl<O, P> Reconcile<O, P> {
    pub(crate) fn new(
        parent: P,
        members: Members<O>,
        related: Vec<Related>,
        attempt: u32,
        cache: CacheSnapshot<O, P>,
        run: Option<Run<O>>,
    ) -> Self {
        Reconcile {
            parent,
            members,
            related,
            attempt,
            cache,
            run,
        }
    }

    /// Reports a write this reconcile made other than through [`ApiClient`](crate::ApiClient)
    /// (whose writes are recorded by themselves), with kube's `Api` say: `object` is the
    /// apiserver's answer, whose resourceVersion the source caching `K` must observe before
    /// this key runs again (KEP-5647's read your own writes; `Controller::read_own_writes`).
    /// An answer without a resourceVersion, or of a resource no source caches, is ignored.
    pub fn wrote<K: kube_core::Resource>(&self, object: &K)
    where
        K::DynamicType: Default,
    {
        if let Some(write) = Written::of(object) {
            self.observe_write(write);
        }
    }

    /// As [`Reconcile::wrote`], for a type whose resource needs `dyntype`.
    pub fn wrote_with<K: kube_core::Resource>(&self, object: &K, dyntype: &K::DynamicType) {
        if let Some(write) = Written::of_with(object, dyntype) {
            self.observe_write(write);
        }
    }

    /// Reports one write as its parts (see [`Reconcile::wrote`]). Only the latest write of
    /// each resource is kept: a later answer has the higher version.
    pub fn observe_write(&self, write: Written) {
        if let Some(run) = &self.run {
            run.writes.push(write);
        }
    }

    /// Sets this run's deadline to `timeout` after its dispatch, overriding the controller's
    /// `reconcile_timeout` (`None` lifts it). Past it the run is cancelled and counts as
    /// failed, through the backoff; a deadline already past cancels it at once.
    pub async fn set_timeout(&self, timeout: Option<Duration>) {
        if let Some(run) = &self.run {
            let _ = run
                .inbox
                .send(Msg::ReconcileTimeout(run.ticket, timeout))
                .await;
        }
    }

    /// The key this reconcile runs under.
    #[must_use]
    pub fn parent(&self) -> &P {
        &self.parent
    }

    /// The parent's members at dispatch, in key order; empty when every one was deleted
    /// (the reconcile still runs, so it can clean up). It shares the core's member set
    /// instead of copying it, so it costs the same whatever the parent's size; `to_vec()`
    /// copies the members out.
    #[must_use]
    pub fn members(&self) -> &Members<O> {
        &self.members
    }

    /// The first member: for a controller keyed by the object itself
    /// ([`KeyMap::by_object`](reconcile_core::KeyMap::by_object)), the object, or `None`
    /// once it was deleted.
    #[must_use]
    pub fn object(&self) -> Option<&Arc<O>> {
        self.members.first()
    }

    /// The parent's objects of type `C` in the secondary sources (`owns`, `watches`) at
    /// dispatch, in key order, from every source of that type.
    #[must_use]
    pub fn related<C: Send + Sync + 'static>(&self) -> Vec<Arc<C>> {
        self.related
            .iter()
            .filter_map(|r| r.downcast::<C>())
            .flatten()
            .collect()
    }

    /// Each secondary source's objects of the parent at dispatch, type-erased, by source.
    #[must_use]
    pub fn related_by_source(&self) -> &[Related] {
        &self.related
    }

    /// 1 plus the key's failures in a row: 1 unless the runs before failed with the default
    /// backoff. A success, a requeue or an error the policy handled starts it over; a change
    /// to the object does not.
    #[must_use]
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// The whole cache as of dispatch: get by key, list, list by parent.
    #[must_use]
    pub fn cache(&self) -> &CacheSnapshot<O, P> {
        &self.cache
    }

    /// The parent and its members, by value.
    #[must_use]
    pub fn into_parts(self) -> (P, Members<O>) {
        (self.parent, self.members)
    }
}
