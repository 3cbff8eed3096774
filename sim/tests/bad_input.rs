//! The command line on bad input, as a table: each input, the exit status, the message, all
//! under a 64 MiB address-space cap (`prlimit --as`, util-linux), so an input that made the
//! binary buffer its output or grow its world would fail here instead of taking the machine.
//! Exit statuses: 0 clean, 1 a broken invariant or divergence, 2 the input cannot be used or
//! the output cannot be written, 141 the output pipe was closed.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_reconcile-sim");
/// Address space the binary may map: a debug build simulates the bundled traces in about
/// 20 MiB of it.
const CAP_BYTES: u64 = 64 << 20;
const HEADER: &str = r#"{"reconcile_sim_trace":1}"#;
const LIST: &str = r#"{"record":"list","t":0,"status":200,"body":{"metadata":{"resourceVersion":"1"},"items":[]}}"#;
const FRAME: &str = r#"{"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"2"}}}"#;

fn dir() -> PathBuf {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!(
        "reconcile-sim-bad-input-{}-{n}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn capped(args: &[&str]) -> Output {
    Command::new("prlimit")
        .arg(format!("--as={CAP_BYTES}"))
        .arg("--")
        .arg(BIN)
        .args(args)
        .output()
        .expect("prlimit (util-linux) runs the binary under a memory cap")
}

fn trace_file(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("traces")
        .join(name)
        .display()
        .to_string()
}

/// One row: a file's bytes, the subcommand, the exit status and what stderr must contain.
struct Row {
    what: &'static str,
    bytes: Vec<u8>,
    command: &'static str,
    status: i32,
    message: &'static str,
}

fn row(
    what: &'static str,
    bytes: impl Into<Vec<u8>>,
    command: &'static str,
    status: i32,
    message: &'static str,
) -> Row {
    Row {
        what,
        bytes: bytes.into(),
        command,
        status,
        message,
    }
}

#[test]
fn every_bad_input_has_its_status_and_message_within_the_memory_cap() {
    let deep = format!(
        "{HEADER}\n{{\"record\":\"list\",\"t\":0,\"status\":200,\"body\":{}{}}}\n",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let table = [
        row(
            "empty file",
            "",
            "simulate",
            2,
            "x: not a recognised format (empty file: expected a trace header line",
        ),
        row(
            "blank lines only",
            "\n \n",
            "replay",
            2,
            "x: not a recognised format (empty file",
        ),
        row(
            "truncated record",
            format!("{HEADER}\n{{\"record\":\"list\",\"t\":0,\"sta"),
            "simulate",
            2,
            "x:2: bad record: EOF while parsing",
        ),
        row(
            "truncated header",
            "{\"reconcile_sim_tr",
            "replay",
            2,
            "x: not a recognised format",
        ),
        row(
            "wrong version",
            "{\"reconcile_sim_trace\":3}\n",
            "simulate",
            2,
            "x:1: trace format version 3 is not supported",
        ),
        row(
            "wrong shape: an array of numbers",
            "[1,2,3]\n",
            "simulate",
            2,
            "x: not a recognised format",
        ),
        row(
            "wrong shape: an unknown field",
            format!("{HEADER}\n{{\"record\":\"stop\",\"extra\":1}}\n"),
            "replay",
            2,
            "x:2: bad record: unknown field `extra`",
        ),
        row(
            "unknown record kind",
            format!("{HEADER}\n{{\"record\":\"frobnicate\"}}\n"),
            "simulate",
            2,
            "x:2: unknown record kind \"frobnicate\"",
        ),
        row(
            "time going backwards",
            format!("{HEADER}\n{{\"record\":\"stop\",\"t\":5}}\n{{\"record\":\"stop\",\"t\":4}}\n"),
            "replay",
            2,
            "x:3: time goes backwards",
        ),
        row(
            "huge advance (1e9 s, the 87-byte trace of issue 17)",
            format!("{HEADER}\n{{\"record\":\"advance\",\"by_s\":1e9}}\n"),
            "simulate",
            2,
            "x:2: the trace reaches +1000000000.000s, past the 2592000 s world mode simulates",
        ),
        row(
            "advance past any duration",
            format!("{HEADER}\n{{\"record\":\"advance\",\"by_s\":1e300}}\n"),
            "simulate",
            2,
            "x:2: by_s must be between 0 and 1e9 seconds, got 1e300",
        ),
        row(
            "LIST body that is not a list (no items)",
            format!(
                "{HEADER}\n{{\"record\":\"list\",\"t\":0,\"status\":200,\"body\":{{\"kind\":\"Status\"}}}}\n"
            ),
            "simulate",
            2,
            "x:2: a 200 LIST body with no \"items\" (not a list)",
        ),
        row(
            "LIST body whose items is not an array",
            format!(
                "{HEADER}\n{{\"record\":\"list\",\"t\":0,\"status\":200,\"body\":{{\"items\":{{}}}}}}\n"
            ),
            "simulate",
            2,
            "x:2: a 200 LIST body whose \"items\" is not an array",
        ),
        row(
            "LIST body that is a JSON array",
            format!("{HEADER}\n{{\"record\":\"list\",\"t\":0,\"status\":200,\"body\":[]}}\n"),
            "simulate",
            2,
            "x:2: a 200 LIST body that is JSON but not an object",
        ),
        row(
            "invalid UTF-8 on line 3",
            [
                format!("{HEADER}\n{{\"record\":\"stop\"}}\n{{\"record\":\"frame\",\"raw\":\"")
                    .into_bytes(),
                b"\xff\"}\n".to_vec(),
            ]
            .concat(),
            "replay",
            2,
            "x:3: invalid UTF-8 at byte 26",
        ),
        row(
            "binary garbage (its first byte NUL)",
            (0..4096u32)
                .map(|i| (i * 7919 % 251) as u8)
                .collect::<Vec<u8>>(),
            "simulate",
            2,
            "x:1: a NUL byte at byte 1 of the line",
        ),
        row(
            "binary garbage with no NUL",
            (1..4096u32)
                .map(|i| (i * 7919 % 251) as u8 | 0x80)
                .collect::<Vec<u8>>(),
            "simulate",
            2,
            "x:1: invalid UTF-8 at byte 1",
        ),
        row(
            "UTF-16 (its byte order mark)",
            b"\xff\xfe{\0}\0".to_vec(),
            "import",
            2,
            "x:1: starts with a UTF-16 byte order mark: a trace or capture is UTF-8 text",
        ),
        row(
            "a UTF-8 byte order mark before a trace",
            format!("\u{feff}{HEADER}\n{LIST}\n"),
            "simulate",
            0,
            "",
        ),
        row(
            "CRLF line ends",
            format!("{HEADER}\r\n{LIST}\r\n"),
            "replay",
            0,
            "",
        ),
        row(
            "CR-only line ends",
            format!("{HEADER}\r{LIST}\r"),
            "simulate",
            0,
            "",
        ),
        row(
            "CR-only line ends, a bad record on line 3",
            format!("{HEADER}\r{LIST}\r{{\"record\":\"frobnicate\"}}\r"),
            "replay",
            2,
            "x:3: unknown record kind \"frobnicate\"",
        ),
        row(
            "a byte order mark and CR-only line ends before a watch stream",
            format!("\u{feff}{FRAME}\r{FRAME}\r"),
            "import",
            0,
            "",
        ),
        row(
            "a capture nested past serde_json's recursion limit",
            format!(
                "{{\"type\":\"ADDED\",\"object\":{}{}}}\n",
                "[".repeat(200),
                "]".repeat(200)
            ),
            "import",
            2,
            "x:1: nested deeper than 128 levels, serde_json's recursion limit at line 1 column",
        ),
        row(
            "concurrency 0, imported",
            "{\"reconcile_sim_trace\":1,\"concurrency\":0}\n",
            "import",
            2,
            "x:1: the header's settings: concurrency must be between 1 and 4096, got 0",
        ),
        row(
            "timeout_seconds 0 after a blank line, replayed",
            "\n{\"reconcile_sim_trace\":1,\"timeout_seconds\":0}\n",
            "replay",
            2,
            "x:2: the header's settings: watch timeout_seconds must be positive",
        ),
        row(
            "timeout_seconds 0, simulated",
            "{\"reconcile_sim_trace\":1,\"timeout_seconds\":0}\n",
            "simulate",
            2,
            "x:1: the header's settings: watch timeout_seconds must be positive",
        ),
        row(
            "the last record too near the horizon for --settle",
            format!("{HEADER}\n{{\"record\":\"reconcile_all\",\"t\":2591900}}\n"),
            "simulate",
            2,
            "x:2: the last record at 2591900s plus --settle 600s is past the 2592000 s",
        ),
        row(
            "deep nesting (100k levels) in a LIST body: a wire fault, noted",
            deep.clone(),
            "simulate",
            0,
            "",
        ),
        row(
            "deep nesting (100k levels) in a LIST body, replayed: the core refuses it",
            deep,
            "replay",
            0,
            "",
        ),
        row(
            "deep nesting (100k levels) as a record",
            format!("{HEADER}\n{}{}\n", "[".repeat(100_000), "]".repeat(100_000)),
            "simulate",
            2,
            "x:2: bad record: invalid type: sequence",
        ),
        row(
            "an invalid base64 payload",
            format!("{HEADER}\n{{\"record\":\"frame\",\"raw_base64\":\"Zm9=\"}}\n"),
            "replay",
            2,
            "x:2: raw_base64: Invalid last symbol",
        ),
    ];
    let dir = dir();
    let mut report = String::new();
    for (i, row) in table.iter().enumerate() {
        let path = dir.join("x");
        std::fs::write(&path, &row.bytes).unwrap();
        let out = capped(&[row.command, path.to_str().unwrap()]);
        let stderr = String::from_utf8_lossy(&out.stderr).replace(path.to_str().unwrap(), "x");
        let status = out.status.code();
        let ok = status == Some(row.status)
            && stderr.contains(row.message)
            && !stderr.contains(":0:")
            && !stderr.contains("panicked");
        report.push_str(&format!(
            "{} {i:>2} {}: {} exit {status:?} (want {}): {}\n",
            if ok { "ok  " } else { "FAIL" },
            row.what,
            row.command,
            row.status,
            stderr.trim()
        ));
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!report.contains("FAIL"), "\n{report}");
}

#[test]
fn a_missing_file_is_named() {
    let out = capped(&["simulate", "/nonexistent/trace.jsonl"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .starts_with("reconcile-sim: /nonexistent/trace.jsonl: No such file"),
        "{out:?}"
    );
}

#[test]
fn a_file_too_large_is_refused_from_its_metadata_before_reading() {
    // Sparse: 1.2 GB long, no block on disk; refused at once, not after reading 1 GiB.
    let dir = dir();
    let path = dir.join("big");
    std::fs::File::create(&path)
        .unwrap()
        .set_len(1_200_000_000)
        .unwrap();
    let out = capped(&["import", path.to_str().unwrap()]);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.ends_with(
            "big: 1200000000 bytes, larger than 1073741824 bytes, the most reconcile-sim reads\n"
        ),
        "{stderr}"
    );
}

#[test]
fn dev_zero_is_refused_at_its_first_byte() {
    let out = capped(&["simulate", "/dev/zero"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .starts_with("reconcile-sim: /dev/zero:1: a NUL byte at byte 1 of the line"),
        "{out:?}"
    );
}

#[test]
fn an_endless_pipe_is_a_clear_error_within_the_memory_cap() {
    // Newlines without end: read in bounded chunks, refused once the cap allows no more
    // (beyond the cap, at 1 GiB + 1 byte: `reconcile_trace::read_bounded`'s own tests).
    let out = bash(r#"yes '' | prlimit --as=$CAP -- "$BIN" import /dev/stdin"#);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("reconcile-sim: /dev/stdin: cannot hold ")
            && stderr.contains(" bytes in memory (read so far: ")
            && !stderr.contains("panicked"),
        "{stderr}"
    );
}

/// Runs `script` in bash with `$BIN` and `$TRACE` set, the binary under the cap.
fn bash(script: &str) -> Output {
    Command::new("bash")
        .arg("-c")
        .arg(script)
        .env("BIN", BIN)
        .env("CAP", CAP_BYTES.to_string())
        .env("TRACE", trace_file("cell-pool.jsonl"))
        .output()
        .unwrap()
}

#[test]
fn a_closed_pipe_ends_the_run_quietly_with_141() {
    // Two million simulated seconds of bookmarks: far more output than a pipe holds.
    let out = bash(
        r#"prlimit --as=$CAP -- "$BIN" simulate "$TRACE" --settle 2000000 2>/tmp/reconcile-sim-pipe-$$ | head -1 >/dev/null
           status=${PIPESTATUS[0]}; cat /tmp/reconcile-sim-pipe-$$; rm -f /tmp/reconcile-sim-pipe-$$; echo "status=$status""#,
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.trim(), "status=141", "{out:?}");
}

#[test]
fn a_full_disk_is_a_clear_error() {
    let out = bash(r#"prlimit --as=$CAP -- "$BIN" simulate "$TRACE" > /dev/full"#);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        "reconcile-sim: writing the output: No space left on device (os error 28)"
    );
}

#[test]
fn output_is_streamed_not_held() {
    // A bookmark every simulated second for a week: about 44 MB of output, which held in
    // memory (and copied as it grows) does not fit the cap beside the binary itself.
    let dir = dir();
    let path = dir.join("chatty.jsonl");
    std::fs::write(
        &path,
        "{\"reconcile_sim_trace\":1,\"bookmark_interval_s\":1,\"timeout_seconds\":3600}\n{\"record\":\"advance\",\"by_s\":600000}\n",
    )
    .unwrap();
    let out = Command::new("bash")
        .arg("-c")
        .arg(r#"prlimit --as=$CAP -- "$BIN" simulate "$CHATTY" | wc -c"#)
        .env("BIN", BIN)
        .env("CAP", CAP_BYTES.to_string())
        .env("CHATTY", &path)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(out.status.success(), "{out:?}");
    let bytes: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    assert!(bytes > CAP_BYTES / 2, "{bytes} bytes of output");
}

#[test]
fn a_library_caller_that_skips_validation_still_stops_at_the_horizon() {
    use reconcile_sim::simulate::{MAX_SPAN, validate};
    use reconcile_sim::{Render, SimOptions, Trace, simulate};
    let trace = Trace::parse(
        "x",
        &format!("{HEADER}\n{{\"record\":\"advance\",\"by_s\":1e9}}\n"),
    )
    .unwrap();
    let opts = SimOptions {
        render: Render::Quiet,
        ..SimOptions::default()
    };
    assert_eq!(validate(&trace, &opts).unwrap_err().line, 2);
    let report = simulate(&trace, &opts).unwrap();
    assert_eq!(
        report
            .violations
            .iter()
            .map(|v| v.invariant)
            .collect::<Vec<_>>(),
        ["simulated time past the horizon"]
    );
    assert!(report.end.since_origin() <= MAX_SPAN + std::time::Duration::from_secs(3600));
    assert!(report.steps < 100_000, "{} steps", report.steps);
}
