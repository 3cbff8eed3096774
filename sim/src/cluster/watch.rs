//! WATCH: a cursor into one collection's history, read lazily when the caller polls, so a
//! watch queues nothing but its initial events. Bookmarks, `timeoutSeconds` in virtual
//! time, streaming lists (`sendInitialEvents`), and 410 `Expired` for a cursor whose
//! changes were compacted away, as an `ERROR` frame on a 200 stream like the watch cache.

use std::collections::VecDeque;

use bytes::Bytes;
use reconcile_core::Instant;
use serde_json::{Value, json};

use super::accept::{EventView, partial};
use super::params::WatchOptions;
use super::read::{Filter, invalid_list_options, parse_rv};
use super::status::ApiStatus;
use super::store::{Event, EventType, Object};
use super::{Cluster, KindId};

/// An open watch, as [`Cluster::watch`] or [`Cluster::serve`] returned it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WatchId(pub u64);

/// What one poll of a watch gave.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WatchPoll {
    /// Watch events, one JSON object and a newline each, as the apiserver writes them.
    pub frames: Vec<Bytes>,
    /// The stream ended after these frames (timeout, 410, closed, or an unknown id).
    pub ended: bool,
}

#[derive(Debug)]
pub(super) struct Watch {
    kind: KindId,
    filter: Filter,
    /// The version of the last change delivered (or skipped as not matching).
    cursor: u64,
    deadline: Instant,
    bookmarks: bool,
    last_bookmark: Instant,
    /// Initial events (and an opening error) not polled yet.
    pending: VecDeque<Bytes>,
    /// Ends once `pending` is drained (an opening 410).
    end_after_pending: bool,
    /// What each event's object is sent as (`Accept`'s `as=`); an unencodable view ends
    /// the watch, sending nothing, at its first frame.
    view: EventView,
}

fn frame(event_type: &str, object: &Value) -> Bytes {
    /// The event rendered from the object where it lies (a `json!` of it would copy the
    /// whole tree first); fields in sorted order, as a `Value`'s map writes them.
    #[derive(serde::Serialize)]
    struct Frame<'a> {
        object: &'a Value,
        #[serde(rename = "type")]
        event_type: &'a str,
    }
    let mut line = super::store::to_json_vec(&Frame { object, event_type }, 1);
    line.push(b'\n');
    Bytes::from(line)
}

/// An event whose object is the watch's view of `object`: as stored, or its metadata. An
/// unencodable view's frames are never sent (`poll_watch`), so they go as stored.
fn event(event_type: &str, object: &Value, view: EventView) -> Bytes {
    match view {
        EventView::AsStored | EventView::Unencodable => frame(event_type, object),
        EventView::Metadata(version) => frame(
            event_type,
            &partial(version, object.get("metadata").cloned()),
        ),
    }
}

/// [`event`] for a stored object: its JSON copied in as it lies, the bytes [`frame`] would
/// write, without parsing it; parsed for a metadata view.
fn stored_event(event_type: &str, object: &Object, view: EventView) -> Bytes {
    if let EventView::Metadata(_) = view {
        return event(event_type, &object.value(), view);
    }
    let json = object.json();
    // `{"object":` and `,"type":""}` and the newline around the two.
    let mut line = Vec::with_capacity(json.len() + event_type.len() + 22);
    line.extend_from_slice(b"{\"object\":");
    line.extend_from_slice(json);
    line.extend_from_slice(b",\"type\":");
    // Writing a string into a `Vec` cannot fail.
    let _ = serde_json::to_writer(&mut line, event_type);
    line.extend_from_slice(b"}\n");
    Bytes::from(line)
}

fn bookmark(api_version: &str, kind: &str, rv: u64, initial_end: bool, view: EventView) -> Bytes {
    let mut metadata = json!({"resourceVersion": rv.to_string()});
    if initial_end {
        metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    event(
        "BOOKMARK",
        &json!({"kind": kind, "apiVersion": api_version, "metadata": metadata}),
        view,
    )
}

fn gone(cursor: u64, compacted: u64) -> Bytes {
    let status = ApiStatus::expired(format!("too old resource version: {cursor} ({compacted})"));
    frame("ERROR", &status.to_value())
}

/// What a change looks like through a filtered watch: a change moving an object into the
/// selection is `ADDED`, out of it `DELETED`, as the watch cache sends them.
fn through(filter: &Filter, e: &Event) -> Option<&'static str> {
    let now = filter.matches_stored(&e.key, &e.object);
    let before = e
        .prev
        .as_deref()
        .is_some_and(|p| filter.matches_stored(&e.key, p));
    match (e.kind, before, now) {
        (EventType::Added, _, true) => Some("ADDED"),
        (EventType::Deleted, _, true) => Some("DELETED"),
        (EventType::Modified, true, true) => Some("MODIFIED"),
        (EventType::Modified, false, true) => Some("ADDED"),
        (EventType::Modified, true, false) => Some("DELETED"),
        _ => None,
    }
}

impl Cluster {
    /// Opens a watch on `kind` in `namespace` (or all). Poll it with
    /// [`Cluster::poll_watch`].
    ///
    /// # Errors
    /// 400 for a bad selector or version, 422 for a bad `resourceVersionMatch` /
    /// `sendInitialEvents` combination (as `ValidateListOptions`), 507 when
    /// [`super::ClusterConfig::max_watches`] are open.
    pub fn watch(
        &mut self,
        now: Instant,
        kind: KindId,
        namespace: Option<&str>,
        options: &WatchOptions,
    ) -> Result<WatchId, ApiStatus> {
        self.advance(now);
        let m = options
            .resource_version_match
            .as_deref()
            .filter(|m| !m.is_empty());
        if options.send_initial_events.is_some() && m != Some("NotOlderThan") {
            return Err(invalid_list_options(
                "resourceVersionMatch",
                "FieldValueForbidden",
                "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan".into(),
            ));
        }
        if let Some(m) = m {
            if options.send_initial_events.is_none() {
                return Err(invalid_list_options(
                    "resourceVersionMatch",
                    "FieldValueForbidden",
                    "Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided".into(),
                ));
            }
            if m != "NotOlderThan" {
                return Err(invalid_list_options(
                    "resourceVersionMatch",
                    "FieldValueNotSupported",
                    format!("Unsupported value: {m:?}: supported values: \"NotOlderThan\""),
                ));
            }
        }
        let desc = &self.col(kind).desc;
        let view = options.conversion.for_events();
        let filter = Filter::new(
            desc,
            namespace,
            &options.label_selector,
            &options.field_selector,
        )?;
        if self.watches.len() >= self.config.max_watches {
            return Err(ApiStatus::bound_exceeded(&format!(
                "{} watches are open (max_watches)",
                self.watches.len()
            )));
        }
        let rv_param = options.resource_version.as_deref().unwrap_or("");
        let streaming = options.send_initial_events == Some(true);
        let mut pending = VecDeque::new();
        let mut end_after_pending = false;
        let cursor = match rv_param {
            "" | "0" => self.rv,
            rv if streaming => parse_rv(rv)?.max(self.rv),
            rv => parse_rv(rv)?,
        };
        let initial =
            streaming || (options.send_initial_events.is_none() && matches!(rv_param, "" | "0"));
        if initial {
            // Synthetic ADDED for the current objects, in key order.
            let col = self.col(kind);
            for (key, stored) in &col.objects {
                if filter.matches_stored(key, &stored.object) {
                    pending.push_back(stored_event("ADDED", &stored.object, view));
                }
            }
            if streaming {
                pending.push_back(bookmark(
                    &desc.api_version(),
                    &desc.kind,
                    self.rv,
                    true,
                    view,
                ));
            }
        } else if cursor < self.compacted {
            pending.push_back(gone(cursor, self.compacted));
            end_after_pending = true;
        }
        let timeout = options.timeout.unwrap_or(self.config.default_watch_timeout);
        let id = WatchId(self.next_watch);
        self.next_watch += 1;
        self.watches.insert(
            id.0,
            Watch {
                kind,
                filter,
                cursor,
                deadline: self.now + timeout,
                bookmarks: options.allow_bookmarks,
                last_bookmark: self.now,
                pending,
                end_after_pending,
                view,
            },
        );
        Ok(id)
    }

    /// The frames a watch has for the caller at `now`: initial events, then the changes
    /// made up to `now` (or its deadline), then a bookmark when one is due; `ended` once
    /// its `timeoutSeconds` passed, its cursor was compacted away (after an `ERROR` 410
    /// frame), or for an id that is not open. At most
    /// [`super::ClusterConfig::max_frames_per_poll`] frames; the rest wait for the next
    /// poll.
    pub fn poll_watch(&mut self, id: WatchId, now: Instant) -> WatchPoll {
        let unencodable = self
            .watches
            .get(&id.0)
            .is_some_and(|w| w.view == EventView::Unencodable);
        let mut poll = self.poll_frames(id, now);
        if unencodable && !poll.frames.is_empty() {
            // The apiserver's encoder fails on the first event and closes the stream.
            poll.frames.clear();
            poll.ended = true;
            self.watches.remove(&id.0);
        }
        poll
    }

    fn poll_frames(&mut self, id: WatchId, now: Instant) -> WatchPoll {
        self.advance(now);
        let Some(mut w) = self.watches.remove(&id.0) else {
            return WatchPoll {
                frames: Vec::new(),
                ended: true,
            };
        };
        let max = self.config.max_frames_per_poll.max(1);
        let mut frames = Vec::new();
        while frames.len() < max {
            match w.pending.pop_front() {
                Some(f) => frames.push(f),
                None => break,
            }
        }
        if !w.pending.is_empty() {
            self.watches.insert(id.0, w);
            return WatchPoll {
                frames,
                ended: false,
            };
        }
        if w.end_after_pending {
            return WatchPoll {
                frames,
                ended: true,
            };
        }
        let col = self.col(w.kind);
        if col.dropped_up_to > w.cursor {
            frames.push(gone(w.cursor, col.dropped_up_to));
            return WatchPoll {
                frames,
                ended: true,
            };
        }
        let until = self.now.min(w.deadline);
        let mut full = false;
        let start = col.history.partition_point(|e| e.rv <= w.cursor);
        for e in col.history.range(start..) {
            if e.at > until {
                break;
            }
            if frames.len() >= max {
                full = true;
                break;
            }
            if let Some(t) = through(&w.filter, e) {
                frames.push(stored_event(t, &e.object, w.view));
            }
            w.cursor = e.rv;
        }
        let ended = self.now >= w.deadline && !full;
        if w.bookmarks && !full && frames.len() < max {
            let periodic = !ended && self.now >= w.last_bookmark + self.config.bookmark_interval;
            if periodic {
                // Every change of this collection up to now was read: the cursor may
                // jump to the cluster's version, as the watch cache's progress does.
                w.cursor = w.cursor.max(self.rv);
                w.last_bookmark = self.now;
            }
            if ended || periodic {
                let desc = &col.desc;
                frames.push(bookmark(
                    &desc.api_version(),
                    &desc.kind,
                    w.cursor,
                    false,
                    w.view,
                ));
            }
        }
        if !ended {
            self.watches.insert(id.0, w);
        }
        WatchPoll { frames, ended }
    }

    /// Closes a watch (the client went away); `false` when it was not open.
    pub fn close_watch(&mut self, id: WatchId) -> bool {
        self.watches.remove(&id.0).is_some()
    }

    /// How many watches are open.
    #[must_use]
    pub fn open_watches(&self) -> usize {
        self.watches.len()
    }

    /// When an open watch next has something to say without any write: its
    /// `timeoutSeconds` deadline, or its next bookmark when it allows them. `None` for an id
    /// that is not open. A caller that waits on a watch (the simulator's transport) wakes
    /// at this time, and on every write.
    #[must_use]
    pub fn watch_wake_at(&self, id: WatchId) -> Option<Instant> {
        let w = self.watches.get(&id.0)?;
        let mut at = w.deadline;
        if w.bookmarks {
            at = at.min(w.last_bookmark + self.config.bookmark_interval);
        }
        if !w.pending.is_empty() {
            at = at.min(self.now);
        }
        Some(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_is_the_json_of_its_event_byte_for_byte() {
        let object = json!({"kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": "v\n"}});
        assert_eq!(
            frame("ADDED", &object),
            format!("{}\n", json!({"type": "ADDED", "object": object}))
        );
    }

    #[test]
    fn a_stored_objects_frame_is_the_frame_of_its_value_byte_for_byte() {
        let object = json!({
            "kind": "ConfigMap",
            "metadata": {"name": "a\"b", "labels": {"x": "é"}},
            "data": {"k": "v\n\u{1}", "n": 1.5},
        });
        let stored = Object::new(&object);
        for t in ["ADDED", "MODIFIED", "DELETED"] {
            assert_eq!(
                stored_event(t, &stored, EventView::AsStored),
                frame(t, &object)
            );
        }
        // A metadata view is rendered from the parsed object, as before.
        let view = EventView::Metadata(super::super::accept::MetaVersion::V1);
        assert_eq!(
            stored_event("ADDED", &stored, view),
            event("ADDED", &object, view)
        );
    }
}
