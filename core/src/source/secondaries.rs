//! A loop's secondary sources, indexed: which source an answer belongs to, which source's
//! timer is due next, and whether every source has synced, each without looking at every
//! source. A loop with thousands of sources (one per tenant, say) otherwise pays for all of
//! them on every frame and every timer: 4,000 sources cost 18.6 s, quadratic in their number.
//!
//! What a source waits on changes only while the loop calls into it, so every call goes
//! through [`Secondaries::with`] (one source) or [`Secondaries::each`] (all of them), which
//! read the source's LIST, WATCH, deadline and sync state afterwards and update the index.

use std::collections::{BTreeMap, BTreeSet};

use crate::source::secondary::Secondary;
use crate::time::Instant;
use crate::vocabulary::{Deadline, RequestId, StreamId};

/// What one source was last seen waiting on.
#[derive(Debug, Clone, Copy, Default)]
struct Seen {
    list: Option<RequestId>,
    stream: Option<StreamId>,
    deadline: Option<Deadline>,
    synced: bool,
}

/// The secondary sources, `S1` first, with their index.
pub(crate) struct Secondaries<O, P> {
    sources: Vec<Box<dyn Secondary<O, P> + Send>>,
    seen: Vec<Seen>,
    lists: BTreeMap<RequestId, usize>,
    streams: BTreeMap<StreamId, usize>,
    /// Each source's next deadline, earliest first; ties by source order.
    deadlines: BTreeSet<(Instant, usize)>,
    unsynced: usize,
}

impl<O, P> Secondaries<O, P> {
    pub(crate) fn new(sources: Vec<Box<dyn Secondary<O, P> + Send>>) -> Self {
        let mut this = Secondaries {
            seen: vec![Seen::default(); sources.len()],
            unsynced: sources.len(),
            sources,
            lists: BTreeMap::new(),
            streams: BTreeMap::new(),
            deadlines: BTreeSet::new(),
        };
        for i in 0..this.sources.len() {
            this.refresh(i);
        }
        this
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.sources.is_empty()
    }

    /// Every source, in order, to read.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &(dyn Secondary<O, P> + Send)> {
        self.sources.iter().map(|s| &**s)
    }

    /// Source `n` (0 is `S1`), to read.
    pub(crate) fn get(&self, n: usize) -> Option<&(dyn Secondary<O, P> + Send)> {
        self.sources.get(n).map(|s| &**s)
    }

    /// The source whose LIST `req` is.
    pub(crate) fn owner_of_list(&self, req: RequestId) -> Option<usize> {
        self.lists.get(&req).copied()
    }

    /// The source whose WATCH `stream` is.
    pub(crate) fn owner_of_stream(&self, stream: StreamId) -> Option<usize> {
        self.streams.get(&stream).copied()
    }

    /// Calls into source `i`, then indexes what it waits on now.
    pub(crate) fn with<R>(
        &mut self,
        i: usize,
        f: impl FnOnce(&mut (dyn Secondary<O, P> + Send)) -> R,
    ) -> R {
        let r = f(&mut *self.sources[i]);
        self.refresh(i);
        r
    }

    /// Calls into every source, in order (start, stop), then indexes them all.
    pub(crate) fn each(&mut self, mut f: impl FnMut(&mut (dyn Secondary<O, P> + Send))) {
        for i in 0..self.sources.len() {
            self.with(i, &mut f);
        }
    }

    /// The sources whose deadline is at or before `now`, in source order (the order every
    /// source was once asked in, so their commands keep their order).
    pub(crate) fn due(&self, now: Instant) -> Vec<usize> {
        let mut due: Vec<usize> = self
            .deadlines
            .iter()
            .take_while(|(at, _)| *at <= now)
            .map(|&(_, i)| i)
            .collect();
        due.sort_unstable();
        due
    }

    /// The earliest deadline of any source (the first source's on a tie).
    pub(crate) fn deadline(&self) -> Option<Deadline> {
        let &(_, i) = self.deadlines.first()?;
        self.seen[i].deadline
    }

    /// Whether every source has applied a whole listing.
    pub(crate) fn all_synced(&self) -> bool {
        self.unsynced == 0
    }

    fn refresh(&mut self, i: usize) {
        let source = &self.sources[i];
        let now = Seen {
            list: source.current_list(),
            stream: source.current_stream(),
            deadline: source.deadline(),
            synced: source.is_synced(),
        };
        let was = std::mem::replace(&mut self.seen[i], now);
        if was.list != now.list {
            if let Some(req) = was.list {
                self.lists.remove(&req);
            }
            if let Some(req) = now.list {
                self.lists.insert(req, i);
            }
        }
        if was.stream != now.stream {
            if let Some(stream) = was.stream {
                self.streams.remove(&stream);
            }
            if let Some(stream) = now.stream {
                self.streams.insert(stream, i);
            }
        }
        if was.deadline != now.deadline {
            if let Some(d) = was.deadline {
                self.deadlines.remove(&(d.at, i));
            }
            if let Some(d) = now.deadline {
                self.deadlines.insert((d.at, i));
            }
        }
        match (was.synced, now.synced) {
            (false, true) => self.unsynced -= 1,
            (true, false) => self.unsynced += 1,
            _ => {}
        }
        debug_assert!(self.unsynced <= self.sources.len());
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::source::reflector::Counters;
    use crate::source::secondary::{Applied, Scope};
    use crate::vocabulary::{ListResponse, MintIds, Outbox, Related, SourceId, StreamEnd, Wake};

    /// What a probe waits on, set by the test between the calls the index sees.
    #[derive(Default)]
    struct Waits {
        list: Option<RequestId>,
        stream: Option<StreamId>,
        deadline: Option<Instant>,
        synced: bool,
        timeouts: usize,
    }

    /// A source whose waits the test sets by hand; a timeout clears its deadline.
    struct Probe(Arc<Mutex<Waits>>);

    impl Probe {
        fn waits(&self) -> std::sync::MutexGuard<'_, Waits> {
            self.0.lock().unwrap()
        }
    }

    impl Secondary<(), ()> for Probe {
        fn current_list(&self) -> Option<RequestId> {
            self.waits().list
        }
        fn current_stream(&self) -> Option<StreamId> {
            self.waits().stream
        }
        fn start(&mut self, _: Instant, _: &mut dyn MintIds, _: &mut Outbox<(), ()>) {}
        fn handle_list(
            &mut self,
            _: Instant,
            _: RequestId,
            _: ListResponse<()>,
            _: &mut dyn MintIds,
            _: &mut Outbox<(), ()>,
            _: &mut Vec<Arc<()>>,
            _: &Scope<'_>,
        ) -> Option<Applied> {
            None
        }
        fn handle_watch_opened(&mut self, _: Instant, _: StreamId, _: &mut Outbox<(), ()>) {}
        fn handle_watch_line(
            &mut self,
            _: Instant,
            _: StreamId,
            _: &[u8],
            _: &mut Outbox<(), ()>,
            _: &mut Vec<Arc<()>>,
            _: &Scope<'_>,
        ) {
        }
        fn handle_watch_end(
            &mut self,
            _: Instant,
            _: StreamId,
            _: StreamEnd,
            _: &mut dyn MintIds,
            _: &mut Outbox<(), ()>,
        ) {
        }
        fn handle_timeout(&mut self, _: Instant, _: &mut dyn MintIds, _: &mut Outbox<(), ()>) {
            let mut w = self.waits();
            w.timeouts += 1;
            w.deadline = None;
        }
        fn deadline(&self) -> Option<Deadline> {
            self.waits().deadline.map(|at| Deadline {
                at,
                wake: Wake::ListRetry,
            })
        }
        fn stop(&mut self, _: &mut Outbox<(), ()>) {}
        fn is_synced(&self) -> bool {
            self.waits().synced
        }
        fn related(&self, _: &()) -> Related {
            self.objects()
        }
        fn objects(&self) -> Related {
            Related {
                source: SourceId::nth(1),
                objects: Vec::new(),
            }
        }
        fn cursor(&self) -> Option<&str> {
            None
        }
        fn counters(&self) -> Counters {
            Counters::default()
        }
        fn len(&self) -> usize {
            0
        }
        fn selectable(&self) -> bool {
            false
        }
        fn select(
            &mut self,
            _: Instant,
            _: String,
            _: Option<String>,
            _: &Scope<'_>,
            _: &mut dyn MintIds,
            _: &mut Outbox<(), ()>,
            _: &mut Vec<Arc<()>>,
        ) {
        }
        fn deselect(&mut self, _: &mut Outbox<(), ()>, _: &mut Vec<Arc<()>>) {}
        fn unselect(&mut self, _: Instant, _: &mut dyn MintIds, _: &mut Outbox<(), ()>) {}
        fn take_selector_ignored(&mut self) -> bool {
            false
        }
    }

    /// Ids for the calls; a probe mints none.
    struct NoIds;

    impl MintIds for NoIds {
        fn request(&mut self) -> RequestId {
            unreachable!("a probe mints no id")
        }
        fn stream(&mut self) -> StreamId {
            unreachable!("a probe mints no id")
        }
    }

    fn at(s: u64) -> Instant {
        Instant::from_nanos(s * 1_000_000_000)
    }

    fn probes(n: usize) -> (Secondaries<(), ()>, Vec<Arc<Mutex<Waits>>>) {
        let waits: Vec<_> = (0..n).map(|_| Arc::default()).collect();
        let sources = waits
            .iter()
            .map(|w| Box::new(Probe(Arc::clone(w))) as Box<dyn Secondary<(), ()> + Send>)
            .collect();
        (Secondaries::new(sources), waits)
    }

    /// Source `i` now waits on LIST `list`, WATCH `stream` and a timer at `deadline`
    /// seconds, as a call into it (seen by the index) left it.
    fn set(
        s: &mut Secondaries<(), ()>,
        waits: &[Arc<Mutex<Waits>>],
        i: usize,
        list: u64,
        stream: u64,
        deadline: Option<u64>,
    ) {
        s.with(i, |_| {
            let mut w = waits[i].lock().unwrap();
            w.list = Some(RequestId(list));
            w.stream = Some(StreamId(stream));
            w.deadline = deadline.map(at);
        });
    }

    #[test]
    fn answers_route_to_the_source_that_asked_and_only_while_it_waits() {
        let (mut s, waits) = probes(3);
        set(&mut s, &waits, 0, 10, 20, None);
        set(&mut s, &waits, 2, 11, 21, None);
        assert_eq!(s.owner_of_list(RequestId(11)), Some(2));
        assert_eq!(s.owner_of_stream(StreamId(20)), Some(0));
        assert_eq!(s.owner_of_list(RequestId(12)), None);
        // Source 2 moved on to a new LIST and WATCH: the old ones are nobody's.
        set(&mut s, &waits, 2, 12, 22, None);
        assert_eq!(s.owner_of_list(RequestId(11)), None);
        assert_eq!(s.owner_of_stream(StreamId(21)), None);
        assert_eq!(s.owner_of_list(RequestId(12)), Some(2));
    }

    #[test]
    fn the_next_deadline_and_the_due_sources_follow_each_change() {
        let (mut s, waits) = probes(4);
        set(&mut s, &waits, 3, 1, 1, Some(5));
        set(&mut s, &waits, 1, 2, 2, Some(7));
        set(&mut s, &waits, 0, 3, 3, Some(5));
        // A tie goes to the first source, as a scan in source order would give.
        assert_eq!(s.deadline().map(|d| d.at), Some(at(5)));
        assert_eq!(s.due(at(4)), Vec::<usize>::new());
        assert_eq!(s.due(at(7)), [0, 1, 3], "in source order");
        for i in s.due(at(5)) {
            s.with(i, |source| {
                source.handle_timeout(at(5), &mut NoIds, &mut Outbox::new());
            });
        }
        assert_eq!(s.deadline().map(|d| d.at), Some(at(7)));
        assert_eq!(waits[1].lock().unwrap().timeouts, 0, "not due, not asked");
        assert_eq!(waits[3].lock().unwrap().timeouts, 1);
    }

    #[test]
    fn the_sync_barrier_counts_sources_that_sync_and_unsync() {
        let (mut s, waits) = probes(2);
        assert!(!s.all_synced());
        s.with(0, |_| waits[0].lock().unwrap().synced = true);
        assert!(!s.all_synced());
        s.with(1, |_| waits[1].lock().unwrap().synced = true);
        assert!(s.all_synced());
        s.with(1, |_| waits[1].lock().unwrap().synced = false);
        assert!(!s.all_synced());
        assert!(probes(0).0.all_synced(), "no secondary holds the barrier");
    }
}
