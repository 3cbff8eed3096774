//! The trace recorder: streamed to disk as the run goes (a crash keeps everything up to the
//! last flush), bounded in bytes, redacted by default, private, and a reconcile's outcome
//! still written before the input that dispatched it. Driven by a core fed by hand, as a
//! driver would, with injected instants.

// Only the paused runtime and `within` are used here.
#[allow(dead_code)]
mod support;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use reconcile_core::pod::PodView;
use reconcile_core::{
    Command, Config, Input, Instant, KeyMap, ListResponse, Object, ObjectKey, Outcome, Output,
    OwnWrite, ReconcileLoop, RequestId, SourceEvent, SourceId, StreamId, Ticket, WatchParams,
};
use reconcile_engine::{
    Action, BoxFuture, Controller, Reconcile, Recorder, Source, SourceResource, TraceRecorder,
    Transport, TransportError, default_error_policy,
};
use reconcile_trace::redact::Redaction;
use reconcile_trace::{Record, Trace, header_for};

/// A core and a recorder fed the same inputs and commands, as the driver feeds them.
struct Drive<O: Object> {
    core: ReconcileLoop<O, ObjectKey>,
    recorder: TraceRecorder<O, ObjectKey>,
    now: Instant,
    list: Option<RequestId>,
    watch: Option<StreamId>,
    source: Option<StreamId>,
    running: Vec<Ticket>,
}

impl<O: Object + Clone + Send + Sync + 'static> Drive<O> {
    fn new(
        config: Config<O, ObjectKey>,
        path: &Path,
        change: impl FnOnce(TraceRecorder<O, ObjectKey>) -> TraceRecorder<O, ObjectKey>,
    ) -> Self {
        let header = header_for("recorder test", &config);
        let mut drive = Drive {
            core: ReconcileLoop::new(config, Instant::ZERO).unwrap(),
            recorder: change(TraceRecorder::new(path, header)),
            now: Instant::ZERO,
            list: None,
            watch: None,
            source: None,
            running: Vec::new(),
        };
        drive.feed(0.0, Input::Start);
        drive
    }

    fn feed(&mut self, at: f64, input: Input<O>) {
        self.now = Instant::from_duration(Duration::from_secs_f64(at));
        self.recorder.input(self.now, &input);
        self.core.handle_input(self.now, input);
        loop {
            match self.core.poll_output() {
                Output::Command(command) => {
                    self.recorder.command(self.now, &command);
                    match command {
                        Command::List { req, .. } => self.list = Some(req),
                        Command::Watch { stream, .. } => self.watch = Some(stream),
                        Command::OpenSource { stream } => self.source = Some(stream),
                        Command::Reconcile { ticket, .. } => self.running.push(ticket),
                        _ => {}
                    }
                }
                Output::Timeout(_) => break,
                Output::Event(_) => {}
            }
        }
    }

    fn list(&mut self, at: f64, body: &str) {
        let req = self.list.take().expect("a LIST asked for");
        self.feed(
            at,
            Input::List {
                req,
                response: ListResponse::Response {
                    status: 200,
                    body: body.to_owned().into(),
                },
            },
        );
        let stream = self.watch.expect("a WATCH asked for");
        self.feed(at, Input::WatchOpened { stream });
    }

    fn frame(&mut self, at: f64, line: &str) {
        let stream = self.watch.expect("a watch");
        self.feed(
            at,
            Input::WatchLine {
                stream,
                line: line.to_owned().into(),
            },
        );
    }

    fn finish_oldest(&mut self, at: f64) {
        let ticket = self.running.remove(0);
        self.feed(
            at,
            Input::Reconciled {
                ticket,
                outcome: Outcome::Success,
            },
        );
    }
}

fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("reconcile-recorder-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    let _ = std::fs::remove_file(&path);
    path
}

fn read(path: &Path) -> (String, Trace) {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let trace = Trace::parse(&path.display().to_string(), &text)
        .unwrap_or_else(|e| panic!("{}: {e}\n{text}", path.display()));
    (text, trace)
}

fn pod(name: &str, rv: u64) -> String {
    format!(
        r#"{{"metadata":{{"name":"{name}","namespace":"ns","resourceVersion":"{rv}","managedFields":[{{"manager":"kubectl"}}]}}}}"#
    )
}

fn pod_list(rv: u64, pods: &[String]) -> String {
    format!(
        r#"{{"kind":"PodList","apiVersion":"v1","metadata":{{"resourceVersion":"{rv}"}},"items":[{}]}}"#,
        pods.join(",")
    )
}

fn pods() -> Config<PodView, ObjectKey> {
    Config::kubernetes(WatchParams::namespaced("ns"), KeyMap::by_object())
}

#[test]
fn records_reach_the_file_while_the_run_goes_and_a_crash_keeps_them() {
    let path = temp("streamed.jsonl");
    let mut d = Drive::new(pods(), &path, |r| r);
    d.list(0.5, &pod_list(10, &[pod("a", 5)]));
    d.finish_oldest(0.6);
    for i in 0..20u64 {
        let at = 1.0 + i as f64 * 0.1;
        d.frame(
            at,
            &format!(r#"{{"type":"MODIFIED","object":{}}}"#, pod("a", 11 + i)),
        );
        d.finish_oldest(at + 0.05);
    }
    // No finish: the process "dies" here. Everything up to the last flush (each second of
    // the run) is on disk, each line whole.
    let (_, trace) = read(&path);
    let frames = trace
        .entries
        .iter()
        .filter(|e| matches!(e.record, Record::Frame { .. }))
        .count();
    assert!(frames >= 10, "frames on disk before the end: {frames}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "the trace is private");
    }
    drop(d);

    // With the end: every frame, and each reconcile's script before the input that
    // dispatched it.
    let path = temp("finished.jsonl");
    let mut d = Drive::new(pods(), &path, |r| r);
    d.list(0.5, &pod_list(10, &[pod("a", 5)]));
    d.frame(
        0.7,
        &format!(r#"{{"type":"MODIFIED","object":{}}}"#, pod("a", 11)),
    );
    d.finish_oldest(0.8);
    d.finish_oldest(0.9);
    d.recorder.finish(d.now);
    let (text, trace) = read(&path);
    let kinds: Vec<&str> = trace
        .entries
        .iter()
        .map(|e| match &e.record {
            Record::List { .. } => "list",
            Record::Watch { .. } => "watch",
            Record::Frame { .. } => "frame",
            Record::Reconcile { .. } => "reconcile",
            _ => "other",
        })
        .collect();
    assert_eq!(
        kinds,
        ["reconcile", "list", "watch", "reconcile", "frame"],
        "{text}"
    );
    assert!(
        !text.contains("\"managedFields\":"),
        "dropped by default: {text}"
    );
}

#[test]
fn a_secret_value_is_never_written_unless_asked_for() {
    let value = "c3VwZXItc2VjcmV0LXBhc3N3b3Jk"; // base64 of super-secret-password
    let secret = |rv: u64| {
        format!(
            r#"{{"kind":"Secret","apiVersion":"v1","metadata":{{"name":"s","namespace":"ns","resourceVersion":"{rv}"}},"data":{{"password":"{value}"}},"stringData":{{"token":"plain-token"}}}}"#
        )
    };
    let list = format!(
        r#"{{"kind":"SecretList","apiVersion":"v1","metadata":{{"resourceVersion":"10"}},"items":[{}]}}"#,
        secret(5)
    );
    let frame = format!(r#"{{"type":"MODIFIED","object":{}}}"#, secret(11));
    let config = || {
        Config::<Secret, ObjectKey>::kubernetes(WatchParams::namespaced("ns"), KeyMap::by_object())
    };
    for (redacted, name) in [
        (true, "secret-redacted.jsonl"),
        (false, "secret-plain.jsonl"),
    ] {
        let path = temp(name);
        let mut d = Drive::new(config(), &path, |r| {
            if redacted {
                r
            } else {
                r.redaction(Redaction::none())
            }
        });
        d.list(0.5, &list);
        d.frame(0.7, &frame);
        d.recorder.finish(d.now);
        let (text, trace) = read(&path);
        assert_eq!(trace.entries.len(), 3, "list, watch, frame: {text}");
        assert_eq!(text.contains(value), !redacted, "{text}");
        assert_eq!(text.contains("plain-token"), !redacted, "{text}");
    }
}

#[test]
fn the_file_stops_at_its_byte_bound_and_stays_a_readable_prefix() {
    let path = temp("bounded.jsonl");
    let mut d = Drive::new(pods(), &path, |r| r.max_bytes(4096));
    d.list(0.5, &pod_list(10, &[pod("a", 5)]));
    for i in 0..200u64 {
        d.frame(
            1.0 + i as f64,
            &format!(r#"{{"type":"MODIFIED","object":{}}}"#, pod("a", 11 + i)),
        );
        d.finish_oldest(1.5 + i as f64);
    }
    d.recorder.finish(d.now);
    let (text, trace) = read(&path);
    assert!(text.len() <= 4096, "{} bytes", text.len());
    assert!(trace.entries.len() > 5, "a prefix, not nothing");
}

#[test]
fn a_reconcile_that_wrote_is_written_with_its_writes() {
    // Read your own writes: the outcome goes with what the run wrote, so a replay holds the
    // key as the run did.
    let path = temp("wrote.jsonl");
    let mut d = Drive::new(
        pods().read_own_writes(Some(Duration::from_secs(9))),
        &path,
        |r| r,
    );
    d.list(0.5, &pod_list(10, &[pod("a", 5)]));
    let ticket = d.running.remove(0);
    d.feed(
        0.6,
        Input::ReconciledWrote {
            ticket,
            outcome: Outcome::Success,
            writes: vec![OwnWrite::new(SourceId::PRIMARY, "20")],
        },
    );
    d.recorder.finish(d.now);
    let (text, trace) = read(&path);
    let writes: Vec<&Vec<OwnWrite>> = trace
        .entries
        .iter()
        .filter_map(|e| match &e.record {
            Record::Reconcile { writes, .. } => Some(writes),
            _ => None,
        })
        .collect();
    assert_eq!(
        writes,
        [&vec![OwnWrite::new(SourceId::PRIMARY, "20")]],
        "{text}"
    );
    assert_eq!(
        trace.header.read_own_writes,
        Some(Duration::from_secs(9)),
        "{text}"
    );
}

#[test]
fn a_reconcile_that_outlasts_the_hold_is_written_without_its_outcome() {
    let path = temp("held.jsonl");
    let mut d = Drive::new(pods(), &path, |r| r.max_held(8));
    d.list(0.5, &pod_list(10, &[pod("a", 5), pod("b", 6)]));
    // a's reconcile hangs; b's frames keep coming. The hold is bounded.
    for i in 0..30u64 {
        d.frame(
            1.0 + i as f64,
            &format!(r#"{{"type":"MODIFIED","object":{}}}"#, pod("b", 11 + i)),
        );
    }
    let (_, trace) = read(&path);
    assert!(
        trace.entries.len() >= 20,
        "written past the hung reconcile: {}",
        trace.entries.len()
    );
}

#[test]
fn in_process_events_are_written_when_the_objects_can_be() {
    let path = temp("in-process.jsonl");
    let config = Config::<Secret, ObjectKey>::in_process(KeyMap::by_object());
    let mut d = Drive::new(config, &path, |r| {
        r.objects_as_json(|s: &Secret| serde_json::to_string(s).ok())
    });
    let stream = d.source.expect("the source opened");
    let secret: Secret = serde_json::from_str(
        r#"{"metadata":{"name":"s","namespace":"ns","resourceVersion":"1"},"data":{"k":"aGlkZGVu"}}"#,
    )
    .unwrap();
    d.feed(
        0.5,
        Input::SourceEvent {
            stream,
            event: SourceEvent::Replace(vec![secret]),
        },
    );
    d.finish_oldest(0.6);
    d.recorder.finish(d.now);
    let (text, trace) = read(&path);
    assert!(
        trace
            .entries
            .iter()
            .any(|e| matches!(&e.record, Record::Source(_))),
        "{text}"
    );
    assert!(!text.contains("aGlkZGVu"), "redacted: {text}");
}

/// The findings of issue 31 on the recorder: a metadata-only Secret source
/// (`PartialObjectMeta<Secret>`, the `secret-metadata` example's) kept each Secret's
/// last-applied-configuration annotation, which holds its data, because the recorder was
/// never told the source was Secrets and `PartialObjectMetadata` passed untouched.
#[test]
fn a_metadata_only_secret_source_keeps_no_last_applied_annotation() {
    use kube_core_types::*;
    let marker = "bWV0YWRhdGEtb25seS1zZWNyZXQ="; // base64 of metadata-only-secret
    let item = |name: &str, rv: u64| {
        format!(
            r#"{{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{{"name":"{name}","namespace":"ns","resourceVersion":"{rv}","annotations":{{"kubectl.kubernetes.io/last-applied-configuration":"{{\"apiVersion\":\"v1\",\"data\":{{\"password\":\"{marker}\"}},\"kind\":\"Secret\",\"metadata\":{{\"name\":\"{name}\"}}}}\n"}},"managedFields":[{{"manager":"kubectl-client-side-apply","fieldsV1":{{"f:data":{{"f:password":{{}}}}}}}}]}}}}"#
        )
    };
    let list = format!(
        r#"{{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1","metadata":{{"resourceVersion":"10"}},"items":[{}]}}"#,
        item("s", 5)
    );
    let config = Config::<SecretMeta, ObjectKey>::kubernetes(
        WatchParams::namespaced("ns"),
        KeyMap::by_object(),
    );
    let path = temp("secret-metadata.jsonl");
    let mut d = Drive::new(config, &path, |mut r| {
        // What the controller tells it before the run (checked below).
        Recorder::<SecretMeta, ObjectKey>::sources(
            &mut r,
            &[SourceResource::of_url(
                "/api/v1/namespaces/ns/secrets",
                Some("Secret"),
                true,
            )],
        );
        r
    });
    d.list(0.5, &list);
    d.frame(
        0.7,
        &format!(r#"{{"type":"MODIFIED","object":{}}}"#, item("s", 11)),
    );
    d.recorder.finish(d.now);
    let (text, trace) = read(&path);
    assert_eq!(trace.entries.len(), 3, "list, watch, frame: {text}");
    assert!(!text.contains(marker), "{text}");
    assert!(
        !text.contains("\"managedFields\":") && !text.contains("\\\"managedFields\\\""),
        "{text}"
    );
    assert!(text.contains("<redacted>"), "{text}");
}

/// The recorder's half of a metadata-only source for the test above.
mod kube_core_types {
    /// A Secret's metadata, as `secret-metadata` watches it.
    pub type SecretMeta = kube_core::PartialObjectMeta<k8s_openapi::api::core::v1::Secret>;
}

/// Remembers what the controller told it of its sources.
struct Spy(Arc<Mutex<Vec<SourceResource>>>);

impl<O, P> Recorder<O, P> for Spy {
    fn input(&mut self, _: Instant, _: &Input<O>) {}
    fn command(&mut self, _: Instant, _: &Command<O, P>) {}
    fn sources(&mut self, sources: &[SourceResource]) {
        *self.0.lock().unwrap() = sources.to_vec();
    }
}

/// A transport that answers nothing.
#[derive(Clone)]
struct Refusing;

impl Transport for Refusing {
    fn send(
        &self,
        _: http::Request<Vec<u8>>,
    ) -> BoxFuture<Result<http::Response<reconcile_engine::BodyStream>, TransportError>> {
        Box::pin(async { Err(TransportError::new("refused")) })
    }
}

#[tokio::test(start_paused = true)]
async fn the_controller_tells_its_recorder_each_sources_resource() {
    use kube_core_types::SecretMeta;
    let runtime = support::paused().await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let primary = Source::<SecretMeta, Refusing>::namespaced(Refusing, "ns");
    let configmaps = Source::<k8s_openapi::api::core::v1::ConfigMap, Refusing>::all(Refusing);
    let secrets = Source::<Secret, Refusing>::kubernetes(
        Refusing,
        "/api/v1/namespaces/ns/secrets",
        WatchParams::namespaced("ns"),
    );
    let controller = Controller::for_objects_with(runtime, primary)
        .watches(configmaps, |_| Vec::new())
        .watches(secrets, |_| Vec::new())
        .recorder(Spy(Arc::clone(&seen)))
        .graceful_shutdown_on(async {});
    let _ = support::within(
        "the run",
        controller.run(
            |_: Reconcile<SecretMeta, ObjectKey>, _: Arc<()>| async {
                Ok::<_, std::convert::Infallible>(Action::await_change())
            },
            default_error_policy,
            Arc::new(()),
        ),
    )
    .await;
    let seen = seen.lock().unwrap().clone();
    let secrets: Vec<bool> = seen.iter().map(SourceResource::is_secrets).collect();
    assert_eq!(secrets, [true, false, true], "{seen:?}");
    assert!(seen[0].metadata_only && seen[0].kind.as_deref() == Some("Secret"));
    assert_eq!(seen[1].plural.as_deref(), Some("configmaps"));
    assert_eq!(seen[2].kind, None, "a hand-made URL: known by its plural");
}

/// A recorder that replaces a file kept that file's mode (0644): the trace is 0600 however
/// it came to be.
#[cfg(unix)]
#[test]
fn a_trace_that_replaces_a_file_is_private_too() {
    use std::os::unix::fs::PermissionsExt;
    let path = temp("overwritten.jsonl");
    std::fs::write(&path, "an older trace\n").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let mut d = Drive::new(pods(), &path, |r| r);
    d.list(0.5, &pod_list(10, &[pod("a", 5)]));
    d.recorder.finish(d.now);
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let (text, _) = read(&path);
    assert!(!text.contains("an older trace"), "{text}");
}

#[test]
fn a_reconcile_on_trigger_is_recorded_with_its_key_before_the_run_it_dispatched() {
    let path = temp("reconcile_on.jsonl");
    let mut d = Drive::new(pods(), &path, |r| r);
    d.list(0.5, &pod_list(10, &[pod("a", 5), pod("b", 6)]));
    d.finish_oldest(0.6);
    d.finish_oldest(0.7);
    d.feed(
        1.0,
        Input::ReconcileOn {
            object: ObjectKey::new(Some("ns"), "b"),
        },
    );
    d.finish_oldest(1.1);
    d.recorder.finish(d.now);
    let (text, trace) = read(&path);
    let at = trace
        .entries
        .iter()
        .position(|e| e.record == Record::ReconcileOn { key: "ns/b".into() })
        .unwrap_or_else(|| panic!("no reconcile_on record:\n{text}"));
    assert!(
        matches!(&trace.entries[at - 1].record, Record::Reconcile { parent: Some(p), .. } if p == "ns/b"),
        "the run's script comes before the trigger that dispatched it:\n{text}"
    );
}
