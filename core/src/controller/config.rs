//! Configuration of a loop, with its defaults, validated once at construction.

use std::fmt;
use std::time::Duration;

use std::sync::Arc;

use crate::controller::key_map::KeyMap;
use crate::controller::predicate::Predicate;
use crate::controller::retry::Backoff;
use crate::election::{ElectionConfig, ElectionConfigError};
use crate::shard::{ShardBy, ShardConfig, ShardConfigError, ShardKey};
use crate::source::params::WatchParams;
use crate::source::secondary::SecondarySpec;
use crate::source::transform::Transform;
use crate::vocabulary::SourceId;
use crate::wire::format::WireFormat;
use crate::wire::object::{Object, ObjectKey, OwnerRef};

/// The largest `concurrency` accepted: far above any useful number of parallel reconciles,
/// low enough that a typo cannot ask for millions of in-flight tasks.
pub const MAX_CONCURRENCY: usize = 4096;

/// The default of [`Config::read_own_writes`]: how long a key waits at most for its writes
/// to be observed before it is dispatched anyway.
pub const DEFAULT_OWN_WRITES_WAIT: Duration = Duration::from_secs(5);

/// The default of [`Config::max_own_writes`]: keys that may wait for their writes at once.
pub const DEFAULT_MAX_OWN_WRITES: usize = 10_000;

/// Where objects come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceConfig {
    /// A reflector over the apiserver's LIST and WATCH.
    Kubernetes(WatchParams),
    /// Events pushed in-process (no cursor, no replay window): the driver opens the source
    /// when asked, and each stream must open with a whole-world `Replace`.
    InProcess,
}

/// Everything a loop needs; built with [`Config::kubernetes`] or [`Config::in_process`].
pub struct Config<O, P> {
    /// Where objects come from.
    pub source: SourceConfig,
    /// Object → parent key.
    pub key_map: KeyMap<O, P>,
    /// Parallel reconciles (default 1: one worker, as controller-runtime's `MaxConcurrentReconciles`).
    pub concurrency: usize,
    /// Resync period (default 10 h); `None` turns it off.
    pub resync: Option<Duration>,
    /// kube-runtime's debounce (default none): a woken key is queued only once its wakes
    /// have paused this long. Set with [`Config::debounce`].
    pub debounce: Option<Duration>,
    /// Reconcile retry backoff (default 1 s doubling to 60 s).
    pub backoff: Backoff,
    /// Wait before every reflector retry: a failed LIST, a relist, a reopened WATCH
    /// (default 1 s).
    pub retry_delay: Duration,
    /// Wait before reopening an in-process stream that ended or did not open with a
    /// `Replace` (default 1 s).
    pub source_retry_delay: Duration,
    /// How long a streaming list ([`WatchParams::streaming_lists`]) may gather its initial
    /// events before the end bookmark; past it the source falls back to LIST+WATCH, as a
    /// server that ignored the request would never send the bookmark (default 300 s, the
    /// engine's `Limits::list_deadline` for one LIST).
    pub list_deadline: Duration,
    /// The most bytes one listing may gather, over the pages of a paged LIST or the lines of
    /// a streaming list's initial events; past it the listing fails and is retried (paged)
    /// or the source falls back to LIST+WATCH (streaming). Default
    /// [`MAX_LISTING_BYTES`](crate::MAX_LISTING_BYTES); the engine sets it from
    /// its bound on one LIST body (`Limits::max_list_body`), so that paging or streaming never
    /// lets a listing hold more than one unpaged LIST may.
    pub max_listing_bytes: u64,
    /// The secondary sources, in the order added: source `S1`, `S2`, ...
    pub(crate) secondaries: Vec<(SecondaryConfig, Box<dyn SecondarySpec<O, P>>)>,
    /// A builder call that could not be applied, reported by [`Config::validate`].
    pub(crate) misuse: Option<ConfigError>,
    /// Leader election: reconciles run only while this candidate leads (default: off).
    pub election: Option<ElectionConfig>,
    /// Sharding: a key is reconciled only while this replica holds its shard (default:
    /// off). Set with [`Config::sharding`].
    pub(crate) sharding: Option<(ShardConfig, ShardText<P>)>,
    /// Which updates of the primary's objects wake their parent (default: every new
    /// resourceVersion).
    pub predicate: Option<Predicate<O>>,
    /// Applied to each of the primary's objects after decoding, before caching (default:
    /// none). Set with [`Config::transform`].
    pub transform: Option<Transform<O>>,
    /// Parents woken by a listing (the first sync, a relist), a resync or a reconcile-all
    /// trigger wait behind live changes, requeues and retries, without starving (default:
    /// off).
    pub priority: bool,
    /// Read your own writes (Kubernetes' KEP-5647): a key whose last reconcile reported
    /// writes ([`Input::ReconciledWrote`](crate::Input::ReconciledWrote)) is not dispatched
    /// again until the sources caching them have observed them, for at most this long from
    /// the write; past it the key is dispatched anyway (`Event::OwnWritesUnobserved`).
    /// `None` turns it off. Default [`DEFAULT_OWN_WRITES_WAIT`], 5 s; it costs nothing for
    /// runs that report no writes.
    pub read_own_writes: Option<Duration>,
    /// The most keys that may wait for their writes at once (default
    /// [`DEFAULT_MAX_OWN_WRITES`]); past it new writes are not waited for
    /// (`Event::OwnWriteUntracked`, fail open).
    pub max_own_writes: usize,
    /// How long one reconcile may run before it is cancelled and counted as failed, through
    /// the backoff (controller-runtime's `ReconciliationTimeout`); a run may set its own with
    /// [`Input::ReconcileTimeout`](crate::Input::ReconcileTimeout). Default `None`: no
    /// deadline, as controller-runtime.
    pub reconcile_timeout: Option<Duration>,
}

/// The text of a key that its shard is hashed from ([`ShardKey::shard_text`]).
pub(crate) type ShardText<P> = for<'a> fn(&'a P, ShardBy) -> std::borrow::Cow<'a, str>;

/// How a secondary source's objects map to parents, as far as a trace header can say.
///
/// An owner type is a kind, `Deployment`, matched whatever the owner reference's API group,
/// or a kind and group as kubectl writes them, `Deployment.apps` (`Pod.` for the core
/// group), matched on both. The version is not compared, as in controller-runtime: an owner
/// reference written at an older version still names the same owner.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ParentsBy {
    /// The object's controller owner of this type ([`Config::owns`]).
    ControllerOwner(String),
    /// Every owner of this type ([`Config::owns_any_owner`]).
    AnyOwner(String),
    /// A function of the user's ([`Config::watches`]): a replay cannot rebuild it.
    Custom,
}

impl ParentsBy {
    /// The parents `child` wakes under this rule, each looked up in the child's namespace,
    /// sorted and without repeats; none for [`ParentsBy::Custom`], whose function only the
    /// controller holds.
    #[must_use]
    pub fn parents_of<C: Object>(&self, child: &C) -> Vec<ObjectKey> {
        let namespace = child.object_namespace();
        let mut parents: Vec<ObjectKey> = match self {
            ParentsBy::ControllerOwner(owner_type) => child
                .controller_owner()
                .filter(|owner| owner_is(owner_type, owner))
                .map(|owner| ObjectKey::new(namespace, owner.name))
                .into_iter()
                .collect(),
            ParentsBy::AnyOwner(owner_type) => child
                .owner_refs()
                .into_iter()
                .filter(|owner| owner_is(owner_type, owner))
                .map(|owner| ObjectKey::new(namespace, owner.name))
                .collect(),
            ParentsBy::Custom => Vec::new(),
        };
        parents.sort_unstable();
        parents.dedup();
        parents
    }
}

/// Whether `owner` is of `owner_type`: `Kind`, or `Kind.group` (the core group is `""`).
/// A view that keeps no `apiVersion` (a [`PodView`](crate::pod::PodView)'s controller) is
/// matched by kind.
fn owner_is(owner_type: &str, owner: &OwnerRef<'_>) -> bool {
    match owner_type.split_once('.') {
        Some((kind, group)) => {
            let owner_group = owner.api_version.rsplit_once('/').map_or("", |(g, _)| g);
            owner.kind == kind && (owner.api_version.is_empty() || owner_group == group)
        }
        None => owner.kind == owner_type,
    }
}

impl fmt::Display for ParentsBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParentsBy::ControllerOwner(kind) => write!(f, "owner:{kind}"),
            ParentsBy::AnyOwner(kind) => write!(f, "any-owner:{kind}"),
            ParentsBy::Custom => f.write_str("custom"),
        }
    }
}

impl std::str::FromStr for ParentsBy {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match (s, s.split_once(':')) {
            ("custom", _) => Ok(ParentsBy::Custom),
            (_, Some(("owner", kind))) if !kind.is_empty() => {
                Ok(ParentsBy::ControllerOwner(kind.to_owned()))
            }
            (_, Some(("any-owner", kind))) if !kind.is_empty() => {
                Ok(ParentsBy::AnyOwner(kind.to_owned()))
            }
            _ => Err(format!(
                "a secondary maps by \"owner:<kind>\", \"any-owner:<kind>\" or \"custom\", got {s:?}"
            )),
        }
    }
}

/// A secondary source as configured: what it lists and watches, and how its objects map
/// to parents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecondaryConfig {
    /// Namespace, selectors and watch timeout.
    pub params: WatchParams,
    /// How its objects map to parents.
    pub parents_by: ParentsBy,
}

impl<O, P> Clone for Config<O, P> {
    fn clone(&self) -> Self {
        Config {
            source: self.source.clone(),
            key_map: self.key_map.clone(),
            concurrency: self.concurrency,
            resync: self.resync,
            debounce: self.debounce,
            backoff: self.backoff,
            retry_delay: self.retry_delay,
            source_retry_delay: self.source_retry_delay,
            list_deadline: self.list_deadline,
            max_listing_bytes: self.max_listing_bytes,
            secondaries: self
                .secondaries
                .iter()
                .map(|(c, spec)| (c.clone(), spec.clone_box()))
                .collect(),
            misuse: self.misuse.clone(),
            election: self.election.clone(),
            sharding: self.sharding.clone(),
            predicate: self.predicate.clone(),
            transform: self.transform.clone(),
            priority: self.priority,
            read_own_writes: self.read_own_writes,
            max_own_writes: self.max_own_writes,
            reconcile_timeout: self.reconcile_timeout,
        }
    }
}

impl<O, P> fmt::Debug for Config<O, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("source", &self.source)
            .field("concurrency", &self.concurrency)
            .field("resync", &self.resync)
            .field("backoff", &self.backoff)
            .field("retry_delay", &self.retry_delay)
            .field("source_retry_delay", &self.source_retry_delay)
            .field("list_deadline", &self.list_deadline)
            .field("max_listing_bytes", &self.max_listing_bytes)
            .field("read_own_writes", &self.read_own_writes)
            .field("max_own_writes", &self.max_own_writes)
            .field("reconcile_timeout", &self.reconcile_timeout)
            .field(
                "secondaries",
                &self.secondaries.iter().map(|(c, _)| c).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl<O, P> Config<O, P> {
    /// A loop over the apiserver's LIST and WATCH, with the default settings.
    pub fn kubernetes(params: WatchParams, key_map: impl Into<KeyMap<O, P>>) -> Self {
        Config::new(SourceConfig::Kubernetes(params), key_map.into())
    }

    /// A loop fed in-process, with the default settings.
    pub fn in_process(key_map: impl Into<KeyMap<O, P>>) -> Self {
        Config::new(SourceConfig::InProcess, key_map.into())
    }

    fn new(source: SourceConfig, key_map: KeyMap<O, P>) -> Self {
        Config {
            source,
            key_map,
            concurrency: 1,
            resync: Some(Duration::from_secs(10 * 60 * 60)),
            debounce: None,
            backoff: Backoff::default(),
            retry_delay: Duration::from_secs(1),
            source_retry_delay: Duration::from_secs(1),
            list_deadline: Duration::from_secs(300),
            max_listing_bytes: crate::source::reflector::MAX_LISTING_BYTES,
            election: None,
            sharding: None,
            predicate: None,
            transform: None,
            priority: false,
            read_own_writes: Some(DEFAULT_OWN_WRITES_WAIT),
            max_own_writes: DEFAULT_MAX_OWN_WRITES,
            reconcile_timeout: None,
            secondaries: Vec::new(),
            misuse: None,
        }
    }

    /// Adds a secondary source: `C`s listed and watched with `params`, each waking the
    /// parents `map` names (kube-runtime's `watches`, controller-runtime's `Watches` with a
    /// map function). No reconcile runs until every source has synced once.
    #[must_use]
    pub fn watches<C>(
        self,
        params: WatchParams,
        map: impl Fn(&C) -> Vec<P> + Send + Sync + 'static,
    ) -> Self
    where
        O: 'static,
        P: Ord + Clone + Send + 'static,
        C: Object + Send + Sync,
    {
        self.add_secondary(params, ParentsBy::Custom, map)
    }

    fn add_secondary<C>(
        mut self,
        params: WatchParams,
        parents_by: ParentsBy,
        map: impl Fn(&C) -> Vec<P> + Send + Sync + 'static,
    ) -> Self
    where
        O: 'static,
        P: Ord + Clone + Send + 'static,
        C: Object + Send + Sync,
    {
        if let Err(error) =
            check_wire_format::<C>(SourceId::nth(self.secondaries.len() as u64 + 1), &params)
        {
            self.misuse.get_or_insert(error);
        }
        let by_owner = !matches!(parents_by, ParentsBy::Custom);
        let spec = crate::source::secondary::spec(params.clone(), Arc::new(map), by_owner);
        self.secondaries
            .push((SecondaryConfig { params, parents_by }, spec));
        self
    }

    /// Filters the updates of the secondary source added last, as [`Config::predicate`]
    /// does the primary's (controller-runtime's `Owns(.., WithPredicates(..))`): an update
    /// `predicate` rejects is cached but wakes none of the object's parents (reported as
    /// `Event::Filtered` naming the source). New objects, deletions and a change of parents
    /// always wake.
    ///
    /// Without a secondary, or when `C` is not that source's object type, the call is kept
    /// as an error for [`Config::validate`].
    #[must_use]
    pub fn secondary_predicate<C: Object + Send + Sync>(mut self, predicate: Predicate<C>) -> Self {
        let n = self.secondaries.len();
        let Some((_, spec)) = self.secondaries.last_mut() else {
            self.misuse.get_or_insert(ConfigError::NoSecondary);
            return self;
        };
        if spec.set_predicate(Box::new(predicate)).is_err() {
            let error = ConfigError::PredicateType {
                secondary: SourceId::nth(n as u64),
                holds: spec.object_type(),
                given: std::any::type_name::<C>(),
            };
            self.misuse.get_or_insert(error);
        }
        self
    }

    /// The secondary sources, `S1` first.
    pub fn secondaries(&self) -> impl ExactSizeIterator<Item = &SecondaryConfig> {
        self.secondaries.iter().map(|(c, _)| c)
    }

    /// Sets the number of parallel reconciles.
    #[must_use]
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = n;
        self
    }

    /// Sets or disables the resync period.
    #[must_use]
    pub fn resync(mut self, period: Option<Duration>) -> Self {
        self.resync = period;
        self
    }

    /// Sets the reconcile backoff bounds.
    #[must_use]
    pub fn backoff(mut self, base: Duration, cap: Duration) -> Self {
        self.backoff = Backoff { base, cap };
        self
    }

    /// Sets the reflector's retry delay.
    #[must_use]
    pub fn retry_delay(mut self, delay: Duration) -> Self {
        self.retry_delay = delay;
        self
    }

    /// Sets how long a streaming list may gather its initial events ([`Config::list_deadline`]).
    #[must_use]
    pub fn list_deadline(mut self, deadline: Duration) -> Self {
        self.list_deadline = deadline;
        self
    }

    /// Sets the most bytes one listing may gather ([`Config::max_listing_bytes`]).
    #[must_use]
    pub fn max_listing_bytes(mut self, bytes: u64) -> Self {
        self.max_listing_bytes = bytes;
        self
    }

    /// Debounces wakes (kube-runtime's `controller::Config::debounce`): a key woken by a
    /// change, a listing, a resync, a trigger or its requeue is queued only once its wakes
    /// have paused for `period`; each wake within the window pushes it back. A key already
    /// queued, or running and due again, is not held. `None` or zero (the default) queues
    /// at once. Changes read in one batch already coalesce without it; a debounce merges
    /// bursts that arrive over time, at the cost of that much latency.
    #[must_use]
    pub fn debounce(mut self, period: Option<Duration>) -> Self {
        self.debounce = period.filter(|p| !p.is_zero());
        self
    }

    /// Sets the in-process source's reopen delay.
    #[must_use]
    pub fn source_retry_delay(mut self, delay: Duration) -> Self {
        self.source_retry_delay = delay;
        self
    }

    /// Filters the primary's updates: an update `predicate` rejects still updates the cache
    /// but wakes nothing (reported as `Event::Filtered`). New objects, deletions and moves to
    /// another parent always wake.
    #[must_use]
    pub fn predicate(mut self, predicate: Predicate<O>) -> Self {
        self.predicate = Some(predicate);
        self
    }

    /// Applies `transform` to each of the primary's objects after decoding and before
    /// caching (kube-runtime's `watcher(..).modify(..)`), on every path an object comes by:
    /// LIST, paged LIST, streaming list, WATCH and in-process. A second call chains after
    /// the first. See [`Transform`].
    #[must_use]
    pub fn transform(mut self, transform: Transform<O>) -> Self
    where
        O: 'static,
    {
        self.transform = Some(match self.transform.take() {
            Some(first) => first.then(transform),
            None => transform,
        });
        self
    }

    /// Applies `transform` to each object of the secondary source added last, as
    /// [`Config::transform`] does the primary's. Without a secondary, or when `C` is not
    /// that source's object type, the call is kept as an error for [`Config::validate`].
    #[must_use]
    pub fn secondary_transform<C: Object + Send + Sync>(mut self, transform: Transform<C>) -> Self {
        let n = self.secondaries.len();
        let Some((_, spec)) = self.secondaries.last_mut() else {
            self.misuse.get_or_insert(ConfigError::NoSecondary);
            return self;
        };
        if spec.set_transform(Box::new(transform)).is_err() {
            let error = ConfigError::TransformType {
                secondary: SourceId::nth(n as u64),
                holds: spec.object_type(),
                given: std::any::type_name::<C>(),
            };
            self.misuse.get_or_insert(error);
        }
        self
    }

    /// Turns priorities on: parents woken by a listing, a resync or a reconcile-all trigger
    /// go in at low priority, behind live changes, requeues and retries (controller-runtime's
    /// priority queue), yet get at least a quarter of the dispatches while they wait, so none
    /// starves.
    #[must_use]
    pub fn priority(mut self, on: bool) -> Self {
        self.priority = on;
        self
    }

    /// Sets (or, with `None`, turns off) the longest wait of a key for its own writes
    /// ([`Config::read_own_writes`]).
    #[must_use]
    pub fn read_own_writes(mut self, wait: Option<Duration>) -> Self {
        self.read_own_writes = wait;
        self
    }

    /// Sets the most keys that may wait for their writes at once ([`Config::max_own_writes`]).
    #[must_use]
    pub fn max_own_writes(mut self, keys: usize) -> Self {
        self.max_own_writes = keys;
        self
    }

    /// Sets (or lifts) every reconcile's deadline ([`Config::reconcile_timeout`]).
    #[must_use]
    pub fn reconcile_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.reconcile_timeout = timeout;
        self
    }

    /// Runs reconciles only while this candidate leads the election on `election`'s Lease;
    /// the sources list and watch all along, so a new leader's cache is already warm.
    #[must_use]
    pub fn leader_election(mut self, election: ElectionConfig) -> Self {
        self.election = Some(election);
        self
    }

    /// Splits the parent keys into shards, one Lease each: a key is reconciled only while
    /// this replica holds its shard ([`shard`](crate::shard)). The sources list and watch
    /// every object, as with an election.
    #[must_use]
    pub fn sharding(mut self, sharding: ShardConfig) -> Self
    where
        P: ShardKey,
    {
        self.sharding = Some((sharding, <P as ShardKey>::shard_text));
        self
    }

    /// The shard settings, when sharded.
    #[must_use]
    pub fn shard_config(&self) -> Option<&ShardConfig> {
        self.sharding.as_ref().map(|(c, _)| c)
    }

    /// Checks every bound.
    ///
    /// # Errors
    /// The first setting that is out of bounds.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if let Some(misuse) = &self.misuse {
            return Err(misuse.clone());
        }
        if self.concurrency == 0 || self.concurrency > MAX_CONCURRENCY {
            return Err(ConfigError::Concurrency(self.concurrency));
        }
        if self.backoff.base.is_zero() || self.backoff.cap < self.backoff.base {
            return Err(ConfigError::Backoff(self.backoff));
        }
        if self.retry_delay.is_zero() {
            return Err(ConfigError::ZeroDelay("retry_delay"));
        }
        if self.source_retry_delay.is_zero() {
            return Err(ConfigError::ZeroDelay("source_retry_delay"));
        }
        if self.list_deadline.is_zero() {
            return Err(ConfigError::ZeroDelay("list_deadline"));
        }
        if let Some(election) = &self.election {
            election.validate().map_err(ConfigError::Election)?;
        }
        if let Some((sharding, _)) = &self.sharding {
            if self.election.is_some() {
                return Err(ConfigError::ElectionAndSharding);
            }
            sharding.validate().map_err(ConfigError::Sharding)?;
        }
        if self.read_own_writes.is_some_and(|w| w.is_zero()) {
            return Err(ConfigError::ZeroDelay("read_own_writes"));
        }
        if self.max_own_writes == 0 {
            return Err(ConfigError::MaxOwnWrites);
        }
        if self.reconcile_timeout.is_some_and(|t| t.is_zero()) {
            return Err(ConfigError::ZeroDelay("reconcile_timeout"));
        }
        if self.resync.is_some_and(|r| r.is_zero()) {
            return Err(ConfigError::ZeroDelay("resync"));
        }
        if let SourceConfig::Kubernetes(params) = &self.source
            && params.timeout_seconds == 0
        {
            return Err(ConfigError::WatchTimeout);
        }
        Ok(())
    }
}

/// Whether objects of type `C` can be decoded as `params` asks (protobuf needs a decoder).
pub(crate) fn check_wire_format<C: Object>(
    source: SourceId,
    params: &WatchParams,
) -> Result<(), ConfigError> {
    if params.wire_format == WireFormat::Protobuf && C::protobuf().is_none() {
        return Err(ConfigError::NoProtobuf {
            source_id: source,
            object: std::any::type_name::<C>(),
        });
    }
    Ok(())
}

/// A setting out of bounds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A source asks for protobuf on an object type with no protobuf decoder
    /// ([`Object::protobuf`]): it stays on JSON.
    #[error(
        "source {source_id} asks for protobuf, which {object} cannot decode (it has no \
         Object::protobuf)"
    )]
    NoProtobuf {
        /// The source.
        source_id: SourceId,
        /// Its object type.
        object: &'static str,
    },
    /// `concurrency` must be in `1..=MAX_CONCURRENCY`.
    #[error("concurrency must be between 1 and {MAX_CONCURRENCY}, got {0}")]
    Concurrency(usize),
    /// The backoff base must be positive and not above the cap.
    #[error("backoff base must be positive and at most the cap, got {0:?}")]
    Backoff(Backoff),
    /// A zero delay would let a failure spin without pause.
    #[error("{0} must be positive")]
    ZeroDelay(&'static str),
    /// `max_own_writes` must be positive (turn the wait off with `read_own_writes(None)`).
    #[error("max_own_writes must be positive; read_own_writes(None) turns the wait off")]
    MaxOwnWrites,
    /// `timeoutSeconds` of 0 lets the apiserver pick 30 to 60 minutes; ask for it explicitly.
    #[error("watch timeout_seconds must be positive")]
    WatchTimeout,
    /// The election's settings.
    #[error("leader election: {0}")]
    Election(ElectionConfigError),
    /// The shard set's settings.
    #[error("sharding: {0}")]
    Sharding(ShardConfigError),
    /// Sharding and leader election exclude each other: each shard is an election.
    #[error(
        "sharding and leader election exclude each other: each shard is an election of its own"
    )]
    ElectionAndSharding,
    /// [`Config::secondary_predicate`] or [`Config::secondary_transform`] was called before
    /// any secondary source was added.
    #[error("secondary_predicate / secondary_transform: no secondary source was added before it")]
    NoSecondary,
    /// [`Config::secondary_predicate`] was given a predicate over another type than the
    /// objects of the source added last.
    #[error("secondary_predicate: source {secondary} holds {holds}, the predicate is over {given}")]
    PredicateType {
        /// The source.
        secondary: SourceId,
        /// Its object type.
        holds: &'static str,
        /// The predicate's object type.
        given: &'static str,
    },
    /// [`Config::secondary_transform`] was given a transform over another type than the
    /// objects of the source added last.
    #[error("secondary_transform: source {secondary} holds {holds}, the transform is over {given}")]
    TransformType {
        /// The source.
        secondary: SourceId,
        /// Its object type.
        holds: &'static str,
        /// The transform's object type.
        given: &'static str,
    },
}

impl<O: 'static, P: From<ObjectKey> + Ord + Clone + Send + 'static> Config<O, P> {
    /// Adds the secondary source `secondary` describes, its objects decoded as `C`: how a
    /// replay rebuilds the sources a trace header names. A [`ParentsBy::Custom`] map cannot
    /// be rebuilt, so its objects are cached and wake no parent.
    #[must_use]
    pub fn secondary<C: Object + Send + Sync>(self, secondary: SecondaryConfig) -> Self {
        let SecondaryConfig { params, parents_by } = secondary;
        match parents_by {
            ParentsBy::ControllerOwner(kind) => self.owns::<C>(params, &kind),
            ParentsBy::AnyOwner(kind) => self.owns_any_owner::<C>(params, &kind),
            ParentsBy::Custom => self.add_secondary(params, ParentsBy::Custom, |_: &C| Vec::new()),
        }
    }

    /// Adds a secondary source of children: `C`s listed and watched with `params`, each
    /// waking its controller owner when that owner is of `owner_type`, `Kind` or
    /// `Kind.group` (controller-runtime's `Owns`, which defaults to `OnlyControllerOwner`).
    /// The owner is looked up in the child's namespace.
    #[must_use]
    pub fn owns<C: Object + Send + Sync>(self, params: WatchParams, owner_type: &str) -> Self {
        self.owns_by::<C>(params, ParentsBy::ControllerOwner(owner_type.to_owned()))
    }

    /// As [`Config::owns`], but every owner of `owner_type` is woken, controller or not
    /// (kube-runtime's `owns`; controller-runtime's `Owns` without `OnlyControllerOwner`).
    /// The two differ only for a child with several owners of `owner_type`: `owns` wakes
    /// the one with `controller: true` (or none), this wakes each.
    #[must_use]
    pub fn owns_any_owner<C: Object + Send + Sync>(
        self,
        params: WatchParams,
        owner_type: &str,
    ) -> Self {
        self.owns_by::<C>(params, ParentsBy::AnyOwner(owner_type.to_owned()))
    }

    fn owns_by<C: Object + Send + Sync>(self, params: WatchParams, parents_by: ParentsBy) -> Self {
        let rule = parents_by.clone();
        self.add_secondary(params, parents_by, move |child: &C| {
            rule.parents_of(child).into_iter().map(P::from).collect()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A child with owner references `(apiVersion, kind, name, controller)`.
    #[derive(serde::Deserialize)]
    struct Child {
        owners: Vec<(String, String, String, bool)>,
    }

    impl Object for Child {
        fn object_namespace(&self) -> Option<&str> {
            Some("ns")
        }
        fn object_name(&self) -> Option<&str> {
            Some("child")
        }
        fn object_resource_version(&self) -> Option<&str> {
            None
        }
        fn label(&self, _: &str) -> Option<&str> {
            None
        }
        fn controller_owner(&self) -> Option<OwnerRef<'_>> {
            self.owner_refs()
                .into_iter()
                .zip(&self.owners)
                .find(|(_, o)| o.3)
                .map(|(r, _)| r)
        }
        fn owner_refs(&self) -> Vec<OwnerRef<'_>> {
            self.owners
                .iter()
                .map(|(api_version, kind, name, _)| OwnerRef {
                    api_version,
                    kind,
                    name,
                    uid: "",
                })
                .collect()
        }
    }

    fn child(owners: &[(&str, &str, &str, bool)]) -> Child {
        Child {
            owners: owners
                .iter()
                .map(|(a, k, n, c)| ((*a).into(), (*k).into(), (*n).into(), *c))
                .collect(),
        }
    }

    fn names(parents: Vec<ObjectKey>) -> Vec<String> {
        parents.into_iter().map(|k| k.to_string()).collect()
    }

    #[test]
    fn owners_match_by_kind_or_by_kind_and_group_whatever_the_version() {
        let c = child(&[
            ("apps/v1", "ReplicaSet", "rs", true),
            ("example.dev/v1beta1", "ReplicaSet", "other-group", false),
            ("apps/v1", "ReplicaSet", "second", false),
            ("v1", "ConfigMap", "cm", false),
        ]);
        let owner = |t: &str| ParentsBy::ControllerOwner(t.into());
        let any = |t: &str| ParentsBy::AnyOwner(t.into());
        assert_eq!(names(owner("ReplicaSet").parents_of(&c)), ["ns/rs"]);
        assert_eq!(names(owner("ReplicaSet.apps").parents_of(&c)), ["ns/rs"]);
        assert!(owner("ReplicaSet.example.dev").parents_of(&c).is_empty());
        assert_eq!(
            names(any("ReplicaSet").parents_of(&c)),
            ["ns/other-group", "ns/rs", "ns/second"]
        );
        assert_eq!(
            names(any("ReplicaSet.apps").parents_of(&c)),
            ["ns/rs", "ns/second"]
        );
        assert_eq!(
            names(any("ReplicaSet.example.dev").parents_of(&c)),
            ["ns/other-group"]
        );
        // A core-group owner type: `Kind.` names the empty group.
        assert_eq!(names(any("ConfigMap.").parents_of(&c)), ["ns/cm"]);
        assert!(ParentsBy::Custom.parents_of(&c).is_empty());
    }

    #[test]
    fn a_view_without_api_versions_is_matched_by_kind() {
        let pod: crate::wire::pod::PodView = serde_json::from_str(
            r#"{"metadata":{"name":"p","namespace":"ns","ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"rs","uid":"u","controller":true}]}}"#,
        )
        .unwrap();
        let owner = ParentsBy::ControllerOwner("ReplicaSet.apps".into());
        assert_eq!(names(owner.parents_of(&pod)), ["ns/rs"]);
    }
}
