//! The driver with an in-process source: pushes reach reconcile, `start` returns once a
//! `replace` synced it, a graceful-shutdown future stops it, pushing after the end fails,
//! and messages waiting together coalesce into one reconcile and are taped as fed. On tokio
//! with paused time (see `support`): every wait is a condition bounded in virtual time.

mod support;

use std::sync::{Arc, Mutex};

use reconcile_core::pod::PodView;
use reconcile_core::{Command, KeyMap};
use reconcile_engine::{
    Action, Controller, Reconcile, Recorded, Source, Tape, default_error_policy,
};
use support::{NoTransport, Paused, Seen, names, paused, pod, record, stop_cleanly, until, within};

async fn controller() -> Controller<PodView, String, Paused, NoTransport> {
    Controller::with_runtime(
        paused().await,
        Source::in_process(),
        KeyMap::by_label("cell"),
    )
}

#[tokio::test(start_paused = true)]
async fn in_process_pushes_reach_reconcile() {
    let controller = controller().await;
    let handle = controller.handle();
    // Queued before the driver runs: it opens the source before reading its inbox.
    handle.replace(vec![pod("x1", "x")]).await.expect("pushed");
    let seen: Seen = Arc::default();
    let task = tokio::spawn(controller.run(record, default_error_policy, Arc::clone(&seen)));
    within("synced by the replace", handle.synced())
        .await
        .expect("synced");
    handle.upsert(pod("x2", "x")).await.expect("pushed");
    until("x has both pods", || {
        seen.lock().unwrap().get("x").is_some_and(|m| m.len() == 2)
    })
    .await;
    stop_cleanly(&handle, task).await;
    assert!(
        handle.upsert(pod("x3", "x")).await.is_err(),
        "pushing after the end fails"
    );
}

#[tokio::test(start_paused = true)]
async fn start_returns_once_synced_and_deletes_and_a_future_stop_it() {
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let controller = controller()
        .await
        .concurrency(2)
        .graceful_shutdown_on(async move {
            let _ = rx.await;
        });
    let handle = controller.handle();
    handle.replace(vec![pod("x1", "x")]).await.expect("pushed");
    let seen: Seen = Arc::default();
    let running = within(
        "the first sync",
        controller.start(record, default_error_policy, Arc::clone(&seen)),
    )
    .await
    .expect("started");
    assert!(running.handle().is_synced());
    handle.upsert(pod("x2", "x")).await.expect("pushed");
    handle.upsert(pod("y1", "y")).await.expect("pushed");
    until("x has both pods and y has one", || {
        let seen = seen.lock().unwrap();
        seen.get("x").is_some_and(|m| m.len() == 2) && seen.get("y").is_some_and(|m| m.len() == 1)
    })
    .await;
    handle.delete(pod("x1", "x")).await.expect("pushed");
    until("x is down to x2", || {
        seen.lock().unwrap().get("x") == Some(&vec!["x2".to_owned()])
    })
    .await;
    assert!(!handle.is_stopped(), "running until the signal");
    tx.send(()).expect("the signal future is alive");
    within("the stop by the signal", running.join())
        .await
        .expect("a clean stop");
    assert!(handle.is_stopped());
    assert!(
        handle.upsert(pod("x3", "x")).await.is_err(),
        "pushing after the end fails"
    );
}

type Calls = Arc<Mutex<Vec<(String, Vec<String>)>>>;

#[tokio::test(start_paused = true)]
async fn messages_waiting_together_wake_a_cell_once_and_are_recorded_as_fed() {
    let tape: Tape<PodView, String> = Tape::default();
    let controller = controller().await.recorder(tape.clone());
    let handle = controller.handle();
    // All queued before the driver runs: it feeds them in one turn, then drains once.
    handle.replace(Vec::new()).await.expect("pushed");
    for name in ["a1", "a2", "a3"] {
        handle.upsert(pod(name, "a")).await.expect("pushed");
    }
    let calls: Calls = Arc::default();
    let task = tokio::spawn(controller.run(
        |request: Reconcile<PodView, String>, calls: Calls| async move {
            let (cell, members) = request.into_parts();
            calls.lock().unwrap().push((cell, names(&members)));
            Ok::<_, String>(Action::await_change())
        },
        default_error_policy,
        Arc::clone(&calls),
    ));
    until("a reconciled", || !calls.lock().unwrap().is_empty()).await;
    // Give a second (wrong) reconcile every chance to happen before stopping.
    tokio::time::sleep(support::PATIENCE / 2).await;
    stop_cleanly(&handle, task).await;
    assert_eq!(
        *calls.lock().unwrap(),
        [(
            "a".to_owned(),
            vec!["a1".to_owned(), "a2".into(), "a3".into()]
        )],
        "one reconcile saw the whole burst"
    );
    let records = tape.all();
    let inputs: Vec<&str> = records
        .iter()
        .filter_map(|(_, r)| match r {
            Recorded::Input(input) => Some(input.kind()),
            Recorded::Command(_) => None,
        })
        .collect();
    assert_eq!(
        inputs,
        [
            "start",
            "source event",
            "source event",
            "source event",
            "source event",
            "reconcile outcome",
            // A stop request drains by default; nothing runs, so it stops at once.
            "drain"
        ]
    );
    let reconciles: Vec<_> = records
        .iter()
        .filter_map(|(_, r)| match r {
            Recorded::Command(Command::Reconcile {
                parent, members, ..
            }) => Some((parent.clone(), members.len())),
            _ => None,
        })
        .collect();
    assert_eq!(
        reconciles,
        [("a".to_owned(), 0)],
        "a reconcile is taped without its members"
    );
    assert!(!tape.truncated());
}

type Finished = Arc<Mutex<Vec<String>>>;

/// A reconcile that takes `secs` seconds of (virtual) time, then notes its cell.
async fn slow(request: Reconcile<PodView, String>, done: Finished) -> Result<Action, String> {
    let (cell, _) = request.into_parts();
    let secs = if cell == "slow" { 20 } else { 5 };
    tokio::time::sleep(std::time::Duration::from_secs(secs)).await;
    done.lock().unwrap().push(cell);
    Ok(Action::await_change())
}

#[tokio::test(start_paused = true)]
async fn a_graceful_stop_lets_running_reconciles_finish_and_cancels_them_past_its_timeout() {
    use reconcile_engine::Shutdown;
    let tape: Tape<PodView, String> = Tape::default();
    let controller = controller()
        .await
        .concurrency(2)
        .shutdown(Shutdown::FinishRunning {
            up_to: std::time::Duration::from_secs(10),
        })
        .recorder(tape.clone());
    let handle = controller.handle();
    handle
        .replace(vec![pod("q1", "quick"), pod("s1", "slow")])
        .await
        .expect("pushed");
    let done: Finished = Arc::default();
    let task = tokio::spawn(controller.run(slow, default_error_policy, Arc::clone(&done)));
    until("both running", || {
        tape.all()
            .iter()
            .filter(|(_, r)| matches!(r, Recorded::Command(Command::Reconcile { .. })))
            .count()
            == 2
    })
    .await;
    let stopped_at = tokio::time::Instant::now();
    stop_cleanly(&handle, task).await;
    // The 5 s reconcile finished; the 20 s one was cancelled at the 10 s timeout.
    assert_eq!(*done.lock().unwrap(), ["quick"]);
    let waited = stopped_at.elapsed();
    assert!(
        waited >= std::time::Duration::from_secs(10) && waited < std::time::Duration::from_secs(11),
        "{waited:?}"
    );
    let cancelled = tape
        .all()
        .iter()
        .filter(|(_, r)| matches!(r, Recorded::Command(Command::CancelReconcile { .. })))
        .count();
    assert_eq!(cancelled, 1);
}

#[tokio::test(start_paused = true)]
async fn cancel_running_stops_at_once() {
    use reconcile_engine::Shutdown;
    let controller = controller().await.shutdown(Shutdown::CancelRunning);
    let handle = controller.handle();
    handle
        .replace(vec![pod("q1", "quick")])
        .await
        .expect("pushed");
    let done: Finished = Arc::default();
    let task = tokio::spawn(controller.run(slow, default_error_policy, Arc::clone(&done)));
    within("synced", handle.synced()).await.expect("synced");
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    let stopped_at = tokio::time::Instant::now();
    stop_cleanly(&handle, task).await;
    assert!(stopped_at.elapsed() < std::time::Duration::from_secs(1));
    assert!(done.lock().unwrap().is_empty(), "cancelled, not finished");
}

#[tokio::test(start_paused = true)]
async fn a_transform_changes_in_process_pushes_before_the_cache_and_the_reconcile() {
    let controller: Controller<PodView, String, Paused, NoTransport> = Controller::with_runtime(
        paused().await,
        Source::<PodView, NoTransport>::in_process()
            .modify(|pod: &mut PodView| pod.metadata.uid = None)
            .modify(|pod: &mut PodView| {
                pod.metadata.annotations = reconcile_core::StringMap::new();
            }),
        KeyMap::by_label("cell"),
    );
    let handle = controller.handle();
    let cache = controller.cache();
    let annotated = |name: &str| -> PodView {
        serde_json::from_str(&format!(
            r#"{{"metadata":{{"name":"{name}","namespace":"ns","uid":"u","labels":{{"cell":"x"}},"annotations":{{"note":"big"}}}}}}"#
        ))
        .expect("a pod")
    };
    handle.replace(vec![annotated("x1")]).await.expect("pushed");
    let seen: Arc<Mutex<Vec<(usize, bool)>>> = Arc::default();
    let task = tokio::spawn(controller.run(
        |request: Reconcile<PodView, String>, seen: Arc<Mutex<Vec<(usize, bool)>>>| async move {
            let members = request.members();
            let stripped = members
                .iter()
                .all(|p| p.metadata.annotations.is_empty() && p.metadata.uid.is_none());
            seen.lock().unwrap().push((members.len(), stripped));
            Ok::<_, String>(Action::await_change())
        },
        default_error_policy,
        Arc::clone(&seen),
    ));
    within("synced by the replace", handle.synced())
        .await
        .expect("synced");
    handle.upsert(annotated("x2")).await.expect("pushed");
    until("x has both pods", || {
        seen.lock().unwrap().last().is_some_and(|(n, _)| *n == 2)
    })
    .await;
    assert!(seen.lock().unwrap().iter().all(|(_, stripped)| *stripped));
    let state = cache.state();
    assert_eq!(state.len(), 2);
    assert!(
        state
            .iter()
            .all(|p| p.metadata.annotations.is_empty() && p.metadata.uid.is_none())
    );
    stop_cleanly(&handle, task).await;
}
