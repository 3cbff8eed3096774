//! [`KubeTransport`]: the engine's [`Transport`] over a `kube::Client` (kubeconfig or
//! in-cluster config, TLS and auth from kube).
//!
//! # Exec auth
//! kube runs an exec user's plugin with no time limit, three times while it builds a
//! client (TLS config, auth layer, the client's expiry) and again on tokio's blocking pool
//! for each refresh, holding its token lock meanwhile. So a transport built here from a
//! config never lets kube see the plugin: the engine's `exec` module runs it (an
//! `async-process` child, killed after [`KubeTransportOptions::exec_timeout`]), once per
//! credential, caching it until 60 s before its `expirationTimestamp`. The token goes into
//! each request's `Authorization`; a client certificate into a kube client built for it
//! (once per credential) from the config without `exec`.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_lite::StreamExt;
use http_body_util::BodyExt;
use reconcile_engine::exec::{DEFAULT_EXEC_TIMEOUT, ExecAuth, config_without_exec};
use reconcile_engine::transport::{InsecureSetting, insecure_settings, warn_insecure};
use reconcile_engine::{BodyStream, BoxFuture, Transport, TransportError};

/// Settings of a [`KubeTransport`] built from a config.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct KubeTransportOptions {
    /// Longest an exec credential plugin may run before it is killed and the request fails
    /// (60 s by default, as reconcile-smol's; kube and client-go wait for ever).
    pub exec_timeout: Duration,
}

impl Default for KubeTransportOptions {
    fn default() -> Self {
        KubeTransportOptions {
            exec_timeout: DEFAULT_EXEC_TIMEOUT,
        }
    }
}

impl KubeTransportOptions {
    /// The same options with this exec plugin timeout.
    #[must_use]
    pub fn exec_timeout(mut self, limit: Duration) -> Self {
        self.exec_timeout = limit;
        self
    }
}

/// Sends the engine's requests through a `kube::Client`.
#[derive(Clone)]
pub struct KubeTransport {
    /// The client without an exec plugin's client certificate.
    client: kube::Client,
    /// For an exec user: the plugin, run here rather than by kube.
    exec: Option<Arc<ExecClients>>,
    /// What is insecure about the connection, when this transport built the client.
    insecure: Arc<[InsecureSetting]>,
}

/// An exec user's plugin, and the client of its latest client certificate.
struct ExecClients {
    auth: ExecAuth,
    /// The config without `exec`, for a client with a plugin's certificate.
    config: kube::Config,
    /// The client of the credential of this generation.
    current: Mutex<Option<(u64, kube::Client)>>,
}

impl std::fmt::Debug for KubeTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeTransport")
            .field("default_namespace", &self.client.default_namespace())
            .finish()
    }
}

impl KubeTransport {
    /// Wraps a client (built elsewhere: its settings are not checked here).
    #[must_use]
    pub fn new(client: kube::Client) -> Self {
        KubeTransport {
            client,
            exec: None,
            insecure: Arc::new([]),
        }
    }

    /// A client from `kube::Config::infer` (kubeconfig, then in-cluster).
    ///
    /// # Errors
    /// No usable configuration, or the client could not be built.
    pub async fn infer() -> Result<Self, TransportError> {
        let config = kube::Config::infer().await.map_err(|e| {
            TransportError::new(format!(
                "cannot infer a kube config: {}",
                TransportError::chain(&e)
            ))
        })?;
        Self::from_config(config)
    }

    /// A client for `config`. `insecure-skip-tls-verify`, and credentials over `http://`,
    /// are logged once with `tracing::warn!` and listed by [`KubeTransport::insecure`] (kube
    /// itself logs "Server cert bypassed" at each TLS handshake, and nothing about
    /// `http://`).
    ///
    /// An exec user's plugin runs only when the first request is sent, under the
    /// default [`KubeTransportOptions::exec_timeout`] (see the module docs).
    ///
    /// # Errors
    /// kube could not build the client.
    pub fn from_config(config: kube::Config) -> Result<Self, TransportError> {
        Self::with_options(config, KubeTransportOptions::default())
    }

    /// A client for `config`, as [`KubeTransport::from_config`], with these options.
    ///
    /// # Errors
    /// kube could not build the client.
    pub fn with_options(
        config: kube::Config,
        options: KubeTransportOptions,
    ) -> Result<Self, TransportError> {
        let insecure = insecure_settings(
            &config.cluster_url,
            config.accept_invalid_certs,
            credential_kind(&config.auth_info),
        );
        warn_insecure(&insecure);
        // kube would run the plugin (unbounded) for the TLS config, the auth layer and
        // the client's expiry: it gets the config without it.
        let plain = config_without_exec(&config, None);
        let client = build_client(plain.clone())?;
        let exec = config.auth_info.exec.clone().map(|exec| {
            Arc::new(ExecClients {
                auth: ExecAuth::new(exec, options.exec_timeout),
                config: plain,
                current: Mutex::new(None),
            })
        });
        Ok(KubeTransport {
            client,
            exec,
            insecure: insecure.into(),
        })
    }

    /// The client.
    #[must_use]
    pub fn client(&self) -> &kube::Client {
        &self.client
    }

    /// What is insecure about the connection, for a transport built by
    /// [`KubeTransport::from_config`] or [`KubeTransport::infer`] (empty for one wrapping a
    /// client built elsewhere).
    #[must_use]
    pub fn insecure(&self) -> &[InsecureSetting] {
        &self.insecure
    }
}

fn build_client(config: kube::Config) -> Result<kube::Client, TransportError> {
    kube::Client::try_from(config).map_err(|e| {
        TransportError::new(format!(
            "cannot build a kube client: {}",
            TransportError::chain(&e)
        ))
    })
}

impl ExecClients {
    /// Runs (or reuses) the plugin's credential: adds its token to `request`, and answers
    /// the client to send it with (one with the plugin's certificate, built once per
    /// credential, when it gave one).
    async fn prepare(
        &self,
        plain: &kube::Client,
        request: &mut http::Request<Vec<u8>>,
    ) -> Result<kube::Client, TransportError> {
        let what = || format!("{} {}", request.method(), request.uri());
        let credential = self
            .auth
            .credential()
            .await
            .map_err(|e| TransportError::new(format!("{}: {e}", what())))?;
        if let Some(value) = credential.authorization() {
            request
                .headers_mut()
                .insert(http::header::AUTHORIZATION, value.clone());
        }
        let Some(identity) = credential.identity() else {
            return Ok(plain.clone());
        };
        let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((generation, client)) = &*current
            && *generation == credential.generation()
        {
            return Ok(client.clone());
        }
        let client = build_client(config_without_exec(&self.config, Some(identity)))?;
        *current = Some((credential.generation(), client.clone()));
        Ok(client)
    }
}

/// The kind of credential `auth` sends with every request, if any (never its value).
fn credential_kind(auth: &kube::config::AuthInfo) -> Option<&'static str> {
    if auth.token.is_some() || auth.token_file.is_some() {
        Some("a bearer token")
    } else if auth.exec.is_some() {
        Some("an exec plugin's token")
    } else if auth.auth_provider.is_some() {
        Some("an auth provider's token")
    } else if auth.username.is_some() || auth.password.is_some() {
        Some("basic auth")
    } else {
        None
    }
}

impl From<kube::Client> for KubeTransport {
    fn from(client: kube::Client) -> Self {
        KubeTransport::new(client)
    }
}

impl Transport for KubeTransport {
    fn send(
        &self,
        request: http::Request<Vec<u8>>,
    ) -> BoxFuture<Result<http::Response<BodyStream>, TransportError>> {
        let client = self.client.clone();
        let exec = self.exec.clone();
        Box::pin(async move {
            let mut request = request;
            let client = match exec {
                Some(exec) => exec.prepare(&client, &mut request).await?,
                None => client,
            };
            let response = client
                .send(request.map(kube::client::Body::from))
                .await
                .map_err(|e| TransportError::chain(&e))?;
            Ok(response.map(|body| {
                let stream: BodyStream = Box::pin(
                    body.into_data_stream()
                        .map(|chunk| chunk.map_err(|e| TransportError::chain(&e))),
                );
                stream
            }))
        })
    }
}

/// kube's `Api<K>` names a client, a collection and a namespace: the source of a controller
/// ported from kube-runtime, as `Source::from_api(Api::<Deployment>::namespaced(client, ns))`.
/// An `Api<PartialObjectMeta<K>>` asks for metadata only.
impl<K> reconcile_engine::IntoSource<KubeTransport> for kube::Api<K>
where
    K: kube::Resource,
{
    type Object = K;

    fn into_source(self) -> reconcile_engine::Source<K, KubeTransport> {
        let params = match self.namespace() {
            Some(ns) => reconcile_core::WatchParams::namespaced(ns),
            None => reconcile_core::WatchParams::default(),
        };
        let url = self.resource_url().to_owned();
        let source = reconcile_engine::Source::kubernetes(self.into_client(), url, params);
        if K::metadata_api() {
            source.metadata_only()
        } else {
            source
        }
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::sync::{Arc, Mutex};

    use bytes::Bytes;
    use futures_lite::StreamExt;
    use http_body::Frame;
    use http_body_util::StreamBody;

    use super::*;

    /// A chunk of a scripted body, or the error it breaks with.
    type Chunk = Result<&'static str, &'static str>;

    /// What the service saw of each request.
    type Seen = Arc<Mutex<Vec<(http::Method, http::Uri)>>>;

    /// A client whose service answers every request with `status` and `chunks`, and keeps
    /// each request's method and URI.
    fn client(status: u16, chunks: Vec<Chunk>) -> (kube::Client, Seen) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
            log.lock()
                .unwrap()
                .push((request.method().clone(), request.uri().clone()));
            let frames = chunks.clone().into_iter().map(|chunk| {
                chunk
                    .map(|text| Frame::data(Bytes::from_static(text.as_bytes())))
                    .map_err(std::io::Error::other)
            });
            let body = StreamBody::new(futures_lite::stream::iter(frames));
            async move {
                Ok::<_, Infallible>(
                    http::Response::builder()
                        .status(status)
                        .body(body)
                        .expect("a response"),
                )
            }
        });
        (kube::Client::new(service, "default"), seen)
    }

    fn get(uri: &str) -> http::Request<Vec<u8>> {
        http::Request::get(uri).body(Vec::new()).expect("a request")
    }

    #[tokio::test]
    async fn insecure_settings_are_named_when_the_client_is_built_here() {
        let mut config = kube::Config::new("http://127.0.0.1:1".parse().unwrap());
        config.auth_info.username = Some("u".into());
        config.auth_info.password = Some("sekret".to_owned().into());
        let transport = KubeTransport::from_config(config).unwrap();
        assert_eq!(
            transport.insecure(),
            [InsecureSetting::CredentialsOverHttp {
                cluster: "http://127.0.0.1:1/".into(),
                credential: "basic auth",
            }]
        );
        let mut config = kube::Config::new("https://127.0.0.1:1".parse().unwrap());
        config.accept_invalid_certs = true;
        let transport = KubeTransport::from_config(config).unwrap();
        assert!(
            matches!(
                transport.insecure(),
                [InsecureSetting::SkipTlsVerify { .. }]
            ),
            "{:?}",
            transport.insecure()
        );
        let client =
            kube::Client::try_from(kube::Config::new("https://127.0.0.1:1".parse().unwrap()))
                .unwrap();
        assert!(KubeTransport::new(client).insecure().is_empty());
    }

    #[tokio::test]
    async fn requests_go_through_the_client_and_bodies_stream_back_chunk_by_chunk() {
        let (client, seen) = client(404, vec![Ok("{\"kind\":"), Ok("\"Status\"}")]);
        let transport = KubeTransport::from(client);
        let response = transport
            .send(get("/api/v1/namespaces/ns/pods?watch=true"))
            .await
            .expect("a response");
        assert_eq!(response.status(), 404, "the status is the server's");
        let chunks: Vec<Bytes> = response
            .into_body()
            .map(|chunk| chunk.expect("a chunk"))
            .collect()
            .await;
        assert_eq!(chunks, ["{\"kind\":", "\"Status\"}"]);
        assert_eq!(
            *seen.lock().unwrap(),
            [(
                http::Method::GET,
                http::Uri::from_static("/api/v1/namespaces/ns/pods?watch=true")
            )]
        );
    }

    #[tokio::test]
    async fn a_body_broken_midway_ends_its_stream_with_a_transport_error() {
        let (client, _) = client(200, vec![Ok("{\"items\":"), Err("connection reset")]);
        let response = KubeTransport::new(client)
            .send(get("/api/v1/pods"))
            .await
            .expect("a response");
        let chunks: Vec<Result<Bytes, TransportError>> = response.into_body().collect().await;
        assert!(
            matches!(&chunks[0], Ok(c) if c == "{\"items\":"),
            "{chunks:?}"
        );
        let error = chunks
            .last()
            .and_then(|c| c.as_ref().err())
            .expect("an error");
        assert!(error.0.contains("connection reset"), "{error:?}");
    }
}
