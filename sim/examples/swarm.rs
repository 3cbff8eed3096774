//! The swarm without the command line's dependencies (clap, the capture's kube and tokio),
//! so CI builds it in release in a fraction of the time:
//!
//! ```text
//! cargo run --release -p reconcile-sim --no-default-features --example swarm -- 0..100000
//! ```
//!
//! Runs `explore` over the seeds exactly as `reconcile-sim explore --seeds A..B` does (one- and
//! many-source seeds, every fault profile, the invariants), prints its report and exits 1
//! when a seed fails (minimized traces go to `target/reconcile-sim-failures`), 2 on a bad
//! argument or when the report cannot be written.

use std::io::Write as _;
use std::process::ExitCode;

use reconcile_sim::explore::{self, ExploreOptions};

fn main() -> ExitCode {
    let arg = std::env::args().nth(1).unwrap_or_else(|| "0..200".into());
    let seeds = match explore::parse_seeds(&arg) {
        Ok(seeds) => seeds,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "swarm: {e}");
            return ExitCode::from(2);
        }
    };
    let opts = ExploreOptions {
        out_dir: Some("target/reconcile-sim-failures".into()),
        ..ExploreOptions::default()
    };
    let report = explore::explore(seeds, &opts);
    let mut out = std::io::stdout().lock();
    if out
        .write_all(report.render(false).as_bytes())
        .and_then(|()| out.flush())
        .is_err()
    {
        return ExitCode::from(2);
    }
    if report.failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
