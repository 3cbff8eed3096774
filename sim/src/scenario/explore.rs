//! Many seeds on every core, each deterministic on its own; the first failing seed (the
//! lowest, whatever the core count) minimized by delta debugging over its schedule, rerun
//! with traces, and told as a reproducer.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use super::Scenario;
use super::faults::FaultKind;
use super::run::{Item, Outcome, Violation, run, schedule};
use crate::explore::minimize::ddmin_within;

/// Runs one seed's minimization may spend.
const MINIMIZE_RUNS: usize = 200;

/// What a clean exploration ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    /// Seeds run.
    pub seeds: u64,
    /// Faults played, by kind.
    pub faults: BTreeMap<FaultKind, u64>,
    /// The controller's requests, and its writes.
    pub requests: u64,
    /// Of which writes.
    pub writes: u64,
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} seeds clean: {} requests, {} writes; faults:",
            self.seeds, self.requests, self.writes
        )?;
        if self.faults.is_empty() {
            f.write_str(" none")?;
        }
        for (kind, n) in &self.faults {
            write!(f, " {kind} {n}")?;
        }
        Ok(())
    }
}

/// A failing seed, minimized: what [`Scenario::explore`] panics with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The scenario's name.
    pub scenario: String,
    /// The seed.
    pub seed: u64,
    /// The broken oracle, in the minimized run.
    pub violation: Violation,
    /// The seed's schedule, one line per item.
    pub schedule: Vec<String>,
    /// The minimized schedule that still breaks the same oracle.
    pub minimized: Vec<String>,
    /// The faults that played in the minimized run.
    pub faults: Vec<FaultKind>,
    /// The minimized run's log (one line per request, watch event, reconcile, fault).
    pub log: PathBuf,
    /// Its traces, one per controller incarnation that recorded one (see
    /// [`Env::traced`](super::Env::traced)).
    pub traces: Vec<PathBuf>,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "scenario {:?} fails at seed {}: {}",
            self.scenario, self.seed, self.violation
        )?;
        writeln!(
            f,
            "  minimized schedule ({} of {} items):",
            self.minimized.len(),
            self.schedule.len()
        )?;
        if self.minimized.is_empty() {
            writeln!(f, "    (none: the interleaving alone breaks it)")?;
        }
        for line in &self.minimized {
            writeln!(f, "    {line}")?;
        }
        let faults: Vec<&str> = self.faults.iter().map(|k| k.name()).collect();
        writeln!(
            f,
            "  faults that played: {}",
            if faults.is_empty() {
                "none".to_owned()
            } else {
                faults.join(", ")
            }
        )?;
        writeln!(f, "  rerun it alone: .seed({})", self.seed)?;
        writeln!(f, "  its log: {}", self.log.display())?;
        for trace in &self.traces {
            writeln!(
                f,
                "  its timeline: reconcile-sim report {}",
                trace.display()
            )?;
        }
        Ok(())
    }
}

impl Scenario {
    /// Runs every seed of `seeds`, on every core. Panics with the reproducer
    /// ([`Failure`]) of the first failing seed; otherwise the summary.
    ///
    /// # Panics
    /// On the first failing seed.
    pub fn explore(&self, seeds: Range<u64>) -> Summary {
        match self.try_explore(seeds) {
            Ok(summary) => summary,
            Err(failure) => panic!("{failure}"),
        }
    }

    /// Runs one seed alone, as a reproducer names it. Panics as [`Scenario::explore`].
    ///
    /// # Panics
    /// When the seed fails.
    pub fn seed(&self, seed: u64) -> Summary {
        self.explore(seed..seed.saturating_add(1))
    }

    /// [`Scenario::explore`], returning the failure instead of panicking.
    ///
    /// # Errors
    /// The first failing seed's [`Failure`].
    pub fn try_explore(&self, seeds: Range<u64>) -> Result<Summary, Box<Failure>> {
        let threads = self
            .threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
            .max(1);
        let next = AtomicU64::new(seeds.start);
        // The lowest failing seed so far: seeds above it need not run.
        let lowest_failing = AtomicU64::new(u64::MAX);
        let results: Mutex<BTreeMap<u64, Outcome>> = Mutex::new(BTreeMap::new());
        std::thread::scope(|scope| {
            for _ in 0..threads {
                scope.spawn(|| {
                    loop {
                        let seed = next.fetch_add(1, Ordering::Relaxed);
                        if seed >= seeds.end || seed > lowest_failing.load(Ordering::Relaxed) {
                            return;
                        }
                        let items = schedule(self, seed);
                        let outcome = run(self, seed, &items, None, false);
                        if outcome.violation.is_some() {
                            lowest_failing.fetch_min(seed, Ordering::Relaxed);
                        }
                        // Only what the summary needs is kept.
                        let kept = Outcome {
                            log: Vec::new(),
                            requests: Vec::new(),
                            ..outcome
                        };
                        results
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .insert(seed, kept);
                    }
                });
            }
        });
        let results = results
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((&seed, outcome)) = results.iter().find(|(_, o)| o.violation.is_some()) {
            let violation = outcome
                .violation
                .clone()
                .unwrap_or_else(unreachable_violation);
            return Err(Box::new(self.reproduce(seed, &violation)));
        }
        let mut summary = Summary {
            seeds: results.len() as u64,
            faults: BTreeMap::new(),
            requests: 0,
            writes: 0,
        };
        for outcome in results.values() {
            for kind in &outcome.faults {
                *summary.faults.entry(*kind).or_default() += 1;
            }
            summary.writes += outcome.writes;
            summary.requests += outcome.request_count;
        }
        Ok(summary)
    }

    /// One line per request the controller made in `seed`'s run (time, verb, kind,
    /// namespace/name, for a write what it changed, the answer), for a snapshot test.
    #[must_use]
    pub fn snapshot(&self, seed: u64) -> String {
        let items = schedule(self, seed);
        let outcome = run(self, seed, &items, None, true);
        let mut out = String::new();
        for line in &outcome.requests {
            out.push_str(line);
            out.push('\n');
        }
        if let Some(v) = &outcome.violation {
            out.push_str(&format!("violation: {v}\n"));
        }
        out
    }

    /// The whole log of `seed`'s run: every request with its answer, watch event,
    /// reconcile, user action, fault, crash and oracle step, one line each.
    #[must_use]
    pub fn log(&self, seed: u64) -> String {
        let items = schedule(self, seed);
        let outcome = run(self, seed, &items, None, true);
        let mut out: String = outcome.log.iter().map(|l| format!("{l}\n")).collect();
        if let Some(v) = &outcome.violation {
            out.push_str(&format!("violation: {v}\n"));
        }
        out
    }

    /// The reproducer of a failing seed: its schedule minimized to the items that still
    /// break the same oracle, rerun with the log and traces written.
    fn reproduce(&self, seed: u64, violation: &Violation) -> Failure {
        let items = schedule(self, seed);
        // The same oracle with the same message, numbers aside: a candidate that breaks
        // the oracle for another reason (dropping the user's edit leaves the wanted state
        // unmet in another way) is not the same failure.
        let want = signature(violation);
        let same = |candidate: &[Item]| {
            run(self, seed, candidate, None, false)
                .violation
                .is_some_and(|v| signature(&v) == want)
        };
        let minimized = if same(&[]) {
            Vec::new()
        } else {
            ddmin_within(&items, MINIMIZE_RUNS, same)
        };
        let dir = self.out_dir.clone();
        let stem = format!("{}-seed-{seed}", file_stem(&self.name));
        let _ = std::fs::create_dir_all(&dir);
        for n in 1..=64 {
            let _ = std::fs::remove_file(dir.join(format!("{stem}-{n}.trace.jsonl")));
        }
        let outcome = run(
            self,
            seed,
            &minimized,
            Some((dir.clone(), stem.clone())),
            true,
        );
        let traces = (1..=64)
            .map(|n| dir.join(format!("{stem}-{n}.trace.jsonl")))
            .filter(|p| p.exists())
            .collect();
        let ns = &self.namespace;
        Failure {
            scenario: self.name.clone(),
            seed,
            // Minimization keeps the oracle; its message is the minimized run's.
            violation: outcome.violation.unwrap_or_else(|| violation.clone()),
            schedule: items.iter().map(|i| i.describe(ns)).collect(),
            minimized: minimized.iter().map(|i| i.describe(ns)).collect(),
            faults: outcome.faults,
            log: dir.join(format!("{stem}.log")),
            traces,
        }
    }
}

/// A violation's oracle and message with every run of digits as `#`.
fn signature(v: &Violation) -> String {
    let mut out = format!("{}: ", v.oracle);
    let mut digits = false;
    for c in v.message.chars() {
        if c.is_ascii_digit() {
            if !digits {
                out.push('#');
            }
            digits = true;
        } else {
            digits = false;
            out.push(c);
        }
    }
    out
}

fn unreachable_violation() -> Violation {
    Violation {
        oracle: "the run".into(),
        message: "(lost)".into(),
        at: std::time::Duration::ZERO,
    }
}

/// The name as a file name: letters, digits, `-` and `_`.
fn file_stem(name: &str) -> String {
    let stem: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    if stem.is_empty() {
        "scenario".into()
    } else {
        stem
    }
}
