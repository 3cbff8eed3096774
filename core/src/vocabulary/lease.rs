//! What the election asks of the driver about its Lease, what comes back, and why leadership
//! ends (the election itself is [`election`](crate::election)).

use std::collections::BTreeMap;
use std::fmt;

use bytes::Bytes;
use serde::Serialize;

/// A Lease request for the driver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseRequest {
    /// `GET` the Lease.
    Get,
    /// `GET` the namespace's Leases whose labels match `label_selector` (the shard table's
    /// one read per retry period; the command's `name` is not used).
    List {
        /// A label selector, as the apiserver reads `labelSelector`.
        label_selector: String,
    },
    /// `POST` a new Lease with this spec.
    Create(LeaseSpec),
    /// `PUT` the Lease with this spec, if its resourceVersion is still `resource_version`
    /// (409 Conflict otherwise).
    Update {
        /// The version read; the write fails if the Lease changed since.
        resource_version: String,
        /// The spec to write.
        spec: LeaseSpec,
    },
}

/// The `spec` a candidate writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseSpec {
    /// `holderIdentity`; empty when released.
    pub holder: String,
    /// `leaseDurationSeconds`.
    pub lease_duration_seconds: u32,
    /// `acquireTime`: kept from the Lease when renewing; `None` means now.
    pub acquire_time: Option<String>,
    /// `leaseTransitions`.
    pub transitions: u32,
    /// `metadata.labels`, sorted by key: how a shard table finds its Leases (empty for a
    /// plain election, whose Lease has none).
    pub labels: Vec<(String, String)>,
}

impl LeaseSpec {
    /// The Lease body to send, with `now` (the driver's wall clock, RFC 3339 with
    /// microseconds) as `renewTime` and, unless kept, `acquireTime`.
    #[must_use]
    pub fn to_json(
        &self,
        namespace: &str,
        name: &str,
        resource_version: Option<&str>,
        now: &str,
    ) -> String {
        let body = LeaseOut {
            api_version: "coordination.k8s.io/v1",
            kind: "Lease",
            metadata: MetaOut {
                // A map, as `metadata.labels` is: a repeated key keeps its last value.
                labels: self
                    .labels
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_str()))
                    .collect(),
                name,
                namespace,
                resource_version,
            },
            spec: SpecOut {
                acquire_time: self.acquire_time.as_deref().unwrap_or(now),
                holder_identity: (!self.holder.is_empty()).then_some(self.holder.as_str()),
                lease_duration_seconds: self.lease_duration_seconds,
                lease_transitions: self.transitions,
                renew_time: now,
            },
        };
        // Strings, numbers and a string map: serializing cannot fail.
        serde_json::to_string(&body).unwrap_or_default()
    }
}

// The Lease body as sent. Typed rather than built as a `serde_json::Value` (a shard table
// renders one per Lease per retry period); fields in sorted order, as a `Value` renders them,
// so the bytes did not change.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct LeaseOut<'a> {
    api_version: &'static str,
    kind: &'static str,
    metadata: MetaOut<'a>,
    spec: SpecOut<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct MetaOut<'a> {
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    labels: BTreeMap<&'a str, &'a str>,
    name: &'a str,
    namespace: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    resource_version: Option<&'a str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SpecOut<'a> {
    acquire_time: &'a str,
    /// `null` when released.
    holder_identity: Option<&'a str>,
    lease_duration_seconds: u32,
    lease_transitions: u32,
    renew_time: &'a str,
}

impl fmt::Display for LeaseRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LeaseRequest::Get => f.write_str("get"),
            LeaseRequest::List { label_selector } => write!(f, "list {label_selector}"),
            LeaseRequest::Create(spec) => write!(f, "create {spec}"),
            LeaseRequest::Update {
                resource_version,
                spec,
            } => write!(f, "update rv={resource_version} {spec}"),
        }
    }
}

impl fmt::Display for LeaseSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.holder.is_empty() {
            f.write_str("holder=none")?;
        } else {
            write!(f, "holder={}", self.holder)?;
        }
        write!(
            f,
            " duration={}s transitions={}",
            self.lease_duration_seconds, self.transitions
        )
    }
}

/// The answer to a [`Command::Lease`](crate::Command::Lease).
#[derive(Debug, Clone)]
pub enum LeaseResponse {
    /// An HTTP status and its body (the Lease on 200 / 201, a `Status` otherwise).
    Response {
        /// The HTTP status.
        status: u16,
        /// The body.
        body: Bytes,
    },
    /// No answer: connection refused, reset, timed out.
    TransportError(String),
}

/// Why leadership ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LostReason {
    /// No renewal succeeded within `renew_deadline` of the last successful one's send.
    RenewDeadline,
    /// The loop stopped (the Lease was released if so configured).
    Stopped,
    /// A shard given up so that another replica can hold it (the table's balance).
    Rebalanced,
}

impl fmt::Display for LostReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LostReason::RenewDeadline => "renew deadline passed",
            LostReason::Stopped => "stopped",
            LostReason::Rebalanced => "given up to rebalance",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The rendering before it was typed: a `serde_json::Value`, whose maps sort their keys.
    fn as_value(spec: &LeaseSpec, rv: Option<&str>, now: &str) -> String {
        let mut metadata = serde_json::json!({ "name": "l", "namespace": "ns" });
        if let Some(rv) = rv {
            metadata["resourceVersion"] = rv.into();
        }
        if !spec.labels.is_empty() {
            metadata["labels"] = spec
                .labels
                .iter()
                .map(|(k, v)| (k.clone(), serde_json::Value::from(v.as_str())))
                .collect::<serde_json::Map<_, _>>()
                .into();
        }
        let holder = if spec.holder.is_empty() {
            serde_json::Value::Null
        } else {
            spec.holder.clone().into()
        };
        serde_json::json!({
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": metadata,
            "spec": {
                "holderIdentity": holder,
                "leaseDurationSeconds": spec.lease_duration_seconds,
                "acquireTime": spec.acquire_time.as_deref().unwrap_or(now),
                "renewTime": now,
                "leaseTransitions": spec.transitions,
            }
        })
        .to_string()
    }

    #[test]
    fn the_typed_body_renders_the_bytes_a_json_value_does() {
        let now = "2026-01-01T00:00:00.000000Z";
        let mut spec = LeaseSpec {
            holder: "a \"quoted\" holder".into(),
            lease_duration_seconds: 15,
            acquire_time: None,
            transitions: 3,
            labels: Vec::new(),
        };
        let mut cases = vec![(spec.clone(), None), (spec.clone(), Some("7"))];
        spec.holder.clear();
        spec.acquire_time = Some("2025-12-31T23:59:59.000000Z".into());
        spec.labels = vec![
            ("b".into(), "2".into()),
            ("a".into(), "1".into()),
            ("b".into(), "3".into()),
        ];
        cases.push((spec.clone(), Some("8")));
        for (spec, rv) in cases {
            assert_eq!(spec.to_json("ns", "l", rv, now), as_value(&spec, rv, now));
        }
    }
}
