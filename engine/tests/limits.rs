//! The driver's bounds in bytes and time (issue 17): what a buggy or hostile server can make
//! it read, hold and wait for. Every test runs on tokio's paused clock (see `support`).

#![allow(missing_docs)]

// Not every shared helper is used here.
#[allow(dead_code)]
mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures_lite::StreamExt;
use reconcile_core::KeyMap;
use reconcile_core::list::ListLimits;
use reconcile_core::pod::PodView;
use reconcile_engine::{
    Action, BodyStream, BoxFuture, Controller, Handle, Limits, Reconcile, Source, Transport,
    TransportError, default_error_policy,
};
use support::{Paused, paused, stop_cleanly, until};

const LIST: &str = r#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"10"},"items":[
  {"metadata":{"name":"p1","namespace":"ns","resourceVersion":"5","labels":{"cell":"a"}}}]}"#;

/// How the LIST is answered.
#[derive(Clone, Copy)]
enum ListAnswer {
    /// `200` with [`LIST`].
    Good,
    /// `500` with an endless body of 64 KiB chunks.
    EndlessError,
    /// `200` with the start of a body, then one more byte of whitespace every 5 s, forever.
    Trickle,
    /// `200` with 10,000 empty items: 30 KB that decode into 4.5 MB of `PodView`s.
    Empty,
}

/// A scripted apiserver that counts what the driver read from it.
#[derive(Clone)]
struct Server {
    list: ListAnswer,
    /// Watch lines, all ready at once, then the stream stays open and silent.
    watch_lines: usize,
    /// Body bytes the driver pulled from LIST responses.
    list_bytes: Arc<AtomicUsize>,
    /// Watch lines the driver pulled.
    pulled: Arc<AtomicUsize>,
    /// The largest number of lines pulled but not yet counted by the core's published stats.
    ahead: Arc<AtomicUsize>,
    handle: Arc<Mutex<Option<Handle<PodView, String>>>>,
}

impl Server {
    fn new(list: ListAnswer, watch_lines: usize) -> Self {
        Server {
            list,
            watch_lines,
            list_bytes: Arc::default(),
            pulled: Arc::default(),
            ahead: Arc::default(),
            handle: Arc::default(),
        }
    }
}

fn frame(i: usize) -> Bytes {
    Bytes::from(format!(
        r#"{{"type":"MODIFIED","object":{{"metadata":{{"name":"p1","namespace":"ns","resourceVersion":"{}","labels":{{"cell":"a"}}}}}}}}
"#,
        100 + i
    ))
}

impl Transport for Server {
    fn send(
        &self,
        request: http::Request<Vec<u8>>,
    ) -> BoxFuture<Result<http::Response<BodyStream>, TransportError>> {
        let watch = request.uri().query().unwrap_or("").contains("watch=true");
        let (status, body): (u16, BodyStream) = if watch {
            let server = self.clone();
            let lines = futures_lite::stream::iter(0..self.watch_lines).map(move |i| {
                let pulled = server.pulled.fetch_add(1, Ordering::SeqCst) + 1;
                let applied = server
                    .handle
                    .lock()
                    .unwrap()
                    .as_ref()
                    .map_or(0, |h| h.stats().frames as usize);
                server
                    .ahead
                    .fetch_max(pulled.saturating_sub(applied), Ordering::SeqCst);
                Ok(frame(i))
            });
            (200, Box::pin(lines.chain(futures_lite::stream::pending())))
        } else {
            let counted = Arc::clone(&self.list_bytes);
            let count = move |chunk: Bytes| {
                counted.fetch_add(chunk.len(), Ordering::SeqCst);
                Ok(chunk)
            };
            match self.list {
                ListAnswer::Good => (
                    200,
                    Box::pin(
                        futures_lite::stream::once(Bytes::from_static(LIST.as_bytes())).map(count),
                    ),
                ),
                ListAnswer::EndlessError => (
                    500,
                    Box::pin(
                        futures_lite::stream::repeat_with(|| Bytes::from(vec![b'x'; 64 << 10]))
                            .map(count),
                    ),
                ),
                ListAnswer::Empty => {
                    let items = vec!["{}"; 10_000].join(",");
                    let body =
                        format!(r#"{{"metadata":{{"resourceVersion":"1"}},"items":[{items}]}}"#);
                    (
                        200,
                        Box::pin(futures_lite::stream::once(Bytes::from(body)).map(count)),
                    )
                }
                ListAnswer::Trickle => {
                    let start = futures_lite::stream::once(Bytes::from_static(
                        br#"{"metadata":{"resourceVersion":"1"},"items":["#,
                    ));
                    let trickle = futures_lite::stream::unfold((), |()| async {
                        tokio::time::sleep(Duration::from_secs(5)).await;
                        Some((Bytes::from_static(b" "), ()))
                    });
                    (200, Box::pin(start.chain(trickle).map(count)))
                }
            }
        };
        Box::pin(async move {
            Ok(http::Response::builder()
                .status(status)
                .body(body)
                .expect("a response"))
        })
    }
}

async fn controller(server: Server, limits: Limits) -> Controller<PodView, String, Paused, Server> {
    let source = Source::pods(server, Some("ns")).timeout(600);
    Controller::with_runtime(paused().await, source, KeyMap::by_label("cell"))
        .retry_delay(Duration::from_millis(20))
        .limits(limits)
}

async fn idle(_: Reconcile<PodView, String>, _: Arc<()>) -> Result<Action, String> {
    Ok(Action::await_change())
}

#[tokio::test(start_paused = true)]
async fn a_failed_list_reads_only_a_prefix_of_its_error_body() {
    // The body never ends: before, the driver read it up to max_list_body (512 MiB).
    let server = Server::new(ListAnswer::EndlessError, 0);
    let read = Arc::clone(&server.list_bytes);
    let limits = Limits {
        max_error_body: 100_000,
        ..Limits::default()
    };
    let controller = controller(server, limits).await;
    let handle = controller.handle();
    let task = tokio::spawn(controller.run(idle, default_error_policy, Arc::new(())));
    until("the LIST answered and retried", || {
        handle.stats().lists >= 3
    })
    .await;
    assert!(!handle.is_synced());
    stop_cleanly(&handle, task).await;
    // Each LIST read two 64 KiB chunks to get 100,000 bytes, and no more.
    let lists = handle.stats().lists as usize;
    let read = read.load(Ordering::SeqCst);
    assert!(
        read <= lists * 2 * (64 << 10),
        "{read} bytes read over {lists} LISTs"
    );
}

#[tokio::test(start_paused = true)]
async fn a_list_that_would_decode_too_large_fails_and_is_retried() {
    let server = Server::new(ListAnswer::Empty, 0);
    let limits = Limits {
        list_decode: ListLimits {
            multiple: 4,
            allowance: 1 << 20,
            max_items: 1_000_000,
        },
        ..Limits::default()
    };
    let controller = controller(server, limits).await;
    let handle = controller.handle();
    let task = tokio::spawn(controller.run(idle, default_error_policy, Arc::new(())));
    until("the LIST retried", || handle.stats().lists >= 3).await;
    assert!(!handle.is_synced(), "a listing over the bound was applied");
    stop_cleanly(&handle, task).await;
}

#[tokio::test(start_paused = true)]
async fn a_list_that_trickles_in_ends_at_its_deadline_and_is_retried() {
    // One byte every 5 s never trips the 60 s idle limit; the deadline ends it.
    let server = Server::new(ListAnswer::Trickle, 0);
    let limits = Limits {
        list_deadline: Duration::from_secs(20),
        ..Limits::default()
    };
    let controller = controller(server, limits).await;
    let handle = controller.handle();
    let task = tokio::spawn(controller.run(idle, default_error_policy, Arc::new(())));
    let started = tokio::time::Instant::now();
    until("the LIST retried after its deadline", || {
        handle.stats().lists >= 2
    })
    .await;
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(20) && waited < Duration::from_secs(25),
        "{waited:?}"
    );
    assert!(!handle.is_synced());
    stop_cleanly(&handle, task).await;
}

#[tokio::test(start_paused = true)]
async fn watch_lines_waiting_in_the_inbox_are_bounded_in_bytes() {
    let lines = 3000;
    let server = Server::new(ListAnswer::Good, lines);
    let line = frame(0).len() - 1;
    // Room for ten lines in the inbox (the message capacity alone allowed 1,024).
    let limits = Limits {
        inbox_bytes: 10 * line,
        ..Limits::default()
    };
    let ahead = Arc::clone(&server.ahead);
    let slot = Arc::clone(&server.handle);
    let controller = controller(server, limits).await;
    let handle = controller.handle();
    *slot.lock().unwrap() = Some(handle.clone());
    let task = tokio::spawn(controller.run(idle, default_error_policy, Arc::new(())));
    until("every frame applied", || {
        handle.stats().frames >= lines as u64
    })
    .await;
    stop_cleanly(&handle, task).await;
    // In flight at most: the lines in the inbox, the batch being fed before its stats are
    // published (at most the same), and the line at hand.
    let ahead = ahead.load(Ordering::SeqCst);
    assert!(ahead <= 2 * 10 + 2, "{ahead} lines read ahead of the core");
    *slot.lock().unwrap() = None;
}

#[tokio::test(start_paused = true)]
async fn the_inbox_capacity_set_through_limits_is_the_one_used() {
    let lines = 3000;
    let server = Server::new(ListAnswer::Good, lines);
    // Room for eight messages; the byte budget out of the way.
    let limits = Limits {
        inbox: 8,
        ..Limits::default()
    };
    let ahead = Arc::clone(&server.ahead);
    let slot = Arc::clone(&server.handle);
    let controller = controller(server, limits).await;
    let handle = controller.handle();
    *slot.lock().unwrap() = Some(handle.clone());
    let task = tokio::spawn(controller.run(idle, default_error_policy, Arc::new(())));
    until("every frame applied", || {
        handle.stats().frames >= lines as u64
    })
    .await;
    stop_cleanly(&handle, task).await;
    // The default capacity (1,024) let about a thousand lines run ahead.
    let ahead = ahead.load(Ordering::SeqCst);
    assert!(ahead <= 2 * 8 + 2, "{ahead} lines read ahead of the core");
    *slot.lock().unwrap() = None;
}
