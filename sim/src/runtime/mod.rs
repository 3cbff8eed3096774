//! A deterministic [`Runtime`] and [`Transport`](reconcile_engine::Transport) for the engine: any controller built on
//! `reconcile-engine` runs here unchanged, against the simulated [`Cluster`], on a seeded
//! single-threaded executor with a virtual clock.
//!
//! | part | file |
//! |---|---|
//! | [`Simulation`], [`SimConfig`], [`SimError`], [`SimRuntime`] | `mod.rs` |
//! | tasks on `async-task`, the seeded pick among ready tasks, timers, virtual time, GC passes | `executor.rs` |
//! | [`SimTransport`]: latency, the cluster's answers, watch bodies | `transport.rs` |
//! | the tap logging each reconcile from the engine's `reconcile` span | `tap.rs` |
//! | the run log, in one buffer bounded in bytes | `log.rs` |
//!
//! - **Scheduling.** Each step runs one ready task, picked by the seed among all ready
//!   ones. Once none is ready, the clock jumps to the earliest timer. Nothing reads a real
//!   clock or sleeps; the same seed gives the same run, byte for byte.
//! - **Time.** [`Runtime::now`] must return a `std::time::Instant`, which std can only make
//!   with `Instant::now()`: the simulation reads the real clock once, when it is created,
//!   and counts virtual offsets from there. Output only ever shows offsets
//!   ([`stamp`]), never that epoch.
//! - **Requests.** Each request reaches the cluster after a latency drawn from the seed
//!   ([`SimConfig::latency_min`]..=[`SimConfig::latency_max`]) and is answered there at
//!   that virtual time. A watch's body streams the frames the cluster has as the clock
//!   moves (timeouts, bookmarks) and as writes happen: a write wakes every waiting watch
//!   reader after a latency of its own.
//! - **Garbage collection.** A write schedules a pass of the cluster's garbage collector
//!   [`SimConfig::gc_delay`] later, and a pass that changed something schedules the next,
//!   as kube-controller-manager's collector acts on what its informers see, asynchronously.
//! - **The log.** One line per request (`  0.012s GET /api/... -> 200 rv=12`), watch
//!   frame, watch end, collector action and reconcile (`  0.020s reconcile default/a`),
//!   stamped with virtual time: [`Simulation::log`]. It keeps at most
//!   [`SimConfig::max_log_bytes`].
//! - **Bounds.** A run ends with a typed [`SimError`] when nothing can progress (every
//!   task waits on something no timer or write will bring: [`SimError::Deadlock`], with
//!   what each task waits on), when the next timer lies beyond [`SimConfig::horizon`], or
//!   after [`SimConfig::max_steps`] polls. It never hangs.
//!
//! `kube::Client` cannot run here: `Client::new` wraps its service in
//! `tower::buffer::Buffer::new`, which calls `tokio::spawn` for the buffer's worker (a
//! panic outside a tokio runtime), and `Client` has no constructor taking a service
//! without that buffer. Controllers write through the engine's
//! [`ApiClient`](reconcile_engine::ApiClient) over the [`SimTransport`] instead.

mod executor;
pub(crate) mod hooks;
mod log;
mod tap;
mod transport;

use std::cell::RefCell;
use std::fmt;
use std::future::Future;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use reconcile_engine::{BoxFuture, Runtime, Task};

use crate::cluster::{Cluster, ClusterConfig};
pub use executor::stamp;
use executor::{Shared, sleep};
pub use transport::SimTransport;

/// How a simulation runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimConfig {
    /// Picks the next ready task, each request's latency, and the cluster's uids and names.
    pub seed: u64,
    /// The shortest time a request takes to reach the cluster (and a write to reach a watch).
    pub latency_min: Duration,
    /// The longest.
    pub latency_max: Duration,
    /// How long after a write the garbage collector looks at the cluster.
    pub gc_delay: Duration,
    /// No timer past this virtual time runs: [`SimError::Horizon`].
    pub horizon: Duration,
    /// Polls of tasks at most: [`SimError::StepBudget`].
    pub max_steps: u64,
    /// Log a line per reconcile (from the engine's `reconcile` span; see the `tap` notes in
    /// [`Simulation::block_on`]).
    pub log_reconciles: bool,
    /// Bytes the log keeps at most; later lines are counted and dropped, after one line
    /// that says so ([`Simulation::log_dropped`]).
    pub max_log_bytes: usize,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            seed: 0,
            latency_min: Duration::from_millis(1),
            latency_max: Duration::from_millis(10),
            gc_delay: Duration::from_millis(20),
            horizon: Duration::from_secs(3600),
            max_steps: 1_000_000,
            log_reconciles: true,
            max_log_bytes: 1 << 30,
        }
    }
}

impl SimConfig {
    /// The defaults with this seed.
    #[must_use]
    pub fn seed(seed: u64) -> Self {
        SimConfig {
            seed,
            ..SimConfig::default()
        }
    }
}

/// A live task when a run failed, and what it waits on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocked {
    /// The task's number, in spawn order (0 is the first).
    pub task: u64,
    /// `main` for the future [`Simulation::block_on`] runs, `task N` for the others.
    pub name: String,
    /// When it was spawned (virtual).
    pub spawned_at: Duration,
    /// What it registered a waker with when it was last polled: a timer, a reply, a watch.
    /// Empty: something outside the simulator (a channel, a lock, another task).
    pub waiting_on: Vec<String>,
}

/// Why a run ended without its future's output.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SimError {
    /// Nothing is ready and no timer is set: no progress is possible.
    #[error("deadlock at {}: nothing left to do, and the future did not finish{}", stamp(*at).trim_start(), blocked_list(blocked))]
    Deadlock {
        /// When.
        at: Duration,
        /// The live tasks.
        blocked: Vec<Blocked>,
    },
    /// The next timer is past the horizon.
    #[error("the next timer ({}) is past the horizon ({}){}", stamp(*next).trim_start(), stamp(*horizon).trim_start(), blocked_list(blocked))]
    Horizon {
        /// [`SimConfig::horizon`].
        horizon: Duration,
        /// The timer that would run next.
        next: Duration,
        /// The live tasks.
        blocked: Vec<Blocked>,
    },
    /// [`SimConfig::max_steps`] polls ran.
    #[error("the step budget ran out: {steps} polls by {}{}", stamp(*at).trim_start(), blocked_list(blocked))]
    StepBudget {
        /// Polls run.
        steps: u64,
        /// When.
        at: Duration,
        /// The live tasks.
        blocked: Vec<Blocked>,
    },
}

fn blocked_list(blocked: &[Blocked]) -> String {
    let mut out = String::new();
    for b in blocked {
        let waits = if b.waiting_on.is_empty() {
            "something outside the simulator (a channel, a lock, another task)".to_owned()
        } else {
            b.waiting_on.join(", ")
        };
        out.push_str(&format!(
            "\n  {} (spawned at {}): waiting on {waits}",
            b.name,
            stamp(b.spawned_at).trim_start()
        ));
    }
    out
}

/// One simulated world: the cluster, the executor, the clock and the log. See the
/// [module docs](self).
pub struct Simulation {
    shared: Arc<Shared>,
}

impl fmt::Debug for Simulation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Simulation")
            .field("config", &self.shared.config)
            .field("now", &self.now())
            .finish_non_exhaustive()
    }
}

impl Simulation {
    /// A simulation of a fresh cluster serving the built-in kinds
    /// ([`Cluster::with_builtins`]), its uids and names from the same seed.
    #[must_use]
    pub fn new(config: SimConfig) -> Self {
        let cluster = Cluster::with_builtins(
            ClusterConfig {
                seed: config.seed,
                ..ClusterConfig::default()
            },
            reconcile_core::Instant::ZERO,
        );
        Simulation::with_cluster(config, cluster)
    }

    /// A simulation of `cluster`.
    #[must_use]
    pub fn with_cluster(config: SimConfig, cluster: Cluster) -> Self {
        Simulation {
            shared: Shared::new(config, cluster),
        }
    }

    /// The runtime to build controllers on.
    #[must_use]
    pub fn runtime(&self) -> SimRuntime {
        SimRuntime {
            shared: Arc::clone(&self.shared),
            incarnation: 0,
        }
    }

    /// The transport to the cluster.
    #[must_use]
    pub fn transport(&self) -> SimTransport {
        SimTransport {
            shared: Arc::clone(&self.shared),
            incarnation: 0,
        }
    }

    /// A handle the kit's own task uses to act on the simulation while it runs.
    pub(crate) fn handle(&self) -> SimHandle {
        SimHandle {
            shared: Arc::clone(&self.shared),
        }
    }

    /// Installs the kit's hooks.
    pub(crate) fn set_hooks(&self, hooks: Box<dyn hooks::Hooks>) {
        let old = self.shared.lock().hooks.replace(hooks);
        drop(old);
    }

    /// Takes the kit's hooks back out.
    pub(crate) fn take_hooks(&self) -> Option<Box<dyn hooks::Hooks>> {
        self.shared.lock().hooks.take()
    }

    /// Reads or changes the cluster directly at the current virtual time (the second
    /// argument), as a test seeding or inspecting the world does; a change wakes the
    /// watches and the garbage collector as a request's would. Not logged.
    pub fn cluster<T>(&self, f: impl FnOnce(&mut Cluster, reconcile_core::Instant) -> T) -> T {
        self.handle().cluster(f)
    }

    /// The virtual time.
    #[must_use]
    pub fn now(&self) -> Duration {
        self.shared.lock().now
    }

    /// Adds a line to the log, stamped with the virtual time.
    pub fn note(&self, line: impl fmt::Display) {
        self.shared.lock().log(line);
    }

    /// The log so far, one line each.
    #[must_use]
    pub fn log(&self) -> Vec<String> {
        self.shared.lock().log.lines_since(0)
    }

    /// Lines dropped because the log reached [`SimConfig::max_log_bytes`].
    #[must_use]
    pub fn log_dropped(&self) -> u64 {
        self.shared.lock().log.dropped()
    }

    /// The log so far as text, a newline after each line.
    #[must_use]
    pub fn log_text(&self) -> String {
        self.shared.lock().log.text().to_owned()
    }

    /// Runs `future` as the task `main`, with every task it spawns, until it finishes.
    /// Tasks still running then stay, and go on in the next `block_on`.
    ///
    /// With [`SimConfig::log_reconciles`], a `tracing` subscriber that logs the engine's
    /// `reconcile` spans is the thread's default during the run, and replaces any other.
    ///
    /// # Errors
    /// [`SimError`]: a deadlock, the horizon, the step budget. `future` is dropped then.
    pub fn block_on<T, F>(&self, future: F) -> Result<T, SimError>
    where
        T: Send + 'static,
        F: Future<Output = T> + Send + 'static,
    {
        let slot: Arc<Mutex<Option<T>>> = Arc::new(Mutex::new(None));
        let out = Arc::clone(&slot);
        let task = self.shared.spawn(Some("main".to_owned()), async move {
            let value = future.await;
            *out.lock().unwrap_or_else(PoisonError::into_inner) = Some(value);
        });
        let done = || {
            slot.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .is_some()
        };
        let _ambient = Ambient::enter(&self.shared);
        let result = if self.shared.config.log_reconciles {
            let tap = tap::ReconcileTap {
                shared: Arc::clone(&self.shared),
                next: AtomicU64::new(1),
            };
            tap::with_tap(tap, || self.shared.run(&done))
        } else {
            self.shared.run(&done)
        };
        drop(task);
        result?;
        let value = slot.lock().unwrap_or_else(PoisonError::into_inner).take();
        // `done()` held, so the slot is filled.
        Ok(value.expect("the main task finished"))
    }
}

thread_local! {
    /// The simulation whose `block_on` runs on this thread: what [`SimRuntime::default`]
    /// returns, as tokio's and smol's runtimes are found ambiently.
    static AMBIENT: RefCell<Option<Arc<Shared>>> = const { RefCell::new(None) };
}

/// Sets [`AMBIENT`] for one `block_on`, and puts the previous one back.
struct Ambient(Option<Arc<Shared>>);

impl Ambient {
    fn enter(shared: &Arc<Shared>) -> Self {
        Ambient(AMBIENT.with(|a| a.borrow_mut().replace(Arc::clone(shared))))
    }
}

impl Drop for Ambient {
    fn drop(&mut self) {
        let previous = self.0.take();
        AMBIENT.with(|a| *a.borrow_mut() = previous);
    }
}

impl Default for SimRuntime {
    /// The runtime of the simulation running on this thread, for controllers built with a
    /// runtime's default value (`Controller::for_objects`).
    ///
    /// # Panics
    /// Outside [`Simulation::block_on`].
    fn default() -> Self {
        let shared = AMBIENT.with(|a| a.borrow().clone());
        SimRuntime {
            shared: shared
                .expect("SimRuntime::default() is only available inside Simulation::block_on"),
            incarnation: 0,
        }
    }
}

impl Drop for Simulation {
    fn drop(&mut self) {
        self.shared.clear();
    }
}

/// What the kit's own task holds to act on the simulation from inside a run.
#[derive(Clone)]
pub(crate) struct SimHandle {
    shared: Arc<Shared>,
}

impl SimHandle {
    /// As [`Simulation::cluster`].
    pub(crate) fn cluster<T>(
        &self,
        f: impl FnOnce(&mut Cluster, reconcile_core::Instant) -> T,
    ) -> T {
        let mut st = self.shared.lock();
        let before = st.cluster.resource_version();
        let now = st.cluster_now();
        let out = f(&mut st.cluster, now);
        if st.cluster.resource_version() != before {
            st.cluster_changed(&self.shared.config);
        }
        out
    }

    /// Cancels every task of `incarnation` (a crash): how many there were.
    pub(crate) fn kill(&self, incarnation: u64) -> usize {
        self.shared.kill(incarnation)
    }

    /// Asks `incarnation` to stop, as SIGTERM would: its [`ShutdownSignal`] completes.
    pub(crate) fn signal(&self, incarnation: u64) {
        let wakers = {
            let mut st = self.shared.lock();
            st.signalled.insert(incarnation);
            std::mem::take(&mut st.signal_wakers)
        };
        for waker in wakers {
            waker.wake();
        }
    }

    /// Cuts every open watch ([`hooks::Cut`]); the readers waiting on them are woken.
    pub(crate) fn cut_watches(&self, cut: hooks::Cut) {
        let wakers = {
            let mut st = self.shared.lock();
            st.cuts.push(cut);
            std::mem::take(&mut st.watch_wakers)
        };
        for (_, waker) in wakers {
            waker.wake();
        }
    }

    /// Watch deliveries are `by` late until `until`.
    pub(crate) fn slow_watches(&self, until: Duration, by: Duration) {
        self.shared.lock().slow_watches = Some((until, by));
    }

    /// Watches hold their frames until `until`, then send each object's last one.
    pub(crate) fn coalesce_until(&self, until: Duration) {
        let mut st = self.shared.lock();
        st.coalesce_until = st.coalesce_until.max(until);
    }

    /// The virtual time.
    pub(crate) fn now(&self) -> Duration {
        self.shared.lock().now
    }

    /// Adds a line to the log.
    pub(crate) fn note(&self, line: impl fmt::Display) {
        self.shared.lock().log(line);
    }

    /// Sleeps `duration` of virtual time.
    pub(crate) async fn sleep(&self, duration: Duration) {
        let at = self.shared.lock().now + duration;
        sleep(&self.shared, at).await;
    }

    /// The runtime and transport of controller incarnation `incarnation` (from 1): its
    /// tasks can be killed at once ([`SimHandle::kill`]), its requests are told apart by
    /// the hooks, and its shutdown signal is [`SimHandle::signal`].
    pub(crate) fn incarnation(&self, incarnation: u64) -> (SimRuntime, SimTransport) {
        (
            SimRuntime {
                shared: Arc::clone(&self.shared),
                incarnation,
            },
            SimTransport {
                shared: Arc::clone(&self.shared),
                incarnation,
            },
        )
    }

    /// Lines in the log so far.
    pub(crate) fn log_len(&self) -> usize {
        self.shared.lock().log.len()
    }

    /// The log's lines from line `from` on.
    pub(crate) fn log_since(&self, from: usize) -> Vec<String> {
        self.shared.lock().log.lines_since(from)
    }

    /// Spawns `future` as a task of `incarnation`.
    pub(crate) fn spawn(&self, incarnation: u64, future: BoxFuture<()>) {
        self.shared.spawn_owned(incarnation, future);
    }
}

/// The simulation's [`Runtime`]: spawns on its executor, sleeps and reads its virtual
/// clock. Clones share the simulation.
#[derive(Clone)]
pub struct SimRuntime {
    shared: Arc<Shared>,
    /// The controller incarnation whose tasks this runtime spawns (0: none).
    incarnation: u64,
}

impl fmt::Debug for SimRuntime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimRuntime").finish_non_exhaustive()
    }
}

impl SimRuntime {
    /// Sleeps `duration` of virtual time.
    pub async fn sleep(&self, duration: Duration) {
        let at = self.shared.lock().now + duration;
        sleep(&self.shared, at).await;
    }

    /// The virtual time, as an offset from the simulation's start.
    #[must_use]
    pub fn elapsed(&self) -> Duration {
        self.shared.lock().now
    }

    /// The virtual wall clock: 2026-01-01T00:00:00Z ([`EPOCH_UNIX_SECONDS`]) at the start,
    /// moving with virtual time, the clock the cluster stamps its timestamps with. For what
    /// needs a wall-clock time, such as the engine's events recorder
    /// (`Recorder::with_clock`): the real clock would make a run differ from the next.
    ///
    /// [`EPOCH_UNIX_SECONDS`]: crate::cluster::EPOCH_UNIX_SECONDS
    #[must_use]
    pub fn wall_time(&self) -> k8s_openapi::jiff::Timestamp {
        let epoch = k8s_openapi::jiff::Timestamp::from_second(crate::cluster::EPOCH_UNIX_SECONDS)
            .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
        epoch
            .checked_add(self.elapsed())
            .unwrap_or(k8s_openapi::jiff::Timestamp::MAX)
    }
}

impl Runtime for SimRuntime {
    type Task = SimTask;

    fn spawn(&self, future: BoxFuture<()>) -> SimTask {
        if self.incarnation == 0 {
            return SimTask(Spawned::Handle(Some(self.shared.spawn(None, future))));
        }
        let id = self.shared.spawn_owned(self.incarnation, future);
        SimTask(Spawned::Owned(Arc::clone(&self.shared), id))
    }

    fn sleep_until(&self, deadline: Instant) -> BoxFuture<()> {
        sleep(
            &self.shared,
            deadline.saturating_duration_since(self.shared.epoch),
        )
    }

    fn now(&self) -> Instant {
        self.shared.epoch + self.shared.lock().now
    }
}

/// A task on the simulation's executor: dropping it detaches the task.
pub struct SimTask(Spawned);

/// Where a task's handle is.
enum Spawned {
    /// Here.
    Handle(Option<async_task::Task<(), u64>>),
    /// With the simulation, under its incarnation (so a crash can cancel it): its id.
    Owned(Arc<Shared>, u64),
}

impl fmt::Debug for SimTask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimTask").finish_non_exhaustive()
    }
}

impl Task for SimTask {
    fn abort(mut self) {
        match &mut self.0 {
            // Dropping an async-task handle cancels its task.
            Spawned::Handle(task) => drop(task.take()),
            Spawned::Owned(shared, id) => shared.abort_owned(*id),
        }
    }
}

impl Drop for SimTask {
    fn drop(&mut self) {
        if let Spawned::Handle(handle) = &mut self.0
            && let Some(task) = handle.take()
        {
            task.detach();
        }
    }
}

impl reconcile_engine::ShutdownSignal for SimRuntime {
    /// Completes once the test kit asks this runtime's incarnation to stop (never for a
    /// runtime of no incarnation: nothing sends a simulated SIGTERM to it).
    fn shutdown_signal(&self) -> BoxFuture<()> {
        Box::pin(Signal {
            shared: Arc::clone(&self.shared),
            incarnation: self.incarnation,
        })
    }
}

/// [`SimRuntime::shutdown_signal`].
struct Signal {
    shared: Arc<Shared>,
    incarnation: u64,
}

impl Future for Signal {
    type Output = ();

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        let mut st = self.shared.lock();
        if st.signalled.contains(&self.incarnation) {
            return std::task::Poll::Ready(());
        }
        st.signal_wakers.push(cx.waker().clone());
        st.waiting(|| "the shutdown signal".to_owned());
        std::task::Poll::Pending
    }
}
