//! Priorities on the real apiserver: controller-runtime issue #3496's case. One worker, a
//! backlog from the initial list, and a steady stream of live changes to one pod that keeps
//! a normal-priority key wanted at all times. The live change goes ahead of the backlog, and
//! the backlog still drains while the stream goes on.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reconcile_core::KeyMap;
use reconcile_core::pod::PodView;
use reconcile_engine::runtime::timeout;
use reconcile_engine::{Action, Controller, Reconcile, Runtime, Source, default_error_policy};
use reconcile_k8s_env::pod_manifest;
use serde_json::json;

use crate::harness::{CELL, Case, DriverUnderTest, WAIT, eventually};

/// Pods of the initial list, each its own cell.
const LISTED: usize = 24;
/// How long each reconcile takes: the backlog lasts `LISTED` times this.
const TAKES: Duration = Duration::from_millis(60);
/// The core's bound: at most this many normal keys in a row while a low key waits.
const NORMAL_IN_A_ROW: usize = 3;

/// With priorities on and one worker, a pod created after the sync runs ahead of the listed
/// backlog, and the backlog drains while that pod is patched without pause.
pub async fn live_changes_go_ahead_of_the_initial_list_which_still_drains<D: DriverUnderTest>(
    case: Case<D>,
) {
    let _steady = case.env.steady();
    let ns = case.namespace();
    for i in 0..LISTED {
        let name = format!("l-{i:02}");
        case.api()
            .create_pod(
                &ns,
                &pod_manifest(&name, &[("app", "e2e"), (CELL, name.as_str())]),
            )
            .unwrap_or_else(|e| panic!("create pod: {e}"));
    }
    let transport = D::connect(
        case.env
            .kubeconfig_path(reconcile_k8s_env::ApiServer::Cached),
    )
    .await
    .unwrap_or_else(|e| panic!("{}: cannot connect: {e}", case.name));
    let source = Source::<PodView, D::Transport>::pods(transport, Some(&ns)).labels("app=e2e");
    let controller = Controller::with_runtime(D::runtime(), source, KeyMap::by_label(CELL))
        .concurrency(1)
        .priority(true);
    let order: Arc<Mutex<Vec<String>>> = Arc::default();
    let runtime = case.runtime.clone();
    let running = timeout(
        &case.runtime,
        WAIT,
        controller.start(
            move |request: Reconcile<PodView, String>, order: Arc<Mutex<Vec<String>>>| {
                let runtime = runtime.clone();
                async move {
                    order.lock().unwrap().push(request.parent().clone());
                    runtime.sleep_until(runtime.now() + TAKES).await;
                    Ok::<_, std::convert::Infallible>(Action::await_change())
                }
            },
            default_error_policy,
            Arc::clone(&order),
        ),
    )
    .await
    .unwrap_or_else(|| panic!("{}: no sync", case.name))
    .unwrap_or_else(|e| panic!("{}: {e}", case.name));

    // The backlog is queued; a live pod arrives and is then patched without pause, so its
    // cell is wanted again before each of its reconciles ends.
    case.api()
        .create_pod(
            &ns,
            &pod_manifest("live", &[("app", "e2e"), (CELL, "live")]),
        )
        .unwrap_or_else(|e| panic!("create pod: {e}"));
    let stop = Arc::new(AtomicBool::new(false));
    let api = case.api();
    let patcher = {
        let (stop, ns) = (Arc::clone(&stop), ns.clone());
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) && n < 10_000 {
                n += 1;
                let patch = json!({"metadata": {"annotations": {"tick": n.to_string()}}});
                api.patch_pod(&ns, "live", &patch)
                    .unwrap_or_else(|e| panic!("patch live: {e}"));
                std::thread::sleep(TAKES / 2);
            }
            n
        })
    };
    let seen = Arc::clone(&order);
    let listed_done = eventually(&case.runtime, WAIT, "every listed cell reconciled", || {
        let order = seen.lock().unwrap();
        let listed = order.iter().filter(|c| c.starts_with("l-")).count();
        if listed == LISTED {
            Ok(order.len())
        } else {
            Err(format!("{listed} of {LISTED} listed cells after {order:?}"))
        }
    })
    .await;
    // The stream went on all along: the live pod's cell kept running after the last listed.
    eventually(
        &case.runtime,
        WAIT,
        "the live cell running after the list",
        || {
            let order = seen.lock().unwrap();
            if order[listed_done..].iter().any(|c| c == "live") {
                Ok(())
            } else {
                Err(format!("{order:?}"))
            }
        },
    )
    .await;
    stop.store(true, Ordering::Relaxed);
    let patches = patcher.join().expect("the patcher");
    let result = timeout(&case.runtime, WAIT, running.shutdown())
        .await
        .unwrap_or_else(|| panic!("{}: no stop", case.name));
    assert!(result.is_ok(), "{}: {result:?}", case.name);

    let order = order.lock().unwrap().clone();
    let first_live = order.iter().position(|c| c == "live").expect("live ran");
    let listed_before = order[..first_live]
        .iter()
        .filter(|c| c.starts_with("l-"))
        .count();
    eprintln!(
        "{} [{}]: {patches} patches; live first at dispatch {first_live} ({listed_before} of \
         {LISTED} listed before it); {} dispatches in all",
        case.name,
        D::NAME,
        order.len()
    );
    // Live went ahead of the backlog: without priorities it would wait for all of it.
    assert!(
        listed_before < LISTED / 2,
        "{}: the live cell waited behind {listed_before} listed cells: {order:?}",
        case.name
    );
    // And the backlog was never starved: while listed cells waited, at most three normal
    // dispatches (the live cell's) came in a row.
    let last_listed = order.iter().rposition(|c| c.starts_with("l-")).unwrap();
    let mut in_a_row = 0;
    for cell in &order[first_live..last_listed] {
        in_a_row = if cell == "live" { in_a_row + 1 } else { 0 };
        assert!(
            in_a_row <= NORMAL_IN_A_ROW,
            "{}: {in_a_row} live dispatches in a row while listed cells waited: {order:?}",
            case.name
        );
    }
    assert!(
        order[first_live..last_listed]
            .iter()
            .filter(|c| *c == "live")
            .count()
            >= 2,
        "{}: the stream kept the live cell wanted while the list drained: {order:?}",
        case.name
    );
}
