//! [`Runtime`] for smol: `smol::spawn` on the global executor, `async-io` timers, the std
//! monotonic clock (the one `async-io` measures its timers against).

use std::time::Instant;

use reconcile_engine::{BoxFuture, Runtime, ShutdownSignal, Task};

/// smol's global executor and `async-io`'s reactor and timers.
///
/// Tasks run on the global executor's threads (`SMOL_THREADS`, one by default); a
/// controller needs no thread of its own, and nothing here ever starts a tokio runtime.
#[derive(Debug, Clone, Copy, Default)]
pub struct SmolRuntime;

impl Runtime for SmolRuntime {
    type Task = SmolTask;

    fn spawn(&self, future: BoxFuture<()>) -> SmolTask {
        SmolTask(Some(smol::spawn(future)))
    }

    fn sleep_until(&self, deadline: Instant) -> BoxFuture<()> {
        let timer = smol::Timer::at(deadline);
        Box::pin(async move {
            timer.await;
        })
    }

    fn now(&self) -> Instant {
        Instant::now()
    }
}

impl ShutdownSignal for SmolRuntime {
    fn shutdown_signal(&self) -> BoxFuture<()> {
        Box::pin(shutdown_signal())
    }
}

/// A spawned smol task.
///
/// smol cancels a task whose handle is dropped; the engine expects a dropped handle to
/// detach (as tokio's does), so dropping this one detaches and only
/// [`abort`](Task::abort) cancels.
#[derive(Debug)]
pub struct SmolTask(Option<smol::Task<()>>);

impl Task for SmolTask {
    fn abort(mut self) {
        // Dropping a smol task cancels it at its next suspension point.
        drop(self.0.take());
    }
}

impl Drop for SmolTask {
    fn drop(&mut self) {
        if let Some(task) = self.0.take() {
            task.detach();
        }
    }
}

/// Completes on SIGINT (Ctrl-C) or SIGTERM, through `async-signal` (no tokio).
///
/// When no handler can be installed (or on a platform without these signals) it never
/// completes, rather than stopping the controller at once; the failure is logged.
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use async_signal::{Signal, Signals};
        use futures_lite::StreamExt;
        match Signals::new([Signal::Int, Signal::Term]) {
            Ok(mut signals) => {
                if let Some(Ok(signal)) = signals.next().await {
                    tracing::info!(?signal, "signal received");
                    return;
                }
            }
            Err(error) => tracing::warn!(%error, "cannot install SIGINT/SIGTERM handlers"),
        }
    }
    std::future::pending::<()>().await;
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_dropped_task_runs_on_and_an_aborted_one_stops() {
        smol::block_on(async {
            let runtime = SmolRuntime;
            let ran = Arc::new(AtomicBool::new(false));
            let flag = Arc::clone(&ran);
            let (tx, rx) = async_channel_pair();
            drop(runtime.spawn(Box::pin(async move {
                flag.store(true, Ordering::SeqCst);
                let _ = tx.send(()).await;
            })));
            let got =
                reconcile_engine::runtime::timeout(&runtime, Duration::from_secs(10), rx.recv())
                    .await;
            assert!(matches!(got, Some(Ok(()))), "detached task did not finish");
            assert!(ran.load(Ordering::SeqCst));

            let aborted = Arc::new(AtomicBool::new(false));
            let flag = Arc::clone(&aborted);
            let task = runtime.spawn(Box::pin(async move {
                smol::Timer::after(Duration::from_millis(200)).await;
                flag.store(true, Ordering::SeqCst);
            }));
            task.abort();
            smol::Timer::after(Duration::from_millis(400)).await;
            assert!(!aborted.load(Ordering::SeqCst), "aborted task resumed");
        });
    }

    #[test]
    fn sleep_until_waits_for_the_deadline() {
        smol::block_on(async {
            let runtime = SmolRuntime;
            let start = runtime.now();
            runtime.sleep_until(start + Duration::from_millis(50)).await;
            assert!(runtime.now() >= start + Duration::from_millis(50));
        });
    }

    fn async_channel_pair() -> (smol::channel::Sender<()>, smol::channel::Receiver<()>) {
        smol::channel::bounded(1)
    }
}
