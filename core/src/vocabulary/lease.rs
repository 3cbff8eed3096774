//! What the election asks of the driver about its Lease, what comes back, and why leadership
//! ends (the election itself is [`election`](crate::election)).

use std::fmt;

use bytes::Bytes;

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
        let mut metadata = serde_json::json!({ "name": name, "namespace": namespace });
        if let Some(rv) = resource_version {
            metadata["resourceVersion"] = rv.into();
        }
        if !self.labels.is_empty() {
            metadata["labels"] = self
                .labels
                .iter()
                .map(|(k, v)| (k.clone(), serde_json::Value::from(v.as_str())))
                .collect::<serde_json::Map<_, _>>()
                .into();
        }
        let holder = if self.holder.is_empty() {
            serde_json::Value::Null
        } else {
            self.holder.clone().into()
        };
        serde_json::json!({
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": metadata,
            "spec": {
                "holderIdentity": holder,
                "leaseDurationSeconds": self.lease_duration_seconds,
                "acquireTime": self.acquire_time.as_deref().unwrap_or(now),
                "renewTime": now,
                "leaseTransitions": self.transitions,
            }
        })
        .to_string()
    }
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
