//! What the engine needs from an async runtime: spawn, sleep, a clock (quinn's `Runtime`).
//!
//! One small trait, and one file per runtime beside the driver that uses it, so the engine
//! itself never names tokio or smol. A runtime that can also wait for SIGINT / SIGTERM
//! implements [`ShutdownSignal`], which gives its controllers
//! [`Controller::shutdown_on_signal`](crate::Controller::shutdown_on_signal).

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

/// A boxed, sendable future: what the engine hands to [`Runtime::spawn`].
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// Spawning, sleeping and the monotonic clock of one async runtime.
pub trait Runtime: Clone + Send + Sync + 'static {
    /// A spawned task. Dropping it detaches the task; [`Task::abort`] cancels it.
    type Task: Task;

    /// Runs `future` in the background.
    fn spawn(&self, future: BoxFuture<()>) -> Self::Task;

    /// Completes at `deadline` (at once when it has passed).
    fn sleep_until(&self, deadline: Instant) -> BoxFuture<()>;

    /// The runtime's monotonic clock: the one [`Runtime::sleep_until`] measures against.
    fn now(&self) -> Instant;
}

/// A runtime's way to wait for the process to be asked to stop.
pub trait ShutdownSignal: Runtime {
    /// Completes on SIGINT (Ctrl-C) or SIGTERM.
    fn shutdown_signal(&self) -> BoxFuture<()>;
}

/// A handle to a spawned task.
pub trait Task: Send + 'static {
    /// Cancels the task at its next suspension point; it never resumes.
    fn abort(self);
}

/// Runs `future`, giving up after `limit`: `None` when the time ran out first.
pub async fn timeout<R: Runtime, T>(
    runtime: &R,
    limit: Duration,
    future: impl Future<Output = T>,
) -> Option<T> {
    let deadline = runtime.now() + limit;
    let sleep = runtime.sleep_until(deadline);
    futures_lite::future::or(async { Some(future.await) }, async {
        sleep.await;
        None
    })
    .await
}
