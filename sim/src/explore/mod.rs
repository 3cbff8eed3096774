//! Swarm testing: each seed picks a fault profile and a random workload (pods created,
//! relabelled between parents, moved out of and back into the selector, deleted, recreated
//! under the same name), runs it in world mode, lets the faults heal, and checks the
//! invariants. A failing seed is minimized by delta debugging over its trace's records.
//!
//! | file | concept |
//! |---|---|
//! | `options.rs` | what an exploration is asked: options, sources, seeds |
//! | `profiles.rs` | the fault profiles, and what each seed draws besides (pages, streaming lists, protobuf, sources) |
//! | `generate.rs`, `many.rs`, `busy.rs` | the workloads: one-source, many-source, busy (`--priority`) |
//! | `run.rs` | one trace run quietly with every invariant checked |
//! | `minimize.rs` | delta debugging over a failing seed's records |
//! | `parallel.rs` | seeds on several threads, merged back in seed order |
//! | `report.rs` | what an exploration found, as text |
//!
//! Election seeds are explored by [`crate::election::explore`], into the same report.

mod busy;
mod generate;
mod many;
pub(crate) mod minimize;
pub(crate) mod options;
pub(crate) mod parallel;
mod profiles;
pub(crate) mod report;
mod run;

pub use busy::{BUSY_PROFILES, BUSY_RECONCILE, generate_busy, run_busy};
pub use generate::generate;
pub use many::generate_many;
pub use minimize::{MAX_MINIMIZE_RUNS, ddmin, minimize, minimize_with};
pub use options::{ExploreOptions, MAX_SEEDS, SeedProgress, Sources, parse_seeds};
pub use parallel::MAX_JOBS;
pub use profiles::{
    MANY_SOURCE_PROFILES, PAGED_PROFILES, PROFILES, PROTOBUF_PROFILES, ask_for_protobuf,
    many_sources, page_size_for, protobuf_for, streaming_for,
};
pub use report::{ExploreReport, Failure};
pub use run::{run, run_listing, run_paged, settle};

use std::ops::Range;

use reconcile_core::Instant;

use crate::simulate::StreamingLists;

use crate::trace::{Entry, Trace};

/// The trace seed `seed` runs, and its profile, for `sources`.
#[must_use]
pub fn generate_for(seed: u64, long: bool, sources: Sources) -> (Trace, &'static str) {
    if many_sources(seed, sources) {
        generate_many(seed, long)
    } else {
        generate(seed, long)
    }
}

/// A fault entry as the `--fault` flag that recreates it.
fn fault_flag(entry: &Entry) -> String {
    let at = entry
        .at
        .unwrap_or(Instant::ZERO)
        .since_origin()
        .as_secs_f64();
    let line = entry.to_line();
    let v: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
    let name = v["fault"].as_str().unwrap_or("?");
    let arg = ["count", "status", "duration_s", "by_s"]
        .iter()
        .find_map(|k| v.get(*k).map(ToString::to_string))
        .or_else(|| (v["cursor"] == false).then(|| "nocursor".to_owned()));
    match arg {
        Some(a) => format!("{name}:{a}@{at}"),
        None => format!("{name}@{at}"),
    }
}

/// Runs every seed in `seeds`, on up to [`ExploreOptions::jobs`] threads; the report is the
/// same for any number.
#[must_use]
pub fn explore(seeds: Range<u64>, opts: &ExploreOptions) -> ExploreReport {
    if opts.election {
        return crate::election::explore::explore(seeds, opts);
    }
    let mut report = ExploreReport {
        inject_flags: opts
            .inject
            .iter()
            .map(|e| format!(" --fault {}", fault_flag(e)))
            .collect(),
        mode_flags: if opts.priority {
            " --priority".into()
        } else {
            String::new()
        },
        ..ExploreReport::default()
    };
    let counted = opts.counting_progress();
    let mut failing = Vec::new();
    for (block, inputs) in parallel::map_blocks(seeds, opts.jobs, |r| explore_block(r, &counted)) {
        report.absorb(block);
        failing.extend(inputs);
    }
    // Minimized after the run, in the failures' order, so that what is written does not
    // depend on which thread found what.
    let finished = parallel::map_items(&failing, opts.jobs, |f| f.finish(opts));
    for (failure, (records, path)) in report.failures.iter_mut().zip(finished) {
        failure.records.1 = records;
        failure.minimized = path;
    }
    report
}

/// A failing seed's run, kept to minimize it once every seed has run.
struct Failing {
    seed: u64,
    trace: Trace,
    pages: Option<u32>,
    streaming: Option<StreamingLists>,
    invariant: &'static str,
}

impl Failing {
    /// Minimizes (if asked) and writes the trace: its records, and where it went.
    fn finish(&self, opts: &ExploreOptions) -> (usize, Option<std::path::PathBuf>) {
        let small = if opts.minimize {
            minimize_with(&self.trace, self.invariant, |t| {
                run_one(opts, t, self.pages, self.streaming)
            })
        } else {
            self.trace.clone()
        };
        let written = opts.out_dir.as_ref().and_then(|dir| {
            std::fs::create_dir_all(dir).ok()?;
            let path = dir.join(format!("seed-{}.min.jsonl", self.seed));
            reconcile_trace::write_private(&path, small.to_jsonl().as_bytes()).ok()?;
            Some(path)
        });
        (small.entries.len(), written)
    }
}

/// One seed's trace run as the options say: busy, or listing (paged, streaming).
fn run_one(
    opts: &ExploreOptions,
    trace: &Trace,
    pages: Option<u32>,
    streaming: Option<StreamingLists>,
) -> crate::simulate::RunReport {
    if opts.priority {
        run_busy(trace, opts.long, opts.starvation_rule)
    } else {
        run_listing(trace, opts.long, pages, streaming)
    }
}

/// The seeds of one block, in order; failures are reported unminimized.
fn explore_block(seeds: Range<u64>, opts: &ExploreOptions) -> (ExploreReport, Vec<Failing>) {
    let mut report = ExploreReport::default();
    let mut failing = Vec::new();
    for seed in seeds {
        let (mut trace, profile) = if opts.priority {
            generate_busy(seed, opts.long)
        } else {
            generate_for(seed, opts.long, opts.sources)
        };
        if !opts.inject.is_empty() {
            trace.entries.extend(opts.inject.iter().cloned());
            trace.entries.sort_by_key(|e| e.at);
        }
        // Busy seeds never page: their profiles are not fault profiles.
        let pages = page_size_for(seed, profile).filter(|_| !opts.priority);
        let streaming = streaming_for(seed, profile).filter(|_| !opts.priority);
        let protobuf = !opts.priority && !trace.header.in_process && protobuf_for(seed, profile);
        if protobuf {
            ask_for_protobuf(&mut trace);
            report.protobuf_seeds += 1;
        }
        let result = run_one(opts, &trace, pages, streaming);
        report.seeds += 1;
        opts.progress.done(report.seeds);
        report.steps += result.steps;
        *report.profiles.entry(profile).or_default() += 1;
        for (path, n) in &result.paths {
            let e = report.paths.entry(path).or_default();
            e.0 += 1;
            e.1 += n;
        }
        if opts.verbose {
            report.lines.push(format!(
                "seed {seed}: {profile}{}, {} records, {} steps, {} reconciles, {} relists: {}",
                pages.map_or(String::new(), |n| format!(" (LIST pages of {n})"))
                    + match streaming {
                        Some(StreamingLists::Served) => " (streaming lists)",
                        Some(StreamingLists::Refused) => " (streaming lists refused)",
                        None => "",
                    }
                    + if protobuf { " (protobuf)" } else { "" },
                trace.entries.len(),
                result.steps,
                result.stats.reconciles,
                result.stats.relists,
                if result.violations.is_empty() {
                    "ok"
                } else {
                    "FAILED"
                }
            ));
        }
        if let Some(violation) = result.violations.first().cloned() {
            let records = trace.entries.len();
            failing.push(Failing {
                seed,
                trace,
                pages,
                streaming,
                invariant: violation.invariant,
            });
            report.failures.push(Failure {
                seed,
                profile,
                violation,
                records: (records, records),
                minimized: None,
            });
        }
    }
    (report, failing)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protobuf_is_drawn_for_four_in_ten_seeds_of_the_wire_profiles_only() {
        for profile in ["calm", "slow-reconciles", "sources/failing-reconciles"] {
            assert!(
                (0..1000).all(|seed| !protobuf_for(seed, profile)),
                "{profile}"
            );
        }
        let on = (0..2000)
            .filter(|&seed| protobuf_for(seed, "sources/chaos"))
            .count();
        assert!((700..900).contains(&on), "{on} of 2000");
    }

    #[test]
    fn seeds_parse_as_a_range_or_one() {
        assert_eq!(parse_seeds("3..7").unwrap(), 3..7);
        assert_eq!(parse_seeds("9").unwrap(), 9..10);
        assert!(parse_seeds("7..3").is_err());
        assert!(parse_seeds("a..b").is_err());
        assert!(parse_seeds("0..99999999999").is_err());
    }

    #[test]
    fn a_seed_always_generates_the_same_trace() {
        let (a, pa) = generate(42, false);
        let (b, pb) = generate(42, false);
        assert_eq!(pa, pb);
        assert_eq!(a.to_jsonl(), b.to_jsonl());
        assert_ne!(generate(43, false).0.to_jsonl(), a.to_jsonl());
    }

    #[test]
    fn one_source_seeds_generate_what_they_always_did_and_many_source_seeds_name_sources() {
        let mut many = 0;
        for seed in 0..40 {
            let (one, _) = generate(seed, false);
            let (both, profile) = generate_for(seed, false, Sources::Both);
            if many_sources(seed, Sources::Both) {
                many += 1;
                assert!(profile.starts_with("sources/"), "seed {seed}: {profile}");
                assert!(!both.header.secondaries.is_empty(), "seed {seed}");
                assert!(
                    both.entries.iter().any(|e| e.source_index() > 0),
                    "seed {seed}"
                );
            } else {
                assert_eq!(both.to_jsonl(), one.to_jsonl(), "seed {seed}");
            }
            let (again, _) = generate_many(seed, false);
            let parsed = Trace::parse("g", &again.to_jsonl()).unwrap();
            assert_eq!(parsed.to_jsonl(), again.to_jsonl(), "seed {seed}");
        }
        assert!(
            (10..=30).contains(&many),
            "{many} of 40 seeds had several sources"
        );
    }

    #[test]
    fn generated_traces_parse_back_as_written() {
        for seed in 0..20 {
            let (trace, _) = generate(seed, false);
            let again = Trace::parse("g", &trace.to_jsonl()).unwrap();
            assert_eq!(again.header, trace.header, "seed {seed}");
            assert_eq!(again.entries.len(), trace.entries.len(), "seed {seed}");
        }
    }
}
