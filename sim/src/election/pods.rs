//! The pods world as the candidates see it: LISTs, WATCHes and their frames, and the
//! workload's changes broadcast to every open stream.

use std::time::Duration;

use bytes::Bytes;
use reconcile_core::pod::PodView;
use reconcile_core::{Input, ListResponse, RequestId, SourceId, StreamEnd, StreamId};

use crate::apiserver::world::{Frame, ListAnswer, WatchAnswer};
use crate::describe;

use crate::election::state::*;

impl Run<'_> {
    pub(super) fn answer_list(&mut self, c: usize, req: RequestId) {
        if self.cands[c].cancelled_lists.remove(&req) {
            return;
        }
        let response = if self.cut_off(c) {
            ListResponse::TransportError("network partition".into())
        } else {
            match self.world.list(self.now) {
                ListAnswer::Response(status, body) => {
                    if status == 200 {
                        let rv = self.world.rv().to_string();
                        if let Some(h) = &mut self.cands[c].h {
                            h.served_rv(SourceId::PRIMARY, &rv);
                        }
                    }
                    ListResponse::Response {
                        status,
                        body: body.bytes(true),
                    }
                }
                ListAnswer::Transport(e) => ListResponse::TransportError(e),
            }
        };
        let label = self.label(|| describe::list(req, &response));
        self.feed(c, |h| {
            h.step(
                || label,
                |core, now| core.handle_input(now, Input::List { req, response }),
            )
        });
    }

    pub(super) fn open_watch(&mut self, c: usize, stream: StreamId, cursor: &str) {
        if !self.cands[c].alive.contains(&stream) {
            return;
        }
        if self.cut_off(c) {
            let end = StreamEnd::TransportError("network partition".into());
            return self.end_stream(c, stream, end, "partition");
        }
        let now = self.now;
        let p = self.cands[c].proc_;
        match self.world.watch(now, cursor) {
            WatchAnswer::Open(frames) => {
                self.opened(c, stream);
                for frame in frames {
                    self.schedule(now, c, p, What::Frame(stream, frame));
                }
            }
            WatchAnswer::GoneFrame(frame) => {
                self.opened(c, stream);
                self.schedule(now, c, p, What::Frame(stream, frame));
                self.schedule(
                    now,
                    c,
                    p,
                    What::End(stream, StreamEnd::Clean, "after ERROR"),
                );
            }
            WatchAnswer::Status(code, body) => {
                let end = StreamEnd::HttpStatus {
                    code,
                    body: body.bytes(true).to_vec(),
                };
                self.end_stream(c, stream, end, "status");
            }
            WatchAnswer::Transport(e) => {
                self.end_stream(c, stream, StreamEnd::TransportError(e), "transport");
            }
        }
    }

    pub(super) fn opened(&mut self, c: usize, stream: StreamId) {
        let now = self.now;
        let p = self.cands[c].proc_;
        self.cands[c].open.insert(stream);
        self.feed(c, |h| {
            h.step(
                || format!("watch {stream} opened"),
                |core, now| core.handle_input(now, Input::WatchOpened { stream }),
            )
        });
        let timeout = Duration::from_secs(u64::from(self.s.timeout_seconds));
        self.schedule(now + timeout, c, p, What::WatchTimeout(stream));
    }

    pub(super) fn deliver_frame(&mut self, c: usize, stream: StreamId, frame: &Frame) {
        if let Some(rv) = frame.rv
            && let Some(h) = &mut self.cands[c].h
        {
            h.served_rv(SourceId::PRIMARY, &rv.to_string());
        }
        let line = Bytes::copy_from_slice(frame.line.as_bytes());
        let text = self.label(|| describe::frame(stream, &line));
        self.feed(c, |h| {
            h.step(
                || text,
                |core, now| core.handle_input(now, Input::WatchLine { stream, line }),
            )
        });
    }

    pub(super) fn end_stream(
        &mut self,
        c: usize,
        stream: StreamId,
        end: StreamEnd,
        why: &'static str,
    ) {
        let cand = &mut self.cands[c];
        cand.alive.remove(&stream);
        cand.open.remove(&stream);
        let text = self.label(|| match &end {
            StreamEnd::Clean => format!("watch {stream} ended ({why})"),
            StreamEnd::TransportError(e) => format!("watch {stream} failed ({e})"),
            StreamEnd::HttpStatus { code, .. } => format!("watch {stream} answered {code}"),
        });
        self.feed(c, |h| h.watch_end(stream, end, || text));
    }

    /// Cuts `c`'s open watches, as a broken connection does.
    pub(super) fn cut(&mut self, c: usize, error: &str, why: &'static str) {
        let p = self.cands[c].proc_;
        let open: Vec<StreamId> = self.cands[c].open.iter().copied().collect();
        for stream in open {
            let end = StreamEnd::TransportError(error.into());
            self.schedule(self.now, c, p, What::End(stream, end, why));
        }
    }

    // ----- the pods world -----

    pub(super) fn parent_of(&self, key: &str) -> Option<String> {
        let obj = self.world.visible_object(key)?;
        let pod = serde_json::from_str::<PodView>(&obj.json).ok()?;
        self.key_by.parent_of(&pod).ok()
    }

    pub(super) fn world_put(&mut self, json: &str) {
        let key = self.world.key_of(json).ok();
        let before = key.as_deref().and_then(|k| self.parent_of(k));
        match self.world.put(self.now, json) {
            Ok(()) => {
                let after = key.as_deref().and_then(|k| self.parent_of(k));
                self.membership_moved(before, after);
                self.broadcast();
            }
            Err(e) => self.note(&format!("world refused a pod: {e}")),
        }
    }

    pub(super) fn world_delete(&mut self, key: &str) {
        let before = self.parent_of(key);
        if self.world.delete(self.now, key) {
            self.membership_moved(before, None);
            self.broadcast();
        }
    }

    pub(super) fn membership_moved(&mut self, before: Option<String>, after: Option<String>) {
        for parent in before.into_iter().chain(after) {
            self.parents_seen.insert(parent.clone());
            self.membership_changed.insert(parent.clone(), self.now);
            self.rogue_dispatch(parent);
        }
        let bound = self.parents_seen.len().max(1);
        for c in &mut self.cands {
            if let Some(h) = &mut c.h {
                h.set_queue_bound(bound);
            }
        }
    }

    /// [`Sabotage::Rogue`]: the first candidate's process, when running, dispatches every
    /// parent whose pods change, holding its shard or not.
    fn rogue_dispatch(&mut self, parent: String) {
        if self.opts.sabotage != Some(Sabotage::Rogue) {
            return;
        }
        let Some(c) = self.cands.first().filter(|c| c.h.is_some()) else {
            return;
        };
        let p = c.proc_;
        self.count("rogue dispatch (injected)");
        self.dispatched(p, parent);
    }

    /// Every open watch of every candidate gets the frame for the world's last change.
    pub(super) fn broadcast(&mut self) {
        let Some(frame) = self.world.frames_for_last_change() else {
            return;
        };
        for c in 0..self.cands.len() {
            if self.cands[c].h.is_none() {
                continue;
            }
            let p = self.cands[c].proc_;
            let open: Vec<StreamId> = self.cands[c].open.iter().copied().collect();
            for stream in open {
                self.schedule(self.now, c, p, What::Frame(stream, frame.clone()));
            }
        }
    }

    // ----- happenings -----
}
