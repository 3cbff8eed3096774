//! Shared sources and the standalone reflector: one source and one cache feeding several
//! controllers, each with its own key map; a controller that joins after the sync sees the
//! snapshot then every later change; a subscriber that falls a whole buffer behind is cut
//! off and resubscribes with a fresh snapshot; a reflector alone is a cache with
//! `wait_until_ready`. On tokio with paused time (see `support`).

mod support;

use std::sync::Arc;

use reconcile_core::pod::PodView;
use reconcile_core::{KeyMap, ObjectKey};
use reconcile_engine::{
    Action, Controller, Reconcile, Recorded, Reflector, Source, Tape, Whole, default_error_policy,
};
use support::{NoTransport, Paused, Seen, names, paused, stop_cleanly, until, within};

/// A pod in namespace `ns` with labels `cell` and `zone`.
fn pod(name: &str, cell: &str, zone: &str) -> PodView {
    serde_json::from_str(&format!(
        r#"{{"metadata":{{"name":"{name}","namespace":"ns","labels":{{"cell":"{cell}","zone":"{zone}"}}}}}}"#
    ))
    .expect("a pod")
}

async fn reflector() -> Reflector<PodView, Paused, NoTransport> {
    Reflector::with_runtime(paused().await, Source::in_process())
}

/// A reconcile recording each parent's members.
async fn record(request: Reconcile<PodView, String>, seen: Seen) -> Result<Action, String> {
    let (parent, members) = request.into_parts();
    seen.lock().unwrap().insert(parent, names(&members));
    Ok(Action::await_change())
}

fn members(seen: &Seen, parent: &str) -> Option<Vec<String>> {
    seen.lock().unwrap().get(parent).cloned()
}

#[tokio::test(start_paused = true)]
async fn a_reflector_alone_is_a_cache_with_wait_until_ready() {
    let reflector = reflector().await;
    let handle = reflector.handle();
    let cache = reflector.cache();
    assert!(!cache.is_ready());
    let task = tokio::spawn(reflector.run());
    handle
        .replace(vec![pod("a", "x", "z1"), pod("b", "y", "z1")])
        .await
        .expect("pushed");
    within("the reflector's sync", cache.wait_until_ready())
        .await
        .expect("ready");
    assert_eq!(names(&cache.state()), ["a", "b"]);
    handle.delete(pod("a", "x", "z1")).await.expect("pushed");
    until("a is gone", || {
        cache.get(&ObjectKey::new(Some("ns"), "a")).is_none()
    })
    .await;
    assert_eq!(cache.members(&Whole).len(), 1);
    stop_cleanly(&handle, task).await;
    assert!(
        handle.upsert(pod("c", "x", "z1")).await.is_err(),
        "the reflector ended"
    );
}

#[tokio::test(start_paused = true)]
async fn two_controllers_share_one_source_each_with_its_own_key_map_and_a_third_joins_late() {
    let reflector = reflector().await;
    let source = reflector.handle();
    let shared = reflector.shared();
    let cache = reflector.cache();
    let reflecting = tokio::spawn(reflector.run());
    source
        .replace(vec![pod("a", "x", "z1"), pod("b", "y", "z1")])
        .await
        .expect("pushed");

    let by_cell = Controller::<PodView, String, Paused, NoTransport>::for_shared_with(
        paused().await,
        shared.clone(),
        KeyMap::by_label("cell"),
    );
    let by_zone = Controller::<PodView, String, Paused, NoTransport>::for_shared_with(
        paused().await,
        shared.clone(),
        KeyMap::by_label("zone"),
    );
    let (cells, zones): (Seen, Seen) = (Arc::default(), Arc::default());
    let cell_handle = by_cell.handle();
    let zone_handle = by_zone.handle();
    let cell_task = tokio::spawn(by_cell.run(record, default_error_policy, Arc::clone(&cells)));
    let zone_task = tokio::spawn(by_zone.run(record, default_error_policy, Arc::clone(&zones)));
    within("the cell controller's sync", cell_handle.synced())
        .await
        .expect("synced");
    within("the zone controller's sync", zone_handle.synced())
        .await
        .expect("synced");
    assert_eq!(cache.share_stats().subscribers, 2);
    until("both controllers saw the snapshot", || {
        members(&cells, "x") == Some(vec!["a".into()])
            && members(&zones, "z1") == Some(vec!["a".into(), "b".into()])
    })
    .await;

    source.upsert(pod("c", "x", "z2")).await.expect("pushed");
    until("both saw c, each under its own parent", || {
        members(&cells, "x") == Some(vec!["a".into(), "c".into()])
            && members(&zones, "z2") == Some(vec!["c".into()])
    })
    .await;

    // A third controller joins after the sync: the snapshot as of its subscription, then
    // every later change.
    let late = Controller::<PodView, String, Paused, NoTransport>::for_shared_with(
        paused().await,
        shared.clone(),
        KeyMap::by_label("cell"),
    );
    let late_seen: Seen = Arc::default();
    let late_handle = late.handle();
    let late_cache = late.cache();
    let late_task = tokio::spawn(late.run(record, default_error_policy, Arc::clone(&late_seen)));
    within("the late controller's sync", late_handle.synced())
        .await
        .expect("synced");
    assert_eq!(
        names(&late_cache.state()),
        ["a", "b", "c"],
        "the whole snapshot"
    );
    source.delete(pod("a", "x", "z1")).await.expect("pushed");
    source.upsert(pod("d", "y", "z2")).await.expect("pushed");
    until("the late controller saw the later changes", || {
        members(&late_seen, "x") == Some(vec!["c".into()])
            && members(&late_seen, "y") == Some(vec!["b".into(), "d".into()])
    })
    .await;
    until("and so did the first two", || {
        members(&cells, "y") == Some(vec!["b".into(), "d".into()])
            && members(&zones, "z2") == Some(vec!["c".into(), "d".into()])
    })
    .await;
    assert_eq!(cache.share_stats().subscribers, 3);
    assert_eq!(cache.share_stats().lagged, 0);

    // One copy of each object between the shared cache and its subscribers' stores: each
    // store holds the cache's own pointer, from the snapshot (b, c) and from a later change
    // (d) alike.
    let cell_cache = cell_handle.cache();
    for name in ["b", "c", "d"] {
        let key = ObjectKey::new(Some("ns"), name);
        let held = cache.get(&key).expect("in the shared cache");
        for (who, store) in [("cell", &cell_cache), ("late", &late_cache)] {
            let subscriber = store.get(&key).expect("in the subscriber's store");
            assert!(
                Arc::ptr_eq(&held, &subscriber),
                "{who}'s store holds a copy of {name}, not the shared cache's object"
            );
        }
    }

    stop_cleanly(&late_handle, late_task).await;
    stop_cleanly(&cell_handle, cell_task).await;
    stop_cleanly(&zone_handle, zone_task).await;
    // Ended subscribers are dropped at the next publish.
    source.upsert(pod("e", "y", "z2")).await.expect("pushed");
    until("no subscriber left", || {
        cache.share_stats().subscribers == 0
    })
    .await;
    stop_cleanly(&source, reflecting).await;
}

#[tokio::test(start_paused = true)]
async fn a_subscriber_a_buffer_behind_is_cut_off_and_resubscribes_with_a_fresh_snapshot() {
    let reflector = reflector().await;
    let source = reflector.handle();
    let cache = reflector.cache();
    let reflecting = tokio::spawn(reflector.run());
    source.replace(Vec::new()).await.expect("pushed");
    within("the reflector's sync", cache.wait_until_ready())
        .await
        .expect("ready");

    let controller = Controller::<PodView, String, Paused, NoTransport>::for_shared_with(
        paused().await,
        reflector_shared(&cache).buffer(2),
        KeyMap::by_label("cell"),
    );
    let handle = controller.handle();
    let local = controller.cache();
    let seen: Seen = Arc::default();
    let task = tokio::spawn(controller.run(record, default_error_policy, Arc::clone(&seen)));
    within("the subscriber's sync", handle.synced())
        .await
        .expect("synced");
    // Five pushes waiting together reach the reflector in one turn: one publish of five
    // changes into a buffer of two.
    for name in ["p1", "p2", "p3", "p4", "p5"] {
        source.upsert(pod(name, "x", "z1")).await.expect("pushed");
    }
    until("the subscriber was cut off", || {
        cache.share_stats().lagged >= 1
    })
    .await;
    until("and caught up through a fresh snapshot", || {
        local.state().len() == 5 && members(&seen, "x").is_some_and(|m| m.len() == 5)
    })
    .await;
    until("resubscribed", || cache.share_stats().subscribers == 1).await;
    source.delete(pod("p1", "x", "z1")).await.expect("pushed");
    until("later changes still arrive", || local.state().len() == 4).await;
    // The reflector's metrics count it, as of its last turn.
    let mut text = String::new();
    prometheus_client::encoding::text::encode(
        &mut text,
        &reconcile_engine::metrics::registry_with(source.collector()),
    )
    .unwrap();
    assert!(
        text.contains("reconcile_loop_shared_lagged_total{controller=\"reflector\"} 1")
            && text.contains("reconcile_loop_shared_subscribers{controller=\"reflector\"} 1"),
        "{text}"
    );
    // A controller nobody subscribed to has no such series.
    let mut text = String::new();
    prometheus_client::encoding::text::encode(
        &mut text,
        &reconcile_engine::metrics::registry_with(handle.collector()),
    )
    .unwrap();
    assert!(!text.contains("reconcile_loop_shared"), "{text}");
    stop_cleanly(&handle, task).await;
    stop_cleanly(&source, reflecting).await;
}

#[tokio::test(start_paused = true)]
async fn a_subscriber_of_a_reflector_that_ended_does_not_sync() {
    let reflector = reflector().await;
    let source = reflector.handle();
    let shared = reflector.shared();
    let reflecting = tokio::spawn(reflector.run());
    stop_cleanly(&source, reflecting).await;
    let tape: Tape<PodView, String> = Tape::default();
    let controller = Controller::<PodView, String, Paused, NoTransport>::for_shared_with(
        paused().await,
        shared,
        KeyMap::by_label("cell"),
    )
    .recorder(tape.clone());
    let handle = controller.handle();
    let task = tokio::spawn(controller.run(record, default_error_policy, Seen::default()));
    until("the feed ended the source", || {
        tape.all()
            .iter()
            .any(|(_, r)| matches!(r, Recorded::Input(input) if input.kind() == "source end"))
    })
    .await;
    assert!(!handle.is_synced());
    stop_cleanly(&handle, task).await;
}

fn reflector_shared(
    cache: &reconcile_engine::Cache<PodView, Whole>,
) -> reconcile_engine::SharedSource<PodView, Whole> {
    reconcile_engine::SharedSource::of(cache.clone())
}

/// A subscriber of a cache with no cursor (an in-process reflector that never said one)
/// has none either, so a write its reconcile reports is not waited for (fail open): the
/// next change reconciles at once, and no hold is counted. A shared cache over the
/// apiserver has a cursor: see `a_subscribers_own_write_holds_it_until_the_shared_cache_has_it`
/// in `engine/tests/own_writes.rs`.
#[tokio::test(start_paused = true)]
async fn a_subscriber_of_a_cache_without_a_cursor_does_not_wait_for_its_writes() {
    use k8s_openapi::api::core::v1::Pod;
    let reflector = reflector().await;
    let source = reflector.handle();
    let shared = reflector.shared();
    let reflecting = tokio::spawn(reflector.run());
    source
        .replace(vec![pod("a", "x", "z1")])
        .await
        .expect("pushed");
    let controller = Controller::<PodView, String, Paused, NoTransport>::for_shared_with(
        paused().await,
        shared,
        KeyMap::by_label("cell"),
    )
    .read_own_writes(Some(std::time::Duration::from_secs(5)));
    let handle = controller.handle();
    let seen: Seen = Arc::default();
    let task = tokio::spawn(controller.run(
        |request: Reconcile<PodView, String>, seen: Seen| async move {
            let mut answer = Pod::default();
            answer.metadata.name = Some("a".into());
            answer.metadata.namespace = Some("ns".into());
            answer.metadata.resource_version = Some("99".into());
            request.wrote(&answer);
            record(request, seen).await
        },
        default_error_policy,
        Arc::clone(&seen),
    ));
    within("synced", handle.synced()).await.expect("synced");
    until("x reconciled", || members(&seen, "x").is_some()).await;
    assert_eq!(handle.cursor(), None, "a subscriber has no cursor");
    source.upsert(pod("b", "x", "z1")).await.expect("pushed");
    until("the next change reconciles, unheld", || {
        members(&seen, "x") == Some(vec!["a".into(), "b".into()])
    })
    .await;
    assert_eq!(handle.stats().own_write_holds, 0);
    stop_cleanly(&handle, task).await;
    stop_cleanly(&source, reflecting).await;
}

/// What a late subscriber's trace records of the share: one `Replace` of the whole
/// snapshot, then each later change as its own source event, in order.
#[tokio::test(start_paused = true)]
async fn a_late_subscribers_tape_records_the_snapshot_then_each_change() {
    use reconcile_core::{Input, SourceEvent};
    let reflector = reflector().await;
    let source = reflector.handle();
    let shared = reflector.shared();
    let cache = reflector.cache();
    let reflecting = tokio::spawn(reflector.run());
    source
        .replace(vec![pod("a", "x", "z1"), pod("b", "x", "z1")])
        .await
        .expect("pushed");
    source.upsert(pod("c", "y", "z1")).await.expect("pushed");
    until("the reflector holds three", || cache.state().len() == 3).await;
    let tape: Tape<PodView, String> = Tape::default();
    let controller = Controller::<PodView, String, Paused, NoTransport>::for_shared_with(
        paused().await,
        shared,
        KeyMap::by_label("cell"),
    )
    .recorder(tape.clone());
    let handle = controller.handle();
    let task = tokio::spawn(controller.run(record, default_error_policy, Seen::default()));
    within("synced", handle.synced()).await.expect("synced");
    source.delete(pod("a", "x", "z1")).await.expect("pushed");
    source.upsert(pod("d", "y", "z1")).await.expect("pushed");
    until("the subscriber holds b, c, d", || {
        names(&handle.cache().state()) == ["b", "c", "d"]
    })
    .await;
    let events: Vec<String> = tape
        .all()
        .into_iter()
        .filter_map(|(_, r)| match r {
            Recorded::Input(Input::SourceEvent { event, .. }) => Some(match event {
                SourceEvent::Replace(all) => format!("replace {}", all.len()),
                SourceEvent::Upsert(o) => {
                    format!("upsert {}", o.metadata.name.as_deref().unwrap_or(""))
                }
                SourceEvent::Delete(o) => {
                    format!("delete {}", o.metadata.name.as_deref().unwrap_or(""))
                }
                SourceEvent::ReplaceShared(all) => format!("replace {} shared", all.len()),
                SourceEvent::UpsertShared(o) => {
                    format!("upsert {} shared", o.metadata.name.as_deref().unwrap_or(""))
                }
                SourceEvent::DeleteShared(o) => {
                    format!("delete {} shared", o.metadata.name.as_deref().unwrap_or(""))
                }
            }),
            _ => None,
        })
        .collect();
    // The cache's pointers, not copies: the subscriber's store shares each object.
    assert_eq!(
        events,
        ["replace 3 shared", "delete a shared", "upsert d shared"]
    );
    stop_cleanly(&handle, task).await;
    stop_cleanly(&source, reflecting).await;
}

/// A pod in namespace `ns` whose controller owner is the `Parent` named `owner`, if any.
fn child(name: &str, owner: Option<&str>) -> PodView {
    owned(name, owner.map(|owner| ("example.com/v1", "Parent", owner)))
}

/// A pod in namespace `ns` whose controller owner is `(apiVersion, kind, name)`, if any.
fn owned(name: &str, owner: Option<(&str, &str, &str)>) -> PodView {
    let owners = owner.map_or(String::new(), |(api_version, kind, owner)| {
        format!(
            r#","ownerReferences":[{{"apiVersion":"{api_version}","kind":"{kind}","name":"{owner}","uid":"u-{owner}","controller":true}}]"#
        )
    });
    serde_json::from_str(&format!(
        r#"{{"metadata":{{"name":"{name}","namespace":"ns"{owners}}}}}"#
    ))
    .expect("a pod")
}

/// `owns_shared` (kube-runtime's `owns_shared_stream`): children cached by a reflector wake
/// their controller owner in another controller, which lists and watches no children of its
/// own. A child added, changed, moved to another owner or deleted wakes its owner (both, for
/// a move); a child with no owner, or another kind of owner, wakes nothing.
#[tokio::test(start_paused = true)]
async fn children_in_a_shared_cache_wake_their_owner() {
    let children = reflector().await;
    let feed = children.handle();
    let shared = children.shared();
    let reflecting = tokio::spawn(children.run());
    feed.replace(vec![child("c1", Some("p1"))])
        .await
        .expect("pushed");

    let owners = Controller::<PodView, ObjectKey, Paused, NoTransport>::with_runtime(
        paused().await,
        Source::in_process(),
        KeyMap::by_object(),
    )
    .owns_shared_kind(shared, "Parent.example.com");
    let primary = owners.handle();
    let runs: Arc<std::sync::Mutex<Vec<String>>> = Arc::default();
    let task =
        tokio::spawn(
            owners.run(
                |request: Reconcile<PodView, ObjectKey>,
                 runs: Arc<std::sync::Mutex<Vec<String>>>| async move {
                    runs.lock()
                        .unwrap()
                        .push(request.parent().name().to_owned());
                    Ok::<_, String>(Action::await_change())
                },
                default_error_policy,
                Arc::clone(&runs),
            ),
        );
    let parent = |name: &str| child(name, None);
    primary
        .replace(vec![parent("p1"), parent("p2")])
        .await
        .expect("pushed");
    within("synced", primary.synced()).await.expect("synced");
    let count = |name: &str| runs.lock().unwrap().iter().filter(|r| *r == name).count();
    until("the listing ran both", || {
        count("p1") >= 1 && count("p2") >= 1
    })
    .await;
    // Each wake below runs its owner once more.
    let (p1, p2) = (count("p1"), count("p2"));

    feed.upsert(child("c2", Some("p2"))).await.expect("pushed");
    until("a new child woke p2", || count("p2") == p2 + 1).await;
    feed.upsert(child("c1", Some("p2"))).await.expect("pushed");
    until("a child moving from p1 to p2 woke both", || {
        count("p1") == p1 + 1 && count("p2") == p2 + 2
    })
    .await;
    feed.delete(child("c2", Some("p2"))).await.expect("pushed");
    until("a deleted child woke p2", || count("p2") == p2 + 3).await;
    // No owner, or an owner of another kind: nothing is woken; a marker then shows that
    // nothing ran in between.
    feed.upsert(child("orphan", None)).await.expect("pushed");
    feed.upsert(owned("adopted", Some(("apps/v1", "ReplicaSet", "p1"))))
        .await
        .expect("pushed");
    feed.upsert(child("c3", Some("p1"))).await.expect("pushed");
    until("the marker child woke p1", || count("p1") == p1 + 2).await;
    assert_eq!(count("p2"), p2 + 3, "nothing else woke p2");
    assert_eq!(primary.stats().lists, 0, "no LIST of its own");
    stop_cleanly(&primary, task).await;
    stop_cleanly(&feed, reflecting).await;
}

/// A pod in namespace `ns` labelled `wake=<names>`: the primary objects it names, `.`-separated.
fn naming(name: &str, names: &str) -> PodView {
    serde_json::from_str(&format!(
        r#"{{"metadata":{{"name":"{name}","namespace":"ns","labels":{{"wake":"{names}"}}}}}}"#
    ))
    .expect("a pod")
}

/// `watches_shared` (kube-runtime's `watches_shared_stream`): objects in a shared cache wake
/// the primary objects a function of the user's names. A changed object wakes what it
/// names and what it named before; a deleted one what it named.
#[tokio::test(start_paused = true)]
async fn objects_in_a_shared_cache_wake_what_the_mapper_names() {
    let related = reflector().await;
    let feed = related.handle();
    let shared = related.shared();
    let reflecting = tokio::spawn(related.run());
    feed.replace(vec![naming("cm", "p1")])
        .await
        .expect("pushed");

    let controller = Controller::<PodView, ObjectKey, Paused, NoTransport>::with_runtime(
        paused().await,
        Source::in_process(),
        KeyMap::by_object(),
    )
    .watches_shared(shared, |o: &PodView| {
        o.metadata
            .labels
            .get("wake")
            .map(|w| {
                w.split('.')
                    .map(|n| ObjectKey::new(Some("ns"), n))
                    .collect()
            })
            .unwrap_or_default()
    });
    let primary = controller.handle();
    let runs: Arc<std::sync::Mutex<Vec<String>>> = Arc::default();
    let task =
        tokio::spawn(
            controller.run(
                |request: Reconcile<PodView, ObjectKey>,
                 runs: Arc<std::sync::Mutex<Vec<String>>>| async move {
                    runs.lock()
                        .unwrap()
                        .push(request.parent().name().to_owned());
                    Ok::<_, String>(Action::await_change())
                },
                default_error_policy,
                Arc::clone(&runs),
            ),
        );
    let parent = |name: &str| child(name, None);
    primary
        .replace(vec![parent("p1"), parent("p2"), parent("p3")])
        .await
        .expect("pushed");
    within("synced", primary.synced()).await.expect("synced");
    let count = |name: &str| runs.lock().unwrap().iter().filter(|r| *r == name).count();
    until("the listing ran all three", || {
        count("p1") >= 1 && count("p2") >= 1 && count("p3") >= 1
    })
    .await;
    let (p1, p2, p3) = (count("p1"), count("p2"), count("p3"));

    feed.upsert(naming("cm", "p2.p3")).await.expect("pushed");
    until(
        "a renamed reference woke the one it left and the new ones",
        || count("p1") == p1 + 1 && count("p2") == p2 + 1 && count("p3") == p3 + 1,
    )
    .await;
    feed.delete(naming("cm", "p2.p3")).await.expect("pushed");
    until("a deleted object woke what it named", || {
        count("p2") == p2 + 2 && count("p3") == p3 + 2
    })
    .await;
    assert_eq!(count("p1"), p1 + 1, "nothing else woke p1");
    assert_eq!(primary.stats().lists, 0, "no LIST of its own");
    stop_cleanly(&primary, task).await;
    stop_cleanly(&feed, reflecting).await;
}
