//! What the core asks of its driver (commands), what it reports (events), and when it next
//! needs to be woken (the deadline).

use std::any::Any;
use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::ids::{RequestId, SourceId, StreamId, Ticket};
use super::input::OwnWrite;
use super::lease::{LeaseRequest, LostReason};
use crate::controller::key_map::KeyMapError;
use crate::controller::members::Members;
use crate::source::params::WatchParams;
use crate::time::Instant;
use crate::wire::frame::FrameError;
use crate::wire::list::{ItemError, ListBodyError};
use crate::wire::object::{Object, ObjectKey};
use crate::wire::status::Status;

/// One thing for the driver to do.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Command<O, P> {
    /// Send a LIST (no `resourceVersion`: a consistent read of the current state).
    List {
        /// Hand back with the response.
        req: RequestId,
        /// Which source's collection to list.
        source: SourceId,
        /// Namespace and selectors.
        params: Arc<WatchParams>,
        /// `limit`: the page size asked for, or `None` for the whole collection at once.
        limit: Option<u32>,
        /// `continue`: the token of the page asked for, from the previous page's
        /// `metadata.continue`; `None` for the first page.
        continue_token: Option<String>,
    },
    /// Abandon an in-flight LIST; its response, if any, will be ignored.
    CancelList {
        /// The LIST to abandon.
        req: RequestId,
    },
    /// Open a WATCH from `resource_version`; with `send_initial_events`, a streaming list.
    Watch {
        /// Tag every line and the end of this stream with it.
        stream: StreamId,
        /// Which source's collection to watch.
        source: SourceId,
        /// Namespace and selectors.
        params: Arc<WatchParams>,
        /// The cursor, from a LIST or a frame. Empty only with `send_initial_events`: the
        /// stream then opens with the current state, read as consistently as a LIST.
        resource_version: String,
        /// `timeoutSeconds`, always sent.
        timeout_seconds: u32,
        /// `allowWatchBookmarks`, always requested.
        allow_bookmarks: bool,
        /// `sendInitialEvents=true` with `resourceVersionMatch=NotOlderThan`: a streaming
        /// list, whose stream opens with the state as `ADDED` events and a bookmark annotated
        /// `k8s.io/initial-events-end` after them (client-go's WatchList). Neither parameter
        /// is sent when `false`.
        send_initial_events: bool,
    },
    /// Close a WATCH; anything still arriving on it will be ignored.
    CloseWatch {
        /// The stream to close.
        stream: StreamId,
    },
    /// Open the in-process source; tag its events with `stream`.
    OpenSource {
        /// The stream id to tag events with.
        stream: StreamId,
    },
    /// Close the in-process source stream.
    CloseSource {
        /// The stream to close.
        stream: StreamId,
    },
    /// Run reconcile for `parent`; report back with [`Input::Reconciled`].
    ///
    /// [`Input::Reconciled`]: crate::Input::Reconciled
    Reconcile {
        /// Hand back with the outcome.
        ticket: Ticket,
        /// The key to reconcile.
        parent: P,
        /// 1 for a first try, n + 1 after n consecutive failures.
        attempt: u32,
        /// The parent's objects at dispatch time, in key order; O(1) to hand over and to
        /// keep, whatever the parent's size.
        members: Members<O>,
        /// Each secondary source's objects of the parent at dispatch time, by source.
        related: Vec<Related>,
    },
    /// Abandon a running reconcile (on stop, or on losing leadership); its outcome will be
    /// ignored.
    CancelReconcile {
        /// The run to abandon.
        ticket: Ticket,
    },
    /// Read or write the election's `coordination.k8s.io/v1` Lease; report back with
    /// [`Input::Lease`](crate::Input::Lease).
    Lease {
        /// Hand back with the response.
        req: RequestId,
        /// The Lease's namespace.
        namespace: String,
        /// The Lease's name.
        name: String,
        /// What to do.
        request: LeaseRequest,
    },
}

/// A secondary source's objects that belong to one parent, as of a reconcile's dispatch,
/// type-erased: [`Related::downcast`] gives them back typed.
#[derive(Clone)]
pub struct Related {
    /// The source they come from.
    pub source: SourceId,
    /// The objects, in key order.
    pub objects: Vec<Arc<dyn Any + Send + Sync>>,
}

impl fmt::Debug for Related {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Related")
            .field("source", &self.source)
            .field("objects", &self.objects.len())
            .finish()
    }
}

impl Related {
    /// The objects as `C`; `None` when the source holds another type.
    #[must_use]
    pub fn downcast<C: Send + Sync + 'static>(&self) -> Option<Vec<Arc<C>>> {
        self.objects
            .iter()
            .map(|o| Arc::clone(o).downcast::<C>().ok())
            .collect()
    }
}

/// Something the driver may log or count; no action is required.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Event<P> {
    /// The first whole-world listing reached the store; reconciles may run from now on.
    Synced {
        /// Objects in the store.
        objects: usize,
    },
    /// A LIST failed and will be retried after `retry_delay`.
    ListFailed {
        /// The failed request.
        req: RequestId,
        /// Why.
        error: ListFailure,
    },
    /// A page of a paged LIST arrived and was gathered; the store is untouched until the last
    /// page, when the whole listing is applied as one `Replace`.
    ListPage {
        /// The request the page answered.
        req: RequestId,
        /// Items in this page.
        items: usize,
        /// Items gathered so far, this page's included.
        total: usize,
        /// Another page follows (the page carried a `continue` token).
        more: bool,
    },
    /// A continue token expired (410) before the last page: the pages gathered are dropped
    /// and the listing starts over at once with one unpaged LIST (client-go's pager falls
    /// back to a full list the same way).
    ListPageExpired {
        /// The continuation that was refused.
        req: RequestId,
        /// Pages gathered and dropped.
        pages: u32,
        /// The `Status` the apiserver sent, if any.
        status: Option<Status>,
    },
    /// A LIST item did not decode and was left out.
    ListItemSkipped {
        /// The request it came in.
        req: RequestId,
        /// Which item and why.
        error: ItemError,
    },
    /// A watch frame did not decode but told where the stream is: skipped, cursor advanced.
    FrameSkipped {
        /// The stream it came on.
        stream: StreamId,
        /// Why, and the version skipped to.
        error: FrameError,
    },
    /// The cursor cannot be used any more: a LIST follows after `retry_delay`.
    Relist {
        /// The source whose cursor died; the others keep theirs.
        source: SourceId,
        /// Why.
        reason: RelistReason,
    },
    /// The watch ended or failed; a WATCH from the same cursor follows after `retry_delay`.
    WatchRetry {
        /// The stream that ended.
        stream: StreamId,
        /// Why.
        reason: WatchRetryReason,
    },
    /// An object `key_map` could not place: evicted (or never stored).
    Unmapped {
        /// The object.
        key: ObjectKey,
        /// What `key_map` said.
        error: KeyMapError,
        /// The parent it was evicted from, which is woken.
        evicted_from: Option<P>,
    },
    /// An object without `metadata.name` was refused.
    Unnamed,
    /// A reconcile failed; it runs again after `delay`.
    BackoffScheduled {
        /// The key.
        parent: P,
        /// Consecutive failures so far.
        failures: u32,
        /// Until the retry.
        delay: Duration,
        /// The reconcile's error.
        error: String,
    },
    /// A reconcile failed and the error policy chose the follow-up, not the backoff.
    ErrorHandled {
        /// The key.
        parent: P,
        /// Until the rerun; `None` waits for a change.
        requeue_after: Option<Duration>,
        /// The reconcile's error.
        error: String,
    },
    /// A reconcile ran past its deadline (`Config::reconcile_timeout`, or the run's own
    /// [`Input::ReconcileTimeout`](crate::Input::ReconcileTimeout)): it was cancelled and
    /// counts as failed, through the backoff (controller-runtime's `ReconciliationTimeout`).
    ReconcileTimedOut {
        /// The key.
        parent: P,
        /// The run.
        ticket: Ticket,
        /// Its deadline, from dispatch.
        after: Duration,
    },
    /// A key's dispatch is held: its last reconcile wrote, and a source has not observed
    /// the write yet (KEP-5647's read your own writes). Reported once per wait.
    HeldForOwnWrites {
        /// The key.
        parent: P,
        /// What it waits for: each source and the version its cursor must reach.
        waits: Vec<(SourceId, u64)>,
    },
    /// Every write a held key waited for was observed: it is dispatched.
    OwnWritesObserved {
        /// The key.
        parent: P,
        /// How long its dispatch was held.
        held_for: Duration,
    },
    /// A held key waited `Config::read_own_writes` for its writes: it is dispatched
    /// anyway, on a cache that may not show them.
    OwnWritesUnobserved {
        /// The key.
        parent: P,
        /// How long its dispatch was held.
        held_for: Duration,
    },
    /// A write reported by a reconcile is not waited for (the wait fails open).
    OwnWriteUntracked {
        /// The key.
        parent: P,
        /// The write.
        write: OwnWrite,
        /// Why.
        reason: Untracked,
    },
    /// A reconcile asked to run again after `delay`.
    RequeueScheduled {
        /// The key.
        parent: P,
        /// Until the rerun.
        delay: Duration,
    },
    /// The resync period elapsed: every parent with members was queued.
    Resync {
        /// How many parents were queued.
        parents: usize,
    },
    /// A reconcile-all trigger came: every parent with members was queued.
    ReconcileAll {
        /// How many parents were queued.
        parents: usize,
    },
    /// A one-key trigger ([`Input::ReconcileOn`](crate::Input::ReconcileOn)) came.
    ReconcileOn {
        /// The primary object named.
        object: ObjectKey,
        /// Its parent, queued; `None` when the object is not in the primary cache (nothing
        /// is queued).
        parent: Option<P>,
    },
    /// The in-process stream did not open with a whole-world `Replace`: closed, reopened later.
    SourceNotSynced {
        /// The stream.
        stream: StreamId,
    },
    /// The in-process stream ended; reopened after `source_retry_delay`.
    SourceEnded {
        /// The stream.
        stream: StreamId,
        /// The error it ended with, if any.
        error: Option<String>,
    },
    /// An update of `key` was cached, but the configured predicate kept it from waking its
    /// parent.
    Filtered {
        /// The source the update came from.
        source: SourceId,
        /// The object.
        key: ObjectKey,
        /// The predicate, as it prints (`generation`, `any(labels,annotations)`, ...).
        by: Arc<str>,
    },
    /// A graceful stop began: nothing new is dispatched, and the loop stops once the
    /// `running` reconciles have finished.
    Draining {
        /// Reconciles still running.
        running: usize,
    },
    /// This candidate won the election: reconciles may run.
    LeadershipAcquired {
        /// This candidate.
        identity: String,
        /// The Lease's `leaseTransitions` after the win.
        transitions: u32,
    },
    /// This candidate stopped leading: no reconcile starts until it wins again.
    LeadershipLost {
        /// This candidate.
        identity: String,
        /// Why.
        reason: LostReason,
    },
    /// This replica began a term on a shard's Lease: that shard's keys may be dispatched.
    ShardAcquired {
        /// The shard.
        shard: u32,
        /// This replica.
        identity: String,
        /// The shard Lease's `leaseTransitions` after the win.
        transitions: u32,
    },
    /// This replica's term on a shard ended: none of that shard's keys starts here.
    ShardLost {
        /// The shard.
        shard: u32,
        /// Why.
        reason: LostReason,
    },
    /// This replica gives a shard up to rebalance: its keys start no more, and its Lease
    /// is written free once the `running` reconciles of its keys have ended.
    ShardReleasing {
        /// The shard.
        shard: u32,
        /// That shard's reconciles still running here.
        running: usize,
    },
    /// The shard table's view of the replicas changed.
    ShardMembers {
        /// Replicas whose membership Lease is live, this one included.
        live: usize,
        /// Shards this replica holds at most: `ceil(shards / live)`.
        target: usize,
    },
    /// The primary now asks the apiserver for these shards' objects alone (KEP-5866's
    /// `shardSelector`), and lists them; empty: no shard is held, nothing is listed and the
    /// cache is emptied.
    ShardsSelected {
        /// The shards asked for, ascending.
        shards: Vec<u32>,
    },
    /// The apiserver sent an object outside the shards asked for: it ignores
    /// `shardSelector` (its `ShardedListAndWatch` gate is off, or it predates it). The
    /// replica caches every object from now on and filters on dispatch.
    ShardSelectionIgnored {
        /// The object outside the shards asked for that showed it, and its shard; `None`
        /// when a LIST asked with the selector came back without `metadata.shardInfo`.
        outside: Option<(ObjectKey, u32)>,
    },
    /// The Lease names a new holder (`None`: released, or never held).
    LeaderObserved {
        /// The holder now.
        holder: Option<String>,
    },
    /// A Lease request failed; the election tries again after `retry_period`.
    LeaseFailed {
        /// The request.
        req: RequestId,
        /// What went wrong.
        error: String,
    },
    /// A streaming list's initial events ended (the bookmark annotated
    /// `k8s.io/initial-events-end`): they were applied as one listing, and the stream goes
    /// on as the watch.
    InitialEventsEnd {
        /// The stream.
        stream: StreamId,
        /// Objects in the listing.
        objects: usize,
        /// The bookmark's version: the cursor from now on.
        resource_version: String,
    },
    /// A streaming list's WATCH failed before its initial events ended: the events gathered
    /// are dropped, and the streaming list is asked for again after `retry_delay`.
    InitialEventsFailed {
        /// The stream.
        stream: StreamId,
        /// Why.
        reason: InitialEventsFailure,
    },
    /// The source stops streaming its listings and uses LIST+WATCH from now on.
    StreamingListFallback {
        /// The source.
        source: SourceId,
        /// Why.
        reason: StreamingFallback,
    },
    /// An input named a request, stream or ticket that is no longer live: ignored.
    Stale {
        /// What it was.
        input: &'static str,
    },
}

/// Why a LIST failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListFailure {
    /// No response.
    Transport(String),
    /// A non-200 status, with the `Status` body if there was one.
    Status(u16, Option<Status>),
    /// A 200 whose body is unusable.
    Body(ListBodyError),
    /// The pages of a paged LIST gathered so far hold more than one listing may.
    TooManyPages {
        /// Pages gathered, the one over the bound included.
        pages: u32,
        /// Items they hold.
        items: usize,
        /// Their body bytes.
        bytes: u64,
        /// The bound on items.
        max_items: usize,
        /// The bound on body bytes.
        max_bytes: u64,
    },
}

impl fmt::Display for ListFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ListFailure::Transport(e) => write!(f, "transport: {e}"),
            ListFailure::Status(code, Some(status)) => write!(f, "HTTP {code}: {status}"),
            ListFailure::Status(code, None) => write!(f, "HTTP {code}"),
            ListFailure::Body(e) => write!(f, "{e}"),
            ListFailure::TooManyPages {
                pages,
                items,
                bytes,
                max_items,
                max_bytes,
            } => write!(
                f,
                "paged listing too large: {pages} pages hold {items} items in {bytes} bytes \
                 (at most {max_items} items, {max_bytes} bytes)"
            ),
        }
    }
}

/// Why a streaming list's WATCH ended before its initial events did (and is asked for
/// again).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InitialEventsFailure {
    /// The server closed the stream without error.
    Ended,
    /// The connection failed.
    Transport(String),
    /// A non-200 status that neither condemns the cursor nor refuses the request.
    HttpStatus(u16, Option<Status>),
    /// An ERROR frame that does not condemn the cursor.
    ErrorFrame(Status),
}

impl fmt::Display for InitialEventsFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InitialEventsFailure::Ended => f.write_str("ended before initial-events-end"),
            InitialEventsFailure::Transport(e) => write!(f, "transport: {e}"),
            InitialEventsFailure::HttpStatus(code, Some(status)) => {
                write!(f, "HTTP {code}: {status}")
            }
            InitialEventsFailure::HttpStatus(code, None) => write!(f, "HTTP {code}"),
            InitialEventsFailure::ErrorFrame(status) => write!(f, "ERROR frame {status}"),
        }
    }
}

/// Why a source stopped streaming its listings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamingFallback {
    /// The apiserver refused the request: 400 or 422, as one that does not know
    /// `sendInitialEvents`, or whose `WatchList` feature gate is off, answers.
    Refused(u16, Option<Status>),
    /// No end bookmark within `Config::list_deadline`: the server ignored the parameters,
    /// or streams slower than a listing may take.
    NoEndBookmark {
        /// Object events gathered by then.
        events: u64,
        /// The deadline.
        after: Duration,
    },
    /// The events gathered outgrew what one listing may hold before the end bookmark.
    TooLarge {
        /// Objects gathered.
        items: usize,
        /// Their line bytes.
        bytes: u64,
        /// The bound on objects.
        max_items: usize,
        /// The bound on bytes.
        max_bytes: u64,
    },
}

impl fmt::Display for StreamingFallback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StreamingFallback::Refused(code, Some(status)) => {
                write!(f, "refused: HTTP {code}: {status}")
            }
            StreamingFallback::Refused(code, None) => write!(f, "refused: HTTP {code}"),
            StreamingFallback::NoEndBookmark { events, after } => write!(
                f,
                "no initial-events-end bookmark within {}s ({events} events)",
                after.as_secs_f64()
            ),
            StreamingFallback::TooLarge {
                items,
                bytes,
                max_items,
                max_bytes,
            } => write!(
                f,
                "initial events too large: {items} objects in {bytes} bytes \
                 (at most {max_items} objects, {max_bytes} bytes)"
            ),
        }
    }
}

/// Why the reflector relists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RelistReason {
    /// An in-band ERROR frame said the cursor is expired (410 / Expired / Gone) or too new
    /// (504 / ResourceVersionTooLarge).
    ErrorFrame(Status),
    /// The WATCH itself answered 410 or 504.
    HttpStatus(u16, Option<Status>),
    /// A frame that tells no resourceVersion: the cursor cannot move past it.
    UndecodableFrame(FrameError),
    /// The replica's shards moved and the apiserver selects by shard: the source lists its
    /// new shards' objects, and forgets the old ones.
    ShardsMoved,
}

impl fmt::Display for RelistReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RelistReason::ErrorFrame(status) => write!(f, "ERROR frame {status}"),
            RelistReason::HttpStatus(code, Some(status)) => write!(f, "HTTP {code}: {status}"),
            RelistReason::HttpStatus(code, None) => write!(f, "HTTP {code}"),
            RelistReason::UndecodableFrame(e) => write!(f, "{e}"),
            RelistReason::ShardsMoved => f.write_str("shards moved"),
        }
    }
}

/// Why a watch is reopened from its cursor after a delay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchRetryReason {
    /// The stream ended cleanly within a second without a single frame (Go's "very short
    /// watch"): reopening at once could spin.
    ShortWatch,
    /// The connection failed.
    Transport(String),
    /// A non-200 status other than 410 / 504.
    HttpStatus(u16, Option<Status>),
    /// An ERROR frame that does not condemn the cursor.
    ErrorFrame(Status),
}

impl fmt::Display for WatchRetryReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WatchRetryReason::ShortWatch => f.write_str("very short watch"),
            WatchRetryReason::Transport(e) => write!(f, "transport: {e}"),
            WatchRetryReason::HttpStatus(code, Some(status)) => write!(f, "HTTP {code}: {status}"),
            WatchRetryReason::HttpStatus(code, None) => write!(f, "HTTP {code}"),
            WatchRetryReason::ErrorFrame(status) => write!(f, "ERROR frame {status}"),
        }
    }
}

/// Why a reported write is not waited for (the wait fails open).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Untracked {
    /// The resourceVersion is not a decimal number, so it cannot be compared with a cursor
    /// (resourceVersions are opaque to clients; Kubernetes' own implementation compares them
    /// as numbers and fails open when it cannot).
    NotANumber,
    /// The source keeps no resourceVersion cursor (an in-process source), or is not
    /// configured.
    NoCursor,
    /// The source's cursor is not a number.
    OpaqueCursor,
    /// Already this many keys wait for their writes (`Config::max_own_writes`): new writes fail open until some are observed.
    Full(usize),
}

impl fmt::Display for Untracked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Untracked::NotANumber => f.write_str("resourceVersion is not a number"),
            Untracked::NoCursor => f.write_str("source keeps no cursor"),
            Untracked::OpaqueCursor => f.write_str("source's cursor is not a number"),
            Untracked::Full(n) => write!(f, "{n} keys wait already"),
        }
    }
}

/// Why a deadline was scheduled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Wake {
    /// Retry a failed LIST, or relist after a dead cursor.
    ListRetry,
    /// Reopen a WATCH from the cursor.
    WatchRetry,
    /// A streaming list's time to gather its initial events is up.
    ListDeadline,
    /// Reopen the in-process source.
    SourceReopen,
    /// A key's backoff or requeue-after elapsed.
    Requeue,
    /// The resync period elapsed.
    Resync,
    /// Time to try to acquire or renew the election's Lease.
    LeaseRetry,
    /// The leader's term ends unless renewed by then.
    TermEnd,
    /// A running reconcile's deadline (`Config::reconcile_timeout`).
    ReconcileTimeout,
    /// A key held for its own writes has waited `Config::read_own_writes`: it is
    /// dispatched anyway.
    OwnWrites,
    /// A debounced key's requests have paused for `Config::debounce`: it is queued.
    Debounce,
}

impl fmt::Display for Wake {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Wake::ListRetry => "list-retry",
            Wake::WatchRetry => "watch-retry",
            Wake::ListDeadline => "list-deadline",
            Wake::SourceReopen => "source-reopen",
            Wake::Requeue => "requeue",
            Wake::Resync => "resync",
            Wake::LeaseRetry => "lease-retry",
            Wake::TermEnd => "term-end",
            Wake::ReconcileTimeout => "reconcile-timeout",
            Wake::OwnWrites => "own-writes",
            Wake::Debounce => "debounce",
        })
    }
}

/// When to feed [`Input::Timeout`], and why.
///
/// [`Input::Timeout`]: crate::Input::Timeout
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadline {
    /// The instant.
    pub at: Instant,
    /// The reason it was scheduled.
    pub wake: Wake,
}

/// The queue of outputs not yet polled.
pub(crate) type Outbox<O, P> = VecDeque<Output<O, P>>;

/// One output of the core. Drain with [`ReconcileLoop::poll_output`] until `Timeout`.
///
/// [`ReconcileLoop::poll_output`]: crate::ReconcileLoop::poll_output
#[derive(Debug, Clone)]
pub enum Output<O, P> {
    /// Perform this.
    Command(Command<O, P>),
    /// Log or count this.
    Event(Event<P>),
    /// Nothing else is queued: sleep until this deadline (or forever when `None`) or the next
    /// input, whichever comes first.
    Timeout(Option<Deadline>),
}

impl<O: Object, P: fmt::Display> fmt::Display for Command<O, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // The primary's name is left out, so single-source lines read as they always did.
            Command::List {
                req,
                source,
                params,
                limit,
                continue_token,
            } => {
                write!(f, "list {req}")?;
                if *source != SourceId::PRIMARY {
                    write!(f, " {source}")?;
                }
                write!(f, "{params}")?;
                if let Some(limit) = limit {
                    write!(f, " limit={limit}")?;
                }
                if let Some(token) = continue_token {
                    write!(f, " continue={}", short_token(token))?;
                }
                Ok(())
            }
            Command::CancelList { req } => write!(f, "cancel-list {req}"),
            Command::Watch {
                stream,
                source,
                params,
                resource_version,
                timeout_seconds,
                allow_bookmarks,
                send_initial_events,
            } => {
                write!(f, "watch {stream}")?;
                if *source != SourceId::PRIMARY {
                    write!(f, " {source}")?;
                }
                if resource_version.is_empty() {
                    f.write_str(" rv=\"\"")?;
                } else {
                    write!(f, " rv={resource_version}")?;
                }
                write!(f, " timeout={timeout_seconds}s")?;
                if *allow_bookmarks {
                    f.write_str(" bookmarks")?;
                }
                if *send_initial_events {
                    f.write_str(" initial-events")?;
                }
                write!(f, "{params}")
            }
            Command::CloseWatch { stream } => write!(f, "close-watch {stream}"),
            Command::OpenSource { stream } => write!(f, "open-source {stream}"),
            Command::CloseSource { stream } => write!(f, "close-source {stream}"),
            Command::Reconcile {
                ticket,
                parent,
                attempt,
                members,
                related,
            } => {
                write!(f, "reconcile {parent} {ticket} attempt={attempt} members=[")?;
                for (i, m) in members.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    match m.object_name() {
                        Some(name) => f.write_str(name)?,
                        None => f.write_str("?")?,
                    }
                }
                f.write_str("]")?;
                // Counts only: the secondaries' objects are type-erased here.
                for r in related {
                    write!(f, " {}={}", r.source, r.objects.len())?;
                }
                Ok(())
            }
            Command::CancelReconcile { ticket } => write!(f, "cancel-reconcile {ticket}"),
            Command::Lease {
                req,
                namespace,
                name,
                request,
            } => write!(f, "lease {req} {namespace}/{name} {request}"),
        }
    }
}

impl<P: fmt::Display> fmt::Display for Event<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Event::Synced { objects } => write!(f, "synced objects={objects}"),
            Event::ListFailed { req, error } => write!(f, "list-failed {req} ({error})"),
            Event::ListPage {
                req,
                items,
                total,
                more,
            } => write!(
                f,
                "list-page {req} items={items} total={total} {}",
                if *more { "continue" } else { "last" }
            ),
            Event::ListPageExpired { req, pages, status } => {
                write!(f, "list-page-expired {req} pages={pages}, full list next")?;
                match status {
                    Some(status) => write!(f, " (HTTP 410: {status})"),
                    None => f.write_str(" (HTTP 410)"),
                }
            }
            Event::ListItemSkipped { req, error } => {
                write!(
                    f,
                    "list-item-skipped {req} #{} ({})",
                    error.index, error.message
                )
            }
            Event::FrameSkipped { stream, error } => write!(f, "frame-skipped {stream} ({error})"),
            // The primary's name is left out, as in commands.
            Event::Relist { source, reason } if *source == SourceId::PRIMARY => {
                write!(f, "relist ({reason})")
            }
            Event::Relist { source, reason } => write!(f, "relist {source} ({reason})"),
            Event::WatchRetry { stream, reason } => write!(f, "watch-retry {stream} ({reason})"),
            Event::Unmapped {
                key,
                error,
                evicted_from,
            } => {
                write!(f, "unmapped {key} ({error})")?;
                if let Some(p) = evicted_from {
                    write!(f, " evicted-from={p}")?;
                }
                Ok(())
            }
            Event::Unnamed => f.write_str("unnamed-object-refused"),
            Event::BackoffScheduled {
                parent,
                failures,
                delay,
                error,
            } => write!(
                f,
                "backoff {parent} failures={failures} delay={}s ({error})",
                delay.as_secs_f64()
            ),
            Event::RequeueScheduled { parent, delay } => {
                write!(f, "requeue {parent} delay={}s", delay.as_secs_f64())
            }
            Event::ErrorHandled {
                parent,
                requeue_after,
                error,
            } => match requeue_after {
                Some(d) => write!(
                    f,
                    "error-handled {parent} requeue={}s ({error})",
                    d.as_secs_f64()
                ),
                None => write!(f, "error-handled {parent} await-change ({error})"),
            },
            Event::ReconcileTimedOut {
                parent,
                ticket,
                after,
            } => write!(
                f,
                "reconcile-timed-out {parent} {ticket} after={}s",
                after.as_secs_f64()
            ),
            Event::HeldForOwnWrites { parent, waits } => {
                write!(f, "held-for-own-writes {parent} (")?;
                for (i, (source, rv)) in waits.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{source} rv>={rv}")?;
                }
                f.write_str(")")
            }
            Event::OwnWritesObserved { parent, held_for } => write!(
                f,
                "own-writes-observed {parent} held={}s",
                held_for.as_secs_f64()
            ),
            Event::OwnWritesUnobserved { parent, held_for } => write!(
                f,
                "own-writes-unobserved {parent} held={}s, dispatched anyway",
                held_for.as_secs_f64()
            ),
            Event::OwnWriteUntracked {
                parent,
                write,
                reason,
            } => write!(
                f,
                "own-write-untracked {parent} {} rv={} ({reason})",
                write.source, write.resource_version
            ),
            Event::Resync { parents } => write!(f, "resync parents={parents}"),
            Event::ReconcileAll { parents } => write!(f, "reconcile-all parents={parents}"),
            Event::ReconcileOn { object, parent } => match parent {
                Some(parent) => write!(f, "reconcile-on {object} parent={parent}"),
                None => write!(
                    f,
                    "reconcile-on {object} not in the primary cache, nothing queued"
                ),
            },
            Event::SourceNotSynced { stream } => write!(f, "source-not-synced {stream}"),
            Event::SourceEnded { stream, error } => match error {
                Some(e) => write!(f, "source-ended {stream} ({e})"),
                None => write!(f, "source-ended {stream}"),
            },
            Event::Stale { input } => write!(f, "stale {input} ignored"),
            Event::InitialEventsEnd {
                stream,
                objects,
                resource_version,
            } => write!(
                f,
                "initial-events-end {stream} objects={objects} rv={resource_version}"
            ),
            Event::InitialEventsFailed { stream, reason } => {
                write!(
                    f,
                    "initial-events-failed {stream} ({reason}), streaming list again"
                )
            }
            Event::StreamingListFallback { source, reason } => {
                f.write_str("streaming-list-fallback")?;
                if *source != SourceId::PRIMARY {
                    write!(f, " {source}")?;
                }
                write!(f, " ({reason}), LIST+WATCH from now on")
            }
            Event::LeadershipAcquired {
                identity,
                transitions,
            } => write!(f, "leading {identity} transitions={transitions}"),
            Event::LeadershipLost { identity, reason } => {
                write!(f, "leadership lost {identity} ({reason})")
            }
            Event::LeaseFailed { req, error } => write!(f, "lease {req} failed ({error})"),
            Event::ShardAcquired {
                shard,
                identity,
                transitions,
            } => write!(
                f,
                "shard {shard} held by {identity} transitions={transitions}"
            ),
            Event::ShardLost { shard, reason } => write!(f, "shard {shard} lost ({reason})"),
            Event::ShardReleasing { shard, running } => {
                write!(f, "shard {shard} releasing running={running}")
            }
            Event::ShardMembers { live, target } => {
                write!(f, "shard members live={live} target={target}")
            }
            Event::ShardsSelected { shards } => {
                f.write_str("shards selected [")?;
                for (i, shard) in shards.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{shard}")?;
                }
                f.write_str("]")
            }
            Event::ShardSelectionIgnored {
                outside: Some((object, shard)),
            } => write!(
                f,
                "shard selection ignored by the apiserver ({object} is in shard {shard}), caching every object"
            ),
            Event::ShardSelectionIgnored { outside: None } => f.write_str(
                "shard selection ignored by the apiserver (its LIST has no shardInfo), caching every object",
            ),
            Event::LeaderObserved { holder: Some(h) } => write!(f, "leader is {h}"),
            Event::Draining { running } => write!(f, "draining running={running}"),
            Event::Filtered { source, key, by } if *source == SourceId::PRIMARY => {
                write!(f, "filtered {key} (by {by})")
            }
            Event::Filtered { source, key, by } => write!(f, "filtered {source} {key} (by {by})"),
            Event::LeaderObserved { holder: None } => f.write_str("no leader"),
        }
    }
}

/// A continue token as a step line shows it: whole up to 16 characters, else its first 12
/// and `…` (real tokens are base64 of about 100 characters).
fn short_token(token: &str) -> String {
    if token.chars().count() <= 16 {
        token.to_owned()
    } else {
        let head: String = token.chars().take(12).collect();
        format!("{head}…")
    }
}

impl fmt::Display for Deadline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.at, self.wake)
    }
}
