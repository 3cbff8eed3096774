//! A small blocking client for the apiserver's REST API.
//!
//! Deliberately not kube-rs: this crate must prove the environment before any
//! driver exists, and must not start a tokio runtime (a later suite asserts
//! that none runs). All calls block the calling thread, so they work from any
//! thread and from inside any async runtime's blocking sections.

use std::io::{BufRead, BufReader};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};
use ureq::Agent;
use ureq::tls::{Certificate, RootCerts, TlsConfig};

use crate::error::{Error, Result};
use crate::wait::wait_for;

/// Name of the fake node kwok manages; pods bound to it are "run" by kwok.
pub const KWOK_NODE: &str = "kwok-node-0";

/// Blocking client for one apiserver, authenticated with a bearer token.
#[derive(Clone)]
pub struct Client {
    agent: Agent,
    watch_agent: Agent,
    base: String,
    token: String,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

/// One event of a watch stream.
#[derive(Debug, Clone, PartialEq)]
pub struct WatchEvent {
    /// `ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK` or `ERROR`.
    pub kind: String,
    /// The object (a `Status` for `ERROR`).
    pub object: Value,
}

impl WatchEvent {
    /// For an `ERROR` event, the `code` of its `Status` (410 when expired).
    #[must_use]
    pub fn error_code(&self) -> Option<u64> {
        (self.kind == "ERROR")
            .then(|| self.object["code"].as_u64())
            .flatten()
    }
}

/// Parameters of a watch request.
#[derive(Debug, Clone, Default)]
pub struct WatchParams {
    /// Start after this resourceVersion; `None` starts with synthetic ADDED events.
    pub resource_version: Option<String>,
    /// Label selector, e.g. `app=web,tier!=db`.
    pub label_selector: Option<String>,
    /// Server-side timeout; defaults to 60 s so a forgotten stream ends.
    pub timeout_seconds: Option<u32>,
    /// Ask for BOOKMARK events.
    pub allow_bookmarks: bool,
    /// Streaming list: synthetic ADDED events for the current state, then a
    /// BOOKMARK annotated `k8s.io/initial-events-end`. Needs
    /// `allow_bookmarks` and sends `resourceVersionMatch=NotOlderThan`.
    pub send_initial_events: bool,
}

/// An open watch. Events are read on a helper thread, so [`Watch::next`] can
/// time out without breaking the stream.
#[derive(Debug)]
pub struct Watch {
    rx: mpsc::Receiver<Result<WatchEvent>>,
}

impl Watch {
    /// The next event; `Ok(None)` when the server closed the stream.
    ///
    /// # Errors
    /// [`Error::Timeout`] if nothing arrives within `timeout`; read or parse
    /// errors of the stream.
    pub fn next(&self, timeout: Duration) -> Result<Option<WatchEvent>> {
        match self.rx.recv_timeout(timeout) {
            Ok(event) => event.map(Some),
            Err(mpsc::RecvTimeoutError::Disconnected) => Ok(None),
            Err(mpsc::RecvTimeoutError::Timeout) => Err(Error::Timeout {
                what: "the next watch event".into(),
                timeout,
                last: "no event".into(),
            }),
        }
    }

    /// Reads events until one satisfies `pred`, returning it.
    ///
    /// # Errors
    /// [`Error::Timeout`] naming `what` and the last event seen, also when the
    /// server closes the stream first; stream read or parse errors.
    pub fn next_matching(
        &self,
        timeout: Duration,
        what: &str,
        mut pred: impl FnMut(&WatchEvent) -> bool,
    ) -> Result<WatchEvent> {
        let deadline = std::time::Instant::now() + timeout;
        let mut last = "no event".to_owned();
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.next(left) {
                Ok(Some(event)) if pred(&event) => return Ok(event),
                Ok(Some(event)) => last = describe_event(&event),
                Ok(None) => last = format!("{last}, then the server closed the stream"),
                Err(Error::Timeout { .. }) => {}
                Err(e) => return Err(e),
            }
            if left.is_zero() || last.ends_with("closed the stream") {
                return Err(Error::Timeout {
                    what: what.into(),
                    timeout,
                    last,
                });
            }
        }
    }
}

fn describe_event(event: &WatchEvent) -> String {
    let meta = &event.object["metadata"];
    format!(
        "{} {}/{} rv={}",
        event.kind,
        meta["namespace"].as_str().unwrap_or(""),
        meta["name"].as_str().unwrap_or(""),
        meta["resourceVersion"].as_str().unwrap_or("?")
    )
}

/// Percent-encodes a query value (RFC 3986 unreserved characters pass).
#[must_use]
pub fn encode_query(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A minimal pod bound to the kwok node, with one container `app`.
///
/// `spec.nodeName` is set because no scheduler runs in this environment.
#[must_use]
pub fn pod_manifest(name: &str, labels: &[(&str, &str)]) -> Value {
    let labels: serde_json::Map<String, Value> = labels
        .iter()
        .map(|(k, v)| ((*k).to_owned(), json!(v)))
        .collect();
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": name, "labels": labels },
        "spec": {
            "nodeName": KWOK_NODE,
            "terminationGracePeriodSeconds": 5,
            "containers": [{ "name": "app", "image": "registry.invalid/app:1" }]
        }
    })
}

/// The pod's `status.phase`, or `""`.
#[must_use]
pub fn pod_phase(pod: &Value) -> &str {
    pod["status"]["phase"].as_str().unwrap_or("")
}

/// `metadata.resourceVersion`, or `""`.
#[must_use]
pub fn resource_version(object: &Value) -> &str {
    object["metadata"]["resourceVersion"].as_str().unwrap_or("")
}

impl Client {
    /// A client for `base` (`https://127.0.0.1:port`) trusting only `ca_pem`.
    ///
    /// # Errors
    /// [`Error::BadResponse`] if `ca_pem` is not a PEM certificate.
    pub fn new(base: &str, token: &str, ca_pem: &str) -> Result<Self> {
        let ca = Certificate::from_pem(ca_pem.as_bytes()).map_err(|e| Error::BadResponse {
            what: "CA certificate".into(),
            reason: e.to_string(),
        })?;
        let tls = TlsConfig::builder()
            .root_certs(RootCerts::Specific(Arc::new(vec![ca])))
            .build();
        let agent: Agent = Agent::config_builder()
            .tls_config(tls.clone())
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(30)))
            .build()
            .into();
        // Watches are long-lived; they end by the server-side timeoutSeconds.
        let watch_agent: Agent = Agent::config_builder()
            .tls_config(tls)
            .http_status_as_error(false)
            .timeout_connect(Some(Duration::from_secs(10)))
            .build()
            .into();
        Ok(Client {
            agent,
            watch_agent,
            base: base.trim_end_matches('/').to_owned(),
            token: token.to_owned(),
        })
    }

    /// The server URL this client talks to.
    #[must_use]
    pub fn base_url(&self) -> &str {
        &self.base
    }

    /// Sends one request; `body` is `(content type, bytes)`. Returns the
    /// parsed JSON body of a 2xx answer.
    ///
    /// # Errors
    /// [`Error::Api`] for a non-2xx status, [`Error::Http`] without an answer.
    pub fn request(
        &self,
        method: &str,
        path: &str,
        body: Option<(&str, Vec<u8>)>,
    ) -> Result<Value> {
        let text = self.request_text(method, path, body)?;
        if text.trim().is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_str(&text).map_err(|e| Error::BadResponse {
            what: format!("{method} {}{path}", self.base),
            reason: format!("{e}: {text}"),
        })
    }

    /// Like [`Client::request`], but returns the body as text (`/readyz`
    /// answers `ok`, not JSON).
    ///
    /// # Errors
    /// See [`Client::request`].
    pub fn request_text(
        &self,
        method: &str,
        path: &str,
        body: Option<(&str, Vec<u8>)>,
    ) -> Result<String> {
        let url = format!("{}{path}", self.base);
        let http_err = |source: ureq::Error| Error::Http {
            method: method.to_owned(),
            url: url.clone(),
            source: Box::new(source),
        };
        let mut builder = ureq::http::Request::builder()
            .method(method)
            .uri(&url)
            .header("Authorization", format!("Bearer {}", self.token))
            .header("Accept", "application/json");
        let (content_type, bytes) = body.unwrap_or(("", Vec::new()));
        if !content_type.is_empty() {
            builder = builder.header("Content-Type", content_type);
        }
        let request = builder.body(bytes).map_err(|e| http_err(e.into()))?;
        let mut response = self.agent.run(request).map_err(http_err)?;
        let status = response.status().as_u16();
        let text = response.body_mut().read_to_string().map_err(http_err)?;
        if !(200..300).contains(&status) {
            return Err(Error::Api {
                method: method.to_owned(),
                url,
                status,
                body: text,
            });
        }
        Ok(text)
    }

    /// Sends `request` as it is (its URI is a path and query, its headers and body are kept;
    /// the bearer token and, unless set, `Accept: application/json` are added) and returns
    /// the answer's status and body whatever the status: what a script of requests run
    /// against this apiserver and another server compares.
    ///
    /// # Errors
    /// [`Error::Http`] without an answer.
    pub fn send(&self, request: &ureq::http::Request<Vec<u8>>) -> Result<(u16, Vec<u8>)> {
        let url = format!("{}{}", self.base, request.uri());
        let method = request.method().as_str().to_owned();
        let http_err = |source: ureq::Error| Error::Http {
            method: method.clone(),
            url: url.clone(),
            source: Box::new(source),
        };
        let mut builder = ureq::http::Request::builder()
            .method(request.method().clone())
            .uri(&url)
            .header("Authorization", format!("Bearer {}", self.token));
        for (name, value) in request.headers() {
            builder = builder.header(name, value);
        }
        if !request.headers().contains_key("accept") {
            builder = builder.header("Accept", "application/json");
        }
        let outgoing = builder
            .body(request.body().clone())
            .map_err(|e| http_err(e.into()))?;
        let mut response = self.agent.run(outgoing).map_err(http_err)?;
        let status = response.status().as_u16();
        let bytes = response
            .body_mut()
            .with_config()
            .limit(64 << 20)
            .read_to_vec()
            .map_err(http_err)?;
        Ok((status, bytes))
    }

    /// `GET path` with `Accept: accept`: the answer's status, `Content-Type` and body as
    /// bytes, whatever the status (a protobuf body, a whole watch that the server ends with
    /// `timeoutSeconds`, an error's `Status` in protobuf).
    ///
    /// # Errors
    /// [`Error::Http`] without an answer.
    pub fn get_bytes(&self, path: &str, accept: &str) -> Result<(u16, String, Vec<u8>)> {
        let url = format!("{}{path}", self.base);
        let http_err = |source: ureq::Error| Error::Http {
            method: "GET".to_owned(),
            url: url.clone(),
            source: Box::new(source),
        };
        let request = ureq::http::Request::builder()
            .method("GET")
            .uri(&url)
            .header("Authorization", format!("Bearer {}", self.token))
            .header("Accept", accept)
            .body(Vec::new())
            .map_err(|e| http_err(e.into()))?;
        let mut response = self.agent.run(request).map_err(http_err)?;
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get("Content-Type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let bytes = response
            .body_mut()
            .with_config()
            .limit(64 << 20)
            .read_to_vec()
            .map_err(http_err)?;
        Ok((status, content_type, bytes))
    }

    /// `GET path`.
    ///
    /// # Errors
    /// See [`Client::request`].
    pub fn get(&self, path: &str) -> Result<Value> {
        self.request("GET", path, None)
    }

    /// `GET path`, with `404` mapped to `None`.
    ///
    /// # Errors
    /// See [`Client::request`].
    pub fn get_opt(&self, path: &str) -> Result<Option<Value>> {
        match self.get(path) {
            Ok(v) => Ok(Some(v)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `POST path` with a JSON object (create).
    ///
    /// # Errors
    /// See [`Client::request`].
    pub fn create(&self, path: &str, object: &Value) -> Result<Value> {
        self.request(
            "POST",
            path,
            Some(("application/json", object.to_string().into_bytes())),
        )
    }

    /// `PATCH path` with a JSON merge patch.
    ///
    /// # Errors
    /// See [`Client::request`].
    pub fn merge_patch(&self, path: &str, patch: &Value) -> Result<Value> {
        self.request(
            "PATCH",
            path,
            Some((
                "application/merge-patch+json",
                patch.to_string().into_bytes(),
            )),
        )
    }

    /// `DELETE path`, optionally with a grace period in seconds.
    ///
    /// # Errors
    /// See [`Client::request`].
    pub fn delete(&self, path: &str, grace_period_seconds: Option<u32>) -> Result<Value> {
        let body = grace_period_seconds.map(|g| {
            let options =
                json!({"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": g});
            ("application/json", options.to_string().into_bytes())
        });
        self.request("DELETE", path, body)
    }

    /// Waits until `GET /readyz` answers `ok`.
    ///
    /// # Errors
    /// [`Error::Timeout`] with the last answer.
    pub fn wait_ready(&self, timeout: Duration) -> Result<()> {
        wait_for(timeout, &format!("{}/readyz", self.base), || {
            match self.request_text("GET", "/readyz", None) {
                Ok(_) => Ok(()),
                Err(e) => Err(e.to_string()),
            }
        })
    }

    /// Creates a namespace.
    ///
    /// # Errors
    /// See [`Client::request`].
    pub fn create_namespace(&self, name: &str) -> Result<Value> {
        self.create(
            "/api/v1/namespaces",
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
        )
    }

    /// Gets a namespace, `None` if it does not exist (any more).
    ///
    /// # Errors
    /// See [`Client::request`].
    pub fn get_namespace(&self, name: &str) -> Result<Option<Value>> {
        self.get_opt(&format!("/api/v1/namespaces/{name}"))
    }

    /// Starts deleting a namespace (the namespace controller finishes it).
    ///
    /// # Errors
    /// See [`Client::request`].
    pub fn delete_namespace(&self, name: &str) -> Result<Value> {
        self.delete(&format!("/api/v1/namespaces/{name}"), None)
    }

    /// Creates a pod in `namespace`; see [`pod_manifest`].
    ///
    /// # Errors
    /// See [`Client::request`].
    pub fn create_pod(&self, namespace: &str, pod: &Value) -> Result<Value> {
        self.create(&format!("/api/v1/namespaces/{namespace}/pods"), pod)
    }

    /// Gets a pod, `None` if it does not exist.
    ///
    /// # Errors
    /// See [`Client::request`].
    pub fn get_pod(&self, namespace: &str, name: &str) -> Result<Option<Value>> {
        self.get_opt(&format!("/api/v1/namespaces/{namespace}/pods/{name}"))
    }

    /// Merge-patches a pod (metadata/spec).
    ///
    /// # Errors
    /// See [`Client::request`].
    pub fn patch_pod(&self, namespace: &str, name: &str, patch: &Value) -> Result<Value> {
        self.merge_patch(
            &format!("/api/v1/namespaces/{namespace}/pods/{name}"),
            patch,
        )
    }

    /// Merge-patches a pod's status subresource.
    ///
    /// # Errors
    /// See [`Client::request`].
    pub fn patch_pod_status(&self, namespace: &str, name: &str, patch: &Value) -> Result<Value> {
        self.merge_patch(
            &format!("/api/v1/namespaces/{namespace}/pods/{name}/status"),
            patch,
        )
    }

    /// Deletes a pod; `grace_period_seconds: Some(0)` removes it at once.
    ///
    /// # Errors
    /// See [`Client::request`].
    pub fn delete_pod(
        &self,
        namespace: &str,
        name: &str,
        grace_period_seconds: Option<u32>,
    ) -> Result<Value> {
        self.delete(
            &format!("/api/v1/namespaces/{namespace}/pods/{name}"),
            grace_period_seconds,
        )
    }

    /// Lists pods (a `PodList`), optionally scoped by a label selector.
    ///
    /// # Errors
    /// See [`Client::request`].
    pub fn list_pods(&self, namespace: &str, label_selector: Option<&str>) -> Result<Value> {
        let mut path = format!("/api/v1/namespaces/{namespace}/pods");
        if let Some(selector) = label_selector {
            path.push_str(&format!("?labelSelector={}", encode_query(selector)));
        }
        self.get(&path)
    }

    /// Opens a watch on pods in `namespace`.
    ///
    /// # Errors
    /// [`Error::Api`] when the server refuses it up front (e.g. `410 Gone` for
    /// an expired resourceVersion on some servers); an expired version can
    /// also arrive later as an `ERROR` event with code 410.
    pub fn watch_pods(&self, namespace: &str, params: &WatchParams) -> Result<Watch> {
        self.watch(&format!("/api/v1/namespaces/{namespace}/pods"), params)
    }

    /// Opens a watch on any collection path, e.g. `/api/v1/namespaces`.
    ///
    /// # Errors
    /// See [`Client::watch_pods`].
    pub fn watch(&self, collection: &str, params: &WatchParams) -> Result<Watch> {
        let mut query = format!(
            "watch=1&timeoutSeconds={}",
            params.timeout_seconds.unwrap_or(60)
        );
        if let Some(rv) = &params.resource_version {
            query.push_str(&format!("&resourceVersion={}", encode_query(rv)));
        }
        if let Some(selector) = &params.label_selector {
            query.push_str(&format!("&labelSelector={}", encode_query(selector)));
        }
        if params.allow_bookmarks {
            query.push_str("&allowWatchBookmarks=true");
        }
        if params.send_initial_events {
            query.push_str("&sendInitialEvents=true&resourceVersionMatch=NotOlderThan");
        }
        self.watch_path(&format!("{collection}?{query}"))
    }

    /// Opens a watch on a path with its query as given (`watch=1` and every other
    /// parameter included by the caller), e.g. `/api/v1/configmaps?watch=1&fieldSelector=…`.
    ///
    /// # Errors
    /// See [`Client::watch_pods`].
    pub fn watch_path(&self, path_and_query: &str) -> Result<Watch> {
        self.watch_path_accepting(path_and_query, "application/json")
    }

    /// [`Client::watch_path`] with this `Accept` (a JSON one: the events are read as
    /// lines), e.g. `application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1`.
    ///
    /// # Errors
    /// See [`Client::watch_pods`].
    pub fn watch_path_accepting(&self, path_and_query: &str, accept: &str) -> Result<Watch> {
        let url = format!("{}{path_and_query}", self.base);
        let http_err = |source: ureq::Error| Error::Http {
            method: "WATCH".into(),
            url: url.clone(),
            source: Box::new(source),
        };
        let response = self
            .watch_agent
            .get(&url)
            .header("Authorization", &format!("Bearer {}", self.token))
            .header("Accept", accept)
            .call()
            .map_err(http_err)?;
        let status = response.status().as_u16();
        if status != 200 {
            let body = response.into_body().read_to_string().unwrap_or_default();
            return Err(Error::Api {
                method: "WATCH".into(),
                url,
                status,
                body,
            });
        }
        let reader = BufReader::new(response.into_body().into_reader());
        let (tx, rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("k8s-env-watch".into())
            .spawn(move || read_events(reader, &tx))
            .map_err(Error::io("spawning a watch reader thread"))?;
        Ok(Watch { rx })
    }
}

/// Forwards newline-delimited watch events until EOF, an error, or the
/// receiver is dropped.
fn read_events(mut reader: impl BufRead, tx: &mpsc::Sender<Result<WatchEvent>>) {
    let mut line = String::new();
    loop {
        line.clear();
        let item = match reader.read_line(&mut line) {
            Ok(0) => return,
            Ok(_) if line.trim().is_empty() => continue,
            Ok(_) => parse_event(&line),
            Err(e) => Err(Error::Io {
                what: "reading a watch stream".into(),
                source: e,
            }),
        };
        let stop = item.is_err();
        if tx.send(item).is_err() || stop {
            return;
        }
    }
}

fn parse_event(line: &str) -> Result<WatchEvent> {
    let bad = |reason: String| Error::BadResponse {
        what: "watch event".into(),
        reason,
    };
    let mut value: Value = serde_json::from_str(line).map_err(|e| bad(format!("{e}: {line}")))?;
    let kind = value["type"]
        .as_str()
        .ok_or_else(|| bad(format!("no type: {line}")))?
        .to_owned();
    let object = value
        .get_mut("object")
        .map(Value::take)
        .unwrap_or(Value::Null);
    Ok(WatchEvent { kind, object })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_selectors() {
        assert_eq!(encode_query("app=web,tier!=db"), "app%3Dweb%2Ctier%21%3Ddb");
        assert_eq!(encode_query("a-b.c_d~"), "a-b.c_d~");
    }

    #[test]
    fn parses_watch_events() {
        let event =
            parse_event(r#"{"type":"ERROR","object":{"kind":"Status","code":410}}"#).unwrap();
        assert_eq!(event.kind, "ERROR");
        assert_eq!(event.error_code(), Some(410));
        assert!(parse_event("{}").is_err());
        assert!(parse_event("not json").is_err());
    }
}
