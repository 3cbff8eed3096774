//! Streams as sources (kube-runtime's `Controller::for_stream`): a controller whose objects
//! come from any `Stream` in the process, on every runtime. The stream feeds the
//! controller's in-process source ([`Source::in_process`]), so its events are ordinary
//! `SourceEvent`s to the core and reach a trace as such, and every object wakes the parent
//! its key map names.
//!
//! The feed is bounded by the controller's inbox: a stream that yields faster than the
//! controller reads waits for room (nothing is dropped or buffered beyond it).

use futures_core::Stream;
use futures_lite::StreamExt;
use reconcile_core::{KeyMap, Object, SourceEvent};

use super::controller::{Controller, ParentKey};
use super::handle::Handle;
use super::runtime::Runtime;
use super::source::Source;
use super::transport::Transport;

impl<O, P, R, T> Controller<O, P, R, T>
where
    O: Object + Send + Sync,
    P: ParentKey,
    R: Runtime,
    T: Transport,
{
    /// A controller over a stream of objects (kube-runtime's `for_stream`): it syncs at
    /// once with nothing cached, and each object the stream yields is cached (inserted or
    /// updated) and wakes its parent. When the stream ends the source ends with it
    /// ([`Event::SourceEnded`](reconcile_core::Event::SourceEnded)); what is cached stays.
    pub fn for_stream_with(
        runtime: R,
        objects: impl Stream<Item = O> + Send + 'static,
        key_map: impl Into<KeyMap<O, P>>,
    ) -> Self {
        let events = futures_lite::stream::once(SourceEvent::Replace(Vec::new()))
            .chain(objects.map(SourceEvent::Upsert));
        Self::for_events_with(runtime, events, key_map)
    }

    /// [`Controller::for_stream_with`] on the runtime's default value.
    pub fn for_stream(
        objects: impl Stream<Item = O> + Send + 'static,
        key_map: impl Into<KeyMap<O, P>>,
    ) -> Self
    where
        R: Default,
    {
        Self::for_stream_with(R::default(), objects, key_map)
    }

    /// A controller over a stream of store writes: the first must be a
    /// [`SourceEvent::Replace`] (the whole world; the controller syncs on it), then any
    /// `Upsert`, `Delete` or `Replace`. A stream that opens otherwise is refused as an
    /// in-process source is ([`Event::SourceNotSynced`](reconcile_core::Event::SourceNotSynced)).
    pub fn for_events_with(
        runtime: R,
        events: impl Stream<Item = SourceEvent<O>> + Send + 'static,
        key_map: impl Into<KeyMap<O, P>>,
    ) -> Self {
        let controller = Self::with_runtime(runtime, Source::in_process(), key_map).name("stream");
        let handle = controller.handle();
        controller.beside(Box::pin(feed(events, handle)))
    }
}

/// Pushes each event of `events` through `handle` until either ends.
async fn feed<O, P>(
    events: impl Stream<Item = SourceEvent<O>> + Send + 'static,
    handle: Handle<O, P>,
) {
    let mut events = std::pin::pin!(events);
    while let Some(event) = events.next().await {
        let pushed = match event {
            SourceEvent::Replace(all) => handle.replace(all).await,
            SourceEvent::Upsert(o) => handle.upsert(o).await,
            SourceEvent::Delete(o) => handle.delete(o).await,
        };
        if pushed.is_err() {
            return;
        }
    }
    let _ = handle.end_source(Some("the stream ended".into())).await;
}
