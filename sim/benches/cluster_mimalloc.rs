//! `cargo bench -p reconcile-sim --bench cluster_mimalloc`: the `cluster` bench, unchanged,
//! with mimalloc as the allocator.
//!
//! Under glibc's malloc the 10,000-generator run costs 13 to 20 times the 1,000-generator
//! one for 10 times the work, while the simulator's own functions keep their share of the
//! profile: what grows is `_int_malloc` and `unlink_chunk` (13 % of the samples at 1,000, 27 %
//! at 10,000), the free-list searches of a large, fragmented heap. This bench shows the
//! growth with an allocator an operator's test binary can pick in one line.

#![allow(missing_docs)]

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[path = "cluster.rs"]
mod cluster;

fn main() {
    println!("allocator: mimalloc");
    cluster::main();
}
