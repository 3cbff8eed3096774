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
use crate::simulate::{SimOptions, simulate};
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
}

impl Default for ExploreOptions {
    fn default() -> Self {
        ExploreOptions {
            long: false,
            out_dir: None,
            verbose: false,
            minimize: true,
            inject: Vec::new(),
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
    /// Failing seeds.
    pub failures: Vec<Failure>,
    /// Per-seed lines (verbose).
    pub lines: Vec<String>,
    /// The `--fault` flags of injected faults, for the reproduction command.
    pub inject_flags: String,
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
        line: format!("{{\"type\":\"{kind}\",\"object\":{object}}}"),
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

/// The trace seed `seed` runs, and its profile.
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
    let kinds: &[&str] = match profile {
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
    };
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

/// Runs one explore trace quietly with every invariant checked.
#[must_use]
pub fn run(trace: &Trace, long: bool) -> crate::simulate::RunReport {
    let opts = SimOptions {
        render: Render::Quiet,
        settle: settle(long),
        max_steps: 2_000_000,
        check: true,
        ..SimOptions::default()
    };
    match simulate(trace, &opts) {
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
    let fails = |entries: &[Entry]| {
        let candidate = Trace {
            entries: entries.to_vec(),
            ..trace.clone()
        };
        run(&candidate, long)
            .violations
            .iter()
            .any(|v| v.invariant == invariant)
    };
    let mut entries = trace.entries.clone();
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
            let complement: Vec<Entry> = entries[..lo]
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
    Trace {
        entries,
        ..trace.clone()
    }
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
    let mut report = ExploreReport {
        inject_flags: opts
            .inject
            .iter()
            .map(|e| format!(" --fault {}", fault_flag(e)))
            .collect(),
        ..ExploreReport::default()
    };
    for seed in seeds {
        let (mut trace, profile) = generate(seed, opts.long);
        if !opts.inject.is_empty() {
            trace.entries.extend(opts.inject.iter().cloned());
            trace.entries.sort_by_key(|e| e.at);
        }
        let result = run(&trace, opts.long);
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
                "seed {seed}: {profile}, {} records, {} steps, {} reconciles, {} relists: {}",
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
                minimize(&trace, violation.invariant, opts.long)
            } else {
                trace.clone()
            };
            let minimized = opts.out_dir.as_ref().and_then(|dir| {
                std::fs::create_dir_all(dir).ok()?;
                let path = dir.join(format!("seed-{seed}.min.jsonl"));
                std::fs::write(&path, small.to_jsonl()).ok()?;
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
                "  reproduce: cargo run -p reconcile-sim -- explore --seeds {}..{}{}{}",
                f.seed,
                f.seed + 1,
                if short { "" } else { " --long" },
                self.inject_flags
            );
            if let Some(path) = &f.minimized {
                let _ = writeln!(
                    out,
                    "  minimized ({} of {} records): cargo run -p reconcile-sim -- simulate --check --settle {} {}",
                    f.records.1,
                    f.records.0,
                    settle(!short).as_secs(),
                    path.display()
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
    fn generated_traces_parse_back_as_written() {
        for seed in 0..20 {
            let (trace, _) = generate(seed, false);
            let again = Trace::parse("g", &trace.to_jsonl()).unwrap();
            assert_eq!(again.header, trace.header, "seed {seed}");
            assert_eq!(again.entries.len(), trace.entries.len(), "seed {seed}");
        }
    }
}
