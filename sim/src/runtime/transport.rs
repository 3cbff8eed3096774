//! The transport: each request reaches the simulated cluster after a latency drawn from
//! the seed and is answered there at that virtual time; a watch's body streams the frames
//! [`Cluster::poll_watch`](crate::cluster::Cluster::poll_watch) gives as the clock moves
//! and writes happen. One log line per request, per watch frame, per end of a watch.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures_lite::Stream;
use reconcile_engine::{BodyStream, BoxFuture, Transport, TransportError};
use serde_json::Value;

use super::executor::{Shared, Sleep, Timer, TimerKey};
use super::hooks::{Cut, Request, Verdict};
use crate::cluster::{Reply, WatchId};

/// The simulation's [`Transport`]: every request is answered by its cluster. Clones share
/// the simulation.
#[derive(Clone)]
pub struct SimTransport {
    pub(super) shared: Arc<Shared>,
    /// The controller incarnation this transport belongs to (0: none), for the hooks.
    pub(super) incarnation: u64,
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
        let incarnation = self.incarnation;
        Box::pin(async move {
            let arrives = {
                let mut st = shared.lock();
                st.now + st.latency(&shared.config)
            };
            let label = format!("the reply to {} {}", request.method(), request.uri());
            Sleep::new(Arc::clone(&shared), arrives, Some(label)).await;
            let in_reconcile = reconcile_engine::writes::polling_a_reconcile();
            match serve(&shared, &request, incarnation, in_reconcile) {
                Served::Now(result) => result,
                Served::Late(late, result) => {
                    let at = shared.lock().now + late;
                    let label = format!("the late reply to {} {}", request.method(), request.uri());
                    Sleep::new(Arc::clone(&shared), at, Some(label)).await;
                    result
                }
                // Outside the lock, and without the panic hook's report: the engine catches
                // a reconcile's panic and counts it as a failed run.
                Served::Panic(message) => std::panic::resume_unwind(Box::new(message)),
            }
        })
    }
}

/// How a request was served.
enum Served {
    /// Answered now.
    Now(Result<http::Response<BodyStream>, TransportError>),
    /// Served now, answered this much later.
    Late(Duration, Result<http::Response<BodyStream>, TransportError>),
    /// Not served: the sender's task panics with this message.
    Panic(String),
}

/// Serves `request` at the current virtual time and logs it.
fn serve(
    shared: &Arc<Shared>,
    request: &http::Request<Vec<u8>>,
    incarnation: u64,
    in_reconcile: bool,
) -> Served {
    let mut st = shared.lock();
    let before = st.cluster.resource_version();
    let now = st.cluster_now();
    let target = format!("{} {}", request.method(), request.uri());
    let seen = Request {
        incarnation,
        http: request,
        in_reconcile,
    };
    let mut hooks = st.hooks.take();
    let verdict = hooks
        .as_mut()
        .map_or(Verdict::Serve, |h| h.before(st.now, &seen, &st.cluster));
    let mut late = None;
    let (reply, lose) = match verdict {
        Verdict::Serve => (st.cluster.serve(now, request), false),
        Verdict::ServeLate(by) => {
            late = Some(by);
            (st.cluster.serve(now, request), false)
        }
        Verdict::Panic(message) => {
            st.log(format_args!("{target} -> the reconcile panics ({message})"));
            st.hooks = hooks;
            return Served::Panic(message);
        }
        Verdict::ServeInstead(instead) => {
            st.log(format_args!("{target} (answered as {})", instead.uri()));
            (st.cluster.serve(now, &instead), false)
        }
        Verdict::LoseAnswer => (st.cluster.serve(now, request), true),
        Verdict::Refuse { code, reason } => {
            let body = serde_json::json!({
                "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": format!("injected by the test kit: {reason}"),
                "reason": reason, "code": code,
            });
            let response = crate::cluster::Response {
                status: code,
                content_type: "application/json",
                body: Bytes::from(serde_json::to_vec(&body).unwrap_or_default()),
            };
            (Reply::Response(response), false)
        }
        Verdict::Unreachable(message) => {
            st.log(format_args!("{target} -> unreachable ({message})"));
            st.hooks = hooks;
            return Served::Now(Err(TransportError::new(message)));
        }
    };
    let status = match &reply {
        Reply::Response(response) => response.status,
        Reply::Watch(_) => 200,
    };
    let wake = hooks
        .as_mut()
        .and_then(|h| h.after(st.now, &seen, status, &st.cluster));
    st.hooks = hooks;
    // Woken outside the lock (a wake schedules its task, which locks the state).
    let wake = Wake(wake);
    if lose {
        st.log(format_args!(
            "{target} -> {status}, the answer lost (a timeout after the commit)"
        ));
        if st.cluster.resource_version() != before {
            st.cluster_changed(&shared.config);
        }
        drop(st);
        drop(wake);
        return Served::Now(Err(TransportError::new(
            "the request timed out after the apiserver received it (injected)",
        )));
    }
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
                held: Vec::new(),
                ended: false,
                timer: None,
                opened_after_cuts: st.cuts.len(),
            };
            (200, "application/json", Box::pin(body))
        }
    };
    if st.cluster.resource_version() != before {
        st.cluster_changed(&shared.config);
    }
    drop(st);
    drop(wake);
    let result = http::Response::builder()
        .status(status)
        .header(http::header::CONTENT_TYPE, content_type)
        .body(body)
        .map_err(|e| TransportError::new(format!("building the response: {e}")));
    match late {
        Some(by) => Served::Late(by, result),
        None => Served::Now(result),
    }
}

/// Wakes its waker when dropped, which the caller does after dropping the state's lock guard.
struct Wake(Option<std::task::Waker>);

impl Drop for Wake {
    fn drop(&mut self) {
        if let Some(waker) = self.0.take() {
            waker.wake();
        }
    }
}

/// A response in a few words: the code, then `rv=` of an object, `items=` of a list, or
/// the reason of a `Status`.
fn describe(status: u16, body: &[u8]) -> String {
    if let Ok(head) = serde_json::from_slice::<AnswerHead<'_>>(body) {
        let rv = head
            .metadata
            .as_ref()
            .and_then(|m| m.resource_version.as_deref())
            .unwrap_or("");
        if head.kind.as_deref() == Some("Status") {
            let reason = head.reason.as_deref();
            let outcome = head.status.0.as_deref().unwrap_or("");
            return format!("{status} {}", reason.unwrap_or(outcome));
        }
        if let Some(items) = head.items {
            return format!("{status} items={items} rv={rv}");
        }
        let deleting = if head
            .metadata
            .as_ref()
            .is_some_and(|m| m.deletion_timestamp.is_some())
        {
            " deleting"
        } else {
            ""
        };
        return format!("{status} rv={rv}{deleting}");
    }
    describe_any(status, body)
}

/// The fields of an answer that [`describe`] names, read without building the rest: every
/// answer is described for the log.
#[derive(serde::Deserialize)]
struct AnswerHead<'a> {
    #[serde(borrow, default)]
    kind: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default)]
    reason: Option<std::borrow::Cow<'a, str>>,
    /// A `Status`'s outcome; an object's `status` (an object) reads as `None`.
    #[serde(default)]
    status: StringOrOther,
    #[serde(default, deserialize_with = "count_items")]
    items: Option<usize>,
    #[serde(borrow, default)]
    metadata: Option<MetaHead<'a>>,
}

/// A string, or any other JSON value skipped.
#[derive(Default)]
struct StringOrOther(Option<String>);

impl<'de> serde::Deserialize<'de> for StringOrOther {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = StringOrOther;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<StringOrOther, E> {
                Ok(StringOrOther(Some(v.to_owned())))
            }
            fn visit_bool<E>(self, _: bool) -> Result<StringOrOther, E> {
                Ok(StringOrOther(None))
            }
            fn visit_i64<E>(self, _: i64) -> Result<StringOrOther, E> {
                Ok(StringOrOther(None))
            }
            fn visit_u64<E>(self, _: u64) -> Result<StringOrOther, E> {
                Ok(StringOrOther(None))
            }
            fn visit_f64<E>(self, _: f64) -> Result<StringOrOther, E> {
                Ok(StringOrOther(None))
            }
            fn visit_unit<E>(self) -> Result<StringOrOther, E> {
                Ok(StringOrOther(None))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<StringOrOther, A::Error> {
                while map
                    .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
                    .is_some()
                {}
                Ok(StringOrOther(None))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<StringOrOther, A::Error> {
                while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(StringOrOther(None))
            }
        }
        d.deserialize_any(Visit)
    }
}

/// The length of an `items` array, its elements skipped; `None` when it is not an array.
fn count_items<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
    struct Visit;
    impl<'de> serde::de::Visitor<'de> for Visit {
        type Value = Option<usize>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an array")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Option<usize>, A::Error> {
            let mut n = 0;
            while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {
                n += 1;
            }
            Ok(Some(n))
        }
        fn visit_unit<E>(self) -> Result<Option<usize>, E> {
            Ok(None)
        }
    }
    d.deserialize_any(Visit)
}

/// [`describe`] for an answer of another shape (a field of another type), read as any JSON.
fn describe_any(status: u16, body: &[u8]) -> String {
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

/// The fields of a watch frame that [`describe_frame`] names, read without building the rest
/// (serde skips it): a frame is described for the log on every delivery.
#[derive(serde::Deserialize)]
struct FrameHead<'a> {
    #[serde(rename = "type", borrow)]
    event: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default)]
    object: Option<ObjectHead<'a>>,
}

#[derive(serde::Deserialize)]
struct ObjectHead<'a> {
    #[serde(borrow, default)]
    kind: Option<std::borrow::Cow<'a, str>>,
    #[serde(default)]
    code: Option<u64>,
    #[serde(borrow, default)]
    reason: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default)]
    metadata: Option<MetaHead<'a>>,
}

#[derive(serde::Deserialize)]
struct MetaHead<'a> {
    #[serde(borrow, default)]
    name: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default)]
    namespace: Option<std::borrow::Cow<'a, str>>,
    #[serde(rename = "resourceVersion", borrow, default)]
    resource_version: Option<std::borrow::Cow<'a, str>>,
    #[serde(rename = "deletionTimestamp", default)]
    deletion_timestamp: Option<serde::de::IgnoredAny>,
}

/// One watch frame in a few words: `ADDED default/a rv=12`.
fn describe_frame(id: WatchId, frame: &[u8]) -> String {
    if let Ok(head) = serde_json::from_slice::<FrameHead<'_>>(frame) {
        let event = head.event.as_deref().unwrap_or("?");
        let object = head.object.as_ref();
        let meta = object.and_then(|o| o.metadata.as_ref());
        let name = meta.and_then(|m| m.name.as_deref()).unwrap_or("");
        let namespace = meta.and_then(|m| m.namespace.as_deref()).unwrap_or("");
        let version = meta
            .and_then(|m| m.resource_version.as_deref())
            .unwrap_or("");
        let what = match event {
            "BOOKMARK" => String::new(),
            "ERROR" => format!(
                " {} {}",
                object.and_then(|o| o.code).unwrap_or(0),
                object.and_then(|o| o.reason.as_deref()).unwrap_or("")
            ),
            _ => {
                let kind = object.and_then(|o| o.kind.as_deref()).unwrap_or("");
                match namespace {
                    "" => format!(" {kind} {name}"),
                    ns => format!(" {kind} {ns}/{name}"),
                }
            }
        };
        let rv = match version {
            "" => String::new(),
            rv => format!(" rv={rv}"),
        };
        return format!("watch#{} {event}{what}{rv}", id.0);
    }
    // A frame of another shape (a field of another type): read as any JSON.
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
    /// Frames held back while the watches coalesce (see [`coalesce`]).
    held: Vec<Bytes>,
    ended: bool,
    /// The timer set for the watch's next timeout or bookmark.
    timer: Option<TimerKey>,
    /// How many cuts of the open watches there were when this one opened: the first cut
    /// after that ends (or hangs) it.
    opened_after_cuts: usize,
}

impl WatchBody {
    /// What a cut made since the watch opened does to it, if any: the frame to send
    /// (an `Expired` error), whether it ended, whether it hangs.
    fn cut(&mut self, st: &mut super::executor::State) -> Option<Cut> {
        // The first cut that ends it decides; a hang before it holds until then.
        let later = st.cuts.get(self.opened_after_cuts..).unwrap_or_default();
        let cut = later
            .iter()
            .copied()
            .find(|c| *c != Cut::Hang)
            .or_else(|| later.first().copied())?;
        if cut != Cut::Hang {
            self.ended = true;
            self.held.clear();
            st.cluster.close_watch(self.id);
            if cut == Cut::Expire {
                let rv = st.cluster.compacted();
                let frame = serde_json::json!({"type": "ERROR", "object": {
                    "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": format!("too old resource version: {rv}"),
                    "reason": "Expired", "code": 410,
                }});
                let frame = frame_line(&frame);
                st.log(describe_frame(self.id, &frame));
                self.buffered.push_back(frame);
            }
            st.log(format_args!(
                "watch#{} cut ({})",
                self.id.0,
                if cut == Cut::Drop {
                    "dropped"
                } else {
                    "expired"
                }
            ));
        }
        Some(cut)
    }
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
        let shared = Arc::clone(&this.shared);
        let mut st = shared.lock();
        let old_timer = this.timer.take().and_then(|k| st.timers.remove(&k));
        match this.cut(&mut st) {
            Some(Cut::Hang) => {
                // No timer: only a later cut (woken through the watch wakers) ends it.
                let old_waker = st.watch_wakers.insert(this.id.0, cx.waker().clone());
                let id = this.id.0;
                st.waiting(|| format!("watch#{id}, which hangs (an injected fault)"));
                drop(st);
                drop(old_timer);
                drop(old_waker);
                return Poll::Pending;
            }
            Some(_) => {
                drop(st);
                drop(old_timer);
                return Poll::Ready(this.buffered.pop_front().map(Ok));
            }
            None => {}
        }
        let now = st.cluster_now();
        let poll = st.cluster.poll_watch(this.id, now);
        let holding = st.now < st.coalesce_until && !poll.ended;
        if holding {
            this.held.extend(poll.frames);
        } else {
            let frames = if this.held.is_empty() {
                poll.frames
            } else {
                let mut all = std::mem::take(&mut this.held);
                all.extend(poll.frames);
                let merged = coalesce(all);
                st.log(format_args!(
                    "watch#{} delivers {} frame(s) held while coalescing",
                    this.id.0,
                    merged.len()
                ));
                merged
            };
            for frame in &frames {
                let line = describe_frame(this.id, frame);
                st.log(line);
            }
            this.buffered.extend(frames);
        }
        if poll.ended {
            this.ended = true;
            st.log(format_args!("watch#{} ended", this.id.0));
        }
        let result = if let Some(frame) = this.buffered.pop_front() {
            Poll::Ready(Some(Ok(frame)))
        } else if this.ended {
            Poll::Ready(None)
        } else {
            let old_waker = st.watch_wakers.insert(this.id.0, cx.waker().clone());
            let mut wake_at = st
                .cluster
                .watch_wake_at(this.id)
                .map(|at| at.since_origin());
            if holding {
                let until = st.coalesce_until;
                wake_at = Some(wake_at.map_or(until, |at| at.min(until)));
            }
            if let Some(at) = wake_at {
                this.timer = Some(st.add_timer(at, Timer::Wake(cx.waker().clone())));
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

/// Unobserved states: of the frames held during a burst, each object's last one only (an
/// object added and deleted within it is never seen; one added then modified is seen
/// added, as it finally was), errors as they came, and the last bookmark at the end.
fn coalesce(frames: Vec<Bytes>) -> Vec<Bytes> {
    let mut order: Vec<(String, String)> = Vec::new();
    let mut last: std::collections::BTreeMap<(String, String), (String, Value)> =
        std::collections::BTreeMap::new();
    let mut first_type: std::collections::BTreeMap<(String, String), String> =
        std::collections::BTreeMap::new();
    let mut errors = Vec::new();
    let mut bookmark = None;
    for frame in frames {
        let Ok(v) = serde_json::from_slice::<Value>(&frame) else {
            errors.push(frame);
            continue;
        };
        let ty = v
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        match ty.as_str() {
            "BOOKMARK" => bookmark = Some(frame),
            "ADDED" | "MODIFIED" | "DELETED" => {
                // A bookmark is kept only when it was the last frame: sent after the
                // objects, an earlier one would take the client's cursor back.
                bookmark = None;
                let meta = |k: &str| {
                    v.pointer(&format!("/object/metadata/{k}"))
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned()
                };
                let key = (meta("namespace"), meta("name"));
                first_type.entry(key.clone()).or_insert_with(|| ty.clone());
                order.retain(|k| *k != key);
                order.push(key.clone());
                last.insert(key, (ty, v));
            }
            _ => errors.push(frame),
        }
    }
    let mut out = errors;
    for key in order {
        let Some((ty, mut v)) = last.remove(&key) else {
            continue;
        };
        let first = first_type.get(&key).map_or("", String::as_str);
        match (first, ty.as_str()) {
            ("ADDED", "DELETED") => continue,
            ("ADDED", _) => v["type"] = Value::from("ADDED"),
            _ => {}
        }
        out.push(frame_line(&v));
    }
    out.extend(bookmark);
    out
}

/// A watch frame as the body carries it: the JSON and its newline.
fn frame_line(frame: &Value) -> Bytes {
    let mut line = crate::cluster::to_json_vec(frame, 1);
    line.push(b'\n');
    Bytes::from(line)
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

#[cfg(test)]
mod tests {
    use super::{describe, describe_any};

    /// The head read says what reading the whole answer says, for every shape the log sees.
    #[test]
    fn describing_an_answer_by_its_head_matches_reading_all_of_it() {
        let bodies = [
            r#"{"kind":"ConfigMap","metadata":{"name":"a","resourceVersion":"7"},"data":{"k":"v"}}"#,
            r#"{"kind":"Pod","metadata":{"resourceVersion":"9","deletionTimestamp":"2026-01-01T00:00:00Z"},"status":{"phase":"Running"}}"#,
            r#"{"kind":"ConfigMapList","metadata":{"resourceVersion":"12"},"items":[{"a":1},{"b":[2]},{}]}"#,
            r#"{"kind":"Status","status":"Failure","reason":"NotFound","code":404}"#,
            r#"{"kind":"Status","status":"Success","code":200}"#,
            r#"{"kind":"Status","status":"Failure","reason":"","code":500}"#,
            r#"{"kind":"X","items":null,"metadata":{}}"#,
            r#"{"kind":"X","items":{"not":"a list"}}"#,
            r#"{"kind":7}"#,
            "not json",
            "",
        ];
        for body in bodies {
            assert_eq!(
                describe(200, body.as_bytes()),
                describe_any(200, body.as_bytes()),
                "{body}"
            );
        }
        assert_eq!(
            describe(200, bodies[2].as_bytes()),
            "200 items=3 rv=12",
            "a list is counted"
        );
    }
}
