//! A captured trace (`reconcile-sim capture`, or any trace with LIST bodies and watch
//! frames) as the start of a scenario: the objects of each source's first LIST become the
//! world's initial state, and the watch events after it the user's actions, at their times.
//! The user's controller then runs against what really happened, with faults on top.

use std::path::Path;
use std::time::Duration;

use reconcile_trace::{Limits, Record, Trace, TraceError};
use serde_json::Value;

use super::Scenario;
use super::world::Action;

/// User actions a capture may become, at most.
pub const MAX_CAPTURED_ACTIONS: usize = 100_000;

/// Why a capture cannot seed a scenario.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// The file cannot be read, or is not a trace.
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// A LIST body or a watch frame that is not what a capture holds.
    #[error("{file}:{line}: {message}")]
    Bad {
        /// The trace.
        file: String,
        /// Its line.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// More events than [`MAX_CAPTURED_ACTIONS`].
    #[error("{file}: more than {MAX_CAPTURED_ACTIONS} watch events")]
    TooLarge {
        /// The trace.
        file: String,
    },
}

impl Scenario {
    /// Seeds the scenario from the captured trace at `path` (see [`Scenario::captured_trace`]).
    ///
    /// # Errors
    /// [`CaptureError`]: the file cannot be read or parsed, or holds a LIST body or frame
    /// that is no object.
    pub fn captured(self, path: impl AsRef<Path>) -> Result<Self, CaptureError> {
        let path = path.as_ref();
        let name = path.display().to_string();
        let file = std::fs::File::open(path).map_err(|e| TraceError {
            file: name.clone(),
            line: 0,
            message: e.to_string(),
        })?;
        let bytes = reconcile_trace::read_bounded(&name, file, Limits::default())?;
        let trace = Trace::parse_bytes(&name, &bytes)?;
        self.captured_trace(&trace)
    }

    /// Seeds the scenario from `trace`: each source's first 200 LIST gives the objects the
    /// world starts with (`given`), and each ADDED, MODIFIED and DELETED frame after it an
    /// action (create, edit, delete) at its time from that LIST. Bookmarks, errors and
    /// later relists are left out. What the captured cluster assigned (resourceVersion,
    /// uid, timestamps, managedFields, generation) and owner references (uids of that
    /// cluster, which the simulated collector would take for owners gone) are dropped;
    /// `status` is kept.
    ///
    /// # Errors
    /// [`CaptureError::Bad`] for a LIST body or frame that holds no object, or
    /// [`CaptureError::TooLarge`].
    pub fn captured_trace(mut self, trace: &Trace) -> Result<Self, CaptureError> {
        let bad = |line: usize, message: String| CaptureError::Bad {
            file: trace.name.clone(),
            line,
            message,
        };
        let mut listed: Vec<u64> = Vec::new();
        let mut origin = None;
        let mut actions = 0usize;
        for entry in &trace.entries {
            let source = entry.source.unwrap_or(0);
            match &entry.record {
                Record::List {
                    status: 200,
                    body,
                    transport_error: None,
                } if !listed.contains(&source) => {
                    listed.push(source);
                    if origin.is_none() {
                        origin = entry.at;
                    }
                    let list: Value = serde_json::from_slice(body.as_bytes()).map_err(|e| {
                        bad(entry.line, format!("a LIST body that is not JSON: {e}"))
                    })?;
                    let (api_version, kind) = list_type(&list);
                    let items = list.get("items").and_then(Value::as_array);
                    for item in items.into_iter().flatten() {
                        let mut object = item.clone();
                        if !object.is_object() {
                            return Err(bad(
                                entry.line,
                                "a LIST item that is not an object".into(),
                            ));
                        }
                        if object.get("apiVersion").is_none() {
                            object["apiVersion"] = Value::from(api_version.clone());
                        }
                        if object.get("kind").is_none() {
                            object["kind"] = Value::from(kind.clone());
                        }
                        self.given.push(Action::Create(scrubbed(object)));
                    }
                }
                Record::Frame { line } if listed.contains(&source) => {
                    let frame: Value = serde_json::from_slice(line.as_bytes())
                        .map_err(|e| bad(entry.line, format!("a frame that is not JSON: {e}")))?;
                    let event = frame.get("type").and_then(Value::as_str).unwrap_or("");
                    let Some(object) = frame.get("object").filter(|o| o.is_object()) else {
                        continue;
                    };
                    let action = match event {
                        "ADDED" => Action::Create(scrubbed(object.clone())),
                        "MODIFIED" => Action::Edit(scrubbed(object.clone())),
                        "DELETED" => {
                            let text = |p: &str| {
                                object.pointer(p).and_then(Value::as_str).map(str::to_owned)
                            };
                            Action::Delete {
                                api_version: text("/apiVersion").unwrap_or_default(),
                                kind: text("/kind").unwrap_or_default(),
                                namespace: text("/metadata/namespace"),
                                name: text("/metadata/name").ok_or_else(|| {
                                    bad(entry.line, "a DELETED frame with no name".into())
                                })?,
                            }
                        }
                        _ => continue,
                    };
                    actions += 1;
                    if actions > MAX_CAPTURED_ACTIONS {
                        return Err(CaptureError::TooLarge {
                            file: trace.name.clone(),
                        });
                    }
                    let at = match (entry.at, origin) {
                        (Some(at), Some(origin)) => at.saturating_duration_since(origin),
                        _ => Duration::ZERO,
                    };
                    self.actions.push((at, action));
                }
                _ => {}
            }
        }
        Ok(self)
    }
}

/// A list's item type: `v1` `PodList` gives `v1` `Pod`.
fn list_type(list: &Value) -> (String, String) {
    let text = |k: &str| list.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
    let kind = text("kind");
    (
        text("apiVersion"),
        kind.strip_suffix("List").unwrap_or(&kind).to_owned(),
    )
}

/// `object` without what the captured cluster assigned, or what points into it.
fn scrubbed(mut object: Value) -> Value {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        for key in [
            "resourceVersion",
            "uid",
            "creationTimestamp",
            "managedFields",
            "generation",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "ownerReferences",
            "selfLink",
        ] {
            meta.remove(key);
        }
    }
    object
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_capture_becomes_the_given_objects_and_timed_actions() {
        let text = concat!(
            "{\"reconcile_sim_trace\":1}\n",
            "{\"record\":\"list\",\"t\":10,\"status\":200,\"body\":{\"kind\":\"ConfigMapList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"5\"},\"items\":[{\"metadata\":{\"name\":\"a\",\"namespace\":\"default\",\"uid\":\"x\",\"resourceVersion\":\"4\",\"ownerReferences\":[{\"uid\":\"o\"}]},\"data\":{\"k\":\"1\"}}]}}\n",
            "{\"record\":\"watch\",\"t\":10,\"status\":200}\n",
            "{\"record\":\"frame\",\"t\":12.5,\"raw\":\"{\\\"type\\\":\\\"MODIFIED\\\",\\\"object\\\":{\\\"apiVersion\\\":\\\"v1\\\",\\\"kind\\\":\\\"ConfigMap\\\",\\\"metadata\\\":{\\\"name\\\":\\\"a\\\",\\\"namespace\\\":\\\"default\\\",\\\"resourceVersion\\\":\\\"6\\\"},\\\"data\\\":{\\\"k\\\":\\\"2\\\"}}}\"}\n",
            "{\"record\":\"frame\",\"t\":13,\"raw\":\"{\\\"type\\\":\\\"BOOKMARK\\\",\\\"object\\\":{\\\"metadata\\\":{\\\"resourceVersion\\\":\\\"7\\\"}}}\"}\n",
            "{\"record\":\"frame\",\"t\":14,\"raw\":\"{\\\"type\\\":\\\"DELETED\\\",\\\"object\\\":{\\\"apiVersion\\\":\\\"v1\\\",\\\"kind\\\":\\\"ConfigMap\\\",\\\"metadata\\\":{\\\"name\\\":\\\"a\\\",\\\"namespace\\\":\\\"default\\\"}}}\"}\n",
        );
        let trace = Trace::parse("t.jsonl", text).expect("a trace");
        let s = Scenario::new("c", |_: &super::super::Env| async {})
            .captured_trace(&trace)
            .expect("seeds");
        let Action::Create(given) = &s.given[0] else {
            panic!("a create")
        };
        assert_eq!(given["kind"], "ConfigMap");
        assert_eq!(given["apiVersion"], "v1");
        assert!(given["metadata"].get("uid").is_none());
        assert!(given["metadata"].get("ownerReferences").is_none());
        assert_eq!(s.actions.len(), 2);
        assert_eq!(s.actions[0].0, Duration::from_millis(2500));
        assert!(matches!(&s.actions[0].1, Action::Edit(v) if v["data"]["k"] == "2"));
        assert!(
            matches!(&s.actions[1].1, Action::Delete { name, .. } if name == "a"),
            "{:?}",
            s.actions[1]
        );
        let broken = Trace::parse(
            "b.jsonl",
            "{\"reconcile_sim_trace\":1}\n{\"record\":\"list\",\"t\":0,\"status\":200,\"body\":{\"kind\":\"ConfigMapList\",\"items\":[1]}}\n",
        )
        .expect("a trace");
        let err = Scenario::new("c", |_: &super::super::Env| async {})
            .captured_trace(&broken)
            .expect_err("an item that is no object");
        assert_eq!(
            err.to_string(),
            "b.jsonl:2: a LIST item that is not an object"
        );
    }
}
