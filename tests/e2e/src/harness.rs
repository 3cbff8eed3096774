//! The driver-agnostic harness: what a driver must supply, the per-case context, the
//! controller under test, and condition waits.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Once};
use std::time::Duration;

use reconcile_core::KeyMap;
use reconcile_core::pod::PodView;
use reconcile_engine::{
    Action, BoxFuture, Controller, Handle, Limits, Reconcile, Running, Runtime, Source, Transport,
    default_error_policy,
};
use reconcile_k8s_env::{ApiServer, Client, K8sEnv, shared_or_skip};

use crate::observe::{Call, Member, Observed};
use crate::tap::Tape;
use crate::trace;
use reconcile_engine::TraceRecorder;
use reconcile_trace::{Header, header_for, to_trace};

/// Default wait for a condition: generous, because two apiservers, kwok and the tests
/// share two cores in CI.
pub const WAIT: Duration = Duration::from_secs(60);

/// The label that groups pods into cells (the parent key).
pub const CELL: &str = "cell";

/// Reconcile backoff of the controller under test: base and cap.
pub const BACKOFF: (Duration, Duration) = (Duration::from_millis(200), Duration::from_secs(5));

/// A health listener serving: its address, and a guard that stops it when dropped.
pub type Serving = (std::net::SocketAddr, Box<dyn Send>);

/// What a driver supplies to run the suites.
pub trait DriverUnderTest: Sized + 'static {
    /// Short name, used in trace paths (`tokio`, `smol`).
    const NAME: &'static str;
    /// The runtime the engine runs on.
    type Runtime: Runtime;
    /// The HTTP stack.
    type Transport: Transport;

    /// The runtime handle.
    fn runtime() -> Self::Runtime;

    /// A transport for the cluster of `kubeconfig`.
    fn connect(kubeconfig: &Path) -> BoxFuture<Result<Self::Transport, String>>;

    /// A transport for the cluster of `kubeconfig`, built by the driver from the config
    /// (so with its own checks), whose exec credential plugin may run `exec_timeout`.
    fn connect_with_exec_timeout(
        kubeconfig: &Path,
        exec_timeout: Duration,
    ) -> BoxFuture<Result<Self::Transport, String>>;

    /// Serves `endpoints` (`/metrics`, `/healthz`, `/readyz`) on a loopback port with this
    /// driver's own listener; dropping the guard stops it.
    fn serve(endpoints: reconcile_engine::Endpoints) -> BoxFuture<Result<Serving, String>>;

    /// Runs one whole case to completion on this runtime. The case body makes blocking
    /// calls to the environment, so the runtime must run the controller's tasks on other
    /// threads than the one blocked here.
    fn block_on<T>(future: impl Future<Output = T>) -> T;
}

/// Runs `case` on the shared environment, or skips it (with a message) when the
/// environment cannot be provisioned and `RECONCILE_K8S_REQUIRE` is off.
pub fn run_case<D, F, Fut>(name: &'static str, case: F)
where
    D: DriverUnderTest,
    F: FnOnce(Case<D>) -> Fut,
    Fut: Future<Output = ()>,
{
    static TRACING: Once = Once::new();
    TRACING.call_once(|| {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_default_env()
                    .unwrap_or_else(|_| "warn".into()),
            )
            .with_test_writer()
            .try_init();
    });
    let Some(env) = shared_or_skip(name) else {
        return;
    };
    D::block_on(case(Case {
        env,
        name,
        runtime: D::runtime(),
    }));
}

/// One case's context.
pub struct Case<D: DriverUnderTest> {
    /// The shared environment.
    pub env: &'static K8sEnv,
    /// The case's name.
    pub name: &'static str,
    /// The runtime.
    pub runtime: D::Runtime,
}

/// How to start the controller under test.
#[derive(Debug, Clone)]
pub struct Opts {
    /// Which apiserver.
    pub server: ApiServer,
    /// Label selector (server-side).
    pub selector: String,
    /// WATCH `timeoutSeconds`.
    pub timeout_seconds: u32,
    /// Reflector retry delay.
    pub retry_delay: Duration,
    /// Parallel reconciles.
    pub concurrency: usize,
    /// LIST page size (`Source::page_size`); `None` lists in one request.
    pub page_size: Option<u32>,
    /// Fetch the initial state with a streaming list (`Source::streaming_lists`).
    pub streaming: bool,
    /// Connect through this kubeconfig instead of `server`'s (an extra apiserver's).
    pub kubeconfig: Option<std::path::PathBuf>,
    /// Ask for protobuf (`Source::protobuf`).
    pub protobuf: bool,
}

impl Default for Opts {
    fn default() -> Self {
        Opts {
            server: ApiServer::Cached,
            selector: "app=e2e".into(),
            timeout_seconds: 60,
            retry_delay: Duration::from_millis(200),
            concurrency: 4,
            page_size: None,
            streaming: false,
            kubeconfig: None,
            protobuf: false,
        }
    }
}

impl<D: DriverUnderTest> Case<D> {
    /// A fresh namespace for this case.
    ///
    /// # Panics
    /// When the apiserver refuses (the case cannot run).
    #[must_use]
    pub fn namespace(&self) -> String {
        let prefix: String = self
            .name
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .take(30)
            .collect();
        self.env
            .unique_namespace(prefix.trim_end_matches('-'))
            .unwrap_or_else(|e| panic!("{}: cannot create a namespace: {e}", self.name))
    }

    /// The blocking client of the watch-cache-on apiserver.
    #[must_use]
    pub fn api(&self) -> &'static Client {
        self.env.client(ApiServer::Cached)
    }

    /// Starts the cell controller on `namespace` and waits for its first sync.
    ///
    /// # Panics
    /// When it cannot connect or does not sync within [`WAIT`].
    pub async fn start(&self, namespace: &str, opts: Opts) -> Under<D> {
        self.start_numbered(namespace, opts, 0).await
    }

    /// As [`Case::start`], for a case that runs more than one controller (`n` tells the
    /// traces apart).
    ///
    /// # Panics
    /// As [`Case::start`].
    pub async fn start_numbered(&self, namespace: &str, opts: Opts, n: usize) -> Under<D> {
        let kubeconfig = opts
            .kubeconfig
            .as_deref()
            .unwrap_or_else(|| self.env.kubeconfig_path(opts.server));
        let transport = D::connect(kubeconfig)
            .await
            .unwrap_or_else(|e| panic!("{}: cannot connect: {e}", self.name));
        let source = Source::<PodView, D::Transport>::pods(transport, Some(namespace))
            .labels(opts.selector.clone())
            .timeout(opts.timeout_seconds)
            .page_size(opts.page_size.unwrap_or(0));
        let source = if opts.streaming {
            source.streaming_lists()
        } else {
            source
        };
        let source = if opts.protobuf {
            source.protobuf()
        } else {
            source
        };
        let observed = Observed::default();
        let trace_path = trace::path(D::NAME, self.name, n);
        let controller = Controller::with_runtime(D::runtime(), source, KeyMap::by_label(CELL))
            .concurrency(opts.concurrency)
            .retry_delay(opts.retry_delay)
            .backoff(BACKOFF.0, BACKOFF.1)
            .resync(None)
            .limits(Limits {
                watch_idle_margin: Duration::from_secs(10),
                ..Limits::default()
            });
        // The key map is a ready-made one, so the header names it and a replay rebuilds it.
        let header = header_for(
            &format!("e2e {} {}", D::NAME, self.name),
            controller.config(),
        );
        let mut recorder = TraceRecorder::new(&trace_path, header.clone());
        let tap = recorder.tape();
        let controller = controller.recorder(recorder);
        let handle = controller.handle();
        let sink = observed.clone();
        let started = reconcile_engine::runtime::timeout(
            &self.runtime,
            WAIT,
            controller.start(record_call, default_error_policy, Arc::new(sink)),
        )
        .await;
        let running = match started {
            Some(Ok(running)) => running,
            Some(Err(e)) => panic!("{}: the controller did not start: {e}", self.name),
            None => {
                handle.stop();
                panic!(
                    "{}: no sync within {}s (stats {:?})",
                    self.name,
                    WAIT.as_secs(),
                    handle.stats()
                )
            }
        };
        Under {
            name: self.name,
            namespace: namespace.to_owned(),
            runtime: self.runtime.clone(),
            running: Some(running),
            handle,
            observed,
            tap,
            trace_path,
            header,
        }
    }

    /// Waits until `check` holds; see [`eventually`].
    pub async fn eventually<T>(&self, what: &str, check: impl FnMut() -> Result<T, String>) -> T {
        eventually(&self.runtime, WAIT, what, check).await
    }
}

/// The cell controllers' reconcile: records which members each cell's run saw, and
/// waits for the next change.
///
/// # Errors
/// Never.
pub async fn record_call(
    request: Reconcile<PodView, String>,
    sink: Arc<Observed>,
) -> Result<Action, std::convert::Infallible> {
    let (cell, members) = request.into_parts();
    sink.push(Call {
        cell,
        members: members.iter().map(|p| Member::of(p)).collect(),
    });
    Ok(Action::await_change())
}

/// The cell controller under test.
pub struct Under<D: DriverUnderTest> {
    name: &'static str,
    namespace: String,
    runtime: D::Runtime,
    running: Option<Running<PodView, String, D::Runtime>>,
    /// Its handle.
    pub handle: Handle<PodView, String>,
    /// What its reconciles saw.
    pub observed: Observed,
    /// What crossed its driver boundary.
    pub tap: Tape,
    trace_path: PathBuf,
    header: Header,
}

impl<D: DriverUnderTest> Under<D> {
    /// Waits until `check` holds; see [`eventually`].
    pub async fn eventually<T>(&self, what: &str, check: impl FnMut() -> Result<T, String>) -> T {
        self.eventually_within(WAIT, what, check).await
    }

    /// [`Under::eventually`] with a limit of its own, for what the apiserver only does now
    /// and then.
    pub async fn eventually_within<T>(
        &self,
        limit: Duration,
        what: &str,
        check: impl FnMut() -> Result<T, String>,
    ) -> T {
        let what = format!("{} ({})", what, self.name);
        eventually(&self.runtime, limit, &what, check).await
    }

    /// Waits until the latest reconcile of `cell` saw exactly `names` (sorted).
    pub async fn wait_cell(&self, cell: &str, names: &[&str]) -> Vec<Member> {
        self.wait_cell_for(WAIT, cell, names).await
    }

    /// [`Under::wait_cell`] with its own time limit, for cases that wait out retry delays.
    pub async fn wait_cell_for(&self, limit: Duration, cell: &str, names: &[&str]) -> Vec<Member> {
        let observed = self.observed.clone();
        let what = format!("cell {cell} = {names:?} ({})", self.name);
        eventually(&self.runtime, limit, &what, || {
            match observed.latest(cell) {
                Some(members)
                    if members
                        .iter()
                        .map(|m| m.name.as_str())
                        .eq(names.iter().copied()) =>
                {
                    Ok(members)
                }
                Some(members) => Err(format!(
                    "latest reconcile saw {:?}",
                    members.iter().map(|m| &m.name).collect::<Vec<_>>()
                )),
                None => Err("never reconciled".into()),
            }
        })
        .await
    }

    /// Waits until the latest reconcile of `cell` satisfies `check`.
    pub async fn wait_cell_where(
        &self,
        cell: &str,
        what: &str,
        check: impl Fn(&[Member]) -> bool,
    ) -> Vec<Member> {
        let observed = self.observed.clone();
        self.eventually(&format!("cell {cell}: {what}"), || {
            match observed.latest(cell) {
                Some(members) if check(&members) => Ok(members),
                Some(members) => Err(format!("latest reconcile saw {members:?}")),
                None => Err("never reconciled".into()),
            }
        })
        .await
    }

    /// The namespace it watches.
    #[must_use]
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// Stops it, waits for the end (which writes its trace), and replays the trace.
    ///
    /// # Panics
    /// When it does not stop within [`WAIT`] or ended with an error.
    pub async fn shutdown(mut self) {
        let Some(running) = self.running.take() else {
            return;
        };
        let result = reconcile_engine::runtime::timeout(&self.runtime, WAIT, running.shutdown())
            .await
            .unwrap_or_else(|| {
                panic!(
                    "{}: the controller did not stop within {}s",
                    self.name,
                    WAIT.as_secs()
                )
            });
        if let Err(e) = result {
            panic!("{}: the controller ended with {e}", self.name);
        }
        self.check_replay();
    }

    /// Writes this run's trace and replays it in the simulator: the replay must not diverge
    /// and must end with the same latest members per cell as the live reconciles, the same
    /// counters and the same cursor.
    fn check_replay(&self) {
        let replayed = trace::replay(&self.trace_path)
            .unwrap_or_else(|e| panic!("{}: recorded trace: {e}", self.name));
        let mut live = std::collections::BTreeMap::new();
        for call in self.observed.all() {
            live.insert(
                call.cell.clone(),
                call.names()
                    .into_iter()
                    .map(str::to_owned)
                    .collect::<Vec<_>>(),
            );
        }
        assert_eq!(
            replayed.latest,
            live,
            "{}: the replay of {} ends with other cells than the live run",
            self.name,
            self.trace_path.display()
        );
        // Every recorded frame and LIST answer is fed once, so these must match exactly.
        let stats = self.handle.stats();
        let pick = |s: reconcile_core::Stats| (s.frames, s.frames_skipped, s.lists, s.relists);
        assert_eq!(
            pick(replayed.stats),
            pick(stats),
            "{}: (frames, skipped, lists, relists) of the replay of {} differ from the live run",
            self.name,
            self.trace_path.display()
        );
        assert_eq!(
            replayed.cursor,
            self.handle.cursor(),
            "{}: the replay of {} ends at another cursor than the live run",
            self.name,
            self.trace_path.display()
        );
    }
}

impl<D: DriverUnderTest> Drop for Under<D> {
    fn drop(&mut self) {
        // A failed case unwinds here without `shutdown`: stop the controller anyway, and
        // leave its trace from the tape (the runtime may be gone before the driver writes
        // its own), so a CI failure can be replayed.
        if self.running.is_some() {
            self.handle.stop();
            let mut trace = to_trace(
                &self.trace_path.display().to_string(),
                self.header.clone(),
                &self.tap.all(),
            );
            // Written as every trace is: redacted, private.
            reconcile_trace::redact::Redaction::default().trace(&mut trace, &[]);
            let _ = reconcile_trace::write_private(&self.trace_path, trace.to_jsonl().as_bytes());
        }
    }
}

/// Polls `check` until it returns `Ok`, sleeping on the runtime between polls (50 ms,
/// doubling to 500 ms).
///
/// # Panics
/// After `limit`, naming `what` and the last thing `check` reported: the case fails.
pub async fn eventually<R: Runtime, T>(
    runtime: &R,
    limit: Duration,
    what: &str,
    mut check: impl FnMut() -> Result<T, String>,
) -> T {
    let deadline = runtime.now() + limit;
    let mut pause = Duration::from_millis(50);
    loop {
        let last = match check() {
            Ok(value) => return value,
            Err(last) => last,
        };
        let now = runtime.now();
        assert!(
            now < deadline,
            "timed out after {}s waiting for {what}; last seen: {last}",
            limit.as_secs()
        );
        runtime.sleep_until((now + pause).min(deadline)).await;
        pause = (pause * 2).min(Duration::from_millis(500));
    }
}

/// Whether `request` is a WATCH (`watch=true` in its query), as the engine's requests mark
/// it: what the cases' wrapping transports count or hold.
#[must_use]
pub fn is_watch<B>(request: &http::Request<B>) -> bool {
    request
        .uri()
        .query()
        .is_some_and(|q| q.split('&').any(|p| p == "watch=true"))
}
