//! One seed: the schedule it draws, the kit's hooks at the transport (faults, the request
//! lines, the write counts, invariants after every change), and the kit's own task, which
//! starts and kills the controller's incarnations, plays the schedule, and runs the
//! oracles in order.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Poll, Waker};
use std::time::Duration;

use serde_json::Value;

use super::faults::{Fault, FaultKind};
use super::world::{Action, World};
use super::{Env, Invariant, QUIET_BEFORE_CONVERGED, Scenario, When};
use crate::cluster::{Cluster, ClusterConfig};
use crate::rng::Rng;
use crate::runtime::hooks::{Cut, Hooks, Request, Verdict};
use crate::runtime::{SimConfig, SimHandle, Simulation, stamp};

/// How long a crashed controller stays down before its next incarnation starts.
const RESTART_DELAY: Duration = Duration::from_secs(1);
/// How long after the shutdown signal the controller may take to return.
const STOP_LIMIT: Duration = Duration::from_secs(60);
/// The kubelet's first crash-loop back-off, doubled at each exit.
const EXIT_BACKOFF: Duration = Duration::from_secs(10);
/// Its longest.
const MAX_EXIT_BACKOFF: Duration = Duration::from_secs(300);
/// How long the kit watches for requests after the controller returned.
const AFTER_STOP: Duration = Duration::from_secs(30);
/// How long a fresh incarnation gets to sync and reconcile for the idempotence oracle.
const IDEMPOTENCE_WINDOW: Duration = Duration::from_secs(30);
/// Faults go on this long after the user's last action.
const FAULT_TAIL: Duration = Duration::from_secs(5);
/// Writes that change the world after the faults stopped before the run counts as a hot
/// loop without waiting out the settle time.
const MAX_SETTLE_CHANGES: u64 = 1_000;
/// Request lines kept for a snapshot, at most.
const MAX_LINES: usize = 100_000;

/// When a schedule item plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Trigger {
    /// At this time after the controller started.
    At(Duration),
    /// Right after the controller's `n`-th applied write.
    AfterWrite(u32),
}

/// What a schedule item does.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum What {
    /// A user action.
    Action(Action),
    /// A fault.
    Fault(Fault),
}

/// One item of a run's schedule.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Item {
    pub(crate) trigger: Trigger,
    pub(crate) what: What,
}

impl Item {
    pub(crate) fn describe(&self, namespace: &str) -> String {
        let when = match self.trigger {
            Trigger::At(at) => stamp(at),
            Trigger::AfterWrite(n) => format!("{:>9}", format!("write #{n}")),
        };
        match &self.what {
            What::Action(action) => format!("{when} {}", action.describe(namespace)),
            What::Fault(fault) => format!("{when} fault {fault}"),
        }
    }
}

/// A broken oracle: which, what, when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// `convergence`, `no hot loop`, `idempotence`, `clean stop`, `the run`, or
    /// `invariant "<name>"`.
    pub oracle: String,
    /// What went wrong.
    pub message: String,
    /// When (virtual).
    pub at: Duration,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} at {}: {}",
            self.oracle,
            stamp(self.at).trim_start(),
            self.message
        )
    }
}

/// What one seed gave.
#[derive(Debug, Clone)]
pub(crate) struct Outcome {
    pub(crate) violation: Option<Violation>,
    /// The simulation's log.
    pub(crate) log: Vec<String>,
    /// One line per request the controller made.
    pub(crate) requests: Vec<String>,
    /// The faults that played.
    pub(crate) faults: Vec<FaultKind>,
    /// The controller's writes.
    pub(crate) writes: u64,
    /// The controller's requests.
    pub(crate) request_count: u64,
}

/// The schedule of `seed`: the user's actions, and the faults it draws.
pub(crate) fn schedule(scenario: &Scenario, seed: u64) -> Vec<Item> {
    let mut items: Vec<Item> = scenario
        .actions
        .iter()
        .map(|(at, action)| Item {
            trigger: Trigger::At(*at),
            what: What::Action(action.clone()),
        })
        .collect();
    let last = scenario.actions.iter().map(|(at, _)| *at).max();
    let until = last.unwrap_or(Duration::ZERO) + FAULT_TAIL;
    let mut rng = Rng::new(seed ^ 0x5CE7_A210_F417_0000);
    for (at, fault) in scenario.faults.draw(&mut rng, until) {
        let trigger = match fault {
            Fault::CrashAfterWrite(n) => Trigger::AfterWrite(n),
            _ => Trigger::At(at),
        };
        items.push(Item {
            trigger,
            what: What::Fault(fault),
        });
    }
    // Stable: actions at a time come before faults at that time.
    items.sort_by_key(|item| match item.trigger {
        Trigger::At(at) => at,
        Trigger::AfterWrite(_) => Duration::ZERO,
    });
    items
}

/// Runs `items` with `seed`: `trace` writes each incarnation's trace (and the log) under
/// `out` with this stem; `lines` keeps one line per request (and the `--` markers).
pub(crate) fn run(
    scenario: &Scenario,
    seed: u64,
    items: &[Item],
    trace: Option<(PathBuf, String)>,
    lines: bool,
) -> Outcome {
    let sim = Simulation::with_cluster(
        SimConfig {
            horizon: Duration::from_secs(30 * 24 * 3600),
            max_steps: 20_000_000,
            ..SimConfig::seed(seed)
        },
        Cluster::with_builtins(
            ClusterConfig {
                seed,
                ..ClusterConfig::default()
            },
            reconcile_core::Instant::ZERO,
        ),
    );
    let kit = Arc::new(Kit::default());
    // Only a traced run's markers go anywhere: the others are not kept.
    kit.lock().keep_marks = trace.is_some();
    let mut setup = Vec::new();
    sim.cluster(|cluster, now| {
        for crd in &scenario.crds {
            if let Err(e) = cluster.register_crd(crd) {
                setup.push(format!("the CRD does not register: {e}"));
            }
        }
        for action in &scenario.given {
            let line = action.apply(cluster, now, &scenario.namespace);
            if line.contains(" failed: ") {
                setup.push(line.clone());
            }
            setup.push(line);
        }
    });
    for line in &setup {
        sim.note(line);
    }
    sim.set_hooks(Box::new(KitHooks {
        kit: Arc::clone(&kit),
        invariants: scenario
            .invariants
            .iter()
            .filter(|i| i.when == When::EveryStep)
            .cloned()
            .collect(),
        before: None,
        rv_before: 0,
        clean_stop: scenario.oracles.clean_stop,
        lines,
    }));
    let driver = Driver {
        scenario: scenario.clone(),
        handle: sim.handle(),
        kit: Arc::clone(&kit),
        items: items.to_vec(),
        incarnation: 0,
        exits: 0,
        trace: trace.clone(),
    };
    let result = std::panic::catch_unwind(AssertUnwindSafe(|| sim.block_on(driver.drive())));
    let at = sim.now();
    let ended = match result {
        Ok(Ok(())) => None,
        Ok(Err(e)) => Some(Violation {
            oracle: "the run".into(),
            message: e.to_string(),
            at,
        }),
        Err(panic) if scenario.oracles.clean_stop => Some(Violation {
            oracle: "clean stop".into(),
            message: format!("a task panicked: {}", panic_message(&*panic)),
            at,
        }),
        // The run cannot go on past a panic: it ends there, unjudged.
        Err(_) => None,
    };
    drop(sim.take_hooks());
    let mut st = kit.lock();
    if st.violation.is_none() {
        st.violation = ended;
    }
    let outcome = Outcome {
        violation: st.violation.clone(),
        log: sim.log(),
        requests: std::mem::take(&mut st.lines),
        faults: std::mem::take(&mut st.played),
        writes: st.writes,
        request_count: st.requests,
    };
    let (marks, started) = (
        std::mem::take(&mut st.marks),
        std::mem::take(&mut st.started),
    );
    drop(st);
    // Its tasks go with it, and with them every trace recorder: each file is whole.
    drop(sim);
    if let Some((dir, stem)) = trace {
        let text: String = outcome.log.iter().map(|l| format!("{l}\n")).collect();
        let _ = std::fs::write(dir.join(format!("{stem}.log")), text);
        note_traces(&dir, &stem, &marks, &started);
    }
    outcome
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_else(|| "(a panic with no message)".into())
}

/// What the kit's hooks and its task share. Locked only briefly, and never while calling
/// into the simulation (the hooks run with the simulation locked).
#[derive(Default)]
struct Kit {
    state: Mutex<KitState>,
}

impl Kit {
    fn lock(&self) -> MutexGuard<'_, KitState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[derive(Default)]
struct KitState {
    /// Request faults whose time came, each for the next request it fits.
    armed: Vec<Fault>,
    /// No request reaches the apiserver before this (a restart).
    unreachable_until: Duration,
    /// Until then, every write a reconcile makes is answered this much late (a rolling
    /// restart's slow reconciles).
    slow_reconciles: Option<(Duration, Duration)>,
    /// The controller's writes (every incarnation), and the applied ones.
    writes: u64,
    applied: u32,
    /// Of the writes, those that changed the world (the resourceVersion moved): what the
    /// oracles count. A write that changes nothing (an apply of what is there, say) is
    /// idempotent; too many of them show as reconciles.
    changes: u64,
    last_change_at: Duration,
    first_change_since: Option<String>,
    /// `n` of each crash due after the `n`-th applied write.
    crash_after: Vec<u32>,
    crash_now: bool,
    /// A rolling restart's signal is due: a reconcile is in flight, its write slow.
    drain_now: bool,
    /// An incarnation whose future returned before the shutdown signal.
    exited: Option<u64>,
    /// The incarnations sent the shutdown signal.
    signalled: BTreeSet<u64>,
    /// The kit's task, waiting for a crash to be due.
    waker: Option<Waker>,
    /// Incarnations whose future returned after the shutdown signal.
    stopped: BTreeSet<u64>,
    returned: BTreeSet<u64>,
    violation: Option<Violation>,
    lines: Vec<String>,
    requests: u64,
    played: Vec<FaultKind>,
    /// The kit's markers (actions, faults, restarts, oracle steps) with their times, for
    /// the traces ([`note_traces`]); at most [`MAX_LINES`].
    marks: Vec<(Duration, String)>,
    keep_marks: bool,
    /// When each incarnation's controller function started.
    started: BTreeMap<u64, Duration>,
}

impl KitState {
    fn violate(&mut self, oracle: &str, message: String, at: Duration) {
        if self.violation.is_none() {
            self.violation = Some(Violation {
                oracle: oracle.to_owned(),
                message,
                at,
            });
        }
    }
}

struct KitHooks {
    kit: Arc<Kit>,
    invariants: Vec<Invariant>,
    /// The object a write names, as it was before the write.
    before: Option<Value>,
    /// The cluster's resourceVersion before the request.
    rv_before: u64,
    /// [`super::Oracles::clean_stop`].
    clean_stop: bool,
    /// Whether request lines are kept (a snapshot, a reproducer), not only counted.
    lines: bool,
}

impl Hooks for KitHooks {
    fn before(&mut self, now: Duration, request: &Request<'_>, cluster: &Cluster) -> Verdict {
        let mut kit = self.kit.lock();
        let target = format!("{} {}", request.http.method(), request.http.uri());
        if kit.stopped.contains(&request.incarnation) {
            if !self.clean_stop {
                return Verdict::Unreachable("the controller had stopped".into());
            }
            kit.violate(
                "clean stop",
                format!("a request after the controller returned: {target}"),
                now,
            );
            return Verdict::Unreachable("the controller had stopped".into());
        }
        if now < kit.unreachable_until {
            return Verdict::Unreachable("connection refused (the apiserver restarts)".into());
        }
        self.before = None;
        self.rv_before = cluster.resource_version();
        if request.is_write() && request.in_reconcile {
            if take_armed(&mut kit, |f| matches!(f, Fault::ReconcilePanic)).is_some() {
                return Verdict::Panic(format!("injected by the test kit at {target}"));
            }
            if let Some(Fault::RollingRestart { lasting, by }) =
                take_armed(&mut kit, |f| matches!(f, Fault::RollingRestart { .. }))
            {
                // The signal comes while this reconcile waits for its slow answer.
                kit.slow_reconciles = Some((now + lasting, by));
                kit.drain_now = true;
            }
            if let Some((until, by)) = kit.slow_reconciles
                && now < until
            {
                if self.lines {
                    self.before = object_of(cluster, request.http);
                }
                return Verdict::ServeLate(by);
            }
        }
        if request.is_write() {
            if self.lines {
                self.before = object_of(cluster, request.http);
            }
            let fault = take_armed(&mut kit, |f| {
                matches!(
                    f,
                    Fault::WriteConflict | Fault::WriteError(_) | Fault::LostAnswer
                )
            });
            return match fault {
                Some(Fault::WriteConflict) => Verdict::Refuse {
                    code: 409,
                    reason: "Conflict",
                },
                Some(Fault::WriteError(code)) => refuse(code),
                Some(_) => Verdict::LoseAnswer,
                None => Verdict::Serve,
            };
        }
        if request.is_watch() {
            return match take_armed(&mut kit, |f| matches!(f, Fault::WatchError(_))) {
                Some(Fault::WatchError(code)) => refuse(code),
                _ => Verdict::Serve,
            };
        }
        let names_one = cluster
            .locate(request.http.uri().path())
            .is_some_and(|l| l.name.is_some());
        if names_one {
            return Verdict::Serve;
        }
        if let Some(Fault::ListError(code)) =
            take_armed(&mut kit, |f| matches!(f, Fault::ListError(_)))
        {
            return refuse(code);
        }
        // A stale answer needs a version still in the history: the fault stays armed when
        // there is none.
        if let Some(Fault::StaleList { behind }) = kit
            .armed
            .iter()
            .find(|f| matches!(f, Fault::StaleList { .. }))
            .copied()
            && let Some(stale) = stale_list(request.http, cluster, behind)
        {
            take_armed(&mut kit, |f| matches!(f, Fault::StaleList { .. }));
            return Verdict::ServeInstead(Box::new(stale));
        }
        Verdict::Serve
    }

    fn after(
        &mut self,
        now: Duration,
        request: &Request<'_>,
        status: u16,
        cluster: &Cluster,
    ) -> Option<Waker> {
        let mut kit = self.kit.lock();
        let mut wake = None;
        // The line costs a diff of the object: built only when kept, or when it is the
        // first change an oracle may quote.
        let changed = cluster.resource_version() != self.rv_before;
        let quoted = request.is_write()
            && request.incarnation > 0
            && changed
            && kit.first_change_since.is_none();
        let line = (self.lines || quoted)
            .then(|| request_line(now, request.http, status, self.before.take(), cluster));
        if request.is_write() && request.incarnation > 0 {
            kit.writes += 1;
            if changed {
                kit.changes += 1;
                kit.last_change_at = now;
                if quoted {
                    kit.first_change_since.clone_from(&line);
                }
            }
            if (200..300).contains(&status) {
                kit.applied += 1;
                let applied = kit.applied;
                if let Some(i) = kit.crash_after.iter().position(|&n| n == applied) {
                    kit.crash_after.remove(i);
                    kit.crash_now = true;
                    kit.played.push(FaultKind::CrashAfterWrite);
                    wake = kit.waker.take();
                }
            }
        }
        if kit.drain_now && wake.is_none() {
            wake = kit.waker.take();
        }
        if request.incarnation > 0 {
            kit.requests += 1;
        }
        if let Some(line) = line
            && self.lines
            && kit.lines.len() < MAX_LINES
        {
            kit.lines.push(line);
        }
        wake
    }

    fn changed(&mut self, now: Duration, cluster: &Cluster) {
        let world = World { cluster, now };
        for invariant in &self.invariants {
            if let Err(message) = (invariant.check)(&world) {
                self.kit
                    .lock()
                    .violate(&format!("invariant {:?}", invariant.name), message, now);
                return;
            }
        }
    }
}

/// A line in the log, and in the request lines as a `--` marker (a user action, a fault,
/// a crash, an oracle step), so a snapshot shows what the requests answer to.
fn mark(handle: &SimHandle, kit: &Kit, line: impl fmt::Display) {
    let line = line.to_string();
    let at = handle.now();
    {
        let mut st = kit.lock();
        if st.lines.len() < MAX_LINES {
            st.lines.push(format!("{} -- {line}", stamp(at)));
        }
        if st.keep_marks && st.marks.len() < MAX_LINES {
            st.marks.push((at, line.clone()));
        }
    }
    handle.note(line);
}

/// Writes the kit's markers into each incarnation's trace as `note` records at their
/// times, so that `reconcile-sim report` draws the faults, actions and restarts on the
/// timeline of the process they hit. A trace's times count from its controller's start.
fn note_traces(
    dir: &Path,
    stem: &str,
    marks: &[(Duration, String)],
    started: &BTreeMap<u64, Duration>,
) {
    let starts: Vec<(u64, Duration)> = started.iter().map(|(n, at)| (*n, *at)).collect();
    for (i, (n, start)) in starts.iter().enumerate() {
        let end = starts.get(i + 1).map_or(Duration::MAX, |(_, next)| *next);
        let path = dir.join(format!("{stem}-{n}.trace.jsonl"));
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let mut pending = marks
            .iter()
            .filter(|(at, _)| at >= start && *at < end)
            .map(|(at, line)| (at.saturating_sub(*start).as_secs_f64(), line))
            .peekable();
        let mut out = String::with_capacity(text.len() + 4096);
        let note = |out: &mut String, t: f64, line: &str| {
            let record =
                serde_json::json!({"record": "note", "t": t, "note": format!("kit: {line}")});
            out.push_str(&record.to_string());
            out.push('\n');
        };
        for (k, record) in text.lines().enumerate() {
            // The header first; then each record after the marks before it.
            let t = (k > 0)
                .then(|| serde_json::from_str::<Value>(record).ok())
                .flatten()
                .and_then(|v| v.get("t").and_then(Value::as_f64));
            if let Some(t) = t {
                while let Some((at, line)) = pending.next_if(|(at, _)| *at < t) {
                    note(&mut out, at, line);
                }
            }
            out.push_str(record);
            out.push('\n');
        }
        for (at, line) in pending {
            note(&mut out, at, line);
        }
        let _ = std::fs::write(&path, out);
    }
}

/// Whether `fault` waits for the next request it fits, rather than acting at its time.
fn is_armed(fault: Fault) -> bool {
    matches!(
        fault,
        Fault::ListError(_)
            | Fault::WatchError(_)
            | Fault::StaleList { .. }
            | Fault::WriteConflict
            | Fault::WriteError(_)
            | Fault::LostAnswer
            | Fault::ReconcilePanic
            | Fault::RollingRestart { .. }
    )
}

/// Takes the first armed fault `fits` accepts, counting it as played.
fn take_armed(kit: &mut KitState, fits: impl Fn(&Fault) -> bool) -> Option<Fault> {
    let i = kit.armed.iter().position(fits)?;
    let fault = kit.armed.remove(i);
    kit.played.push(fault.kind());
    Some(fault)
}

fn refuse(code: u16) -> Verdict {
    Verdict::Refuse {
        code,
        reason: if code == 429 {
            "TooManyRequests"
        } else {
            "InternalError"
        },
    }
}

/// The LIST `request` at a resourceVersion `behind` versions back, as a lagging replica
/// would answer it; `None` when that version is compacted, or the request pages on.
fn stale_list(
    request: &http::Request<Vec<u8>>,
    cluster: &Cluster,
    behind: u64,
) -> Option<http::Request<Vec<u8>>> {
    let rv = cluster.resource_version().saturating_sub(behind);
    if rv <= cluster.compacted() || rv == 0 {
        return None;
    }
    let query = request.uri().query().unwrap_or("");
    if query.split('&').any(|p| p.starts_with("continue=")) {
        return None;
    }
    let mut params: Vec<&str> = query
        .split('&')
        .filter(|p| {
            !p.is_empty()
                && !p.starts_with("resourceVersion=")
                && !p.starts_with("resourceVersionMatch=")
        })
        .collect();
    let rv_param = format!("resourceVersion={rv}");
    params.push(&rv_param);
    params.push("resourceVersionMatch=Exact");
    let uri = format!("{}?{}", request.uri().path(), params.join("&"));
    let mut builder = http::Request::builder()
        .method(request.method().clone())
        .uri(uri);
    for (name, value) in request.headers() {
        builder = builder.header(name, value);
    }
    builder.body(request.body().clone()).ok()
}

/// The object a request's path names, as the cluster has it now.
fn object_of(cluster: &Cluster, request: &http::Request<Vec<u8>>) -> Option<Value> {
    let located = cluster.locate(request.uri().path())?;
    cluster
        .get(
            located.kind,
            located.namespace.as_deref(),
            located.name.as_deref()?,
        )
        .ok()
}

/// `  1.234s apply ConfigMap default/a-cm +data.content="x=1" -> 201`.
fn request_line(
    now: Duration,
    request: &http::Request<Vec<u8>>,
    status: u16,
    before: Option<Value>,
    cluster: &Cluster,
) -> String {
    let Some(located) = cluster.locate(request.uri().path()) else {
        return format!(
            "{} {} {} -> {status}",
            stamp(now),
            request.method(),
            request.uri().path()
        );
    };
    let desc = cluster.descriptor(located.kind);
    let query = request.uri().query().unwrap_or("");
    let content_type = request
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let verb = match *request.method() {
        http::Method::GET
            if query
                .split('&')
                .any(|p| p == "watch=true" || p == "watch=1") =>
        {
            "watch"
        }
        http::Method::GET if located.name.is_none() => "list",
        http::Method::GET => "get",
        http::Method::POST => "create",
        http::Method::PUT => "replace",
        http::Method::PATCH if content_type.contains("apply-patch") => "apply",
        http::Method::PATCH => "patch",
        http::Method::DELETE => "delete",
        _ => request.method().as_str(),
    };
    let sub = located
        .subresource
        .as_deref()
        .map(|s| format!(" {s}"))
        .unwrap_or_default();
    let ns = located.namespace.as_deref();
    let name = located.name.clone().or_else(|| {
        // A create names its object in the body.
        serde_json::from_slice::<Value>(request.body())
            .ok()
            .and_then(|b| b.pointer("/metadata/name")?.as_str().map(str::to_owned))
    });
    let what = match (ns, &name) {
        (Some(ns), Some(n)) => format!("{ns}/{n}"),
        (None, Some(n)) => n.clone(),
        (Some(ns), None) => format!("{ns}/*"),
        (None, None) => "*".to_owned(),
    };
    let mut line = format!("{} {verb}{sub} {} {what}", stamp(now), desc.kind);
    if request.method() != http::Method::GET && (200..300).contains(&status) {
        let after = name
            .as_deref()
            .and_then(|n| cluster.get(located.kind, ns, n).ok());
        let change = summarize(before.as_ref(), after.as_ref());
        if !change.is_empty() {
            line.push(' ');
            line.push_str(&change);
        }
    }
    line.push_str(&format!(" -> {status}"));
    line
}

/// What a write changed, in one line: `+path=value`, `path: old -> new`, `-path`, at most
/// four, leaving out what the apiserver keeps up to date itself.
fn summarize(before: Option<&Value>, after: Option<&Value>) -> String {
    fn leaves(prefix: &str, v: &Value, out: &mut Vec<(String, String)>) {
        match v {
            Value::Object(map) => {
                for (k, v) in map {
                    let path = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    if matches!(
                        path.as_str(),
                        "metadata.resourceVersion"
                            | "metadata.managedFields"
                            | "metadata.generation"
                            | "metadata.uid"
                            | "metadata.creationTimestamp"
                            | "metadata.name"
                            | "metadata.namespace"
                            | "apiVersion"
                            | "kind"
                    ) {
                        continue;
                    }
                    leaves(&path, v, out);
                }
            }
            Value::Array(items)
                if !items.is_empty() && items.iter().all(|i| i.get("name").is_some()) =>
            {
                // Owner references, containers, ports: by kind and name.
                let named: Vec<String> = items
                    .iter()
                    .map(|i| {
                        let name = i.get("name").and_then(Value::as_str).unwrap_or("?");
                        match i.get("kind").and_then(Value::as_str) {
                            Some(kind) => format!("{kind} {name}"),
                            None => name.to_owned(),
                        }
                    })
                    .collect();
                out.push((prefix.to_owned(), format!("[{}]", named.join(", "))));
            }
            other => {
                let mut text = other.to_string();
                if text.len() > 40 {
                    let cut = (0..=37)
                        .rev()
                        .find(|&i| text.is_char_boundary(i))
                        .unwrap_or(0);
                    text.truncate(cut);
                    text.push('…');
                }
                out.push((prefix.to_owned(), text));
            }
        }
    }
    match (before, after) {
        (_, None) => return "gone".to_owned(),
        (Some(b), Some(a)) if b == a => return "(no change)".to_owned(),
        _ => {}
    }
    let (mut old, mut new) = (Vec::new(), Vec::new());
    if let Some(b) = before {
        leaves("", b, &mut old);
    }
    if let Some(a) = after {
        leaves("", a, &mut new);
    }
    let old: std::collections::BTreeMap<_, _> = old.into_iter().collect();
    let new: std::collections::BTreeMap<_, _> = new.into_iter().collect();
    let mut parts = Vec::new();
    for (path, value) in &new {
        match old.get(path) {
            None => parts.push(format!("+{path}={value}")),
            Some(was) if was != value => parts.push(format!("{path}: {was} -> {value}")),
            Some(_) => {}
        }
    }
    for path in old.keys().filter(|p| !new.contains_key(*p)) {
        parts.push(format!("-{path}"));
    }
    if parts.is_empty() {
        return "(no change)".to_owned();
    }
    let more = parts.len().saturating_sub(4);
    parts.truncate(4);
    if more > 0 {
        parts.push(format!("(+{more} more)"));
    }
    parts.join(" ")
}

/// The kit's own task.
struct Driver {
    scenario: Scenario,
    handle: SimHandle,
    kit: Arc<Kit>,
    items: Vec<Item>,
    incarnation: u64,
    /// Exits so far (the back-off grows with them).
    exits: u32,
    trace: Option<(PathBuf, String)>,
}

impl Driver {
    async fn drive(mut self) {
        self.start();
        let handle = self.handle.clone();
        let mut timed: Vec<Item> = Vec::new();
        {
            let mut kit = self.kit.lock();
            for item in &self.items {
                match item.trigger {
                    Trigger::AfterWrite(n) => kit.crash_after.push(n),
                    Trigger::At(_) => timed.push(item.clone()),
                }
            }
        }
        let last_action = self
            .scenario
            .actions
            .iter()
            .map(|(at, _)| *at)
            .max()
            .unwrap_or(Duration::ZERO);
        let faults_end = last_action + FAULT_TAIL;
        for item in timed {
            let Trigger::At(at) = item.trigger else {
                continue;
            };
            self.wait_until(at).await;
            match &item.what {
                What::Action(action) => {
                    let ns = self.scenario.namespace.clone();
                    let line = handle.cluster(|cluster, now| action.apply(cluster, now, &ns));
                    mark(&handle, &self.kit, line);
                }
                What::Fault(fault) => self.fault(*fault).await,
            }
        }
        self.wait_until(faults_end).await;
        {
            let mut kit = self.kit.lock();
            kit.armed.clear();
            kit.crash_after.clear();
            kit.crash_now = false;
            kit.drain_now = false;
            kit.slow_reconciles = None;
        }
        let hung = self.kit.lock().played.contains(&FaultKind::HangingWatches);
        if hung {
            // A watch still hung is a fault that has not stopped: its connection ends.
            handle.cut_watches(Cut::Drop);
            mark(&handle, &self.kit, "faults stop (the hung watches end)");
        } else {
            mark(&handle, &self.kit, "faults stop");
        }
        if self.oracles().await.is_err() {
            return;
        }
        self.stop().await;
    }

    async fn oracles(&mut self) -> Result<(), ()> {
        {
            let handle = self.handle.clone();
            let scenario = self.scenario.clone();
            // 1. Convergence.
            let stopped_at = handle.now();
            let deadline = stopped_at + scenario.settle;
            let changes_at_stop = self.kit.lock().changes;
            loop {
                let now = handle.now();
                let changes = self.kit.lock().changes - changes_at_stop;
                if scenario.oracles.no_hot_loop && changes > MAX_SETTLE_CHANGES {
                    self.violate(
                        "no hot loop",
                        format!(
                            "{changes} writes changed the world since the faults stopped, and the controller goes on writing"
                        ),
                    );
                    return Err(());
                }
                let wanted = match &scenario.converges_to {
                    Some(check) => handle.cluster(|cluster, _| check(&World { cluster, now })),
                    None => Ok(()),
                };
                let last_write = self.kit.lock().last_change_at;
                // Quiet since the faults stopped too: a healed fault (a watch back) may
                // still make the controller act.
                let quiet =
                    now.saturating_sub(last_write.max(stopped_at)) >= QUIET_BEFORE_CONVERGED;
                if wanted.is_ok() && quiet {
                    mark(&handle, &self.kit, "converged");
                    break;
                }
                if now >= deadline {
                    if scenario.oracles.convergence {
                        let why = match wanted {
                            Err(e) => e,
                            Ok(()) => format!(
                                "the world is as wanted but the controller still writes (last at {})",
                                stamp(last_write).trim_start()
                            ),
                        };
                        self.violate(
                            "convergence",
                            format!(
                                "not converged {} s after the faults stopped: {why}",
                                scenario.settle.as_secs()
                            ),
                        );
                        return Err(());
                    }
                    break;
                }
                self.wait_until(now + Duration::from_secs(1)).await;
            }
            if self.failed() {
                return Err(());
            }
            // 5. Invariants at quiescence.
            for invariant in scenario
                .invariants
                .iter()
                .filter(|i| i.when == When::Quiescence)
            {
                let now = handle.now();
                let result =
                    handle.cluster(|cluster, _| (invariant.check)(&World { cluster, now }));
                if let Err(message) = result {
                    self.violate(&format!("invariant {:?}", invariant.name), message);
                    return Err(());
                }
            }
            // 2. No hot loop.
            if scenario.oracles.no_hot_loop {
                let (writes, reconciles, first) = self.window(scenario.quiet).await;
                if writes > 0 {
                    self.violate(
                        "no hot loop",
                        format!(
                            "{writes} write(s) changed the world in the {} s after convergence, the first: {}",
                            scenario.quiet.as_secs(),
                            first.unwrap_or_default().trim_start()
                        ),
                    );
                    return Err(());
                }
                if reconciles > scenario.quiet_reconciles {
                    self.violate(
                        "no hot loop",
                        format!(
                            "{reconciles} reconciles in the {} s after convergence (at most {} allowed)",
                            scenario.quiet.as_secs(),
                            scenario.quiet_reconciles
                        ),
                    );
                    return Err(());
                }
            }
            // 3. Idempotence: a fresh incarnation reconciles every parent from a fresh LIST.
            if scenario.oracles.idempotence {
                mark(
                    &handle,
                    &self.kit,
                    "idempotence: a fresh controller at convergence",
                );
                self.crash();
                let (writes, _, first) = self.window(IDEMPOTENCE_WINDOW).await;
                if writes > 0 {
                    self.violate(
                        "idempotence",
                        format!(
                            "a fresh controller changed the converged world {writes} time(s), the first: {}",
                            first.unwrap_or_default().trim_start()
                        ),
                    );
                    return Err(());
                }
            }
            if self.failed() { Err(()) } else { Ok(()) }
        }
    }

    /// Waits `span` (restarting crashed controllers as due): the controller's writes that
    /// changed the world in it, the reconciles the log shows, and the first such write.
    async fn window(&mut self, span: Duration) -> (u64, u64, Option<String>) {
        let from_writes = {
            let mut kit = self.kit.lock();
            kit.first_change_since = None;
            kit.changes
        };
        let from_log = self.handle.log_len();
        let end = self.handle.now() + span;
        self.wait_until(end).await;
        let kit = self.kit.lock();
        let writes = kit.changes - from_writes;
        let first = kit.first_change_since.clone();
        drop(kit);
        let reconciles = self
            .handle
            .log_since(from_log)
            .iter()
            .filter(|l| {
                l.trim_start()
                    .split_once(' ')
                    .is_some_and(|(_, rest)| rest.starts_with("reconcile "))
            })
            .count() as u64;
        (writes, reconciles, first)
    }

    /// 4. A clean stop: the signal, the future's return, and nothing after it.
    async fn stop(&mut self) {
        let n = self.incarnation;
        mark(
            &self.handle,
            &self.kit,
            format_args!("stop: the shutdown signal to controller #{n}"),
        );
        self.kit.lock().signalled.insert(n);
        self.handle.signal(n);
        if self.await_return(n).await {
            self.handle.sleep(AFTER_STOP).await;
        } else {
            mark(
                &self.handle,
                &self.kit,
                format_args!(
                    "controller #{n} did not return within {} s of the signal (it does not watch for one?): killed",
                    STOP_LIMIT.as_secs()
                ),
            );
        }
        self.handle.kill(n);
    }

    /// A rolling update's restart: the shutdown signal, the drain (bounded by
    /// [`STOP_LIMIT`], then killed, as the kubelet kills past the grace period), and the
    /// next process at once.
    async fn rolling_restart(&mut self) {
        let n = self.incarnation;
        mark(
            &self.handle,
            &self.kit,
            format_args!(
                "rolling restart: the shutdown signal to controller #{n}, a reconcile waiting on a slow write"
            ),
        );
        self.kit.lock().signalled.insert(n);
        self.handle.signal(n);
        let drained = self.await_return(n).await;
        let tasks = self.handle.kill(n);
        mark(
            &self.handle,
            &self.kit,
            format_args!(
                "rolling restart: controller #{n} {} ({tasks} tasks left); the next starts",
                if drained {
                    "drained and returned"
                } else {
                    "did not return within the grace period: killed"
                }
            ),
        );
        self.launch(Duration::ZERO);
    }

    /// Waits, at most [`STOP_LIMIT`], for incarnation `n`'s future to return after the
    /// signal; whether it did.
    async fn await_return(&self, n: u64) -> bool {
        let deadline = self.handle.now() + STOP_LIMIT;
        while !self.kit.lock().returned.contains(&n) && self.handle.now() < deadline {
            self.handle.sleep(Duration::from_millis(100)).await;
        }
        self.kit.lock().returned.contains(&n)
    }

    fn failed(&self) -> bool {
        self.kit.lock().violation.is_some()
    }

    fn violate(&self, oracle: &str, message: String) {
        let now = self.handle.now();
        self.kit.lock().violate(oracle, message, now);
    }

    /// Sleeps until `at`, crashing and restarting the controller whenever a crash after a
    /// write falls due, and restarting it when its process exited.
    async fn wait_until(&mut self, at: Duration) {
        loop {
            let (due, exited, drain) = {
                let mut kit = self.kit.lock();
                (
                    std::mem::take(&mut kit.crash_now),
                    kit.exited.take(),
                    std::mem::take(&mut kit.drain_now),
                )
            };
            if drain {
                self.rolling_restart().await;
                continue;
            }
            if let Some(n) = exited
                && n == self.incarnation
            {
                self.exited(n);
                continue;
            }
            if due {
                self.crash();
                continue;
            }
            if self.handle.now() >= at {
                return;
            }
            let kit = Arc::clone(&self.kit);
            let crash = std::future::poll_fn(move |cx| {
                let mut st = kit.lock();
                if st.crash_now || st.exited.is_some() || st.drain_now {
                    Poll::Ready(())
                } else {
                    st.waker = Some(cx.waker().clone());
                    Poll::Pending
                }
            });
            let handle = self.handle.clone();
            let now = handle.now();
            futures_lite::future::or(handle.sleep(at - now), crash).await;
        }
    }

    /// Starts the first incarnation of the controller.
    fn start(&mut self) {
        self.launch(Duration::ZERO);
    }

    /// Starts the next incarnation, `delay` from now (it waits that out before the
    /// controller function runs). Its future returning before the shutdown signal is a
    /// process exit, which the kit's task answers as the kubelet does ([`Driver::exited`]).
    fn launch(&mut self, delay: Duration) {
        self.incarnation += 1;
        let n = self.incarnation;
        let (runtime, transport) = self.handle.incarnation(n);
        let trace = self
            .trace
            .as_ref()
            .map(|(dir, stem)| dir.join(format!("{stem}-{n}.trace.jsonl")));
        let env = Env {
            runtime,
            transport,
            incarnation: n,
            trace,
        };
        let controller = Arc::clone(&self.scenario.controller);
        let kit = Arc::clone(&self.kit);
        let handle = self.handle.clone();
        self.handle.spawn(
            n,
            Box::pin(async move {
                if delay > Duration::ZERO {
                    handle.sleep(delay).await;
                }
                kit.lock().started.insert(n, handle.now());
                mark(&handle, &kit, format_args!("controller #{n} starts"));
                controller(&env).await;
                let wake = {
                    let mut kit = kit.lock();
                    kit.returned.insert(n);
                    if kit.signalled.contains(&n) {
                        kit.stopped.insert(n);
                        None
                    } else {
                        kit.exited = Some(n);
                        kit.waker.take()
                    }
                };
                mark(&handle, &kit, format_args!("controller #{n} returned"));
                if let Some(waker) = wake {
                    waker.wake();
                }
            }),
        );
    }

    /// Kills the current incarnation and starts the next after [`RESTART_DELAY`].
    fn crash(&mut self) {
        let n = self.incarnation;
        let tasks = self.handle.kill(n);
        mark(
            &self.handle,
            &self.kit,
            format_args!("crash: controller #{n} dies ({tasks} tasks)"),
        );
        self.launch(RESTART_DELAY);
    }

    /// Incarnation `n` returned before the shutdown signal: the process exited. Its tasks
    /// die with it, and the next starts after the kubelet's crash-loop back-off (10 s,
    /// doubling to 5 minutes), as a pod's container is restarted.
    fn exited(&mut self, n: u64) {
        let tasks = self.handle.kill(n);
        let delay = EXIT_BACKOFF
            .saturating_mul(1 << self.exits.min(5))
            .min(MAX_EXIT_BACKOFF);
        self.exits += 1;
        mark(
            &self.handle,
            &self.kit,
            format_args!(
                "controller #{n} exited before the stop signal ({tasks} tasks): restarted in {} s, as the kubelet would",
                delay.as_secs()
            ),
        );
        self.launch(delay);
    }

    async fn fault(&mut self, fault: Fault) {
        mark(&self.handle, &self.kit, format_args!("fault {fault}"));
        let now = self.handle.now();
        // A fault on the next request counts once it meets one (in the hooks).
        if !is_armed(fault) {
            self.kit.lock().played.push(fault.kind());
        }
        match fault {
            Fault::WatchDrop => self.handle.cut_watches(Cut::Drop),
            Fault::Expired => {
                self.handle.cluster(|cluster, _| {
                    let rv = cluster.resource_version();
                    cluster.compact(rv);
                });
                self.handle.cut_watches(Cut::Expire);
            }
            Fault::ApiserverRestart { down } => {
                self.kit.lock().unreachable_until = now + down;
                self.handle.cut_watches(Cut::Drop);
            }
            Fault::SlowWatches { lasting, by } => self.handle.slow_watches(now + lasting, by),
            Fault::HangingWatches => self.handle.cut_watches(Cut::Hang),
            Fault::Coalesce(lasting) => self.handle.coalesce_until(now + lasting),
            Fault::Crash => self.crash(),
            Fault::CrashAfterWrite(_) => {}
            // Armed: the signal waits for a reconcile's write to slow down.
            Fault::RollingRestart { .. } => self.kit.lock().armed.push(fault),
            Fault::ListError(_)
            | Fault::WatchError(_)
            | Fault::StaleList { .. }
            | Fault::WriteConflict
            | Fault::WriteError(_)
            | Fault::LostAnswer
            | Fault::ReconcilePanic => self.kit.lock().armed.push(fault),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_change_summary_names_what_changed_and_leaves_out_bookkeeping() {
        let before = json!({"metadata": {"name": "a", "resourceVersion": "3"}, "data": {"x": "1", "y": "2"}});
        let after = json!({"metadata": {"name": "a", "resourceVersion": "4"}, "data": {"x": "9", "z": "3"}});
        assert_eq!(
            summarize(Some(&before), Some(&after)),
            r#"data.x: "1" -> "9" +data.z="3" -data.y"#
        );
        assert_eq!(summarize(Some(&before), Some(&before)), "(no change)");
        assert_eq!(summarize(Some(&before), None), "gone");
        assert_eq!(
            summarize(
                None,
                Some(&json!({"metadata": {"name": "a", "labels": {"k": "v"},
                    "ownerReferences": [{"kind": "Foo", "name": "f", "uid": "u"}]}}))
            ),
            r#"+metadata.labels.k="v" +metadata.ownerReferences=[Foo f]"#
        );
    }
}
