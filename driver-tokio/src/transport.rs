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
