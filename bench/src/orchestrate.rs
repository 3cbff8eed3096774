//! Runs every peer on every input, several times, and collects the medians.
//!
//! Order: the peers take turns inside each repetition, so a burst of load from other work
//! on the machine spreads over all of them instead of landing on one.

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::SystemTime;

use serde_json::Value;

use crate::BenchError;
use crate::peers::{PeerReport, Scenario, Wire};
use crate::replay::{Mode, ReplayServer};
use crate::workload::{self, NAMESPACE, PODS_PER_CELL, Workload};

pub use crate::runs::{Binaries, PEERS, Results, Section, Settings, default_wire, loadavg};
use crate::runs::{Conn, Run, log, push, record_failure, rotated, spawn_peer, started};

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
