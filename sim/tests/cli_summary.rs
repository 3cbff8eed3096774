//! Issue 32: every command ends with one line on stderr saying what it did (stdout keeps the
//! command's output alone), `-q` leaves out the step lines and that line, and an unknown
//! `--fault` lists the faults there are.

use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_reconcile-sim");

fn trace(name: &str) -> String {
    format!("{}/traces/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn run(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .output()
        .expect("the binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The lines a run printed on stdout that are steps (the last, "# end: ..." or "# end of trace: ...", is not one).
fn step_lines(stdout: &str) -> usize {
    stdout.lines().filter(|l| !l.contains("# end")).count()
}

#[test]
fn simulate_ends_with_its_summary_and_is_silent_with_q() {
    let cell = trace("cell-pool.jsonl");
    let out = run(&["simulate", &cell]);
    assert!(out.status.success(), "{out:?}");
    let steps = step_lines(&text(&out.stdout));
    assert_eq!(
        text(&out.stderr),
        format!("{cell}: {steps} steps, to +900.000s simulated; every invariant held\n"),
        "checked by default, as report checks"
    );
    let out = run(&["simulate", &cell, "--no-check"]);
    assert!(
        text(&out.stderr).ends_with("; invariants not checked (--no-check)\n"),
        "{out:?}"
    );
    let out = run(&["simulate", &cell, "--check"]);
    assert!(
        text(&out.stderr).ends_with("; every invariant held\n"),
        "--check is still accepted: {out:?}"
    );
    for q in ["-q", "--quiet"] {
        let out = run(&["simulate", &cell, q]);
        assert!(out.status.success(), "{out:?}");
        assert_eq!(
            (text(&out.stdout), text(&out.stderr)),
            (String::new(), String::new())
        );
    }
}

#[test]
fn a_quiet_run_still_reports_its_violations_and_exit_status() {
    let cell = trace("cell-pool.jsonl");
    let out = run(&[
        "simulate",
        &cell,
        "--check",
        "--fault",
        "lose_change@0",
        "-q",
    ]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");
    let stderr = text(&out.stderr);
    assert!(
        stderr.starts_with("VIOLATION at ") && !stderr.contains("steps, to"),
        "{stderr}"
    );
}

#[test]
fn replay_says_no_divergence_and_how_many_steps() {
    let cell = trace("cell-pool.jsonl");
    let out = run(&["replay", &cell]);
    assert!(out.status.success(), "{out:?}");
    let steps = step_lines(&text(&out.stdout));
    assert_eq!(
        text(&out.stderr),
        format!("{cell}: no divergence; {steps} steps\n")
    );
    let out = run(&["replay", &cell, "-q"]);
    assert!(out.stdout.is_empty() && out.stderr.is_empty(), "{out:?}");
}

#[test]
fn import_to_a_file_says_what_it_wrote() {
    let dir = std::env::temp_dir().join(format!("reconcile-sim-summary-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let dest = dir.join("out.jsonl");
    let dest_s = dest.to_str().unwrap();
    let cell = trace("cell-pool.jsonl");
    let out = run(&["import", &cell, "-o", dest_s]);
    assert!(out.status.success(), "{out:?}");
    let records = std::fs::read_to_string(&dest).unwrap().lines().count() - 1; // the header
    assert_eq!(
        text(&out.stderr),
        format!(
            "{dest_s}: {records} records written from {cell} (mode 0600; Secret values and managedFields redacted)\n"
        )
    );
    assert!(out.stdout.is_empty());
    let out = run(&["import", &cell, "-o", dest_s, "-q"]);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
        "{out:?}"
    );
}

#[test]
fn report_and_election_are_silent_with_q() {
    let dir = std::env::temp_dir().join(format!("reconcile-sim-q-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let html = dir.join("r.html");
    let out = run(&[
        "report",
        &trace("cell-pool.jsonl"),
        "-o",
        html.to_str().unwrap(),
        "-q",
    ]);
    assert!(out.status.success() && out.stderr.is_empty(), "{out:?}");
    assert!(html.exists());
    let _ = std::fs::remove_dir_all(&dir);
    let out = run(&["election", "--seed", "1"]);
    assert!(
        text(&out.stderr).starts_with("election: ") && !out.stdout.is_empty(),
        "{out:?}"
    );
    let out = run(&["election", "--seed", "1", "-q"]);
    assert!(out.stdout.is_empty() && out.stderr.is_empty(), "{out:?}");
}

#[test]
fn explore_q_prints_the_failures_and_the_summary_line_only() {
    let dir = std::env::temp_dir().join(format!("reconcile-sim-explore-q-{}", std::process::id()));
    let out_dir = dir.to_str().unwrap();
    let full = text(&run(&["explore", "--seeds", "0..3", "--out", out_dir]).stdout);
    let out = run(&["explore", "--seeds", "0..3", "--out", out_dir, "-q"]);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(out.status.success(), "{out:?}");
    let brief = text(&out.stdout);
    assert!(
        full.contains("profiles:") && !brief.contains("profiles:"),
        "{brief}"
    );
    assert!(full.starts_with(&brief), "{brief}");
    assert!(
        brief.ends_with(" seeds, ") || brief.ends_with(" failed\n"),
        "{brief}"
    );
}

#[test]
fn an_unknown_fault_lists_the_faults() {
    let out = run(&[
        "simulate",
        &trace("cell-pool.jsonl"),
        "--fault",
        "watch_dorp@3",
    ]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("unknown fault \"watch_dorp\"; the faults are watch_drop, gone_storm,"),
        "{stderr}"
    );
    for name in reconcile_sim::trace::FAULT_NAMES {
        assert!(stderr.contains(name), "{name} missing from {stderr}");
    }
}

/// Runs `command` under `script`, on a pseudo-terminal, and returns what the terminal showed;
/// `None` when util-linux's `script` is missing.
fn on_a_terminal(command: &str) -> Option<String> {
    let out = Command::new("script")
        .args(["-qec", command, "/dev/null"])
        .output()
        .ok()?;
    assert!(out.status.success(), "{out:?}");
    Some(text(&out.stdout))
}

#[test]
fn progress_shows_on_a_terminal_only() {
    let dir = std::env::temp_dir().join(format!("reconcile-sim-bar-{}", std::process::id()));
    let out_dir = dir.to_str().unwrap();
    // Not a terminal (this test's pipes): nothing on stderr but the summary, as above.
    let out = run(&["explore", "--seeds", "0..20", "--out", out_dir]);
    assert!(out.stderr.is_empty(), "{out:?}");
    let Some(shown) = on_a_terminal(&format!(
        "{BIN} explore --seeds 0..20 --out {out_dir} >/dev/null"
    )) else {
        return;
    };
    assert!(shown.contains("/20 seeds"), "explore's bar: {shown:?}");
    let shown = on_a_terminal(&format!(
        "{BIN} simulate {} --settle 2000000 >/dev/null",
        trace("cell-pool.jsonl")
    ))
    .unwrap();
    assert!(shown.contains(" steps  "), "simulate's spinner: {shown:?}");
    std::fs::create_dir_all(&dir).unwrap();
    let shown = on_a_terminal(&format!(
        "{BIN} report {} -o {out_dir}/r.html",
        trace("cell-pool.jsonl")
    ))
    .unwrap();
    assert!(shown.contains("building "), "report's spinner: {shown:?}");
    let shown = on_a_terminal(&format!(
        "{BIN} import {} -o {out_dir}/i.jsonl",
        trace("cell-pool.jsonl")
    ))
    .unwrap();
    assert!(shown.contains("importing "), "import's spinner: {shown:?}");
    let shown = on_a_terminal(&format!(
        "{BIN} explore --seeds 0..20 --out {out_dir} -q >/dev/null"
    ))
    .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!shown.contains("seeds"), "-q shows no bar: {shown:?}");
}

#[test]
fn v_says_what_each_command_read_on_every_subcommand_and_explore_v_prints_each_seed() {
    let cell = trace("cell-pool.jsonl");
    let page = std::env::temp_dir().join(format!("reconcile-sim-v-{}.html", std::process::id()));
    let page = page.to_str().unwrap();
    for args in [
        vec!["simulate", &cell, "-q", "-v"],
        vec!["-v", "replay", &cell, "-q"],
        vec!["report", &cell, "-o", page, "-q", "--verbose"],
        vec!["import", "--from", "trace", &cell, "-v"],
    ] {
        let out = run(&args);
        assert!(out.status.success(), "{args:?}: {out:?}");
        let stderr = text(&out.stderr);
        assert!(
            stderr.contains(&format!("read {cell}: ")) && stderr.contains(" records"),
            "{args:?}: {stderr}"
        );
        assert!(!stderr.contains('\u{1b}'), "no colour on a pipe: {stderr}");
        let quiet = run(&args
            .iter()
            .copied()
            .filter(|a| *a != "-v" && *a != "--verbose")
            .collect::<Vec<_>>());
        assert!(
            !text(&quiet.stderr).contains("read "),
            "{args:?} without -v: {quiet:?}"
        );
    }
    let _ = std::fs::remove_file(page);
    let out = run(&["explore", "--seeds", "0..2", "-v"]);
    let stdout = text(&out.stdout);
    assert!(
        stdout.starts_with("seed 0: ") && stdout.contains("\nseed 1: "),
        "{stdout}"
    );
    let out = run(&["explore", "--seeds", "0..2", "-v", "-q"]);
    assert_eq!(out.status.code(), Some(2), "-q and -v conflict: {out:?}");
}

/// `--help` explains the jargon once, word for word as docs/trace-format.md does.
#[test]
fn help_explains_the_words_the_docs_explain() {
    let help = text(&run(&["--help"]).stdout);
    let (_, words) = help
        .split_once("Words used:\n")
        .expect("a glossary in --help");
    // Each entry: the word in its column, then its meaning over one or more lines.
    let mut entries: Vec<(String, String)> = Vec::new();
    for line in words.lines() {
        let (word, meaning) = (
            line.get(2..19).unwrap_or("").trim(),
            line.get(19..).unwrap_or("").trim(),
        );
        if word.is_empty() {
            if let Some((_, m)) = entries.last_mut() {
                m.push(' ');
                m.push_str(meaning);
            }
        } else {
            entries.push((word.to_owned(), meaning.to_owned()));
        }
    }
    let docs = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/trace-format.md"
    ))
    .unwrap();
    let (_, table) = docs
        .split_once("## Words used")
        .expect("the docs' glossary");
    let rows: Vec<(String, String)> = table
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .filter(|l| !l.starts_with("| word") && !l.starts_with("|---"))
        .map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split(" | ").map(str::trim).collect();
            (cells[0].to_owned(), cells[1].replace('`', ""))
        })
        .collect();
    assert!(entries.len() >= 10, "{entries:?}");
    let plain: Vec<(String, String)> = entries
        .into_iter()
        .map(|(w, m)| (w, m.replace('`', "")))
        .collect();
    assert_eq!(
        plain, rows,
        "--help and docs/trace-format.md explain different words"
    );
    for jargon in ["world mode", "stale inputs", "frames skipped", "cursor, rv"] {
        assert!(
            rows.iter().any(|(w, _)| w == jargon),
            "{jargon} unexplained"
        );
    }
}

/// Without the capture-cli feature, `capture` says how to get it rather than being unknown.
#[test]
fn capture_without_its_feature_says_how_to_get_it() {
    if cfg!(feature = "capture-cli") {
        return; // built with capture (the workspace's e2e suite asks for it)
    }
    let out = run(&["capture", "pods", "-n", "default", "-o", "x.jsonl"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        text(&out.stderr).contains("--features capture-cli"),
        "{out:?}"
    );
}
