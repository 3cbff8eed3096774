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

use std::convert::Infallible;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant as WallClock, SystemTime};

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Pod;
use reconcile_core::list::ListDecoder;
use reconcile_core::pod::PodView;
use reconcile_core::{
    Command, Config, Input, Instant, KeyMap, ListResponse, Outcome, Output, ReconcileLoop,
    StreamEnd, WatchParams,
};
use reconcile_tokio::engine::Transport as _;
use reconcile_tokio::engine::lines::LineSplitter;
use reconcile_tokio::engine::transport::{BodyStream, Requests, for_each_chunk, read_body};
use reconcile_tokio::{
    Action, KubeTransport, Reconcile, Source, TokioRuntime, default_error_policy,
};
use serde::{Deserialize, Serialize};

use crate::BenchError;
use crate::workload::{PHASE_ANNOTATION, SELECTOR, SENTINEL};

/// What a peer process prints, one JSON line (the Go peer prints the same fields).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct PeerReport {
    /// `bare`, `core`, `tokio`, `kube` or `client-go`.
    pub peer: String,
    /// Objects in the cache once synced (0 where the peer cannot tell).
    pub pods: usize,
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
    /// Wait for the sentinel's last frame (throughput) or stop after the sync.
    pub throughput: bool,
    /// Give up after this long.
    pub deadline: Duration,
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
    report
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
    let heap = Heap {
        probe,
        baseline: probe.map_or(0, |p| p()),
    };
    let client = client(&args.target).await?;
    let mut report = match args.kind {
        PeerKind::Bare => bare(client, args).await?,
        PeerKind::Core => core(client, args, heap).await?,
        PeerKind::Tokio => tokio_driver(client, args, heap).await?,
        PeerKind::Kube => kube_runtime(client, args, heap).await?,
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

async fn bare(client: kube::Client, args: &PeerArgs) -> Result<PeerReport, BenchError> {
    let transport = KubeTransport::new(client);
    let params = WatchParams::namespaced(&args.namespace).labels(SELECTOR);
    let start = WallClock::now();
    let request = Requests::new(collection(&args.namespace))
        .list(&params)
        .map_err(|e| BenchError::Peer(e.to_string()))?;
    let response = transport.send(request).await?;
    let mut body = response.into_body();
    let bytes = read_body(&TokioRuntime, &mut body, Duration::from_secs(120), 4 << 30).await?;
    let list = reconcile_core::list::parse_list::<PodView>(&bytes)
        .map_err(|e| BenchError::Peer(e.to_string()))?;
    Ok(PeerReport {
        pods: list.items.len(),
        sync_seconds: start.elapsed().as_secs_f64(),
        ..PeerReport::default()
    })
}

/// The core with the thinnest possible driver: one task does the I/O and completes every
/// reconcile inline, so what is left is the core's own cost plus HTTP.
async fn core(client: kube::Client, args: &PeerArgs, heap: Heap) -> Result<PeerReport, BenchError> {
    let transport = KubeTransport::new(client);
    let requests = Requests::new(collection(&args.namespace));
    let config = Config::kubernetes(
        WatchParams::namespaced(&args.namespace).labels(SELECTOR),
        KeyMap::by_label("cell"),
    );
    let origin = WallClock::now();
    let now = || Instant::from_nanos(u64::try_from(origin.elapsed().as_nanos()).unwrap_or(0));
    let mut core: ReconcileLoop<PodView, String> =
        ReconcileLoop::new(config, now()).map_err(|e| BenchError::Peer(e.to_string()))?;
    core.handle_input(now(), Input::Start);
    let mut report = PeerReport::default();
    let mut watch: Option<(reconcile_core::StreamId, BodyStream)> = None;
    let mut splitter = LineSplitter::new(64 << 20);
    let mut lines = Vec::new();
    let mut done = false;
    // Bounded by the peer's deadline (the caller's timeout) and by this count.
    for _ in 0..u64::MAX / 2 {
        let mut list = None;
        let mut open = None;
        loop {
            match core.poll_output() {
                Output::Command(Command::List { req, params, .. }) => list = Some((req, params)),
                Output::Command(Command::Watch {
                    stream,
                    params,
                    resource_version,
                    timeout_seconds,
                    allow_bookmarks,
                    ..
                }) => {
                    open = Some((
                        stream,
                        params,
                        resource_version,
                        timeout_seconds,
                        allow_bookmarks,
                    ));
                }
                Output::Command(Command::CloseWatch { .. }) => watch = None,
                Output::Command(Command::Reconcile {
                    ticket,
                    parent,
                    members,
                    ..
                }) => {
                    report.reconciles += 1;
                    if parent == SENTINEL && members.iter().any(|m| is_final_sentinel(m)) {
                        report.done_unix_ns = unix_ns();
                        done = true;
                    }
                    let outcome = Outcome::Success;
                    core.handle_input(now(), Input::Reconciled { ticket, outcome });
                }
                Output::Command(_) | Output::Event(_) => {}
                Output::Timeout(_) => break,
            }
        }
        if report.sync_seconds == 0.0 && core.is_synced() {
            report.sync_seconds = origin.elapsed().as_secs_f64();
            report.pods = core.store().len();
            if !args.throughput {
                report.heap_bytes = heap.settle_and_read().await;
                return Ok(report);
            }
        }
        if done {
            return Ok(report);
        }
        if let Some((req, params)) = list {
            let request = requests
                .list(&params)
                .map_err(|e| BenchError::Peer(e.to_string()))?;
            let response = transport.send(request).await?;
            let status = response.status().as_u16();
            let mut body = response.into_body();
            if status != 200 {
                let bytes =
                    read_body(&TokioRuntime, &mut body, Duration::from_secs(120), 1 << 20).await?;
                let body = bytes.into();
                let response = ListResponse::Response { status, body };
                core.handle_input(now(), Input::List { req, response });
                continue;
            }
            // Decoded as it streams in, as the drivers do.
            let mut decoder = ListDecoder::<PodView>::new();
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
                4 << 30,
                read,
            )
            .await?;
            let list = list.and_then(|()| decoder.finish());
            let response = ListResponse::Decoded(list);
            core.handle_input(now(), Input::List { req, response });
            continue;
        }
        if let Some((stream, params, rv, timeout, bookmarks)) = open {
            let request = requests
                .watch(&params, &rv, timeout, bookmarks)
                .map_err(|e| BenchError::Peer(e.to_string()))?;
            let response = transport.send(request).await?;
            if response.status().as_u16() != 200 {
                let code = response.status().as_u16();
                let end = StreamEnd::HttpStatus { code, body: vec![] };
                core.handle_input(now(), Input::WatchEnd { stream, end });
            } else {
                core.handle_input(now(), Input::WatchOpened { stream });
                watch = Some((stream, response.into_body()));
            }
            continue;
        }
        match watch.as_mut() {
            Some((stream, body)) => {
                let stream = *stream;
                match body.next().await {
                    Some(Ok(chunk)) => {
                        lines.clear();
                        if let Err(e) = splitter.push(&chunk, &mut lines) {
                            let end = StreamEnd::TransportError(e.to_string());
                            core.handle_input(now(), Input::WatchEnd { stream, end });
                            watch = None;
                            continue;
                        }
                        // Every line of one read is fed before the next drain.
                        for line in lines.drain(..) {
                            core.handle_input(now(), Input::WatchLine { stream, line });
                        }
                    }
                    Some(Err(e)) => {
                        let end = StreamEnd::TransportError(e.0);
                        core.handle_input(now(), Input::WatchEnd { stream, end });
                        watch = None;
                    }
                    None => {
                        let end = StreamEnd::Clean;
                        core.handle_input(now(), Input::WatchEnd { stream, end });
                        watch = None;
                    }
                }
            }
            None => {
                // Nothing open: the core waits for a retry delay.
                tokio::time::sleep(Duration::from_millis(10)).await;
                core.handle_input(now(), Input::Timeout);
            }
        }
    }
    Err(BenchError::Peer("the loop bound was reached".into()))
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

async fn tokio_driver(
    client: kube::Client,
    args: &PeerArgs,
    heap: Heap,
) -> Result<PeerReport, BenchError> {
    let source = Source::pods(KubeTransport::new(client), Some(&args.namespace)).labels(SELECTOR);
    let by_cell = KeyMap::<PodView, String>::by_label("cell");
    let controller =
        reconcile_tokio::Controller::new(source, move |pod: &PodView| by_cell.parent_of(pod));
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
    running.abort();
    Ok(report)
}

fn kube_final_sentinel(pod: &Pod) -> bool {
    pod.metadata.name.as_deref() == Some(SENTINEL)
        && pod
            .metadata
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
    let controller = Controller::new(api, watcher::Config::default().labels(SELECTOR));
    let store = controller.store();
    let task = tokio::spawn(
        controller
            .run(
                |pod: Arc<Pod>, signal: Arc<Signal>| async move {
                    signal.reconciled(kube_final_sentinel(&pod));
                    Ok::<_, Infallible>(KubeAction::await_change())
                },
                |_pod: Arc<Pod>, _error: &Infallible, _signal: Arc<Signal>| {
                    KubeAction::await_change()
                },
                Arc::clone(&signal),
            )
            .for_each(|_| async {}),
    );
    // `wait_until_ready` alone can miss its wakeup: the Controller waits on the same
    // `DelayedInit`, whose futures oneshot keeps one waker, the last poller's. Re-poll every
    // millisecond (the Go peer's resolution too).
    for _ in 0..args.deadline.as_millis() {
        match tokio::time::timeout(Duration::from_millis(1), store.wait_until_ready()).await {
            Ok(ready) => {
                ready.map_err(|e| BenchError::Peer(e.to_string()))?;
                break;
            }
            Err(_) => continue,
        }
    }
    let mut report = PeerReport {
        sync_seconds: start.elapsed().as_secs_f64(),
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
