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
//!
//! Seeds run on every core (`--jobs N` to choose); the report is the same for any number.
//!
//! `--sharding` (or `--shards N`) runs sharded seeds instead, as `reconcile-sim explore
//! --sharding` does: 2 to 7 replicas of one shard set under the election's faults.
//!
//! ```text
//! cargo run --release -p reconcile-sim --no-default-features --example swarm -- --sharding 0..10000
//! ```

use std::io::Write as _;
use std::process::ExitCode;

use reconcile_sim::explore::{self, ExploreOptions};

/// The options the arguments ask for, and the seeds.
fn parse(args: &[String]) -> Result<(ExploreOptions, std::ops::Range<u64>), String> {
    let mut opts = ExploreOptions {
        out_dir: Some("target/reconcile-sim-failures".into()),
        jobs: std::thread::available_parallelism()
            .map_or(1, std::num::NonZero::get)
            .min(explore::MAX_JOBS),
        ..ExploreOptions::default()
    };
    let mut seeds = None;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--sharding" => opts.sharding = true,
            "--shards" => {
                let n = args.next().ok_or("--shards needs a count")?;
                opts.shards = Some(n.parse().map_err(|_| format!("--shards {n}: a count"))?);
                opts.sharding = true;
            }
            "--jobs" | "-j" => {
                let n = args.next().ok_or("--jobs needs a count")?;
                opts.jobs = n
                    .parse()
                    .ok()
                    .filter(|n| (1..=explore::MAX_JOBS).contains(n))
                    .ok_or_else(|| format!("--jobs {n}: 1 to {}", explore::MAX_JOBS))?;
            }
            seed_range => seeds = Some(explore::parse_seeds(seed_range)?),
        }
    }
    opts.election = opts.sharding;
    Ok((opts, seeds.unwrap_or(0..200)))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (opts, seeds) = match parse(&args) {
        Ok(parsed) => parsed,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "swarm: {e}");
            return ExitCode::from(2);
        }
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
