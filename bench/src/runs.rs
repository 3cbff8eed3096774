//! What one measurement is: the settings, the peer binaries and their processes, and the
//! results the runs fill. Below both the orchestration (`orchestrate`) and the real apiserver's
//! runs (`real`), which each start peers and record into [`Results`].

use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::BenchError;
use crate::peers::{PeerReport, Scenario, Wire};

/// How much to run.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Repetitions of every measurement (medians are taken over them).
    pub runs: usize,
    /// Pod counts for time to sync on the replay server.
    pub sync_sizes: Vec<usize>,
    /// Pod count for throughput and heap per pod.
    pub throughput_pods: usize,
    /// ReplicaSets in the two-source scenario, each owning [`PODS_PER_CELL`](crate::workload::PODS_PER_CELL) pods.
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
pub(crate) fn rotated(run: usize) -> impl Iterator<Item = &'static str> {
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
    pub paging: Vec<PagingRun>,
    /// Real-apiserver throughput, one entry per peer per run.
    pub real_throughput: Vec<ThroughputRun>,
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

/// The median (upper median for an even count); `None` when empty.
#[must_use]
pub fn median(values: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(v[v.len() / 2])
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

pub(crate) fn started() -> Instant {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *START.get_or_init(Instant::now)
}

/// Records `report`'s error, if any, as a failure of `what`; whether there was one.
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

/// One paging measurement: our tokio driver's first sync over `pods` pods.
#[derive(Debug, Clone)]
pub struct PagingRun {
    /// Pods listed (plus the sentinel).
    pub pods: usize,
    /// Watch cache on (`cached`) or off (`uncached`).
    pub server: &'static str,
    /// LIST page size; 0 is one unpaged LIST.
    pub page_size: u32,
    /// Seconds to the first sync.
    pub sync_seconds: f64,
    /// The peer's peak RSS, MiB.
    pub rss_mib: f64,
    /// The peer's CPU seconds (whole process).
    pub cpu_seconds: f64,
    /// The apiserver's CPU seconds over the peer's run.
    pub apiserver_cpu: Option<f64>,
    /// etcd's CPU seconds over the peer's run.
    pub etcd_cpu: Option<f64>,
}

/// One peer in one real-apiserver throughput run.
#[derive(Debug, Clone)]
pub struct ThroughputRun {
    /// Writes per second asked of the load generator.
    pub rate: usize,
    /// Writes per second it achieved (writes ÷ first write's start to last write's end).
    pub achieved_rate: f64,
    /// `tokio`, `core`, `kube` or `client-go`.
    pub peer: String,
    /// The wire format the peer's responses came in, as it reported.
    pub wire: String,
    /// Watch events the run made (creates, patches and the sentinel's last patch).
    pub events: usize,
    /// Events ÷ (the sentinel's final state reconciled − the first write's start).
    pub events_per_second: f64,
    /// The peer's CPU seconds after its sync: the events' cost.
    pub event_cpu: f64,
    /// Of `event_cpu`, the system (kernel) part.
    pub event_cpu_system: f64,
    /// Seconds from sending the last write (the sentinel's) to the peer's reconcile of it.
    pub lag_seconds: f64,
    /// The peer's peak RSS, MiB.
    pub rss_mib: f64,
    /// The apiserver's CPU seconds over the run (all peers' watches and the writes).
    pub apiserver_cpu: Option<f64>,
    /// etcd's CPU seconds over the run.
    pub etcd_cpu: Option<f64>,
}
