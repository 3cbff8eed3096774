//! `cargo bench -p reconcile-core --bench amplification`: how much heap a decoded LIST and a
//! decoded watch frame hold per byte received (issue 17), for real pods and for degenerate
//! bodies built to amplify.
//!
//! For each body it prints the heap the decoded listing holds once the decoder finished
//! (`held`), the most it held after any 16 KiB chunk while the body streamed in (`peak`),
//! both as a multiple of the body's length, and what the decoder's bound said (`ok`, or the
//! error). The heap is counted by `stats_alloc` around the decode, so it is exact, not an
//! estimate. Figures go in `docs/alignment.md` (Bounds).

#![allow(missing_docs)]

mod workload;

use std::hint::black_box;

use reconcile_core::Object;
use reconcile_core::frame::parse_frame;
use reconcile_core::list::{ListDecoder, ListLimits};
use reconcile_core::pod::PodView;
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<std::alloc::System> = &INSTRUMENTED_SYSTEM;

fn net_bytes(region: &Region<'_, std::alloc::System>) -> i64 {
    let c = region.change();
    c.bytes_allocated as i64 - c.bytes_deallocated as i64
}

fn real(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/../testdata/real/k8s-openapi/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// A list of `n` copies of `item`.
fn list_of(item: &str, n: usize) -> Vec<u8> {
    let mut body = String::from(r#"{"kind":"List","metadata":{"resourceVersion":"1"},"items":["#);
    for i in 0..n {
        if i > 0 {
            body.push(',');
        }
        body.push_str(item);
    }
    body.push_str("]}");
    body.into_bytes()
}

/// Decodes `body` in 16 KiB chunks under `limits`; prints held and peak over the body.
fn measure<O: Object>(what: &str, body: &[u8], limits: ListLimits) {
    let region = Region::new(GLOBAL);
    let mut peak = 0i64;
    let mut decoder = ListDecoder::<O>::with_limits(limits);
    let mut result = Ok(());
    let mut charged = 0;
    for chunk in body.chunks(16 * 1024) {
        result = decoder.push(chunk);
        charged = decoder.charged();
        peak = peak.max(net_bytes(&region));
        if result.is_err() {
            break;
        }
    }
    let (outcome, items, held) = match result.and_then(|()| decoder.finish()) {
        Ok(list) => {
            let held = net_bytes(&region);
            let items = list.items.len() + list.skipped.len();
            black_box(&list);
            drop(list);
            ("ok".to_owned(), items, held)
        }
        Err(e) => {
            let held = net_bytes(&region);
            (format!("refused: {e}"), 0, held)
        }
    };
    let peak = peak.max(held);
    let len = body.len() as f64;
    println!(
        "{what:<50} {:>9} B {items:>7} items  held {:>6.2}x  peak {:>6.2}x ({:>4} MB)  charged {:>5.2}x  {outcome}",
        body.len(),
        held as f64 / len,
        peak as f64 / len,
        peak >> 20,
        charged as f64 / len,
    );
}

/// One watch frame decoded: the heap its event holds over the line's length.
fn frame<O: Object>(what: &str, line: &[u8]) {
    let region = Region::new(GLOBAL);
    let event = parse_frame::<O>(line);
    let held = net_bytes(&region);
    black_box(&event);
    println!(
        "{what:<50} {:>9} B  held {:>6.2}x (+{} B inline)  {}",
        line.len(),
        held as f64 / line.len() as f64,
        size_of::<reconcile_core::frame::WatchEvent<O>>(),
        if event.is_ok() { "ok" } else { "error" }
    );
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo test --benches` probes with --list
    }
    // The bound as it is today, and no bound at all, to show what it refuses.
    let bounded = ListLimits::default();
    let unbounded = ListLimits::unbounded();
    println!(
        "bound: held <= {}x bytes + {} B, at most {} items; size_of PodView {} B, Pod {} B",
        bounded.multiple,
        bounded.allowance,
        bounded.max_items,
        size_of::<PodView>(),
        size_of::<k8s_openapi::api::core::v1::Pod>()
    );
    let templates = workload::templates();
    let v136 = real("v1-36_pod-list.body.json");
    let v120 = real("v1-20_pod-list.body.json");
    let bench = workload::list_body(&templates, 10_000);
    let small = list_of(
        r#"{"metadata":{"name":"pod-000001","namespace":"default","resourceVersion":"1","labels":{"cell":"c1"}}}"#,
        200_000,
    );
    let empty = list_of("{}", 2_000_000);
    let ints = list_of("1", 2_000_000);
    let conditions = list_of(
        &format!(
            r#"{{"status":{{"conditions":[{}]}}}}"#,
            vec![r#"{"type":"","status":""}"#; 1000].join(",")
        ),
        1000,
    );
    let statuses = list_of(
        &format!(
            r#"{{"status":{{"containerStatuses":[{}]}}}}"#,
            vec![r#"{"name":"","restartCount":0}"#; 1000].join(",")
        ),
        1000,
    );
    let containers = list_of(
        &format!(
            r#"{{"spec":{{"containers":[{}]}}}}"#,
            vec![r#"{"name":""}"#; 1000].join(",")
        ),
        1000,
    );
    for (label, limits) in [("unbounded", unbounded), ("bounded (default)", bounded)] {
        println!("-- {label}");
        measure::<PodView>("real v1.36 pod list (8 pods), PodView", &v136, limits);
        measure::<PodView>("real v1.20 pod list (8 pods), PodView", &v120, limits);
        measure::<k8s_openapi::api::core::v1::Pod>(
            "real v1.36 pod list (8 pods), k8s-openapi Pod",
            &v136,
            limits,
        );
        measure::<PodView>("bench pod shape, 10k pods, PodView", &bench, limits);
        measure::<k8s_openapi::api::core::v1::Pod>(
            "bench pod shape, 10k pods, k8s-openapi Pod",
            &bench,
            limits,
        );
        measure::<PodView>("small pods (metadata only), 200k, PodView", &small, limits);
        measure::<PodView>("`{}` items, 2M, PodView", &empty, limits);
        measure::<k8s_openapi::api::core::v1::Pod>("`{}` items, 2M, Pod", &empty, limits);
        measure::<PodView>("`1` items (all skipped), 2M, PodView", &ints, limits);
        measure::<PodView>(
            "1000 pods x 1000 `{type,status}` conditions",
            &conditions,
            limits,
        );
        measure::<PodView>(
            "1000 pods x 1000 minimal containerStatuses",
            &statuses,
            limits,
        );
        measure::<k8s_openapi::api::core::v1::Pod>(
            "1000 pods x 1000 `{name}` containers, Pod",
            &containers,
            limits,
        );
    }
    // What the bound's bookkeeping costs: the bench's pods decoded with and without it,
    // interleaved, in 16 KiB chunks.
    let runs = workload::env_usize("BENCH_RUNS", 5);
    let mb = bench.len() as f64 / 1e6;
    let speed = |limits: ListLimits| {
        let start = std::time::Instant::now();
        let mut decoder = ListDecoder::<PodView>::with_limits(limits);
        for chunk in bench.chunks(16 * 1024) {
            decoder.push(chunk).unwrap();
        }
        black_box(decoder.finish().unwrap());
        mb / start.elapsed().as_secs_f64()
    };
    for _ in 0..runs {
        let plain = speed(unbounded);
        let checked = speed(bounded);
        println!(
            "decode speed, 10k bench pods: unbounded {plain:.0} MB/s, bounded {checked:.0} MB/s ({:.3}x)",
            checked / plain
        );
    }
    println!("-- frames");
    let line = |object: &str| format!(r#"{{"type":"ADDED","object":{object}}}"#).into_bytes();
    let items = |body: &[u8]| -> Vec<String> {
        let list: serde_json::Value = serde_json::from_slice(body).unwrap();
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.to_string())
            .collect()
    };
    let real_pod = items(&v136).swap_remove(0);
    frame::<PodView>("real v1.36 pod, PodView", &line(&real_pod));
    frame::<k8s_openapi::api::core::v1::Pod>("real v1.36 pod, Pod", &line(&real_pod));
    frame::<PodView>("`{}`, PodView", &line("{}"));
    frame::<PodView>(
        "1000 `{type,status}` conditions, PodView",
        &line(&format!(
            r#"{{"metadata":{{"resourceVersion":"1"}},"status":{{"conditions":[{}]}}}}"#,
            vec![r#"{"type":"","status":""}"#; 1000].join(",")
        )),
    );
    frame::<PodView>(
        "1000 minimal containerStatuses, PodView",
        &line(&format!(
            r#"{{"metadata":{{"resourceVersion":"1"}},"status":{{"containerStatuses":[{}]}}}}"#,
            vec![r#"{"name":"","restartCount":0}"#; 1000].join(",")
        )),
    );
    frame::<k8s_openapi::api::core::v1::Pod>(
        "40,000 `{name}` containers (past 64 KiB: checked), Pod",
        &line(&format!(
            r#"{{"metadata":{{"resourceVersion":"1"}},"spec":{{"containers":[{}]}}}}"#,
            vec![r#"{"name":""}"#; 40_000].join(",")
        )),
    );
    frame::<k8s_openapi::api::core::v1::Pod>(
        "1000 `{name}` containers, Pod",
        &line(&format!(
            r#"{{"metadata":{{"resourceVersion":"1"}},"spec":{{"containers":[{}]}}}}"#,
            vec![r#"{"name":""}"#; 1000].join(",")
        )),
    );
}
