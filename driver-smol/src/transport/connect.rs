//! The connector under the hyper client: smol's `TcpStream`, `futures-rustls` for TLS,
//! `smol-hyper`'s adapter to hyper's IO traits, all bounded by a connect timeout.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use futures_rustls::TlsConnector;
use futures_rustls::pki_types::ServerName;
use hyper_util::client::legacy::connect::{Connected, Connection};
use smol::io::{AsyncRead, AsyncWrite};
use smol::net::TcpStream;
use smol_hyper::rt::FuturesIo;

/// Why a connection could not be made (the hyper client reports it as a connect error).
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The URI names no host.
    #[error("the URI {0} has no host")]
    NoHost(String),
    /// An `https` URI, but the transport was built without TLS.
    #[error("{0} needs TLS, but the cluster URL is plain http")]
    TlsNotConfigured(String),
    /// The URI scheme is neither `http` nor `https`.
    #[error("unsupported URI scheme in {0}")]
    Scheme(String),
    /// The host is not a valid TLS server name.
    #[error("{0:?} is not a valid TLS server name")]
    ServerName(String),
    /// The exec plugin that gives the client certificate failed.
    #[error(transparent)]
    Exec(#[from] reconcile_engine::exec::ExecError),
    /// kube could not build a TLS config with the exec plugin's client certificate.
    #[error("TLS configuration with the exec plugin's client certificate: {0}")]
    ExecTls(String),
    /// TCP connect plus TLS handshake took longer than the connect timeout.
    #[error("connecting to {addr} timed out after {}ms", .limit.as_millis())]
    Timeout {
        /// `host:port`.
        addr: String,
        /// The limit.
        limit: Duration,
    },
    /// The TCP connect failed.
    #[error("TCP connect to {addr}: {source}")]
    Tcp {
        /// `host:port`.
        addr: String,
        /// The socket error.
        source: std::io::Error,
    },
    /// The TLS handshake failed.
    #[error("TLS handshake with {addr}: {source}")]
    Tls {
        /// `host:port`.
        addr: String,
        /// The handshake error.
        source: std::io::Error,
    },
}

/// For an `exec` user over `https://`: the plugin (shared with the request path, so it
/// runs once per credential) and the TLS config of its latest client certificate.
pub(crate) struct ExecTls {
    pub(crate) auth: Arc<reconcile_engine::exec::ExecAuth>,
    /// The cluster's config without `exec`, to build a TLS config with an identity.
    pub(crate) config: kube::Config,
    /// The TLS connector of the credential of this generation.
    pub(crate) current: Mutex<Option<(u64, TlsConnector)>>,
}

impl ExecTls {
    /// The TLS connector for the plugin's current credential: the base one for a token,
    /// one with its client certificate (built once per credential) otherwise.
    async fn connector(&self, base: &TlsConnector) -> Result<TlsConnector, ConnectError> {
        use kube::client::ConfigExt as _;
        let credential = self.auth.credential().await?;
        let Some(identity) = credential.identity() else {
            return Ok(base.clone());
        };
        let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((generation, connector)) = &*current
            && *generation == credential.generation()
        {
            return Ok(connector.clone());
        }
        let config = reconcile_engine::exec::config_without_exec(&self.config, Some(identity));
        let tls = config
            .rustls_client_config()
            .map_err(|e| ConnectError::ExecTls(e.to_string()))?;
        let connector = TlsConnector::from(Arc::new(tls));
        *current = Some((credential.generation(), connector.clone()));
        Ok(connector)
    }
}

/// Connects to the cluster: a `tower::Service<Uri>` for hyper-util's pooled client.
#[derive(Clone)]
pub(crate) struct Connector {
    /// `None` for a plain-http cluster URL.
    pub(crate) tls: Option<TlsConnector>,
    /// For an `exec` user: where a plugin's client certificate comes from.
    pub(crate) exec: Option<Arc<ExecTls>>,
    /// The kubeconfig's `tls-server-name`, verified and sent as SNI instead of the host.
    pub(crate) server_name: Option<ServerName<'static>>,
    /// Limit on TCP connect plus TLS handshake.
    pub(crate) connect_timeout: Duration,
}

impl Connector {
    pub(crate) fn new(
        tls: Option<Arc<futures_rustls::rustls::ClientConfig>>,
        server_name: Option<ServerName<'static>>,
        connect_timeout: Duration,
        exec: Option<Arc<ExecTls>>,
    ) -> Self {
        Connector {
            tls: tls.map(TlsConnector::from),
            exec,
            server_name,
            connect_timeout,
        }
    }

    async fn connect(self, uri: http::Uri) -> Result<Conn, ConnectError> {
        let https = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => return Err(ConnectError::Scheme(uri.to_string())),
        };
        let host = uri
            .host()
            .ok_or_else(|| ConnectError::NoHost(uri.to_string()))?;
        // An IPv6 literal keeps its brackets in the URI; sockets and SNI want it bare.
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
        let addr = if bare.contains(':') {
            format!("[{bare}]:{port}")
        } else {
            format!("{bare}:{port}")
        };
        // The plugin first, outside the connect timeout: it has its own bound (and the
        // request path has mostly run it already, so this is its cached credential).
        let tls = match (&self.tls, &self.exec) {
            (Some(base), Some(exec)) if https => Some(exec.connector(base).await?),
            (tls, _) => tls.clone(),
        };
        let limit = self.connect_timeout;
        let work = async {
            let tcp =
                TcpStream::connect(addr.as_str())
                    .await
                    .map_err(|source| ConnectError::Tcp {
                        addr: addr.clone(),
                        source,
                    })?;
            // Watch lines are small and latency matters more than packet count.
            let _ = tcp.set_nodelay(true);
            if !https {
                return Ok(Conn(FuturesIo::new(Io::Plain(tcp))));
            }
            let tls = tls
                .as_ref()
                .ok_or_else(|| ConnectError::TlsNotConfigured(uri.to_string()))?;
            let name = match &self.server_name {
                Some(name) => name.clone(),
                None => ServerName::try_from(bare.to_owned())
                    .map_err(|_| ConnectError::ServerName(bare.to_owned()))?,
            };
            let stream = tls
                .connect(name, tcp)
                .await
                .map_err(|source| ConnectError::Tls {
                    addr: addr.clone(),
                    source,
                })?;
            Ok(Conn(FuturesIo::new(Io::Tls(Box::new(stream)))))
        };
        futures_lite::future::or(work, async {
            smol::Timer::after(limit).await;
            Err(ConnectError::Timeout {
                addr: addr.clone(),
                limit,
            })
        })
        .await
    }
}

impl tower::Service<http::Uri> for Connector {
    type Response = Conn;
    type Error = ConnectError;
    type Future = Pin<Box<dyn Future<Output = Result<Conn, ConnectError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), ConnectError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        Box::pin(self.clone().connect(uri))
    }
}

/// A plain or TLS socket, as futures-io.
enum Io {
    Plain(TcpStream),
    Tls(Box<futures_rustls::client::TlsStream<TcpStream>>),
}

impl AsyncRead for Io {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Io {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_flush(cx),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_close(cx),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_close(cx),
        }
    }
}

/// One connection, with hyper's IO traits (through `smol-hyper`).
pub struct Conn(FuturesIo<Io>);

impl hyper::rt::Read for Conn {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl hyper::rt::Write for Conn {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

impl Connection for Conn {
    fn connected(&self) -> Connected {
        Connected::new()
    }
}

/// hyper's executor on smol's global executor (for the client's connection tasks).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SmolExecutor;

impl<F> hyper::rt::Executor<F> for SmolExecutor
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn execute(&self, future: F) {
        smol::spawn(future).detach();
    }
}
