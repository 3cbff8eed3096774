//! The storage: objects per collection in key order, one resourceVersion sequence across
//! every collection (etcd's revision), a bounded history per collection, compaction.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use bytes::Bytes;
use reconcile_core::Instant;
use serde_json::{Map, Value};

use super::kinds::KindDescriptor;
use super::status::ApiStatus;
use super::{Cluster, KindId};

/// `(namespace, name)`; the namespace is `""` for a cluster-scoped object. Ordered as etcd
/// orders `/registry/<resource>/<namespace>/<name>`, which is the LIST order.
pub(super) type Key = (String, String);

/// One object as the cluster keeps it: its JSON, exactly as it is served.
///
/// Bytes, not a `Value`: a `Value` of a 1 KB ConfigMap is a tree of a dozen maps of about
/// 600 bytes each, and tens of thousands of such trees, living long among the short-lived
/// allocations of every request, fragment the heap until glibc's malloc slows with its
/// size (issue 26). One buffer per object does not; and a watch frame or a GET copies the
/// bytes instead of serializing a tree. A write or a selector parses them again.
#[derive(Debug)]
pub(super) struct Object {
    json: Bytes,
}

impl Object {
    /// `v`, serialized.
    pub fn new(v: &Value) -> Arc<Object> {
        Arc::new(Object {
            json: Bytes::from(to_json_vec(v, 0)),
        })
    }

    /// The JSON, as served.
    pub fn json(&self) -> &[u8] {
        &self.json
    }

    /// The JSON, shared (a GET's body), not copied.
    pub fn shared_json(&self) -> Bytes {
        self.json.clone()
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.json.len()
    }

    /// The object, parsed. The bytes were written from a `Value`, so they parse; `Null`
    /// stands in if they ever did not.
    pub fn value(&self) -> Value {
        serde_json::from_slice(&self.json).unwrap_or(Value::Null)
    }
}

/// The metadata the garbage collector reads of every object on a full pass, taken when the
/// object is stored, so that a pass parses none of them.
#[derive(Debug, Default)]
pub(super) struct Head {
    /// `metadata.uid` (`""` when absent).
    pub uid: String,
    /// Whether `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    /// `metadata.finalizers`.
    pub finalizers: Vec<String>,
    /// `(owner uid, blockOwnerDeletion)` of each of `metadata.ownerReferences`.
    pub owners: Vec<(String, bool)>,
}

impl Head {
    /// Read from the object, as [`meta_str`], [`finalizers`] and [`owners`] read it.
    pub fn of(v: &Value) -> Self {
        Head {
            uid: meta_str(v, "uid").to_owned(),
            deleting: !meta_str(v, "deletionTimestamp").is_empty(),
            finalizers: finalizers(v),
            owners: owners(v),
        }
    }
}

/// One object as stored.
#[derive(Debug)]
pub(super) struct Stored {
    pub object: Arc<Object>,
    pub head: Head,
}

/// What a change did, as a watch event names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum EventType {
    Added,
    Modified,
    Deleted,
}

/// One entry of a collection's history.
#[derive(Debug, Clone)]
pub(super) struct Event {
    pub rv: u64,
    pub at: Instant,
    pub kind: EventType,
    pub key: Key,
    /// The object after the change; for `Deleted`, its last state at the deletion's version.
    pub object: Arc<Object>,
    /// The object before (for selector transitions and reads at an older version).
    pub prev: Option<Arc<Object>>,
    pub bytes: usize,
}

/// One registered kind and its objects.
#[derive(Debug)]
pub(super) struct Collection {
    /// Shared, so a write holds it while it changes the collection, without a copy.
    pub desc: Arc<KindDescriptor>,
    pub objects: BTreeMap<Key, Stored>,
    pub bytes: usize,
    pub history: VecDeque<Event>,
    pub history_bytes: usize,
    /// The highest version compacted out of this collection's history (0: none): a watch
    /// whose cursor is below it has missed events.
    pub dropped_up_to: u64,
}

impl Collection {
    pub fn new(desc: KindDescriptor) -> Self {
        Collection {
            desc: Arc::new(desc),
            objects: BTreeMap::new(),
            bytes: 0,
            history: VecDeque::new(),
            history_bytes: 0,
            dropped_up_to: 0,
        }
    }
}

/// The object's `metadata`, when it is an object.
pub(super) fn meta(v: &Value) -> Option<&Map<String, Value>> {
    v.get("metadata").and_then(Value::as_object)
}

/// A string field of `metadata` (`""` when absent).
pub(super) fn meta_str<'a>(v: &'a Value, key: &str) -> &'a str {
    meta(v)
        .and_then(|m| m.get(key))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// `metadata`, created when missing; `None` when the value is not an object.
pub(super) fn meta_mut(v: &mut Value) -> Option<&mut Map<String, Value>> {
    let obj = v.as_object_mut()?;
    let m = obj
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !m.is_object() {
        *m = Value::Object(Map::new());
    }
    m.as_object_mut()
}

/// `metadata.labels` as a sorted map (non-string values skipped).
pub(super) fn labels(v: &Value) -> BTreeMap<String, String> {
    meta(v)
        .and_then(|m| m.get("labels"))
        .and_then(Value::as_object)
        .map(|l| {
            l.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

/// `metadata.finalizers`.
pub(super) fn finalizers(v: &Value) -> Vec<String> {
    meta(v)
        .and_then(|m| m.get("finalizers"))
        .and_then(Value::as_array)
        .map(|f| {
            f.iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// `(owner uid, blockOwnerDeletion)` of each ownerReference.
pub(super) fn owners(v: &Value) -> Vec<(String, bool)> {
    meta(v)
        .and_then(|m| m.get("ownerReferences"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|o| {
            let uid = o.get("uid")?.as_str()?.to_owned();
            let block = o
                .get("blockOwnerDeletion")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            Some((uid, block))
        })
        .collect()
}

/// The length of `v` serialized as JSON, counted without building the bytes (0 if it
/// cannot be serialized; a `Value` always can).
pub(super) fn serialized_len(v: &impl serde::Serialize) -> usize {
    /// Counts what is written, keeps nothing.
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    serde_json::to_writer(&mut count, v).map_or(0, |()| count.0)
}

/// `v` as JSON, with room for `extra` more bytes (a frame's newline), in one allocation of
/// the exact size. Growing the buffer as it is written would reallocate it a dozen times
/// per object, and requests past 1 KiB send glibc's allocator down a slow path whose cost
/// grows with the heap, so a cluster of ten times the objects paid more per request.
pub(crate) fn to_json_vec(v: &impl serde::Serialize, extra: usize) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(serialized_len(v) + extra);
    match serde_json::to_writer(&mut bytes, v) {
        Ok(()) => bytes,
        Err(_) => Vec::new(),
    }
}

/// Seconds from the Unix epoch of the virtual clock's origin: 2026-01-01T00:00:00Z.
pub const EPOCH_UNIX_SECONDS: i64 = 1_767_225_600;

/// `now` as RFC 3339 in whole seconds (what a `metav1.Time` serializes to), counted from
/// 2026-01-01T00:00:00Z at [`Instant::ZERO`].
#[must_use]
pub fn timestamp(now: Instant) -> String {
    let secs = EPOCH_UNIX_SECONDS
        + i64::try_from(now.since_origin().as_secs()).unwrap_or(i64::MAX / 2 - EPOCH_UNIX_SECONDS);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

impl Cluster {
    pub(super) fn col(&self, kind: KindId) -> &Collection {
        &self.collections[kind.0]
    }

    /// Stores `object` under `key` (or deletes the key, `object` being its last state) at
    /// the next resourceVersion, which it writes into the object; records the change.
    /// Refuses, changing nothing, when a bound would be passed.
    pub(super) fn commit(
        &mut self,
        kind: KindId,
        key: &Key,
        object: Value,
        delete: bool,
    ) -> Result<Arc<Value>, ApiStatus> {
        let now = self.now;
        let rv = self.rv + 1;
        let config = &self.config;
        let col = &mut self.collections[kind.0];
        let prev = col
            .objects
            .get(key)
            .map(|s| (s.object.clone(), s.head.uid.clone()));
        let mut object = object;
        let event_type = match (delete, &prev) {
            (false, None) => EventType::Added,
            (false, Some(_)) => EventType::Modified,
            (true, Some(_)) => EventType::Deleted,
            (true, None) => return Err(ApiStatus::not_found(&col.desc, &key.1)),
        };
        if let Some(m) = meta_mut(&mut object) {
            m.insert("resourceVersion".into(), rv.to_string().into());
        }
        let stored = Object::new(&object);
        let bytes = stored.len();
        let what = col.desc.group_resource();
        if bytes > config.max_object_bytes {
            return Err(ApiStatus::too_large(&format!(
                "limit is {}",
                config.max_object_bytes
            )));
        }
        let prev_bytes = prev.as_ref().map_or(0, |(p, _)| p.len());
        if event_type == EventType::Added && col.objects.len() >= config.max_objects_per_kind {
            return Err(ApiStatus::bound_exceeded(&format!(
                "{what} holds {} objects (max_objects_per_kind)",
                col.objects.len()
            )));
        }
        let stored_bytes = if event_type == EventType::Deleted {
            0
        } else {
            bytes
        };
        if col.bytes - prev_bytes + stored_bytes > config.max_bytes_per_kind {
            return Err(ApiStatus::bound_exceeded(&format!(
                "{what} would hold more than {} bytes (max_bytes_per_kind)",
                config.max_bytes_per_kind
            )));
        }
        if col.history.len() >= config.max_history_per_kind
            || col.history_bytes + bytes > config.max_history_bytes_per_kind
        {
            return Err(ApiStatus::bound_exceeded(&format!(
                "the history of {what} is full ({} changes, {} bytes): compact it \
                 (Cluster::compact) or set a compaction window",
                col.history.len(),
                col.history_bytes
            )));
        }
        col.history.push_back(Event {
            rv,
            at: now,
            kind: event_type,
            key: key.clone(),
            object: stored.clone(),
            prev: prev.as_ref().map(|(p, _)| p.clone()),
            bytes,
        });
        col.history_bytes += bytes;
        col.bytes = col.bytes - prev_bytes + stored_bytes;
        let deleted = event_type == EventType::Deleted;
        if deleted {
            col.objects.remove(key);
        } else {
            let head = Head::of(&object);
            col.objects.insert(
                key.clone(),
                Stored {
                    object: stored,
                    head,
                },
            );
        }
        self.rv = rv;
        let prev_uid = prev.as_ref().map(|(_, uid)| uid.as_str());
        let uid_now = (!deleted).then(|| meta_str(&object, "uid"));
        self.gc.note((kind, key.clone()), prev_uid, uid_now);
        Ok(Arc::new(object))
    }

    /// Drops every change at or below `rv` from every history, as etcd's compaction does:
    /// reads and watches from a version below it then get 410 `Expired`. Returns the
    /// version compacted to (never above the current one, never lower than before).
    pub fn compact(&mut self, rv: u64) -> u64 {
        let to = rv.min(self.rv).max(self.compacted);
        for col in &mut self.collections {
            while col.history.front().is_some_and(|e| e.rv <= to) {
                if let Some(e) = col.history.pop_front() {
                    col.history_bytes -= e.bytes;
                    col.dropped_up_to = e.rv;
                }
            }
        }
        self.compacted = to;
        to
    }

    /// With a compaction window, compacts every change made longer ago than the window.
    pub(super) fn compact_window(&mut self) {
        let Some(window) = self.config.compaction_window else {
            return;
        };
        let Some(horizon) = self.now.since_origin().checked_sub(window) else {
            return;
        };
        let horizon = Instant::from_duration(horizon);
        let to = self
            .collections
            .iter()
            .flat_map(|c| c.history.iter().take_while(|e| e.at < horizon).last())
            .map(|e| e.rv)
            .max();
        if let Some(to) = to {
            self.compact(to);
        }
    }

    /// The JSON of each object of `kind` now, in key order (namespace, then name), to
    /// decode in place.
    #[cfg(feature = "runtime")]
    pub(crate) fn current_objects(&self, kind: KindId) -> impl Iterator<Item = &[u8]> {
        self.col(kind).objects.values().map(|s| s.object.json())
    }

    /// The collection's objects as they were at `rv` (undoing later changes), in key order.
    /// `None` when changes after `rv` were compacted away.
    pub(super) fn objects_at(&self, kind: KindId, rv: u64) -> Option<BTreeMap<Key, Arc<Object>>> {
        let col = self.col(kind);
        if rv < self.compacted || rv < col.dropped_up_to {
            return None;
        }
        let mut objects: BTreeMap<Key, Arc<Object>> = col
            .objects
            .iter()
            .map(|(k, s)| (k.clone(), s.object.clone()))
            .collect();
        for e in col.history.iter().rev().take_while(|e| e.rv > rv) {
            match &e.prev {
                Some(p) => objects.insert(e.key.clone(), p.clone()),
                None => objects.remove(&e.key),
            };
        }
        Some(objects)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn timestamps_count_from_2026() {
        assert_eq!(timestamp(Instant::ZERO), "2026-01-01T00:00:00Z");
        let t = Instant::from_duration(Duration::from_secs(86_400 * 59 + 3661));
        assert_eq!(timestamp(t), "2026-03-01T01:01:01Z");
    }

    #[test]
    fn an_object_keeps_the_json_it_was_given_and_parses_back_to_it() {
        let v = serde_json::json!({
            "metadata": {"name": "a", "uid": "u-1", "resourceVersion": "7"},
            "data": {"big": u64::MAX, "neg": -3, "f": 0.1, "s": "x\"y\u{2028}"},
        });
        let object = Object::new(&v);
        assert_eq!(object.json(), serde_json::to_vec(&v).unwrap().as_slice());
        assert_eq!(object.len(), object.json().len());
        assert_eq!(object.value(), v);
        assert_eq!(&object.shared_json()[..], object.json());
    }

    #[test]
    fn the_collectors_head_reads_what_the_lenient_readers_read() {
        let v = serde_json::json!({"metadata": {
            "uid": "u-1",
            "deletionTimestamp": "2026-01-01T00:00:00Z",
            "finalizers": ["orphan", 3, "foregroundDeletion"],
            "ownerReferences": [
                {"uid": "o-1", "blockOwnerDeletion": true},
                {"uid": "o-2"},
                {"name": "no uid"},
            ],
        }});
        let head = Head::of(&v);
        assert_eq!(head.uid, "u-1");
        assert!(head.deleting);
        assert_eq!(head.finalizers, ["orphan", "foregroundDeletion"]);
        assert_eq!(
            head.owners,
            [("o-1".to_owned(), true), ("o-2".to_owned(), false)]
        );
        // Absent, empty and mistyped fields read as nothing, as `meta_str` reads them.
        let bare = Head::of(&serde_json::json!({"metadata": {"deletionTimestamp": ""}}));
        assert_eq!(bare.uid, "");
        assert!(!bare.deleting);
        assert!(bare.finalizers.is_empty() && bare.owners.is_empty());
        assert!(!Head::of(&serde_json::json!({"metadata": {"deletionTimestamp": 5}})).deleting);
    }
}
