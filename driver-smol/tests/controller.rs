//! The smol controller's API with an in-process source: `start` returns once synced,
//! pushes reach reconcile, a graceful-shutdown future stops it, and pushing after the end
//! fails. Every wait is bounded.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reconcile_core::KeyMap;
use reconcile_core::pod::PodView;
use reconcile_smol::{Action, Controller, Source, smol};

type Seen = Arc<Mutex<BTreeMap<String, Vec<String>>>>;

fn pod(name: &str, cell: &str) -> PodView {
    serde_json::from_str(&format!(
        r#"{{"metadata":{{"name":"{name}","namespace":"ns","labels":{{"cell":"{cell}"}}}}}}"#
    ))
    .expect("a pod")
}

async fn within<T>(what: &str, future: impl Future<Output = T>) -> T {
    futures_lite::future::or(async { Some(future.await) }, async {
        smol::Timer::after(Duration::from_secs(10)).await;
        None
    })
    .await
    .unwrap_or_else(|| panic!("timed out after 10s waiting for {what}"))
}

async fn until(what: &str, mut check: impl FnMut() -> bool) {
    within(what, async {
        // Bounded by `within`; 20 ms between looks.
        while !check() {
            smol::Timer::after(Duration::from_millis(20)).await;
        }
    })
    .await;
}

#[test]
fn in_process_pushes_reach_reconcile_and_a_future_stops_it() {
    smol::block_on(async {
        let (tx, rx) = smol::channel::bounded::<()>(1);
        let controller = Controller::new(Source::in_process(), KeyMap::by_label("cell"))
            .concurrency(2)
            .graceful_shutdown_on(async move {
                let _ = rx.recv().await;
            });
        let handle = controller.handle();
        // Queued before the driver runs: it opens the source before reading its inbox.
        handle.replace(vec![pod("x1", "x")]).await.expect("pushed");
        let seen: Seen = Arc::default();
        let running = within(
            "the first sync",
            controller.start(
                |cell: String, members: Vec<Arc<PodView>>, seen: Seen| async move {
                    let names = members
                        .iter()
                        .filter_map(|p| p.metadata.name.as_deref().map(str::to_owned))
                        .collect();
                    seen.lock().unwrap().insert(cell, names);
                    Ok::<_, String>(Action::await_change())
                },
                Arc::clone(&seen),
            ),
        )
        .await
        .expect("started");
        assert!(running.handle().is_synced());
        handle.upsert(pod("x2", "x")).await.expect("pushed");
        handle.upsert(pod("y1", "y")).await.expect("pushed");
        until("x has both pods and y has one", || {
            let seen = seen.lock().unwrap();
            seen.get("x").is_some_and(|m| m.len() == 2)
                && seen.get("y").is_some_and(|m| m.len() == 1)
        })
        .await;
        handle.delete(pod("x1", "x")).await.expect("pushed");
        until("x is down to x2", || {
            seen.lock().unwrap().get("x") == Some(&vec!["x2".to_owned()])
        })
        .await;
        tx.send(()).await.expect("the signal future is alive");
        within("the stop", running.join())
            .await
            .expect("a clean stop");
        assert!(handle.is_stopped());
        assert!(
            handle.upsert(pod("x3", "x")).await.is_err(),
            "pushing after the end fails"
        );
    });
}
