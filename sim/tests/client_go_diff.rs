//! Same trace, same answer as client-go (issue 30): every bundled trace with a primary
//! LIST/WATCH conversation (a world-mode one as its run recorded by `simulate_recorded`),
//! every real capture in `testdata/real` imported as a trace, and the recorded world runs of
//! `explore` seeds with stream faults (100 one-source and 100 many-source seeds here, 500 of
//! each in an ignored test) are played to client-go v0.36.3's own informer
//! (`tests/go/informer`, a real `Reflector`, its default `RealFIFO` and `processDeltas` into
//! the informer's store, a handler recording each notification; one informer per source)
//! and replayed through the core (`reconcile_sim::replay_observed`). The two are compared,
//! source by source, on
//!
//! - the requests: LIST and WATCH in order, with the cursor of each WATCH;
//! - the cursor each ends at, and the final store (`namespace/name` → resourceVersion);
//! - per answer (a LIST answer, or a WATCH answer with the frames of its stream), the set of
//!   objects woken and the set of parents woken: Go's handlers fire per object, our reconciles
//!   are per parent and coalesce, so the sets between two requests (quiescent points: the
//!   harness records a request only once everything queued before it was handled) are what
//!   both must agree on;
//! - for a secondary source, also the key map: the parents each object held maps to, by
//!   the core's `ParentsBy` on our side and as controller-runtime's `EnqueueRequestForOwner`
//!   maps it on Go's (a difference of a secondary is prefixed `Sn `).
//!
//! Only what `docs/alignment.md` says may differ is normalized, each rule citing its row
//! below. Every other difference is listed in [`KNOWN`] with the alignment row that records
//! it; a difference not listed fails the test, and so does a listed one no longer found.
//!
//! The Go harness is built by `tests/go/informer/build.sh` (cached by its go.mod, go.sum and
//! source): its test binary, which plays inside a `testing/synctest` bubble, so the
//! reflector's backoffs take no wall time. Without a Go toolchain the test prints why and passes, unless `CI` is set: then
//! it fails.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use reconcile_core::{KeyBy, WireFormat};
use reconcile_sim::harness::Observation;
use reconcile_sim::simulate::StreamingLists;
use reconcile_sim::trace::{Record, Trace};
use reconcile_sim::{
    Observed, Render, ReplayOptions, SimOptions, explore, import, replay_observed,
    simulate_recorded,
};
use serde::Deserialize;

/// The rows of `docs/alignment.md` the comparison cites; each must be found there.
mod row {
    /// "Initial LIST at `resourceVersion=0`": every LIST of ours is a consistent read; Go's
    /// first is `resourceVersion=0` and a relist is `NotOlderThan` its last version.
    pub const LIST_RV: &str = "Initial LIST at `resourceVersion=0`";
    /// "LIST pagination": ours is opt-in; Go's pager asks `limit=500` with
    /// `resourceVersion=0` (which the watch cache ignores).
    pub const PAGING: &str = "LIST pagination (`limit` + `continue`";
    /// "Update handler without predicates": an update at the resourceVersion already cached
    /// wakes nothing here; Go delivers it (a relist's unchanged objects) as an update.
    pub const SAME_RV: &str = "| Update handler without predicates |";
    /// "EnqueueRequestForOwner": an object the key map cannot map is evicted here; Go keeps
    /// it cached, and its handler maps it to no parent.
    pub const UNMAPPED: &str = "| `EnqueueRequestForOwner` | Child event → parent key |";
    /// "Delete": the stored parent wins over the tombstone's here; Go's handler maps the
    /// object the DELETED event carries.
    pub const DELETE_PARENT: &str = "| Delete | — | **Kept**: the stored parent wins";
    /// "ERROR frame": an ERROR that does not condemn the cursor re-watches from it here; Go
    /// relists.
    pub const ERROR_FRAME: &str = "| ERROR frame | In-band failure |";
    /// "Streaming list": the version of a streaming list's WATCH is ours to choose (always
    /// `""`, a consistent read; Go sends its last synced version after an ordinary
    /// failure), and a refusal (400, 422) makes us LIST for good where Go tries the
    /// streaming list again on its next relist.
    pub const STREAMING: &str = "| Streaming list (`sendInitialEvents`;";
    /// "The cursor while a relist is under way" (new, issue 30): after a 410 the core
    /// reports no cursor until its next listing is applied; Go reports the version it last
    /// synced at.
    pub const RELIST_CURSOR: &str =
        "| The cursor while a relist is under way (found by issue 30) |";
    /// "What follows a very short watch" (new, issue 30): Go relists after it, we re-watch.
    pub const VERY_SHORT_RELIST: &str = "| What follows a very short watch (found by issue 30) |";
    /// "A watch object the typed client cannot decode" (new, issue 30): client-go's typed
    /// decoder ends the stream with an InternalError and the reflector relists; we decode
    /// only the view's fields and skip a frame that fails them.
    pub const TYPED_DECODE: &str =
        "| A watch object the typed client cannot decode (found by issue 30) |";
}

/// The rows a normalization rule of the comparison relies on (each cited where it is
/// applied); each must be found in `docs/alignment.md`.
const NORMALIZED: &[&str] = &[
    row::LIST_RV,
    row::STREAMING,
    row::RELIST_CURSOR,
    row::PAGING,
    row::SAME_RV,
    row::UNMAPPED,
    row::DELETE_PARENT,
];

/// Every difference found, by trace, as the comparison renders it, with the alignment row
/// that records it. Add a row to `docs/alignment.md` before adding an entry here.
const KNOWN: &[(&str, &str, &str)] = &[
    (
        "malformed-frames.jsonl",
        "requests: client-go [LIST, WATCH rv=10, LIST, WATCH rv=20], core [LIST, WATCH rv=10, WATCH rv=13, LIST, WATCH rv=20]",
        row::TYPED_DECODE,
    ),
    (
        "malformed-frames.jsonl",
        "objects woken by line 3: client-go {}, core {default/a-0}",
        row::TYPED_DECODE,
    ),
    (
        "malformed-frames.jsonl",
        "parents woken by line 3: client-go {}, core {a}",
        row::TYPED_DECODE,
    ),
    (
        "watch-ends.jsonl",
        "requests: client-go [LIST, WATCH rv=10], core [LIST, WATCH rv=10, WATCH rv=10, WATCH rv=15, WATCH rv=15, WATCH rv=15]",
        row::VERY_SHORT_RELIST,
    ),
    (
        "watch-ends.jsonl",
        "cursor: client-go 10, core 15",
        row::VERY_SHORT_RELIST,
    ),
    (
        "watch-status-410-504.jsonl",
        "requests: client-go [LIST, WATCH rv=10, LIST, WATCH rv=20, LIST, WATCH rv=30, LIST, WATCH rv=35], core [LIST, WATCH rv=10, LIST, WATCH rv=20, LIST, WATCH rv=30, LIST, WATCH rv=35, WATCH rv=35]",
        row::ERROR_FRAME,
    ),
    // Recorded from world mode: its malformed frame (t=90, with a cursor) is the class of
    // malformed-frames.jsonl; client-go's relist after it has no LIST answer left.
    (
        "world-selector-faults.jsonl",
        "requests: client-go [LIST, WATCH rv=3, LIST, WATCH rv=5, LIST, WATCH rv=5, LIST, WATCH rv=5, WATCH rv=6, WATCH rv=7, WATCH rv=7, WATCH rv=7, WATCH rv=7, LIST, LIST, WATCH rv=7, WATCH rv=7], core [LIST, WATCH rv=3, LIST, WATCH rv=5, LIST, WATCH rv=5, LIST, WATCH rv=5, WATCH rv=6, WATCH rv=7, WATCH rv=7, WATCH rv=7, WATCH rv=7, LIST, LIST, WATCH rv=7, WATCH rv=7, WATCH rv=9, WATCH rv=9, WATCH rv=9, WATCH rv=9, WATCH rv=9, WATCH rv=9, WATCH rv=9, WATCH rv=9, WATCH rv=9, WATCH rv=9, WATCH rv=9, WATCH rv=9, WATCH rv=9, WATCH rv=9, WATCH rv=9, WATCH rv=9, WATCH rv=9, WATCH rv=9, WATCH rv=9, WATCH rv=9]",
        row::TYPED_DECODE,
    ),
    (
        "world-selector-faults.jsonl",
        "cursor: client-go 8, core 9",
        row::TYPED_DECODE,
    ),
    (
        "real/kubeclient/watch_stream.ndjson",
        "cursor: client-go 1388, core 1398",
        row::TYPED_DECODE,
    ),
    // The same capture keyed by controller owner: its pod has none, so it wakes no parent
    // either way; the cursor still parts where client-go relists.
    (
        "real/kubeclient/watch_stream.ndjson (by owner)",
        "cursor: client-go 1388, core 1398",
        row::TYPED_DECODE,
    ),
    (
        "real/kubeclient/watch_stream.ndjson (by owner:ReplicaSet)",
        "cursor: client-go 1388, core 1398",
        row::TYPED_DECODE,
    ),
    (
        "real/kubeclient/watch_stream.ndjson",
        "objects woken by line 3: client-go {}, core {default/php}",
        row::TYPED_DECODE,
    ),
    (
        "real/kubeclient/watch_stream.ndjson",
        "parents woken by line 3: client-go {}, core {default/php}",
        row::TYPED_DECODE,
    ),
];

/// The inputs the harness cannot play, with why; any other skip fails the test.
const SKIPPED: &[(&str, &str)] = &[
    // An in-process source has no LIST or WATCH: nothing for a reflector to be fed.
    ("in-process-source.jsonl", "in-process source"),
];

/// The explore profiles whose faults hit the stream (410 storms as frames and as statuses,
/// compaction, restarts, malformed frames, dropped watches, failed LISTs, and all of them):
/// the seeds compared are the one-source seeds of these.
const STREAM_FAULT_PROFILES: &[&str] = &[
    "watch-drops",
    "gone-frame",
    "gone-status",
    "too-large",
    "malformed-cursor",
    "malformed-nocursor",
    "restart",
    "compaction",
    "list-failures",
    "chaos",
];

/// A world-mode run recorded: the conversation the simulated apiserver had with the core,
/// as a trace with no fault records (what `explore` checks, every invariant on).
fn recorded(trace: &Trace) -> Trace {
    recorded_with(trace, None)
}

/// [`recorded`], the world serving or refusing streaming lists as `streaming` says.
fn recorded_with(trace: &Trace, streaming: Option<StreamingLists>) -> Trace {
    let opts = SimOptions {
        render: Render::Quiet,
        settle: explore::settle(false),
        max_steps: 2_000_000,
        check: true,
        streaming_lists: streaming,
        ..SimOptions::default()
    };
    let (report, recorded) = simulate_recorded(trace, &opts).unwrap();
    assert!(
        report.violations.is_empty(),
        "{}: {:?}",
        trace.name,
        report.violations
    );
    recorded
}

/// Writes `trace` to `file` and reads it back, so each record's line is its line in the
/// file the harness reads.
fn written(name: &str, trace: &Trace, file: PathBuf) -> Input {
    let jsonl = trace.to_jsonl();
    std::fs::write(&file, &jsonl).unwrap();
    Input {
        name: name.to_owned(),
        trace: Trace::parse(name, &jsonl).unwrap(),
        file,
    }
}

/// Where recorded inputs are written: under the target's scratch directory, apart for each
/// checkout (a target directory may be shared by several worktrees, whose runs would
/// otherwise write the same files).
fn scratch() -> PathBuf {
    let checkout: String = env!("CARGO_MANIFEST_DIR")
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("client_go_diff")
        .join(checkout);
    std::fs::create_dir_all(&tmp).unwrap();
    tmp
}

/// The first `n` one-source explore seeds (from 0) of [`STREAM_FAULT_PROFILES`], each run
/// in world mode and recorded; named `explore N (profile)`, with `protobuf` when the seed
/// draws it (as `explore` does: its world serves protobuf, every 7th answer in JSON), and
/// its streaming-list and page-size draws.
fn explore_inputs(n: usize) -> Vec<Input> {
    explore_seed_inputs(n, false)
}

/// The first `n` many-source explore seeds (from 0, those `explore --sources both` builds
/// with several sources) of the many-source forms of [`STREAM_FAULT_PROFILES`], recorded
/// as [`explore_inputs`] records one-source seeds. Their protobuf draw is applied to every
/// source (a secondary then asks for `PartialObjectMetadata`), their streaming-list draw to
/// every source; their page-size draw to the primary only: a trace header says a page size
/// for the primary alone, so a secondary recorded in pages could not be replayed in pages.
fn many_source_inputs(n: usize) -> Vec<Input> {
    explore_seed_inputs(n, true)
}

fn explore_seed_inputs(n: usize, many: bool) -> Vec<Input> {
    let tmp = scratch();
    let mut inputs = Vec::new();
    for seed in 0u64.. {
        if inputs.len() == n {
            break;
        }
        // One-source seeds are every seed's one-source trace (`explore --sources one`);
        // many-source seeds those `explore --sources both` builds with several sources.
        if many && !explore::many_sources(seed, explore::Sources::Both) {
            continue;
        }
        let (mut trace, profile) = if many {
            explore::generate_many(seed, false)
        } else {
            explore::generate(seed, false)
        };
        let base = profile.strip_prefix("sources/").unwrap_or(profile);
        if !STREAM_FAULT_PROFILES.contains(&base) {
            continue;
        }
        let protobuf = explore::protobuf_for(seed, profile);
        if protobuf {
            explore::ask_for_protobuf(&mut trace);
        }
        // A seed that draws streaming lists asks for them on every source (the header says
        // so, for the replay and the harness), and its world serves or refuses them.
        let streaming = explore::streaming_for(seed, profile);
        trace.header.streaming_lists = streaming.is_some();
        if streaming.is_some() {
            for s in &mut trace.header.secondaries {
                s.params.initial_list = reconcile_core::InitialListStrategy::StreamingList;
            }
        }
        // A seed that draws a page size LISTs its primary in pages (the header says it, for
        // the replay).
        trace.header.list_page_size = explore::page_size_for(seed, profile);
        let pages = trace
            .header
            .list_page_size
            .map_or(String::new(), |n| format!(", pages of {n}"));
        let name = format!(
            "explore {seed} ({profile}{}{}{pages})",
            if protobuf { ", protobuf" } else { "" },
            match streaming {
                Some(StreamingLists::Served) => ", streaming lists",
                Some(StreamingLists::Refused) => ", streaming lists refused",
                None => "",
            }
        );
        let file = tmp.join(format!(
            "explore-{}{seed}.jsonl",
            if many { "many-" } else { "" }
        ));
        inputs.push(written(&name, &recorded_with(&trace, streaming), file));
    }
    inputs
}

#[derive(Debug, Deserialize)]
struct GoRequest {
    verb: String,
    resource_version: String,
    #[serde(default)]
    send_initial_events: bool,
    #[serde(default)]
    limit: i64,
    #[serde(default, rename = "continue")]
    continue_token: String,
    answer: usize,
}

#[derive(Debug, Deserialize)]
struct GoNotification {
    after: usize,
    kind: String,
    key: String,
    #[serde(default)]
    rv: String,
    #[serde(default)]
    old_rv: String,
    #[serde(default)]
    old_labels: Option<BTreeMap<String, String>>,
    #[serde(default)]
    labels: Option<BTreeMap<String, String>>,
    /// The controller owner as `Kind/name`, empty for none.
    #[serde(default)]
    owner: String,
    #[serde(default)]
    old_owner: String,
    #[serde(default)]
    tombstone: bool,
    /// A secondary's: the parents its key map maps the object (the old object) to, as
    /// controller-runtime's `EnqueueRequestForOwner` does.
    #[serde(default)]
    parents: Vec<String>,
    #[serde(default)]
    old_parents: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct GoStoreEntry {
    rv: String,
    #[serde(default)]
    labels: Option<BTreeMap<String, String>>,
    #[serde(default)]
    owner: String,
    /// A secondary's: the parents its key map maps the object to.
    #[serde(default)]
    parents: Vec<String>,
}

/// What one source's informer did.
#[derive(Debug, Deserialize)]
struct GoSource {
    requests: Vec<GoRequest>,
    notifications: Vec<GoNotification>,
    store: BTreeMap<String, GoStoreEntry>,
    last_sync_resource_version: String,
}

/// The harness's output: the primary's informer, and one informer per secondary source.
#[derive(Debug, Deserialize)]
struct GoOutput {
    #[serde(flatten)]
    primary: GoSource,
    #[serde(default)]
    secondaries: Vec<GoSource>,
}

/// What one side did, normalized for comparison.
#[derive(Debug, Default, PartialEq)]
struct Side {
    /// `LIST` or `WATCH rv=…`, answered ones only, in order.
    requests: Vec<String>,
    /// Answer line → objects woken.
    objects: BTreeMap<usize, BTreeSet<String>>,
    /// Answer line → parents woken.
    parents: BTreeMap<usize, BTreeSet<String>>,
    store: BTreeMap<String, String>,
    /// A secondary's key map: each object held → the parents it maps to.
    keys: BTreeMap<String, String>,
    cursor: String,
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The harness binary, built or found in the cache; `None` (skip) without Go outside CI.
fn harness() -> Option<PathBuf> {
    let script = repo().join("tests/go/informer/build.sh");
    let out = Command::new("bash")
        .arg(&script)
        .env("GOFLAGS", "-p=1")
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", script.display()));
    if out.status.code() == Some(3) {
        let why = String::from_utf8_lossy(&out.stderr);
        assert!(
            std::env::var_os("CI").is_none(),
            "CI is set and the client-go harness cannot be built: {why}"
        );
        eprintln!("client_go_diff: skipped, no Go toolchain: {why}");
        return None;
    }
    assert!(
        out.status.success(),
        "{} failed:\n{}",
        script.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    Some(PathBuf::from(
        stdout
            .lines()
            .last()
            .expect("build.sh prints the binary")
            .trim(),
    ))
}

/// The parent a notification's labels map to, as the header's key map would.
/// What Go's handler saw of an object that a key map reads: its labels and its controller
/// owner (`Kind/name`, empty for none).
type Facts<'a> = (Option<&'a BTreeMap<String, String>>, &'a str);

/// The parent of the object `key` under `by`, as the core's `KeyBy::parent_of` maps it.
fn parent_of(by: &KeyBy, key: &str, (labels, owner): Facts<'_>) -> Option<String> {
    let (ns, name) = key.split_once('/').unwrap_or(("", key));
    let in_namespace = |name: &str| {
        if ns.is_empty() {
            name.to_owned()
        } else {
            format!("{ns}/{name}")
        }
    };
    match by {
        KeyBy::Label(l) => labels.and_then(|m| m.get(l)).cloned(),
        KeyBy::Name => Some(in_namespace(name)),
        KeyBy::Namespace => Some(ns.to_owned()),
        KeyBy::Owner(kind) => {
            let (owner_kind, owner_name) = owner.split_once('/')?;
            if kind.as_deref().is_some_and(|k| k != owner_kind) {
                return None;
            }
            Some(in_namespace(owner_name))
        }
    }
}

/// The trace line of each LIST record, and of each WATCH record, of source `source` (0
/// for the primary), in order.
fn answer_lines(trace: &Trace, source: u64) -> (Vec<usize>, Vec<usize>) {
    let (mut lists, mut watches) = (Vec::new(), Vec::new());
    for e in &trace.entries {
        if e.source_index() != source {
            continue;
        }
        match e.record {
            Record::List { .. } => lists.push(e.line),
            Record::Watch { .. } => watches.push(e.line),
            _ => {}
        }
    }
    (lists, watches)
}

/// A source's requests as compared, answered ones only, and the answer line of each
/// request made (0 for none).
fn go_requests(out: &GoSource) -> (Vec<String>, Vec<usize>) {
    let (mut requests, mut answer_of) = (Vec::new(), Vec::new());
    for r in &out.requests {
        answer_of.push(r.answer);
        // Requests the trace had no answer for are not compared: the trace says nothing of
        // them, and the replay fires no reflector timer after the last record.
        if r.answer == 0 {
            continue;
        }
        requests.push(match r.verb.as_str() {
            // row::LIST_RV: a LIST's resourceVersion is ours to choose (always a consistent
            // read); row::PAGING: Go's pager's limit=500 on the first LIST.
            "LIST" => {
                let _ = (r.resource_version.as_str(), r.limit);
                "LIST".to_owned()
            }
            // row::STREAMING: a streaming list's version is ours to choose, as a LIST's.
            _ if r.send_initial_events => "WATCH initial-events".to_owned(),
            _ => format!("WATCH rv={}", r.resource_version),
        });
    }
    (requests, answer_of)
}

fn go_side(out: &GoSource, by: &KeyBy) -> Side {
    let (requests, answer_of) = go_requests(out);
    let mut side = Side {
        cursor: out.last_sync_resource_version.clone(),
        requests,
        ..Side::default()
    };
    // What a key map reads of each object as Go's handler last saw it cached.
    let mut cached: BTreeMap<&str, Facts<'_>> = BTreeMap::new();
    for n in &out.notifications {
        let stored = cached.get(n.key.as_str()).copied().unwrap_or((None, ""));
        if n.kind == "delete" {
            cached.remove(n.key.as_str());
        } else {
            cached.insert(&n.key, (n.labels.as_ref(), &n.owner));
        }
        // row::SAME_RV: an update at the cached resourceVersion wakes nothing here.
        if n.kind == "update" && n.rv == n.old_rv && !n.rv.is_empty() {
            continue;
        }
        let old = match n.kind.as_str() {
            "update" => parent_of(by, &n.key, (n.old_labels.as_ref(), &n.old_owner)),
            // row::DELETE_PARENT: a delete wakes the parent the object was cached under,
            // not the one the DELETED event's object (or a tombstone) maps to.
            "delete" => parent_of(by, &n.key, stored),
            _ => None,
        };
        let new = match n.kind.as_str() {
            "delete" => None,
            _ => parent_of(by, &n.key, (n.labels.as_ref(), &n.owner)),
        };
        // row::UNMAPPED: an object its key map maps to no parent, before or after, is never
        // cached here, so it wakes nothing.
        if old.is_none() && new.is_none() {
            continue;
        }
        let answer = n.after.checked_sub(1).map_or(0, |i| answer_of[i]);
        side.objects
            .entry(answer)
            .or_default()
            .insert(n.key.clone());
        side.parents
            .entry(answer)
            .or_default()
            .extend(old.into_iter().chain(new));
        let _ = n.tombstone;
    }
    side.parents.retain(|_, p| !p.is_empty());
    for (key, entry) in &out.store {
        // row::UNMAPPED: an object the key map cannot map is not cached here.
        if parent_of(by, key, (entry.labels.as_ref(), &entry.owner)).is_none() {
            continue;
        }
        side.store.insert(key.clone(), entry.rv.clone());
    }
    side
}

/// A secondary source's informer, normalized as [`go_side`] normalizes the primary's: the
/// parents of each object are the harness's, mapped by the source's key map as
/// controller-runtime's `EnqueueRequestForOwner` maps them. A secondary caches every object
/// it is sent, mapped to parents or not (as client-go does), so nothing is left out for
/// being unmapped.
fn go_secondary_side(out: &GoSource) -> Side {
    let (requests, answer_of) = go_requests(out);
    let mut side = Side {
        cursor: out.last_sync_resource_version.clone(),
        requests,
        ..Side::default()
    };
    // The parents each object is held under, as Go's handler last saw it.
    let mut held: BTreeMap<&str, &[String]> = BTreeMap::new();
    for n in &out.notifications {
        let stored = held.get(n.key.as_str()).copied().unwrap_or(&[]);
        if n.kind == "delete" {
            held.remove(n.key.as_str());
        } else {
            held.insert(&n.key, &n.parents);
        }
        // row::SAME_RV: an update at the held resourceVersion wakes nothing here.
        if n.kind == "update" && n.rv == n.old_rv && !n.rv.is_empty() {
            continue;
        }
        let woken: Vec<&String> = match n.kind.as_str() {
            "update" => n.old_parents.iter().chain(&n.parents).collect(),
            // row::DELETE_PARENT: a delete wakes the parents the object was held under,
            // not those the DELETED event's object (or a tombstone) maps to.
            "delete" => stored.iter().collect(),
            _ => n.parents.iter().collect(),
        };
        let answer = n.after.checked_sub(1).map_or(0, |i| answer_of[i]);
        side.objects
            .entry(answer)
            .or_default()
            .insert(n.key.clone());
        side.parents
            .entry(answer)
            .or_default()
            .extend(woken.into_iter().cloned());
    }
    side.parents.retain(|_, p| !p.is_empty());
    for (key, entry) in &out.store {
        side.store.insert(key.clone(), entry.rv.clone());
        side.keys.insert(key.clone(), entry.parents.join(","));
    }
    side
}

/// Secondary source `source`'s side as the core observed it.
fn core_secondary_side(trace: &Trace, observed: &Observed, source: u64) -> Side {
    let (lists, watches) = answer_lines(trace, source);
    let (mut n_list, mut n_watch) = (0, 0);
    let mut answer = 0;
    let end = &observed.secondaries[usize::try_from(source).unwrap() - 1];
    let mut side = Side {
        cursor: end.cursor.clone().unwrap_or_default(),
        ..Side::default()
    };
    for o in &observed.log {
        match o {
            Observation::SecondaryList { source: s } if *s == source => {
                answer = lists.get(n_list).copied().unwrap_or(0);
                n_list += 1;
                if answer != 0 {
                    side.requests.push("LIST".into());
                }
            }
            Observation::SecondaryWatch {
                source: s,
                resource_version,
                send_initial_events,
            } if *s == source => {
                answer = watches.get(n_watch).copied().unwrap_or(0);
                n_watch += 1;
                if answer != 0 {
                    side.requests.push(if *send_initial_events {
                        "WATCH initial-events".to_owned()
                    } else {
                        format!("WATCH rv={resource_version}")
                    });
                }
            }
            Observation::SecondaryWoke {
                source: s,
                objects,
                parents,
            } if *s == source => {
                side.objects
                    .entry(answer)
                    .or_default()
                    .extend(objects.iter().cloned());
                if !parents.is_empty() {
                    side.parents
                        .entry(answer)
                        .or_default()
                        .extend(parents.iter().cloned());
                }
            }
            _ => {}
        }
    }
    for (key, (rv, parents)) in &end.held {
        side.store
            .insert(key.clone(), rv.clone().unwrap_or_default());
        side.keys.insert(key.clone(), parents.join(","));
    }
    side
}

fn core_side(trace: &Trace, observed: &Observed) -> Side {
    let (lists, watches) = answer_lines(trace, 0);
    let (mut n_list, mut n_watch) = (0, 0);
    let mut answer = 0;
    let mut side = Side {
        cursor: observed.report.cursor.clone().unwrap_or_default(),
        ..Side::default()
    };
    for o in &observed.log {
        match o {
            Observation::List => {
                answer = lists.get(n_list).copied().unwrap_or(0);
                n_list += 1;
                if answer != 0 {
                    side.requests.push("LIST".into());
                }
            }
            Observation::Watch {
                resource_version,
                send_initial_events,
            } => {
                answer = watches.get(n_watch).copied().unwrap_or(0);
                n_watch += 1;
                if answer != 0 {
                    // row::STREAMING: as Go's side.
                    side.requests.push(if *send_initial_events {
                        "WATCH initial-events".to_owned()
                    } else {
                        format!("WATCH rv={resource_version}")
                    });
                }
            }
            Observation::Woke { objects, parents } => {
                side.objects
                    .entry(answer)
                    .or_default()
                    .extend(objects.iter().cloned());
                if !parents.is_empty() {
                    side.parents
                        .entry(answer)
                        .or_default()
                        .extend(parents.iter().cloned());
                }
            }
            _ => {}
        }
    }
    for (k, rv) in &observed.store {
        side.store.insert(k.clone(), rv.clone().unwrap_or_default());
    }
    side
}

fn set(s: Option<&BTreeSet<String>>) -> String {
    let items: Vec<&str> = s.into_iter().flatten().map(String::as_str).collect();
    format!("{{{}}}", items.join(","))
}

/// Every difference between the two sides, one line each, each starting with `source`
/// (empty for the primary, `S1 ` for the first secondary).
fn differences(source: &str, go: &Side, core: &Side) -> Vec<String> {
    let mut diffs = Vec::new();
    if go.requests != core.requests {
        diffs.push(format!(
            "{source}requests: client-go [{}], core [{}]",
            go.requests.join(", "),
            core.requests.join(", ")
        ));
    }
    // row::RELIST_CURSOR: while a relist is under way (a 410 condemned the cursor, and the
    // trace ends before the next listing is applied) the core reports no cursor, where Go
    // reports the version it last synced at; both relist from "" alike.
    if go.cursor != core.cursor && !core.cursor.is_empty() {
        diffs.push(format!(
            "{source}cursor: client-go {}, core {}",
            go.cursor, core.cursor
        ));
    }
    let keys: BTreeSet<&String> = go.store.keys().chain(core.store.keys()).collect();
    for k in keys {
        let (g, c) = (go.store.get(k), core.store.get(k));
        if g != c {
            diffs.push(format!(
                "{source}store {k}: client-go {}, core {}",
                g.map_or("absent", String::as_str),
                c.map_or("absent", String::as_str)
            ));
        }
    }
    // The key map: the parents each object held maps to (a secondary's; the primary's
    // objects are compared by the parents they wake).
    for (k, g) in &go.keys {
        if let Some(c) = core.keys.get(k)
            && g != c
        {
            diffs.push(format!(
                "{source}parents of {k}: client-go [{g}], core [{c}]"
            ));
        }
    }
    // Per answer both sides were given.
    let answered: BTreeSet<usize> = go
        .objects
        .keys()
        .chain(core.objects.keys())
        .copied()
        .collect();
    for a in answered {
        if go.objects.get(&a) != core.objects.get(&a) {
            diffs.push(format!(
                "{source}objects woken by line {a}: client-go {}, core {}",
                set(go.objects.get(&a)),
                set(core.objects.get(&a))
            ));
        }
        if go.parents.get(&a) != core.parents.get(&a) {
            diffs.push(format!(
                "{source}parents woken by line {a}: client-go {}, core {}",
                set(go.parents.get(&a)),
                set(core.parents.get(&a))
            ));
        }
    }
    diffs
}

/// One input: a name and the trace.
struct Input {
    name: String,
    trace: Trace,
    file: PathBuf,
}

fn inputs() -> Vec<Input> {
    let mut inputs = Vec::new();
    let dir = repo().join("sim/traces");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    files.sort();
    let tmp = scratch();
    for file in files {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let trace = Trace::parse(&name, &std::fs::read_to_string(&file).unwrap()).unwrap();
        if trace
            .entries
            .iter()
            .any(|e| matches!(e.record, Record::Fault(_)))
        {
            // World mode: the conversation is made by the simulated apiserver during the
            // run; recorded, it is a trace like the others.
            let file = tmp.join(format!("{name}.recorded.jsonl"));
            inputs.push(written(&name, &recorded(&trace), file));
            continue;
        }
        inputs.push(Input { name, trace, file });
    }
    // The real captures, imported as traces and written where the harness can read them.
    let real = repo().join("testdata/real");
    let mut dirs = vec![real.clone()];
    let mut captures = Vec::new();
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|e| e == "json" || e == "ndjson")
                && !p.to_string_lossy().ends_with(".body.json")
                && !p.to_string_lossy().ends_with(".body.ndjson")
            {
                captures.push(p);
            }
        }
    }
    captures.sort();
    for p in captures {
        let rel = p.strip_prefix(&real).unwrap().display().to_string();
        let text = std::fs::read_to_string(&p).unwrap();
        let Ok(trace) = import::import(&rel, &text, None) else {
            continue; // not a conversation (a create's recording, say)
        };
        let file = tmp.join(format!("{}.jsonl", rel.replace(['/', '.'], "_")));
        inputs.push(written(&format!("real/{rel}"), &trace, file));
    }
    inputs.extend(apiserver_protobuf_inputs(&tmp));
    // The real conversations once more, keyed by the pods' controller owner (their
    // ReplicaSets, DaemonSets, Nodes), with a kind and without: the key maps the traces
    // above do not use.
    let by_owner: Vec<Input> = inputs
        .iter()
        .filter(|i| i.name.starts_with("real/") || i.name.starts_with("apiserver-protobuf"))
        .flat_map(|i| {
            [KeyBy::Owner(None), KeyBy::Owner(Some("ReplicaSet".into()))].map(|by| {
                let mut trace = i.trace.clone();
                trace.header.parent = by.clone();
                let name = format!("{} (by {by})", i.name);
                let file = tmp.join(format!(
                    "{}.jsonl",
                    name.replace(['/', '.', ' ', '(', ')', ':'], "_")
                ));
                written(&name, &trace, file)
            })
        })
        .collect();
    inputs.extend(by_owner);
    inputs
}

/// The real kube-apiserver's pod LIST and WATCH in protobuf (`testdata/apiserver-protobuf`),
/// as one conversation: the LIST at its captured version, then a WATCH from that version
/// carrying the captured events past it, ended cleanly. And the same conversation from the
/// JSON twins of the captures, which must end alike.
fn apiserver_protobuf_inputs(tmp: &Path) -> Vec<Input> {
    use reconcile_core::Instant;
    use reconcile_sim::trace::{Entry, Header, Payload, RecordedEnd};
    let dir = repo().join("testdata/apiserver-protobuf");
    let read = |name: &str| std::fs::read(dir.join(name)).unwrap();
    let rv: u64 = String::from_utf8(read("list-rv"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let json_frames: Vec<Vec<u8>> = read("watch.jsonl")
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(<[u8]>::to_vec)
        .collect();
    // Length-prefixed `WatchEvent`s: 4 bytes of big-endian length, then the frame.
    let (pb, mut pb_frames, mut at) = (read("watch.pb"), Vec::new(), 0);
    while at + 4 <= pb.len() {
        let len = u32::from_be_bytes(pb[at..at + 4].try_into().unwrap()) as usize;
        pb_frames.push(pb[at + 4..at + 4 + len].to_vec());
        at += 4 + len;
    }
    assert_eq!(
        pb_frames.len(),
        json_frames.len(),
        "the two WATCHes carry the same events"
    );
    let version = |frame: &[u8]| {
        let v: serde_json::Value = serde_json::from_slice(frame).unwrap();
        v["object"]["metadata"]["resourceVersion"]
            .as_str()
            .and_then(|r| r.parse::<u64>().ok())
    };
    let past: Vec<usize> = (0..json_frames.len())
        .filter(|&i| version(&json_frames[i]).is_some_and(|v| v > rv))
        .collect();
    assert!(!past.is_empty(), "the WATCH carries events past the LIST");
    let list: serde_json::Value = serde_json::from_slice(&read("pod-list.json")).unwrap();
    let namespace = list["items"][0]["metadata"]["namespace"]
        .as_str()
        .map(str::to_owned);
    let at = |s: u64| Some(Instant::from_duration(std::time::Duration::from_secs(s)));
    let mut inputs = Vec::new();
    for (name, wire_format, list, frames) in [
        (
            "protobuf",
            WireFormat::Protobuf,
            read("pod-list.pb"),
            &pb_frames,
        ),
        (
            "json",
            WireFormat::Json,
            read("pod-list.json"),
            &json_frames,
        ),
    ] {
        let mut entries = vec![
            Entry::new(
                at(0),
                Record::List {
                    status: 200,
                    body: Payload::from_bytes(list),
                    transport_error: None,
                },
            ),
            Entry::new(
                at(1),
                Record::Watch {
                    status: 200,
                    body: Payload::default(),
                    resource_version: Some(rv.to_string()),
                },
            ),
        ];
        for (n, &i) in past.iter().enumerate() {
            entries.push(Entry::new(
                at(2 + n as u64),
                Record::Frame {
                    line: Payload::from_bytes(frames[i].clone()),
                },
            ));
        }
        entries.push(Entry::new(
            at(2 + past.len() as u64),
            Record::WatchEnd(RecordedEnd::Clean),
        ));
        let trace = Trace {
            name: format!("apiserver-protobuf ({name})"),
            header: Header {
                namespace: namespace.clone(),
                wire_format,
                ..Header::default()
            },
            entries,
        };
        let file = tmp.join(format!("apiserver-protobuf-{name}.jsonl"));
        inputs.push(written(&trace.name.clone(), &trace, file));
    }
    inputs
}

/// Runs the Go harness on `file`: its output, or why it cannot play the trace.
fn run_go(bin: &Path, file: &Path) -> Result<GoOutput, String> {
    let out = Command::new(bin)
        .arg(file)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
    let stderr = String::from_utf8_lossy(&out.stderr);
    match out.status.code() {
        Some(0) => Ok(serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{}: harness output: {e}", file.display()))),
        Some(3) => Err(stderr.lines().last().unwrap_or("").to_owned()),
        _ => panic!("{}: the harness failed:\n{stderr}", file.display()),
    }
}

/// What the comparison found: per input, its differences or why it was skipped.
struct Found {
    compared: Vec<(String, Vec<String>)>,
    skipped: Vec<(String, String)>,
}

/// Plays every input named by `only` (all when `None`) on both sides, `alter` changing the
/// trace the core is fed (client-go is always fed the file as it is).
fn compare_all(bin: &Path, only: Option<&str>, alter: impl Fn(&str, &mut Trace)) -> Found {
    let inputs: Vec<Input> = inputs()
        .into_iter()
        .filter(|i| only.is_none_or(|o| i.name == o))
        .collect();
    compare(bin, &inputs, alter)
}

/// How many harness processes run at once.
const GO_JOBS: usize = 4;

/// Plays `inputs` on both sides, `alter` changing the trace the core is fed.
fn compare(bin: &Path, inputs: &[Input], alter: impl Fn(&str, &mut Trace)) -> Found {
    compare_corrupted(bin, inputs, alter, |_| {})
}

/// [`compare`], `corrupt` changing what the core is found to have done before it is
/// compared (a check of the check).
fn compare_corrupted(
    bin: &Path,
    inputs: &[Input],
    alter: impl Fn(&str, &mut Trace),
    corrupt: impl Fn(&mut Observed),
) -> Found {
    let mut results: Vec<(usize, Result<GoOutput, String>)> = Vec::new();
    for (c, chunk) in inputs.chunks(GO_JOBS).enumerate() {
        results.extend(std::thread::scope(|s| {
            let handles: Vec<_> = chunk
                .iter()
                .enumerate()
                .map(|(i, input)| s.spawn(move || (c * GO_JOBS + i, run_go(bin, &input.file))))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap())
                .collect::<Vec<_>>()
        }));
    }
    let mut found = Found {
        compared: Vec::new(),
        skipped: Vec::new(),
    };
    for (i, go) in results {
        let input = &inputs[i];
        let go = match go {
            Ok(go) => go,
            Err(why) => {
                found.skipped.push((input.name.clone(), why));
                continue;
            }
        };
        let mut trace = input.trace.clone();
        alter(&input.name, &mut trace);
        let mut observed = replay_observed(&trace, &ReplayOptions::default()).unwrap();
        corrupt(&mut observed);
        let by = &input.trace.header.parent;
        let core = core_side(&input.trace, &observed);
        let mut diffs = differences("", &go_side(&go.primary, by), &core);
        // Each secondary source: its own informer on Go's side, its own reflector and store
        // on ours.
        assert_eq!(
            go.secondaries.len(),
            input.trace.header.secondaries.len(),
            "{}: the harness played every source",
            input.name
        );
        for (n, go) in go.secondaries.iter().enumerate() {
            let source = n as u64 + 1;
            diffs.extend(differences(
                &format!("S{source} "),
                &go_secondary_side(go),
                &core_secondary_side(&input.trace, &observed, source),
            ));
        }
        // A core that leaves its own trace (asks for what the trace does not answer next) is
        // a difference too, not a crash of the check.
        for v in &observed.report.violations {
            diffs.push(format!("the replay broke {}: {}", v.invariant, v.detail));
        }
        found.compared.push((input.name.clone(), diffs));
    }
    found
}

fn report(found: &Found) -> String {
    let mut text = String::new();
    for (name, diffs) in &found.compared {
        for d in diffs {
            let _ = writeln!(
                text,
                "    (\"{name}\", \"{}\", row::?),",
                d.replace('"', "\\\"")
            );
        }
    }
    text
}

#[test]
fn client_go_and_the_core_agree_on_every_trace_or_the_difference_is_recorded() {
    let Some(bin) = harness() else { return };
    let alignment = std::fs::read_to_string(repo().join("docs/alignment.md")).unwrap();
    for r in NORMALIZED.iter().chain(KNOWN.iter().map(|(_, _, r)| r)) {
        assert!(alignment.contains(r), "docs/alignment.md has no row {r:?}");
    }
    let found = compare_all(&bin, None, |_, _| {});
    assert_eq!(
        found.skipped.len(),
        SKIPPED.len(),
        "skipped: {:?}",
        found.skipped
    );
    for ((name, why), (want, reason)) in found.skipped.iter().zip(SKIPPED) {
        assert!(
            name == want && why.contains(reason),
            "skipped {name}: {why}"
        );
    }
    let mut unexplained = Vec::new();
    let mut seen = BTreeSet::new();
    for (name, diffs) in &found.compared {
        for d in diffs {
            match KNOWN.iter().find(|(n, k, _)| n == name && k == d) {
                Some(known) => {
                    seen.insert((known.0, known.1));
                }
                None => unexplained.push(format!("{name}: {d}")),
            }
        }
    }
    let gone: Vec<_> = KNOWN
        .iter()
        .filter(|(n, k, _)| !seen.contains(&(*n, *k)))
        .collect();
    eprintln!(
        "client_go_diff: {} inputs compared, {} differences ({} known), {} skipped: {:?}",
        found.compared.len(),
        found.compared.iter().map(|(_, d)| d.len()).sum::<usize>(),
        seen.len(),
        found.skipped.len(),
        found.skipped
    );
    assert!(
        unexplained.is_empty() && gone.is_empty(),
        "differences not in KNOWN:\n{}\nKNOWN entries no longer found: {gone:#?}\nall found:\n{}",
        unexplained.join("\n"),
        report(&found)
    );
}

#[test]
fn the_comparison_fires_when_the_core_misses_a_deleted() {
    let Some(bin) = harness() else { return };
    // The core is fed unmapped-and-reparent without its DELETED frame (a lost event);
    // client-go gets the trace as recorded. The check must see the object the core still
    // holds, and the parent it never woke.
    let found = compare_all(&bin, Some("unmapped-and-reparent.jsonl"), |_, trace| {
        let before = trace.entries.len();
        trace.entries.retain(|e| match &e.record {
            Record::Frame { line } => !line.contains("\"DELETED\""),
            _ => true,
        });
        assert_eq!(
            trace.entries.len(),
            before - 1,
            "the trace has one DELETED frame"
        );
    });
    let [(_, diffs)] = found.compared.as_slice() else {
        panic!("unmapped-and-reparent is compared: {:?}", found.skipped)
    };
    eprintln!("client_go_diff, a DELETED dropped: {diffs:#?}");
    assert!(
        diffs.contains(&"store default/a-1: client-go absent, core 12".to_owned()),
        "the missed delete is in the store: {diffs:#?}"
    );
}

#[test]
fn the_comparison_fires_when_a_410_does_not_relist() {
    let Some(bin) = harness() else { return };
    // The core is fed relist-410-missed-delete with its ERROR 410 frame turned into an
    // ERROR that does not condemn the cursor (a broken 410 rule: the core re-watches instead
    // of relisting); client-go gets the trace as recorded and relists.
    let found = compare_all(&bin, Some("relist-410-missed-delete.jsonl"), |_, trace| {
        for e in &mut trace.entries {
            if let Record::Frame { line } = &mut e.record
                && line.contains("\"code\":410")
            {
                let text = line
                    .to_str_lossy()
                    .replace("\"code\":410", "\"code\":500")
                    .replace("Expired", "InternalError");
                *line = reconcile_sim::trace::Payload::from_bytes(text.into_bytes());
            }
        }
    });
    let [(_, diffs)] = found.compared.as_slice() else {
        panic!("relist-410-missed-delete is compared: {:?}", found.skipped)
    };
    eprintln!("client_go_diff, a 410 that does not relist: {diffs:#?}");
    assert!(
        diffs.iter().any(|d| d.starts_with("requests:")),
        "the missing relist shows in the requests: {diffs:#?}"
    );
}

/// How the core reads a frame of source `source` (0 the primary): a pod, or a secondary's
/// metadata, in that source's wire format. `Ok(Some(initial_events_end))` for a bookmark,
/// `Ok(None)` for another event; `Err(names_a_version)` for a frame that does not decode.
fn read_frame(trace: &Trace, source: u64, line: &[u8]) -> Result<Option<bool>, bool> {
    use reconcile_core::frame::{WatchEvent, parse_frame_as};
    match source.checked_sub(1) {
        None => {
            match parse_frame_as::<reconcile_core::pod::PodView>(line, trace.header.wire_format) {
                Ok(WatchEvent::Bookmark {
                    initial_events_end, ..
                }) => Ok(Some(initial_events_end)),
                Ok(_) => Ok(None),
                Err(e) => Err(e.resource_version.is_some()),
            }
        }
        Some(n) => {
            let format = trace.header.secondaries[usize::try_from(n).unwrap()]
                .params
                .wire_format;
            match parse_frame_as::<reconcile_sim::meta_view::MetaView>(line, format) {
                Ok(WatchEvent::Bookmark {
                    initial_events_end, ..
                }) => Ok(Some(initial_events_end)),
                Ok(_) => Ok(None),
                Err(e) => Err(e.resource_version.is_some()),
            }
        }
    }
}

/// The line of the WATCH answer of source `source` whose stream first carries a frame
/// client-go's typed decoder (for a secondary, the metadata client's) refuses and the core
/// skips (the world's malformed frame with a cursor, in JSON or protobuf), if any.
fn first_undecodable(trace: &Trace, source: u64) -> Option<usize> {
    let mut watch = 0;
    for e in trace.entries.iter().filter(|e| e.source_index() == source) {
        match &e.record {
            Record::Watch { .. } => watch = e.line,
            // What the core skips, keeping its cursor: an object that does not decode (in
            // JSON, `labels` that is not a map; in protobuf, a pod whose spec is a varint, or
            // metadata cut short) but names its version. The typed client cannot decode
            // either.
            Record::Frame { line } if read_frame(trace, source, line.as_bytes()) == Err(true) => {
                return Some(watch);
            }
            _ => {}
        }
    }
    None
}

/// Whether source `source`'s listings are streaming lists.
fn streams(trace: &Trace, source: u64) -> bool {
    match source.checked_sub(1) {
        None => trace.header.streaming_lists,
        Some(n) => {
            trace.header.secondaries[usize::try_from(n).unwrap()]
                .params
                .initial_list
                == reconcile_core::InitialListStrategy::StreamingList
        }
    }
}

/// The line of the first WATCH answer of source `source` after which client-go lists where
/// we stream again, if any: one that refuses a streaming list (400 or 422: we LIST for good,
/// client-go streams again on its next relist), or a streaming list whose initial events
/// carry a frame that does not decode at all (we stream again; client-go falls back to a
/// LIST).
fn first_streaming_fallback(trace: &Trace, source: u64) -> Option<usize> {
    if !streams(trace, source) {
        return None;
    }
    let (mut watch, mut initial) = (0, false);
    for e in trace.entries.iter().filter(|e| e.source_index() == source) {
        match &e.record {
            Record::Watch {
                status: 400 | 422, ..
            } => return Some(e.line),
            Record::Watch {
                resource_version, ..
            } => {
                watch = e.line;
                initial = resource_version.as_deref() == Some("");
            }
            Record::Frame { line } if initial => match read_frame(trace, source, line.as_bytes()) {
                Err(false) => return Some(watch),
                Ok(Some(true)) => initial = false,
                _ => {}
            },
            _ => {}
        }
    }
    None
}

/// The source a difference is of (0 the primary, n for its `Sn ` prefix), and the
/// difference without the prefix.
fn source_of(diff: &str) -> (u64, &str) {
    diff.strip_prefix('S')
        .and_then(|rest| rest.split_once(' '))
        .and_then(|(n, rest)| Some((n.parse().ok()?, rest)))
        .unwrap_or((0, diff))
}

/// Why a difference an explore seed shows is known, or `None`. Two classes are found, each
/// a point where the two conversations of one source part, so that every later request,
/// wake, cursor and store entry of that source may differ; a difference is put down to the
/// earlier of its source's points provided it is not at an answer before it:
/// - [`row::TYPED_DECODE`]: from the stream carrying a frame the typed client cannot decode,
///   client-go relists where we skip the frame;
/// - [`row::STREAMING`]: from a refused streaming list, client-go tries a streaming list
///   again on its next relist where we LIST for good; from a streaming list broken by a
///   frame that does not decode, client-go LISTs where we stream again.
///
/// Sources share nothing on either side (an informer each in Go, a reflector and store each
/// here), so a point of one source explains no difference of another.
fn explore_known(input: &Input, diff: &str) -> Option<&'static str> {
    if diff.starts_with("the replay broke") {
        return None;
    }
    let (source, diff) = source_of(diff);
    let (from, why) = [
        (first_undecodable(&input.trace, source), row::TYPED_DECODE),
        (
            first_streaming_fallback(&input.trace, source),
            row::STREAMING,
        ),
    ]
    .into_iter()
    .filter_map(|(from, why)| Some((from?, why)))
    .min_by_key(|(from, _)| *from)?;
    let at = diff
        .strip_prefix("objects woken by line ")
        .or_else(|| diff.strip_prefix("parents woken by line "))
        .and_then(|rest| rest.split(':').next())
        .map(|n| n.parse::<usize>().unwrap());
    match at {
        Some(line) if line < from => None,
        _ => Some(why),
    }
}

/// Compares the first `one` one-source and the first `many` many-source stream-fault
/// explore seeds; fails on a difference of a class not known ([`explore_known`]) and on a
/// seed the harness cannot play.
fn explore_check(one: usize, many: usize) {
    let Some(bin) = harness() else { return };
    let started = std::time::Instant::now();
    let mut inputs = explore_inputs(one);
    inputs.extend(many_source_inputs(many));
    let recorded_in = started.elapsed();
    let found = compare(&bin, &inputs, |_, _| {});
    assert!(found.skipped.is_empty(), "skipped: {:?}", found.skipped);
    let mut unexplained = Vec::new();
    let (mut differing, mut diffs, mut with_malformed) = (0, 0, 0);
    let protobuf = |input: &Input| input.trace.header.wire_format == WireFormat::Protobuf;
    let (mut on_protobuf, mut differing_on_protobuf) = (0, 0);
    let (mut streaming, mut paged, mut by_class) = (0, 0, BTreeMap::<&str, usize>::new());
    // Many-source seeds: how many, with a second (any-owner) secondary, differing; and
    // the differences per source (primary, S1, S2) and per class and source.
    let (mut many_seeds, mut with_s2, mut many_differing) = (0, 0, 0);
    let mut per_source = BTreeMap::<u64, usize>::new();
    let mut many_by_class = BTreeMap::<(u64, &str), usize>::new();
    // Differences of a secondary's key map (the parents an object held maps to).
    let mut key_map_diffs = 0;
    for (input, (name, found)) in inputs.iter().zip(&found.compared) {
        assert_eq!(&input.name, name);
        let sources = input.trace.header.secondaries.len() as u64 + 1;
        let is_many = sources > 1;
        many_seeds += usize::from(is_many);
        with_s2 += usize::from(sources > 2);
        many_differing += usize::from(is_many && !found.is_empty());
        on_protobuf += usize::from(protobuf(input));
        differing_on_protobuf += usize::from(protobuf(input) && !found.is_empty());
        streaming += usize::from(input.trace.header.streaming_lists);
        paged += usize::from(input.trace.header.list_page_size.is_some());
        with_malformed +=
            usize::from((0..sources).any(|s| first_undecodable(&input.trace, s).is_some()));
        differing += usize::from(!found.is_empty());
        diffs += found.len();
        let mut classes = BTreeSet::new();
        for d in found {
            let source = source_of(d).0;
            key_map_diffs += usize::from(source_of(d).1.starts_with("parents of "));
            if is_many {
                *per_source.entry(source).or_default() += 1;
            }
            match explore_known(input, d) {
                Some(why) => {
                    classes.insert((source, why));
                }
                None => unexplained.push(format!("{name}: {d}")),
            }
        }
        for why in classes.iter().map(|(_, why)| *why).collect::<BTreeSet<_>>() {
            *by_class.entry(why).or_default() += 1;
        }
        if is_many {
            for c in classes {
                *many_by_class.entry(c).or_default() += 1;
            }
        }
    }
    eprintln!(
        "client_go_diff explore: {} seeds ({many_seeds} many-source, {with_s2} of them with an \
         any-owner source; {on_protobuf} on protobuf, {streaming} with streaming lists, \
         {paged} paged; {} with a frame the typed client cannot decode), recorded in \
         {recorded_in:.1?}, compared in {:.1?} in all; {differing} differ \
         ({differing_on_protobuf} on protobuf, {many_differing} many-source), {diffs} \
         differences, {} unexplained; seeds by class: {by_class:?}; many-source differences \
         by source: {per_source:?} ({key_map_diffs} of a key map); many-source seeds by \
         (source, class): {many_by_class:?}",
        inputs.len(),
        with_malformed,
        started.elapsed(),
        unexplained.len()
    );
    // The seeds' protobuf draw is applied: client-go decodes what the world served in
    // protobuf, as the core does.
    assert!(on_protobuf > 0, "no seed ran on protobuf");
    // Many-source seeds are compared source by source, an any-owner source among them.
    assert!(
        many == 0 || (many_seeds == many && with_s2 > 0),
        "{many_seeds} many-source seeds, {with_s2} with an any-owner source"
    );
    // And their page-size draw: client-go's pager followed the recorded continue tokens.
    let paged_input = inputs
        .iter()
        .find(|i| i.trace.header.list_page_size.is_some())
        .expect("a paged seed");
    let go = run_go(&bin, &paged_input.file).unwrap();
    assert!(
        go.primary
            .requests
            .iter()
            .any(|r| r.verb == "LIST" && !r.continue_token.is_empty() && r.answer != 0),
        "{}: client-go asked for no page after the first: {:?}",
        paged_input.name,
        go.primary.requests
    );
    assert!(
        unexplained.is_empty(),
        "differences of no known class:\n{}",
        unexplained.join("\n")
    );
}

#[test]
fn client_go_and_the_core_agree_on_100_explore_seeds_and_100_many_source_seeds_or_the_difference_is_recorded()
 {
    explore_check(100, 100);
}

#[test]
#[ignore = "500 + 500 seeds: cargo test -p reconcile-sim --test client_go_diff -- --ignored"]
fn client_go_and_the_core_agree_on_500_explore_seeds_and_500_many_source_seeds_or_the_difference_is_recorded()
 {
    explore_check(500, 500);
}

#[test]
fn the_explore_check_fires_on_a_difference_of_no_known_class() {
    let Some(bin) = harness() else { return };
    // A seed with no frame the typed client cannot decode, its core fed the recording
    // without its first DELETED frame: the differences that makes are of no known class.
    // A frame is read as the core reads it, in JSON or protobuf.
    let deleted = |format: WireFormat, e: &reconcile_sim::trace::Entry| {
        matches!(&e.record, Record::Frame { line } if matches!(
            reconcile_core::frame::parse_frame_as::<reconcile_core::pod::PodView>(line.as_bytes(), format),
            Ok(reconcile_core::frame::WatchEvent::Deleted(_))
        ))
    };
    let input = explore_inputs(40)
        .into_iter()
        .find(|i| {
            first_undecodable(&i.trace, 0).is_none()
                && i.trace
                    .entries
                    .iter()
                    .any(|e| deleted(i.trace.header.wire_format, e))
        })
        .expect("a seed with a DELETED frame and no malformed one");
    let found = compare(&bin, std::slice::from_ref(&input), |_, trace| {
        let format = trace.header.wire_format;
        let at = trace
            .entries
            .iter()
            .position(|e| deleted(format, e))
            .unwrap();
        trace.entries.remove(at);
    });
    let [(_, diffs)] = found.compared.as_slice() else {
        panic!("{} is compared: {:?}", input.name, found.skipped)
    };
    eprintln!(
        "client_go_diff, {} without a DELETED: {diffs:#?}",
        input.name
    );
    assert!(!diffs.is_empty(), "the lost DELETED shows");
    assert!(
        diffs.iter().all(|d| explore_known(&input, d).is_none()),
        "no difference of a seed without a malformed frame is put down to it: {diffs:#?}"
    );
}

#[test]
fn the_many_source_comparison_fires_on_a_corrupted_secondary() {
    let Some(bin) = harness() else { return };
    // A many-source seed whose S1 has no point where the two sides part (no frame the
    // metadata client cannot decode, no streaming-list fallback) and holds two objects or
    // more at the end; its core's S1 is corrupted after the replay: the first object it
    // holds is dropped, and the second is put under a parent it does not map to.
    let input = many_source_inputs(30)
        .into_iter()
        .find(|i| {
            first_undecodable(&i.trace, 1).is_none()
                && first_streaming_fallback(&i.trace, 1).is_none()
                && replay_observed(&i.trace, &ReplayOptions::default())
                    .unwrap()
                    .secondaries[0]
                    .held
                    .len()
                    >= 2
        })
        .expect("a many-source seed whose S1 holds two objects");
    let found = compare_corrupted(
        &bin,
        std::slice::from_ref(&input),
        |_, _| {},
        |observed| {
            let held = &mut observed.secondaries[0].held;
            let first = held.keys().next().unwrap().clone();
            held.remove(&first);
            let (_, parents) = held.values_mut().next().unwrap();
            *parents = vec!["default/no-such-cell".into()];
        },
    );
    let [(_, diffs)] = found.compared.as_slice() else {
        panic!("{} is compared: {:?}", input.name, found.skipped)
    };
    eprintln!(
        "client_go_diff, {} with S1 corrupted: {diffs:#?}",
        input.name
    );
    assert!(
        diffs
            .iter()
            .any(|d| d.starts_with("S1 store ") && d.ends_with(", core absent")),
        "the dropped object shows in S1's store: {diffs:#?}"
    );
    assert!(
        diffs
            .iter()
            .any(|d| d.starts_with("S1 parents of ") && d.ends_with("core [default/no-such-cell]")),
        "the wrong parent shows in S1's key map: {diffs:#?}"
    );
    assert!(
        diffs.iter().all(|d| explore_known(&input, d).is_none()),
        "no difference of a source without a point where the sides part is put down to one: \
         {diffs:#?}"
    );
}
