//! The simulated apiserver: a versioned object history with compaction, LIST at the current
//! version, WATCH from any cursor, bookmarks, watch timeouts, server-side label selectors,
//! and the faults that break each of those.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde_json::Value;

use reconcile_core::{Instant, WireFormat};

use crate::apiserver::wire::Served;
use crate::selector::Selector;
use crate::trace::{GoneAs, Header};

/// History entries kept at most, whatever the compaction window: bounds memory on runs that
/// change objects faster than the window drains.
pub const MAX_HISTORY: usize = 100_000;

/// Objects the world holds at most.
pub const MAX_OBJECTS: usize = 1_000_000;

/// One object as the apiserver stores it: its JSON text and the few fields the world reads
/// on every request. No `serde_json::Value` tree is kept (it costs several times the text):
/// the rare reader of the whole object (a protobuf body, a DELETED frame, the unchanged
/// check) parses the text again.
#[derive(Debug)]
pub struct Obj {
    /// `namespace/name` (or `name`).
    pub key: String,
    /// `metadata.namespace`.
    pub namespace: Option<String>,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// The resourceVersion the world set.
    pub rv: u64,
    /// The object serialized once, with its resourceVersion set.
    pub json: Box<str>,
}

impl Obj {
    /// The object as a JSON tree, parsed from [`Obj::json`] (which the world wrote).
    #[must_use]
    pub fn value(&self) -> Value {
        serde_json::from_str(&self.json).unwrap_or(Value::Null)
    }
}

/// One entry of the history.
#[derive(Debug, Clone)]
struct Change {
    rv: u64,
    at: Instant,
    before: Option<Arc<Obj>>,
    after: Option<Arc<Obj>>,
}

/// Why the world refused an object.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorldError {
    /// Not a JSON object with `metadata.name`.
    #[error("object without metadata.name")]
    NoName,
    /// Not JSON.
    #[error("object is not JSON: {0}")]
    NotJson(String),
    /// Too many objects.
    #[error("more than {MAX_OBJECTS} objects")]
    Full,
}

/// One watch frame and the version it carries, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// The JSON line, without newline.
    pub line: String,
    /// The same frame as a protobuf `WatchEvent` (without its length prefix), when the world
    /// serves protobuf ([`World::new`] with a header asking for it).
    pub protobuf: Option<Bytes>,
    /// The resourceVersion it names (none for ERROR frames and cursor-less garbage).
    pub rv: Option<u64>,
}

impl Frame {
    /// The bytes a stream gets: the protobuf frame when there is one and `json` is false.
    #[must_use]
    pub fn bytes(&self, json: bool) -> Bytes {
        match &self.protobuf {
            Some(p) if !json => p.clone(),
            _ => Bytes::copy_from_slice(self.line.as_bytes()),
        }
    }

    /// Whether this is a streaming list's end bookmark (the annotation's key is in the
    /// bytes in both formats).
    #[must_use]
    pub fn is_initial_events_end(&self) -> bool {
        self.line.contains("initial-events-end")
    }
}

/// A response body: JSON, and the same as protobuf when the world serves protobuf.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Body {
    /// The JSON body.
    pub json: String,
    /// The protobuf body (`k8s\0` and an enveloped message).
    pub protobuf: Option<Bytes>,
}

impl Body {
    /// The bytes a client gets: the protobuf body when there is one and `json` is false.
    #[must_use]
    pub fn bytes(&self, json: bool) -> Bytes {
        match &self.protobuf {
            Some(p) if !json => p.clone(),
            _ => Bytes::copy_from_slice(self.json.as_bytes()),
        }
    }

    /// [`Body::bytes`], without copying the JSON (a LIST body is all the objects' text).
    #[must_use]
    pub fn into_bytes(self, json: bool) -> Bytes {
        match self.protobuf {
            Some(p) if !json => p,
            _ => Bytes::from(self.json),
        }
    }
}

/// What a WATCH request gets.
#[derive(Debug)]
pub enum WatchAnswer {
    /// 200: these frames first, then live changes.
    Open(Vec<Frame>),
    /// 200, one ERROR frame, then the end (the watch cache's 410).
    GoneFrame(Frame),
    /// A non-200 status with a `Status` body.
    Status(u16, Body),
    /// No answer.
    Transport(String),
}

/// What a LIST request gets.
#[derive(Debug)]
pub enum ListAnswer {
    /// A status and a body.
    Response(u16, Body),
    /// No answer.
    Transport(String),
}

/// The apiserver's state.
#[derive(Debug)]
pub struct World {
    namespace: Option<String>,
    selector: Selector,
    window: Duration,
    gone_as: GoneAs,
    rv: u64,
    objects: BTreeMap<String, Arc<Obj>>,
    history: VecDeque<Change>,
    /// Highest version dropped from history: a cursor below it cannot be served.
    compacted: u64,
    gone_left: u32,
    too_large_left: u32,
    list_fail: VecDeque<u16>,
    down_until: Option<Instant>,
    uid_seq: u64,
    /// Streaming lists are refused as an apiserver with the `WatchList` gate off does.
    refuse_streaming: bool,
    /// Bodies and frames are also built as protobuf (the header's `wire_format`).
    protobuf: bool,
    /// What the protobuf bodies and frames hold: pods, or metadata only.
    served: Served,
}

fn status_body(code: u16, reason: &str, message: &str, cause: Option<&str>) -> String {
    let mut status = serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code,
    });
    if let Some(cause) = cause {
        status["details"] = serde_json::json!({"causes": [{"reason": cause, "message": message}]});
    }
    status.to_string()
}

/// A LIST body's text before its items.
fn list_head(rv: u64) -> String {
    format!(
        "{{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{{\"resourceVersion\":\"{rv}\"}},\"items\":["
    )
}

/// A LIST body's text after its items.
const LIST_TAIL: &str = "]}";

fn frame(event_type: &str, object_json: &str, rv: Option<u64>) -> Frame {
    Frame {
        line: format!("{{\"type\":\"{event_type}\",\"object\":{object_json}}}"),
        protobuf: None,
        rv,
    }
}

impl World {
    /// An empty world at version 1, configured by the header.
    #[must_use]
    pub fn new(header: &Header) -> Self {
        World {
            namespace: header.namespace.clone(),
            selector: header
                .label_selector
                .as_deref()
                .and_then(|s| Selector::parse(s).ok())
                .unwrap_or_default(),
            window: header.compaction_window,
            gone_as: header.gone_as,
            rv: 1,
            objects: BTreeMap::new(),
            history: VecDeque::new(),
            compacted: 0,
            gone_left: 0,
            too_large_left: 0,
            list_fail: VecDeque::new(),
            down_until: None,
            uid_seq: 0,
            refuse_streaming: false,
            protobuf: header.wire_format == WireFormat::Protobuf,
            served: Served::Pods,
        }
    }

    /// Whether the world's protobuf is metadata only ([`World::serving_metadata`]).
    #[must_use]
    pub fn serves_metadata(&self) -> bool {
        self.served == Served::Metadata
    }

    /// The same world, serving its protobuf as metadata only (`PartialObjectMetadata`): a
    /// secondary source's, which the simulator decodes as metadata.
    #[must_use]
    pub fn serving_metadata(mut self) -> Self {
        self.served = Served::Metadata;
        self
    }

    /// Whether the world builds protobuf bodies and frames besides the JSON ones.
    #[must_use]
    pub fn serves_protobuf(&self) -> bool {
        self.protobuf
    }

    /// A frame of `event_type` around the stored `obj`.
    fn pod_frame(&self, event_type: &str, obj: &Obj, rv: Option<u64>) -> Frame {
        let mut f = frame(event_type, &obj.json, rv);
        if self.protobuf {
            let value = obj.value();
            f.protobuf =
                Some(crate::apiserver::wire::frame(self.served, event_type, &value).into());
        }
        f
    }

    /// A frame of `event_type` around the pod `value` (serialized as `json`).
    fn value_frame(&self, event_type: &str, value: &Value, json: &str, rv: Option<u64>) -> Frame {
        let mut f = frame(event_type, json, rv);
        if self.protobuf {
            f.protobuf = Some(crate::apiserver::wire::frame(self.served, event_type, value).into());
        }
        f
    }

    /// A failed `Status` body.
    fn status(&self, code: u16, reason: &str, message: &str, cause: Option<&str>) -> Body {
        Body {
            json: status_body(code, reason, message, cause),
            protobuf: self
                .protobuf
                .then(|| crate::apiserver::wire::status(code, reason, message, cause).into()),
        }
    }

    /// An `ERROR` frame around a failed `Status` (the watch cache's 410, say), its JSON
    /// fields in the order the apiserver writes them.
    #[must_use]
    pub fn error_frame(&self, code: u16, reason: &str, message: &str) -> Frame {
        let text = |s: &str| Value::String(s.to_owned()).to_string();
        Frame {
            line: format!(
                "{{\"type\":\"ERROR\",\"object\":{{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{{}},\"status\":\"Failure\",\"message\":{},\"reason\":{},\"code\":{code}}}}}",
                text(message),
                text(reason)
            ),
            protobuf: self
                .protobuf
                .then(|| crate::apiserver::wire::error_frame(code, reason, message).into()),
            rv: None,
        }
    }

    /// The current version.
    #[must_use]
    pub fn rv(&self) -> u64 {
        self.rv
    }

    /// Whether `obj` is in scope of the watched namespace and selector. Each object keeps the
    /// namespace it came with (none is filled in from the header, as a replay's core keys it
    /// by what it carries): one that names none is in scope of any namespace.
    fn visible(&self, obj: &Obj) -> bool {
        self.namespace.as_ref().is_none_or(|ns| {
            obj.namespace
                .as_deref()
                .is_none_or(|o| o.is_empty() || o == ns)
        }) && self.selector.matches(&obj.labels)
    }

    /// The objects in scope now, by key.
    pub fn visible_objects(&self) -> impl Iterator<Item = &Arc<Obj>> {
        self.objects.values().filter(|o| self.visible(o))
    }

    /// The object under `key` when it is in scope now; one map lookup, not a scan.
    #[must_use]
    pub fn visible_object(&self, key: &str) -> Option<&Arc<Obj>> {
        self.objects.get(key).filter(|o| self.visible(o))
    }

    /// Every object, in scope or not.
    pub fn all_objects(&self) -> impl Iterator<Item = &Arc<Obj>> {
        self.objects.values()
    }

    fn build(&mut self, mut value: Value, rv: u64) -> Result<Obj, WorldError> {
        let meta = value
            .get_mut("metadata")
            .and_then(Value::as_object_mut)
            .ok_or(WorldError::NoName)?;
        let name = meta
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .ok_or(WorldError::NoName)?
            .to_owned();
        if meta.get("uid").and_then(Value::as_str).is_none() {
            self.uid_seq += 1;
            meta.insert("uid".into(), format!("uid-{}", self.uid_seq).into());
        }
        meta.insert("resourceVersion".into(), rv.to_string().into());
        let namespace = meta
            .get("namespace")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let labels = meta
            .get("labels")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned())))
                    .collect()
            })
            .unwrap_or_default();
        let key = match &namespace {
            Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
            _ => name,
        };
        let json = value.to_string().into_boxed_str();
        Ok(Obj {
            key,
            namespace,
            labels,
            rv,
            json,
        })
    }

    /// The key an object would be stored under.
    ///
    /// # Errors
    /// When it is not a JSON object with a name.
    pub fn key_of(&self, object_json: &str) -> Result<String, WorldError> {
        // Only the name and namespace are read; the rest of the object is skipped unbuilt.
        #[derive(serde::Deserialize)]
        struct Named {
            metadata: Option<Meta>,
        }
        #[derive(serde::Deserialize)]
        struct Meta {
            name: Option<Value>,
            namespace: Option<Value>,
        }
        let named: Named =
            serde_json::from_str(object_json).map_err(|e| WorldError::NotJson(e.to_string()))?;
        let meta = named.metadata.ok_or(WorldError::NoName)?;
        let name = meta
            .name
            .as_ref()
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .ok_or(WorldError::NoName)?;
        Ok(match meta.namespace.as_ref().and_then(Value::as_str) {
            Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
            _ => name.to_owned(),
        })
    }

    fn record(&mut self, now: Instant, before: Option<Arc<Obj>>, after: Option<Arc<Obj>>) {
        self.history.push_back(Change {
            rv: self.rv,
            at: now,
            before,
            after,
        });
        self.compact_older_than(now);
    }

    fn compact_older_than(&mut self, now: Instant) {
        while let Some(first) = self.history.front() {
            let expired = first.at + self.window < now;
            if !expired && self.history.len() <= MAX_HISTORY {
                break;
            }
            self.compacted = first.rv;
            self.history.pop_front();
        }
    }

    /// Creates or replaces an object; returns the frames each open watch gets, via
    /// [`World::frames_for_last_change`].
    ///
    /// # Errors
    /// When the object has no name or the world is full.
    pub fn put(&mut self, now: Instant, object_json: &str) -> Result<(), WorldError> {
        let value: Value =
            serde_json::from_str(object_json).map_err(|e| WorldError::NotJson(e.to_string()))?;
        let key = self.key_of(object_json)?;
        if !self.objects.contains_key(&key) && self.objects.len() >= MAX_OBJECTS {
            return Err(WorldError::Full);
        }
        self.rv += 1;
        let obj = Arc::new(self.build(value, self.rv)?);
        let before = self.objects.insert(obj.key.clone(), Arc::clone(&obj));
        self.record(now, before, Some(obj));
        Ok(())
    }

    /// Whether `object_json` equals the stored object apart from its resourceVersion (a
    /// relisted, unchanged object is not a write).
    #[must_use]
    pub fn unchanged(&self, object_json: &str) -> bool {
        let Ok(key) = self.key_of(object_json) else {
            return false;
        };
        let Some(current) = self.objects.get(&key) else {
            return false;
        };
        let Ok(mut incoming) = serde_json::from_str::<Value>(object_json) else {
            return false;
        };
        let strip = |v: &mut Value| {
            if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.remove("resourceVersion");
            }
        };
        let mut stored = current.value();
        strip(&mut stored);
        strip(&mut incoming);
        if let (Some(a), Some(b)) = (
            stored.get_mut("metadata").and_then(Value::as_object_mut),
            incoming.get("metadata").and_then(Value::as_object),
        ) {
            // Fields the world filled in (namespace, uid) count as equal when absent.
            a.retain(|k, _| b.contains_key(k) || !matches!(k.as_str(), "namespace" | "uid"));
        }
        stored == incoming
    }

    /// Deletes the object under `key`; false when there is none.
    pub fn delete(&mut self, now: Instant, key: &str) -> bool {
        let Some(before) = self.objects.remove(key) else {
            return false;
        };
        self.rv += 1;
        self.record(now, Some(before), None);
        true
    }

    /// Bumps the version with no visible change (another resource type written, say).
    pub fn bump(&mut self, now: Instant) -> u64 {
        self.rv += 1;
        self.record(now, None, None);
        self.rv
    }

    /// The frames an open watch gets for the last change, after the selector.
    #[must_use]
    pub fn frames_for_last_change(&self) -> Option<Frame> {
        self.history.back().and_then(|c| self.frame_for(c))
    }

    fn frame_for(&self, change: &Change) -> Option<Frame> {
        let was = change.before.as_ref().is_some_and(|o| self.visible(o));
        let is = change.after.as_ref().is_some_and(|o| self.visible(o));
        match (was, is, &change.before, &change.after) {
            (false, true, _, Some(after)) => Some(self.pod_frame("ADDED", after, Some(change.rv))),
            (true, true, _, Some(after)) => {
                Some(self.pod_frame("MODIFIED", after, Some(change.rv)))
            }
            (true, false, Some(before), _) => {
                // The watch cache sends the previous state, stamped with the change's version.
                let mut last = before.value();
                if let Some(meta) = last.get_mut("metadata").and_then(Value::as_object_mut) {
                    meta.insert("resourceVersion".into(), change.rv.to_string().into());
                }
                Some(self.value_frame("DELETED", &last, &last.to_string(), Some(change.rv)))
            }
            _ => None,
        }
    }

    /// A bookmark at the current version, or just before `pending`, the lowest version
    /// still queued for the stream: a bookmark never runs ahead of the stream's own frames.
    #[must_use]
    pub fn bookmark(&self, pending: Option<u64>) -> Frame {
        let rv = pending
            .map_or(self.rv, |p| p.saturating_sub(1))
            .min(self.rv);
        let mut f = frame(
            "BOOKMARK",
            &format!(
                "{{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{{\"resourceVersion\":\"{rv}\"}},\"spec\":{{\"containers\":null}},\"status\":{{}}}}"
            ),
            Some(rv),
        );
        if self.protobuf {
            f.protobuf = Some(crate::apiserver::wire::bookmark(self.served, rv, false).into());
        }
        f
    }

    fn down(&self, now: Instant) -> bool {
        self.down_until.is_some_and(|until| now < until)
    }

    /// The answer to a LIST the apiserver is down for or told to fail, if any.
    fn injected_list_failure(&mut self, now: Instant) -> Option<ListAnswer> {
        if self.down(now) {
            return Some(ListAnswer::Transport(
                "connection refused (apiserver restarting)".into(),
            ));
        }
        let status = self.list_fail.pop_front()?;
        Some(match status {
            0 => ListAnswer::Transport("connection reset (injected)".into()),
            code => ListAnswer::Response(
                code,
                self.status(code, "InternalError", "injected LIST failure", None),
            ),
        })
    }

    /// Answers one page of a paged LIST (`limit` and `continue`, as the apiserver does from
    /// etcd): at most `limit` objects (all when `None`) in key order, of the state at the
    /// first page's version, after the key the continue token names. The token is
    /// `<version>:<last key>`, opaque to the client; one whose version history no longer
    /// covers (compacted, or the watch cache lost in a restart) answers 410 `Expired`, as
    /// etcd's compaction does; one that does not parse answers 400. Also returns the version
    /// the page was served at.
    pub fn list_page(
        &mut self,
        now: Instant,
        limit: Option<u32>,
        continue_token: Option<&str>,
    ) -> (ListAnswer, Option<u64>) {
        if let Some(failed) = self.injected_list_failure(now) {
            return (failed, None);
        }
        self.compact_older_than(now);
        let (at, after) = match continue_token {
            None => (self.rv, None),
            Some(token) => {
                let parsed = token
                    .split_once(':')
                    .and_then(|(rv, key)| Some((rv.parse::<u64>().ok()?, key)));
                let Some((at, key)) = parsed.filter(|(at, _)| *at <= self.rv) else {
                    let body = self.status(400, "BadRequest", "invalid continue token", None);
                    return (ListAnswer::Response(400, body), None);
                };
                if at < self.compacted {
                    let message = "The provided continue parameter is too old to display a \
                        consistent list result. You can start a new list without the continue \
                        parameter.";
                    let body = self.status(410, "Expired", message, None);
                    return (ListAnswer::Response(410, body), None);
                }
                (at, Some(key.to_owned()))
            }
        };
        // Read at `at` without copying the map, as etcd reads a past revision; every page
        // scans on from the key the last one ended at, so a whole listing is linear in the
        // objects, whatever the page size (issue 16: a clone per page, and a count of the
        // rest per page, made a paged listing quadratic).
        let bound = after
            .as_deref()
            .map_or(std::ops::Bound::Unbounded, std::ops::Bound::Excluded);
        let undone = self.undone_since(at);
        let mut current = self
            .objects
            .range::<str, _>((bound, std::ops::Bound::Unbounded))
            .peekable();
        let mut past = undone
            .range::<str, _>((bound, std::ops::Bound::Unbounded))
            .peekable();
        // The next key at `at`, with its object then (`None`: it did not exist).
        let mut next = || -> Option<(&str, Option<&Arc<Obj>>)> {
            let order = match (current.peek(), past.peek()) {
                (None, None) => return None,
                (Some(_), None) => std::cmp::Ordering::Less,
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (Some((now_key, _)), Some((past_key, _))) => now_key.as_str().cmp(**past_key),
            };
            match order {
                std::cmp::Ordering::Less => current.next().map(|(k, o)| (k.as_str(), Some(o))),
                std::cmp::Ordering::Equal => {
                    current.next();
                    past.next().map(|(k, o)| (*k, *o))
                }
                std::cmp::Ordering::Greater => past.next().map(|(k, o)| (*k, *o)),
            }
        };
        let limit = limit.map_or(usize::MAX, |l| l.max(1) as usize);
        let mut body = format!(
            "{{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{{\"resourceVersion\":\"{at}\""
        );
        let mut page = String::new();
        let (mut count, mut last) = (0usize, None);
        let mut served = Vec::new();
        // As the apiserver over etcd: objects the selector drops are read past until the
        // page is full, and the token names the last key read, matched or not.
        while count < limit {
            let Some((key, obj)) = next() else { break };
            let Some(obj) = obj else { continue };
            last = Some(key.to_owned());
            if !self.visible(obj) {
                continue;
            }
            if count > 0 {
                page.push(',');
            }
            page.push_str(&obj.json);
            if self.protobuf {
                served.push(Arc::clone(obj));
            }
            count += 1;
        }
        let more = std::iter::from_fn(&mut next).any(|(_, obj)| obj.is_some());
        let mut token = None;
        if more && let Some(last) = last {
            // No `remainingItemCount`: the apiserver sets it only without a selector, and
            // counting the rest on every page would make a listing quadratic again.
            let next_token = format!("{at}:{last}");
            body.push_str(&format!(
                ",\"continue\":{}",
                serde_json::Value::String(next_token.clone())
            ));
            token = Some(next_token);
        }
        body.push_str("},\"items\":[");
        body.push_str(&page);
        body.push_str("]}");
        let protobuf = self.protobuf.then(|| {
            crate::apiserver::wire::list_body(
                self.served,
                at,
                token,
                served.iter().map(|o| o.value()),
            )
            .into()
        });
        let body = Body {
            json: body,
            protobuf,
        };
        (ListAnswer::Response(200, body), Some(at))
    }

    /// What each key changed after version `at` held at `at` (`None`: it did not exist):
    /// the overlay that turns the current objects into the state at `at`. Bounded by the
    /// history ([`MAX_HISTORY`]).
    fn undone_since(&self, at: u64) -> BTreeMap<&str, Option<&Arc<Obj>>> {
        let mut undone = BTreeMap::new();
        // Newest first, so the oldest change after `at` has the last word.
        for change in self.history.iter().rev().take_while(|c| c.rv > at) {
            let key = change.after.as_ref().or(change.before.as_ref());
            if let Some(key) = key {
                undone.insert(key.key.as_str(), change.before.as_ref());
            }
        }
        undone
    }

    /// Answers a LIST at the current version.
    pub fn list(&mut self, now: Instant) -> ListAnswer {
        if let Some(failed) = self.injected_list_failure(now) {
            return failed;
        }
        let mut body = String::with_capacity(self.list_json_len());
        self.list_json_pieces(|piece| body.push_str(piece));
        let protobuf = self.protobuf.then(|| {
            crate::apiserver::wire::list_body(
                self.served,
                self.rv,
                None,
                self.visible_objects().map(|o| o.value()),
            )
            .into()
        });
        let body = Body {
            json: body,
            protobuf,
        };
        ListAnswer::Response(200, body)
    }

    /// The length of the JSON body [`World::list`] would answer now.
    #[must_use]
    pub fn list_json_len(&self) -> usize {
        let (mut len, mut items) = (0usize, 0usize);
        for obj in self.visible_objects() {
            len += obj.json.len();
            items += 1;
        }
        list_head(self.rv).len() + len + items.saturating_sub(1) + LIST_TAIL.len()
    }

    /// Answers a LIST at the current version as [`World::list`] does, but hands a 200's
    /// JSON body to `piece` a piece at a time (its head, each object's text, the separators,
    /// its tail) instead of joining it, so that a large world's LIST does not hold every
    /// object's text a second time. An injected failure is returned instead, `piece` never
    /// called; otherwise the number of items.
    ///
    /// # Errors
    /// The injected failure, as [`World::list`] answers it.
    pub fn list_in_pieces(
        &mut self,
        now: Instant,
        piece: impl FnMut(&str),
    ) -> Result<usize, ListAnswer> {
        if let Some(failed) = self.injected_list_failure(now) {
            return Err(failed);
        }
        Ok(self.list_json_pieces(piece))
    }

    /// The pieces of the current LIST's JSON body, in order; returns the number of items.
    fn list_json_pieces(&self, mut piece: impl FnMut(&str)) -> usize {
        piece(&list_head(self.rv));
        let mut items = 0;
        for obj in self.visible_objects() {
            if items > 0 {
                piece(",");
            }
            piece(&obj.json);
            items += 1;
        }
        piece(LIST_TAIL);
        items
    }

    /// Answers a WATCH from `cursor`.
    pub fn watch(&mut self, now: Instant, cursor: &str) -> WatchAnswer {
        self.compact_older_than(now);
        if self.down(now) {
            return WatchAnswer::Transport("connection refused (apiserver restarting)".into());
        }
        if self.too_large_left > 0 {
            self.too_large_left -= 1;
            return self.too_large(cursor);
        }
        if cursor.is_empty() || cursor == "0" {
            // No version: the current state as synthetic ADDED events, in key order.
            let frames = self
                .visible_objects()
                .map(|o| self.pod_frame("ADDED", o, Some(o.rv)))
                .collect();
            return WatchAnswer::Open(frames);
        }
        let Ok(from) = cursor.parse::<u64>() else {
            return WatchAnswer::Status(
                400,
                self.status(
                    400,
                    "BadRequest",
                    &format!("invalid resourceVersion {cursor:?}"),
                    None,
                ),
            );
        };
        if self.gone_left > 0 || from < self.compacted {
            self.gone_left = self.gone_left.saturating_sub(1);
            let message = format!(
                "too old resource version: {from} ({})",
                self.compacted.max(from + 1)
            );
            return match self.gone_as {
                GoneAs::Frame => WatchAnswer::GoneFrame(Frame {
                    line: frame("ERROR", &status_body(410, "Expired", &message, None), None).line,
                    protobuf: self.protobuf.then(|| {
                        crate::apiserver::wire::error_frame(410, "Expired", &message).into()
                    }),
                    rv: None,
                }),
                GoneAs::Status => {
                    WatchAnswer::Status(410, self.status(410, "Expired", &message, None))
                }
            };
        }
        if from > self.rv {
            return self.too_large(cursor);
        }
        let frames = self
            .history
            .iter()
            .filter(|c| c.rv > from)
            .filter_map(|c| self.frame_for(c))
            .collect();
        WatchAnswer::Open(frames)
    }

    /// Refuses streaming lists from now on (422, as an apiserver whose `WatchList` feature
    /// gate is off), or serves them again.
    pub fn refuse_streaming_lists(&mut self, refuse: bool) {
        self.refuse_streaming = refuse;
    }

    /// Answers a streaming list (a WATCH from `""` with `sendInitialEvents=true`): the state
    /// now as `ADDED` frames in key order, then the bookmark annotated
    /// `k8s.io/initial-events-end` at the current version; or 422 when refusing them. A
    /// consistent read from no version is never expired nor too large, so the 410 and 504
    /// storms do not answer it; an apiserver that is down does not answer at all.
    pub fn watch_list(&mut self, now: Instant) -> WatchAnswer {
        self.compact_older_than(now);
        if self.down(now) {
            return WatchAnswer::Transport("connection refused (apiserver restarting)".into());
        }
        if self.refuse_streaming {
            let message = "ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: \
                           Forbidden: sendInitialEvents is forbidden for watch unless the \
                           WatchList feature gate is enabled";
            return WatchAnswer::Status(
                422,
                self.status(422, "Invalid", message, Some("FieldValueForbidden")),
            );
        }
        let mut frames: Vec<Frame> = self
            .visible_objects()
            .map(|o| self.pod_frame("ADDED", o, Some(o.rv)))
            .collect();
        let rv = self.rv;
        let mut end = frame(
            "BOOKMARK",
            &format!(
                "{{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{{\"resourceVersion\":\"{rv}\",\"annotations\":{{\"k8s.io/initial-events-end\":\"true\"}}}},\"spec\":{{\"containers\":null}},\"status\":{{}}}}"
            ),
            Some(rv),
        );
        if self.protobuf {
            end.protobuf = Some(crate::apiserver::wire::bookmark(self.served, rv, true).into());
        }
        frames.push(end);
        WatchAnswer::Open(frames)
    }

    fn too_large(&self, cursor: &str) -> WatchAnswer {
        let message = format!("Too large resource version: {cursor}, current: {}", self.rv);
        WatchAnswer::Status(
            504,
            self.status(504, "Timeout", &message, Some("ResourceVersionTooLarge")),
        )
    }

    /// Drops all history: every cursor older than now is expired.
    pub fn compact(&mut self) {
        self.history.clear();
        self.compacted = self.rv;
    }

    /// The next `count` WATCHes answer 410, and history is compacted.
    pub fn gone_storm(&mut self, count: u32) {
        self.compact();
        self.gone_left = self.gone_left.saturating_add(count);
    }

    /// The next `count` WATCHes answer 504.
    pub fn too_large_storm(&mut self, count: u32) {
        self.too_large_left = self.too_large_left.saturating_add(count);
    }

    /// The next `count` LISTs fail with `status` (0: transport error).
    pub fn fail_lists(&mut self, count: u32, status: u16) {
        self.list_fail
            .extend(std::iter::repeat_n(status, count.min(10_000) as usize));
    }

    /// Restart: the watch cache is lost and requests fail until `now + down`.
    pub fn restart(&mut self, now: Instant, down: Duration) {
        self.compact();
        self.down_until = Some(now + down);
    }

    /// A frame that does not decode: with `cursor`, it names a fresh version (a no-op write);
    /// without, it names none.
    pub fn malformed_frame(&mut self, now: Instant, cursor: bool) -> Frame {
        if cursor {
            let rv = self.bump(now);
            let line = format!(
                "{{\"type\":\"MODIFIED\",\"object\":{{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{{\"name\":\"corrupt\",\"resourceVersion\":\"{rv}\",\"labels\":\"not-a-map\"}}}}}}"
            );
            Frame {
                line,
                protobuf: self
                    .protobuf
                    .then(|| crate::apiserver::wire::malformed_frame(self.served, Some(rv)).into()),
                rv: Some(rv),
            }
        } else {
            Frame {
                line: "{\"type\":\"MODIFIED\",\"object\":{\"kind\":\"Pod\",\"metadata\":{\"name\":\"corrupt\",\"labels\":\"not-a-map\"}}".into(),
                protobuf: self
                    .protobuf
                    .then(|| crate::apiserver::wire::malformed_frame(self.served, None).into()),
                rv: None,
            }
        }
    }

    /// The objects for an in-process source's opening `Replace`, as JSON.
    #[must_use]
    pub fn snapshot(&self) -> Vec<String> {
        self.objects.values().map(|o| o.json.to_string()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reconcile_core::frame::{WatchEvent, parse_frame_as, parse_status};
    use reconcile_core::list::parse_list;
    use reconcile_core::pod::PodView;

    fn header(selector: &str) -> Header {
        Header {
            namespace: Some("ns".into()),
            label_selector: Some(selector.into()),
            ..Header::default()
        }
    }

    fn pod(name: &str, app: &str) -> String {
        format!(r#"{{"metadata":{{"name":"{name}","namespace":"ns","labels":{{"app":"{app}"}}}}}}"#)
    }

    fn types(frames: &[Frame]) -> Vec<String> {
        frames
            .iter()
            .map(|f| {
                let v: Value = serde_json::from_str(&f.line).unwrap();
                format!(
                    "{} {} {}",
                    v["type"].as_str().unwrap(),
                    v["object"]["metadata"]["name"].as_str().unwrap_or("-"),
                    v["object"]["metadata"]["resourceVersion"].as_str().unwrap()
                )
            })
            .collect()
    }

    #[test]
    fn leaving_the_selector_is_deleted_and_entering_it_is_added() {
        let mut w = World::new(&header("app=cell"));
        let t = Instant::ZERO;
        w.put(t, &pod("a", "cell")).unwrap();
        w.put(t, &pod("a", "other")).unwrap();
        w.put(t, &pod("a", "cell")).unwrap();
        w.put(t, &pod("b", "other")).unwrap();
        assert!(w.delete(t, "ns/a"));
        let WatchAnswer::Open(frames) = w.watch(t, "1") else {
            panic!()
        };
        assert_eq!(
            types(&frames),
            ["ADDED a 2", "DELETED a 3", "ADDED a 4", "DELETED a 6"]
        );
    }

    #[test]
    fn each_object_keeps_its_own_namespace_and_all_namespaces_serves_every_one() {
        let object = |ns: Option<&str>, name: &str| match ns {
            Some(ns) => format!(r#"{{"metadata":{{"name":"{name}","namespace":"{ns}"}}}}"#),
            None => format!(r#"{{"metadata":{{"name":"{name}"}}}}"#),
        };
        let names =
            |w: &World| -> Vec<String> { w.visible_objects().map(|o| o.key.clone()).collect() };
        let mut all = World::new(&Header::default());
        let mut one = World::new(&Header {
            namespace: Some("a".into()),
            ..Header::default()
        });
        for w in [&mut all, &mut one] {
            for (ns, name) in [
                (Some("a"), "p"),
                (Some("b"), "q"),
                (Some("c"), "r"),
                (None, "s"),
            ] {
                w.put(Instant::ZERO, &object(ns, name)).unwrap();
            }
        }
        assert_eq!(names(&all), ["a/p", "b/q", "c/r", "s"]);
        // The watched namespace's objects, and one that names none, keyed as it came (no
        // namespace is filled in: a replay's core keys it `s` too).
        assert_eq!(names(&one), ["a/p", "s"]);
        assert_eq!(one.key_of(&object(None, "s")).unwrap(), "s");
    }

    #[test]
    fn compacted_cursor_is_410_future_is_504_unset_is_synthetic_added() {
        let mut w = World::new(&header("app=cell"));
        w.put(Instant::ZERO, &pod("a", "cell")).unwrap();
        let later = Instant::from_duration(Duration::from_secs(1000));
        w.put(later, &pod("b", "cell")).unwrap();
        assert!(
            matches!(w.watch(later, "1"), WatchAnswer::GoneFrame(f) if f.line.contains("\"code\":410"))
        );
        assert!(
            matches!(w.watch(later, "99"), WatchAnswer::Status(504, b) if b.json.contains("ResourceVersionTooLarge"))
        );
        let WatchAnswer::Open(frames) = w.watch(later, "") else {
            panic!()
        };
        assert_eq!(types(&frames), ["ADDED a 2", "ADDED b 3"]);
        let WatchAnswer::Open(frames) = w.watch(later, "2") else {
            panic!()
        };
        assert_eq!(types(&frames), ["ADDED b 3"]);
    }

    #[test]
    fn list_serves_the_current_version_and_failures_are_counted_down() {
        let mut w = World::new(&header("app=cell"));
        w.put(Instant::ZERO, &pod("a", "cell")).unwrap();
        w.put(Instant::ZERO, &pod("x", "other")).unwrap();
        w.fail_lists(1, 503);
        assert!(matches!(
            w.list(Instant::ZERO),
            ListAnswer::Response(503, _)
        ));
        let ListAnswer::Response(200, body) = w.list(Instant::ZERO) else {
            panic!()
        };
        let v: Value = serde_json::from_str(&body.json).unwrap();
        assert_eq!(v["metadata"]["resourceVersion"], "3");
        assert_eq!(v["items"].as_array().unwrap().len(), 1);
    }

    #[test]
    fn pages_share_the_first_pages_version_and_a_compacted_token_is_410() {
        let mut w = World::new(&header("app=cell"));
        for name in ["a", "b", "c", "d", "e"] {
            w.put(Instant::ZERO, &pod(name, "cell")).unwrap();
        }
        let page = |answer: (ListAnswer, Option<u64>)| {
            let (ListAnswer::Response(status, body), _) = answer else {
                panic!("no answer")
            };
            (status, serde_json::from_str::<Value>(&body.json).unwrap())
        };
        let (status, first) = page(w.list_page(Instant::ZERO, Some(2), None));
        assert_eq!(status, 200);
        assert_eq!(first["metadata"]["resourceVersion"], "6");
        assert!(
            first["metadata"].get("remainingItemCount").is_none(),
            "not under a label selector, as the apiserver"
        );
        let token = first["metadata"]["continue"].as_str().unwrap().to_owned();
        // A change after the first page is not in the listing: every page is at version 6.
        let c = w.key_of(&pod("c", "cell")).unwrap();
        assert!(w.delete(Instant::ZERO, &c));
        w.put(Instant::ZERO, &pod("f", "cell")).unwrap();
        let (_, second) = page(w.list_page(Instant::ZERO, Some(2), Some(&token)));
        assert_eq!(second["metadata"]["resourceVersion"], "6");
        let names: Vec<_> = second["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["metadata"]["name"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(names, ["c", "d"]);
        let token = second["metadata"]["continue"].as_str().unwrap().to_owned();
        let (_, last) = page(w.list_page(Instant::ZERO, Some(2), Some(&token)));
        assert!(last["metadata"].get("continue").is_none());
        assert_eq!(last["items"].as_array().unwrap().len(), 1);
        // Compaction past the token's version expires it.
        w.compact();
        let (status, gone) = page(w.list_page(Instant::ZERO, Some(2), Some(&token)));
        assert_eq!(status, 410);
        assert_eq!(gone["reason"], "Expired");
        let (status, _) = page(w.list_page(Instant::ZERO, Some(2), Some("garbage")));
        assert_eq!(status, 400);
    }

    #[test]
    fn a_streaming_list_is_the_state_then_the_end_bookmark_or_a_422_when_refused() {
        let mut w = World::new(&header("app=cell"));
        w.put(Instant::ZERO, &pod("b", "cell")).unwrap();
        w.put(Instant::ZERO, &pod("a", "cell")).unwrap();
        w.put(Instant::ZERO, &pod("x", "other")).unwrap();
        w.gone_storm(1);
        let WatchAnswer::Open(frames) = w.watch_list(Instant::ZERO) else {
            panic!("a consistent read from no version is never expired")
        };
        assert_eq!(types(&frames), ["ADDED a 3", "ADDED b 2", "BOOKMARK - 4"]);
        let end = frames.last().unwrap();
        assert!(end.line.contains(r#""k8s.io/initial-events-end":"true""#));
        assert_eq!(end.rv, Some(4));
        w.refuse_streaming_lists(true);
        let WatchAnswer::Status(422, body) = w.watch_list(Instant::ZERO) else {
            panic!("refused")
        };
        let v: Value = serde_json::from_str(&body.json).unwrap();
        assert_eq!(v["reason"], "Invalid");
        assert!(
            v["message"]
                .as_str()
                .unwrap()
                .contains("WatchList feature gate")
        );
        w.restart(Instant::ZERO, Duration::from_secs(5));
        assert!(matches!(
            w.watch_list(Instant::ZERO),
            WatchAnswer::Transport(_)
        ));
    }

    #[test]
    fn pages_read_past_unmatched_objects_and_list_the_state_at_the_first_pages_version() {
        let mut w = World::new(&header("app=cell"));
        for i in 0..50 {
            let app = if i % 2 == 0 { "cell" } else { "other" };
            w.put(Instant::ZERO, &pod(&format!("p{i:02}"), app))
                .unwrap();
        }
        let mut names = Vec::new();
        let mut token: Option<String> = None;
        for round in 0..100 {
            let (ListAnswer::Response(200, body), _) =
                w.list_page(Instant::ZERO, Some(3), token.as_deref())
            else {
                panic!("no page")
            };
            let page: Value = serde_json::from_str(&body.json).unwrap();
            assert_eq!(page["metadata"]["resourceVersion"], "51");
            for item in page["items"].as_array().unwrap() {
                names.push(item["metadata"]["name"].as_str().unwrap().to_owned());
            }
            // Changes between pages are not in the listing.
            let key = w
                .key_of(&pod(&format!("p{:02}", 2 * round), "cell"))
                .unwrap();
            w.delete(Instant::ZERO, &key);
            w.put(Instant::ZERO, &pod(&format!("q{round:02}"), "cell"))
                .unwrap();
            token = page["metadata"]["continue"].as_str().map(str::to_owned);
            if token.is_none() {
                break;
            }
        }
        let expected: Vec<String> = (0..50).step_by(2).map(|i| format!("p{i:02}")).collect();
        assert_eq!(names, expected);
    }

    fn protobuf_world() -> World {
        World::new(&Header {
            wire_format: WireFormat::Protobuf,
            ..header("app=cell")
        })
    }

    fn rich_pod(name: &str) -> String {
        format!(
            r#"{{"kind":"Pod","metadata":{{"name":"{name}","namespace":"ns","labels":{{"app":"cell"}},"annotations":{{"a":"b"}},"deletionTimestamp":"2024-02-29T12:34:56Z","ownerReferences":[{{"apiVersion":"v1","kind":"Cell","name":"c","uid":"u","controller":true}}]}},"spec":{{"nodeName":"n1","nodeSelector":{{"zone":"a"}},"schedulingGates":[{{"name":"g"}}]}},"status":{{"phase":"Running","podIP":"10.0.0.1","conditions":[{{"type":"Ready","status":"True","reason":"Ok"}}],"containerStatuses":[{{"name":"c0","restartCount":2,"containerID":"cid","state":{{"running":{{"startedAt":"2024-01-01T00:00:00Z"}}}},"lastState":{{"terminated":{{"containerID":"old"}}}}}}]}}}}"#
        )
    }

    fn proto(body: &Body) -> &[u8] {
        body.protobuf
            .as_deref()
            .expect("a protobuf world builds protobuf")
    }

    fn both<O: reconcile_core::Object + PartialEq + std::fmt::Debug>(
        f: &Frame,
    ) -> (WatchEvent<O>, WatchEvent<O>) {
        let json = parse_frame_as::<O>(f.line.as_bytes(), WireFormat::Protobuf).unwrap();
        let bytes = f.protobuf.as_deref().expect("protobuf frame");
        assert!(!bytes.starts_with(b"{"), "a protobuf frame, not JSON");
        let protobuf = parse_frame_as::<O>(bytes, WireFormat::Protobuf).unwrap();
        (json, protobuf)
    }

    #[test]
    fn a_protobuf_world_serves_the_same_lists_and_frames_as_its_json() {
        let mut w = protobuf_world();
        w.put(Instant::ZERO, &rich_pod("b")).unwrap();
        w.put(Instant::ZERO, &rich_pod("a")).unwrap();
        w.put(Instant::ZERO, &pod("c", "cell")).unwrap();
        w.put(Instant::ZERO, &pod("x", "other")).unwrap();
        let ListAnswer::Response(200, body) = w.list(Instant::ZERO) else {
            panic!()
        };
        let bytes = proto(&body);
        assert!(bytes.starts_with(b"k8s\0"));
        assert_eq!(
            reconcile_core::protobuf::payload_kind(bytes),
            Some("PodList")
        );
        let from_json = parse_list::<PodView>(body.json.as_bytes()).unwrap();
        let from_proto = parse_list::<PodView>(bytes).unwrap();
        assert_eq!(from_proto.resource_version, "5");
        assert_eq!(from_proto.items.len(), 3);
        assert!(from_proto.items[0].metadata.deletion_timestamp.is_some());
        assert_eq!(from_json.items, from_proto.items);
        // Pages carry the same token and count.
        let (ListAnswer::Response(200, page), _) = w.list_page(Instant::ZERO, Some(2), None) else {
            panic!()
        };
        let (j, p) = (
            parse_list::<PodView>(page.json.as_bytes()).unwrap(),
            parse_list::<PodView>(proto(&page)).unwrap(),
        );
        assert_eq!(p.continue_token.as_deref(), Some("5:ns/b"));
        assert_eq!(
            (j.continue_token, j.remaining_item_count, j.items),
            (p.continue_token, p.remaining_item_count, p.items)
        );
        // Every frame type, JSON and protobuf alike.
        w.put(Instant::ZERO, &pod("a", "cell")).unwrap();
        assert!(w.delete(Instant::ZERO, "ns/b"));
        let WatchAnswer::Open(frames) = w.watch(Instant::ZERO, "1") else {
            panic!()
        };
        assert_eq!(frames.len(), 5);
        for f in &frames {
            let (j, p) = both::<PodView>(f);
            assert_eq!(j, p);
        }
        let (_, p) = both::<PodView>(&w.bookmark(None));
        assert_eq!(
            p,
            WatchEvent::Bookmark {
                resource_version: "7".into(),
                initial_events_end: false
            }
        );
        let WatchAnswer::Open(frames) = w.watch_list(Instant::ZERO) else {
            panic!()
        };
        let end = frames.last().unwrap();
        assert!(end.is_initial_events_end());
        let (_, p) = both::<PodView>(end);
        assert_eq!(
            p,
            WatchEvent::Bookmark {
                resource_version: "7".into(),
                initial_events_end: true
            }
        );
    }

    #[test]
    fn a_protobuf_worlds_errors_are_enveloped_statuses() {
        let mut w = protobuf_world();
        w.put(Instant::ZERO, &pod("a", "cell")).unwrap();
        w.gone_storm(1);
        let WatchAnswer::GoneFrame(f) = w.watch(Instant::ZERO, "1") else {
            panic!()
        };
        let (j, p) = both::<PodView>(&f);
        assert_eq!(j, p);
        let WatchEvent::Error(status) = p else {
            panic!("{p:?}")
        };
        assert!(status.is_expired());
        let WatchAnswer::Status(504, body) = w.watch(Instant::ZERO, "99") else {
            panic!()
        };
        let status = parse_status(proto(&body)).unwrap();
        assert_eq!(status.code, Some(504));
        assert_eq!(status.causes, ["ResourceVersionTooLarge"]);
        assert_eq!(Some(status), parse_status(body.json.as_bytes()));
        w.fail_lists(1, 503);
        let ListAnswer::Response(503, body) = w.list(Instant::ZERO) else {
            panic!()
        };
        assert_eq!(
            reconcile_core::protobuf::payload_kind(proto(&body)),
            Some("Status")
        );
        assert_eq!(parse_status(proto(&body)).unwrap().code, Some(503));
    }

    #[test]
    fn a_protobuf_worlds_malformed_frames_fail_as_their_json_do() {
        let mut w = protobuf_world();
        for cursor in [true, false] {
            let f = w.malformed_frame(Instant::ZERO, cursor);
            let j = parse_frame_as::<PodView>(f.line.as_bytes(), WireFormat::Protobuf).unwrap_err();
            let p = parse_frame_as::<PodView>(f.protobuf.as_deref().unwrap(), WireFormat::Protobuf)
                .unwrap_err();
            assert_eq!(
                j.resource_version, p.resource_version,
                "cursor {cursor}: {p}"
            );
            assert_eq!(p.resource_version.is_some(), cursor);
        }
    }
}
