//! A protobuf source (`Source::protobuf`) against a scripted in-memory apiserver that
//! answers in Kubernetes protobuf, as the real one does for built-in types: the LIST body
//! enveloped after `k8s\0`, the WATCH as length-prefixed frames, both cut into small chunks;
//! and one that answers in JSON (as it does for custom resources), which is read as JSON.
//! On tokio with paused time (see `support`).

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures_lite::StreamExt;
use prost::Message as _;
use reconcile_core::pod::PodView;
use reconcile_core::protobuf::messages as m;
use reconcile_core::{ConfigError, KeyMap};
use reconcile_engine::transport::ACCEPT_PROTOBUF;
use reconcile_engine::{
    Action, BodyStream, BoxFuture, Controller, Error, Reconcile, Source, Transport, TransportError,
    default_error_policy,
};
use support::{Paused, Seen, names, paused, stop_cleanly, until, within};

fn pod(name: &str, rv: &str, cell: &str) -> m::Pod {
    m::Pod {
        metadata: Some(m::ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            resource_version: Some(rv.into()),
            labels: [("cell".to_owned(), cell.to_owned())].into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn list_body() -> Vec<u8> {
    let list = m::PodList {
        metadata: Some(m::ListMeta {
            resource_version: Some("10".into()),
            ..Default::default()
        }),
        items: vec![pod("p1", "5", "a"), pod("p2", "6", "b")],
    };
    m::envelope("PodList", list.encode_to_vec())
}

fn watch_body() -> Vec<u8> {
    let added = m::watch_frame(
        "ADDED",
        m::envelope("Pod", pod("p3", "11", "a").encode_to_vec()),
    );
    let bookmark = m::watch_frame(
        "BOOKMARK",
        m::envelope("Pod", pod("", "15", "").encode_to_vec()),
    );
    let mut body = m::length_prefixed(&added);
    body.extend(m::length_prefixed(&bookmark));
    body
}

const JSON_LIST: &str = r#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"10"},"items":[
  {"metadata":{"name":"p1","namespace":"ns","resourceVersion":"5","labels":{"cell":"a"}}},
  {"metadata":{"name":"p2","namespace":"ns","resourceVersion":"6","labels":{"cell":"b"}}}]}"#;

const JSON_WATCH: &str = concat!(
    r#"{"type":"ADDED","object":{"metadata":{"name":"p3","namespace":"ns","resourceVersion":"11","labels":{"cell":"a"}}}}"#,
    "\n",
    r#"{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"15"}}}"#,
    "\n"
);

/// Answers in protobuf (or JSON when `json`), in chunks of `chunk` bytes, and records the
/// `Accept` of each request.
#[derive(Clone, Default)]
struct Scripted {
    json: bool,
    chunk: usize,
    /// Ends each WATCH inside its second frame.
    truncate_watch: bool,
    accepts: Arc<Mutex<Vec<String>>>,
}

impl Transport for Scripted {
    fn send(
        &self,
        request: http::Request<Vec<u8>>,
    ) -> BoxFuture<Result<http::Response<BodyStream>, TransportError>> {
        let watch = request.uri().query().unwrap_or("").contains("watch=true");
        self.accepts.lock().unwrap().push(
            request
                .headers()
                .get(http::header::ACCEPT)
                .map(|v| v.to_str().unwrap().to_owned())
                .unwrap_or_default(),
        );
        let (body, content_type) = match (self.json, watch) {
            (false, false) => (list_body(), "application/vnd.kubernetes.protobuf"),
            (false, true) => (
                watch_body(),
                "application/vnd.kubernetes.protobuf;stream=watch",
            ),
            (true, false) => (JSON_LIST.as_bytes().to_vec(), "application/json"),
            (true, true) => (JSON_WATCH.as_bytes().to_vec(), "application/json"),
        };
        let body = if watch && self.truncate_watch {
            let first = 4 + u32::from_be_bytes([body[0], body[1], body[2], body[3]]) as usize;
            body[..first + 6].to_vec()
        } else {
            body
        };
        let chunks: Vec<Result<Bytes, TransportError>> = body
            .chunks(self.chunk.max(1))
            .map(|c| Ok(Bytes::copy_from_slice(c)))
            .collect();
        let body: BodyStream = if watch && !self.truncate_watch {
            Box::pin(futures_lite::stream::iter(chunks).chain(futures_lite::stream::pending()))
        } else {
            Box::pin(futures_lite::stream::iter(chunks))
        };
        Box::pin(async move {
            Ok(http::Response::builder()
                .status(200)
                .header(http::header::CONTENT_TYPE, content_type)
                .body(body)
                .expect("a response"))
        })
    }
}

async fn controller(transport: Scripted) -> Controller<PodView, String, Paused, Scripted> {
    let source = Source::pods(transport, Some("ns")).timeout(1).protobuf();
    Controller::with_runtime(paused().await, source, KeyMap::by_label("cell"))
        .retry_delay(Duration::from_millis(20))
}

async fn lists_and_watches(transport: Scripted) {
    let accepts = Arc::clone(&transport.accepts);
    let seen: Seen = Arc::default();
    let running = within(
        "the first sync",
        controller(transport).await.start(
            |request: Reconcile<PodView, String>, seen: Seen| async move {
                let (cell, members) = request.into_parts();
                seen.lock().unwrap().insert(cell, names(&members));
                Ok::<_, String>(Action::await_change())
            },
            default_error_policy,
            Arc::clone(&seen),
        ),
    )
    .await
    .expect("synced");
    until("p3 joined cell a", || {
        seen.lock().unwrap().get("a").is_some_and(|m| m.len() == 2)
    })
    .await;
    assert_eq!(seen.lock().unwrap()["a"], ["p1", "p3"]);
    assert_eq!(seen.lock().unwrap()["b"], ["p2"]);
    let handle = running.handle().clone();
    until("the cursor moved to the bookmark", || {
        handle.cursor().as_deref() == Some("15")
    })
    .await;
    assert_eq!(handle.stats().frames_skipped, 0);
    within("the stop", running.shutdown())
        .await
        .expect("a clean stop");
    let accepts = accepts.lock().unwrap();
    assert!(accepts.len() >= 2);
    assert!(accepts.iter().all(|a| a == ACCEPT_PROTOBUF), "{accepts:?}");
}

#[tokio::test(start_paused = true)]
async fn a_protobuf_list_and_watch_in_small_chunks() {
    // 3 bytes at a time: chunk edges fall inside length prefixes, keys and strings.
    for chunk in [3, 4096] {
        lists_and_watches(Scripted {
            chunk,
            ..Scripted::default()
        })
        .await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_json_answer_to_a_protobuf_request_is_read_as_json() {
    lists_and_watches(Scripted {
        json: true,
        chunk: 7,
        ..Scripted::default()
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn protobuf_on_a_type_without_a_decoder_is_a_config_error() {
    // A DynamicObject's kind is known only at run time (and a custom resource is served in
    // JSON only): no protobuf decoder.
    type Meta = kube_core::DynamicObject;
    let resource = kube_core::ApiResource {
        group: "example.com".into(),
        version: "v1".into(),
        api_version: "example.com/v1".into(),
        kind: "Widget".into(),
        plural: "widgets".into(),
    };
    let source =
        Source::<Meta, Scripted>::namespaced_with(Scripted::default(), "ns", &resource).protobuf();
    let controller = Controller::with_runtime(
        paused().await,
        source,
        KeyMap::<Meta, String>::by_label("cell"),
    );
    let result = controller
        .start(
            |_: Reconcile<Meta, String>, _: Arc<()>| async {
                Ok::<_, String>(Action::await_change())
            },
            default_error_policy,
            Arc::new(()),
        )
        .await;
    match result {
        Err(Error::Config(ConfigError::NoProtobuf { object, .. })) => {
            assert!(object.contains("DynamicObject"), "{object}");
        }
        Err(other) => panic!("{other}"),
        Ok(_) => panic!("started"),
    }
}

#[tokio::test(start_paused = true)]
async fn a_watch_that_ends_inside_a_frame_is_a_transport_error_and_reopens() {
    let transport = Scripted {
        chunk: 5,
        truncate_watch: true,
        ..Scripted::default()
    };
    let accepts = Arc::clone(&transport.accepts);
    let controller = controller(transport).await;
    let handle = controller.handle();
    let task = tokio::spawn(controller.run(
        |_: Reconcile<PodView, String>, _: Arc<()>| async {
            Ok::<_, String>(Action::await_change())
        },
        default_error_policy,
        Arc::new(()),
    ));
    // The whole first frame was applied; the cut one was not, and the watch reopened.
    until("the watch reopened twice", || handle.stats().watches >= 3).await;
    assert_eq!(handle.cursor().as_deref(), Some("11"));
    assert_eq!(handle.stats().frames_skipped, 0);
    stop_cleanly(&handle, task).await;
    assert!(accepts.lock().unwrap().len() >= 4);
}
