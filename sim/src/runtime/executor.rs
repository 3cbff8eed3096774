//! The seeded single-threaded executor: tasks on `async-task` (allocation, wakers, the
//! run/cancel state machine), one ready list from which the seed picks the next task, and a
//! virtual clock that jumps to the earliest timer once no task is ready.
//!
//! Everything shared sits behind one mutex ([`State`]), which is never held while a task is
//! polled, a waker is woken or dropped, or a task's future is dropped: each of those may
//! come back to the state (a schedule, a timer's drop, a watch closing).

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use async_task::Runnable;
use reconcile_engine::BoxFuture;

use super::{Blocked, SimConfig, SimError};
use crate::cluster::Cluster;
use crate::rng::Rng;

/// What a timer does when the clock reaches it.
pub(super) enum Timer {
    /// Wakes a task (a sleep, a reply's latency, a watch with news).
    Wake(Waker),
    /// A pass of the cluster's garbage collector.
    Gc,
}

/// A timer's place: its deadline (virtual offset) and a sequence number (insertion order).
pub(super) type TimerKey = (Duration, u64);

/// A live task, for the report of what is blocked.
pub(super) struct TaskInfo {
    pub(super) name: String,
    pub(super) spawned_at: Duration,
    /// What the task registered a waker with since it was last polled.
    pub(super) waits: Vec<String>,
}

/// Everything the simulation shares. See the module docs for the locking rule.
pub(super) struct State {
    pub(super) now: Duration,
    pub(super) ready: Vec<Runnable<u64>>,
    pub(super) timers: BTreeMap<TimerKey, Timer>,
    next_seq: u64,
    next_task: u64,
    pub(super) tasks: BTreeMap<u64, TaskInfo>,
    current: Option<u64>,
    schedule_rng: Rng,
    latency_rng: Rng,
    pub(super) cluster: Cluster,
    /// The reader of each open watch that waits for a change.
    pub(super) watch_wakers: BTreeMap<u64, Waker>,
    gc_pending: bool,
    pub(super) log: super::log::RunLog,
    /// [`SimConfig::max_log_bytes`], here so that logging needs only the state.
    max_log_bytes: usize,
    steps: u64,
    /// What a test kit adds to the run: faults at the transport, a look at every change.
    pub(crate) hooks: Option<Box<dyn super::hooks::Hooks>>,
    /// Tasks spawned by a controller incarnation (its number, and the handle), so that a
    /// crash can cancel every task of one incarnation at once, as a process's death does.
    owned: BTreeMap<u64, (u64, async_task::Task<(), u64>)>,
    /// How many times the open watches were cut ([`State::cut_watches`]), and how.
    pub(super) cuts: Vec<super::hooks::Cut>,
    /// Until when watch deliveries are late, and by how much ([`super::hooks::Hooks`]).
    pub(crate) slow_watches: Option<(Duration, Duration)>,
    /// Until when a watch holds its frames and then sends only each object's last one.
    pub(crate) coalesce_until: Duration,
    /// The incarnations asked to stop, and the shutdown signals waiting for that.
    pub(super) signalled: std::collections::BTreeSet<u64>,
    pub(super) signal_wakers: Vec<Waker>,
}

impl State {
    /// The virtual time as the cluster counts it.
    pub(super) fn cluster_now(&self) -> reconcile_core::Instant {
        reconcile_core::Instant::from_duration(self.now)
    }

    pub(super) fn add_timer(&mut self, at: Duration, timer: Timer) -> TimerKey {
        let key = (at, self.next_seq);
        self.next_seq += 1;
        self.timers.insert(key, timer);
        key
    }

    /// Notes that the task being polled now waits on `what`.
    pub(super) fn waiting(&mut self, what: impl FnOnce() -> String) {
        if let Some(info) = self.current.and_then(|id| self.tasks.get_mut(&id)) {
            info.waits.push(what());
        }
    }

    /// One latency draw from the configured range.
    pub(super) fn latency(&mut self, config: &SimConfig) -> Duration {
        let lo = u64::try_from(config.latency_min.as_nanos()).unwrap_or(u64::MAX);
        let hi = u64::try_from(config.latency_max.as_nanos()).unwrap_or(u64::MAX);
        Duration::from_nanos(self.latency_rng.range(lo, hi.max(lo)))
    }

    /// A log line stamped with the virtual time.
    pub(super) fn log(&mut self, line: impl std::fmt::Display) {
        self.log.push(self.now, line, self.max_log_bytes);
    }

    /// The cluster changed (its resourceVersion moved): each watch reader waiting for news
    /// is woken after a latency drawn from the seed (the watch cache's delivery), and a pass
    /// of the garbage collector is scheduled, as kube-controller-manager's informers would
    /// see the change and act on it asynchronously.
    pub(super) fn cluster_changed(&mut self, config: &SimConfig) {
        let slow = match self.slow_watches {
            Some((until, by)) if self.now < until => by,
            _ => Duration::ZERO,
        };
        for (_, waker) in std::mem::take(&mut self.watch_wakers) {
            let at = self.now + self.latency(config) + slow;
            self.add_timer(at, Timer::Wake(waker));
        }
        if let Some(mut hooks) = self.hooks.take() {
            hooks.changed(self.now, &self.cluster);
            self.hooks = Some(hooks);
        }
        if !self.gc_pending {
            self.gc_pending = true;
            let at = self.now + config.gc_delay;
            self.add_timer(at, Timer::Gc);
        }
    }

    /// Every live task and what it waits on, for an error report.
    fn blocked(&self) -> Vec<Blocked> {
        self.tasks
            .iter()
            .map(|(&id, info)| Blocked {
                task: id,
                name: info.name.clone(),
                spawned_at: info.spawned_at,
                waiting_on: info.waits.clone(),
            })
            .collect()
    }
}

/// A virtual offset as the log shows it: seconds with milliseconds, right-aligned.
#[must_use]
pub fn stamp(at: Duration) -> String {
    super::log::Stamp(at).to_string()
}

/// The shared core of a simulation: its configuration, the one real `Instant` its clock
/// counts from, and the state.
pub(super) struct Shared {
    pub(super) config: SimConfig,
    /// Taken once when the simulation is created: `std::time::Instant` has no constructor
    /// but `now()`, and [`reconcile_engine::Runtime::now`] must return one. Only offsets
    /// from it are ever shown, so nothing in the output depends on its value.
    pub(super) epoch: std::time::Instant,
    state: Mutex<State>,
}

impl Shared {
    pub(super) fn new(config: SimConfig, cluster: Cluster) -> Arc<Self> {
        let state = State {
            now: Duration::ZERO,
            ready: Vec::new(),
            timers: BTreeMap::new(),
            next_seq: 0,
            next_task: 0,
            tasks: BTreeMap::new(),
            current: None,
            schedule_rng: Rng::new(config.seed),
            latency_rng: Rng::new(config.seed.rotate_left(32) ^ 0x1A7E_0C1E),
            cluster,
            watch_wakers: BTreeMap::new(),
            gc_pending: false,
            log: super::log::RunLog::default(),
            max_log_bytes: config.max_log_bytes,
            steps: 0,
            hooks: None,
            owned: BTreeMap::new(),
            cuts: Vec::new(),
            slow_watches: None,
            coalesce_until: Duration::ZERO,
            signalled: std::collections::BTreeSet::new(),
            signal_wakers: Vec::new(),
        };
        Arc::new(Shared {
            config,
            epoch: std::time::Instant::now(),
            state: Mutex::new(state),
        })
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        // Nothing panics while holding the lock with the state half-changed.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Spawns `future` as a task named `name`.
    pub(super) fn spawn<F>(
        self: &Arc<Self>,
        name: Option<String>,
        future: F,
    ) -> async_task::Task<(), u64>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let id = {
            let mut st = self.lock();
            let id = st.next_task;
            st.next_task += 1;
            let spawned_at = st.now;
            st.tasks.insert(
                id,
                TaskInfo {
                    name: name.unwrap_or_else(|| format!("task {id}")),
                    spawned_at,
                    waits: Vec::new(),
                },
            );
            id
        };
        let guard = Finished(Arc::downgrade(self), id);
        let wrapped = async move {
            let _guard = guard;
            future.await;
        };
        let weak = Arc::downgrade(self);
        let schedule = move |runnable: Runnable<u64>| {
            if let Some(shared) = weak.upgrade() {
                shared.lock().ready.push(runnable);
            }
        };
        let (runnable, task) = async_task::Builder::new()
            .metadata(id)
            .spawn(|_| wrapped, schedule);
        runnable.schedule();
        task
    }

    /// Spawns `future` for controller incarnation `incarnation`: the task is kept here
    /// (detached from its caller) until it finishes or [`Shared::kill`] cancels it.
    pub(super) fn spawn_owned<F>(self: &Arc<Self>, incarnation: u64, future: F) -> u64
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let task = self.spawn(None, future);
        let id = *task.metadata();
        let mut st = self.lock();
        if st.tasks.contains_key(&id) {
            st.owned.insert(id, (incarnation, task));
        } else {
            // It finished as it was spawned (it cannot have: it has not run yet).
            drop(st);
            task.detach();
        }
        id
    }

    /// Cancels one owned task (its [`reconcile_engine::Task::abort`]).
    pub(super) fn abort_owned(&self, id: u64) {
        let task = self.lock().owned.remove(&id);
        drop(task);
    }

    /// Cancels every task of `incarnation`, as the death of its process would: none of
    /// them runs again; their futures are dropped when the executor next runs them.
    pub(crate) fn kill(&self, incarnation: u64) -> usize {
        let doomed: Vec<_> = {
            let mut st = self.lock();
            let ids: Vec<u64> = st
                .owned
                .iter()
                .filter(|(_, (n, _))| *n == incarnation)
                .map(|(&id, _)| id)
                .collect();
            ids.iter().filter_map(|id| st.owned.remove(id)).collect()
        };
        let n = doomed.len();
        drop(doomed);
        n
    }

    /// Runs until `done()` holds and no task is ready at that instant, or the run fails.
    pub(super) fn run(&self, done: &dyn Fn() -> bool) -> Result<(), SimError> {
        loop {
            let mut st = self.lock();
            if done() && st.ready.is_empty() {
                return Ok(());
            }
            if st.steps >= self.config.max_steps {
                return Err(SimError::StepBudget {
                    steps: st.steps,
                    at: st.now,
                    blocked: st.blocked(),
                });
            }
            if !st.ready.is_empty() {
                let len = st.ready.len() as u64;
                let i = usize::try_from(st.schedule_rng.below(len)).unwrap_or(0);
                let runnable = st.ready.swap_remove(i);
                let id = *runnable.metadata();
                st.current = Some(id);
                if let Some(info) = st.tasks.get_mut(&id) {
                    info.waits.clear();
                }
                st.steps += 1;
                drop(st);
                runnable.run();
                self.lock().current = None;
                continue;
            }
            if done() {
                // What was ready at the instant the future finished (a cancelled task
                // dropping its future, say) has run; the clock stays.
                return Ok(());
            }
            let Some((&(at, _), _)) = st.timers.first_key_value() else {
                return Err(SimError::Deadlock {
                    at: st.now,
                    blocked: st.blocked(),
                });
            };
            if at > self.config.horizon {
                return Err(SimError::Horizon {
                    horizon: self.config.horizon,
                    next: at,
                    blocked: st.blocked(),
                });
            }
            st.now = st.now.max(at);
            let now = st.now;
            let mut wakers = Vec::new();
            let mut gc = false;
            while let Some(entry) = st.timers.first_entry() {
                if entry.key().0 > now {
                    break;
                }
                match entry.remove() {
                    Timer::Wake(waker) => wakers.push(waker),
                    Timer::Gc => gc = true,
                }
            }
            if gc {
                st.gc_pending = false;
                let before = st.cluster.resource_version();
                let now = st.cluster_now();
                for action in st.cluster.collect_garbage(now) {
                    st.log(&action);
                }
                if st.cluster.resource_version() != before {
                    st.cluster_changed(&self.config);
                }
            }
            drop(st);
            for waker in wakers {
                waker.wake();
            }
        }
    }

    /// Takes every runnable, timer and waker out, to be dropped outside the lock: the tasks'
    /// futures hold the simulation, so they are dropped with it.
    pub(super) fn clear(&self) {
        // Cancelling an owned task schedules it once more (to drop its future), and a
        // dropped future may drop more: take again until nothing is left, boundedly.
        for _ in 0..64 {
            let taken = {
                let mut st = self.lock();
                (
                    std::mem::take(&mut st.ready),
                    std::mem::take(&mut st.timers),
                    std::mem::take(&mut st.watch_wakers),
                    std::mem::take(&mut st.owned),
                    st.hooks.take(),
                    std::mem::take(&mut st.signal_wakers),
                )
            };
            let empty = taken.0.is_empty()
                && taken.1.is_empty()
                && taken.2.is_empty()
                && taken.3.is_empty()
                && taken.4.is_none()
                && taken.5.is_empty();
            drop(taken);
            if empty {
                return;
            }
        }
    }
}

/// Removes a task from the live set when its future is done or dropped.
struct Finished(Weak<Shared>, u64);

impl Drop for Finished {
    fn drop(&mut self) {
        if let Some(shared) = self.0.upgrade() {
            let (info, owned) = {
                let mut st = shared.lock();
                (st.tasks.remove(&self.1), st.owned.remove(&self.1))
            };
            drop(info);
            // This runs inside the task itself (its future finishing or being dropped):
            // detach its handle rather than cancel a task that is running.
            if let Some((_, task)) = owned {
                task.detach();
            }
        }
    }
}

/// A sleep until a virtual deadline; `label` says what it stands for in a report.
pub(super) struct Sleep {
    shared: Arc<Shared>,
    deadline: Duration,
    key: Option<TimerKey>,
    label: Option<String>,
}

impl Sleep {
    pub(super) fn new(shared: Arc<Shared>, deadline: Duration, label: Option<String>) -> Self {
        Sleep {
            shared,
            deadline,
            key: None,
            label,
        }
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let mut st = this.shared.lock();
        if st.now >= this.deadline {
            let old = this.key.take().and_then(|k| st.timers.remove(&k));
            drop(st);
            drop(old);
            return Poll::Ready(());
        }
        let old = match this.key {
            Some(key) if st.timers.contains_key(&key) => {
                st.timers.insert(key, Timer::Wake(cx.waker().clone()))
            }
            _ => {
                this.key = Some(st.add_timer(this.deadline, Timer::Wake(cx.waker().clone())));
                None
            }
        };
        let deadline = this.deadline;
        st.waiting(|| match &this.label {
            Some(label) => format!("{label} (due at {})", stamp(deadline).trim_start()),
            None => format!("a timer at {}", stamp(deadline).trim_start()),
        });
        drop(st);
        drop(old);
        Poll::Pending
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            let old = self.shared.lock().timers.remove(&key);
            drop(old);
        }
    }
}

/// A boxed sleep (what [`reconcile_engine::Runtime::sleep_until`] returns).
pub(super) fn sleep(shared: &Arc<Shared>, deadline: Duration) -> BoxFuture<()> {
    Box::pin(Sleep::new(Arc::clone(shared), deadline, None))
}
