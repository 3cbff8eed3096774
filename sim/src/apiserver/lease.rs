//! The simulated apiserver's side of leader election and sharding: the
//! `coordination.k8s.io/v1` Leases of one namespace ([`LeaseSet`]), by name, with one
//! resourceVersion sequence and optimistic concurrency, answered as the apiserver answers.
//! The election uses one of them; a shard set uses one per shard and one per replica.
//!
//! | request | answer |
//! |---|---|
//! | get | 200 and the Lease, or 404 |
//! | list | 200 and the Leases whose labels match every `key=value` of the selector, by name |
//! | create | 201 and the Lease, or 409 `AlreadyExists` |
//! | update | 200 and the Lease; 404 when there is none; 409 `Conflict` when `resourceVersion` is not the stored one; 422 without one (a Lease allows no unconditional update) |
//!
//! While the apiserver restarts every request, to every Lease, fails as a refused
//! connection.

use std::collections::BTreeMap;
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
    /// The Lease written.
    pub name: String,
    /// The holder written (empty: released).
    pub holder: String,
    /// The Lease's resourceVersion after the write.
    pub rv: u64,
}

#[derive(Debug, Clone)]
struct Stored {
    rv: u64,
    holder: String,
    /// `metadata.labels`, as written: what a LIST selects by.
    labels: Vec<(String, String)>,
    /// The Lease as stored, rendered once per write: every GET and LIST answers with it (a
    /// sharded seed spent a third of its time rendering the same Leases again).
    body: String,
}

/// The Leases of one namespace, by name, and their versions.
#[derive(Debug, Clone)]
pub struct LeaseSet {
    namespace: String,
    /// The last resourceVersion handed out, over every Lease: every write takes the next.
    rv: u64,
    /// Every Lease written so far, by name (a Lease is never deleted).
    leases: BTreeMap<String, Stored>,
    down_until: Option<Instant>,
    /// Writes by others than the candidates (the conflict fault).
    foreign_writes: u64,
}

/// Leases a set holds at most: creates past it are refused (403, as a quota would).
pub const MAX_LEASES: usize = 8_192;

/// Whether a Lease's labels (a repeated key keeps its last value, as in a map) match a
/// selector of `key=value` terms joined by commas.
#[must_use]
pub fn matches_labels(labels: &[(String, String)], selector: &str) -> bool {
    selector
        .split(',')
        .filter(|term| !term.is_empty())
        .all(|term| match term.split_once('=') {
            Some((k, v)) => labels
                .iter()
                .rev()
                .find(|(have, _)| have == k)
                .is_some_and(|(_, have)| have == v),
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

impl LeaseSet {
    /// No Lease yet: the first candidate creates each.
    #[must_use]
    pub fn new(namespace: &str) -> Self {
        LeaseSet {
            namespace: namespace.to_owned(),
            rv: 0,
            leases: BTreeMap::new(),
            down_until: None,
            foreign_writes: 0,
        }
    }

    /// The holder of `name` now (`None` without that Lease; empty when released).
    #[must_use]
    pub fn holder(&self, name: &str) -> Option<&str> {
        self.leases.get(name).map(|s| s.holder.as_str())
    }

    /// The resourceVersion of `name` now.
    #[must_use]
    pub fn resource_version(&self, name: &str) -> Option<u64> {
        self.leases.get(name).map(|s| s.rv)
    }

    /// The last resourceVersion handed out, over every Lease.
    #[must_use]
    pub fn last_resource_version(&self) -> u64 {
        self.rv
    }

    /// Every Lease's name and holder, by name.
    pub fn holders(&self) -> impl Iterator<Item = (&str, &str)> {
        self.leases
            .iter()
            .map(|(name, s)| (name.as_str(), s.holder.as_str()))
    }

    /// Every request, to every Lease, fails until `now + down`.
    pub fn restart(&mut self, now: Instant, down: Duration) {
        self.down_until = Some(now + down);
    }

    /// Another writer changes Lease `name` (an annotation, say), which gives it a new
    /// resourceVersion and leaves its spec alone: a candidate's next conditional write
    /// conflicts. `None` when there is no such Lease yet.
    pub fn foreign_write(&mut self, name: &str) -> Option<u64> {
        let stored = self.leases.get_mut(name)?;
        self.rv += 1;
        self.foreign_writes += 1;
        stored.rv = self.rv;
        // Rare (a fault): parsed and rendered again here rather than kept parsed per write.
        let mut value: Value = serde_json::from_str(&stored.body).unwrap_or(Value::Null);
        if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert("resourceVersion".into(), self.rv.to_string().into());
            meta.insert(
                "annotations".into(),
                serde_json::json!({"sim.reconcile-loop/other-writer": self.foreign_writes.to_string()}),
            );
        }
        stored.body = value.to_string();
        Some(self.rv)
    }

    /// Answers `request` for Lease `name` (unused by a LIST) arriving at `now`; `wall` is
    /// the writer's wall clock, RFC 3339, written as `renewTime` (and `acquireTime` unless
    /// kept). Also returns the write, when one was applied.
    pub fn handle(
        &mut self,
        now: Instant,
        name: &str,
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
                &format!("leases.coordination.k8s.io {name:?} not found"),
            )
        };
        match request {
            LeaseRequest::Get => match self.leases.get(name) {
                Some(stored) => (ok(200, stored), None),
                None => (not_found(), None),
            },
            LeaseRequest::List { label_selector } => (self.list(label_selector), None),
            LeaseRequest::Create(spec) => {
                if self.leases.contains_key(name) {
                    return (
                        status(
                            409,
                            "AlreadyExists",
                            "leases.coordination.k8s.io already exists",
                        ),
                        None,
                    );
                }
                if self.leases.len() >= MAX_LEASES {
                    return (status(403, "Forbidden", "exceeded quota: leases"), None);
                }
                let answer = self.write(201, name, spec, wall);
                (answer, self.applied(name))
            }
            LeaseRequest::Update {
                resource_version,
                spec,
            } => {
                let Some(stored_rv) = self.leases.get(name).map(|s| s.rv) else {
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
                let answer = self.write(200, name, spec, wall);
                (answer, self.applied(name))
            }
        }
    }

    /// The LIST of the namespace's Leases whose labels match every `key=value` of
    /// `label_selector` (the only form the shard table sends), by name; its
    /// resourceVersion is the set's latest.
    fn list(&self, label_selector: &str) -> LeaseAnswer {
        // Joined from the stored renderings, with the keys in the order serde_json's map
        // writes them (sorted), so the bytes are those of rendering the whole list.
        let rv = self.rv.to_string();
        let mut body = String::with_capacity(
            128 + self
                .leases
                .values()
                .map(|s| s.body.len() + 1)
                .sum::<usize>(),
        );
        body.push_str(r#"{"apiVersion":"coordination.k8s.io/v1","items":["#);
        let matching = self
            .leases
            .values()
            .filter(|s| matches_labels(&s.labels, label_selector));
        for (i, stored) in matching.enumerate() {
            if i > 0 {
                body.push(',');
            }
            body.push_str(&stored.body);
        }
        body.push_str(r#"],"kind":"LeaseList","metadata":{"resourceVersion":""#);
        body.push_str(&rv);
        body.push_str(r#""}}"#);
        LeaseAnswer::Response { status: 200, body }
    }

    fn applied(&self, name: &str) -> Option<Applied> {
        self.leases.get(name).map(|s| Applied {
            name: name.to_owned(),
            holder: s.holder.clone(),
            rv: s.rv,
        })
    }

    fn write(
        &mut self,
        code: u16,
        name: &str,
        spec: &reconcile_core::election::LeaseSpec,
        wall: &str,
    ) -> LeaseAnswer {
        self.rv += 1;
        let rv = self.rv.to_string();
        let json = spec.to_json(&self.namespace, name, Some(&rv), wall);
        // The core's own rendering: it is JSON, or the core is broken and the reads say so.
        // The core renders with serde_json, sorted keys and all: the bytes a `Value` of it
        // would render (the LIST test checks it).
        let stored = Stored {
            rv: self.rv,
            holder: spec.holder.clone(),
            labels: spec.labels.clone(),
            body: json,
        };
        let answer = ok(code, &stored);
        self.leases.insert(name.to_owned(), stored);
        answer
    }
}

fn ok(code: u16, stored: &Stored) -> LeaseAnswer {
    LeaseAnswer::Response {
        status: code,
        body: stored.body.clone(),
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
        let mut store = LeaseSet::new("ns");
        let wall = "2026-01-01T00:00:00.000000Z";
        let list = |store: &mut LeaseSet, selector: &str| {
            let request = LeaseRequest::List {
                label_selector: selector.into(),
            };
            let LeaseAnswer::Response { status: 200, body } =
                store.handle(Instant::ZERO, "ctl", &request, wall).0
            else {
                panic!("a LIST is answered")
            };
            let v: Value = serde_json::from_str(&body).unwrap();
            v["items"].as_array().unwrap().len()
        };
        assert_eq!(list(&mut store, "reconcile-loop.dev/shard-set=ctl"), 0);
        store.handle(Instant::ZERO, "ctl", &LeaseRequest::Create(spec("a")), wall);
        assert_eq!(list(&mut store, "reconcile-loop.dev/shard-set=ctl"), 1);
        assert_eq!(list(&mut store, "reconcile-loop.dev/shard-set=other"), 0);
        assert_eq!(
            list(&mut store, "missing=x,reconcile-loop.dev/shard-set=ctl"),
            0
        );
    }

    #[test]
    fn get_create_and_update_answer_as_the_apiserver_does() {
        let mut store = LeaseSet::new("ns");
        let now = Instant::ZERO;
        let wall = "2026-01-01T00:00:00.000000Z";
        assert_eq!(
            code(&store.handle(now, "ctl", &LeaseRequest::Get, wall).0),
            404
        );
        assert_eq!(
            code(&store.handle(now, "ctl", &update("1", "a"), wall).0),
            404
        );
        let (answer, applied) = store.handle(now, "ctl", &LeaseRequest::Create(spec("a")), wall);
        assert_eq!(code(&answer), 201);
        assert_eq!(applied.unwrap().holder, "a");
        assert_eq!(
            code(
                &store
                    .handle(now, "ctl", &LeaseRequest::Create(spec("b")), wall)
                    .0
            ),
            409
        );
        let (answer, applied) = store.handle(now, "ctl", &LeaseRequest::Get, wall);
        assert!(applied.is_none());
        let LeaseAnswer::Response { status: 200, body } = answer else {
            panic!("{answer:?}")
        };
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["metadata"]["resourceVersion"], "1");
        assert_eq!(v["spec"]["holderIdentity"], "a");
        assert_eq!(v["spec"]["renewTime"], wall);
        // Optimistic concurrency: only the stored version may be written over.
        assert_eq!(
            code(&store.handle(now, "ctl", &update("0", "b"), wall).0),
            409
        );
        assert_eq!(
            code(&store.handle(now, "ctl", &update("", "b"), wall).0),
            422
        );
        let (answer, applied) = store.handle(now, "ctl", &update("1", "b"), wall);
        assert_eq!(code(&answer), 200);
        assert_eq!(
            applied,
            Some(Applied {
                name: "ctl".into(),
                holder: "b".into(),
                rv: 2
            })
        );
        assert_eq!(store.holder("ctl"), Some("b"));
    }

    #[test]
    fn another_writer_bumps_the_version_and_a_restart_refuses_everything() {
        let mut store = LeaseSet::new("ns");
        let wall = "2026-01-01T00:00:00.000000Z";
        assert_eq!(store.foreign_write("ctl"), None);
        store.handle(Instant::ZERO, "ctl", &LeaseRequest::Create(spec("a")), wall);
        assert_eq!(store.foreign_write("ctl"), Some(2));
        assert_eq!(store.holder("ctl"), Some("a"));
        assert_eq!(
            code(
                &store
                    .handle(Instant::ZERO, "ctl", &update("1", "a"), wall)
                    .0
            ),
            409
        );
        store.restart(Instant::ZERO, Duration::from_secs(5));
        assert_eq!(
            code(
                &store
                    .handle(Instant::ZERO, "ctl", &LeaseRequest::Get, wall)
                    .0
            ),
            0
        );
        let later = Instant::from_duration(Duration::from_secs(5));
        assert_eq!(
            code(&store.handle(later, "ctl", &update("2", "a"), wall).0),
            200
        );
        assert_eq!(store.resource_version("ctl"), Some(3));
    }

    #[test]
    fn a_selector_matches_every_term_and_a_repeated_label_keeps_its_last_value() {
        let labels = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).into(), (*v).into()))
                .collect()
        };
        let l = labels(&[("a", "1"), ("b", "2"), ("b", "3")]);
        assert!(matches_labels(&l, "a=1,b=3"));
        assert!(matches_labels(&l, ""));
        assert!(!matches_labels(&l, "b=2"));
        assert!(!matches_labels(&l, "a=1,c=1"));
        assert!(!matches_labels(&l, "a"));
        assert!(!matches_labels(&[], "a=1"));
    }

    #[test]
    fn leases_share_one_version_sequence_a_list_selects_by_label_and_a_restart_hits_all() {
        let mut set = LeaseSet::new("ns");
        let wall = "2026-01-01T00:00:00.000000Z";
        let now = Instant::ZERO;
        let mut other = spec("z");
        other.labels.clear();
        assert_eq!(
            code(
                &set.handle(now, "s-0", &LeaseRequest::Create(spec("a")), wall)
                    .0
            ),
            201
        );
        assert_eq!(
            code(
                &set.handle(now, "s-1", &LeaseRequest::Create(spec("b")), wall)
                    .0
            ),
            201
        );
        assert_eq!(
            code(&set.handle(now, "x", &LeaseRequest::Create(other), wall).0),
            201
        );
        assert_eq!(set.resource_version("s-0"), Some(1));
        assert_eq!(set.resource_version("s-1"), Some(2));
        assert_eq!(set.last_resource_version(), 3);
        // s-0's version is 1: a write with s-1's conflicts.
        assert_eq!(
            code(&set.handle(now, "s-0", &update("2", "c"), wall).0),
            409
        );
        let (answer, applied) = set.handle(now, "s-1", &update("2", "c"), wall);
        assert_eq!(code(&answer), 200);
        assert_eq!(applied.map(|a| (a.name, a.rv)), Some(("s-1".into(), 4)));
        let request = LeaseRequest::List {
            label_selector: "reconcile-loop.dev/shard-set=ctl".into(),
        };
        let LeaseAnswer::Response { status: 200, body } = set.handle(now, "", &request, wall).0
        else {
            panic!("a LIST is answered")
        };
        let v: Value = serde_json::from_str(&body).unwrap();
        let names: Vec<&str> = v["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|i| i["metadata"]["name"].as_str())
            .collect();
        assert_eq!(names, ["s-0", "s-1"]);
        assert_eq!(v["metadata"]["resourceVersion"], "4");
        // The LIST is joined from stored renderings: the bytes are serde_json's own.
        assert_eq!(body, v.to_string());
        assert_eq!(set.foreign_write("s-0"), Some(5));
        // A foreign write renders again: GET and LIST show its annotation.
        let LeaseAnswer::Response { body, .. } = set.handle(now, "s-0", &LeaseRequest::Get, wall).0
        else {
            panic!("a GET is answered")
        };
        assert!(body.contains("other-writer"), "{body}");
        let LeaseAnswer::Response { body, .. } = set.handle(now, "", &request, wall).0 else {
            panic!("a LIST is answered")
        };
        assert!(body.contains("other-writer"), "{body}");
        assert_eq!(set.foreign_write("missing"), None);
        set.restart(now, Duration::from_secs(1));
        for name in ["s-0", "s-1", "x"] {
            assert_eq!(code(&set.handle(now, name, &LeaseRequest::Get, wall).0), 0);
        }
        let holders: Vec<(&str, &str)> = set.holders().collect();
        assert_eq!(holders, [("s-0", "a"), ("s-1", "c"), ("x", "z")]);
    }
}
