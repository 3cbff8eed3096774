//! The tap that logs each reconcile: a minimal `tracing` subscriber, installed on the
//! simulation's thread while it runs, that sees only the engine's `reconcile` span (opened
//! when a key is dispatched, with its `key` and `attempt`) and writes a log line for it.
//! Every other span and event is disabled, so a controller runs with no other subscriber
//! on that thread: a test's own `tracing` output is not shown while a simulation runs.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event, Metadata, Subscriber};

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
