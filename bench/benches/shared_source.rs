//! `cargo bench -p reconcile-bench --bench shared_source`: two controllers over one shared
//! pod source (a `Reflector` and `Controller::for_shared`) against two controllers with a
//! source each, on the loopback replay server (issue 29). Each scenario runs in a child
//! process of its own (this binary again), so its heap (a counting allocator) and its CPU
//! seconds (`/proc/self/stat`) are its own and the server's are not in them. Prints one
//! line per scenario and run: heap growth to both controllers synced, CPU seconds, the
//! LISTs and WATCHes the server saw. `-- --pods N --runs R` to change the size.

#![allow(missing_docs)]

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use reconcile_bench::replay::{Mode, ReplayServer};
use reconcile_bench::workload::{self, NAMESPACE, SELECTOR, Workload};
use reconcile_tokio::{
    Action, Controller, KeyMap, KubeTransport, PodView, Reconcile, Reflector, SharedSource, Source,
    default_error_policy,
};
use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<std::alloc::System> = &INSTRUMENTED_SYSTEM;

fn heap_in_use() -> i64 {
    let stats = GLOBAL.stats();
    stats.bytes_allocated as i64 - stats.bytes_deallocated as i64
}

/// User plus system CPU seconds of this process so far (Linux).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command's closing parenthesis; utime and stime are the 12th and 13th.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

async fn noop(_: Reconcile<PodView, String>, _: Arc<()>) -> Result<Action, String> {
    Ok(Action::await_change())
}

fn source(url: &str) -> Source<PodView, KubeTransport> {
    let uri: http::Uri = url.parse().expect("the replay server's url");
    let client = kube::Client::try_from(kube::Config::new(uri)).expect("a client");
    Source::pods(KubeTransport::new(client), Some(NAMESPACE))
}

/// The child: runs `scenario` against `url`, prints `heap_bytes cpu_s sync_s`.
fn child(scenario: &str, url: &str) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let heap0 = heap_in_use();
    let cpu0 = cpu_seconds();
    let t0 = Instant::now();
    runtime.block_on(async {
        let by_cell = || KeyMap::by_label(SELECTOR);
        let (mut running, reflector) = match scenario {
            "separate" => {
                let mut running = Vec::new();
                for _ in 0..2 {
                    let c = Controller::new(source(url), by_cell())
                        .resync(None)
                        .start(noop, default_error_policy, Arc::new(()))
                        .await
                        .expect("synced");
                    running.push(c);
                }
                (running, None)
            }
            _ => {
                let reflector = Reflector::<PodView>::new(source(url))
                    .start()
                    .await
                    .expect("the reflector synced");
                let shared = SharedSource::of(reflector.cache());
                let mut running = Vec::new();
                for _ in 0..2 {
                    let c = Controller::for_shared(shared.clone(), by_cell())
                        .resync(None)
                        .start(noop, default_error_policy, Arc::new(()))
                        .await
                        .expect("synced");
                    running.push(c);
                }
                (running, Some(reflector))
            }
        };
        let synced = t0.elapsed();
        // Let the first reconciles of every cell run out.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let heap = heap_in_use() - heap0;
        let cpu = cpu_seconds() - cpu0;
        println!("{heap} {cpu:.2} {:.3}", synced.as_secs_f64());
        for c in running.drain(..) {
            let _ = c.shutdown().await;
        }
        if let Some(r) = reflector {
            let _ = r.shutdown().await;
        }
    });
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--list") {
        return; // `cargo test --benches` probes with --list
    }
    if let (Ok(scenario), Ok(url)) = (
        std::env::var("SHARED_SOURCE_SCENARIO"),
        std::env::var("SHARED_SOURCE_URL"),
    ) {
        child(&scenario, &url);
        return;
    }
    let pods = arg("--pods", 10_000);
    let runs = arg("--runs", 3);
    let templates = workload::templates().expect("the pod templates");
    let exe = std::env::current_exe().expect("this binary");
    println!("pods={pods} runs={runs}");
    println!("scenario heap_MiB heap_B_per_pod cpu_s sync_s lists watches");
    for run in 0..runs {
        for scenario in ["separate", "shared"] {
            let workload = Arc::new(Workload::new(&templates, pods, 1, 1));
            let server = ReplayServer::start(workload, Mode::Sync).expect("the replay server");
            let out = Command::new(&exe)
                .env("SHARED_SOURCE_SCENARIO", scenario)
                .env("SHARED_SOURCE_URL", server.url())
                .output()
                .expect("the child ran");
            let line = String::from_utf8_lossy(&out.stdout);
            let mut fields = line.split_whitespace();
            let heap: f64 = fields
                .next()
                .and_then(|f| f.parse().ok())
                .unwrap_or(f64::NAN);
            let cpu = fields.next().unwrap_or("?").to_owned();
            let sync = fields.next().unwrap_or("?").to_owned();
            let requests = server.requests();
            let count = |watch: bool| {
                requests
                    .iter()
                    .filter(|(k, _)| k.starts_with("watch") == watch)
                    .map(|(_, n)| n)
                    .sum::<usize>()
            };
            println!(
                "{scenario} {:.1} {:.0} {cpu} {sync} {} {} (run {run})",
                heap / (1024.0 * 1024.0),
                heap / pods as f64,
                count(false),
                count(true),
            );
            if !out.status.success() {
                eprintln!("{}", String::from_utf8_lossy(&out.stderr));
            }
        }
    }
}
