//! Swarm testing: each seed picks a fault profile and a random workload (pods created,
//! relabelled between parents, moved out of and back into the selector, deleted, recreated
//! under the same name), runs it in world mode, lets the faults heal, and checks the
//! invariants. A failing seed is minimized by delta debugging over its trace's records.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::ops::Range;
use std::path::PathBuf;
use std::time::Duration;

use reconcile_core::Instant;

use crate::harness::{Render, Violation};
use crate::rng::Rng;
use crate::simulate::{SimOptions, StreamingLists, simulate};
use reconcile_core::KeyBy;

use crate::trace::{Entry, Fault, GoneAs, Header, Record, ScriptedOutcome, Trace};

/// Runs the minimizer may spend on one failing seed.
pub const MAX_MINIMIZE_RUNS: usize = 2_000;

/// Seeds one `explore` call accepts at most.
pub const MAX_SEEDS: u64 = 10_000_000;

/// Options of an exploration.
#[derive(Debug, Clone)]
pub struct ExploreOptions {
    /// Longer workloads (the documented long mode).
    pub long: bool,
    /// Where minimized traces of failing seeds go; `None` skips writing.
    pub out_dir: Option<PathBuf>,
    /// One line per seed.
    pub verbose: bool,
    /// Minimize failing seeds.
    pub minimize: bool,
    /// Extra fault records added to every seed's trace (to watch the invariants and the
    /// minimizer fire, for example with the `lose_change` bug).
    pub inject: Vec<Entry>,
    /// One-source seeds, many-source seeds, or both.
    pub sources: Sources,
    /// Election seeds instead ([`crate::election`]): several candidates share a Lease.
    pub election: bool,
    /// The clock rate drift election seeds draw within (a fraction; the default is just
    /// inside the 20 % the default durations tolerate).
    pub election_drift: f64,
    /// Busy seeds instead ([`BUSY_PROFILES`]): one worker, a live stream that never runs
    /// dry, the core's priority queue on and the starvation invariant checked.
    pub priority: bool,
    /// The normal keys in a row the starvation check holds a busy seed's queue to: the
    /// core's [`CORE_NORMAL_IN_A_ROW`] unless a test wants to watch a wrong rule fire.
    ///
    /// [`CORE_NORMAL_IN_A_ROW`]: crate::starvation::CORE_NORMAL_IN_A_ROW
    pub starvation_rule: u32,
}

impl Default for ExploreOptions {
    fn default() -> Self {
        ExploreOptions {
            long: false,
            out_dir: None,
            verbose: false,
            minimize: true,
            inject: Vec::new(),
            sources: Sources::Both,
            election: false,
            election_drift: crate::election::DEFAULT_DRIFT,
            priority: false,
            starvation_rule: crate::starvation::CORE_NORMAL_IN_A_ROW,
        }
    }
}

/// One failing seed.
#[derive(Debug, Clone)]
pub struct Failure {
    /// The seed.
    pub seed: u64,
    /// Its fault profile.
    pub profile: &'static str,
    /// The first invariant it broke.
    pub violation: Violation,
    /// Records in the generated trace, and after minimization.
    pub records: (usize, usize),
    /// The minimized trace, where it was written.
    pub minimized: Option<PathBuf>,
}

/// What an exploration found.
#[derive(Debug, Clone, Default)]
pub struct ExploreReport {
    /// Seeds run.
    pub seeds: u64,
    /// Seeds per profile.
    pub profiles: BTreeMap<&'static str, u64>,
    /// Fault paths reached: (seeds that reached it, times reached).
    pub paths: BTreeMap<&'static str, (u64, u64)>,
    /// Steps over all seeds.
    pub steps: u64,
    /// Seeds that asked for protobuf ([`protobuf_for`]).
    pub protobuf_seeds: u64,
    /// Failing seeds.
    pub failures: Vec<Failure>,
    /// Per-seed lines (verbose).
    pub lines: Vec<String>,
    /// The `--fault` flags of injected faults, for the reproduction command.
    pub inject_flags: String,
    /// The flags that select the kind of seeds again (`--election`), for the reproduction
    /// command.
    pub mode_flags: String,
    /// An election exploration's figures.
    pub election: Option<crate::election::ElectionTotals>,
}

/// The fault profiles a seed picks from.
pub const PROFILES: &[&str] = &[
    "calm",
    "watch-drops",
    "gone-frame",
    "gone-status",
    "too-large",
    "malformed-cursor",
    "malformed-nocursor",
    "restart",
    "compaction",
    "list-failures",
    "slow-reconciles",
    "failing-reconciles",
    "clock-jumps",
    "chaos",
];

/// The profiles of a seed whose controller has several sources (a primary, the children it
/// owns, and objects that name several owners): the same faults as [`PROFILES`], in the
/// same order, each fault hitting one source or every source.
pub const MANY_SOURCE_PROFILES: &[&str] = &[
    "sources/calm",
    "sources/watch-drops",
    "sources/gone-frame",
    "sources/gone-status",
    "sources/too-large",
    "sources/malformed-cursor",
    "sources/malformed-nocursor",
    "sources/restart",
    "sources/compaction",
    "sources/list-failures",
    "sources/slow-reconciles",
    "sources/failing-reconciles",
    "sources/clock-jumps",
    "sources/chaos",
];

/// The profiles (and their many-source forms) half of whose seeds also LIST in pages
/// ([`page_size_for`]): those whose faults (a compaction, a restart, a 410 storm, a failed
/// LIST) can fall between the pages of a listing and expire its continue token.
pub const PAGED_PROFILES: &[&str] = &[
    "gone-frame",
    "gone-status",
    "restart",
    "compaction",
    "list-failures",
    "chaos",
];

/// The LIST page size seed `seed` of `profile` runs with, if it pages: half the seeds of
/// [`PAGED_PROFILES`], with 1 to 3 objects a page, so that a listing of the few objects a
/// seed has spans several pages ([`crate::simulate::PAGE_DELAY`] each). Drawn from its own
/// generator, so a seed's trace is the same whether it pages or not.
#[must_use]
pub fn page_size_for(seed: u64, profile: &str) -> Option<u32> {
    let base = profile.strip_prefix("sources/").unwrap_or(profile);
    if !PAGED_PROFILES.contains(&base) {
        return None;
    }
    let mut rng = Rng::new(seed ^ 0x5041_4745_5349_5a45);
    rng.chance(50).then(|| *rng.pick(&[1, 2, 3]))
}

/// Whether seed `seed` of `profile` fetches its listings with streaming lists, and whether
/// its world serves or refuses them: of the seeds of [`PAGED_PROFILES`] (whose faults can
/// fall between the initial events, [`crate::simulate::INITIAL_EVENT_DELAY`] apart), 40 %
/// are served and 10 % refused (422, so every source falls back to LIST+WATCH). Drawn from
/// a generator of its own, so a seed's trace is the same either way.
#[must_use]
pub fn streaming_for(seed: u64, profile: &str) -> Option<StreamingLists> {
    let base = profile.strip_prefix("sources/").unwrap_or(profile);
    if !PAGED_PROFILES.contains(&base) {
        return None;
    }
    let mut rng = Rng::new(seed ^ 0x5354_5245_414d_494e);
    match rng.below(10) {
        0..=3 => Some(StreamingLists::Served),
        4 => Some(StreamingLists::Refused),
        _ => None,
    }
}

/// The profiles (and their many-source forms) 40 % of whose seeds run on protobuf
/// ([`protobuf_for`]): those whose faults meet the wire (every fault profile but the
/// reconcile-side ones).
pub const PROTOBUF_PROFILES: &[&str] = &[
    "watch-drops",
    "gone-frame",
    "gone-status",
    "too-large",
    "malformed-cursor",
    "malformed-nocursor",
    "restart",
    "compaction",
    "list-failures",
    "clock-jumps",
    "chaos",
];

/// Whether seed `seed` of `profile` asks for protobuf (`WireFormat::Protobuf`, issue 16):
/// 40 % of the seeds of [`PROTOBUF_PROFILES`], with paging and streaming lists as those are
/// drawn. The world then serves protobuf, and answers every
/// [`crate::simulate::JSON_ANSWER_EVERY`]-th request in JSON. Drawn from a generator of its
/// own, so a seed's trace is the same either way; the choice is written in the trace's header
/// (`wire_format`), so a minimized trace replays on protobuf.
#[must_use]
pub fn protobuf_for(seed: u64, profile: &str) -> bool {
    let base = profile.strip_prefix("sources/").unwrap_or(profile);
    if !PROTOBUF_PROFILES.contains(&base) {
        return false;
    }
    let mut rng = Rng::new(seed ^ 0x5052_4f54_4f42_5546);
    rng.chance(40)
}

/// Makes `trace` ask for protobuf: its primary source, and each secondary, which then asks
/// for metadata only (`PartialObjectMetadata`) in protobuf, as client-go's metadata client
/// does.
pub fn ask_for_protobuf(trace: &mut crate::trace::Trace) {
    trace.header.wire_format = reconcile_core::WireFormat::Protobuf;
    for secondary in &mut trace.header.secondaries {
        secondary.params.wire_format = reconcile_core::WireFormat::Protobuf;
    }
}

/// Which controllers a run's seeds build.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Sources {
    /// Half the seeds one source, half several (decided by the seed alone).
    #[default]
    Both,
    /// Every seed one source: the workloads and profiles of [`PROFILES`].
    One,
    /// Every seed several sources: [`MANY_SOURCE_PROFILES`].
    Many,
}

impl std::str::FromStr for Sources {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "both" => Ok(Sources::Both),
            "one" => Ok(Sources::One),
            "many" => Ok(Sources::Many),
            other => Err(format!("--sources {other:?}: expected one, many or both")),
        }
    }
}

/// Whether seed `seed` builds a controller with several sources: drawn from its own stream,
/// so a one-source seed generates exactly the trace it always did.
#[must_use]
pub fn many_sources(seed: u64, sources: Sources) -> bool {
    match sources {
        Sources::One => false,
        Sources::Many => true,
        Sources::Both => Rng::new(seed ^ 0x6d61_6e79_2d73_7263).chance(50),
    }
}

/// Parses `A..B` (B excluded) or a single seed.
///
/// # Errors
/// When it is neither, is empty, or spans more than [`MAX_SEEDS`].
pub fn parse_seeds(s: &str) -> Result<Range<u64>, String> {
    let range = match s.split_once("..") {
        Some((a, b)) => {
            let a = a
                .parse::<u64>()
                .map_err(|_| format!("--seeds {s:?}: {a:?} is not a seed"))?;
            let b = b
                .parse::<u64>()
                .map_err(|_| format!("--seeds {s:?}: {b:?} is not a seed"))?;
            a..b
        }
        None => {
            let a = s
                .parse::<u64>()
                .map_err(|_| format!("--seeds {s:?}: expected A..B or a seed"))?;
            a..a.saturating_add(1)
        }
    };
    if range.is_empty() {
        return Err(format!("--seeds {s:?} is empty"));
    }
    if range.end - range.start > MAX_SEEDS {
        return Err(format!("--seeds {s:?}: at most {MAX_SEEDS} seeds per run"));
    }
    Ok(range)
}

/// How long runs keep going after the last record, so faults heal and retries finish.
pub fn settle(long: bool) -> Duration {
    Duration::from_secs(if long { 3600 } else { 1200 })
}

fn at(s: u64) -> Option<Instant> {
    Some(Instant::from_duration(Duration::from_secs(s)))
}

/// A pod; an empty `cell` leaves the parent label off (the pod cannot be mapped).
fn pod(name: &str, uid: u64, cell: &str, app: &str, phase: &str) -> String {
    let cell = if cell.is_empty() {
        String::new()
    } else {
        format!(",\"cell\":\"{cell}\"")
    };
    format!(
        "{{\"metadata\":{{\"name\":\"{name}\",\"namespace\":\"default\",\"uid\":\"u{uid}\",\"labels\":{{\"app\":\"{app}\"{cell}}}}},\"status\":{{\"phase\":\"{phase}\"}}}}"
    )
}

fn frame(kind: &str, object: &str) -> Record {
    Record::Frame {
        line: format!("{{\"type\":\"{kind}\",\"object\":{object}}}").into(),
    }
}

#[derive(Clone)]
struct PodState {
    uid: u64,
    cell: String,
    app: &'static str,
    phase: &'static str,
}

fn fault(rng: &mut Rng, kind: &str) -> Fault {
    let count = u32::try_from(rng.range(1, 3)).unwrap_or(1);
    match kind {
        "watch_drop" => Fault::WatchDrop,
        "gone" => Fault::GoneStorm { count },
        "too_large" => Fault::TooLarge { count },
        "malformed_cursor" => Fault::MalformedFrame { cursor: true },
        "malformed_nocursor" => Fault::MalformedFrame { cursor: false },
        "restart" => Fault::Restart {
            down: Duration::from_secs(rng.range(1, 20)),
        },
        "compact" => Fault::Compact,
        "list_fail" => Fault::ListFail {
            count,
            status: *rng.pick(&[500, 503, 0]),
        },
        "slow" => Fault::SlowReconcile {
            count: count * 3,
            duration: Duration::from_secs(rng.range(1, 40)),
        },
        "fail" => Fault::FailReconcile {
            count: u32::try_from(rng.range(1, 8)).unwrap_or(1),
        },
        _ => Fault::ClockJump {
            by: Duration::from_secs(rng.range(30, 7200)),
        },
    }
}

/// The fault kinds a profile draws from (a many-source profile as its one-source twin).
fn fault_kinds(profile: &str) -> &'static [&'static str] {
    match profile.strip_prefix("sources/").unwrap_or(profile) {
        "calm" => &[],
        "watch-drops" => &["watch_drop"],
        "gone-frame" | "gone-status" => &["gone"],
        "too-large" => &["too_large"],
        "malformed-cursor" => &["malformed_cursor"],
        "malformed-nocursor" => &["malformed_nocursor"],
        "restart" => &["restart"],
        "compaction" => &["compact", "watch_drop"],
        "list-failures" => &["list_fail", "gone"],
        "slow-reconciles" => &["slow"],
        "failing-reconciles" => &["fail"],
        "clock-jumps" => &["clock_jump"],
        _ => &[
            "watch_drop",
            "gone",
            "too_large",
            "malformed_cursor",
            "malformed_nocursor",
            "restart",
            "compact",
            "list_fail",
            "slow",
            "fail",
            "clock_jump",
        ],
    }
}

/// The trace seed `seed` runs, and its profile, for `sources`.
#[must_use]
pub fn generate_for(seed: u64, long: bool, sources: Sources) -> (Trace, &'static str) {
    if many_sources(seed, sources) {
        generate_many(seed, long)
    } else {
        generate(seed, long)
    }
}

/// The one-source trace seed `seed` runs, and its profile.
#[must_use]
pub fn generate(seed: u64, long: bool) -> (Trace, &'static str) {
    let mut rng = Rng::new(seed);
    let profile = *rng.pick(PROFILES);
    let window = if long { 3600 } else { 300 };
    let parents = rng.range(2, 4);
    let mut header = Header {
        description: Some(format!("explore seed {seed}, profile {profile}")),
        namespace: Some("default".into()),
        label_selector: Some("app=cell".into()),
        parent: KeyBy::Label("cell".into()),
        concurrency: usize::try_from(rng.range(1, 4)).unwrap_or(1),
        timeout_seconds: *rng.pick(&[30, 60, 300]),
        bookmark_interval: if rng.chance(70) {
            Some(Duration::from_secs(rng.range(5, 60)))
        } else {
            None
        },
        gone_as: if profile == "gone-status" || (profile == "chaos" && rng.chance(50)) {
            GoneAs::Status
        } else {
            GoneAs::Frame
        },
        ..Header::default()
    };
    if profile == "compaction" {
        header.compaction_window = Duration::from_secs(rng.range(5, 30));
    }
    let mut events: Vec<(u64, Record)> = Vec::new();
    // Workload.
    let ops = if long {
        rng.range(40, 200)
    } else {
        rng.range(5, 25)
    };
    let max_pods = if long { 20 } else { 8 };
    let mut pods: BTreeMap<String, PodState> = BTreeMap::new();
    let mut uid = 0;
    let cell = |rng: &mut Rng| format!("cell-{}", rng.below(parents));
    for _ in 0..ops {
        let t = rng.range(0, window);
        let name = format!("p{}", rng.below(max_pods));
        let record = match pods.get(&name).cloned() {
            None => {
                // Created, or recreated under a name used before: a new uid either way.
                uid += 1;
                let state = PodState {
                    uid,
                    cell: cell(&mut rng),
                    app: "cell",
                    phase: "Pending",
                };
                let r = frame(
                    "ADDED",
                    &pod(&name, uid, &state.cell, state.app, state.phase),
                );
                pods.insert(name, state);
                r
            }
            Some(mut state) => {
                match rng.below(6) {
                    0 => {
                        let r = frame(
                            "DELETED",
                            &pod(&name, state.uid, &state.cell, state.app, state.phase),
                        );
                        pods.remove(&name);
                        events.push((t, r));
                        continue;
                    }
                    1 | 2 => state.cell = cell(&mut rng),
                    3 => state.app = if state.app == "cell" { "other" } else { "cell" },
                    // The parent label goes away (unmappable: evicted), or comes back.
                    4 => {
                        state.cell = if state.cell.is_empty() {
                            cell(&mut rng)
                        } else {
                            String::new()
                        };
                    }
                    _ => {
                        state.phase = if state.phase == "Running" {
                            "Pending"
                        } else {
                            "Running"
                        }
                    }
                }
                let r = frame(
                    "MODIFIED",
                    &pod(&name, state.uid, &state.cell, state.app, state.phase),
                );
                pods.insert(name, state);
                r
            }
        };
        events.push((t, record));
    }
    // Scripted outcomes: some reconciles ask to be requeued, some fail, and an error policy
    // picks the follow-up of some failures (a fixed requeue, or none until a change).
    for _ in 0..rng.below(4) {
        let t = rng.range(0, window);
        let parent = Some(cell(&mut rng));
        let outcome = match rng.below(4) {
            0 => ScriptedOutcome::RequeueAfter(Duration::from_secs(rng.range(1, 120))),
            1 => ScriptedOutcome::ErrorHandled {
                error: "scripted conflict".into(),
                requeue_after: rng
                    .chance(50)
                    .then(|| Duration::from_secs(rng.range(1, 120))),
            },
            _ => ScriptedOutcome::Error("scripted failure".into()),
        };
        events.push((
            t,
            Record::Reconcile {
                parent,
                outcome,
                duration: Duration::ZERO,
            },
        ));
    }
    // Faults.
    let kinds = fault_kinds(profile);
    if !kinds.is_empty() {
        let n = if profile == "chaos" {
            rng.range(3, 10)
        } else {
            rng.range(1, 5)
        };
        for _ in 0..n {
            let kind = *rng.pick(kinds);
            let t = rng.range(1, window);
            events.push((t, Record::Fault(fault(&mut rng, kind))));
        }
    }
    // Stable by time: same-time events keep generation order.
    events.sort_by_key(|(t, _)| *t);
    let entries = events
        .into_iter()
        .map(|(t, r)| Entry::new(at(t), r))
        .collect();
    (
        Trace {
            name: format!("seed-{seed}"),
            header,
            entries,
        },
        profile,
    )
}

/// An object of `kind` as the many-source workloads write it; `owners` are
/// `(kind, name, controller)`.
fn object(
    kind: &str,
    name: &str,
    uid: u64,
    app: &str,
    phase: &str,
    owners: &[(&str, String, bool)],
) -> String {
    let owners: Vec<String> = owners
        .iter()
        .map(|(kind, name, controller)| {
            format!(
                "{{\"apiVersion\":\"example.dev/v1\",\"kind\":\"{kind}\",\"name\":\"{name}\",\"uid\":\"uid-{name}\",\"controller\":{controller}}}"
            )
        })
        .collect();
    let owners = if owners.is_empty() {
        String::new()
    } else {
        format!(",\"ownerReferences\":[{}]", owners.join(","))
    };
    format!(
        "{{\"kind\":\"{kind}\",\"metadata\":{{\"name\":\"{name}\",\"namespace\":\"default\",\"uid\":\"u{uid}\",\"labels\":{{\"app\":\"{app}\"}}{owners}}},\"status\":{{\"phase\":\"{phase}\"}}}}"
    )
}

fn toggle<'a>(value: &'a str, a: &'a str, b: &'a str) -> &'a str {
    if value == a { b } else { a }
}

/// One object of a many-source workload, as the generator last wrote it.
#[derive(Clone)]
struct Written {
    uid: u64,
    app: &'static str,
    phase: &'static str,
    /// `(kind, owner name, controller)`.
    owners: Vec<(&'static str, String, bool)>,
}

impl Written {
    fn json(&self, kind: &str, name: &str) -> String {
        object(kind, name, self.uid, self.app, self.phase, &self.owners)
    }
}

/// A many-source seed: `Cell`s (the primary, one parent each), the `Part`s they own as
/// controller (S1: created, edited, deleted behind the controller's back, re-owned, orphaned,
/// moved out of and into the selector), and, on half the seeds, `Link`s that name one to
/// three cells as owners (S2, any owner: one object waking several parents). A deleted cell
/// has its parts and links collected later, as the garbage collector would. Reconcile-all
/// triggers come at random times, and each fault hits one source or all.
#[must_use]
pub fn generate_many(seed: u64, long: bool) -> (Trace, &'static str) {
    let mut rng = Rng::new(seed);
    let i = usize::try_from(rng.below(MANY_SOURCE_PROFILES.len() as u64)).unwrap_or(0);
    let profile = MANY_SOURCE_PROFILES[i];
    let base = PROFILES[i];
    let window = if long { 3600 } else { 300 };
    let links = rng.chance(50);
    let timeout = |rng: &mut Rng| *rng.pick(&[30, 60, 300]);
    let mut secondaries = vec![reconcile_core::SecondaryConfig {
        params: reconcile_core::WatchParams {
            namespace: Some("default".into()),
            label_selector: Some("app=cell".into()),
            ..reconcile_core::WatchParams::default().timeout(timeout(&mut rng))
        },
        parents_by: reconcile_core::ParentsBy::ControllerOwner("Cell".into()),
    }];
    if links {
        secondaries.push(reconcile_core::SecondaryConfig {
            params: reconcile_core::WatchParams {
                namespace: Some("default".into()),
                ..reconcile_core::WatchParams::default().timeout(timeout(&mut rng))
            },
            parents_by: reconcile_core::ParentsBy::AnyOwner("Cell".into()),
        });
    }
    let sources = 1 + secondaries.len() as u64;
    let mut header = Header {
        description: Some(format!("explore seed {seed}, profile {profile}")),
        namespace: Some("default".into()),
        label_selector: Some("app=cell".into()),
        parent: KeyBy::Name,
        concurrency: usize::try_from(rng.range(1, 4)).unwrap_or(1),
        timeout_seconds: timeout(&mut rng),
        bookmark_interval: if rng.chance(70) {
            Some(Duration::from_secs(rng.range(5, 60)))
        } else {
            None
        },
        gone_as: if base == "gone-status" || (base == "chaos" && rng.chance(50)) {
            GoneAs::Status
        } else {
            GoneAs::Frame
        },
        secondaries,
        ..Header::default()
    };
    if base == "compaction" {
        header.compaction_window = Duration::from_secs(rng.range(5, 30));
    }
    let max_cells = if long { 8 } else { 4 };
    let max_parts = if long { 24 } else { 10 };
    let max_links = if long { 8 } else { 4 };
    let ops = if long {
        rng.range(60, 300)
    } else {
        rng.range(10, 40)
    };
    let mut times: Vec<u64> = (0..ops).map(|_| rng.range(0, window)).collect();
    times.sort_unstable();
    let cell_name = |rng: &mut Rng| format!("c{}", rng.below(max_cells));
    let mut cells: BTreeMap<String, Written> = BTreeMap::new();
    let mut parts: BTreeMap<String, Written> = BTreeMap::new();
    let mut linked: BTreeMap<String, Written> = BTreeMap::new();
    let mut uid = 0;
    let mut events: Vec<(u64, u64, Record)> = Vec::new();
    let mut push = |t: u64, source: u64, record: Record| events.push((t, source, record));
    for t in times {
        let roll = rng.below(100);
        if roll < 35 {
            // A cell.
            let name = cell_name(&mut rng);
            let Some(mut cell) = cells.get(&name).cloned() else {
                uid += 1;
                let cell = Written {
                    uid,
                    app: "cell",
                    phase: "Pending",
                    owners: Vec::new(),
                };
                push(t, 0, frame("ADDED", &cell.json("Cell", &name)));
                cells.insert(name, cell);
                continue;
            };
            match rng.below(5) {
                0 => {
                    push(t, 0, frame("DELETED", &cell.json("Cell", &name)));
                    cells.remove(&name);
                    // The garbage collector, a little later: the parts it controlled go,
                    // and links drop it from their owners (or go, when it was the last).
                    let later = t + rng.range(1, 30);
                    let owned: Vec<String> = parts
                        .iter()
                        .filter(|(_, p)| p.owners.iter().any(|(_, n, c)| *c && *n == name))
                        .map(|(k, _)| k.clone())
                        .collect();
                    for key in owned {
                        if let Some(part) = parts.remove(&key) {
                            push(later, 1, frame("DELETED", &part.json("Part", &key)));
                        }
                    }
                    let named: Vec<String> = linked
                        .iter()
                        .filter(|(_, l)| l.owners.iter().any(|(_, n, _)| *n == name))
                        .map(|(k, _)| k.clone())
                        .collect();
                    for key in named {
                        let Some(mut link) = linked.remove(&key) else {
                            continue;
                        };
                        link.owners.retain(|(_, n, _)| *n != name);
                        if link.owners.is_empty() {
                            push(later, 2, frame("DELETED", &link.json("Link", &key)));
                        } else {
                            push(later, 2, frame("MODIFIED", &link.json("Link", &key)));
                            linked.insert(key, link);
                        }
                    }
                    continue;
                }
                1 => cell.app = toggle(cell.app, "cell", "other"),
                _ => cell.phase = toggle(cell.phase, "Running", "Pending"),
            }
            push(t, 0, frame("MODIFIED", &cell.json("Cell", &name)));
            cells.insert(name, cell);
        } else if roll < 80 || !links {
            // A part.
            let name = format!("part-{}", rng.below(max_parts));
            let Some(mut part) = parts.get(&name).cloned() else {
                uid += 1;
                let part = Written {
                    uid,
                    app: "cell",
                    phase: "Pending",
                    owners: vec![("Cell", cell_name(&mut rng), true)],
                };
                push(t, 1, frame("ADDED", &part.json("Part", &name)));
                parts.insert(name, part);
                continue;
            };
            match rng.below(8) {
                // Deleted behind the controller's back.
                0 => {
                    push(t, 1, frame("DELETED", &part.json("Part", &name)));
                    parts.remove(&name);
                    continue;
                }
                // Re-owned by another cell.
                1 | 2 => part.owners = vec![("Cell", cell_name(&mut rng), true)],
                // Orphaned (no longer a controller reference), or adopted again.
                3 => {
                    if let Some(owner) = part.owners.first_mut() {
                        owner.2 = !owner.2;
                    }
                }
                // Owned by a kind the controller does not own.
                4 => {
                    if let Some(owner) = part.owners.first_mut() {
                        owner.0 = toggle(owner.0, "Cell", "Other");
                    }
                }
                5 => part.app = toggle(part.app, "cell", "other"),
                _ => part.phase = toggle(part.phase, "Running", "Pending"),
            }
            push(t, 1, frame("MODIFIED", &part.json("Part", &name)));
            parts.insert(name, part);
        } else {
            // A link.
            let name = format!("link-{}", rng.below(max_links));
            let Some(mut link) = linked.get(&name).cloned() else {
                uid += 1;
                let mut owners = vec![("Cell", cell_name(&mut rng), false)];
                for _ in 0..rng.below(3) {
                    owners.push(("Cell", cell_name(&mut rng), false));
                }
                let link = Written {
                    uid,
                    app: "cell",
                    phase: "Pending",
                    owners,
                };
                push(t, 2, frame("ADDED", &link.json("Link", &name)));
                linked.insert(name, link);
                continue;
            };
            match rng.below(5) {
                0 => {
                    push(t, 2, frame("DELETED", &link.json("Link", &name)));
                    linked.remove(&name);
                    continue;
                }
                1 => link.owners.push(("Cell", cell_name(&mut rng), false)),
                2 if link.owners.len() > 1 => {
                    let drop = usize::try_from(rng.below(link.owners.len() as u64)).unwrap_or(0);
                    link.owners.remove(drop);
                }
                _ => link.phase = toggle(link.phase, "Running", "Pending"),
            }
            push(t, 2, frame("MODIFIED", &link.json("Link", &name)));
            linked.insert(name, link);
        }
    }
    // Reconcile-all triggers, as `reconcile_all_on` would send them.
    for _ in 0..rng.below(3) {
        push(rng.range(1, window), 0, Record::ReconcileAll);
    }
    // Scripted outcomes, as in the one-source workloads.
    for _ in 0..rng.below(4) {
        let t = rng.range(0, window);
        let parent = Some(format!("default/{}", cell_name(&mut rng)));
        let outcome = match rng.below(4) {
            0 => ScriptedOutcome::RequeueAfter(Duration::from_secs(rng.range(1, 120))),
            1 => ScriptedOutcome::ErrorHandled {
                error: "scripted conflict".into(),
                requeue_after: rng
                    .chance(50)
                    .then(|| Duration::from_secs(rng.range(1, 120))),
            },
            _ => ScriptedOutcome::Error("scripted failure".into()),
        };
        push(
            t,
            0,
            Record::Reconcile {
                parent,
                outcome,
                duration: Duration::ZERO,
            },
        );
    }
    // Faults, each on one source (a 410 on the children while the cells stream, say) or on
    // every source.
    let kinds = fault_kinds(profile);
    let mut faults: Vec<(u64, Option<u64>, Record)> = Vec::new();
    if !kinds.is_empty() {
        let n = if base == "chaos" {
            rng.range(3, 10)
        } else {
            rng.range(1, 5)
        };
        for _ in 0..n {
            let kind = *rng.pick(kinds);
            let t = rng.range(1, window);
            let target = rng.chance(60).then(|| rng.below(sources));
            faults.push((t, target, Record::Fault(fault(&mut rng, kind))));
        }
    }
    let mut entries: Vec<(u64, Entry)> = events
        .into_iter()
        .map(|(t, source, record)| {
            let mut entry = Entry::new(at(t), record);
            entry.source = (source != 0).then_some(source);
            (t, entry)
        })
        .chain(faults.into_iter().map(|(t, target, record)| {
            let mut entry = Entry::new(at(t), record);
            entry.source = target;
            (t, entry)
        }))
        .collect();
    // Stable by time: same-time events keep generation order.
    entries.sort_by_key(|(t, _)| *t);
    (
        Trace {
            name: format!("seed-{seed}"),
            header,
            entries: entries.into_iter().map(|(_, e)| e).collect(),
        },
        profile,
    )
}

/// The busy profiles (`explore --priority`): one worker, a large first listing, and a live
/// stream to a few hot parents that never lets normal-priority work run dry, with the
/// core's priority queue on and the starvation invariant ([`crate::starvation`]) checked.
/// What else wakes every parent at low priority now and then: nothing (`busy/calm`: the
/// first listing's backlog alone), relists (`busy/relists`), resyncs (`busy/resyncs`),
/// reconcile-all triggers (`busy/triggers`), or all of them (`busy/mixed`).
pub const BUSY_PROFILES: &[&str] = &[
    "busy/calm",
    "busy/relists",
    "busy/resyncs",
    "busy/triggers",
    "busy/mixed",
];

/// How long a busy seed's reconciles take: longer than the gap between two live changes,
/// so a hot parent is always wanted again by the time the worker is free.
pub const BUSY_RECONCILE: Duration = Duration::from_secs(1);

/// The longest gap between two live changes of a busy seed, in milliseconds (below
/// [`BUSY_RECONCILE`]).
const BUSY_MAX_GAP_MS: u64 = 900;

fn at_ms(ms: u64) -> Option<Instant> {
    Some(Instant::from_duration(Duration::from_millis(ms)))
}

/// The busy trace seed `seed` runs, and its profile (see [`BUSY_PROFILES`]). Drawn from its
/// own stream: the one-source and many-source seeds are untouched.
#[must_use]
pub fn generate_busy(seed: u64, long: bool) -> (Trace, &'static str) {
    let mut rng = Rng::new(seed ^ 0x6275_7379_2d70_7269);
    let profile = *rng.pick(BUSY_PROFILES);
    let parents = if long {
        rng.range(100, 400)
    } else {
        rng.range(4, 24)
    };
    let hot = rng.range(1, 3).min(parents);
    let mixed = profile == "busy/mixed";
    let mut header = Header {
        description: Some(format!("explore busy seed {seed}, profile {profile}")),
        namespace: Some("default".into()),
        label_selector: Some("app=cell".into()),
        parent: KeyBy::Label("cell".into()),
        concurrency: 1,
        timeout_seconds: *rng.pick(&[30, 60, 300]),
        bookmark_interval: rng
            .chance(50)
            .then(|| Duration::from_secs(rng.range(5, 60))),
        ..Header::default()
    };
    // Long enough for the first listing's backlog to drain at a quarter of the dispatches,
    // and some more for the relists, resyncs and triggers to land in a busy queue.
    let window_s = parents * 5 + rng.range(10, 40);
    if profile == "busy/resyncs" || mixed {
        header.resync = Some(Duration::from_secs(rng.range(15, window_s / 2 + 15)));
    }
    let mut events: Vec<(u64, Record)> = Vec::new();
    // The world before the start: one pod per parent (each a low key of the first sync).
    let mut phases: Vec<&'static str> = Vec::new();
    let mut uids: Vec<u64> = Vec::new();
    for i in 0..parents {
        let cell = format!("cell-{i}");
        events.push((
            0,
            frame(
                "ADDED",
                &pod(&format!("p{i}"), i + 1, &cell, "cell", "Pending"),
            ),
        ));
        phases.push("Pending");
        uids.push(i + 1);
    }
    // The live stream: mostly the hot parents, now and then a cold one (which, if it waits
    // at low priority, moves up).
    let hot_cells: Vec<u64> = (0..hot).map(|_| rng.below(parents)).collect();
    let mut t_ms = 1_000;
    while t_ms < window_s * 1_000 {
        let i = if rng.chance(90) {
            *rng.pick(&hot_cells)
        } else {
            rng.below(parents)
        };
        let slot = usize::try_from(i).unwrap_or(0);
        phases[slot] = toggle(phases[slot], "Pending", "Running");
        events.push((
            t_ms,
            frame(
                "MODIFIED",
                &pod(
                    &format!("p{i}"),
                    uids[slot],
                    &format!("cell-{i}"),
                    "cell",
                    phases[slot],
                ),
            ),
        ));
        t_ms += rng.range(50, BUSY_MAX_GAP_MS);
    }
    // Whatever wakes every parent, or every changed one, at low priority.
    if profile == "busy/relists" || mixed {
        for _ in 0..rng.range(1, 4) {
            let kind = *rng.pick(&["gone", "restart", "compact", "watch_drop"]);
            let t = rng.range(2, window_s) * 1_000;
            events.push((t, Record::Fault(fault(&mut rng, kind))));
        }
    }
    if profile == "busy/triggers" || mixed {
        for _ in 0..rng.range(2, 6) {
            events.push((rng.range(2, window_s) * 1_000, Record::ReconcileAll));
        }
    }
    events.sort_by_key(|(t, _)| *t);
    let entries = events
        .into_iter()
        .map(|(t, r)| Entry::new(at_ms(t), r))
        .collect();
    (
        Trace {
            name: format!("busy-seed-{seed}"),
            header,
            entries,
        },
        profile,
    )
}

/// Runs one busy trace quietly: every invariant checked, the core's priority queue on, and
/// the starvation invariant held to `in_a_row` normal keys in a row
/// ([`crate::starvation::CORE_NORMAL_IN_A_ROW`] for the core's rule).
#[must_use]
pub fn run_busy(trace: &Trace, long: bool, in_a_row: u32) -> crate::simulate::RunReport {
    run_with(
        trace,
        &SimOptions {
            render: Render::Quiet,
            settle: settle(long),
            max_steps: 2_000_000,
            check: true,
            priority: true,
            starvation: Some(in_a_row),
            reconcile_duration: BUSY_RECONCILE,
            ..SimOptions::default()
        },
    )
}

/// Runs one explore trace quietly with every invariant checked.
#[must_use]
pub fn run(trace: &Trace, long: bool) -> crate::simulate::RunReport {
    run_paged(trace, long, None)
}

/// [`run`], listing every source in pages of `list_page_size` objects when set.
#[must_use]
pub fn run_paged(
    trace: &Trace,
    long: bool,
    list_page_size: Option<u32>,
) -> crate::simulate::RunReport {
    run_listing(trace, long, list_page_size, None)
}

/// [`run_paged`], with streaming lists served or refused when `streaming_lists` is set.
#[must_use]
pub fn run_listing(
    trace: &Trace,
    long: bool,
    list_page_size: Option<u32>,
    streaming_lists: Option<StreamingLists>,
) -> crate::simulate::RunReport {
    let opts = SimOptions {
        render: Render::Quiet,
        settle: settle(long),
        max_steps: 2_000_000,
        check: true,
        list_page_size,
        streaming_lists,
        ..SimOptions::default()
    };
    run_with(trace, &opts)
}

fn run_with(trace: &Trace, opts: &SimOptions) -> crate::simulate::RunReport {
    match simulate(trace, opts) {
        Ok(report) => report,
        // Generated headers are always within the core's bounds; say so loudly if not.
        Err(e) => crate::simulate::RunReport {
            output: String::new(),
            violations: vec![Violation {
                at: Instant::ZERO,
                invariant: "configuration",
                detail: e.to_string(),
            }],
            paths: BTreeMap::new(),
            stats: reconcile_core::Stats::default(),
            cursor: None,
            steps: 0,
            end: Instant::ZERO,
        },
    }
}

/// Delta debugging (Zeller's ddmin) over the trace's records: the smallest subset found that
/// still breaks the same invariant.
#[must_use]
pub fn minimize(trace: &Trace, invariant: &str, long: bool) -> Trace {
    minimize_with(trace, invariant, |t| run(t, long))
}

/// [`minimize`] with the run of one candidate trace given (a busy seed's, say).
pub fn minimize_with(
    trace: &Trace,
    invariant: &str,
    run: impl Fn(&Trace) -> crate::simulate::RunReport,
) -> Trace {
    let fails = |entries: &[Entry]| {
        let candidate = Trace {
            entries: entries.to_vec(),
            ..trace.clone()
        };
        run(&candidate)
            .violations
            .iter()
            .any(|v| v.invariant == invariant)
    };
    Trace {
        entries: ddmin(&trace.entries, fails),
        ..trace.clone()
    }
}

/// Delta debugging (Zeller's ddmin) over `items`: the smallest subset found, within
/// [`MAX_MINIMIZE_RUNS`] runs, for which `fails` still holds.
pub fn ddmin<T: Clone>(items: &[T], mut fails: impl FnMut(&[T]) -> bool) -> Vec<T> {
    let mut entries = items.to_vec();
    let mut n = 2usize;
    let mut runs = 0;
    while entries.len() >= 2 && runs < MAX_MINIMIZE_RUNS {
        let chunk = entries.len().div_ceil(n);
        let mut reduced = None;
        for i in 0..n {
            let lo = i * chunk;
            if lo >= entries.len() {
                break;
            }
            let hi = (lo + chunk).min(entries.len());
            let complement: Vec<T> = entries[..lo]
                .iter()
                .chain(&entries[hi..])
                .cloned()
                .collect();
            runs += 1;
            if fails(&complement) {
                reduced = Some(complement);
                break;
            }
        }
        if let Some(complement) = reduced {
            entries = complement;
            n = (n - 1).max(2);
        } else {
            if n >= entries.len() {
                break;
            }
            n = (n * 2).min(entries.len());
        }
    }
    if entries.len() == 1 && fails(&[]) {
        entries.clear();
    }
    entries
}

/// A fault entry as the `--fault` flag that recreates it.
fn fault_flag(entry: &Entry) -> String {
    let at = entry
        .at
        .unwrap_or(Instant::ZERO)
        .since_origin()
        .as_secs_f64();
    let line = entry.to_line();
    let v: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
    let name = v["fault"].as_str().unwrap_or("?");
    let arg = ["count", "status", "duration_s", "by_s"]
        .iter()
        .find_map(|k| v.get(*k).map(ToString::to_string))
        .or_else(|| (v["cursor"] == false).then(|| "nocursor".to_owned()));
    match arg {
        Some(a) => format!("{name}:{a}@{at}"),
        None => format!("{name}@{at}"),
    }
}

/// Runs every seed in `seeds`.
#[must_use]
pub fn explore(seeds: Range<u64>, opts: &ExploreOptions) -> ExploreReport {
    if opts.election {
        return crate::election::explore(seeds, opts);
    }
    let mut report = ExploreReport {
        inject_flags: opts
            .inject
            .iter()
            .map(|e| format!(" --fault {}", fault_flag(e)))
            .collect(),
        mode_flags: if opts.priority {
            " --priority".into()
        } else {
            String::new()
        },
        ..ExploreReport::default()
    };
    let run_one = |trace: &Trace, pages: Option<u32>, streaming: Option<StreamingLists>| {
        if opts.priority {
            run_busy(trace, opts.long, opts.starvation_rule)
        } else {
            run_listing(trace, opts.long, pages, streaming)
        }
    };
    for seed in seeds {
        let (mut trace, profile) = if opts.priority {
            generate_busy(seed, opts.long)
        } else {
            generate_for(seed, opts.long, opts.sources)
        };
        if !opts.inject.is_empty() {
            trace.entries.extend(opts.inject.iter().cloned());
            trace.entries.sort_by_key(|e| e.at);
        }
        // Busy seeds never page: their profiles are not fault profiles.
        let pages = page_size_for(seed, profile).filter(|_| !opts.priority);
        let streaming = streaming_for(seed, profile).filter(|_| !opts.priority);
        let protobuf = !opts.priority && !trace.header.in_process && protobuf_for(seed, profile);
        if protobuf {
            ask_for_protobuf(&mut trace);
            report.protobuf_seeds += 1;
        }
        let result = run_one(&trace, pages, streaming);
        report.seeds += 1;
        report.steps += result.steps;
        *report.profiles.entry(profile).or_default() += 1;
        for (path, n) in &result.paths {
            let e = report.paths.entry(path).or_default();
            e.0 += 1;
            e.1 += n;
        }
        if opts.verbose {
            report.lines.push(format!(
                "seed {seed}: {profile}{}, {} records, {} steps, {} reconciles, {} relists: {}",
                pages.map_or(String::new(), |n| format!(" (LIST pages of {n})"))
                    + match streaming {
                        Some(StreamingLists::Served) => " (streaming lists)",
                        Some(StreamingLists::Refused) => " (streaming lists refused)",
                        None => "",
                    }
                    + if protobuf { " (protobuf)" } else { "" },
                trace.entries.len(),
                result.steps,
                result.stats.reconciles,
                result.stats.relists,
                if result.violations.is_empty() {
                    "ok"
                } else {
                    "FAILED"
                }
            ));
        }
        if let Some(violation) = result.violations.first().cloned() {
            let small = if opts.minimize {
                minimize_with(&trace, violation.invariant, |t| {
                    run_one(t, pages, streaming)
                })
            } else {
                trace.clone()
            };
            let minimized = opts.out_dir.as_ref().and_then(|dir| {
                std::fs::create_dir_all(dir).ok()?;
                let path = dir.join(format!("seed-{seed}.min.jsonl"));
                reconcile_trace::write_private(&path, small.to_jsonl().as_bytes()).ok()?;
                Some(path)
            });
            report.failures.push(Failure {
                seed,
                profile,
                violation,
                records: (trace.entries.len(), small.entries.len()),
                minimized,
            });
        }
    }
    report
}

impl ExploreReport {
    /// The report as text: per-seed lines (verbose), failures with their reproduction
    /// commands, then how often each fault path was reached. `long` must match the run.
    #[must_use]
    pub fn render(&self, long: bool) -> String {
        let short = !long;
        let mut out = String::new();
        for line in &self.lines {
            let _ = writeln!(out, "{line}");
        }
        for f in &self.failures {
            let _ = writeln!(
                out,
                "FAILED seed {} ({}): {} at {}: {}",
                f.seed, f.profile, f.violation.invariant, f.violation.at, f.violation.detail
            );
            let _ = writeln!(
                out,
                "  reproduce: cargo run -p reconcile-sim -- explore --seeds {}..{}{}{}{}",
                f.seed,
                f.seed + 1,
                if short { "" } else { " --long" },
                self.mode_flags,
                self.inject_flags
            );
            if let Some(path) = &f.minimized
                && self.election.is_some()
            {
                let _ = writeln!(
                    out,
                    "  {} ({} of {} faults and workload ops), step by step: cargo run -p reconcile-sim -- election {}",
                    if f.records.1 < f.records.0 {
                        "minimized"
                    } else {
                        "scenario"
                    },
                    f.records.1,
                    f.records.0,
                    path.display()
                );
            } else if let Some(path) = &f.minimized {
                let _ = writeln!(
                    out,
                    "  minimized ({} of {} records): cargo run -p reconcile-sim -- simulate --check --settle {}{} {}",
                    f.records.1,
                    f.records.0,
                    settle(!short).as_secs(),
                    if self.mode_flags.is_empty() {
                        String::new()
                    } else {
                        format!(
                            " --priority --reconcile-duration {}",
                            BUSY_RECONCILE.as_secs_f64()
                        )
                    },
                    path.display()
                );
                let flags = format!(
                    " --settle {}{}",
                    settle(!short).as_secs(),
                    if self.mode_flags.is_empty() {
                        String::new()
                    } else {
                        format!(
                            " --priority --reconcile-duration {}",
                            BUSY_RECONCILE.as_secs_f64()
                        )
                    }
                );
                let _ = writeln!(
                    out,
                    "  as a timeline: {}",
                    crate::report::command_for(path, &flags)
                );
            }
        }
        let _ = writeln!(
            out,
            "{} seeds, {} steps, {} failed",
            self.seeds,
            self.steps,
            self.failures.len()
        );
        if let Some(e) = &self.election {
            let _ = writeln!(
                out,
                "election: clock drift within {}, {} terms, {} takeovers",
                e.drift, e.terms, e.takeovers
            );
            if let Some((gap, seed)) = e.closest_handover {
                let secs = gap as f64 / 1e9;
                let _ = writeln!(
                    out,
                    "  closest handover: a term began {secs:+.3}s after the previous one ended (seed {seed}){}",
                    if gap < 0 { ": TERMS OVERLAPPED" } else { "" }
                );
            }
            if let Some((took, bound, seed)) = e.slowest_election {
                let _ = writeln!(
                    out,
                    "  slowest election after healing: {:.3}s of its {:.3}s bound (seed {seed})",
                    took.as_secs_f64(),
                    bound.as_secs_f64()
                );
            }
        }
        if self.protobuf_seeds > 0 {
            let _ = writeln!(out, "seeds on protobuf: {}", self.protobuf_seeds);
        }
        let _ = writeln!(out, "profiles:");
        for (profile, n) in &self.profiles {
            let _ = writeln!(out, "  {profile:<20} {n:>6} seeds");
        }
        let _ = writeln!(out, "fault paths reached (seeds, times):");
        for (path, (seeds, times)) in &self.paths {
            let _ = writeln!(out, "  {path:<36} {seeds:>6} {times:>8}");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protobuf_is_drawn_for_four_in_ten_seeds_of_the_wire_profiles_only() {
        for profile in ["calm", "slow-reconciles", "sources/failing-reconciles"] {
            assert!(
                (0..1000).all(|seed| !protobuf_for(seed, profile)),
                "{profile}"
            );
        }
        let on = (0..2000)
            .filter(|&seed| protobuf_for(seed, "sources/chaos"))
            .count();
        assert!((700..900).contains(&on), "{on} of 2000");
    }

    #[test]
    fn seeds_parse_as_a_range_or_one() {
        assert_eq!(parse_seeds("3..7").unwrap(), 3..7);
        assert_eq!(parse_seeds("9").unwrap(), 9..10);
        assert!(parse_seeds("7..3").is_err());
        assert!(parse_seeds("a..b").is_err());
        assert!(parse_seeds("0..99999999999").is_err());
    }

    #[test]
    fn a_seed_always_generates_the_same_trace() {
        let (a, pa) = generate(42, false);
        let (b, pb) = generate(42, false);
        assert_eq!(pa, pb);
        assert_eq!(a.to_jsonl(), b.to_jsonl());
        assert_ne!(generate(43, false).0.to_jsonl(), a.to_jsonl());
    }

    #[test]
    fn one_source_seeds_generate_what_they_always_did_and_many_source_seeds_name_sources() {
        let mut many = 0;
        for seed in 0..40 {
            let (one, _) = generate(seed, false);
            let (both, profile) = generate_for(seed, false, Sources::Both);
            if many_sources(seed, Sources::Both) {
                many += 1;
                assert!(profile.starts_with("sources/"), "seed {seed}: {profile}");
                assert!(!both.header.secondaries.is_empty(), "seed {seed}");
                assert!(
                    both.entries.iter().any(|e| e.source_index() > 0),
                    "seed {seed}"
                );
            } else {
                assert_eq!(both.to_jsonl(), one.to_jsonl(), "seed {seed}");
            }
            let (again, _) = generate_many(seed, false);
            let parsed = Trace::parse("g", &again.to_jsonl()).unwrap();
            assert_eq!(parsed.to_jsonl(), again.to_jsonl(), "seed {seed}");
        }
        assert!(
            (10..=30).contains(&many),
            "{many} of 40 seeds had several sources"
        );
    }

    #[test]
    fn generated_traces_parse_back_as_written() {
        for seed in 0..20 {
            let (trace, _) = generate(seed, false);
            let again = Trace::parse("g", &trace.to_jsonl()).unwrap();
            assert_eq!(again.header, trace.header, "seed {seed}");
            assert_eq!(again.entries.len(), trace.entries.len(), "seed {seed}");
        }
    }
}
