//! A simulated cluster for any kind: a model of the apiserver and its etcd, pure and
//! deterministic, served both as HTTP ([`Cluster::serve`], the shape the engine's
//! `Transport` speaks) and as a typed Rust API for tests to seed and inspect the world.
//!
//! | concept | module |
//! |---|---|
//! | what is served: [`KindDescriptor`], [`builtin_kinds`], CRDs from JSON | [`kinds`] |
//! | objects per kind, one resourceVersion sequence, history, compaction, bounds | `store` |
//! | GET / LIST: `resourceVersion(Match)`, paging, label and field selectors | `read` |
//! | WATCH: cursors, bookmarks, `timeoutSeconds`, streaming lists, 410 | `watch` |
//! | create / replace / patch, `/status`, generation, dry runs | `write` |
//! | delete: preconditions, finalizers, propagation | `delete` |
//! | JSON merge patch (RFC 7386), JSON patch (RFC 6902) | `patch` |
//! | a Secret's `stringData` folded into `data`, `data` checked as base64 | `secret` |
//! | strategic merge patch for the built-ins, by each list field's strategy | `strategic` |
//! | server-side apply and `managedFields` | `apply` |
//! | the garbage collector's ownerReferences cascade, as explicit steps | `gc` |
//! | errors as `Status` bodies worded as apimachinery words them | [`status`] |
//! | `Accept`: JSON, metadata only (`as=PartialObjectMetadata`), 406 | `accept` |
//! | the HTTP entry point: paths, query strings, content types | `serve`, `path` |
//!
//! **Modelled**: everything above for every registered kind, built-in or custom, with
//! apiserver semantics per collection; the exact `Status` bodies of apimachinery's error
//! constructors; `generateName`, uid and timestamps from the caller's seed and clock.
//!
//! **Not modelled** (the apiserver does it, this does not): admission beyond namespace
//! existence, schema validation and defaulting (objects are stored as sent, apart from
//! system metadata and a Secret's `stringData`, `data` and `type`), strategic merge patch
//! on a custom resource (415, as the apiserver answers), protobuf, YAML and table output
//! (JSON only; metadata-only answers are JSON too),
//! graceful pod deletion (a pod goes at once unless it has finalizers), namespace deletion
//! emptying the namespace, multiple served versions of one CRD (only the storage version
//! is served), authentication, and discovery documents. Apply's model is set out in
//! `apply`'s docs and in docs/alignment.md.
//!
//! Determinism: the clock is the `now` passed to each call (clamped so it never goes back;
//! timestamps count from 2026-01-01T00:00:00Z), names and uids come from a counter mixed
//! with [`ClusterConfig::seed`], and every output is built from ordered maps.

mod accept;
mod apply;
mod delete;
mod gc;
pub mod kinds;
mod params;
mod patch;
mod path;
mod read;
mod secret;
mod serve;
pub mod status;
mod store;
mod strategic;
mod watch;
mod write;

use std::collections::BTreeMap;
use std::time::Duration;

use reconcile_core::Instant;
use serde_json::Value;

pub use accept::{Conversion, EventView, MetaVersion};
pub use delete::Deleted;
pub use gc::GcAction;
pub use kinds::{CrdError, KindDescriptor, builtin_kinds};
pub use params::{
    DeleteOptions, ListOptions, PATCH_TYPES, Patch, PatchOptions, Propagation, WatchOptions,
    WriteOptions,
};
pub use path::Located;
pub use serve::{Reply, Response};
pub use status::ApiStatus;
pub(crate) use store::to_json_vec;
pub use store::{EPOCH_UNIX_SECONDS, timestamp};
pub use watch::{WatchId, WatchPoll};

use store::Collection;

/// A registered kind, as the cluster names it (an index; `Copy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KindId(usize);

/// Bounds and knobs. Every bound, when reached, is answered with
/// [`ApiStatus::bound_exceeded`] (507) or a typed error, never by dropping anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterConfig {
    /// Mixed into every uid and `generateName` suffix.
    pub seed: u64,
    /// Objects one kind holds at most.
    pub max_objects_per_kind: usize,
    /// Serialized bytes one kind holds at most.
    pub max_bytes_per_kind: usize,
    /// Serialized bytes of one object at most (413, like etcd's request limit).
    pub max_object_bytes: usize,
    /// Changes one kind's history keeps at most before writes are refused.
    pub max_history_per_kind: usize,
    /// Bytes one kind's history keeps at most before writes are refused.
    pub max_history_bytes_per_kind: usize,
    /// Compact changes older than this at every call (`None`: only [`Cluster::compact`]).
    pub compaction_window: Option<Duration>,
    /// Open watches at most (more: 429 `TooManyRequests`).
    pub max_watches: usize,
    /// Frames one [`Cluster::poll_watch`] returns at most; the rest wait for the next poll.
    pub max_frames_per_poll: usize,
    /// Request body bytes at most (413, as the apiserver's 3 MiB limit).
    pub max_request_bytes: usize,
    /// How often an idle watch that allows bookmarks gets one.
    pub bookmark_interval: Duration,
    /// A watch's length when the request sets no `timeoutSeconds` (the apiserver draws
    /// one between 30 and 60 minutes; this is fixed).
    pub default_watch_timeout: Duration,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            seed: 0,
            max_objects_per_kind: 100_000,
            max_bytes_per_kind: 256 << 20,
            max_object_bytes: 1_572_864,
            max_history_per_kind: 100_000,
            max_history_bytes_per_kind: 256 << 20,
            compaction_window: None,
            max_watches: 10_000,
            max_frames_per_poll: 10_000,
            max_request_bytes: 3 << 20,
            bookmark_interval: Duration::from_secs(60),
            default_watch_timeout: Duration::from_secs(1800),
        }
    }
}

/// Why a kind could not be registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClusterError {
    /// The group and plural (or apiVersion and kind) are already served.
    #[error("{0} is already registered")]
    Duplicate(String),
    /// The CRD JSON lacks what serving needs.
    #[error(transparent)]
    Crd(#[from] CrdError),
}

/// The simulated cluster. See the [module docs](self).
#[derive(Debug)]
pub struct Cluster {
    config: ClusterConfig,
    collections: Vec<Collection>,
    by_resource: BTreeMap<(String, String), KindId>,
    by_type: BTreeMap<(String, String), KindId>,
    rv: u64,
    compacted: u64,
    now: Instant,
    counter: u64,
    watches: BTreeMap<u64, watch::Watch>,
    next_watch: u64,
    /// What the garbage collector's next pass must look at (kept by every commit).
    gc: gc::Tracker,
}

impl Default for Cluster {
    fn default() -> Self {
        Cluster::new(ClusterConfig::default())
    }
}

/// The namespaces a fresh cluster has.
pub const INITIAL_NAMESPACES: [&str; 4] =
    ["default", "kube-node-lease", "kube-public", "kube-system"];

impl Cluster {
    /// An empty cluster at resourceVersion 1 serving no kind.
    #[must_use]
    pub fn new(config: ClusterConfig) -> Self {
        Cluster {
            config,
            collections: Vec::new(),
            by_resource: BTreeMap::new(),
            by_type: BTreeMap::new(),
            rv: 1,
            compacted: 0,
            now: Instant::ZERO,
            counter: 0,
            watches: BTreeMap::new(),
            next_watch: 1,
            gc: gc::Tracker::default(),
        }
    }

    /// A cluster serving [`builtin_kinds`], with the namespaces of a fresh cluster
    /// ([`INITIAL_NAMESPACES`]) created at `now`.
    #[must_use]
    pub fn with_builtins(config: ClusterConfig, now: Instant) -> Self {
        let mut cluster = Cluster::new(config);
        for desc in builtin_kinds() {
            // The table has no duplicates.
            let _ = cluster.register(desc);
        }
        // CRDs as objects: creating one serves its kind.
        let _ = cluster.register(KindDescriptor::custom_resource_definitions());
        if let Some(ns) = cluster.kind("", "namespaces") {
            for name in INITIAL_NAMESPACES {
                let body = serde_json::json!({"metadata": {"name": name}});
                // A fresh cluster has room for four namespaces.
                let _ = cluster.create(now, ns, None, body, &WriteOptions::default());
            }
        }
        cluster
    }

    /// Serves a kind.
    ///
    /// # Errors
    /// [`ClusterError::Duplicate`] when its group and plural, or apiVersion and kind, are
    /// already served.
    pub fn register(&mut self, desc: KindDescriptor) -> Result<KindId, ClusterError> {
        let resource = (desc.group.clone(), desc.plural.clone());
        let ty = (desc.api_version(), desc.kind.clone());
        if self.by_resource.contains_key(&resource) || self.by_type.contains_key(&ty) {
            return Err(ClusterError::Duplicate(desc.group_resource()));
        }
        let id = KindId(self.collections.len());
        self.by_resource.insert(resource, id);
        self.by_type.insert(ty, id);
        self.collections.push(Collection::new(desc));
        Ok(id)
    }

    /// Serves a custom resource from its CustomResourceDefinition JSON (what
    /// `serde_json::to_value(Foo::crd())` gives).
    ///
    /// # Errors
    /// [`ClusterError::Crd`] for an unusable CRD, or a duplicate.
    pub fn register_crd(&mut self, crd: &Value) -> Result<KindId, ClusterError> {
        self.register(KindDescriptor::from_crd(crd)?)
    }

    /// The kind served under this group (`""` for core) and plural.
    #[must_use]
    pub fn kind(&self, group: &str, plural: &str) -> Option<KindId> {
        self.by_resource
            .get(&(group.to_owned(), plural.to_owned()))
            .copied()
    }

    /// The kind of this apiVersion and kind (`("apps/v1", "Deployment")`).
    #[must_use]
    pub fn kind_of(&self, api_version: &str, kind: &str) -> Option<KindId> {
        self.by_type
            .get(&(api_version.to_owned(), kind.to_owned()))
            .copied()
    }

    /// A registered kind's descriptor.
    ///
    /// # Panics
    /// Never for a `KindId` this cluster returned.
    #[must_use]
    pub fn descriptor(&self, kind: KindId) -> &KindDescriptor {
        &self.collections[kind.0].desc
    }

    /// Every registered kind, in registration order.
    pub fn kinds(&self) -> impl Iterator<Item = (KindId, &KindDescriptor)> {
        self.collections
            .iter()
            .enumerate()
            .map(|(i, c)| (KindId(i), &*c.desc))
    }

    /// The latest resourceVersion (etcd's revision).
    #[must_use]
    pub fn resource_version(&self) -> u64 {
        self.rv
    }

    /// The version compacted to: reads below it answer 410.
    #[must_use]
    pub fn compacted(&self) -> u64 {
        self.compacted
    }

    /// The configuration.
    #[must_use]
    pub fn config(&self) -> &ClusterConfig {
        &self.config
    }

    /// Moves the virtual clock (never back) and applies the compaction window.
    fn advance(&mut self, now: Instant) {
        if now > self.now {
            self.now = now;
        }
        self.compact_window();
    }

    /// The next value of the deterministic source (splitmix64 over a counter and the seed).
    fn next_random(&mut self) -> u64 {
        self.counter += 1;
        let mut z = self
            .config
            .seed
            .wrapping_add(self.counter.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A version-4-shaped uid from the deterministic source.
    fn next_uid(&mut self) -> String {
        let (a, b) = (self.next_random(), self.next_random());
        format!(
            "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0xfff,
            b >> 52,
            b & 0xffff_ffff_ffff
        )
    }

    /// Five characters from the apiserver's `generateName` alphabet (no vowels, no
    /// look-alikes), from the deterministic source.
    fn name_suffix(&mut self) -> String {
        const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        let mut r = self.next_random();
        (0..5)
            .map(|_| {
                let c = ALPHABET[(r % ALPHABET.len() as u64) as usize];
                r /= ALPHABET.len() as u64;
                char::from(c)
            })
            .collect()
    }
}
