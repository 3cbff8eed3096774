//! The command line shared by `reconcile-bench` and `reconcile-bench-heap`.
//!
//! ```text
//! reconcile-bench all [--quick] [--runs N] [--frames N] [--no-real] [--out PATH]
//!                     [--real-sizes N,N] [--paging-sizes N,N] [--paging-runs N]
//!                     [--rates N,N] [--write-pods N] [--write-runs N]
//!                     [--only throughput,owned,replay,real,paging,real-throughput,scale]
//! reconcile-bench peer bare|core|tokio|kube (--server URL | --kubeconfig PATH)
//!                 [--namespace NS] [--mode sync|throughput] [--scenario pods|owned]
//!                 [--deadline SECS] [--page-size N] [--wire json|protobuf]
//! reconcile-bench serve [--pods N] [--frames N] [--seconds S] [--scenario pods|owned]
//! reconcile-bench core-scale relist|parent|resync --objects N
//! ```
//!
//! `serve` runs the replay server alone for a manual look (printing its URL, then the
//! requests it served), for at most `--seconds` (default 60). With `--scenario owned` it
//! serves `--pods / 10` ReplicaSets and the `--pods` pods they own.

use std::path::PathBuf;
use std::time::Duration;

use crate::BenchError;
use crate::orchestrate::{self, Binaries, Section, Settings};
use crate::peers::{self, HeapProbe, PeerArgs, PeerKind, Scenario, Target, Wire};

/// Runs the command line; returns the process exit code.
#[must_use]
pub fn main(heap: Option<HeapProbe>) -> i32 {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("peer") => peer(&args[1..], heap),
        Some("core-scale") => crate::scale::main(&args[1..]),
        Some("serve") => match serve(&args[1..]) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("reconcile-bench: {e}");
                1
            }
        },
        Some("all") => match all(&args[1..]) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("reconcile-bench: {e}");
                1
            }
        },
        // `cargo test --benches` probes bench targets with `--list`.
        Some("--list") => 0,
        _ => {
            eprintln!(
                "usage: reconcile-bench all [--quick] [--runs N] [--frames N] [--no-real] [--out PATH] [--real-sizes N,N] [--paging-sizes N,N] [--paging-runs N] [--rates N,N] [--write-pods N] [--write-runs N] [--only throughput,owned,replay,real,paging,real-throughput,scale]"
            );
            eprintln!(
                "       reconcile-bench peer bare|core|tokio|kube (--server URL | --kubeconfig PATH) [--namespace NS] [--mode sync|throughput] [--scenario pods|owned] [--deadline SECS] [--page-size N] [--wire json|protobuf]"
            );
            eprintln!(
                "       reconcile-bench serve [--pods N] [--frames N] [--seconds S] [--scenario pods|owned]"
            );
            2
        }
    }
}

fn value<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
}

fn peer(args: &[String], heap: Option<HeapProbe>) -> i32 {
    let kind = args.first().and_then(|k| PeerKind::parse(k));
    let target = match (value(args, "--server"), value(args, "--kubeconfig")) {
        (Some(url), _) => Some(Target::Replay(url.to_owned())),
        (None, Some(path)) => Some(Target::Kubeconfig(PathBuf::from(path))),
        (None, None) => None,
    };
    let (Some(kind), Some(target)) = (kind, target) else {
        eprintln!("peer: need a peer name and --server or --kubeconfig");
        return 2;
    };
    let Some(scenario) = Scenario::parse(value(args, "--scenario").unwrap_or("pods")) else {
        eprintln!("peer: --scenario is pods or owned");
        return 2;
    };
    let page_size = match value(args, "--page-size").map(str::parse::<u32>) {
        None => None,
        Some(Ok(n)) => Some(n),
        Some(Err(_)) => {
            eprintln!("peer: --page-size is a count (0: one request)");
            return 2;
        }
    };
    let Some(wire) = Wire::parse(value(args, "--wire").unwrap_or("json")) else {
        eprintln!("peer: --wire is json or protobuf");
        return 2;
    };
    let args = PeerArgs {
        kind,
        target,
        namespace: value(args, "--namespace")
            .unwrap_or(crate::workload::NAMESPACE)
            .to_owned(),
        scenario,
        throughput: value(args, "--mode") == Some("throughput"),
        deadline: Duration::from_secs(
            value(args, "--deadline")
                .and_then(|d| d.parse().ok())
                .unwrap_or(300),
        ),
        page_size,
        wire,
    };
    let report = peers::run(&args, heap);
    let failed = report.error.is_some();
    println!("{}", serde_json::to_string(&report).unwrap_or_default());
    i32::from(failed)
}

fn serve(args: &[String]) -> Result<(), BenchError> {
    let number = |name: &str, default: usize| {
        value(args, name)
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let templates = crate::workload::templates()?;
    let frames = number("--frames", 0);
    let pods = number("--pods", 1000);
    let workloads = match value(args, "--scenario") {
        Some("owned") => crate::workload::owned_pair(
            &templates,
            pods / crate::workload::PODS_PER_CELL,
            frames.max(2),
            5_000,
        )
        .into_iter()
        .map(std::sync::Arc::new)
        .collect(),
        _ => vec![std::sync::Arc::new(crate::workload::Workload::new(
            &templates,
            pods,
            frames.max(1),
            5_000,
        ))],
    };
    let mode = if frames > 0 {
        crate::replay::Mode::Throughput
    } else {
        crate::replay::Mode::Sync
    };
    let server = crate::replay::ReplayServer::start_all(workloads, mode)?;
    println!("{}", server.url());
    let seconds = number("--seconds", 60) as u64;
    let mut seen = std::collections::BTreeMap::new();
    for _ in 0..seconds * 10 {
        std::thread::sleep(Duration::from_millis(100));
        let now = server.requests();
        if now != seen {
            eprintln!("requests: {now:?}");
            seen = now;
        }
    }
    Ok(())
}

/// Parses a comma-separated list of counts given to `flag`.
fn counts(flag: &str, list: &str) -> Result<Vec<usize>, BenchError> {
    list.split(',')
        .map(|s| {
            s.trim()
                .parse()
                .map_err(|_| BenchError::Input(format!("{flag}: {s:?} is not a count")))
        })
        .collect()
}

fn all(args: &[String]) -> Result<(), BenchError> {
    let mut settings = if args.iter().any(|a| a == "--quick") {
        Settings::quick()
    } else {
        Settings::full()
    };
    if let Some(runs) = value(args, "--runs").and_then(|r| r.parse().ok()) {
        settings.runs = runs;
    }
    if let Some(frames) = value(args, "--frames").and_then(|r| r.parse().ok()) {
        settings.frames = frames;
    }
    if args.iter().any(|a| a == "--no-real") {
        settings.real_sizes.clear();
        settings.paging_sizes.clear();
        settings.write_rates.clear();
    }
    if let Some(sizes) = value(args, "--real-sizes") {
        settings.real_sizes = counts("--real-sizes", sizes)?;
    }
    if let Some(sizes) = value(args, "--paging-sizes") {
        settings.paging_sizes = counts("--paging-sizes", sizes)?;
    }
    if let Some(rates) = value(args, "--rates") {
        settings.write_rates = counts("--rates", rates)?;
    }
    if let Some(pods) = value(args, "--write-pods").and_then(|r| r.parse().ok()) {
        settings.write_pods = pods;
    }
    if let Some(runs) = value(args, "--paging-runs").and_then(|r| r.parse().ok()) {
        settings.paging_runs = runs;
    }
    if let Some(runs) = value(args, "--write-runs").and_then(|r| r.parse().ok()) {
        settings.write_runs = runs;
    }
    if let Some(only) = value(args, "--only") {
        settings.sections = only
            .split(',')
            .map(|s| {
                Section::parse(s.trim())
                    .ok_or_else(|| BenchError::Input(format!("--only: no section {s:?}")))
            })
            .collect::<Result<_, _>>()?;
    }
    let out = value(args, "--out").map_or_else(
        || {
            PathBuf::from(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../docs/benchmarks.md"
            ))
        },
        PathBuf::from,
    );
    let exe = std::env::current_exe()?;
    let bins = Binaries::locate(&exe)?;
    let results = orchestrate::run_all(&bins, &settings)?;
    let out_value = args.iter().position(|a| a == "--out").map(|i| i + 1);
    let command = std::iter::once("bash bench/run.sh".to_owned())
        .chain(
            args.iter()
                .enumerate()
                .filter(|(i, a)| *a != "--out" && Some(*i) != out_value)
                .map(|(_, a)| a.clone()),
        )
        .collect::<Vec<_>>()
        .join(" ");
    if settings.sections.iter().all(|s| s.spliced()) {
        // Only sections with their own block: the rest of the doc keeps its figures.
        crate::doc::splice(&out, &results, &command)?;
    } else {
        crate::doc::write(&out, &results, &command)?;
    }
    eprintln!("reconcile-bench: wrote {}", out.display());
    Ok(())
}
