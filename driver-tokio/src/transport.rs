//! [`KubeTransport`]: the engine's [`Transport`] over a `kube::Client` (kubeconfig or
//! in-cluster config, TLS and auth from kube).

use futures_lite::StreamExt;
use http_body_util::BodyExt;

use reconcile_engine::{BodyStream, BoxFuture, Transport, TransportError};

/// Sends the engine's requests through a `kube::Client`.
#[derive(Clone)]
pub struct KubeTransport {
    client: kube::Client,
}

impl std::fmt::Debug for KubeTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeTransport")
            .field("default_namespace", &self.client.default_namespace())
            .finish()
    }
}

impl KubeTransport {
    /// Wraps a client.
    #[must_use]
    pub fn new(client: kube::Client) -> Self {
        KubeTransport { client }
    }

    /// A client from `kube::Config::infer` (kubeconfig, then in-cluster).
    ///
    /// # Errors
    /// No usable configuration, or the client could not be built.
    pub async fn infer() -> Result<Self, TransportError> {
        let client = kube::Client::try_default().await.map_err(|e| {
            TransportError::new(format!(
                "cannot build a kube client: {}",
                TransportError::chain(&e)
            ))
        })?;
        Ok(KubeTransport::new(client))
    }

    /// The client.
    #[must_use]
    pub fn client(&self) -> &kube::Client {
        &self.client
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
        Box::pin(async move {
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

