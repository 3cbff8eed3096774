//! `ApiClient` sends kube-core's requests and keeps the apiserver's `Status` on failure, so an
//! error policy can tell a conflict from an invalid object.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use k8s_openapi::api::apps::v1::Deployment;
use kube_core::params::{Patch, PatchParams};
use reconcile_engine::{ApiClient, BodyStream, BoxFuture, Transport, TransportError};

/// Answers every request with one canned status and body, and keeps what was sent.
#[derive(Clone)]
struct Canned {
    status: u16,
    body: &'static str,
    sent: Arc<Mutex<Vec<(String, String, String)>>>,
}

impl Canned {
    fn new(status: u16, body: &'static str) -> Self {
        Canned {
            status,
            body,
            sent: Arc::default(),
        }
    }
}

impl Transport for Canned {
    fn send(
        &self,
        request: http::Request<Vec<u8>>,
    ) -> BoxFuture<Result<http::Response<BodyStream>, TransportError>> {
        self.sent.lock().unwrap().push((
            request.method().to_string(),
            request.uri().to_string(),
            String::from_utf8_lossy(request.body()).into_owned(),
        ));
        let chunk: Result<Bytes, TransportError> = Ok(Bytes::from_static(self.body.as_bytes()));
        let body: BodyStream = Box::pin(futures_lite::stream::once(chunk));
        let response = http::Response::builder()
            .status(self.status)
            .body(body)
            .unwrap();
        Box::pin(async move { Ok(response) })
    }
}

const DEPLOYMENT: &str = r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"shop","resourceVersion":"8"},"spec":{"selector":{},"template":{}}}"#;

#[test]
fn a_status_patch_goes_to_the_status_subresource_and_decodes_the_answer() {
    let transport = Canned::new(200, DEPLOYMENT);
    let api = ApiClient::<Deployment, Canned>::namespaced(transport.clone(), "shop");
    let patch = Patch::Merge(serde_json::json!({"status": {"replicas": 2}}));
    let written =
        futures_lite::future::block_on(api.patch_status("web", &PatchParams::default(), &patch))
            .unwrap();
    assert_eq!(written.metadata.resource_version.as_deref(), Some("8"));
    let sent = transport.sent.lock().unwrap();
    assert_eq!(sent[0].0, "PATCH");
    assert!(
        sent[0]
            .1
            .starts_with("/apis/apps/v1/namespaces/shop/deployments/web/status"),
        "{}",
        sent[0].1
    );
    assert_eq!(sent[0].2, r#"{"status":{"replicas":2}}"#);
}

#[test]
fn a_conflict_keeps_the_apiservers_status() {
    let conflict = r#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"the object has been modified","reason":"Conflict","code":409}"#;
    let api = ApiClient::<Deployment, Canned>::namespaced(Canned::new(409, conflict), "shop");
    let error = futures_lite::future::block_on(api.get("web")).unwrap_err();
    assert!(error.is_conflict(), "{error}");
    assert!(!error.is_invalid() && !error.is_not_found());
    assert_eq!(error.status().unwrap().reason, "Conflict");
}

#[test]
fn a_missing_object_is_none_and_a_body_without_status_keeps_the_http_code() {
    let api = ApiClient::<Deployment, Canned>::namespaced(Canned::new(404, "not json"), "shop");
    assert!(
        futures_lite::future::block_on(api.get_opt("web"))
            .unwrap()
            .is_none()
    );
    let api = ApiClient::<Deployment, Canned>::namespaced(Canned::new(422, "bad"), "shop");
    let error = futures_lite::future::block_on(api.get("web")).unwrap_err();
    assert_eq!(error.status().unwrap().code, 422);
    assert!(error.is_invalid());
}

#[test]
fn a_scoped_client_is_namespaced_or_cluster_wide_as_a_key_is() {
    let api = ApiClient::<Deployment, Canned>::scoped(Canned::new(200, DEPLOYMENT), Some("shop"));
    assert_eq!(api.url_path(), "/apis/apps/v1/namespaces/shop/deployments");
    let api = ApiClient::<Deployment, Canned>::scoped(Canned::new(200, DEPLOYMENT), None);
    assert_eq!(api.url_path(), "/apis/apps/v1/deployments");
}
