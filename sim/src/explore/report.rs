//! What an exploration found, and the report as text: failures with the commands that
//! reproduce them, then the fault paths reached.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use crate::harness::Violation;

use crate::explore::busy::BUSY_RECONCILE;
use crate::explore::run::settle;

/// Figures of an election exploration ([`crate::election::explore`]).
#[derive(Debug, Clone, Default)]
pub struct ElectionTotals {
    /// The drift the seeds' clock rates were drawn within.
    pub drift: f64,
    /// Terms begun.
    pub terms: u64,
    /// Writes that took an expired Lease from its holder.
    pub takeovers: u64,
    /// The closest handover: a term's start minus the latest end of any other process's
    /// term, least over all seeds (ns; negative: terms overlapped), and its seed.
    pub closest_handover: Option<(i64, u64)>,
    /// The slowest election after the faults healed: how long it took, its bound, and its
    /// seed.
    pub slowest_election: Option<(Duration, Duration, u64)>,
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
    /// Seeds that asked for protobuf ([`protobuf_for`](crate::explore::protobuf_for)).
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
    pub election: Option<ElectionTotals>,
}

impl ElectionTotals {
    /// Adds a later block's figures; ties go to the earlier seed, as in one sequential run.
    fn absorb(&mut self, later: ElectionTotals) {
        self.terms += later.terms;
        self.takeovers += later.takeovers;
        if let Some((gap, seed)) = later.closest_handover
            && self.closest_handover.is_none_or(|(g, _)| gap < g)
        {
            self.closest_handover = Some((gap, seed));
        }
        if let Some((took, bound, seed)) = later.slowest_election {
            let ratio = |d: Duration, b: Duration| d.as_secs_f64() / b.as_secs_f64().max(1e-9);
            if self
                .slowest_election
                .is_none_or(|(d, b, _)| ratio(took, bound) > ratio(d, b))
            {
                self.slowest_election = Some((took, bound, seed));
            }
        }
    }
}

impl ExploreReport {
    /// Adds the report of the block of seeds right after this one's: the merged report is
    /// the one a single run over both blocks gives.
    pub(crate) fn absorb(&mut self, later: ExploreReport) {
        self.seeds += later.seeds;
        for (profile, n) in later.profiles {
            *self.profiles.entry(profile).or_default() += n;
        }
        for (path, (seeds, times)) in later.paths {
            let e = self.paths.entry(path).or_default();
            e.0 += seeds;
            e.1 += times;
        }
        self.steps += later.steps;
        self.protobuf_seeds += later.protobuf_seeds;
        self.failures.extend(later.failures);
        self.lines.extend(later.lines);
        match (&mut self.election, later.election) {
            (Some(mine), Some(theirs)) => mine.absorb(theirs),
            (mine @ None, theirs) => *mine = theirs,
            (Some(_), None) => {}
        }
    }

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
                    "  minimized ({} of {} records): cargo run -p reconcile-sim -- simulate --settle {}{} {}",
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
