//! [`Runtime`] for tokio: `tokio::spawn`, tokio timers, tokio's clock (so paused time in
//! tests applies to the core too); [`shutdown_signal`] via `tokio::signal`.

use std::time::Instant;

use reconcile_engine::{BoxFuture, Runtime, ShutdownSignal, Task};

/// The ambient tokio runtime.
///
/// # Panics
/// Spawning or sleeping outside a tokio runtime with the time driver enabled panics, as
/// `tokio::spawn` and `tokio::time::sleep` do; every controller future runs inside one.
#[derive(Debug, Clone, Copy, Default)]
pub struct TokioRuntime;

impl Runtime for TokioRuntime {
    type Task = TokioTask;

    fn spawn(&self, future: BoxFuture<()>) -> TokioTask {
        TokioTask(tokio::spawn(future))
    }

    fn sleep_until(&self, deadline: Instant) -> BoxFuture<()> {
        Box::pin(tokio::time::sleep_until(deadline.into()))
    }

    fn now(&self) -> Instant {
        tokio::time::Instant::now().into_std()
    }
}

impl ShutdownSignal for TokioRuntime {
    fn shutdown_signal(&self) -> BoxFuture<()> {
        Box::pin(shutdown_signal())
    }
}

/// A spawned tokio task; dropping it detaches.
#[derive(Debug)]
pub struct TokioTask(tokio::task::JoinHandle<()>);

impl Task for TokioTask {
    fn abort(self) {
        self.0.abort();
    }
}

/// Completes on SIGINT (Ctrl-C) or, on Unix, SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            // No handler could be installed: never fire rather than stop at once.
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_dropped_task_runs_on_and_an_aborted_one_stops() {
        let runtime = TokioRuntime;
        let (tx, rx) = tokio::sync::oneshot::channel();
        drop(runtime.spawn(Box::pin(async move {
            let _ = tx.send(());
        })));
        let got = tokio::time::timeout(Duration::from_secs(10), rx).await;
        assert!(matches!(got, Ok(Ok(()))), "detached task did not finish");

        let resumed = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&resumed);
        let task = runtime.spawn(Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            flag.store(true, Ordering::SeqCst);
        }));
        tokio::task::yield_now().await;
        task.abort();
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert!(!resumed.load(Ordering::SeqCst), "aborted task resumed");
    }

    #[tokio::test(start_paused = true)]
    async fn the_clock_and_timers_are_tokios_so_paused_time_applies() {
        let runtime = TokioRuntime;
        let start = runtime.now();
        assert_eq!(start, tokio::time::Instant::now().into_std());
        // An hour of tokio's paused clock: no real wait.
        let wall = std::time::Instant::now();
        runtime.sleep_until(start + Duration::from_secs(3600)).await;
        assert!(runtime.now() >= start + Duration::from_secs(3600));
        assert!(
            wall.elapsed() < Duration::from_secs(60),
            "slept in real time"
        );
    }
}
