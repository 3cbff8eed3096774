//! The e2e suites on the smol driver, plus the proof that no tokio runtime ever runs.
//!
//! The suites are the same generic cases as `tokio.rs`, instantiated for [`Smol`]. The
//! runtime under test is smol's wrapped in a probe: every task the engine spawns (the
//! driver, its LIST / WATCH readers, every reconcile) checks on every poll that
//! `tokio::runtime::Handle::try_current()` is an error, and a sampler thread watches
//! `/proc/self/task` for any thread named `tokio-*` for as long as the binary runs. Each
//! case ends by asserting that neither ever saw tokio, and
//! `no_tokio_runtime_in_reconcile_the_driver_or_any_thread` checks it head-on with its own
//! reconcile.

use std::collections::BTreeSet;
use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Once};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use reconcile_core::KeyMap;
use reconcile_core::pod::PodView;
use reconcile_e2e::DriverUnderTest;
use reconcile_e2e::harness::WAIT;
use reconcile_k8s_env::{ApiServer, pod_manifest};
use reconcile_smol::engine::runtime::timeout;
use reconcile_smol::engine::{self, BoxFuture, Runtime};
use reconcile_smol::{
    Action, Reconcile, SmolRuntime, SmolTask, SmolTransport, Source, default_error_policy, smol,
};

/// `reconcile-smol` on smol's global executor, with [`SmolTransport`] from the kubeconfig.
struct Smol;

impl DriverUnderTest for Smol {
    const NAME: &'static str = "smol";
    type Runtime = Probed;
    type Transport = SmolTransport;

    fn runtime() -> Probed {
        Probed
    }

    fn connect_with_exec_timeout(
        kubeconfig: &Path,
        exec_timeout: Duration,
    ) -> BoxFuture<Result<SmolTransport, String>> {
        let path = kubeconfig.to_owned();
        Box::pin(async move {
            let kubeconfig = kube::config::Kubeconfig::read_from(&path)
                .map_err(|e| format!("read {}: {e}", path.display()))?;
            let config = kube::Config::from_custom_kubeconfig(
                kubeconfig,
                &kube::config::KubeConfigOptions::default(),
            )
            .await
            .map_err(|e| format!("kubeconfig {}: {e}", path.display()))?;
            let options = reconcile_smol::TransportOptions {
                exec_timeout,
                ..reconcile_smol::TransportOptions::default()
            };
            SmolTransport::with_options(config, options).map_err(|e| e.to_string())
        })
    }

    fn connect(kubeconfig: &Path) -> BoxFuture<Result<SmolTransport, String>> {
        let path = kubeconfig.to_owned();
        Box::pin(async move {
            SmolTransport::from_kubeconfig(&path)
                .await
                .map_err(|e| e.to_string())
        })
    }

    fn serve(
        endpoints: reconcile_smol::Endpoints,
    ) -> BoxFuture<Result<reconcile_e2e::harness::Serving, String>> {
        Box::pin(async move {
            let server = reconcile_smol::EndpointsServer::bind("127.0.0.1:0", endpoints)
                .await
                .map_err(|e| format!("bind: {e}"))?;
            Ok((server.local_addr(), Box::new(server) as Box<dyn Send>))
        })
    }

    fn block_on<T>(future: impl Future<Output = T>) -> T {
        start_sampler();
        // The case body blocks this thread on the environment; the controllers run on
        // smol's executor thread(s), and timers on async-io's reactor.
        let out = smol::block_on(Probe(Box::pin(future)));
        assert_never_tokio("after the case");
        out
    }
}

reconcile_e2e::apiserver_suite!(Smol);
reconcile_e2e::kwok_suite!(Smol);
reconcile_e2e::kinds_suite!(Smol);
reconcile_e2e::election_suite!(Smol);

// ---------------------------------------------------------------------------------------
// The probe: smol's runtime, with a tokio check on every poll of every spawned task.
// ---------------------------------------------------------------------------------------

/// Polls under a probe (proof that the checks ran at all).
static PROBED_POLLS: AtomicU64 = AtomicU64::new(0);

/// Every place a tokio runtime context or a `tokio-*` thread was seen.
static SEEN_TOKIO: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

fn seen_tokio(what: String) {
    SEEN_TOKIO
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .insert(what);
}

/// Records a tokio runtime context on the current thread, if any.
fn check_no_tokio_context(where_: &str) {
    if tokio::runtime::Handle::try_current().is_ok() {
        let thread = std::thread::current();
        seen_tokio(format!(
            "a tokio runtime context {where_} on thread {:?}",
            thread.name().unwrap_or("<unnamed>")
        ));
    }
}

/// Fails the case if tokio was ever seen.
fn assert_never_tokio(when: &str) {
    // One fresh sample, so a thread that appeared since the last tick is not missed.
    sample_threads();
    let seen = SEEN_TOKIO
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    assert!(seen.is_empty(), "tokio seen ({when}): {seen:?}");
}

/// A future that checks for a tokio runtime context on every poll.
struct Probe<F: ?Sized>(Pin<Box<F>>);

impl<F: Future + ?Sized> Future for Probe<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        PROBED_POLLS.fetch_add(1, Ordering::Relaxed);
        check_no_tokio_context("inside a driver task");
        self.0.as_mut().poll(cx)
    }
}

/// smol's runtime with every spawned future wrapped in a [`Probe`].
#[derive(Debug, Clone, Copy, Default)]
struct Probed;

impl Runtime for Probed {
    type Task = SmolTask;

    fn spawn(&self, future: BoxFuture<()>) -> SmolTask {
        SmolRuntime.spawn(Box::pin(Probe(future)))
    }

    fn sleep_until(&self, deadline: Instant) -> BoxFuture<()> {
        check_no_tokio_context("when a timer is set");
        SmolRuntime.sleep_until(deadline)
    }

    fn now(&self) -> Instant {
        SmolRuntime.now()
    }
}

/// The names of this process's threads that start with `tokio-` (Linux: `comm` holds the
/// first 15 bytes of the name, enough for tokio's `tokio-runtime-worker`).
fn tokio_threads() -> Vec<String> {
    threads_named("tokio-")
}

/// The names of this process's threads that start with `prefix`.
fn threads_named(prefix: &str) -> Vec<String> {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    tasks
        .filter_map(Result::ok)
        .filter_map(|task| std::fs::read_to_string(task.path().join("comm")).ok())
        .map(|name| name.trim_end().to_owned())
        .filter(|name| name.starts_with(prefix))
        .collect()
}

fn sample_threads() {
    for name in tokio_threads() {
        seen_tokio(format!("a thread named {name:?}"));
    }
}

/// Starts (once) a thread that samples the thread list every 20 ms for the rest of the
/// run (bounded at four hours, far beyond any run).
fn start_sampler() {
    static STARTED: Once = Once::new();
    STARTED.call_once(|| {
        assert!(
            Path::new("/proc/self/task").is_dir(),
            "the tokio-thread check needs /proc (Linux)"
        );
        let _ = std::thread::Builder::new()
            .name("no-tokio-sampler".into())
            .spawn(|| {
                let tick = Duration::from_millis(20);
                for _ in 0..(4 * 3600 * 1000 / 20) {
                    sample_threads();
                    std::thread::sleep(tick);
                }
            });
    });
}

/// The head-on proof: a controller on the real apiserver whose reconcile checks
/// `Handle::try_current()` itself, on a runtime whose every driver task checks it too.
///
/// Like the suite's cases it holds the environment's `steady` guard (a std `RwLock`)
/// across its awaits on purpose: the case owns its thread (`block_on`), and the guard
/// keeps restarts and compactions out of its watch.
#[test]
#[allow(clippy::await_holding_lock)]
fn no_tokio_runtime_in_reconcile_the_driver_or_any_thread() {
    reconcile_e2e::run_case::<Smol, _, _>(
        "no_tokio_runtime_in_reconcile_the_driver_or_any_thread",
        |case| async move {
            let _steady = case.env.steady();
            let ns = case.namespace();
            case.api()
                .create_pod(
                    &ns,
                    &pod_manifest("only", &[("app", "e2e"), ("cell", "c0")]),
                )
                .unwrap_or_else(|e| panic!("create pod in {ns}: {e}"));
            let transport =
                SmolTransport::from_kubeconfig(case.env.kubeconfig_path(ApiServer::Cached))
                    .await
                    .unwrap_or_else(|e| panic!("connect: {e}"));
            let polls_before = PROBED_POLLS.load(Ordering::Relaxed);

            // (tokio context seen, thread name) per reconcile.
            type Seen = Mutex<Vec<(bool, String)>>;
            let calls: Arc<Seen> = Arc::default();
            let source =
                Source::<PodView, SmolTransport>::pods(transport, Some(&ns)).labels("app=e2e");
            let controller =
                engine::Controller::with_runtime(Probed, source, KeyMap::by_label("cell"))
                    .concurrency(2);
            let running = timeout(
                &Probed,
                WAIT,
                controller.start(
                    |request: Reconcile<PodView, String>, calls: Arc<Seen>| async move {
                        let (_cell, _members) = request.into_parts();
                        let tokio = tokio::runtime::Handle::try_current().is_ok();
                        let thread = std::thread::current().name().unwrap_or("").to_owned();
                        calls
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .push((tokio, thread));
                        Ok::<_, std::convert::Infallible>(Action::await_change())
                    },
                    default_error_policy,
                    Arc::clone(&calls),
                ),
            )
            .await
            .unwrap_or_else(|| panic!("no sync within {}s", WAIT.as_secs()))
            .unwrap_or_else(|e| panic!("the controller did not start: {e}"));
            let reconciled = Arc::clone(&calls);
            case.eventually("a reconcile of cell c0", move || {
                let n = reconciled
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .len();
                if n > 0 {
                    Ok(())
                } else {
                    Err("no reconcile yet".into())
                }
            })
            .await;
            timeout(&Probed, WAIT, running.shutdown())
                .await
                .unwrap_or_else(|| panic!("the controller did not stop within {}s", WAIT.as_secs()))
                .unwrap_or_else(|e| panic!("the controller ended with {e}"));

            let calls = calls
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone();
            for (tokio, thread) in &calls {
                assert!(
                    !tokio,
                    "Handle::try_current() succeeded inside reconcile (thread {thread:?})"
                );
                assert!(
                    !thread.starts_with("tokio-"),
                    "reconcile ran on a tokio thread {thread:?}"
                );
            }
            assert!(
                PROBED_POLLS.load(Ordering::Relaxed) > polls_before,
                "the driver's tasks were never polled under the probe"
            );
            assert!(
                tokio::runtime::Handle::try_current().is_err(),
                "the case body itself runs in a tokio runtime context"
            );
            // The scan is not vacuous: it sees the sampler's own thread, and smol's.
            assert!(
                !threads_named("no-tokio-sampl").is_empty(),
                "the thread scan does not see the sampler thread"
            );
            assert!(
                !threads_named("smol-").is_empty(),
                "the thread scan does not see smol's executor thread"
            );
            assert_never_tokio("in the head-on case");
        },
    );
}
