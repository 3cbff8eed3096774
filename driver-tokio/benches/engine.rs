//! Throughput of the driver's choreography: watch lines from an in-memory transport
//! through the inbox, the core and the reconcile tasks (no network).
//!
//! `cargo bench -p reconcile-tokio --bench engine`

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use futures_lite::StreamExt;
use reconcile_core::KeyMap;
use reconcile_core::pod::PodView;
use reconcile_tokio::engine::{
    BodyStream, BoxFuture, Controller, Source, Transport, TransportError,
};
use reconcile_tokio::{Action, Reconcile, TokioRuntime, default_error_policy};

const LIST: &str =
    r#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]}"#;

/// Answers the LIST with nothing and the WATCH with `frames`, sent in 64 KiB chunks.
#[derive(Clone)]
struct Canned {
    frames: Arc<Vec<Bytes>>,
}

impl Transport for Canned {
    fn send(
        &self,
        request: http::Request<Vec<u8>>,
    ) -> BoxFuture<Result<http::Response<BodyStream>, TransportError>> {
        let watch = request.uri().query().unwrap_or("").contains("watch=true");
        let body: BodyStream = if watch {
            let chunks: Vec<Result<Bytes, TransportError>> =
                self.frames.iter().cloned().map(Ok).collect();
            Box::pin(futures_lite::stream::iter(chunks).chain(futures_lite::stream::pending()))
        } else {
            Box::pin(futures_lite::stream::once(Ok(Bytes::from_static(
                LIST.as_bytes(),
            ))))
        };
        Box::pin(async move {
            Ok(http::Response::builder()
                .status(200)
                .body(body)
                .expect("a response"))
        })
    }
}

fn frames(n: usize) -> Vec<Bytes> {
    let mut chunks = Vec::new();
    let mut chunk = String::new();
    for i in 0..n {
        chunk.push_str(&format!(
            r#"{{"type":"ADDED","object":{{"kind":"Pod","apiVersion":"v1","metadata":{{"name":"pod-{i}","namespace":"ns","uid":"u-{i}","resourceVersion":"{}","labels":{{"app":"bench","cell":"cell-{}"}}}},"spec":{{"nodeName":"node-1","containers":[{{"name":"app","image":"img"}}]}},"status":{{"phase":"Running","conditions":[{{"type":"Ready","status":"True"}}]}}}}}}"#,
            i + 2,
            i % 100
        ));
        chunk.push('\n');
        if chunk.len() > 64 << 10 {
            chunks.push(Bytes::from(std::mem::take(&mut chunk)));
        }
    }
    chunks.push(Bytes::from(chunk));
    chunks
}

fn watch_frames(c: &mut Criterion) {
    const N: usize = 10_000;
    let canned = Canned {
        frames: Arc::new(frames(N)),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let mut group = c.benchmark_group("driver");
    group.throughput(Throughput::Elements(N as u64));
    group.sample_size(10);
    group.bench_function("watch_frames_to_reconcile_10k", |b| {
        b.iter(|| {
            runtime.block_on(async {
                let source = Source::pods(canned.clone(), Some("ns"));
                let controller: Controller<PodView, String, TokioRuntime, Canned> =
                    Controller::with_runtime(TokioRuntime, source, KeyMap::by_label("cell"))
                        .concurrency(4);
                let running = controller
                    .start(
                        |request: Reconcile<PodView, String>, _: Arc<()>| async move {
                            let (_, _) = request.into_parts();
                            Ok::<_, String>(Action::await_change())
                        },
                        default_error_policy,
                        Arc::new(()),
                    )
                    .await
                    .expect("synced");
                let handle = running.handle().clone();
                while handle.stats().frames < N as u64 {
                    tokio::time::sleep(Duration::from_micros(200)).await;
                }
                running.shutdown().await.expect("a clean stop");
            });
        });
    });
    group.finish();
}

criterion_group!(benches, watch_frames);
criterion_main!(benches);
