//! The operator test kit: a user's own controller, unchanged, run in the simulator
//! against the simulated cluster, under seeded faults, with oracles that catch the bugs
//! Sieve, Acto and Anvil found in real controllers (a stale cache, a missed intermediate
//! state, state lost on a restart, no convergence), and a minimized reproducer for the
//! first failing seed.
//!
//! ```no_run
//! # use std::time::Duration;
//! # use reconcile_sim::scenario::{Env, Faults, Scenario, World, create, edit};
//! # async fn run_my_controller(_env: Env) {}
//! # let generator: k8s_openapi::api::core::v1::ConfigMap = Default::default();
//! Scenario::new("generator", |env: &Env| run_my_controller(env.clone()))
//!     .given([create(&generator)])
//!     .then_at(Duration::from_secs(5), edit(&generator))
//!     .faults(Faults::all())
//!     .converges_to(|world: &World<'_>| Ok(()))
//!     .explore(0..1000); // panics with a reproducer on the first failing seed
//! ```
//!
//! | part | file |
//! |---|---|
//! | [`Scenario`], [`Env`], [`Oracles`], [`When`] | `mod.rs` |
//! | [`World`], the user's [`Action`]s | `world.rs` |
//! | [`Fault`], [`FaultKind`], [`Faults`] | `faults.rs` |
//! | one seed: the schedule, the controller's incarnations, the hooks at the transport, the oracles | `run.rs` |
//! | many seeds on every core, minimization, the reproducer, [`Summary`] | `explore.rs` |
//! | a captured trace as the given objects and the actions ([`Scenario::captured`]) | `capture.rs` |
//!
//! **One run.** The seed draws the faults (times within the user's actions, plus a few
//! seconds) and drives the simulation's interleaving and latencies. The kit creates the
//! `given` objects, starts the controller (incarnation 1), and plays the schedule: user
//! actions, then faults. Once the last item has played, faults stop and the oracles run
//! in order:
//! 1. **convergence**: within [`Scenario::settle`], `converges_to` holds and the
//!    controller has stopped writing (no write for [`QUIET_BEFORE_CONVERGED`], counted
//!    from the last write or the end of the faults, whichever is later);
//! 2. **no hot loop**: over [`Scenario::quiet`] (10 simulated minutes) after convergence,
//!    no write, and at most [`Scenario::quiet_reconciles`] reconciles;
//! 3. **idempotence**: a fresh incarnation (a restart: every parent reconciled from a fresh
//!    LIST) writes nothing;
//! 4. **clean stop**: the kit sends the shutdown signal ([`ShutdownSignal`]); no escaping
//!    panic from any task, and no request from the controller once its future returned;
//! 5. the user's **invariants**, after every change of the world or at quiescence.
//!
//! A crash kills every task of the incarnation at once (its cache, queue and memory go
//! with it) and starts the next one from the controller function a second later.
//!
//! [`ShutdownSignal`]: reconcile_engine::ShutdownSignal

mod capture;
mod explore;
mod faults;
mod run;
mod world;

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use reconcile_engine::BoxFuture;
use serde_json::Value;

pub use capture::{CaptureError, MAX_CAPTURED_ACTIONS};
pub use explore::{Failure, Summary};
pub use faults::{Fault, FaultKind, Faults};
pub use run::Violation;
pub use world::{Action, World, create, delete, delete_in, edit};

use crate::runtime::{SimRuntime, SimTransport};

/// How long the controller must not write before the world counts as converged.
pub const QUIET_BEFORE_CONVERGED: Duration = Duration::from_secs(5);

/// What the controller function is handed for one incarnation: the runtime and transport
/// to build the controller on.
#[derive(Debug, Clone)]
pub struct Env {
    runtime: SimRuntime,
    transport: SimTransport,
    incarnation: u64,
    trace: Option<PathBuf>,
}

impl Env {
    /// The runtime: pass it where the user's `main` passes tokio's or smol's.
    #[must_use]
    pub fn runtime(&self) -> SimRuntime {
        self.runtime.clone()
    }

    /// The transport to the simulated cluster.
    #[must_use]
    pub fn transport(&self) -> SimTransport {
        self.transport.clone()
    }

    /// Which start of the controller this is: 1, then one more after each crash.
    #[must_use]
    pub fn incarnation(&self) -> u64 {
        self.incarnation
    }

    /// The controller, recording its run as a trace when the kit wants one (when it reruns
    /// a failing seed for the reproducer: `reconcile-sim report` draws it), unchanged
    /// otherwise.
    #[must_use]
    pub fn traced<O, P>(
        &self,
        controller: reconcile_engine::Controller<O, P, SimRuntime, SimTransport>,
    ) -> reconcile_engine::Controller<O, P, SimRuntime, SimTransport>
    where
        O: reconcile_core::Object + Send + Sync + Clone,
        P: reconcile_engine::ParentKey,
    {
        match &self.trace {
            Some(path) => controller.record_trace(path, "a reconcile-sim scenario"),
            None => controller,
        }
    }
}

/// When a user invariant is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    /// After every change of the world (a write, a collector pass, a user action).
    EveryStep,
    /// Once the world has converged.
    Quiescence,
}

/// The oracles, each on by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Oracles {
    /// The world reaches `converges_to` once faults stop.
    pub convergence: bool,
    /// No write, and few reconciles, once converged.
    pub no_hot_loop: bool,
    /// A fresh incarnation at convergence writes nothing.
    pub idempotence: bool,
    /// No escaping panic, no request after the controller stopped.
    pub clean_stop: bool,
}

impl Default for Oracles {
    fn default() -> Self {
        Oracles {
            convergence: true,
            no_hot_loop: true,
            idempotence: true,
            clean_stop: true,
        }
    }
}

/// A check of the world: `Err` says what is wrong.
pub type Check = Arc<dyn Fn(&World<'_>) -> Result<(), String> + Send + Sync>;

/// The controller function: one incarnation's future, which runs the controller until the
/// shutdown signal (or forever: a crash or the end of the run drops it).
pub(crate) type ControllerFn = Arc<dyn Fn(&Env) -> BoxFuture<()> + Send + Sync>;

/// A user invariant.
#[derive(Clone)]
pub(crate) struct Invariant {
    pub(crate) name: String,
    pub(crate) when: When,
    pub(crate) check: Check,
}

/// A scenario: the controller, the world it starts from, the user's actions, the faults
/// and the oracles. See the [module docs](self).
#[derive(Clone)]
pub struct Scenario {
    pub(crate) name: String,
    pub(crate) controller: ControllerFn,
    pub(crate) crds: Vec<Value>,
    pub(crate) given: Vec<Action>,
    pub(crate) actions: Vec<(Duration, Action)>,
    pub(crate) faults: Faults,
    pub(crate) invariants: Vec<Invariant>,
    pub(crate) converges_to: Option<Check>,
    pub(crate) oracles: Oracles,
    pub(crate) settle: Duration,
    pub(crate) quiet: Duration,
    pub(crate) quiet_reconciles: u64,
    pub(crate) namespace: String,
    pub(crate) out_dir: PathBuf,
    pub(crate) threads: Option<usize>,
}

impl std::fmt::Debug for Scenario {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scenario")
            .field("name", &self.name)
            .field("actions", &self.actions.len())
            .field("faults", &self.faults)
            .finish_non_exhaustive()
    }
}

impl Scenario {
    /// A scenario named `name` (it names the reproducer's files) running `controller`:
    /// called for each incarnation, it builds the controller on the [`Env`]'s runtime and
    /// transport and runs it, as the user's `main` does (with `shutdown_on_signal`, for
    /// the clean-stop oracle).
    pub fn new<F, Fut>(name: &str, controller: F) -> Self
    where
        F: Fn(&Env) -> Fut + Send + Sync + 'static,
        Fut: Future + Send + 'static,
    {
        let controller: ControllerFn = Arc::new(move |env: &Env| {
            let future = controller(env);
            Box::pin(async move {
                let _ = future.await;
            })
        });
        Scenario {
            name: name.to_owned(),
            controller,
            crds: Vec::new(),
            given: Vec::new(),
            actions: Vec::new(),
            faults: Faults::none(),
            invariants: Vec::new(),
            converges_to: None,
            oracles: Oracles::default(),
            settle: Duration::from_secs(600),
            quiet: Duration::from_secs(600),
            quiet_reconciles: 20,
            namespace: "default".to_owned(),
            out_dir: default_out_dir(),
            threads: None,
        }
    }

    /// Serves the custom resource `K` (from its `CustomResourceExt::crd()`).
    ///
    /// # Panics
    /// When the CRD does not serialize.
    #[must_use]
    pub fn crd<K: kube_core::CustomResourceExt>(mut self) -> Self {
        self.crds
            .push(serde_json::to_value(K::crd()).expect("a CRD serializes"));
        self
    }

    /// Plays `actions` (creates, usually) before the controller starts.
    #[must_use]
    pub fn given(mut self, actions: impl IntoIterator<Item = Action>) -> Self {
        self.given.extend(actions);
        self
    }

    /// Plays `action` `at` after the controller started.
    #[must_use]
    pub fn then_at(mut self, at: Duration, action: Action) -> Self {
        self.actions.push((at, action));
        self
    }

    /// The fault kinds each seed draws from (none by default).
    #[must_use]
    pub fn faults(mut self, faults: Faults) -> Self {
        self.faults = faults;
        self
    }

    /// An invariant checked after every change of the world.
    #[must_use]
    pub fn invariant(
        self,
        name: &str,
        check: impl Fn(&World<'_>) -> Result<(), String> + Send + Sync + 'static,
    ) -> Self {
        self.invariant_when(name, When::EveryStep, check)
    }

    /// An invariant checked `when`.
    #[must_use]
    pub fn invariant_when(
        mut self,
        name: &str,
        when: When,
        check: impl Fn(&World<'_>) -> Result<(), String> + Send + Sync + 'static,
    ) -> Self {
        self.invariants.push(Invariant {
            name: name.to_owned(),
            when,
            check: Arc::new(check),
        });
        self
    }

    /// The state the world must reach once faults stop: `Err` says what is still missing.
    #[must_use]
    pub fn converges_to(
        mut self,
        check: impl Fn(&World<'_>) -> Result<(), String> + Send + Sync + 'static,
    ) -> Self {
        self.converges_to = Some(Arc::new(check));
        self
    }

    /// Which oracles run.
    #[must_use]
    pub fn oracles(mut self, oracles: Oracles) -> Self {
        self.oracles = oracles;
        self
    }

    /// How long after the last fault the world may take to converge (default 10 minutes:
    /// a hanging watch is noticed only by the client's read-idle timeout, the watch's
    /// `timeoutSeconds` and a margin, 310 s in the engine).
    #[must_use]
    pub fn settle(mut self, settle: Duration) -> Self {
        self.settle = settle;
        self
    }

    /// How long the no-hot-loop oracle watches after convergence (default 10 minutes).
    #[must_use]
    pub fn quiet(mut self, quiet: Duration) -> Self {
        self.quiet = quiet;
        self
    }

    /// Reconciles allowed over [`Scenario::quiet`] (default 20: periodic requeues are
    /// fine, a loop is not).
    #[must_use]
    pub fn quiet_reconciles(mut self, n: u64) -> Self {
        self.quiet_reconciles = n;
        self
    }

    /// The namespace actions default to (`default`).
    #[must_use]
    pub fn namespace(mut self, namespace: &str) -> Self {
        namespace.clone_into(&mut self.namespace);
        self
    }

    /// Where a failing seed's log and traces are written (default: `target/scenarios`
    /// of the workspace, or the system's temporary directory).
    #[must_use]
    pub fn out_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.out_dir = dir.into();
        self
    }

    /// Threads [`Scenario::explore`] runs seeds on (default: every core).
    #[must_use]
    pub fn threads(mut self, n: usize) -> Self {
        self.threads = Some(n.max(1));
        self
    }
}

/// `target/scenarios` beside the running test binary (`target/debug/deps/..`), else the
/// temporary directory.
fn default_out_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR") {
        return PathBuf::from(dir).join("scenarios");
    }
    std::env::current_exe()
        .ok()
        .and_then(|exe| {
            exe.ancestors()
                .find(|a| a.file_name().is_some_and(|n| n == "target"))
                .map(|t| t.join("scenarios"))
        })
        .unwrap_or_else(|| std::env::temp_dir().join("reconcile-sim-scenarios"))
}
