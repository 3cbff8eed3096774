//! [`SmolTransport`]: the engine's [`Transport`] built from kube's own parts, with no
//! tokio runtime.
//!
//! `kube::Client` cannot be built without a tokio runtime (tower's `Buffer` calls
//! `tokio::spawn`), so the stack is assembled here from the pieces kube exports:
//!
//! | layer | from |
//! |---|---|
//! | cluster URL prepended to the path | [`ConfigExt::base_uri_layer`] |
//! | `Authorization` (basic, bearer, token file) | [`ConfigExt::auth_layer`] |
//! | impersonation and extra headers | [`ConfigExt::extra_headers_layer`] |
//! | pooled HTTP/1.1 client | hyper-util, executor and timer on smol ([`smol_hyper`]) |
//! | TCP and TLS | smol's `TcpStream`, `futures-rustls` with [`ConfigExt::rustls_client_config`] |
//!
//! What the stock kube stack adds is put back on smol timers: a connect timeout (TCP plus
//! TLS handshake), a read-idle timeout on watch bodies (`timeoutSeconds` plus a margin)
//! and on other bodies when `read_timeout` is configured, and bounded retries of GETs
//! (connection failures, and 429 / 503 / 504 with `Retry-After` honoured up to a cap).
//!
//! # Exec auth
//! kube refreshes an exec-plugin token (and a `gcp` auth-provider token) with
//! `tokio::task::spawn_blocking`, which panics outside a tokio runtime. So for an `exec`
//! user this transport does not let kube see the plugin (kube's auth layer and its
//! `rustls_client_config` would each run it, with no time limit): the engine's `exec` module
//! runs it as a child process (`async-process`, smol's) under
//! [`TransportOptions::exec_timeout`], once per credential, and re-runs it when the
//! credential nears expiry (JSON output only; no lock held while it runs, bounded output;
//! an [`ExecError`] fails the request with the plugin's command and a redacted hint from
//! its stderr). A token goes into each request's `Authorization`; a client certificate
//! into the TLS config of each new connection, built once per credential. The `gcp` auth provider has no such path and is refused up front
//! with [`ClientError::RefreshingAuth`]. Static tokens, token files (re-read by kube
//! synchronously, as in-cluster service accounts use), basic auth and client
//! certificates use kube's layer unchanged.

mod connect;

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_lite::StreamExt;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use kube::client::ConfigExt;
use reconcile_engine::transport::{InsecureSetting, insecure_settings, warn_insecure};
use reconcile_engine::{BodyStream, BoxFuture, Transport, TransportError};
use tower::util::BoxCloneSyncService;
use tower::{BoxError, ServiceBuilder, ServiceExt};

pub use connect::ConnectError;
use connect::{Connector, ExecTls, SmolExecutor};
pub use reconcile_engine::exec::ExecError;
use reconcile_engine::exec::{DEFAULT_EXEC_TIMEOUT, ExecAuth, config_without_exec};

/// A transport could not be built from the configuration.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Neither a kubeconfig nor an in-cluster environment was usable.
    #[error("cannot infer a kube config (kubeconfig, then in-cluster): {0}")]
    Infer(#[source] kube::config::InferConfigError),
    /// The kubeconfig file could not be read or parsed.
    #[error("cannot read kubeconfig {}: {source}", .path.display())]
    ReadKubeconfig {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        source: kube::config::KubeconfigError,
    },
    /// The kubeconfig was read but names no usable cluster, user or context.
    #[error("kubeconfig {}: {source}", .path.display())]
    Kubeconfig {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        source: kube::config::KubeconfigError,
    },
    /// The user's credentials need a token refresh that kube runs on tokio and that this
    /// transport does not reimplement (the `gcp` auth provider).
    #[error(
        "the kubeconfig user authenticates with {kind}, whose token kube refreshes with \
         tokio::task::spawn_blocking; reconcile-smol runs no tokio runtime, so it does not \
         support it. Use an exec plugin (gke-gcloud-auth-plugin), a bearer token, a \
         tokenFile, basic auth or client certificates (or the reconcile-tokio driver)"
    )]
    RefreshingAuth {
        /// `the gcp auth provider`.
        kind: &'static str,
    },
    /// The configuration asks for an HTTP or SOCKS proxy, which this transport lacks.
    #[error("proxy {0} is configured, but reconcile-smol connects directly only")]
    Proxy(String),
    /// The cluster URL cannot be used.
    #[error("cluster URL {url}: {reason}")]
    ClusterUrl {
        /// The URL.
        url: String,
        /// Why.
        reason: &'static str,
    },
    /// `tls-server-name` is not a valid DNS name or IP address.
    #[error("tls-server-name {0:?} is not a valid server name")]
    ServerName(String),
    /// kube could not build the TLS config or an auth / header layer.
    #[error("{what}: {source}")]
    Kube {
        /// Which part.
        what: &'static str,
        /// kube's error.
        source: kube::Error,
    },
}

/// Timeouts and retries of a [`SmolTransport`] (the parts the stock kube stack has).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransportOptions {
    /// Limit on TCP connect plus TLS handshake (kube's `connect_timeout`, 30 s by default).
    pub connect_timeout: Duration,
    /// Limit on the response head and on each body chunk of non-watch requests (kube's
    /// `read_timeout`; `None`, kube's default, leaves it to the caller).
    pub read_timeout: Option<Duration>,
    /// Added to a watch's `timeoutSeconds` to get its read-idle timeout.
    pub watch_idle_margin: Duration,
    /// Retries of a GET after a connection failure or a 429 / 503 / 504.
    pub retries: u32,
    /// First retry delay, doubling up to [`retry_cap`](TransportOptions::retry_cap).
    pub retry_base: Duration,
    /// Longest retry delay, also the cap on a server's `Retry-After`.
    pub retry_cap: Duration,
    /// Longest an exec credential plugin may run before it is killed and the request fails
    /// ([`DEFAULT_EXEC_TIMEOUT`], 60 s, by default; kube and client-go wait for ever). The
    /// one bound on every run, for a token or a client certificate, over `http://` and
    /// `https://`.
    pub exec_timeout: Duration,
}

impl Default for TransportOptions {
    fn default() -> Self {
        TransportOptions {
            connect_timeout: Duration::from_secs(30),
            read_timeout: None,
            watch_idle_margin: Duration::from_secs(10),
            retries: 3,
            retry_base: Duration::from_millis(100),
            retry_cap: Duration::from_secs(5),
            exec_timeout: DEFAULT_EXEC_TIMEOUT,
        }
    }
}

type Service = BoxCloneSyncService<http::Request<Full<Bytes>>, http::Response<Incoming>, BoxError>;

/// The engine's HTTP stack on smol, bound to one cluster.
#[derive(Clone)]
pub struct SmolTransport {
    inner: Arc<Inner>,
}

struct Inner {
    service: Service,
    /// For an `exec` user: the plugin, run here instead of in kube's (tokio) auth layer
    /// and TLS config, shared with the connector.
    exec_auth: Option<Arc<ExecAuth>>,
    options: TransportOptions,
    /// What is insecure about the connection (warned about when built).
    insecure: Vec<InsecureSetting>,
    cluster_url: http::Uri,
    default_namespace: String,
}

impl std::fmt::Debug for SmolTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SmolTransport")
            .field("cluster_url", &self.inner.cluster_url)
            .field("default_namespace", &self.inner.default_namespace)
            .field("options", &self.inner.options)
            .finish_non_exhaustive()
    }
}

impl SmolTransport {
    /// A transport from `kube::Config::infer` (kubeconfig, then in-cluster).
    ///
    /// # Errors
    /// No usable configuration, or see [`SmolTransport::from_config`].
    pub async fn infer() -> Result<Self, ClientError> {
        let config = kube::Config::infer().await.map_err(ClientError::Infer)?;
        Self::from_config(config)
    }

    /// A transport for the current context of the kubeconfig at `path`.
    ///
    /// # Errors
    /// The file cannot be read or names no usable context, or see
    /// [`SmolTransport::from_config`].
    pub async fn from_kubeconfig(path: &Path) -> Result<Self, ClientError> {
        let kubeconfig = kube::config::Kubeconfig::read_from(path).map_err(|source| {
            ClientError::ReadKubeconfig {
                path: path.to_owned(),
                source,
            }
        })?;
        let config = kube::Config::from_custom_kubeconfig(
            kubeconfig,
            &kube::config::KubeConfigOptions::default(),
        )
        .await
        .map_err(|source| ClientError::Kubeconfig {
            path: path.to_owned(),
            source,
        })?;
        Self::from_config(config)
    }

    /// A transport for `config`, with its connect and read timeouts and default retries.
    ///
    /// # Errors
    /// See [`SmolTransport::with_options`].
    pub fn from_config(config: kube::Config) -> Result<Self, ClientError> {
        let options = TransportOptions {
            connect_timeout: config
                .connect_timeout
                .unwrap_or(TransportOptions::default().connect_timeout),
            read_timeout: config.read_timeout,
            ..TransportOptions::default()
        };
        Self::with_options(config, options)
    }

    /// A transport for `config` with explicit timeouts and retries.
    ///
    /// # Errors
    /// [`ClientError::RefreshingAuth`] for `gcp` auth-provider users (see the module docs),
    /// [`ClientError::Proxy`] when a proxy is configured, [`ClientError::ClusterUrl`] for a
    /// URL that is neither `http` nor `https`, or kube refusing the TLS or auth settings.
    pub fn with_options(
        config: kube::Config,
        options: TransportOptions,
    ) -> Result<Self, ClientError> {
        if config
            .auth_info
            .auth_provider
            .as_ref()
            .is_some_and(|p| p.name == "gcp")
        {
            return Err(ClientError::RefreshingAuth {
                kind: "the gcp auth provider",
            });
        }
        if let Some(proxy) = &config.proxy_url {
            return Err(ClientError::Proxy(proxy.to_string()));
        }
        let url = config.cluster_url.clone();
        // An exec user's credential is fetched by `ExecAuth` as a child process, under
        // `exec_timeout`, once per credential: kube would run the plugin for the TLS config
        // (`rustls_client_config`) and for the auth layer, with no bound, and refresh it
        // later on tokio. So kube sees the config without `exec`; a client certificate
        // from the plugin goes into the TLS config of new connections (`ExecTls`).
        let exec_auth = config
            .auth_info
            .exec
            .clone()
            .map(|exec| Arc::new(ExecAuth::new(exec, options.exec_timeout)));
        let plain = config_without_exec(&config, None);
        let tls = match url.scheme_str() {
            Some("https") => Some(Arc::new(plain.rustls_client_config().map_err(
                |source| ClientError::Kube {
                    what: "TLS configuration",
                    source,
                },
            )?)),
            Some("http") => None,
            _ => {
                return Err(ClientError::ClusterUrl {
                    url: url.to_string(),
                    reason: "the scheme must be http or https",
                });
            }
        };
        let exec_tls = match (&exec_auth, &tls) {
            (Some(auth), Some(_)) => Some(Arc::new(ExecTls {
                auth: Arc::clone(auth),
                config: plain.clone(),
                current: std::sync::Mutex::new(None),
            })),
            _ => None,
        };
        // Said once, up front: kube logs "Server cert bypassed" at every handshake, and
        // nothing about credentials over http://.
        let insecure = insecure_settings(
            &url,
            config.accept_invalid_certs,
            credential_kind(&config.auth_info),
        );
        warn_insecure(&insecure);
        let server_name = config
            .tls_server_name
            .as_ref()
            .map(|name| {
                futures_rustls::pki_types::ServerName::try_from(name.clone())
                    .map_err(|_| ClientError::ServerName(name.clone()))
            })
            .transpose()?;
        let connector = Connector::new(tls, server_name, options.connect_timeout, exec_tls);
        let client = hyper_util::client::legacy::Client::builder(SmolExecutor)
            .timer(smol_hyper::rt::SmolTimer::new())
            .pool_timer(smol_hyper::rt::SmolTimer::new())
            .pool_idle_timeout(Duration::from_secs(90))
            .build::<_, Full<Bytes>>(connector);
        let auth = if exec_auth.is_some() {
            None
        } else {
            plain.auth_layer().map_err(|source| ClientError::Kube {
                what: "auth configuration",
                source,
            })?
        };
        let headers = config
            .extra_headers_layer()
            .map_err(|source| ClientError::Kube {
                what: "extra headers",
                source,
            })?;
        // The order of kube's own client: base URI, auth, extra headers, then HTTP. The
        // refreshing auth filter fails with `BoxError`, so the client's errors are boxed
        // below it for the two auth branches to agree.
        let stack = ServiceBuilder::new()
            .layer(config.base_uri_layer())
            .option_layer(auth)
            .layer(headers)
            .service(client.map_err(BoxError::from));
        Ok(SmolTransport {
            inner: Arc::new(Inner {
                service: BoxCloneSyncService::new(stack),
                exec_auth,
                options,
                insecure,
                cluster_url: url,
                default_namespace: config.default_namespace,
            }),
        })
    }

    /// The namespace of the kubeconfig context (or the service account's).
    #[must_use]
    pub fn default_namespace(&self) -> &str {
        &self.inner.default_namespace
    }

    /// The cluster URL requests go to.
    #[must_use]
    pub fn cluster_url(&self) -> &http::Uri {
        &self.inner.cluster_url
    }

    /// The timeouts and retries in force.
    #[must_use]
    pub fn options(&self) -> &TransportOptions {
        &self.inner.options
    }

    /// What is insecure about the connection: `insecure-skip-tls-verify`, or credentials
    /// sent over `http://`. Each was logged with `tracing::warn!` when the transport was
    /// built.
    #[must_use]
    pub fn insecure(&self) -> &[InsecureSetting] {
        &self.inner.insecure
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

impl Transport for SmolTransport {
    fn send(
        &self,
        request: http::Request<Vec<u8>>,
    ) -> BoxFuture<Result<http::Response<BodyStream>, TransportError>> {
        let inner = Arc::clone(&self.inner);
        Box::pin(async move { inner.send(request).await })
    }
}

impl Inner {
    async fn send(
        &self,
        request: http::Request<Vec<u8>>,
    ) -> Result<http::Response<BodyStream>, TransportError> {
        let (parts, body) = request.into_parts();
        let body = Bytes::from(body);
        let what = format!("{} {}", parts.method, parts.uri);
        let idle = read_idle(&parts.uri, &self.options);
        let retries = if parts.method == http::Method::GET || parts.method == http::Method::HEAD {
            self.options.retries
        } else {
            0
        };
        let mut attempt = 0;
        loop {
            let mut request = http::Request::new(Full::new(body.clone()));
            *request.method_mut() = parts.method.clone();
            *request.uri_mut() = parts.uri.clone();
            *request.version_mut() = parts.version;
            *request.headers_mut() = parts.headers.clone();
            if let Some(exec) = &self.exec_auth {
                let credential = exec
                    .credential()
                    .await
                    .map_err(|e| TransportError::new(format!("{what}: {e}")))?;
                if let Some(value) = credential.authorization() {
                    request
                        .headers_mut()
                        .insert(http::header::AUTHORIZATION, value.clone());
                }
            }
            let call = self.service.clone().oneshot(request);
            let result = match idle {
                Some(limit) => with_timeout(limit, call).await.unwrap_or_else(|| {
                    Err(format!("no response head within {}s", limit.as_secs()).into())
                }),
                None => call.await,
            };
            let delay = self.retry_delay(attempt);
            match result {
                Ok(response) if attempt < retries && is_retryable_status(response.status()) => {
                    let delay = retry_after(&response)
                        .map_or(delay, |server| server.min(self.options.retry_cap));
                    tracing::debug!(
                        request = %what,
                        status = response.status().as_u16(),
                        attempt,
                        delay_ms = delay.as_millis() as u64,
                        "retrying"
                    );
                    drop(response);
                    smol::Timer::after(delay).await;
                }
                Ok(response) => {
                    return Ok(response.map(|body| body_stream(body, idle, what)));
                }
                Err(error) if attempt < retries => {
                    tracing::debug!(
                        request = %what,
                        error = %TransportError::chain(&*error),
                        attempt,
                        delay_ms = delay.as_millis() as u64,
                        "retrying"
                    );
                    smol::Timer::after(delay).await;
                }
                Err(error) => {
                    return Err(TransportError::new(format!(
                        "{what}: {}",
                        TransportError::chain(&*error)
                    )));
                }
            }
            attempt += 1;
        }
    }

    fn retry_delay(&self, attempt: u32) -> Duration {
        self.options
            .retry_base
            .saturating_mul(1 << attempt.min(16))
            .min(self.options.retry_cap)
    }
}

/// The read-idle limit of a request: `timeoutSeconds` plus the margin for a watch,
/// `read_timeout` for anything else.
fn read_idle(uri: &http::Uri, options: &TransportOptions) -> Option<Duration> {
    let query = uri.query().unwrap_or("");
    let mut watch = false;
    let mut timeout_seconds = None;
    for pair in query.split('&') {
        match pair.split_once('=') {
            Some(("watch", v)) => watch = v == "true" || v == "1",
            Some(("timeoutSeconds", v)) => timeout_seconds = v.parse::<u64>().ok(),
            _ => {}
        }
    }
    if watch {
        // A watch without timeoutSeconds may stay open for the apiserver's own limit
        // (up to 30 minutes by default); only the margin is ours then.
        let base = Duration::from_secs(timeout_seconds.unwrap_or(30 * 60));
        Some(base + options.watch_idle_margin)
    } else {
        options.read_timeout
    }
}

fn is_retryable_status(status: http::StatusCode) -> bool {
    matches!(
        status,
        http::StatusCode::TOO_MANY_REQUESTS
            | http::StatusCode::SERVICE_UNAVAILABLE
            | http::StatusCode::GATEWAY_TIMEOUT
    )
}

/// `Retry-After` in seconds (the HTTP-date form is ignored: the backoff applies).
fn retry_after<B>(response: &http::Response<B>) -> Option<Duration> {
    let value = response.headers().get(http::header::RETRY_AFTER)?;
    let seconds = value.to_str().ok()?.trim().parse::<u64>().ok()?;
    Some(Duration::from_secs(seconds))
}

/// Runs `future` for at most `limit` on a smol timer: `None` when time ran out.
async fn with_timeout<T>(limit: Duration, future: impl Future<Output = T>) -> Option<T> {
    futures_lite::future::or(async { Some(future.await) }, async {
        smol::Timer::after(limit).await;
        None
    })
    .await
}

/// The body as the engine's chunk stream, each chunk within `idle`; the stream ends after
/// the first error.
fn body_stream(body: Incoming, idle: Option<Duration>, what: String) -> BodyStream {
    struct State {
        body: Incoming,
        idle: Option<Duration>,
        what: String,
        done: bool,
    }
    let state = State {
        body,
        idle,
        what,
        done: false,
    };
    let stream = futures_lite::stream::unfold(state, |mut state| async move {
        if state.done {
            return None;
        }
        loop {
            let frame = match state.idle {
                Some(limit) => match with_timeout(limit, state.body.frame()).await {
                    Some(frame) => frame,
                    None => {
                        state.done = true;
                        let message = format!(
                            "{}: read-idle timeout, no data for {}s",
                            state.what,
                            limit.as_secs()
                        );
                        return Some((Err(TransportError::new(message)), state));
                    }
                },
                None => state.body.frame().await,
            };
            match frame {
                None => return None,
                Some(Ok(frame)) => {
                    // Trailers carry nothing the engine reads; skip them.
                    if let Ok(data) = frame.into_data() {
                        return Some((Ok(data), state));
                    }
                }
                Some(Err(error)) => {
                    state.done = true;
                    let message =
                        format!("{}: body: {}", state.what, TransportError::chain(&error));
                    return Some((Err(TransportError::new(message)), state));
                }
            }
        }
    });
    stream.boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watch_idle_is_timeout_seconds_plus_margin() {
        let options = TransportOptions::default();
        let uri: http::Uri = "/api/v1/pods?watch=true&timeoutSeconds=7&resourceVersion=1"
            .parse()
            .unwrap();
        assert_eq!(read_idle(&uri, &options), Some(Duration::from_secs(17)));
        let list: http::Uri = "/api/v1/pods?labelSelector=a".parse().unwrap();
        assert_eq!(read_idle(&list, &options), None);
        let with_read = TransportOptions {
            read_timeout: Some(Duration::from_secs(3)),
            ..options
        };
        assert_eq!(read_idle(&list, &with_read), Some(Duration::from_secs(3)));
    }
}
