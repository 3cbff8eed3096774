//! A graceful stop on the real apiserver: the running reconciles may finish up to the
//! shutdown timeout, and the one still running past it is cancelled.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reconcile_core::pod::PodView;
use reconcile_core::{Command, KeyMap};
use reconcile_engine::runtime::timeout;
use reconcile_engine::{
    Action, Controller, Reconcile, Runtime, Shutdown, Source, Tape, default_error_policy,
};
use reconcile_k8s_env::pod_manifest;
use reconcile_trace::Recorded;

use crate::harness::{CELL, Case, DriverUnderTest, WAIT};

/// Cells whose reconciles have started, and those that finished.
#[derive(Default)]
struct Progress {
    started: Vec<String>,
    finished: Vec<String>,
}

/// `quick` takes 1 s and finishes within the 4 s timeout; `slow` takes 60 s and is
/// cancelled when the timeout runs out.
pub async fn a_graceful_stop_finishes_a_slow_reconcile_and_cancels_one_past_the_timeout<
    D: DriverUnderTest,
>(
    case: Case<D>,
) {
    let _steady = case.env.steady();
    let ns = case.namespace();
    for (name, cell) in [("q", "quick"), ("s", "slow")] {
        case.api()
            .create_pod(&ns, &pod_manifest(name, &[("app", "e2e"), (CELL, cell)]))
            .unwrap_or_else(|e| panic!("create pod: {e}"));
    }
    let transport = D::connect(
        case.env
            .kubeconfig_path(reconcile_k8s_env::ApiServer::Cached),
    )
    .await
    .unwrap_or_else(|e| panic!("{}: cannot connect: {e}", case.name));
    let source = Source::<PodView, D::Transport>::pods(transport, Some(&ns)).labels("app=e2e");
    let up_to = Duration::from_secs(4);
    let tape: Tape<PodView, String> = Tape::default();
    let controller = Controller::with_runtime(D::runtime(), source, KeyMap::by_label(CELL))
        .concurrency(2)
        .shutdown(Shutdown::FinishRunning { up_to })
        .recorder(tape.clone());
    let handle = controller.handle();
    let progress: Arc<Mutex<Progress>> = Arc::default();
    let runtime = case.runtime.clone();
    let running = timeout(
        &case.runtime,
        WAIT,
        controller.start(
            move |request: Reconcile<PodView, String>, progress: Arc<Mutex<Progress>>| {
                let runtime = runtime.clone();
                async move {
                    let cell = request.parent().clone();
                    progress.lock().unwrap().started.push(cell.clone());
                    let takes = if cell == "slow" { 60 } else { 1 };
                    runtime
                        .sleep_until(runtime.now() + Duration::from_secs(takes))
                        .await;
                    progress.lock().unwrap().finished.push(cell);
                    Ok::<_, std::convert::Infallible>(Action::await_change())
                }
            },
            default_error_policy,
            Arc::clone(&progress),
        ),
    )
    .await
    .unwrap_or_else(|| panic!("{}: no sync", case.name))
    .unwrap_or_else(|e| panic!("{}: {e}", case.name));
    let seen = Arc::clone(&progress);
    crate::harness::eventually(&case.runtime, WAIT, "both reconciles running", || {
        let p = seen.lock().unwrap();
        if p.started.len() == 2 {
            Ok(())
        } else {
            Err(format!("started {:?}", p.started))
        }
    })
    .await;
    let since = Instant::now();
    let result = timeout(&case.runtime, WAIT, running.shutdown())
        .await
        .unwrap_or_else(|| panic!("{}: no stop", case.name));
    let took = since.elapsed();
    assert!(result.is_ok(), "{}: {result:?}", case.name);
    eprintln!(
        "{} [{}]: graceful stop took {:.3}s (timeout {}s)",
        case.name,
        D::NAME,
        took.as_secs_f64(),
        up_to.as_secs()
    );
    assert!(
        took >= up_to - Duration::from_millis(500) && took < up_to + Duration::from_secs(2),
        "{}: stopped after {took:?}",
        case.name
    );
    assert_eq!(
        progress.lock().unwrap().finished,
        ["quick"],
        "{}: the quick reconcile finished, the slow one did not",
        case.name
    );
    let cancelled = tape
        .all()
        .iter()
        .filter(|(_, r)| matches!(r, Recorded::Command(Command::CancelReconcile { .. })))
        .count();
    assert_eq!(
        cancelled, 1,
        "{}: the slow reconcile was cancelled",
        case.name
    );
    assert!(handle.is_stopped());
}
