//! Log lines name their controller: two controllers in one process, each line of the driver
//! inside a `controller{controller=NAME}` span. Alone in its test binary because it installs
//! the process-wide subscriber: a thread-scoped one (`set_default`) loses events when another
//! test's thread registers a callsite at the same moment (tracing caches each callsite's
//! interest process-wide), which made this check flaky beside the in-process tests.

mod support;

use std::sync::{Arc, Mutex};

use reconcile_core::KeyMap;
use reconcile_core::pod::PodView;
use reconcile_engine::{Controller, Source, default_error_policy};
use support::{NoTransport, Paused, Seen, paused, pod, record, stop_cleanly, until};

async fn controller() -> Controller<PodView, String, Paused, NoTransport> {
    Controller::with_runtime(
        paused().await,
        Source::in_process(),
        KeyMap::by_label("cell"),
    )
}

/// A `MakeWriter` appending every formatted line to one buffer.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
    type Writer = Captured;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

#[tokio::test(start_paused = true)]
async fn two_controllers_in_one_process_log_lines_that_name_them() {
    let captured = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(captured.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .finish();
    tracing::subscriber::set_global_default(subscriber).expect("the only subscriber");
    let mut runs = Vec::new();
    for name in ["alpha", "beta"] {
        let controller = controller().await.name(name);
        let handle = controller.handle();
        handle.replace(vec![pod("x1", "x")]).await.expect("pushed");
        let seen: Seen = Arc::default();
        let task = tokio::spawn(controller.run(record, default_error_policy, Arc::clone(&seen)));
        until("x reconciled", || seen.lock().unwrap().contains_key("x")).await;
        runs.push((handle, task));
    }
    for (handle, task) in runs {
        stop_cleanly(&handle, task).await;
    }
    let text = String::from_utf8(captured.0.lock().unwrap().clone()).expect("utf-8");
    for name in ["alpha", "beta"] {
        let synced = text
            .lines()
            .filter(|l| {
                l.contains(" synced") && l.contains(&format!("controller{{controller={name}}}"))
            })
            .count();
        assert_eq!(synced, 1, "one synced line of {name}:\n{text}");
    }
    // Every line of the driver names its controller: none is left without.
    let unnamed: Vec<&str> = text
        .lines()
        .filter(|l| !l.contains("controller{controller="))
        .collect();
    assert!(
        unnamed.is_empty(),
        "lines without a controller: {unnamed:#?}"
    );
}
