//! `cargo bench -p reconcile-bench --bench sharding`: 1, 2 and 4 sharded replicas over the
//! same pods on the real kube-apiserver (tests/k8s-env), with the apiserver selecting each
//! replica's shards (KEP-5866, `--feature-gates=ShardedListAndWatch=true` on an extra
//! apiserver) and without (the usual apiserver: each replica finds the selector ignored and
//! caches every pod). Issue 33.
//!
//! Each replica is a child process of its own (this binary again), so that its heap (a
//! counting allocator) and CPU seconds (`/proc/self/stat`) are its own. Each child prints a
//! status line every 250 ms; the parent reads them:
//! 1. **sync:** until the replicas hold every shard, balanced, each caches what it should,
//!    and the first reconciles have run out: heap and CPU of each replica;
//! 2. **idle, then events:** the replicas are left idle for `--idle-secs` (10) to measure what
//!    they spend with nothing to do (renewing their Leases, mostly); then the parent patches
//!    `--patches` pods spread over every namespace, and waits until each was reconciled: each
//!    replica's CPU and watch frames over that phase, and its CPU less the idle rate over as
//!    long (the events' own);
//! 3. **takeover** (2 and 4 replicas): one replica is killed (SIGKILL), and the parent
//!    times until the survivors hold its shards and cache their pods.
//!
//! Pods are spread over `--namespaces` namespaces named to differ in their first bytes (the
//! server's hash is FNV-1a, unmixed: names that differ only at the end crowd into a few
//! shards). `-- --pods N --namespaces M --shards S --patches P --idle-secs T` to change the size,
//! `--modes server` or `--modes client` to run one side only, `--replicas 1,2,4` to pick the
//! replica counts, `--rounds R` to run them R times over, interleaved, `--patch-rate N` to
//! pace the patches at N per second (unpaced by default), and `--patchers K` (8)
//! for how many patches are in flight at once: fewer make the events arrive one by one,
//! which costs each event more (`docs/benchmarks.md`). Each replica also reports its
//! threads' context switches, about its wakeups: per frame, they show how many events
//! share one wakeup.
//! `SHARDING_BENCH_RUNTIME=current_thread` runs each replica on a single-threaded tokio runtime
//! instead of two workers.

#![allow(missing_docs)]

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reconcile_bench::real::{create_pods, process_cpu, process_switches, real_pod};
use reconcile_bench::workload;
use reconcile_core::{ShardBy, ShardConfig};
use reconcile_k8s_env::{ApiServer, K8sEnv};
use reconcile_tokio::{
    Action, Controller, KeyMap, KubeTransport, PodView, Reconcile, Source, default_error_policy,
};
use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<std::alloc::System> = &INSTRUMENTED_SYSTEM;

const SET: &str = "bench-shards";
const LABEL: &str = "bench-shard";

fn heap_in_use() -> i64 {
    let stats = GLOBAL.stats();
    stats.bytes_allocated as i64 - stats.bytes_deallocated as i64
}

/// The value after `name` on the command line.
fn arg_text(name: &str) -> Option<String> {
    let mut args = std::env::args().skip_while(|a| a != name);
    args.next()?;
    args.next()
}

fn arg(name: &str, default: usize) -> usize {
    arg_text(name)
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn sharding(leases: &str, identity: &str, shards: u32) -> ShardConfig {
    let mut config = ShardConfig::new(leases, SET, identity, shards);
    config.by = ShardBy::Namespace;
    config.lease_duration = Duration::from_secs(4);
    config.renew_deadline = Duration::from_secs(3);
    config.retry_period = Duration::from_millis(500);
    config.handover_drain = Duration::from_secs(2);
    config
}

async fn count(_: Reconcile<PodView, String>, done: Arc<AtomicU64>) -> Result<Action, String> {
    done.fetch_add(1, Ordering::Relaxed);
    Ok(Action::await_change())
}

async fn connect(path: &Path) -> KubeTransport {
    let kubeconfig = kube::config::Kubeconfig::read_from(path).expect("the kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .expect("a client config");
    KubeTransport::new(kube::Client::try_from(config).expect("a client"))
}

/// One replica: prints `held cache heap cpu reconciles frames selecting switches` every
/// 250 ms.
fn child(identity: &str, kubeconfig: &Path, leases: &str, run: &str, shards: u32) {
    let runtime = match std::env::var("SHARDING_BENCH_RUNTIME").as_deref() {
        Ok("current_thread") => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
        _ => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build(),
    }
    .expect("a runtime");
    let heap0 = heap_in_use();
    let cpu0 = process_cpu(std::process::id()).unwrap_or(0.0);
    runtime.block_on(async {
        let source = Source::pods(connect(kubeconfig).await, None)
            .labels(format!("{LABEL}={run}"))
            .timeout(300);
        let done = Arc::new(AtomicU64::new(0));
        let controller = Controller::new(source, KeyMap::by_name())
            .concurrency(8)
            .resync(None)
            .sharding_with(sharding(leases, identity, shards));
        let handle = controller.handle();
        let _running = controller
            .start(count, default_error_policy, Arc::clone(&done))
            .await
            .expect("the replica synced");
        loop {
            let sharding = handle.sharding().unwrap_or_default();
            let held: Vec<String> = sharding.held.iter().map(u32::to_string).collect();
            let cpu = process_cpu(std::process::id()).unwrap_or(0.0) - cpu0;
            let switches = process_switches(std::process::id()).unwrap_or(0);
            println!(
                "S {} {} {} {cpu:.3} {} {} {} {switches}",
                if held.is_empty() {
                    "-".to_owned()
                } else {
                    held.join(",")
                },
                handle.cache().snapshot().len(),
                heap_in_use() - heap0,
                done.load(Ordering::Relaxed),
                handle.stats().frames,
                u8::from(handle.metrics().shard_server_selection == Some(true)),
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    });
}

/// A replica's last status line.
#[derive(Debug, Clone, Default)]
struct Status {
    held: Vec<u32>,
    cache: usize,
    heap: i64,
    cpu: f64,
    reconciles: u64,
    frames: u64,
    selecting: bool,
    /// Context switches of all the replica's threads so far: about its wakeups.
    switches: u64,
}

fn parse(line: &str) -> Option<Status> {
    let mut f = line.strip_prefix("S ")?.split_whitespace();
    let held = f.next()?;
    Some(Status {
        held: if held == "-" {
            Vec::new()
        } else {
            held.split(',').filter_map(|s| s.parse().ok()).collect()
        },
        cache: f.next()?.parse().ok()?,
        heap: f.next()?.parse().ok()?,
        cpu: f.next()?.parse().ok()?,
        reconciles: f.next()?.parse().ok()?,
        frames: f.next()?.parse().ok()?,
        selecting: f.next()? == "1",
        switches: f.next()?.parse().ok()?,
    })
}

struct Replica {
    child: Child,
    status: Arc<Mutex<Option<Status>>>,
}

impl Replica {
    fn spawn(
        exe: &Path,
        identity: &str,
        kubeconfig: &Path,
        leases: &str,
        run: &str,
        shards: u32,
    ) -> Self {
        let mut child = Command::new(exe)
            .env("SHARD_BENCH_IDENTITY", identity)
            .env("SHARD_BENCH_KUBECONFIG", kubeconfig)
            .env("SHARD_BENCH_LEASES", leases)
            .env("SHARD_BENCH_RUN", run)
            .env("SHARD_BENCH_SHARDS", shards.to_string())
            .env("RUST_LOG", "off")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("a replica");
        let status = Arc::new(Mutex::new(None));
        let out = child.stdout.take().expect("its stdout");
        let shared = Arc::clone(&status);
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if let Some(s) = parse(&line) {
                    *shared.lock().unwrap_or_else(|e| e.into_inner()) = Some(s);
                }
            }
        });
        Replica { child, status }
    }

    fn status(&self) -> Option<Status> {
        self.status
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The pods' namespaces, and each namespace's shard.
struct Layout {
    namespaces: Vec<String>,
    config: ShardConfig,
    per_namespace: usize,
}

impl Layout {
    fn pods_of(&self, held: &[u32]) -> usize {
        self.namespaces
            .iter()
            .filter(|ns| held.contains(&self.config.shard_of_text(ns)))
            .count()
            * self.per_namespace
    }

    fn total(&self) -> usize {
        self.namespaces.len() * self.per_namespace
    }
}

/// Waits until `check` holds on every live replica's status for 1 s on end; gives the
/// statuses then, or `None` after `limit`.
fn settle(
    replicas: &[&Replica],
    limit: Duration,
    check: impl Fn(&[Status]) -> bool,
) -> Option<Vec<Status>> {
    let until = Instant::now() + limit;
    let mut since: Option<(Instant, Vec<u64>)> = None;
    while Instant::now() < until {
        std::thread::sleep(Duration::from_millis(250));
        let Some(all) = replicas
            .iter()
            .map(|r| r.status())
            .collect::<Option<Vec<_>>>()
        else {
            continue;
        };
        if !check(&all) {
            since = None;
            continue;
        }
        // Settled: the same reconcile counts for a second.
        let counts: Vec<u64> = all.iter().map(|s| s.reconciles).collect();
        match &since {
            Some((at, before)) if *before == counts => {
                if at.elapsed() >= Duration::from_secs(1) {
                    return Some(all);
                }
            }
            _ => since = Some((Instant::now(), counts)),
        }
    }
    None
}

/// Every shard held by one replica, none more than its share, and each cache holds its
/// shards' pods (or every pod, when the server does not select).
fn balanced(all: &[Status], layout: &Layout, selecting: bool) -> bool {
    let shards = layout.config.shards as usize;
    let target = shards.div_ceil(all.len());
    let mut seen = BTreeSet::new();
    for s in all {
        // A replica over an apiserver that ignores the selector notices it only from a pod
        // outside its shards: one holding every shard never does, and needs not.
        if s.held.len() > target || (selecting && !s.selecting) {
            return false;
        }
        for h in &s.held {
            if !seen.insert(*h) {
                return false;
            }
        }
        let expected = if selecting {
            layout.pods_of(&s.held)
        } else {
            layout.total()
        };
        if s.cache != expected {
            return false;
        }
    }
    seen.len() == shards
}

fn mib(b: i64) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

#[allow(clippy::too_many_lines)]
fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--list") {
        return; // `cargo test --benches` probes with --list
    }
    if let Ok(identity) = std::env::var("SHARD_BENCH_IDENTITY") {
        let var = |k: &str| std::env::var(k).unwrap_or_default();
        let shards = var("SHARD_BENCH_SHARDS").parse().unwrap_or(16);
        child(
            &identity,
            &PathBuf::from(var("SHARD_BENCH_KUBECONFIG")),
            &var("SHARD_BENCH_LEASES"),
            &var("SHARD_BENCH_RUN"),
            shards,
        );
        return;
    }
    let pods = arg("--pods", 100_000);
    let namespaces = arg("--namespaces", 1000).max(1);
    let shards = u32::try_from(arg("--shards", 16)).unwrap_or(16);
    let patches = arg("--patches", 5_000);
    // Threads patching at once: fewer make the events sparser (the rate at which one
    // replica's per-event cost is measured).
    let patchers = arg("--patchers", 8).max(1);
    // Patches per second over all patchers (0, the default: as fast as they go). One replica
    // fed at 1/n of the full rate sees what each of n replicas sees, without the other
    // n - 1 sharing its cores.
    let patch_rate = arg("--patch-rate", 0);
    // How long the replicas are watched idle after the sync, for their fixed cost.
    let idle_window = Duration::from_secs(arg("--idle-secs", 10) as u64);
    let per_namespace = pods.div_ceil(namespaces);
    let exe = std::env::current_exe().expect("this binary");
    let env = K8sEnv::shared().expect("the real apiserver (tests/k8s-env)");
    let gated = env
        .extra_apiserver(&["--feature-gates=ShardedListAndWatch=true"])
        .expect("an apiserver with ShardedListAndWatch on");
    let client = env.client(ApiServer::Cached).clone();
    let run = env.unique_namespace("shardbench").expect("a namespace");
    let templates = workload::templates().expect("the pod templates");
    let mut config = ShardConfig::new("any", SET, "any", shards);
    config.by = ShardBy::Namespace;
    let layout = Layout {
        namespaces: (0..namespaces).map(|i| format!("{i}-{run}")).collect(),
        config,
        per_namespace,
    };
    eprintln!(
        "creating {} pods in {namespaces} namespaces ...",
        layout.total()
    );
    let began = Instant::now();
    let until = Instant::now() + Duration::from_secs(3600);
    for (n, ns) in layout.namespaces.iter().enumerate() {
        client.create_namespace(ns).expect("a namespace");
        let batch = (0..per_namespace)
            .map(|i| {
                let mut pod = real_pod(&templates, n * per_namespace + i);
                pod["metadata"]["labels"][LABEL] = run.clone().into();
                pod
            })
            .collect();
        create_pods(&client, ns, batch, until).expect("the pods");
    }
    let mut shard_sizes = vec![0usize; shards as usize];
    for ns in &layout.namespaces {
        shard_sizes[layout.config.shard_of_text(ns) as usize] += per_namespace;
    }
    eprintln!(
        "created in {:.0} s; pods per shard: min {} max {}",
        began.elapsed().as_secs_f64(),
        shard_sizes.iter().min().unwrap_or(&0),
        shard_sizes.iter().max().unwrap_or(&0)
    );
    println!(
        "pods={} namespaces={namespaces} shards={shards} patches={patches} (wire: JSON, PodView)",
        layout.total()
    );
    println!(
        "selection replicas | heap_MiB mean max | sync_cpu_s mean max | idle_cpu_s_per_s | event_phase_s | event_cpu_s mean max | net_event_cpu_s mean max | frames mean max | cpu_us_per_frame | net_cpu_us_per_frame | net_switches_per_frame | takeover_s"
    );
    let mut round = 0u32;
    // `--modes server`, `--modes client`, or both (the default).
    let modes = arg_text("--modes").unwrap_or_else(|| "server,client".into());
    // `--replicas 1,2,4` (the default) or a subset.
    let counts: Vec<usize> = arg_text("--replicas")
        .map(|v| v.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1, 2, 4]);
    // `--rounds R` (1) runs the replica counts R times over, interleaved (1, 2, 4, 1, 2, 4):
    // the machine's noise is as large as the differences measured.
    let rounds = arg("--rounds", 1).max(1);
    let counts: Vec<usize> = (0..rounds).flat_map(|_| counts.iter().copied()).collect();
    let mut runs = Vec::new();
    if modes.contains("server") {
        runs.push((true, gated.kubeconfig_path().to_path_buf()));
    }
    if modes.contains("client") {
        runs.push((false, env.kubeconfig_path(ApiServer::Cached).to_path_buf()));
    }
    for (selecting, kubeconfig) in runs {
        for &n in &counts {
            let leases = env.unique_namespace("shardlease").expect("a namespace");
            let mut replicas: Vec<Replica> = (0..n)
                .map(|i| Replica::spawn(&exe, &format!("r{i}"), &kubeconfig, &leases, &run, shards))
                .collect();
            let live: Vec<&Replica> = replicas.iter().collect();
            let Some(synced) = settle(&live, Duration::from_secs(900), |all| {
                balanced(all, &layout, selecting)
            }) else {
                let seen: Vec<Option<Status>> = replicas.iter().map(Replica::status).collect();
                println!("{selecting} {n} | did not settle: {seen:?}");
                continue;
            };
            // Idle: the replicas' cost with nothing to do (mostly renewing their Leases), to
            // be taken off the event phase's CPU, which otherwise counts it too.
            let idle_from = Instant::now();
            let idle0: Vec<Status> = replicas.iter().filter_map(Replica::status).collect();
            std::thread::sleep(idle_window);
            let idle1: Vec<Status> = replicas.iter().filter_map(Replica::status).collect();
            let idle_secs = idle_from.elapsed().as_secs_f64();
            if idle0.len() != n || idle1.len() != n {
                println!("{selecting} {n} | a replica stopped reporting while idle");
                continue;
            }
            // Events: a new version of `patches` pods, spread over every namespace.
            let events_from = Instant::now();
            round += 1;
            let reconciles0: u64 = synced.iter().map(|s| s.reconciles).sum();
            let patched = Mutex::new((0..patches).collect::<Vec<usize>>());
            let issued = AtomicU64::new(0);
            std::thread::scope(|scope| {
                for _ in 0..patchers {
                    scope.spawn(|| {
                        loop {
                            let Some(i) = patched.lock().ok().and_then(|mut q| q.pop()) else {
                                return;
                            };
                            if patch_rate > 0 {
                                let slot = issued.fetch_add(1, Ordering::Relaxed);
                                let at = events_from
                                    + Duration::from_secs_f64(slot as f64 / patch_rate as f64);
                                std::thread::sleep(at.saturating_duration_since(Instant::now()));
                            }
                            let ns = &layout.namespaces[i % namespaces];
                            let index = (i % namespaces) * per_namespace
                                + (i / namespaces) % per_namespace;
                            let pod = real_pod(&templates, index);
                            let name = pod["metadata"]["name"].as_str().unwrap_or_default();
                            let patch = serde_json::json!({"metadata": {"annotations": {"bench/round": round.to_string()}}});
                            let _ = client.patch_pod(ns, name, &patch);
                        }
                    });
                }
            });
            let live: Vec<&Replica> = replicas.iter().collect();
            let distinct = patches.min(layout.total()) as u64;
            let Some(after) = settle(&live, Duration::from_secs(600), |all| {
                all.iter().map(|s| s.reconciles).sum::<u64>() >= reconciles0 + distinct
            }) else {
                println!("{selecting} {n} | events did not settle");
                continue;
            };
            let events_secs = events_from.elapsed().as_secs_f64();
            // Takeover: r0 dies; the survivors take its shards and list their pods.
            let takeover = if n > 1 {
                let killed = Instant::now();
                let _ = replicas[0].child.kill();
                let survivors: Vec<&Replica> = replicas[1..].iter().collect();
                settle(&survivors, Duration::from_secs(300), |all| {
                    balanced(all, &layout, selecting)
                })
                // `settle` waits a second of quiet on top.
                .map(|_| format!("{:.2}", killed.elapsed().as_secs_f64() - 1.0))
                .unwrap_or_else(|| "did not settle".into())
            } else {
                "-".into()
            };
            let mean = |f: &dyn Fn(usize) -> f64| (0..n).map(f).sum::<f64>() / n as f64;
            let max = |f: &dyn Fn(usize) -> f64| (0..n).map(f).fold(0.0, f64::max);
            let heap = |i: usize| mib(synced[i].heap);
            let sync_cpu = |i: usize| synced[i].cpu;
            let idle_rate = |i: usize| (idle1[i].cpu - idle0[i].cpu) / idle_secs;
            let event_cpu = |i: usize| after[i].cpu - idle1[i].cpu;
            // The events' own CPU: the phase's, less what the replica spends idle over as long.
            let net_cpu = |i: usize| (event_cpu(i) - idle_rate(i) * events_secs).max(0.0);
            let frames = |i: usize| (after[i].frames - idle1[i].frames) as f64;
            // Wakeups: the context switches of the event phase, less the idle rate's. A thread
            // that ended takes its count with it (a blocking-pool thread, rarely): saturate.
            let switches = |i: usize| {
                let idle = idle1[i].switches.saturating_sub(idle0[i].switches) as f64 / idle_secs;
                let phase = after[i].switches.saturating_sub(idle1[i].switches) as f64;
                (phase - idle * events_secs).max(0.0)
            };
            // Summed over the replicas, per frame they received.
            let per_frame = |of: &dyn Fn(usize) -> f64| {
                (0..n).map(of).sum::<f64>() / (0..n).map(frames).sum::<f64>().max(1.0)
            };
            println!(
                "{} {n} | {:.1} {:.1} | {:.2} {:.2} | {:.3} | {events_secs:.1} | {:.2} {:.2} | {:.2} {:.2} | {:.0} {:.0} | {:.1} | {:.1} | {:.2} | {takeover}",
                if selecting { "server" } else { "client" },
                mean(&heap),
                max(&heap),
                mean(&sync_cpu),
                max(&sync_cpu),
                mean(&idle_rate),
                mean(&event_cpu),
                max(&event_cpu),
                mean(&net_cpu),
                max(&net_cpu),
                mean(&frames),
                max(&frames),
                per_frame(&event_cpu) * 1e6,
                per_frame(&net_cpu) * 1e6,
                per_frame(&switches),
            );
            replicas.clear();
        }
    }
}
