//! On the apiserver alone: API semantics through the driver (cursors, watch timeouts,
//! selectors, restarts, compaction, relists).

use std::time::Duration;

use reconcile_core::Input;
use reconcile_engine::Endpoints;
use reconcile_k8s_env::{ApiServer, pod_manifest};
use reconcile_trace::Recorded;
use serde_json::{Value, json};

use crate::harness::{Case, DriverUnderTest, Opts};
use crate::scrape::{get, scrape};
use crate::tap::TapeExt;

/// A pod in the suite's selector (`app=e2e`) and in `cell`.
fn pod(name: &str, cell: &str) -> Value {
    pod_manifest(name, &[("app", "e2e"), ("cell", cell)])
}

fn create<D: DriverUnderTest>(case: &Case<D>, ns: &str, manifest: &Value) {
    case.api()
        .create_pod(ns, manifest)
        .unwrap_or_else(|e| panic!("create pod in {ns}: {e}"));
}

fn delete_now<D: DriverUnderTest>(case: &Case<D>, ns: &str, name: &str) {
    case.api()
        .delete_pod(ns, name, Some(0))
        .unwrap_or_else(|e| panic!("delete pod {ns}/{name}: {e}"));
}

fn patch<D: DriverUnderTest>(case: &Case<D>, ns: &str, name: &str, patch: &Value) {
    case.api()
        .patch_pod(ns, name, patch)
        .unwrap_or_else(|e| panic!("patch pod {ns}/{name}: {e}"));
}

/// Pods created before and after the start reach reconcile, and a deletion empties the cell.
pub async fn pods_round_trip_through_the_driver<D: DriverUnderTest>(case: Case<D>) {
    let _steady = case.env.steady();
    let ns = case.namespace();
    create(&case, &ns, &pod("early", "a"));
    let under = case.start(&ns, Opts::default()).await;
    under.wait_cell("a", &["early"]).await;
    create(&case, &ns, &pod("late", "b"));
    under.wait_cell("b", &["late"]).await;
    delete_now(&case, &ns, "early");
    under.wait_cell("a", &[]).await;
    under.wait_cell("b", &["late"]).await;
    under.shutdown().await;
}

/// Stopping a controller abandons its watch cleanly; a second one on the same namespace
/// then lists and watches as usual.
pub async fn an_abandoned_watch_closes_and_a_later_one_opens<D: DriverUnderTest>(case: Case<D>) {
    let _steady = case.env.steady();
    let ns = case.namespace();
    let first = case.start(&ns, Opts::default()).await;
    let tap = first.tap.clone();
    first
        .eventually("the first watch is open", || {
            let opened = tap.watches_opened() > 0;
            if opened {
                Ok(())
            } else {
                Err("no WatchOpened yet".into())
            }
        })
        .await;
    let handle = first.handle.clone();
    first.shutdown().await;
    assert!(handle.is_stopped(), "the first controller reports stopped");

    let second = case.start_numbered(&ns, Opts::default(), 1).await;
    create(&case, &ns, &pod("after", "a"));
    second.wait_cell("a", &["after"]).await;
    second.shutdown().await;
}

/// With `timeoutSeconds=2` the apiserver ends each watch; the driver reopens from its
/// cursor without relisting, and changes keep arriving.
pub async fn tracking_goes_on_across_a_watch_timeout<D: DriverUnderTest>(case: Case<D>) {
    let _steady = case.env.steady();
    let ns = case.namespace();
    let under = case
        .start(
            &ns,
            Opts {
                timeout_seconds: 2,
                ..Opts::default()
            },
        )
        .await;
    let tap = under.tap.clone();
    under
        .eventually("two watches ended by the server's timeout", || {
            let ends = tap.watch_ends();
            if ends >= 2 {
                Ok(())
            } else {
                Err(format!("{ends} ended"))
            }
        })
        .await;
    create(&case, &ns, &pod("p1", "a"));
    under.wait_cell("a", &["p1"]).await;
    let stats = under.handle.stats();
    assert_eq!(stats.lists, 1, "a watch timeout must not relist: {stats:?}");
    assert_eq!(stats.relists, 0, "{stats:?}");
    assert!(stats.watches >= 3, "{stats:?}");
    under.shutdown().await;
}

/// Pods outside the selector never reach the store, whether they existed before the LIST
/// or were created during the WATCH.
pub async fn the_label_selector_scopes_list_and_watch<D: DriverUnderTest>(case: Case<D>) {
    let _steady = case.env.steady();
    let ns = case.namespace();
    let other = |name: &str| pod_manifest(name, &[("app", "other"), ("cell", "a")]);
    create(&case, &ns, &other("before"));
    create(&case, &ns, &pod("in-before", "a"));
    let under = case.start(&ns, Opts::default()).await;
    under.wait_cell("a", &["in-before"]).await;
    create(&case, &ns, &other("during"));
    // Frames arrive in order, so once this one is seen the other would have been too.
    create(&case, &ns, &pod("in-during", "a"));
    under.wait_cell("a", &["in-before", "in-during"]).await;
    for call in under.observed.all() {
        for name in call.names() {
            assert!(
                name.starts_with("in-"),
                "unselected pod {name} reached reconcile"
            );
        }
    }
    let names: Vec<String> = under.tap.frames().into_iter().map(|f| f.name).collect();
    assert!(
        !names.iter().any(|n| n == "before" || n == "during"),
        "unselected pods came over the watch: {names:?}"
    );
    under.shutdown().await;
}

/// Membership follows pods being created and deleted across two cells.
pub async fn cell_membership_follows_pods_coming_and_going<D: DriverUnderTest>(case: Case<D>) {
    let _steady = case.env.steady();
    let ns = case.namespace();
    let under = case.start(&ns, Opts::default()).await;
    create(&case, &ns, &pod("a1", "a"));
    create(&case, &ns, &pod("a2", "a"));
    create(&case, &ns, &pod("b1", "b"));
    under.wait_cell("a", &["a1", "a2"]).await;
    under.wait_cell("b", &["b1"]).await;
    delete_now(&case, &ns, "a2");
    under.wait_cell("a", &["a1"]).await;
    create(&case, &ns, &pod("a3", "a"));
    under.wait_cell("a", &["a1", "a3"]).await;
    under.wait_cell("b", &["b1"]).await;
    under.shutdown().await;
}

/// Each change of a cell's membership is followed by a reconcile that sees it.
pub async fn every_membership_change_wakes_its_cell<D: DriverUnderTest>(case: Case<D>) {
    let _steady = case.env.steady();
    let ns = case.namespace();
    let under = case.start(&ns, Opts::default()).await;
    let mut expected: Vec<String> = Vec::new();
    for name in ["m1", "m2", "m3"] {
        create(&case, &ns, &pod(name, "a"));
        expected.push(name.to_owned());
        let want: Vec<&str> = expected.iter().map(String::as_str).collect();
        under.wait_cell("a", &want).await;
    }
    for name in ["m2", "m1"] {
        delete_now(&case, &ns, name);
        expected.retain(|n| n != name);
        let want: Vec<&str> = expected.iter().map(String::as_str).collect();
        under.wait_cell("a", &want).await;
    }
    let sets: Vec<Vec<String>> = under
        .observed
        .of("a")
        .iter()
        .map(|c| c.names().into_iter().map(str::to_owned).collect())
        .collect();
    for want in [
        vec!["m1"],
        vec!["m1", "m2"],
        vec!["m1", "m2", "m3"],
        vec!["m1", "m3"],
        vec!["m3"],
    ] {
        assert!(
            sets.iter().any(|s| s == &want),
            "no reconcile saw {want:?}; calls saw {sets:?}"
        );
    }
    under.shutdown().await;
}

/// The reconcile woken by a pod's arrival already finds that pod among the members: the
/// store is written before the key is queued.
pub async fn reconcile_reads_a_store_that_already_holds_the_event<D: DriverUnderTest>(
    case: Case<D>,
) {
    let _steady = case.env.steady();
    let ns = case.namespace();
    let under = case.start(&ns, Opts::default()).await;
    for (i, cell) in ["x", "y", "z"].iter().enumerate() {
        create(&case, &ns, &pod(&format!("first-{i}"), cell));
    }
    for (i, cell) in ["x", "y", "z"].iter().enumerate() {
        under.wait_cell(cell, &[&format!("first-{i}")]).await;
        let calls = under.observed.of(cell);
        assert!(
            calls.iter().all(|c| !c.members.is_empty()),
            "cell {cell} was reconciled before its first pod was in the store: {calls:?}"
        );
    }
    under.shutdown().await;
}

/// Changing a pod's cell label moves it: the old cell loses it, the new one gains it.
pub async fn a_patched_cell_label_moves_the_pod<D: DriverUnderTest>(case: Case<D>) {
    let _steady = case.env.steady();
    let ns = case.namespace();
    create(&case, &ns, &pod("mover", "a"));
    create(&case, &ns, &pod("stayer", "a"));
    let under = case.start(&ns, Opts::default()).await;
    under.wait_cell("a", &["mover", "stayer"]).await;
    patch(
        &case,
        &ns,
        "mover",
        &json!({"metadata": {"labels": {"cell": "b"}}}),
    );
    under.wait_cell("b", &["mover"]).await;
    under.wait_cell("a", &["stayer"]).await;
    under.shutdown().await;
}

/// A pod whose labels leave the selector arrives as DELETED; back in, it arrives as ADDED.
pub async fn leaving_and_reentering_the_selector_is_deleted_then_added<D: DriverUnderTest>(
    case: Case<D>,
) {
    let _steady = case.env.steady();
    let ns = case.namespace();
    create(&case, &ns, &pod("flip", "a"));
    let under = case.start(&ns, Opts::default()).await;
    under.wait_cell("a", &["flip"]).await;
    patch(
        &case,
        &ns,
        "flip",
        &json!({"metadata": {"labels": {"app": "other"}}}),
    );
    under.wait_cell("a", &[]).await;
    patch(
        &case,
        &ns,
        "flip",
        &json!({"metadata": {"labels": {"app": "e2e"}}}),
    );
    under.wait_cell("a", &["flip"]).await;
    // kwok may still move the pod to Running (MODIFIED) before it leaves; what matters is
    // how it left and came back.
    let kinds: Vec<String> = under
        .tap
        .frames()
        .into_iter()
        .filter(|f| f.name == "flip" && f.kind != "MODIFIED")
        .map(|f| f.kind)
        .collect();
    assert_eq!(
        kinds,
        ["DELETED", "ADDED"],
        "leaving then re-entering the selector, as seen on the watch"
    );
    under.shutdown().await;
}

/// Removing the cell label makes the pod unmappable: it is dropped from its cell.
pub async fn a_pod_whose_cell_label_is_removed_is_dropped<D: DriverUnderTest>(case: Case<D>) {
    let _steady = case.env.steady();
    let ns = case.namespace();
    create(&case, &ns, &pod("keep", "a"));
    create(&case, &ns, &pod("drop", "a"));
    let under = case.start(&ns, Opts::default()).await;
    under.wait_cell("a", &["drop", "keep"]).await;
    patch(
        &case,
        &ns,
        "drop",
        &json!({"metadata": {"labels": {"cell": null}}}),
    );
    under.wait_cell("a", &["keep"]).await;
    let stats = under.handle.stats();
    assert!(
        stats.rejected_objects >= 1,
        "the unmapped pod is counted: {stats:?}"
    );
    under.shutdown().await;
}

/// The apiserver is killed and restarted: the watch breaks, the driver retries, and
/// changes made after the restart arrive.
pub async fn the_loop_reconverges_after_an_apiserver_restart<D: DriverUnderTest>(case: Case<D>) {
    let _disrupt = case.env.disrupt();
    let ns = case.namespace();
    create(&case, &ns, &pod("before", "a"));
    let under = case.start(&ns, Opts::default()).await;
    under.wait_cell("a", &["before"]).await;
    case.env
        .restart_apiserver(ApiServer::Cached)
        .unwrap_or_else(|e| panic!("restart: {e}"));
    create(&case, &ns, &pod("after", "a"));
    delete_now(&case, &ns, "before");
    under.wait_cell("a", &["after"]).await;
    under.shutdown().await;
}

/// On the watch-cache-off apiserver, compacting etcd past the cursor makes the next WATCH
/// fail with 410; the driver reads that as expired and relists.
pub async fn a_compacted_cursor_is_expired_and_the_loop_relists<D: DriverUnderTest>(case: Case<D>) {
    let _disrupt = case.env.disrupt();
    let ns = case.namespace();
    create(&case, &ns, &pod("p1", "a"));
    let opts = Opts {
        server: ApiServer::Uncached,
        timeout_seconds: 2,
        ..Opts::default()
    };
    let under = case.start(&ns, opts).await;
    // Once kwok has run p1 nothing writes it again, so the cursor stays where it is.
    under
        .wait_cell_where("a", "p1 running", |m| m.len() == 1 && m[0].ready)
        .await;
    // Two writes outside the selector move etcd's head two past the cursor without a frame
    // for us: a WATCH from the cursor starts one past it, which must be below the
    // compacted revision to be refused.
    create(&case, &ns, &pod_manifest("unselected", &[("app", "other")]));
    patch(
        &case,
        &ns,
        "unselected",
        &json!({"metadata": {"labels": {"touched": "yes"}}}),
    );
    let revision = case
        .env
        .compact_etcd()
        .unwrap_or_else(|e| panic!("compact: {e}"));
    let handle = under.handle.clone();
    under
        .eventually("a relist after the cursor was compacted", || {
            let stats = handle.stats();
            if stats.relists >= 1 && stats.lists >= 2 {
                Ok(())
            } else {
                Err(format!(
                    "cursor {:?}, compacted at {revision}, {stats:?}",
                    handle.cursor()
                ))
            }
        })
        .await;
    create(&case, &ns, &pod("p2", "a"));
    under.wait_cell("a", &["p1", "p2"]).await;

    // The same story in the controller's metrics, scraped from its health listener.
    let (addr, server) = D::serve(Endpoints::new().controller(&under.handle))
        .await
        .unwrap_or_else(|e| panic!("serve: {e}"));
    assert_eq!(get(addr, "/readyz"), (200, "ok\n".to_owned()));
    assert_eq!(get(addr, "/healthz").0, 200);
    let scraped = scrape(addr);
    let at_least = |name: &str, labels: &[(&str, &str)], min: f64| {
        let value = scraped.value(name, labels).unwrap_or(0.0);
        assert!(
            value >= min,
            "{name}{labels:?} = {value}, expected >= {min}, in\n{}",
            scraped.body
        );
    };
    // A compacted cursor is answered 410 (Expired): one relist, two LISTs in all.
    at_least(
        "reconcile_loop_relists_total",
        &[("reason", "expired")],
        1.0,
    );
    at_least("reconcile_loop_lists_total", &[], 2.0);
    at_least("reconcile_loop_frames_applied_total", &[], 1.0);
    at_least(
        "controller_runtime_reconcile_total",
        &[("controller", "pods"), ("result", "success")],
        2.0,
    );
    at_least("workqueue_adds_total", &[("name", "pods")], 2.0);
    at_least("reconcile_loop_synced", &[], 1.0);
    under.shutdown().await;
    assert_eq!(
        get(addr, "/healthz").0,
        500,
        "a stopped controller is not live"
    );
    drop(server);
}

/// A pod deleted while the driver is disconnected, with the history compacted before it
/// comes back, is removed by the relist's whole-world replace.
pub async fn a_deletion_missed_while_disconnected_is_synthesized<D: DriverUnderTest>(
    case: Case<D>,
) {
    let _disrupt = case.env.disrupt();
    let ns = case.namespace();
    create(&case, &ns, &pod("gone", "a"));
    create(&case, &ns, &pod("stays", "a"));
    // A broken watch is retried only after 30 s: a wide window with no watch open.
    let opts = Opts {
        server: ApiServer::Uncached,
        retry_delay: Duration::from_secs(30),
        ..Opts::default()
    };
    let under = case.start(&ns, opts).await;
    under.wait_cell("a", &["gone", "stays"]).await;
    let tap = under.tap.clone();
    // The kill must break an open stream. A WATCH still waiting for its answer would be
    // retried by the transport, reach the restarted apiserver, and end by the core's own
    // close on a 410 ERROR frame, which is no stream end.
    under
        .eventually("the watch is open", || match tap.watches_opened() {
            0 => Err("no watch answered yet".into()),
            _ => Ok(()),
        })
        .await;
    let ends_before = tap.watch_ends();
    // Killing the apiserver breaks the watch. The writes happen while it is down, so no
    // watch of the driver can carry them, however soon it retries.
    let api = case.api();
    case.env
        .restart_apiserver_after(ApiServer::Uncached, || {
            api.delete_pod(&ns, "gone", Some(0))?;
            // A second write past the cursor: a WATCH from the cursor starts one past it,
            // and only a start below the compacted revision is refused (else the DELETED
            // is still served).
            api.create_pod(&ns, &pod_manifest("unselected", &[("app", "other")]))?;
            case.env.compact_etcd().map(drop)
        })
        .unwrap_or_else(|e| panic!("restart with writes while down: {e}"));
    under
        .eventually("the watch broke with the restart", || {
            let ends = tap.watch_ends();
            if ends > ends_before {
                Ok(())
            } else {
                Err(format!("{ends} watch ends"))
            }
        })
        .await;
    // The retry delay, then a 410, then the relist's own retry delay.
    under
        .wait_cell_for(Duration::from_secs(150), "a", &["stays"])
        .await;
    let stats = under.handle.stats();
    let streams: Vec<_> = tap
        .all()
        .into_iter()
        .filter(|(_, r)| !matches!(r, Recorded::Input(Input::WatchLine { .. })))
        .collect();
    assert!(
        stats.relists >= 1,
        "the deletion came by relist: {stats:?}\nstreams: {streams:?}"
    );
    let deleted_frames = tap
        .frames()
        .into_iter()
        .filter(|f| f.name == "gone" && f.kind == "DELETED")
        .count();
    assert_eq!(deleted_frames, 0, "no DELETED frame may have carried it");
    under.shutdown().await;
}

/// A LIST paged 10 at a time: 57 pods come in 6 pages, each asked for with the previous
/// page's continue token, and reach the store as one listing (every reconcile of the cell
/// sees all 57: nothing was applied before the last page); the recorded trace replays.
pub async fn a_paged_listing_of_57_pods_applies_once<D: DriverUnderTest>(case: Case<D>) {
    use reconcile_core::Command;
    let _steady = case.env.steady();
    let ns = case.namespace();
    let names: Vec<String> = (0..57).map(|i| format!("p{i:02}")).collect();
    for name in &names {
        create(&case, &ns, &pod(name, "a"));
    }
    let opts = Opts {
        page_size: Some(10),
        ..Opts::default()
    };
    let under = case.start(&ns, opts).await;
    let want: Vec<&str> = names.iter().map(String::as_str).collect();
    under.wait_cell("a", &want).await;
    let mut lists = Vec::new();
    let mut answers = 0;
    for (_, record) in under.tap.all() {
        match record {
            Recorded::Command(Command::List {
                limit,
                continue_token,
                ..
            }) => lists.push((limit, continue_token)),
            Recorded::Input(Input::List { .. }) => answers += 1,
            _ => {}
        }
    }
    assert_eq!(lists.len(), 6, "LISTs sent: {lists:?}");
    assert_eq!(answers, 6, "LIST answers received");
    assert!(
        lists.iter().all(|(limit, _)| *limit == Some(10)),
        "{lists:?}"
    );
    assert!(
        lists[0].1.is_none(),
        "the first page has no token: {lists:?}"
    );
    assert!(
        lists[1..].iter().all(|(_, token)| token.is_some()),
        "every later page names its token: {lists:?}"
    );
    let calls = under.observed.of("a");
    assert!(!calls.is_empty());
    for call in &calls {
        assert_eq!(
            call.names().len(),
            57,
            "a reconcile saw part of the listing: {:?}",
            call.names()
        );
    }
    under.shutdown().await;
}

/// The WATCHes and LISTs the controller sent, in order: `(send_initial_events, rv)` for a
/// WATCH, `None` for a LIST.
fn requests_sent(tap: &crate::tap::Tape) -> Vec<Option<(bool, String)>> {
    use reconcile_core::Command;
    tap.all()
        .into_iter()
        .filter_map(|(_, record)| match record {
            Recorded::Command(Command::Watch {
                send_initial_events,
                resource_version,
                ..
            }) => Some(Some((send_initial_events, resource_version))),
            Recorded::Command(Command::List { .. }) => Some(None),
            _ => None,
        })
        .collect()
}

/// A streaming list (`sendInitialEvents=true`; the pinned apiserver serves it with its
/// `WatchList` gate at its default): 23 pods arrive as initial events and reach the store as
/// one listing at the end bookmark (every reconcile of the cell sees all 23), no LIST is
/// sent, and the same stream then carries a new pod as the watch. The recorded trace
/// replays (the harness's replay at shutdown).
pub async fn a_streaming_list_of_23_pods_applies_once_and_goes_on_as_the_watch<
    D: DriverUnderTest,
>(
    case: Case<D>,
) {
    let _steady = case.env.steady();
    let ns = case.namespace();
    let names: Vec<String> = (0..23).map(|i| format!("p{i:02}")).collect();
    for name in &names {
        create(&case, &ns, &pod(name, "a"));
    }
    let opts = Opts {
        streaming: true,
        ..Opts::default()
    };
    let under = case.start(&ns, opts).await;
    let want: Vec<&str> = names.iter().map(String::as_str).collect();
    under.wait_cell("a", &want).await;
    let calls = under.observed.of("a");
    assert!(!calls.is_empty());
    for call in &calls {
        assert_eq!(
            call.names().len(),
            23,
            "a reconcile saw part of the listing: {:?}",
            call.names()
        );
    }
    create(&case, &ns, &pod("late", "a"));
    let mut want = want;
    want.push("late");
    want.sort_unstable();
    under.wait_cell("a", &want).await;
    let sent = requests_sent(&under.tap);
    assert_eq!(
        sent.first(),
        Some(&Some((true, String::new()))),
        "a streaming list from no version first: {sent:?}"
    );
    assert!(
        sent.iter().all(Option::is_some),
        "no LIST was sent: {sent:?}"
    );
    assert_eq!(
        sent.iter().filter(|s| matches!(s, Some((true, _)))).count(),
        1,
        "one streaming list: {sent:?}"
    );
    let stats = under.handle.stats();
    assert_eq!(stats.lists, 0, "{stats:?}");
    assert_eq!(stats.relists, 0, "{stats:?}");
    assert_eq!(under.handle.metrics().streaming_lists_total, 1);
    under.shutdown().await;
}

/// On the watch-cache-off apiserver, a streaming list syncs; compacting etcd past the
/// cursor makes the next WATCH fail with 410, and the relist is a new streaming list from
/// no version (not a LIST), which removes the pod deleted meanwhile.
pub async fn a_compacted_cursor_relists_with_a_new_streaming_list<D: DriverUnderTest>(
    case: Case<D>,
) {
    let _disrupt = case.env.disrupt();
    let ns = case.namespace();
    create(&case, &ns, &pod("p1", "a"));
    create(&case, &ns, &pod("p2", "a"));
    let opts = Opts {
        server: ApiServer::Uncached,
        timeout_seconds: 2,
        streaming: true,
        ..Opts::default()
    };
    let under = case.start(&ns, opts).await;
    under
        .wait_cell_where("a", "p1 and p2 running", |m| {
            m.len() == 2 && m.iter().all(|p| p.ready)
        })
        .await;
    // Nothing writes p1 or p2 again: the cursor stays. Writes outside the selector move
    // etcd's head past it without a frame for us, and the compaction then expires it.
    create(&case, &ns, &pod_manifest("unselected", &[("app", "other")]));
    patch(
        &case,
        &ns,
        "unselected",
        &json!({"metadata": {"labels": {"touched": "yes"}}}),
    );
    let revision = case
        .env
        .compact_etcd()
        .unwrap_or_else(|e| panic!("compact: {e}"));
    let handle = under.handle.clone();
    under
        .eventually("a relist after the cursor was compacted", || {
            let stats = handle.stats();
            if stats.relists >= 1 {
                Ok(())
            } else {
                Err(format!(
                    "cursor {:?}, compacted at {revision}, {stats:?}",
                    handle.cursor()
                ))
            }
        })
        .await;
    delete_now(&case, &ns, "p2");
    create(&case, &ns, &pod("p3", "a"));
    under.wait_cell("a", &["p1", "p3"]).await;
    let sent = requests_sent(&under.tap);
    let streaming: Vec<_> = sent
        .iter()
        .filter(|s| matches!(s, Some((true, _))))
        .collect();
    assert!(
        streaming.len() >= 2,
        "the relist is a second streaming list: {sent:?}"
    );
    assert!(
        streaming
            .iter()
            .all(|s| matches!(s, Some((true, rv)) if rv.is_empty())),
        "every streaming list is from no version: {sent:?}"
    );
    assert!(
        sent.iter().all(Option::is_some),
        "no LIST was sent: {sent:?}"
    );
    let stats = under.handle.stats();
    assert_eq!(stats.lists, 0, "{stats:?}");
    under.shutdown().await;
}

/// An apiserver started with the `WatchList` feature gate off (one more, on the same etcd)
/// refuses the streaming list with 422 Invalid; the controller falls back to LIST+WATCH for
/// the rest of the run: one streaming list, then a LIST and plain WATCHes only. The
/// recorded trace replays (its header asks for streaming lists; the 422 is in it).
pub async fn a_refused_streaming_list_falls_back_to_list_and_watch<D: DriverUnderTest>(
    case: Case<D>,
) {
    use reconcile_core::StreamEnd;
    let _steady = case.env.steady();
    let ns = case.namespace();
    create(&case, &ns, &pod("p1", "a"));
    create(&case, &ns, &pod("p2", "a"));
    let gated = case
        .env
        .extra_apiserver(&["--feature-gates=WatchList=false"])
        .unwrap_or_else(|e| panic!("an apiserver with WatchList off: {e}"));
    let opts = Opts {
        streaming: true,
        kubeconfig: Some(gated.kubeconfig_path().to_owned()),
        ..Opts::default()
    };
    let under = case.start(&ns, opts).await;
    under.wait_cell("a", &["p1", "p2"]).await;
    create(&case, &ns, &pod("p3", "a"));
    under.wait_cell("a", &["p1", "p2", "p3"]).await;
    let sent = requests_sent(&under.tap);
    assert_eq!(
        sent.first(),
        Some(&Some((true, String::new()))),
        "a streaming list first: {sent:?}"
    );
    assert_eq!(sent.get(1), Some(&None), "then a LIST: {sent:?}");
    assert!(
        sent[2..]
            .iter()
            .all(|s| matches!(s, Some((false, rv)) if !rv.is_empty())),
        "then plain WATCHes from a cursor only: {sent:?}"
    );
    let refusals: Vec<(u16, String)> = under
        .tap
        .all()
        .into_iter()
        .filter_map(|(_, r)| match r {
            Recorded::Input(Input::WatchEnd {
                end: StreamEnd::HttpStatus { code, body },
                ..
            }) => Some((code, String::from_utf8_lossy(&body).into_owned())),
            _ => None,
        })
        .collect();
    assert_eq!(refusals.len(), 1, "{refusals:?}");
    assert_eq!(refusals[0].0, 422, "{refusals:?}");
    assert!(
        refusals[0].1.contains("WatchList feature gate"),
        "the apiserver says why: {refusals:?}"
    );
    let stats = under.handle.stats();
    assert_eq!(stats.lists, 1, "{stats:?}");
    let m = under.handle.metrics();
    assert_eq!(m.streaming_list_fallbacks_total, 1, "{m:?}");
    assert_eq!(m.streaming_lists_total, 0, "{m:?}");
    under.shutdown().await;
    drop(gated);
}

/// A protobuf source (issue 16): the apiserver answers the LIST and the WATCH in protobuf,
/// and the cells follow pods created, relabelled and deleted as with JSON.
pub async fn a_protobuf_source_tracks_pods_as_a_json_one<D: DriverUnderTest>(case: Case<D>) {
    use reconcile_core::ListResponse;
    let _steady = case.env.steady();
    let ns = case.namespace();
    create(&case, &ns, &pod("early", "a"));
    let opts = Opts {
        protobuf: true,
        ..Opts::default()
    };
    let under = case.start(&ns, opts).await;
    under.wait_cell("a", &["early"]).await;
    create(&case, &ns, &pod("late", "b"));
    under.wait_cell("b", &["late"]).await;
    patch(
        &case,
        &ns,
        "late",
        &json!({"metadata": {"labels": {"cell": "a"}}}),
    );
    under.wait_cell("a", &["early", "late"]).await;
    under.wait_cell("b", &[]).await;
    delete_now(&case, &ns, "early");
    under.wait_cell("a", &["late"]).await;
    let (mut lists, mut frames) = (0, 0);
    for (_, record) in under.tap.all() {
        match record {
            Recorded::Input(Input::List {
                response: ListResponse::Response { status: 200, body },
                ..
            }) => {
                assert!(body.starts_with(b"k8s\0"), "a LIST answered in JSON");
                lists += 1;
            }
            Recorded::Input(Input::WatchLine { line, .. }) => {
                assert!(!line.starts_with(b"{"), "a WATCH answered in JSON");
                frames += 1;
            }
            _ => {}
        }
    }
    assert!(lists >= 1 && frames >= 4, "lists {lists}, frames {frames}");
    under.shutdown().await;
}

/// Both at once, as client-go runs against a recent apiserver: a streaming list in protobuf.
/// The initial events and the end bookmark (its `k8s.io/initial-events-end` annotation read
/// from the protobuf `ObjectMeta`) arrive as length-prefixed frames; the 12 pods reach the
/// store as one listing, no LIST is sent, and the same stream then carries a new pod.
pub async fn a_protobuf_streaming_list_applies_once_at_its_end_bookmark<D: DriverUnderTest>(
    case: Case<D>,
) {
    let _steady = case.env.steady();
    let ns = case.namespace();
    let names: Vec<String> = (0..12).map(|i| format!("q{i:02}")).collect();
    for name in &names {
        create(&case, &ns, &pod(name, "a"));
    }
    let opts = Opts {
        streaming: true,
        protobuf: true,
        ..Opts::default()
    };
    let under = case.start(&ns, opts).await;
    let want: Vec<&str> = names.iter().map(String::as_str).collect();
    under.wait_cell("a", &want).await;
    for call in under.observed.of("a") {
        assert_eq!(
            call.names().len(),
            12,
            "a reconcile saw part of the listing: {:?}",
            call.names()
        );
    }
    create(&case, &ns, &pod("late", "a"));
    let mut want = want;
    want.push("late");
    want.sort_unstable();
    under.wait_cell("a", &want).await;
    let frames = under
        .tap
        .all()
        .into_iter()
        .filter(|(_, record)| matches!(record, Recorded::Input(Input::WatchLine { .. })))
        .count();
    let json = under.tap.all().into_iter().any(|(_, record)| {
        matches!(record, Recorded::Input(Input::WatchLine { line, .. }) if line.starts_with(b"{"))
    });
    assert!(!json, "a WATCH answered in JSON");
    assert!(
        frames >= 14,
        "12 initial events, the end bookmark, the late pod: {frames}"
    );
    let sent = requests_sent(&under.tap);
    assert!(
        sent.iter().all(Option::is_some),
        "no LIST was sent: {sent:?}"
    );
    let stats = under.handle.stats();
    assert_eq!(stats.lists, 0, "{stats:?}");
    assert_eq!(under.handle.metrics().streaming_lists_total, 1);
    under.shutdown().await;
}
