//! The part of every run that is the same in both modes: it owns the core and the clock,
//! feeds one input per step, drains the outputs, renders the step as one line, runs the
//! reconciles the core asks for (scripted or faulted outcomes), and checks the invariants
//! that need to see every command.
//!
//! | file | concept |
//! |---|---|
//! | `mod.rs` | the harness, and one step: an input in, the outputs drained |
//! | `render.rs` | step lines (text or JSON), notes, the streaming sink |
//! | `reconciles.rs` | reconciles run for their scripted or faulted outcome, completed when due |
//! | `invariants.rs` | retry delays, cursors, bounded queues, starvation per step |
//! | `wakes.rs` | which parents each step woke, for the starvation check |

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use reconcile_core::election::LostReason;
use reconcile_core::pod::PodView;
use reconcile_core::{
    Backoff, CacheChange, Command, Config, ConfigError, Deadline, ElectionConfig, Event, Input,
    Instant, KeyMap, Members, Object as _, ObjectKey, Outcome, Output, OwnWrite, ReconcileLoop,
    Related, RelistReason, RequestId, ShardConfig, SourceId, StepLine, StreamId, Ticket,
    WatchParams, WatchRetryReason,
};

use crate::clock::Clock;
use crate::meta_view::MetaView;
use crate::trace::Header;

mod invariants;
mod observed;
mod reconciles;
mod render;
mod wakes;

use crate::harness::wakes::{Placed, Starvation, note_observed, woken_by};
pub use observed::{Observation, SecondaryHeld};

/// The core as the simulator runs it: partial pod views, parents named by strings.
pub type Core = ReconcileLoop<PodView, String>;
/// A command of [`Core`].
pub type Cmd = Command<PodView, String>;

/// How steps are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Render {
    /// One readable line per step.
    Text,
    /// One JSON object per step.
    Json,
    /// Nothing (benchmarks, minimization).
    Quiet,
}

/// A broken invariant, with when it was seen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Simulated time.
    pub at: Instant,
    /// Which invariant (a stable short name, used to compare failures while minimizing).
    pub invariant: &'static str,
    /// What happened.
    pub detail: String,
}

/// The core's configuration from a trace header.
///
/// # Errors
/// When a setting is out of the core's bounds.
pub fn config(header: &Header) -> Result<Config<PodView, String>, ConfigError> {
    let key_map = KeyMap::by(header.parent.clone());
    let config = if header.in_process {
        Config::in_process(key_map)
    } else {
        let mut params = WatchParams::default().timeout(header.timeout_seconds);
        params.namespace.clone_from(&header.namespace);
        params.label_selector.clone_from(&header.label_selector);
        if header.streaming_lists {
            params = params.streaming_lists();
        }
        params.wire_format = header.wire_format;
        params.kind.clone_from(&header.kind);
        params.list_page_size = header.list_page_size;
        // Secondaries' objects are decoded as metadata: a replay needs only their names,
        // versions and owners (every owner, for an `any-owner` source).
        header
            .secondaries
            .iter()
            .fold(Config::kubernetes(params, key_map), |config, secondary| {
                config.secondary::<MetaView>(secondary.clone())
            })
    };
    let config = config
        .concurrency(header.concurrency)
        .resync(header.resync)
        .backoff(header.backoff.0, header.backoff.1)
        .retry_delay(header.retry_delay)
        .source_retry_delay(header.retry_delay)
        .read_own_writes(header.read_own_writes)
        .debounce(header.debounce);
    config.validate()?;
    Ok(config)
}

/// What a reconcile was handed.
#[derive(Debug, Clone)]
pub struct Dispatch {
    /// When.
    pub at: Instant,
    /// The step it was dispatched in (orders it against the changes the core observed).
    pub step: u64,
    /// The parent's members.
    pub members: Members<PodView>,
    /// Each secondary source's objects of the parent, `S1` first.
    pub related: Vec<Related>,
}

/// One reconcile the driver is running.
#[derive(Debug)]
struct Running {
    parent: String,
    outcome: Outcome,
    /// What the run wrote (a recorded run's), fed back with its outcome.
    writes: Vec<OwnWrite>,
}

/// What the harness learned from a step that its caller (the mode) must act on.
#[derive(Debug, Default)]
pub struct StepIo {
    /// Commands for the apiserver side: LIST, WATCH, closes, source open / close, Lease
    /// requests.
    pub commands: Vec<Cmd>,
    /// The parents dispatched in this step (kept for a [`Candidate`]'s harness only).
    pub dispatched: Vec<String>,
    /// Leadership won or lost in this step, in order (election only).
    pub leadership: Vec<LeadershipChange>,
    /// Terms on shards won or lost in this step, in order (sharding only): `ShardAcquired`
    /// and `ShardLost`.
    pub shards: Vec<(u32, LeadershipChange)>,
}

/// A change of leadership the core reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeadershipChange {
    /// `LeadershipAcquired`: a term begins.
    Acquired,
    /// `LeadershipLost`: the term ended (its deadline passed, or the loop stopped).
    Lost,
}

/// In a run of several candidates (election mode): whose harness this is, and its clock.
/// Its lines start with the real time, then the name (and the candidate's own reading when
/// it differs); the harness's `now` is the candidate's clock.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// The name its lines carry.
    pub name: String,
    /// The candidate's clock.
    pub clock: Clock,
}

/// Counters of which fault paths a run went through.
pub type PathCounts = BTreeMap<&'static str, u64>;

/// Owns the core and the clock for one run.
pub struct Harness {
    core: Core,
    now: Instant,
    /// Set for a candidate of an election run: its name and clock.
    candidate: Option<Candidate>,
    /// Real time, for a candidate's lines (its `now` is its own clock's reading).
    real: Instant,
    render: Render,
    out: String,
    steps: u64,
    max_steps: u64,
    backoff: Backoff,
    retry_delay: Duration,
    default_duration: Duration,
    running: BTreeMap<Ticket, Running>,
    /// Reconcile completions by (time, ticket): ordered, so ties resolve the same way always.
    completions: BTreeSet<(Instant, Ticket)>,
    scripts: VecDeque<Script>,
    slow: VecDeque<Duration>,
    failing: u32,
    /// Invariant bookkeeping.
    open_streams: BTreeSet<StreamId>,
    /// Versions each source was served (a LIST's or a frame's): its WATCHes start from one.
    served_rvs: BTreeMap<SourceId, BTreeSet<String>>,
    /// Per source, when a failure armed its retry: its next LIST or WATCH waits from then.
    retry_armed: BTreeMap<SourceId, Instant>,
    /// The live LIST and WATCH of each source, to tell whose a failure event is.
    lists: BTreeMap<RequestId, SourceId>,
    streams: BTreeMap<StreamId, SourceId>,
    /// Each source's entry in `lists` and in `streams`, so that replacing it costs one
    /// lookup, not a scan of every source's.
    list_of: BTreeMap<SourceId, RequestId>,
    stream_of: BTreeMap<SourceId, StreamId>,
    /// Failures in a row per parent, as the outcomes fed imply: a backoff must count the
    /// same (an error policy's outcome, a success or a requeue starts the count over).
    failures_in_a_row: BTreeMap<String, u32>,
    stopped: bool,
    queue_bound: Option<usize>,
    check_cursors: bool,
    /// A copy of the cache kept only from the core's change log, as a driver keeps its
    /// readers' copy: at quiescence it must equal the cache.
    pub cache_copy: BTreeMap<ObjectKey, Arc<PodView>>,
    /// Every parent an object was ever cached under (kept for a [`Candidate`]'s harness
    /// only): a process cannot reconcile a parent it never knew, one that emptied before it
    /// started, say.
    pub known_parents: BTreeSet<String>,
    /// Last dispatch per parent (the core's own `Arc`s, moved out of the command, so
    /// recording them costs no copy).
    pub last_dispatch: BTreeMap<String, Dispatch>,
    /// The step in which the core last observed a change of each parent: an object of its
    /// cached under it, gone from it, or cached at another version (from the core's change
    /// log; a secondary source's changes are marked by the mode, [`Harness::observed`]).
    /// A change the world made and undid while no watch was open never shows here.
    pub observed_change: BTreeMap<String, u64>,
    /// Each primary object's parent and version as the change log left them.
    observed_cache: BTreeMap<String, Placed>,
    /// From this instant on, reconciles are acknowledged but never recorded as run (a
    /// driver bug, to show the convergence check fires; [`Harness::lose_dispatches_from`]).
    lose_dispatches_from: Option<Instant>,
    /// The run written as a trace as it goes (every input fed and command issued); `None`
    /// unless [`Harness::record`] turned it on.
    recording: Option<reconcile_trace::TraceBuilder>,
    /// What the core did, for a comparison against another client; `None` unless
    /// [`Harness::observe`] turned it on.
    observations: Option<Vec<Observation>>,
    /// Each secondary source's key map, from the header: how [`Harness::secondary_held`]
    /// maps what a source holds.
    secondary_parents_by: Vec<reconcile_core::ParentsBy>,
    /// Invariants broken so far.
    pub violations: Vec<Violation>,
    /// Fault paths reached.
    pub paths: PathCounts,
    /// The starvation invariant of the priority queue, when checked.
    starvation: Option<Box<Starvation>>,
    /// Where lines go as they are rendered, when streaming ([`Harness::stream_to`]): the
    /// output then holds at most [`STREAM_CHUNK`] bytes and a line.
    sink: Option<Box<dyn std::io::Write>>,
    /// The first error writing to the sink; the run stops at the next step.
    sink_error: Option<std::io::Error>,
}

/// Rendered output is handed to a streaming sink in chunks of about this many bytes.
pub const STREAM_CHUNK: usize = 64 * 1024;

impl Harness {
    /// A harness over a fresh core configured by `header`.
    ///
    /// # Errors
    /// When the header's settings are out of the core's bounds.
    pub fn new(header: &Header, render: Render, max_steps: u64) -> Result<Self, ConfigError> {
        Self::build(
            config(header)?,
            header,
            None,
            Instant::ZERO,
            render,
            max_steps,
        )
    }

    /// A harness over a fresh core configured by `header` that runs for election as
    /// `election.identity`, started at real instant `real` on `candidate`'s clock.
    ///
    /// # Errors
    /// When the header's or the election's settings are out of the core's bounds.
    pub fn for_candidate(
        header: &Header,
        election: ElectionConfig,
        candidate: Candidate,
        real: Instant,
        render: Render,
        max_steps: u64,
    ) -> Result<Self, ConfigError> {
        let config = config(header)?.leader_election(election);
        Self::build(config, header, Some(candidate), real, render, max_steps)
    }

    /// A harness over a fresh core configured by `header` that is one replica of the shard
    /// set `shards` (as `shards.identity`), started at real instant `real` on `candidate`'s
    /// clock.
    ///
    /// # Errors
    /// When the header's or the shard set's settings are out of the core's bounds.
    pub fn for_replica(
        header: &Header,
        shards: ShardConfig,
        candidate: Candidate,
        real: Instant,
        render: Render,
        max_steps: u64,
    ) -> Result<Self, ConfigError> {
        let config = config(header)?.sharding(shards);
        Self::build(config, header, Some(candidate), real, render, max_steps)
    }

    fn build(
        config: Config<PodView, String>,
        header: &Header,
        candidate: Option<Candidate>,
        real: Instant,
        render: Render,
        max_steps: u64,
    ) -> Result<Self, ConfigError> {
        let now = candidate.as_ref().map_or(real, |c| c.clock.local(real));
        let mut core = ReconcileLoop::new(config, now)?;
        core.log_cache_changes(true);
        Ok(Harness {
            core,
            now,
            candidate,
            real,
            render,
            out: String::new(),
            steps: 0,
            max_steps,
            backoff: Backoff {
                base: header.backoff.0,
                cap: header.backoff.1,
            },
            retry_delay: header.retry_delay,
            default_duration: Duration::ZERO,
            running: BTreeMap::new(),
            completions: BTreeSet::new(),
            scripts: VecDeque::new(),
            slow: VecDeque::new(),
            failing: 0,
            open_streams: BTreeSet::new(),
            served_rvs: BTreeMap::new(),
            retry_armed: BTreeMap::new(),
            lists: BTreeMap::new(),
            streams: BTreeMap::new(),
            list_of: BTreeMap::new(),
            stream_of: BTreeMap::new(),
            failures_in_a_row: BTreeMap::new(),
            stopped: false,
            queue_bound: None,
            check_cursors: false,
            cache_copy: BTreeMap::new(),
            known_parents: BTreeSet::new(),
            last_dispatch: BTreeMap::new(),
            observed_change: BTreeMap::new(),
            observed_cache: BTreeMap::new(),
            observations: None,
            secondary_parents_by: header
                .secondaries
                .iter()
                .map(|s| s.parents_by.clone())
                .collect(),
            recording: None,
            lose_dispatches_from: None,
            violations: Vec::new(),
            paths: PathCounts::new(),
            starvation: None,
            sink: None,
            sink_error: None,
        })
    }

    /// A harness over a fresh core with `config` (the header's, changed by the caller, with
    /// priorities on, say); the rest of the run's settings come from `header`.
    ///
    /// # Errors
    /// When the settings are out of the core's bounds.
    pub fn with_config(
        config: Config<PodView, String>,
        header: &Header,
        render: Render,
        max_steps: u64,
    ) -> Result<Self, ConfigError> {
        Self::build(config, header, None, Instant::ZERO, render, max_steps)
    }

    /// Reconciles without a script take this long (0 by default).
    pub fn set_default_duration(&mut self, d: Duration) {
        self.default_duration = d;
    }

    /// Checks after every step that queued + running keys never exceed `bound`.
    pub fn set_queue_bound(&mut self, bound: usize) {
        self.queue_bound = Some(bound);
    }

    /// The core (read-only).
    #[must_use]
    pub fn core(&self) -> &Core {
        &self.core
    }

    /// Simulated time.
    #[must_use]
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Steps taken.
    #[must_use]
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// Whether the step budget is spent.
    #[must_use]
    pub fn exhausted(&self) -> bool {
        self.steps >= self.max_steps || self.sink_error.is_some()
    }

    /// Marks `parent` as changed in the core's view in the current step (a secondary
    /// source's object joined, left or changed under it).
    pub fn observed(&mut self, parent: String) {
        self.observed_change.insert(parent, self.steps);
    }

    /// Moves the clock forward (never back).
    pub fn set_now(&mut self, now: Instant) {
        self.now = self.now.max(now);
    }

    /// A candidate's harness: moves real time to `real` (never back), and the clock to the
    /// candidate's reading of it.
    pub fn set_real(&mut self, real: Instant) {
        self.real = self.real.max(real);
        if let Some(c) = &self.candidate {
            self.now = self.now.max(c.clock.local(self.real));
        }
    }

    /// Real time (a candidate's harness; otherwise the time `set_real` last gave).
    #[must_use]
    pub fn real(&self) -> Instant {
        self.real
    }

    /// The candidate this harness runs, if it runs one.
    #[must_use]
    pub fn candidate(&self) -> Option<&Candidate> {
        self.candidate.as_ref()
    }

    /// Counts a fault path reached outside the core's events (world side).
    pub fn count(&mut self, path: &'static str) {
        *self.paths.entry(path).or_default() += 1;
    }

    /// The source a WATCH stream belongs to (the primary for one the harness never saw).
    #[must_use]
    pub fn source_of_stream(&self, stream: StreamId) -> SourceId {
        self.streams
            .get(&stream)
            .copied()
            .unwrap_or(SourceId::PRIMARY)
    }

    /// The core's next deadline.
    #[must_use]
    pub fn core_deadline(&self) -> Option<reconcile_core::Deadline> {
        self.core.poll_timeout()
    }

    /// Feeds one input (described by `input`, built only when rendering) and drains.
    pub fn step(
        &mut self,
        input: impl FnOnce() -> String,
        feed: impl FnOnce(&mut Core, Instant),
    ) -> StepIo {
        self.steps += 1;
        let now = self.now;
        let held_before = self.observations.is_some().then(|| {
            (1..=self.secondary_parents_by.len())
                .map(|n| self.secondary_held(n))
                .collect::<Vec<_>>()
        });
        feed(&mut self.core, now);
        if let Some(before) = held_before {
            for (n, before) in before.iter().enumerate() {
                let source = n + 1;
                let (objects, parents) =
                    observed::secondary_woken(before, &self.secondary_held(source));
                if !objects.is_empty()
                    && let Some(log) = &mut self.observations
                {
                    log.push(Observation::SecondaryWoke {
                        source: source as u64,
                        objects,
                        parents,
                    });
                }
            }
        }
        let copy = &mut self.cache_copy;
        let mut known = self.candidate.is_some().then_some(&mut self.known_parents);
        // Whether the cache was replaced (a listing) and each key's new parent and version:
        // which parents the core saw change, for the convergence and starvation checks.
        let mut cleared = false;
        let mut changed: Vec<(String, Option<Placed>)> = Vec::new();
        self.core.drain_cache_changes(|change| match change {
            CacheChange::Cleared => {
                copy.clear();
                cleared = true;
            }
            CacheChange::Set {
                key,
                object,
                parent,
                ..
            } => {
                copy.insert(key.clone(), Arc::clone(object));
                if let Some(known) = known.as_deref_mut()
                    && !known.contains(parent)
                {
                    known.insert(parent.clone());
                }
                let rv = object.object_resource_version().map(str::to_owned);
                changed.push((key.to_string(), Some((parent.clone(), rv))));
            }
            CacheChange::Removed { key } => {
                copy.remove(key);
                changed.push((key.to_string(), None));
            }
        });
        let mut woken = BTreeSet::new();
        if let Some(log) = &mut self.observations {
            let objects = woken_objects(&self.observed_cache, cleared, &changed);
            if !objects.is_empty() {
                let mut parents = BTreeSet::new();
                note_observed(
                    &mut self.observed_cache.clone(),
                    cleared,
                    &changed,
                    &mut parents,
                );
                log.push(Observation::Woke { objects, parents });
            }
        }
        note_observed(&mut self.observed_cache, cleared, &changed, &mut woken);
        for parent in woken {
            self.observed_change.insert(parent, self.steps);
        }
        if let Some(s) = &mut self.starvation {
            s.note_changes(cleared, changed);
        }
        let io = self.drain(input);
        if let Some(log) = &mut self.observations {
            for command in &io.commands {
                match command {
                    Command::List { source, .. } if source.get() == 0 => {
                        log.push(Observation::List)
                    }
                    Command::Watch {
                        source,
                        resource_version,
                        send_initial_events,
                        ..
                    } if source.get() == 0 => log.push(Observation::Watch {
                        resource_version: resource_version.clone(),
                        send_initial_events: *send_initial_events,
                    }),
                    Command::List { source, .. } => log.push(Observation::SecondaryList {
                        source: source.get(),
                    }),
                    Command::Watch {
                        source,
                        resource_version,
                        send_initial_events,
                        ..
                    } => log.push(Observation::SecondaryWatch {
                        source: source.get(),
                        resource_version: resource_version.clone(),
                        send_initial_events: *send_initial_events,
                    }),
                    _ => {}
                }
            }
        }
        io
    }

    /// Feeds `input` (described by `describe`, built only when rendering) and drains, as
    /// [`Harness::step`] does, writing it to the recording when one is on (an in-process
    /// source's objects are left out of it: only the primary's LIST and WATCH matter there).
    pub fn step_input(
        &mut self,
        describe: impl FnOnce() -> String,
        input: Input<PodView>,
    ) -> StepIo {
        if let Some(b) = &mut self.recording {
            b.input(self.now, &input, &|_: &PodView| None);
        }
        self.step(describe, |core, now| core.handle_input(now, input))
    }

    /// As [`Harness::step_input`], but recording `recorded` in place of `input`: a LIST body
    /// the driver streams through the core's decoder is fed decoded, which has no bytes to
    /// record, and is recorded as the response it was decoded from.
    pub fn step_input_recorded_as(
        &mut self,
        describe: impl FnOnce() -> String,
        input: Input<PodView>,
        recorded: &Input<PodView>,
    ) -> StepIo {
        if let Some(b) = &mut self.recording {
            b.input(self.now, recorded, &|_: &PodView| None);
        }
        self.step(describe, |core, now| core.handle_input(now, input))
    }

    /// Writes `fault`, which acts on the controller (a clock jump), to the recording when
    /// one is on, at the present time.
    pub fn record_fault(&mut self, fault: &crate::trace::Fault) {
        if let Some(b) = &mut self.recording {
            b.fault(self.now, fault);
        }
    }

    /// Whether the run is being recorded ([`Harness::record`]).
    #[must_use]
    pub fn recording(&self) -> bool {
        self.recording.is_some()
    }

    /// Turns on the recording of the run as a trace ([`Harness::take_recording`]).
    pub fn record(&mut self) {
        self.recording.get_or_insert_with(Default::default);
    }

    /// The run so far as trace entries (everything held included), leaving the recording
    /// empty (and on, if it was).
    pub fn take_recording(&mut self) -> Vec<crate::trace::Entry> {
        let mut out = Vec::new();
        if let Some(b) = &mut self.recording {
            b.take_all(&mut out);
        }
        out
    }

    /// Turns on the observation log ([`Observation`]), from the next step on.
    pub fn observe(&mut self) {
        self.observations.get_or_insert_with(Vec::new);
    }

    /// What secondary source `source` (counted from 1) holds now: each object's version and
    /// the parents its key map (the header's) maps it to, as the core computes them.
    #[must_use]
    pub fn secondary_held(&self, source: usize) -> SecondaryHeld {
        let Some(by) = source
            .checked_sub(1)
            .and_then(|n| self.secondary_parents_by.get(n))
        else {
            return SecondaryHeld::new();
        };
        let held = self
            .core
            .secondary_objects(SourceId::nth(source as u64))
            .and_then(|r| r.downcast::<MetaView>())
            .unwrap_or_default();
        held.iter()
            .filter_map(|o| {
                let key = o.key()?.to_string();
                let parents = by.parents_of(&**o).into_iter().map(String::from).collect();
                Some((
                    key,
                    (o.object_resource_version().map(str::to_owned), parents),
                ))
            })
            .collect()
    }

    /// The observations so far, leaving the log empty (and on, if it was).
    pub fn take_observations(&mut self) -> Vec<Observation> {
        self.observations
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// Starts the core.
    pub fn start(&mut self) -> StepIo {
        self.step_input(|| "start".into(), Input::Start)
    }

    /// A reconcile-all trigger.
    pub fn reconcile_all(&mut self) -> StepIo {
        self.step_input(|| "reconcile-all trigger".into(), Input::ReconcileAll)
    }

    /// A one-key trigger for the cached primary object `key` (`namespace/name`, or `name`).
    pub fn reconcile_on(&mut self, key: &str) -> StepIo {
        let object = match key.split_once('/') {
            Some((namespace, name)) => ObjectKey::new(Some(namespace), name),
            None => ObjectKey::new(None, key),
        };
        let label = format!("reconcile-on {object}");
        self.step_input(|| label, Input::ReconcileOn { object })
    }

    /// Stops the core.
    pub fn stop(&mut self) -> StepIo {
        self.stopped = true;
        // A stop drops the queue: nothing woken is owed a dispatch any more.
        self.starvation = None;
        self.step_input(|| "stop".into(), Input::Stop)
    }

    /// Delivers the end of WATCH `stream`.
    pub fn watch_end(
        &mut self,
        stream: StreamId,
        end: reconcile_core::StreamEnd,
        input: impl FnOnce() -> String,
    ) -> StepIo {
        self.open_streams.remove(&stream);
        self.step_input(input, Input::WatchEnd { stream, end })
    }

    /// Fires the core's timers (call when its deadline is due).
    pub fn timeout(&mut self) -> StepIo {
        let wake = self.core.poll_timeout().map(|d| d.wake);
        self.step_input(
            || match wake {
                Some(w) => format!("timer {w}"),
                None => "timer".into(),
            },
            Input::Timeout,
        )
    }

    fn drain(&mut self, input: impl FnOnce() -> String) -> StepIo {
        let mut io = StepIo::default();
        let input = if self.rendering() {
            input()
        } else {
            String::new()
        };
        let mut line = matches!(self.render, Render::Text).then(|| match &self.candidate {
            Some(c) => StepLine::new(self.real, &format!("{}  {input}", self.tag(c))),
            None => StepLine::new(self.now, &input),
        });
        let json = matches!(self.render, Render::Json);
        let mut commands: Vec<String> = Vec::new();
        let mut events: Vec<String> = Vec::new();
        let next = loop {
            let output = self.core.poll_output();
            if let Some(line) = &mut line
                && !matches!(output, Output::Timeout(_))
            {
                line.push(&output);
            }
            match output {
                Output::Timeout(next) => break next,
                Output::Event(event) => {
                    match event {
                        Event::LeadershipAcquired { .. } => {
                            io.leadership.push(LeadershipChange::Acquired);
                        }
                        Event::LeadershipLost { .. } => io.leadership.push(LeadershipChange::Lost),
                        Event::ShardAcquired { shard, .. } => {
                            io.shards.push((shard, LeadershipChange::Acquired));
                        }
                        Event::ShardLost { shard, .. } => {
                            io.shards.push((shard, LeadershipChange::Lost));
                        }
                        _ => {}
                    }
                    self.on_event(&event);
                    if json {
                        events.push(event.to_string());
                    }
                }
                Output::Command(command) => {
                    if json {
                        commands.push(command.to_string());
                    }
                    if let Some(b) = &mut self.recording {
                        b.command(self.now, &command);
                    }
                    self.on_command(command, &mut io);
                }
            }
        };
        self.after_step();
        // A candidate's deadlines are its own clock's: its line shows them in real time.
        let next = match &self.candidate {
            Some(c) => next.map(|d| Deadline {
                at: c.clock.real(d.at),
                wake: d.wake,
            }),
            None => next,
        };
        if let Some(line) = line {
            self.out.push_str(&line.finish(next));
            self.out.push('\n');
        } else if json {
            let mut value = serde_json::json!({
                "t_ns": self.now.as_nanos(),
                "input": input,
                "commands": commands,
                "events": events,
                "queued": self.core.queued(),
            });
            if let Some(c) = &self.candidate {
                value["t_ns"] = self.real.as_nanos().into();
                value["candidate"] = c.name.clone().into();
                value["local_t_ns"] = self.now.as_nanos().into();
            }
            let _ = writeln!(self.out, "{value}");
        }
        self.pass_on(false);
        io
    }

    fn on_event(&mut self, event: &Event<String>) {
        let path = match event {
            Event::Relist { source, reason } => {
                // The dead cursor may never be watched from again.
                self.served_rvs.remove(source);
                // A move of shards lists at once, every other relist after the retry delay.
                if *reason != RelistReason::ShardsMoved {
                    self.retry_armed.insert(*source, self.now);
                }
                match reason {
                    RelistReason::ErrorFrame(s) if s.is_expired() => "relist: 410 ERROR frame",
                    RelistReason::ErrorFrame(_) => "relist: 504 ERROR frame",
                    RelistReason::HttpStatus(410, _) => "relist: WATCH HTTP 410",
                    RelistReason::HttpStatus(_, _) => "relist: WATCH HTTP 504",
                    RelistReason::UndecodableFrame(_) => "relist: frame without cursor",
                    RelistReason::ShardsMoved => "relist: shards moved",
                }
            }
            Event::WatchRetry { stream, reason } => {
                let source = self.source_of_stream(*stream);
                self.retry_armed.insert(source, self.now);
                match reason {
                    WatchRetryReason::ShortWatch => "watch retry: very short watch",
                    WatchRetryReason::Transport(_) => "watch retry: transport error",
                    WatchRetryReason::HttpStatus(_, _) => "watch retry: HTTP status",
                    WatchRetryReason::ErrorFrame(_) => "watch retry: ERROR frame",
                }
            }
            Event::ListFailed { req, .. } => {
                let source = self.lists.get(req).copied().unwrap_or(SourceId::PRIMARY);
                self.retry_armed.insert(source, self.now);
                "list failed -> retry"
            }
            Event::FrameSkipped { .. } => "frame skipped, cursor advanced",
            Event::InitialEventsEnd { .. } => "streaming list: initial events applied",
            Event::InitialEventsFailed { stream, .. } => {
                let source = self.source_of_stream(*stream);
                self.retry_armed.insert(source, self.now);
                "streaming list: failed -> stream again"
            }
            Event::StreamingListFallback { reason, .. } => match reason {
                reconcile_core::StreamingFallback::Refused(..) => {
                    "streaming list: refused -> LIST+WATCH"
                }
                reconcile_core::StreamingFallback::NoEndBookmark { .. } => {
                    "streaming list: no end bookmark -> LIST+WATCH"
                }
                reconcile_core::StreamingFallback::TooLarge { .. } => {
                    "streaming list: too large -> LIST+WATCH"
                }
            },
            Event::ListItemSkipped { .. } => "list item skipped",
            Event::BackoffScheduled {
                parent,
                failures,
                delay,
                ..
            } => {
                self.exempt_from_starvation(parent);
                let in_a_row = self.failures_in_a_row.get(parent).copied().unwrap_or(0);
                if *failures != in_a_row {
                    self.violation(
                        "backoff counts failures in a row",
                        format!("{parent}: backoff after {failures} failures, {in_a_row} in a row"),
                    );
                }
                let expected = self.backoff.delay(*failures);
                if *delay != expected || *delay < self.backoff.base || *delay > self.backoff.cap {
                    self.violation(
                        "retry delay out of bounds",
                        format!(
                            "{parent}: backoff {}s after {failures} failures, expected {}s",
                            delay.as_secs_f64(),
                            expected.as_secs_f64()
                        ),
                    );
                }
                "reconcile backoff"
            }
            Event::RequeueScheduled { parent, .. } => {
                self.exempt_from_starvation(parent);
                "requeue-after"
            }
            Event::ErrorHandled { parent, .. } => {
                self.exempt_from_starvation(parent);
                "error handled by policy"
            }
            Event::Resync { .. } => {
                if let Some(s) = &mut self.starvation {
                    s.all_low = true;
                }
                "resync"
            }
            Event::ReconcileAll { .. } => {
                if let Some(s) = &mut self.starvation {
                    s.all_low = true;
                }
                "reconcile-all trigger"
            }
            Event::Unmapped { .. } => "unmapped object evicted",
            Event::Stale { .. } => "stale input ignored",
            Event::Synced { .. } => "synced",
            Event::SourceNotSynced { .. } => "source not synced -> reopen",
            Event::SourceEnded { .. } => "source ended -> reopen",
            Event::Unnamed => "unnamed object refused",
            Event::LeadershipAcquired { .. } => "election: leadership acquired",
            Event::LeadershipLost {
                reason: LostReason::RenewDeadline,
                ..
            } => "election: term ended at its renew deadline",
            Event::LeadershipLost {
                reason: LostReason::Stopped,
                ..
            } => "election: term ended by stop",
            Event::LeaderObserved { .. } => "election: new holder observed",
            Event::ShardAcquired { .. } => "sharding: shard acquired",
            Event::ShardLost {
                reason: LostReason::RenewDeadline,
                ..
            } => "sharding: shard term ended at its renew deadline",
            Event::ShardLost { .. } => "sharding: shard term ended (released or stopped)",
            Event::ShardReleasing { running: 0, .. } => "sharding: shard given up, idle",
            Event::ShardReleasing { .. } => "sharding: shard given up, draining its reconciles",
            Event::ShardMembers { .. } => "sharding: membership changed",
            Event::ShardsSelected { .. } => "sharding: shards selected on the server",
            Event::ShardSelectionIgnored { .. } => {
                "sharding: shard selection ignored by the server"
            }
            Event::LeaseFailed { error, .. } => {
                if error == "conflict" {
                    "election: lease conflict (409)"
                } else if error.starts_with("transport") {
                    "election: lease transport error"
                } else if error.starts_with("no answer") {
                    "election: lease unanswered, abandoned"
                } else if error.starts_with("HTTP") {
                    "election: lease failed (HTTP status)"
                } else {
                    "election: lease failed (other)"
                }
            }
            _ => "other event",
        };
        self.count(path);
    }

    fn on_command(&mut self, command: Cmd, io: &mut StepIo) {
        let allowed_after_stop = matches!(
            command,
            Command::CloseWatch { .. }
                | Command::CancelList { .. }
                | Command::CancelReconcile { .. }
                | Command::CloseSource { .. }
        ) || matches!(
            &command,
            // A leader's release of its Lease.
            Command::Lease {
                request: reconcile_core::LeaseRequest::Update { spec, .. },
                ..
            } if spec.holder.is_empty()
        );
        if self.stopped && !allowed_after_stop {
            self.violation("command after stop", command.to_string());
        }
        match command {
            Command::Reconcile {
                ticket,
                parent,
                members,
                related,
                ..
            } => {
                if self.candidate.is_some() {
                    io.dispatched.push(parent.clone());
                }
                if let Some(s) = &mut self.starvation {
                    s.step.dispatched.push(parent.clone());
                }
                // Running reconciles are at most `concurrency`: a scan is cheaper than a set.
                if self.running.values().any(|r| r.parent == parent) {
                    self.violation(
                        "key reconciled twice at once",
                        format!("{parent} dispatched as {ticket} while still running"),
                    );
                }
                if self
                    .lose_dispatches_from
                    .is_some_and(|from| self.now >= from)
                {
                    // The injected driver bug: acknowledged, never seen by the user's code.
                    self.count("reconcile lost by the driver (injected bug)");
                    let (_, duration, _) = self.outcome_for(&parent);
                    self.completions.insert((self.now + duration, ticket));
                    self.running.insert(
                        ticket,
                        Running {
                            parent,
                            outcome: Outcome::Success,
                            writes: Vec::new(),
                        },
                    );
                    return;
                }
                let dispatch = Dispatch {
                    at: self.now,
                    step: self.steps,
                    members,
                    related,
                };
                match self.last_dispatch.get_mut(&parent) {
                    Some(last) => *last = dispatch,
                    None => {
                        self.last_dispatch.insert(parent.clone(), dispatch);
                    }
                }
                let (outcome, duration, writes) = self.outcome_for(&parent);
                self.completions.insert((self.now + duration, ticket));
                self.running.insert(
                    ticket,
                    Running {
                        parent,
                        outcome,
                        writes,
                    },
                );
            }
            Command::CancelReconcile { ticket } => {
                self.running.remove(&ticket);
                self.completions.retain(|(_, t)| *t != ticket);
            }
            Command::Watch {
                stream,
                source,
                ref resource_version,
                send_initial_events,
                ..
            } => {
                let served = self
                    .served_rvs
                    .get(&source)
                    .is_some_and(|rvs| rvs.contains(resource_version));
                // A streaming list asks from no version: it is the listing, not a cursor.
                let listing = send_initial_events && resource_version.is_empty();
                if self.check_cursors && !served && !listing {
                    self.violation(
                        "WATCH without a cursor from a LIST or a frame",
                        format!("{stream} {source} from rv={resource_version}"),
                    );
                }
                self.check_retry_delay(source, "WATCH");
                self.open_streams.insert(stream);
                // One live stream per source: the map stays as small as the source list.
                if let Some(old) = self.stream_of.insert(source, stream) {
                    self.streams.remove(&old);
                }
                self.streams.insert(stream, source);
                io.commands.push(command);
            }
            Command::List { req, source, .. } => {
                self.check_retry_delay(source, "LIST");
                if let Some(old) = self.list_of.insert(source, req) {
                    self.lists.remove(&old);
                }
                self.lists.insert(req, source);
                io.commands.push(command);
            }
            Command::CloseWatch { stream } => {
                if !self.open_streams.remove(&stream) {
                    self.violation(
                        "command for a closed stream",
                        format!("close-watch {stream}"),
                    );
                }
                io.commands.push(command);
            }
            Command::CancelList { .. }
            | Command::OpenSource { .. }
            | Command::CloseSource { .. } => {
                io.commands.push(command);
            }
            _ => io.commands.push(command),
        }
    }
}

/// The keys of the objects one step's change log woke, by the rule of
/// [`note_observed`]: an object new, gone, moved or at another resourceVersion.
fn woken_objects(
    cached: &BTreeMap<String, Placed>,
    cleared: bool,
    changed: &[(String, Option<Placed>)],
) -> BTreeSet<String> {
    let mut objects = BTreeSet::new();
    let mut wakes = |key: &str, old: Option<&Placed>, new: Option<&Placed>| {
        let mut parents = BTreeSet::new();
        woken_by(old, new, &mut parents);
        if !parents.is_empty() {
            objects.insert(key.to_owned());
        }
    };
    if cleared {
        let new: BTreeMap<&str, &Placed> = changed
            .iter()
            .filter_map(|(k, v)| v.as_ref().map(|v| (k.as_str(), v)))
            .collect();
        for (key, old) in cached {
            wakes(key, Some(old), new.get(key.as_str()).copied());
        }
        for (key, value) in &new {
            if !cached.contains_key(*key) {
                wakes(key, None, Some(value));
            }
        }
    } else {
        let mut now: BTreeMap<&str, Option<&Placed>> = BTreeMap::new();
        for (key, new) in changed {
            let old = now
                .get(key.as_str())
                .copied()
                .unwrap_or_else(|| cached.get(key));
            wakes(key, old, new.as_ref());
            now.insert(key, new.as_ref());
        }
    }
    objects
}

/// A scripted outcome for the next reconcile of `parent` (any when `None`).
#[derive(Debug)]
struct Script {
    parent: Option<String>,
    outcome: crate::trace::ScriptedOutcome,
    duration: Duration,
    writes: Vec<reconcile_core::OwnWrite>,
}
