//! `cargo bench -p reconcile-core`: core throughput against a bare serde decode, and heap per
//! cached pod.
//!
//! Workload (issue 2): 100k real-shaped pods (about 8 KB of JSON each, managedFields included,
//! cloned from the captured v1.36 pod list) across 10k parents, one initial `Replace`, then 1M
//! watch frames (90% MODIFIED, 4% ADDED, 4% DELETED, 2% BOOKMARK) parsed from bytes. Two
//! reconcile modes: a busy reconciler finishing every 100 frames (parse + store + queue), and
//! one finishing before each next frame (a dispatch with member snapshot per frame).
//!
//! `throughput_mimalloc` runs the same comparison under mimalloc for both sides.
//!
//! Sizes can be lowered for a quick look: `BENCH_PODS`, `BENCH_FRAMES`, `BENCH_RUNS`.

#![allow(missing_docs)]

mod workload;

use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::Instant as WallClock;

use reconcile_core::Object;
use reconcile_core::frame::parse_frame;
use reconcile_core::list::parse_list;
use reconcile_core::pod::PodView;
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};
use workload::{Reconciles, bare_run, compare, core_run, list_body, synced_core, workload};

#[global_allocator]
static GLOBAL: &StatsAlloc<std::alloc::System> = &INSTRUMENTED_SYSTEM;

fn net_bytes(region: &Region<'_, std::alloc::System>) -> i64 {
    let c = region.change();
    // stats_alloc already counts a realloc's growth in `bytes_allocated` (and its shrink in
    // `bytes_deallocated`), so `bytes_reallocated` must not be added again.
    c.bytes_allocated as i64 - c.bytes_deallocated as i64
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo test --benches` probes with --list
    }
    let workload::Workload {
        templates,
        body,
        mut pool,
        pods,
        frames,
        runs,
    } = workload();
    match std::env::var("BENCH_ONLY").as_deref() {
        Ok("parse") => {
            // The core's frame parser alone against the bare decode, interleaved.
            for _ in 0..runs {
                let bare = frames as f64 / bare_run(&mut pool, frames).as_secs_f64();
                let start = WallClock::now();
                for n in 0..frames {
                    black_box(parse_frame::<PodView>(pool.frame(n)).unwrap());
                }
                let parse = frames as f64 / start.elapsed().as_secs_f64();
                println!(
                    "bare {bare:.0} frames/s, parse_frame {parse:.0} frames/s ({:.2}x)",
                    parse / bare
                );
            }
            return;
        }
        Ok("list") => {
            // The LIST decoder, whole and in 16 KiB chunks, against serde_json over the body.
            #[derive(serde::Deserialize)]
            struct BareList {
                items: Vec<PodView>,
            }
            let mb = body.len() as f64 / 1e6;
            for _ in 0..runs {
                let start = WallClock::now();
                let n = serde_json::from_slice::<BareList>(&body)
                    .unwrap()
                    .items
                    .len();
                let bare = mb / start.elapsed().as_secs_f64();
                let start = WallClock::now();
                black_box(parse_list::<PodView>(&body).unwrap());
                let whole = mb / start.elapsed().as_secs_f64();
                let start = WallClock::now();
                let mut decoder = reconcile_core::list::ListDecoder::<PodView>::new();
                for chunk in body.chunks(16 * 1024) {
                    decoder.push(chunk).unwrap();
                }
                black_box(decoder.finish().unwrap());
                let chunked = mb / start.elapsed().as_secs_f64();
                println!(
                    "{n} pods: bare from_slice {bare:.0} MB/s, parse_list {whole:.0} MB/s ({:.2}x), 16 KiB chunks {chunked:.0} MB/s ({:.2}x)",
                    whole / bare,
                    chunked / bare
                );
            }
            return;
        }
        Ok("core") => {
            // For profiling the loop alone: `BENCH_ONLY=core perf record -D <ms> …`.
            let t = core_run(&body, &mut pool, frames, Reconciles::Busy);
            println!("core: {:.0} frames/s", frames as f64 / t.as_secs_f64());
            return;
        }
        _ => {}
    }
    println!("allocator: the system allocator (glibc), instrumented");
    compare(&body, &mut pool, frames, runs);

    // Heap per cached pod: the loop's whole state after the initial LIST, over the pod count.
    let region = Region::new(GLOBAL);
    let (core, _) = synced_core(&body);
    let loop_bytes = net_bytes(&region);
    println!(
        "heap per cached pod, PodView in the loop (store + index): {:.0} B",
        loop_bytes as f64 / core.store().len() as f64
    );
    drop(core);

    let region = Region::new(GLOBAL);
    let bare_map: BTreeMap<String, PodView> = parse_list::<PodView>(&body)
        .unwrap()
        .items
        .into_iter()
        .map(|p| (p.key().unwrap().to_string(), p))
        .collect();
    let bare_bytes = net_bytes(&region);
    println!(
        "heap per pod, bare BTreeMap<String, PodView>: {:.0} B",
        bare_bytes as f64 / bare_map.len() as f64
    );
    drop(bare_map);

    let full_pods = pods.min(10_000);
    let full_body = list_body(&templates, full_pods);
    let region = Region::new(GLOBAL);
    let full = parse_list::<k8s_openapi::api::core::v1::Pod>(&full_body).unwrap();
    let full_bytes = net_bytes(&region);
    println!(
        "heap per pod, k8s_openapi Pod (parsed list of {full_pods}): {:.0} B",
        full_bytes as f64 / full.items.len() as f64
    );
}
