//! What an exploration is asked to do: its options, which controllers its seeds build, and
//! the seeds themselves.

use std::ops::Range;
use std::path::PathBuf;

use crate::trace::Entry;

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
    /// With `election`: sharded seeds instead ([`crate::election`]'s sharded mode): 2 to 7
    /// replicas share the Leases of one shard set, replicas added, crashed and stopped.
    pub sharding: bool,
    /// With `sharding`: every seed has this many shards (else each seed draws 1 to 16).
    pub shards: Option<u32>,
    /// Busy seeds instead ([`BUSY_PROFILES`](crate::explore::BUSY_PROFILES)): one worker, a live stream that never runs
    /// dry, the core's priority queue on and the starvation invariant checked.
    pub priority: bool,
    /// The normal keys in a row the starvation check holds a busy seed's queue to: the
    /// core's [`CORE_NORMAL_IN_A_ROW`] unless a test wants to watch a wrong rule fire.
    ///
    /// [`CORE_NORMAL_IN_A_ROW`]: crate::starvation::CORE_NORMAL_IN_A_ROW
    pub starvation_rule: u32,
    /// Told after each seed is done, with how many are: the command line's progress bar.
    /// Nothing by default; it never changes what a seed does.
    pub progress: SeedProgress,
    /// Threads the seeds run on (1 to [`MAX_JOBS`](crate::explore::MAX_JOBS)); the report
    /// is the same for any number.
    pub jobs: usize,
}

impl ExploreOptions {
    /// These options with a progress that counts seeds done on every thread, and tells
    /// this one's progress the total.
    pub(crate) fn counting_progress(&self) -> ExploreOptions {
        let outer = self.progress.clone();
        let done = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        ExploreOptions {
            progress: SeedProgress::new(move |_| {
                let n = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                outer.done(n);
            }),
            ..self.clone()
        }
    }
}

/// A callback for seeds done ([`ExploreOptions::progress`]): `done(n)` after the `n`-th seed
/// of a run, from whichever thread ran it.
#[derive(Clone, Default)]
pub struct SeedProgress(Option<std::sync::Arc<dyn Fn(u64) + Send + Sync>>);

impl SeedProgress {
    /// Calls `f(n)` after the `n`-th seed.
    #[must_use]
    pub fn new(f: impl Fn(u64) + Send + Sync + 'static) -> Self {
        SeedProgress(Some(std::sync::Arc::new(f)))
    }

    /// Says that `n` seeds are done.
    pub fn done(&self, n: u64) {
        if let Some(f) = &self.0 {
            f(n);
        }
    }
}

impl std::fmt::Debug for SeedProgress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "SeedProgress(set)"
        } else {
            "SeedProgress(none)"
        })
    }
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
            election_drift: crate::election::generate::DEFAULT_DRIFT,
            sharding: false,
            shards: None,
            priority: false,
            starvation_rule: crate::starvation::CORE_NORMAL_IN_A_ROW,
            progress: SeedProgress::default(),
            jobs: 1,
        }
    }
}

/// Which controllers a run's seeds build.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Sources {
    /// Half the seeds one source, half several (decided by the seed alone).
    #[default]
    Both,
    /// Every seed one source: the workloads and profiles of [`PROFILES`](crate::explore::PROFILES).
    One,
    /// Every seed several sources: [`MANY_SOURCE_PROFILES`](crate::explore::MANY_SOURCE_PROFILES).
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
