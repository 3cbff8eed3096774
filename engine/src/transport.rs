//! What the engine needs from an HTTP stack: send one request, stream the response body.
//!
//! Requests are built here with kube-core's [`Request`](kube_core::Request) helpers, so every
//! driver sends byte-identical LIST and WATCH URLs; a driver only moves bytes.

use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use futures_core::Stream;
use futures_lite::StreamExt;
use reconcile_core::{WatchParams, WireFormat};

use super::runtime::{BoxFuture, Runtime, timeout};

/// A response body as a stream of chunks.
pub type BodyStream = Pin<Box<dyn Stream<Item = Result<Bytes, TransportError>> + Send + 'static>>;

/// A request that got no usable answer: refused, reset, timed out, or a body cut short.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TransportError(pub String);

impl TransportError {
    /// An error with this message.
    pub fn new(message: impl Into<String>) -> Self {
        TransportError(message.into())
    }

    /// An error worded from `error` and its sources, `outer: inner: innermost`, so a log line
    /// says where the HTTP stack broke. A source already quoted by its parent is not repeated.
    pub fn chain(error: &(dyn std::error::Error + 'static)) -> Self {
        let mut text = error.to_string();
        let mut source = error.source();
        while let Some(e) = source {
            let s = e.to_string();
            if !text.contains(&s) {
                text.push_str(": ");
                text.push_str(&s);
            }
            source = e.source();
        }
        TransportError(text)
    }
}

/// A connection setting that weakens its security, found when a driver builds its
/// transport; each is logged once with `tracing::warn!` ([`warn_insecure`]), and the drivers'
/// transports list them for a caller that wants to surface them elsewhere.
///
/// Neither client-go nor kube says anything about credentials over `http://`; kube logs
/// "Server cert bypassed" at each TLS handshake when verification is off, client-go nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InsecureSetting {
    /// `insecure-skip-tls-verify`: the apiserver's certificate is not checked, so anyone on
    /// the path can pose as it (and receive the credentials).
    #[error(
        "insecure-skip-tls-verify is set for {cluster}: the apiserver's certificate is not \
         verified"
    )]
    SkipTlsVerify {
        /// The cluster URL.
        cluster: String,
    },
    /// The cluster URL is `http://` and the user has credentials, which then travel
    /// unencrypted.
    #[error("{credential} sent unencrypted to {cluster} (http://)")]
    CredentialsOverHttp {
        /// The cluster URL.
        cluster: String,
        /// What kind of credential (`a bearer token`, `basic auth`, …), never its value.
        credential: &'static str,
    },
}

/// What is insecure about connecting to `cluster` with these settings: `skip_tls_verify`
/// (only meaningful for `https://`), and `credential`, the kind of credential the user
/// sends, if any.
#[must_use]
pub fn insecure_settings(
    cluster: &http::Uri,
    skip_tls_verify: bool,
    credential: Option<&'static str>,
) -> Vec<InsecureSetting> {
    let mut found = Vec::new();
    match cluster.scheme_str() {
        Some("https") if skip_tls_verify => found.push(InsecureSetting::SkipTlsVerify {
            cluster: cluster.to_string(),
        }),
        Some("http") => {
            if let Some(credential) = credential {
                found.push(InsecureSetting::CredentialsOverHttp {
                    cluster: cluster.to_string(),
                    credential,
                });
            }
        }
        _ => {}
    }
    found
}

/// Logs each setting with `tracing::warn!`.
pub fn warn_insecure(settings: &[InsecureSetting]) {
    for setting in settings {
        tracing::warn!(%setting, "insecure connection setting");
    }
}

/// An HTTP stack bound to one cluster (base URL, TLS, auth already applied).
pub trait Transport: Clone + Send + Sync + 'static {
    /// Sends `request` (a path-and-query URI relative to the cluster) and returns the
    /// response head with its body still streaming.
    fn send(
        &self,
        request: http::Request<Vec<u8>>,
    ) -> BoxFuture<Result<http::Response<BodyStream>, TransportError>>;
}

/// Builds the LIST and WATCH requests for one resource collection.
#[derive(Debug, Clone)]
pub struct Requests {
    request: kube_core::Request,
    /// Ask for `PartialObjectMetadata` (kube's metadata API): the apiserver then sends only
    /// each object's metadata.
    pub(crate) metadata_only: bool,
    /// The object type's kind, when a type names it (`Source::all` and friends): what a
    /// recorder is told of the source ([`SourceResource`](crate::recorder::SourceResource)).
    pub(crate) kind: Option<String>,
}

impl Requests {
    /// The collection's resource name: the URL path's last segment (`pods`).
    pub(crate) fn collection_name(&self) -> Option<&str> {
        self.request
            .url_path
            .rsplit('/')
            .next()
            .filter(|s| !s.is_empty())
    }

    /// Requests under `url_path`, for example `/api/v1/namespaces/default/pods`.
    #[must_use]
    pub fn new(url_path: impl Into<String>) -> Self {
        Requests {
            request: kube_core::Request::new(url_path),
            metadata_only: false,
            kind: None,
        }
    }

    /// The same requests, asking for metadata only (`PartialObjectMetadata`).
    #[must_use]
    pub fn metadata_only(mut self) -> Self {
        self.metadata_only = true;
        self
    }

    /// The collection's URL path.
    #[must_use]
    pub fn url_path(&self) -> &str {
        &self.request.url_path
    }

    /// A LIST with no `resourceVersion`: a consistent read of the current state.
    ///
    /// # Errors
    /// kube-core refused the parameters.
    pub fn list(
        &self,
        params: &WatchParams,
    ) -> Result<http::Request<Vec<u8>>, kube_core::request::Error> {
        self.list_page(params, None, None)
    }

    /// One page of a LIST with no `resourceVersion`: `limit` objects at most (all when
    /// `None`), from the page `continue_token` names (the first when `None`), as the core's
    /// `Command::List` asks.
    ///
    /// # Errors
    /// kube-core refused the parameters.
    pub fn list_page(
        &self,
        params: &WatchParams,
        limit: Option<u32>,
        continue_token: Option<&str>,
    ) -> Result<http::Request<Vec<u8>>, kube_core::request::Error> {
        let mut lp = kube_core::params::ListParams::default();
        lp.label_selector.clone_from(&params.label_selector);
        lp.field_selector.clone_from(&params.field_selector);
        lp.limit = limit;
        lp.continue_token = continue_token.map(str::to_owned);
        let request = if self.metadata_only {
            self.request.list_metadata(&lp)
        } else {
            self.request.list(&lp)
        };
        request.map(|r| {
            accept(
                r,
                params,
                self.metadata_only.then_some(ACCEPT_PROTOBUF_METADATA_LIST),
            )
        })
    }

    /// A WATCH from `resource_version` with `timeoutSeconds` and bookmarks as the core asked.
    ///
    /// # Errors
    /// kube-core refused the parameters.
    pub fn watch(
        &self,
        params: &WatchParams,
        resource_version: &str,
        timeout_seconds: u32,
        bookmarks: bool,
    ) -> Result<http::Request<Vec<u8>>, kube_core::request::Error> {
        self.watch_with(params, resource_version, timeout_seconds, bookmarks, false)
    }

    /// A WATCH as the core's `Command::Watch` asks: with `send_initial_events`, a streaming
    /// list (`sendInitialEvents=true&resourceVersionMatch=NotOlderThan`, bookmarks required),
    /// from `resource_version` (`""`: the current state, read consistently).
    ///
    /// # Errors
    /// kube-core refused the parameters (initial events without bookmarks).
    pub fn watch_with(
        &self,
        params: &WatchParams,
        resource_version: &str,
        timeout_seconds: u32,
        bookmarks: bool,
        send_initial_events: bool,
    ) -> Result<http::Request<Vec<u8>>, kube_core::request::Error> {
        let mut wp = kube_core::params::WatchParams::default().timeout(timeout_seconds);
        wp.label_selector.clone_from(&params.label_selector);
        wp.field_selector.clone_from(&params.field_selector);
        wp.bookmarks = bookmarks;
        wp.send_initial_events = send_initial_events;
        let request = if self.metadata_only {
            self.request.watch_metadata(&wp, resource_version)
        } else {
            self.request.watch(&wp, resource_version)
        };
        request.map(|r| {
            accept(
                r,
                params,
                self.metadata_only.then_some(ACCEPT_PROTOBUF_METADATA),
            )
        })
    }
}

/// What a source that asks for protobuf accepts: protobuf, else JSON (client-go's
/// `AcceptContentTypes` for a protobuf `ContentType`), so a resource served only as JSON
/// (a custom resource) still answers. The apiserver answers a WATCH with the streaming
/// variant (`;stream=watch`, length-prefixed frames).
pub const ACCEPT_PROTOBUF: &str = "application/vnd.kubernetes.protobuf, application/json";

/// What a metadata-only LIST that asks for protobuf accepts: `PartialObjectMetadataList` in
/// protobuf, else in JSON, else plain JSON (client-go's metadata client, word for word). The
/// apiserver writes metadata in protobuf for every resource, custom resources' too.
pub const ACCEPT_PROTOBUF_METADATA_LIST: &str = "application/vnd.kubernetes.protobuf;\
     as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,\
     application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";

/// What a metadata-only WATCH that asks for protobuf accepts (as
/// [`ACCEPT_PROTOBUF_METADATA_LIST`], for one object).
pub const ACCEPT_PROTOBUF_METADATA: &str = "application/vnd.kubernetes.protobuf;\
     as=PartialObjectMetadata;g=meta.k8s.io;v=v1,\
     application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";

/// Sets `Accept` for `params.wire_format`: on a protobuf source, [`ACCEPT_PROTOBUF`], or
/// `metadata` when the request asks for metadata only (on JSON, kube-core's own `Accept`
/// already names `PartialObjectMetadata`).
fn accept(
    mut request: http::Request<Vec<u8>>,
    params: &WatchParams,
    metadata: Option<&'static str>,
) -> http::Request<Vec<u8>> {
    if params.wire_format == WireFormat::Protobuf {
        request.headers_mut().insert(
            http::header::ACCEPT,
            http::HeaderValue::from_static(metadata.unwrap_or(ACCEPT_PROTOBUF)),
        );
    }
    if let Some(selector) = &params.shard_selector {
        with_shard_selector(&mut request, selector);
    }
    request
}

/// Appends `shardSelector` (KEP-5866), which kube-core's parameters do not know yet.
fn with_shard_selector(request: &mut http::Request<Vec<u8>>, selector: &str) {
    let uri = request.uri().to_string();
    let encoded: String = form_urlencoded::byte_serialize(selector.as_bytes()).collect();
    let joiner = if uri.contains('?') { '&' } else { '?' };
    match format!("{uri}{joiner}shardSelector={encoded}").parse::<http::Uri>() {
        Ok(with) => *request.uri_mut() = with,
        // A form-encoded value is always a valid query, so this is never reached.
        Err(e) => tracing::error!(%e, "shardSelector does not fit the URI"),
    }
}

/// Reads a whole body, each chunk within `idle`, at most `limit` bytes.
///
/// # Errors
/// A transport failure, a stall longer than `idle`, or a body over `limit`.
pub async fn read_body<R: Runtime>(
    runtime: &R,
    body: &mut BodyStream,
    idle: Duration,
    limit: usize,
) -> Result<Vec<u8>, TransportError> {
    // The chunks are kept as they arrive and copied once, into a Vec of the exact size: a Vec
    // grown chunk by chunk copies a 400 MB LIST about twice over and faults in pages for
    // every doubling, which showed as 0.1–0.3 s of time to sync at 10k–50k pods.
    let mut chunks: Vec<Bytes> = Vec::new();
    let size = for_each_chunk(runtime, body, idle, limit, |chunk| chunks.push(chunk)).await?;
    let mut buf = Vec::with_capacity(size);
    for chunk in chunks {
        buf.extend_from_slice(&chunk);
    }
    Ok(buf)
}

/// Reads the first `limit` bytes of a body, each chunk within `idle`; the rest is neither
/// read nor kept. For bodies that are only context, such as a failed request's `Status`.
///
/// # Errors
/// A transport failure or a stall longer than `idle` before `limit` bytes or the end.
pub async fn read_prefix<R: Runtime>(
    runtime: &R,
    body: &mut BodyStream,
    idle: Duration,
    limit: usize,
) -> Result<Vec<u8>, TransportError> {
    let mut buf = Vec::new();
    while buf.len() < limit {
        match timeout(runtime, idle, body.next()).await {
            None => {
                return Err(TransportError::new(format!(
                    "no data for {}s while reading a response body",
                    idle.as_secs()
                )));
            }
            Some(None) => break,
            Some(Some(Err(e))) => return Err(e),
            Some(Some(Ok(chunk))) => {
                let take = chunk.len().min(limit - buf.len());
                buf.extend_from_slice(&chunk[..take]);
            }
        }
    }
    Ok(buf)
}

/// Hands every chunk of a body to `each` as it arrives, each within `idle`, at most `limit`
/// bytes in all; returns the body's size.
///
/// # Errors
/// A transport failure, a stall longer than `idle`, or a body over `limit`.
pub async fn for_each_chunk<R: Runtime>(
    runtime: &R,
    body: &mut BodyStream,
    idle: Duration,
    limit: usize,
    mut each: impl FnMut(Bytes),
) -> Result<usize, TransportError> {
    let mut size = 0usize;
    loop {
        match timeout(runtime, idle, body.next()).await {
            None => {
                return Err(TransportError::new(format!(
                    "no data for {}s while reading a response body",
                    idle.as_secs()
                )));
            }
            Some(None) => return Ok(size),
            Some(Some(Err(e))) => return Err(e),
            Some(Some(Ok(chunk))) => {
                size = size.saturating_add(chunk.len());
                if size > limit {
                    return Err(TransportError::new(format!(
                        "response body exceeds {limit} bytes"
                    )));
                }
                each(chunk);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streaming_list_url_asks_for_initial_events_from_no_version() {
        let params = WatchParams::namespaced("ns1").labels("app=cell");
        let req = Requests::new("/api/v1/namespaces/ns1/pods")
            .watch_with(&params, "", 290, true, true)
            .unwrap();
        let uri = req.uri().to_string();
        for part in [
            "watch=true",
            "timeoutSeconds=290",
            "labelSelector=app%3Dcell",
            "allowWatchBookmarks=true",
            "sendInitialEvents=true",
            "resourceVersionMatch=NotOlderThan",
        ] {
            assert!(uri.contains(part), "{uri} lacks {part}");
        }
        assert!(uri.ends_with("&resourceVersion="), "{uri}");
        let plain = Requests::new("/api/v1/namespaces/ns1/pods")
            .watch(&params, "42", 290, true)
            .unwrap()
            .uri()
            .to_string();
        assert!(!plain.contains("sendInitialEvents"), "{plain}");
        assert!(!plain.contains("resourceVersionMatch"), "{plain}");
        assert!(
            Requests::new("/api/v1/pods")
                .watch_with(&params, "", 290, false, true)
                .is_err(),
            "initial events need bookmarks"
        );
    }

    #[test]
    fn watch_url_carries_selector_timeout_bookmarks_and_version() {
        let params = WatchParams::namespaced("ns1").labels("app=cell");
        let req = Requests::new("/api/v1/namespaces/ns1/pods")
            .watch(&params, "42", 7, true)
            .unwrap();
        let uri = req.uri().to_string();
        for part in [
            "/api/v1/namespaces/ns1/pods?",
            "watch=true",
            "timeoutSeconds=7",
            "labelSelector=app%3Dcell",
            "allowWatchBookmarks=true",
            "resourceVersion=42",
        ] {
            assert!(uri.contains(part), "{uri} lacks {part}");
        }
    }

    #[test]
    fn metadata_only_requests_accept_partial_object_metadata() {
        let params = WatchParams::default();
        let requests = Requests::new("/apis/apps/v1/deployments").metadata_only();
        let list = requests.list(&params).unwrap();
        let watch = requests.watch(&params, "5", 60, true).unwrap();
        let accept = |r: &http::Request<Vec<u8>>| {
            r.headers()[http::header::ACCEPT]
                .to_str()
                .unwrap()
                .to_owned()
        };
        assert!(
            accept(&list).contains("as=PartialObjectMetadataList"),
            "{}",
            accept(&list)
        );
        assert!(
            accept(&watch).contains("as=PartialObjectMetadata;"),
            "{}",
            accept(&watch)
        );
        let full = Requests::new("/apis/apps/v1/deployments")
            .list(&params)
            .unwrap();
        assert!(full.headers().get(http::header::ACCEPT).is_none());
    }

    #[test]
    fn protobuf_sources_accept_protobuf_then_json() {
        let params = WatchParams::default().protobuf();
        let requests = Requests::new("/api/v1/pods");
        for r in [
            requests.list(&params).unwrap(),
            requests.watch(&params, "5", 60, true).unwrap(),
        ] {
            assert_eq!(r.headers()[http::header::ACCEPT], ACCEPT_PROTOBUF);
        }
        let json = requests.list(&WatchParams::default()).unwrap();
        assert!(json.headers().get(http::header::ACCEPT).is_none());
    }

    #[test]
    fn metadata_only_protobuf_sources_accept_what_client_go_does() {
        let params = WatchParams::default().protobuf();
        let requests = Requests::new("/apis/example.com/v1/widgets").metadata_only();
        // client-go's metadata client (k8s.io/client-go/metadata), header for header.
        let list = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;\
                    g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;\
                    g=meta.k8s.io;v=v1,application/json";
        let watch = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;\
                     g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadata;\
                     g=meta.k8s.io;v=v1,application/json";
        assert_eq!(
            requests.list(&params).unwrap().headers()[http::header::ACCEPT],
            list
        );
        assert_eq!(
            requests
                .list_page(&params, Some(500), Some("c"))
                .unwrap()
                .headers()[http::header::ACCEPT],
            list
        );
        assert_eq!(
            requests.watch(&params, "5", 60, true).unwrap().headers()[http::header::ACCEPT],
            watch
        );
        assert_eq!(
            requests
                .watch_with(&params, "", 60, true, true)
                .unwrap()
                .headers()[http::header::ACCEPT],
            watch
        );
    }

    #[test]
    fn insecure_settings_are_named_without_the_credential() {
        let https: http::Uri = "https://k:6443".parse().unwrap();
        let http: http::Uri = "http://k:8080".parse().unwrap();
        assert!(insecure_settings(&https, false, Some("a bearer token")).is_empty());
        assert_eq!(
            insecure_settings(&https, true, None),
            [InsecureSetting::SkipTlsVerify {
                cluster: "https://k:6443/".into()
            }]
        );
        assert!(insecure_settings(&http, false, None).is_empty());
        let found = insecure_settings(&http, true, Some("a bearer token"));
        assert_eq!(
            found[0].to_string(),
            "a bearer token sent unencrypted to http://k:8080/ (http://)"
        );
    }

    #[test]
    fn list_url_has_no_resource_version() {
        let params = WatchParams::namespaced("ns1").labels("app=cell");
        let req = Requests::new("/api/v1/namespaces/ns1/pods")
            .list(&params)
            .unwrap();
        let uri = req.uri().to_string();
        assert!(uri.contains("labelSelector=app%3Dcell"), "{uri}");
        assert!(!uri.contains("resourceVersion"), "{uri}");
        assert!(!uri.contains("limit"), "{uri}");
    }

    #[test]
    fn a_shard_selector_reaches_list_and_watch_urls_encoded() {
        let params = WatchParams {
            shard_selector: Some(
                "shardRange(object.metadata.namespace, '0x0000000000000000', '0x8000000000000000')"
                    .into(),
            ),
            ..WatchParams::default()
        };
        let requests = Requests::new("/api/v1/pods");
        let expected = "shardSelector=shardRange%28object.metadata.namespace%2C+%270x0000000000000000%27%2C+%270x8000000000000000%27%29";
        let list = requests.list(&params).unwrap().uri().to_string();
        assert!(list.contains(expected), "{list}");
        let watch = requests
            .watch_with(&params, "5", 60, true, false)
            .unwrap()
            .uri()
            .to_string();
        assert!(watch.contains(expected), "{watch}");
        assert!(watch.contains("resourceVersion=5"), "{watch}");
        let plain = requests.list(&WatchParams::default()).unwrap();
        assert!(!plain.uri().to_string().contains("shardSelector"));
    }

    #[test]
    fn list_page_url_carries_limit_and_continue() {
        let params = WatchParams::namespaced("ns1").labels("app=cell");
        let requests = Requests::new("/api/v1/namespaces/ns1/pods");
        let first = requests.list_page(&params, Some(10), None).unwrap();
        let uri = first.uri().to_string();
        assert!(uri.contains("limit=10"), "{uri}");
        assert!(!uri.contains("continue"), "{uri}");
        let next = requests
            .list_page(&params, Some(10), Some("eyJ2IjoibWV0YSJ9"))
            .unwrap();
        let uri = next.uri().to_string();
        assert!(uri.contains("limit=10"), "{uri}");
        assert!(uri.contains("continue=eyJ2IjoibWV0YSJ9"), "{uri}");
        assert!(!uri.contains("resourceVersion"), "{uri}");
    }
}
