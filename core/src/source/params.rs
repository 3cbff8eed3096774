//! What to LIST and WATCH: namespace, selectors, timeout. Below every module that sends a
//! request, so the reflector and the commands name it without depending on the config.

use std::fmt;

use crate::wire::format::WireFormat;

/// What to LIST and WATCH (kube-runtime's `watcher::Config`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchParams {
    /// Namespace, or all namespaces when `None`.
    pub namespace: Option<String>,
    /// `labelSelector`, applied server-side to LIST and WATCH alike.
    pub label_selector: Option<String>,
    /// `fieldSelector`.
    pub field_selector: Option<String>,
    /// `timeoutSeconds`, sent on every WATCH (default 300).
    pub timeout_seconds: u32,
    /// LIST in pages of at most this many objects (`limit` and `continue`; kube-runtime's
    /// `watcher::Config::page_size`), or in one request when `None` (the default). The
    /// pages are gathered and applied as one listing after the last.
    pub list_page_size: Option<u32>,
    /// How the initial state is fetched: a LIST then a WATCH (the default), or one
    /// streaming WATCH that opens with it (kube-runtime's `watcher::Config::initial_list_strategy`).
    pub initial_list: InitialListStrategy,
    /// What to ask the apiserver to encode LIST and WATCH responses as (client-go's
    /// `ContentType`): JSON (the default), or protobuf for types that decode it.
    pub wire_format: WireFormat,
    /// The `kind` this source's objects carry (`Pod`; `PartialObjectMetadata` for a
    /// metadata-only source), when it should be checked: a JSON watch frame whose object
    /// names another kind is skipped as undecodable ([`FrameErrorKind::WrongKind`], reported
    /// as `Event::FrameSkipped`), its resourceVersion still taken as the cursor. An object
    /// that names no kind passes. `None` (the default) checks nothing: typed k8s-openapi
    /// objects check their own kind as they decode, and protobuf frames check the envelope's.
    ///
    /// [`FrameErrorKind::WrongKind`]: crate::frame::FrameErrorKind::WrongKind
    pub kind: Option<String>,
    /// `shardSelector` (KEP-5866, behind the apiserver's `ShardedListAndWatch` gate): only
    /// objects whose namespace hashes into these ranges. Set by the core, never by hand:
    /// a sharded controller whose keys are sharded by namespace asks for the shards it
    /// holds, and changes it (relisting) as its shards move. `None`: every object.
    pub shard_selector: Option<String>,
}

/// How a source fetches its initial state, and the state after every relist
/// (kube-runtime's `watcher::InitialListStrategy`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum InitialListStrategy {
    /// LIST (paged if [`WatchParams::list_page_size`] says so), then WATCH from the listing's
    /// version.
    #[default]
    ListWatch,
    /// One WATCH with `sendInitialEvents=true`, `resourceVersionMatch=NotOlderThan` and
    /// bookmarks (client-go's WatchList): the apiserver streams the current state as `ADDED`
    /// events and marks its end with a bookmark annotated `k8s.io/initial-events-end: "true"`;
    /// the events are gathered and applied as one listing at that bookmark, and the stream
    /// goes on as the watch. A server that refuses the request (an older one, or the
    /// `WatchList` feature gate off) makes the source fall back to
    /// [`ListWatch`](Self::ListWatch) for good.
    StreamingList,
}

impl Default for WatchParams {
    fn default() -> Self {
        WatchParams {
            namespace: None,
            label_selector: None,
            field_selector: None,
            timeout_seconds: 300,
            list_page_size: None,
            initial_list: InitialListStrategy::ListWatch,
            wire_format: WireFormat::Json,
            kind: None,
            shard_selector: None,
        }
    }
}

impl WatchParams {
    /// Watches everything in `namespace`.
    #[must_use]
    pub fn namespaced(namespace: impl Into<String>) -> Self {
        WatchParams {
            namespace: Some(namespace.into()),
            ..WatchParams::default()
        }
    }

    /// Sets the label selector.
    #[must_use]
    pub fn labels(mut self, selector: impl Into<String>) -> Self {
        self.label_selector = Some(selector.into());
        self
    }

    /// Sets the field selector.
    #[must_use]
    pub fn fields(mut self, selector: impl Into<String>) -> Self {
        self.field_selector = Some(selector.into());
        self
    }

    /// LISTs in pages of at most `size` objects; `0` lists in one request.
    #[must_use]
    pub fn list_pages(mut self, size: u32) -> Self {
        self.list_page_size = (size > 0).then_some(size);
        self
    }

    /// Fetches the initial state with a streaming list
    /// ([`InitialListStrategy::StreamingList`]; kube-runtime's
    /// `watcher::Config::streaming_lists`) instead of a LIST.
    #[must_use]
    pub fn streaming_lists(mut self) -> Self {
        self.initial_list = InitialListStrategy::StreamingList;
        self
    }

    /// Asks for protobuf on LIST and WATCH (see [`WireFormat::Protobuf`]).
    #[must_use]
    pub fn protobuf(mut self) -> Self {
        self.wire_format = WireFormat::Protobuf;
        self
    }

    /// Checks the `kind` of every JSON watch frame's object (see [`WatchParams::kind`]).
    #[must_use]
    pub fn of_kind(mut self, kind: impl Into<String>) -> Self {
        self.kind = Some(kind.into());
        self
    }

    /// Sets `timeoutSeconds`.
    #[must_use]
    pub fn timeout(mut self, seconds: u32) -> Self {
        self.timeout_seconds = seconds;
        self
    }
}

impl fmt::Display for WatchParams {
    /// Renders the scoping as a suffix: ` ns=a labels=x=y`, empty when unscoped.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(ns) = &self.namespace {
            write!(f, " ns={ns}")?;
        }
        if let Some(l) = &self.label_selector {
            write!(f, " labels={l}")?;
        }
        if let Some(s) = &self.field_selector {
            write!(f, " fields={s}")?;
        }
        if self.wire_format != WireFormat::Json {
            write!(f, " wire={}", self.wire_format.as_str())?;
        }
        if let Some(s) = &self.shard_selector {
            write!(f, " shards={s}")?;
        }
        Ok(())
    }
}
