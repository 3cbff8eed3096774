//! The opt-in health listener on tokio: `/metrics`, `/healthz` and `/readyz`
//! ([`Endpoints`]) over HTTP/1.1 with hyper's server, one request per connection.

use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use reconcile_engine::Endpoints;
use reconcile_engine::endpoints::{
    CONNECTION_TIMEOUT, HEADER_READ_TIMEOUT, MAX_CONNECTIONS, MAX_REQUEST_BUFFER,
};
use tokio::net::{TcpListener, ToSocketAddrs};

/// A running listener serving [`Endpoints`]; dropping it stops it.
///
/// ```no_run
/// # async fn demo(handle: reconcile_tokio::Handle<reconcile_tokio::PodView, String>) -> std::io::Result<()> {
/// use reconcile_tokio::{Endpoints, EndpointsServer};
/// let server = EndpointsServer::bind("0.0.0.0:8080", Endpoints::new().controller(&handle)).await?;
/// println!("metrics on http://{}/metrics", server.local_addr());
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct EndpointsServer {
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl EndpointsServer {
    /// Binds `addr` and serves `endpoints` on a task of the ambient tokio runtime.
    ///
    /// # Errors
    /// The address cannot be bound.
    pub async fn bind(addr: impl ToSocketAddrs, endpoints: Endpoints) -> io::Result<Self> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(serve(listener, Arc::new(endpoints)));
        Ok(EndpointsServer { addr, task })
    }

    /// The address bound (with the port the system chose for port 0).
    #[must_use]
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for EndpointsServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(listener: TcpListener, endpoints: Arc<Endpoints>) {
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(error) => {
                // Out of descriptors, say: wait a little rather than spin.
                tracing::warn!(%error, "health listener: accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            continue; // Full: the connection is dropped, closed unanswered.
        };
        let endpoints = Arc::clone(&endpoints);
        tokio::spawn(async move {
            let service = service_fn(move |request: hyper::Request<Incoming>| {
                let response = endpoints.respond(request.method(), request.uri().path());
                std::future::ready(Ok::<_, Infallible>(response.map(Full::<Bytes>::new)))
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .keep_alive(false)
                .max_buf_size(MAX_REQUEST_BUFFER)
                .serve_connection(TokioIo::new(stream), service);
            let _ = tokio::time::timeout(CONNECTION_TIMEOUT, connection).await;
            drop(slot);
        });
    }
}
