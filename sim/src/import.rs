//! Importers: other capture formats into traces, each recognised by its content.
//!
//! | format | shape | becomes |
//! |---|---|---|
//! | `trace` | our JSON Lines with a header | itself |
//! | `watch-stream` | raw apiserver watch frames, one per line | LIST (synthesized) + WATCH + frames + clean end |
//! | `kubectl` | `kubectl get pods --watch --output-watch-events -o json`: concatenated, pretty-printed events | same as a watch stream |
//! | `k8s-openapi` | recorded request/response arrays | each pod LIST / WATCH as recorded (a first WATCH with `sendInitialEvents=true` is a streaming list: the header says so and no LIST is invented); other requests skipped with a note |
//! | `kubespy` | arrays of successive states of one pod | ADDED / MODIFIED / DELETED inferred; a new uid under the same name is a new object |
//! | `pod-list` | one PodList | the initial state: one LIST |
//!
//! Timestamps: captures carry none, so records are spaced one second apart, or closer (whole
//! milliseconds) when that would take the trace past the span world mode simulates
//! ([`MAX_SPAN`] less the default `--settle`); the header's description then says so.
//!
//! Reading: a leading byte order mark is skipped and lines may end in LF, CRLF or a lone CR
//! ([`numbered_lines`]); a frame imported from a watch stream or kubectl's output keeps the
//! line it came from, for messages. A trace is refused here when its header's settings are
//! ones the core refuses ([`crate::harness::config`], the very check a run makes), naming
//! the header's line, and so is a capture nested past serde_json's recursion limit, named as
//! such.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use reconcile_core::Instant;

use reconcile_core::KeyBy;

use crate::simulate::{MAX_SPAN, SimOptions};
use crate::trace::{
    Entry, FORMAT_KEY, Header, MAX_RECORDS, Payload, Record, RecordedEnd, Trace, TraceError,
    json_error, numbered_lines, strip_bom,
};

/// A capture format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum Format {
    /// This crate's JSON Lines trace.
    Trace,
    /// Raw apiserver watch stream: newline-delimited frames.
    WatchStream,
    /// `kubectl get pods --watch --output-watch-events -o json`.
    Kubectl,
    /// k8s-openapi's recorded request/response arrays.
    K8sOpenapi,
    /// kubespy-style arrays of successive states of one pod.
    Kubespy,
    /// A PodList JSON, as an initial state.
    PodList,
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Format::Trace => "trace",
            Format::WatchStream => "watch-stream",
            Format::Kubectl => "kubectl",
            Format::K8sOpenapi => "k8s-openapi",
            Format::Kubespy => "kubespy",
            Format::PodList => "pod-list",
        })
    }
}

/// An import that failed: which file, which format, what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImportError {
    /// The trace itself is bad.
    #[error(transparent)]
    Trace(#[from] crate::trace::TraceError),
    /// No known format matches the content.
    #[error("{file}: not a recognised format ({reason}); pass --from")]
    Unrecognised {
        /// The file.
        file: String,
        /// Why each guess failed, briefly.
        reason: String,
    },
    /// The content does not fit the format it was read as.
    #[error("{file}: as {format}: {message}")]
    Bad {
        /// The file.
        file: String,
        /// The format tried.
        format: Format,
        /// What is wrong, and where.
        message: String,
    },
}

fn secs(n: u64) -> Option<Instant> {
    Some(Instant::from_duration(Duration::from_secs(n)))
}

/// Drops JSON whitespace outside strings, keeping every other byte (and key order) as is.
#[must_use]
pub fn minify(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    let mut in_string = false;
    let mut escaped = false;
    for c in json.chars() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
        } else if c == '"' {
            in_string = true;
            out.push(c);
        } else if !c.is_ascii_whitespace() {
            out.push(c);
        }
    }
    out
}

/// Guesses the format from the content (a leading byte order mark skipped, lines ended by
/// LF, CRLF or a lone CR).
#[must_use]
pub fn detect(text: &str) -> Option<Format> {
    let trimmed = strip_bom(text).trim_start();
    let first_line = numbered_lines(trimmed).next().map_or("", |(_, l)| l);
    if members(first_line).is_some_and(|m| m.contains_key(FORMAT_KEY)) {
        return Some(Format::Trace);
    }
    if trimmed.starts_with('[') {
        serde_json::from_str::<crate::simulate::Nested>(trimmed).ok()?;
        let items = serde_json::from_str::<Vec<&RawValue>>(trimmed).ok()?;
        let first = members(items.first()?.get())?;
        if first.contains_key("request_url") {
            return Some(Format::K8sOpenapi);
        }
        if first.contains_key("metadata") {
            return Some(Format::Kubespy);
        }
        return None;
    }
    if let Some(m) = members(trimmed) {
        if m.contains_key("items") {
            return Some(Format::PodList);
        }
        if m.contains_key("type") && m.contains_key("object") {
            // One event: a stream of one line, or kubectl's one object.
            return Some(if trimmed.trim_end().contains(['\n', '\r']) {
                Format::Kubectl
            } else {
                Format::WatchStream
            });
        }
        return None;
    }
    let lines_are_frames = numbered_lines(trimmed)
        .map(|(_, l)| l)
        .filter(|l| !l.trim().is_empty())
        .all(|l| members(l).is_some_and(|m| m.contains_key("type")));
    if lines_are_frames {
        return Some(Format::WatchStream);
    }
    let mut events = serde_json::Deserializer::from_str(trimmed).into_iter::<&RawValue>();
    if matches!(events.next(), Some(Ok(first)) if members(first.get()).is_some_and(|m| m.contains_key("type")))
    {
        return Some(Format::Kubectl);
    }
    None
}

/// The members of the JSON object `text`, each left as its text: `None` when `text` is not
/// one (or nests past serde_json's recursion limit, as a `Value` would fail). Detection
/// reads a capture's shape this way, without building it: a `Value` tree of real pods holds
/// about 11 times their text (issue 31: `import` of a 170 MB PodList took 2.2 GB).
fn members(text: &str) -> Option<BTreeMap<Cow<'_, str>, &RawValue>> {
    serde_json::from_str::<crate::simulate::Nested>(text).ok()?;
    serde_json::from_str(text).ok()
}

/// The `kind` of the objects a capture holds, so that a replay and a simulation skip a
/// frame of another kind (a ConfigMap in a pod watch): the most common `kind` among its LIST
/// items and watch frames' objects (the first seen on a tie); else a LIST's own kind less
/// `List` (`PodList`: `Pod`; never kubectl's generic `List`); `None` when nothing names one.
fn capture_kind(trace: &Trace) -> Option<String> {
    let mut counts: Vec<(String, usize)> = Vec::new();
    let mut from_list = None;
    let kind_of = |members: &BTreeMap<Cow<'_, str>, &RawValue>| {
        members
            .get("kind")
            .and_then(|k| serde_json::from_str::<String>(k.get()).ok())
    };
    let mut count = |kind: String| match counts.iter_mut().find(|(k, _)| *k == kind) {
        Some((_, n)) => *n += 1,
        None => counts.push((kind, 1)),
    };
    for entry in &trace.entries {
        match &entry.record {
            Record::List {
                status: 200,
                body,
                transport_error: None,
            } => {
                let Some(list) = body.as_str().and_then(members) else {
                    continue;
                };
                if let Some(kind) = kind_of(&list)
                    && let Some(item) = kind.strip_suffix("List")
                    && !item.is_empty()
                {
                    from_list.get_or_insert_with(|| item.to_owned());
                }
                let items = list
                    .get("items")
                    .and_then(|i| serde_json::from_str::<Vec<&RawValue>>(i.get()).ok());
                // The list passed the depth check whole: each item is read for its kind alone.
                for item in items.unwrap_or_default() {
                    if let Some(kind) = kind_field(item.get()) {
                        count(kind);
                    }
                }
            }
            Record::Frame { line } => {
                let Some(event) = line.as_str().and_then(members) else {
                    continue;
                };
                let object_event = event.get("type").is_some_and(|t| {
                    matches!(t.get(), "\"ADDED\"" | "\"MODIFIED\"" | "\"DELETED\"")
                });
                if object_event
                    && let Some(object) = event.get("object").and_then(|o| members(o.get()))
                    && let Some(kind) = kind_of(&object)
                {
                    count(kind);
                }
            }
            _ => {}
        }
    }
    let most = counts.iter().map(|(_, n)| *n).max();
    counts
        .into_iter()
        .find(|(_, n)| Some(*n) == most)
        .map(|(k, _)| k)
        .or(from_list)
        .filter(|k| crate::trace::is_kind_name(k))
}

/// The `kind` member of the JSON object `text`, read in one pass that builds nothing else.
fn kind_field(text: &str) -> Option<String> {
    #[derive(Deserialize)]
    struct Kinded {
        kind: Option<String>,
    }
    serde_json::from_str::<Kinded>(text).ok()?.kind
}

/// Whether the JSON `text` is an object whose `items` is an array, read without building it
/// (the last `items` when repeated, as a `Value` keeps it).
fn list_has_items(text: &str) -> bool {
    members(text).is_some_and(|m| m.get("items").is_some_and(|i| i.get().starts_with('[')))
}

/// The first place in `text` where serde_json stops at its recursion limit, with the line
/// it names: a capture nested that deep is named as such, not as an unknown format.
fn nested_too_deep(text: &str) -> Option<(usize, String)> {
    let mut values = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    loop {
        match values.next()? {
            Ok(_) => {}
            Err(e) if e.to_string().starts_with("recursion limit exceeded") => {
                return Some((e.line(), json_error(&e)));
            }
            Err(_) => return None,
        }
    }
}

/// The line of a trace's header: its first line that is not blank.
fn header_line(text: &str) -> usize {
    numbered_lines(strip_bom(text))
        .find(|(_, l)| !l.trim().is_empty())
        .map_or(1, |(n, _)| n)
}

/// Refuses a header whose settings the core refuses, with the same check a run makes.
fn check_header(file: &str, line: usize, header: &Header) -> Result<(), TraceError> {
    crate::harness::config(header)
        .map(drop)
        .map_err(|e| TraceError {
            file: file.to_owned(),
            line,
            message: format!("the header's settings: {e}"),
        })
}

/// The line each of `n` items starting at byte offsets `starts` of `text` is on (offsets in
/// increasing order), counted in one pass.
fn lines_at(text: &str, starts: impl IntoIterator<Item = usize>) -> Vec<usize> {
    let bytes = text.as_bytes();
    let (mut pos, mut line) = (0, 1);
    starts
        .into_iter()
        .map(|offset| {
            let (more, _) = crate::trace::read::line_and_column(&bytes[pos..], offset - pos);
            line += more - 1;
            pos = offset;
            line
        })
        .collect()
}

/// Spaces the 1-second ticks of an imported trace closer (whole milliseconds) when its last
/// record would leave no room for the default `--settle` within [`MAX_SPAN`]; the spacing,
/// when changed.
fn fit_horizon(trace: &mut Trace) -> Option<Duration> {
    let budget = MAX_SPAN.saturating_sub(SimOptions::default().settle);
    let last = trace
        .entries
        .iter()
        .filter_map(|e| e.at)
        .max()?
        .since_origin();
    if last <= budget {
        return None;
    }
    let step_ms = u64::try_from(budget.as_millis()).unwrap_or(u64::MAX) / last.as_secs().max(1);
    for entry in &mut trace.entries {
        if let Some(at) = entry.at {
            let ticks = at.since_origin().as_secs();
            entry.at = Some(Instant::from_duration(Duration::from_millis(
                ticks.saturating_mul(step_ms),
            )));
        }
    }
    Some(Duration::from_millis(step_ms))
}

/// Imports `text` (read from `file`) as `format`, or as the detected format when `None`.
///
/// # Errors
/// [`ImportError`] naming the file and what is wrong.
pub fn import(file: &str, text: &str, format: Option<Format>) -> Result<Trace, ImportError> {
    let text = strip_bom(text);
    if format.is_none() && text.trim().is_empty() {
        return Err(ImportError::Unrecognised {
            file: file.to_owned(),
            reason: "empty file: expected a trace header line or a capture".into(),
        });
    }
    let format = match format {
        Some(f) => f,
        None => match detect(text) {
            Some(format) => format,
            None => {
                if let Some((line, message)) = nested_too_deep(text) {
                    return Err(TraceError {
                        file: file.to_owned(),
                        line,
                        message,
                    }
                    .into());
                }
                return Err(ImportError::Unrecognised {
                    file: file.to_owned(),
                    reason: "not a trace header, a JSON array of recordings or pod states, a \
                             PodList, newline-delimited watch frames, or concatenated watch events"
                        .into(),
                });
            }
        },
    };
    let bad = |message: String| ImportError::Bad {
        file: file.to_owned(),
        format,
        message,
    };
    let mut trace = match format {
        Format::Trace => {
            let trace = Trace::parse(file, text)?;
            check_header(file, header_line(text), &trace.header)?;
            return Ok(trace);
        }
        Format::WatchStream => {
            // Borrowed from `text`: each line is copied once, into its record.
            let (lines, frames): (Vec<usize>, Vec<&str>) = numbered_lines(text)
                .map(|(n, l)| (n, l.trim()))
                .filter(|(_, l)| !l.is_empty())
                .unzip();
            with_lines(watch_trace(&frames).map_err(bad)?, &lines)
        }
        Format::Kubectl => {
            let mut frames = Vec::new();
            let mut starts = Vec::new();
            let mut stream = serde_json::Deserializer::from_str(text).into_iter::<&RawValue>();
            for (i, event) in stream.by_ref().enumerate() {
                let event =
                    event.map_err(|e| bad(format!("event {}: {}", i + 1, json_error(&e))))?;
                // Borrowed from `text`: its offset there.
                starts.push(event.get().as_ptr() as usize - text.as_ptr() as usize);
                frames.push(minify(event.get()));
            }
            if frames.is_empty() {
                return Err(bad("no events".into()));
            }
            with_lines(watch_trace(&frames).map_err(bad)?, &lines_at(text, starts))
        }
        Format::K8sOpenapi => k8s_openapi(text).map_err(bad)?,
        Format::Kubespy => kubespy(text).map_err(bad)?,
        Format::PodList => {
            // Checked without building the list: a `Value` tree of real pods holds about
            // 11 times their text (issue 31: `import` of a 170 MB PodList took 2.2 GB).
            serde_json::from_str::<crate::simulate::Nested>(text)
                .map_err(|e| bad(format!("not JSON: {}", json_error(&e))))?;
            if !list_has_items(text) {
                return Err(bad("no \"items\" array".into()));
            }
            Trace {
                name: String::new(),
                header: Header::default(),
                entries: vec![Entry {
                    note: Some("the PodList as the initial state".into()),
                    ..Entry::new(
                        secs(0),
                        Record::List {
                            status: 200,
                            body: text.trim().into(),
                            transport_error: None,
                        },
                    )
                }],
            }
        }
    };
    if let Some(entry) = trace.entries.get(MAX_RECORDS) {
        return Err(bad(format!(
            "{}more than {MAX_RECORDS} records, the most a trace holds",
            if entry.line == 0 {
                String::new()
            } else {
                format!("line {}: ", entry.line)
            }
        )));
    }
    trace.header.kind = capture_kind(&trace);
    check_header(file, 0, &trace.header)?;
    trace.name = file.to_owned();
    let mut description = format!("imported from {file} as {format}");
    if let Some(step) = fit_horizon(&mut trace) {
        description.push_str(&format!(
            "; records {} ms apart, not 1 s, so the trace and the default --settle fit the {} s \
             world mode simulates (the capture has no timestamps)",
            step.as_millis(),
            MAX_SPAN.as_secs()
        ));
    }
    trace.header.description = Some(description);
    Ok(trace)
}

/// `trace` (from [`watch_trace`]: LIST, WATCH, then the frames) with each frame on the line
/// of the capture it came from.
fn with_lines(mut trace: Trace, lines: &[usize]) -> Trace {
    for (entry, line) in trace.entries.iter_mut().skip(2).zip(lines) {
        entry.line = *line;
    }
    trace
}

/// `trace` as JSON Lines, redacted by `redaction` ([`Redaction::entry`] on every record, the
/// path every trace writer takes): what `import` prints or writes. A trace does not say its
/// resource, so Secrets are known by their payloads (kind, a list's kind, a last-applied
/// annotation naming `Secret`).
///
/// [`Redaction::entry`]: reconcile_trace::redact::Redaction::entry
#[must_use]
pub fn redacted_jsonl(trace: Trace, redaction: &reconcile_trace::redact::Redaction) -> String {
    let mut out = Vec::new();
    // Writing to a `Vec` cannot fail, and every line is a `String`.
    let _ = write_redacted(trace, redaction, &mut out);
    String::from_utf8(out).unwrap_or_default()
}

/// [`redacted_jsonl`], written to `out` a record at a time (what `import -o` does), so that
/// only one record's line is held besides the trace.
///
/// # Errors
/// When writing to `out` fails.
pub fn write_redacted(
    mut trace: Trace,
    redaction: &reconcile_trace::redact::Redaction,
    out: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    redaction.trace(&mut trace, &[]);
    trace.write_jsonl(out)
}

/// The first frame's object version, minus one when numeric: a LIST version from which a
/// watch would deliver exactly these frames.
fn list_version_before<S: AsRef<str>>(frames: &[S]) -> String {
    frames
        .iter()
        .find_map(|f| {
            let v: Value = serde_json::from_str(f.as_ref()).ok()?;
            v["object"]["metadata"]["resourceVersion"]
                .as_str()
                .map(str::to_owned)
        })
        .and_then(|rv| rv.parse::<u64>().ok())
        .map_or_else(|| "0".to_owned(), |rv| rv.saturating_sub(1).to_string())
}

/// The namespace the capture watched, as far as its frames tell: the one every object names,
/// or none (all namespaces) when they name more than one, or an object names none. A capture
/// of all namespaces is not narrowed to its first frame's, which world mode would then serve
/// alone.
fn namespace_of<S: AsRef<str>>(frames: &[S]) -> Option<String> {
    let mut seen: Option<String> = None;
    for f in frames {
        let Ok(v) = serde_json::from_str::<Value>(f.as_ref()) else {
            continue;
        };
        if !matches!(v["type"].as_str(), Some("ADDED" | "MODIFIED" | "DELETED")) {
            continue;
        }
        match (v["object"]["metadata"]["namespace"].as_str(), &seen) {
            (Some(ns), None) => seen = Some(ns.to_owned()),
            (Some(ns), Some(first)) if ns == first => {}
            _ => return None,
        }
    }
    seen
}

fn empty_list(rv: &str) -> String {
    format!(
        "{{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{{\"resourceVersion\":\"{rv}\"}},\"items\":[]}}"
    )
}

/// A watch stream as a trace: an empty LIST (synthesized: the capture has none), the WATCH,
/// one frame a second, a clean end.
fn watch_trace<S: AsRef<str>>(frames: &[S]) -> Result<Trace, String> {
    if frames.is_empty() {
        return Err("no frames".into());
    }
    let mut entries = Vec::with_capacity(frames.len() + 3);
    let rv = list_version_before(frames);
    entries.push(Entry {
        note: Some("synthesized: the capture has no LIST".into()),
        ..Entry::new(
            secs(0),
            Record::List {
                status: 200,
                body: empty_list(&rv).into(),
                transport_error: None,
            },
        )
    });
    push_watch(&mut entries, 0, frames, None);
    Ok(Trace {
        name: String::new(),
        header: Header {
            namespace: namespace_of(frames),
            ..Header::default()
        },
        entries,
    })
}

fn push_watch<S: AsRef<str>>(
    entries: &mut Vec<Entry>,
    start: u64,
    frames: &[S],
    note: Option<String>,
) -> u64 {
    entries.push(Entry {
        note,
        ..Entry::new(
            secs(start),
            Record::Watch {
                status: 200,
                body: Payload::default(),
                resource_version: None,
            },
        )
    });
    let mut t = start;
    for line in frames {
        t += 1;
        entries.push(Entry::new(
            secs(t),
            Record::Frame {
                line: line.as_ref().into(),
            },
        ));
    }
    t += 1;
    entries.push(Entry::new(secs(t), Record::WatchEnd(RecordedEnd::Clean)));
    t
}

#[derive(Deserialize)]
struct Recording {
    request_url: String,
    request_method: String,
    response_status_code: u16,
    response_body: String,
}

/// Pod LIST and WATCH requests, as recorded; other requests are skipped with a note.
fn k8s_openapi(text: &str) -> Result<Trace, String> {
    let recordings: Vec<Recording> = serde_json::from_str(text)
        .map_err(|e| format!("not a recording array: {}", json_error(&e)))?;
    let mut entries = Vec::new();
    let mut t = 0;
    let mut listed = false;
    let mut streaming = false;
    let mut fell_back = false;
    let mut namespace = None;
    let mut skipped = Vec::new();
    for (i, r) in recordings.iter().enumerate() {
        let (path, query) = r
            .request_url
            .split_once('?')
            .unwrap_or((&r.request_url, ""));
        let is_pods = path.ends_with("/pods");
        if r.request_method != "GET" || !is_pods {
            skipped.push(format!("#{} {} {path}", i + 1, r.request_method));
            continue;
        }
        // The first pod request's path says the scope: `/api/v1/pods` is all namespaces.
        namespace.get_or_insert_with(|| {
            path.split("/namespaces/")
                .nth(1)
                .and_then(|rest| rest.split('/').next())
                .map(str::to_owned)
        });
        let watch = query
            .split('&')
            .any(|p| p == "watch=true" || p == "watch=1");
        if watch {
            let frames: Vec<String> = r
                .response_body
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(str::to_owned)
                .collect();
            let initial_events = query.split('&').any(|p| p == "sendInitialEvents=true");
            if !listed && initial_events {
                // A streaming list is the listing: the core asks for it itself when the
                // header says so, and its initial events end at the recorded bookmark.
                streaming = true;
                listed = true;
            }
            if !listed {
                entries.push(Entry {
                    note: Some("synthesized: the recording watches without a LIST first".into()),
                    ..Entry::new(
                        secs(t),
                        Record::List {
                            status: 200,
                            body: empty_list(&list_version_before(&frames)).into(),
                            transport_error: None,
                        },
                    )
                });
                listed = true;
            }
            if r.response_status_code == 200 {
                let note = Some(format!("recording #{}: GET {}", i + 1, r.request_url));
                t = push_watch(&mut entries, t, &frames, note) + 1;
            } else {
                entries.push(Entry::new(
                    secs(t),
                    Record::Watch {
                        status: r.response_status_code,
                        body: r.response_body.as_str().into(),
                        resource_version: None,
                    },
                ));
                t += 1;
                if streaming && initial_events && matches!(r.response_status_code, 400 | 422) {
                    // Refused: the core falls back to LIST+WATCH, so a LIST follows.
                    fell_back = true;
                    listed = false;
                }
            }
        } else {
            if listed && streaming && !fell_back {
                return Err(format!(
                    "recording #{}: a LIST after a streaming list, which the core never sends \
                     while the server serves streaming lists",
                    i + 1
                ));
            }
            if listed {
                // The core only LISTs again after a failure: record the gap as one.
                entries.push(Entry {
                    note: Some("synthesized: the recording LISTs again, which the core does only after a failed watch".into()),
                    ..Entry::new(secs(t), Record::Watch {
                        status: 410,
                        body: "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\",\"reason\":\"Expired\",\"code\":410}".into(),
                        resource_version: None,
                    })
                });
                t += 1;
            }
            entries.push(Entry {
                note: Some(format!("recording #{}: GET {}", i + 1, r.request_url)),
                ..Entry::new(
                    secs(t),
                    Record::List {
                        status: r.response_status_code,
                        body: r.response_body.as_str().into(),
                        transport_error: None,
                    },
                )
            });
            listed = true;
            t += 1;
        }
    }
    if entries.is_empty() {
        return Err(format!(
            "no pod LIST or WATCH among {} recordings",
            recordings.len()
        ));
    }
    if !skipped.is_empty()
        && let Some(first) = entries.first_mut()
    {
        let note = format!("skipped (not a pod LIST / WATCH): {}", skipped.join(", "));
        first.note = Some(match first.note.take() {
            Some(n) => format!("{n}; {note}"),
            None => note,
        });
    }
    Ok(Trace {
        name: String::new(),
        header: Header {
            namespace: namespace.flatten(),
            streaming_lists: streaming,
            ..Header::default()
        },
        entries,
    })
}

/// Successive states of one pod: the first is ADDED, the same uid again is MODIFIED, and a
/// new uid under the same name is the old one DELETED, then the new one ADDED.
fn kubespy(text: &str) -> Result<Trace, String> {
    let states: Vec<&RawValue> =
        serde_json::from_str(text).map_err(|e| format!("not a JSON array: {}", json_error(&e)))?;
    let mut frames = Vec::with_capacity(states.len() + 1);
    let mut last: Option<(Value, String)> = None;
    for (i, raw) in states.iter().enumerate() {
        let value: Value = serde_json::from_str(raw.get())
            .map_err(|e| format!("state #{}: {}", i + 1, json_error(&e)))?;
        let uid = value["metadata"]["uid"]
            .as_str()
            .ok_or_else(|| format!("state #{}: no metadata.uid", i + 1))?
            .to_owned();
        let state = minify(raw.get());
        let event = match &last {
            None => "ADDED",
            Some((_, last_uid)) if *last_uid == uid => "MODIFIED",
            Some((previous, _)) => {
                // The old pod's DELETED is not in the recording: its last state stands in,
                // at the new pod's version (deletion and creation are one step apart here).
                let mut tombstone = previous.clone();
                tombstone["metadata"]["resourceVersion"] =
                    value["metadata"]["resourceVersion"].clone();
                frames.push(format!("{{\"type\":\"DELETED\",\"object\":{tombstone}}}"));
                "ADDED"
            }
        };
        frames.push(format!("{{\"type\":\"{event}\",\"object\":{state}}}"));
        last = Some((value, uid));
    }
    let mut trace = watch_trace(&frames)?;
    trace.entries[0].note =
        Some("synthesized: kubespy records no LIST and no event types (inferred from uid)".into());
    trace.header.parent = KeyBy::Name;
    Ok(trace)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minify_keeps_strings_and_key_order() {
        assert_eq!(
            minify("{ \"b\" : 1,\n \"a\": \"x y\\\" z\" }"),
            r#"{"b":1,"a":"x y\" z"}"#
        );
    }

    #[test]
    fn formats_are_recognised_by_content() {
        assert_eq!(detect("{\"reconcile_sim_trace\":1}\n"), Some(Format::Trace));
        assert_eq!(
            detect("{\"type\":\"ADDED\",\"object\":{}}\n{\"type\":\"DELETED\",\"object\":{}}\n"),
            Some(Format::WatchStream)
        );
        assert_eq!(
            detect(
                "{\n  \"type\": \"ADDED\",\n  \"object\": {}\n}\n{\n  \"type\": \"DELETED\",\n  \"object\": {}\n}\n"
            ),
            Some(Format::Kubectl)
        );
        assert_eq!(
            detect("[{\"request_url\":\"/x\"}]"),
            Some(Format::K8sOpenapi)
        );
        assert_eq!(detect("[{\"metadata\":{}}]"), Some(Format::Kubespy));
        assert_eq!(
            detect("{\"kind\":\"PodList\",\"items\":[]}"),
            Some(Format::PodList)
        );
        assert_eq!(detect("hello"), None);
        assert!(matches!(
            import("f", "hello", None),
            Err(ImportError::Unrecognised { .. })
        ));
    }

    #[test]
    fn kubespy_infers_deleted_and_added_for_a_new_uid() {
        let text = r#"[{"metadata":{"name":"foo","uid":"1","resourceVersion":"5"}},
                       {"metadata":{"name":"foo","uid":"1","resourceVersion":"6"}},
                       {"metadata":{"name":"foo","uid":"2","resourceVersion":"9"}}]"#;
        let trace = import("s.json", text, Some(Format::Kubespy)).unwrap();
        let types: Vec<String> = trace
            .entries
            .iter()
            .filter_map(|e| match &e.record {
                Record::Frame { line } => {
                    let v: Value = serde_json::from_slice(line.as_bytes()).unwrap();
                    Some(format!(
                        "{} {}",
                        v["type"].as_str().unwrap(),
                        v["object"]["metadata"]["uid"].as_str().unwrap()
                    ))
                }
                _ => None,
            })
            .collect();
        assert_eq!(types, ["ADDED 1", "MODIFIED 1", "DELETED 1", "ADDED 2"]);
    }

    #[test]
    fn a_capture_too_long_for_1_s_spacing_is_spaced_to_fit_the_horizon() {
        // What an importer builds from 2.7M frames, one tick a second (the ticks in between
        // left out: 2.7M real frames take 7 s and 640 MB in a debug test): its end is past
        // world mode's 30 days, which `simulate` refused at "line 0" (issue 31).
        let frames = 2_700_000;
        let mut trace = watch_trace(&["x".to_owned(), "x".to_owned()]).unwrap();
        trace.entries[3].at = secs(frames);
        trace.entries[4].at = secs(frames + 1);
        let opts = SimOptions {
            render: crate::Render::Quiet,
            ..SimOptions::default()
        };
        let e = crate::simulate::validate(&trace, &opts).unwrap_err();
        assert!(
            e.message
                .contains("past the 2592000 s world mode simulates"),
            "{e}"
        );
        assert_eq!(fit_horizon(&mut trace), Some(Duration::from_millis(959)));
        crate::simulate::validate(&trace, &opts).unwrap();
        let at = |i: usize| trace.entries[i].at.unwrap().since_origin();
        // (30 days - the default 600 s settle) / 2.7M ticks: 959 ms a tick.
        assert_eq!((at(1), at(2)), (Duration::ZERO, Duration::from_millis(959)));
        assert_eq!(at(4), Duration::from_millis(959 * (frames + 1)));
        assert!(at(4) + opts.settle <= MAX_SPAN);
        // `import` spaces what it builds so, and a capture that fits keeps 1 s.
        let small = import("w", "x\nx\n", Some(Format::WatchStream)).unwrap();
        assert_eq!(small.entries[3].at, secs(2));
        assert_eq!(
            small.header.description.as_deref(),
            Some("imported from w as watch-stream")
        );
        let mut fits = small.clone();
        assert_eq!(fit_horizon(&mut fits), None);
        assert_eq!(fits, small);
    }

    #[test]
    fn a_header_the_core_refuses_is_refused_at_import_naming_its_line() {
        for (header, message) in [
            (
                "{\"reconcile_sim_trace\":1,\"concurrency\":0}",
                "concurrency must be between 1 and 4096, got 0",
            ),
            (
                "{\"reconcile_sim_trace\":1,\"timeout_seconds\":0}",
                "watch timeout_seconds must be positive",
            ),
        ] {
            let e = import("t", &format!("\n{header}\n"), None).unwrap_err();
            assert_eq!(
                e.to_string(),
                format!("t:2: the header's settings: {message}")
            );
        }
    }

    #[test]
    fn a_bom_and_any_line_ends_import_and_frames_keep_their_lines() {
        let lf = "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"5\"}}}\n\n{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"6\"}}}\n";
        let want = import("w", lf, None).unwrap();
        for text in [
            format!("\u{feff}{lf}"),
            lf.replace('\n', "\r\n"),
            lf.replace('\n', "\r"),
        ] {
            assert_eq!(detect(&text), Some(Format::WatchStream), "{text:?}");
            let got = import("w", &text, None).unwrap();
            assert_eq!(got.entries, want.entries, "{text:?}");
        }
        assert_eq!(want.entries[2].line, 1);
        assert_eq!(want.entries[3].line, 3);
        // kubectl's pretty-printed events, each at the line it starts on.
        let kubectl = "{\n  \"type\": \"ADDED\",\n  \"object\": {}\n}\r\n{\r  \"type\": \"DELETED\",\n  \"object\": {}\n}\n";
        let trace = import("k", kubectl, None).unwrap();
        assert_eq!((trace.entries[2].line, trace.entries[3].line), (1, 5));
        // A trace with a BOM and CR line ends.
        let trace = import(
            "t",
            "\u{feff}{\"reconcile_sim_trace\":1}\r{\"record\":\"stop\"}\r",
            None,
        )
        .unwrap();
        assert_eq!(trace.entries[0].line, 2);
    }

    #[test]
    fn nesting_past_the_recursion_limit_is_named_with_its_line() {
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        // A recording array whose second line nests too deep: no format matches.
        let text = format!("[{{\"request_url\":\"/x\",\n\"response_body\":{deep}}}]\n");
        let e = import("d", &text, None).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("d:2: nested deeper than 128 levels, serde_json's recursion limit"),
            "{e}"
        );
        // One watch event nested too deep.
        let e = import(
            "d",
            &format!("{{\"type\":\"ADDED\",\"object\":{deep}}}"),
            None,
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("d:1: nested deeper than 128 levels"),
            "{e}"
        );
        let e = import("d", &deep, None).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("d:1: nested deeper than 128 levels"),
            "{e}"
        );
        // Named so with --from too.
        let e = import("d", &deep, Some(Format::Kubespy)).unwrap_err();
        assert!(
            e.to_string().contains("nested deeper than 128 levels"),
            "{e}"
        );
    }

    #[test]
    fn a_bad_file_names_the_file_and_the_format() {
        let e = import(
            "x.json",
            "[{\"metadata\":{\"name\":\"a\"}}]",
            Some(Format::Kubespy),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "x.json: as kubespy: state #1: no metadata.uid"
        );
    }
}
