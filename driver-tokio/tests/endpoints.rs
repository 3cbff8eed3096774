//! The health listener on tokio: `/metrics`, `/healthz` and `/readyz` scraped over loopback
//! from a running controller, the exposition parsed with a real Prometheus text parser.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use reconcile_tokio::{
    Action, Controller, Endpoints, EndpointsServer, KeyMap, PodView, Reconcile, Source,
    default_error_policy,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn pod(name: &str, cell: &str) -> PodView {
    serde_json::from_str(&format!(
        r#"{{"metadata":{{"name":"{name}","namespace":"ns","labels":{{"cell":"{cell}"}}}}}}"#
    ))
    .expect("a pod")
}

/// One HTTP/1.1 GET over a fresh connection: the status and the body.
async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("sent");
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.expect("read");
    let response = String::from_utf8(response).expect("utf-8");
    let (head, body) = response.split_once("\r\n\r\n").expect("a head");
    let status = head
        .split(' ')
        .nth(1)
        .expect("a status")
        .parse()
        .expect("a code");
    (status, body.to_owned())
}

/// A GET whose head is larger than the listener buffers.
fn huge_head() -> Vec<u8> {
    format!(
        "GET /metrics HTTP/1.1\r\nHost: localhost\r\nX-Pad: {}\r\n\r\n",
        "a".repeat(64 * 1024)
    )
    .into_bytes()
}

async fn patiently(what: &str, mut check: impl FnMut() -> bool) {
    tokio::time::timeout(Duration::from_secs(10), async {
        while !check() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("waited 10 s for {what}"));
}

#[tokio::test]
async fn metrics_and_probes_are_served_over_loopback() {
    let controller: Controller<PodView, String> =
        Controller::new(Source::in_process(), KeyMap::by_label("cell")).name("cells");
    let handle = controller.handle();
    let server = EndpointsServer::bind("127.0.0.1:0", Endpoints::new().controller(&handle))
        .await
        .expect("bound");
    let addr = server.local_addr();
    assert_eq!(
        get(addr, "/readyz").await.0,
        503,
        "not ready before the sync"
    );
    assert_eq!(get(addr, "/healthz").await.0, 200);

    handle.replace(vec![pod("a", "x")]).await.expect("pushed");
    let task = tokio::spawn(controller.run(
        |_: Reconcile<PodView, String>, _: Arc<()>| async {
            Ok::<_, std::convert::Infallible>(Action::await_change())
        },
        default_error_policy,
        Arc::new(()),
    ));
    patiently("a reconcile", || {
        handle.metrics().reconcile_time.count() == 1
    })
    .await;
    assert_eq!(get(addr, "/readyz").await, (200, "ok\n".into()));

    let (status, body) = get(addr, "/metrics").await;
    assert_eq!(status, 200);
    let scrape =
        prometheus_parse::Scrape::parse(body.lines().map(|l| Ok(l.to_owned()))).expect("parsed");
    let sample = |name: &str, label: (&str, &str)| {
        scrape
            .samples
            .iter()
            .find(|s| s.metric == name && s.labels.get(label.0) == Some(label.1))
            .unwrap_or_else(|| panic!("{name} with {label:?} in\n{body}"))
    };
    let success = sample("controller_runtime_reconcile_total", ("result", "success"));
    assert_eq!(success.labels.get("controller"), Some("cells"));
    assert_eq!(success.value, prometheus_parse::Value::Counter(1.0));
    assert_eq!(
        sample("workqueue_adds_total", ("name", "cells")).value,
        prometheus_parse::Value::Counter(1.0)
    );
    assert!(matches!(
        sample("workqueue_work_duration_seconds", ("name", "cells")).value,
        prometheus_parse::Value::Histogram(_)
    ));
    assert_eq!(get(addr, "/elsewhere").await.0, 404);

    // Garbage and an oversized head are refused; the listener still answers after them.
    for junk in [b"\x00\xffNOT HTTP\r\n\r\n".to_vec(), huge_head()] {
        let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let _ = stream.write_all(&junk).await;
        let mut response = Vec::new();
        let _ = stream.read_to_end(&mut response).await;
        let head = String::from_utf8_lossy(&response);
        assert!(
            response.is_empty() || head.starts_with("HTTP/1.1 4"),
            "refused: {head}"
        );
    }
    assert_eq!(get(addr, "/healthz").await.0, 200);

    handle.stop();
    task.await.expect("joined").expect("a clean stop");
    assert_eq!(get(addr, "/healthz").await.0, 500);
    drop(server);
}
