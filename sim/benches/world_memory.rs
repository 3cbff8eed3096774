//! World mode's memory against the LIST it serves (issue 31: at most 3× the LIST's bytes).
//!
//! `cargo bench -p reconcile-sim --bench world_memory`; sizes from `WORLD_MEMORY_PODS`
//! (default `20000,100000`). For each size the bench writes a capture of real pods (the 8
//! pods of a kube-apiserver 1.36 LIST in `testdata/real`, managedFields and all, cycled under
//! unique names, 6.9 to 9.9 KB each) and then runs, each in a fresh process so that its peak
//! is its own, what the command line runs:
//! - `import` of the capture, written to a trace file;
//! - `simulate` of that trace: the world built from it, the controller's LIST served, one
//!   simulated hour.
//!
//! Each process reports its peak resident set (`VmHWM`), and the bench prints it as a
//! multiple of the LIST the world serves (every pod's JSON text, as the apiserver's LIST body
//! holds them). A single trace line holds at most 256 MiB (`reconcile_trace::read`), so up to
//! 25,000 pods are one PodList capture and larger worlds a watch capture of one ADDED frame
//! per pod, which `simulate` then serves as one LIST. Proof of work: the simulated
//! controller's store ends with every pod, and the run breaks no invariant.

#![allow(missing_docs)]

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use reconcile_sim::SimOptions;
use reconcile_sim::import;

const CHILD: &str = "WORLD_MEMORY_CHILD";

/// The most pods written as one PodList: its line stays under the trace reader's 256 MiB.
const ONE_LIST_AT_MOST: usize = 25_000;

fn main() {
    if let Ok(job) = std::env::var(CHILD) {
        child(&job);
        return;
    }
    let sizes: Vec<usize> = std::env::var("WORLD_MEMORY_PODS")
        .unwrap_or_else(|_| "20000,100000".into())
        .split(',')
        .map(|s| s.trim().parse().expect("WORLD_MEMORY_PODS: pod counts"))
        .collect();
    let dir = std::env::temp_dir().join(format!("world-memory-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    println!(
        "| pods | capture | LIST bytes | import peak | × LIST | simulate peak | × LIST | store |"
    );
    println!("|---:|---|---:|---:|---:|---:|---:|---:|");
    for pods in sizes {
        let (capture, list_bytes, shape) = write_capture(&dir, pods);
        let trace = dir.join(format!("trace-{pods}.jsonl"));
        let import_peak = run_child(&format!("import {} {}", capture.display(), trace.display()));
        std::fs::remove_file(&capture).unwrap();
        let simulate = run_child(&format!("simulate {}", trace.display()));
        std::fs::remove_file(&trace).unwrap();
        let store: usize = field(&simulate, "store").parse().unwrap();
        assert_eq!(store, pods, "the controller's store ends with every pod");
        let ratio = |peak: &str| peak.parse::<f64>().unwrap() * 1024.0 / list_bytes as f64;
        let import_kib = field(&import_peak, "peak_kib");
        let simulate_kib = field(&simulate, "peak_kib");
        println!(
            "| {pods} | {shape} | {list_bytes} | {} MB | {:.2}× | {} MB | {:.2}× | {store} |",
            import_kib.parse::<u64>().unwrap() / 1024,
            ratio(import_kib),
            simulate_kib.parse::<u64>().unwrap() / 1024,
            ratio(simulate_kib),
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Writes a capture of `pods` real pods; returns it, the bytes of the LIST the world will
/// serve of them, and the capture's shape.
fn write_capture(dir: &Path, pods: usize) -> (PathBuf, usize, &'static str) {
    let path = format!(
        "{}/../testdata/real/k8s-openapi/v1-36_pod-list.body.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let real: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let real = real["items"].as_array().unwrap();
    let items: Vec<String> = (0..pods)
        .map(|i| {
            let mut pod = real[i % real.len()].clone();
            let meta = &mut pod["metadata"];
            meta["name"] = format!("p{i:07}").into();
            meta["namespace"] = "default".into();
            meta["uid"] = format!("u-{i}").into();
            meta["resourceVersion"] = (i + 2).to_string().into();
            pod.to_string()
        })
        .collect();
    let head = format!(
        "{{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{{\"resourceVersion\":\"{}\"}},\"items\":[",
        pods + 1
    );
    let list_bytes =
        head.len() + items.iter().map(String::len).sum::<usize>() + pods.saturating_sub(1) + 2;
    let capture = dir.join(format!("capture-{pods}.json"));
    let shape = if pods <= ONE_LIST_AT_MOST {
        std::fs::write(&capture, format!("{head}{}]}}", items.join(","))).unwrap();
        "PodList"
    } else {
        let frames: String = items
            .iter()
            .map(|item| format!("{{\"type\":\"ADDED\",\"object\":{item}}}\n"))
            .collect();
        std::fs::write(&capture, frames).unwrap();
        "watch stream"
    };
    (capture, list_bytes, shape)
}

/// Runs this bench again as a child doing `job`; returns what it printed.
fn run_child(job: &str) -> String {
    let out = Command::new(std::env::current_exe().unwrap())
        .env(CHILD, job)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{job}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The value of `name=` in a child's output.
fn field<'a>(out: &'a str, name: &str) -> &'a str {
    out.split_whitespace()
        .find_map(|w| w.strip_prefix(name)?.strip_prefix('='))
        .unwrap_or_else(|| panic!("no {name}= in {out:?}"))
}

/// What one command-line run does, then its peak resident set.
fn child(job: &str) {
    let words: Vec<&str> = job.split(' ').collect();
    match words.as_slice() {
        ["import", capture, trace] => {
            let trace_file = read(capture);
            reconcile_sim::trace::write_private_with(Path::new(trace), |out| {
                import::write_redacted(
                    trace_file,
                    &reconcile_sim::trace::redact::Redaction::none(),
                    out,
                )
            })
            .unwrap();
            println!("peak_kib={}", peak_kib());
        }
        ["simulate", trace] => {
            let trace = read(trace);
            let opts = SimOptions {
                check: true,
                max_steps: reconcile_sim::simulate::step_budget(&trace),
                ..SimOptions::default()
            };
            reconcile_sim::simulate::validate(&trace, &opts).unwrap();
            let report =
                reconcile_sim::simulate::simulate_to(&trace, &opts, Box::new(std::io::sink()))
                    .unwrap();
            assert!(report.violations.is_empty(), "{:?}", report.violations);
            println!("peak_kib={} store={}", peak_kib(), report.store.len());
        }
        _ => panic!("unknown job {job:?}"),
    }
}

/// Reads a capture or trace as the command line does: the file's bytes are dropped once
/// parsed.
fn read(path: &str) -> reconcile_sim::trace::Trace {
    let bytes = std::fs::read(path).unwrap();
    let text = std::str::from_utf8(&bytes).unwrap();
    import::import(path, text, None).unwrap()
}

/// This process's peak resident set, in KiB (`VmHWM` of `/proc/self/status`).
fn peak_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/self/status")
}
