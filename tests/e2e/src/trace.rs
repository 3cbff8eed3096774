//! Each controller run of a case, written as a `reconcile-sim` trace
//! (`target/e2e-traces/<driver>/<case>[-n].jsonl`) and replayed at once: the simulator must
//! reach the same final membership per cell that the live reconciles saw.
//!
//! Mapping from the driver boundary ([`Taped`]) to trace records:
//!
//! | driver | trace |
//! |---|---|
//! | LIST answered / failed | `list` (status + body / `transport_error`) |
//! | WATCH answered 200 | `watch` (status 200, the cursor it was sent from) |
//! | WATCH answered non-200 | `watch` (that status and body) |
//! | WATCH failed before answering | `watch` 200 then `watch_end` transport (noted) |
//! | watch line | `frame` (raw) |
//! | WATCH ended | `watch_end` (clean / transport) |
//! | reconcile finished | `reconcile` script, placed before the input that dispatched it |
//! | stop | `stop` |
//!
//! Timers, commands and dispatches are not recorded: the simulator's core derives them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use reconcile_core::{Instant, Outcome, StreamEnd};
use reconcile_sim::trace::{Entry, Header, ParentBy, Record, RecordedEnd, ScriptedOutcome, Trace};

use crate::harness::{BACKOFF, CELL, Opts};
use crate::tap::{Tap, Taped};

/// Where the trace of controller `n` of `case` on `driver` goes.
#[must_use]
pub fn path(driver: &str, case: &str, n: usize) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/e2e-traces")
        .join(driver);
    if n == 0 {
        dir.join(format!("{case}.jsonl"))
    } else {
        dir.join(format!("{case}-{n}.jsonl"))
    }
}

/// The header matching the controller the harness starts with `opts`.
#[must_use]
pub fn header(description: &str, namespace: &str, opts: &Opts) -> Header {
    Header {
        description: Some(description.to_owned()),
        in_process: false,
        namespace: Some(namespace.to_owned()),
        label_selector: Some(opts.selector.clone()),
        parent: ParentBy::Label(CELL.to_owned()),
        concurrency: opts.concurrency,
        timeout_seconds: opts.timeout_seconds,
        resync: None,
        retry_delay: opts.retry_delay,
        backoff: BACKOFF,
        ..Header::default()
    }
}

/// Turns a tape into a trace.
#[must_use]
pub fn to_trace(name: &str, header: Header, records: &[(Instant, Taped)]) -> Trace {
    // Each entry with the reconcile scripts that must precede it.
    let mut entries: Vec<(Entry, Vec<Entry>)> = Vec::new();
    let mut asked: BTreeMap<reconcile_core::StreamId, String> = BTreeMap::new();
    let mut opened: BTreeSet<reconcile_core::StreamId> = BTreeSet::new();
    let mut dispatched: BTreeMap<reconcile_core::Ticket, (Option<usize>, Instant)> =
        BTreeMap::new();
    // Scripts for reconciles dispatched before any input (none in practice: the first
    // dispatch needs a LIST).
    let mut leading: Vec<Entry> = Vec::new();
    for (at, taped) in records {
        let at = *at;
        let entry = |record: Record| Entry::new(Some(at), record);
        match taped {
            Taped::ListResponse(_, status, body) => entries.push((
                entry(Record::List {
                    status: *status,
                    body: String::from_utf8_lossy(body).into_owned(),
                    transport_error: None,
                }),
                Vec::new(),
            )),
            Taped::ListError(_, error) => entries.push((
                entry(Record::List {
                    status: 0,
                    body: String::new(),
                    transport_error: Some(error.clone()),
                }),
                Vec::new(),
            )),
            Taped::WatchRequested(stream, rv) => {
                asked.insert(*stream, rv.clone());
            }
            Taped::WatchOpened(stream) => {
                opened.insert(*stream);
                entries.push((
                    entry(Record::Watch {
                        status: 200,
                        body: String::new(),
                        resource_version: asked.get(stream).cloned(),
                    }),
                    Vec::new(),
                ));
            }
            Taped::WatchLine(_, line) => entries.push((
                entry(Record::Frame {
                    line: String::from_utf8_lossy(line).into_owned(),
                }),
                Vec::new(),
            )),
            Taped::WatchEnd(stream, end) => {
                let was_open = opened.remove(stream);
                let rv = asked.remove(stream);
                match (end, was_open) {
                    (StreamEnd::HttpStatus { code, body }, _) => entries.push((
                        entry(Record::Watch {
                            status: *code,
                            body: String::from_utf8_lossy(body).into_owned(),
                            resource_version: rv,
                        }),
                        Vec::new(),
                    )),
                    (StreamEnd::Clean, _) => {
                        entries.push((entry(Record::WatchEnd(RecordedEnd::Clean)), Vec::new()));
                    }
                    (StreamEnd::TransportError(e), true) => entries.push((
                        entry(Record::WatchEnd(RecordedEnd::Transport(e.clone()))),
                        Vec::new(),
                    )),
                    (StreamEnd::TransportError(e), false) => {
                        let mut open = entry(Record::Watch {
                            status: 200,
                            body: String::new(),
                            resource_version: rv,
                        });
                        open.note =
                            Some("transport error before the response head; open implied".into());
                        entries.push((open, Vec::new()));
                        entries.push((
                            entry(Record::WatchEnd(RecordedEnd::Transport(e.clone()))),
                            Vec::new(),
                        ));
                    }
                }
            }
            Taped::Dispatched(ticket, _) => {
                let before = entries.len().checked_sub(1);
                dispatched.insert(*ticket, (before, at));
            }
            Taped::Reconciled(ticket, parent, outcome) => {
                let Some((before, since)) = dispatched.remove(ticket) else {
                    continue;
                };
                let when = before.map_or(since, |i| entries[i].0.at.unwrap_or(since));
                let script = Entry::new(
                    Some(when),
                    Record::Reconcile {
                        parent: Some(parent.clone()),
                        outcome: match outcome {
                            Outcome::Success => ScriptedOutcome::Ok,
                            Outcome::RequeueAfter(d) => ScriptedOutcome::RequeueAfter(*d),
                            Outcome::Error(e) => ScriptedOutcome::Error(e.clone()),
                        },
                        duration: at.saturating_duration_since(since),
                    },
                );
                match before {
                    Some(i) => entries[i].1.push(script),
                    None => leading.push(script),
                }
            }
            Taped::Stop => entries.push((entry(Record::Stop), Vec::new())),
            Taped::Start | Taped::Command(_) | Taped::ListRequested(_) | Taped::Timeout => {}
        }
    }
    let mut flat = leading;
    for (entry, scripts) in entries {
        flat.extend(scripts);
        flat.push(entry);
    }
    Trace {
        name: name.to_owned(),
        header,
        entries: flat,
    }
}

/// The member names of the latest reconcile of each parent, read from a simulator
/// rendering (lines carrying `reconcile <parent> R<n> attempt=<a> members=[...]`).
#[must_use]
pub fn latest_members(rendering: &str) -> BTreeMap<String, Vec<String>> {
    let mut latest = BTreeMap::new();
    for line in rendering.lines() {
        // A step may dispatch several reconciles: `...  ->  reconcile a R4 ...; reconcile b R5 ...`.
        for (at, _) in line.match_indices("reconcile ") {
            let mut words = line[at + "reconcile ".len()..].split_whitespace();
            let (Some(parent), Some(ticket), Some(attempt), Some(members)) =
                (words.next(), words.next(), words.next(), words.next())
            else {
                continue;
            };
            if !ticket.starts_with('R') || !attempt.starts_with("attempt=") {
                continue;
            }
            let Some(list) = members
                .strip_prefix("members=[")
                .and_then(|m| m.split_once(']').map(|(list, _)| list))
            else {
                continue;
            };
            let names = list
                .split(',')
                .filter(|n| !n.is_empty())
                .map(str::to_owned)
                .collect();
            latest.insert(parent.to_owned(), names);
        }
    }
    latest
}

/// Writes the trace to `path` and replays it; returns the replay's latest members per
/// parent, or what went wrong.
///
/// # Errors
/// The file could not be written, the trace does not parse back, or the replay diverged.
pub fn write_and_replay(
    path: &Path,
    header: Header,
    tap: &Tap,
) -> Result<BTreeMap<String, Vec<String>>, String> {
    let name = path.display().to_string();
    let trace = to_trace(&name, header, &tap.all());
    let text = trace.to_jsonl();
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    }
    std::fs::write(path, &text).map_err(|e| format!("write {name}: {e}"))?;
    // Parse what was written, so the file itself is proven replayable.
    let parsed = Trace::parse(&name, &text).map_err(|e| e.to_string())?;
    let report = reconcile_sim::replay(&parsed, &reconcile_sim::ReplayOptions::default())
        .map_err(|e| format!("{name}: the header is out of bounds: {e}"))?;
    if !report.violations.is_empty() {
        return Err(format!(
            "{name}: replay reported {:?}\n{}",
            report.violations, report.output
        ));
    }
    Ok(latest_members(&report.output))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_every_dispatch_of_a_step() {
        let text = "  +0.021s  list L1 200 items=2 rv=211  ->  watch W2 rv=211; reconcile a R3 attempt=1 members=[mover,stayer]  [synced]\n\
                    +0.083s  frame W2 MODIFIED ns/mover rv=212  ->  reconcile a R4 attempt=1 members=[stayer]; reconcile b R5 attempt=1 members=[mover]\n\
                    +0.084s  reconciled R4 a ok\n\
                    +0.090s  frame W2 DELETED ns/stayer  ->  reconcile a R6 attempt=1 members=[]";
        let latest = latest_members(text);
        assert_eq!(latest["a"], Vec::<String>::new());
        assert_eq!(latest["b"], ["mover"]);
    }
}
