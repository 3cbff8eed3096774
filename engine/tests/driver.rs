//! The driver against a scripted in-memory transport: lifecycle, LIST bodies in chunks,
//! over the limit or broken, stop from inside a reconcile, panics, the read-idle timeout,
//! watch frames and bookmarks, graceful shutdown, and what the tape keeps of a streamed
//! LIST. On tokio with paused time (see `support`): every wait is a condition bounded in
//! virtual time, and nothing really sleeps.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures_lite::StreamExt;
use reconcile_core::pod::PodView;
use reconcile_core::{Command, Input, KeyMap, ListResponse};
use reconcile_engine::{
    Action, BodyStream, BoxFuture, Controller, Handle, Limits, Reconcile, Recorded, Running,
    Source, Tape, Transport, TransportError, default_error_policy,
};
use support::{Paused, Seen, names, paused, stop_cleanly, until, within};

const LIST: &str = r#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"10"},"items":[
  {"metadata":{"name":"p1","namespace":"ns","resourceVersion":"5","labels":{"cell":"a"}}},
  {"metadata":{"name":"p2","namespace":"ns","resourceVersion":"6","labels":{"cell":"b"}}}]}"#;

/// Answers every LIST with [`LIST`] and every WATCH with `watch_lines`, then keeps the
/// stream open and silent.
#[derive(Clone, Default)]
struct Scripted {
    watch_lines: Vec<String>,
    /// When each WATCH was sent, on the (virtual) clock.
    watches: Arc<Mutex<Vec<tokio::time::Instant>>>,
    /// Sends the LIST body in chunks of this many bytes (0: whole).
    list_chunk: usize,
    /// Answers LIST with this body instead of [`LIST`].
    list_body: Option<&'static str>,
    /// Answers a streaming list (`sendInitialEvents=true`) with these lines, then keeps it
    /// open; with 422 when `None`, as an apiserver whose `WatchList` gate is off.
    initial_lines: Option<Vec<String>>,
    /// Every request's query, in order.
    queries: Arc<Mutex<Vec<String>>>,
}

const REFUSED: &str = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled","reason":"Invalid","code":422}"#;

impl Transport for Scripted {
    fn send(
        &self,
        request: http::Request<Vec<u8>>,
    ) -> BoxFuture<Result<http::Response<BodyStream>, TransportError>> {
        let query = request.uri().query().unwrap_or("").to_owned();
        self.queries.lock().unwrap().push(query.clone());
        let watch = query.contains("watch=true");
        if query.contains("sendInitialEvents=true") {
            let (status, body): (u16, BodyStream) = match &self.initial_lines {
                Some(lines) => {
                    let chunks: Vec<Result<Bytes, TransportError>> = lines
                        .iter()
                        .map(|l| Ok(Bytes::from(format!("{l}\n"))))
                        .collect();
                    let stream = futures_lite::stream::iter(chunks);
                    (200, Box::pin(stream.chain(futures_lite::stream::pending())))
                }
                None => (
                    422,
                    Box::pin(futures_lite::stream::iter([Ok(Bytes::from_static(
                        REFUSED.as_bytes(),
                    ))])),
                ),
            };
            return Box::pin(async move {
                Ok(http::Response::builder()
                    .status(status)
                    .body(body)
                    .expect("a response"))
            });
        }
        let chunks: Vec<Result<Bytes, TransportError>> = if watch {
            self.watches
                .lock()
                .unwrap()
                .push(tokio::time::Instant::now());
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

async fn controller(transport: Scripted) -> Controller<PodView, String, Paused, Scripted> {
    let source = Source::pods(transport, Some("ns")).timeout(1);
    Controller::with_runtime(paused().await, source, KeyMap::by_label("cell"))
        .retry_delay(Duration::from_millis(20))
        .backoff(Duration::from_millis(10), Duration::from_millis(100))
        .concurrency(2)
}

/// A reconcile that asks for nothing more.
async fn idle(_: Reconcile<PodView, String>, _: Arc<()>) -> Result<Action, String> {
    Ok(Action::await_change())
}

/// Starts `controller` whose reconciles record each cell's members.
async fn start_recording(
    controller: Controller<PodView, String, Paused, Scripted>,
) -> (Running<PodView, String, Paused>, Seen) {
    let seen: Seen = Arc::default();
    let running = within(
        "the first sync",
        controller.start(
            |request: Reconcile<PodView, String>, seen: Seen| async move {
                let (cell, members) = request.into_parts();
                seen.lock().unwrap().insert(cell, names(&members));
                Ok::<_, String>(Action::await_change())
            },
            default_error_policy,
            Arc::clone(&seen),
        ),
    )
    .await
    .expect("synced");
    (running, seen)
}

async fn shut_down(running: Running<PodView, String, Paused>) {
    within("the stop", running.shutdown())
        .await
        .expect("a clean stop");
}

#[tokio::test(start_paused = true)]
async fn start_returns_synced_and_reconciles_every_cell() {
    let (running, seen) = start_recording(controller(Scripted::default()).await).await;
    assert!(running.handle().is_synced());
    until("both cells reconciled", || seen.lock().unwrap().len() == 2).await;
    assert_eq!(seen.lock().unwrap()["a"], ["p1"]);
    assert_eq!(seen.lock().unwrap()["b"], ["p2"]);
    let handle = running.handle().clone();
    shut_down(running).await;
    assert!(handle.is_stopped());
}

#[tokio::test(start_paused = true)]
async fn a_list_body_in_small_chunks_is_decoded_as_it_arrives() {
    // 7 bytes at a time: every chunk edge falls inside a name, a string or a number.
    let transport = Scripted {
        list_chunk: 7,
        ..Scripted::default()
    };
    let (running, seen) = start_recording(controller(transport).await).await;
    until("both cells reconciled", || seen.lock().unwrap().len() == 2).await;
    assert_eq!(seen.lock().unwrap()["b"], ["p2"]);
    assert_eq!(running.handle().cursor().as_deref(), Some("10"));
    shut_down(running).await;
}

/// Runs a controller until it has sent `lists` LISTs, and checks that it never synced.
async fn lists_without_syncing(
    controller: Controller<PodView, String, Paused, Scripted>,
    lists: u64,
) {
    let handle = controller.handle();
    let task = tokio::spawn(controller.run(idle, default_error_policy, Arc::new(())));
    until("the LIST retried", || handle.stats().lists >= lists).await;
    assert!(!handle.is_synced());
    assert_eq!(handle.cursor(), None);
    stop_cleanly(&handle, task).await;
}

#[tokio::test(start_paused = true)]
async fn a_list_body_over_the_limit_fails_the_list_and_it_is_retried() {
    let transport = Scripted {
        list_chunk: 16,
        ..Scripted::default()
    };
    assert!(LIST.len() > 100, "the body must be over the limit");
    let controller = controller(transport).await.limits(Limits {
        max_list_body: 100,
        ..Limits::default()
    });
    lists_without_syncing(controller, 3).await;
}

#[tokio::test(start_paused = true)]
async fn a_list_body_broken_midway_fails_the_list_and_it_is_retried() {
    let transport = Scripted {
        list_chunk: 5,
        list_body: Some(
            r#"{"metadata":{"resourceVersion":"3"},"items":[{"metadata":{"name":"x"}},{"metadata":}]}"#,
        ),
        ..Scripted::default()
    };
    lists_without_syncing(controller(transport).await, 3).await;
}

#[tokio::test(start_paused = true)]
async fn stop_from_inside_a_reconcile_ends_the_run() {
    let controller = controller(Scripted::default()).await;
    let handle = controller.handle();
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&calls);
    let run = controller.run(
        move |request: Reconcile<PodView, String>, handle: Arc<Handle<PodView, String>>| {
            let (_cell, _members) = request.into_parts();
            counted.fetch_add(1, Ordering::SeqCst);
            async move {
                handle.stop();
                Ok::<_, String>(Action::await_change())
            }
        },
        default_error_policy,
        Arc::new(handle.clone()),
    );
    within("the run to end after a stop from inside reconcile", run)
        .await
        .expect("a clean stop");
    assert!(handle.is_stopped());
    assert!(calls.load(Ordering::SeqCst) >= 1, "a reconcile ran");
}

#[tokio::test(start_paused = true)]
async fn a_panicking_reconcile_fails_and_is_retried() {
    let calls = Arc::new(AtomicUsize::new(0));
    let controller = controller(Scripted::default()).await;
    let handle = controller.handle();
    let task = tokio::spawn(controller.run(
        |request: Reconcile<PodView, String>, calls: Arc<AtomicUsize>| async move {
            let (cell, _members) = request.into_parts();
            if cell == "a" && calls.fetch_add(1, Ordering::SeqCst) == 0 {
                panic!("first attempt of a panics");
            }
            Ok::<_, String>(Action::await_change())
        },
        default_error_policy,
        Arc::clone(&calls),
    ));
    until("a retried after its panic", || {
        calls.load(Ordering::SeqCst) >= 2
    })
    .await;
    assert!(handle.stats().reconcile_errors >= 1, "{:?}", handle.stats());
    stop_cleanly(&handle, task).await;
}

#[tokio::test(start_paused = true)]
async fn a_reconcile_function_that_panics_before_its_future_is_retried() {
    let calls = Arc::new(AtomicUsize::new(0));
    let controller = controller(Scripted::default()).await.concurrency(1);
    let handle = controller.handle();
    let task = tokio::spawn(controller.run(
        |request: Reconcile<PodView, String>, calls: Arc<AtomicUsize>| {
            let (cell, _members) = request.into_parts();
            if cell == "a" && calls.fetch_add(1, Ordering::SeqCst) == 0 {
                panic!("the function itself panics");
            }
            async { Ok::<_, String>(Action::await_change()) }
        },
        default_error_policy,
        Arc::clone(&calls),
    ));
    until("a retried after its panic", || {
        calls.load(Ordering::SeqCst) >= 2
    })
    .await;
    assert!(handle.stats().reconcile_errors >= 1, "{:?}", handle.stats());
    assert!(!handle.is_stopped(), "the driver survived");
    stop_cleanly(&handle, task).await;
}

#[tokio::test(start_paused = true)]
async fn a_silent_watch_hits_the_read_idle_timeout_and_reopens() {
    let transport = Scripted::default();
    let watches = Arc::clone(&transport.watches);
    let margin = Duration::from_millis(100);
    let controller = controller(transport).await.limits(Limits {
        watch_idle_margin: margin,
        ..Limits::default()
    });
    let handle = controller.handle();
    let task = tokio::spawn(controller.run(idle, default_error_policy, Arc::new(())));
    until("a second WATCH after the idle timeout", || {
        watches.lock().unwrap().len() >= 2
    })
    .await;
    // timeoutSeconds=1 plus the margin of silence, then retry_delay (20 ms): on the virtual
    // clock, the reopen comes neither before the timeout nor long after it.
    let gap = {
        let watches = watches.lock().unwrap();
        watches[1] - watches[0]
    };
    let reopen = Duration::from_secs(1) + margin + Duration::from_millis(20);
    assert!(
        gap >= reopen,
        "reopened after {gap:?}, before the timeout and retry delay ({reopen:?})"
    );
    assert!(
        gap <= reopen + Duration::from_millis(5),
        "reopened only after {gap:?}"
    );
    assert_eq!(handle.stats().lists, 1, "an idle timeout keeps the cursor");
    stop_cleanly(&handle, task).await;
}

#[tokio::test(start_paused = true)]
async fn watch_frames_update_the_cell_and_bookmarks_move_the_cursor() {
    let transport = Scripted {
        watch_lines: vec![
            r#"{"type":"ADDED","object":{"metadata":{"name":"p3","namespace":"ns","resourceVersion":"11","labels":{"cell":"a"}}}}"#.into(),
            r#"{"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"15"},"spec":{"containers":null}}}"#.into(),
        ],
        ..Scripted::default()
    };
    let (running, seen) = start_recording(controller(transport).await).await;
    until("p3 joined cell a", || {
        seen.lock().unwrap().get("a").is_some_and(|m| m.len() == 2)
    })
    .await;
    assert_eq!(seen.lock().unwrap()["a"], ["p1", "p3"]);
    let handle = running.handle().clone();
    until("the cursor moved to the bookmark", || {
        handle.cursor().as_deref() == Some("15")
    })
    .await;
    shut_down(running).await;
}

async fn streaming_controller(
    transport: Scripted,
) -> Controller<PodView, String, Paused, Scripted> {
    let source = Source::pods(transport, Some("ns"))
        .timeout(1)
        .streaming_lists();
    Controller::with_runtime(paused().await, source, KeyMap::by_label("cell"))
        .retry_delay(Duration::from_millis(20))
        .concurrency(2)
}

#[tokio::test(start_paused = true)]
async fn a_streaming_list_syncs_at_its_end_bookmark_without_a_list() {
    let transport = Scripted {
        initial_lines: Some(vec![
            r#"{"type":"ADDED","object":{"metadata":{"name":"p1","namespace":"ns","resourceVersion":"5","labels":{"cell":"a"}}}}"#.into(),
            r#"{"type":"ADDED","object":{"metadata":{"name":"p2","namespace":"ns","resourceVersion":"6","labels":{"cell":"b"}}}}"#.into(),
            r#"{"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"12","annotations":{"k8s.io/initial-events-end":"true"}},"spec":{"containers":null}}}"#.into(),
            r#"{"type":"ADDED","object":{"metadata":{"name":"p3","namespace":"ns","resourceVersion":"13","labels":{"cell":"a"}}}}"#.into(),
        ]),
        ..Scripted::default()
    };
    let queries = Arc::clone(&transport.queries);
    let (running, seen) = start_recording(streaming_controller(transport).await).await;
    until("p3 joined cell a", || {
        seen.lock().unwrap().get("a").is_some_and(|m| m.len() == 2)
    })
    .await;
    assert_eq!(seen.lock().unwrap()["b"], ["p2"]);
    assert_eq!(running.handle().cursor().as_deref(), Some("13"));
    shut_down(running).await;
    let queries = queries.lock().unwrap().clone();
    assert_eq!(queries.len(), 1, "one request, no LIST: {queries:?}");
    for part in [
        "watch=true",
        "allowWatchBookmarks=true",
        "sendInitialEvents=true",
        "resourceVersionMatch=NotOlderThan",
    ] {
        assert!(queries[0].contains(part), "{} lacks {part}", queries[0]);
    }
    assert!(queries[0].ends_with("&resourceVersion="), "{}", queries[0]);
}

#[tokio::test(start_paused = true)]
async fn a_refused_streaming_list_falls_back_to_list_then_watch() {
    let transport = Scripted::default();
    let queries = Arc::clone(&transport.queries);
    let (running, seen) = start_recording(streaming_controller(transport).await).await;
    until("both cells reconciled", || seen.lock().unwrap().len() == 2).await;
    shut_down(running).await;
    let queries = queries.lock().unwrap().clone();
    assert!(queries.len() >= 3, "{queries:?}");
    assert!(queries[0].contains("sendInitialEvents=true"), "{queries:?}");
    assert!(
        !queries[1].contains("watch=true"),
        "then a LIST: {queries:?}"
    );
    assert!(
        queries[2].contains("watch=true") && queries[2].contains("resourceVersion=10"),
        "then a plain WATCH from the LIST: {queries:?}"
    );
    assert!(
        queries[1..]
            .iter()
            .all(|q| !q.contains("sendInitialEvents")),
        "never streamed again: {queries:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn graceful_shutdown_on_a_future() {
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let controller = controller(Scripted::default())
        .await
        .graceful_shutdown_on(async {
            let _ = rx.await;
        });
    let handle = controller.handle();
    let run = tokio::spawn(controller.run(idle, default_error_policy, Arc::new(())));
    until("synced", || handle.is_synced()).await;
    assert!(!handle.is_stopped(), "running until the signal");
    tx.send(()).expect("the signal future is alive");
    within("the stop by the signal", run)
        .await
        .expect("joined")
        .expect("a clean stop");
    assert!(handle.is_stopped());
}

#[tokio::test(start_paused = true)]
async fn a_list_decoded_while_streaming_is_recorded_as_its_raw_body() {
    let tape: Tape<PodView, String> = Tape::default();
    let transport = Scripted {
        list_chunk: 16,
        ..Scripted::default()
    };
    let running = within(
        "the first sync",
        controller(transport).await.recorder(tape.clone()).start(
            idle,
            default_error_policy,
            Arc::new(()),
        ),
    )
    .await
    .expect("synced");
    shut_down(running).await;
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
