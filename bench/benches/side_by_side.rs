//! `cargo bench -p reconcile-bench`: the same as `bash bench/run.sh` (every peer, medians of
//! five runs, `docs/benchmarks.md` regenerated). Arguments after `--` are passed on, for
//! example `cargo bench -p reconcile-bench -- --quick`.

#![allow(missing_docs)]

use std::process::Command;

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    if args.iter().any(|a| a == "--list") {
        return; // `cargo test --benches` probes with --list
    }
    let status = Command::new(env!("CARGO_BIN_EXE_reconcile-bench"))
        .arg("all")
        .args(&args)
        .status();
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => std::process::exit(s.code().unwrap_or(1)),
        Err(e) => {
            eprintln!("side_by_side: cannot run reconcile-bench: {e}");
            std::process::exit(1);
        }
    }
}
