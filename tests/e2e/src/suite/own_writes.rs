//! Read your own writes and the reconcile timeout on the real apiserver (issue 28).
//!
//! The hold: a cell controller whose reconcile annotates its pod through `ApiClient` (the
//! write is recorded by itself) and asks to run again at once. Its source's WATCH goes
//! through a [`Gated`] transport that passes the response head but holds every chunk of the
//! body until the case opens the gate, so the source's cursor cannot reach the write before
//! the rerun comes due: the rerun must be held, and must run, seeing its own write, once the
//! echo arrives. Without the hold the rerun would read the stale pod and annotate it again.
//!
//! The timeout: a reconcile that hangs past the controller's `reconcile_timeout`, and one
//! that shortens its own deadline (`Reconcile::set_timeout`) and hangs past it, are
//! cancelled, counted in `controller_runtime_reconcile_timeouts_total`, and retried through
//! the backoff as failures; the retries succeed.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use futures_lite::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube_core::params::{Patch, PatchParams};
use reconcile_core::pod::PodView;
use reconcile_core::{Command, Input, KeyMap, SourceId};
use reconcile_engine::runtime::timeout;
use reconcile_engine::{
    Action, ApiClient, BodyStream, BoxFuture, Controller, Endpoints, Reconcile, Runtime, Source,
    Tape, TraceRecorder, Transport, TransportError, default_error_policy,
};
use reconcile_k8s_env::{ApiServer, pod_manifest};
use reconcile_trace::{Recorded, header_for};

use crate::harness::{BACKOFF, CELL, Case, DriverUnderTest, WAIT};
use crate::scrape::scrape;

/// The annotation the hold case's reconcile writes.
pub(crate) const SEEN: &str = "e2e.reconcile-loop.dev/seen";

/// A pod on no node: kwok leaves it alone, so nothing but the case changes it and every
/// wake of its cell is the case's own.
#[must_use]
pub fn quiet_pod(name: &str, labels: &[(&str, &str)]) -> serde_json::Value {
    let mut pod = pod_manifest(name, labels);
    if let Some(spec) = pod["spec"].as_object_mut() {
        spec.remove("nodeName");
    }
    pod
}

/// A gate the case opens once; everything waiting on it goes on then.
#[derive(Clone, Default)]
pub struct Gate(Arc<GateState>);

#[derive(Default)]
struct GateState {
    open: AtomicBool,
    waiting: Mutex<Vec<Waker>>,
}

impl Gate {
    /// Opens the gate for good, waking every waiter.
    pub fn open(&self) {
        self.0.open.store(true, Ordering::SeqCst);
        let waiting = std::mem::take(
            &mut *self
                .0
                .waiting
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        for waker in waiting {
            waker.wake();
        }
    }

    /// Resolves once the gate is open.
    pub(crate) fn opened(&self) -> Opened {
        Opened(self.clone())
    }
}

/// The future of [`Gate::opened`].
pub(crate) struct Opened(Gate);

impl Future for Opened {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let state = &self.0.0;
        if state.open.load(Ordering::SeqCst) {
            return Poll::Ready(());
        }
        state
            .waiting
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(cx.waker().clone());
        // Opened between the check and the push: do not sleep on a wake already sent.
        if state.open.load(Ordering::SeqCst) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

/// A transport whose WATCH bodies deliver nothing until its [`Gate`] opens (the response
/// head, and every other request, pass at once).
#[derive(Clone)]
pub struct Gated<T> {
    pub(crate) inner: T,
    pub(crate) gate: Gate,
}

impl<T: Transport> Transport for Gated<T> {
    fn send(
        &self,
        request: http::Request<Vec<u8>>,
    ) -> BoxFuture<Result<http::Response<BodyStream>, TransportError>> {
        let watch = crate::harness::is_watch(&request);
        let sent = self.inner.send(request);
        if !watch {
            return sent;
        }
        let gate = self.gate.clone();
        Box::pin(async move {
            let response = sent.await?;
            let (head, body) = response.into_parts();
            let body: BodyStream = Box::pin(futures_lite::stream::unfold(
                (body, gate),
                |(mut body, gate)| async move {
                    gate.opened().await;
                    let chunk = body.next().await?;
                    Some((chunk, (body, gate)))
                },
            ));
            Ok(http::Response::from_parts(head, body))
        })
    }
}

/// What the hold case's reconciles saw and did.
#[derive(Default)]
struct Runs {
    /// Per run: the annotation p1 carried in the cache the run was handed.
    seen: Mutex<Vec<Option<String>>>,
    /// Writes made, and the resourceVersion of the last answer.
    patches: AtomicUsize,
    answered: Mutex<Option<String>>,
}

/// The reconcile writes, and asks to run again at once; that rerun is held until the
/// source's cursor reaches the write, then runs seeing it. The case's trace replays with
/// the same hold.
pub async fn a_rerun_after_a_write_is_held_until_the_watch_shows_the_write<D: DriverUnderTest>(
    case: Case<D>,
) {
    let _steady = case.env.steady();
    let ns = case.namespace();
    case.api()
        .create_pod(&ns, &quiet_pod("p1", &[("app", "e2e"), (CELL, "a")]))
        .unwrap_or_else(|e| panic!("{}: create pod: {e}", case.name));
    let inner = D::connect(case.env.kubeconfig_path(ApiServer::Cached))
        .await
        .unwrap_or_else(|e| panic!("{}: cannot connect: {e}", case.name));
    let gate = Gate::default();
    let transport = Gated {
        inner,
        gate: gate.clone(),
    };
    let source = Source::<PodView, Gated<D::Transport>>::pods(transport.clone(), Some(&ns))
        .labels("app=e2e")
        .timeout(60);
    // The wait is the case's own limit: however slow the machine, the hold ends by the
    // echo, not by the wait running out.
    let controller = Controller::with_runtime(D::runtime(), source, KeyMap::by_label(CELL))
        .resync(None)
        .backoff(BACKOFF.0, BACKOFF.1)
        .read_own_writes(Some(WAIT * 2));
    let header = header_for(
        &format!("e2e {} {}", D::NAME, case.name),
        controller.config(),
    );
    let trace_path = crate::trace::path(D::NAME, case.name, 0);
    let mut recorder = TraceRecorder::new(&trace_path, header);
    let tape: Tape<PodView, String> = recorder.tape();
    let controller = controller.recorder(recorder);
    let handle = controller.handle();
    let runs: Arc<Runs> = Arc::default();
    type Ctx<T> = (Gated<T>, String, Arc<Runs>);
    let ctx: Arc<Ctx<D::Transport>> = Arc::new((transport, ns.clone(), Arc::clone(&runs)));
    let running = timeout(
        &case.runtime,
        WAIT,
        controller.start(
            |req: Reconcile<PodView, String>, ctx: Arc<Ctx<D::Transport>>| async move {
                let (transport, ns, runs) = (&ctx.0, &ctx.1, &ctx.2);
                let seen = req
                    .members()
                    .iter()
                    .find(|p| p.metadata.name.as_deref() == Some("p1"))
                    .and_then(|p| p.metadata.annotations.get(SEEN).map(|v| v.to_string()));
                runs.seen.lock().unwrap().push(seen.clone());
                if seen.is_some() {
                    return Ok(Action::await_change());
                }
                let pods: ApiClient<Pod, Gated<D::Transport>> =
                    ApiClient::namespaced(transport.clone(), ns);
                let patch = Patch::Merge(serde_json::json!({
                    "metadata": {"annotations": {SEEN: "1"}}
                }));
                let answer = pods
                    .patch("p1", &PatchParams::default(), &patch)
                    .await
                    .map_err(|e| e.to_string())?;
                runs.patches.fetch_add(1, Ordering::SeqCst);
                *runs.answered.lock().unwrap() = answer.metadata.resource_version;
                // Run again at once: before the watch can have shown the write.
                Ok::<_, String>(Action::requeue(Duration::from_millis(1)))
            },
            default_error_policy,
            ctx,
        ),
    )
    .await
    .unwrap_or_else(|| panic!("{}: no sync within {WAIT:?}", case.name))
    .unwrap_or_else(|e| panic!("{}: the controller did not start: {e}", case.name));

    let stats = handle.clone();
    case.eventually("the rerun held for the write", || {
        let s = stats.stats();
        if s.own_write_holds >= 1 {
            Ok(())
        } else {
            Err(format!("{s:?}"))
        }
    })
    .await;
    // The gate is shut, so the cursor is still the LIST's: nothing can have released it.
    assert_eq!(
        runs.seen.lock().unwrap().as_slice(),
        [None],
        "{}: held, the rerun has not run",
        case.name
    );
    let m = handle.metrics();
    assert_eq!(m.own_write_holds_total, 1, "{}: {m:?}", case.name);
    assert_eq!(m.own_writes_waiting, 1, "{}: {m:?}", case.name);
    let answered = runs
        .answered
        .lock()
        .unwrap()
        .clone()
        .unwrap_or_else(|| panic!("{}: the patch answered no resourceVersion", case.name));
    let cursor: u64 = handle
        .cursor()
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("{}: cursor {:?}", case.name, handle.cursor()));
    let wrote: u64 = answered.parse().expect("a numeric resourceVersion");
    assert!(
        cursor < wrote,
        "{}: cursor {cursor} has not reached the write {wrote}",
        case.name
    );
    // The outcome went to the core with the write the apiserver answered.
    let reported: Vec<Vec<(SourceId, String)>> = tape
        .all()
        .into_iter()
        .filter_map(|(_, r)| match r {
            Recorded::Input(Input::ReconciledWrote { writes, .. }) => Some(
                writes
                    .into_iter()
                    .map(|w| (w.source, w.resource_version))
                    .collect(),
            ),
            _ => None,
        })
        .collect();
    assert_eq!(
        reported,
        [vec![(SourceId::PRIMARY, answered.clone())]],
        "{}",
        case.name
    );

    gate.open();
    let seen = Arc::clone(&runs);
    case.eventually("the released rerun", || {
        let s = seen.seen.lock().unwrap().clone();
        if s.len() >= 2 {
            Ok(())
        } else {
            Err(format!("runs saw {s:?}"))
        }
    })
    .await;
    let seen = runs.seen.lock().unwrap().clone();
    assert!(
        seen[1..].iter().all(|s| s.as_deref() == Some("1")),
        "{}: every run after the write saw it: {seen:?}",
        case.name
    );
    assert_eq!(
        runs.patches.load(Ordering::SeqCst),
        1,
        "{}: one write, no duplicate from a stale cache",
        case.name
    );
    let m = handle.metrics();
    assert_eq!(
        (
            m.own_write_holds_total,
            m.own_write_timeouts_total,
            m.own_writes_waiting
        ),
        (1, 0, 0),
        "{}: released by the echo, not by the wait",
        case.name
    );
    assert_eq!(m.own_write_hold_seconds.count(), 1, "{}", case.name);

    timeout(&case.runtime, WAIT, running.shutdown())
        .await
        .unwrap_or_else(|| panic!("{}: no stop", case.name))
        .unwrap_or_else(|e| panic!("{}: the controller ended with {e}", case.name));
    // The recorded run replays with the same hold.
    let replayed = crate::trace::replay(&trace_path)
        .unwrap_or_else(|e| panic!("{}: recorded trace: {e}", case.name));
    let live = handle.stats();
    let pick =
        |s: reconcile_core::Stats| (s.own_write_holds, s.own_write_timeouts, s.frames, s.lists);
    assert_eq!(
        pick(replayed.stats),
        pick(live),
        "{}: the replay of {} holds otherwise than the live run",
        case.name,
        trace_path.display()
    );
    assert_eq!(replayed.cursor, handle.cursor(), "{}", case.name);
}

/// What the timeout case's reconciles did.
#[derive(Default)]
struct Attempts {
    /// (cell, attempt) of every run that started.
    started: Vec<(String, u32)>,
    /// Cells whose run returned.
    finished: Vec<String>,
}

/// `a` hangs past the controller's 1 s deadline; `b` sets its own 300 ms one and hangs past
/// it. Both are cancelled, counted, and retried as failures (attempt 2), and the retries
/// succeed.
pub async fn a_reconcile_past_its_timeout_is_cancelled_counted_and_retried<D: DriverUnderTest>(
    case: Case<D>,
) {
    let _steady = case.env.steady();
    let ns = case.namespace();
    for (name, cell) in [("pa", "a"), ("pb", "b")] {
        case.api()
            .create_pod(&ns, &quiet_pod(name, &[("app", "e2e"), (CELL, cell)]))
            .unwrap_or_else(|e| panic!("{}: create pod: {e}", case.name));
    }
    let transport = D::connect(case.env.kubeconfig_path(ApiServer::Cached))
        .await
        .unwrap_or_else(|e| panic!("{}: cannot connect: {e}", case.name));
    let source = Source::<PodView, D::Transport>::pods(transport, Some(&ns)).labels("app=e2e");
    let tape: Tape<PodView, String> = Tape::default();
    let controller = Controller::with_runtime(D::runtime(), source, KeyMap::by_label(CELL))
        .concurrency(2)
        .resync(None)
        .backoff(BACKOFF.0, BACKOFF.1)
        .reconcile_timeout(Some(Duration::from_secs(1)))
        .recorder(tape.clone());
    let handle = controller.handle();
    let attempts: Arc<Mutex<Attempts>> = Arc::default();
    let runtime = case.runtime.clone();
    let running = timeout(
        &case.runtime,
        WAIT,
        controller.start(
            move |req: Reconcile<PodView, String>, attempts: Arc<Mutex<Attempts>>| {
                let runtime = runtime.clone();
                async move {
                    let cell = req.parent().clone();
                    let attempt = req.attempt();
                    attempts
                        .lock()
                        .unwrap()
                        .started
                        .push((cell.clone(), attempt));
                    if attempt == 1 {
                        if cell == "b" {
                            req.set_timeout(Some(Duration::from_millis(300))).await;
                        }
                        // Hangs (an hour): only the deadline ends it.
                        runtime
                            .sleep_until(runtime.now() + Duration::from_secs(3600))
                            .await;
                    }
                    attempts.lock().unwrap().finished.push(cell);
                    Ok::<_, std::convert::Infallible>(Action::await_change())
                }
            },
            default_error_policy,
            Arc::clone(&attempts),
        ),
    )
    .await
    .unwrap_or_else(|| panic!("{}: no sync within {WAIT:?}", case.name))
    .unwrap_or_else(|e| panic!("{}: the controller did not start: {e}", case.name));

    let seen = Arc::clone(&attempts);
    case.eventually("both retries finished", || {
        let a = seen.lock().unwrap();
        if a.finished.len() >= 2 {
            Ok(())
        } else {
            Err(format!(
                "started {:?}, finished {:?}",
                a.started, a.finished
            ))
        }
    })
    .await;
    {
        let a = attempts.lock().unwrap();
        let mut started = a.started.clone();
        started.sort();
        assert_eq!(
            started,
            [
                ("a".to_owned(), 1),
                ("a".to_owned(), 2),
                ("b".to_owned(), 1),
                ("b".to_owned(), 2)
            ],
            "{}: each cell timed out once and was retried as a failure",
            case.name
        );
        let mut finished = a.finished.clone();
        finished.sort();
        assert_eq!(
            finished,
            ["a", "b"],
            "{}: only the retries returned",
            case.name
        );
    }
    let m = handle.metrics();
    assert_eq!(m.reconcile_timeouts_total, 2, "{}: {m:?}", case.name);
    assert_eq!(m.reconcile_errors_total, 2, "{}: {m:?}", case.name);
    let cancelled = tape
        .all()
        .iter()
        .filter(|(_, r)| matches!(r, Recorded::Command(Command::CancelReconcile { .. })))
        .count();
    assert_eq!(cancelled, 2, "{}: both hung runs were cancelled", case.name);
    let own_deadline = tape
        .all()
        .iter()
        .filter(|(_, r)| {
            matches!(
                r,
                Recorded::Input(Input::ReconcileTimeout {
                    timeout: Some(t),
                    ..
                }) if *t == Duration::from_millis(300)
            )
        })
        .count();
    assert_eq!(own_deadline, 1, "{}: b set its own deadline", case.name);

    // As Prometheus reads it, under controller-runtime's name.
    let (addr, server) = D::serve(Endpoints::new().controller(&handle))
        .await
        .unwrap_or_else(|e| panic!("{}: serve: {e}", case.name));
    let scraped = scrape(addr);
    assert_eq!(
        scraped.value(
            "controller_runtime_reconcile_timeouts_total",
            &[("controller", "pods")]
        ),
        Some(2.0),
        "{}:\n{}",
        case.name,
        scraped.body
    );
    assert_eq!(
        scraped.value(
            "controller_runtime_reconcile_total",
            &[("controller", "pods"), ("result", "error")]
        ),
        Some(2.0),
        "{}:\n{}",
        case.name,
        scraped.body
    );
    drop(server);
    timeout(&case.runtime, WAIT, running.shutdown())
        .await
        .unwrap_or_else(|| panic!("{}: no stop", case.name))
        .unwrap_or_else(|e| panic!("{}: the controller ended with {e}", case.name));
}
