//! The network between the candidates and the apiserver: Lease requests and answers with
//! their latency, and what a partition does to them.

use std::time::Duration;

use bytes::Bytes;
use reconcile_core::shard::SHARD_ROLE_LABEL;
use reconcile_core::{Input, Instant, LeaseRequest, LeaseResponse, RequestId, StreamEnd};

use crate::apiserver::lease::LeaseAnswer;
use crate::clock::rfc3339;
use crate::harness::{Harness, Render};

use crate::election::scenario::PartitionMode;
use crate::election::state::*;

impl Run<'_> {
    /// One-way latency of Lease message `req` of process `p` (`dir` 0 there, 1 back), from
    /// the seed and the message alone.
    pub(super) fn latency(&self, p: usize, req: RequestId, dir: u64) -> Duration {
        let [lo, hi] = self.s.latency_ms;
        let mut rng = crate::rng::Rng::new(
            self.s.seed
                ^ (p as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
                ^ req.get().wrapping_mul(0xC2B2_AE3D_27D4_EB4F)
                ^ dir.wrapping_mul(0x1656_67B1_9E37_79F9),
        );
        Duration::from_micros(rng.range(lo * 1000, hi * 1000))
    }

    // ----- stepping a candidate -----

    pub(super) fn send_lease(
        &mut self,
        c: usize,
        p: usize,
        req: RequestId,
        name: String,
        request: LeaseRequest,
    ) {
        let now = self.now;
        let Some(h) = &self.cands[c].h else {
            return;
        };
        let local = h.now();
        let msg = LeaseMsg {
            req,
            name,
            request,
            sent_local: local,
            sent_real: now,
            wall: rfc3339(local),
        };
        match self.cands[c].partition.map(|(mode, ..)| mode) {
            Some(PartitionMode::Refused) => {
                self.count("election: partition refused a lease request");
                let at = now + self.latency(p, req, 0);
                let reply = self.reply(
                    req,
                    LeaseAnswer::Transport("connection refused (network partition)".into()),
                    now,
                );
                self.schedule(at, c, p, reply);
            }
            Some(PartitionMode::Dropped) => {
                self.count("election: partition dropped a lease request");
            }
            Some(PartitionMode::Delayed) => {
                self.count("election: partition held a lease request");
                self.hold(
                    c,
                    Delivery {
                        cand: c,
                        proc_: p,
                        what: What::LeaseArrive(msg),
                    },
                );
            }
            _ => {
                let at = now + self.latency(p, req, 0);
                self.schedule(at, c, p, What::LeaseArrive(msg));
            }
        }
    }

    pub(super) fn hold(&mut self, c: usize, d: Delivery) {
        let held = &mut self.cands[c].held;
        if held.len() >= MAX_HELD {
            held.pop_front();
        }
        held.push_back(d);
    }

    pub(super) fn reply(&self, req: RequestId, answer: LeaseAnswer, sent_real: Instant) -> What {
        let rendering = self.opts.render != Render::Quiet;
        let (response, label) = match answer {
            LeaseAnswer::Response { status, body } => {
                let label = if rendering {
                    describe_lease(req, status, &body)
                } else {
                    String::new()
                };
                (
                    LeaseResponse::Response {
                        status,
                        body: Bytes::from(body),
                    },
                    label,
                )
            }
            LeaseAnswer::Transport(e) => {
                let label = if rendering {
                    format!("lease {req} transport error ({e})")
                } else {
                    String::new()
                };
                (LeaseResponse::TransportError(e), label)
            }
        };
        What::LeaseReply {
            req,
            response,
            sent_real,
            label,
        }
    }

    /// A Lease request reaches the apiserver: answered, and its answer sent back.
    pub(super) fn arrive(&mut self, c: usize, p: usize, mut msg: LeaseMsg) {
        let now = self.now;
        let shard = self.shard_of_lease(&msg.name);
        self.sabotage(shard, &mut msg.request);
        let before = self.lease.holder(&msg.name).map(str::to_owned);
        let (answer, applied) = if self.opts.sabotage == Some(Sabotage::StallShard)
            && shard == Some(0)
            && !matches!(msg.request, LeaseRequest::Get)
        {
            let refused = "connection refused (shard 0 stalled, injected)".to_owned();
            (LeaseAnswer::Transport(refused), None)
        } else {
            self.lease.handle(now, &msg.name, &msg.request, &msg.wall)
        };
        if let Some(applied) = &applied
            && let Some(shard) = shard
        {
            if applied.holder == self.procs[p].identity {
                let until = msg.sent_local + self.renew_deadline;
                let proc_ = &mut self.procs[p];
                let latent = proc_.latent.entry(shard).or_insert(until);
                *latent = (*latent).max(until);
                if let Some(term) = proc_.term.get_mut(&shard) {
                    term.until = term.until.max(until);
                }
            }
            let path = match before.as_deref() {
                None => "election: lease created",
                _ if applied.holder.is_empty() => "election: lease released",
                Some(b) if b == applied.holder => "election: lease renewed",
                Some("") => "election: free lease taken",
                Some(_) => {
                    self.takeovers += 1;
                    "election: expired lease taken over"
                }
            };
            self.count(path);
        } else if applied.is_some() {
            self.count("sharding: membership lease written");
        }
        let answer = if self.opts.sabotage == Some(Sabotage::HideMembers)
            && matches!(msg.request, LeaseRequest::List { .. })
        {
            self.hide_members(p, answer)
        } else {
            answer
        };
        if matches!(answer, LeaseAnswer::Response { status: 422, .. }) {
            // An update without a resourceVersion: a Lease takes no unconditional update.
            self.count("election: lease update without resourceVersion refused (422)");
        }
        let at = now + self.latency(p, msg.req, 1);
        let reply = self.reply(msg.req, answer, msg.sent_real);
        self.schedule(at, c, p, reply);
    }

    /// What [`Sabotage::ShortLease`] and [`Sabotage::HideMembers`] do to a request on its
    /// way to the store.
    fn sabotage(&mut self, shard: Option<u32>, request: &mut LeaseRequest) {
        match (self.opts.sabotage, request) {
            (
                Some(Sabotage::ShortLease),
                LeaseRequest::Create(spec) | LeaseRequest::Update { spec, .. },
            ) if shard.is_some() || self.shard_set.is_some() => {
                spec.lease_duration_seconds = 1;
            }
            _ => {}
        }
    }

    /// [`Sabotage::HideMembers`]: a LIST answer to process `p` without the other replicas'
    /// membership Leases.
    fn hide_members(&self, p: usize, answer: LeaseAnswer) -> LeaseAnswer {
        let (Some(set), LeaseAnswer::Response { status: 200, body }) = (&self.shard_set, &answer)
        else {
            return answer;
        };
        let Ok(mut list) = serde_json::from_str::<serde_json::Value>(body) else {
            return answer;
        };
        let mut own = set.clone();
        own.identity.clone_from(&self.procs[p].identity);
        let own = own.member_lease();
        if let Some(items) = list
            .get_mut("items")
            .and_then(serde_json::Value::as_array_mut)
        {
            items.retain(|item| {
                let member = item["metadata"]["labels"][SHARD_ROLE_LABEL] == "member";
                !member || item["metadata"]["name"] == own.as_str()
            });
        }
        LeaseAnswer::Response {
            status: 200,
            body: list.to_string(),
        }
    }

    /// An answer reaching a partitioned candidate: refused, lost, or held.
    pub(super) fn through_partition(&mut self, d: Delivery) -> Option<Delivery> {
        let c = d.cand;
        let Some((mode, ..)) = self.cands[c].partition else {
            return Some(d);
        };
        if matches!(
            d.what,
            What::LeaseReply {
                response: LeaseResponse::TransportError(_),
                ..
            }
        ) {
            // Already a failure (the partition refused the request): nothing to lose.
            return Some(d);
        }
        match mode {
            PartitionMode::Refused => {
                let What::LeaseReply { req, sent_real, .. } = d.what else {
                    return Some(d);
                };
                self.count("election: partition reset a lease answer");
                let what = self.reply(
                    req,
                    LeaseAnswer::Transport("connection reset (network partition)".into()),
                    sent_real,
                );
                Some(Delivery { what, ..d })
            }
            PartitionMode::Dropped | PartitionMode::RepliesLost => {
                self.count("election: partition lost a lease answer");
                None
            }
            PartitionMode::Delayed => {
                self.count("election: partition held a lease answer");
                self.hold(c, d);
                None
            }
        }
    }

    pub(super) fn lease_reply(
        &mut self,
        c: usize,
        req: RequestId,
        response: LeaseResponse,
        sent_real: Instant,
        label: String,
    ) {
        let ok = matches!(&response, LeaseResponse::Response { status, .. } if (200..300).contains(status));
        self.feed(c, |h| {
            h.step(
                || label,
                |core, now| core.handle_input(now, Input::Lease { req, response }),
            )
        });
        if ok && sent_real >= self.heal {
            let held: Vec<u32> = match self.cands[c].h.as_ref().map(Harness::core) {
                Some(core) if self.shard_set.is_some() => {
                    core.sharding().map(|s| s.held).unwrap_or_default()
                }
                Some(core) if core.leadership().is_some_and(|l| l.leading) => vec![0],
                _ => Vec::new(),
            };
            for shard in held {
                if let Some(first) = self.held_since_heal.get_mut(shard as usize) {
                    first.get_or_insert(self.now);
                }
            }
        }
    }

    // ----- deliveries -----

    /// A delivery is due: the apiserver answers a Lease request; anything for a candidate
    /// goes through its partition, then waits if it is paused.
    pub(super) fn route(&mut self, d: Delivery) {
        let Delivery { cand, proc_, what } = d;
        let d = match what {
            What::LeaseArrive(msg) => return self.arrive(cand, proc_, msg),
            what => Delivery { cand, proc_, what },
        };
        let c = d.cand;
        if self.cands[c].proc_ != d.proc_ || self.cands[c].h.is_none() {
            // For a process that is gone.
            return;
        }
        let d = if matches!(d.what, What::LeaseReply { .. }) {
            match self.through_partition(d) {
                Some(d) => d,
                None => return,
            }
        } else {
            d
        };
        if self.cands[c].paused_until.is_some() || !self.cands[c].inbox.is_empty() {
            if self.cands[c].inbox.len() >= MAX_INBOX {
                let detail = format!(
                    "{MAX_INBOX} inputs waiting for paused {}",
                    self.cands[c].name
                );
                self.violation("queue unbounded", detail);
                return;
            }
            self.cands[c].inbox.push_back(d);
            return;
        }
        self.act(d);
    }

    /// A delivery reaches its candidate.
    pub(super) fn act(&mut self, d: Delivery) {
        let c = d.cand;
        if self.cands[c].proc_ != d.proc_ || self.cands[c].h.is_none() {
            return;
        }
        match d.what {
            What::List(req) => self.answer_list(c, req),
            What::WatchOpen(stream, cursor) => self.open_watch(c, stream, &cursor),
            What::Frame(stream, frame) => {
                if self.cands[c].open.contains(&stream) {
                    self.deliver_frame(c, stream, &frame);
                }
            }
            What::End(stream, end, why) => {
                if self.cands[c].open.contains(&stream) {
                    self.end_stream(c, stream, end, why);
                }
            }
            What::WatchTimeout(stream) => {
                if self.cands[c].open.contains(&stream) {
                    self.end_stream(c, stream, StreamEnd::Clean, "timeoutSeconds");
                }
            }
            What::LeaseReply {
                req,
                response,
                sent_real,
                label,
            } => self.lease_reply(c, req, response, sent_real, label),
            What::LeaseArrive(msg) => self.arrive(c, d.proc_, msg),
        }
    }

    /// Whether `c`'s LISTs and WATCHes fail (a partition that is not lease-only).
    pub(super) fn cut_off(&self, c: usize) -> bool {
        self.cands[c]
            .partition
            .is_some_and(|(_, lease_only, _)| !lease_only)
    }
}

/// `lease L5 200 rv=7 holder=b`, `lease L5 404`, `lease L5 409 Conflict`.
fn describe_lease(req: RequestId, status: u16, body: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
    if (200..300).contains(&status) {
        let rv = v["metadata"]["resourceVersion"].as_str().unwrap_or("-");
        let holder = v["spec"]["holderIdentity"].as_str().unwrap_or("none");
        format!("lease {req} {status} rv={rv} holder={holder}")
    } else {
        match v["reason"].as_str() {
            Some(reason) => format!("lease {req} {status} {reason}"),
            None => format!("lease {req} {status}"),
        }
    }
}
