//! The core alone at scale (issue 16): the three paths that would turn quadratic first, each
//! timed at growing sizes in a process of its own (`reconcile-bench core-scale ...`), so the
//! figures can be compared across sizes: a linear path costs 10× for 10× the objects.
//!
//! - **relist**: a cache of `n` pods gets a new whole listing in which 1% of them changed
//!   (a new resourceVersion), as after a watch expired. Timed: the `Replace` and the drain
//!   that dispatches (and completes) the reconciles of the changed pods' parents.
//! - **parent**: one parent with `n` members under a steady stream of MODIFIED frames, each
//!   reconcile completing before the next frame, so every frame dispatches a reconcile with
//!   its member snapshot. Timed: the frames.
//! - **resync**: a cache of `n` pods in `n / 10` parents reaches its resync period: every
//!   parent is queued and reconciled with its members. Timed: the timeout and the drain.
//!
//! Each probe proves it did the work before its figure counts: the store holds what it was
//! given, and the reconciles dispatched (and members handed over) are what the input calls
//! for; a mismatch is an error, not a figure.
//!
//! Objects are real-shaped [`PodView`]s made from the captured pod list's templates (the
//! peers' own partial view), fed through the in-process source, so the figures are the
//! core's store, queue and dispatch, without JSON decoding.

use std::time::{Duration, Instant as WallClock};

use reconcile_core::pod::PodView;
use reconcile_core::{
    Command, Config, Input, Instant, KeyMap, Outcome, Output, ReconcileLoop, SourceEvent, StreamId,
    StringMap,
};
use serde::{Deserialize, Serialize};

use crate::BenchError;
use crate::workload::{self, PODS_PER_CELL};

/// Which path a probe drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probe {
    /// A relist of `n` pods, 1% changed.
    Relist,
    /// One parent of `n` members under a stream of frames.
    Parent,
    /// A resync of `n` pods.
    Resync,
}

impl Probe {
    /// All probes, in the order they run.
    pub const ALL: [Probe; 3] = [Probe::Relist, Probe::Parent, Probe::Resync];

    /// `relist`, `parent` or `resync`.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Probe::Relist => "relist",
            Probe::Parent => "parent",
            Probe::Resync => "resync",
        }
    }

    /// Parses [`Probe::name`].
    #[must_use]
    pub fn parse(name: &str) -> Option<Self> {
        Probe::ALL.into_iter().find(|p| p.name() == name)
    }
}

/// What one probe measured, printed as one JSON line.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ProbeReport {
    /// [`Probe::name`].
    pub probe: String,
    /// Objects in the cache.
    pub objects: usize,
    /// Wall seconds of the timed part.
    pub seconds: f64,
    /// Process CPU seconds of the timed part (10 ms resolution).
    pub cpu_seconds: f64,
    /// Frames fed in the timed part (the parent probe).
    pub frames: usize,
    /// Reconciles dispatched in the timed part.
    pub reconciles: usize,
    /// Members handed to those reconciles, summed.
    pub members: usize,
    /// Objects in the store at the end.
    pub stored: usize,
}

/// Makes real-shaped pods fast: each template decoded once, then cloned with the name, uid,
/// version and `cell` label pod `i` gets in the replay workload.
struct PodMaker {
    templates: Vec<PodView>,
}

impl PodMaker {
    fn new() -> Result<Self, BenchError> {
        let values = workload::templates()?;
        let templates = values
            .iter()
            .map(|t| {
                serde_json::from_value::<PodView>(t.clone())
                    .map_err(|e| BenchError::Input(format!("template: {e}")))
            })
            .collect::<Result<_, _>>()?;
        Ok(PodMaker { templates })
    }

    /// Pod `i` at version `rv`, in parent `cell`.
    fn pod(&self, i: usize, rv: u64, cell: &str) -> PodView {
        let mut pod = self.templates[i % self.templates.len()].clone();
        let meta = &mut pod.metadata;
        meta.name = Some(format!("pod-{i:07}").into());
        meta.namespace = Some(workload::NAMESPACE.into());
        meta.uid = Some(format!("00000000-0000-0000-0000-{i:012}").into());
        meta.resource_version = Some(rv.to_string().into());
        meta.labels = meta
            .labels
            .iter()
            .filter(|(k, _)| *k != "cell")
            .chain([("cell", cell)])
            .collect::<StringMap>();
        pod
    }
}

/// The core over an in-process source, every reconcile completed as soon as it is
/// dispatched; the clock only moves when told to.
struct Harness {
    core: ReconcileLoop<PodView, String>,
    now: Instant,
    stream: StreamId,
}

/// What a drain dispatched.
#[derive(Debug, Default, Clone, Copy)]
struct Drained {
    reconciles: usize,
    members: usize,
}

impl Harness {
    fn new(resync: Option<Duration>) -> Result<Self, BenchError> {
        let config = Config::in_process(KeyMap::<PodView, String>::by_label("cell")).resync(resync);
        let now = Instant::from_nanos(0);
        let mut core =
            ReconcileLoop::new(config, now).map_err(|e| BenchError::Input(e.to_string()))?;
        core.handle_input(now, Input::Start);
        let mut stream = None;
        while let Some(output) = next(&mut core) {
            if let Output::Command(Command::OpenSource { stream: s }) = output {
                stream = Some(s);
            }
        }
        let stream = stream.ok_or_else(|| BenchError::Input("no source was opened".into()))?;
        Ok(Harness { core, now, stream })
    }

    fn feed(&mut self, event: SourceEvent<PodView>) {
        let stream = self.stream;
        self.core
            .handle_input(self.now, Input::SourceEvent { stream, event });
    }

    /// Drains the core, completing every reconcile at once.
    fn drain(&mut self) -> Drained {
        let mut drained = Drained::default();
        loop {
            match self.core.poll_output() {
                Output::Command(Command::Reconcile {
                    ticket, members, ..
                }) => {
                    drained.reconciles += 1;
                    drained.members += members.len();
                    drop(members);
                    let outcome = Outcome::Success;
                    self.core
                        .handle_input(self.now, Input::Reconciled { ticket, outcome });
                }
                Output::Timeout(_) => return drained,
                Output::Command(_) | Output::Event(_) => {}
            }
        }
    }
}

/// The next output before the deadline, if any.
fn next(core: &mut ReconcileLoop<PodView, String>) -> Option<Output<PodView, String>> {
    match core.poll_output() {
        Output::Timeout(_) => None,
        output => Some(output),
    }
}

fn cpu() -> f64 {
    crate::peers::proc_stats().1
}

/// Times `work`: wall seconds and process CPU seconds.
fn timed<T>(work: impl FnOnce() -> T) -> (T, f64, f64) {
    let (wall, cpu0) = (WallClock::now(), cpu());
    let out = work();
    (out, wall.elapsed().as_secs_f64(), cpu() - cpu0)
}

fn cell(i: usize) -> String {
    workload::cell_name(i / PODS_PER_CELL)
}

fn check(what: &str, got: usize, expected: usize) -> Result<(), BenchError> {
    if got == expected {
        Ok(())
    } else {
        Err(BenchError::Peer(format!(
            "{what}: {got}, not the expected {expected}"
        )))
    }
}

/// Runs `probe` over `objects` pods.
///
/// # Errors
/// The templates are unusable, or the core did other work than the input calls for.
pub fn run(probe: Probe, objects: usize) -> Result<ProbeReport, BenchError> {
    let maker = PodMaker::new()?;
    let n = objects.max(PODS_PER_CELL * 10);
    let mut report = ProbeReport {
        probe: probe.name().to_owned(),
        objects: n,
        ..ProbeReport::default()
    };
    match probe {
        Probe::Relist => {
            let mut h = Harness::new(None)?;
            let first: Vec<PodView> = (0..n).map(|i| maker.pod(i, 1, &cell(i))).collect();
            h.feed(SourceEvent::Replace(first));
            let synced = h.drain();
            check(
                "parents reconciled after the sync",
                synced.reconciles,
                n / PODS_PER_CELL,
            )?;
            // Every 100th pod changed: 1%, one pod in each tenth parent.
            let changed = (0..n).step_by(100).count();
            let second: Vec<PodView> = (0..n)
                .map(|i| maker.pod(i, if i % 100 == 0 { 2 } else { 1 }, &cell(i)))
                .collect();
            let (drained, seconds, cpu) = timed(|| {
                h.feed(SourceEvent::Replace(second));
                h.drain()
            });
            check(
                "parents reconciled after the relist",
                drained.reconciles,
                changed,
            )?;
            check(
                "members handed over",
                drained.members,
                changed * PODS_PER_CELL,
            )?;
            report.seconds = seconds;
            report.cpu_seconds = cpu;
            report.reconciles = drained.reconciles;
            report.members = drained.members;
            stored(&mut report, &h, n)?;
        }
        Probe::Parent => {
            let mut h = Harness::new(None)?;
            let first: Vec<PodView> = (0..n).map(|i| maker.pod(i, 1, "big")).collect();
            h.feed(SourceEvent::Replace(first));
            check("parents reconciled after the sync", h.drain().reconciles, 1)?;
            // A fixed number of frames whatever the size: a linear snapshot shows as a
            // per-frame cost that grows with the members.
            let frames = 20_000;
            let updates: Vec<PodView> = (0..frames)
                .map(|f| {
                    let i = (f * 7_919) % n;
                    maker.pod(i, 2 + f as u64, "big")
                })
                .collect();
            let (drained, seconds, cpu) = timed(|| {
                let mut total = Drained::default();
                for pod in updates {
                    h.feed(SourceEvent::Upsert(pod));
                    let d = h.drain();
                    total.reconciles += d.reconciles;
                    total.members += d.members;
                }
                total
            });
            check("reconciles (one per frame)", drained.reconciles, frames)?;
            check("members handed over", drained.members, frames * n)?;
            report.frames = frames;
            report.seconds = seconds;
            report.cpu_seconds = cpu;
            report.reconciles = drained.reconciles;
            report.members = drained.members;
            stored(&mut report, &h, n)?;
        }
        Probe::Resync => {
            let period = Duration::from_secs(36_000);
            let mut h = Harness::new(Some(period))?;
            let first: Vec<PodView> = (0..n).map(|i| maker.pod(i, 1, &cell(i))).collect();
            h.feed(SourceEvent::Replace(first));
            check(
                "parents reconciled after the sync",
                h.drain().reconciles,
                n / PODS_PER_CELL,
            )?;
            h.now = h.now + period + Duration::from_secs(1);
            let (drained, seconds, cpu) = timed(|| {
                h.core.handle_input(h.now, Input::Timeout);
                h.drain()
            });
            check("parents resynced", drained.reconciles, n / PODS_PER_CELL)?;
            check("members handed over", drained.members, n)?;
            report.seconds = seconds;
            report.cpu_seconds = cpu;
            report.reconciles = drained.reconciles;
            report.members = drained.members;
            stored(&mut report, &h, n)?;
        }
    }
    Ok(report)
}

/// Sets [`ProbeReport::stored`], checked against `expected`.
fn stored(report: &mut ProbeReport, h: &Harness, expected: usize) -> Result<(), BenchError> {
    report.stored = h.core.store().len();
    check("objects in the store", report.stored, expected)
}

/// `reconcile-bench core-scale relist|parent|resync --objects N`: runs one probe and prints
/// its [`ProbeReport`] as one JSON line.
#[must_use]
pub fn main(args: &[String]) -> i32 {
    let probe = args.first().and_then(|p| Probe::parse(p));
    let objects = args
        .iter()
        .position(|a| a == "--objects")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok());
    let (Some(probe), Some(objects)) = (probe, objects) else {
        eprintln!("usage: reconcile-bench core-scale relist|parent|resync --objects N");
        return 2;
    };
    match run(probe, objects) {
        Ok(report) => {
            println!("{}", serde_json::to_string(&report).unwrap_or_default());
            0
        }
        Err(e) => {
            eprintln!("core-scale {}: {e}", probe.name());
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_probe_does_the_work_it_reports_at_a_small_size() {
        for probe in Probe::ALL {
            let report = run(probe, 1_000).unwrap();
            assert_eq!(report.objects, 1_000);
            assert!(report.reconciles > 0, "{report:?}");
        }
        let relist = run(Probe::Relist, 1_000).unwrap();
        assert_eq!((relist.reconciles, relist.members), (10, 100));
    }
}
