//! The Rust peers with a counting allocator, for heap per cached pod. The counters cost a
//! few atomic adds per allocation, so throughput and sync times come from `reconcile-bench`.

use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<std::alloc::System> = &INSTRUMENTED_SYSTEM;

/// Bytes in use. stats_alloc already books a realloc's growth in `bytes_allocated` (and its
/// shrinkage in `bytes_deallocated`); adding `bytes_reallocated` too would count it twice.
fn heap_in_use() -> i64 {
    let stats = GLOBAL.stats();
    stats.bytes_allocated as i64 - stats.bytes_deallocated as i64
}

fn main() {
    std::process::exit(reconcile_bench::cli::main(Some(heap_in_use)));
}
