//! The real kube-apiserver (`tests/k8s-env`: kube-apiserver + etcd, watch cache on and off):
//! the pods the sync and paging measurements list, the paging measurement, and the
//! throughput runs where a load generator writes pods at a fixed rate while every peer
//! watches them (issue 16, items 1 and 5).
//!
//! CPU figures are whole-process user + system time from `/proc/<pid>/stat`: each peer's
//! own (it reads `/proc/self/stat` at its sync and at its end), the apiserver's and etcd's
//! (read by the harness before and after). The load generator runs in the harness's own
//! process, so its CPU counts against no peer.

use std::path::PathBuf;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime};

use reconcile_k8s_env::{ApiServer, Client, K8sEnv};
use serde_json::Value;

use crate::BenchError;
use crate::peers::{Scenario, Wire};
use crate::runs::{
    Binaries, Conn, Results, Run, Settings, default_wire, finish_peer, log, record_failure,
    spawn_peer, start_peer,
};
pub use crate::runs::{PagingRun, ThroughputRun};
use crate::workload::{self, PHASE_ANNOTATION, SENTINEL};

/// Writes the generator retries one that failed (a 429, a 5xx, a dropped connection).
const WRITE_ATTEMPTS: usize = 5;
/// Threads the load generator writes with, all through one client: enough that one slow
/// write (an apiserver pause) does not hold the schedule back.
pub const WRITER_THREADS: usize = 8;
/// How long the throughput peers get to start and sync (a one-pod listing) before the
/// first write; a peer that synced later fails the run.
pub const WARMUP: Duration = Duration::from_secs(5);

/// The real cluster: one namespace of real-shaped pods that grows as measurements ask.
pub struct Cluster {
    env: &'static K8sEnv,
    client: Client,
    templates: Vec<Value>,
    namespace: String,
    created: usize,
    budget_end: Instant,
}

impl Cluster {
    /// Starts (or reuses) the shared environment and makes the namespace with its sentinel.
    ///
    /// # Errors
    /// The environment could not be provisioned, or the namespace or sentinel created.
    pub fn provision(templates: &[Value], create_budget: Duration) -> Result<Self, BenchError> {
        log("provisioning the real apiserver (tests/k8s-env)");
        let env = K8sEnv::shared().map_err(env_err)?;
        let client = env.client(ApiServer::Cached).clone();
        let namespace = env.unique_namespace("bench").map_err(env_err)?;
        let budget_end = Instant::now() + create_budget;
        create_pods(&client, &namespace, vec![sentinel(templates)], budget_end)?;
        Ok(Cluster {
            env,
            client,
            templates: templates.to_vec(),
            namespace,
            created: 0,
            budget_end,
        })
    }

    /// Pods created so far (the sentinel aside).
    #[must_use]
    pub fn pods(&self) -> usize {
        self.created
    }

    /// The namespace the sync and paging measurements list.
    #[must_use]
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The kubeconfig of one of the two apiservers (both share etcd).
    #[must_use]
    pub fn kubeconfig(&self, which: ApiServer) -> PathBuf {
        self.env.kubeconfig_path(which).to_path_buf()
    }

    /// Creates pods until the namespace holds `pods` of them (plus the sentinel). Returns
    /// false, with a note, when the creation budget ran out first.
    ///
    /// # Errors
    /// A pod could not be created after retries.
    pub fn ensure_pods(&mut self, pods: usize, results: &mut Results) -> Result<bool, BenchError> {
        if self.created >= pods {
            return Ok(true);
        }
        let began = Instant::now();
        let batch: Vec<Value> = (self.created..pods)
            .map(|i| real_pod(&self.templates, i))
            .collect();
        self.created += create_pods(&self.client, &self.namespace, batch, self.budget_end)?;
        log(&format!(
            "real apiserver: {} pods created ({:.0} s for this step)",
            self.created,
            began.elapsed().as_secs_f64()
        ));
        if self.created < pods {
            results.notes.push(format!(
                "real apiserver: only {} of {pods} pods were created within the creation budget; larger sizes skipped",
                self.created
            ));
            return Ok(false);
        }
        Ok(true)
    }

    /// Notes the LIST's bytes per pod (a sample page: the whole list is over the
    /// environment client's response limit).
    pub fn note_pod_size(&self, results: &mut Results) {
        let namespace = &self.namespace;
        if let Ok(list) = self.client.get(&format!(
            "/api/v1/namespaces/{namespace}/pods?labelSelector=cell&limit=500"
        )) {
            let bytes = list.to_string().len();
            let n = list["items"].as_array().map_or(0, Vec::len);
            results.notes.push(format!(
                "real apiserver: {} pods, {:.0} B per pod in the LIST (a page of {n}; no status: nothing runs them; the template's spec and labels)",
                self.created,
                bytes as f64 / n.max(1) as f64
            ));
        }
    }

    /// CPU seconds so far of one apiserver.
    #[must_use]
    pub fn apiserver_cpu(&self, which: ApiServer) -> Option<f64> {
        self.env.apiserver_pid(which).and_then(process_cpu)
    }

    /// CPU seconds so far of one apiserver and of etcd.
    fn server_cpu(&self, which: ApiServer) -> (Option<f64>, Option<f64>) {
        (
            self.env.apiserver_pid(which).and_then(process_cpu),
            self.env.etcd_pid().and_then(process_cpu),
        )
    }
}

fn env_err(e: reconcile_k8s_env::Error) -> BenchError {
    BenchError::Cluster(e.to_string())
}

/// User + system CPU seconds of process `pid`, from `/proc/<pid>/stat` (`None` when it is
/// gone or unreadable). Ticks are taken as 1/100 s, as `peers::proc_stats` does.
#[must_use]
pub fn process_cpu(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let user: f64 = fields.get(11)?.parse().ok()?;
    let system: f64 = fields.get(12)?.parse().ok()?;
    Some((user + system) / 100.0)
}

/// The context switches of every thread of process `pid` so far (voluntary and not, from
/// `/proc/PID/task/*/status`): about one per time a thread slept and was woken, so their
/// count per event says how many wakeups each event costs.
#[must_use]
pub fn process_switches(pid: u32) -> Option<u64> {
    let mut total = 0u64;
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let Ok(status) = std::fs::read_to_string(task.ok()?.path().join("status")) else {
            continue; // the thread ended since the listing
        };
        for line in status.lines() {
            if let Some(rest) = line
                .strip_prefix("voluntary_ctxt_switches:")
                .or_else(|| line.strip_prefix("nonvoluntary_ctxt_switches:"))
            {
                total += rest.trim().parse::<u64>().ok()?;
            }
        }
    }
    Some(total)
}

fn delta(before: Option<f64>, after: Option<f64>) -> Option<f64> {
    Some(after? - before?)
}

/// Paged and unpaged LIST on both apiservers with the namespace holding `pods` pods; page
/// sizes rotate within a repetition so none always follows the same one.
///
/// # Errors
/// Pods could not be created. Peer failures are recorded in [`Results::failures`].
pub fn paging(
    bins: &Binaries,
    settings: &Settings,
    cluster: &mut Cluster,
    pods: usize,
    results: &mut Results,
) -> Result<(), BenchError> {
    let pages = &settings.page_sizes;
    if !cluster.ensure_pods(pods, results)? {
        return Ok(());
    }
    for run in 0..settings.paging_runs {
        for which in cluster.env.apiservers() {
            let conn = Conn::Kubeconfig(cluster.kubeconfig(which));
            for k in 0..pages.len() {
                let page_size = pages[(k + run) % pages.len()];
                let (api0, etcd0) = cluster.server_cpu(which);
                let report = spawn_peer(
                    bins,
                    "tokio",
                    false,
                    &conn,
                    Run {
                        namespace: cluster.namespace(),
                        scenario: Scenario::Pods,
                        throughput: false,
                        deadline: settings.deadline,
                        page_size: Some(page_size),
                        wire: None,
                    },
                );
                let (api1, etcd1) = cluster.server_cpu(which);
                let what = format!(
                    "paging, {} apiserver, {pods} pods, page size {page_size}",
                    which.name()
                );
                if record_failure(results, &report, &what) {
                    continue;
                }
                if report.pods != pods + 1 {
                    log(&format!("run {run} {what}: FAILED synced {}", report.pods));
                    results.failures.push(format!(
                        "tokio, {what}: synced {} objects, not the {} listed",
                        report.pods,
                        pods + 1
                    ));
                    continue;
                }
                let row = PagingRun {
                    pods,
                    server: which.name(),
                    page_size,
                    sync_seconds: report.sync_seconds,
                    rss_mib: report.rss_peak_kb as f64 / 1024.0,
                    cpu_seconds: report.cpu_seconds,
                    apiserver_cpu: delta(api0, api1),
                    etcd_cpu: delta(etcd0, etcd1),
                };
                log(&format!(
                    "run {run} {what}: {:.3} s, {:.0} MiB, {:.2} CPU s, apiserver {:.2} s, etcd {:.2} s",
                    row.sync_seconds,
                    row.rss_mib,
                    row.cpu_seconds,
                    row.apiserver_cpu.unwrap_or(f64::NAN),
                    row.etcd_cpu.unwrap_or(f64::NAN),
                ));
                results.paging.push(row);
            }
        }
    }
    Ok(())
}

impl ThroughputRun {
    /// CPU seconds per 10,000 events.
    #[must_use]
    pub fn cpu_per_10k(&self) -> f64 {
        self.event_cpu / self.events.max(1) as f64 * 10_000.0
    }
}

/// The peers of a throughput run, each with the wire format it asks for.
#[must_use]
pub fn throughput_peers(settings: &Settings) -> Vec<(&'static str, Wire)> {
    let mut peers = Vec::new();
    for &wire in &settings.our_wires {
        peers.push(("tokio", wire));
        peers.push(("core", wire));
    }
    peers.push(("kube", default_wire("kube")));
    peers.push(("client-go", Wire::Protobuf));
    peers.push(("client-go", Wire::Json));
    peers
}

/// What the load generator did.
#[derive(Debug, Clone, Copy)]
struct Generated {
    writes: usize,
    first_start_ns: i64,
    last_end_ns: i64,
    /// When the sentinel's last patch was sent (a watcher can see it before it returns).
    final_write_ns: i64,
}

fn unix_ns() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// Writes `2 × pods` times at `rate` per second through one client: creates pods
/// `pod-000000..`, then merge-patches an annotation on each, on a fixed schedule (write `k`
/// starts no earlier than `k / rate` s after the first). Then, after every write
/// returned, patches the sentinel into its final state (one more write).
fn generate(
    client: &Client,
    namespace: &str,
    templates: &[Value],
    pods: usize,
    rate: usize,
) -> Result<Generated, BenchError> {
    let total = 2 * pods;
    let next = AtomicUsize::new(0);
    let first_start = AtomicI64::new(i64::MAX);
    let error = std::sync::Mutex::new(None::<String>);
    let began = Instant::now();
    let interval = Duration::from_secs_f64(1.0 / rate.max(1) as f64);
    std::thread::scope(|scope| {
        for _ in 0..WRITER_THREADS {
            scope.spawn(|| {
                loop {
                    let k = next.fetch_add(1, Ordering::Relaxed);
                    if k >= total || error.lock().map(|e| e.is_some()).unwrap_or(true) {
                        return;
                    }
                    let due = began + interval * u32::try_from(k).unwrap_or(u32::MAX);
                    if let Some(wait) = due.checked_duration_since(Instant::now()) {
                        std::thread::sleep(wait);
                    }
                    first_start.fetch_min(unix_ns(), Ordering::Relaxed);
                    let result = retry(|| {
                        if k < pods {
                            client.create_pod(namespace, &real_pod(templates, k))
                        } else {
                            let name = format!("pod-{:06}", k - pods);
                            let patch = serde_json::json!({
                                "metadata": {"annotations": {"bench/seq": k.to_string()}}
                            });
                            client.patch_pod(namespace, &name, &patch)
                        }
                    });
                    if let Err(e) = result
                        && let Ok(mut slot) = error.lock()
                    {
                        slot.get_or_insert(format!("write {k}: {e}"));
                    }
                }
            });
        }
    });
    if let Some(e) = error.into_inner().ok().flatten() {
        return Err(BenchError::Cluster(e));
    }
    let patch = serde_json::json!({"metadata": {"annotations": {PHASE_ANNOTATION: "end"}}});
    let final_write_ns = unix_ns();
    retry(|| client.patch_pod(namespace, SENTINEL, &patch))
        .map_err(|e| BenchError::Cluster(format!("the sentinel's last write: {e}")))?;
    Ok(Generated {
        writes: total + 1,
        first_start_ns: first_start.into_inner(),
        last_end_ns: unix_ns(),
        final_write_ns,
    })
}

/// Runs `write` up to [`WRITE_ATTEMPTS`] times, 200 ms apart, until it succeeds.
fn retry(
    mut write: impl FnMut() -> reconcile_k8s_env::Result<Value>,
) -> reconcile_k8s_env::Result<Value> {
    let mut attempt = 1;
    loop {
        match write() {
            Err(_) if attempt < WRITE_ATTEMPTS => {
                attempt += 1;
                std::thread::sleep(Duration::from_millis(200));
            }
            result => return result,
        }
    }
}

/// Throughput on the real apiserver (watch cache on): for each rate and repetition, a
/// fresh namespace holding the sentinel, every peer started at once and given
/// [`WARMUP`] to sync, then the load generator's writes; each peer's figure counts only
/// once it reconciled the sentinel's final state (the last write) holding every pod.
///
/// # Errors
/// A namespace or the sentinel could not be created. Peer and generator failures are
/// recorded in [`Results::failures`].
pub fn throughput(
    bins: &Binaries,
    settings: &Settings,
    cluster: &Cluster,
    results: &mut Results,
) -> Result<(), BenchError> {
    let peers = throughput_peers(settings);
    let conn = Conn::Kubeconfig(cluster.kubeconfig(ApiServer::Cached));
    for &rate in &settings.write_rates {
        for run in 0..settings.write_runs {
            let namespace = cluster.env.unique_namespace("bench-tp").map_err(env_err)?;
            let until = Instant::now() + Duration::from_secs(60);
            create_pods(
                &cluster.client,
                &namespace,
                vec![sentinel(&cluster.templates)],
                until,
            )?;
            let started = Instant::now();
            let mut children = Vec::new();
            for &(peer, wire) in &peers {
                let run = Run {
                    namespace: &namespace,
                    scenario: Scenario::Pods,
                    throughput: true,
                    deadline: settings.deadline,
                    page_size: None,
                    wire: Some(wire),
                };
                children.push((peer, wire, start_peer(bins, peer, false, &conn, run)));
            }
            std::thread::sleep(WARMUP);
            let (api0, etcd0) = cluster.server_cpu(ApiServer::Cached);
            let generated = generate(
                &cluster.client,
                &namespace,
                &cluster.templates,
                settings.write_pods,
                rate,
            );
            let mut reports = Vec::new();
            for (peer, wire, child) in children {
                let report = match child {
                    Ok(child) => finish_peer(child, peer, started + settings.deadline),
                    Err(e) => crate::peers::PeerReport {
                        peer: peer.to_owned(),
                        error: Some(format!("spawn: {e}")),
                        ..Default::default()
                    },
                };
                reports.push((peer, wire, report));
            }
            let (api1, etcd1) = cluster.server_cpu(ApiServer::Cached);
            let generated = match generated {
                Ok(g) => g,
                Err(e) => {
                    results
                        .failures
                        .push(format!("real throughput, {rate}/s, run {run}: {e}"));
                    continue;
                }
            };
            let seconds = (generated.last_end_ns - generated.first_start_ns) as f64 / 1e9;
            let achieved = generated.writes as f64 / seconds.max(1e-9);
            log(&format!(
                "real throughput run {run}: {} writes at {achieved:.0}/s (asked {rate}/s); apiserver {:.1} CPU s, etcd {:.1}",
                generated.writes,
                delta(api0, api1).unwrap_or(f64::NAN),
                delta(etcd0, etcd1).unwrap_or(f64::NAN),
            ));
            for (peer, wire, report) in reports {
                let what = format!("real throughput, {rate} writes/s ({} wire)", wire.name());
                if record_failure(results, &report, &what) {
                    continue;
                }
                let expected = settings.write_pods + 1;
                let problem = if report.done_unix_ns == 0 {
                    Some("never reconciled the sentinel's final state".to_owned())
                } else if report.pods != expected {
                    Some(format!(
                        "held {} pods at the end, not {expected}",
                        report.pods
                    ))
                } else if report.wire != wire.name() {
                    Some(format!("asked for {}, read {:?}", wire.name(), report.wire))
                } else if report.sync_seconds >= WARMUP.as_secs_f64() - 0.5 {
                    Some(format!(
                        "synced after {:.1} s, too late for the warm-up",
                        report.sync_seconds
                    ))
                } else {
                    None
                };
                if let Some(problem) = problem {
                    results.failures.push(format!("{peer}, {what}: {problem}"));
                    continue;
                }
                let row = ThroughputRun {
                    rate,
                    achieved_rate: achieved,
                    peer: peer.to_owned(),
                    wire: report.wire.clone(),
                    events: generated.writes,
                    events_per_second: generated.writes as f64
                        / ((report.done_unix_ns - generated.first_start_ns) as f64 / 1e9).max(1e-9),
                    event_cpu: report.cpu_seconds - report.cpu_at_sync,
                    event_cpu_system: report.cpu_system - report.cpu_system_at_sync,
                    lag_seconds: (report.done_unix_ns - generated.final_write_ns) as f64 / 1e9,
                    rss_mib: report.rss_peak_kb as f64 / 1024.0,
                    apiserver_cpu: delta(api0, api1),
                    etcd_cpu: delta(etcd0, etcd1),
                };
                log(&format!(
                    "run {run} {peer} ({}) {rate}/s: {:.0} events/s, {:.2} CPU s per 10k events, lag {:.2} s",
                    row.wire,
                    row.events_per_second,
                    row.cpu_per_10k(),
                    row.lag_seconds
                ));
                results.real_throughput.push(row);
            }
        }
    }
    Ok(())
}

/// The sentinel pod in its `start` phase, for the real apiserver.
fn sentinel(templates: &[Value]) -> Value {
    let mut pod = real_pod(templates, 0);
    pod["metadata"]["name"] = Value::from(SENTINEL);
    pod["metadata"]["labels"]["cell"] = Value::from(SENTINEL);
    pod["metadata"]["annotations"][PHASE_ANNOTATION] = Value::from("start");
    pod
}

/// A real-shaped pod for the real apiserver: the template's spec without what ties it to
/// a node, a service account or a priority class (none of them exist there); no status.
pub fn real_pod(templates: &[Value], i: usize) -> Value {
    let mut pod = workload::pod(templates, i, 0);
    let spec = &mut pod["spec"];
    if let Some(spec) = spec.as_object_mut() {
        for field in [
            "nodeName",
            "serviceAccount",
            "priorityClassName",
            "priority",
            "preemptionPolicy",
        ] {
            spec.remove(field);
        }
        // This apiserver forbids privileged containers (`--allow-privileged` is off).
        for list in ["containers", "initContainers"] {
            if let Some(containers) = spec.get_mut(list).and_then(Value::as_array_mut) {
                for c in containers {
                    if let Some(sc) = c.get_mut("securityContext").and_then(Value::as_object_mut) {
                        sc.remove("privileged");
                    }
                }
            }
        }
        // The projected token volume needs a service account; `default` exists everywhere.
        spec.insert("serviceAccountName".into(), Value::from("default"));
    }
    let mut meta = pod["metadata"].take();
    // Static-pod annotations (`kubernetes.io/config.*`) are only valid on mirror pods.
    if let Some(annotations) = meta["annotations"].as_object_mut() {
        annotations.retain(|k, _| !k.starts_with("kubernetes.io/config."));
    }
    serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": meta["name"], "labels": meta["labels"], "annotations": meta["annotations"],
        },
        "spec": pod["spec"],
    })
}

/// Creates `pods` with 8 threads; returns how many were created before `until`.
///
/// # Errors
/// A pod could not be created after retries.
pub fn create_pods(
    client: &reconcile_k8s_env::Client,
    namespace: &str,
    pods: Vec<Value>,
    until: Instant,
) -> Result<usize, BenchError> {
    let total = pods.len();
    let queue = std::sync::Mutex::new(pods);
    let created = std::sync::atomic::AtomicUsize::new(0);
    let error = std::sync::Mutex::new(None::<String>);
    std::thread::scope(|scope| {
        for _ in 0..8 {
            scope.spawn(|| {
                while Instant::now() < until {
                    let next = queue.lock().ok().and_then(|mut q| q.pop());
                    let Some(pod) = next else { return };
                    let mut last = None;
                    for _ in 0..5 {
                        match client.create_pod(namespace, &pod) {
                            Ok(_) => {
                                last = None;
                                break;
                            }
                            Err(e) if e.http_status() == Some(409) => {
                                last = None;
                                break;
                            }
                            Err(e) => {
                                last = Some(e.to_string());
                                std::thread::sleep(Duration::from_millis(500));
                            }
                        }
                    }
                    match last {
                        None => {
                            created.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                        Some(e) => {
                            if let Ok(mut slot) = error.lock() {
                                slot.get_or_insert(e);
                            }
                            return;
                        }
                    }
                }
            });
        }
    });
    let created = created.into_inner();
    match error.into_inner().ok().flatten() {
        Some(e) if created < total => Err(BenchError::Cluster(format!(
            "creating pods in {namespace}: {e}"
        ))),
        _ => Ok(created),
    }
}
