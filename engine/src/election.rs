//! Leader election's I/O: the Lease requests the core's [`Command::Lease`] asks for, and the
//! identity a candidate goes by. The election itself is the core's
//! ([`reconcile_core::election`]).
//!
//! [`Command::Lease`]: reconcile_core::Command::Lease

use std::time::Duration;

use reconcile_core::election::MAX_LEASE_BYTES;
use reconcile_core::{LeaseRequest, LeaseResponse};

use super::runtime::{Runtime, timeout};
use super::transport::{Transport, read_body};

/// A candidate's default identity: the hostname (the pod's name in a cluster) plus a random
/// suffix, so two replicas on one host, or a restarted one, never share it.
#[must_use]
pub fn default_identity() -> String {
    let host = hostname::get()
        .ok()
        .and_then(|h| h.into_string().ok())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "candidate".to_owned());
    let suffix: String = std::iter::repeat_with(fastrand::lowercase)
        .take(5)
        .collect();
    format!("{host}_{suffix}")
}

/// The wall clock as a Lease's `MicroTime`: RFC 3339, UTC, microseconds.
fn micro_time_now() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%S%.6fZ")
        .to_string()
}

/// The HTTP request for one Lease operation.
pub(crate) fn lease_request(
    namespace: &str,
    name: &str,
    request: &LeaseRequest,
) -> Result<http::Request<Vec<u8>>, String> {
    let collection = format!("/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases");
    let item = format!("{collection}/{name}");
    let now = micro_time_now();
    let builder = http::Request::builder().header(http::header::ACCEPT, "application/json");
    let built = match request {
        LeaseRequest::Get => builder.method(http::Method::GET).uri(item).body(Vec::new()),
        LeaseRequest::List { label_selector } => {
            // kube-core writes the query as it writes every LIST's.
            let params = kube_core::params::ListParams::default().labels(label_selector);
            let request = kube_core::Request::new(collection)
                .list(&params)
                .map_err(|e| e.to_string())?;
            let (mut parts, body) = request.into_parts();
            parts.headers.insert(
                http::header::ACCEPT,
                http::HeaderValue::from_static("application/json"),
            );
            return Ok(http::Request::from_parts(parts, body));
        }
        LeaseRequest::Create(spec) => builder
            .method(http::Method::POST)
            .uri(collection)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(spec.to_json(namespace, name, None, &now).into_bytes()),
        LeaseRequest::Update {
            resource_version,
            spec,
        } => builder
            .method(http::Method::PUT)
            .uri(item)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(
                spec.to_json(namespace, name, Some(resource_version), &now)
                    .into_bytes(),
            ),
    };
    built.map_err(|e| e.to_string())
}

/// Sends one Lease request and reads its answer, giving up after `limit`.
pub(crate) async fn lease_call<R: Runtime, T: Transport>(
    runtime: &R,
    transport: &T,
    request: http::Request<Vec<u8>>,
    limit: Duration,
) -> LeaseResponse {
    let call = async {
        let response = transport.send(request).await.map_err(|e| e.0)?;
        let status = response.status().as_u16();
        let mut body = response.into_body();
        let body = read_body(runtime, &mut body, limit, MAX_LEASE_BYTES)
            .await
            .map_err(|e| e.0)?;
        Ok::<_, String>((status, body))
    };
    match timeout(runtime, limit, call).await {
        Some(Ok((status, body))) => LeaseResponse::Response {
            status,
            body: body.into(),
        },
        Some(Err(error)) => LeaseResponse::TransportError(error),
        None => LeaseResponse::TransportError(format!("no answer within {limit:?}")),
    }
}
