//! `reconcile-sim report`, tested as a person uses it: the page of a bundled trace and of a
//! 100 000-step run opened in headless Chromium (Debian's `chromium`), which the page checks
//! itself in (`#selfcheck`): the lanes and counts in the DOM, a click on steps of every lane
//! showing their step lines, a wheel zoom, and no console error or uncaught exception.
//!
//! Chromium is required in CI (`CI` set) or with `RECONCILE_CHROMIUM_REQUIRE=1`; elsewhere the
//! browser tests print `SKIPPED` when it is missing. The cell-pool report's screenshot is
//! saved as `target/report-cell-pool.png` (CI keeps it as an artifact).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use reconcile_sim::report::{self, LaneGroup, Mode, Timeline};
use reconcile_sim::trace::Trace;
use reconcile_sim::{ReplayOptions, SimOptions};

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn load(name: &str) -> Trace {
    let path = crate_dir().join("traces").join(name);
    let text = std::fs::read_to_string(&path).expect("bundled trace");
    Trace::parse(&path.display().to_string(), &text).expect("valid trace")
}

fn checked() -> Mode {
    Mode::Simulate(SimOptions {
        check: true,
        ..SimOptions::default()
    })
}

/// The browser, or `None` (skip) when it is missing and not required.
fn chromium() -> Option<PathBuf> {
    for name in ["chromium", "chromium-headless-shell", "chromium-browser"] {
        if let Some(dirs) = std::env::var_os("PATH") {
            for dir in std::env::split_paths(&dirs) {
                let p = dir.join(name);
                if p.is_file() {
                    return Some(p);
                }
            }
        }
    }
    let required = std::env::var_os("CI").is_some()
        || std::env::var("RECONCILE_CHROMIUM_REQUIRE").is_ok_and(|v| v == "1");
    assert!(
        !required,
        "chromium is not installed: `apt-get install -y chromium` (required in CI)"
    );
    println!("SKIPPED: chromium is not installed (apt-get install -y chromium)");
    None
}

fn out_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("report");
    std::fs::create_dir_all(&dir).expect("target tmpdir");
    dir
}

/// Runs chromium headless with `args` then `url`, at most `limit`; its stdout.
fn run_chromium(browser: &Path, args: &[String], url: &str, limit: Duration) -> String {
    let profile = tempdir("profile");
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(url)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromium starts");
    let mut stdout = child.stdout.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        let _ = std::io::Read::read_to_string(&mut stdout, &mut out);
        out
    });
    let started = Instant::now();
    loop {
        if child.try_wait().expect("wait").is_some() {
            break;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within {limit:?} on {url}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = reader.join().expect("reader");
    let _ = std::fs::remove_dir_all(&profile);
    out
}

fn tempdir(what: &str) -> PathBuf {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let dir = out_dir().join(format!(
        "{what}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).expect("tempdir");
    dir
}

/// The page's self-check result, read from the DOM chromium dumps.
fn selfcheck(browser: &Path, html: &Path) -> serde_json::Value {
    let url = format!("file://{}#selfcheck", html.display());
    let dom = run_chromium(
        browser,
        &[
            "--window-size=1400,900".into(),
            "--virtual-time-budget=10000".into(),
            "--dump-dom".into(),
        ],
        &url,
        Duration::from_secs(300),
    );
    let start = dom
        .find("<pre id=\"selfcheck\"")
        .unwrap_or_else(|| panic!("no selfcheck element in the DOM of {url}"));
    let body = &dom[start..];
    let open = body.find('>').expect("element") + 1;
    let close = body.find("</pre>").expect("closed element");
    let text = body[open..close]
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&nbsp;", "\u{a0}")
        .replace("&amp;", "&");
    assert!(
        !text.is_empty(),
        "the page did not run its self-check (script error before it?): {url}"
    );
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("selfcheck JSON {e}: {text}"))
}

fn assert_clean(check: &serde_json::Value, what: &str) {
    assert_eq!(
        check["errors"],
        serde_json::json!([]),
        "{what}: console errors"
    );
    assert_eq!(
        check["zoom_ok"], true,
        "{what}: a wheel over the timeline zooms"
    );
    assert_eq!(
        check["click_failures"],
        serde_json::json!([]),
        "{what}: clicks that did not show the step's line"
    );
    assert!(
        check["clicks"].as_u64().unwrap_or(0) > 0,
        "{what}: no click"
    );
    assert!(
        check["drawn_at_fit"].as_u64().unwrap_or(0) > 0,
        "{what}: nothing drawn"
    );
    // Issue 32: every failure in the default view is drawn at least 5 px wide, in its colour.
    assert_eq!(
        check["failures"]["missing"],
        serde_json::json!([]),
        "{what}: failures not visible in the default view"
    );
    assert_eq!(
        check["failures"]["visible"], check["failures"]["total"],
        "{what}: failures visible"
    );
    // Issue 32: the arrow keys move the selection, the header, the counter and the address.
    assert_eq!(
        check["keyboard"]["problems"],
        serde_json::json!([]),
        "{what}: keyboard step navigation"
    );
    // Issue 32: hover tooltips, pinned lanes, the lane filter, next / previous error.
    assert_eq!(
        check["interaction"]["problems"],
        serde_json::json!([]),
        "{what}: interaction"
    );
}

fn write(report: &report::Report, name: &str) -> PathBuf {
    let path = out_dir().join(name);
    std::fs::write(&path, report.to_html()).expect("write report");
    path
}

#[test]
fn every_bundled_trace_has_a_report_whose_every_step_can_be_clicked() {
    let mut names: Vec<String> = std::fs::read_dir(crate_dir().join("traces"))
        .expect("traces")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".jsonl"))
        .collect();
    names.sort();
    assert!(names.len() >= 10);
    for name in &names {
        let trace = load(name);
        for mode in [checked(), Mode::Replay(ReplayOptions::default())] {
            let r = report::build(&trace, &mode).unwrap_or_else(|e| panic!("{name}: {e}"));
            let t = &r.timeline;
            assert_eq!(t.step_line.len(), t.step_t.len(), "{name}");
            assert!(t.step_line.len() as u64 >= r.summary.steps, "{name}");
            // Every rendered line is the start or the end of some item.
            let mut seen = vec![false; t.step_line.len()];
            for item in &t.items {
                seen[item.step as usize] = true;
                seen[item.end_step as usize] = true;
                assert!(item.t1 >= item.t0, "{name}: {item:?}");
                assert!((item.lane as usize) < t.lanes.len(), "{name}");
            }
            if let Some(missing) = seen.iter().position(|s| !s) {
                panic!(
                    "{name}: step {missing} is on no lane: {}",
                    t.step_line[missing]
                );
            }
            // Items sorted by lane then start, as the page's binary searches need.
            assert!(
                t.items
                    .windows(2)
                    .all(|w| (w[0].lane, w[0].t0) <= (w[1].lane, w[1].t0)),
                "{name}: items out of order"
            );
            let html = r.to_html();
            assert!(!html.contains("/*DATA*/") && !html.contains("/*SCRIPT*/"));
            for remote in [
                "src=\"http",
                "href=\"http",
                "src='http",
                "url(http",
                "@import",
            ] {
                assert!(!html.contains(remote), "{name}: {remote} in the page");
            }
        }
    }
}

#[test]
fn cell_pool_lanes_and_counts() {
    let r = report::build(&load("cell-pool.jsonl"), &checked()).expect("report");
    let names: Vec<&str> = r.timeline.lanes.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["LIST", "WATCH", "core", "a", "b"]);
    assert_eq!(r.timeline.lanes_in(LaneGroup::Parent), 2);
    let count = |k: &str| {
        r.summary
            .counts
            .iter()
            .find(|(name, _)| name == k)
            .map(|c| c.1)
    };
    assert_eq!(count("lists"), Some(1));
    assert_eq!(count("reconciles"), Some(9));
    assert_eq!(count("reconcile errors"), Some(1));
    assert!(r.summary.invariants.iter().all(|i| i.held));
    assert!(r.summary.violations.is_empty());
    // The scripted failure of b shows as a failed reconcile followed by its backoff.
    let lane_b = names.iter().position(|n| *n == "b").expect("lane b") as u32;
    let kinds: Vec<_> = r
        .timeline
        .items
        .iter()
        .filter(|i| i.lane == lane_b)
        .map(|i| i.kind)
        .collect();
    assert!(kinds.contains(&report::Kind::ReconcileError), "{kinds:?}");
    assert!(kinds.contains(&report::Kind::Backoff), "{kinds:?}");
}

#[test]
fn a_relist_shows_its_reason_and_a_violation_its_lane() {
    // Replay mode answers with the recorded 410.
    let replayed = Mode::Replay(ReplayOptions::default());
    let r = report::build(&load("relist-410-missed-delete.jsonl"), &replayed).expect("report");
    let relists: Vec<_> = r
        .timeline
        .items
        .iter()
        .filter(|i| i.kind == report::Kind::Relist)
        .collect();
    assert!(!relists.is_empty());
    assert!(relists.iter().all(|i| !i.label.is_empty()), "{relists:?}");
    // lose_change is the apiserver bug that makes the checks fire.
    let trace = load("cell-pool.jsonl");
    let mode = Mode::Simulate(SimOptions {
        check: true,
        faults: vec![reconcile_sim::trace::parse_fault_flag("lose_change:3@4").expect("flag")],
        ..SimOptions::default()
    });
    let r = report::build(&trace, &mode).expect("report");
    assert!(!r.summary.violations.is_empty());
    assert!(r.summary.invariants.iter().any(|i| !i.held));
    let lane = r
        .timeline
        .lanes
        .iter()
        .position(|l| l.group == LaneGroup::Violations)
        .expect("a violations lane") as u32;
    assert!(
        r.timeline
            .items
            .iter()
            .any(|i| i.lane == lane && i.kind == report::Kind::Violation)
    );
}

#[test]
fn renderings_that_disagree_are_an_error_not_a_panic() {
    let json = "{\"t_ns\":0,\"input\":\"start\",\"commands\":[],\"events\":[]}\n";
    assert!(Timeline::from_run(json, "", 0).is_err());
    assert!(Timeline::from_run("not json\n", "line\n", 0).is_err());
    // Odd vocabulary lands on the core lane instead of failing.
    let odd = "{\"t_ns\":5,\"input\":\"frame\",\"commands\":[\"reconcile\",\"watch\"],\"events\":[\"backoff x delay=zs\",\"relist\"]}\n";
    let t = Timeline::from_run(odd, "x\n", 0).expect("tolerated");
    assert!(!t.items.is_empty());
}

/// A one-source trace whose world-mode run takes more than 100 000 steps: 200 pods in 80
/// cells, 52 000 label and status changes 20 ms apart, scripted reconcile failures, and
/// watch drops, 410 storms and compaction along the way.
fn big_trace() -> Trace {
    use std::fmt::Write as _;
    let mut t = String::from(
        "{\"reconcile_sim_trace\":1,\"description\":\"100k steps\",\"namespace\":\"default\",\"label_selector\":\"app=cell\",\"parent\":\"label:cell\"}\n",
    );
    let pods = 200;
    let mut items = Vec::new();
    for p in 0..pods {
        items.push(format!(
            "{{\"metadata\":{{\"name\":\"p{p}\",\"namespace\":\"default\",\"uid\":\"u{p}\",\"resourceVersion\":\"{}\",\"labels\":{{\"app\":\"cell\",\"cell\":\"c{}\"}}}}}}",
            p + 1,
            p % 80
        ));
    }
    let _ = writeln!(
        t,
        "{{\"record\":\"list\",\"t\":0,\"status\":200,\"body\":{{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{{\"resourceVersion\":\"{pods}\"}},\"items\":[{}]}}}}",
        items.join(",")
    );
    let mut rv = pods;
    let mut x: u64 = 7;
    for i in 0..52_000u64 {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let p = (x >> 33) % pods;
        let cell = if (x >> 20).is_multiple_of(10) {
            (x >> 40) % 80
        } else {
            p % 80
        };
        rv += 1;
        let at = i as f64 * 0.02 + 1.0;
        let _ = writeln!(
            t,
            "{{\"record\":\"frame\",\"t\":{at:.3},\"raw\":\"{{\\\"type\\\":\\\"MODIFIED\\\",\\\"object\\\":{{\\\"metadata\\\":{{\\\"name\\\":\\\"p{p}\\\",\\\"namespace\\\":\\\"default\\\",\\\"uid\\\":\\\"u{p}\\\",\\\"resourceVersion\\\":\\\"{rv}\\\",\\\"labels\\\":{{\\\"app\\\":\\\"cell\\\",\\\"cell\\\":\\\"c{cell}\\\"}}}},\\\"status\\\":{{\\\"phase\\\":\\\"Running\\\",\\\"n\\\":\\\"{i}\\\"}}}}}}\"}}"
        );
        if i % 997 == 0 {
            let _ = writeln!(
                t,
                "{{\"record\":\"reconcile\",\"parent\":\"c{}\",\"outcome\":\"error\",\"error\":\"not ready\"}}",
                p % 80
            );
        }
        match i % 10_000 {
            2_000 => {
                let _ = writeln!(
                    t,
                    "{{\"record\":\"fault\",\"t\":{at:.3},\"fault\":\"watch_drop\"}}"
                );
            }
            5_000 => {
                let _ = writeln!(
                    t,
                    "{{\"record\":\"fault\",\"t\":{at:.3},\"fault\":\"gone_storm\",\"count\":2}}"
                );
            }
            8_000 => {
                let _ = writeln!(
                    t,
                    "{{\"record\":\"fault\",\"t\":{at:.3},\"fault\":\"compact\"}}"
                );
            }
            _ => {}
        }
    }
    Trace::parse("generated-100k.jsonl", &t).expect("generated trace")
}

#[test]
fn cell_pool_report_in_chromium() {
    let Some(browser) = chromium() else { return };
    let r = report::build(&load("cell-pool.jsonl"), &checked()).expect("report");
    let html = write(&r, "cell-pool.html");
    let check = selfcheck(&browser, &html);
    assert_clean(&check, "cell-pool");
    assert_eq!(
        check["lanes"],
        serde_json::json!(["LIST", "WATCH", "core", "a", "b"])
    );
    assert_eq!(check["groups"]["parent"], 2);
    assert_eq!(check["groups"]["stream"], 2);
    assert_eq!(check["counts"]["reconciles"], 9);
    assert_eq!(check["counts"]["lists"], 1);
    assert_eq!(check["counts"]["steps"], r.summary.steps);
    assert_eq!(check["steps"], r.timeline.step_line.len());
    assert_eq!(check["items"], r.timeline.items.len());
    assert_eq!(
        check["invariants"]
            .as_object()
            .map(|o| o.values().all(|v| v == true)),
        Some(true)
    );
    // Both lanes' first and middle items clicked, on every lane.
    assert_eq!(check["clicks"], 10);
    // The screenshot CI keeps, in target/.
    let shot = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("target dir")
        .join("report-cell-pool.png");
    let _ = std::fs::remove_file(&shot);
    run_chromium(
        &browser,
        &[
            "--window-size=1400,760".into(),
            "--virtual-time-budget=3000".into(),
            format!("--screenshot={}", shot.display()),
        ],
        &format!("file://{}#view=-1,40&step=12", html.display()),
        Duration::from_secs(120),
    );
    let png = std::fs::read(&shot).expect("screenshot written");
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "screenshot"
    );
}

#[test]
fn every_bundled_trace_report_in_chromium() {
    let Some(browser) = chromium() else { return };
    for name in [
        "watch-status-410-504.jsonl",
        "backoff-ladder.jsonl",
        "in-process-source.jsonl",
        "world-selector-faults.jsonl",
    ] {
        let r = report::build(&load(name), &checked()).expect("report");
        let html = write(&r, &name.replace(".jsonl", ".html"));
        let check = selfcheck(&browser, &html);
        assert_clean(&check, name);
        let lanes: Vec<String> = r.timeline.lanes.iter().map(|l| l.name.clone()).collect();
        assert_eq!(check["lanes"], serde_json::json!(lanes), "{name}");
    }
}

#[test]
fn a_100k_step_report_in_chromium() {
    let trace = big_trace();
    let started = Instant::now();
    let r = report::build(&trace, &checked()).expect("report");
    let built = started.elapsed();
    assert!(r.summary.steps >= 100_000, "{} steps", r.summary.steps);
    assert!(
        r.summary.violations.is_empty(),
        "{:?}",
        r.summary.violations
    );
    let html = write(&r, "generated-100k.html");
    let size = std::fs::metadata(&html).expect("written").len();
    println!(
        "100k report: {} steps, {} lanes, {} items, {} KiB, built in {built:?}",
        r.summary.steps,
        r.timeline.lanes.len(),
        r.timeline.items.len(),
        size / 1024
    );
    assert!(size < 64 << 20, "{size} bytes");
    let Some(browser) = chromium() else { return };
    let started = Instant::now();
    let check = selfcheck(&browser, &html);
    println!(
        "100k report in chromium: ready in {} ms (page), self-check done in {:?} (process)",
        check["ready_ms"],
        started.elapsed()
    );
    assert_clean(&check, "100k");
    assert_eq!(check["steps"], r.timeline.step_line.len());
    assert_eq!(check["groups"]["parent"], 80);
    assert!(check["counts"]["relists"].as_u64().unwrap_or(0) >= 5);
    // Drawn at full zoom-out: bounded by pixels, not by the 100k items.
    let drawn = check["drawn_at_fit"].as_u64().unwrap_or(u64::MAX);
    assert!(drawn < 100_000, "{drawn} marks drawn at fit");
    let ready = check["ready_ms"].as_f64().unwrap_or(f64::MAX);
    assert!(ready < 30_000.0, "the page took {ready} ms to show");
}

#[test]
fn a_failing_explore_seed_prints_the_report_command_and_its_report_shows_the_violation() {
    use reconcile_sim::explore::{self, ExploreOptions};
    let dir = out_dir().join(format!("explore-{}", std::process::id()));
    let opts = ExploreOptions {
        out_dir: Some(dir.clone()),
        inject: vec![reconcile_sim::trace::parse_fault_flag("lose_change:3@100").expect("flag")],
        ..ExploreOptions::default()
    };
    let result = explore::explore(0..4, &opts);
    let text = result.render(false);
    let failure = result.failures.first().expect("a lost event is caught");
    let path = failure.minimized.as_ref().expect("written");
    let html = path.with_extension("html");
    let command = format!(
        "as a timeline: cargo run -p reconcile-sim -- report --settle 1200 {} -o {}",
        path.display(),
        html.display()
    );
    assert!(text.contains(&command), "{text}");
    // What that command does: simulate the minimized trace with the same settle, checked.
    let trace = Trace::parse(
        &path.display().to_string(),
        &std::fs::read_to_string(path).expect("minimized trace"),
    )
    .expect("valid");
    let mode = Mode::Simulate(SimOptions {
        check: true,
        settle: Duration::from_secs(1200),
        ..SimOptions::default()
    });
    let r = report::build(&trace, &mode).expect("report");
    assert!(
        r.summary
            .violations
            .iter()
            .any(|v| v.invariant == failure.violation.invariant),
        "{:?}",
        r.summary.violations
    );
    // In Chromium, the violation is visible in the view the page opens on, and E reaches it.
    if let Some(browser) = chromium() {
        std::fs::write(&html, r.to_html()).expect("write report");
        let check = selfcheck(&browser, &html);
        assert_clean(&check, "a failing explore seed");
        assert!(
            check["failures"]["total"].as_u64() >= Some(1),
            "the violation is in the default view: {}",
            check["failures"]
        );
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// Issue 32, read at a glance: cell-pool as `report` makes it by default (reconciles take no
/// time, so b's failed reconcile has zero width), checked in Chromium: the failure is visible
/// in the default view, that view is fitted to the activity rather than squeezed by the quiet
/// tail of bookmarks (and says so), the invariants read as what must hold with PASS beside
/// them, and the arrow keys move through the steps.
#[test]
fn cell_pool_at_a_glance_in_chromium() {
    let Some(browser) = chromium() else { return };
    let r = report::build(&load("cell-pool.jsonl"), &checked()).expect("report");
    let html = write(&r, "cell-pool-glance.html");
    let check = selfcheck(&browser, &html);
    assert_clean(&check, "cell-pool at a glance");
    assert!(
        check["failures"]["total"].as_u64() >= Some(1),
        "b's failed reconcile is in the default view: {}",
        check["failures"]
    );
    assert_eq!(check["keyboard"]["tried"], true);
    // The overview strip shows the run's shape in the default view: frames and reconciles
    // per second, and b's failure.
    let o = &check["overview"];
    assert_eq!(o["frames"], 17, "{o}");
    assert_eq!(o["reconciles"], 9, "{o}");
    assert!(o["max_rate"].as_f64() > Some(0.0), "{o}");
    assert!(o["drawn"].as_u64() >= Some(5), "{o}");
    assert!(o["failures"].as_u64() >= Some(1), "{o}");
    let fit = &check["fit"];
    let (b, end, active) = (
        fit["b"].as_f64().unwrap(),
        fit["end"].as_f64().unwrap(),
        fit["active_end"].as_f64().unwrap(),
    );
    assert!(
        active >= b / 1.06 && b < end / 2.0,
        "the default view ends after the activity ({active}) and well before the run's end ({end}): {fit}"
    );
    assert!(
        fit["note"]
            .as_str()
            .unwrap()
            .contains("fitted to the activity, until"),
        "the range says why: {fit}"
    );
    assert_eq!(
        check["invariant_marks"]["store differs from the world at quiescence"],
        "PASS store matches the world at quiescence"
    );
    let marks = check["invariant_marks"].as_object().unwrap();
    assert_eq!(marks.len(), r.summary.invariants.len());
    assert!(
        marks
            .values()
            .all(|m| m.as_str().unwrap().starts_with("PASS "))
    );
}

/// Every invariant a report can list is worded as what must hold, not as the bug's name.
#[test]
fn every_invariant_has_a_rule_that_says_what_must_hold() {
    let mut names: Vec<&str> = report::ALWAYS_CHECKED.to_vec();
    names.extend(report::WORLD_CHECKED);
    names.extend(report::PRIORITY_CHECKED);
    names.push(reconcile_sim::replay::DIVERGENCE);
    for name in names {
        let rule = report::rule(name);
        assert!(!rule.starts_with("never: "), "{name} has no rule");
        if name != "backoff counts failures in a row" {
            assert_ne!(rule, name, "{name}: the rule is the violation's name");
        }
    }
    assert_eq!(report::rule("something new"), "never: something new");
}

/// A failing run's page marks the broken invariant FAIL, in Chromium.
#[test]
fn a_broken_invariant_is_marked_fail_in_chromium() {
    let Some(browser) = chromium() else { return };
    let trace = load("cell-pool.jsonl");
    let mode = match checked() {
        Mode::Simulate(mut o) => {
            o.faults
                .push(reconcile_sim::trace::parse_fault_flag("lose_change@0").expect("fault"));
            Mode::Simulate(o)
        }
        m @ Mode::Replay(_) => m,
    };
    let r = report::build(&trace, &mode).expect("report");
    assert!(
        !r.summary.violations.is_empty(),
        "lose_change breaks an invariant"
    );
    let html = write(&r, "cell-pool-lose-change.html");
    let check = selfcheck(&browser, &html);
    assert_eq!(check["errors"], serde_json::json!([]));
    let marks = check["invariant_marks"].as_object().unwrap();
    for v in &r.summary.violations {
        let mark = marks[&v.invariant].as_str().unwrap();
        assert_eq!(mark, format!("FAIL {}", report::rule(&v.invariant)));
    }
    assert_eq!(
        check["failures"]["missing"],
        serde_json::json!([]),
        "violations visible in the default view"
    );
}

/// A run with faults: each fault is a labelled mark on a lane of its own, not a tick among
/// the core's steps.
#[test]
fn faults_get_a_lane_of_their_own_each_labelled_by_name() {
    let r = report::build(&load("cell-pool.jsonl"), &with_faults()).expect("report");
    let t = &r.timeline;
    let lane = t
        .lanes
        .iter()
        .position(|l| l.name == "faults")
        .expect("a faults lane");
    let labels: Vec<&str> = t
        .items
        .iter()
        .filter(|i| i.lane as usize == lane)
        .map(|i| i.label.as_str())
        .collect();
    assert_eq!(labels, ["watch-drop", "list-fail x1 status=503"]);
    let core = t.lanes.iter().position(|l| l.name == "core").unwrap();
    assert!(
        t.items
            .iter()
            .filter(|i| i.lane as usize == core)
            .all(|i| !i.label.starts_with("fault")),
        "no fault left among the core's steps"
    );
}

fn with_faults() -> Mode {
    match checked() {
        Mode::Simulate(mut o) => {
            for f in ["watch_drop@30", "list_fail:503@50"] {
                o.faults
                    .push(reconcile_sim::trace::parse_fault_flag(f).expect("fault"));
            }
            Mode::Simulate(o)
        }
        m @ Mode::Replay(_) => m,
    }
}

/// The same run in Chromium: the faults lane is pinned on top with the streams, its marks
/// named; the failures it causes are reached with E; hovering, filtering and scrolling work.
#[test]
fn a_run_with_faults_in_chromium() {
    let Some(browser) = chromium() else { return };
    let r = report::build(&load("cell-pool.jsonl"), &with_faults()).expect("report");
    let html = write(&r, "cell-pool-faults.html");
    let check = selfcheck(&browser, &html);
    assert_clean(&check, "cell-pool with faults");
    let i = &check["interaction"];
    assert_eq!(
        i["faults"],
        serde_json::json!(["faults: watch-drop", "faults: list-fail x1 status=503"])
    );
    assert!(i["pinned_rows"].as_u64() >= Some(4), "{i}");
    assert!(
        i["failures"].as_u64() >= Some(2),
        "the failed LIST and b's reconcile: {i}"
    );
}

/// The palette: colours that share a lane stay apart for a viewer with deuteranopia
/// (Machado et al. 2009, severity 1), so a failure never looks like the success beside it.
#[test]
fn colours_sharing_a_lane_stay_apart_under_deuteranopia() {
    let js = include_str!("../src/report/page.js");
    let colours = palette(js);
    let lanes: &[&[&str]] = &[
        &["list", "list_failed", "relist"],
        &[
            "watch",
            "frame",
            "bookmark",
            "error_frame",
            "watch_end",
            "watch_failed",
        ],
        &[
            "reconcile_ok",
            "reconcile_requeue",
            "reconcile_error",
            "reconcile_cancelled",
            "backoff",
            "requeue",
        ],
        &["core", "note"],
        &[
            "fault",
            "violation",
            "reconcile_error",
            "list_failed",
            "error_frame",
        ],
    ];
    let mut close = Vec::new();
    for lane in lanes {
        for (a, x) in lane.iter().enumerate() {
            for y in &lane[a + 1..] {
                let d = seen_apart(colours[*x], colours[*y]);
                if d < MIN_APART {
                    close.push(format!("{x} {y}: {d:.1}"));
                }
            }
        }
    }
    assert!(close.is_empty(), "too close under deuteranopia: {close:?}");
    // The check fires: the old palette's reconcile error and ERROR frame, two reds.
    assert!(seen_apart([0xf0, 0x44, 0x38], [0xd9, 0x2d, 0x20]) < MIN_APART);
}

/// The least distance (in 8-bit sRGB units, after the simulation) two colours of a lane keep.
const MIN_APART: f64 = 45.0;

fn palette(js: &str) -> std::collections::BTreeMap<&str, [u8; 3]> {
    let start = js.find("var COLORS = {").expect("COLORS in page.js");
    let body = &js[start..start + js[start..].find("};").expect("end of COLORS")];
    body.split(',')
        .filter_map(|entry| {
            let (k, v) = entry.split_once(':')?;
            let k = k
                .rsplit(|c: char| c.is_whitespace() || c == '{')
                .next()?
                .trim();
            let hex = v.trim().trim_matches('"').trim_start_matches('#');
            let byte = |i: usize| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok();
            Some((k, [byte(0)?, byte(2)?, byte(4)?]))
        })
        .collect()
}

/// Distance between two colours as a deuteranope sees them.
fn seen_apart(a: [u8; 3], b: [u8; 3]) -> f64 {
    fn linear(c: u8) -> f64 {
        let c = f64::from(c) / 255.0;
        if c <= 0.04045 {
            c / 12.92
        } else {
            ((c + 0.055) / 1.055).powf(2.4)
        }
    }
    fn srgb(c: f64) -> f64 {
        let c = c.clamp(0.0, 1.0);
        255.0
            * if c <= 0.003_130_8 {
                c * 12.92
            } else {
                1.055 * c.powf(1.0 / 2.4) - 0.055
            }
    }
    const M: [[f64; 3]; 3] = [
        [0.367_322, 0.860_646, -0.227_968],
        [0.280_085, 0.672_501, 0.047_413],
        [-0.011_820, 0.042_940, 0.968_881],
    ];
    let sim = |c: [u8; 3]| {
        let l = c.map(linear);
        M.map(|row| srgb(row[0] * l[0] + row[1] * l[1] + row[2] * l[2]))
    };
    let (x, y) = (sim(a), sim(b));
    ((x[0] - y[0]).powi(2) + (x[1] - y[1]).powi(2) + (x[2] - y[2]).powi(2)).sqrt()
}

/// cell-pool with everything from +8 s on moved 600 s later: a long idle stretch (nothing but
/// the idle watch) between the first changes and the rest.
fn cell_pool_with_an_idle_stretch() -> Trace {
    let text =
        std::fs::read_to_string(crate_dir().join("traces/cell-pool.jsonl")).expect("bundled trace");
    let mut out = String::new();
    for line in text.lines() {
        let mut v: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
        if let Some(t) = v.get("t").and_then(serde_json::Value::as_f64)
            && t >= 8.0
        {
            v["t"] = serde_json::json!(t + 600.0);
        }
        out.push_str(&v.to_string());
        out.push('\n');
    }
    Trace::parse("cell-pool-idle.jsonl", &out).expect("valid trace")
}

/// Issue 32: an idle stretch in the middle of a run is drawn narrow, shaded and labelled
/// with its real length, so the default view shows both bursts of activity; `i` shows real
/// time, and back. Without the compression, the first burst would be 1 % of the width.
#[test]
fn an_idle_stretch_is_drawn_narrow_and_labelled_in_chromium() {
    let Some(browser) = chromium() else { return };
    let r = report::build(&cell_pool_with_an_idle_stretch(), &checked()).expect("report");
    let html = write(&r, "cell-pool-idle.html");
    let check = selfcheck(&browser, &html);
    assert_clean(&check, "cell-pool with an idle stretch");
    let idle = &check["idle"];
    assert_eq!(idle["stretches"], 1, "{idle}");
    assert_eq!(idle["in_view"], 1, "{idle}");
    assert_eq!(
        idle["labelled"], 1,
        "its real length is written on the axis: {idle}"
    );
    let real = idle["real_ns"].as_f64().unwrap() / 1e9;
    assert!((590.0..=610.0).contains(&real), "{idle}");
    let share = idle["width_share"].as_f64().unwrap();
    assert!(share > 0.0 && share <= 0.1, "narrow: {idle}");
    // Both bursts are in the default view: it reaches past +608 s, where b fails.
    let fit = &check["fit"];
    assert!(fit["b"].as_f64().unwrap() > 608e9, "{fit}");
    assert!(
        fit["note"].as_str().unwrap().contains("1 idle stretch"),
        "the range says so: {fit}"
    );
    assert!(
        check["failures"]["total"].as_u64() >= Some(1),
        "{}",
        check["failures"]
    );
}

/// Issue 32: the overview strip draws the queue's depth. With one reconcile slot, the keys
/// woken together wait for it.
#[test]
fn the_overview_shows_the_queue_depth_in_chromium() {
    let Some(browser) = chromium() else { return };
    let r = report::build(&load("concurrency-1.jsonl"), &checked()).expect("report");
    let most = r.timeline.queue.iter().map(|q| q[1]).max().unwrap_or(0);
    assert!(
        most >= 1,
        "keys waited for the slot: {:?}",
        r.timeline.queue
    );
    let html = write(&r, "concurrency-1-queue.html");
    let check = selfcheck(&browser, &html);
    assert_clean(&check, "concurrency-1");
    assert_eq!(
        check["overview"]["max_queued"], most,
        "{}",
        check["overview"]
    );
}

/// The page's state, read over the DevTools protocol.
fn js(tab: &headless_chrome::Tab, expr: &str) -> serde_json::Value {
    tab.evaluate(expr, false)
        .unwrap_or_else(|e| panic!("evaluate {expr}: {e}"))
        .value
        .unwrap_or(serde_json::Value::Null)
}

/// Waits (10 s at most) until `expr` is true in the page: drawing waits for an animation frame.
fn wait_true(tab: &headless_chrome::Tab, expr: &str, what: &str) {
    let start = Instant::now();
    while js(tab, expr) != serde_json::Value::Bool(true) {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{what}: `{expr}` still false; header {}, counter {}, address {}",
            js(tab, "document.getElementById('detail-head').textContent"),
            js(tab, "document.getElementById('step-index').textContent"),
            js(tab, "location.hash"),
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Issue 32's interaction tests over the DevTools protocol (`headless_chrome`): real key
/// presses, pointer moves and typing, as a person makes them, rather than events the page
/// sends itself. An address with `#step=N` opens on that step; the arrow keys move the step,
/// the header, the counter and the address; hovering over a lane shows what is under the
/// pointer and leaving hides it; `/` and typing filter the parent lanes and Escape clears
/// them; `e` selects the first failure; `i` shows real time and back.
#[test]
fn keys_pointer_and_typing_over_devtools_in_chromium() {
    let Some(path) = chromium() else { return };
    let r = report::build(&cell_pool_with_an_idle_stretch(), &checked()).expect("report");
    let html = write(&r, "cell-pool-devtools.html");
    let profile = tempdir("devtools-profile");
    let options = headless_chrome::LaunchOptions::default_builder()
        .path(Some(path))
        .headless(true)
        .sandbox(false)
        .window_size(Some((1400, 900)))
        .user_data_dir(Some(profile.clone()))
        .idle_browser_timeout(Duration::from_secs(120))
        .build()
        .expect("launch options");
    let browser = headless_chrome::Browser::new(options).expect("chromium starts");
    let tab = browser.new_tab().expect("a tab");
    let total = r.summary.steps;
    let line = |step: usize| serde_json::json!(r.timeline.step_line[step - 1]);

    // The address opens on a step.
    tab.navigate_to(&format!("file://{}#step=3", html.display()))
        .and_then(|t| t.wait_until_navigated())
        .expect("the report loads");
    wait_true(
        &tab,
        &format!("document.getElementById('step-index').textContent === 'step 3 of {total}'"),
        "#step=3 opens on step 3",
    );
    assert_eq!(
        js(&tab, "document.getElementById('step-line').textContent"),
        line(3)
    );

    // The arrow keys: the step, its line, the counter and the address move together.
    tab.press_key("ArrowRight").expect("key");
    wait_true(
        &tab,
        "location.hash === '#step=4'",
        "ArrowRight updates the address",
    );
    assert_eq!(
        js(&tab, "document.getElementById('step-index').textContent"),
        serde_json::json!(format!("step 4 of {total}"))
    );
    assert_eq!(
        js(&tab, "document.getElementById('step-line').textContent"),
        line(4)
    );
    tab.press_key("ArrowLeft").expect("key");
    wait_true(&tab, "location.hash === '#step=3'", "ArrowLeft comes back");
    assert_eq!(
        js(&tab, "document.getElementById('step-line').textContent"),
        line(3)
    );

    // Hover: sweep the pointer along lane b until something is under it.
    let rect = |sel: &str| -> (f64, f64, f64, f64) {
        let v = js(
            &tab,
            &format!(
                "(function () {{ var r = document.querySelector('{sel}').getBoundingClientRect(); return JSON.stringify([r.left, r.top, r.width, r.height]); }})()"
            ),
        );
        // Objects come back by reference: the rectangle comes as JSON text.
        let v: serde_json::Value =
            serde_json::from_str(v.as_str().expect("JSON text")).expect("a rectangle");
        let n = |i: usize| v[i].as_f64().expect("a number");
        (n(0), n(1), n(2), n(3))
    };
    let (cx, _, cw, _) = rect("#canvas");
    let (_, ly, _, lh) = rect(r#"#lanes .lane[data-lane="b"]"#);
    let y = ly + lh / 2.0;
    let mut x = cx + 2.0;
    let mut shown = serde_json::Value::Null;
    while x < cx + cw {
        tab.move_mouse_to_point(headless_chrome::browser::tab::point::Point { x, y })
            .expect("pointer");
        if js(&tab, "document.getElementById('tooltip').hidden") == serde_json::json!(false) {
            shown = js(&tab, "document.getElementById('tooltip').textContent");
            break;
        }
        x += 3.0;
    }
    let text = shown
        .as_str()
        .unwrap_or_else(|| panic!("no tooltip anywhere on lane b"));
    assert!(text.starts_with("b · "), "the tooltip names lane b: {text}");
    tab.move_mouse_to_point(headless_chrome::browser::tab::point::Point { x, y: y + 400.0 })
        .expect("pointer");
    wait_true(
        &tab,
        "document.getElementById('tooltip').hidden",
        "the tooltip goes when the pointer leaves",
    );

    // The lane filter: `/` focuses it, typing narrows the parents, Escape clears it.
    let shown_parents = "document.querySelectorAll('#lanes-inner .lane:not(.filtered)').length";
    assert_eq!(js(&tab, shown_parents), 2);
    tab.press_key("/").expect("key");
    wait_true(
        &tab,
        "document.activeElement.id === 'lane-filter'",
        "/ focuses the filter",
    );
    tab.type_str("a").expect("typing");
    wait_true(
        &tab,
        &format!("{shown_parents} === 1"),
        "typing a keeps lane a only",
    );
    assert_eq!(
        js(
            &tab,
            "document.querySelector('#lanes-inner .lane:not(.filtered)').dataset.lane"
        ),
        "a"
    );
    tab.press_key("Escape").expect("key");
    wait_true(
        &tab,
        &format!("{shown_parents} === 2"),
        "Escape clears the filter",
    );

    // Next error: b's failed reconcile, named in the header, its step in the address.
    tab.press_key("e").expect("key");
    wait_true(
        &tab,
        "document.getElementById('detail-head').textContent.indexOf('b · reconcile error') === 0",
        "e selects b's failed reconcile",
    );
    let counter = js(&tab, "document.getElementById('step-index').textContent");
    let step: usize = counter
        .as_str()
        .and_then(|c| c.strip_prefix("step "))
        .and_then(|c| c.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("counter {counter}"));
    assert_eq!(
        js(&tab, "location.hash"),
        serde_json::json!(format!("#step={step}"))
    );
    // The step a span shows is the one it began at: the dispatch of b's reconcile.
    assert_eq!(
        js(&tab, "document.getElementById('step-line').textContent"),
        line(step)
    );
    assert!(
        line(step).as_str().unwrap().contains("reconcile b"),
        "{}",
        line(step)
    );

    // Idle stretches: `i` shows real time, again draws them narrow.
    let idle_button = "document.getElementById('idle-toggle').textContent";
    assert_eq!(js(&tab, idle_button), "idle: narrow");
    tab.press_key("i").expect("key");
    wait_true(
        &tab,
        &format!("{idle_button} === 'idle: real'"),
        "i shows real time",
    );
    wait_true(
        &tab,
        "document.getElementById('range').textContent.indexOf('idle stretch') < 0",
        "no stretch is drawn narrow in real time",
    );
    tab.press_key("i").expect("key");
    wait_true(
        &tab,
        &format!("{idle_button} === 'idle: narrow'"),
        "i again",
    );

    assert_eq!(
        js(&tab, "window.__reportErrors.length"),
        0,
        "console errors"
    );
    drop(tab);
    drop(browser);
    let _ = std::fs::remove_dir_all(profile);
}
