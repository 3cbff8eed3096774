//! What the drivers' health listener answers: `/metrics`, `/healthz`, `/readyz`
//! (controller-runtime's metrics server and health probes), as plain request-to-response
//! routing with no I/O, so both drivers serve the same answers on their own sockets.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use prometheus_client::encoding::prometheus_text;
use prometheus_client::registry::Registry;

use crate::handle::Handle;

/// The longest request path routed; anything longer is a 404.
pub const MAX_PATH: usize = 256;

/// Connections the drivers' listener serves at once; more are closed unanswered, so a
/// flood of scrapers cannot pile up tasks.
pub const MAX_CONNECTIONS: usize = 32;

/// The most the listener buffers of one request: a probe's or a scrape's head is a few
/// hundred bytes, so a larger one is refused instead of held (hyper's floor is 8 KiB).
pub const MAX_REQUEST_BUFFER: usize = 16 * 1024;

/// How long the listener waits for a request's head before closing the connection.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest a connection is kept, whatever the peer does: each serves one request
/// (no keep-alive), so an idle or slow peer cannot hold a slot.
pub const CONNECTION_TIMEOUT: Duration = Duration::from_secs(30);

type Check = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

/// The endpoints one process serves: a registry for `/metrics` and the checks behind
/// `/healthz` and `/readyz`. Add each controller with [`Endpoints::controller`]; add your
/// own metrics to the registry first ([`Endpoints::with_registry`]).
///
/// - `/metrics`: the registry in Prometheus text format 0.0.4 (what controller-runtime
///   serves and every Prometheus scrapes).
/// - `/healthz`: 200 while every controller runs; 500 once one has ended.
/// - `/readyz`: 200 once every controller's cache is synced (a leader-election standby
///   syncs too, so it is ready while it waits to lead); 503 before, or once one has ended.
pub struct Endpoints {
    registry: Registry,
    live: Vec<Check>,
    ready: Vec<Check>,
}

impl fmt::Debug for Endpoints {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Endpoints")
            .field("registry", &self.registry)
            .field("checks", &self.live.len())
            .finish()
    }
}

impl Default for Endpoints {
    fn default() -> Self {
        Endpoints::with_registry(Registry::default())
    }
}

impl Endpoints {
    /// Endpoints with an empty registry and no checks.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Endpoints serving `registry` (holding your own metrics) on `/metrics`.
    #[must_use]
    pub fn with_registry(registry: Registry) -> Self {
        Endpoints {
            registry,
            live: Vec::new(),
            ready: Vec::new(),
        }
    }

    /// Adds a controller: its metrics to the registry, its liveness and readiness to the
    /// probes.
    #[must_use]
    pub fn controller<O, P>(mut self, handle: &Handle<O, P>) -> Self
    where
        O: Send + Sync + 'static,
        P: Send + Sync + 'static,
    {
        self.registry
            .register_collector(Box::new(handle.collector()));
        let name = handle.name();
        let h = handle.clone();
        let n = Arc::clone(&name);
        self.live.push(Arc::new(move || {
            if h.is_stopped() {
                Err(format!("controller {n} has stopped"))
            } else {
                Ok(())
            }
        }));
        let h = handle.clone();
        self.ready.push(Arc::new(move || {
            if h.is_stopped() {
                Err(format!("controller {name} has stopped"))
            } else if !h.is_synced() {
                Err(format!("controller {name} has not synced"))
            } else {
                Ok(())
            }
        }));
        self
    }

    /// The registry, to add metrics after the controllers.
    pub fn registry_mut(&mut self) -> &mut Registry {
        &mut self.registry
    }

    /// The answer to `method path` (the path may carry a query, which is ignored).
    #[must_use]
    pub fn respond(&self, method: &http::Method, path: &str) -> http::Response<Bytes> {
        let path = path.split('?').next().unwrap_or_default();
        if path.len() > MAX_PATH {
            return plain(http::StatusCode::NOT_FOUND, "not found\n".into());
        }
        if !matches!(path, "/metrics" | "/healthz" | "/readyz") {
            return plain(http::StatusCode::NOT_FOUND, "not found\n".into());
        }
        if method != http::Method::GET && method != http::Method::HEAD {
            return plain(
                http::StatusCode::METHOD_NOT_ALLOWED,
                "only GET and HEAD\n".into(),
            );
        }
        let response = match path {
            "/metrics" => self.metrics(),
            "/healthz" => probe(&self.live, http::StatusCode::INTERNAL_SERVER_ERROR),
            _ => probe(&self.ready, http::StatusCode::SERVICE_UNAVAILABLE),
        };
        if method == http::Method::HEAD {
            let (parts, _) = response.into_parts();
            return http::Response::from_parts(parts, Bytes::new());
        }
        response
    }

    fn metrics(&self) -> http::Response<Bytes> {
        let mut body = String::new();
        match prometheus_text::encode(&mut body, &self.registry) {
            Ok(()) => http::Response::builder()
                .status(http::StatusCode::OK)
                .header(http::header::CONTENT_TYPE, prometheus_text::CONTENT_TYPE)
                .body(Bytes::from(body))
                .unwrap_or_default(),
            Err(_) => plain(
                http::StatusCode::INTERNAL_SERVER_ERROR,
                "encoding the metrics failed\n".into(),
            ),
        }
    }
}

/// Every check's verdict; the first failures say why (controller-runtime's probes answer
/// `ok` or the failing checks).
fn probe(checks: &[Check], failure: http::StatusCode) -> http::Response<Bytes> {
    let failures: Vec<String> = checks.iter().filter_map(|c| c().err()).collect();
    if failures.is_empty() {
        plain(http::StatusCode::OK, "ok\n".into())
    } else {
        plain(failure, format!("{}\n", failures.join("\n")))
    }
}

fn plain(status: http::StatusCode, body: String) -> http::Response<Bytes> {
    http::Response::builder()
        .status(status)
        .header(http::header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .body(Bytes::from(body))
        .unwrap_or_default()
}
