//! The harness and the uninstrumented Rust peers; see the crate docs.

fn main() {
    std::process::exit(reconcile_bench::cli::main(None));
}
