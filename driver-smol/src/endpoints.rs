//! The opt-in health listener on smol: `/metrics`, `/healthz` and `/readyz`
//! ([`Endpoints`]) over HTTP/1.1 with hyper's server on `async-io` sockets (through
//! `smol-hyper`), one request per connection. No tokio runtime, reactor or timer.

use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use futures_lite::FutureExt;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use reconcile_engine::Endpoints;
use reconcile_engine::endpoints::{
    CONNECTION_TIMEOUT, HEADER_READ_TIMEOUT, MAX_CONNECTIONS, MAX_REQUEST_BUFFER,
};
use smol::net::{AsyncToSocketAddrs, TcpListener};
use smol_hyper::rt::{FuturesIo, SmolTimer};

/// A running listener serving [`Endpoints`]; dropping it stops it.
///
/// ```no_run
/// # async fn demo(handle: reconcile_smol::Handle<reconcile_smol::PodView, String>) -> std::io::Result<()> {
/// use reconcile_smol::{Endpoints, EndpointsServer};
/// let server = EndpointsServer::bind("0.0.0.0:8080", Endpoints::new().controller(&handle)).await?;
/// println!("metrics on http://{}/metrics", server.local_addr());
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct EndpointsServer {
    addr: SocketAddr,
    /// Dropping a smol task cancels it.
    _task: smol::Task<()>,
}

impl EndpointsServer {
    /// Binds `addr` and serves `endpoints` on smol's global executor.
    ///
    /// # Errors
    /// The address cannot be bound.
    pub async fn bind(addr: impl AsyncToSocketAddrs, endpoints: Endpoints) -> io::Result<Self> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let task = smol::spawn(serve(listener, Arc::new(endpoints)));
        Ok(EndpointsServer { addr, _task: task })
    }

    /// The address bound (with the port the system chose for port 0).
    #[must_use]
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

async fn serve(listener: TcpListener, endpoints: Arc<Endpoints>) {
    let slots = Arc::new(smol::lock::Semaphore::new(MAX_CONNECTIONS));
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(error) => {
                // Out of descriptors, say: wait a little rather than spin.
                tracing::warn!(%error, "health listener: accept failed");
                smol::Timer::after(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        let Some(slot) = slots.try_acquire_arc() else {
            continue; // Full: the connection is dropped, closed unanswered.
        };
        let endpoints = Arc::clone(&endpoints);
        smol::spawn(async move {
            let service = service_fn(move |request: hyper::Request<Incoming>| {
                let response = endpoints.respond(request.method(), request.uri().path());
                std::future::ready(Ok::<_, Infallible>(response.map(Full::<Bytes>::new)))
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(SmolTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .keep_alive(false)
                .max_buf_size(MAX_REQUEST_BUFFER)
                .serve_connection(FuturesIo::new(stream), service);
            let _ = async {
                let _ = connection.await;
            }
            .or(async {
                smol::Timer::after(CONNECTION_TIMEOUT).await;
            })
            .await;
            drop(slot);
        })
        .detach();
    }
}
