//! What a reconcile gets and what it returns, on an in-process source: the whole cache as of
//! dispatch (never a later write), a live `Cache` reader from any task, the error policy
//! choosing the follow-up of a typed error, and kube-runtime's object-keyed model, where the
//! reconcile of a deleted object still runs. On tokio with paused time (see `support`).

// Shared by several test binaries; this one uses part of it.
#[allow(dead_code)]
mod support;

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reconcile_core::pod::PodView;
use reconcile_core::{KeyMap, ObjectKey};
use reconcile_engine::{Action, Controller, Reconcile, Source, default_error_policy};
use support::{NoTransport, Paused, paused, stop_cleanly, until, within};

fn pod(name: &str, cell: &str, rv: u32) -> PodView {
    serde_json::from_str(&format!(
        r#"{{"metadata":{{"name":"{name}","namespace":"ns","resourceVersion":"{rv}","labels":{{"cell":"{cell}"}}}}}}"#
    ))
    .expect("a pod")
}

fn key(name: &str) -> ObjectKey {
    ObjectKey::new(Some("ns"), name)
}

async fn by_cell() -> Controller<PodView, String, Paused, NoTransport> {
    Controller::with_runtime(
        paused().await,
        Source::in_process(),
        KeyMap::by_label("cell"),
    )
}

#[tokio::test(start_paused = true)]
async fn a_reconcile_reads_the_whole_cache_as_of_its_dispatch_and_readers_see_it_live() {
    let controller = by_cell().await;
    let handle = controller.handle();
    let cache = controller.cache();
    assert!(!cache.is_ready());
    handle
        .replace(vec![pod("a1", "a", 1), pod("b1", "b", 1)])
        .await
        .expect("pushed");
    // Each reconcile of `a` reads cell `b` from its snapshot, then again after `b` changed.
    type Reads = Arc<Mutex<Vec<(Vec<String>, Vec<String>)>>>;
    let reads: Reads = Arc::default();
    let (gate_tx, gate_rx) = async_channel::bounded::<()>(1);
    let ctx = Arc::new((Arc::clone(&reads), gate_rx));
    let task =
        tokio::spawn(
            controller.run(
                |req: Reconcile<PodView, String>,
                 ctx: Arc<(Reads, async_channel::Receiver<()>)>| async move {
                    let names = |pods: Vec<Arc<PodView>>| -> Vec<String> {
                        pods.iter()
                            .map(|p| p.metadata.name.as_deref().unwrap_or("").to_owned())
                            .collect()
                    };
                    if req.parent() == "a" {
                        let before = names(req.cache().members(&"b".to_owned()));
                        // Hold the run until the test has changed `b`.
                        let _ = ctx.1.recv().await;
                        let after = names(req.cache().members(&"b".to_owned()));
                        ctx.0.lock().unwrap().push((before, after));
                    }
                    Ok::<_, String>(Action::await_change())
                },
                default_error_policy,
                ctx,
            ),
        );
    within("the cache is ready", cache.wait_until_ready())
        .await
        .expect("ready");
    assert_eq!(cache.state().len(), 2);
    assert!(cache.get(&key("a1")).is_some());
    // While `a` runs (held at the gate), `b` gains a pod.
    handle.upsert(pod("b2", "b", 2)).await.expect("pushed");
    until("the live reader sees b2", || {
        cache.get(&key("b2")).is_some()
    })
    .await;
    assert_eq!(cache.members(&"b".to_owned()).len(), 2);
    gate_tx.send(()).await.expect("the reconcile waits");
    until("a's reconcile finished", || {
        !reads.lock().unwrap().is_empty()
    })
    .await;
    assert_eq!(
        reads.lock().unwrap()[0],
        (vec!["b1".to_owned()], vec!["b1".to_owned()]),
        "the snapshot is the cache as of dispatch, not later"
    );
    let snapshot = cache.snapshot();
    handle.delete(pod("b1", "b", 3)).await.expect("pushed");
    until("the live reader sees b1 gone", || {
        cache.get(&key("b1")).is_none()
    })
    .await;
    assert!(
        snapshot.get(&key("b1")).is_some(),
        "a snapshot never changes"
    );
    stop_cleanly(&handle, task).await;
}

#[tokio::test(start_paused = true)]
async fn a_reader_waiting_for_readiness_hears_the_end() {
    let controller = by_cell().await;
    let handle = controller.handle();
    let cache = handle.cache();
    let task = tokio::spawn(controller.run(
        |_: Reconcile<PodView, String>, _: Arc<()>| async move {
            Ok::<_, String>(Action::await_change())
        },
        default_error_policy,
        Arc::new(()),
    ));
    let waiting = tokio::spawn(async move { cache.wait_until_ready().await });
    // Never synced: no replace was pushed.
    stop_cleanly(&handle, task).await;
    let result = within("the waiting reader", waiting).await.expect("joined");
    assert!(result.is_err(), "never ready");
}

/// A typed reconcile error: the policy tells a conflict from a bad spec.
#[derive(Debug)]
enum Failure {
    Conflict,
    BadSpec,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Failure::Conflict => "conflict",
            Failure::BadSpec => "bad spec",
        })
    }
}

#[tokio::test(start_paused = true)]
async fn the_error_policy_sees_the_typed_error_and_chooses_what_follows() {
    let controller = by_cell()
        .await
        .backoff(Duration::from_secs(1), Duration::from_secs(60));
    let handle = controller.handle();
    handle
        .replace(vec![pod("c1", "conflict", 1), pod("s1", "spec", 1)])
        .await
        .expect("pushed");
    type Runs = Arc<Mutex<Vec<(String, u32, tokio::time::Instant)>>>;
    let runs: Runs = Arc::default();
    let policy_saw: Arc<Mutex<Vec<String>>> = Arc::default();
    let seen = Arc::clone(&policy_saw);
    let task = tokio::spawn(controller.run(
        |req: Reconcile<PodView, String>, runs: Runs| async move {
            runs.lock().unwrap().push((
                req.parent().clone(),
                req.attempt(),
                tokio::time::Instant::now(),
            ));
            Err(match req.parent().as_str() {
                "conflict" => Failure::Conflict,
                _ => Failure::BadSpec,
            })
        },
        move |req: &Reconcile<PodView, String>, error: &Failure, _: Runs| {
            seen.lock()
                .unwrap()
                .push(format!("{} {error}", req.parent()));
            match error {
                // Retry soon, at a fixed pace.
                Failure::Conflict => Action::requeue(Duration::from_secs(5)),
                // Retrying cannot help: wait for the object to change.
                Failure::BadSpec => Action::await_change(),
            }
        },
        Arc::clone(&runs),
    ));
    until("conflict ran three times", || {
        runs.lock()
            .unwrap()
            .iter()
            .filter(|r| r.0 == "conflict")
            .count()
            >= 3
    })
    .await;
    let runs_of = |parent: &str| -> Vec<(u32, tokio::time::Instant)> {
        runs.lock()
            .unwrap()
            .iter()
            .filter(|r| r.0 == parent)
            .map(|r| (r.1, r.2))
            .collect()
    };
    let conflict = runs_of("conflict");
    assert_eq!(conflict[1].1 - conflict[0].1, Duration::from_secs(5));
    assert_eq!(conflict[2].1 - conflict[1].1, Duration::from_secs(5));
    assert_eq!(runs_of("spec").len(), 1, "await change: no retry");
    assert!(handle.stats().reconcile_errors >= 4);
    // A change to the bad spec runs it again.
    handle.upsert(pod("s1", "spec", 2)).await.expect("pushed");
    until("spec ran again", || runs_of("spec").len() == 2).await;
    assert!(
        policy_saw
            .lock()
            .unwrap()
            .iter()
            .any(|s| s == "spec bad spec")
    );
    stop_cleanly(&handle, task).await;
}

#[tokio::test(start_paused = true)]
async fn object_keyed_reconciles_run_for_deleted_objects_too() {
    let controller: Controller<PodView, ObjectKey, Paused, NoTransport> =
        Controller::with_runtime(paused().await, Source::in_process(), KeyMap::by_object());
    let handle = controller.handle();
    handle
        .replace(vec![pod("a", "x", 1), pod("b", "x", 1)])
        .await
        .expect("pushed");
    type Seen = Arc<Mutex<Vec<(String, Option<String>)>>>;
    let seen: Seen = Arc::default();
    let task = tokio::spawn(controller.run(
        |req: Reconcile<PodView, ObjectKey>, seen: Seen| async move {
            let version = req
                .object()
                .and_then(|p| p.metadata.resource_version.as_deref().map(str::to_owned));
            seen.lock()
                .unwrap()
                .push((req.parent().to_string(), version));
            Ok::<_, String>(Action::await_change())
        },
        default_error_policy,
        Arc::clone(&seen),
    ));
    until("both objects reconciled", || {
        seen.lock().unwrap().len() == 2
    })
    .await;
    assert_eq!(
        seen.lock().unwrap().clone(),
        [
            ("ns/a".to_owned(), Some("1".to_owned())),
            ("ns/b".to_owned(), Some("1".to_owned()))
        ]
    );
    handle.delete(pod("a", "x", 2)).await.expect("pushed");
    until("the deleted object reconciled", || {
        seen.lock().unwrap().len() == 3
    })
    .await;
    assert_eq!(seen.lock().unwrap()[2], ("ns/a".to_owned(), None));
    stop_cleanly(&handle, task).await;
}

#[tokio::test(start_paused = true)]
async fn a_start_dropped_before_the_sync_stops_what_it_spawned() {
    let controller = by_cell().await;
    let handle = controller.handle();
    // No replace is ever pushed, so the first sync never comes.
    let start = controller.start(
        |_: Reconcile<PodView, String>, _: Arc<()>| async move {
            Ok::<_, String>(Action::await_change())
        },
        default_error_policy,
        Arc::new(()),
    );
    let gave_up = tokio::time::timeout(Duration::from_secs(1), start).await;
    assert!(gave_up.is_err(), "never synced");
    within("the spawned controller stops", handle.stopped())
        .await
        .expect("a clean stop");
}

#[tokio::test(start_paused = true)]
async fn a_reconcile_on_trigger_runs_the_parent_of_one_object_again() {
    let (trigger_tx, trigger_rx) = async_channel::bounded::<ObjectKey>(1);
    let controller = by_cell().await.reconcile_on(trigger_rx);
    let handle = controller.handle();
    handle
        .replace(vec![pod("a1", "a", 1), pod("b1", "b", 1)])
        .await
        .expect("pushed");
    let runs: Arc<Mutex<Vec<String>>> = Arc::default();
    let task = tokio::spawn(controller.run(
        |req: Reconcile<PodView, String>, runs: Arc<Mutex<Vec<String>>>| async move {
            runs.lock().unwrap().push(req.parent().clone());
            Ok::<_, String>(Action::await_change())
        },
        default_error_policy,
        Arc::clone(&runs),
    ));
    until("both cells ran once", || runs.lock().unwrap().len() == 2).await;
    trigger_tx
        .send(key("b1"))
        .await
        .expect("the trigger is read");
    until("cell b ran again", || runs.lock().unwrap().len() == 3).await;
    // An object the cache lacks wakes nothing; the next trigger, from the handle, runs `a`
    // alone after it.
    handle.reconcile_on(key("nobody")).await.expect("running");
    handle.reconcile_on(key("a1")).await.expect("running");
    until("then cell a", || runs.lock().unwrap().len() == 4).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(runs.lock().unwrap()[2..], ["b".to_owned(), "a".to_owned()]);
    stop_cleanly(&handle, task).await;
}

#[tokio::test(start_paused = true)]
async fn a_reconcile_all_trigger_runs_every_parent_again() {
    let (trigger_tx, trigger_rx) = async_channel::bounded::<()>(1);
    let controller = by_cell().await.reconcile_all_on(trigger_rx);
    let handle = controller.handle();
    handle
        .replace(vec![pod("a1", "a", 1), pod("b1", "b", 1)])
        .await
        .expect("pushed");
    let runs: Arc<Mutex<Vec<String>>> = Arc::default();
    let task = tokio::spawn(controller.run(
        |req: Reconcile<PodView, String>, runs: Arc<Mutex<Vec<String>>>| async move {
            runs.lock().unwrap().push(req.parent().clone());
            Ok::<_, String>(Action::await_change())
        },
        default_error_policy,
        Arc::clone(&runs),
    ));
    until("both cells ran once", || runs.lock().unwrap().len() == 2).await;
    trigger_tx.send(()).await.expect("the trigger is read");
    until("both cells ran again", || runs.lock().unwrap().len() == 4).await;
    assert_eq!(runs.lock().unwrap()[2..], ["a".to_owned(), "b".to_owned()]);
    handle.reconcile_all().await.expect("running");
    until("and once more from the handle", || {
        runs.lock().unwrap().len() == 6
    })
    .await;
    stop_cleanly(&handle, task).await;
}

#[tokio::test(start_paused = true)]
async fn the_result_stream_yields_each_run_and_drops_past_its_bound_without_blocking() {
    use futures_lite::StreamExt;
    use reconcile_engine::results::RESULTS_CAPACITY;
    let controller = by_cell().await;
    let handle = controller.handle();
    handle
        .replace(vec![pod("a1", "a", 1), pod("b1", "b", 1)])
        .await
        .expect("pushed");
    let mut results = controller.run_stream(
        |req: Reconcile<PodView, String>, _: Arc<()>| async move {
            if req.parent() == "b" {
                Err("b is broken".to_owned())
            } else {
                Ok(Action::requeue(Duration::from_secs(3600)))
            }
        },
        |_: &Reconcile<PodView, String>, _: &String, _: Arc<()>| Action::await_change(),
        Arc::new(()),
    );
    let mut first = Vec::new();
    for _ in 0..2 {
        first.push(within("a result", results.next()).await.expect("a result"));
    }
    first.sort_by(|x, y| x.parent.cmp(&y.parent));
    assert_eq!(first[0].parent, "a");
    assert!(first[0].is_ok(), "{:?}", first[0]);
    assert_eq!(first[1].parent, "b");
    assert_eq!(first[1].error(), Some("b is broken"));
    assert_eq!(results.dropped(), 0);
    // Unread, the stream fills; the controller goes on, and what does not fit is counted.
    let more = RESULTS_CAPACITY + 10;
    for n in 0..more {
        handle
            .upsert(pod("a1", "a", 2 + n as u32))
            .await
            .expect("pushed");
        until("the update is reconciled", || {
            handle.metrics().reconcile_total.iter().sum::<u64>() >= 3 + n as u64
        })
        .await;
    }
    assert_eq!(results.dropped(), 10);
    let mut read = 0;
    while let Ok(Some(_)) = tokio::time::timeout(Duration::from_millis(1), results.next()).await {
        read += 1;
    }
    assert_eq!(read, RESULTS_CAPACITY);
    // Dropping the stream stops the controller.
    drop(results);
    within("stopped", handle.stopped())
        .await
        .expect("a clean stop");
}

#[tokio::test(start_paused = true)]
async fn a_debounced_controller_runs_a_burst_of_updates_once() {
    let controller = by_cell().await.debounce(Duration::from_secs(2));
    let handle = controller.handle();
    handle
        .replace(vec![pod("a1", "a", 1)])
        .await
        .expect("pushed");
    let runs: Arc<Mutex<Vec<String>>> = Arc::default();
    let task = tokio::spawn(controller.run(
        |req: Reconcile<PodView, String>, runs: Arc<Mutex<Vec<String>>>| async move {
            runs.lock().unwrap().push(req.parent().clone());
            Ok::<_, String>(Action::await_change())
        },
        default_error_policy,
        Arc::clone(&runs),
    ));
    until("a ran once", || runs.lock().unwrap().len() == 1).await;
    // Five updates 1 s apart, each inside the window of the one before: one run, 2 s after
    // the last.
    for rv in 2..7 {
        handle.upsert(pod("a1", "a", rv)).await.expect("pushed");
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(
            runs.lock().unwrap().len(),
            1,
            "nothing runs inside the window"
        );
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(runs.lock().unwrap().len(), 2);
    stop_cleanly(&handle, task).await;
}
