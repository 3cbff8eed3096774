//! `import` and world mode hold a LIST of real pods within 3× its bytes (issue 31), checked
//! as the command line runs them, under an address-space cap (`prlimit --as`, util-linux) of
//! three times the LIST plus the 64 MiB the binary maps for itself (`bad_input.rs`). Before
//! the fix `import` read the capture into JSON trees (13× a PodList's bytes) and `simulate`
//! joined the LIST it served into one body beside the world and the trace (3.3×).
//!
//! The figures at 20,000 and 100,000 pods are `cargo bench -p reconcile-sim --bench
//! world_memory` (`docs/benchmarks.md`).

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_reconcile-sim");
/// What the binary maps besides its data (the cap `bad_input.rs` runs every input under).
const BASE_BYTES: u64 = 64 << 20;

/// A PodList of `pods` real pods (a kube-apiserver 1.36 LIST's, managedFields and all,
/// cycled under unique names), one line.
fn pod_list(pods: usize) -> String {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../testdata/real/k8s-openapi/v1-36_pod-list.body.json"
    );
    let real: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let real = real["items"].as_array().unwrap();
    let items: Vec<String> = (0..pods)
        .map(|i| {
            let mut pod = real[i % real.len()].clone();
            let meta = &mut pod["metadata"];
            meta["name"] = format!("p{i:06}").into();
            meta["uid"] = format!("u-{i}").into();
            meta["resourceVersion"] = (i + 2).to_string().into();
            pod.to_string()
        })
        .collect();
    format!(
        "{{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{{\"resourceVersion\":\"{}\"}},\"items\":[{}]}}",
        pods + 1,
        items.join(",")
    )
}

fn capped(cap: u64, args: &[&str]) -> Output {
    Command::new("prlimit")
        .arg(format!("--as={cap}"))
        .arg("--")
        .arg(BIN)
        .args(args)
        .output()
        .expect("prlimit (util-linux) runs the binary under a memory cap")
}

#[test]
fn import_and_simulate_hold_a_large_list_within_three_times_its_bytes() {
    let dir = std::env::temp_dir().join(format!("reconcile-memory-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // 2,500 pods: 21 MB, over `simulate`'s 16 MiB cut-off for LISTs served in pieces.
    let list = pod_list(2_500);
    let capture = dir.join("pods.json");
    std::fs::write(&capture, &list).unwrap();
    let cap = BASE_BYTES + 3 * list.len() as u64;
    let trace = dir.join("pods.jsonl");
    let (capture, trace) = (capture.to_str().unwrap(), trace.to_str().unwrap());

    let out = capped(cap, &["import", "--no-redact", "-q", capture, "-o", trace]);
    assert!(
        out.status.success(),
        "import of {} bytes under a cap of {cap}: {}",
        list.len(),
        String::from_utf8_lossy(&out.stderr)
    );
    let out = capped(cap, &["simulate", trace]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "simulate of {} bytes under a cap of {cap}: {}",
        list.len(),
        String::from_utf8_lossy(&out.stderr)
    );
    // Proof of work: the controller listed every pod.
    assert!(
        stdout.contains("list L1 200 items=2500 rv=2501"),
        "{}",
        stdout.lines().take(3).collect::<Vec<_>>().join("\n")
    );
    assert!(
        stdout.contains("2500 objects in store"),
        "{}",
        stdout.lines().last().unwrap_or("")
    );
    let _ = std::fs::remove_dir_all(PathBuf::from(&dir));
}
