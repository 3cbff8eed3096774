//! Faults as data: each a named value in a run's schedule, drawn from the seed, so that
//! minimization can drop it, the log shows it, and the summary counts it.

use std::fmt;
use std::time::Duration;

use crate::rng::Rng;

/// One kind of fault. [`Faults`] is a set of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FaultKind {
    /// Every open watch ends, as a dropped connection does.
    WatchDrop,
    /// The cluster compacts its history and every open watch gets a 410 `Expired`: the
    /// controller must relist.
    Expired,
    /// The apiserver restarts: every watch ends and, for a second, no request reaches it.
    ApiserverRestart,
    /// The next LIST fails with a 500 or a 429.
    ListError,
    /// The next WATCH fails with a 500 or a 429.
    WatchError,
    /// For a while, every watch event arrives late.
    SlowWatches,
    /// Every open watch stops delivering and never ends.
    HangingWatches,
    /// Sieve's time travel: the next LIST is answered by a lagging replica, from a state
    /// older than what the controller already saw; the watch after it catches up.
    StaleList,
    /// Unobserved states: for a while, watches hold their events and then send only each
    /// object's last one (an intermediate state is never seen).
    Coalesce,
    /// The next write fails with a 409 `Conflict`, though it would have passed.
    WriteConflict,
    /// The next write fails with a 500 or a 429, unapplied.
    WriteError,
    /// The next write is applied, and its answer lost: the caller sees a timeout.
    LostAnswer,
    /// The controller's process dies (cache, queue and memory lost) and a new one starts
    /// from a fresh LIST.
    Crash,
    /// As [`FaultKind::Crash`], right after the controller's `n`-th write is applied.
    CrashAfterWrite,
    /// The next write a reconcile makes panics inside that reconcile, unapplied: the
    /// runtime must turn the panic into an error and go on.
    ReconcilePanic,
    /// A rolling update: from the next write a reconcile makes, every such write is
    /// answered late for a while, and the controller gets the shutdown signal while that
    /// first one waits. It drains (its slow reconciles finish), returns, and a new process
    /// starts at once; one that does not return within 60 s is killed.
    RollingRestart,
}

impl FaultKind {
    /// Every kind, in declaration order.
    pub const ALL: [FaultKind; 16] = [
        FaultKind::WatchDrop,
        FaultKind::Expired,
        FaultKind::ApiserverRestart,
        FaultKind::ListError,
        FaultKind::WatchError,
        FaultKind::SlowWatches,
        FaultKind::HangingWatches,
        FaultKind::StaleList,
        FaultKind::Coalesce,
        FaultKind::WriteConflict,
        FaultKind::WriteError,
        FaultKind::LostAnswer,
        FaultKind::Crash,
        FaultKind::CrashAfterWrite,
        FaultKind::ReconcilePanic,
        FaultKind::RollingRestart,
    ];

    /// Its name in summaries: `watch-drop`, `stale-list`, …
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::WatchDrop => "watch-drop",
            FaultKind::Expired => "expired",
            FaultKind::ApiserverRestart => "apiserver-restart",
            FaultKind::ListError => "list-error",
            FaultKind::WatchError => "watch-error",
            FaultKind::SlowWatches => "slow-watches",
            FaultKind::HangingWatches => "hanging-watches",
            FaultKind::StaleList => "stale-list",
            FaultKind::Coalesce => "coalesce",
            FaultKind::WriteConflict => "write-conflict",
            FaultKind::WriteError => "write-error",
            FaultKind::LostAnswer => "lost-answer",
            FaultKind::Crash => "crash",
            FaultKind::CrashAfterWrite => "crash-after-write",
            FaultKind::ReconcilePanic => "reconcile-panic",
            FaultKind::RollingRestart => "rolling-restart",
        }
    }

    fn bit(self) -> u32 {
        1 << (self as u32)
    }
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The set of fault kinds a scenario draws from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Faults {
    bits: u32,
    /// Faults per seed at most (at least one when any kind is on).
    per_seed: u32,
}

impl Faults {
    /// No faults: every seed varies only the interleaving and latencies.
    #[must_use]
    pub fn none() -> Self {
        Faults {
            bits: 0,
            per_seed: 6,
        }
    }

    /// Every kind.
    #[must_use]
    pub fn all() -> Self {
        FaultKind::ALL
            .iter()
            .fold(Faults::none(), |f, &k| f.with(k))
    }

    /// The stream faults: watch drops, 410s, apiserver restarts, LIST and WATCH errors,
    /// slow and hanging watches.
    #[must_use]
    pub fn streams() -> Self {
        [
            FaultKind::WatchDrop,
            FaultKind::Expired,
            FaultKind::ApiserverRestart,
            FaultKind::ListError,
            FaultKind::WatchError,
            FaultKind::SlowWatches,
            FaultKind::HangingWatches,
        ]
        .iter()
        .fold(Faults::none(), |f, &k| f.with(k))
    }

    /// Also `kind`.
    #[must_use]
    pub fn with(mut self, kind: FaultKind) -> Self {
        self.bits |= kind.bit();
        self
    }

    /// All but `kind`.
    #[must_use]
    pub fn without(mut self, kind: FaultKind) -> Self {
        self.bits &= !kind.bit();
        self
    }

    /// At most `n` faults per seed (default 6).
    #[must_use]
    pub fn per_seed(mut self, n: u32) -> Self {
        self.per_seed = n.clamp(1, 64);
        self
    }

    /// Whether `kind` is on.
    #[must_use]
    pub fn has(&self, kind: FaultKind) -> bool {
        self.bits & kind.bit() != 0
    }

    /// The kinds that are on.
    #[must_use]
    pub fn kinds(&self) -> Vec<FaultKind> {
        FaultKind::ALL
            .into_iter()
            .filter(|k| self.has(*k))
            .collect()
    }

    /// The faults of one seed: between one and [`Faults::per_seed`] of them, at times in
    /// `0..=until` (a crash after a write at its write count instead).
    pub(crate) fn draw(&self, rng: &mut Rng, until: Duration) -> Vec<(Duration, Fault)> {
        let kinds = self.kinds();
        if kinds.is_empty() {
            return Vec::new();
        }
        let n = rng.range(1, u64::from(self.per_seed));
        let span = u64::try_from(until.as_millis()).unwrap_or(u64::MAX);
        let mut out: Vec<(Duration, Fault)> = (0..n)
            .map(|_| {
                let at = Duration::from_millis(rng.range(0, span));
                let kind = *rng.pick(&kinds);
                (at, Fault::draw(kind, rng))
            })
            .collect();
        out.sort_by_key(|(at, _)| *at);
        out
    }
}

/// One fault, with what the seed drew for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// [`FaultKind::WatchDrop`].
    WatchDrop,
    /// [`FaultKind::Expired`].
    Expired,
    /// [`FaultKind::ApiserverRestart`], unreachable for `down`.
    ApiserverRestart {
        /// How long no request reaches it.
        down: Duration,
    },
    /// [`FaultKind::ListError`] with this code.
    ListError(u16),
    /// [`FaultKind::WatchError`] with this code.
    WatchError(u16),
    /// [`FaultKind::SlowWatches`].
    SlowWatches {
        /// For how long.
        lasting: Duration,
        /// How late each delivery is.
        by: Duration,
    },
    /// [`FaultKind::HangingWatches`].
    HangingWatches,
    /// [`FaultKind::StaleList`], this many resourceVersions behind.
    StaleList {
        /// How far behind the replica is.
        behind: u64,
    },
    /// [`FaultKind::Coalesce`] for this long.
    Coalesce(Duration),
    /// [`FaultKind::WriteConflict`].
    WriteConflict,
    /// [`FaultKind::WriteError`] with this code.
    WriteError(u16),
    /// [`FaultKind::LostAnswer`].
    LostAnswer,
    /// [`FaultKind::Crash`].
    Crash,
    /// [`FaultKind::CrashAfterWrite`]: after the controller's `n`-th write in the run.
    CrashAfterWrite(u32),
    /// [`FaultKind::ReconcilePanic`].
    ReconcilePanic,
    /// [`FaultKind::RollingRestart`].
    RollingRestart {
        /// How long reconciles' writes are slow, from the signal.
        lasting: Duration,
        /// How late each of their answers is.
        by: Duration,
    },
}

impl Fault {
    fn draw(kind: FaultKind, rng: &mut Rng) -> Fault {
        let code = |rng: &mut Rng| if rng.chance(50) { 500 } else { 429 };
        match kind {
            FaultKind::WatchDrop => Fault::WatchDrop,
            FaultKind::Expired => Fault::Expired,
            FaultKind::ApiserverRestart => Fault::ApiserverRestart {
                down: Duration::from_millis(rng.range(200, 2_000)),
            },
            FaultKind::ListError => Fault::ListError(code(rng)),
            FaultKind::WatchError => Fault::WatchError(code(rng)),
            FaultKind::SlowWatches => Fault::SlowWatches {
                lasting: Duration::from_millis(rng.range(1_000, 10_000)),
                by: Duration::from_millis(rng.range(100, 3_000)),
            },
            FaultKind::HangingWatches => Fault::HangingWatches,
            FaultKind::StaleList => Fault::StaleList {
                behind: rng.range(1, 20),
            },
            FaultKind::Coalesce => Fault::Coalesce(Duration::from_millis(rng.range(200, 5_000))),
            FaultKind::WriteConflict => Fault::WriteConflict,
            FaultKind::WriteError => Fault::WriteError(code(rng)),
            FaultKind::LostAnswer => Fault::LostAnswer,
            FaultKind::Crash => Fault::Crash,
            FaultKind::ReconcilePanic => Fault::ReconcilePanic,
            FaultKind::RollingRestart => Fault::RollingRestart {
                lasting: Duration::from_millis(rng.range(1_000, 20_000)),
                by: Duration::from_millis(rng.range(200, 5_000)),
            },
            FaultKind::CrashAfterWrite => {
                Fault::CrashAfterWrite(u32::try_from(rng.range(1, 8)).unwrap_or(1))
            }
        }
    }

    /// Its kind.
    #[must_use]
    pub fn kind(&self) -> FaultKind {
        match self {
            Fault::WatchDrop => FaultKind::WatchDrop,
            Fault::Expired => FaultKind::Expired,
            Fault::ApiserverRestart { .. } => FaultKind::ApiserverRestart,
            Fault::ListError(_) => FaultKind::ListError,
            Fault::WatchError(_) => FaultKind::WatchError,
            Fault::SlowWatches { .. } => FaultKind::SlowWatches,
            Fault::HangingWatches => FaultKind::HangingWatches,
            Fault::StaleList { .. } => FaultKind::StaleList,
            Fault::Coalesce(_) => FaultKind::Coalesce,
            Fault::WriteConflict => FaultKind::WriteConflict,
            Fault::WriteError(_) => FaultKind::WriteError,
            Fault::LostAnswer => FaultKind::LostAnswer,
            Fault::Crash => FaultKind::Crash,
            Fault::CrashAfterWrite(_) => FaultKind::CrashAfterWrite,
            Fault::ReconcilePanic => FaultKind::ReconcilePanic,
            Fault::RollingRestart { .. } => FaultKind::RollingRestart,
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = |d: &Duration| d.as_millis();
        match self {
            Fault::WatchDrop => write!(f, "watch-drop: every open watch ends"),
            Fault::Expired => write!(f, "expired: compaction, every open watch gets a 410"),
            Fault::ApiserverRestart { down } => {
                write!(
                    f,
                    "apiserver-restart: watches end, unreachable for {} ms",
                    ms(down)
                )
            }
            Fault::ListError(code) => write!(f, "list-error: the next LIST gets a {code}"),
            Fault::WatchError(code) => write!(f, "watch-error: the next WATCH gets a {code}"),
            Fault::SlowWatches { lasting, by } => write!(
                f,
                "slow-watches: events {} ms late for {} ms",
                ms(by),
                ms(lasting)
            ),
            Fault::HangingWatches => write!(f, "hanging-watches: open watches go silent"),
            Fault::StaleList { behind } => write!(
                f,
                "stale-list: the next LIST answered {behind} versions behind"
            ),
            Fault::Coalesce(d) => write!(
                f,
                "coalesce: for {} ms watches send only each object's last state",
                ms(d)
            ),
            Fault::WriteConflict => write!(f, "write-conflict: the next write gets a 409"),
            Fault::WriteError(code) => write!(f, "write-error: the next write gets a {code}"),
            Fault::LostAnswer => {
                write!(f, "lost-answer: the next write applies, its answer is lost")
            }
            Fault::Crash => write!(f, "crash: the controller dies and restarts"),
            Fault::CrashAfterWrite(n) => write!(
                f,
                "crash-after-write: the controller dies right after its write #{n}"
            ),
            Fault::ReconcilePanic => write!(
                f,
                "reconcile-panic: the next write a reconcile makes panics in it"
            ),
            Fault::RollingRestart { lasting, by } => write!(
                f,
                "rolling-restart: reconciles' writes {}ms late for {}ms, and the shutdown signal",
                by.as_millis(),
                lasting.as_millis()
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_says_what_it_has_and_draws_only_that() {
        let faults = Faults::none()
            .with(FaultKind::Crash)
            .with(FaultKind::StaleList);
        assert_eq!(faults.kinds(), [FaultKind::StaleList, FaultKind::Crash]);
        assert!(!faults.without(FaultKind::Crash).has(FaultKind::Crash));
        let mut rng = Rng::new(3);
        for _ in 0..100 {
            for (at, fault) in faults.draw(&mut rng, Duration::from_secs(10)) {
                assert!(faults.has(fault.kind()), "{fault}");
                assert!(at <= Duration::from_secs(10));
            }
        }
        assert!(
            Faults::none()
                .draw(&mut rng, Duration::from_secs(1))
                .is_empty()
        );
        assert_eq!(Faults::all().kinds().len(), FaultKind::ALL.len());
    }
}
