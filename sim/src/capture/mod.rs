//! `reconcile-sim capture`: record what a cluster sends for one resource type, as a trace.
//!
//! A capture is a controller run with nothing to do: the engine's own LIST / WATCH machinery
//! (the same [`reconcile_engine::Controller`] every driver runs, over any
//! [`Runtime`] and [`Transport`]) keeps a cache of the resource with a reconcile that does
//! nothing, and a [`Recorder`] writes every input the driver fed the core and every command
//! it issued. So the trace holds the conversation exactly as the core had it: every LIST, every
//! WATCH from its cursor, each line as received (bookmarks and ERROR frames included), each
//! stream end with its status, every relist; `reconcile-sim replay` feeds the same inputs to
//! the same core and must reach the same state with no divergence.
//!
//! Payloads are redacted before they are written, through the path every trace writer takes
//! ([`reconcile_trace::redact::Redaction::entry`]): by default Secret values are masked and
//! managedFields dropped, and fields named by a JSONPath become digests. The trace is
//! **streamed**: the engine's [`TraceRecorder`] writes each record to `OUT` as it is final
//! and flushes after every input, so the file on disk is a valid trace at every moment (a
//! prefix of the run, each line whole) and a stop (after `--duration`, on SIGINT, SIGTERM or
//! SIGHUP, or when the caller's stop future completes) ends it cleanly: the run stops
//! gracefully and the recorder writes what it still held. The file is 0600 (owner only),
//! also when it replaces one.
//!
//! Memory is bounded: nothing is kept but what waits for a reconcile's outcome. The file is
//! bounded by [`CaptureOptions::max_records`] and [`CaptureOptions::max_bytes`]; a capture
//! past them keeps its prefix and [`CaptureSummary::truncated`] says so.

pub mod discovery;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use kube_core::{ApiResource, DynamicObject};
use reconcile_core::{Command, Input, Instant, ListResponse, ObjectKey};
use reconcile_engine::{
    Action, Controller, Reconcile, Recorder, Runtime, Source, SourceResource, TraceRecorder,
    Transport, default_error_policy,
};
use reconcile_trace::redact::Redaction;

pub use discovery::{ResolvedResource, ResourceSpec};

/// Records a capture writes by default.
pub const DEFAULT_MAX_RECORDS: usize = 2_000_000;
/// Bytes a capture writes by default.
pub const DEFAULT_MAX_BYTES: usize = 1 << 30;

/// What to capture and how.
#[derive(Debug, Clone)]
pub struct CaptureOptions {
    /// The resource type: a plural name (`pods`, `deployments.apps`) or group/version/kind
    /// (`v1/Pod`, `apps/v1/Deployment`).
    pub resource: ResourceSpec,
    /// The namespace; all namespaces when `None` (for a cluster-scoped type, ignored).
    pub namespace: Option<String>,
    /// Server-side label selector.
    pub label_selector: Option<String>,
    /// Server-side field selector.
    pub field_selector: Option<String>,
    /// `timeoutSeconds` on every WATCH; the engine's default (300) when `None`.
    pub watch_timeout: Option<u32>,
    /// What is redacted.
    pub redaction: Redaction,
    /// Where the trace goes.
    pub output: PathBuf,
    /// Records written at most.
    pub max_records: usize,
    /// Bytes written at most.
    pub max_bytes: usize,
}

impl CaptureOptions {
    /// Captures `resource` into `output` with the defaults: all namespaces, no selector,
    /// redaction on.
    #[must_use]
    pub fn new(resource: ResourceSpec, output: impl Into<PathBuf>) -> Self {
        CaptureOptions {
            resource,
            namespace: None,
            label_selector: None,
            field_selector: None,
            watch_timeout: None,
            redaction: Redaction::default(),
            output: output.into(),
            max_records: DEFAULT_MAX_RECORDS,
            max_bytes: DEFAULT_MAX_BYTES,
        }
    }
}

/// Why a capture failed.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// The resource type could not be found.
    #[error("{0}")]
    Discovery(#[from] discovery::DiscoveryError),
    /// The controller could not run.
    #[error("capturing {resource}: {error}")]
    Controller {
        /// The resource.
        resource: String,
        /// What the engine said.
        error: reconcile_engine::Error,
    },
    /// The trace could not be written.
    #[error("{path}: {error}")]
    Write {
        /// The file.
        path: PathBuf,
        /// What failed.
        error: String,
    },
    /// The run ended without the recorder being told (an engine bug).
    #[error("{0}: the capture ended without writing its trace")]
    NotWritten(PathBuf),
}

/// Counters a capture updates as it goes, for a progress display.
#[derive(Debug, Default)]
pub struct Counters {
    frames: AtomicU64,
    bytes: AtomicU64,
    lists: AtomicU64,
    watches: AtomicU64,
    stream_ends: AtomicU64,
    records: AtomicU64,
    unredactable: AtomicU64,
}

/// A snapshot of [`Counters`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Progress {
    /// Watch lines received (events, bookmarks and ERROR frames).
    pub frames: u64,
    /// Payload bytes received (LIST bodies, watch lines, error bodies), before redaction.
    pub bytes: u64,
    /// LISTs issued.
    pub lists: u64,
    /// Relists: LISTs after the first (a dead cursor, an undecodable frame, a failed LIST).
    pub relists: u64,
    /// WATCHes issued.
    pub watches: u64,
    /// WATCH streams that ended (cleanly, with a status or an error).
    pub stream_ends: u64,
    /// Records kept.
    pub records: u64,
    /// Payloads that could not be inspected for redaction and were replaced whole.
    pub unredactable: u64,
}

impl Counters {
    /// The current values.
    #[must_use]
    pub fn snapshot(&self) -> Progress {
        let lists = self.lists.load(Ordering::Relaxed);
        Progress {
            frames: self.frames.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            lists,
            relists: lists.saturating_sub(1),
            watches: self.watches.load(Ordering::Relaxed),
            stream_ends: self.stream_ends.load(Ordering::Relaxed),
            records: self.records.load(Ordering::Relaxed),
            unredactable: self.unredactable.load(Ordering::Relaxed),
        }
    }
}

/// What a finished capture wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaptureSummary {
    /// The trace file.
    pub path: PathBuf,
    /// The final counters.
    pub progress: Progress,
    /// Whether the tape's limits cut the capture short (its prefix was written).
    pub truncated: bool,
    /// The resource captured.
    pub resource: ResolvedResource,
}

/// A capture ready to run: the resource resolved, the controller built.
pub struct Capture<R: Runtime, T: Transport> {
    controller: Controller<DynamicObject, ObjectKey, R, T>,
    counters: Arc<Counters>,
    written: Arc<Mutex<Option<Result<bool, String>>>>,
    resource: ResolvedResource,
    output: PathBuf,
}

impl<R: Runtime, T: Transport> std::fmt::Debug for Capture<R, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Capture")
            .field("resource", &self.resource)
            .field("output", &self.output)
            .finish_non_exhaustive()
    }
}

/// Resolves the resource through the apiserver's discovery and builds the capture.
///
/// # Errors
/// The resource type is unknown, or discovery failed.
pub async fn prepare<R: Runtime, T: Transport>(
    runtime: R,
    transport: T,
    opts: &CaptureOptions,
) -> Result<Capture<R, T>, CaptureError> {
    let resource = discovery::resolve(&runtime, &transport, &opts.resource).await?;
    let api = ApiResource {
        group: resource.group.clone(),
        version: resource.version.clone(),
        api_version: resource.api_version(),
        kind: resource.kind.clone(),
        plural: resource.plural.clone(),
    };
    let namespace = opts.namespace.as_deref().filter(|_| resource.namespaced);
    let mut source = match namespace {
        Some(ns) => Source::<DynamicObject, T>::namespaced_with(transport, ns, &api),
        None => Source::<DynamicObject, T>::all_with(transport, &api),
    };
    if let Some(l) = &opts.label_selector {
        source = source.labels(l.clone());
    }
    if let Some(f) = &opts.field_selector {
        source = source.fields(f.clone());
    }
    if let Some(t) = opts.watch_timeout {
        source = source.timeout(t);
    }
    let controller = Controller::for_objects_with(runtime, source);
    let redaction = opts
        .redaction
        .clone()
        .resource_is_secret(resource.group.is_empty() && resource.kind == "Secret");
    let description = format!(
        "captured by reconcile-sim capture: {} ({}) in {}{}{}{}",
        resource.plural,
        resource.api_version(),
        namespace.unwrap_or("all namespaces"),
        opts.label_selector
            .as_deref()
            .map_or(String::new(), |l| format!(", labels {l}")),
        opts.field_selector
            .as_deref()
            .map_or(String::new(), |f| format!(
                ", fields {f} (not simulated in world mode)"
            )),
        // The recorder adds what it redacted; with nothing redacted, this says so.
        if redaction.is_enabled() {
            String::new()
        } else {
            format!("; {}", redaction.describe())
        }
    );
    let header = reconcile_trace::header_for(&description, controller.config());
    let counters = Arc::new(Counters::default());
    let written = Arc::new(Mutex::new(None));
    let recorder = CaptureRecorder {
        trace: TraceRecorder::new(&opts.output, header)
            .redaction(redaction)
            .max_bytes(u64::try_from(opts.max_bytes).unwrap_or(u64::MAX))
            .flush_every(Duration::ZERO),
        max_records: opts.max_records as u64,
        counters: Arc::clone(&counters),
        written: Arc::clone(&written),
        finished: AtomicBool::new(false),
    };
    Ok(Capture {
        controller: controller.recorder(recorder),
        counters,
        written,
        resource,
        output: opts.output.clone(),
    })
}

impl<R: Runtime, T: Transport> Capture<R, T> {
    /// The counters, to show progress while [`Capture::run_until`] runs.
    #[must_use]
    pub fn counters(&self) -> Arc<Counters> {
        Arc::clone(&self.counters)
    }

    /// The resource being captured.
    #[must_use]
    pub fn resource(&self) -> &ResolvedResource {
        &self.resource
    }

    /// Captures until `stop` completes, then writes the trace.
    ///
    /// # Errors
    /// The controller could not run, or the trace could not be written.
    pub async fn run_until(
        self,
        stop: impl Future<Output = ()> + Send + 'static,
    ) -> Result<CaptureSummary, CaptureError> {
        let Capture {
            controller,
            counters,
            written,
            resource,
            output,
        } = self;
        controller
            .graceful_shutdown_on(stop)
            .run(
                |_request: Reconcile<DynamicObject, ObjectKey>, _ctx: Arc<()>| async {
                    Ok::<_, std::convert::Infallible>(Action::await_change())
                },
                default_error_policy,
                Arc::new(()),
            )
            .await
            .map_err(|error| CaptureError::Controller {
                resource: resource.plural.clone(),
                error,
            })?;
        let result = written
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        match result {
            Some(Ok(truncated)) => Ok(CaptureSummary {
                path: output,
                progress: counters.snapshot(),
                truncated,
                resource,
            }),
            Some(Err(error)) => Err(CaptureError::Write {
                path: output,
                error,
            }),
            None => Err(CaptureError::NotWritten(output)),
        }
    }
}

/// The recorder behind a capture: counts, and streams the run to the file through the
/// engine's [`TraceRecorder`] (redacted, bounded, private, flushed after every input).
struct CaptureRecorder {
    trace: TraceRecorder<DynamicObject, ObjectKey>,
    max_records: u64,
    counters: Arc<Counters>,
    written: Arc<Mutex<Option<Result<bool, String>>>>,
    finished: AtomicBool,
}

impl CaptureRecorder {
    fn count(&self, input: &Input<DynamicObject>) {
        let c = &self.counters;
        match input {
            Input::List {
                response: ListResponse::Response { body, .. },
                ..
            } => {
                c.bytes.fetch_add(body.len() as u64, Ordering::Relaxed);
            }
            Input::WatchLine { line, .. } => {
                c.frames.fetch_add(1, Ordering::Relaxed);
                c.bytes.fetch_add(line.len() as u64, Ordering::Relaxed);
            }
            Input::WatchEnd { end, .. } => {
                c.stream_ends.fetch_add(1, Ordering::Relaxed);
                if let reconcile_core::StreamEnd::HttpStatus { body, .. } = end {
                    c.bytes.fetch_add(body.len() as u64, Ordering::Relaxed);
                }
            }
            _ => {}
        }
    }

    /// Whether the record bound is reached: what comes after is not written.
    fn full(&self) -> bool {
        self.counters.records.load(Ordering::Relaxed) >= self.max_records
    }
}

impl Recorder<DynamicObject, ObjectKey> for CaptureRecorder {
    fn sources(&mut self, sources: &[SourceResource]) {
        Recorder::<DynamicObject, ObjectKey>::sources(&mut self.trace, sources);
    }

    fn input(&mut self, now: Instant, input: &Input<DynamicObject>) {
        self.count(input);
        if self.full() {
            return;
        }
        self.counters.records.fetch_add(1, Ordering::Relaxed);
        self.trace.input(now, input);
        self.counters
            .unredactable
            .store(self.trace.withheld(), Ordering::Relaxed);
    }

    fn command(&mut self, now: Instant, command: &Command<DynamicObject, ObjectKey>) {
        match command {
            Command::List { .. } => {
                self.counters.lists.fetch_add(1, Ordering::Relaxed);
            }
            Command::Watch { .. } => {
                self.counters.watches.fetch_add(1, Ordering::Relaxed);
            }
            _ => {}
        }
        if self.full() {
            return;
        }
        self.counters.records.fetch_add(1, Ordering::Relaxed);
        self.trace.command(now, command);
    }

    fn finish(&mut self, now: Instant) {
        if self.finished.swap(true, Ordering::Relaxed) {
            return;
        }
        self.trace.finish(now);
        self.counters
            .unredactable
            .store(self.trace.withheld(), Ordering::Relaxed);
        let result = match self.trace.failure() {
            Some(e) => Err(e.to_owned()),
            None => Ok(self.trace.cut_short() || self.full()),
        };
        *self.written.lock().unwrap_or_else(PoisonError::into_inner) = Some(result);
    }
}

/// Writes `bytes` to `path` through `path.partial`, created with mode 0600 (owner only) on
/// Unix, then renamed into place ([`reconcile_trace::write_private`]).
///
/// # Errors
/// The directory or file could not be written.
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    reconcile_trace::write_private(path, bytes)
}

/// A stop future for [`Capture::run_until`] that completes after `duration` on `runtime`.
pub fn after<R: Runtime>(runtime: &R, duration: Duration) -> impl Future<Output = ()> + use<R> {
    let deadline = runtime.now() + duration;
    runtime.sleep_until(deadline)
}
