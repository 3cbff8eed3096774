//! Seeds on several threads give the report, the reproducers and the minimized traces of
//! one thread: each kind of seed run with `jobs` 1 and more, failures included.

use std::path::{Path, PathBuf};

use reconcile_sim::explore::{self, ExploreOptions};
use reconcile_sim::trace::parse_fault_flag;

fn scratch(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!(
        "reconcile-sim-parallel-{}-{name}",
        std::process::id()
    ))
}

/// The report rendered with `dir` written as `OUT`, and each written file's name and bytes.
fn outcome(
    opts: &ExploreOptions,
    seeds: std::ops::Range<u64>,
    dir: &Path,
) -> (String, Vec<(String, Vec<u8>)>) {
    let report = explore::explore(seeds, opts);
    let text = report
        .render(false)
        .replace(&dir.display().to_string(), "OUT");
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| {
                    (
                        e.file_name().to_string_lossy().into_owned(),
                        std::fs::read(e.path()).unwrap_or_default(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    let _ = std::fs::remove_dir_all(dir);
    (text, files)
}

#[test]
fn world_seeds_with_failures_report_the_same_on_one_thread_and_on_three() {
    let run = |jobs: usize| {
        let dir = scratch(&format!("world-{jobs}"));
        let opts = ExploreOptions {
            out_dir: Some(dir.clone()),
            verbose: true,
            inject: vec![parse_fault_flag("lose_change:3@100").unwrap()],
            jobs,
            ..ExploreOptions::default()
        };
        outcome(&opts, 0..70, &dir)
    };
    let (one, one_files) = run(1);
    let (three, three_files) = run(3);
    assert!(one.contains("FAILED seed"), "no seed failed:\n{one}");
    assert!(!one_files.is_empty(), "no minimized trace written");
    assert_eq!(one, three);
    assert_eq!(one_files, three_files, "the minimized traces differ");
}

#[test]
fn sharded_seeds_with_failures_report_the_same_on_one_thread_and_on_two() {
    let run = |jobs: usize| {
        let dir = scratch(&format!("sharded-{jobs}"));
        let opts = ExploreOptions {
            election: true,
            sharding: true,
            election_drift: 0.35,
            minimize: false,
            out_dir: Some(dir.clone()),
            verbose: true,
            jobs,
            ..ExploreOptions::default()
        };
        outcome(&opts, 0..40, &dir)
    };
    let (one, one_files) = run(1);
    let (two, two_files) = run(2);
    assert!(one.contains("FAILED seed"), "no seed failed:\n{one}");
    assert_eq!(one, two);
    assert_eq!(one_files, two_files, "the written scenarios differ");
}
