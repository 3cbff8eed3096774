//! Sharding on the real apiserver: cell controllers over the same pods, each with its own
//! identity, splitting the cells into eight shards on `coordination.k8s.io/v1` Leases.
//!
//! Durations are short (lease 4 s, renew deadline 3 s, retry 0.5 s) so handovers fit in a
//! CI run. Every reconcile records who ran it and when on the test's wall clock, so runs of
//! different replicas are compared on one clock: no cell may run on two replicas at once.
//! A replica is killed by cutting its transport (every new request fails, so it can
//! neither renew nor release; it keeps its open watch), as a crashed process would look to
//! the others.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use reconcile_core::metrics::RelistLabel;
use reconcile_core::pod::PodView;
use reconcile_core::{KeyMap, ShardBy, ShardConfig};
use reconcile_engine::runtime::timeout;
use reconcile_engine::{
    Action, Controller, Handle, Limits, Reconcile, Running, Source, default_error_policy,
};
use reconcile_k8s_env::pod_manifest;
use serde_json::Value;

use super::election::Cuttable;
use crate::harness::{CELL, Case, DriverUnderTest, WAIT};

const SET: &str = "e2e-shards";
const SHARDS: u32 = 8;
const CELLS: usize = 100;
const PODS_PER_CELL: usize = 2;
const LEASE_DURATION: Duration = Duration::from_secs(4);
const RENEW_DEADLINE: Duration = Duration::from_secs(3);
const RETRY_PERIOD: Duration = Duration::from_millis(500);

/// One reconcile as seen from the test: who ran which cell, from when to when.
#[derive(Debug, Clone)]
struct Run {
    replica: &'static str,
    cell: String,
    start: Instant,
    end: Instant,
    /// The owned ConfigMaps the run was handed (`Setup::owned`).
    owned: usize,
}

/// Every replica's runs, on the test's clock.
#[derive(Clone, Default)]
struct Runs(Arc<Mutex<Vec<Run>>>);

impl Runs {
    fn all(&self) -> Vec<Run> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// No cell ran on two replicas at once.
    fn check_no_overlap(&self) -> Result<(), String> {
        let mut by_cell: BTreeMap<String, Vec<Run>> = BTreeMap::new();
        for run in self.all() {
            by_cell.entry(run.cell.clone()).or_default().push(run);
        }
        for (cell, runs) in by_cell {
            for (i, a) in runs.iter().enumerate() {
                for b in &runs[i + 1..] {
                    if a.replica != b.replica && a.start < b.end && b.start < a.end {
                        return Err(format!("cell {cell} ran on {a:?} and {b:?} at once"));
                    }
                }
            }
        }
        Ok(())
    }
}

struct Context<R> {
    replica: &'static str,
    runs: Runs,
    runtime: R,
}

async fn record_run<R: reconcile_engine::Runtime>(
    request: Reconcile<PodView, String>,
    ctx: Arc<Context<R>>,
) -> Result<Action, std::convert::Infallible> {
    let start = Instant::now();
    // Long enough that two replicas running one cell at once would overlap on the clock.
    let until = ctx.runtime.now() + Duration::from_millis(20);
    ctx.runtime.sleep_until(until).await;
    ctx.runs
        .0
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(Run {
            replica: ctx.replica,
            cell: request.parent().clone(),
            start,
            end: Instant::now(),
            owned: request.related::<ConfigMap>().len(),
        });
    Ok(Action::await_change())
}

struct Replica<D: DriverUnderTest> {
    identity: &'static str,
    running: Option<Running<PodView, String, D::Runtime>>,
    handle: Handle<PodView, String>,
    cut: Arc<AtomicBool>,
}

/// Where a replica's pods come from, and how its keys are sharded.
struct Setup<'a> {
    /// The apiserver's kubeconfig.
    kubeconfig: &'a Path,
    /// The Leases' namespace.
    leases: &'a str,
    /// The pods' namespace, or all namespaces.
    pods: Option<&'a str>,
    /// The pods' label selector.
    labels: &'a str,
    /// Pods keyed by their own name and sharded by namespace (selectable on the server),
    /// or keyed by cell and sharded by key.
    by_namespace: bool,
    /// The controller also owns ConfigMaps (`owns`, same labels): each pod's own.
    owned: bool,
}

impl<D: DriverUnderTest> Replica<D> {
    async fn start(case: &Case<D>, ns: &str, identity: &'static str, runs: &Runs) -> Self {
        let setup = Setup {
            kubeconfig: case
                .env
                .kubeconfig_path(reconcile_k8s_env::ApiServer::Cached),
            leases: ns,
            pods: Some(ns),
            labels: "app=e2e",
            by_namespace: false,
            owned: false,
        };
        Self::start_with(case, &setup, identity, runs).await
    }

    async fn start_with(
        case: &Case<D>,
        setup: &Setup<'_>,
        identity: &'static str,
        runs: &Runs,
    ) -> Self {
        let inner = D::connect(setup.kubeconfig)
            .await
            .unwrap_or_else(|e| panic!("{}: cannot connect: {e}", case.name));
        let cut = Arc::new(AtomicBool::new(false));
        let transport = Cuttable::new(inner, Arc::clone(&cut));
        let owned = setup.owned.then(|| {
            Source::<ConfigMap, Cuttable<D::Transport>>::all(transport.clone())
                .labels(setup.labels)
                .timeout(60)
        });
        let source = Source::<PodView, Cuttable<D::Transport>>::pods(transport, setup.pods)
            .labels(setup.labels)
            .timeout(60);
        let mut sharding = ShardConfig::new(setup.leases, SET, identity, SHARDS);
        sharding.lease_duration = LEASE_DURATION;
        sharding.renew_deadline = RENEW_DEADLINE;
        sharding.retry_period = RETRY_PERIOD;
        sharding.handover_drain = Duration::from_secs(2);
        let key_map = if setup.by_namespace {
            sharding.by = ShardBy::Namespace;
            KeyMap::by_name()
        } else {
            KeyMap::by_label(CELL)
        };
        let controller = Controller::with_runtime(D::runtime(), source, key_map)
            .concurrency(4)
            .retry_delay(Duration::from_millis(200))
            .resync(None)
            .limits(Limits {
                lease_request: Duration::from_secs(2),
                ..Limits::default()
            })
            .sharding_with(sharding);
        let controller = match owned {
            Some(owned) => controller.owns_kind(owned, "Pod"),
            None => controller,
        };
        let handle = controller.handle();
        let ctx = Arc::new(Context {
            replica: identity,
            runs: runs.clone(),
            runtime: D::runtime(),
        });
        let started = timeout(
            &case.runtime,
            WAIT,
            controller.start(record_run, default_error_policy, ctx),
        )
        .await;
        let running = match started {
            Some(Ok(running)) => running,
            Some(Err(e)) => panic!("{}: {identity} did not start: {e}", case.name),
            None => panic!("{}: {identity} did not sync within {WAIT:?}", case.name),
        };
        Replica {
            identity,
            running: Some(running),
            handle,
            cut,
        }
    }

    fn held(&self) -> Vec<u32> {
        self.handle.sharding().map(|s| s.held).unwrap_or_default()
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
}

impl<D: DriverUnderTest> Drop for Replica<D> {
    fn drop(&mut self) {
        if self.running.is_some() {
            self.handle.stop();
        }
    }
}

fn cell(i: usize) -> String {
    format!("c{i:03}")
}

fn create_pods<D: DriverUnderTest>(case: &Case<D>, ns: &str) {
    for c in 0..CELLS {
        for p in 0..PODS_PER_CELL {
            let pod = pod_manifest(
                &format!("p{c:03}-{p}"),
                &[("app", "e2e"), (CELL, cell(c).as_str())],
            );
            case.api()
                .create_pod(ns, &pod)
                .unwrap_or_else(|e| panic!("{}: create pod: {e}", case.name));
        }
    }
}

/// A new version of one pod of every cell: each cell must be reconciled again.
fn touch_cells<D: DriverUnderTest>(case: &Case<D>, ns: &str, round: u32) {
    for c in 0..CELLS {
        let patch =
            serde_json::json!({"metadata": {"annotations": {"e2e/round": round.to_string()}}});
        case.api()
            .patch_pod(ns, &format!("p{c:03}-0"), &patch)
            .unwrap_or_else(|e| panic!("{}: patch pod: {e}", case.name));
    }
}

/// Waits until the live replicas hold every shard between them, none more than
/// `ceil(SHARDS / live)`, and each sees them all live; returns how long that took.
async fn wait_balanced<D: DriverUnderTest>(case: &Case<D>, live: &[&Replica<D>]) -> Duration {
    let since = Instant::now();
    let target = (SHARDS as usize).div_ceil(live.len());
    case.eventually("the shards are balanced", || {
        let mut owners = BTreeMap::new();
        for r in live {
            let sharding = r.handle.sharding().unwrap_or_default();
            if sharding.held.len() > target || sharding.live != live.len() {
                return Err(format!("{}: {sharding:?}", r.identity));
            }
            for s in sharding.held {
                if let Some(other) = owners.insert(s, r.identity) {
                    return Err(format!("shard {s} held by {other} and {}", r.identity));
                }
            }
        }
        if owners.len() == SHARDS as usize {
            Ok(())
        } else {
            Err(format!("held: {owners:?}"))
        }
    })
    .await;
    since.elapsed()
}

/// After `from` runs, every cell was reconciled, and only by the replica holding its shard.
async fn wait_each_cell_by_its_owner<D: DriverUnderTest>(
    case: &Case<D>,
    runs: &Runs,
    from: usize,
    live: &[&Replica<D>],
) {
    let config = ShardConfig::new("any", SET, "any", SHARDS);
    let owner: BTreeMap<u32, &'static str> = live
        .iter()
        .flat_map(|r| r.held().into_iter().map(move |s| (s, r.identity)))
        .collect();
    let what = "every cell reconciled again by its shard's holder";
    case.eventually(what, || {
        let mut by_cell: BTreeMap<String, BTreeSet<&'static str>> = BTreeMap::new();
        for run in &runs.all()[from..] {
            by_cell.entry(run.cell.clone()).or_default().insert(run.replica);
        }
        if by_cell.len() < CELLS {
            return Err(format!("{} of {CELLS} cells", by_cell.len()));
        }
        for (cell, replicas) in &by_cell {
            let expected = owner.get(&config.shard_of(cell)).copied();
            if replicas.len() != 1 || replicas.first().copied() != expected {
                panic!(
                    "{}: cell {cell} reconciled by {replicas:?}, its shard's holder is {expected:?}",
                    case.name
                );
            }
        }
        Ok(())
    })
    .await;
}

fn leases<D: DriverUnderTest>(case: &Case<D>, ns: &str) -> Vec<Value> {
    let list = case
        .api()
        .get(&format!(
            "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases?labelSelector=reconcile-loop.dev%2Fshard-set%3D{SET}"
        ))
        .unwrap_or_else(|e| panic!("{}: list leases: {e}", case.name));
    list["items"].as_array().cloned().unwrap_or_default()
}

/// Three replicas over 200 pods in 100 cells: the eight shards split 3/3/2, each cell is
/// reconciled by exactly the replica that holds its shard, and never by two at once.
pub async fn three_replicas_share_the_cells_and_each_runs_only_its_own<D: DriverUnderTest>(
    case: Case<D>,
) {
    let _steady = case.env.steady();
    let ns = case.namespace();
    create_pods(&case, &ns);
    let runs = Runs::default();
    let mut a = Replica::start(&case, &ns, "e2e-a", &runs).await;
    let mut b = Replica::start(&case, &ns, "e2e-b", &runs).await;
    let mut c = Replica::start(&case, &ns, "e2e-c", &runs).await;
    let took = wait_balanced(&case, &[&a, &b, &c]).await;
    eprintln!(
        "{} [{}]: 3 replicas balanced {:.3}s after the third synced",
        case.name,
        D::NAME,
        took.as_secs_f64()
    );
    let from = runs.all().len();
    touch_cells(&case, &ns, 1);
    wait_each_cell_by_its_owner(&case, &runs, from, &[&a, &b, &c]).await;
    runs.check_no_overlap()
        .unwrap_or_else(|e| panic!("{}: {e}", case.name));
    // The Leases as `kubectl get leases -l reconcile-loop.dev/shard-set=e2e-shards` shows:
    // eight shards and three members, every one held.
    let leases = leases(&case, &ns);
    let (shards, members): (Vec<&Value>, Vec<&Value>) = leases
        .iter()
        .partition(|l| l["metadata"]["labels"]["reconcile-loop.dev/shard-role"] == "shard");
    assert_eq!(shards.len(), SHARDS as usize, "{leases:?}");
    assert_eq!(members.len(), 3, "{leases:?}");
    for lease in &leases {
        assert!(lease["spec"]["holderIdentity"].is_string(), "{lease}");
    }
    for r in [&mut a, &mut b, &mut c] {
        r.shutdown(&case).await;
    }
}

/// One of three replicas is killed: its shards move to the other two within lease plus
/// two retry periods of the kill, and every cell is then reconciled by its new holder only.
pub async fn a_killed_replicas_shards_move_within_the_lease<D: DriverUnderTest>(case: Case<D>) {
    let _steady = case.env.steady();
    let ns = case.namespace();
    create_pods(&case, &ns);
    let runs = Runs::default();
    let mut a = Replica::start(&case, &ns, "e2e-a", &runs).await;
    let mut b = Replica::start(&case, &ns, "e2e-b", &runs).await;
    let mut c = Replica::start(&case, &ns, "e2e-c", &runs).await;
    wait_balanced(&case, &[&a, &b, &c]).await;
    let orphaned = c.held();
    c.cut.store(true, Ordering::SeqCst);
    let killed = Instant::now();
    let took = wait_balanced(&case, &[&a, &b]).await;
    let bound = LEASE_DURATION + RETRY_PERIOD * 2;
    eprintln!(
        "{} [{}]: shards {orphaned:?} of a killed replica taken over in {:.3}s (bound: lease + 2 × retry = {:.1}s)",
        case.name,
        D::NAME,
        took.as_secs_f64(),
        bound.as_secs_f64()
    );
    assert!(
        killed.elapsed() < bound + Duration::from_secs(2),
        "{}: the takeover took {took:?}",
        case.name
    );
    let from = runs.all().len();
    touch_cells(&case, &ns, 1);
    wait_each_cell_by_its_owner(&case, &runs, from, &[&a, &b]).await;
    runs.check_no_overlap()
        .unwrap_or_else(|e| panic!("{}: {e}", case.name));
    // The killed replica's cache still followed the pods, and it reconciled none of them.
    assert!(
        runs.all()[from..].iter().all(|r| r.replica != "e2e-c"),
        "{}: the killed replica reconciled after its terms",
        case.name
    );
    c.cut.store(false, Ordering::SeqCst);
    for r in [&mut a, &mut b, &mut c] {
        r.shutdown(&case).await;
    }
}

/// A third replica joins two: each old replica gives up only its excess, after that shard's
/// reconciles end, and the newcomer holds its share; no cell runs twice at once.
pub async fn an_added_replica_restores_the_balance<D: DriverUnderTest>(case: Case<D>) {
    let _steady = case.env.steady();
    let ns = case.namespace();
    create_pods(&case, &ns);
    let runs = Runs::default();
    let mut a = Replica::start(&case, &ns, "e2e-a", &runs).await;
    let mut b = Replica::start(&case, &ns, "e2e-b", &runs).await;
    wait_balanced(&case, &[&a, &b]).await;
    let before = [a.held(), b.held()];
    // Changes in flight while the newcomer joins.
    touch_cells(&case, &ns, 1);
    let mut c = Replica::start(&case, &ns, "e2e-c", &runs).await;
    let took = wait_balanced(&case, &[&a, &b, &c]).await;
    eprintln!(
        "{} [{}]: balance restored {:.3}s after a third replica synced",
        case.name,
        D::NAME,
        took.as_secs_f64()
    );
    for (r, had) in [&a, &b].into_iter().zip(&before) {
        let kept = r.held().iter().filter(|s| had.contains(s)).count();
        assert_eq!(
            kept,
            r.held().len(),
            "{}: {} took a shard it did not have",
            case.name,
            r.identity
        );
    }
    let from = runs.all().len();
    touch_cells(&case, &ns, 2);
    wait_each_cell_by_its_owner(&case, &runs, from, &[&a, &b, &c]).await;
    runs.check_no_overlap()
        .unwrap_or_else(|e| panic!("{}: {e}", case.name));
    for r in [&mut a, &mut b, &mut c] {
        r.shutdown(&case).await;
    }
}

/// Namespaces of the selection cases: named to differ in their first bytes, since the
/// server's hash (FNV-1a, unmixed) crowds names that differ only at the end into a few
/// shards.
const SELECTED_NAMESPACES: usize = 16;
const PODS_PER_NAMESPACE: usize = 3;

/// Pods in `SELECTED_NAMESPACES` namespaces of their own, labelled `run=<ns>`, each with a
/// ConfigMap it owns (same label); gives the namespaces.
fn create_spread_pods<D: DriverUnderTest>(case: &Case<D>, ns: &str) -> Vec<String> {
    let namespaces: Vec<String> = (0..SELECTED_NAMESPACES)
        .map(|i| format!("{i}-{ns}").chars().take(63).collect())
        .collect();
    for namespace in &namespaces {
        case.api()
            .create_namespace(namespace)
            .unwrap_or_else(|e| panic!("{}: create namespace {namespace}: {e}", case.name));
        for p in 0..PODS_PER_NAMESPACE {
            let pod = pod_manifest(&format!("p{p}"), &[("run", ns)]);
            let pod = case
                .api()
                .create_pod(namespace, &pod)
                .unwrap_or_else(|e| panic!("{}: create pod: {e}", case.name));
            let owned = serde_json::json!({
                "metadata": {
                    "name": format!("p{p}-owned"),
                    "labels": {"run": ns},
                    "ownerReferences": [{
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "name": format!("p{p}"),
                        "uid": pod["metadata"]["uid"],
                        "controller": true,
                    }],
                },
                "data": {"pod": format!("p{p}")},
            });
            case.api()
                .create(
                    &format!("/api/v1/namespaces/{namespace}/configmaps"),
                    &owned,
                )
                .unwrap_or_else(|e| panic!("{}: create ConfigMap: {e}", case.name));
        }
    }
    namespaces
}

fn delete_namespaces<D: DriverUnderTest>(case: &Case<D>, namespaces: &[String]) {
    for namespace in namespaces {
        let _ = case.api().delete_namespace(namespace);
    }
}

/// Waits until each replica's gauge says the server selects its shards (`selecting`), or
/// that it found the selector ignored. The driver publishes the cache before the metrics
/// of the same turn, so a reader may see the one a moment before the other.
async fn wait_selecting<D: DriverUnderTest>(case: &Case<D>, live: &[&Replica<D>], selecting: bool) {
    let what = format!("each replica's server-side selection gauge reads {selecting}");
    case.eventually(&what, || {
        for r in live {
            let gauge = r.handle.metrics().shard_server_selection;
            if gauge != Some(selecting) {
                return Err(format!("{}: {gauge:?}", r.identity));
            }
        }
        Ok(())
    })
    .await;
}

/// Waits until each replica caches exactly the pods of the namespaces in its shards
/// (`selected`), or every pod (not `selected`).
async fn wait_caches<D: DriverUnderTest>(
    case: &Case<D>,
    namespaces: &[String],
    live: &[&Replica<D>],
    selected: bool,
) {
    let mut config = ShardConfig::new("any", SET, "any", SHARDS);
    config.by = ShardBy::Namespace;
    use reconcile_core::Object as _;
    let what = if selected {
        "each replica caches its shards' pods alone"
    } else {
        "each replica caches every pod"
    };
    case.eventually(what, || {
        for r in live {
            let held = r.held();
            let expected: BTreeSet<String> = namespaces
                .iter()
                .filter(|ns| !selected || held.contains(&config.shard_of_text(ns)))
                .flat_map(|ns| (0..PODS_PER_NAMESPACE).map(move |p| format!("{ns}/p{p}")))
                .collect();
            let cached: BTreeSet<String> = r
                .handle
                .cache()
                .state()
                .iter()
                .filter_map(|pod| pod.key().map(|k| k.to_string()))
                .collect();
            if cached != expected {
                return Err(format!(
                    "{} holds {held:?}: caches {} pods, expected {}",
                    r.identity,
                    cached.len(),
                    expected.len()
                ));
            }
        }
        Ok(())
    })
    .await;
}

/// On an apiserver with `ShardedListAndWatch` on, three replicas sharding pods by namespace
/// each list and watch only their shards' pods (KEP-5866's `shardSelector`); when one is
/// killed, the survivors list their new shards' pods too.
pub async fn with_server_side_selection_each_replica_caches_only_its_shards<D: DriverUnderTest>(
    case: Case<D>,
) {
    let _steady = case.env.steady();
    let ns = case.namespace();
    let gated = case
        .env
        .extra_apiserver(&["--feature-gates=ShardedListAndWatch=true"])
        .unwrap_or_else(|e| panic!("an apiserver with ShardedListAndWatch on: {e}"));
    let namespaces = create_spread_pods(&case, &ns);
    let labels = format!("run={ns}");
    let setup = Setup {
        kubeconfig: gated.kubeconfig_path(),
        leases: &ns,
        pods: None,
        labels: &labels,
        by_namespace: true,
        owned: true,
    };
    let runs = Runs::default();
    let mut a = Replica::start_with(&case, &setup, "e2e-a", &runs).await;
    let mut b = Replica::start_with(&case, &setup, "e2e-b", &runs).await;
    let mut c = Replica::start_with(&case, &setup, "e2e-c", &runs).await;
    wait_balanced(&case, &[&a, &b, &c]).await;
    wait_caches(&case, &namespaces, &[&a, &b, &c], true).await;
    let total = SELECTED_NAMESPACES * PODS_PER_NAMESPACE;
    wait_selecting(&case, &[&a, &b, &c], true).await;
    for r in [&a, &b, &c] {
        let cached = r.handle.cache().state().len();
        eprintln!(
            "{} [{}]: {} holds {:?} and caches {cached} of {total} pods",
            case.name,
            D::NAME,
            r.identity,
            r.held()
        );
    }
    // c is cut off: a and b take its shards and list their pods.
    c.cut.store(true, Ordering::SeqCst);
    let killed = Instant::now();
    wait_balanced(&case, &[&a, &b]).await;
    wait_caches(&case, &namespaces, &[&a, &b], true).await;
    eprintln!(
        "{} [{}]: the survivors cache their new shards {:.3}s after the kill",
        case.name,
        D::NAME,
        killed.elapsed().as_secs_f64()
    );
    // Every pod changes: each survivor's watch, resumed after the move with every shard it
    // holds, brings the change to the pods of the shards it kept and of those it gained
    // (which it listed alone).
    for namespace in &namespaces {
        for p in 0..PODS_PER_NAMESPACE {
            let patch = serde_json::json!({"metadata": {"labels": {"e2e-moved": "1"}}});
            case.api()
                .patch_pod(namespace, &format!("p{p}"), &patch)
                .unwrap_or_else(|e| panic!("{}: patch pod: {e}", case.name));
        }
    }
    case.eventually(
        "each survivor's watch brings every change in its shards",
        || {
            use reconcile_core::Object as _;
            for r in [&a, &b] {
                let unchanged: Vec<String> = r
                    .handle
                    .cache()
                    .state()
                    .iter()
                    .filter(|pod| pod.metadata.labels.get("e2e-moved") != Some("1"))
                    .filter_map(|pod| pod.key().map(|k| k.to_string()))
                    .collect();
                if !unchanged.is_empty() {
                    return Err(format!("{} caches unchanged: {unchanged:?}", r.identity));
                }
            }
            Ok(())
        },
    )
    .await;
    wait_caches(&case, &namespaces, &[&a, &b], true).await;
    let moved = |r: &Replica<D>| r.handle.metrics().relists(RelistLabel::ShardsMoved);
    assert!(
        moved(&a) > 0 && moved(&b) > 0,
        "{}: no relist as shards moved",
        case.name
    );
    // Each pod's owned ConfigMap is listed and watched with the same shard selector (the
    // gauge above stays 1 only if its LISTs came back filtered), and no run, before the
    // kill or after it, went without it: a gained shard runs once both sources hold it.
    let blind: Vec<Run> = runs.all().into_iter().filter(|r| r.owned != 1).collect();
    assert!(
        blind.is_empty(),
        "{}: runs without their owned ConfigMap: {blind:?}",
        case.name
    );
    wait_selecting(&case, &[&a, &b], true).await;
    runs.check_no_overlap()
        .unwrap_or_else(|e| panic!("{}: {e}", case.name));
    c.cut.store(false, Ordering::SeqCst);
    for r in [&mut a, &mut b, &mut c] {
        r.shutdown(&case).await;
    }
    delete_namespaces(&case, &namespaces);
}

/// On an apiserver without the gate, the selector is ignored: each replica finds out from
/// the first pod outside its shards, says so (the gauge drops to 0), and caches every pod.
pub async fn without_the_gate_each_replica_caches_every_pod_and_says_so<D: DriverUnderTest>(
    case: Case<D>,
) {
    let _steady = case.env.steady();
    let ns = case.namespace();
    let namespaces = create_spread_pods(&case, &ns);
    let labels = format!("run={ns}");
    let setup = Setup {
        kubeconfig: case
            .env
            .kubeconfig_path(reconcile_k8s_env::ApiServer::Cached),
        leases: &ns,
        pods: None,
        labels: &labels,
        by_namespace: true,
        owned: false,
    };
    let runs = Runs::default();
    let mut a = Replica::start_with(&case, &setup, "e2e-a", &runs).await;
    let mut b = Replica::start_with(&case, &setup, "e2e-b", &runs).await;
    wait_balanced(&case, &[&a, &b]).await;
    wait_caches(&case, &namespaces, &[&a, &b], false).await;
    wait_selecting(&case, &[&a, &b], false).await;
    for r in [&mut a, &mut b] {
        r.shutdown(&case).await;
    }
    delete_namespaces(&case, &namespaces);
}
