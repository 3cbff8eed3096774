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
