//! `reconcile-sim`: replay, simulate, import and explore apiserver traces against
//! reconcile-core. Exit status (`report` too, after writing its page): 0 when the run is
//! clean, 1 on a divergence or a broken invariant, 2 when the input cannot be read or the output cannot be written (a full disk),
//! 141 when the output pipe was closed (as a shell reports a program a closed pipe killed),
//! with no message. Output is written as it is produced; nothing panics on bad input.

#[cfg(feature = "capture-cli")]
mod capture;
mod io;
mod progress;
mod summary;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use io::Failure;

use reconcile_sim::election::{self, Scenario};
use reconcile_sim::explore::{self, ExploreOptions};
use reconcile_sim::import::{self, Format};
use reconcile_sim::report;
use reconcile_sim::trace::{self, Trace};
use reconcile_sim::{Render, ReplayOptions, SimOptions};

/// The words the commands and the report use, explained once (`--help`; the same list is
/// in docs/trace-format.md).
const WORDS: &str = "\
Words used:
  trace            a recorded or generated conversation with the apiserver: one JSON record
                   per line (LISTs, WATCH frames, stream ends, faults, pushes)
  world mode       simulate: a simulated apiserver holds the trace's objects as a versioned
                   history and answers whatever the controller asks, faults included
  replay mode      replay: each request is answered with the next recorded response; a
                   request the recording does not have next is a divergence
  cursor, rv       the resourceVersion the controller watches from: the last LIST's, then
                   each frame's; `cursor rv=N` in a report is where the run ended
  relist           a new LIST after the cursor was refused (410 Gone, 504) or was lost
  frames skipped   watch frames that did not decode but named a resourceVersion: skipped,
                   with the cursor moved past them, as client-go does
  stale inputs     answers that came for a request or stream the controller had already
                   given up (after a relist or a stop): counted and ignored
  settle           simulated seconds the run goes on after the trace's last record, for
                   the faults to heal and the controller to converge
  invariant        a rule every run must keep (the store equals the world once quiet, every
                   parent reconciled after its last change, ...); a broken one is a violation
  seed, profile    explore: a seed draws a fault profile (which faults, how often) and a
                   workload; the same seed runs the same way on any machine";

#[derive(Parser)]
#[command(
    name = "reconcile-sim",
    version,
    about = "Deterministic replay and simulation for reconcile-core",
    after_long_help = WORDS
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
    /// More on stderr: -v what each command reads and writes (and, for explore, a line per
    /// seed with its profile and outcome), -vv the runtime's debug lines, -vvv everything.
    /// RUST_LOG, when set, decides the log lines instead.
    #[arg(long, short, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
}

#[derive(Subcommand)]
enum Cmd {
    /// World mode: a simulated apiserver serves the trace's object history, with faults.
    Simulate {
        /// A trace, or any importable capture.
        file: PathBuf,
        /// The capture's format (recognised by content when absent).
        #[arg(long)]
        from: Option<Format>,
        /// Inject a fault: NAME[:ARG]@SECONDS, for example watch_drop@30, gone_storm:3@60,
        /// too_large@10, malformed_frame:nocursor@5, restart:5@20, compact@40,
        /// list_fail:503@1, slow_reconcile:30@0, fail_reconcile:3@0, clock_jump:3600@100,
        /// lose_change@10 (an apiserver bug, to see the invariant checks fire).
        #[arg(long = "fault")]
        faults: Vec<String>,
        /// Seconds to keep running after the last record.
        #[arg(long, default_value_t = 600.0)]
        settle: f64,
        /// Seconds each unscripted reconcile takes.
        #[arg(long, default_value_t = 0.0)]
        reconcile_duration: f64,
        /// Leave the invariants (the store equals the world, every parent reconciled, ...)
        /// unchecked. They are checked by default, as `report` checks them: a run says
        /// whether it went right without being asked.
        #[arg(long)]
        no_check: bool,
        /// The default; kept for the scripts that ask for it.
        #[arg(long, hide = true, conflicts_with = "no_check")]
        check: bool,
        /// Turn the core's priority queue on (listings', resyncs' and reconcile-all
        /// triggers' wakes at low priority) and check that no low key starves (one-source
        /// traces; as `explore --priority` runs its busy seeds).
        #[arg(long)]
        priority: bool,
        /// One JSON object per step.
        #[arg(long)]
        json: bool,
        /// Print no step lines and no summary: only violations and errors (on stderr), and the
        /// exit status.
        #[arg(long, short)]
        quiet: bool,
    },
    /// Replay mode: answer each command with the next recorded response; report divergence.
    Replay {
        /// A trace, or any importable capture.
        file: PathBuf,
        /// The capture's format (recognised by content when absent).
        #[arg(long)]
        from: Option<Format>,
        /// One JSON object per step.
        #[arg(long)]
        json: bool,
        /// Print no step lines and no summary: only violations and errors (on stderr), and the
        /// exit status.
        #[arg(long, short)]
        quiet: bool,
    },
    /// Write one self-contained HTML page showing the run as a timeline: a lane per stream
    /// and per parent, zoom and pan, each step's line on a click, the summary on top.
    Report {
        /// A trace, or any importable capture.
        file: PathBuf,
        /// The capture's format (recognised by content when absent).
        #[arg(long)]
        from: Option<Format>,
        /// The HTML file to write.
        #[arg(long, short)]
        output: PathBuf,
        /// Build the run in replay mode instead of world mode.
        #[arg(long, conflicts_with_all = ["faults", "settle", "reconcile_duration", "priority", "no_check"])]
        replay: bool,
        /// Inject a fault, as for simulate.
        #[arg(long = "fault")]
        faults: Vec<String>,
        /// Seconds to keep running after the last record.
        #[arg(long, default_value_t = 600.0)]
        settle: f64,
        /// Seconds each unscripted reconcile takes.
        #[arg(long, default_value_t = 0.0)]
        reconcile_duration: f64,
        /// Leave the quiescence invariants unchecked (as `simulate --no-check`).
        #[arg(long)]
        no_check: bool,
        /// The core's priority queue and the starvation check, as for simulate.
        #[arg(long)]
        priority: bool,
        /// No summary line: only violations and errors (on stderr), and the exit status.
        #[arg(long, short)]
        quiet: bool,
    },
    /// Record a cluster's LIST and WATCH of one resource type as a trace (redacted), until
    /// --duration, SIGINT, SIGTERM or SIGHUP (streamed to the file as it goes); replay
    /// reproduces the conversation.
    #[cfg(feature = "capture-cli")]
    Capture(capture::CaptureArgs),
    /// Record a cluster's LIST and WATCH as a trace: not in this build (the capture-cli
    /// feature, off by default, adds it and its kube, tokio and TLS stack).
    #[cfg(not(feature = "capture-cli"))]
    Capture {
        /// capture's arguments.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Convert a capture into a trace (printed, or written with --output).
    Import {
        /// The capture's format (recognised by content when absent).
        #[arg(long)]
        from: Option<Format>,
        /// The capture.
        file: PathBuf,
        /// Write the trace here instead of stdout (created with mode 0600).
        #[arg(long, short)]
        output: Option<PathBuf>,
        /// Write every payload as it is in the capture: Secret values and managedFields
        /// included (redacted by default, as capture and the recorder redact).
        #[arg(long)]
        no_redact: bool,
        /// No summary line on stderr (the trace still goes to stdout without --output).
        #[arg(long, short)]
        quiet: bool,
    },
    /// Swarm testing: each seed picks a fault profile and a workload, runs, heals, checks.
    ///
    /// Besides its trace, a fault profile's seed draws, each from a generator of its own
    /// (so its trace is the same either way): LIST pages, streaming lists (served or
    /// refused), and protobuf on the wire (40 % of the wire-facing profiles' seeds; the
    /// world then serves protobuf and answers every 7th request in JSON). The verbose lines
    /// and the summary say which.
    Explore {
        /// Seeds as A..B (B excluded), or a single seed.
        #[arg(long, default_value = "0..200")]
        seeds: String,
        /// Longer workloads and settle times (the documented long mode).
        #[arg(long)]
        long: bool,
        /// Where to write minimized traces of failing seeds.
        #[arg(long, default_value = "target/reconcile-sim-failures")]
        out: PathBuf,
        /// Add a fault to every seed (NAME[:ARG]@SECONDS, as for simulate).
        #[arg(long = "fault")]
        faults: Vec<String>,
        /// Controllers with one source, with several (a primary, owned children, objects
        /// with several owners), or both (each seed decides).
        #[arg(long, default_value = "both")]
        sources: explore::Sources,
        /// Election seeds: two or three candidates with drifting clocks share a Lease while
        /// partitions, pauses, apiserver restarts, conflicts, stops and crashes hit them;
        /// checks that no two lead at once and that a leader is elected once faults heal.
        #[arg(long, conflicts_with_all = ["faults", "sources"])]
        election: bool,
        /// The clock rate drift election seeds draw within, a fraction (default 0.19, just
        /// inside the 0.2 the default durations tolerate; above it safety can break).
        #[arg(long)]
        election_drift: Option<f64>,
        /// Sharded seeds (implies --election): 2 to 7 replicas of one shard set of 1 to 16
        /// shards, a Lease per shard and one per replica, replicas added, crashed and stopped
        /// under the election's faults; checks that no key is dispatched in two replicas'
        /// overlapping terms of its shard, that every shard is held once faults heal, the
        /// balance, and that every key's last change is reconciled by its shard's owner.
        #[arg(long, conflicts_with_all = ["faults", "sources", "priority"])]
        sharding: bool,
        /// Sharded seeds of this many shards each (implies --sharding).
        #[arg(long, conflicts_with_all = ["faults", "sources", "priority"])]
        shards: Option<u32>,
        /// Busy seeds: one worker, a large first listing, a live stream to a few hot
        /// parents that never runs dry, relists, resyncs and reconcile-all triggers, with
        /// the core's priority queue on; checks that every low-priority key is dispatched
        /// within (3 + 1) x its place in the low FIFO, every normal one within (3 + 1) x the
        /// keys waiting when it was queued.
        #[arg(long, conflicts_with_all = ["sources", "election"])]
        priority: bool,
        /// Print only failing seeds (with their reproducers) and the summary line, not the
        /// profiles and fault paths.
        #[arg(long, short, conflicts_with = "verbose")]
        quiet: bool,
        /// Threads to run seeds on (default: the machine's cores). The report, the
        /// reproducers and the minimized traces are the same for any number.
        #[arg(long, short)]
        jobs: Option<usize>,
    },
    /// Run one election scenario step by step: a file (as explore writes for a failing
    /// seed), or a generated seed.
    Election {
        /// A scenario file.
        #[arg(required_unless_present = "seed")]
        file: Option<PathBuf>,
        /// Generate the scenario of this election seed instead.
        #[arg(long, conflicts_with = "file")]
        seed: Option<u64>,
        /// The drift the seed's clock rates are drawn within.
        #[arg(long, requires = "seed")]
        election_drift: Option<f64>,
        /// The seed's long workload.
        #[arg(long, requires = "seed")]
        long: bool,
        /// Generate the sharded seed instead (as `explore --sharding` runs it).
        #[arg(long, requires = "seed")]
        sharding: bool,
        /// Generate the sharded seed of this many shards (as `explore --shards N`).
        #[arg(long, requires = "seed")]
        shards: Option<u32>,
        /// Print the scenario as JSON instead of running it.
        #[arg(long)]
        scenario: bool,
        /// One JSON object per step.
        #[arg(long)]
        json: bool,
        /// Print no step lines and no summary: only violations and errors (on stderr), and the
        /// exit status.
        #[arg(long, short)]
        quiet: bool,
    },
}

fn read(path: &Path, from: Option<Format>) -> Result<Trace, String> {
    io::read_trace(path, from)
}

fn run(cli: Cli) -> Result<bool, Failure> {
    let verbose = cli.verbose > 0;
    match cli.command {
        Cmd::Simulate {
            file,
            from,
            faults,
            settle,
            reconcile_duration,
            no_check,
            check: _,
            priority,
            json,
            quiet,
        } => {
            let check = !no_check;
            let trace = read(&file, from)?;
            let faults = faults
                .iter()
                .map(|f| trace::parse_fault_flag(f))
                .collect::<Result<Vec<_>, _>>()?;
            let opts = SimOptions {
                render: if json { Render::Json } else { Render::Text },
                faults,
                settle: trace::seconds("--settle", settle)?,
                reconcile_duration: trace::seconds("--reconcile-duration", reconcile_duration)?,
                check,
                priority,
                starvation: priority.then_some(reconcile_sim::starvation::CORE_NORMAL_IN_A_ROW),
                max_steps: reconcile_sim::simulate::step_budget(&trace),
                ..SimOptions::default()
            };
            reconcile_sim::simulate::validate(&trace, &opts).map_err(|e| e.to_string())?;
            let (sink, bar) = progress::step_sink(quiet);
            let report = reconcile_sim::simulate::simulate_to(&trace, &opts, sink);
            if let Some(bar) = bar {
                bar.finish_and_clear();
            }
            let report = report.map_err(|e| run_failure(&file, e))?;
            for v in &report.violations {
                io::warn(&format!(
                    "VIOLATION at {}: {}: {}",
                    v.at, v.invariant, v.detail
                ));
            }
            if !quiet {
                io::warn(&summary::simulate(&file, &report, check));
            }
            Ok(report.violations.is_empty())
        }
        Cmd::Replay {
            file,
            from,
            json,
            quiet,
        } => {
            let trace = read(&file, from)?;
            let opts = ReplayOptions {
                render: if json { Render::Json } else { Render::Text },
                max_steps: reconcile_sim::simulate::step_budget(&trace),
            };
            let (sink, bar) = progress::step_sink(quiet);
            let report = reconcile_sim::replay::replay_to(&trace, &opts, sink);
            if let Some(bar) = bar {
                bar.finish_and_clear();
            }
            let report = report.map_err(|e| run_failure(&file, e))?;
            for v in &report.violations {
                io::warn(&format!("{}: {}", v.invariant, v.detail));
            }
            if !quiet {
                io::warn(&summary::replay(&file, &report));
            }
            Ok(report.violations.is_empty())
        }
        Cmd::Report {
            file,
            from,
            output,
            replay,
            faults,
            settle,
            reconcile_duration,
            no_check,
            priority,
            quiet,
        } => {
            let trace = read(&file, from)?;
            let mode = if replay {
                report::Mode::Replay(ReplayOptions::default())
            } else {
                let faults = faults
                    .iter()
                    .map(|f| trace::parse_fault_flag(f))
                    .collect::<Result<Vec<_>, _>>()?;
                report::Mode::Simulate(SimOptions {
                    faults,
                    settle: trace::seconds("--settle", settle)?,
                    reconcile_duration: trace::seconds("--reconcile-duration", reconcile_duration)?,
                    check: !no_check,
                    priority,
                    starvation: priority.then_some(reconcile_sim::starvation::CORE_NORMAL_IN_A_ROW),
                    ..SimOptions::default()
                })
            };
            let bar = progress::working(&format!("building {}", output.display()), quiet);
            let built = report::build(&trace, &mode).map(|built| {
                let html = built.to_html();
                (built, html)
            });
            if let Some(bar) = bar {
                bar.finish_and_clear();
            }
            let (built, html) = built.map_err(|e| e.to_string())?;
            std::fs::write(&output, &html).map_err(|e| format!("{}: {e}", output.display()))?;
            if !quiet {
                eprintln!(
                    "{}: {} steps, {} lanes, {} items, {} violations, {} KiB",
                    output.display(),
                    built.summary.steps,
                    built.timeline.lanes.len(),
                    built.timeline.items.len(),
                    built.summary.violations.len(),
                    html.len() / 1024
                );
            }
            // As `simulate` and `replay`: a run with violations exits 1, the page written.
            for v in &built.summary.violations {
                io::warn(&format!("VIOLATION: {}: {}", v.invariant, v.detail));
            }
            Ok(built.summary.violations.is_empty())
        }
        #[cfg(not(feature = "capture-cli"))]
        Cmd::Capture { .. } => Err(
            "this reconcile-sim was built without capture: run `cargo run -p \
             reconcile-sim --features capture-cli -- capture ...` (or install it with `cargo \
             install --path sim --features capture-cli`)"
                .into(),
        ),
        #[cfg(feature = "capture-cli")]
        Cmd::Capture(args) => {
            capture::run(args)?;
            Ok(true)
        }
        Cmd::Import {
            from,
            file,
            output,
            no_redact,
            quiet,
        } => {
            let redaction = if no_redact {
                trace::redact::Redaction::none()
            } else {
                trace::redact::Redaction::default()
            };
            let bar = progress::working(&format!("importing {}", file.display()), quiet);
            let trace = read(&file, from);
            if let Some(bar) = &bar {
                bar.finish_and_clear();
            }
            let trace = trace?;
            let records = trace.entries.len();
            match &output {
                Some(out) => trace::write_private_with(out, |file| {
                    import::write_redacted(trace, &redaction, file)
                })
                .map_err(|e| format!("{}: {e}", out.display()))?,
                None => io::print(&import::redacted_jsonl(trace, &redaction))?,
            }
            if !quiet {
                io::warn(&summary::import(
                    &file,
                    output.as_deref(),
                    records,
                    no_redact,
                ));
            }
            Ok(true)
        }
        Cmd::Explore {
            seeds,
            long,
            out,
            faults,
            sources,
            election,
            election_drift,
            sharding,
            shards,
            priority,
            quiet,
            jobs,
        } => {
            let seeds = explore::parse_seeds(&seeds)?;
            let jobs = match jobs {
                Some(n) if (1..=explore::MAX_JOBS).contains(&n) => n,
                Some(n) => {
                    return Err(format!("--jobs {n}: expected 1 to {}", explore::MAX_JOBS).into());
                }
                None => std::thread::available_parallelism()
                    .map_or(1, std::num::NonZero::get)
                    .min(explore::MAX_JOBS),
            };
            let sharding = sharding || shards.is_some();
            let election = election || sharding;
            if election_drift.is_some() && !election {
                return Err("--election-drift needs --election or --sharding".into());
            }
            let election_drift =
                election_drift.map_or(Ok(election::DEFAULT_DRIFT), election::check_drift)?;
            let inject = faults
                .iter()
                .map(|f| trace::parse_fault_flag(f))
                .collect::<Result<Vec<_>, _>>()?;
            let opts = ExploreOptions {
                long,
                out_dir: Some(out),
                verbose,
                inject,
                sources,
                election,
                election_drift,
                sharding,
                shards,
                priority,
                jobs,
                ..ExploreOptions::default()
            };
            let bar = progress::seeds(seeds.end - seeds.start, quiet);
            let opts = ExploreOptions {
                progress: bar
                    .as_ref()
                    .map_or_else(explore::SeedProgress::default, |b| {
                        let b = b.clone();
                        explore::SeedProgress::new(move |n| b.set_position(n))
                    }),
                ..opts
            };
            let report = explore::explore(seeds, &opts);
            if let Some(b) = bar {
                b.finish_and_clear();
            }
            let text = report.render(long);
            io::print(if quiet {
                summary::explore_brief(&text)
            } else {
                &text
            })?;
            Ok(report.failures.is_empty())
        }
        Cmd::Election {
            file,
            seed,
            election_drift,
            long,
            sharding,
            shards,
            scenario,
            json,
            quiet,
        } => {
            let loaded = match (file, seed) {
                (Some(path), _) => {
                    let bytes = io::read_bytes(&path)?;
                    let text = trace::utf8_text(&path.display().to_string(), &bytes)
                        .map_err(|e| e.to_string())?;
                    Scenario::parse(text).map_err(|e| format!("{}: {e}", path.display()))?
                }
                (None, Some(seed)) => {
                    let drift = election_drift
                        .map_or(Ok(election::DEFAULT_DRIFT), election::check_drift)?;
                    if sharding || shards.is_some() {
                        election::generate_sharded(seed, long, drift, shards).0
                    } else {
                        election::generate(seed, long, drift).0
                    }
                }
                (None, None) => return Err("a scenario file or --seed".into()),
            };
            if scenario {
                io::print(&loaded.to_json())?;
                return Ok(true);
            }
            let opts = election::RunOptions {
                render: if json { Render::Json } else { Render::Text },
                ..election::RunOptions::default()
            };
            let report = election::run(&loaded, &opts).map_err(|e| e.to_string())?;
            if !quiet {
                io::print(&report.output)?;
            }
            for v in &report.violations {
                io::warn(&format!(
                    "VIOLATION at {}: {}: {}",
                    v.at, v.invariant, v.detail
                ));
            }
            if !quiet {
                io::warn(&format!(
                    "election: {} steps, {} terms, {} takeovers, {} violations",
                    report.steps,
                    report.terms,
                    report.takeovers,
                    report.violations.len()
                ));
            }
            Ok(report.violations.is_empty())
        }
    }
}

/// A streamed run's failure: the configuration (named by file) or the output.
fn run_failure(file: &Path, e: reconcile_sim::simulate::RunError) -> Failure {
    match e {
        reconcile_sim::simulate::RunError::Output(e) => Failure::Output(e),
        e @ reconcile_sim::simulate::RunError::Config(_) => {
            Failure::Input(format!("{}: {e}", file.display()))
        }
    }
}

fn main() -> ExitCode {
    // Warnings (an insecure connection setting, a failed credential refresh) and whatever
    // `RUST_LOG` asks for, on stderr: stdout carries the command's output.
    let cli = Cli::parse();
    let level = match cli.verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level)),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
    match run(cli) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(failure) => {
            let (code, message) = io::exit_for(&failure);
            if let Some(message) = message {
                io::warn(&format!("reconcile-sim: {message}"));
            }
            ExitCode::from(code)
        }
    }
}
