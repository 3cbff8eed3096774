//! Streams as sources: a controller over a stream of objects syncs at once and each object
//! wakes its parent; a stream of store writes syncs on its `Replace` and applies deletes; a
//! stream that opens without one is refused; the source ends with its stream. On tokio with
//! paused time (see `support`).

mod support;

use std::sync::Arc;

use reconcile_core::pod::PodView;
use reconcile_core::{KeyMap, SourceEvent};
use reconcile_engine::{Controller, Recorded, Tape, default_error_policy};
use support::{NoTransport, Paused, Seen, paused, pod, record, stop_cleanly, until, within};

fn members(seen: &Seen, parent: &str) -> Option<Vec<String>> {
    seen.lock().unwrap().get(parent).cloned()
}

fn inputs(tape: &Tape<PodView, String>, kind: &str) -> usize {
    tape.all()
        .iter()
        .filter(|(_, r)| matches!(r, Recorded::Input(input) if input.kind() == kind))
        .count()
}

#[tokio::test(start_paused = true)]
async fn each_object_of_a_stream_wakes_its_parent_and_the_source_ends_with_the_stream() {
    let (tx, rx) = async_channel::bounded::<PodView>(4);
    let tape: Tape<PodView, String> = Tape::default();
    let controller = Controller::<PodView, String, Paused, NoTransport>::for_stream_with(
        paused().await,
        rx,
        KeyMap::by_label("cell"),
    )
    .recorder(tape.clone());
    let handle = controller.handle();
    let seen: Seen = Arc::default();
    let task = tokio::spawn(controller.run(record, default_error_policy, Arc::clone(&seen)));
    within("synced with nothing", handle.synced())
        .await
        .expect("synced");
    tx.send(pod("a", "x")).await.expect("sent");
    tx.send(pod("b", "x")).await.expect("sent");
    tx.send(pod("c", "y")).await.expect("sent");
    until("x and y reconciled with their objects", || {
        members(&seen, "x") == Some(vec!["a".into(), "b".into()])
            && members(&seen, "y") == Some(vec!["c".into()])
    })
    .await;
    assert_eq!(inputs(&tape, "source end"), 0);
    drop(tx);
    until("the source ended with the stream", || {
        inputs(&tape, "source end") == 1
    })
    .await;
    assert_eq!(handle.cache().state().len(), 3, "what is cached stays");
    stop_cleanly(&handle, task).await;
}

#[tokio::test(start_paused = true)]
async fn a_stream_of_store_writes_syncs_on_its_replace_and_applies_deletes() {
    let (tx, rx) = async_channel::bounded::<SourceEvent<PodView>>(4);
    let controller = Controller::<PodView, String, Paused, NoTransport>::for_events_with(
        paused().await,
        rx,
        KeyMap::by_label("cell"),
    );
    let handle = controller.handle();
    let seen: Seen = Arc::default();
    let task = tokio::spawn(controller.run(record, default_error_policy, Arc::clone(&seen)));
    tx.send(SourceEvent::Replace(vec![pod("a", "x"), pod("b", "x")]))
        .await
        .expect("sent");
    within("synced by the replace", handle.synced())
        .await
        .expect("synced");
    tx.send(SourceEvent::Delete(pod("a", "x")))
        .await
        .expect("sent");
    until("x is down to b", || {
        members(&seen, "x") == Some(vec!["b".into()])
    })
    .await;
    stop_cleanly(&handle, task).await;
}

#[tokio::test(start_paused = true)]
async fn a_stream_of_store_writes_that_opens_without_a_replace_is_refused() {
    let events = futures_lite::stream::iter([SourceEvent::Upsert(pod("a", "x"))]);
    let tape: Tape<PodView, String> = Tape::default();
    let controller = Controller::<PodView, String, Paused, NoTransport>::for_events_with(
        paused().await,
        events,
        KeyMap::by_label("cell"),
    )
    .recorder(tape.clone());
    let handle = controller.handle();
    let task = tokio::spawn(controller.run(record, default_error_policy, Seen::default()));
    until("the upsert was fed", || inputs(&tape, "source event") == 1).await;
    tokio::time::sleep(support::PATIENCE / 2).await;
    assert!(!handle.is_synced(), "an upsert first does not sync");
    assert!(handle.cache().state().is_empty());
    stop_cleanly(&handle, task).await;
}

/// A pod in namespace `ns` whose controller owner is `(kind, name)`, if any, labelled
/// `wake=<wake>` when given.
fn child(name: &str, owner: Option<(&str, &str)>, wake: Option<&str>) -> PodView {
    let owners = owner.map_or(String::new(), |(kind, owner)| {
        format!(
            r#","ownerReferences":[{{"apiVersion":"example.com/v1","kind":"{kind}","name":"{owner}","uid":"u-{owner}","controller":true}}]"#
        )
    });
    let labels = wake.map_or(String::new(), |w| format!(r#","labels":{{"wake":"{w}"}}"#));
    serde_json::from_str(&format!(
        r#"{{"metadata":{{"name":"{name}","namespace":"ns"{owners}{labels}}}}}"#
    ))
    .expect("a pod")
}

type Runs = Arc<std::sync::Mutex<Vec<String>>>;

/// A controller of primary objects `p1` and `p2` (keyed by object), recording each run's
/// name; returns its handle, task and runs once it has run both.
async fn owners(
    controller: Controller<PodView, reconcile_core::ObjectKey, Paused, NoTransport>,
) -> (
    reconcile_engine::Handle<PodView, reconcile_core::ObjectKey>,
    tokio::task::JoinHandle<Result<(), reconcile_engine::Error>>,
    Runs,
) {
    let handle = controller.handle();
    let runs: Runs = Arc::default();
    let task =
        tokio::spawn(controller.run(
            |request: reconcile_engine::Reconcile<PodView, reconcile_core::ObjectKey>,
             runs: Runs| async move {
                runs.lock()
                    .unwrap()
                    .push(request.parent().name().to_owned());
                Ok::<_, String>(reconcile_engine::Action::await_change())
            },
            default_error_policy,
            Arc::clone(&runs),
        ));
    handle
        .replace(vec![child("p1", None, None), child("p2", None, None)])
        .await
        .expect("pushed");
    within("synced", handle.synced()).await.expect("synced");
    let count = |name: &str| runs.lock().unwrap().iter().filter(|r| *r == name).count();
    until("the listing ran both", || {
        count("p1") == 1 && count("p2") == 1
    })
    .await;
    (handle, task, runs)
}

fn count(runs: &Runs, name: &str) -> usize {
    runs.lock().unwrap().iter().filter(|r| *r == name).count()
}

/// `owns_stream` (kube-runtime's `owns_stream`): each child a stream yields wakes its
/// controller owner of the controller's kind; a child with no owner or an owner of another
/// kind wakes nothing; nothing is listed or cached for the stream.
#[tokio::test(start_paused = true)]
async fn each_child_of_an_owned_stream_wakes_its_controller_owner() {
    let (tx, rx) = async_channel::bounded::<PodView>(4);
    let controller =
        Controller::<PodView, reconcile_core::ObjectKey, Paused, NoTransport>::with_runtime(
            paused().await,
            reconcile_engine::Source::in_process(),
            KeyMap::by_object(),
        )
        .owns_stream_kind(rx, "Parent.example.com");
    let (handle, task, runs) = owners(controller).await;
    tx.send(child("c1", Some(("Parent", "p1")), None))
        .await
        .expect("sent");
    until("c1 woke p1", || count(&runs, "p1") == 2).await;
    tx.send(child("orphan", None, None)).await.expect("sent");
    tx.send(child("other", Some(("ReplicaSet", "p2")), None))
        .await
        .expect("sent");
    tx.send(child("c2", Some(("Parent", "p2")), None))
        .await
        .expect("sent");
    until("c2 woke p2", || count(&runs, "p2") == 2).await;
    assert_eq!(count(&runs, "p1"), 2, "nothing else woke p1");
    tx.send(child("c3", Some(("Parent", "gone")), None))
        .await
        .expect("sent");
    tx.send(child("c4", Some(("Parent", "p1")), None))
        .await
        .expect("sent");
    until("c4 woke p1; an owner not cached queued nothing", || {
        count(&runs, "p1") == 3
    })
    .await;
    assert_eq!(
        handle.cache().state().len(),
        2,
        "the children are not cached"
    );
    assert_eq!(handle.stats().lists, 0);
    stop_cleanly(&handle, task).await;
}

/// `watches_stream` (kube-runtime's `watches_stream`): each object wakes the primary
/// objects the user's function names, each once however often it is named; the stream
/// ending ends nothing else.
#[tokio::test(start_paused = true)]
async fn each_object_of_a_watched_stream_wakes_what_the_mapper_names() {
    let (tx, rx) = async_channel::bounded::<PodView>(4);
    let controller =
        Controller::<PodView, reconcile_core::ObjectKey, Paused, NoTransport>::with_runtime(
            paused().await,
            reconcile_engine::Source::in_process(),
            KeyMap::by_object(),
        )
        .watches_stream(rx, |o: &PodView| {
            o.metadata
                .labels
                .get("wake")
                .map(|w| {
                    w.split('.')
                        .map(|name| reconcile_core::ObjectKey::new(Some("ns"), name))
                        .collect()
                })
                .unwrap_or_default()
        });
    let (handle, task, runs) = owners(controller).await;
    tx.send(child("cm", None, Some("p1.p2.p1")))
        .await
        .expect("sent");
    until("both woken", || {
        count(&runs, "p1") == 2 && count(&runs, "p2") == 2
    })
    .await;
    tx.send(child("quiet", None, None)).await.expect("sent");
    tx.send(child("marker", None, Some("p2")))
        .await
        .expect("sent");
    until("the marker woke p2", || count(&runs, "p2") == 3).await;
    assert_eq!(
        count(&runs, "p1"),
        2,
        "p1 named twice ran once; quiet woke nothing"
    );
    drop(tx);
    handle
        .reconcile_on(reconcile_core::ObjectKey::new(Some("ns"), "p1"))
        .await
        .expect("the stream's end ends nothing");
    until("p1 woken by hand", || count(&runs, "p1") == 3).await;
    stop_cleanly(&handle, task).await;
}
