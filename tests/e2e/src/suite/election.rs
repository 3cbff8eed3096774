//! Leader election on the real apiserver: two cell controllers over the same pods, each
//! with its own identity, electing one leader on a `coordination.k8s.io/v1` Lease.
//!
//! Durations are short (lease 4 s, renew deadline 3 s, retry 0.5 s) so failovers fit in a
//! CI run; their ratios are client-go's. A candidate is cut off by a transport that refuses
//! every new request once the case says so (its open watch keeps streaming, so it still sees
//! changes it must not act on). What each controller dispatched is read off its in-memory
//! tape, against the term its own Lease writes gave it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use reconcile_core::pod::PodView;
use reconcile_core::{Command, ElectionConfig, Input, KeyMap, LeaseRequest, LeaseResponse};
use reconcile_engine::runtime::timeout;
use reconcile_engine::{
    BodyStream, BoxFuture, Controller, Handle, Limits, Running, Source, Tape, Transport,
    TransportError, default_error_policy,
};
use reconcile_k8s_env::pod_manifest;
use reconcile_trace::Recorded;
use serde_json::Value;

use crate::harness::{CELL, Case, DriverUnderTest, WAIT};
use crate::observe::Observed;

const LEASE: &str = "e2e-leader";
const LEASE_DURATION: Duration = Duration::from_secs(4);
const RENEW_DEADLINE: Duration = Duration::from_secs(3);
const RETRY_PERIOD: Duration = Duration::from_millis(500);

/// A transport the case can cut: every request sent after its `cut` flag is set fails at once.
#[derive(Clone)]
pub struct Cuttable<T> {
    inner: T,
    cut: Arc<AtomicBool>,
}

impl<T> Cuttable<T> {
    /// `inner`, refusing every request sent once `cut` is set.
    pub fn new(inner: T, cut: Arc<AtomicBool>) -> Self {
        Cuttable { inner, cut }
    }
}

impl<T: Transport> Transport for Cuttable<T> {
    fn send(
        &self,
        request: http::Request<Vec<u8>>,
    ) -> BoxFuture<Result<http::Response<BodyStream>, TransportError>> {
        if self.cut.load(Ordering::SeqCst) {
            return Box::pin(async { Err(TransportError("connection cut by the case".into())) });
        }
        self.inner.send(request)
    }
}

/// One candidate: a cell controller with leader election, its tape and what it reconciled.
struct Candidate<D: DriverUnderTest> {
    identity: &'static str,
    running: Option<Running<PodView, String, D::Runtime>>,
    handle: Handle<PodView, String>,
    tape: Tape<PodView, String>,
    observed: Observed,
    cut: Arc<AtomicBool>,
}

impl<D: DriverUnderTest> Candidate<D> {
    async fn start(case: &Case<D>, ns: &str, identity: &'static str) -> Self {
        let inner = D::connect(
            case.env
                .kubeconfig_path(reconcile_k8s_env::ApiServer::Cached),
        )
        .await
        .unwrap_or_else(|e| panic!("{}: cannot connect: {e}", case.name));
        let cut = Arc::new(AtomicBool::new(false));
        let transport = Cuttable {
            inner,
            cut: Arc::clone(&cut),
        };
        let source = Source::<PodView, Cuttable<D::Transport>>::pods(transport, Some(ns))
            .labels("app=e2e")
            .timeout(60);
        let mut election = ElectionConfig::new(ns, LEASE, identity);
        election.lease_duration = LEASE_DURATION;
        election.renew_deadline = RENEW_DEADLINE;
        election.retry_period = RETRY_PERIOD;
        let tape: Tape<PodView, String> = Tape::default();
        let controller = Controller::with_runtime(D::runtime(), source, KeyMap::by_label(CELL))
            .retry_delay(Duration::from_millis(200))
            .resync(None)
            .limits(Limits {
                lease_request: Duration::from_secs(2),
                ..Limits::default()
            })
            .leader_election_with(election)
            .recorder(tape.clone());
        let handle = controller.handle();
        let observed = Observed::default();
        let sink = observed.clone();
        let started = timeout(
            &case.runtime,
            WAIT,
            controller.start(
                crate::harness::record_call,
                default_error_policy,
                Arc::new(sink),
            ),
        )
        .await;
        let running = match started {
            Some(Ok(running)) => running,
            Some(Err(e)) => panic!("{}: {identity} did not start: {e}", case.name),
            None => panic!("{}: {identity} did not sync within {WAIT:?}", case.name),
        };
        Candidate {
            identity,
            running: Some(running),
            handle,
            tape,
            observed,
            cut,
        }
    }

    fn leads(&self) -> bool {
        self.handle.leadership().is_some_and(|l| l.leading)
    }

    async fn shutdown(&mut self, case: &Case<D>) {
        if let Some(running) = self.running.take() {
            let result = timeout(&case.runtime, WAIT, running.shutdown())
                .await
                .unwrap_or_else(|| panic!("{}: {} did not stop", case.name, self.identity));
            if let Err(e) = result {
                panic!("{}: {} ended with {e}", case.name, self.identity);
            }
        }
    }

    /// The end of each term, on this controller's clock: the send of every successful
    /// write of itself as holder, plus the renew deadline. And every dispatch's instant.
    fn terms_and_dispatches(&self) -> (Vec<reconcile_core::Instant>, Vec<reconcile_core::Instant>) {
        let mut sent = std::collections::BTreeMap::new();
        let mut ends = Vec::new();
        let mut dispatches = Vec::new();
        for (at, recorded) in self.tape.all() {
            match recorded {
                Recorded::Command(Command::Lease { req, request, .. }) => {
                    let ours = match &request {
                        LeaseRequest::Create(spec) | LeaseRequest::Update { spec, .. } => {
                            spec.holder == self.identity
                        }
                        LeaseRequest::Get | LeaseRequest::List { .. } => false,
                    };
                    if ours {
                        sent.insert(req, at);
                    }
                }
                Recorded::Input(Input::Lease {
                    req,
                    response: LeaseResponse::Response { status, .. },
                }) if status < 300 => {
                    if let Some(at) = sent.remove(&req) {
                        ends.push(at + RENEW_DEADLINE);
                    }
                }
                Recorded::Command(Command::Reconcile { .. }) => dispatches.push(at),
                _ => {}
            }
        }
        (ends, dispatches)
    }

    /// No dispatch after the end of the last term this controller had begun by then.
    fn dispatched_only_in_term(&self, case: &Case<D>) {
        let (ends, dispatches) = self.terms_and_dispatches();
        for at in dispatches {
            let covered = ends.iter().any(|end| *end > at);
            assert!(
                covered,
                "{}: {} dispatched at {at} after its last term ended ({ends:?})",
                case.name, self.identity
            );
        }
    }
}

impl<D: DriverUnderTest> Drop for Candidate<D> {
    fn drop(&mut self) {
        if self.running.is_some() {
            self.handle.stop();
        }
    }
}

fn pod(name: &str, cell: &str) -> Value {
    pod_manifest(name, &[("app", "e2e"), ("cell", cell)])
}

fn lease<D: DriverUnderTest>(case: &Case<D>, ns: &str) -> Value {
    case.api()
        .get(&format!(
            "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/{LEASE}"
        ))
        .unwrap_or_else(|e| panic!("{}: get lease: {e}", case.name))
}

/// Waits until `who` has reconciled `cell`.
async fn wait_reconciled<D: DriverUnderTest>(case: &Case<D>, who: &Candidate<D>, cell: &str) {
    let observed = who.observed.clone();
    let what = format!("{} reconciles cell {cell}", who.identity);
    case.eventually(&what, || {
        observed
            .latest(cell)
            .map(|_| ())
            .ok_or_else(|| "not yet".to_owned())
    })
    .await;
}

/// Waits until `who` sees `holder` on the Lease (and, when `standing_by`, does not lead).
async fn wait_holder<D: DriverUnderTest>(
    case: &Case<D>,
    who: &Candidate<D>,
    holder: &str,
    standing_by: bool,
) {
    let handle = who.handle.clone();
    let what = format!("{} sees {holder} as the holder", who.identity);
    case.eventually(&what, || match handle.leadership() {
        Some(l) if l.holder.as_deref() == Some(holder) && !(standing_by && l.leading) => Ok(()),
        other => Err(format!("{other:?}")),
    })
    .await;
}

/// Waits until `who` leads; returns how long that took.
async fn wait_leading<D: DriverUnderTest>(
    case: &Case<D>,
    who: &Candidate<D>,
    limit: Duration,
) -> Duration {
    let since = Instant::now();
    crate::harness::eventually(
        &case.runtime,
        limit,
        &format!("{} leads", who.identity),
        || {
            if who.leads() {
                Ok(())
            } else {
                Err(format!("{:?}", who.handle.leadership()))
            }
        },
    )
    .await;
    since.elapsed()
}

/// The first candidate leads and reconciles, the second stands by with a warm cache and
/// reconciles nothing; stopped gracefully, the leader releases the Lease and the standby
/// leads within about a retry period, and reconciles what the leader had.
pub async fn a_standby_takes_over_at_once_when_the_leader_stops<D: DriverUnderTest>(case: Case<D>) {
    let _steady = case.env.steady();
    let ns = case.namespace();
    case.api()
        .create_pod(&ns, &pod("p1", "a"))
        .unwrap_or_else(|e| panic!("create pod: {e}"));
    let mut a = Candidate::start(&case, &ns, "e2e-a").await;
    wait_leading(&case, &a, WAIT).await;
    let mut b = Candidate::start(&case, &ns, "e2e-b").await;
    wait_reconciled(&case, &a, "a").await;
    wait_holder(&case, &b, "e2e-a", true).await;
    assert!(b.handle.is_synced(), "the standby's cache is warm");
    assert!(
        b.observed.all().is_empty(),
        "the standby reconciled nothing"
    );

    let stopped = Instant::now();
    a.shutdown(&case).await;
    let released = stopped.elapsed();
    let took = wait_leading(&case, &b, WAIT).await;
    eprintln!(
        "{} [{}]: graceful failover: leader stopped in {:.3}s, standby leading {:.3}s after the stop returned (retry period {:.1}s)",
        case.name,
        D::NAME,
        released.as_secs_f64(),
        took.as_secs_f64(),
        RETRY_PERIOD.as_secs_f64()
    );
    assert!(
        took < RETRY_PERIOD + Duration::from_secs(2),
        "{}: a released Lease took {took:?} to change hands",
        case.name
    );
    wait_reconciled(&case, &b, "a").await;
    // The Lease as `kubectl get lease -o yaml` shows it.
    let lease = lease(&case, &ns);
    let spec = &lease["spec"];
    assert_eq!(spec["holderIdentity"], "e2e-b", "{lease}");
    assert_eq!(spec["leaseDurationSeconds"], 4, "{lease}");
    assert_eq!(spec["leaseTransitions"], 1, "{lease}");
    for time in ["acquireTime", "renewTime"] {
        let value = spec[time].as_str().unwrap_or_default();
        assert!(
            value.ends_with('Z') && value.contains('.'),
            "{time}: {value:?} is not a MicroTime ({lease})"
        );
    }
    a.dispatched_only_in_term(&case);
    b.dispatched_only_in_term(&case);
    b.shutdown(&case).await;
}

/// The leader is cut off from the apiserver: it steps down at its renew deadline, and the
/// standby leads within lease duration plus a retry period of the leader's last renewal.
/// A pod created afterwards reaches the old leader's cache, yet only the new leader
/// reconciles it; the tapes show the old leader dispatched nothing after its term.
pub async fn a_standby_takes_over_within_the_lease_when_the_leader_is_cut_off<
    D: DriverUnderTest,
>(
    case: Case<D>,
) {
    let _steady = case.env.steady();
    let ns = case.namespace();
    case.api()
        .create_pod(&ns, &pod("p1", "a"))
        .unwrap_or_else(|e| panic!("create pod: {e}"));
    let mut a = Candidate::start(&case, &ns, "e2e-a").await;
    wait_leading(&case, &a, WAIT).await;
    let mut b = Candidate::start(&case, &ns, "e2e-b").await;
    wait_holder(&case, &b, "e2e-a", false).await;

    a.cut.store(true, Ordering::SeqCst);
    let took = wait_leading(&case, &b, WAIT).await;
    let stepped_down = !a.leads();
    eprintln!(
        "{} [{}]: failover after a cut: standby leading {:.3}s after the cut (lease {:.0}s + retry {:.1}s)",
        case.name,
        D::NAME,
        took.as_secs_f64(),
        LEASE_DURATION.as_secs_f64(),
        RETRY_PERIOD.as_secs_f64()
    );
    assert!(
        stepped_down,
        "{}: the cut-off leader still leads",
        case.name
    );
    // The last renewal before the cut was at most a retry period earlier; the standby reads
    // every retry period and its request may take up to a second on a busy machine.
    assert!(
        took <= LEASE_DURATION + RETRY_PERIOD + Duration::from_secs(2),
        "{}: took {took:?}",
        case.name
    );
    // A change both see: the old leader's watch is still open.
    case.api()
        .create_pod(&ns, &pod("p2", "b"))
        .unwrap_or_else(|e| panic!("create pod: {e}"));
    wait_reconciled(&case, &b, "b").await;
    let seen = a.handle.cache();
    case.eventually("a's cache holds p2", || {
        if seen
            .state()
            .iter()
            .any(|p| p.metadata.name.as_deref() == Some("p2"))
        {
            Ok(())
        } else {
            Err("not yet".into())
        }
    })
    .await;
    assert!(
        a.observed.latest("b").is_none(),
        "{}: the cut-off leader reconciled cell b",
        case.name
    );
    a.dispatched_only_in_term(&case);
    b.dispatched_only_in_term(&case);
    assert_eq!(lease(&case, &ns)["spec"]["holderIdentity"], "e2e-b");
    // Healed, the old leader stands by.
    a.cut.store(false, Ordering::SeqCst);
    wait_holder(&case, &a, "e2e-b", true).await;
    a.shutdown(&case).await;
    b.shutdown(&case).await;
}

// ---------------------------------------------------------------------------------------
// Warm standby against cold: a measurement, not a test (ignored; see `election_suite!`).
// ---------------------------------------------------------------------------------------

/// A transport for the measurement's replicas: cut like [`Cuttable`], and, for a cold
/// replica's source, sending nothing until its gate opens (when the replica leads), so its
/// LIST starts only after it won the Lease, as controller-runtime's caches do without
/// `EnableWarmup`.
#[derive(Clone)]
pub struct Staged<T> {
    inner: T,
    cut: Arc<AtomicBool>,
    gate: Option<crate::suite::own_writes::Gate>,
}

impl<T: Transport> Transport for Staged<T> {
    fn send(
        &self,
        request: http::Request<Vec<u8>>,
    ) -> BoxFuture<Result<http::Response<BodyStream>, TransportError>> {
        if self.cut.load(Ordering::SeqCst) {
            return Box::pin(async { Err(TransportError("connection cut by the case".into())) });
        }
        match &self.gate {
            None => self.inner.send(request),
            Some(gate) => {
                let (gate, inner) = (gate.clone(), self.inner.clone());
                Box::pin(async move {
                    gate.opened().await;
                    inner.send(request).await
                })
            }
        }
    }
}

/// One replica of the measurement: a controller with leader election over the pods, whose
/// reconcile notes the instant of its first call.
struct Replica<D: DriverUnderTest> {
    handle: Handle<PodView, String>,
    task: Option<<D::Runtime as reconcile_engine::Runtime>::Task>,
    watcher: Option<<D::Runtime as reconcile_engine::Runtime>::Task>,
    cut: Arc<AtomicBool>,
    first_reconcile: Arc<std::sync::OnceLock<Instant>>,
    /// When it was first seen leading (and so, a cold one, began to list).
    leading_at: Arc<std::sync::OnceLock<Instant>>,
}

/// How long a replica may take to sync 50 000 pods on a busy machine.
const SYNC_LIMIT: Duration = Duration::from_secs(600);

impl<D: DriverUnderTest> Replica<D> {
    async fn start(case: &Case<D>, ns: &str, lease: &str, identity: &str, cold: bool) -> Self {
        use reconcile_engine::Runtime as _;
        let inner = D::connect(
            case.env
                .kubeconfig_path(reconcile_k8s_env::ApiServer::Cached),
        )
        .await
        .unwrap_or_else(|e| panic!("{}: cannot connect: {e}", case.name));
        let cut = Arc::new(AtomicBool::new(false));
        let gate = cold.then(crate::suite::own_writes::Gate::default);
        let lease_transport = Staged {
            inner: inner.clone(),
            cut: Arc::clone(&cut),
            gate: None,
        };
        let transport = Staged {
            inner,
            cut: Arc::clone(&cut),
            gate: gate.clone(),
        };
        let source = Source::<PodView, Staged<D::Transport>>::pods(transport, Some(ns))
            .labels("app=e2e")
            .timeout(60);
        let mut election = ElectionConfig::new(ns, lease, identity);
        election.lease_duration = LEASE_DURATION;
        election.renew_deadline = RENEW_DEADLINE;
        election.retry_period = RETRY_PERIOD;
        let controller = Controller::with_runtime(D::runtime(), source, KeyMap::by_label(CELL))
            .resync(None)
            .limits(Limits {
                lease_request: Duration::from_secs(2),
                ..Limits::default()
            })
            .leader_election_with(election)
            .lease_transport(lease_transport);
        let handle = controller.handle();
        let first_reconcile: Arc<std::sync::OnceLock<Instant>> = Arc::default();
        let first = Arc::clone(&first_reconcile);
        let task = case.runtime.spawn(Box::pin(async move {
            let _ = controller
                .run(
                    |_req: reconcile_engine::Reconcile<PodView, String>,
                     first: Arc<std::sync::OnceLock<Instant>>| async move {
                        first.get_or_init(Instant::now);
                        Ok::<_, std::convert::Infallible>(reconcile_engine::Action::await_change())
                    },
                    default_error_policy,
                    first,
                )
                .await;
        }));
        // Notes when the replica is first seen leading (polled every millisecond), and
        // then lets a cold one's source start.
        let leading_at: Arc<std::sync::OnceLock<Instant>> = Arc::default();
        let watcher = {
            let (handle, leading_at, runtime) = (
                handle.clone(),
                Arc::clone(&leading_at),
                case.runtime.clone(),
            );
            case.runtime.spawn(Box::pin(async move {
                while !handle.is_stopped() {
                    // Not `is_leader()`, which also holds before the first election state.
                    if handle.leadership().is_some_and(|l| l.leading) {
                        leading_at.get_or_init(Instant::now);
                        if let Some(gate) = gate {
                            gate.open();
                        }
                        return;
                    }
                    runtime
                        .sleep_until(runtime.now() + Duration::from_millis(1))
                        .await;
                }
            }))
        };
        if !cold {
            timeout(&case.runtime, SYNC_LIMIT, handle.synced())
                .await
                .unwrap_or_else(|| panic!("{}: {identity} did not sync", case.name))
                .unwrap_or_else(|e| panic!("{}: {identity}: {e}", case.name));
        }
        Replica {
            handle,
            task: Some(task),
            watcher: Some(watcher),
            cut,
            first_reconcile,
            leading_at,
        }
    }

    async fn stop(&mut self, case: &Case<D>) {
        self.handle.stop();
        let _ = timeout(&case.runtime, WAIT, self.handle.stopped()).await;
        self.task.take();
        self.watcher.take();
    }
}

/// Pods named `p<i>` for `i` in `from..to`, ten to a cell, with no node (nothing but the
/// apiserver touches them), created by eight threads.
fn create_pods<D: DriverUnderTest>(case: &Case<D>, ns: &str, from: usize, to: usize) {
    let api = case.api();
    let threads = 8;
    std::thread::scope(|scope| {
        for t in 0..threads {
            scope.spawn(move || {
                for i in (from + t..to).step_by(threads) {
                    let cell = format!("c{}", i / 10);
                    let pod = crate::suite::own_writes::quiet_pod(
                        &format!("p{i}"),
                        &[("app", "e2e"), (CELL, &cell)],
                    );
                    api.create_pod(ns, &pod)
                        .unwrap_or_else(|e| panic!("create pod p{i}: {e}"));
                }
            });
        }
    });
}

/// How a leader was lost.
#[derive(Debug, Clone, Copy)]
enum Loss {
    /// Stopped gracefully: it releases the Lease.
    Stopped,
    /// Cut off from the apiserver (as a crash looks to the others): its Lease expires.
    Cut,
}

/// One failover: seconds from the loss to the new leader's first reconcile, and to when it
/// was first seen leading (when a cold standby begins to list).
async fn failover<D: DriverUnderTest>(
    case: &Case<D>,
    ns: &str,
    lease: &str,
    cold: bool,
    loss: Loss,
) -> (f64, Option<f64>) {
    let mut a = Replica::start(case, ns, lease, "leader", false).await;
    crate::harness::eventually(&case.runtime, SYNC_LIMIT, "the leader reconciles", || {
        a.first_reconcile
            .get()
            .map(|_| ())
            .ok_or_else(|| format!("{:?}", a.handle.leadership()))
    })
    .await;
    let mut b = Replica::start(case, ns, lease, "standby", cold).await;
    let standby = b.handle.clone();
    crate::harness::eventually(
        &case.runtime,
        WAIT,
        "the standby sees the leader",
        || match standby.leadership() {
            Some(l) if l.holder.as_deref() == Some("leader") && !l.leading => Ok(()),
            other => Err(format!("{other:?}")),
        },
    )
    .await;
    assert_eq!(
        b.handle.is_synced(),
        !cold,
        "{}: a warm standby has synced, a cold one has not listed",
        case.name
    );
    assert!(
        b.first_reconcile.get().is_none(),
        "{}: the standby reconciled",
        case.name
    );
    let lost = Instant::now();
    match loss {
        Loss::Stopped => a.stop(case).await,
        Loss::Cut => a.cut.store(true, Ordering::SeqCst),
    }
    let first = Arc::clone(&b.first_reconcile);
    let at = crate::harness::eventually(
        &case.runtime,
        SYNC_LIMIT,
        "the new leader's first reconcile",
        || first.get().copied().ok_or_else(|| "not yet".to_owned()),
    )
    .await;
    assert!(
        b.leading_at.get().is_none_or(|t| *t >= lost),
        "{}: the standby led before the loss",
        case.name
    );
    let leading = b
        .leading_at
        .get()
        .map(|t| t.saturating_duration_since(lost).as_secs_f64());
    a.stop(case).await;
    b.stop(case).await;
    ((at - lost).as_secs_f64(), leading)
}

/// Seconds from a leader's loss to the new leader's first reconcile, with a warm standby
/// (listing and watching all along, this runtime's behaviour) against a cold one (which
/// lists only once it leads, controller-runtime's without `EnableWarmup`), at each size of
/// `RECONCILE_FAILOVER_SIZES` (default `10000,50000` pods), `RECONCILE_FAILOVER_RUNS` runs
/// each (default 3; the median is reported), for a leader stopped gracefully and one cut
/// off. Lease 4 s, renew deadline 3 s, retry 0.5 s. Prints a Markdown table.
pub async fn failover_warm_against_cold_standby<D: DriverUnderTest>(case: Case<D>) {
    let _steady = case.env.steady();
    let ns = case.namespace();
    let sizes: Vec<usize> = std::env::var("RECONCILE_FAILOVER_SIZES")
        .unwrap_or_else(|_| "10000,50000".into())
        .split(',')
        .map(|s| s.trim().parse().expect("RECONCILE_FAILOVER_SIZES: numbers"))
        .collect();
    let runs: usize = std::env::var("RECONCILE_FAILOVER_RUNS")
        .ok()
        .map_or(3, |s| s.parse().expect("RECONCILE_FAILOVER_RUNS: a number"));
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let spread = |v: &[f64]| {
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = v.iter().copied().fold(0.0, f64::max);
        format!("{lo:.2} – {hi:.2}")
    };
    let mut rows = Vec::new();
    let mut created = 0;
    let mut n = 0;
    for size in sizes {
        let since = Instant::now();
        create_pods(&case, &ns, created, size);
        created = size;
        eprintln!(
            "{} [{}]: {size} pods in place ({:.0}s)",
            case.name,
            D::NAME,
            since.elapsed().as_secs_f64()
        );
        for loss in [Loss::Stopped, Loss::Cut] {
            for cold in [false, true] {
                let mut firsts = Vec::new();
                let mut leads = Vec::new();
                for _ in 0..runs {
                    n += 1;
                    let lease = format!("{LEASE}-{n}");
                    let (first, leading) = failover(&case, &ns, &lease, cold, loss).await;
                    eprintln!(
                        "{} [{}]: {size} pods, {loss:?}, {}: first reconcile {first:.3}s after the loss (leading {leading:?})",
                        case.name,
                        D::NAME,
                        if cold { "cold" } else { "warm" }
                    );
                    firsts.push(first);
                    leads.extend(leading);
                }
                let lead = if leads.is_empty() {
                    "—".to_owned()
                } else {
                    format!("{:.2}", median(leads.clone()))
                };
                // From leading to the first reconcile: a cold standby's LIST is in here.
                let after: Vec<f64> = firsts
                    .iter()
                    .zip(&leads)
                    .map(|(f, l)| (f - l).max(0.0))
                    .collect();
                let after = if after.is_empty() {
                    "—".to_owned()
                } else {
                    format!("{:.2}", median(after))
                };
                rows.push(format!(
                    "| {size} | {} | {} | {:.2} | {} | {lead} | {after} |",
                    match loss {
                        Loss::Stopped => "stopped (Lease released)",
                        Loss::Cut => "cut off (Lease expires)",
                    },
                    if cold { "cold" } else { "warm" },
                    median(firsts.clone()),
                    spread(&firsts),
                ));
            }
        }
    }
    eprintln!(
        "\n{} [{}], {runs} run(s) each, median (spread), seconds from the loss:\n\n| pods | leader | standby | first reconcile | spread | leading | leading → first reconcile |\n|---:|---|---|---:|---|---:|---:|\n{}\n",
        case.name,
        D::NAME,
        rows.join("\n")
    );
}
