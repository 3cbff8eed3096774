//! [`ApiClient`]: reads and writes of one resource type over any [`Transport`], so a
//! reconcile can write back on every runtime — including smol, where kube's own `Api` (whose
//! client needs a tokio runtime) cannot run.
//!
//! The requests are kube-core's, byte for byte what kube's `Api` sends; this module only
//! sends them and decodes the answer. A failure keeps the apiserver's `Status`, so an error
//! policy can tell a conflict (409) from an invalid object (422).

use std::fmt;
use std::marker::PhantomData;

use futures_lite::StreamExt;
use kube_core::Resource;
use kube_core::params::{DeleteParams, GetParams, Patch, PatchParams, PostParams};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::recorder::SourceResource;
use super::transport::{Transport, TransportError};
use super::writes::Written;

/// Largest response body an [`ApiClient`] reads: a single object's, far below the
/// apiserver's 3 MiB (etcd's request limit) times the JSON overhead of any encoding.
pub const MAX_RESPONSE_BODY: usize = 16 << 20;

/// Why an [`ApiClient`] call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ApiError {
    /// The apiserver answered with an error `Status` (kube's `Error::Api`).
    #[error("{method} {path}: {status}")]
    Api {
        /// The HTTP method.
        method: http::Method,
        /// The request's path.
        path: String,
        /// The apiserver's `Status` (its code set from the HTTP status when the body had
        /// none).
        status: Box<kube_core::Status>,
    },
    /// The request got no usable answer.
    #[error("{method} {path}: {error}")]
    Transport {
        /// The HTTP method.
        method: http::Method,
        /// The request's path.
        path: String,
        /// What broke.
        error: TransportError,
    },
    /// kube-core refused to build the request (an invalid name, conflicting parameters).
    #[error("cannot build the request: {0}")]
    Request(#[from] kube_core::request::Error),
    /// The object to send could not be serialized.
    #[error("cannot serialize the object: {0}")]
    Serialize(serde_json::Error),
    /// A `200` whose body is not the expected type.
    #[error("{method} {path}: the answer does not decode: {error}")]
    Decode {
        /// The HTTP method.
        method: http::Method,
        /// The request's path.
        path: String,
        /// serde's error, with its line and column.
        error: serde_json::Error,
    },
}

impl ApiError {
    /// The apiserver's `Status`, when it answered with one.
    #[must_use]
    pub fn status(&self) -> Option<&kube_core::Status> {
        match self {
            ApiError::Api { status, .. } => Some(status),
            _ => None,
        }
    }

    /// A write lost an optimistic-concurrency race (409 `Conflict`): read again, retry.
    #[must_use]
    pub fn is_conflict(&self) -> bool {
        self.status().is_some_and(kube_core::Status::is_conflict)
    }

    /// A create found the name taken (409 `AlreadyExists`).
    #[must_use]
    pub fn is_already_exists(&self) -> bool {
        self.status()
            .is_some_and(kube_core::Status::is_already_exists)
    }

    /// The object does not exist (404).
    #[must_use]
    pub fn is_not_found(&self) -> bool {
        self.status().is_some_and(kube_core::Status::is_not_found)
    }

    /// The object is invalid (422): retrying the same write cannot help.
    #[must_use]
    pub fn is_invalid(&self) -> bool {
        self.status().is_some_and(kube_core::Status::is_invalid)
    }
}

/// Reads and writes `K`s in one namespace (or cluster-wide) through transport `T`: the part
/// of kube's `Api<K>` a reconcile writes back with, on any runtime.
pub struct ApiClient<K, T> {
    transport: T,
    request: kube_core::Request,
    kind: PhantomData<fn() -> K>,
}

impl<K, T: Clone> Clone for ApiClient<K, T> {
    fn clone(&self) -> Self {
        ApiClient {
            transport: self.transport.clone(),
            request: self.request.clone(),
            kind: PhantomData,
        }
    }
}

impl<K, T> fmt::Debug for ApiClient<K, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApiClient")
            .field("url_path", &self.request.url_path)
            .finish_non_exhaustive()
    }
}

impl<K: Resource, T: Transport> ApiClient<K, T> {
    /// `K`s across the cluster (kube's `Api::all`).
    pub fn all(transport: impl Into<T>) -> Self
    where
        K::DynamicType: Default,
    {
        Self::all_with(transport, &K::DynamicType::default())
    }

    /// `K`s in `namespace` (kube's `Api::namespaced`).
    pub fn namespaced(transport: impl Into<T>, namespace: &str) -> Self
    where
        K::DynamicType: Default,
    {
        Self::namespaced_with(transport, namespace, &K::DynamicType::default())
    }

    /// `K`s in `namespace`, or across the cluster when it is `None`: the scope of an object
    /// read from its [`ObjectKey`](reconcile_core::ObjectKey)'s `namespace()`.
    pub fn scoped(transport: impl Into<T>, namespace: Option<&str>) -> Self
    where
        K::DynamicType: Default,
    {
        Self::at(
            transport,
            K::url_path(
                &K::DynamicType::default(),
                namespace.filter(|ns| !ns.is_empty()),
            ),
        )
    }

    /// `K`s across the cluster, for a type whose URL needs `dyntype` (kube's `Api::all_with`).
    pub fn all_with(transport: impl Into<T>, dyntype: &K::DynamicType) -> Self {
        Self::at(transport, K::url_path(dyntype, None))
    }

    /// `K`s in `namespace`, for a type whose URL needs `dyntype` (kube's
    /// `Api::namespaced_with`).
    pub fn namespaced_with(
        transport: impl Into<T>,
        namespace: &str,
        dyntype: &K::DynamicType,
    ) -> Self {
        Self::at(transport, K::url_path(dyntype, Some(namespace)))
    }

    fn at(transport: impl Into<T>, url_path: String) -> Self {
        ApiClient {
            transport: transport.into(),
            request: kube_core::Request::new(url_path),
            kind: PhantomData,
        }
    }

    /// The collection's URL path.
    #[must_use]
    pub fn url_path(&self) -> &str {
        &self.request.url_path
    }
}

impl<K, T> ApiClient<K, T>
where
    K: Resource + DeserializeOwned + Serialize,
    T: Transport,
{
    /// Reads `name`.
    ///
    /// # Errors
    /// See [`ApiError`]; [`ApiError::is_not_found`] when it does not exist.
    pub async fn get(&self, name: &str) -> Result<K, ApiError> {
        self.call(self.request.get(name, &GetParams::default())?)
            .await
    }

    /// Reads `name`, or `None` when it does not exist (kube's `Api::get_opt`).
    ///
    /// # Errors
    /// See [`ApiError`].
    pub async fn get_opt(&self, name: &str) -> Result<Option<K>, ApiError> {
        match self.get(name).await {
            Ok(object) => Ok(Some(object)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Creates `object`. Inside a reconcile, this and every other successful write is
    /// recorded with its answered resourceVersion: the key's next dispatch waits until the
    /// source caching the resource has observed it (`Config::read_own_writes`).
    ///
    /// # Errors
    /// See [`ApiError`].
    pub async fn create(&self, params: &PostParams, object: &K) -> Result<K, ApiError> {
        let body = serde_json::to_vec(object).map_err(ApiError::Serialize)?;
        self.write(self.request.create(params, body)?).await
    }

    /// Replaces `name` with `object`; its `metadata.resourceVersion` makes the write
    /// conditional ([`ApiError::is_conflict`] when it moved on).
    ///
    /// # Errors
    /// See [`ApiError`].
    pub async fn replace(
        &self,
        name: &str,
        params: &PostParams,
        object: &K,
    ) -> Result<K, ApiError> {
        let body = serde_json::to_vec(object).map_err(ApiError::Serialize)?;
        self.write(self.request.replace(name, params, body)?).await
    }

    /// Patches `name`.
    ///
    /// # Errors
    /// See [`ApiError`].
    pub async fn patch<P: Serialize + fmt::Debug>(
        &self,
        name: &str,
        params: &PatchParams,
        patch: &Patch<P>,
    ) -> Result<K, ApiError> {
        self.write(self.request.patch(name, params, patch)?).await
    }

    /// Patches the `status` subresource of `name`: a write that leaves the spec, and so the
    /// object's `generation`, alone. The write is still a change the watch delivers, so it
    /// wakes the object once more: write status only when it differs, and that run finds
    /// nothing to do.
    ///
    /// # Errors
    /// See [`ApiError`].
    pub async fn patch_status<P: Serialize + fmt::Debug>(
        &self,
        name: &str,
        params: &PatchParams,
        patch: &Patch<P>,
    ) -> Result<K, ApiError> {
        self.write(
            self.request
                .patch_subresource("status", name, params, patch)?,
        )
        .await
    }

    /// Deletes `name`. The answer (the object being deleted, or a `Status`) is not decoded.
    ///
    /// # Errors
    /// See [`ApiError`].
    pub async fn delete(&self, name: &str, params: &DeleteParams) -> Result<(), ApiError> {
        self.send(self.request.delete(name, params)?)
            .await
            .map(drop)
    }

    /// Sends a write; its answer's resourceVersion is recorded for the reconcile polling
    /// this (see [`writes`](crate::writes)), so its key waits for the write to be observed.
    async fn write(&self, request: http::Request<Vec<u8>>) -> Result<K, ApiError> {
        let object = self.call(request).await?;
        let resource = SourceResource::of_url(&self.request.url_path, None, false);
        let meta = object.meta();
        if let (Some(group), Some(plural), Some(rv)) = (
            resource.group,
            resource.plural,
            meta.resource_version.clone(),
        ) {
            crate::writes::record(Written {
                group,
                plural,
                namespace: meta.namespace.clone(),
                name: meta.name.clone().unwrap_or_default(),
                resource_version: rv,
            });
        }
        Ok(object)
    }

    async fn call(&self, request: http::Request<Vec<u8>>) -> Result<K, ApiError> {
        let method = request.method().clone();
        let path = request.uri().path().to_owned();
        let body = self.send(request).await?;
        serde_json::from_slice(&body).map_err(|error| ApiError::Decode {
            method,
            path,
            error,
        })
    }

    /// Sends `request`; the body of a `2xx`, or the error.
    async fn send(&self, request: http::Request<Vec<u8>>) -> Result<Vec<u8>, ApiError> {
        let method = request.method().clone();
        let path = request.uri().path().to_owned();
        let transport_error = |error| ApiError::Transport {
            method: method.clone(),
            path: path.clone(),
            error,
        };
        let response = self
            .transport
            .send(request)
            .await
            .map_err(transport_error)?;
        let code = response.status();
        let mut stream = response.into_body();
        let mut body = Vec::new();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(transport_error)?;
            if body.len() + chunk.len() > MAX_RESPONSE_BODY {
                return Err(transport_error(TransportError::new(format!(
                    "response body exceeds {MAX_RESPONSE_BODY} bytes"
                ))));
            }
            body.extend_from_slice(&chunk);
        }
        if code.is_success() {
            return Ok(body);
        }
        let mut status: kube_core::Status =
            serde_json::from_slice(&body).unwrap_or_else(|_| kube_core::Status {
                message: String::from_utf8_lossy(&body[..body.len().min(512)]).into_owned(),
                ..kube_core::Status::default()
            });
        if status.code == 0 {
            status.code = code.as_u16();
        }
        if status.reason.is_empty() {
            // client-go's reading of a body without a Status: the reason from the code.
            status.reason = reason_for_code(&method, code.as_u16()).to_owned();
        }
        Err(ApiError::Api {
            method,
            path,
            status: Box::new(status),
        })
    }
}

/// The `Status` reason client-go assumes for an HTTP error code whose body named none
/// (its `NewGenericServerResponse`).
fn reason_for_code(method: &http::Method, code: u16) -> &'static str {
    match code {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        405 => "MethodNotAllowed",
        406 => "NotAcceptable",
        409 if method == http::Method::POST => "AlreadyExists",
        409 => "Conflict",
        415 => "UnsupportedMediaType",
        422 => "Invalid",
        429 => "TooManyRequests",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        500..=599 => "InternalError",
        _ => "",
    }
}
