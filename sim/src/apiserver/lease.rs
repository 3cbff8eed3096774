//! The simulated apiserver's side of leader election: one `coordination.k8s.io/v1` Lease
//! with a resourceVersion and optimistic concurrency, answered as the apiserver answers.
//!
//! | request | answer |
//! |---|---|
//! | get | 200 and the Lease, or 404 |
//! | create | 201 and the Lease, or 409 `AlreadyExists` |
//! | update | 200 and the Lease; 404 when there is none; 409 `Conflict` when `resourceVersion` is not the stored one; 422 without one (a Lease allows no unconditional update) |
//!
//! While the apiserver restarts every request fails as a refused connection.

use std::time::Duration;

use reconcile_core::{Instant, LeaseRequest};
use serde_json::Value;

/// What a Lease request gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseAnswer {
    /// An HTTP status and its body (the Lease, or a `Status`).
    Response {
        /// The status.
        status: u16,
        /// The body.
        body: String,
    },
    /// No answer.
    Transport(String),
}

/// A write the store applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// The holder written (empty: released).
    pub holder: String,
    /// The Lease's resourceVersion after the write.
    pub rv: u64,
}

#[derive(Debug, Clone)]
struct Stored {
    rv: u64,
    holder: String,
    value: Value,
}

/// One Lease and its versions.
#[derive(Debug, Clone)]
pub struct LeaseStore {
    namespace: String,
    name: String,
    /// The last resourceVersion handed out: every write takes the next.
    rv: u64,
    current: Option<Stored>,
    down_until: Option<Instant>,
    /// Writes by others than the candidates (the conflict fault).
    foreign_writes: u64,
}

/// Whether a Lease's labels match a selector of `key=value` terms joined by commas.
#[must_use]
pub fn matches_labels(lease: &Value, selector: &str) -> bool {
    let labels = lease.pointer("/metadata/labels");
    selector
        .split(',')
        .filter(|term| !term.is_empty())
        .all(|term| match term.split_once('=') {
            Some((k, v)) => labels
                .and_then(|l| l.get(k))
                .and_then(Value::as_str)
                .is_some_and(|have| have == v),
            None => false,
        })
}

fn status(code: u16, reason: &str, message: &str) -> LeaseAnswer {
    LeaseAnswer::Response {
        status: code,
        body: serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code,
            "details": {"group": "coordination.k8s.io", "kind": "leases"},
        })
        .to_string(),
    }
}

impl LeaseStore {
    /// No Lease yet: the first candidate creates it.
    #[must_use]
    pub fn new(namespace: &str, name: &str) -> Self {
        LeaseStore {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            rv: 0,
            current: None,
            down_until: None,
            foreign_writes: 0,
        }
    }

    /// The holder now (`None` without a Lease; empty when released).
    #[must_use]
    pub fn holder(&self) -> Option<&str> {
        self.current.as_ref().map(|s| s.holder.as_str())
    }

    /// The Lease's resourceVersion now.
    #[must_use]
    pub fn resource_version(&self) -> Option<u64> {
        self.current.as_ref().map(|s| s.rv)
    }

    /// Every request fails until `now + down`.
    pub fn restart(&mut self, now: Instant, down: Duration) {
        self.down_until = Some(now + down);
    }

    /// Another writer changes the Lease (an annotation, say), which gives it a new
    /// resourceVersion and leaves its spec alone: a candidate's next conditional write
    /// conflicts. `None` when there is no Lease yet.
    pub fn foreign_write(&mut self) -> Option<u64> {
        let stored = self.current.as_mut()?;
        self.rv += 1;
        self.foreign_writes += 1;
        stored.rv = self.rv;
        if let Some(meta) = stored
            .value
            .get_mut("metadata")
            .and_then(Value::as_object_mut)
        {
            meta.insert("resourceVersion".into(), self.rv.to_string().into());
            meta.insert(
                "annotations".into(),
                serde_json::json!({"sim.reconcile-loop/other-writer": self.foreign_writes.to_string()}),
            );
        }
        Some(self.rv)
    }

    /// Answers `request` arriving at `now`; `wall` is the writer's wall clock, RFC 3339,
    /// written as `renewTime` (and `acquireTime` unless kept). Also returns the write, when
    /// one was applied.
    pub fn handle(
        &mut self,
        now: Instant,
        request: &LeaseRequest,
        wall: &str,
    ) -> (LeaseAnswer, Option<Applied>) {
        if self.down_until.is_some_and(|until| now < until) {
            return (
                LeaseAnswer::Transport("connection refused (apiserver restarting)".into()),
                None,
            );
        }
        let not_found = || {
            status(
                404,
                "NotFound",
                "leases.coordination.k8s.io \"lease\" not found",
            )
        };
        match request {
            LeaseRequest::Get => match &self.current {
                Some(stored) => (self.ok(200, stored), None),
                None => (not_found(), None),
            },
            LeaseRequest::List { label_selector } => (self.list(label_selector), None),
            LeaseRequest::Create(spec) => {
                if self.current.is_some() {
                    return (
                        status(
                            409,
                            "AlreadyExists",
                            "leases.coordination.k8s.io already exists",
                        ),
                        None,
                    );
                }
                let answer = self.write(201, spec, wall);
                (answer, self.applied())
            }
            LeaseRequest::Update {
                resource_version,
                spec,
            } => {
                let Some(stored_rv) = self.current.as_ref().map(|s| s.rv) else {
                    return (not_found(), None);
                };
                if resource_version.is_empty() {
                    return (
                        status(
                            422,
                            "Invalid",
                            "metadata.resourceVersion: Invalid value: 0x0: must be specified for an update",
                        ),
                        None,
                    );
                }
                if *resource_version != stored_rv.to_string() {
                    return (
                        status(
                            409,
                            "Conflict",
                            "Operation cannot be fulfilled on leases.coordination.k8s.io: the object has been modified; please apply your changes to the latest version and try again",
                        ),
                        None,
                    );
                }
                let answer = self.write(200, spec, wall);
                (answer, self.applied())
            }
        }
    }

    /// The LIST of this one Lease: its items are the Lease when its labels match every
    /// `key=value` of `label_selector` (the only form the shard table sends).
    fn list(&self, label_selector: &str) -> LeaseAnswer {
        let items: Vec<&Value> = self
            .current
            .iter()
            .map(|s| &s.value)
            .filter(|v| matches_labels(v, label_selector))
            .collect();
        LeaseAnswer::Response {
            status: 200,
            body: serde_json::json!({
                "kind": "LeaseList", "apiVersion": "coordination.k8s.io/v1",
                "metadata": {"resourceVersion": self.rv.to_string()},
                "items": items,
            })
            .to_string(),
        }
    }

    fn applied(&self) -> Option<Applied> {
        self.current.as_ref().map(|s| Applied {
            holder: s.holder.clone(),
            rv: s.rv,
        })
    }

    fn ok(&self, code: u16, stored: &Stored) -> LeaseAnswer {
        LeaseAnswer::Response {
            status: code,
            body: stored.value.to_string(),
        }
    }

    fn write(
        &mut self,
        code: u16,
        spec: &reconcile_core::election::LeaseSpec,
        wall: &str,
    ) -> LeaseAnswer {
        self.rv += 1;
        let rv = self.rv.to_string();
        let json = spec.to_json(&self.namespace, &self.name, Some(&rv), wall);
        // The core's own rendering: it is JSON, or the core is broken and the reads say so.
        let value = serde_json::from_str(&json).unwrap_or(Value::Null);
        let stored = Stored {
            rv: self.rv,
            holder: spec.holder.clone(),
            value,
        };
        let answer = self.ok(code, &stored);
        self.current = Some(stored);
        answer
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reconcile_core::election::LeaseSpec;

    fn spec(holder: &str) -> LeaseSpec {
        LeaseSpec {
            holder: holder.into(),
            lease_duration_seconds: 15,
            acquire_time: None,
            transitions: 0,
            labels: vec![("reconcile-loop.dev/shard-set".into(), "ctl".into())],
        }
    }

    fn code(answer: &LeaseAnswer) -> u16 {
        match answer {
            LeaseAnswer::Response { status, .. } => *status,
            LeaseAnswer::Transport(_) => 0,
        }
    }

    fn update(rv: &str, holder: &str) -> LeaseRequest {
        LeaseRequest::Update {
            resource_version: rv.into(),
            spec: spec(holder),
        }
    }

    #[test]
    fn a_list_shows_the_lease_when_its_labels_match() {
        let mut store = LeaseStore::new("ns", "ctl");
        let wall = "2026-01-01T00:00:00.000000Z";
        let list = |store: &mut LeaseStore, selector: &str| {
            let request = LeaseRequest::List {
                label_selector: selector.into(),
            };
            let LeaseAnswer::Response { status: 200, body } =
                store.handle(Instant::ZERO, &request, wall).0
            else {
                panic!("a LIST is answered")
            };
            let v: Value = serde_json::from_str(&body).unwrap();
            v["items"].as_array().unwrap().len()
        };
        assert_eq!(list(&mut store, "reconcile-loop.dev/shard-set=ctl"), 0);
        store.handle(Instant::ZERO, &LeaseRequest::Create(spec("a")), wall);
        assert_eq!(list(&mut store, "reconcile-loop.dev/shard-set=ctl"), 1);
        assert_eq!(list(&mut store, "reconcile-loop.dev/shard-set=other"), 0);
        assert_eq!(
            list(&mut store, "missing=x,reconcile-loop.dev/shard-set=ctl"),
            0
        );
    }

    #[test]
    fn get_create_and_update_answer_as_the_apiserver_does() {
        let mut store = LeaseStore::new("ns", "ctl");
        let now = Instant::ZERO;
        let wall = "2026-01-01T00:00:00.000000Z";
        assert_eq!(code(&store.handle(now, &LeaseRequest::Get, wall).0), 404);
        assert_eq!(code(&store.handle(now, &update("1", "a"), wall).0), 404);
        let (answer, applied) = store.handle(now, &LeaseRequest::Create(spec("a")), wall);
        assert_eq!(code(&answer), 201);
        assert_eq!(applied.unwrap().holder, "a");
        assert_eq!(
            code(&store.handle(now, &LeaseRequest::Create(spec("b")), wall).0),
            409
        );
        let (answer, applied) = store.handle(now, &LeaseRequest::Get, wall);
        assert!(applied.is_none());
        let LeaseAnswer::Response { status: 200, body } = answer else {
            panic!("{answer:?}")
        };
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["metadata"]["resourceVersion"], "1");
        assert_eq!(v["spec"]["holderIdentity"], "a");
        assert_eq!(v["spec"]["renewTime"], wall);
        // Optimistic concurrency: only the stored version may be written over.
        assert_eq!(code(&store.handle(now, &update("0", "b"), wall).0), 409);
        assert_eq!(code(&store.handle(now, &update("", "b"), wall).0), 422);
        let (answer, applied) = store.handle(now, &update("1", "b"), wall);
        assert_eq!(code(&answer), 200);
        assert_eq!(
            applied,
            Some(Applied {
                holder: "b".into(),
                rv: 2
            })
        );
        assert_eq!(store.holder(), Some("b"));
    }

    #[test]
    fn another_writer_bumps_the_version_and_a_restart_refuses_everything() {
        let mut store = LeaseStore::new("ns", "ctl");
        let wall = "2026-01-01T00:00:00.000000Z";
        assert_eq!(store.foreign_write(), None);
        store.handle(Instant::ZERO, &LeaseRequest::Create(spec("a")), wall);
        assert_eq!(store.foreign_write(), Some(2));
        assert_eq!(store.holder(), Some("a"));
        assert_eq!(
            code(&store.handle(Instant::ZERO, &update("1", "a"), wall).0),
            409
        );
        store.restart(Instant::ZERO, Duration::from_secs(5));
        assert_eq!(
            code(&store.handle(Instant::ZERO, &LeaseRequest::Get, wall).0),
            0
        );
        let later = Instant::from_duration(Duration::from_secs(5));
        assert_eq!(code(&store.handle(later, &update("2", "a"), wall).0), 200);
        assert_eq!(store.resource_version(), Some(3));
    }
}
