//! `cargo bench -p reconcile-core --bench openapi_protobuf`: decoding real LISTs into
//! k8s-openapi's types (issue 16) from protobuf (by the embedded schemas) and from JSON, the
//! same objects at the same resourceVersion (`testdata/apiserver-protobuf/kinds`, captured from
//! a v1.36 kube-apiserver). Prints, per kind, the bodies' sizes, the time per decoded object
//! (the median of 15 rounds, each decoding the list many times) and the allocations and
//! bytes allocated per decode, counted by `stats_alloc`. Metadata only (`PartialObjectMeta`)
//! too, from `testdata/apiserver-protobuf/metadata`. Figures go in `docs/alignment.md`.

#![allow(missing_docs)]

use std::hint::black_box;
use std::time::Instant;

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod, Service};
use kube_core::PartialObjectMeta;
use reconcile_core::Object;
use reconcile_core::list::parse_list;
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<std::alloc::System> = &INSTRUMENTED_SYSTEM;

fn capture(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/../testdata/apiserver-protobuf/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// (ns per object, allocations per decode, bytes allocated per decode).
fn measure<O: Object>(body: &[u8]) -> (f64, usize, usize) {
    let objects = parse_list::<O>(body).expect("decodes").items.len();
    let region = Region::new(GLOBAL);
    black_box(parse_list::<O>(black_box(body)).expect("decodes"));
    let counted = region.change();
    let rounds = 2_000;
    let mut times: Vec<f64> = (0..15)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..rounds {
                black_box(parse_list::<O>(black_box(body)).expect("decodes"));
            }
            start.elapsed().as_secs_f64() * 1e9 / (rounds * objects) as f64
        })
        .collect();
    times.sort_by(f64::total_cmp);
    (times[7], counted.allocations, counted.bytes_allocated)
}

fn row<O: Object>(stem: &str) {
    row_of::<O>(stem, &format!("kinds/{stem}"));
}

/// Metadata only (`PartialObjectMeta`), from `metadata/<stem>-list.*`.
fn metadata_row<K>(stem: &str)
where
    PartialObjectMeta<K>: Object,
{
    row_of::<PartialObjectMeta<K>>(
        &format!("{stem} (metadata)"),
        &format!("metadata/{stem}-list"),
    );
}

fn row_of<O: Object>(stem: &str, file: &str) {
    // OPENAPI_KIND=v1-pod: that kind only.
    if std::env::var("OPENAPI_KIND").is_ok_and(|kind| kind != stem) {
        return;
    }
    let pb = capture(&format!("{file}.pb"));
    let json = capture(&format!("{file}.json"));
    // OPENAPI_PROFILE=pb|json: one side only, for a profiler.
    match std::env::var("OPENAPI_PROFILE").as_deref() {
        Ok("pb") => {
            let _ = measure::<O>(&pb);
            return;
        }
        Ok("json") => {
            let _ = measure::<O>(&json);
            return;
        }
        _ => {}
    }
    let (pb_ns, pb_allocs, pb_bytes) = measure::<O>(&pb);
    let (json_ns, json_allocs, json_bytes) = measure::<O>(&json);
    println!(
        "| {stem} | {} B / {} B | {:.1} µs / {:.1} µs ({:.2}×) | {pb_allocs} / {json_allocs} | {pb_bytes} B / {json_bytes} B |",
        pb.len(),
        json.len(),
        pb_ns / 1e3,
        json_ns / 1e3,
        pb_ns / json_ns,
    );
}

fn main() {
    println!(
        "| kind | body, protobuf / JSON | per object, protobuf / JSON | allocations per decode | bytes allocated per decode |"
    );
    println!("|---|---:|---:|---:|---:|");
    row::<Pod>("v1-pod");
    row::<Deployment>("apps-v1-deployment");
    row::<StatefulSet>("apps-v1-statefulset");
    row::<Service>("v1-service");
    row::<ConfigMap>("v1-configmap");
    row::<Node>("v1-node");
    metadata_row::<Deployment>("apps-v1-deployment");
    metadata_row::<ConfigMap>("v1-configmap");
}
