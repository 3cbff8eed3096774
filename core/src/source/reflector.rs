//! The reflector: keeps a cursor into the apiserver's history and turns LIST and WATCH
//! responses into store writes (client-go's `cache.Reflector`).
//!
//! - The cursor follows arrival order and is never compared: a LIST's version, then each
//!   frame's (bookmarks included).
//! - 410 / 504, as the HTTP status of a WATCH or as an in-band ERROR frame (code 410 / 504,
//!   reason `Expired` / `Gone`, cause `ResourceVersionTooLarge`), condemns the cursor: LIST
//!   again. An ERROR frame also ends its stream: the rest is discarded and the stream closed.
//! - A clean end of a WATCH reopens it from the cursor, without a LIST.
//! - A frame that does not decode but names its resourceVersion is skipped and the cursor
//!   advances; one that names none forces a LIST.
//! - Every retry waits `retry_delay`.
//! - A paged LIST (`WatchParams::list_page_size`) asks for each next page with the previous
//!   page's `continue` token and gathers the items, untouched by the store, until a page
//!   comes without one; the listing is then applied as one `Replace` at the last page's
//!   version, so no half-listed state is ever visible. The pages gathered are bounded
//!   ([`MAX_LISTING_ITEMS`], [`MAX_LISTING_BYTES`]). A 410 on a continuation (the token
//!   outlived the compaction window) drops them and lists again at once, unpaged, as
//!   client-go's pager does (`FullListIfExpired`), so a listing slower than the window
//!   still completes; any other failure of a page retries from the first page after
//!   `retry_delay`.
//! - A streaming list ([`InitialListStrategy::StreamingList`]) replaces the LIST by a WATCH
//!   from `""` with `sendInitialEvents=true` (client-go's WatchList). Its events are gathered,
//!   untouched by the store, until the bookmark annotated `k8s.io/initial-events-end`; they
//!   are then applied as one `Replace` at its version, and the same stream goes on as the
//!   watch. The gathering is bounded like a paged listing ([`MAX_LISTING_ITEMS`],
//!   [`MAX_LISTING_BYTES`]) and in time (`Config::list_deadline`). A 410 / 504 drops the
//!   events and streams again after `retry_delay`, as does any failure the server may
//!   recover from. A refusal of the request (400 / 422: an older apiserver, or the
//!   `WatchList` feature gate off), or the bounds or the deadline passed without the end
//!   bookmark (a server that ignored the parameters), makes the source fall back to
//!   LIST+WATCH for good: the next listing is a LIST, at once.

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use std::collections::BTreeMap;

use crate::source::params::{InitialListStrategy, WatchParams};

use crate::source::Change;
use crate::time::Instant;
use crate::vocabulary::{
    Command, Deadline, Event, InitialEventsFailure, ListFailure, ListResponse, MintIds, Outbox,
    Output, RelistReason, RequestId, SourceId, StreamEnd, StreamId, StreamingFallback, Wake,
    WatchRetryReason,
};
use crate::wire::format::WireFormat;
use crate::wire::frame::{self, WatchEvent};
use crate::wire::list::{self, ListBodyError, ObjectList};
use crate::wire::object::Object;
use crate::wire::status::Status;

/// A watch that ends within this long without a frame is treated as failed (Go's rule).
const SHORT_WATCH: Duration = Duration::from_secs(1);

/// The most items a paged listing may gather (the decoder's default
/// [`ListLimits::max_items`](crate::list::ListLimits::max_items), which bounds one unpaged
/// LIST).
pub const MAX_LISTING_ITEMS: usize = 1_000_000;

/// The most body bytes a listing may gather by default (`Config::max_listing_bytes`): 2 GiB,
/// the engine's default bound on one unpaged LIST body (`Limits::max_list_body`). It is sized
/// for Kubernetes' scalability envelope (150k pods in a cluster, at up to about 14 KB each
/// as JSON), not for what a typical controller lists; what the listing holds once decoded is
/// bounded apart, by the decode budget.
pub const MAX_LISTING_BYTES: u64 = 2 << 30;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Next {
    List,
    Watch,
}

#[derive(Debug, PartialEq, Eq)]
enum Phase {
    Idle,
    Listing {
        req: RequestId,
    },
    Watching {
        stream: StreamId,
        since: Instant,
        frames: u64,
    },
    Waiting {
        at: Instant,
        next: Next,
    },
    Stopped,
}

/// The reflector's timings, from the loop's [`Config`](crate::Config).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timing {
    /// Wait before every retry.
    pub(crate) retry_delay: Duration,
    /// How long a streaming list may gather its initial events.
    pub(crate) list_deadline: Duration,
    /// The most bytes one listing (pages, or initial events) may gather.
    pub(crate) max_listing_bytes: u64,
}

/// The initial events of a streaming list gathered so far.
#[derive(Debug)]
struct Initial<O> {
    /// When the streaming WATCH was asked for.
    started: Instant,
    /// The objects, by namespace and name (a later event for the same object replaces
    /// the earlier one, a `DELETED` removes it, as client-go's temporary store does).
    objects: BTreeMap<(String, String), O>,
    /// Object events gathered.
    events: u64,
    /// Their line bytes.
    bytes: u64,
}

/// The pages of a paged LIST gathered so far.
#[derive(Debug)]
struct Pages<O> {
    /// Pages received.
    pages: u32,
    /// Their items, in order.
    items: Vec<O>,
    /// Their body bytes.
    bytes: u64,
}

/// A listing of the shards just gained (server-side selection, issue 33), while the watch
/// waits to resume where it stood: only the new shards' objects are listed, not every
/// shard held.
#[derive(Debug)]
struct Gained {
    /// The watch's cursor at the move; it resumes from there once the listing is in.
    resume: String,
    /// What the watch asks for then: every shard held. `params` lists the gained ones.
    watch: Arc<WatchParams>,
}

/// What the reflector has done so far.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Counters {
    pub(crate) frames: u64,
    pub(crate) frames_skipped: u64,
    pub(crate) lists: u64,
    pub(crate) watches: u64,
    pub(crate) relists: u64,
    pub(crate) stale_inputs: u64,
    /// LIST body bytes received (a body decoded while streaming counts as read).
    pub(crate) list_bytes: u64,
    /// When the cursor last moved (a listing, an object frame, a bookmark, a skipped frame).
    pub(crate) cursor_at: Option<Instant>,
}

/// The reflector's state. Children of the loop: it writes its commands and events straight
/// into the loop's outbox and hands store writes back to the caller.
#[derive(Debug)]
pub(crate) struct Reflector<O> {
    source: SourceId,
    params: Arc<WatchParams>,
    retry_delay: Duration,
    list_deadline: Duration,
    /// Invariant: `Some` whenever a WATCH is open or about to be opened, except a streaming
    /// list's WATCH until its initial events end.
    cursor: Option<String>,
    /// Listings are streamed: the source asked for it and the server has not refused.
    streaming: bool,
    /// The streaming list's initial events, while the open WATCH is one gathering them.
    /// Never applied before the end bookmark.
    initial: Option<Box<Initial<O>>>,
    /// The most objects and line bytes the initial events may hold: [`MAX_LISTING_ITEMS`]
    /// and `Config::max_listing_bytes` (lowered by unit tests).
    max_initial: (usize, u64),
    /// The most body bytes a paged listing may gather (`Config::max_listing_bytes`).
    max_listing_bytes: u64,
    phase: Phase,
    /// The pages of the listing in flight, from its second page request on; `None` otherwise.
    /// Never applied before the last page.
    pages: Option<Pages<O>>,
    /// The next first page is asked for unpaged: the last listing's continue token expired.
    unpaged_next: bool,
    /// A LIST asked with a shard selector came back without `metadata.shardInfo`: the
    /// apiserver does not select by shard. Taken by the loop.
    selector_ignored: bool,
    /// The listing of shards just gained, while in flight.
    gained: Option<Gained>,
    /// The version of the gained shards' listing just returned, taken by the loop: that
    /// listing is to be merged with the cache, not replace it.
    gained_listed: Option<u64>,
    counters: Counters,
    object: PhantomData<fn() -> O>,
}

impl<O: Object> Reflector<O> {
    pub(crate) fn new(source: SourceId, params: WatchParams, timing: Timing) -> Self {
        Reflector {
            source,
            streaming: params.initial_list == InitialListStrategy::StreamingList,
            params: Arc::new(params),
            retry_delay: timing.retry_delay,
            list_deadline: timing.list_deadline,
            cursor: None,
            initial: None,
            max_initial: (MAX_LISTING_ITEMS, timing.max_listing_bytes),
            max_listing_bytes: timing.max_listing_bytes,
            phase: Phase::Idle,
            pages: None,
            unpaged_next: false,
            selector_ignored: false,
            gained: None,
            gained_listed: None,
            counters: Counters::default(),
            object: PhantomData,
        }
    }

    pub(crate) fn counters(&self) -> Counters {
        self.counters
    }

    pub(crate) fn cursor(&self) -> Option<&str> {
        self.cursor.as_deref()
    }

    /// The LIST in flight, if any: its answer is this reflector's to handle.
    pub(crate) fn current_list(&self) -> Option<RequestId> {
        match self.phase {
            Phase::Listing { req } => Some(req),
            _ => None,
        }
    }

    /// The WATCH open, if any: its lines and end are this reflector's to handle.
    pub(crate) fn current_stream(&self) -> Option<StreamId> {
        match self.phase {
            Phase::Watching { stream, .. } => Some(stream),
            _ => None,
        }
    }

    pub(crate) fn start<Q, P>(
        &mut self,
        now: Instant,
        ids: &mut (impl MintIds + ?Sized),
        out: &mut Outbox<Q, P>,
    ) {
        self.list(now, ids, out);
    }

    pub(crate) fn handle_list<Q, P>(
        &mut self,
        now: Instant,
        req: RequestId,
        response: ListResponse<O>,
        ids: &mut (impl MintIds + ?Sized),
        out: &mut Outbox<Q, P>,
    ) -> Option<Change<O>> {
        if !self.is_current_list(req, out) {
            return None;
        }
        let error = match response {
            ListResponse::TransportError(e) => ListFailure::Transport(e),
            ListResponse::Decoded(list) => return self.listed(now, req, list, ids, out),
            ListResponse::Response { status: 200, body } => {
                return self.listed(now, req, list::parse_list::<O>(&body), ids, out);
            }
            ListResponse::Response { status, body } => {
                self.counters.list_bytes += body.len() as u64;
                let status_body = frame::parse_status(&body);
                if status == 410
                    && let Some(pages) = self.pages.take()
                {
                    out.push_back(Output::Event(Event::ListPageExpired {
                        req,
                        pages: pages.pages,
                        status: status_body,
                    }));
                    self.unpaged_next = true;
                    self.list(now, ids, out);
                    return None;
                }
                ListFailure::Status(status, status_body)
            }
        };
        self.list_failed(now, req, error, out);
        None
    }

    /// Whether `req` is the LIST in flight; an answer to any other is reported stale.
    fn is_current_list<Q, P>(&mut self, req: RequestId, out: &mut Outbox<Q, P>) -> bool {
        if matches!(self.phase, Phase::Listing { req: current } if current == req) {
            return true;
        }
        self.counters.stale_inputs += 1;
        out.push_back(Output::Event(Event::Stale {
            input: "list response",
        }));
        false
    }

    fn listed<Q, P>(
        &mut self,
        now: Instant,
        req: RequestId,
        list: Result<ObjectList<O>, ListBodyError>,
        ids: &mut (impl MintIds + ?Sized),
        out: &mut Outbox<Q, P>,
    ) -> Option<Change<O>> {
        let list = match list {
            Ok(list) => list,
            Err(e) => {
                self.list_failed(now, req, ListFailure::Body(e), out);
                return None;
            }
        };
        for error in list.skipped {
            out.push_back(Output::Event(Event::ListItemSkipped { req, error }));
        }
        let filtered_by_shard = list.shard_selector.is_some();
        self.counters.list_bytes += list.body_bytes;
        let items = match (self.pages.take(), list.continue_token) {
            // One page, as every unpaged LIST: applied as it is.
            (None, None) => list.items,
            (gathered, next) => {
                let mut pages = gathered.unwrap_or(Pages {
                    pages: 0,
                    items: Vec::new(),
                    bytes: 0,
                });
                let page_items = list.items.len();
                pages.pages = pages.pages.saturating_add(1);
                pages.bytes = pages.bytes.saturating_add(list.body_bytes);
                let total = pages.items.len().saturating_add(page_items);
                if total > MAX_LISTING_ITEMS || pages.bytes > self.max_listing_bytes {
                    let error = ListFailure::TooManyPages {
                        pages: pages.pages,
                        items: total,
                        bytes: pages.bytes,
                        max_items: MAX_LISTING_ITEMS,
                        max_bytes: self.max_listing_bytes,
                    };
                    self.list_failed(now, req, error, out);
                    return None;
                }
                pages.items.extend(list.items);
                out.push_back(Output::Event(Event::ListPage {
                    req,
                    items: page_items,
                    total,
                    more: next.is_some(),
                }));
                if let Some(token) = next {
                    self.pages = Some(pages);
                    self.list_page(ids, out, Some(token));
                    return None;
                }
                pages.items
            }
        };
        // A server that selects by shard says so on the LIST; one that ignored the
        // parameter answered every object.
        let ignored = self.params.shard_selector.is_some() && !filtered_by_shard;
        self.selector_ignored |= ignored;
        match self.gained.take() {
            // Every object came back: a whole listing after all, at its own version.
            Some(gained) if ignored => {
                self.params = gained.watch;
                self.cursor = Some(list.resource_version);
            }
            // Only the gained shards were listed: the watch resumes where it stood, and
            // the loop merges the listing into the cache.
            Some(gained) => {
                self.params = gained.watch;
                let Ok(version) = list.resource_version.parse() else {
                    // Not comparable with the watch's versions, so its replay could not be
                    // told from the listing: list every shard held instead.
                    self.relist(now, RelistReason::ShardsMoved, out);
                    return None;
                };
                self.cursor = Some(gained.resume);
                self.gained_listed = Some(version);
            }
            // Every page shares the first page's version; the last page's is the listing's.
            None => self.cursor = Some(list.resource_version),
        }
        self.counters.cursor_at = Some(now);
        self.watch(now, ids, out);
        Some(Change::Replace(items.into_iter().map(Arc::new).collect()))
    }

    fn list_failed<Q, P>(
        &mut self,
        now: Instant,
        req: RequestId,
        error: ListFailure,
        out: &mut Outbox<Q, P>,
    ) {
        out.push_back(Output::Event(Event::ListFailed { req, error }));
        // A failed page drops the pages gathered: the retry starts from the first page.
        self.pages = None;
        self.wait(now, Next::List);
    }

    pub(crate) fn handle_watch_opened<Q, P>(
        &mut self,
        now: Instant,
        stream: StreamId,
        out: &mut Outbox<Q, P>,
    ) {
        match &mut self.phase {
            Phase::Watching {
                stream: current,
                since,
                ..
            } if *current == stream => *since = now,
            _ => {
                self.counters.stale_inputs += 1;
                out.push_back(Output::Event(Event::Stale {
                    input: "watch opened",
                }));
            }
        }
    }

    pub(crate) fn handle_watch_line<Q, P>(
        &mut self,
        now: Instant,
        stream: StreamId,
        line: &[u8],
        out: &mut Outbox<Q, P>,
    ) -> Option<Change<O>> {
        let Phase::Watching {
            stream: current,
            frames,
            ..
        } = &mut self.phase
        else {
            self.counters.stale_inputs += 1;
            out.push_back(Output::Event(Event::Stale {
                input: "watch frame",
            }));
            return None;
        };
        if *current != stream {
            self.counters.stale_inputs += 1;
            out.push_back(Output::Event(Event::Stale {
                input: "watch frame",
            }));
            return None;
        }
        // A blank JSON line is no frame; a protobuf frame is never skipped, even empty.
        let format = self.params.wire_format;
        let json = format == WireFormat::Json || frame::is_json_frame(line);
        if json && line.trim_ascii().is_empty() {
            return None;
        }
        *frames += 1;
        self.counters.frames += 1;
        if self.initial.is_some() {
            return self.gather(now, stream, line, format, out);
        }
        let kind = self.params.kind.as_deref();
        let event = match frame::parse_frame_as_held::<O, Arc<O>>(line, format)
            .and_then(|event| frame::check_kind::<O, _>(line, json, kind, event))
        {
            Ok(event) => event,
            Err(error) => {
                if let Some(rv) = &error.resource_version {
                    self.cursor = Some(rv.clone());
                    self.counters.cursor_at = Some(now);
                    self.counters.frames_skipped += 1;
                    out.push_back(Output::Event(Event::FrameSkipped { stream, error }));
                } else {
                    out.push_back(Output::Command(Command::CloseWatch { stream }));
                    self.relist(now, RelistReason::UndecodableFrame(error), out);
                }
                return None;
            }
        };
        let change = match event {
            WatchEvent::Added(o) | WatchEvent::Modified(o) => {
                self.advance_cursor(now, o.object_resource_version());
                Change::Upsert(o)
            }
            WatchEvent::Deleted(o) => {
                self.advance_cursor(now, o.object_resource_version());
                Change::Delete(o)
            }
            WatchEvent::Bookmark {
                resource_version, ..
            } => {
                self.cursor = Some(resource_version);
                self.counters.cursor_at = Some(now);
                return None;
            }
            WatchEvent::Error(status) => {
                out.push_back(Output::Command(Command::CloseWatch { stream }));
                self.on_error_frame(now, stream, status, out);
                return None;
            }
        };
        Some(change)
    }

    pub(crate) fn handle_watch_end<Q, P>(
        &mut self,
        now: Instant,
        stream: StreamId,
        end: StreamEnd,
        ids: &mut (impl MintIds + ?Sized),
        out: &mut Outbox<Q, P>,
    ) {
        let Phase::Watching {
            stream: current,
            since,
            frames,
        } = self.phase
        else {
            self.counters.stale_inputs += 1;
            out.push_back(Output::Event(Event::Stale { input: "watch end" }));
            return;
        };
        if current != stream {
            self.counters.stale_inputs += 1;
            out.push_back(Output::Event(Event::Stale { input: "watch end" }));
            return;
        }
        if self.initial.is_some() {
            self.initial_end(now, stream, end, ids, out);
            return;
        }
        let reason = match end {
            StreamEnd::Clean
                if frames > 0 || now.saturating_duration_since(since) >= SHORT_WATCH =>
            {
                // The server's timeoutSeconds elapsed: the cursor is still good.
                self.watch(now, ids, out);
                return;
            }
            StreamEnd::Clean => WatchRetryReason::ShortWatch,
            StreamEnd::TransportError(e) => WatchRetryReason::Transport(e),
            StreamEnd::HttpStatus { code, body } => {
                let status = frame::parse_status(&body);
                let condemned = code == 410
                    || code == 504
                    || status.as_ref().is_some_and(Status::cursor_unusable);
                if condemned {
                    self.relist(now, RelistReason::HttpStatus(code, status), out);
                    return;
                }
                WatchRetryReason::HttpStatus(code, status)
            }
        };
        out.push_back(Output::Event(Event::WatchRetry { stream, reason }));
        self.wait(now, Next::Watch);
    }

    pub(crate) fn handle_timeout<Q, P>(
        &mut self,
        now: Instant,
        ids: &mut (impl MintIds + ?Sized),
        out: &mut Outbox<Q, P>,
    ) {
        if let Phase::Waiting { at, next } = self.phase
            && at <= now
        {
            match (next, self.cursor.is_some()) {
                (Next::Watch, true) => self.watch(now, ids, out),
                _ => self.list(now, ids, out),
            }
        }
        if let (Phase::Watching { stream, .. }, Some(initial)) = (&self.phase, &self.initial)
            && initial.started + self.list_deadline <= now
        {
            let stream = *stream;
            out.push_back(Output::Command(Command::CloseWatch { stream }));
            let reason = StreamingFallback::NoEndBookmark {
                events: initial.events,
                after: self.list_deadline,
            };
            self.fall_back(now, reason, ids, out);
        }
    }

    pub(crate) fn deadline(&self) -> Option<Deadline> {
        if let (Phase::Watching { .. }, Some(initial)) = (&self.phase, &self.initial) {
            return Some(Deadline {
                at: initial.started + self.list_deadline,
                wake: Wake::ListDeadline,
            });
        }
        match self.phase {
            Phase::Waiting { at, next } => Some(Deadline {
                at,
                wake: match next {
                    Next::List => Wake::ListRetry,
                    Next::Watch => Wake::WatchRetry,
                },
            }),
            _ => None,
        }
    }

    /// Asks for another shard selection from now on. With `relist`, whatever is in flight is
    /// abandoned and the source lists at once, so that its next listing holds exactly the
    /// new selection; without, only later requests carry it (the server already answers
    /// the new selection, as when it ignored the old one).
    pub(crate) fn reselect<Q, P>(
        &mut self,
        now: Instant,
        selector: Option<String>,
        relist: bool,
        ids: &mut (impl MintIds + ?Sized),
        out: &mut Outbox<Q, P>,
    ) {
        if let Some(gained) = &mut self.gained {
            gained.watch = with_selector(&gained.watch, selector.clone());
        }
        if self.params.shard_selector != selector {
            self.params = with_selector(&self.params, selector);
        }
        if !relist || self.phase == Phase::Stopped {
            return;
        }
        self.drop_gained();
        self.abandon(out);
        self.list_for_move(now, ids, out);
    }

    /// Lists at once (the shards held, or those gained) because shards moved.
    fn list_for_move<Q, P>(
        &mut self,
        now: Instant,
        ids: &mut (impl MintIds + ?Sized),
        out: &mut Outbox<Q, P>,
    ) {
        self.cursor = None;
        self.counters.relists += 1;
        out.push_back(Output::Event(Event::Relist {
            source: self.source,
            reason: RelistReason::ShardsMoved,
        }));
        self.list(now, ids, out);
    }

    /// Moves to the shards `all` without listing those still held: lists only `gained`
    /// (the held shards the cache lacks), then watches `all` from where the watch stood;
    /// with nothing gained, watches `all` from there at once. The loop merges the listing
    /// ([`Reflector::take_gained_listed`]). Declines (`false`) when the watch has no
    /// numeric position to resume from (never synced, listing, or an apiserver whose
    /// versions are not etcd's revisions): the caller relists instead.
    pub(crate) fn move_shards<Q, P>(
        &mut self,
        now: Instant,
        all: String,
        gained: Option<String>,
        ids: &mut (impl MintIds + ?Sized),
        out: &mut Outbox<Q, P>,
    ) -> bool {
        let resume = match (&self.gained, &self.phase) {
            (Some(listing), _) => Some(listing.resume.clone()),
            (None, Phase::Watching { .. }) if self.initial.is_none() => self.cursor.clone(),
            (
                None,
                Phase::Waiting {
                    next: Next::Watch, ..
                },
            ) => self.cursor.clone(),
            _ => None,
        };
        let Some(resume) = resume.filter(|rv| rv.parse::<u64>().is_ok()) else {
            return false;
        };
        self.abandon(out);
        self.gained = None;
        let watch = with_selector(&self.params, Some(all));
        match gained {
            Some(gained) => {
                self.params = with_selector(&self.params, Some(gained));
                self.gained = Some(Gained { resume, watch });
                self.list_for_move(now, ids, out);
            }
            None => {
                self.params = watch;
                self.cursor = Some(resume);
                self.watch(now, ids, out);
            }
        }
        true
    }

    /// The version of the gained shards' listing the last answer completed, if it was one.
    pub(crate) fn take_gained_listed(&mut self) -> Option<u64> {
        self.gained_listed.take()
    }

    /// Forgets a gained shards' listing in flight; the next listing is whole, of every
    /// shard held.
    fn drop_gained(&mut self) {
        if let Some(gained) = self.gained.take() {
            self.params = gained.watch;
        }
    }

    /// Whether a LIST asked with a shard selector was answered unfiltered since last asked.
    pub(crate) fn take_selector_ignored(&mut self) -> bool {
        std::mem::take(&mut self.selector_ignored)
    }

    /// Stops listing and watching until the next [`Reflector::reselect`]: the replica holds
    /// no shard, and an empty selection cannot be written as a selector.
    pub(crate) fn pause<Q, P>(&mut self, out: &mut Outbox<Q, P>) {
        if self.phase == Phase::Stopped {
            return;
        }
        self.abandon(out);
        self.drop_gained();
        self.cursor = None;
        self.phase = Phase::Idle;
    }

    /// Cancels the LIST in flight or closes the WATCH, and drops a listing half gathered.
    fn abandon<Q, P>(&mut self, out: &mut Outbox<Q, P>) {
        match self.phase {
            Phase::Listing { req } => out.push_back(Output::Command(Command::CancelList { req })),
            Phase::Watching { stream, .. } => {
                out.push_back(Output::Command(Command::CloseWatch { stream }));
            }
            Phase::Idle | Phase::Waiting { .. } | Phase::Stopped => {}
        }
        self.pages = None;
        self.initial = None;
    }

    pub(crate) fn stop<Q, P>(&mut self, out: &mut Outbox<Q, P>) {
        self.abandon(out);
        self.drop_gained();
        self.phase = Phase::Stopped;
    }

    fn on_error_frame<Q, P>(
        &mut self,
        now: Instant,
        stream: StreamId,
        status: Status,
        out: &mut Outbox<Q, P>,
    ) {
        if status.cursor_unusable() {
            self.relist(now, RelistReason::ErrorFrame(status), out);
        } else {
            out.push_back(Output::Event(Event::WatchRetry {
                stream,
                reason: WatchRetryReason::ErrorFrame(status),
            }));
            self.wait(now, Next::Watch);
        }
    }

    /// Moves the cursor to an object frame's version, reusing the cursor's buffer.
    fn advance_cursor(&mut self, now: Instant, resource_version: Option<&str>) {
        self.counters.cursor_at = Some(now);
        // parse_frame guarantees an object frame carries a resourceVersion.
        debug_assert!(resource_version.is_some());
        if let Some(rv) = resource_version {
            match &mut self.cursor {
                Some(cursor) => {
                    cursor.clear();
                    cursor.push_str(rv);
                }
                None => self.cursor = Some(rv.to_owned()),
            }
        }
    }

    fn relist<Q, P>(&mut self, now: Instant, reason: RelistReason, out: &mut Outbox<Q, P>) {
        // The cursor is dead: never watch from it again.
        self.cursor = None;
        self.drop_gained();
        self.pages = None;
        self.initial = None;
        self.counters.relists += 1;
        out.push_back(Output::Event(Event::Relist {
            source: self.source,
            reason,
        }));
        self.wait(now, Next::List);
    }

    fn wait(&mut self, now: Instant, next: Next) {
        self.phase = Phase::Waiting {
            at: now + self.retry_delay,
            next,
        };
    }

    /// Starts a listing: a streaming list, or the first page of a LIST (the whole listing
    /// when unpaged).
    fn list<Q, P>(
        &mut self,
        now: Instant,
        ids: &mut (impl MintIds + ?Sized),
        out: &mut Outbox<Q, P>,
    ) {
        self.pages = None;
        self.initial = None;
        // The gained shards are listed by a LIST: a streaming list's events could not be
        // told from the watch's.
        if self.streaming && self.gained.is_none() {
            self.stream_list(now, ids, out);
        } else {
            self.list_page(ids, out, None);
        }
    }

    /// Opens a streaming list: a WATCH from `""` that opens with the current state.
    ///
    /// client-go sends its last synced version when a WatchList is retried after an
    /// ordinary failure and `""` after an expired one; this reflector only lists when its
    /// cursor is gone (never synced, or condemned), so `""` (a consistent read of the
    /// current state) is always the version it would send.
    fn stream_list<Q, P>(
        &mut self,
        now: Instant,
        ids: &mut (impl MintIds + ?Sized),
        out: &mut Outbox<Q, P>,
    ) {
        let stream = ids.stream();
        self.counters.watches += 1;
        self.cursor = None;
        self.phase = Phase::Watching {
            stream,
            since: now,
            frames: 0,
        };
        self.initial = Some(Box::new(Initial {
            started: now,
            objects: BTreeMap::new(),
            events: 0,
            bytes: 0,
        }));
        out.push_back(Output::Command(Command::Watch {
            stream,
            source: self.source,
            params: Arc::clone(&self.params),
            resource_version: String::new(),
            timeout_seconds: self.params.timeout_seconds,
            allow_bookmarks: true,
            send_initial_events: true,
        }));
    }

    /// One line of a streaming list before its end bookmark.
    fn gather<Q, P>(
        &mut self,
        now: Instant,
        stream: StreamId,
        line: &[u8],
        format: WireFormat,
        out: &mut Outbox<Q, P>,
    ) -> Option<Change<O>> {
        let json = format == WireFormat::Json || frame::is_json_frame(line);
        let kind = self.params.kind.as_deref();
        let event = match frame::parse_frame_as::<O>(line, format)
            .and_then(|event| frame::check_kind::<O, O>(line, json, kind, event))
        {
            Ok(event) => event,
            Err(error) => {
                if error.resource_version.is_some() {
                    // Left out of the listing, as a LIST item that does not decode is.
                    self.counters.frames_skipped += 1;
                    out.push_back(Output::Event(Event::FrameSkipped { stream, error }));
                } else {
                    out.push_back(Output::Command(Command::CloseWatch { stream }));
                    self.relist(now, RelistReason::UndecodableFrame(error), out);
                }
                return None;
            }
        };
        let initial = self.initial.as_mut()?;
        let (object, keep) = match event {
            WatchEvent::Added(o) | WatchEvent::Modified(o) => (o, true),
            WatchEvent::Deleted(o) => (o, false),
            WatchEvent::Bookmark {
                resource_version,
                initial_events_end,
            } => {
                if !initial_events_end {
                    return None;
                }
                let initial = self.initial.take()?;
                let objects: Vec<O> = initial.objects.into_values().collect();
                out.push_back(Output::Event(Event::InitialEventsEnd {
                    stream,
                    objects: objects.len(),
                    resource_version: resource_version.clone(),
                }));
                self.counters.list_bytes += initial.bytes;
                self.cursor = Some(resource_version);
                self.counters.cursor_at = Some(now);
                return Some(Change::Replace(objects.into_iter().map(Arc::new).collect()));
            }
            WatchEvent::Error(status) => {
                out.push_back(Output::Command(Command::CloseWatch { stream }));
                if status.cursor_unusable() {
                    self.relist(now, RelistReason::ErrorFrame(status), out);
                } else {
                    self.initial_failed(now, stream, InitialEventsFailure::ErrorFrame(status), out);
                }
                return None;
            }
        };
        initial.events += 1;
        initial.bytes = initial.bytes.saturating_add(line.len() as u64);
        let key = (
            object.object_namespace().unwrap_or_default().to_owned(),
            object.object_name().unwrap_or_default().to_owned(),
        );
        if keep {
            initial.objects.insert(key, object);
        } else {
            initial.objects.remove(&key);
        }
        let (max_items, max_bytes) = self.max_initial;
        if initial.objects.len() > max_items || initial.bytes > max_bytes {
            let reason = StreamingFallback::TooLarge {
                items: initial.objects.len(),
                bytes: initial.bytes,
                max_items,
                max_bytes,
            };
            out.push_back(Output::Command(Command::CloseWatch { stream }));
            self.fall_back_later(now, reason, out);
        }
        None
    }

    /// A streaming list's WATCH ended before its end bookmark.
    fn initial_end<Q, P>(
        &mut self,
        now: Instant,
        stream: StreamId,
        end: StreamEnd,
        ids: &mut (impl MintIds + ?Sized),
        out: &mut Outbox<Q, P>,
    ) {
        let failure = match end {
            StreamEnd::Clean => InitialEventsFailure::Ended,
            StreamEnd::TransportError(e) => InitialEventsFailure::Transport(e),
            StreamEnd::HttpStatus { code, body } => {
                let status = frame::parse_status(&body);
                if code == 410
                    || code == 504
                    || status.as_ref().is_some_and(Status::cursor_unusable)
                {
                    self.relist(now, RelistReason::HttpStatus(code, status), out);
                    return;
                }
                if code == 400 || code == 422 {
                    let reason = StreamingFallback::Refused(code, status);
                    self.fall_back(now, reason, ids, out);
                    return;
                }
                InitialEventsFailure::HttpStatus(code, status)
            }
        };
        self.initial_failed(now, stream, failure, out);
    }

    fn initial_failed<Q, P>(
        &mut self,
        now: Instant,
        stream: StreamId,
        reason: InitialEventsFailure,
        out: &mut Outbox<Q, P>,
    ) {
        self.initial = None;
        out.push_back(Output::Event(Event::InitialEventsFailed { stream, reason }));
        self.wait(now, Next::List);
    }

    /// Stops streaming listings for good and lists at once.
    fn fall_back<Q, P>(
        &mut self,
        now: Instant,
        reason: StreamingFallback,
        ids: &mut (impl MintIds + ?Sized),
        out: &mut Outbox<Q, P>,
    ) {
        self.fall_back_later(now, reason, out);
        self.list(now, ids, out);
    }

    /// Stops streaming listings for good; the LIST follows after `retry_delay` (inside a
    /// line's handling, where no id can be minted).
    fn fall_back_later<Q, P>(
        &mut self,
        now: Instant,
        reason: StreamingFallback,
        out: &mut Outbox<Q, P>,
    ) {
        self.streaming = false;
        self.initial = None;
        out.push_back(Output::Event(Event::StreamingListFallback {
            source: self.source,
            reason,
        }));
        self.wait(now, Next::List);
    }

    /// Asks for the page `continue_token` names, or the first page when `None`.
    fn list_page<Q, P>(
        &mut self,
        ids: &mut (impl MintIds + ?Sized),
        out: &mut Outbox<Q, P>,
        continue_token: Option<String>,
    ) {
        let req = ids.request();
        self.counters.lists += 1;
        self.phase = Phase::Listing { req };
        let limit = if continue_token.is_none() && std::mem::take(&mut self.unpaged_next) {
            None
        } else {
            self.params.list_page_size
        };
        out.push_back(Output::Command(Command::List {
            req,
            source: self.source,
            params: Arc::clone(&self.params),
            limit,
            continue_token,
        }));
    }

    fn watch<Q, P>(
        &mut self,
        now: Instant,
        ids: &mut (impl MintIds + ?Sized),
        out: &mut Outbox<Q, P>,
    ) {
        let Some(cursor) = self.cursor.clone() else {
            // Unreachable by construction; relisting is the safe answer if it ever happens.
            debug_assert!(false, "WATCH without a cursor");
            return self.list(now, ids, out);
        };
        let stream = ids.stream();
        self.counters.watches += 1;
        self.phase = Phase::Watching {
            stream,
            since: now,
            frames: 0,
        };
        out.push_back(Output::Command(Command::Watch {
            stream,
            source: self.source,
            params: Arc::clone(&self.params),
            resource_version: cursor,
            timeout_seconds: self.params.timeout_seconds,
            allow_bookmarks: true,
            send_initial_events: false,
        }));
    }
}

/// `params` asking for `selector`.
fn with_selector(params: &Arc<WatchParams>, selector: Option<String>) -> Arc<WatchParams> {
    if params.shard_selector == selector {
        return Arc::clone(params);
    }
    let mut params = WatchParams::clone(params);
    params.shard_selector = selector;
    Arc::new(params)
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::fmt::Write as _;

    use super::*;
    use crate::wire::pod::PodView;

    #[derive(Default)]
    struct Ids(u64);

    impl MintIds for Ids {
        fn request(&mut self) -> RequestId {
            self.0 += 1;
            RequestId(self.0)
        }
        fn stream(&mut self) -> StreamId {
            self.0 += 1;
            StreamId(self.0)
        }
    }

    fn added(name: &str, rv: u64) -> String {
        format!(
            r#"{{"type":"ADDED","object":{{"metadata":{{"name":"{name}","namespace":"ns","resourceVersion":"{rv}"}}}}}}"#
        )
    }

    fn drain(out: &mut Outbox<PodView, String>) -> String {
        let mut line = String::new();
        for o in out.drain(..) {
            match o {
                Output::Command(c) => write!(line, "{c}; ").unwrap(),
                Output::Event(e) => write!(line, "({e}); ").unwrap(),
                Output::Timeout(_) => {}
            }
        }
        line
    }

    /// A retry after 1 s, streaming lists given 300 s, the default listing bound.
    fn timing() -> Timing {
        Timing {
            retry_delay: Duration::from_secs(1),
            list_deadline: Duration::from_secs(300),
            max_listing_bytes: MAX_LISTING_BYTES,
        }
    }

    /// Streams a listing whose events pass `bounds` at the third object.
    fn overflow(bounds: (usize, u64)) -> Vec<String> {
        let params = WatchParams::default().streaming_lists();
        let mut r = Reflector::<PodView>::new(SourceId::PRIMARY, params, timing());
        r.max_initial = bounds;
        let (mut ids, mut out) = (Ids::default(), VecDeque::new());
        let now = Instant::ZERO;
        let mut log = Vec::new();
        r.start(now, &mut ids, &mut out);
        log.push(drain(&mut out));
        for (name, rv) in [("a", 5), ("b", 6), ("c", 7)] {
            let stream = r.current_stream().expect("the streaming WATCH is open");
            assert!(
                r.handle_watch_line(now, stream, added(name, rv).as_bytes(), &mut out)
                    .is_none()
            );
            log.push(drain(&mut out));
        }
        assert!(r.initial.is_none() && r.current_stream().is_none());
        r.handle_timeout(now + Duration::from_secs(1), &mut ids, &mut out);
        log.push(drain(&mut out));
        log
    }

    #[test]
    fn initial_events_past_the_item_bound_fall_back_to_a_list() {
        let log = overflow((2, u64::MAX));
        assert_eq!(log[1], "");
        assert_eq!(log[2], "");
        assert_eq!(
            log[3],
            "close-watch W1; (streaming-list-fallback (initial events too large: 3 objects in \
             270 bytes (at most 2 objects, 18446744073709551615 bytes)), LIST+WATCH from now on); "
        );
        assert_eq!(log[4], "list L2; ");
    }

    #[test]
    fn initial_events_past_the_byte_bound_fall_back_to_a_list() {
        let log = overflow((usize::MAX, 200));
        assert!(log[3].starts_with("close-watch W1; (streaming-list-fallback (initial events too large: 3 objects in 270 bytes"), "{}", log[3]);
        assert_eq!(log[4], "list L2; ");
    }

    /// What each command in `out` asks: `list <selector>`, `watch <selector> from <rv>`,
    /// `cancel-list`, `close-watch`; events as `relist`.
    fn asks(out: &mut Outbox<PodView, String>) -> Vec<String> {
        let selector = |p: &WatchParams| p.shard_selector.clone().unwrap_or_default();
        out.drain(..)
            .filter_map(|o| match o {
                Output::Command(Command::List { params, .. }) => {
                    Some(format!("list {}", selector(&params)))
                }
                Output::Command(Command::Watch {
                    params,
                    resource_version,
                    ..
                }) => Some(format!(
                    "watch {} from {resource_version}",
                    selector(&params)
                )),
                Output::Command(Command::CancelList { .. }) => Some("cancel-list".into()),
                Output::Command(Command::CloseWatch { .. }) => Some("close-watch".into()),
                Output::Event(Event::Relist { .. }) => Some("relist".into()),
                _ => None,
            })
            .collect()
    }

    /// A filtered LIST answer (`shardInfo` set, unless `ignored`) at `rv` holding `names`.
    fn listed(rv: u64, names: &[&str], ignored: bool) -> ListResponse<PodView> {
        let items: Vec<String> = names
            .iter()
            .map(|n| {
                format!(
                    r#"{{"metadata":{{"name":"{n}","namespace":"ns","resourceVersion":"{rv}"}}}}"#
                )
            })
            .collect();
        let info = if ignored {
            ""
        } else {
            r#","shardInfo":{"selector":"s"}"#
        };
        ListResponse::Response {
            status: 200,
            body: format!(
                r#"{{"metadata":{{"resourceVersion":"{rv}"{info}}},"items":[{}]}}"#,
                items.join(",")
            )
            .into(),
        }
    }

    /// A selected reflector watching shard `A` from version 12.
    fn watching_a() -> (Reflector<PodView>, Ids, Outbox<PodView, String>) {
        let params = WatchParams {
            shard_selector: Some("A".into()),
            ..WatchParams::default()
        };
        let mut r = Reflector::<PodView>::new(SourceId::PRIMARY, params, timing());
        let (mut ids, mut out) = (Ids::default(), VecDeque::new());
        let now = Instant::ZERO;
        r.start(now, &mut ids, &mut out);
        let req = r.current_list().unwrap();
        assert!(matches!(
            r.handle_list(now, req, listed(10, &["a"], false), &mut ids, &mut out),
            Some(Change::Replace(_))
        ));
        let stream = r.current_stream().unwrap();
        r.handle_watch_line(now, stream, added("a", 12).as_bytes(), &mut out);
        assert_eq!(r.cursor(), Some("12"));
        out.clear();
        (r, ids, out)
    }

    /// [`watching_a`], then moved to `A|B`, listing the gained `B`; the commands cleared.
    fn gaining_b() -> (Reflector<PodView>, Ids, Outbox<PodView, String>) {
        let (mut r, mut ids, mut out) = watching_a();
        assert!(r.move_shards(
            Instant::ZERO,
            "A|B".into(),
            Some("B".into()),
            &mut ids,
            &mut out
        ));
        out.clear();
        (r, ids, out)
    }

    #[test]
    fn a_move_lists_the_gained_shards_then_watches_every_shard_from_the_cursor() {
        let (mut r, mut ids, mut out) = watching_a();
        let now = Instant::ZERO;
        assert!(r.move_shards(now, "A|B".into(), Some("B".into()), &mut ids, &mut out));
        assert_eq!(asks(&mut out), ["close-watch", "relist", "list B"]);
        let req = r.current_list().unwrap();
        let change = r.handle_list(now, req, listed(20, &["b"], false), &mut ids, &mut out);
        assert!(matches!(change, Some(Change::Replace(items)) if items.len() == 1));
        assert_eq!(r.take_gained_listed(), Some(20));
        assert_eq!(
            asks(&mut out),
            ["watch A|B from 12"],
            "resumed where it stood"
        );
        assert_eq!(r.cursor(), Some("12"));
    }

    #[test]
    fn a_failed_listing_of_gained_shards_is_retried_as_one() {
        let (mut r, mut ids, mut out) = gaining_b();
        let now = Instant::ZERO;
        let req = r.current_list().unwrap();
        let failed = ListResponse::TransportError("refused".into());
        assert!(
            r.handle_list(now, req, failed, &mut ids, &mut out)
                .is_none()
        );
        out.clear();
        r.handle_timeout(now + Duration::from_secs(1), &mut ids, &mut out);
        assert_eq!(asks(&mut out), ["list B"]);
        let req = r.current_list().unwrap();
        r.handle_list(now, req, listed(20, &["b"], false), &mut ids, &mut out);
        assert_eq!(r.take_gained_listed(), Some(20));
        assert_eq!(asks(&mut out), ["watch A|B from 12"]);
    }

    #[test]
    fn a_move_while_listing_gained_shards_lists_the_new_gain_from_the_same_cursor() {
        let (mut r, mut ids, mut out) = gaining_b();
        let now = Instant::ZERO;
        assert!(r.move_shards(now, "A|B|C".into(), Some("B|C".into()), &mut ids, &mut out));
        assert_eq!(asks(&mut out), ["cancel-list", "relist", "list B|C"]);
        let req = r.current_list().unwrap();
        r.handle_list(now, req, listed(30, &["b", "c"], false), &mut ids, &mut out);
        assert_eq!(r.take_gained_listed(), Some(30));
        assert_eq!(asks(&mut out), ["watch A|B|C from 12"]);
    }

    #[test]
    fn letting_shards_go_rewatches_from_the_cursor_without_a_list() {
        let (mut r, mut ids, mut out) = watching_a();
        assert!(r.move_shards(Instant::ZERO, "A".into(), None, &mut ids, &mut out));
        assert_eq!(asks(&mut out), ["close-watch", "watch A from 12"]);
    }

    #[test]
    fn a_resume_point_compacted_away_relists_every_shard() {
        let (mut r, mut ids, mut out) = watching_a();
        let now = Instant::ZERO;
        r.move_shards(now, "A|B".into(), Some("B".into()), &mut ids, &mut out);
        let req = r.current_list().unwrap();
        r.handle_list(now, req, listed(20, &["b"], false), &mut ids, &mut out);
        r.take_gained_listed();
        out.clear();
        let stream = r.current_stream().unwrap();
        let gone = StreamEnd::HttpStatus {
            code: 410,
            body: Vec::new(),
        };
        r.handle_watch_end(now, stream, gone, &mut ids, &mut out);
        r.handle_timeout(now + Duration::from_secs(1), &mut ids, &mut out);
        assert_eq!(
            asks(&mut out),
            ["relist", "list A|B"],
            "whole, every shard held"
        );
        let req = r.current_list().unwrap();
        r.handle_list(now, req, listed(40, &["a", "b"], false), &mut ids, &mut out);
        assert_eq!(
            r.take_gained_listed(),
            None,
            "a whole listing replaces the cache"
        );
    }

    #[test]
    fn an_unfiltered_listing_of_gained_shards_counts_as_whole() {
        let (mut r, mut ids, mut out) = gaining_b();
        let now = Instant::ZERO;
        let req = r.current_list().unwrap();
        r.handle_list(
            now,
            req,
            listed(20, &["a", "b", "z"], true),
            &mut ids,
            &mut out,
        );
        assert_eq!(r.take_gained_listed(), None);
        assert!(r.take_selector_ignored());
        assert_eq!(
            asks(&mut out),
            ["watch A|B from 20"],
            "from the listing's own version"
        );
    }

    #[test]
    fn a_gained_listing_at_a_version_that_is_no_integer_relists_every_shard() {
        let (mut r, mut ids, mut out) = gaining_b();
        let now = Instant::ZERO;
        let req = r.current_list().unwrap();
        let body =
            r#"{"metadata":{"resourceVersion":"v9","shardInfo":{"selector":"s"}},"items":[]}"#;
        let answer = ListResponse::Response {
            status: 200,
            body: body.into(),
        };
        assert!(
            r.handle_list(now, req, answer, &mut ids, &mut out)
                .is_none()
        );
        assert_eq!(r.take_gained_listed(), None);
        r.handle_timeout(now + Duration::from_secs(1), &mut ids, &mut out);
        assert_eq!(asks(&mut out), ["relist", "list A|B"]);
    }

    #[test]
    fn a_move_is_declined_without_a_numeric_cursor() {
        let (mut r, mut ids, mut out) = watching_a();
        r.cursor = Some("opaque".into());
        assert!(!r.move_shards(
            Instant::ZERO,
            "A|B".into(),
            Some("B".into()),
            &mut ids,
            &mut out
        ));
        assert!(out.is_empty());
        let mut fresh =
            Reflector::<PodView>::new(SourceId::PRIMARY, WatchParams::default(), timing());
        assert!(
            !fresh.move_shards(
                Instant::ZERO,
                "A".into(),
                Some("A".into()),
                &mut ids,
                &mut out
            ),
            "never synced: nothing to resume"
        );
    }
}
