//! The driver against a scripted in-memory transport: lifecycle, stop from inside a
//! reconcile, panics, the read-idle timeout, in-process pushes. Real time, short delays;
//! every wait is a condition with a timeout.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures_lite::StreamExt;
use reconcile_core::pod::PodView;
use reconcile_core::{Command, Input, KeyMap, ListResponse};
use reconcile_tokio::engine::{
    BodyStream, BoxFuture, Controller, Handle, Limits, Recorded, Source, Tape, Transport,
    TransportError,
};
use reconcile_tokio::{Action, TokioRuntime};

const LIST: &str = r#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"10"},"items":[
  {"metadata":{"name":"p1","namespace":"ns","resourceVersion":"5","labels":{"cell":"a"}}},
  {"metadata":{"name":"p2","namespace":"ns","resourceVersion":"6","labels":{"cell":"b"}}}]}"#;

/// Answers every LIST with [`LIST`] and every WATCH with `watch_lines`, then keeps the
/// stream open and silent.
#[derive(Clone, Default)]
struct Scripted {
    watch_lines: Vec<String>,
    watches: Arc<AtomicUsize>,
    /// Sends the LIST body in chunks of this many bytes (0: whole).
    list_chunk: usize,
    /// Answers LIST with this body instead of [`LIST`].
    list_body: Option<&'static str>,
}

impl Transport for Scripted {
    fn send(
        &self,
        request: http::Request<Vec<u8>>,
    ) -> BoxFuture<Result<http::Response<BodyStream>, TransportError>> {
        let watch = request.uri().query().unwrap_or("").contains("watch=true");
        let chunks: Vec<Result<Bytes, TransportError>> = if watch {
            self.watches.fetch_add(1, Ordering::SeqCst);
            self.watch_lines
                .iter()
                .map(|l| Ok(Bytes::from(format!("{l}\n"))))
                .collect()
        } else {
            let body = self.list_body.unwrap_or(LIST).as_bytes();
            body.chunks(if self.list_chunk == 0 {
                body.len().max(1)
            } else {
                self.list_chunk
            })
            .map(|c| Ok(Bytes::copy_from_slice(c)))
            .collect()
        };
        let body: BodyStream = if watch {
            Box::pin(futures_lite::stream::iter(chunks).chain(futures_lite::stream::pending()))
        } else {
            Box::pin(futures_lite::stream::iter(chunks))
        };
        Box::pin(async move {
            Ok(http::Response::builder()
                .status(200)
                .body(body)
                .expect("a response"))
        })
    }
}

fn controller(transport: Scripted) -> Controller<PodView, String, TokioRuntime, Scripted> {
    let source = Source::pods(transport, Some("ns")).timeout(1);
    Controller::with_runtime(TokioRuntime, source, KeyMap::by_label("cell"))
        .retry_delay(Duration::from_millis(20))
        .backoff(Duration::from_millis(10), Duration::from_millis(100))
        .concurrency(2)
}

async fn until(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !check() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

type Seen = Arc<Mutex<BTreeMap<String, Vec<String>>>>;

fn names(members: &[Arc<PodView>]) -> Vec<String> {
    members
        .iter()
        .filter_map(|p| p.metadata.name.as_deref().map(str::to_owned))
        .collect()
}

/// Starts a controller on `transport` whose reconciles record each cell's members.
async fn start_recording(
    transport: Scripted,
) -> (reconcile_tokio::Running<PodView, TokioRuntime>, Seen) {
    let seen: Seen = Arc::default();
    let running = controller(transport)
        .start(
            |cell: String, members: Vec<Arc<PodView>>, seen: Seen| async move {
                seen.lock().unwrap().insert(cell, names(&members));
                Ok::<_, String>(Action::await_change())
            },
            Arc::clone(&seen),
        )
        .await
        .expect("synced");
    (running, seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_returns_synced_and_reconciles_every_cell() {
    let (running, seen) = start_recording(Scripted::default()).await;
    assert!(running.handle().is_synced());
    until("both cells reconciled", || seen.lock().unwrap().len() == 2).await;
    assert_eq!(seen.lock().unwrap()["a"], ["p1"]);
    running.shutdown().await.expect("a clean stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_body_in_small_chunks_is_decoded_as_it_arrives() {
    // 7 bytes at a time: every chunk edge falls inside a name, a string or a number.
    let transport = Scripted {
        list_chunk: 7,
        ..Scripted::default()
    };
    let (running, seen) = start_recording(transport).await;
    until("both cells reconciled", || seen.lock().unwrap().len() == 2).await;
    assert_eq!(seen.lock().unwrap()["b"], ["p2"]);
    assert_eq!(running.handle().cursor().as_deref(), Some("10"));
    running.shutdown().await.expect("a clean stop");
}

/// Runs a controller until it has sent `lists` LISTs, and checks that it never synced.
async fn lists_without_syncing(
    controller: Controller<PodView, String, TokioRuntime, Scripted>,
    lists: u64,
) {
    let handle = controller.handle();
    let task = tokio::spawn(controller.run(
        |_: String, _: Vec<Arc<PodView>>, _: Arc<()>| async {
            Ok::<_, String>(Action::await_change())
        },
        Arc::new(()),
    ));
    until("the LIST retried", || handle.stats().lists >= lists).await;
    assert!(!handle.is_synced());
    handle.stop();
    task.await.expect("joined").expect("a clean stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_body_over_the_limit_fails_the_list_and_it_is_retried() {
    let transport = Scripted {
        list_chunk: 16,
        ..Scripted::default()
    };
    let controller = controller(transport).limits(Limits {
        max_list_body: 100,
        ..Limits::default()
    });
    lists_without_syncing(controller, 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_body_broken_midway_fails_the_list_and_it_is_retried() {
    let transport = Scripted {
        list_chunk: 5,
        list_body: Some(
            r#"{"metadata":{"resourceVersion":"3"},"items":[{"metadata":{"name":"x"}},{"metadata":}]}"#,
        ),
        ..Scripted::default()
    };
    lists_without_syncing(controller(transport), 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_from_inside_a_reconcile_ends_the_run() {
    let controller = controller(Scripted::default());
    let handle = controller.handle();
    let run = controller.run(
        |_cell: String, _members: Vec<Arc<PodView>>, handle: Arc<Handle<PodView>>| async move {
            handle.stop();
            Ok::<_, String>(Action::await_change())
        },
        Arc::new(handle.clone()),
    );
    tokio::time::timeout(Duration::from_secs(10), run)
        .await
        .expect("run ends after a stop from inside reconcile")
        .expect("a clean stop");
    assert!(handle.is_stopped());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_reconcile_fails_and_is_retried() {
    let calls = Arc::new(AtomicUsize::new(0));
    let controller = controller(Scripted::default());
    let handle = controller.handle();
    let task = tokio::spawn(controller.run(
        |cell: String, _members: Vec<Arc<PodView>>, calls: Arc<AtomicUsize>| async move {
            if cell == "a" && calls.fetch_add(1, Ordering::SeqCst) == 0 {
                panic!("first attempt of a panics");
            }
            Ok::<_, String>(Action::await_change())
        },
        Arc::clone(&calls),
    ));
    until("a retried after its panic", || {
        calls.load(Ordering::SeqCst) >= 2
    })
    .await;
    assert!(handle.stats().reconcile_errors >= 1, "{:?}", handle.stats());
    handle.stop();
    task.await.expect("no panic escapes").expect("a clean stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reconcile_function_that_panics_before_its_future_is_retried() {
    let calls = Arc::new(AtomicUsize::new(0));
    let controller = controller(Scripted::default()).concurrency(1);
    let handle = controller.handle();
    let task = tokio::spawn(controller.run(
        |cell: String, _members: Vec<Arc<PodView>>, calls: Arc<AtomicUsize>| {
            if cell == "a" && calls.fetch_add(1, Ordering::SeqCst) == 0 {
                panic!("the function itself panics");
            }
            async { Ok::<_, String>(Action::await_change()) }
        },
        Arc::clone(&calls),
    ));
    until("a retried after its panic", || {
        calls.load(Ordering::SeqCst) >= 2
    })
    .await;
    assert!(!handle.is_stopped(), "the driver survived");
    handle.stop();
    task.await.expect("no panic escapes").expect("a clean stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_watch_hits_the_read_idle_timeout_and_reopens() {
    let transport = Scripted::default();
    let watches = Arc::clone(&transport.watches);
    let controller = controller(transport).limits(Limits {
        watch_idle_margin: Duration::from_millis(100),
        ..Limits::default()
    });
    let handle = controller.handle();
    let task = tokio::spawn(controller.run(
        |_: String, _: Vec<Arc<PodView>>, _: Arc<()>| async {
            Ok::<_, String>(Action::await_change())
        },
        Arc::new(()),
    ));
    // timeoutSeconds=1 plus 100 ms of margin, then retry_delay: a second WATCH.
    until("a second WATCH after the idle timeout", || {
        watches.load(Ordering::SeqCst) >= 2
    })
    .await;
    assert_eq!(handle.stats().lists, 1, "an idle timeout keeps the cursor");
    handle.stop();
    task.await.expect("joined").expect("a clean stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_frames_update_the_cell_and_bookmarks_move_the_cursor() {
    let transport = Scripted {
        watch_lines: vec![
            r#"{"type":"ADDED","object":{"metadata":{"name":"p3","namespace":"ns","resourceVersion":"11","labels":{"cell":"a"}}}}"#.into(),
            r#"{"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"15"},"spec":{"containers":null}}}"#.into(),
        ],
        ..Scripted::default()
    };
    let (running, seen) = start_recording(transport).await;
    until("p3 joined cell a", || {
        seen.lock().unwrap().get("a").is_some_and(|m| m.len() == 2)
    })
    .await;
    let handle = running.handle().clone();
    until("the cursor moved to the bookmark", || {
        handle.cursor().as_deref() == Some("15")
    })
    .await;
    running.shutdown().await.expect("a clean stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_process_pushes_reach_reconcile() {
    let pod = |name: &str, cell: &str| -> PodView {
        serde_json::from_str(&format!(
            r#"{{"metadata":{{"name":"{name}","namespace":"ns","labels":{{"cell":"{cell}"}}}}}}"#
        ))
        .expect("a pod")
    };
    let controller: Controller<PodView, String, TokioRuntime, Scripted> =
        Controller::with_runtime(TokioRuntime, Source::in_process(), KeyMap::by_label("cell"));
    let handle = controller.handle();
    // Queued before the driver runs: it opens the source before reading its inbox.
    handle.replace(vec![pod("x1", "x")]).await.expect("pushed");
    let seen: Seen = Arc::default();
    let task = tokio::spawn(controller.run(
        |cell: String, members: Vec<Arc<PodView>>, seen: Seen| async move {
            seen.lock().unwrap().insert(cell, names(&members));
            Ok::<_, String>(Action::await_change())
        },
        Arc::clone(&seen),
    ));
    handle.synced().await.expect("synced by the replace");
    handle.upsert(pod("x2", "x")).await.expect("pushed");
    until("x has both pods", || {
        seen.lock().unwrap().get("x").is_some_and(|m| m.len() == 2)
    })
    .await;
    handle.stop();
    task.await.expect("joined").expect("a clean stop");
    assert!(
        handle.upsert(pod("x3", "x")).await.is_err(),
        "pushing after the end fails"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_on_a_future() {
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let controller = controller(Scripted::default()).graceful_shutdown_on(async {
        let _ = rx.await;
    });
    let run = tokio::spawn(controller.run(
        |_: String, _: Vec<Arc<PodView>>, _: Arc<()>| async {
            Ok::<_, String>(Action::await_change())
        },
        Arc::new(()),
    ));
    tx.send(()).expect("the signal future is alive");
    tokio::time::timeout(Duration::from_secs(10), run)
        .await
        .expect("stopped by the signal")
        .expect("joined")
        .expect("a clean stop");
}

type Calls = Arc<Mutex<Vec<(String, Vec<String>)>>>;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_waiting_together_wake_a_cell_once_and_are_recorded_as_fed() {
    let pod = |name: &str| -> PodView {
        serde_json::from_str(&format!(
            r#"{{"metadata":{{"name":"{name}","namespace":"ns","labels":{{"cell":"a"}}}}}}"#
        ))
        .expect("a pod")
    };
    let tape: Tape<PodView, String> = Tape::default();
    let controller: Controller<PodView, String, TokioRuntime, Scripted> =
        Controller::with_runtime(TokioRuntime, Source::in_process(), KeyMap::by_label("cell"))
            .recorder(tape.clone());
    let handle = controller.handle();
    // All queued before the driver runs: it feeds them in one turn, then drains once.
    handle.replace(Vec::new()).await.expect("pushed");
    for name in ["a1", "a2", "a3"] {
        handle.upsert(pod(name)).await.expect("pushed");
    }
    let calls: Calls = Arc::default();
    let task = tokio::spawn(controller.run(
        |cell: String, members: Vec<Arc<PodView>>, calls: Calls| async move {
            calls.lock().unwrap().push((cell, names(&members)));
            Ok::<_, String>(Action::await_change())
        },
        Arc::clone(&calls),
    ));
    until("a reconciled", || !calls.lock().unwrap().is_empty()).await;
    handle.stop();
    task.await.expect("joined").expect("a clean stop");
    assert_eq!(
        *calls.lock().unwrap(),
        [(
            "a".to_owned(),
            vec!["a1".to_owned(), "a2".into(), "a3".into()]
        )],
        "one reconcile saw the whole burst"
    );
    let records = tape.all();
    let inputs: Vec<&str> = records
        .iter()
        .filter_map(|(_, r)| match r {
            Recorded::Input(input) => Some(input.kind()),
            Recorded::Command(_) => None,
        })
        .collect();
    assert_eq!(
        inputs,
        [
            "start",
            "source event",
            "source event",
            "source event",
            "source event",
            "reconcile outcome",
            "stop"
        ]
    );
    let reconciles: Vec<_> = records
        .iter()
        .filter_map(|(_, r)| match r {
            Recorded::Command(Command::Reconcile {
                parent, members, ..
            }) => Some((parent.clone(), members.len())),
            _ => None,
        })
        .collect();
    assert_eq!(
        reconciles,
        [("a".to_owned(), 0)],
        "a reconcile is taped without its members"
    );
    assert!(!tape.truncated());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_decoded_while_streaming_is_recorded_as_its_raw_body() {
    let tape: Tape<PodView, String> = Tape::default();
    let transport = Scripted {
        list_chunk: 16,
        ..Scripted::default()
    };
    let running = controller(transport)
        .recorder(tape.clone())
        .start(
            |_: String, _: Vec<Arc<PodView>>, _: Arc<()>| async {
                Ok::<_, String>(Action::await_change())
            },
            Arc::new(()),
        )
        .await
        .expect("synced");
    running.shutdown().await.expect("a clean stop");
    let records = tape.all();
    let list_sent = records
        .iter()
        .position(|(_, r)| matches!(r, Recorded::Command(Command::List { .. })))
        .expect("a LIST command");
    let (answered, body) = records
        .iter()
        .enumerate()
        .find_map(|(i, (_, r))| match r {
            Recorded::Input(Input::List {
                response: ListResponse::Response { status: 200, body },
                ..
            }) => Some((i, body.clone())),
            _ => None,
        })
        .expect("the LIST answer, as a raw 200 body");
    assert!(list_sent < answered);
    assert_eq!(body, LIST.as_bytes());
    assert!(
        !records.iter().any(|(_, r)| matches!(
            r,
            Recorded::Input(Input::List {
                response: ListResponse::Decoded(_),
                ..
            })
        )),
        "the decoded list is fed, not taped"
    );
}
