//! Leader election on a `coordination.k8s.io/v1` Lease, as a pure state machine.
//!
//! Every `retry_period` the elector tries to acquire or renew the Lease (client-go's
//! `tryAcquireOrRenew`): it reads it, and writes itself in as holder when the Lease is free,
//! expired, or already its own, with optimistic concurrency on the Lease's resourceVersion.
//! A leader that holds the Lease skips the read and writes straight away.
//!
//! **Expiry is judged by local observation only.** A record is expired when the local clock
//! has moved `leaseDurationSeconds` past the instant this elector last *saw the record
//! change* (a new resourceVersion), never by the holder's `renewTime`: clocks of different
//! machines are never compared, so an absolute offset between them does not matter.
//!
//! **A leader steps down before anyone can take over.** Its term lasts `renew_deadline` from
//! the instant it *sent* its last successful write. The write reached the apiserver no
//! earlier, and another candidate observes it no earlier than that and then waits the full
//! lease duration, so it can take over no sooner than `lease_duration` after the send. The
//! gap, `lease_duration - renew_deadline`, absorbs clock *rate* drift: the terms cannot
//! overlap while every clock runs within a factor `1 ± ρ` of real time, with
//! `ρ < (lease_duration - renew_deadline) / (lease_duration + renew_deadline)` (20 % with
//! the defaults).

use std::time::Duration;

use serde::Deserialize;

use crate::time::Instant;
use crate::vocabulary::{Command, Event, MintIds, Outbox, Output, RequestId};
pub use crate::vocabulary::{LeaseRequest, LeaseResponse, LeaseSpec, LostReason};

/// Lease bytes read at most: a Lease is a few hundred bytes.
pub const MAX_LEASE_BYTES: usize = 64 * 1024;

/// Identities longer than this are refused (a Lease's holder is a name, not a document).
pub const MAX_IDENTITY_BYTES: usize = 253;

/// What a controller that may act only while it leads is configured with; the durations
/// are client-go's `LeaseDuration`, `RenewDeadline` and `RetryPeriod`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElectionConfig {
    /// The Lease's namespace.
    pub namespace: String,
    /// The Lease's name.
    pub name: String,
    /// This candidate's identity, written as the Lease's holder: unique per replica
    /// (drivers default it to the hostname plus a random suffix).
    pub identity: String,
    /// How long a holder's claim lasts after another candidate last saw it renewed
    /// (default 15 s).
    pub lease_duration: Duration,
    /// How long a leader keeps leading without a successful renewal (default 10 s).
    pub renew_deadline: Duration,
    /// How often to try to acquire or renew (default 2 s).
    pub retry_period: Duration,
    /// On stop, a leader writes the Lease free so that another replica takes over at once
    /// (client-go's `ReleaseOnCancel`; default on).
    pub release_on_stop: bool,
    /// What happens to running reconciles when leadership is lost (default: cancelled).
    pub on_lost: OnLost,
}

/// What happens to running reconciles when leadership is lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnLost {
    /// Cancelled, as on stop: their outcomes are ignored and their parents stay queued
    /// for the next term.
    #[default]
    Cancel,
    /// Left to finish; no new reconcile starts.
    Drain,
}

impl ElectionConfig {
    /// The Lease `namespace/name`, for `identity`, with client-go's durations.
    #[must_use]
    pub fn new(namespace: &str, name: &str, identity: &str) -> Self {
        ElectionConfig {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            identity: identity.to_owned(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            release_on_stop: true,
            on_lost: OnLost::Cancel,
        }
    }

    /// The clock rate drift the election tolerates: `(L - R) / (L + R)`.
    #[must_use]
    pub fn drift_bound(&self) -> f64 {
        let l = self.lease_duration.as_secs_f64();
        let r = self.renew_deadline.as_secs_f64();
        (l - r) / (l + r)
    }

    /// Checks the bounds client-go checks, and the names.
    ///
    /// # Errors
    /// The first setting out of bounds.
    pub fn validate(&self) -> Result<(), ElectionConfigError> {
        if self.namespace.is_empty() || self.name.is_empty() {
            return Err(ElectionConfigError::NoLease);
        }
        if self.identity.is_empty() || self.identity.len() > MAX_IDENTITY_BYTES {
            return Err(ElectionConfigError::Identity(self.identity.len()));
        }
        if self.retry_period.is_zero() {
            return Err(ElectionConfigError::Durations(
                "retry_period must be positive",
            ));
        }
        if self.lease_duration <= self.renew_deadline {
            return Err(ElectionConfigError::Durations(
                "lease_duration must be greater than renew_deadline",
            ));
        }
        // client-go: the renew deadline must leave room for retries with jitter.
        if self.renew_deadline.as_secs_f64() <= 1.2 * self.retry_period.as_secs_f64() {
            return Err(ElectionConfigError::Durations(
                "renew_deadline must be greater than 1.2 × retry_period",
            ));
        }
        if self.lease_duration < Duration::from_secs(1) {
            return Err(ElectionConfigError::Durations(
                "lease_duration must be at least 1 s (the Lease stores whole seconds)",
            ));
        }
        Ok(())
    }

    /// The Lease stores whole seconds: rounded up, so others never wait less than this
    /// candidate's term assumes.
    fn lease_seconds(&self) -> u32 {
        let secs =
            self.lease_duration.as_secs() + u64::from(self.lease_duration.subsec_nanos() > 0);
        u32::try_from(secs).unwrap_or(u32::MAX)
    }
}

/// An election setting out of bounds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ElectionConfigError {
    /// The Lease needs a namespace and a name.
    #[error("the Lease needs a namespace and a name")]
    NoLease,
    /// The identity must be 1 to 253 bytes.
    #[error("identity must be 1 to {MAX_IDENTITY_BYTES} bytes, got {0}")]
    Identity(usize),
    /// Durations out of order.
    #[error("{0}")]
    Durations(&'static str),
}

/// What a candidate knows about the election, for handles and metrics.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Leadership {
    /// This candidate leads now.
    pub leading: bool,
    /// The holder last observed on the Lease (this candidate when it leads); `None` when
    /// the Lease was free or never read.
    pub holder: Option<String>,
    /// `leaseTransitions` last observed.
    pub transitions: u32,
    /// Terms this candidate has begun.
    pub terms: u64,
}

/// A Lease as read: from a GET, or one item of a LIST.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LeaseBody {
    #[serde(default)]
    pub(crate) metadata: LeaseMeta,
    #[serde(default)]
    pub(crate) spec: LeaseBodySpec,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LeaseMeta {
    #[serde(default)]
    pub(crate) name: String,
    pub(crate) resource_version: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LeaseBodySpec {
    pub(crate) holder_identity: Option<String>,
    pub(crate) lease_duration_seconds: Option<u32>,
    acquire_time: Option<String>,
    lease_transitions: Option<u32>,
}

/// The Lease as last read or written, and when this candidate saw it change.
#[derive(Debug, Clone)]
struct Observed {
    resource_version: String,
    holder: String,
    lease_duration: Duration,
    acquire_time: Option<String>,
    transitions: u32,
    /// Local time at which this version was first seen.
    at: Instant,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Get,
    Create,
    Update,
    Release,
}

#[derive(Debug, Clone, Copy)]
struct Pending {
    req: RequestId,
    step: Step,
    sent_at: Instant,
}

/// Which Lease an elector campaigns on, and so how it reads it and what it reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// The controller's one Lease: read by GET every retry period.
    Election,
    /// Shard `i`'s Lease, read by the shard table's LIST, which decides when to campaign.
    Shard(u32),
    /// This replica's membership Lease, read by the shard table's LIST.
    Member,
}

/// The election state machine: one per candidate and Lease, owned by its loop (or by the
/// shard table, one per shard).
#[derive(Debug)]
pub(crate) struct Elector {
    config: ElectionConfig,
    role: Role,
    /// Written on the Lease with every write (a shard table's Leases are found by them).
    labels: Vec<(String, String)>,
    observed: Option<Observed>,
    /// Leading until this local instant, unless renewed.
    lead_until: Option<Instant>,
    pending: Option<Pending>,
    next_try: Option<Instant>,
    terms: u64,
    stopped: bool,
    /// When the answer to this elector's last successful write was read: a LIST sent
    /// before then may show the Lease as it was before the write.
    written_at: Option<Instant>,
}

/// What one input did to leadership.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Change {
    None,
    Acquired,
    Lost,
}

impl Elector {
    pub(crate) fn new(config: ElectionConfig) -> Self {
        Elector::with_role(config, Role::Election, Vec::new())
    }

    /// An elector of a shard table: it never reads on its own; the table feeds it what its
    /// LIST saw ([`Elector::observe_listed`]) and says when to write.
    pub(crate) fn with_role(
        config: ElectionConfig,
        role: Role,
        labels: Vec<(String, String)>,
    ) -> Self {
        Elector {
            config,
            role,
            labels,
            observed: None,
            lead_until: None,
            pending: None,
            next_try: None,
            terms: 0,
            stopped: false,
            written_at: None,
        }
    }

    /// Whether this candidate may dispatch at `now`.
    pub(crate) fn is_leader(&self, now: Instant) -> bool {
        self.lead_until.is_some_and(|until| now < until)
    }

    pub(crate) fn owns_request(&self, req: RequestId) -> bool {
        self.pending.is_some_and(|p| p.req == req)
    }

    pub(crate) fn leadership(&self, now: Instant) -> Leadership {
        Leadership {
            leading: self.is_leader(now),
            holder: self
                .observed
                .as_ref()
                .map(|o| o.holder.clone())
                .filter(|h| !h.is_empty()),
            transitions: self.observed.as_ref().map_or(0, |o| o.transitions),
            terms: self.terms,
        }
    }

    pub(crate) fn start<O, P>(
        &mut self,
        now: Instant,
        ids: &mut (impl MintIds + ?Sized),
        out: &mut Outbox<O, P>,
    ) {
        self.attempt(now, ids, out);
    }

    /// The next instant a timer is due: the next attempt (or giving up on an unanswered
    /// request), or the end of the term.
    pub(crate) fn deadline(&self) -> Option<(Instant, ElectionWake)> {
        let attempt = match self.pending {
            // A request nobody answers must not stall the election.
            Some(p) if p.step != Step::Release => Some((
                p.sent_at + self.config.renew_deadline,
                ElectionWake::Attempt,
            )),
            Some(_) => None,
            None => self.next_try.map(|at| (at, ElectionWake::Attempt)),
        };
        let expiry = self.lead_until.map(|at| (at, ElectionWake::TermEnd));
        [expiry, attempt]
            .into_iter()
            .flatten()
            .reduce(|a, b| if b.0 < a.0 { b } else { a })
    }

    pub(crate) fn handle_timeout<O, P>(
        &mut self,
        now: Instant,
        ids: &mut (impl MintIds + ?Sized),
        out: &mut Outbox<O, P>,
    ) -> Change {
        let mut change = Change::None;
        if self.lead_until.is_some_and(|until| now >= until) {
            self.lose(LostReason::RenewDeadline, out);
            change = Change::Lost;
        }
        if let Some(p) = self.pending
            && p.step != Step::Release
            && now >= p.sent_at + self.config.renew_deadline
        {
            // Its answer, should it still come, is stale.
            self.pending = None;
            out.push_back(Output::Event(Event::LeaseFailed {
                req: p.req,
                error: "no answer within renew_deadline".into(),
            }));
            if self.role == Role::Election {
                self.attempt(now, ids, out);
            }
        } else if self.pending.is_none() && self.next_try.is_some_and(|at| now >= at) {
            self.attempt(now, ids, out);
        }
        change
    }

    /// Writes the Lease free if this candidate leads and release is configured; ends the
    /// term either way. Returns whether a term ended.
    pub(crate) fn stop<O, P>(
        &mut self,
        now: Instant,
        ids: &mut (impl MintIds + ?Sized),
        out: &mut Outbox<O, P>,
    ) -> bool {
        self.stopped = true;
        self.next_try = None;
        let leading = self.is_leader(now);
        // After a conflict the version is unknown: an update without one would be refused,
        // so the Lease is left to expire.
        if leading
            && self.config.release_on_stop
            && let Some(request) = self.release_request()
        {
            self.send(now, Step::Release, request, ids, out);
        }
        if self.lead_until.is_some() {
            self.lose(LostReason::Stopped, out);
            return true;
        }
        false
    }

    pub(crate) fn handle_response<O, P>(
        &mut self,
        now: Instant,
        req: RequestId,
        response: LeaseResponse,
        ids: &mut (impl MintIds + ?Sized),
        out: &mut Outbox<O, P>,
    ) -> Change {
        let Some(pending) = self.pending.filter(|p| p.req == req) else {
            return Change::None;
        };
        self.pending = None;
        if pending.step == Step::Release {
            return Change::None;
        }
        let (status, body) = match response {
            LeaseResponse::Response { status, body } => (status, body),
            LeaseResponse::TransportError(error) => {
                return self.failed(now, pending, format!("transport: {error}"), out);
            }
        };
        match (pending.step, status) {
            (Step::Get, 404) => {
                self.create(now, ids, out);
                Change::None
            }
            (Step::Get, 200) => match self.observe_body(now, &body, out) {
                Ok(()) => self.try_write(now, pending, ids, out),
                Err(e) => self.failed(now, pending, e, out),
            },
            (Step::Create | Step::Update, 200 | 201) => match self.observe_body(now, &body, out) {
                Ok(()) => {
                    self.written_at = Some(now);
                    self.succeeded(now, pending, out)
                }
                Err(e) => self.failed(now, pending, e, out),
            },
            (Step::Update, 409) => {
                // Someone wrote first: read again on the next try.
                if let Some(observed) = &mut self.observed {
                    observed.resource_version.clear();
                }
                self.failed(now, pending, "conflict".into(), out)
            }
            (_, status) => self.failed(now, pending, format!("HTTP {status}"), out),
        }
    }

    fn attempt<O, P>(
        &mut self,
        now: Instant,
        ids: &mut (impl MintIds + ?Sized),
        out: &mut Outbox<O, P>,
    ) {
        self.next_try = None;
        if self.stopped {
            return;
        }
        // A leader that still holds the version it wrote renews without reading first.
        if self.is_leader(now)
            && let Some(observed) = &self.observed
            && observed.holder == self.config.identity
            && !observed.resource_version.is_empty()
        {
            let request = self.write_request(observed, true);
            self.send(now, Step::Update, request, ids, out);
            return;
        }
        self.send(now, Step::Get, LeaseRequest::Get, ids, out);
    }

    /// After a read: write ourselves in if the Lease is ours, free, or expired as observed
    /// locally.
    fn try_write<O, P>(
        &mut self,
        now: Instant,
        pending: Pending,
        ids: &mut (impl MintIds + ?Sized),
        out: &mut Outbox<O, P>,
    ) -> Change {
        let Some(observed) = self.observed.clone() else {
            return self.failed(now, pending, "no lease read".into(), out);
        };
        let ours = observed.holder == self.config.identity;
        let held = !observed.holder.is_empty() && !ours;
        if held && now < observed.at + observed.lease_duration {
            // Held by another and not expired: stand by.
            self.schedule(now);
            return Change::None;
        }
        let request = self.write_request(&observed, ours);
        self.send(now, Step::Update, request, ids, out);
        Change::None
    }

    fn write_request(&self, observed: &Observed, ours: bool) -> LeaseRequest {
        LeaseRequest::Update {
            resource_version: observed.resource_version.clone(),
            spec: LeaseSpec {
                holder: self.config.identity.clone(),
                lease_duration_seconds: self.config.lease_seconds(),
                acquire_time: if ours {
                    observed.acquire_time.clone()
                } else {
                    None
                },
                transitions: if ours {
                    observed.transitions
                } else {
                    observed.transitions.saturating_add(1)
                },
                labels: self.labels.clone(),
            },
        }
    }

    fn create<O, P>(
        &mut self,
        now: Instant,
        ids: &mut (impl MintIds + ?Sized),
        out: &mut Outbox<O, P>,
    ) {
        let spec = LeaseSpec {
            holder: self.config.identity.clone(),
            lease_duration_seconds: self.config.lease_seconds(),
            acquire_time: None,
            transitions: 0,
            labels: self.labels.clone(),
        };
        self.send(now, Step::Create, LeaseRequest::Create(spec), ids, out);
    }

    /// Whether a write is on its way (a campaign or a renewal, not a release).
    pub(crate) fn writing(&self) -> bool {
        self.pending
            .is_some_and(|p| matches!(p.step, Step::Create | Step::Update))
    }

    /// Whether a campaign would write now: the Lease was not seen, or is free, expired
    /// as observed here, or already this candidate's.
    pub(crate) fn claimable(&self, now: Instant) -> bool {
        self.observed.as_ref().is_none_or(|o| {
            o.holder.is_empty()
                || o.holder == self.config.identity
                || now >= o.at + o.lease_duration
        })
    }

    /// A listed elector tries to take its Lease: creates it when the LIST did not show it,
    /// writes itself in when it is claimable and its version is known. Returns whether it wrote.
    pub(crate) fn campaign<O, P>(
        &mut self,
        now: Instant,
        ids: &mut (impl MintIds + ?Sized),
        out: &mut Outbox<O, P>,
    ) -> bool {
        debug_assert_ne!(self.role, Role::Election, "a plain election reads by GET");
        if self.stopped || self.pending.is_some() || self.is_leader(now) || !self.claimable(now) {
            return false;
        }
        match self.observed.clone() {
            None => self.create(now, ids, out),
            // A write conflicted since the last read, so the version is unknown, and an
            // update without one is refused (422): the next LIST reads it (issue 33, found
            // by the simulator's sharded seeds).
            Some(observed) if observed.resource_version.is_empty() => return false,
            Some(observed) => {
                let ours = observed.holder == self.config.identity;
                let request = self.write_request(&observed, ours);
                self.send(now, Step::Update, request, ids, out);
            }
        }
        true
    }

    /// A listed elector that leads renews without reading. Returns whether it wrote.
    pub(crate) fn renew<O, P>(
        &mut self,
        now: Instant,
        ids: &mut (impl MintIds + ?Sized),
        out: &mut Outbox<O, P>,
    ) -> bool {
        if self.stopped || self.pending.is_some() || !self.is_leader(now) {
            return false;
        }
        let Some(observed) = self
            .observed
            .as_ref()
            .filter(|o| o.holder == self.config.identity && !o.resource_version.is_empty())
        else {
            return false;
        };
        let request = self.write_request(observed, true);
        self.send(now, Step::Update, request, ids, out);
        true
    }

    /// Ends this term at once and writes the Lease free, so that another replica may take
    /// it one observation later (the table calls this once the shard's reconciles ended).
    pub(crate) fn release<O, P>(
        &mut self,
        now: Instant,
        ids: &mut (impl MintIds + ?Sized),
        out: &mut Outbox<O, P>,
    ) {
        if !self.is_leader(now) {
            return;
        }
        // A write of ours still on its way would be answered after the release was sent;
        // its answer is dropped with it.
        self.pending = None;
        if let Some(request) = self.release_request() {
            self.send(now, Step::Release, request, ids, out);
        }
        self.lose(LostReason::Rebalanced, out);
    }

    /// The write that frees the Lease (no holder, 1 s), when this candidate holds the
    /// version it last saw: after a conflict the version is unknown, an update without one
    /// would be refused, and the Lease is left to expire.
    fn release_request(&self) -> Option<LeaseRequest> {
        let observed = self
            .observed
            .as_ref()
            .filter(|o| o.holder == self.config.identity && !o.resource_version.is_empty())?;
        Some(LeaseRequest::Update {
            resource_version: observed.resource_version.clone(),
            spec: LeaseSpec {
                holder: String::new(),
                lease_duration_seconds: 1,
                acquire_time: None,
                transitions: observed.transitions,
                labels: self.labels.clone(),
            },
        })
    }

    /// The LIST did not show the Lease: the next campaign creates it. Kept while leading
    /// or writing, when the LIST may simply predate the write.
    pub(crate) fn forget(&mut self, now: Instant) {
        if self.pending.is_none() && !self.is_leader(now) {
            self.observed = None;
        }
    }

    /// What the table's LIST, sent at `list_sent`, showed of this elector's Lease. A LIST
    /// may have been served before a write of ours that was answered first: then it shows
    /// the Lease as it was, and taking it in would make the next write conflict. Such a
    /// LIST, and one that crosses a write still on its way, is not taken in; the next one
    /// is.
    pub(crate) fn observe_listed<O, P>(
        &mut self,
        now: Instant,
        lease: LeaseBody,
        list_sent: Instant,
        out: &mut Outbox<O, P>,
    ) -> Result<(), String> {
        if self.pending.is_some() || self.written_at.is_some_and(|at| at >= list_sent) {
            return Ok(());
        }
        self.observe(now, lease, out)
    }

    /// Whether a LIST sent at `list_sent` speaks for this Lease (see
    /// [`Elector::observe_listed`]); when not, its absence from the LIST means nothing.
    pub(crate) fn takes_list(&self, list_sent: Instant) -> bool {
        self.pending.is_none() && self.written_at.is_none_or(|at| at < list_sent)
    }

    fn succeeded<O, P>(
        &mut self,
        now: Instant,
        pending: Pending,
        out: &mut Outbox<O, P>,
    ) -> Change {
        self.schedule(now);
        let ours = self
            .observed
            .as_ref()
            .is_some_and(|o| o.holder == self.config.identity);
        // The term runs from the send: the write took effect no earlier.
        let until = pending.sent_at + self.config.renew_deadline;
        if !ours || until <= now {
            return Change::None;
        }
        let was_leading = self.is_leader(now);
        self.lead_until = Some(until);
        if was_leading {
            return Change::None;
        }
        self.terms += 1;
        let transitions = self.observed.as_ref().map_or(0, |o| o.transitions);
        let identity = self.config.identity.clone();
        match self.role {
            Role::Election => out.push_back(Output::Event(Event::LeadershipAcquired {
                identity,
                transitions,
            })),
            Role::Shard(shard) => out.push_back(Output::Event(Event::ShardAcquired {
                shard,
                identity,
                transitions,
            })),
            Role::Member => {}
        }
        Change::Acquired
    }

    fn failed<O, P>(
        &mut self,
        now: Instant,
        pending: Pending,
        error: String,
        out: &mut Outbox<O, P>,
    ) -> Change {
        self.schedule(now);
        out.push_back(Output::Event(Event::LeaseFailed {
            req: pending.req,
            error,
        }));
        Change::None
    }

    fn schedule(&mut self, now: Instant) {
        // A listed elector is driven by its table's retry period.
        if !self.stopped && self.role == Role::Election {
            self.next_try = Some(now + self.config.retry_period);
        }
    }

    fn lose<O, P>(&mut self, reason: LostReason, out: &mut Outbox<O, P>) {
        self.lead_until = None;
        match self.role {
            Role::Election => out.push_back(Output::Event(Event::LeadershipLost {
                identity: self.config.identity.clone(),
                reason,
            })),
            Role::Shard(shard) => out.push_back(Output::Event(Event::ShardLost { shard, reason })),
            Role::Member => {}
        }
    }

    /// Reads a Lease body (a GET's, or a write's answer).
    fn observe_body<O, P>(
        &mut self,
        now: Instant,
        body: &[u8],
        out: &mut Outbox<O, P>,
    ) -> Result<(), String> {
        if body.len() > MAX_LEASE_BYTES {
            return Err(format!(
                "lease body of {} bytes, more than {MAX_LEASE_BYTES}",
                body.len()
            ));
        }
        let lease: LeaseBody =
            serde_json::from_slice(body).map_err(|e| format!("lease body: {e}"))?;
        self.observe(now, lease, out)
    }

    /// A new resourceVersion is a change, seen now.
    fn observe<O, P>(
        &mut self,
        now: Instant,
        lease: LeaseBody,
        out: &mut Outbox<O, P>,
    ) -> Result<(), String> {
        let resource_version = lease
            .metadata
            .resource_version
            .filter(|rv| !rv.is_empty())
            .ok_or_else(|| "lease without metadata.resourceVersion".to_owned())?;
        if self
            .observed
            .as_ref()
            .is_some_and(|o| o.resource_version == resource_version)
        {
            return Ok(());
        }
        let holder = lease.spec.holder_identity.unwrap_or_default();
        if self.role == Role::Election && self.observed.as_ref().is_none_or(|o| o.holder != holder)
        {
            out.push_back(Output::Event(Event::LeaderObserved {
                holder: (!holder.is_empty()).then(|| holder.clone()),
            }));
        }
        self.observed = Some(Observed {
            resource_version,
            holder,
            lease_duration: Duration::from_secs(u64::from(
                lease.spec.lease_duration_seconds.unwrap_or(0),
            )),
            acquire_time: lease.spec.acquire_time,
            transitions: lease.spec.lease_transitions.unwrap_or(0),
            at: now,
        });
        Ok(())
    }

    fn send<O, P>(
        &mut self,
        now: Instant,
        step: Step,
        request: LeaseRequest,
        ids: &mut (impl MintIds + ?Sized),
        out: &mut Outbox<O, P>,
    ) {
        let req = ids.request();
        self.pending = Some(Pending {
            req,
            step,
            sent_at: now,
        });
        out.push_back(Output::Command(Command::Lease {
            req,
            namespace: self.config.namespace.clone(),
            name: self.config.name.clone(),
            request,
        }));
    }
}

/// Which election timer is due.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ElectionWake {
    Attempt,
    TermEnd,
}
