//! The transport: each request reaches the simulated cluster after a latency drawn from
//! the seed and is answered there at that virtual time; a watch's body streams the frames
//! [`Cluster::poll_watch`](crate::cluster::Cluster::poll_watch) gives as the clock moves
//! and writes happen. One log line per request, per watch frame, per end of a watch.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_lite::Stream;
use reconcile_engine::{BodyStream, BoxFuture, Transport, TransportError};
use serde_json::Value;

use super::executor::{Shared, Sleep, Timer, TimerKey};
use crate::cluster::{Reply, WatchId};

/// The simulation's [`Transport`]: every request is answered by its cluster. Clones share
/// the simulation.
#[derive(Clone)]
pub struct SimTransport {
    pub(super) shared: Arc<Shared>,
}

impl std::fmt::Debug for SimTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimTransport").finish_non_exhaustive()
    }
}

impl Transport for SimTransport {
    fn send(
        &self,
        request: http::Request<Vec<u8>>,
    ) -> BoxFuture<Result<http::Response<BodyStream>, TransportError>> {
        let shared = Arc::clone(&self.shared);
        Box::pin(async move {
            let arrives = {
                let mut st = shared.lock();
                st.now + st.latency(&shared.config)
            };
            let label = format!("the reply to {} {}", request.method(), request.uri());
            Sleep::new(Arc::clone(&shared), arrives, Some(label)).await;
            serve(&shared, &request)
        })
    }
}

/// Serves `request` at the current virtual time and logs it.
fn serve(
    shared: &Arc<Shared>,
    request: &http::Request<Vec<u8>>,
) -> Result<http::Response<BodyStream>, TransportError> {
    let mut st = shared.lock();
    let before = st.cluster.resource_version();
    let now = st.cluster_now();
    let reply = st.cluster.serve(now, request);
    let target = format!("{} {}", request.method(), request.uri());
    let (status, content_type, body): (u16, &str, BodyStream) = match reply {
        Reply::Response(response) => {
            st.log(format_args!(
                "{target} -> {}",
                describe(response.status, &response.body)
            ));
            let body = response.body;
            (
                response.status,
                response.content_type,
                Box::pin(futures_lite::stream::once(Ok(body))),
            )
        }
        Reply::Watch(id) => {
            st.log(format_args!("{target} -> watch#{}", id.0));
            let body = WatchBody {
                shared: Arc::clone(shared),
                id,
                buffered: VecDeque::new(),
                ended: false,
                timer: None,
            };
            (200, "application/json", Box::pin(body))
        }
    };
    if st.cluster.resource_version() != before {
        st.cluster_changed(&shared.config);
    }
    drop(st);
    http::Response::builder()
        .status(status)
        .header(http::header::CONTENT_TYPE, content_type)
        .body(body)
        .map_err(|e| TransportError::new(format!("building the response: {e}")))
}

/// A response in a few words: the code, then `rv=` of an object, `items=` of a list, or
/// the reason of a `Status`.
fn describe(status: u16, body: &[u8]) -> String {
    let Ok(v) = serde_json::from_slice::<Value>(body) else {
        return status.to_string();
    };
    let rv = v
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    let kind = v.get("kind").and_then(Value::as_str).unwrap_or("");
    if kind == "Status" {
        let reason = v.get("reason").and_then(Value::as_str);
        let outcome = v.get("status").and_then(Value::as_str).unwrap_or("");
        return format!("{status} {}", reason.unwrap_or(outcome));
    }
    if let Some(items) = v.get("items").and_then(Value::as_array) {
        return format!("{status} items={} rv={rv}", items.len());
    }
    let deleting = if v.pointer("/metadata/deletionTimestamp").is_some() {
        " deleting"
    } else {
        ""
    };
    format!("{status} rv={rv}{deleting}")
}

/// One watch frame in a few words: `ADDED default/a rv=12`.
fn describe_frame(id: WatchId, frame: &[u8]) -> String {
    let v: Value = serde_json::from_slice(frame).unwrap_or(Value::Null);
    let event = v.get("type").and_then(Value::as_str).unwrap_or("?");
    let object = v.get("object").unwrap_or(&Value::Null);
    let meta = |k: &str| {
        object
            .pointer(&format!("/metadata/{k}"))
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    let what = match event {
        "BOOKMARK" => String::new(),
        "ERROR" => format!(
            " {} {}",
            object.get("code").and_then(Value::as_u64).unwrap_or(0),
            object.get("reason").and_then(Value::as_str).unwrap_or("")
        ),
        _ => {
            let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
            match meta("namespace") {
                "" => format!(" {kind} {}", meta("name")),
                ns => format!(" {kind} {ns}/{}", meta("name")),
            }
        }
    };
    let rv = match meta("resourceVersion") {
        "" => String::new(),
        rv => format!(" rv={rv}"),
    };
    format!("watch#{} {event}{what}{rv}", id.0)
}

/// A watch's streaming body.
struct WatchBody {
    shared: Arc<Shared>,
    id: WatchId,
    buffered: VecDeque<Bytes>,
    ended: bool,
    /// The timer set for the watch's next timeout or bookmark.
    timer: Option<TimerKey>,
}

impl Stream for WatchBody {
    type Item = Result<Bytes, TransportError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if let Some(frame) = this.buffered.pop_front() {
            return Poll::Ready(Some(Ok(frame)));
        }
        if this.ended {
            return Poll::Ready(None);
        }
        let mut st = this.shared.lock();
        let old_timer = this.timer.take().and_then(|k| st.timers.remove(&k));
        let now = st.cluster_now();
        let poll = st.cluster.poll_watch(this.id, now);
        for frame in &poll.frames {
            let line = describe_frame(this.id, frame);
            st.log(line);
        }
        if poll.ended {
            this.ended = true;
            st.log(format_args!("watch#{} ended", this.id.0));
        }
        this.buffered.extend(poll.frames);
        let result = if let Some(frame) = this.buffered.pop_front() {
            Poll::Ready(Some(Ok(frame)))
        } else if this.ended {
            Poll::Ready(None)
        } else {
            let old_waker = st.watch_wakers.insert(this.id.0, cx.waker().clone());
            if let Some(at) = st.cluster.watch_wake_at(this.id) {
                this.timer = Some(st.add_timer(at.since_origin(), Timer::Wake(cx.waker().clone())));
            }
            let id = this.id.0;
            st.waiting(|| format!("watch#{id}'s next event"));
            drop(st);
            drop(old_waker);
            drop(old_timer);
            return Poll::Pending;
        };
        drop(st);
        drop(old_timer);
        result
    }
}

impl Drop for WatchBody {
    fn drop(&mut self) {
        let mut st = self.shared.lock();
        let timer = self.timer.take().and_then(|k| st.timers.remove(&k));
        let waker = st.watch_wakers.remove(&self.id.0);
        if !self.ended && st.cluster.close_watch(self.id) {
            st.log(format_args!("watch#{} closed by the client", self.id.0));
        }
        drop(st);
        drop((timer, waker));
    }
}
