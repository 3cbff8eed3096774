//! The inputs every peer sees: real-shaped pods cloned from the captured v1.36 pod list, and
//! the watch frames that follow the LIST.
//!
//! The shapes follow `core/benches/throughput.rs` (issue 2): about 8 KB of JSON per pod,
//! managedFields included; 90% MODIFIED, 4% ADDED, 4% DELETED, 2% BOOKMARK; frames written
//! with `"type"` before `"object"`, as the apiserver writes them. One extra pod, the
//! *sentinel* (label `cell=sentinel`), is modified by the very last frame
//! (`bench/phase: end`): a peer has processed every frame once it reconciles that state.

use serde_json::Value;

use crate::BenchError;

/// The namespace every object lives in.
pub const NAMESPACE: &str = "bench";
/// The label selector every peer uses (the `cell` label's existence).
pub const SELECTOR: &str = "cell";
/// Name of the pod whose last frame marks the end of a run.
pub const SENTINEL: &str = "sentinel";
/// Annotation on the sentinel: `start` in the LIST, `end` in the last frame.
pub const PHASE_ANNOTATION: &str = "bench/phase";
/// Pods per parent (`cell` label value).
pub const PODS_PER_CELL: usize = 10;

/// The pod templates of the captured v1.36 pod list.
///
/// # Errors
/// The trace is missing or is not a pod list.
pub fn templates() -> Result<Vec<Value>, BenchError> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../testdata/real/k8s-openapi/v1-36_pod-list.body.json"
    );
    let body = std::fs::read(path).map_err(|e| BenchError::Input(format!("{path}: {e}")))?;
    let list: Value =
        serde_json::from_slice(&body).map_err(|e| BenchError::Input(format!("{path}: {e}")))?;
    match list["items"].as_array() {
        Some(items) if !items.is_empty() => Ok(items.clone()),
        _ => Err(BenchError::Input(format!("{path}: no items"))),
    }
}

/// Pod `i` (`pod-000042`, cell `cell-00004`) at resourceVersion `rv`.
#[must_use]
pub fn pod(templates: &[Value], i: usize, rv: u64) -> Value {
    let mut pod = templates[i % templates.len()].clone();
    let meta = &mut pod["metadata"];
    meta["name"] = Value::from(format!("pod-{i:06}"));
    meta["namespace"] = Value::from(NAMESPACE);
    meta["uid"] = Value::from(format!("00000000-0000-0000-0000-{i:012}"));
    meta["resourceVersion"] = Value::from(rv.to_string());
    meta["labels"]["cell"] = Value::from(format!("cell-{:05}", i / PODS_PER_CELL));
    pod
}

/// The sentinel pod in `phase` (`start` or `end`).
#[must_use]
pub fn sentinel(templates: &[Value], phase: &str, rv: u64) -> Value {
    let mut pod = pod(templates, 0, rv);
    let meta = &mut pod["metadata"];
    meta["name"] = Value::from(SENTINEL);
    meta["uid"] = Value::from("00000000-0000-0000-0001-000000000000");
    meta["labels"]["cell"] = Value::from(SENTINEL);
    meta["annotations"][PHASE_ANNOTATION] = Value::from(phase);
    pod
}

/// One watch line, `type` before `object` (a `json!` map would sort the keys). A watch
/// event's object carries `kind` and `apiVersion` first, as the apiserver writes it, while
/// LIST items (and the captured ones) carry neither; they are added here when missing.
#[must_use]
pub fn frame(kind: &str, object: &Value) -> Vec<u8> {
    let mut out = format!(r#"{{"type":"{kind}","object":"#).into_bytes();
    let body = object.to_string();
    push_typed_object(&mut out, body.as_bytes());
    out.push(b'}');
    out
}

/// Appends `object` (serialized JSON) with `"kind":"Pod","apiVersion":"v1"` in front when
/// it has no `kind`.
pub fn push_typed_object(out: &mut Vec<u8>, object: &[u8]) {
    if object.starts_with(b"{\"kind\"") || object.len() < 2 {
        out.extend_from_slice(object);
    } else {
        out.extend_from_slice(br#"{"kind":"Pod","apiVersion":"v1","#);
        out.extend_from_slice(&object[1..]);
    }
}

/// A bookmark frame at `rv`, optionally the streaming list's initial-events-end marker.
#[must_use]
pub fn bookmark(rv: u64, initial_events_end: bool) -> Vec<u8> {
    // The apiserver leaves `annotations` out unless it has one to send.
    let annotations = if initial_events_end {
        r#","annotations":{"k8s.io/initial-events-end":"true"}"#
    } else {
        ""
    };
    format!(
        r#"{{"type":"BOOKMARK","object":{{"kind":"Pod","apiVersion":"v1","metadata":{{"resourceVersion":"{rv}"{annotations}}},"spec":{{"containers":null}},"status":{{}}}}}}"#
    )
    .into_bytes()
}

/// Width of the resourceVersion stamped into every served frame.
const RV_WIDTH: usize = 12;

/// Everything a replay serves for one run.
#[derive(Debug, Clone)]
pub struct Workload {
    /// The LIST's items, serialized: `pods` pods, then the sentinel.
    pub items: Vec<Vec<u8>>,
    /// The LIST's `metadata.resourceVersion`.
    pub list_rv: u64,
    /// A pool of distinct frames, cycled to reach `frames`; each is served with a version of
    /// its own, stamped at `rv_at`.
    pub pool: Vec<Vec<u8>>,
    /// Where each pool frame's resourceVersion digits start.
    rv_at: Vec<usize>,
    /// How many frames follow the LIST (the sentinel's last frame included).
    pub frames: usize,
    /// The sentinel's last frame.
    pub last: Vec<u8>,
}

impl Workload {
    /// `pods` real-shaped pods plus the sentinel, then `frames` frames drawn from a pool of
    /// at most `pool` distinct ones (a fixed xorshift seed: every run is the same).
    #[must_use]
    pub fn new(templates: &[Value], pods: usize, frames: usize, pool: usize) -> Self {
        let pods = pods.max(1);
        let mut items: Vec<Vec<u8>> = (0..pods)
            .map(|i| serde_json::to_vec(&pod(templates, i, i as u64 + 1)).unwrap_or_default())
            .collect();
        let list_rv = pods as u64 + 1;
        items.push(serde_json::to_vec(&sentinel(templates, "start", list_rv)).unwrap_or_default());
        let mut rng = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        // A placeholder of the stamped width, overwritten for every frame served.
        let placeholder = 10u64.pow(RV_WIDTH as u32) - 1;
        let field = format!(r#""resourceVersion":"{placeholder}""#);
        let size = pool.min(frames.saturating_sub(1)).max(1);
        let (pool, rv_at) = (0..size)
            .map(|_| {
                let pick = next() % 100;
                let i = (next() as usize) % pods;
                let frame = match pick {
                    0..90 => frame("MODIFIED", &pod(templates, i, placeholder)),
                    90..94 => frame("ADDED", &pod(templates, i, placeholder)),
                    94..98 => frame("DELETED", &pod(templates, i, placeholder)),
                    _ => bookmark(placeholder, false),
                };
                let at =
                    find(&frame, field.as_bytes()).map_or(0, |at| at + field.len() - RV_WIDTH - 1);
                (frame, at)
            })
            .unzip();
        let last = frame(
            "MODIFIED",
            &sentinel(templates, "end", list_rv + frames as u64 + 1),
        );
        Workload {
            items,
            list_rv,
            pool,
            rv_at,
            frames: frames.max(1),
            last,
        }
    }

    /// Frame `n` of the run (`n < frames`) into `buf`; the last one is the sentinel's. A
    /// cycled frame is stamped with resourceVersion `list_rv + 1 + n` (zero-padded), as the
    /// apiserver gives every event a version of its own: served twice at one version, a frame
    /// would be no change to a cache that already holds it.
    pub fn frame_into(&self, n: usize, buf: &mut Vec<u8>) {
        buf.clear();
        if n + 1 >= self.frames {
            buf.extend_from_slice(&self.last);
            return;
        }
        let i = n % self.pool.len();
        buf.extend_from_slice(&self.pool[i]);
        let mut rv = self.list_rv + 1 + n as u64;
        let at = self.rv_at[i];
        for b in buf[at..at + RV_WIDTH].iter_mut().rev() {
            *b = b'0' + (rv % 10) as u8;
            rv /= 10;
        }
    }

    /// Bytes of the LIST items, over their count.
    #[must_use]
    pub fn average_item_bytes(&self) -> usize {
        self.items.iter().map(Vec::len).sum::<usize>() / self.items.len().max(1)
    }

    /// Bytes of a served frame, on average over the pool.
    #[must_use]
    pub fn average_frame_bytes(&self) -> usize {
        self.pool.iter().map(Vec::len).sum::<usize>() / self.pool.len().max(1)
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_write_type_before_object_and_end_with_the_sentinel() {
        let templates = templates().unwrap();
        let w = Workload::new(&templates, 20, 10, 4);
        assert_eq!(w.items.len(), 21);
        assert!(w.average_item_bytes() > 4000, "real-shaped pods");
        let mut buf = Vec::new();
        let mut versions = std::collections::BTreeSet::new();
        for n in 0..w.frames {
            w.frame_into(n, &mut buf);
            assert!(buf.starts_with(br#"{"type":""#));
            let frame: Value = serde_json::from_slice(&buf).unwrap();
            let rv = frame["object"]["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .to_owned();
            assert!(versions.insert(rv), "every frame has a version of its own");
        }
        w.frame_into(9, &mut buf);
        let last: Value = serde_json::from_slice(&buf).unwrap();
        assert_eq!(last["object"]["kind"], "Pod");
        let mark: Value = serde_json::from_slice(&bookmark(7, true)).unwrap();
        assert_eq!(mark["object"]["metadata"]["resourceVersion"], "7");
        assert_eq!(last["object"]["metadata"]["name"], SENTINEL);
        assert_eq!(
            last["object"]["metadata"]["annotations"][PHASE_ANNOTATION],
            "end"
        );
    }
}
