//! What the engine's integration tests share: [`Paused`], a [`Runtime`] over tokio whose
//! clock the test drives, and waits bounded in that clock's (virtual) time.
//!
//! Every test runs under `#[tokio::test(start_paused = true)]` (current-thread). Tokio then
//! moves the clock forward only when every task is idle, straight to the next timer, so
//! timeouts, retry delays and read-idle timeouts elapse at once and in a fixed order: no
//! test ever really sleeps.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reconcile_core::pod::PodView;
use reconcile_engine::{BoxFuture, Runtime, Task};

/// How long, in virtual time, a test waits for anything before failing.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// Virtual time between two looks at a condition.
const STEP: Duration = Duration::from_millis(1);

/// The engine's [`Runtime`] on tokio with paused time: `tokio::spawn`, tokio timers, and
/// tokio's clock as the engine's clock, so the engine's deadlines and the test's waits
/// share one virtual time line.
#[derive(Debug, Clone, Copy)]
pub struct Paused(());

/// The runtime; panics unless the test's clock is paused (`start_paused = true`), so a
/// test cannot fall back to real time unnoticed.
pub async fn paused() -> Paused {
    // `advance` panics with "time is not frozen" on a clock that really runs.
    tokio::time::advance(Duration::ZERO).await;
    Paused(())
}

impl Runtime for Paused {
    type Task = PausedTask;

    fn spawn(&self, future: BoxFuture<()>) -> PausedTask {
        PausedTask(tokio::spawn(future))
    }

    fn sleep_until(&self, deadline: Instant) -> BoxFuture<()> {
        Box::pin(tokio::time::sleep_until(tokio::time::Instant::from_std(
            deadline,
        )))
    }

    fn now(&self) -> Instant {
        tokio::time::Instant::now().into_std()
    }
}

/// A spawned tokio task; dropping it detaches.
#[derive(Debug)]
pub struct PausedTask(tokio::task::JoinHandle<()>);

impl Task for PausedTask {
    fn abort(self) {
        self.0.abort();
    }
}

/// Awaits `future`, failing the test if it takes longer than [`PATIENCE`] of virtual time.
pub async fn within<T>(what: &str, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(PATIENCE, future)
        .await
        .unwrap_or_else(|_| panic!("timed out after {PATIENCE:?} (virtual) waiting for {what}"))
}

/// Stops the controller behind `handle` and waits for its task to end cleanly: joined (no
/// panic escaped) and stopped without error.
pub async fn stop_cleanly<O, P>(
    handle: &reconcile_engine::Handle<O, P>,
    task: tokio::task::JoinHandle<Result<(), reconcile_engine::Error>>,
) {
    handle.stop();
    within("the stop", task)
        .await
        .expect("joined: no panic escapes")
        .expect("a clean stop");
}

/// Lets the other tasks run and the clock move, one [`STEP`] at a time, until `check`
/// holds; fails the test after [`PATIENCE`] of virtual time.
pub async fn until(what: &str, mut check: impl FnMut() -> bool) {
    within(what, async {
        while !check() {
            tokio::time::sleep(STEP).await;
        }
    })
    .await;
}

/// Each cell's members, as its last reconcile saw them.
pub type Seen = Arc<Mutex<BTreeMap<String, Vec<String>>>>;

/// The members' names.
pub fn names<'a>(members: impl IntoIterator<Item = &'a Arc<PodView>>) -> Vec<String> {
    members
        .into_iter()
        .filter_map(|p| p.metadata.name.as_deref().map(str::to_owned))
        .collect()
}

/// The transport of an in-process source, which never needs one: sending fails the test.
// Only the in-process test binaries use it.
#[allow(dead_code)]
#[derive(Clone)]
pub struct NoTransport;

impl reconcile_engine::Transport for NoTransport {
    fn send(
        &self,
        request: http::Request<Vec<u8>>,
    ) -> BoxFuture<
        Result<http::Response<reconcile_engine::BodyStream>, reconcile_engine::TransportError>,
    > {
        panic!("an in-process source sent {}", request.uri());
    }
}

/// A pod in namespace `ns` with label `cell`.
#[allow(dead_code)]
pub fn pod(name: &str, cell: &str) -> PodView {
    serde_json::from_str(&format!(
        r#"{{"metadata":{{"name":"{name}","namespace":"ns","labels":{{"cell":"{cell}"}}}}}}"#
    ))
    .expect("a pod")
}

/// A reconcile recording each cell's members in `seen`.
#[allow(dead_code)]
pub async fn record(
    request: reconcile_engine::Reconcile<PodView, String>,
    seen: Seen,
) -> Result<reconcile_engine::Action, String> {
    let (cell, members) = request.into_parts();
    seen.lock().unwrap().insert(cell, names(&members));
    Ok(reconcile_engine::Action::await_change())
}
