//! `cargo bench -p reconcile-core --bench throughput_mimalloc`: the throughput comparison of
//! `throughput` with mimalloc as the allocator of both the bare decode and the core.
//!
//! The core replaces cold cached objects; glibc's free path (chunk coalescing,
//! `malloc_consolidate`) charges that far more than it charges the bare decode, which frees
//! what it allocated a moment ago. This bench shows the figure with an allocator a production
//! controller would likely pick.

#![allow(missing_docs)]

mod workload;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let w = workload::workload();
    let (body, mut pool, frames, runs) = (w.body, w.pool, w.frames, w.runs);
    println!("allocator: mimalloc");
    workload::compare(&body, &mut pool, frames, runs);
}
