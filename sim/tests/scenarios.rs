//! Scenario traces, real captures, determinism and the explore run.
//!
//! Snapshots render one readable line per step; each file's snapshot holds its replay and
//! its world-mode run.

use std::path::{Path, PathBuf};
use std::time::Duration;

use reconcile_sim::explore::{self, ExploreOptions};
use reconcile_sim::import::{self, Format};
use reconcile_sim::replay::DIVERGENCE;
use reconcile_sim::trace::{Trace, parse_fault_flag};
use reconcile_sim::{Render, ReplayOptions, SimOptions, replay, simulate};

/// World-mode settle time in snapshots: long enough for retries, short enough to read.
const SETTLE: Duration = Duration::from_secs(60);

fn both_modes(trace: &Trace) -> String {
    let replayed = replay(trace, &ReplayOptions::default()).expect("valid header");
    let opts = SimOptions {
        settle: SETTLE,
        check: true,
        ..SimOptions::default()
    };
    let simulated = simulate(trace, &opts).expect("valid header");
    let mut out = format!("==== replay\n{}", replayed.output);
    for v in &replayed.violations {
        out.push_str(&format!("!! {}: {}\n", v.invariant, v.detail));
    }
    out.push_str(&format!(
        "==== simulate (settle {}s, checked)\n{}",
        SETTLE.as_secs(),
        simulated.output
    ));
    for v in &simulated.violations {
        out.push_str(&format!("!! {}: {}\n", v.invariant, v.detail));
    }
    assert!(
        simulated.violations.is_empty(),
        "{}: world mode broke an invariant:\n{out}",
        trace.name
    );
    out
}

fn relative_name(path: &Path) -> String {
    path.file_name().unwrap().to_string_lossy().into_owned()
}

#[test]
fn scenario_traces() {
    insta::glob!("../traces", "*.jsonl", |path| {
        let text = std::fs::read_to_string(path).unwrap();
        let name = format!("traces/{}", relative_name(path));
        let trace = Trace::parse(&name, &text).unwrap();
        let out = both_modes(&trace);
        // Only the world-mode trace may diverge in replay: it records no responses.
        let diverges = out.contains(&format!("!! {DIVERGENCE}"));
        assert_eq!(
            diverges,
            name.contains("world-"),
            "{name}: unexpected divergence:\n{out}"
        );
        insta::assert_snapshot!(out);
    });
}

fn real_dir() -> PathBuf {
    std::env::var_os("RECONCILE_SIM_REAL_TRACES").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/real"),
        PathBuf::from,
    )
}

/// Every capture under `testdata/real/` (at the repository root), sorted; documentation files
/// are not captures. A missing folder fails the test.
fn real_captures() -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut dirs = vec![real_dir()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            let name = relative_name(&path);
            if name == "LICENSE" || name.ends_with(".md") {
                continue;
            }
            assert!(
                name.ends_with(".json") || name.ends_with(".ndjson"),
                "{}: a capture this test does not know how to run",
                path.display()
            );
            files.push(path);
        }
    }
    files.sort();
    files
}

#[test]
fn every_real_capture_imports_replays_and_simulates() {
    let files = real_captures();
    assert_eq!(
        files.len(),
        16,
        "the manifest lists 16 captures: {files:#?}"
    );
    let root = real_dir();
    for path in files {
        let rel = path.strip_prefix(&root).unwrap().display().to_string();
        let text = std::fs::read_to_string(&path).unwrap();
        let format =
            import::detect(&text).unwrap_or_else(|| panic!("{rel}: format not recognised"));
        let trace = import::import(&rel, &text, None).unwrap_or_else(|e| panic!("{e}"));
        let replayed = replay(&trace, &ReplayOptions::default()).unwrap();
        assert!(
            replayed.violations.is_empty(),
            "{rel}: {:?}",
            replayed.violations
        );
        // A streaming list is the listing: its replay sends no LIST.
        assert!(
            replayed.stats.lists >= 1 || trace.header.streaming_lists,
            "{rel}: no LIST replayed"
        );
        let out = format!("format: {format}\n{}", both_modes(&trace));
        let snapshot = rel.replace(['/', '.'], "_");
        insta::assert_snapshot!(snapshot, out);
    }
}

#[test]
fn real_watch_frames_reach_the_store_bit_exact() {
    let path = real_dir()
        .join("k8s-openapi/v1-36_watch_event-watch_pods_without_initial_events.body.ndjson");
    let text = std::fs::read_to_string(&path).unwrap();
    let trace = import::import("w", &text, Some(Format::WatchStream)).unwrap();
    let frames: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let recorded: Vec<&str> = trace
        .entries
        .iter()
        .filter_map(|e| match &e.record {
            reconcile_sim::trace::Record::Frame { line } => line.as_str(),
            _ => None,
        })
        .collect();
    assert_eq!(recorded, frames);
    let again = Trace::parse("w", &trace.to_jsonl()).unwrap();
    let report = replay(&again, &ReplayOptions::default()).unwrap();
    assert_eq!(report.stats.frames, 9);
    assert_eq!(
        report.stats.frames_skipped, 0,
        "the initial-events-end bookmark is a bookmark"
    );
}

#[test]
fn kubectl_watch_output_imports_and_runs() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kubectl-watch.json");
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(import::detect(&text), Some(Format::Kubectl));
    let trace = import::import("kubectl-watch.json", &text, None).unwrap();
    let out = format!("format: kubectl\n{}", both_modes(&trace));
    insta::assert_snapshot!(out);
}

#[test]
fn each_mode_twice_gives_byte_identical_output() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("traces");
    let mut traces: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    traces.sort();
    let faults = [
        "gone_storm:2@30",
        "restart:3@40",
        "clock_jump:900@50",
        "malformed_frame@60",
    ]
    .map(|f| parse_fault_flag(f).unwrap())
    .to_vec();
    for path in traces {
        let trace = Trace::parse("t", &std::fs::read_to_string(&path).unwrap()).unwrap();
        for render in [Render::Text, Render::Json] {
            let r = ReplayOptions {
                render,
                ..ReplayOptions::default()
            };
            assert_eq!(
                replay(&trace, &r).unwrap().output,
                replay(&trace, &r).unwrap().output
            );
            let s = SimOptions {
                render,
                faults: faults.clone(),
                ..SimOptions::default()
            };
            let a = simulate(&trace, &s).unwrap().output;
            assert_eq!(
                a,
                simulate(&trace, &s).unwrap().output,
                "{}",
                path.display()
            );
            assert!(!a.is_empty());
        }
    }
    let opts = ExploreOptions {
        verbose: true,
        ..ExploreOptions::default()
    };
    assert_eq!(
        explore::explore(0..40, &opts).render(false),
        explore::explore(0..40, &opts).render(false)
    );
}

/// The fault paths the explore run must reach, so a run shows the seeds exercised them.
const REQUIRED_PATHS: &[&str] = &[
    "relist: 410 ERROR frame",
    "relist: WATCH HTTP 410",
    "relist: WATCH HTTP 504",
    "relist: frame without cursor",
    "frame skipped, cursor advanced",
    "watch retry: transport error",
    "watch timeoutSeconds -> rewatch",
    "list failed -> retry",
    "reconcile backoff",
    "clock jump",
    "unmapped object evicted",
    "requeue-after",
    "reconcile-all trigger",
    "list page (continue)",
    "streaming list: initial events applied",
    "streaming list: refused -> LIST+WATCH",
];

#[test]
fn explore_200_seeds_hold_every_invariant_and_reach_every_fault_path() {
    let report = explore::explore(0..200, &ExploreOptions::default());
    let text = report.render(false);
    assert!(report.failures.is_empty(), "{text}");
    assert_eq!(report.seeds, 200);
    for path in REQUIRED_PATHS {
        assert!(
            report.paths.get(path).is_some_and(|(seeds, _)| *seeds > 0),
            "{path} never reached:\n{text}"
        );
    }
    assert_eq!(
        report.profiles.len(),
        explore::PROFILES.len() + explore::MANY_SOURCE_PROFILES.len(),
        "{text}"
    );
}

/// The many-source seeds alone: a primary, the children it owns and objects with several
/// owners, each fault on one source or all; every invariant holds per source, and a relist
/// of one source happens while another streams.
#[test]
fn explore_200_many_source_seeds_hold_every_invariant_per_source() {
    let opts = ExploreOptions {
        sources: explore::Sources::Many,
        ..ExploreOptions::default()
    };
    let report = explore::explore(0..200, &opts);
    let text = report.render(false);
    assert!(report.failures.is_empty(), "{text}");
    assert_eq!(
        report.profiles.len(),
        explore::MANY_SOURCE_PROFILES.len(),
        "{text}"
    );
    for path in [
        "relist: 410 ERROR frame",
        "relist: WATCH HTTP 410",
        "relist: WATCH HTTP 504",
        "relist: frame without cursor",
        "frame skipped, cursor advanced",
        "watch retry: transport error",
        "list failed -> retry",
        "reconcile backoff",
        "reconcile-all trigger",
    ] {
        assert!(
            report.paths.get(path).is_some_and(|(seeds, _)| *seeds > 0),
            "{path} never reached:\n{text}"
        );
    }
}

#[test]
fn a_lost_event_is_caught_minimized_and_reproducible() {
    let dir = std::env::temp_dir().join(format!("reconcile-sim-test-{}", std::process::id()));
    let opts = ExploreOptions {
        out_dir: Some(dir.clone()),
        inject: vec![parse_fault_flag("lose_change:3@100").unwrap()],
        ..ExploreOptions::default()
    };
    let report = explore::explore(0..10, &opts);
    let text = report.render(false);
    assert!(
        !report.failures.is_empty(),
        "a lost event went unnoticed:\n{text}"
    );
    assert!(
        text.contains("reproduce: cargo run -p reconcile-sim -- explore --seeds"),
        "{text}"
    );
    for failure in &report.failures {
        assert!(failure.records.1 < failure.records.0, "{text}");
        let path = failure.minimized.as_ref().expect("written");
        let small = Trace::parse("m", &std::fs::read_to_string(path).unwrap()).unwrap();
        let again = explore::run(&small, false);
        assert!(
            again
                .violations
                .iter()
                .any(|v| v.invariant == failure.violation.invariant),
            "{}: the minimized trace no longer fails",
            path.display()
        );
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_bad_trace_line_is_an_error_naming_file_and_line() {
    let text = "{\"reconcile_sim_trace\":1}\n{\"record\":\"list\",\"t\":0,\"status\":200,\"body\":{}}\n{\"record\":\"frame\"}\n";
    let e = import::import("bad.jsonl", text, None).unwrap_err();
    assert_eq!(
        e.to_string(),
        "bad.jsonl:3: a frame record needs exactly one of \"raw\", \"event\" or \"raw_base64\""
    );
}
