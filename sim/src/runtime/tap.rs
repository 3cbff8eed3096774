//! The tap that logs each reconcile: a minimal `tracing` subscriber, installed on the
//! simulation's thread while it runs, that sees only the engine's `reconcile` span (opened
//! when a key is dispatched, with its `key` and `attempt`) and writes a log line for it.
//! Every other span and event is disabled, so a controller runs with no other subscriber
//! on that thread: a test's own `tracing` output is not shown while a simulation runs.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Dispatch, Event, Metadata, Subscriber};

use super::executor::Shared;

pub(super) struct ReconcileTap {
    pub(super) shared: Arc<Shared>,
    pub(super) next: AtomicU64,
}

fn wanted(meta: &Metadata<'_>) -> bool {
    meta.is_span() && meta.name() == "reconcile" && meta.target().starts_with("reconcile_engine")
}

#[derive(Default)]
struct Fields {
    key: String,
    attempt: u64,
}

impl Visit for Fields {
    fn record_u64(&mut self, field: &Field, value: u64) {
        if field.name() == "attempt" {
            self.attempt = value;
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == "key" {
            self.key = format!("{value:?}");
        }
    }
}

impl Subscriber for ReconcileTap {
    fn register_callsite(&self, meta: &'static Metadata<'static>) -> Interest {
        if wanted(meta) {
            Interest::sometimes()
        } else {
            Interest::never()
        }
    }

    fn enabled(&self, meta: &Metadata<'_>) -> bool {
        wanted(meta)
    }

    fn new_span(&self, span: &Attributes<'_>) -> Id {
        let mut fields = Fields::default();
        span.record(&mut fields);
        let mut st = self.shared.lock();
        if fields.attempt > 1 {
            st.log(format_args!(
                "reconcile {} (attempt {})",
                fields.key, fields.attempt
            ));
        } else {
            st.log(format_args!("reconcile {}", fields.key));
        }
        Id::from_u64(self.next.fetch_add(1, Ordering::Relaxed))
    }

    fn record(&self, _: &Id, _: &Record<'_>) {}

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, _: &Event<'_>) {}

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}

/// Runs `run` with `tap` as the thread's subscriber.
///
/// `tracing` decides once per callsite, for the whole process, whether it may ever be
/// enabled; while a single subscriber is alive it asks only the default of the thread that
/// hits the callsite first. A thread with no subscriber (another test, a controller on
/// tokio beside the simulation) would then switch the `reconcile` span off everywhere, and
/// a seed's log would depend on what else the process ran. A second subscriber kept alive
/// for the process makes `tracing` ask every live subscriber instead, and the tap's
/// "sometimes" keeps the span checked per thread.
pub(super) fn with_tap<T>(tap: ReconcileTap, run: impl FnOnce() -> T) -> T {
    static ANCHOR: OnceLock<Dispatch> = OnceLock::new();
    ANCHOR.get_or_init(|| Dispatch::new(Anchor));
    tracing::subscriber::with_default(tap, run)
}

/// The subscriber kept alive for the process (see [`with_tap`]): it keeps the tap's span
/// interesting and enables nothing itself.
struct Anchor;

impl Subscriber for Anchor {
    fn register_callsite(&self, meta: &'static Metadata<'static>) -> Interest {
        if wanted(meta) {
            Interest::sometimes()
        } else {
            Interest::never()
        }
    }

    fn enabled(&self, _: &Metadata<'_>) -> bool {
        false
    }

    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }

    fn record(&self, _: &Id, _: &Record<'_>) {}

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, _: &Event<'_>) {}

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}
