//! # reconcile-trace
//!
//! The trace format of reconcile-loop: JSON Lines, a versioned header line, then one timestamped record per
//! line (see `docs/trace-format.md`).
//!
//! Add to `Cargo.toml`:
//!
//! ```toml
//! [dependencies]
//! reconcile-trace = "0.1"
//! ```
//!
//! It needs no Kubernetes version: it uses the core without its Kubernetes types.
//!
//! Payloads that came off the wire (LIST bodies, watch frames, objects) are kept as the exact
//! bytes they were recorded with, so a replay feeds the core bit-identical input.

use std::fmt;
use std::time::Duration;

use serde::Deserialize;
use serde_json::value::RawValue;

use reconcile_core::{Instant, KeyBy};

mod private;
pub mod read;
pub mod redact;
mod run;
pub mod selector;

pub use private::{create_private, write_private, write_private_with};
pub use read::{BOM, Limits, MAX_INPUT, MAX_LINE, numbered_lines, read_bounded, strip_bom};
pub use run::{Recorded, TraceBuilder, header_for, to_trace};

/// The header key that marks a trace, with its version.
pub const FORMAT_KEY: &str = "reconcile_sim_trace";
/// The newest trace format version: 2 names the source of every LIST, WATCH, frame and
/// stream end. A trace with no secondary source is written as version 1, which every
/// version reads.
pub const FORMAT_VERSION: u64 = 2;

/// Upper bound on records in one trace: far above any capture, low enough to refuse a runaway
/// file before it exhausts memory.
pub const MAX_RECORDS: usize = 10_000_000;

/// A bad trace line: which file, which line, what is wrong.
///
/// Shown as `file:line: message`, or `file: message` when no line is at fault (line 0):
/// a message never names a line 0, which no file has.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", at(file, *line, message))]
pub struct TraceError {
    /// The file (or `-` / a label when not read from a file).
    pub file: String,
    /// 1-based line number; 0 when the whole file is at fault, or the record was generated
    /// (an importer's synthesized LIST) and has no line.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// `file:line: message`, or `file: message` for line 0 (no line).
#[must_use]
pub fn at(file: &str, line: usize, message: &str) -> String {
    if line == 0 {
        format!("{file}: {message}")
    } else {
        format!("{file}:{line}: {message}")
    }
}

/// A serde_json error as a message, its recursion limit named as such (serde_json refuses
/// JSON nested deeper than 128 levels; the text is not malformed).
#[must_use]
pub fn json_error(e: &serde_json::Error) -> String {
    let text = e.to_string();
    match text.strip_prefix("recursion limit exceeded") {
        Some(rest) => format!(
            "nested deeper than 128 levels, serde_json's recursion limit{rest} (the JSON may be well formed; no format here nests so deep)"
        ),
        None => text,
    }
}

/// Bytes that came off the wire (a LIST or WATCH body, a watch line), kept exactly.
///
/// Nearly always UTF-8 text (JSON), which the trace writes as text; any other bytes are
/// written as base64 in a field of their own (`body_base64`, `raw_base64`), so a replay feeds
/// the core the very bytes that were recorded.
#[derive(Clone, PartialEq, Eq, Default, Hash)]
pub struct Payload(Repr);

/// Text when the bytes are UTF-8, bytes only when they are not: one value, one form, so
/// derived equality is byte equality.
#[derive(Clone, PartialEq, Eq, Hash)]
enum Repr {
    Text(String),
    Bytes(Vec<u8>),
}

impl Default for Repr {
    fn default() -> Self {
        Repr::Text(String::new())
    }
}

impl Payload {
    /// The payload of `bytes`, whatever they hold.
    #[must_use]
    pub fn from_bytes(bytes: Vec<u8>) -> Self {
        match String::from_utf8(bytes) {
            Ok(text) => Payload(Repr::Text(text)),
            Err(e) => Payload(Repr::Bytes(e.into_bytes())),
        }
    }

    /// The exact bytes.
    #[must_use]
    pub fn as_bytes(&self) -> &[u8] {
        match &self.0 {
            Repr::Text(t) => t.as_bytes(),
            Repr::Bytes(b) => b,
        }
    }

    /// The payload as text, or `None` when its bytes are not UTF-8.
    #[must_use]
    pub fn as_str(&self) -> Option<&str> {
        match &self.0 {
            Repr::Text(t) => Some(t),
            Repr::Bytes(_) => None,
        }
    }

    /// The payload as text, invalid UTF-8 replaced by U+FFFD (for messages, never for
    /// feeding the core).
    #[must_use]
    pub fn to_str_lossy(&self) -> std::borrow::Cow<'_, str> {
        String::from_utf8_lossy(self.as_bytes())
    }

    /// The bytes, owned.
    #[must_use]
    pub fn into_bytes(self) -> Vec<u8> {
        match self.0 {
            Repr::Text(t) => t.into_bytes(),
            Repr::Bytes(b) => b,
        }
    }

    /// Whether there are no bytes.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.as_bytes().is_empty()
    }

    /// How many bytes.
    #[must_use]
    pub fn len(&self) -> usize {
        self.as_bytes().len()
    }

    /// Whether the text contains `needle` (never, for bytes that are not UTF-8).
    #[must_use]
    pub fn contains(&self, needle: &str) -> bool {
        self.as_str().is_some_and(|t| t.contains(needle))
    }
}

impl fmt::Debug for Payload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Repr::Text(t) => fmt::Debug::fmt(t, f),
            Repr::Bytes(b) => write!(f, "bytes({})", base64::encode(b)),
        }
    }
}

impl From<String> for Payload {
    fn from(text: String) -> Self {
        Payload(Repr::Text(text))
    }
}

impl From<&str> for Payload {
    fn from(text: &str) -> Self {
        Payload(Repr::Text(text.to_owned()))
    }
}

impl From<Vec<u8>> for Payload {
    fn from(bytes: Vec<u8>) -> Self {
        Payload::from_bytes(bytes)
    }
}

impl From<&[u8]> for Payload {
    fn from(bytes: &[u8]) -> Self {
        Payload::from_bytes(bytes.to_vec())
    }
}

impl PartialEq<str> for Payload {
    fn eq(&self, other: &str) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl PartialEq<&str> for Payload {
    fn eq(&self, other: &&str) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

/// Standard base64 (RFC 4648, with padding), for payloads that are not UTF-8.
pub mod base64 {
    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD;

    /// Standard, padded base64 of `bytes`.
    #[must_use]
    pub fn encode(bytes: &[u8]) -> String {
        STANDARD.encode(bytes)
    }

    /// The bytes of padded standard base64 `text`. Canonical only: the bits a padded quad
    /// leaves over must be zero, so each text decodes from exactly one encoding.
    ///
    /// # Errors
    /// When `text` is not padded standard base64.
    pub fn decode(text: &str) -> Result<Vec<u8>, String> {
        STANDARD.decode(text).map_err(|e| e.to_string())
    }
}

/// How the simulated apiserver reports a compacted cursor on WATCH.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GoneAs {
    /// HTTP 200, then an in-band ERROR frame with code 410 (the watch cache's way).
    Frame,
    /// The WATCH itself answers HTTP 410.
    Status,
}

/// The header: the controller's configuration and the simulated apiserver's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Header {
    /// Free text.
    pub description: Option<String>,
    /// `kubernetes` (LIST / WATCH) or `in_process` (source events).
    pub in_process: bool,
    /// Namespace to watch; all when `None`.
    pub namespace: Option<String>,
    /// Server-side label selector.
    pub label_selector: Option<String>,
    /// What the primary source asked the apiserver to encode LIST and WATCH as
    /// (`wire_format`, written only when not JSON): a replay of a protobuf run reads its
    /// frames as protobuf (and any JSON frame as JSON, as a live run does).
    pub wire_format: reconcile_core::WireFormat,
    /// The `kind` the primary's objects carry (`kind`, written only when set): a watch
    /// frame whose object names another kind is skipped, as the core's
    /// `WatchParams::kind` does, in replay and world mode alike. `import` sets it from what
    /// the capture holds; `None` checks nothing (a hand-written trace's objects often name
    /// no kind).
    pub kind: Option<String>,
    /// Parent key derivation: one of the core's ready-made key maps.
    pub parent: KeyBy,
    /// Parallel reconciles.
    pub concurrency: usize,
    /// `timeoutSeconds` on every WATCH.
    pub timeout_seconds: u32,
    /// The primary's listings are streaming lists (`WatchParams::streaming_lists`): its
    /// first record answers a WATCH with `sendInitialEvents`.
    pub streaming_lists: bool,
    /// The primary LISTs in pages of at most this many objects (`WatchParams::list_page_size`;
    /// `list_page_size`, written only when set), so a replay pages as the recorded run did.
    pub list_page_size: Option<u32>,
    /// Resync period; `None` disables it.
    pub resync: Option<Duration>,
    /// Reflector retry delay.
    pub retry_delay: Duration,
    /// Backoff base and cap.
    pub backoff: (Duration, Duration),
    /// World: how long history is kept before compaction.
    pub compaction_window: Duration,
    /// World: interval between bookmarks on an open watch; `None` sends none.
    pub bookmark_interval: Option<Duration>,
    /// World: how a compacted cursor is reported.
    pub gone_as: GoneAs,
    /// The secondary sources (version 2): `S1` first. Their objects are decoded as the
    /// primary's type in a replay, which keeps names, versions and owners.
    pub secondaries: Vec<reconcile_core::SecondaryConfig>,
    /// How long a key waits at most for its own writes (`Config::read_own_writes`;
    /// `read_own_writes_s`, written only when not the core's default of 5 s; `null` turns
    /// the wait off), so a replay holds as the recorded run did.
    pub read_own_writes: Option<Duration>,
    /// The controller's debounce (`Config::debounce`; `debounce_s`, written only when set),
    /// so a replay holds its wakes as the recorded run did.
    pub debounce: Option<Duration>,
}

impl Default for Header {
    fn default() -> Self {
        Header {
            description: None,
            in_process: false,
            namespace: None,
            label_selector: None,
            wire_format: reconcile_core::WireFormat::Json,
            kind: None,
            parent: KeyBy::Name,
            concurrency: 1,
            timeout_seconds: 300,
            streaming_lists: false,
            list_page_size: None,
            resync: Some(Duration::from_secs(36_000)),
            retry_delay: Duration::from_secs(1),
            backoff: (Duration::from_secs(1), Duration::from_secs(60)),
            compaction_window: Duration::from_secs(300),
            bookmark_interval: Some(Duration::from_secs(60)),
            gone_as: GoneAs::Frame,
            secondaries: Vec::new(),
            read_own_writes: Some(reconcile_core::DEFAULT_OWN_WRITES_WAIT),
            debounce: None,
        }
    }
}

/// How a scripted reconcile ends.
#[derive(Debug, Clone, PartialEq)]
pub enum ScriptedOutcome {
    /// Success.
    Ok,
    /// Failure with this message.
    Error(String),
    /// Success, run again after this long.
    RequeueAfter(Duration),
    /// Failure the error policy handled: run again after this long, or on a change.
    ErrorHandled {
        /// The failure.
        error: String,
        /// Until the rerun; `None` waits for a change.
        requeue_after: Option<Duration>,
    },
}

/// How a recorded WATCH ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordedEnd {
    /// The server closed it cleanly.
    Clean,
    /// The connection failed.
    Transport(String),
    /// A non-200 answer to the WATCH request, with its body.
    Status(u16, Payload),
}

/// One fault to inject.
#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    /// Every open WATCH fails with a transport error.
    WatchDrop,
    /// History is compacted to now and the next `count` WATCHes answer 410.
    GoneStorm {
        /// How many WATCHes are refused.
        count: u32,
    },
    /// The next `count` WATCHes answer 504 (a cursor from the future).
    TooLarge {
        /// How many WATCHes are refused.
        count: u32,
    },
    /// A frame that does not decode is sent on every open WATCH; `cursor` says whether it
    /// still names a resourceVersion (skip and advance) or not (relist).
    MalformedFrame {
        /// Whether the frame carries a readable resourceVersion.
        cursor: bool,
    },
    /// The apiserver restarts: streams drop, the watch cache is lost (history compacted),
    /// and requests fail with a transport error for `down`.
    Restart {
        /// How long it is unreachable.
        down: Duration,
    },
    /// History is compacted up to the current version.
    Compact,
    /// The next `count` LISTs fail, with this status (0 for a transport error).
    ListFail {
        /// How many LISTs fail.
        count: u32,
        /// HTTP status, or 0 for a transport error.
        status: u16,
    },
    /// The next `count` reconciles take `duration`.
    SlowReconcile {
        /// How many.
        count: u32,
        /// How long each takes.
        duration: Duration,
    },
    /// The next `count` reconciles fail.
    FailReconcile {
        /// How many.
        count: u32,
    },
    /// An apiserver bug: the next `count` changes never reach open watches (they stay in
    /// history). No client can converge without a relist; this exists to prove the
    /// invariant checks catch a lost event, and is never in an explore profile.
    LoseChange {
        /// How many changes are lost.
        count: u32,
    },
    /// The clock jumps forward by `by` (a suspended VM, an NTP step).
    ClockJump {
        /// How far.
        by: Duration,
    },
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::WatchDrop => f.write_str("watch-drop"),
            Fault::GoneStorm { count } => write!(f, "gone-storm x{count}"),
            Fault::TooLarge { count } => write!(f, "too-large x{count}"),
            Fault::MalformedFrame { cursor: true } => f.write_str("malformed-frame with cursor"),
            Fault::MalformedFrame { cursor: false } => {
                f.write_str("malformed-frame without cursor")
            }
            Fault::Restart { down } => write!(f, "restart down={}s", down.as_secs_f64()),
            Fault::Compact => f.write_str("compact"),
            Fault::ListFail { count, status } => write!(f, "list-fail x{count} status={status}"),
            Fault::SlowReconcile { count, duration } => {
                write!(f, "slow-reconcile x{count} {}s", duration.as_secs_f64())
            }
            Fault::FailReconcile { count } => write!(f, "fail-reconcile x{count}"),
            Fault::LoseChange { count } => write!(f, "lose-change x{count}"),
            Fault::ClockJump { by } => write!(f, "clock-jump {}s", by.as_secs_f64()),
        }
    }
}

/// One record of the trace.
#[derive(Debug, Clone, PartialEq)]
pub enum Record {
    /// The answer to a LIST: a status and a body, or a transport error.
    List {
        /// HTTP status (ignored with a transport error).
        status: u16,
        /// The body, exactly as received.
        body: Payload,
        /// Set when no answer came.
        transport_error: Option<String>,
    },
    /// A WATCH was answered: 200 opens the stream; anything else ends it with that status.
    Watch {
        /// HTTP status.
        status: u16,
        /// The body of a non-200 answer.
        body: Payload,
        /// The cursor the recorded client asked from, when known (checked in replay).
        resource_version: Option<String>,
    },
    /// One raw line of the open WATCH.
    Frame {
        /// The line, exactly as received (without the newline that ended it).
        line: Payload,
    },
    /// The open WATCH ended.
    WatchEnd(RecordedEnd),
    /// The outcome of the next reconcile of `parent` (of any parent when `None`).
    Reconcile {
        /// Which parent it applies to.
        parent: Option<String>,
        /// How it ends.
        outcome: ScriptedOutcome,
        /// How long it runs.
        duration: Duration,
        /// What it wrote (`writes`, left out when empty): each write's source and the
        /// resourceVersion the apiserver answered, fed back with the outcome
        /// ([`Input::ReconciledWrote`](reconcile_core::Input::ReconciledWrote)) so a replay
        /// holds the key for its own writes as the recorded run did.
        writes: Vec<reconcile_core::OwnWrite>,
    },
    /// An in-process source write.
    Source(SourceOp),
    /// The in-process source stream's cursor (`Input::SourceCursor`): its events so far
    /// reflect the mirrored collection up to this resourceVersion (a shared cache's
    /// subscriber).
    SourceCursor {
        /// The resourceVersion.
        resource_version: String,
    },
    /// The in-process source stream ended.
    SourceEnd {
        /// The error it ended with.
        error: Option<String>,
    },
    /// Time passes with no input.
    Advance {
        /// How far.
        by: Duration,
    },
    /// Inject a fault.
    Fault(Fault),
    /// A reconcile-all trigger: every parent with members is queued.
    ReconcileAll,
    /// A one-key trigger (`Input::ReconcileOn`): the parent of the cached primary object
    /// `key` (`namespace/name`, or `name` when cluster-scoped) is queued.
    ReconcileOn {
        /// The object's key.
        key: String,
    },
    /// Stop the loop.
    Stop,
    /// Nothing happens; the entry's note is shown at its time (the test kit's faults and
    /// restarts, in the trace of the process they hit).
    Note,
}

/// An in-process source write, with the objects as raw JSON.
#[derive(Debug, Clone, PartialEq)]
pub enum SourceOp {
    /// Insert or update.
    Upsert(String),
    /// Remove (last state).
    Delete(String),
    /// The whole world.
    Replace(Vec<String>),
}

/// A record with where it came from and when it happens.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// 1-based line in the file it was read from (0 when generated).
    pub line: usize,
    /// When it happens; `None` means "right after the previous record".
    pub at: Option<Instant>,
    /// Free text carried along (importers say what they synthesized).
    pub note: Option<String>,
    /// The source a LIST, WATCH, frame or stream end belongs to: 0 (or none) for the
    /// primary, `n` for the header's `n`th secondary (version 2). On a fault, the one source
    /// it hits; a fault naming none hits every source.
    pub source: Option<u64>,
    /// The record.
    pub record: Record,
}

/// A parsed trace.
#[derive(Debug, Clone, PartialEq)]
pub struct Trace {
    /// Where it was read from, for error messages.
    pub name: String,
    /// Settings.
    pub header: Header,
    /// Records in file order.
    pub entries: Vec<Entry>,
}

/// Every field any line may carry; which ones are required depends on `record`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Line<'a> {
    record: Option<String>,
    t: Option<f64>,
    note: Option<String>,
    status: Option<u16>,
    #[serde(borrow)]
    body: Option<&'a RawValue>,
    raw_body: Option<String>,
    body_base64: Option<String>,
    transport_error: Option<String>,
    resource_version: Option<String>,
    raw: Option<String>,
    raw_base64: Option<String>,
    #[serde(borrow)]
    event: Option<&'a RawValue>,
    end: Option<String>,
    error: Option<String>,
    parent: Option<String>,
    outcome: Option<String>,
    requeue_after_s: Option<f64>,
    duration_s: Option<f64>,
    op: Option<String>,
    #[serde(borrow)]
    object: Option<&'a RawValue>,
    #[serde(borrow)]
    objects: Option<Vec<&'a RawValue>>,
    by_s: Option<f64>,
    fault: Option<String>,
    count: Option<u32>,
    cursor: Option<bool>,
    source: Option<u64>,
    writes: Option<Vec<WriteLine>>,
    key: Option<String>,
}

/// One write of a `reconcile` record: the source caching the written kind (the primary when
/// left out) and the answered resourceVersion.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WriteLine {
    source: Option<u64>,
    resource_version: String,
}

/// A header's `wire_format`: absent is JSON.
fn wire_format(name: Option<&str>) -> Result<reconcile_core::WireFormat, String> {
    name.map_or(Ok(reconcile_core::WireFormat::Json), |name| {
        reconcile_core::WireFormat::parse(name)
            .ok_or_else(|| format!("wire_format must be \"json\" or \"protobuf\", got {name:?}"))
    })
}

/// Tells an absent field (`None`, the default) from an explicit `null` (`Some(None)`: off).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Option<f64>>, D::Error> {
    Option::<f64>::deserialize(d).map(Some)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HeaderLine {
    reconcile_sim_trace: u64,
    description: Option<String>,
    source: Option<String>,
    namespace: Option<String>,
    label_selector: Option<String>,
    wire_format: Option<String>,
    kind: Option<String>,
    parent: Option<String>,
    concurrency: Option<usize>,
    timeout_seconds: Option<u32>,
    streaming_lists: Option<bool>,
    list_page_size: Option<u32>,
    #[serde(default, deserialize_with = "present")]
    resync_s: Option<Option<f64>>,
    retry_delay_s: Option<f64>,
    backoff_base_s: Option<f64>,
    backoff_cap_s: Option<f64>,
    compaction_window_s: Option<f64>,
    #[serde(default, deserialize_with = "present")]
    bookmark_interval_s: Option<Option<f64>>,
    gone_as: Option<String>,
    secondaries: Option<Vec<SecondaryLine>>,
    #[serde(default, deserialize_with = "present")]
    read_own_writes_s: Option<Option<f64>>,
    debounce_s: Option<f64>,
}

/// One secondary source in a version 2 header.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SecondaryLine {
    namespace: Option<String>,
    label_selector: Option<String>,
    field_selector: Option<String>,
    timeout_seconds: Option<u32>,
    streaming_lists: Option<bool>,
    wire_format: Option<String>,
    parents_by: String,
}

/// A non-negative, finite number of seconds, at most about 31 years (the core's `Instant`
/// holds 584 years of nanoseconds, so any sum of these stays far from saturation).
pub fn seconds(field: &str, s: f64) -> Result<Duration, String> {
    if !s.is_finite() || !(0.0..=1.0e9).contains(&s) {
        let got = if s.abs() < 1e15 {
            s.to_string()
        } else {
            format!("{s:e}")
        };
        return Err(format!(
            "{field} must be between 0 and 1e9 seconds, got {got}"
        ));
    }
    // Whole milliseconds: traces are written by hand, and ms keeps the output exact.
    let millis = (s * 1000.0).round();
    // In range by the check above.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    Ok(Duration::from_millis(millis as u64))
}

/// Whether `kind` can be a header's `kind`: a Kubernetes kind name (ASCII letters and
/// digits, starting with a letter, at most 63 bytes).
#[must_use]
pub fn is_kind_name(kind: &str) -> bool {
    let name = kind.as_bytes();
    !name.is_empty()
        && name.len() <= 63
        && name[0].is_ascii_alphabetic()
        && name.iter().all(u8::is_ascii_alphanumeric)
}

/// A header's `kind`, checked by [`is_kind_name`].
fn kind(kind: String) -> Result<String, String> {
    if !is_kind_name(&kind) {
        return Err(format!(
            "kind must be a Kubernetes kind (letters and digits, at most 63), got {kind:?}"
        ));
    }
    Ok(kind)
}

fn positive(field: &str, s: f64) -> Result<Duration, String> {
    let d = seconds(field, s)?;
    if d.is_zero() {
        return Err(format!("{field} must be positive"));
    }
    Ok(d)
}

impl Header {
    fn from_line(h: HeaderLine) -> Result<Self, String> {
        if !(1..=FORMAT_VERSION).contains(&h.reconcile_sim_trace) {
            return Err(format!(
                "trace format version {} is not supported (this build reads 1 to {FORMAT_VERSION})",
                h.reconcile_sim_trace
            ));
        }
        if h.reconcile_sim_trace < 2 && h.secondaries.is_some() {
            return Err("secondaries need trace format version 2".into());
        }
        let mut secondaries = Vec::new();
        for (i, s) in h.secondaries.into_iter().flatten().enumerate() {
            let n = i + 1;
            // The core's defaults for everything the trace format does not carry (a replay
            // answers whatever LISTs the core sends).
            let defaults = reconcile_core::WatchParams::default();
            let timeout = s.timeout_seconds.unwrap_or(defaults.timeout_seconds);
            let mut params = defaults.timeout(timeout);
            params.namespace = s.namespace;
            params.label_selector = s.label_selector;
            params.field_selector = s.field_selector;
            if s.streaming_lists == Some(true) {
                params = params.streaming_lists();
            }
            params.wire_format = wire_format(s.wire_format.as_deref())
                .map_err(|e| format!("secondary S{n}: {e}"))?;
            let parents_by = s
                .parents_by
                .parse()
                .map_err(|e| format!("secondary S{n}: {e}"))?;
            secondaries.push(reconcile_core::SecondaryConfig { params, parents_by });
        }
        let d = Header::default();
        let in_process = match h.source.as_deref() {
            None | Some("kubernetes") => false,
            Some("in_process") => true,
            Some(other) => {
                return Err(format!(
                    "source must be \"kubernetes\" or \"in_process\", got {other:?}"
                ));
            }
        };
        let opt = |field: &str, v: Option<f64>, default: Duration| {
            v.map_or(Ok(default), |s| positive(field, s))
        };
        let gone_as = match h.gone_as.as_deref() {
            None | Some("frame") => GoneAs::Frame,
            Some("status") => GoneAs::Status,
            Some(other) => {
                return Err(format!(
                    "gone_as must be \"frame\" or \"status\", got {other:?}"
                ));
            }
        };
        let header = Header {
            description: h.description,
            in_process,
            namespace: h.namespace,
            label_selector: h.label_selector,
            wire_format: wire_format(h.wire_format.as_deref())?,
            kind: h.kind.map(kind).transpose()?,
            parent: h.parent.as_deref().map_or(Ok(d.parent.clone()), |p| {
                p.parse()
                    .map_err(|e: reconcile_core::KeyByParseError| e.to_string())
            })?,
            concurrency: h.concurrency.unwrap_or(d.concurrency),
            timeout_seconds: h.timeout_seconds.unwrap_or(d.timeout_seconds),
            streaming_lists: h.streaming_lists.unwrap_or(d.streaming_lists),
            list_page_size: match h.list_page_size {
                Some(0) => return Err("list_page_size must be at least 1".into()),
                n => n,
            },
            resync: match h.resync_s {
                None => d.resync,
                Some(None) => None,
                Some(Some(s)) => Some(positive("resync_s", s)?),
            },
            retry_delay: opt("retry_delay_s", h.retry_delay_s, d.retry_delay)?,
            backoff: (
                opt("backoff_base_s", h.backoff_base_s, d.backoff.0)?,
                opt("backoff_cap_s", h.backoff_cap_s, d.backoff.1)?,
            ),
            compaction_window: opt(
                "compaction_window_s",
                h.compaction_window_s,
                d.compaction_window,
            )?,
            bookmark_interval: match h.bookmark_interval_s {
                None => d.bookmark_interval,
                Some(None) => None,
                Some(Some(s)) => Some(positive("bookmark_interval_s", s)?),
            },
            gone_as,
            secondaries,
            read_own_writes: match h.read_own_writes_s {
                None => d.read_own_writes,
                Some(None) => None,
                Some(Some(s)) => Some(positive("read_own_writes_s", s)?),
            },
            debounce: h
                .debounce_s
                .map(|s| positive("debounce_s", s))
                .transpose()?,
        };
        if let Some(selector) = &header.label_selector {
            crate::selector::Selector::parse(selector)
                .map_err(|e| format!("label_selector: {e}"))?;
        }
        Ok(header)
    }

    /// The header as one JSON line.
    #[must_use]
    pub fn to_line(&self) -> String {
        let mut m = serde_json::Map::new();
        let version = if self.secondaries.is_empty() { 1 } else { 2 };
        m.insert(FORMAT_KEY.into(), version.into());
        if let Some(d) = &self.description {
            m.insert("description".into(), d.clone().into());
        }
        if self.in_process {
            m.insert("source".into(), "in_process".into());
        }
        if let Some(ns) = &self.namespace {
            m.insert("namespace".into(), ns.clone().into());
        }
        if let Some(l) = &self.label_selector {
            m.insert("label_selector".into(), l.clone().into());
        }
        if self.wire_format != reconcile_core::WireFormat::Json {
            m.insert("wire_format".into(), self.wire_format.as_str().into());
        }
        if let Some(kind) = &self.kind {
            m.insert("kind".into(), kind.clone().into());
        }
        m.insert("parent".into(), self.parent.to_string().into());
        m.insert("concurrency".into(), self.concurrency.into());
        m.insert("timeout_seconds".into(), self.timeout_seconds.into());
        if self.streaming_lists {
            m.insert("streaming_lists".into(), true.into());
        }
        if let Some(n) = self.list_page_size {
            m.insert("list_page_size".into(), n.into());
        }
        m.insert(
            "resync_s".into(),
            self.resync.map(|d| d.as_secs_f64()).into(),
        );
        m.insert(
            "retry_delay_s".into(),
            self.retry_delay.as_secs_f64().into(),
        );
        m.insert("backoff_base_s".into(), self.backoff.0.as_secs_f64().into());
        m.insert("backoff_cap_s".into(), self.backoff.1.as_secs_f64().into());
        m.insert(
            "compaction_window_s".into(),
            self.compaction_window.as_secs_f64().into(),
        );
        m.insert(
            "bookmark_interval_s".into(),
            self.bookmark_interval.map(|d| d.as_secs_f64()).into(),
        );
        if self.read_own_writes != Header::default().read_own_writes {
            m.insert(
                "read_own_writes_s".into(),
                self.read_own_writes.map(|d| d.as_secs_f64()).into(),
            );
        }
        if let Some(debounce) = self.debounce {
            m.insert("debounce_s".into(), debounce.as_secs_f64().into());
        }
        if self.gone_as == GoneAs::Status {
            m.insert("gone_as".into(), "status".into());
        }
        if !self.secondaries.is_empty() {
            let list = self
                .secondaries
                .iter()
                .map(|s| {
                    let mut o = serde_json::Map::new();
                    if let Some(ns) = &s.params.namespace {
                        o.insert("namespace".into(), ns.clone().into());
                    }
                    if let Some(l) = &s.params.label_selector {
                        o.insert("label_selector".into(), l.clone().into());
                    }
                    if let Some(f) = &s.params.field_selector {
                        o.insert("field_selector".into(), f.clone().into());
                    }
                    o.insert("timeout_seconds".into(), s.params.timeout_seconds.into());
                    if s.params.initial_list == reconcile_core::InitialListStrategy::StreamingList {
                        o.insert("streaming_lists".into(), true.into());
                    }
                    if s.params.wire_format != reconcile_core::WireFormat::Json {
                        o.insert("wire_format".into(), s.params.wire_format.as_str().into());
                    }
                    o.insert("parents_by".into(), s.parents_by.to_string().into());
                    serde_json::Value::Object(o)
                })
                .collect();
            m.insert("secondaries".into(), serde_json::Value::Array(list));
        }
        serde_json::Value::Object(m).to_string()
    }
}

fn parse_fault(l: &Line<'_>) -> Result<Fault, String> {
    let name = l.fault.as_deref().ok_or("a fault record needs \"fault\"")?;
    let count = l.count.unwrap_or(1);
    let duration = |field: &str, default: f64| seconds(field, l.duration_s.unwrap_or(default));
    Ok(match name {
        "watch_drop" => Fault::WatchDrop,
        "gone_storm" => Fault::GoneStorm { count },
        "too_large" => Fault::TooLarge { count },
        "malformed_frame" => Fault::MalformedFrame {
            cursor: l.cursor.unwrap_or(true),
        },
        "restart" => Fault::Restart {
            down: duration("duration_s", 5.0)?,
        },
        "compact" => Fault::Compact,
        "list_fail" => Fault::ListFail {
            count,
            status: l.status.unwrap_or(500),
        },
        "slow_reconcile" => Fault::SlowReconcile {
            count,
            duration: duration("duration_s", 30.0)?,
        },
        "fail_reconcile" => Fault::FailReconcile { count },
        "lose_change" => Fault::LoseChange { count },
        "clock_jump" => Fault::ClockJump {
            by: seconds("by_s", l.by_s.ok_or("clock_jump needs \"by_s\"")?)?,
        },
        other => {
            return Err(format!(
                "unknown fault {other:?}; the faults are {}",
                FAULT_NAMES.join(", ")
            ));
        }
    })
}

/// Every fault's name, as a trace's `fault` field and `--fault NAME[:ARG]@SECONDS` spell it,
/// in the order the docs list them.
pub const FAULT_NAMES: [&str; 11] = [
    "watch_drop",
    "gone_storm",
    "too_large",
    "malformed_frame",
    "restart",
    "compact",
    "list_fail",
    "slow_reconcile",
    "fail_reconcile",
    "lose_change",
    "clock_jump",
];

/// A body given as `body` (JSON), `raw_body` (a string) or `body_base64` (any bytes), at
/// most one of them; none is an empty body.
fn parse_body(l: &Line<'_>) -> Result<Payload, String> {
    match (l.body, &l.raw_body, &l.body_base64) {
        (None, None, None) => Ok(Payload::default()),
        (Some(b), None, None) => Ok(b.get().into()),
        (None, Some(b), None) => Ok(b.as_str().into()),
        (None, None, Some(b)) => base64::decode(b)
            .map(Payload::from_bytes)
            .map_err(|e| format!("body_base64: {e}")),
        _ => Err("give one of \"body\", \"raw_body\" or \"body_base64\"".into()),
    }
}

fn parse_record(l: &Line<'_>) -> Result<Record, String> {
    let kind = l.record.as_deref().ok_or("no \"record\" field")?;
    let raw = |v: &RawValue| v.get().to_owned();
    Ok(match kind {
        "list" => match &l.transport_error {
            Some(e) => Record::List {
                status: 0,
                body: Payload::default(),
                transport_error: Some(e.clone()),
            },
            None => Record::List {
                status: l.status.ok_or("a list record needs \"status\"")?,
                body: parse_body(l)?,
                transport_error: None,
            },
        },
        "watch" => Record::Watch {
            status: l.status.unwrap_or(200),
            body: parse_body(l)?,
            resource_version: l.resource_version.clone(),
        },
        "frame" => Record::Frame {
            line: match (&l.raw, l.event, &l.raw_base64) {
                (Some(r), None, None) => r.as_str().into(),
                (None, Some(e), None) => e.get().into(),
                (None, None, Some(b)) => {
                    Payload::from_bytes(base64::decode(b).map_err(|e| format!("raw_base64: {e}"))?)
                }
                _ => {
                    return Err(
                        "a frame record needs exactly one of \"raw\", \"event\" or \"raw_base64\""
                            .into(),
                    );
                }
            },
        },
        "watch_end" => Record::WatchEnd(match (l.end.as_deref(), &l.error, l.status) {
            (Some("clean") | None, None, None) => RecordedEnd::Clean,
            (Some("transport") | None, Some(e), None) => RecordedEnd::Transport(e.clone()),
            (Some("status") | None, None, Some(code)) => RecordedEnd::Status(code, parse_body(l)?),
            _ => {
                return Err(
                    "a watch_end is clean, or has \"error\" (transport) or \"status\"".into(),
                );
            }
        }),
        "reconcile" => Record::Reconcile {
            parent: l.parent.clone(),
            outcome: match l.outcome.as_deref().unwrap_or("ok") {
                "ok" => ScriptedOutcome::Ok,
                "error" => ScriptedOutcome::Error(
                    l.error.clone().unwrap_or_else(|| "scripted failure".into()),
                ),
                "requeue" => ScriptedOutcome::RequeueAfter(positive(
                    "requeue_after_s",
                    l.requeue_after_s
                        .ok_or("a requeue outcome needs \"requeue_after_s\"")?,
                )?),
                "error_handled" => ScriptedOutcome::ErrorHandled {
                    error: l.error.clone().unwrap_or_else(|| "scripted failure".into()),
                    requeue_after: l
                        .requeue_after_s
                        .map(|s| positive("requeue_after_s", s))
                        .transpose()?,
                },
                other => {
                    return Err(format!(
                        "outcome must be \"ok\", \"error\", \"error_handled\" or \"requeue\", got {other:?}"
                    ));
                }
            },
            duration: seconds("duration_s", l.duration_s.unwrap_or(0.0))?,
            writes: l
                .writes
                .iter()
                .flatten()
                .map(|w| {
                    reconcile_core::OwnWrite::new(
                        reconcile_core::SourceId::nth(w.source.unwrap_or(0)),
                        w.resource_version.clone(),
                    )
                })
                .collect(),
        },
        "source" => Record::Source(match l.op.as_deref() {
            Some("upsert") => SourceOp::Upsert(raw(l.object.ok_or("upsert needs \"object\"")?)),
            Some("delete") => SourceOp::Delete(raw(l.object.ok_or("delete needs \"object\"")?)),
            Some("replace") => SourceOp::Replace(
                l.objects
                    .as_ref()
                    .ok_or("replace needs \"objects\"")?
                    .iter()
                    .map(|o| raw(o))
                    .collect(),
            ),
            _ => return Err("a source record needs \"op\": upsert, delete or replace".into()),
        }),
        "source_cursor" => Record::SourceCursor {
            resource_version: l
                .resource_version
                .clone()
                .ok_or("a source_cursor record needs \"resource_version\"")?,
        },
        "source_end" => Record::SourceEnd {
            error: l.error.clone(),
        },
        "advance" => Record::Advance {
            by: seconds("by_s", l.by_s.ok_or("an advance record needs \"by_s\"")?)?,
        },
        "fault" => Record::Fault(parse_fault(l)?),
        "stop" => Record::Stop,
        "reconcile_all" => Record::ReconcileAll,
        "reconcile_on" => Record::ReconcileOn {
            key: l
                .key
                .clone()
                .filter(|k| !k.is_empty())
                .ok_or("a reconcile_on record needs \"key\"")?,
        },
        "note" => {
            if l.note.as_deref().is_none_or(str::is_empty) {
                return Err("a note record needs \"note\"".into());
            }
            Record::Note
        }
        other => return Err(format!("unknown record kind {other:?}")),
    })
}

/// `bytes` as text, or an error naming the line (1-based) and column of the first byte that
/// is not UTF-8: a trace is UTF-8 text (payloads that are not are written as base64).
///
/// # Errors
/// When `bytes` are not UTF-8.
pub fn utf8_text<'a>(name: &str, bytes: &'a [u8]) -> Result<&'a str, TraceError> {
    std::str::from_utf8(bytes).map_err(|e| {
        // Line ends counted as every reader counts them: LF, CRLF or a lone CR.
        let (line, column) = read::line_and_column(bytes, e.valid_up_to());
        TraceError {
            file: name.to_owned(),
            line,
            message: format!(
                "invalid UTF-8 at byte {column} of the line (offset {}): a trace is UTF-8 text, payloads that are not are written as base64",
                e.valid_up_to()
            ),
        }
    })
}

impl Trace {
    /// Parses a trace from its bytes: [`utf8_text`], then [`Trace::parse`].
    ///
    /// # Errors
    /// The first line that is not UTF-8, or the first bad line.
    pub fn parse_bytes(name: &str, bytes: &[u8]) -> Result<Trace, TraceError> {
        Trace::parse(name, utf8_text(name, bytes)?)
    }

    /// Parses a trace from its text; `name` is used in error messages. A leading byte order
    /// mark is skipped, and lines may end in LF, CRLF or a lone CR ([`numbered_lines`]).
    ///
    /// # Errors
    /// The first bad line, with its number and what is wrong.
    pub fn parse(name: &str, text: &str) -> Result<Trace, TraceError> {
        let err = |line: usize, message: String| TraceError {
            file: name.to_owned(),
            line,
            message,
        };
        let mut lines = numbered_lines(strip_bom(text)).filter(|(_, l)| !l.trim().is_empty());
        let (first, header_text) = lines
            .next()
            .ok_or_else(|| err(0, "empty file: expected a header line".into()))?;
        let header_line: HeaderLine = serde_json::from_str(header_text).map_err(|e| {
            err(
                first,
                format!(
                    "not a trace header (expected {{\"{FORMAT_KEY}\": {FORMAT_VERSION}, ...}}): {}",
                    json_error(&e)
                ),
            )
        })?;
        let header = Header::from_line(header_line).map_err(|m| err(first, m))?;
        let mut entries = Vec::new();
        let mut last = Instant::ZERO;
        for (number, text) in lines {
            if entries.len() >= MAX_RECORDS {
                return Err(err(number, format!("more than {MAX_RECORDS} records")));
            }
            let line: Line<'_> = serde_json::from_str(text)
                .map_err(|e| err(number, format!("bad record: {}", json_error(&e))))?;
            let record = parse_record(&line).map_err(|m| err(number, m))?;
            let at = match line.t {
                Some(t) => {
                    let at = Instant::from_duration(seconds("t", t).map_err(|m| err(number, m))?);
                    if at < last {
                        return Err(err(
                            number,
                            format!("time goes backwards: t={t} after {last}"),
                        ));
                    }
                    last = at;
                    Some(at)
                }
                None => None,
            };
            let source = line.source;
            if let Some(source) = source {
                if !matches!(
                    record,
                    Record::List { .. }
                        | Record::Watch { .. }
                        | Record::Frame { .. }
                        | Record::WatchEnd(_)
                        | Record::Fault(_)
                ) {
                    return Err(err(
                        number,
                        "only list, watch, frame, watch_end and fault records name a source".into(),
                    ));
                }
                if source > header.secondaries.len() as u64 {
                    return Err(err(
                        number,
                        format!(
                            "source {source} is not in the header ({} secondaries)",
                            header.secondaries.len()
                        ),
                    ));
                }
            }
            entries.push(Entry {
                line: number,
                at,
                note: line.note,
                source,
                record,
            });
        }
        Ok(Trace {
            name: name.to_owned(),
            header,
            entries,
        })
    }

    /// Writes the trace back as JSON Lines (header first); parsing the result gives the same
    /// records.
    #[must_use]
    pub fn to_jsonl(&self) -> String {
        let mut out = Vec::new();
        // Writing to a `Vec` cannot fail, and every line is a `String`.
        let _ = self.write_jsonl(&mut out);
        String::from_utf8(out).unwrap_or_default()
    }

    /// [`Trace::to_jsonl`], written to `out` a line at a time, so that only one record's
    /// line is held besides the trace.
    ///
    /// # Errors
    /// When writing to `out` fails.
    pub fn write_jsonl(&self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        out.write_all(self.header.to_line().as_bytes())?;
        out.write_all(b"\n")?;
        for entry in &self.entries {
            out.write_all(entry.to_line().as_bytes())?;
            out.write_all(b"\n")?;
        }
        Ok(())
    }
}

fn has_line_break(s: &str) -> bool {
    s.contains(['\n', '\r'])
}

/// A raw JSON object written inline: as it is when it is one line of JSON, compacted when it
/// spans lines (an in-process object is decoded anyway, so its whitespace carries nothing),
/// and as a JSON string when it is not JSON at all, so the line stays readable.
fn one_line_json(raw_json: &str) -> std::borrow::Cow<'_, str> {
    match serde_json::from_str::<serde_json::Value>(raw_json) {
        Ok(_) if !has_line_break(raw_json) => raw_json.into(),
        Ok(v) => v.to_string().into(),
        Err(_) => serde_json::Value::from(raw_json).to_string().into(),
    }
}

/// Appends `"key":<raw json>` to an object being written by hand, so raw payloads keep their
/// exact bytes.
fn push_raw(out: &mut String, key: &str, raw_json: &str) {
    out.push_str(",\"");
    out.push_str(key);
    out.push_str("\":");
    out.push_str(raw_json);
}

/// A body as the string `raw_body`, or as `body_base64` when its bytes are not UTF-8.
fn push_body(out: &mut String, body: &Payload) {
    match body.as_str() {
        Some(text) => push_str(out, "raw_body", text),
        None => push_str(out, "body_base64", &base64::encode(body.as_bytes())),
    }
}

fn push_str(out: &mut String, key: &str, value: &str) {
    push_raw(out, key, &serde_json::Value::from(value).to_string());
}

fn push_num(out: &mut String, key: &str, value: impl Into<serde_json::Value>) {
    push_raw(out, key, &value.into().to_string());
}

impl Entry {
    /// A generated entry at `at`.
    #[must_use]
    pub fn new(at: Option<Instant>, record: Record) -> Self {
        Entry {
            line: 0,
            at,
            note: None,
            source: None,
            record,
        }
    }

    /// The source a LIST, WATCH, frame or stream end belongs to: 0 for the primary.
    #[must_use]
    pub fn source_index(&self) -> u64 {
        self.source.unwrap_or(0)
    }

    /// The length of the bytes the record carries (a body, a frame's line), 0 for none.
    fn payload_len(&self) -> usize {
        match &self.record {
            Record::List { body, .. }
            | Record::Watch { body, .. }
            | Record::WatchEnd(RecordedEnd::Status(_, body)) => body.as_bytes().len(),
            Record::Frame { line } => line.as_bytes().len(),
            _ => 0,
        }
    }

    /// The entry as one JSON line.
    #[must_use]
    pub fn to_line(&self) -> String {
        // Room for the payload up front: a LIST of many objects is one line, and growing it
        // by doubling would hold up to twice its text.
        let mut out = String::with_capacity(128 + self.payload_len());
        out.push_str("{\"record\":");
        let kind = match &self.record {
            Record::List { .. } => "list",
            Record::Watch { .. } => "watch",
            Record::Frame { .. } => "frame",
            Record::WatchEnd(_) => "watch_end",
            Record::Reconcile { .. } => "reconcile",
            Record::Source(_) => "source",
            Record::SourceCursor { .. } => "source_cursor",
            Record::SourceEnd { .. } => "source_end",
            Record::Advance { .. } => "advance",
            Record::Fault(_) => "fault",
            Record::Stop => "stop",
            Record::ReconcileAll => "reconcile_all",
            Record::ReconcileOn { .. } => "reconcile_on",
            Record::Note => "note",
        };
        out.push_str(&serde_json::Value::from(kind).to_string());
        if let Some(at) = self.at {
            push_num(&mut out, "t", at.since_origin().as_secs_f64());
        }
        // The primary goes unnamed, except on a fault, where no source means every source.
        if let Some(source) = self.source
            && (source != 0 || matches!(self.record, Record::Fault(_)))
        {
            out.push_str(&format!(",\"source\":{source}"));
        }
        let is_json = |s: &str| serde_json::from_str::<&RawValue>(s).is_ok();
        match &self.record {
            Record::List {
                status,
                body,
                transport_error,
            } => match transport_error {
                Some(e) => push_str(&mut out, "transport_error", e),
                None => {
                    push_num(&mut out, "status", *status);
                    // Raw JSON only when it is already one line, exactly: otherwise the
                    // exact bytes go as a string (base64 when not UTF-8), so every record
                    // stays one line.
                    match body.as_str() {
                        Some(b)
                            if is_json(b) && !has_line_break(b) && b.trim().len() == b.len() =>
                        {
                            push_raw(&mut out, "body", b);
                        }
                        _ => push_body(&mut out, body),
                    }
                }
            },
            Record::Watch {
                status,
                body,
                resource_version,
            } => {
                push_num(&mut out, "status", *status);
                if !body.is_empty() {
                    push_body(&mut out, body);
                }
                if let Some(rv) = resource_version {
                    push_str(&mut out, "resource_version", rv);
                }
            }
            Record::Frame { line } => match line.as_str() {
                Some(text) => push_str(&mut out, "raw", text),
                None => push_str(&mut out, "raw_base64", &base64::encode(line.as_bytes())),
            },
            Record::WatchEnd(RecordedEnd::Clean) => push_str(&mut out, "end", "clean"),
            Record::WatchEnd(RecordedEnd::Transport(e)) => push_str(&mut out, "error", e),
            Record::WatchEnd(RecordedEnd::Status(code, body)) => {
                push_num(&mut out, "status", *code);
                if !body.is_empty() {
                    push_body(&mut out, body);
                }
            }
            Record::Reconcile {
                parent,
                outcome,
                duration,
                writes,
            } => {
                if let Some(p) = parent {
                    push_str(&mut out, "parent", p);
                }
                match outcome {
                    ScriptedOutcome::Ok => push_str(&mut out, "outcome", "ok"),
                    ScriptedOutcome::Error(e) => {
                        push_str(&mut out, "outcome", "error");
                        push_str(&mut out, "error", e);
                    }
                    ScriptedOutcome::RequeueAfter(d) => {
                        push_str(&mut out, "outcome", "requeue");
                        push_num(&mut out, "requeue_after_s", d.as_secs_f64());
                    }
                    ScriptedOutcome::ErrorHandled {
                        error,
                        requeue_after,
                    } => {
                        push_str(&mut out, "outcome", "error_handled");
                        push_str(&mut out, "error", error);
                        if let Some(d) = requeue_after {
                            push_num(&mut out, "requeue_after_s", d.as_secs_f64());
                        }
                    }
                }
                if !duration.is_zero() {
                    push_num(&mut out, "duration_s", duration.as_secs_f64());
                }
                if !writes.is_empty() {
                    let list: Vec<serde_json::Value> = writes
                        .iter()
                        .map(|w| {
                            let mut o = serde_json::Map::new();
                            if w.source != reconcile_core::SourceId::PRIMARY {
                                o.insert("source".into(), w.source.get().into());
                            }
                            o.insert("resource_version".into(), w.resource_version.clone().into());
                            serde_json::Value::Object(o)
                        })
                        .collect();
                    push_raw(
                        &mut out,
                        "writes",
                        &serde_json::Value::from(list).to_string(),
                    );
                }
            }
            Record::Source(op) => match op {
                SourceOp::Upsert(o) => {
                    push_str(&mut out, "op", "upsert");
                    push_raw(&mut out, "object", &one_line_json(o));
                }
                SourceOp::Delete(o) => {
                    push_str(&mut out, "op", "delete");
                    push_raw(&mut out, "object", &one_line_json(o));
                }
                SourceOp::Replace(objects) => {
                    push_str(&mut out, "op", "replace");
                    let joined = format!("[{}]", objects.join(","));
                    push_raw(&mut out, "objects", &one_line_json(&joined));
                }
            },
            Record::SourceCursor { resource_version } => {
                push_str(&mut out, "resource_version", resource_version);
            }
            Record::SourceEnd { error } => {
                if let Some(e) = error {
                    push_str(&mut out, "error", e);
                }
            }
            Record::Advance { by } => push_num(&mut out, "by_s", by.as_secs_f64()),
            Record::Fault(fault) => push_fault(&mut out, fault),
            Record::ReconcileOn { key } => push_str(&mut out, "key", key),
            Record::Stop | Record::ReconcileAll | Record::Note => {}
        }
        if let Some(note) = &self.note {
            push_str(&mut out, "note", note);
        }
        out.push('}');
        out
    }
}

fn push_fault(out: &mut String, fault: &Fault) {
    let (name, count) = match fault {
        Fault::WatchDrop => ("watch_drop", None),
        Fault::GoneStorm { count } => ("gone_storm", Some(*count)),
        Fault::TooLarge { count } => ("too_large", Some(*count)),
        Fault::MalformedFrame { .. } => ("malformed_frame", None),
        Fault::Restart { .. } => ("restart", None),
        Fault::Compact => ("compact", None),
        Fault::ListFail { count, .. } => ("list_fail", Some(*count)),
        Fault::SlowReconcile { count, .. } => ("slow_reconcile", Some(*count)),
        Fault::FailReconcile { count } => ("fail_reconcile", Some(*count)),
        Fault::LoseChange { count } => ("lose_change", Some(*count)),
        Fault::ClockJump { .. } => ("clock_jump", None),
    };
    push_str(out, "fault", name);
    if let Some(c) = count {
        push_num(out, "count", c);
    }
    match fault {
        Fault::MalformedFrame { cursor } => push_raw(out, "cursor", &cursor.to_string()),
        Fault::Restart { down } => push_num(out, "duration_s", down.as_secs_f64()),
        Fault::ListFail { status, .. } => push_num(out, "status", *status),
        Fault::SlowReconcile { duration, .. } => {
            push_num(out, "duration_s", duration.as_secs_f64())
        }
        Fault::ClockJump { by } => push_num(out, "by_s", by.as_secs_f64()),
        _ => {}
    }
}

/// Parses a fault given on the command line: `NAME[:ARG]@SECONDS`, for example
/// `watch_drop@30`, `gone_storm:3@60`, `clock_jump:3600@100`, `malformed_frame:nocursor@5`.
///
/// # Errors
/// What is wrong with the spec.
pub fn parse_fault_flag(spec: &str) -> Result<Entry, String> {
    let (what, at) = spec
        .rsplit_once('@')
        .ok_or_else(|| format!("fault {spec:?}: expected NAME[:ARG]@SECONDS"))?;
    let at: f64 = at
        .parse()
        .map_err(|_| format!("fault {spec:?}: {at:?} is not a number of seconds"))?;
    let (name, arg) = match what.split_once(':') {
        Some((n, a)) => (n, Some(a)),
        None => (what, None),
    };
    let num = |a: Option<&str>| -> Result<Option<f64>, String> {
        a.map(|a| {
            a.parse::<f64>()
                .map_err(|_| format!("fault {spec:?}: {a:?} is not a number"))
        })
        .transpose()
    };
    let mut line: Line<'_> = serde_json::from_str("{}").map_err(|e| e.to_string())?;
    line.fault = Some(name.to_owned());
    match name {
        "gone_storm" | "too_large" | "fail_reconcile" | "lose_change" => {
            line.count = num(arg)?.map(|c| c as u32);
        }
        "list_fail" => line.status = num(arg)?.map(|c| c as u16),
        "restart" | "slow_reconcile" => line.duration_s = num(arg)?,
        "clock_jump" => line.by_s = num(arg)?,
        "malformed_frame" => line.cursor = arg.map(|a| a != "nocursor"),
        _ => {}
    }
    let fault = parse_fault(&line).map_err(|m| format!("fault {spec:?}: {m}"))?;
    let at = seconds("fault time", at).map_err(|m| format!("fault {spec:?}: {m}"))?;
    Ok(Entry::new(
        Some(Instant::from_duration(at)),
        Record::Fault(fault),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_fault_lists_every_name_and_each_name_parses() {
        let e = parse_fault_flag("watch_dorp@3").unwrap_err();
        assert_eq!(
            e,
            "fault \"watch_dorp@3\": unknown fault \"watch_dorp\"; the faults are watch_drop, \
             gone_storm, too_large, malformed_frame, restart, compact, list_fail, \
             slow_reconcile, fail_reconcile, lose_change, clock_jump"
        );
        for name in FAULT_NAMES {
            // Each listed name is known: what it lacks is its argument, never its name.
            let e = parse_fault_flag(&format!("{name}@1"))
                .err()
                .unwrap_or_default();
            assert!(!e.contains("unknown fault"), "{name}: {e}");
        }
    }

    const HEADER: &str = r#"{"reconcile_sim_trace":1,"parent":"label:cell"}"#;

    #[test]
    fn a_bad_line_names_the_file_the_line_and_the_problem() {
        let text = format!(
            "{HEADER}\n{{\"record\":\"list\",\"t\":0,\"status\":200,\"body\":{{}}}}\n{{\"record\":\"frobnicate\"}}\n"
        );
        let e = Trace::parse("x.jsonl", &text).unwrap_err();
        assert_eq!(e.line, 3);
        assert_eq!(
            e.to_string(),
            "x.jsonl:3: unknown record kind \"frobnicate\""
        );
        let e = Trace::parse("x.jsonl", &format!("{HEADER}\n{{not json\n")).unwrap_err();
        assert_eq!((e.file.as_str(), e.line), ("x.jsonl", 2));
        assert!(e.message.starts_with("bad record"), "{e}");
    }

    #[test]
    fn a_bom_and_crlf_or_cr_line_ends_read_as_lf_with_the_same_line_numbers() {
        let lf = format!("{HEADER}\n{{\"record\":\"stop\",\"t\":1}}\n\n{{\"record\":\"stop\"}}\n");
        let want = Trace::parse("x", &lf).unwrap();
        for text in [
            format!("\u{feff}{lf}"),
            lf.replace('\n', "\r\n"),
            lf.replace('\n', "\r"),
            format!("\u{feff}{}", lf.replace('\n', "\r")),
        ] {
            let got = Trace::parse("x", &text).unwrap();
            assert_eq!(got, want, "{text:?}");
            assert_eq!(got.entries[1].line, 4);
            let bad = text.replace("\"t\":1", "\"t\":-1");
            assert_eq!(Trace::parse("x", &bad).unwrap_err().line, 2, "{text:?}");
        }
        // Invalid UTF-8 is placed counting the same line ends.
        let e = utf8_text("x", b"{}\r{}\r\n\xff").unwrap_err();
        assert_eq!(
            (e.line, e.message.starts_with("invalid UTF-8 at byte 1 ")),
            (3, true),
            "{e}"
        );
    }

    #[test]
    fn no_message_names_line_0() {
        let e = Trace::parse("a", "\u{feff}\n").unwrap_err();
        assert_eq!(e.to_string(), "a: empty file: expected a header line");
        let e = TraceError {
            file: "f".into(),
            line: 7,
            message: "m".into(),
        };
        assert_eq!(e.to_string(), "f:7: m");
    }

    #[test]
    fn the_recursion_limit_is_named_as_such() {
        let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
        let e = serde_json::from_str::<serde_json::Value>(&deep).unwrap_err();
        assert_eq!(
            json_error(&e),
            "nested deeper than 128 levels, serde_json's recursion limit at line 1 column 128 \
             (the JSON may be well formed; no format here nests so deep)"
        );
        let e = serde_json::from_str::<serde_json::Value>("[").unwrap_err();
        assert_eq!(json_error(&e), e.to_string());
    }

    #[test]
    fn a_missing_or_newer_header_is_refused() {
        let e = Trace::parse("a", "{\"record\":\"stop\"}\n").unwrap_err();
        assert!(e.message.contains("not a trace header"), "{e}");
        let e = Trace::parse("a", "{\"reconcile_sim_trace\":3}\n").unwrap_err();
        assert!(e.message.contains("version 3"), "{e}");
        assert_eq!(Trace::parse("a", "").unwrap_err().line, 0);
    }

    #[test]
    fn version_2_names_each_records_source_and_version_1_cannot() {
        let text = concat!(
            r#"{"reconcile_sim_trace":2,"parent":"name","secondaries":[{"namespace":"ns","label_selector":"role=child","timeout_seconds":60,"parents_by":"owner:Pod"}]}"#,
            "\n",
            r#"{"record":"list","t":0,"status":200,"body":{"metadata":{"resourceVersion":"1"},"items":[]}}"#,
            "\n",
            r#"{"record":"list","t":0,"source":1,"status":200,"body":{"metadata":{"resourceVersion":"2"},"items":[]}}"#,
            "\n",
        );
        let trace = Trace::parse("v2", text).unwrap();
        assert_eq!(trace.header.secondaries.len(), 1);
        assert_eq!(
            trace.header.secondaries[0].parents_by,
            reconcile_core::ParentsBy::ControllerOwner("Pod".into())
        );
        assert_eq!(
            trace
                .entries
                .iter()
                .map(Entry::source_index)
                .collect::<Vec<_>>(),
            [0, 1]
        );
        // A fault names the one source it hits, or none for every source.
        let faults = format!(
            "{text}{}\n{}\n",
            r#"{"record":"fault","t":1,"fault":"gone_storm","count":1,"source":1}"#,
            r#"{"record":"fault","t":2,"fault":"watch_drop"}"#,
        );
        let with_faults = Trace::parse("faults", &faults).unwrap();
        assert_eq!(with_faults.entries[2].source, Some(1));
        assert_eq!(with_faults.entries[3].source, None);
        let again = Trace::parse("again", &with_faults.to_jsonl()).unwrap();
        assert_eq!(again.entries[2].source, Some(1));
        assert_eq!(again.entries[3].source, None);
        // Written back, it reads the same.
        let again = Trace::parse("again", &trace.to_jsonl()).unwrap();
        assert_eq!(again.to_jsonl(), trace.to_jsonl());
        assert!(trace.to_jsonl().contains(r#""reconcile_sim_trace":2"#));
        // A source the header does not name, a source on a record that has none, and
        // secondaries in a version 1 header are refused, each with its line.
        let bad_source = text.replace(r#""source":1"#, r#""source":2"#);
        let e = Trace::parse("x", &bad_source).unwrap_err();
        assert_eq!(e.line, 3, "{e}");
        let e = Trace::parse(
            "x",
            &format!(
                "{}\n{{\"record\":\"stop\",\"source\":1}}\n",
                text.lines().next().unwrap()
            ),
        )
        .unwrap_err();
        assert!(e.message.contains("name a source"), "{e}");
        let v1 = text.replacen(
            r#""reconcile_sim_trace":2"#,
            r#""reconcile_sim_trace":1"#,
            1,
        );
        assert!(
            Trace::parse("x", &v1)
                .unwrap_err()
                .message
                .contains("version 2")
        );
    }

    #[test]
    fn streaming_lists_round_trip_in_the_header_and_are_left_out_when_off() {
        let text = concat!(
            r#"{"reconcile_sim_trace":2,"parent":"name","streaming_lists":true,"#,
            r#""secondaries":[{"namespace":"ns","timeout_seconds":60,"streaming_lists":true,"parents_by":"owner:Pod"},"#,
            r#"{"namespace":"ns","parents_by":"owner:Pod"}]}"#,
            "\n"
        );
        let trace = Trace::parse("s", text).unwrap();
        assert!(trace.header.streaming_lists);
        let initial: Vec<_> = trace
            .header
            .secondaries
            .iter()
            .map(|s| s.params.initial_list)
            .collect();
        assert_eq!(
            initial,
            [
                reconcile_core::InitialListStrategy::StreamingList,
                reconcile_core::InitialListStrategy::ListWatch
            ]
        );
        let line = trace.header.to_line();
        assert_eq!(
            line.matches("\"streaming_lists\":true").count(),
            2,
            "{line}"
        );
        let again = Trace::parse("s", &format!("{line}\n")).unwrap();
        assert_eq!(again.header, trace.header);
        assert!(!Header::default().to_line().contains("streaming_lists"));
        let e =
            Trace::parse("s", "{\"reconcile_sim_trace\":1,\"streaming_lists\":1}\n").unwrap_err();
        assert!(e.message.contains("expected a boolean"), "{e}");
    }

    #[test]
    fn a_reconcile_on_record_round_trips_and_needs_its_key() {
        let text = format!("{HEADER}\n{{\"record\":\"reconcile_on\",\"t\":1,\"key\":\"ns/a\"}}\n");
        let trace = Trace::parse("r", &text).unwrap();
        assert_eq!(
            trace.entries[0].record,
            Record::ReconcileOn { key: "ns/a".into() }
        );
        let line = trace.entries[0].to_line();
        assert!(line.contains("\"key\":\"ns/a\""), "{line}");
        let again = Trace::parse("r", &format!("{HEADER}\n{line}\n")).unwrap();
        assert_eq!(again.entries, trace.entries);
        let e =
            Trace::parse("r", &format!("{HEADER}\n{{\"record\":\"reconcile_on\"}}\n")).unwrap_err();
        assert!(e.message.contains("needs \"key\""), "{e}");
    }

    #[test]
    fn a_debounce_round_trips_in_the_header_and_is_left_out_when_off() {
        let text = "{\"reconcile_sim_trace\":2,\"parent\":\"name\",\"debounce_s\":2.5}\n";
        let trace = Trace::parse("d", text).unwrap();
        assert_eq!(trace.header.debounce, Some(Duration::from_millis(2500)));
        let line = trace.header.to_line();
        assert!(line.contains("\"debounce_s\":2.5"), "{line}");
        let again = Trace::parse("d", &format!("{line}\n")).unwrap();
        assert_eq!(again.header, trace.header);
        assert!(!Header::default().to_line().contains("debounce"));
        let e = Trace::parse("d", "{\"reconcile_sim_trace\":2,\"debounce_s\":0}\n").unwrap_err();
        assert!(e.message.contains("debounce_s must be positive"), "{e}");
    }

    #[test]
    fn time_may_not_go_backwards_and_must_be_finite() {
        let text =
            format!("{HEADER}\n{{\"record\":\"stop\",\"t\":5}}\n{{\"record\":\"stop\",\"t\":4}}\n");
        assert!(
            Trace::parse("a", &text)
                .unwrap_err()
                .message
                .contains("backwards")
        );
        let text = format!("{HEADER}\n{{\"record\":\"advance\",\"by_s\":-1}}\n");
        assert!(Trace::parse("a", &text).is_err());
    }

    #[test]
    fn raw_payloads_keep_their_exact_bytes_through_a_round_trip() {
        let frame = r#"{"type":"ADDED","object":{"metadata":{"name":"p","resourceVersion":"7"},  "z":1,"a":2}}"#;
        let text = format!(
            "{HEADER}\n{}\n{{\"record\":\"list\",\"t\":0.5,\"status\":200,\"body\":{{\"b\":1,\"a\":[ 1 ]}}}}\n{{\"record\":\"fault\",\"fault\":\"restart\",\"duration_s\":2}}\n",
            serde_json::json!({"record":"frame","raw":frame})
        );
        let trace = Trace::parse("a", &text).unwrap();
        assert_eq!(
            trace.entries[0].record,
            Record::Frame { line: frame.into() }
        );
        let Record::List { body, .. } = &trace.entries[1].record else {
            panic!()
        };
        assert_eq!(body, r#"{"b":1,"a":[ 1 ]}"#);
        let again = Trace::parse("a", &trace.to_jsonl()).unwrap();
        assert_eq!(again.header, trace.header);
        let records = |t: &Trace| {
            t.entries
                .iter()
                .map(|e| (e.at, e.record.clone()))
                .collect::<Vec<_>>()
        };
        assert_eq!(records(&again), records(&trace));
    }

    #[test]
    fn every_record_is_one_line_whatever_its_payload() {
        let body = "{\"metadata\":{\"resourceVersion\":\"1\"},\n  \"items\":[]}\n";
        let trace = Trace {
            name: "t".into(),
            header: Header::default(),
            entries: vec![
                Entry::new(
                    None,
                    Record::List {
                        status: 200,
                        body: body.into(),
                        transport_error: None,
                    },
                ),
                Entry::new(
                    None,
                    Record::Frame {
                        line: "{\"type\": \"BOOKMARK\"}".into(),
                    },
                ),
                Entry::new(
                    None,
                    Record::Source(SourceOp::Upsert("{\n\"a\": 1}".into())),
                ),
            ],
        };
        let text = trace.to_jsonl();
        assert_eq!(text.lines().count(), 4, "{text}");
        let again = Trace::parse("t", &text).unwrap();
        assert_eq!(
            again.entries[0].record, trace.entries[0].record,
            "exact LIST bytes"
        );
        assert_eq!(
            again.entries[1].record, trace.entries[1].record,
            "exact frame bytes"
        );
    }

    #[test]
    fn fault_flags_parse_with_their_arguments() {
        let e = parse_fault_flag("gone_storm:3@60").unwrap();
        assert_eq!(e.record, Record::Fault(Fault::GoneStorm { count: 3 }));
        assert_eq!(e.at, Some(Instant::from_duration(Duration::from_secs(60))));
        let e = parse_fault_flag("malformed_frame:nocursor@1").unwrap();
        assert_eq!(
            e.record,
            Record::Fault(Fault::MalformedFrame { cursor: false })
        );
        assert!(parse_fault_flag("teleport@1").is_err());
        assert!(parse_fault_flag("watch_drop").is_err());
    }
}
