//! What a test kit plugs into a simulation: a verdict on every request before the cluster
//! serves it (the faults at the transport), a look at every answer and every change of the
//! cluster (snapshots, invariants), and cuts of the open watches.

use std::time::Duration;

use crate::cluster::Cluster;

/// A request as the hooks see it.
pub(crate) struct Request<'a> {
    /// The controller incarnation whose transport sent it (0: no incarnation).
    pub(crate) incarnation: u64,
    /// The request itself.
    pub(crate) http: &'a http::Request<Vec<u8>>,
    /// Sent from inside a reconcile (the engine's reconcile future was being polled).
    pub(crate) in_reconcile: bool,
}

impl Request<'_> {
    /// Whether it writes: every verb but GET (a LIST and a WATCH are GETs too).
    pub(crate) fn is_write(&self) -> bool {
        self.http.method() != http::Method::GET
    }

    /// Whether it opens a watch.
    pub(crate) fn is_watch(&self) -> bool {
        self.http
            .uri()
            .query()
            .is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"))
    }
}

/// What happens to a request.
pub(crate) enum Verdict {
    /// The cluster serves it.
    Serve,
    /// The cluster serves this request instead (a stale read: the same LIST at an older
    /// resourceVersion).
    ServeInstead(Box<http::Request<Vec<u8>>>),
    /// Answered with this status, the cluster untouched: a `Status` body with `reason`.
    Refuse {
        /// The HTTP code.
        code: u16,
        /// The `Status` reason (`Conflict`, `InternalError`, `TooManyRequests`).
        reason: &'static str,
    },
    /// Never reaches the cluster: the connection fails with this message.
    Unreachable(String),
    /// The cluster serves it, then the answer is lost: the caller sees a transport error
    /// (a timeout after the commit).
    LoseAnswer,
    /// The cluster serves it, and the answer arrives this much later.
    ServeLate(std::time::Duration),
    /// Never reaches the cluster: the caller's task panics with this message (only ever
    /// given for a request sent from inside a reconcile, whose panic the engine catches).
    Panic(String),
}

/// How the open watches were cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cut {
    /// Each ends, as a dropped connection does.
    Drop,
    /// Each gets an `ERROR` 410 `Expired` frame, then ends.
    Expire,
    /// Each stops delivering and does not end until a later cut ends it: the client's
    /// idle timeout must notice.
    Hang,
}

/// The kit's side of a simulation. Called with the simulation's state locked: a hook must
/// not call back into the simulation.
pub(crate) trait Hooks: Send {
    /// Before the cluster sees `request`.
    fn before(&mut self, now: Duration, request: &Request<'_>, cluster: &Cluster) -> Verdict;
    /// After `request` was answered with `status`: by the cluster, or by a
    /// [`Verdict::Refuse`] (a [`Verdict::LoseAnswer`] gives the status the cluster gave,
    /// which the caller never sees; a [`Verdict::Unreachable`] is not answered).
    /// A waker it returns is woken once the simulation is unlocked.
    fn after(
        &mut self,
        now: Duration,
        request: &Request<'_>,
        status: u16,
        cluster: &Cluster,
    ) -> Option<std::task::Waker>;
    /// The cluster changed (a write, the garbage collector, a test's own change).
    fn changed(&mut self, now: Duration, cluster: &Cluster);
}
