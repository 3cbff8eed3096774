//! The peers. Each runs in its own process (so peak RSS and CPU seconds are its own) and
//! prints one [`PeerReport`] as a JSON line; the client-go peer (`bench/go`) prints the same.
//!
//! | peer | what runs |
//! |---|---|
//! | `bare` | one LIST through kube's HTTP stack plus one partial-view parse: the floor |
//! | `core` | `reconcile-core` with the thinnest driver: one task, no channels, inline reconciles |
//! | `tokio` | `reconcile-tokio`'s `Controller`, defaults (concurrency 1) |
//! | `kube` | kube-runtime 5's `Controller` (watcher + reflector, default `watcher::Config`) |
//!
//! Every peer watches namespace [`crate::workload::NAMESPACE`] with selector [`SELECTOR`] and keys reconciles
//! by the `cell` label, except kube-runtime, whose `Controller` reconciles the watched object
//! itself (one key per pod), as its documentation shows.
//!
//! In the two-source scenario ([`Scenario::Owned`], issue 13) every peer but `bare` watches
//! ReplicaSets and the pods they own, reconciles each ReplicaSet with its children, and is
//! done once the sentinel ReplicaSet's reconcile sees both sentinels' last frames:
//!
//! | peer | what runs |
//! |---|---|
//! | `core` | the same thin driver over `Config::kubernetes(..).owns::<PodView>(..)` |
//! | `tokio` | `Controller::for_objects(replica_sets).owns_kind(pods, "ReplicaSet")` |
//! | `kube` | `Controller::new(replica_sets).owns_stream(reflector(pods))`: `owns` with the children cached |

use std::collections::HashMap;
use std::convert::Infallible;
use std::path::PathBuf;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::{Duration, Instant as WallClock, SystemTime};

use futures::StreamExt as _;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use reconcile_core::list::ListDecoder;
use reconcile_core::pod::PodView;
use reconcile_core::{
    Command, Config, Event, Input, Instant, KeyMap, ListResponse, Members, Object, ObjectKey,
    Outcome, Output, ReconcileLoop, Related, SourceId, StreamEnd, StreamId, WatchParams,
};
use reconcile_tokio::engine::lines::{WatchSplitter, is_protobuf_content_type};
use reconcile_tokio::engine::transport::{
    BodyStream, Requests, TransportError, for_each_chunk, read_body,
};
use reconcile_tokio::engine::{BoxFuture, Transport};
use reconcile_tokio::{
    Action, KubeTransport, Reconcile, Source, TokioRuntime, default_error_policy,
};
use serde::{Deserialize, Serialize};

use crate::BenchError;
use crate::replica_set::ReplicaSetView;

/// Largest LIST body the Rust peers accept: a million real-shaped pods are 8.5 GB of JSON,
/// and the drivers' default (512 MiB) stops near 60k of them.
pub const MAX_LIST_BODY: usize = 16 << 30;

/// What our peers let one LIST decode into: the default bounds, but up to 4M items (the
/// default million, Kubernetes' own scalability limit being 150k pods a cluster, is one
/// short of the scaling run's million pods and sentinel).
#[must_use]
pub fn list_limits() -> reconcile_core::list::ListLimits {
    reconcile_core::list::ListLimits {
        max_items: 4_000_000,
        ..reconcile_core::list::ListLimits::default()
    }
}
use crate::workload::{PHASE_ANNOTATION, Resource, SELECTOR, SENTINEL};

/// What a peer process prints, one JSON line (the Go peer prints the same fields).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct PeerReport {
    /// `bare`, `core`, `tokio`, `kube` or `client-go`.
    pub peer: String,
    /// Objects of the primary source in the cache once synced (0 where the peer cannot
    /// tell): pods, or the ReplicaSets of the two-source scenario.
    pub pods: usize,
    /// Two sources: the children (pods) cached once synced.
    #[serde(default)]
    pub children: usize,
    /// Two sources, throughput: the primary's objects once every frame was processed.
    #[serde(default)]
    pub final_objects: usize,
    /// Two sources, throughput: the children once every frame was processed.
    #[serde(default)]
    pub final_children: usize,
    /// From starting the controller to its first sync.
    pub sync_seconds: f64,
    /// Wall clock (Unix ns) when the sentinel's final state was reconciled; 0 in sync mode.
    pub done_unix_ns: i64,
    /// Reconciles dispatched.
    pub reconciles: i64,
    /// Heap growth over the sync, after one second to settle (0 when not measured).
    pub heap_bytes: i64,
    /// Peak resident set (VmHWM), KiB.
    pub rss_peak_kb: i64,
    /// User + system CPU seconds of the whole process.
    pub cpu_seconds: f64,
    /// User + system CPU seconds at the first sync: `cpu_seconds` minus this is what the
    /// watch frames after the sync cost (0 where not read).
    #[serde(default)]
    pub cpu_at_sync: f64,
    /// Of `cpu_seconds`, the system (kernel) part: syscalls, wakeups, page faults.
    #[serde(default)]
    pub cpu_system: f64,
    /// Of `cpu_at_sync`, the system part.
    #[serde(default)]
    pub cpu_system_at_sync: f64,
    /// The wire format the peer's LIST and WATCH responses came in (`json`, `protobuf`),
    /// as the peer saw it (client-go: the responses' `Content-Type`); empty if unknown.
    #[serde(default)]
    pub wire: String,
    /// Why the peer failed, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Which Rust peer to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerKind {
    /// One LIST and one parse.
    Bare,
    /// The core with a minimal inline driver.
    Core,
    /// The tokio driver.
    Tokio,
    /// kube-runtime's Controller.
    Kube,
}

impl PeerKind {
    /// The name used on the command line and in reports.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            PeerKind::Bare => "bare",
            PeerKind::Core => "core",
            PeerKind::Tokio => "tokio",
            PeerKind::Kube => "kube",
        }
    }

    /// Parses [`PeerKind::name`].
    #[must_use]
    pub fn parse(name: &str) -> Option<Self> {
        [
            PeerKind::Bare,
            PeerKind::Core,
            PeerKind::Tokio,
            PeerKind::Kube,
        ]
        .into_iter()
        .find(|k| k.name() == name)
    }
}

/// Which workload the peer runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// Pods, reconciled by cell: the single-source rows.
    Pods,
    /// ReplicaSets owning pods (issue 13): two sources, reconciled by ReplicaSet.
    Owned,
}

impl Scenario {
    /// The name used on the command line.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Pods => "pods",
            Scenario::Owned => "owned",
        }
    }

    /// Parses [`Scenario::name`].
    #[must_use]
    pub fn parse(name: &str) -> Option<Self> {
        [Scenario::Pods, Scenario::Owned]
            .into_iter()
            .find(|s| s.name() == name)
    }
}

/// The wire format a peer asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Wire {
    /// `application/json`.
    #[default]
    Json,
    /// `application/vnd.kubernetes.protobuf`.
    Protobuf,
}

impl Wire {
    /// The name used on the command line, in reports and in the doc's rows.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Wire::Json => "json",
            Wire::Protobuf => "protobuf",
        }
    }

    /// Parses [`Wire::name`].
    #[must_use]
    pub fn parse(name: &str) -> Option<Self> {
        [Wire::Json, Wire::Protobuf]
            .into_iter()
            .find(|w| w.name() == name)
    }
}

/// Where the peer connects.
#[derive(Debug, Clone)]
pub enum Target {
    /// The replay server at this URL.
    Replay(String),
    /// A real apiserver from this kubeconfig.
    Kubeconfig(PathBuf),
}

/// One peer run.
#[derive(Debug, Clone)]
pub struct PeerArgs {
    /// Which peer.
    pub kind: PeerKind,
    /// Where it connects.
    pub target: Target,
    /// The namespace to watch.
    pub namespace: String,
    /// The workload.
    pub scenario: Scenario,
    /// Wait for the sentinel's last frame (throughput) or stop after the sync.
    pub throughput: bool,
    /// Give up after this long.
    pub deadline: Duration,
    /// LIST page size: `None` keeps the peer's default, `Some(0)` lists in one request.
    /// Honoured by `core`, `tokio` and `kube` (`watcher::Config::page_size`).
    pub page_size: Option<u32>,
    /// The wire format to ask for. kube-runtime, and our two-source peers (whose
    /// ReplicaSet view decodes JSON only), refuse [`Wire::Protobuf`] with a clear error
    /// (see [`our_wire`]).
    pub wire: Wire,
}

/// Heap bytes in use, when the binary counts them.
pub type HeapProbe = fn() -> i64;

/// Runs one peer and returns its report (the caller prints it).
#[must_use]
pub fn run(args: &PeerArgs, heap: Option<HeapProbe>) -> PeerReport {
    let runtime = match args.kind {
        PeerKind::Bare | PeerKind::Core => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
        PeerKind::Tokio | PeerKind::Kube => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build(),
    };
    let mut report = match runtime {
        Ok(rt) => rt.block_on(async {
            match tokio::time::timeout(args.deadline, run_async(args, heap)).await {
                Ok(Ok(report)) => report,
                Ok(Err(e)) => failed(args.kind, e.to_string()),
                Err(_) => failed(args.kind, "deadline passed".into()),
            }
        }),
        Err(e) => failed(args.kind, e.to_string()),
    };
    let (rss, cpu) = proc_stats();
    report.rss_peak_kb = rss;
    report.cpu_seconds = cpu;
    report.cpu_system = cpu_split().1;
    // Our peers report the wire their responses came in (their `Content-Type`); kube-runtime
    // asks for JSON and reads nothing else.
    if report.error.is_none() && report.wire.is_empty() {
        report.wire = args.wire.name().into();
    }
    report
}

/// User + system CPU seconds of this process so far.
fn cpu_now() -> f64 {
    proc_stats().1
}

/// User and system CPU seconds of this process so far, apart.
#[must_use]
pub fn cpu_split() -> (f64, f64) {
    std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| {
            let rest = &s[s.rfind(')')? + 1..];
            let fields: Vec<&str> = rest.split_whitespace().collect();
            let user: f64 = fields.get(11)?.parse().ok()?;
            let system: f64 = fields.get(12)?.parse().ok()?;
            Some((user / 100.0, system / 100.0))
        })
        .unwrap_or((0.0, 0.0))
}

/// Checks that a Rust peer can speak `wire` in `scenario`. Our pod peers (`bare`, `core`,
/// `tokio`) ask for protobuf with `--wire protobuf` (`PodView` decodes it, LIST and WATCH);
/// kube-runtime reads JSON only, and so does our two-source scenario's ReplicaSet view.
///
/// # Errors
/// [`Wire::Protobuf`] for `kube`, or in [`Scenario::Owned`].
pub fn our_wire(kind: PeerKind, scenario: Scenario, wire: Wire) -> Result<(), BenchError> {
    match (wire, kind, scenario) {
        (Wire::Json, _, _) => Ok(()),
        (Wire::Protobuf, PeerKind::Kube, _) => Err(BenchError::Peer(
            "kube: kube-runtime reads JSON only (kube has no protobuf decoding)".into(),
        )),
        (Wire::Protobuf, _, Scenario::Pods) => Ok(()),
        (Wire::Protobuf, _, Scenario::Owned) => Err(BenchError::Peer(format!(
            "{}: the {} scenario decodes JSON only (ReplicaSetView has no protobuf decoder)",
            kind.name(),
            scenario.name()
        ))),
    }
}

/// The wire formats a peer's `200` LIST and WATCH responses came in, by their
/// `Content-Type` (as the client-go peer records it): what the peer really read, whatever it
/// asked for.
#[derive(Debug, Default)]
pub struct WireSeen {
    json: AtomicUsize,
    protobuf: AtomicUsize,
    other: Mutex<Option<String>>,
}

impl WireSeen {
    /// Counts one response's `Content-Type`.
    pub fn record(&self, content_type: &str) {
        if is_protobuf_content_type(content_type) {
            self.protobuf.fetch_add(1, Ordering::Relaxed);
        } else if content_type
            .split(';')
            .next()
            .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"))
        {
            self.json.fetch_add(1, Ordering::Relaxed);
        } else {
            let mut other = self
                .other
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            other.get_or_insert_with(|| content_type.to_owned());
        }
    }

    /// `json` or `protobuf` when every response came in that format, `json+protobuf` when
    /// both did, the first other `Content-Type` if any, `""` when none was read.
    #[must_use]
    pub fn name(&self) -> String {
        let other = self
            .other
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        if let Some(other) = other {
            return format!("other ({other})");
        }
        let json = self.json.load(Ordering::Relaxed) > 0;
        let protobuf = self.protobuf.load(Ordering::Relaxed) > 0;
        match (json, protobuf) {
            (true, true) => "json+protobuf".into(),
            (false, true) => Wire::Protobuf.name().into(),
            (true, false) => Wire::Json.name().into(),
            (false, false) => String::new(),
        }
    }
}

/// kube's transport, noting each `200` response's `Content-Type` in a [`WireSeen`]. The
/// peer's few requests (one LIST and one WATCH a sync) pay one boxed future each; the body
/// streams through untouched.
#[derive(Clone)]
struct Recording {
    inner: KubeTransport,
    seen: Arc<WireSeen>,
}

impl Recording {
    fn new(client: kube::Client) -> Self {
        Recording {
            inner: KubeTransport::new(client),
            seen: Arc::new(WireSeen::default()),
        }
    }
}

impl Transport for Recording {
    fn send(
        &self,
        request: http::Request<Vec<u8>>,
    ) -> BoxFuture<Result<http::Response<BodyStream>, TransportError>> {
        let inner = self.inner.clone();
        let seen = Arc::clone(&self.seen);
        Box::pin(async move {
            let response = inner.send(request).await?;
            if response.status().as_u16() == 200 {
                seen.record(content_type(&response));
            }
            Ok(response)
        })
    }
}

fn content_type<B>(response: &http::Response<B>) -> &str {
    response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
}

/// The peer's watch parameters for `wire`.
fn with_wire(params: WatchParams, wire: Wire) -> WatchParams {
    match wire {
        Wire::Json => params,
        Wire::Protobuf => params.protobuf(),
    }
}

fn failed(kind: PeerKind, error: String) -> PeerReport {
    PeerReport {
        peer: kind.name().into(),
        error: Some(error),
        ..PeerReport::default()
    }
}

/// Heap growth since the peer began, when the binary counts it.
#[derive(Debug, Clone, Copy)]
struct Heap {
    probe: Option<HeapProbe>,
    baseline: i64,
}

impl Heap {
    fn measuring(self) -> bool {
        self.probe.is_some()
    }

    /// Lets the heap settle (initial reconciles, freed buffers), then reads the growth.
    /// Called while the cache is still alive.
    async fn settle_and_read(self) -> i64 {
        match self.probe {
            Some(probe) => {
                tokio::time::sleep(Duration::from_secs(1)).await;
                probe() - self.baseline
            }
            None => 0,
        }
    }
}

async fn run_async(args: &PeerArgs, probe: Option<HeapProbe>) -> Result<PeerReport, BenchError> {
    // Reserved before the heap baseline: the harness's bookkeeping is not the controller's.
    let views = Arc::new(match args.scenario {
        Scenario::Pods => Views::default(),
        Scenario::Owned => Views::reserved(),
    });
    let heap = Heap {
        probe,
        baseline: probe.map_or(0, |p| p()),
    };
    our_wire(args.kind, args.scenario, args.wire)?;
    let client = client(&args.target).await?;
    let mut report = match (args.scenario, args.kind) {
        (Scenario::Pods, PeerKind::Bare) => bare(client, args).await?,
        (Scenario::Pods, PeerKind::Core) => core(client, args, heap).await?,
        (Scenario::Pods, PeerKind::Tokio) => tokio_driver(client, args, heap).await?,
        (Scenario::Pods, PeerKind::Kube) => kube_runtime(client, args, heap).await?,
        (Scenario::Owned, PeerKind::Core) => core_owned(client, args, heap, &views).await?,
        (Scenario::Owned, PeerKind::Tokio) => tokio_owned(client, args, heap, views).await?,
        (Scenario::Owned, PeerKind::Kube) => kube_owned(client, args, heap).await?,
        (Scenario::Owned, PeerKind::Bare) => {
            return Err(BenchError::Peer("bare has no two-source run".into()));
        }
    };
    report.peer = args.kind.name().into();
    Ok(report)
}

async fn client(target: &Target) -> Result<kube::Client, BenchError> {
    let config = match target {
        Target::Replay(url) => {
            let uri: http::Uri = url
                .parse()
                .map_err(|e| BenchError::Peer(format!("{url}: {e}")))?;
            kube::Config::new(uri)
        }
        Target::Kubeconfig(path) => {
            let kubeconfig = kube::config::Kubeconfig::read_from(path)
                .map_err(|e| BenchError::Peer(format!("{}: {e}", path.display())))?;
            kube::Config::from_custom_kubeconfig(
                kubeconfig,
                &kube::config::KubeConfigOptions::default(),
            )
            .await
            .map_err(|e| BenchError::Peer(format!("{}: {e}", path.display())))?
        }
    };
    kube::Client::try_from(config).map_err(|e| BenchError::Peer(e.to_string()))
}

fn collection(namespace: &str) -> String {
    format!("/api/v1/namespaces/{namespace}/pods")
}

fn unix_ns() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

fn is_final_sentinel(pod: &PodView) -> bool {
    pod.metadata.name.as_deref() == Some(SENTINEL)
        && pod.metadata.annotations.get(PHASE_ANNOTATION) == Some("end")
}

fn is_final_sentinel_replica_set(rs: &ReplicaSetView) -> bool {
    rs.metadata.name.as_deref() == Some(SENTINEL)
        && rs.metadata.annotations.get(PHASE_ANNOTATION) == Some("end")
}

/// Room in [`Views`] for far more ReplicaSets than any run has.
const VIEW_CAPACITY: usize = 1 << 14;

/// What our peers' reconciles saw last of each parent in the two-source scenario: whether
/// its ReplicaSet existed and how many children it had. Every change wakes its parent and
/// each reconcile reads both sources at dispatch, so once every wake has been reconciled the
/// totals are both sources' final state, as the reconciles saw it.
#[derive(Debug, Default)]
struct Views(Mutex<HashMap<ObjectKey, (bool, usize)>>);

/// [`Views`] summed up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ViewTotals {
    /// Parents reconciled at least once.
    parents: usize,
    /// Children the last reconciles saw, over every parent.
    children: usize,
}

impl Views {
    /// With room reserved for [`VIEW_CAPACITY`] parents, so recording never allocates.
    fn reserved() -> Self {
        Views(Mutex::new(HashMap::with_capacity(VIEW_CAPACITY)))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ObjectKey, (bool, usize)>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn record(&self, parent: &ObjectKey, exists: bool, children: usize) {
        self.lock().insert(parent.clone(), (exists, children));
    }

    fn totals(&self) -> ViewTotals {
        let views = self.lock();
        ViewTotals {
            parents: views.len(),
            children: views.values().map(|(_, children)| children).sum(),
        }
    }
}

async fn bare(client: kube::Client, args: &PeerArgs) -> Result<PeerReport, BenchError> {
    let transport = Recording::new(client);
    let params = with_wire(
        WatchParams::namespaced(&args.namespace).labels(SELECTOR),
        args.wire,
    );
    let start = WallClock::now();
    let request = Requests::new(collection(&args.namespace))
        .list(&params)
        .map_err(|e| BenchError::Peer(e.to_string()))?;
    let response = transport.send(request).await?;
    let mut body = response.into_body();
    let bytes = read_body(
        &TokioRuntime,
        &mut body,
        Duration::from_secs(120),
        MAX_LIST_BODY,
    )
    .await?;
    let list = reconcile_core::list::parse_list::<PodView>(&bytes)
        .map_err(|e| BenchError::Peer(e.to_string()))?;
    Ok(PeerReport {
        pods: list.items.len(),
        sync_seconds: start.elapsed().as_secs_f64(),
        wire: transport.seen.name(),
        ..PeerReport::default()
    })
}

/// The core with the thinnest possible driver, over pods keyed by cell.
async fn core(client: kube::Client, args: &PeerArgs, heap: Heap) -> Result<PeerReport, BenchError> {
    let mut params = with_wire(
        WatchParams::namespaced(&args.namespace).labels(SELECTOR),
        args.wire,
    );
    if let Some(n) = args.page_size {
        params = params.list_pages(n);
    }
    let config = Config::kubernetes(params, KeyMap::<PodView, String>::by_label("cell"));
    let sources = [Requests::new(collection(&args.namespace))];
    let finished = |cell: &String, members: &Members<PodView>, _: &[Related]| {
        cell == SENTINEL && members.iter().any(|m| is_final_sentinel(m))
    };
    let (mut report, core) = drive_core(client, &sources, config, args, heap, finished).await?;
    if args.throughput {
        // The loop returns after the drain that saw the end: the store holds every frame
        // before it.
        report.pods = core.store().len();
    }
    Ok(report)
}

/// The core with the thinnest possible driver over ReplicaSets owning pods: the same loop,
/// the children added with `Config::owns`.
async fn core_owned(
    client: kube::Client,
    args: &PeerArgs,
    heap: Heap,
    views: &Views,
) -> Result<PeerReport, BenchError> {
    let namespace = &args.namespace;
    let params = WatchParams::namespaced(namespace).labels(SELECTOR);
    let config = Config::kubernetes(
        params.clone(),
        KeyMap::<ReplicaSetView, ObjectKey>::by_object(),
    )
    .owns::<PodView>(params, "ReplicaSet");
    let sources = [
        Requests::new(Resource::ReplicaSets.path(namespace)),
        Requests::new(Resource::Pods.path(namespace)),
    ];
    let finished = |parent: &ObjectKey, members: &Members<ReplicaSetView>, related: &[Related]| {
        let children = related.iter().map(|r| r.objects.len()).sum();
        views.record(parent, !members.is_empty(), children);
        parent.name() == SENTINEL
            && members.iter().any(|rs| is_final_sentinel_replica_set(rs))
            && related
                .iter()
                .filter_map(Related::downcast::<PodView>)
                .flatten()
                .any(|pod| is_final_sentinel(&pod))
    };
    let (mut report, core) = drive_core(client, &sources, config, args, heap, finished).await?;
    if args.throughput {
        // The loop returns after the drain that saw the end, and reconciles complete inline,
        // so every wake before it has been reconciled.
        report.final_objects = core.store().len();
        report.final_children = views.totals().children;
    }
    Ok(report)
}

/// A WATCH the core peer reads.
struct OpenWatch {
    stream: StreamId,
    body: BodyStream,
    splitter: WatchSplitter,
}

/// The core with the thinnest possible driver: one task does the I/O and completes every
/// reconcile inline, so what is left is the core's own cost plus HTTP. Source `Sn` lists and
/// watches `sources[n]`; `finished(parent, members, related)` tells a reconcile that saw the
/// run's final state. Returns at the sync (sync mode) or after the drain that dispatched
/// that reconcile.
async fn drive_core<O, P>(
    client: kube::Client,
    sources: &[Requests],
    config: Config<O, P>,
    args: &PeerArgs,
    heap: Heap,
    mut finished: impl FnMut(&P, &Members<O>, &[Related]) -> bool,
) -> Result<(PeerReport, ReconcileLoop<O, P>), BenchError>
where
    O: Object,
    P: Ord + std::hash::Hash + Clone,
{
    let transport = Recording::new(client);
    let origin = WallClock::now();
    let now = || Instant::from_nanos(u64::try_from(origin.elapsed().as_nanos()).unwrap_or(0));
    let mut core: ReconcileLoop<O, P> =
        ReconcileLoop::new(config, now()).map_err(|e| BenchError::Peer(e.to_string()))?;
    core.handle_input(now(), Input::Start);
    let mut report = PeerReport::default();
    let mut watches: Vec<OpenWatch> = Vec::new();
    let mut lines = Vec::new();
    let mut lists = Vec::new();
    let mut opens = Vec::new();
    let mut synced_objects = None;
    let mut done = false;
    // The watch polled first rotates, so no stream starves another.
    let mut turn = 0usize;
    // Bounded by the peer's deadline (the caller's timeout) and by this count.
    for _ in 0..u64::MAX / 2 {
        loop {
            match core.poll_output() {
                Output::Command(Command::List {
                    req,
                    source,
                    params,
                    ..
                }) => lists.push((req, source, params)),
                Output::Command(Command::Watch {
                    stream,
                    source,
                    params,
                    resource_version,
                    timeout_seconds,
                    allow_bookmarks,
                    send_initial_events,
                }) => {
                    opens.push((
                        stream,
                        source,
                        params,
                        resource_version,
                        timeout_seconds,
                        (allow_bookmarks, send_initial_events),
                    ));
                }
                Output::Command(Command::CloseWatch { stream }) => {
                    watches.retain(|w| w.stream != stream);
                }
                Output::Command(Command::Reconcile {
                    ticket,
                    parent,
                    members,
                    related,
                    ..
                }) => {
                    report.reconciles += 1;
                    if finished(&parent, &members, &related) && !done {
                        report.done_unix_ns = unix_ns();
                        done = true;
                    }
                    let outcome = Outcome::Success;
                    core.handle_input(now(), Input::Reconciled { ticket, outcome });
                }
                Output::Event(Event::Synced { objects }) => synced_objects = Some(objects),
                Output::Command(_) | Output::Event(_) => {}
                Output::Timeout(_) => break,
            }
        }
        if report.sync_seconds == 0.0 && core.is_synced() {
            report.sync_seconds = origin.elapsed().as_secs_f64();
            report.cpu_at_sync = cpu_now();
            report.cpu_system_at_sync = cpu_split().1;
            report.pods = core.store().len();
            // The sync event counts every source's objects; the rest are the children.
            report.children = synced_objects.unwrap_or(0).saturating_sub(report.pods);
            if !args.throughput {
                report.heap_bytes = heap.settle_and_read().await;
                report.wire = transport.seen.name();
                return Ok((report, core));
            }
        }
        if done {
            report.wire = transport.seen.name();
            return Ok((report, core));
        }
        if !lists.is_empty() || !opens.is_empty() {
            for (req, source, params) in lists.drain(..) {
                let requests = source_requests(sources, source)?;
                let response = core_list(&transport, requests, &params, source).await?;
                core.handle_input(now(), Input::List { req, response });
            }
            for (stream, source, params, rv, timeout, (bookmarks, initial)) in opens.drain(..) {
                let request = source_requests(sources, source)?
                    .watch_with(&params, &rv, timeout, bookmarks, initial)
                    .map_err(|e| BenchError::Peer(e.to_string()))?;
                let response = transport.send(request).await?;
                if response.status().as_u16() != 200 {
                    let code = response.status().as_u16();
                    let end = StreamEnd::HttpStatus { code, body: vec![] };
                    core.handle_input(now(), Input::WatchEnd { stream, end });
                } else {
                    core.handle_input(now(), Input::WatchOpened { stream });
                    // Cut as the answer's `Content-Type` says, as the engine does.
                    let splitter =
                        WatchSplitter::for_content_type(content_type(&response), 64 << 20);
                    watches.push(OpenWatch {
                        stream,
                        body: response.into_body(),
                        splitter,
                    });
                }
            }
            continue;
        }
        if watches.is_empty() {
            // Nothing open: the core waits for a retry delay.
            tokio::time::sleep(Duration::from_millis(10)).await;
            core.handle_input(now(), Input::Timeout);
            continue;
        }
        let (i, read) = futures::future::poll_fn(|cx| {
            let n = watches.len();
            for k in 0..n {
                let i = (turn + k) % n;
                if let Poll::Ready(read) = watches[i].body.poll_next_unpin(cx) {
                    return Poll::Ready((i, read));
                }
            }
            Poll::Pending
        })
        .await;
        turn = turn.wrapping_add(1);
        let stream = watches[i].stream;
        let end = match read {
            Some(Ok(chunk)) => {
                lines.clear();
                match watches[i].splitter.push(&chunk, &mut lines) {
                    Ok(()) => {
                        // Every line of one read is fed before the next drain.
                        for line in lines.drain(..) {
                            core.handle_input(now(), Input::WatchLine { stream, line });
                        }
                        None
                    }
                    Err(e) => Some(StreamEnd::TransportError(e)),
                }
            }
            Some(Err(e)) => Some(StreamEnd::TransportError(e.0)),
            None => match watches[i].splitter.finish() {
                Ok(last) => {
                    if let Some(line) = last {
                        core.handle_input(now(), Input::WatchLine { stream, line });
                    }
                    Some(StreamEnd::Clean)
                }
                Err(e) => Some(StreamEnd::TransportError(e)),
            },
        };
        if let Some(end) = end {
            watches.remove(i);
            core.handle_input(now(), Input::WatchEnd { stream, end });
        }
    }
    Err(BenchError::Peer("the loop bound was reached".into()))
}

/// Where source `source` lists and watches.
fn source_requests(sources: &[Requests], source: SourceId) -> Result<&Requests, BenchError> {
    usize::try_from(source.get())
        .ok()
        .and_then(|n| sources.get(n))
        .ok_or_else(|| BenchError::Peer(format!("no collection for source {source}")))
}

/// Sends one LIST of the core peer. The primary's body is decoded as it streams in, as the
/// drivers do; a secondary's goes to the core raw, as the drivers send it, for the core to
/// decode as that source's type.
async fn core_list<O: Object>(
    transport: &Recording,
    requests: &Requests,
    params: &WatchParams,
    source: SourceId,
) -> Result<ListResponse<O>, BenchError> {
    let request = requests
        .list(params)
        .map_err(|e| BenchError::Peer(e.to_string()))?;
    let response = transport.send(request).await?;
    let status = response.status().as_u16();
    let mut body = response.into_body();
    if status != 200 || source != SourceId::PRIMARY {
        let limit = if status == 200 {
            MAX_LIST_BODY
        } else {
            1 << 20
        };
        let bytes = read_body(&TokioRuntime, &mut body, Duration::from_secs(120), limit).await?;
        let body = bytes.into();
        return Ok(ListResponse::Response { status, body });
    }
    let mut decoder = ListDecoder::<O>::with_limits(list_limits());
    let mut list = Ok(());
    let read = |chunk: bytes::Bytes| {
        if list.is_ok() {
            list = decoder.push(&chunk);
        }
    };
    for_each_chunk(
        &TokioRuntime,
        &mut body,
        Duration::from_secs(120),
        MAX_LIST_BODY,
        read,
    )
    .await?;
    Ok(ListResponse::Decoded(list.and_then(|()| decoder.finish())))
}

/// What the reconcile functions share with the peer's main task.
#[derive(Debug, Default)]
struct Signal {
    done_unix_ns: AtomicI64,
    reconciles: AtomicI64,
    notify: tokio::sync::Notify,
}

impl Signal {
    fn reconciled(&self, finished: bool) {
        self.reconciles.fetch_add(1, Ordering::Relaxed);
        if finished && self.done_unix_ns.load(Ordering::SeqCst) == 0 {
            self.done_unix_ns.store(unix_ns(), Ordering::SeqCst);
            self.notify.notify_one();
        }
    }
}

/// The driver's default bounds, but with room for the scaling run's million pods: the body
/// and item bounds of [`MAX_LIST_BODY`] and [`list_limits`], and 30 min for the LIST.
fn scale_limits() -> reconcile_tokio::engine::Limits {
    reconcile_tokio::engine::Limits {
        max_list_body: MAX_LIST_BODY,
        list_decode: list_limits(),
        list_deadline: Duration::from_secs(1800),
        ..reconcile_tokio::engine::Limits::default()
    }
}

async fn tokio_driver(
    client: kube::Client,
    args: &PeerArgs,
    heap: Heap,
) -> Result<PeerReport, BenchError> {
    let transport = Recording::new(client);
    let seen = Arc::clone(&transport.seen);
    let mut source =
        Source::<PodView, Recording>::pods(transport, Some(&args.namespace)).labels(SELECTOR);
    if args.wire == Wire::Protobuf {
        source = source.protobuf();
    }
    if let Some(n) = args.page_size {
        source = source.page_size(n);
    }
    let by_cell = KeyMap::<PodView, String>::by_label("cell");
    // `reconcile_tokio::Controller` with the transport that notes each response's wire.
    let controller = reconcile_tokio::engine::Controller::<_, _, TokioRuntime, Recording>::new(
        source,
        move |pod: &PodView| by_cell.parent_of(pod),
    )
    .limits(scale_limits());
    let signal = Arc::new(Signal::default());
    let start = WallClock::now();
    let running = controller
        .start(
            |request: Reconcile<PodView, String>, signal: Arc<Signal>| async move {
                let (cell, members) = request.into_parts();
                signal.reconciled(cell == SENTINEL && members.iter().any(|m| is_final_sentinel(m)));
                Ok::<_, Infallible>(Action::await_change())
            },
            default_error_policy,
            Arc::clone(&signal),
        )
        .await
        .map_err(|e| BenchError::Peer(e.to_string()))?;
    let mut report = PeerReport {
        sync_seconds: start.elapsed().as_secs_f64(),
        cpu_at_sync: cpu_now(),
        cpu_system_at_sync: cpu_split().1,
        ..PeerReport::default()
    };
    if args.throughput {
        signal.notify.notified().await;
    } else if heap.measuring() {
        report.heap_bytes = heap.settle_and_read().await;
    }
    // Read after the figures: what the controller's cache holds proves the sync.
    report.pods = running.cache().snapshot().len();
    report.done_unix_ns = signal.done_unix_ns.load(Ordering::SeqCst);
    report.reconciles = signal.reconciles.load(Ordering::Relaxed);
    report.wire = seen.name();
    running.abort();
    Ok(report)
}

/// Waits for `store`'s first sync. `wait_until_ready` alone can miss its wakeup: a
/// `Controller` waits on the same `DelayedInit`, whose futures oneshot keeps one waker, the
/// last poller's. Re-polls every millisecond (the Go peer's resolution too).
async fn kube_wait_ready<K>(
    store: &kube::runtime::reflector::Store<K>,
    deadline: Duration,
) -> Result<(), BenchError>
where
    K: kube::Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    for _ in 0..deadline.as_millis() {
        match tokio::time::timeout(Duration::from_millis(1), store.wait_until_ready()).await {
            Ok(ready) => return ready.map_err(|e| BenchError::Peer(e.to_string())),
            Err(_) => continue,
        }
    }
    Err(BenchError::Peer("the store never became ready".into()))
}

/// Whether `meta` is a sentinel's (pod or ReplicaSet) in its final state.
fn kube_final_sentinel(meta: &ObjectMeta) -> bool {
    meta.name.as_deref() == Some(SENTINEL)
        && meta
            .annotations
            .as_ref()
            .and_then(|a| a.get(PHASE_ANNOTATION))
            .is_some_and(|p| p == "end")
}

async fn kube_runtime(
    client: kube::Client,
    args: &PeerArgs,
    heap: Heap,
) -> Result<PeerReport, BenchError> {
    use kube::runtime::controller::{Action as KubeAction, Controller};
    use kube::runtime::watcher;

    let api: kube::Api<Pod> = kube::Api::namespaced(client, &args.namespace);
    let signal = Arc::new(Signal::default());
    let start = WallClock::now();
    let mut config = watcher::Config::default().labels(SELECTOR);
    if let Some(n) = args.page_size {
        // kube-runtime has no "unpaged": a page as large as any listing here is one request.
        config = config.page_size(if n == 0 { u32::MAX } else { n });
    }
    let controller = Controller::new(api, config);
    let store = controller.store();
    let task = tokio::spawn(
        controller
            .run(
                |pod: Arc<Pod>, signal: Arc<Signal>| async move {
                    signal.reconciled(kube_final_sentinel(&pod.metadata));
                    Ok::<_, Infallible>(KubeAction::await_change())
                },
                |_pod: Arc<Pod>, _error: &Infallible, _signal: Arc<Signal>| {
                    KubeAction::await_change()
                },
                Arc::clone(&signal),
            )
            .for_each(|_| async {}),
    );
    kube_wait_ready(&store, args.deadline).await?;
    let mut report = PeerReport {
        sync_seconds: start.elapsed().as_secs_f64(),
        cpu_at_sync: cpu_now(),
        cpu_system_at_sync: cpu_split().1,
        ..PeerReport::default()
    };
    if args.throughput {
        signal.notify.notified().await;
    } else if heap.measuring() {
        report.heap_bytes = heap.settle_and_read().await;
    }
    report.pods = store.state().len();
    report.done_unix_ns = signal.done_unix_ns.load(Ordering::SeqCst);
    report.reconciles = signal.reconciles.load(Ordering::Relaxed);
    task.abort();
    Ok(report)
}

/// What the two-source tokio peer's reconciles share with its main task.
#[derive(Debug)]
struct OwnedContext {
    signal: Arc<Signal>,
    views: Arc<Views>,
}

/// Waits until every wake has been reconciled: no reconcile started for 200 ms, and the
/// core dispatched no more than started. At most 10 s.
async fn settle_tokio(
    signal: &Signal,
    handle: &reconcile_tokio::Handle<ReplicaSetView, ObjectKey>,
) -> Result<(), BenchError> {
    let mut last = -1;
    let mut quiet = 0;
    for _ in 0..1000 {
        tokio::time::sleep(Duration::from_millis(10)).await;
        let started = signal.reconciles.load(Ordering::SeqCst);
        let dispatched = i64::try_from(handle.stats().reconciles).unwrap_or(i64::MAX);
        if started == last && started == dispatched {
            quiet += 1;
            if quiet >= 20 {
                return Ok(());
            }
        } else {
            quiet = 0;
            last = started;
        }
    }
    Err(BenchError::Peer("the controller did not settle".into()))
}

async fn tokio_owned(
    client: kube::Client,
    args: &PeerArgs,
    heap: Heap,
    views: Arc<Views>,
) -> Result<PeerReport, BenchError> {
    let transport = KubeTransport::new(client);
    let namespace = &args.namespace;
    let replica_sets = Source::<ReplicaSetView, KubeTransport>::kubernetes(
        transport.clone(),
        Resource::ReplicaSets.path(namespace),
        WatchParams::namespaced(namespace),
    )
    .labels(SELECTOR);
    let pods = Source::pods(transport, Some(namespace)).labels(SELECTOR);
    // `owns_kind`: the view's type names no kind (as a `DynamicObject`'s does not), so the
    // owner kind `owns` would read from it is given.
    let controller =
        reconcile_tokio::Controller::<ReplicaSetView, ObjectKey>::for_objects(replica_sets)
            .owns_kind(pods, "ReplicaSet");
    let signal = Arc::new(Signal::default());
    let context = Arc::new(OwnedContext {
        signal: Arc::clone(&signal),
        views: Arc::clone(&views),
    });
    let start = WallClock::now();
    let running = controller
        .start(
            |request: Reconcile<ReplicaSetView, ObjectKey>, ctx: Arc<OwnedContext>| async move {
                let children = request.related::<PodView>();
                let rs = request.object();
                ctx.views
                    .record(request.parent(), rs.is_some(), children.len());
                let finished = rs.is_some_and(|rs| is_final_sentinel_replica_set(rs))
                    && children.iter().any(|pod| is_final_sentinel(pod));
                ctx.signal.reconciled(finished);
                Ok::<_, Infallible>(Action::await_change())
            },
            default_error_policy,
            context,
        )
        .await
        .map_err(|e| BenchError::Peer(e.to_string()))?;
    let mut report = PeerReport {
        sync_seconds: start.elapsed().as_secs_f64(),
        cpu_at_sync: cpu_now(),
        cpu_system_at_sync: cpu_split().1,
        ..PeerReport::default()
    };
    if args.throughput {
        signal.notify.notified().await;
        settle_tokio(&signal, running.handle()).await?;
        report.final_objects = running.cache().snapshot().len();
        report.final_children = views.totals().children;
    } else {
        if heap.measuring() {
            report.heap_bytes = heap.settle_and_read().await;
        }
        report.pods = running.cache().snapshot().len();
        // Every ReplicaSet is reconciled once after the sync, with the children it had then.
        for _ in 0..1000 {
            if views.totals().parents >= report.pods {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        report.children = views.totals().children;
    }
    report.done_unix_ns = signal.done_unix_ns.load(Ordering::SeqCst);
    report.reconciles = signal.reconciles.load(Ordering::Relaxed);
    running.abort();
    Ok(report)
}

/// What the two-source kube-runtime peer's reconciles share with its main task.
struct KubeOwnedContext {
    signal: Arc<Signal>,
    pods: kube::runtime::reflector::Store<Pod>,
    sentinel: kube::runtime::reflector::ObjectRef<Pod>,
}

/// kube-runtime's `owns` caches no child: it is `owns_stream` over a `metadata_watcher`'s
/// touched objects. A reconcile that reads its children (as ours get them, at dispatch)
/// needs them in a store, so the children's stream goes through a `reflector` first; the
/// trigger (`trigger_owners` on the controller owner) is `owns`'s.
async fn kube_owned(
    client: kube::Client,
    args: &PeerArgs,
    heap: Heap,
) -> Result<PeerReport, BenchError> {
    use kube::runtime::controller::{Action as KubeAction, Controller};
    use kube::runtime::reflector::{self, ObjectRef};
    use kube::runtime::{WatchStreamExt as _, watcher};

    let namespace = &args.namespace;
    let replica_sets: kube::Api<ReplicaSet> = kube::Api::namespaced(client.clone(), namespace);
    let pods_api: kube::Api<Pod> = kube::Api::namespaced(client, namespace);
    let config = watcher::Config::default().labels(SELECTOR);
    let (pods, writer) = reflector::store::<Pod>();
    let children =
        reflector::reflector(writer, watcher(pods_api, config.clone())).touched_objects();
    let signal = Arc::new(Signal::default());
    let context = Arc::new(KubeOwnedContext {
        signal: Arc::clone(&signal),
        pods: pods.clone(),
        sentinel: ObjectRef::new(SENTINEL).within(namespace),
    });
    let start = WallClock::now();
    let controller = Controller::new(replica_sets, config).owns_stream(children);
    let store = controller.store();
    let task = tokio::spawn(
        controller
            .run(
                |rs: Arc<ReplicaSet>, ctx: Arc<KubeOwnedContext>| async move {
                    let finished = kube_final_sentinel(&rs.metadata)
                        && ctx
                            .pods
                            .get(&ctx.sentinel)
                            .is_some_and(|pod| kube_final_sentinel(&pod.metadata));
                    ctx.signal.reconciled(finished);
                    Ok::<_, Infallible>(KubeAction::await_change())
                },
                |_rs: Arc<ReplicaSet>, _error: &Infallible, _ctx: Arc<KubeOwnedContext>| {
                    KubeAction::await_change()
                },
                context,
            )
            .for_each(|_| async {}),
    );
    kube_wait_ready(&store, args.deadline).await?;
    kube_wait_ready(&pods, args.deadline).await?;
    let mut report = PeerReport {
        sync_seconds: start.elapsed().as_secs_f64(),
        cpu_at_sync: cpu_now(),
        cpu_system_at_sync: cpu_split().1,
        ..PeerReport::default()
    };
    if args.throughput {
        signal.notify.notified().await;
        // The reflectors apply every frame before it triggers a reconcile, and both
        // sentinels' last frames came last: the stores hold the final state.
        report.final_objects = store.state().len();
        report.final_children = pods.state().len();
    } else {
        if heap.measuring() {
            report.heap_bytes = heap.settle_and_read().await;
        }
        report.pods = store.state().len();
        report.children = pods.state().len();
    }
    report.done_unix_ns = signal.done_unix_ns.load(Ordering::SeqCst);
    report.reconciles = signal.reconciles.load(Ordering::Relaxed);
    task.abort();
    Ok(report)
}

/// Peak RSS (VmHWM, KiB) and user + system CPU seconds of this process, from `/proc`.
#[must_use]
pub fn proc_stats() -> (i64, f64) {
    let rss = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0);
    let cpu = std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| {
            let rest = &s[s.rfind(')')? + 1..];
            let fields: Vec<&str> = rest.split_whitespace().collect();
            let user: f64 = fields.get(11)?.parse().ok()?;
            let system: f64 = fields.get(12)?.parse().ok()?;
            Some((user + system) / 100.0)
        })
        .unwrap_or(0.0);
    (rss, cpu)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_pod_peers_speak_protobuf_and_kube_runtime_does_not() {
        for kind in [PeerKind::Bare, PeerKind::Core, PeerKind::Tokio] {
            assert!(our_wire(kind, Scenario::Pods, Wire::Protobuf).is_ok());
            assert!(our_wire(kind, Scenario::Pods, Wire::Json).is_ok());
        }
        let kube = our_wire(PeerKind::Kube, Scenario::Pods, Wire::Protobuf).unwrap_err();
        assert!(kube.to_string().contains("JSON only"), "{kube}");
        assert!(our_wire(PeerKind::Kube, Scenario::Pods, Wire::Json).is_ok());
        let owned = our_wire(PeerKind::Tokio, Scenario::Owned, Wire::Protobuf).unwrap_err();
        assert!(owned.to_string().contains("ReplicaSetView"), "{owned}");
    }

    #[test]
    fn the_wire_reported_is_what_the_responses_said() {
        let seen = WireSeen::default();
        assert_eq!(seen.name(), "", "nothing read, nothing claimed");
        seen.record("application/vnd.kubernetes.protobuf");
        seen.record("application/vnd.kubernetes.protobuf;stream=watch");
        assert_eq!(seen.name(), "protobuf");
        seen.record("application/json");
        assert_eq!(seen.name(), "json+protobuf", "a JSON answer is not hidden");
        let json = WireSeen::default();
        json.record("application/json; charset=utf-8");
        assert_eq!(json.name(), "json");
        json.record("text/plain");
        assert_eq!(json.name(), "other (text/plain)");
    }
}
