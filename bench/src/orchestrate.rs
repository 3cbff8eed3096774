//! Runs every peer on every input, several times, and collects the medians.
//!
//! Order: the peers take turns inside each repetition, so a burst of load from other work
//! on the machine spreads over all of them instead of landing on one.

use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use serde_json::Value;

use crate::BenchError;
use crate::peers::{PeerReport, Scenario, Wire};
use crate::replay::{Mode, ReplayServer};
use crate::workload::{self, NAMESPACE, PODS_PER_CELL, Workload};

/// How much to run.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Repetitions of every measurement (medians are taken over them).
    pub runs: usize,
    /// Pod counts for time to sync on the replay server.
    pub sync_sizes: Vec<usize>,
    /// Pod count for throughput and heap per pod.
    pub throughput_pods: usize,
    /// ReplicaSets in the two-source scenario, each owning [`PODS_PER_CELL`] pods.
    pub owned_parents: usize,
    /// Frames per throughput run.
    pub frames: usize,
    /// Pod counts for time to sync on the real apiserver (empty: skip it).
    pub real_sizes: Vec<usize>,
    /// Longest the real-cluster pod creation may take, all sizes together.
    pub create_budget: Duration,
    /// Longest one peer run may take.
    pub deadline: Duration,
    /// Pod counts for the paging measurement on the real apiserver (empty: skip it).
    pub paging_sizes: Vec<usize>,
    /// LIST page sizes measured there (`0`: one unpaged LIST).
    pub page_sizes: Vec<u32>,
    /// Repetitions of each paging measurement.
    pub paging_runs: usize,
    /// Writes per second the load generator makes in the real-apiserver throughput runs
    /// (empty: skip them).
    pub write_rates: Vec<usize>,
    /// Pods the load generator creates (then patches once each) per throughput run.
    pub write_pods: usize,
    /// Repetitions of each real-apiserver throughput run.
    pub write_runs: usize,
    /// The wire formats our peers (`core`, `tokio`) are run with on the real apiserver
    /// (see [`crate::peers::our_wire`]): each is a row of its own.
    pub our_wires: Vec<Wire>,
    /// Which parts to run (all by default). A partial run of sections that have their own
    /// block in the doc ([`Section::spliced`]) replaces just those blocks; a run of the
    /// scaling section alone rewrites only that section of the doc (and its plot); any other
    /// partial run is for a look, not for the doc.
    pub sections: Vec<Section>,
    /// Pod counts of the scaling section (issue 16).
    pub scale_sizes: Vec<usize>,
    /// Largest pod count kube-runtime and client-go are run at in the scaling section.
    pub scale_peer_max: usize,
    /// Frames per throughput run of the scaling section (CPU per frame).
    pub scale_frames: usize,
    /// Object counts of the core-alone probes (relist, resync); the one-parent probe's
    /// member counts are a tenth of them.
    pub probe_sizes: Vec<usize>,
}

/// One part of the harness.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    /// Steady-state frames/s and heap per pod, on the replay server.
    Throughput,
    /// The same for two sources: ReplicaSets owning pods (issue 13).
    Owned,
    /// Time to first sync on the replay server.
    Replay,
    /// Time to first sync on the real kube-apiserver.
    Real,
    /// Paged against unpaged LIST on the real kube-apiserver, watch cache on and off.
    Paging,
    /// A load generator writing pods at a fixed rate to the real kube-apiserver, every
    /// peer watching: events/s and CPU per event.
    RealThroughput,
    /// Cost against object count, 1k to 1M pods, and the core-alone probes (issue 16).
    Scale,
}

impl Section {
    /// All sections, in the order they run.
    pub const ALL: [Section; 7] = [
        Section::Throughput,
        Section::Owned,
        Section::Replay,
        Section::Real,
        Section::Paging,
        Section::RealThroughput,
        Section::Scale,
    ];

    /// Parses `throughput`, `owned`, `replay`, `real`, `paging`, `real-throughput` or `scale`.
    #[must_use]
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "throughput" => Some(Section::Throughput),
            "owned" => Some(Section::Owned),
            "replay" => Some(Section::Replay),
            "real" => Some(Section::Real),
            "paging" => Some(Section::Paging),
            "real-throughput" => Some(Section::RealThroughput),
            "scale" => Some(Section::Scale),
            _ => None,
        }
    }

    /// Whether the section has its own block in the doc, which a run of only such
    /// sections replaces in place (`crate::doc::splice`).
    #[must_use]
    pub fn spliced(self) -> bool {
        matches!(
            self,
            Section::Real | Section::Paging | Section::RealThroughput
        )
    }
}

impl Settings {
    /// The full figures: 5 runs; 1k, 10k, 50k pods; 10k pods and 50k frames; 1k
    /// ReplicaSets owning 10k pods and 50k frames.
    #[must_use]
    pub fn full() -> Self {
        Settings {
            runs: 5,
            sync_sizes: vec![1_000, 10_000, 50_000],
            throughput_pods: 10_000,
            owned_parents: 1_000,
            frames: 50_000,
            real_sizes: vec![1_000, 10_000, 50_000],
            create_budget: Duration::from_secs(900),
            deadline: Duration::from_secs(300),
            paging_sizes: vec![10_000, 50_000],
            page_sizes: vec![0, 500, 1_000, 5_000],
            paging_runs: 3,
            write_rates: vec![100, 300],
            write_pods: 5_000,
            write_runs: 2,
            our_wires: vec![Wire::Json, Wire::Protobuf],
            sections: Section::ALL.to_vec(),
            scale_sizes: vec![1_000, 10_000, 100_000, 1_000_000],
            scale_peer_max: 100_000,
            scale_frames: 20_000,
            probe_sizes: vec![10_000, 100_000, 1_000_000],
        }
    }

    /// A quick look (one run, small sizes): checks the harness, not the figures.
    #[must_use]
    pub fn quick() -> Self {
        Settings {
            runs: 1,
            sync_sizes: vec![1_000],
            throughput_pods: 1_000,
            owned_parents: 100,
            frames: 5_000,
            real_sizes: vec![300],
            create_budget: Duration::from_secs(120),
            deadline: Duration::from_secs(120),
            paging_sizes: vec![300],
            page_sizes: vec![0, 100],
            paging_runs: 1,
            write_rates: vec![50],
            write_pods: 100,
            write_runs: 1,
            our_wires: vec![Wire::Json, Wire::Protobuf],
            sections: Section::ALL.to_vec(),
            scale_sizes: vec![1_000, 10_000],
            scale_peer_max: 10_000,
            scale_frames: 2_000,
            probe_sizes: vec![1_000, 10_000],
        }
    }
}

/// The peers in table order.
pub const PEERS: [&str; 5] = ["bare", "core", "tokio", "kube", "client-go"];

/// The peers in the order of run `run`: each run starts one peer later, so that no peer
/// always follows the same one (a LIST leaves garbage that the apiserver may collect
/// during the next peer's).
fn rotated(run: usize) -> impl Iterator<Item = &'static str> {
    let start = run % PEERS.len();
    PEERS[start..].iter().chain(&PEERS[..start]).copied()
}

/// Where the peer binaries are.
#[derive(Debug, Clone)]
pub struct Binaries {
    /// The uninstrumented Rust peers (`reconcile-bench`).
    pub rust: PathBuf,
    /// The same peers with a counting allocator (`reconcile-bench-heap`).
    pub rust_heap: PathBuf,
    /// The client-go peer.
    pub go: PathBuf,
}

impl Binaries {
    /// The Rust binaries next to `exe`, and the Go peer built by `bench/go/build.sh`.
    ///
    /// # Errors
    /// The Go build failed or a binary is missing.
    pub fn locate(exe: &Path) -> Result<Self, BenchError> {
        let dir = exe
            .parent()
            .ok_or_else(|| BenchError::Input(format!("{}: no parent", exe.display())))?;
        let rust = dir.join("reconcile-bench");
        let rust_heap = dir.join("reconcile-bench-heap");
        for bin in [&rust, &rust_heap] {
            if !bin.exists() {
                return Err(BenchError::Input(format!(
                    "{} is missing: cargo build --release -p reconcile-bench --bins",
                    bin.display()
                )));
            }
        }
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/go/build.sh");
        let out = Command::new("bash")
            .arg(script)
            .stderr(Stdio::inherit())
            .output()?;
        if !out.status.success() {
            return Err(BenchError::Input(format!(
                "{script} failed ({})",
                out.status
            )));
        }
        let go = String::from_utf8_lossy(&out.stdout)
            .lines()
            .last()
            .unwrap_or_default()
            .trim()
            .to_owned();
        Ok(Binaries {
            rust,
            rust_heap,
            go: PathBuf::from(go),
        })
    }
}

/// Where a peer connects, as command-line arguments.
#[derive(Debug, Clone)]
pub(crate) enum Conn {
    Server(String),
    Kubeconfig(PathBuf),
}

/// What one peer process is asked to do.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Run<'a> {
    pub(crate) namespace: &'a str,
    pub(crate) scenario: Scenario,
    /// Wait for the sentinel's last frame, or stop after the sync.
    pub(crate) throughput: bool,
    pub(crate) deadline: Duration,
    /// LIST page size (`None`: the peer's default; `Some(0)`: one request).
    pub(crate) page_size: Option<u32>,
    /// The wire format to ask for (`None`: the peer's default, see [`default_wire`]).
    pub(crate) wire: Option<Wire>,
}

/// What a peer asks for when the harness does not say: client-go its typed clients'
/// protobuf preference (JSON from the replay server, which speaks nothing else), the Rust
/// peers JSON.
#[must_use]
pub fn default_wire(peer: &str) -> Wire {
    if peer == "client-go" {
        Wire::Protobuf
    } else {
        Wire::Json
    }
}

/// Runs one peer process and parses its report. Bounded by `deadline` plus 30 s, after
/// which the child is killed.
pub(crate) fn spawn_peer(
    bins: &Binaries,
    peer: &str,
    heap: bool,
    conn: &Conn,
    run: Run<'_>,
) -> PeerReport {
    match start_peer(bins, peer, heap, conn, run) {
        Ok(child) => finish_peer(child, peer, Instant::now() + run.deadline),
        Err(e) => PeerReport {
            peer: peer.to_owned(),
            error: Some(format!("spawn: {e}")),
            ..PeerReport::default()
        },
    }
}

/// Starts one peer process, its report to be read by [`finish_peer`].
pub(crate) fn start_peer(
    bins: &Binaries,
    peer: &str,
    heap: bool,
    conn: &Conn,
    run: Run<'_>,
) -> std::io::Result<std::process::Child> {
    let Run {
        namespace,
        scenario,
        throughput,
        deadline,
        page_size,
        wire,
    } = run;
    let wire = wire.unwrap_or_else(|| default_wire(peer));
    let mode = if throughput { "throughput" } else { "sync" };
    let mut cmd = if peer == "client-go" {
        let mut c = Command::new(&bins.go);
        match conn {
            Conn::Server(url) => c.args(["-server", url]),
            Conn::Kubeconfig(path) => c.arg("-kubeconfig").arg(path),
        };
        c.args(["-namespace", namespace, "-mode", mode])
            .args(["-scenario", scenario.name()])
            .args(["-wire", wire.name()])
            .arg(format!("-deadline={}s", deadline.as_secs()));
        c
    } else {
        let mut c = Command::new(if heap { &bins.rust_heap } else { &bins.rust });
        c.args(["peer", peer]);
        match conn {
            Conn::Server(url) => c.args(["--server", url]),
            Conn::Kubeconfig(path) => c.arg("--kubeconfig").arg(path),
        };
        c.args(["--namespace", namespace, "--mode", mode])
            .args(["--scenario", scenario.name()])
            .args(["--deadline", &deadline.as_secs().to_string()])
            .args(["--wire", wire.name()]);
        if let Some(n) = page_size {
            c.args(["--page-size", &n.to_string()]);
        }
        c
    };
    // A profile, for a look (perf's own cost lands in the figures): each throughput peer
    // under `perf record`, its samples in $RECONCILE_BENCH_PERF/<peer>-<wire>.data.
    if throughput && let Some(dir) = std::env::var_os("RECONCILE_BENCH_PERF") {
        let data = Path::new(&dir).join(format!("{peer}-{}.data", wire.name()));
        let mut perf = Command::new("perf");
        perf.args(["record", "-F", "999", "-o"])
            .arg(data)
            .arg("--")
            .arg(cmd.get_program())
            .args(cmd.get_args());
        cmd = perf;
    }
    cmd.stdout(Stdio::piped()).stderr(Stdio::null()).spawn()
}

/// Waits for a peer started by [`start_peer`] and parses its report; kills it 30 s after
/// `deadline`.
pub(crate) fn finish_peer(
    mut child: std::process::Child,
    peer: &str,
    deadline: Instant,
) -> PeerReport {
    let failed = |error: String| PeerReport {
        peer: peer.to_owned(),
        error: Some(error),
        ..PeerReport::default()
    };
    let limit = deadline + Duration::from_secs(30);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() < limit => std::thread::sleep(Duration::from_millis(10)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    let mut out = String::new();
    if let Some(mut stdout) = child.stdout.take() {
        let _ = stdout.read_to_string(&mut out);
    }
    let line = out.lines().rev().find(|l| l.starts_with('{'));
    match (status, line) {
        (None, _) => failed("killed after its deadline".into()),
        (Some(_), Some(line)) => serde_json::from_str(line)
            .unwrap_or_else(|e| failed(format!("bad report {line:?}: {e}"))),
        (Some(status), None) => failed(format!("no report ({status})")),
    }
}

/// Appends `value` to `map[key]`.
pub(crate) fn push<K: Ord>(map: &mut BTreeMap<K, Vec<f64>>, key: K, value: f64) {
    map.entry(key).or_default().push(value);
}

/// One measured number per repetition, by peer and input.
#[derive(Debug, Clone, Default)]
pub struct Results {
    /// `sync[(source, pods, peer)]`: seconds to first sync.
    pub sync: BTreeMap<(String, usize, String), Vec<f64>>,
    /// Frames per second through to reconcile dispatch, by peer.
    pub throughput: BTreeMap<String, Vec<f64>>,
    /// Heap bytes per cached pod, by peer.
    pub heap_per_pod: BTreeMap<String, Vec<f64>>,
    /// Heap after the sync that does not grow with the pod count (MiB), by peer.
    pub heap_fixed_mib: BTreeMap<String, Vec<f64>>,
    /// Peak RSS in MiB, by (scenario, peer).
    pub rss_mib: BTreeMap<(String, String), Vec<f64>>,
    /// CPU seconds, by (scenario, peer).
    pub cpu_seconds: BTreeMap<(String, String), Vec<f64>>,
    /// Reconciles per throughput run, by peer.
    pub reconciles: BTreeMap<String, Vec<f64>>,
    /// Two sources: frames per second over both, by peer.
    pub owned_throughput: BTreeMap<String, Vec<f64>>,
    /// Two sources: reconciles per throughput run, by peer.
    pub owned_reconciles: BTreeMap<String, Vec<f64>>,
    /// Two sources: heap bytes per cached object (ReplicaSets and pods alike), by peer.
    pub owned_heap_per_object: BTreeMap<String, Vec<f64>>,
    /// Two sources: heap after the sync that does not grow with the object count (MiB).
    pub owned_heap_fixed_mib: BTreeMap<String, Vec<f64>>,
    /// Requests each peer made to the replay server (from its last throughput run).
    pub requests: BTreeMap<String, BTreeMap<String, usize>>,
    /// The apiserver's CPU seconds over one peer's sync, by (pods, peer).
    pub real_sync_apiserver_cpu: BTreeMap<(usize, String), Vec<f64>>,
    /// The wire format each peer's responses came in on the real apiserver, as it reported.
    pub real_wires: BTreeMap<String, String>,
    /// Paging on the real apiserver, one entry per run.
    pub paging: Vec<crate::real::PagingRun>,
    /// Real-apiserver throughput, one entry per peer per run.
    pub real_throughput: Vec<crate::real::ThroughputRun>,
    /// Scaling section: `scale[(metric, pods, peer)]`, metrics `sync` (s), `rss` (MiB),
    /// `cpu-sync` (s), `heap` (bytes after the sync, fixed part included), `frames-per-s`,
    /// `cpu-per-frame` (µs: the throughput run's CPU less the sync run's, over the frames).
    pub scale: BTreeMap<(String, usize, String), Vec<f64>>,
    /// Core-alone probes: `probes[(probe, objects)]` wall seconds and CPU seconds.
    pub probes: BTreeMap<(String, usize), Vec<(f64, f64)>>,
    /// Failures, as `peer, input: error`.
    pub failures: Vec<String>,
    /// Notes about the run (machine load, object sizes, real-cluster creation).
    pub notes: Vec<String>,
    /// The settings used.
    pub settings: Option<Settings>,
}

/// The 1-, 5- and 15-minute load averages.
#[must_use]
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// Prints a progress line with the time since the harness started.
pub(crate) fn log(message: &str) {
    eprintln!(
        "[bench {:>8.1}s] {message}",
        started().elapsed().as_secs_f64()
    );
}

fn started() -> Instant {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *START.get_or_init(Instant::now)
}

/// Runs everything in `settings`.
///
/// # Errors
/// The trace is unusable. Peer failures are recorded in [`Results::failures`] instead.
pub fn run_all(bins: &Binaries, settings: &Settings) -> Result<Results, BenchError> {
    started();
    let mut results = Results {
        settings: Some(settings.clone()),
        ..Results::default()
    };
    results.notes.push(format!(
        "load average (1, 5, 15 min) at start: {}",
        loadavg()
    ));
    let templates = workload::templates()?;
    let runs = |section| settings.sections.contains(&section);
    if runs(Section::Throughput) {
        throughput(bins, settings, &templates, &mut results)?;
    }
    if runs(Section::Owned) {
        owned(bins, settings, &templates, &mut results)?;
    }
    if runs(Section::Replay) {
        replay_sync(bins, settings, &templates, &mut results);
    }
    let wants_real = (runs(Section::Real) && !settings.real_sizes.is_empty())
        || (runs(Section::Paging) && !settings.paging_sizes.is_empty())
        || (runs(Section::RealThroughput) && !settings.write_rates.is_empty());
    if wants_real {
        match crate::real::Cluster::provision(&templates, settings.create_budget) {
            Ok(mut cluster) => {
                // The namespace only grows, so every size is measured while it holds
                // exactly that many pods: the sync and paging runs go size by size.
                let mut sizes: Vec<usize> = Vec::new();
                if runs(Section::Real) {
                    sizes.extend(&settings.real_sizes);
                }
                if runs(Section::Paging) {
                    sizes.extend(&settings.paging_sizes);
                }
                sizes.sort_unstable();
                sizes.dedup();
                for pods in sizes {
                    if runs(Section::Real)
                        && settings.real_sizes.contains(&pods)
                        && let Err(e) = real_sync(bins, settings, &mut cluster, pods, &mut results)
                    {
                        results.failures.push(format!("real apiserver: {e}"));
                    }
                    if runs(Section::Paging)
                        && settings.paging_sizes.contains(&pods)
                        && let Err(e) =
                            crate::real::paging(bins, settings, &mut cluster, pods, &mut results)
                    {
                        results
                            .failures
                            .push(format!("real apiserver, paging: {e}"));
                    }
                    if cluster.pods() < pods {
                        break;
                    }
                }
                if runs(Section::RealThroughput)
                    && let Err(e) = crate::real::throughput(bins, settings, &cluster, &mut results)
                {
                    results
                        .failures
                        .push(format!("real apiserver, throughput: {e}"));
                }
                cluster.note_pod_size(&mut results);
            }
            Err(e) => results.failures.push(format!("real apiserver: {e}")),
        }
    }
    if runs(Section::Scale) {
        scale(bins, settings, &templates, &mut results)?;
    }
    results
        .notes
        .push(format!("load average (1, 5, 15 min) at end: {}", loadavg()));
    Ok(results)
}

/// Whether `report` synced other than `expected` objects, which is then a failure: a time to
/// sync only counts when the peer shows it holds the whole listing.
fn record_short_sync(
    results: &mut Results,
    report: &PeerReport,
    what: &str,
    expected: usize,
) -> bool {
    if report.pods == expected {
        return false;
    }
    let error = format!("synced {} objects, not the {expected} listed", report.pods);
    log(&format!("{} {what}: FAILED {error}", report.peer));
    results
        .failures
        .push(format!("{}, {what}: {error}", report.peer));
    true
}

pub(crate) fn record_failure(results: &mut Results, report: &PeerReport, what: &str) -> bool {
    match &report.error {
        Some(e) => {
            log(&format!("{} {what}: FAILED {e}", report.peer));
            results
                .failures
                .push(format!("{}, {what}: {e}", report.peer));
            true
        }
        None => false,
    }
}

fn throughput(
    bins: &Binaries,
    settings: &Settings,
    templates: &[Value],
    results: &mut Results,
) -> Result<(), BenchError> {
    let pods = settings.throughput_pods;
    let workload = Arc::new(Workload::new(templates, pods, settings.frames, 5_000));
    let avg_frame = workload.average_frame_bytes();
    results.notes.push(format!(
        "replay workload: {pods} pods + the sentinel, {:.0} B per pod in the LIST; {} frames of {avg_frame} B on average",
        workload.average_item_bytes(),
        workload.frames
    ));
    let scenario = format!("throughput, {pods} pods + {} frames", settings.frames);
    let small_pods = (pods / 10).max(1);
    let small = Arc::new(Workload::new(templates, small_pods, 1, 1));
    for run in 0..settings.runs {
        for peer in ["core", "tokio", "kube", "client-go"] {
            let server = ReplayServer::start(Arc::clone(&workload), Mode::Throughput)?;
            let report = spawn_peer(
                bins,
                peer,
                false,
                &Conn::Server(server.url()),
                Run {
                    namespace: NAMESPACE,
                    scenario: Scenario::Pods,
                    throughput: true,
                    deadline: settings.deadline,
                    page_size: None,
                    wire: None,
                },
            );
            if record_failure(results, &report, &scenario) {
                continue;
            }
            let Some(first) = server.first_frame() else {
                results
                    .failures
                    .push(format!("{peer}, {scenario}: no frame was ever sent"));
                continue;
            };
            let first_ns = first
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as i64);
            let seconds = (report.done_unix_ns - first_ns) as f64 / 1e9;
            let rate = settings.frames as f64 / seconds.max(1e-9);
            log(&format!(
                "run {run} {peer}: {rate:.0} frames/s, {} reconciles, {:.1} CPU s, {} MiB",
                report.reconciles,
                report.cpu_seconds,
                report.rss_peak_kb / 1024
            ));
            push(&mut results.throughput, peer.to_owned(), rate);
            push(
                &mut results.reconciles,
                peer.to_owned(),
                report.reconciles as f64,
            );
            push(
                &mut results.rss_mib,
                (scenario.clone(), peer.to_owned()),
                report.rss_peak_kb as f64 / 1024.0,
            );
            push(
                &mut results.cpu_seconds,
                (scenario.clone(), peer.to_owned()),
                report.cpu_seconds,
            );
            results.requests.insert(peer.to_owned(), server.requests());
        }
        // Heap per cached pod: the instrumented Rust binary; Go reads its own MemStats.
        // The slope between a small and the full sync, so fixed costs (runtime, client,
        // buffers kept for reuse) do not count as per-pod ones.
        for peer in ["core", "tokio", "kube", "client-go"] {
            let mut heap = Vec::new();
            for w in [&small, &workload] {
                let server = ReplayServer::start(Arc::clone(w), Mode::Sync)?;
                let report = spawn_peer(
                    bins,
                    peer,
                    true,
                    &Conn::Server(server.url()),
                    Run {
                        namespace: NAMESPACE,
                        scenario: Scenario::Pods,
                        throughput: false,
                        deadline: settings.deadline,
                        page_size: None,
                        wire: None,
                    },
                );
                if record_failure(results, &report, "heap") {
                    break;
                }
                heap.push(report.heap_bytes as f64);
            }
            if let [low, high] = heap[..] {
                let per_pod = (high - low) / (pods - small_pods) as f64;
                let fixed = low - per_pod * (small_pods + 1) as f64;
                log(&format!(
                    "run {run} {peer}: heap {per_pod:.0} B per pod, {:.1} MiB fixed",
                    fixed / 1048576.0
                ));
                push(&mut results.heap_per_pod, peer.to_owned(), per_pod);
                push(
                    &mut results.heap_fixed_mib,
                    peer.to_owned(),
                    fixed / 1048576.0,
                );
            }
        }
    }
    Ok(())
}

/// The two-source scenario's label in the per-scenario tables.
#[must_use]
pub fn owned_scenario(settings: &Settings) -> String {
    format!(
        "two sources, {} ReplicaSets + {} pods + {} frames",
        settings.owned_parents,
        settings.owned_parents * PODS_PER_CELL,
        settings.frames
    )
}

/// Objects served over every collection of a workload (sentinels included).
fn objects(workloads: &[Arc<Workload>]) -> usize {
    workloads.iter().map(|w| w.items.len()).sum()
}

/// Records a failure when a two-source run holds other than `expected` (ReplicaSets, pods):
/// a figure only counts when the peer shows it holds both sources whole.
fn record_wrong_objects(
    results: &mut Results,
    peer: &str,
    what: &str,
    held: (usize, usize),
    expected: (usize, usize),
) -> bool {
    if held == expected {
        return false;
    }
    let error = format!(
        "held {} ReplicaSets and {} pods, not the {} and {} expected",
        held.0, held.1, expected.0, expected.1
    );
    log(&format!("{peer} {what}: FAILED {error}"));
    results.failures.push(format!("{peer}, {what}: {error}"));
    true
}

/// Two sources (issue 13): ReplicaSets and the pods they own, 1 to [`PODS_PER_CELL`], for
/// frames/s over both collections and heap per cached object. A throughput run counts only
/// when the peer saw both sentinels' last frames and ended holding what every frame leaves;
/// a heap run only when it synced both collections whole.
fn owned(
    bins: &Binaries,
    settings: &Settings,
    templates: &[Value],
    results: &mut Results,
) -> Result<(), BenchError> {
    let parents = settings.owned_parents;
    let full: Vec<Arc<Workload>> = workload::owned_pair(templates, parents, settings.frames, 5_000)
        .into_iter()
        .map(Arc::new)
        .collect();
    let small_parents = (parents / 10).max(1);
    let small: Vec<Arc<Workload>> = workload::owned_pair(templates, small_parents, 2, 1)
        .into_iter()
        .map(Arc::new)
        .collect();
    let (replica_sets, pods) = (&full[0], &full[1]);
    results.notes.push(format!(
        "two-source workload: {parents} ReplicaSets of {} B in the LIST, owning {} pods of {} B, each collection with its sentinel; {} frames: {} of ReplicaSets ({} B on average), {} of pods ({} B)",
        replica_sets.average_item_bytes(),
        parents * PODS_PER_CELL,
        pods.average_item_bytes(),
        settings.frames,
        replica_sets.frames,
        replica_sets.average_frame_bytes(),
        pods.frames,
        pods.average_frame_bytes(),
    ));
    let final_state = (replica_sets.final_objects(), pods.final_objects());
    let scenario = owned_scenario(settings);
    for run in 0..settings.runs {
        for peer in ["core", "tokio", "kube", "client-go"] {
            let server = ReplayServer::start_all(full.clone(), Mode::Throughput)?;
            let report = spawn_peer(
                bins,
                peer,
                false,
                &Conn::Server(server.url()),
                Run {
                    namespace: NAMESPACE,
                    scenario: Scenario::Owned,
                    throughput: true,
                    deadline: settings.deadline,
                    page_size: None,
                    wire: None,
                },
            );
            if record_failure(results, &report, &scenario) {
                continue;
            }
            let held = (report.final_objects, report.final_children);
            if record_wrong_objects(results, peer, &scenario, held, final_state) {
                continue;
            }
            let Some(first) = server.first_frame() else {
                results
                    .failures
                    .push(format!("{peer}, {scenario}: no frame was ever sent"));
                continue;
            };
            if report.done_unix_ns == 0 {
                results.failures.push(format!(
                    "{peer}, {scenario}: no reconcile saw both sentinels' last frames"
                ));
                continue;
            }
            let first_ns = first
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as i64);
            let seconds = (report.done_unix_ns - first_ns) as f64 / 1e9;
            let rate = settings.frames as f64 / seconds.max(1e-9);
            log(&format!(
                "run {run} {peer} (two sources): {rate:.0} frames/s, {} reconciles, {:.1} CPU s, {} MiB",
                report.reconciles,
                report.cpu_seconds,
                report.rss_peak_kb / 1024
            ));
            push(&mut results.owned_throughput, peer.to_owned(), rate);
            push(
                &mut results.owned_reconciles,
                peer.to_owned(),
                report.reconciles as f64,
            );
            push(
                &mut results.rss_mib,
                (scenario.clone(), peer.to_owned()),
                report.rss_peak_kb as f64 / 1024.0,
            );
            push(
                &mut results.cpu_seconds,
                (scenario.clone(), peer.to_owned()),
                report.cpu_seconds,
            );
            results
                .requests
                .insert(format!("{peer} (two sources)"), server.requests());
        }
        // Heap per cached object: the slope between a small and the full sync, as for pods.
        for peer in ["core", "tokio", "kube", "client-go"] {
            let mut heap = Vec::new();
            for w in [&small, &full] {
                let server = ReplayServer::start_all(w.clone(), Mode::Sync)?;
                let report = spawn_peer(
                    bins,
                    peer,
                    true,
                    &Conn::Server(server.url()),
                    Run {
                        namespace: NAMESPACE,
                        scenario: Scenario::Owned,
                        throughput: false,
                        deadline: settings.deadline,
                        page_size: None,
                        wire: None,
                    },
                );
                let what = "heap, two sources";
                let listed = (w[0].items.len(), w[1].items.len());
                if record_failure(results, &report, what)
                    || record_wrong_objects(
                        results,
                        peer,
                        what,
                        (report.pods, report.children),
                        listed,
                    )
                {
                    break;
                }
                heap.push(report.heap_bytes as f64);
            }
            if let [low, high] = heap[..] {
                let per_object = (high - low) / (objects(&full) - objects(&small)) as f64;
                let fixed = low - per_object * objects(&small) as f64;
                log(&format!(
                    "run {run} {peer} (two sources): heap {per_object:.0} B per object, {:.1} MiB fixed",
                    fixed / 1048576.0
                ));
                push(
                    &mut results.owned_heap_per_object,
                    peer.to_owned(),
                    per_object,
                );
                push(
                    &mut results.owned_heap_fixed_mib,
                    peer.to_owned(),
                    fixed / 1048576.0,
                );
            }
        }
    }
    Ok(())
}

fn replay_sync(bins: &Binaries, settings: &Settings, templates: &[Value], results: &mut Results) {
    for &pods in &settings.sync_sizes {
        let workload = Arc::new(Workload::new(templates, pods, 1, 1));
        let scenario = format!("sync, replay, {pods} pods");
        for run in 0..settings.runs {
            for peer in rotated(run) {
                let server = match ReplayServer::start(Arc::clone(&workload), Mode::Sync) {
                    Ok(s) => s,
                    Err(e) => {
                        results.failures.push(format!("replay server: {e}"));
                        return;
                    }
                };
                let report = spawn_peer(
                    bins,
                    peer,
                    false,
                    &Conn::Server(server.url()),
                    Run {
                        namespace: NAMESPACE,
                        scenario: Scenario::Pods,
                        throughput: false,
                        deadline: settings.deadline,
                        page_size: None,
                        wire: None,
                    },
                );
                // The listing holds the pods and the sentinel.
                if record_failure(results, &report, &scenario)
                    || record_short_sync(results, &report, &scenario, pods + 1)
                {
                    continue;
                }
                log(&format!(
                    "run {run} {peer} {scenario}: {:.3} s, {} MiB",
                    report.sync_seconds,
                    report.rss_peak_kb / 1024
                ));
                push(
                    &mut results.sync,
                    ("replay".into(), pods, peer.to_owned()),
                    report.sync_seconds,
                );
                push(
                    &mut results.rss_mib,
                    (scenario.clone(), peer.to_owned()),
                    report.rss_peak_kb as f64 / 1024.0,
                );
                push(
                    &mut results.cpu_seconds,
                    (scenario.clone(), peer.to_owned()),
                    report.cpu_seconds,
                );
                if pods == *settings.sync_sizes.last().unwrap_or(&0) {
                    results
                        .requests
                        .entry(format!("{peer} (sync)"))
                        .or_insert_with(|| server.requests());
                }
            }
        }
    }
}

/// The peers that run at `pods` in the scaling section.
#[must_use]
pub fn scale_peers(settings: &Settings, pods: usize) -> Vec<&'static str> {
    ["core", "tokio", "kube", "client-go"]
        .into_iter()
        .filter(|p| pods <= settings.scale_peer_max || matches!(*p, "core" | "tokio"))
        .collect()
}

/// The scaling section (issue 16): time to sync, heap, peak RSS and CPU per frame at every
/// size of [`Settings::scale_sizes`], then the core-alone probes.
fn scale(
    bins: &Binaries,
    settings: &Settings,
    templates: &[Value],
    results: &mut Results,
) -> Result<(), BenchError> {
    let frames = settings.scale_frames;
    for &pods in &settings.scale_sizes {
        let workload = Arc::new(Workload::new(templates, pods, frames, 5_000));
        let final_objects = workload.final_objects();
        for run in 0..settings.runs {
            for peer in scale_peers(settings, pods) {
                let what = format!("scale, {pods} pods");
                // What the sync run spent after its sync: mostly tearing the cache down, which
                // the throughput run pays too.
                let mut teardown = None;
                for (mode, heap) in [
                    (Mode::Sync, false),
                    (Mode::Sync, true),
                    (Mode::Throughput, false),
                ] {
                    let server = ReplayServer::start(Arc::clone(&workload), mode)?;
                    let throughput = mode == Mode::Throughput;
                    let report = spawn_peer(
                        bins,
                        peer,
                        heap,
                        &Conn::Server(server.url()),
                        Run {
                            namespace: NAMESPACE,
                            scenario: Scenario::Pods,
                            throughput,
                            deadline: settings.deadline,
                            page_size: None,
                            wire: None,
                        },
                    );
                    if record_failure(results, &report, &what)
                        || (!throughput && record_short_sync(results, &report, &what, pods + 1))
                    {
                        break;
                    }
                    let key = |metric: &str| (metric.to_owned(), pods, peer.to_owned());
                    if heap {
                        push(&mut results.scale, key("heap"), report.heap_bytes as f64);
                        log(&format!(
                            "run {run} {peer} {what}: heap {:.0} B per pod (fixed part included)",
                            report.heap_bytes as f64 / (pods + 1) as f64
                        ));
                        continue;
                    }
                    if !throughput {
                        log(&format!(
                            "run {run} {peer} {what}: sync {:.3} s, {:.2} CPU s, {} MiB",
                            report.sync_seconds,
                            report.cpu_seconds,
                            report.rss_peak_kb / 1024
                        ));
                        push(&mut results.scale, key("sync"), report.sync_seconds);
                        push(&mut results.scale, key("cpu-sync"), report.cpu_seconds);
                        push(
                            &mut results.scale,
                            key("rss"),
                            report.rss_peak_kb as f64 / 1024.0,
                        );
                        teardown = Some(report.cpu_seconds - report.cpu_at_sync);
                        continue;
                    }
                    // Throughput: counts only when the peer reached the run's final state.
                    let (Some(first), true) = (server.first_frame(), report.done_unix_ns != 0)
                    else {
                        results.failures.push(format!(
                            "{peer}, {what}: the final frame never reached a reconcile"
                        ));
                        break;
                    };
                    let first_ns = first
                        .duration_since(SystemTime::UNIX_EPOCH)
                        .map_or(0, |d| d.as_nanos() as i64);
                    let seconds = (report.done_unix_ns - first_ns) as f64 / 1e9;
                    let rate = workload.frames as f64 / seconds.max(1e-9);
                    push(&mut results.scale, key("frames-per-s"), rate);
                    // A throughput run that took no more CPU than the sync alone (the sync's
                    // own spread is larger than the frames' cost) gives no figure.
                    // The CPU the peer used after its own sync, read in the same process, less
                    // the sync run's after its sync (the teardown both pay). Subtracting the
                    // sync run's whole CPU instead left the frames' 0.2 CPU s inside the spread
                    // of a 1M-pod sync's 12.
                    let after_sync = report.cpu_seconds - report.cpu_at_sync;
                    let frames_cpu = after_sync - teardown.unwrap_or(0.0);
                    if frames_cpu > 0.0 {
                        let per_frame = frames_cpu / workload.frames as f64;
                        push(&mut results.scale, key("cpu-per-frame"), per_frame * 1e6);
                        log(&format!(
                            "run {run} {peer} {what}: {rate:.0} frames/s, {:.1} µs CPU per frame ({final_objects} objects at the end)",
                            per_frame * 1e6
                        ));
                    }
                }
            }
        }
    }
    for &objects in &settings.probe_sizes {
        for probe in crate::scale::Probe::ALL {
            // The one-parent probe's members are a tenth of the others' objects: its cost is
            // per frame, and 100k members is the parent.
            let n = if probe == crate::scale::Probe::Parent {
                objects / 10
            } else {
                objects
            };
            for run in 0..settings.runs {
                match probe_run(bins, probe, n) {
                    Ok(report) => {
                        log(&format!(
                            "run {run} core-scale {} {n}: {:.3} s, {:.2} CPU s, {} reconciles, {} members",
                            report.probe,
                            report.seconds,
                            report.cpu_seconds,
                            report.reconciles,
                            report.members
                        ));
                        results
                            .probes
                            .entry((report.probe.clone(), n))
                            .or_default()
                            .push((report.seconds, report.cpu_seconds));
                    }
                    Err(e) => results
                        .failures
                        .push(format!("core-scale {} {n}: {e}", probe.name())),
                }
            }
        }
    }
    Ok(())
}

/// Runs one core-alone probe in a process of its own.
fn probe_run(
    bins: &Binaries,
    probe: crate::scale::Probe,
    objects: usize,
) -> Result<crate::scale::ProbeReport, BenchError> {
    let out = Command::new(&bins.rust)
        .args([
            "core-scale",
            probe.name(),
            "--objects",
            &objects.to_string(),
        ])
        .stderr(Stdio::inherit())
        .output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().rev().find(|l| l.starts_with('{'));
    match (out.status.success(), line) {
        (true, Some(line)) => serde_json::from_str(line)
            .map_err(|e| BenchError::Peer(format!("bad report {line:?}: {e}"))),
        _ => Err(BenchError::Peer(format!("failed ({})", out.status))),
    }
}

/// The key a real-apiserver sync row is recorded under: the peer's name when it reads its
/// default wire ([`default_wire`]), else the peer and the wire (`tokio protobuf`).
#[must_use]
pub fn wire_key(peer: &str, wire: Wire) -> String {
    if wire == default_wire(peer) {
        peer.to_owned()
    } else {
        format!("{peer} {}", wire.name())
    }
}

/// The peers of a real-apiserver sync, each with the wire it asks for: every peer on its
/// default, then our `core` and `tokio` on each other wire of [`Settings::our_wires`].
#[must_use]
pub fn real_sync_peers(settings: &Settings) -> Vec<(&'static str, Wire)> {
    let mut peers: Vec<(&'static str, Wire)> =
        PEERS.iter().map(|&p| (p, default_wire(p))).collect();
    for &wire in &settings.our_wires {
        for peer in ["core", "tokio"] {
            if wire != default_wire(peer) {
                peers.push((peer, wire));
            }
        }
    }
    peers
}

/// Time to sync on the real apiserver with the namespace holding `pods` pods.
fn real_sync(
    bins: &Binaries,
    settings: &Settings,
    cluster: &mut crate::real::Cluster,
    pods: usize,
    results: &mut Results,
) -> Result<(), BenchError> {
    if !cluster.ensure_pods(pods, results)? {
        return Ok(());
    }
    let kubeconfig = cluster.kubeconfig(reconcile_k8s_env::ApiServer::Cached);
    let scenario = format!("sync, apiserver, {pods} pods");
    let peers = real_sync_peers(settings);
    for run in 0..settings.runs {
        // Each run starts one peer later, so none always follows the same one.
        let start = run % peers.len();
        for &(peer, wire) in peers[start..].iter().chain(&peers[..start]) {
            let key = wire_key(peer, wire);
            let before = cluster.apiserver_cpu(reconcile_k8s_env::ApiServer::Cached);
            let report = spawn_peer(
                bins,
                peer,
                false,
                &Conn::Kubeconfig(kubeconfig.clone()),
                Run {
                    namespace: cluster.namespace(),
                    scenario: Scenario::Pods,
                    throughput: false,
                    deadline: settings.deadline,
                    page_size: None,
                    wire: Some(wire),
                },
            );
            // The listing holds the pods and the sentinel.
            if record_failure(results, &report, &scenario)
                || record_short_sync(results, &report, &scenario, pods + 1)
            {
                continue;
            }
            // A row counts under the wire it names only if the peer read that wire.
            if report.wire != wire.name() {
                let e = format!("asked for {}, read {:?}", wire.name(), report.wire);
                log(&format!("run {run} {key} {scenario}: FAILED {e}"));
                results.failures.push(format!("{key}, {scenario}: {e}"));
                continue;
            }
            log(&format!(
                "run {run} {key} {scenario}: {:.3} s ({} pods, {})",
                report.sync_seconds, report.pods, report.wire
            ));
            results.real_wires.insert(key.clone(), report.wire.clone());
            let after = cluster.apiserver_cpu(reconcile_k8s_env::ApiServer::Cached);
            if let (Some(a), Some(b)) = (before, after) {
                push(
                    &mut results.real_sync_apiserver_cpu,
                    (pods, key.clone()),
                    b - a,
                );
            }
            push(
                &mut results.sync,
                ("apiserver".into(), pods, key.clone()),
                report.sync_seconds,
            );
            push(
                &mut results.rss_mib,
                (scenario.clone(), key.clone()),
                report.rss_peak_kb as f64 / 1024.0,
            );
            push(
                &mut results.cpu_seconds,
                (scenario.clone(), key.clone()),
                report.cpu_seconds,
            );
        }
    }
    Ok(())
}
