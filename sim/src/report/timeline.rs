//! A run's steps arranged in lanes: what the simulator printed, read back.
//!
//! The input is the same run rendered twice: as JSON steps (`{"t_ns", "input", "commands",
//! "events"}` or `{"t_ns", "note"}`, one per line) and as step lines (one per line, in the same
//! order). Commands, events and inputs are the core's and the simulator's `Display` forms
//! (`list L1 ...`, `watch W2 rv=4 ...`, `reconcile a R3 attempt=1 ...`, `relist (...)`,
//! `backoff a failures=2 delay=2s (...)`, `reconciled R3 a ok`, `frame W2 ADDED ...`), so
//! the vocabulary read here is the one the snapshot tests pin.
//!
//! Spans: a LIST from its command to its answer, a WATCH from its command to its end (or the
//! close, or the run's end), a reconcile from its dispatch to its outcome, a backoff or a
//! requeue from when it was scheduled for its delay. Marks: every other step on the lane it
//! concerns, so every step can be clicked. Lanes are ordered streams first (each source's
//! LIST then WATCH), then the core's own lane, violations, and the parents by name.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The most lanes a timeline holds; items of further parents go to one overflow lane.
pub const MAX_LANES: usize = 20_000;

/// What a lane shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LaneGroup {
    /// A source's LIST or WATCH (or in-process source) requests.
    Stream,
    /// The core's own steps: start, stop, timers, triggers and notes.
    Core,
    /// The faults injected into the run, each labelled with its name.
    Faults,
    /// Broken invariants.
    Violations,
    /// One parent's reconciles, backoffs and requeues.
    Parent,
}

/// One lane.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Lane {
    /// Its name: `LIST`, `WATCH`, `LIST S1`, `SOURCE`, `core`, `violations`, or the parent.
    pub name: String,
    /// What it shows.
    pub group: LaneGroup,
}

/// What an item is; the page colours by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A LIST answered 200 (span).
    List,
    /// A LIST that failed or was cancelled (span).
    ListFailed,
    /// A relist, with its reason (mark).
    Relist,
    /// A WATCH (span, labelled with its stream and cursor).
    Watch,
    /// ADDED / MODIFIED / DELETED (mark).
    Frame,
    /// A BOOKMARK (mark).
    Bookmark,
    /// An ERROR frame, or a frame skipped (mark).
    ErrorFrame,
    /// A watch opened, ended cleanly or was closed (mark).
    WatchEnd,
    /// A watch failed, answered non-200, or will be retried (mark).
    WatchFailed,
    /// A reconcile that succeeded (span).
    ReconcileOk,
    /// A reconcile that asked for a requeue (span).
    ReconcileRequeue,
    /// A reconcile that failed (span).
    ReconcileError,
    /// A reconcile cancelled, or still running at the end (span).
    ReconcileCancelled,
    /// A backoff delay (span).
    Backoff,
    /// A requeue delay (span).
    Requeue,
    /// A step of the core's own (mark).
    Core,
    /// A note (mark).
    Note,
    /// An injected fault, labelled with its name (mark).
    Fault,
    /// A broken invariant (mark).
    Violation,
}

impl Kind {
    /// Every kind, in the order of [`Kind::index`].
    pub const ALL: &'static [Kind] = &[
        Kind::List,
        Kind::ListFailed,
        Kind::Relist,
        Kind::Watch,
        Kind::Frame,
        Kind::Bookmark,
        Kind::ErrorFrame,
        Kind::WatchEnd,
        Kind::WatchFailed,
        Kind::ReconcileOk,
        Kind::ReconcileRequeue,
        Kind::ReconcileError,
        Kind::ReconcileCancelled,
        Kind::Backoff,
        Kind::Requeue,
        Kind::Core,
        Kind::Note,
        Kind::Fault,
        Kind::Violation,
    ];

    /// Its position in [`Kind::ALL`].
    #[must_use]
    pub fn index(self) -> u8 {
        Kind::ALL.iter().position(|&k| k == self).unwrap_or(0) as u8
    }
}

/// One span or mark. A mark has `t1 == t0`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Item {
    /// Index into [`Timeline::lanes`].
    pub lane: u32,
    /// Start, in nanoseconds of simulated time.
    pub t0: u64,
    /// End, in nanoseconds.
    pub t1: u64,
    /// What it is.
    pub kind: Kind,
    /// The step it started at (index into the step lines).
    pub step: u32,
    /// The step it ended at (the same for a mark).
    pub end_step: u32,
    /// A short label (`W2 rv=4`, `R3 #1`, a relist's reason), possibly empty.
    pub label: String,
}

/// The run's lanes, items and step lines.
#[derive(Debug, Clone, Serialize)]
pub struct Timeline {
    /// Lanes, in display order.
    pub lanes: Vec<Lane>,
    /// Items, sorted by lane, then start, then step.
    pub items: Vec<Item>,
    /// Each rendered line's time, in nanoseconds.
    pub step_t: Vec<u64>,
    /// Each rendered line as `simulate` prints it (step lines and notes).
    pub step_line: Vec<String>,
    /// The run's end, in nanoseconds.
    pub end_ns: u64,
    /// The queue's depth (keys waiting for a reconcile slot) where it changed: `[t_ns,
    /// depth]`, in time order, starting empty.
    pub queue: Vec<[u64; 2]>,
}

#[derive(Deserialize)]
struct JsonStep {
    t_ns: u64,
    #[serde(default)]
    input: Option<String>,
    #[serde(default)]
    commands: Vec<String>,
    #[serde(default)]
    events: Vec<String>,
    #[serde(default)]
    note: Option<String>,
    /// Keys waiting for a reconcile slot after the step (absent on notes).
    #[serde(default)]
    queued: Option<u64>,
}

#[derive(Default)]
struct Builder {
    lanes: BTreeMap<(LaneGroup, String), u32>,
    lane_list: Vec<Lane>,
    items: Vec<Item>,
    /// Open spans by their id (`L1`, `W2`, `R3`): item index.
    open: BTreeMap<String, usize>,
    /// Each request's and stream's source (`S1`; the primary is empty).
    source_of: BTreeMap<String, String>,
    overflow: Option<u32>,
}

impl Builder {
    fn lane(&mut self, group: LaneGroup, name: &str) -> u32 {
        if let Some(&i) = self.lanes.get(&(group, name.to_owned())) {
            return i;
        }
        if self.lane_list.len() >= MAX_LANES {
            if let Some(i) = self.overflow {
                return i;
            }
            let i = self.lane_list.len() as u32;
            self.lane_list.push(Lane {
                name: "(more parents)".into(),
                group: LaneGroup::Parent,
            });
            self.overflow = Some(i);
            return i;
        }
        let i = self.lane_list.len() as u32;
        self.lane_list.push(Lane {
            name: name.to_owned(),
            group,
        });
        self.lanes.insert((group, name.to_owned()), i);
        i
    }

    fn stream_lane(&mut self, what: &str, source: &str) -> u32 {
        if source.is_empty() {
            self.lane(LaneGroup::Stream, what)
        } else {
            self.lane(LaneGroup::Stream, &format!("{what} {source}"))
        }
    }

    fn push(
        &mut self,
        lane: u32,
        t: u64,
        kind: Kind,
        step: u32,
        label: impl Into<String>,
    ) -> usize {
        self.items.push(Item {
            lane,
            t0: t,
            t1: t,
            kind,
            step,
            end_step: step,
            label: label.into(),
        });
        self.items.len() - 1
    }

    fn span(&mut self, id: &str, lane: u32, t: u64, kind: Kind, step: u32, label: String) {
        let i = self.push(lane, t, kind, step, label);
        // A span still open under the same id (never answered) ends where the new one starts.
        if let Some(old) = self.open.insert(id.to_owned(), i) {
            self.items[old].end_step = step;
        }
    }

    fn close(&mut self, id: &str, t: u64, step: u32, kind: Option<Kind>) -> bool {
        let Some(i) = self.open.remove(id) else {
            return false;
        };
        let item = &mut self.items[i];
        item.t1 = t.max(item.t0);
        item.end_step = step;
        if let Some(kind) = kind {
            item.kind = kind;
        }
        true
    }

    fn source(&self, id: &str) -> String {
        self.source_of.get(id).cloned().unwrap_or_default()
    }

    fn core(&mut self, t: u64, step: u32, kind: Kind, label: &str) {
        let lane = self.lane(LaneGroup::Core, "core");
        self.push(lane, t, kind, step, short(label));
    }

    fn command(&mut self, t: u64, step: u32, command: &str) {
        let tokens: Vec<&str> = command.split_whitespace().collect();
        let first = tokens.first().copied().unwrap_or("");
        let id = tokens.get(1).copied().unwrap_or("");
        let source = tokens
            .get(2)
            .copied()
            .filter(|s| is_source(s))
            .unwrap_or("");
        match first {
            "list" => {
                self.source_of.insert(id.to_owned(), source.to_owned());
                let lane = self.stream_lane("LIST", source);
                self.span(id, lane, t, Kind::List, step, id.to_owned());
            }
            "cancel-list" => {
                self.close(id, t, step, Some(Kind::ListFailed));
            }
            "watch" => {
                self.source_of.insert(id.to_owned(), source.to_owned());
                let lane = self.stream_lane("WATCH", source);
                let rv = tokens
                    .iter()
                    .find(|t| t.starts_with("rv="))
                    .copied()
                    .unwrap_or("");
                self.span(id, lane, t, Kind::Watch, step, format!("{id} {rv}"));
            }
            "close-watch" | "close-source" => {
                self.close(id, t, step, None);
            }
            "open-source" => {
                let lane = self.lane(LaneGroup::Stream, "SOURCE");
                self.span(id, lane, t, Kind::Watch, step, id.to_owned());
            }
            "reconcile" => {
                let ticket = tokens.get(2).copied().unwrap_or("");
                let attempt = tokens
                    .get(3)
                    .and_then(|a| a.strip_prefix("attempt="))
                    .unwrap_or("?");
                let lane = self.lane(LaneGroup::Parent, id);
                self.span(
                    ticket,
                    lane,
                    t,
                    Kind::ReconcileCancelled,
                    step,
                    format!("{ticket} #{attempt}"),
                );
            }
            "cancel-reconcile" => {
                self.close(id, t, step, Some(Kind::ReconcileCancelled));
            }
            _ => self.core(t, step, Kind::Core, command),
        }
    }

    fn event(&mut self, t: u64, step: u32, event: &str) {
        let tokens: Vec<&str> = event.split_whitespace().collect();
        let first = tokens.first().copied().unwrap_or("");
        let second = tokens.get(1).copied().unwrap_or("");
        match first {
            "relist" => {
                let source = if is_source(second) { second } else { "" };
                let lane = self.stream_lane("LIST", source);
                self.push(lane, t, Kind::Relist, step, short(in_parens(event)));
            }
            "list-failed" => {
                let source = self.source(second);
                let lane = self.stream_lane("LIST", &source);
                self.push(lane, t, Kind::ListFailed, step, short(in_parens(event)));
                if let Some(&i) = self.open.get(second) {
                    self.items[i].kind = Kind::ListFailed;
                }
            }
            "watch-retry" | "frame-skipped" => {
                let source = self.source(second);
                let lane = self.stream_lane("WATCH", &source);
                let kind = if first == "watch-retry" {
                    Kind::WatchFailed
                } else {
                    Kind::ErrorFrame
                };
                self.push(lane, t, kind, step, short(in_parens(event)));
            }
            "backoff" | "requeue" | "error-handled" => {
                let delay = tokens
                    .iter()
                    .find_map(|t| {
                        t.strip_prefix("delay=")
                            .or_else(|| t.strip_prefix("requeue="))
                    })
                    .and_then(|d| d.strip_suffix('s'))
                    .and_then(|d| d.parse::<f64>().ok())
                    .filter(|d| d.is_finite() && *d >= 0.0);
                let lane = self.lane(LaneGroup::Parent, second);
                match delay {
                    Some(d) => {
                        let kind = if first == "backoff" {
                            Kind::Backoff
                        } else {
                            Kind::Requeue
                        };
                        let label = if first == "backoff" {
                            let n = tokens
                                .iter()
                                .find_map(|t| t.strip_prefix("failures="))
                                .unwrap_or("?");
                            format!("backoff {d}s after {n}")
                        } else {
                            format!("requeue {d}s")
                        };
                        let i = self.push(lane, t, kind, step, label);
                        let nanos = (d * 1e9).min(u64::MAX as f64 / 2.0) as u64;
                        self.items[i].t1 = t.saturating_add(nanos);
                    }
                    None => {
                        self.push(lane, t, Kind::Core, step, short(event));
                    }
                }
            }
            _ => self.core(t, step, Kind::Core, event),
        }
    }

    fn input(&mut self, t: u64, step: u32, input: &str, events: &[String]) {
        let tokens: Vec<&str> = input.split_whitespace().collect();
        let first = tokens.first().copied().unwrap_or("");
        let id = tokens.get(1).copied().unwrap_or("");
        match first {
            "list" => {
                let failed = tokens.get(2).is_some_and(|s| *s != "200")
                    || input.contains("undecodable")
                    || events
                        .iter()
                        .any(|e| e.starts_with(&format!("list-failed {id} ")));
                let kind = if failed { Kind::ListFailed } else { Kind::List };
                let source = self.source(id);
                if !self.close(id, t, step, Some(kind)) {
                    let lane = self.stream_lane("LIST", &source);
                    self.push(lane, t, kind, step, id.to_owned());
                }
            }
            "frame" => {
                let source = self.source(id);
                let lane = self.stream_lane("WATCH", &source);
                let kind = match tokens.get(2).copied() {
                    Some("BOOKMARK") => Kind::Bookmark,
                    Some("ADDED" | "MODIFIED" | "DELETED") => Kind::Frame,
                    _ => Kind::ErrorFrame,
                };
                let label = tokens.get(2..).map(|t| t.join(" ")).unwrap_or_default();
                self.push(lane, t, kind, step, short(&label));
            }
            "watch" => {
                let source = self.source(id);
                let lane = self.stream_lane("WATCH", &source);
                let how = tokens.get(2).copied().unwrap_or("");
                let kind = match how {
                    "opened" | "ended" => Kind::WatchEnd,
                    _ => Kind::WatchFailed,
                };
                self.push(lane, t, kind, step, short(&tokens[1..].join(" ")));
                if how != "opened" {
                    self.close(id, t, step, None);
                }
            }
            "reconciled" => {
                let parent = tokens.get(2).copied().unwrap_or("");
                let how = tokens.get(3).copied().unwrap_or("");
                let kind = match how {
                    "ok" => Kind::ReconcileOk,
                    "requeue-after" => Kind::ReconcileRequeue,
                    _ => Kind::ReconcileError,
                };
                if !self.close(id, t, step, Some(kind)) {
                    let lane = self.lane(LaneGroup::Parent, parent);
                    self.push(lane, t, kind, step, id.to_owned());
                }
            }
            "source" => {
                let lane = self.lane(LaneGroup::Stream, "SOURCE");
                let kind = if tokens.get(2) == Some(&"ended") {
                    self.close(id, t, step, None);
                    Kind::WatchEnd
                } else {
                    Kind::Frame
                };
                self.push(lane, t, kind, step, short(&tokens[2..].join(" ")));
            }
            _ => self.core(t, step, Kind::Core, input),
        }
    }
}

fn is_source(s: &str) -> bool {
    s.len() > 1 && s.starts_with('S') && s[1..].bytes().all(|b| b.is_ascii_digit())
}

/// The text inside the first `(` and the last `)`, or all of it.
fn in_parens(s: &str) -> &str {
    match (s.find('('), s.rfind(')')) {
        (Some(a), Some(b)) if a < b => &s[a + 1..b],
        _ => s,
    }
}

/// At most 80 characters of a label (the step line has the rest).
fn short(s: &str) -> String {
    match s.char_indices().nth(80) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}

impl Timeline {
    /// Reads a run's JSON rendering and its text rendering (the same steps, line for line)
    /// into lanes. `end_ns` is the run's end: spans still open then end there.
    ///
    /// # Errors
    /// `(line index, what)` when a JSON line does not decode or the two renderings have a
    /// different number of lines.
    pub fn from_run(json: &str, text: &str, end_ns: u64) -> Result<Timeline, (usize, String)> {
        let json_lines: Vec<&str> = json.lines().collect();
        let text_lines: Vec<&str> = text.lines().collect();
        if json_lines.len() != text_lines.len() {
            return Err((
                json_lines.len().min(text_lines.len()),
                format!(
                    "{} JSON steps but {} step lines",
                    json_lines.len(),
                    text_lines.len()
                ),
            ));
        }
        let mut b = Builder::default();
        // Fixed lanes first, so a run's streams are on top in a stable order.
        b.lane(LaneGroup::Stream, "LIST");
        b.lane(LaneGroup::Stream, "WATCH");
        b.lane(LaneGroup::Core, "core");
        let mut step_t = Vec::with_capacity(json_lines.len());
        let mut end = end_ns;
        let mut queue: Vec<[u64; 2]> = Vec::new();
        for (i, line) in json_lines.iter().enumerate() {
            let step: JsonStep =
                serde_json::from_str(line).map_err(|e| (i, format!("step JSON: {e}")))?;
            let Ok(index) = u32::try_from(i) else {
                return Err((i, "too many steps".into()));
            };
            let t = step.t_ns;
            end = end.max(t);
            step_t.push(t);
            if let Some(note) = &step.note {
                // `# fault: NAME ...` lines (simulate's, for each fault it injects) and the
                // test kit's `# kit: fault NAME: ...` get a lane of their own, labelled; other
                // notes stay with the core's steps.
                if let Some(fault) = note
                    .strip_prefix("fault: ")
                    .or_else(|| note.strip_prefix("kit: fault "))
                {
                    let lane = b.lane(LaneGroup::Faults, "faults");
                    b.push(lane, t, Kind::Fault, index, short(fault));
                } else {
                    let lane = b.lane(LaneGroup::Core, "core");
                    b.push(lane, t, Kind::Note, index, short(note));
                }
                continue;
            }
            if let Some(depth) = step.queued
                && queue.last().map_or(0, |q| q[1]) != depth
            {
                queue.push([t, depth]);
            }
            let input = step.input.as_deref().unwrap_or("");
            b.input(t, index, input, &step.events);
            for c in &step.commands {
                b.command(t, index, c);
            }
            for e in &step.events {
                b.event(t, index, e);
            }
        }
        for (_, i) in std::mem::take(&mut b.open) {
            let item = &mut b.items[i];
            item.t1 = end.max(item.t0);
        }
        // Stream lanes of secondaries that never appeared stay out; parents sorted by name.
        let mut order: Vec<usize> = (0..b.lane_list.len()).collect();
        order.sort_by(|&x, &y| {
            let (a, c) = (&b.lane_list[x], &b.lane_list[y]);
            (a.group, stream_rank(&a.name))
                .cmp(&(c.group, stream_rank(&c.name)))
                .then_with(|| natural_cmp(&a.name, &c.name))
        });
        let mut new_index = vec![0u32; order.len()];
        for (new, &old) in order.iter().enumerate() {
            new_index[old] = new as u32;
        }
        let lanes: Vec<Lane> = order.iter().map(|&i| b.lane_list[i].clone()).collect();
        let mut items = b.items;
        for item in &mut items {
            item.lane = new_index[item.lane as usize];
        }
        items.sort_by_key(|i| (i.lane, i.t0, i.step));
        let step_line = text_lines.iter().map(|l| (*l).to_owned()).collect();
        Ok(Timeline {
            lanes,
            items,
            step_t,
            step_line,
            end_ns: end,
            queue,
        })
    }

    /// Adds a violation mark at `t_ns` (on the `violations` lane, created when needed).
    pub fn add_violation(&mut self, t_ns: u64, label: &str) {
        let lane = match self
            .lanes
            .iter()
            .position(|l| l.group == LaneGroup::Violations)
        {
            Some(i) => i as u32,
            None => {
                let at = self
                    .lanes
                    .iter()
                    .position(|l| l.group > LaneGroup::Violations)
                    .unwrap_or(self.lanes.len());
                self.lanes.insert(
                    at,
                    Lane {
                        name: "violations".into(),
                        group: LaneGroup::Violations,
                    },
                );
                for item in &mut self.items {
                    if item.lane as usize >= at {
                        item.lane += 1;
                    }
                }
                at as u32
            }
        };
        // The step at or before the violation, to show its line.
        let step = self
            .step_t
            .partition_point(|&t| t <= t_ns)
            .saturating_sub(1) as u32;
        let item = Item {
            lane,
            t0: t_ns,
            t1: t_ns,
            kind: Kind::Violation,
            step,
            end_step: step,
            label: short(label),
        };
        let at = self
            .items
            .partition_point(|i| (i.lane, i.t0, i.step) <= (lane, t_ns, step));
        self.items.insert(at, item);
    }

    /// How many lanes of `group` there are.
    #[must_use]
    pub fn lanes_in(&self, group: LaneGroup) -> usize {
        self.lanes.iter().filter(|l| l.group == group).count()
    }
}

/// Names compared with their runs of digits as numbers (`c2` before `c10`), then as text.
fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    fn runs(s: &str) -> impl Iterator<Item = (bool, &str)> {
        let mut rest = s;
        std::iter::from_fn(move || {
            let first = rest.chars().next()?;
            let digit = first.is_ascii_digit();
            let end = rest
                .find(|c: char| c.is_ascii_digit() != digit)
                .unwrap_or(rest.len());
            let (run, tail) = rest.split_at(end);
            rest = tail;
            Some((digit, run))
        })
    }
    let (mut x, mut y) = (runs(a), runs(b));
    loop {
        match (x.next(), y.next()) {
            (None, None) => return a.cmp(b),
            (None, Some(_)) => return std::cmp::Ordering::Less,
            (Some(_), None) => return std::cmp::Ordering::Greater,
            (Some((true, p)), Some((true, q))) => {
                let (p, q) = (p.trim_start_matches('0'), q.trim_start_matches('0'));
                let o = p.len().cmp(&q.len()).then_with(|| p.cmp(q));
                if o.is_ne() {
                    return o;
                }
            }
            (Some((_, p)), Some((_, q))) => {
                let o = p.cmp(q);
                if o.is_ne() {
                    return o;
                }
            }
        }
    }
}

/// LIST before WATCH before SOURCE within a source; the primary's before `S1`'s.
fn stream_rank(name: &str) -> (u32, u32) {
    let (what, source) = name.split_once(' ').unwrap_or((name, "S0"));
    let n = source
        .strip_prefix('S')
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let what = match what {
        "LIST" => 0,
        "WATCH" => 1,
        _ => 2,
    };
    (n, what)
}

#[cfg(test)]
mod tests {
    use super::natural_cmp;

    #[test]
    fn parents_sort_with_their_numbers_as_numbers() {
        let mut names = vec!["c10", "c2", "b", "c1", "ns/a-10", "ns/a-9", "c02", "a"];
        names.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(
            names,
            ["a", "b", "c1", "c02", "c2", "c10", "ns/a-9", "ns/a-10"]
        );
    }
}
