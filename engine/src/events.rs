//! kube-runtime's events [`Recorder`] over any [`Transport`]: `events.k8s.io/v1` Events about
//! an object, with series for repeats, on every runtime (tokio, smol, the simulator).
//!
//! [`Recorder::publish`] writes an [`Event`] about the object an `ObjectReference` names, in
//! that object's namespace (`default` for a cluster-scoped one), as kube-runtime and
//! client-go do:
//!
//! - **The first occurrence** is created as a new Event named `<object>.<nanoseconds, hex>`.
//! - **A repeat** of the same event (same regarding and related object, reason, action, type
//!   and note) within [`SERIES_WINDOW`] (6 minutes, client-go's `finishTime`) of the last
//!   occurrence updates the existing Event instead: a merge patch of its `series` (`count` 2,
//!   3, ... and `lastObservedTime`). A series Event deleted meanwhile (Events expire after an
//!   hour) is created again under its name.
//! - **The cache** of known events is bounded ([`Recorder::max_cached`], default
//!   [`DEFAULT_MAX_CACHED`]): entries older than the window are dropped on each publish,
//!   and past the bound the least recently seen entry is evicted (its next repeat starts a
//!   new Event).
//! - **A storm about one object** is held to [`Recorder::max_per_object_per_minute`]
//!   writes (default [`DEFAULT_MAX_PER_OBJECT_PER_MINUTE`]): past it a publication sends
//!   nothing and returns `Ok` ([`Recorder::suppressed`] counts them), but still counts in
//!   its series, so the next write sends the true count (a new event held back is created
//!   then, its series included).
//! - **Limits the apiserver enforces** are met before sending: the note is cut to
//!   [`MAX_NOTE_BYTES`] (at a character boundary); a reason, action or reporter of more than
//!   128 bytes, or an empty one, is [`Error::Invalid`].
//!
//! **Time.** An Event carries wall-clock `MicroTime`s, which the engine's [`Runtime`]
//! (monotonic only) cannot give. A recorder reads [`jiff::Timestamp::now`] unless given
//! another clock ([`Recorder::with_clock`]): the simulator passes its virtual wall clock, so
//! a simulated run stays deterministic.
//!
//! **Secrets.** Nothing here logs a note: the [`Debug`](std::fmt::Debug) of an [`Event`]
//! shows its length only. A note goes to the apiserver as given, so keep secret values out
//! of it, as out of any object.
//!
//! [`Runtime`]: crate::Runtime

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event as K8sEvent, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube_core::params::{Patch, PatchParams, PostParams};

use super::api::{ApiClient, ApiError};
use super::transport::Transport;

/// How long after its last occurrence an event can still grow a series (client-go's
/// `finishTime`, kube-runtime's `CACHE_TTL`).
pub const SERIES_WINDOW: jiff::SignedDuration = jiff::SignedDuration::from_mins(6);

/// The longest note the apiserver takes (`NoteLengthLimit`, 1 KiB); a longer one is cut.
pub const MAX_NOTE_BYTES: usize = 1024;

/// The longest reason, action, reporting controller or instance the apiserver takes.
pub const MAX_FIELD_BYTES: usize = 128;

/// Known events a [`Recorder`] remembers for series by default.
pub const DEFAULT_MAX_CACHED: usize = 4096;

/// Event writes (creates and series updates) about one object a [`Recorder`] sends per
/// rolling minute by default: client-go's spam filter's burst.
pub const DEFAULT_MAX_PER_OBJECT_PER_MINUTE: usize = 25;

/// The window [`Recorder::max_per_object_per_minute`] counts writes in.
const RATE_WINDOW: jiff::SignedDuration = jiff::SignedDuration::from_mins(1);

/// The namespace of Events about a cluster-scoped object.
const CLUSTER_SCOPED_NAMESPACE: &str = "default";

/// An event to publish (kube-runtime's `events::Event`). Every text is for humans.
#[derive(Clone, PartialEq)]
pub struct Event {
    /// The severity: `Type` in `kubectl describe`.
    pub type_: EventType,
    /// Why the action was taken, in `PascalCase`, at most 128 bytes: `Reason` in `kubectl
    /// describe`.
    pub reason: String,
    /// What happened, at most [`MAX_NOTE_BYTES`] (a longer note is cut): `Message` in
    /// `kubectl describe`.
    pub note: Option<String>,
    /// What was done (or tried), in `PascalCase`, at most 128 bytes.
    pub action: String,
    /// Another object the event concerns (the Event's `related`), e.g. the ReplicaSet of
    /// a Deployment's event; `None` when only the regarding object is concerned.
    pub secondary: Option<ObjectReference>,
}

impl fmt::Debug for Event {
    /// Every field but the note's text, which may hold what must not reach a log.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Event")
            .field("type_", &self.type_)
            .field("reason", &self.reason)
            .field(
                "note",
                &self.note.as_ref().map(|n| format!("<{} bytes>", n.len())),
            )
            .field("action", &self.action)
            .field("secondary", &self.secondary)
            .finish()
    }
}

/// An event's severity (kube-runtime's `EventType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EventType {
    /// Something happened; nothing to worry about.
    Normal,
    /// Something is not as expected; worth a look.
    Warning,
}

impl EventType {
    /// The Event's `type`: `Normal` or `Warning`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// Who publishes (kube-runtime's `events::Reporter`): the Event's `reportingController` and
/// `reportingInstance`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Reporter {
    /// The controller's name, e.g. `example.com/my-controller`, at most 128 bytes.
    pub controller: String,
    /// This replica's name, e.g. its pod's (`fieldRef: metadata.name`), at most 128 bytes;
    /// `None` reports the controller's name.
    pub instance: Option<String>,
}

impl From<String> for Reporter {
    /// A reporter whose instance is the controller's name.
    fn from(controller: String) -> Self {
        Reporter {
            controller,
            instance: None,
        }
    }
}

impl From<&str> for Reporter {
    /// A reporter whose instance is the hostname (a pod's name in a cluster), as
    /// kube-runtime's.
    fn from(controller: &str) -> Self {
        Reporter {
            controller: controller.to_owned(),
            instance: hostname::get().ok().and_then(|h| h.into_string().ok()),
        }
    }
}

/// Why [`Recorder::publish`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A field the apiserver would refuse, found before sending anything.
    #[error("event {field} is {len} bytes; the apiserver takes 1 to {max}")]
    Invalid {
        /// `reason`, `action`, `reportingController` or `reportingInstance`.
        field: &'static str,
        /// Its length in bytes.
        len: usize,
        /// The most it may have.
        max: usize,
    },
    /// Creating the Event failed (the error names its path).
    #[error("cannot create the Event: {0}")]
    Create(#[source] ApiError),
    /// Updating an Event's series failed (the error names its path).
    #[error("cannot update the Event's series: {0}")]
    Series(#[source] ApiError),
}

/// A wall clock for the Events' times (see the module's "Time").
pub type WallClock = Arc<dyn Fn() -> jiff::Timestamp + Send + Sync>;

/// Publishes `events.k8s.io/v1` Events through transport `T` (kube-runtime's
/// `events::Recorder`). Clones share the series cache.
///
/// Needs RBAC for `create` and `patch` on `events` in `events.k8s.io`.
pub struct Recorder<T> {
    transport: T,
    reporter: Reporter,
    clock: WallClock,
    cache: Arc<Mutex<Cache>>,
}

impl<T: Clone> Clone for Recorder<T> {
    fn clone(&self) -> Self {
        Recorder {
            transport: self.transport.clone(),
            reporter: self.reporter.clone(),
            clock: Arc::clone(&self.clock),
            cache: Arc::clone(&self.cache),
        }
    }
}

impl<T> fmt::Debug for Recorder<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        f.debug_struct("Recorder")
            .field("reporter", &self.reporter)
            .field("cached", &cache.entries.len())
            .field("max_cached", &cache.max)
            .field("suppressed", &cache.suppressed)
            .finish_non_exhaustive()
    }
}

impl<T: Transport> Recorder<T> {
    /// A recorder publishing as `reporter`, on the real wall clock.
    pub fn new(transport: impl Into<T>, reporter: Reporter) -> Self {
        Recorder {
            transport: transport.into(),
            reporter,
            clock: Arc::new(jiff::Timestamp::now),
            cache: Arc::new(Mutex::new(Cache::new(DEFAULT_MAX_CACHED))),
        }
    }

    /// Reads the Events' times from `clock` instead of the real wall clock: the
    /// simulator's virtual one (`SimRuntime::wall_clock`), or a test's.
    #[must_use]
    pub fn with_clock(
        mut self,
        clock: impl Fn() -> jiff::Timestamp + Send + Sync + 'static,
    ) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// Remembers at most `max` known events for series (at least 1); past it the least
    /// recently seen is forgotten. Applies to every clone.
    #[must_use]
    pub fn max_cached(self, max: usize) -> Self {
        {
            let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
            let max = max.max(1);
            cache.max = max;
            cache.evict_to(max);
        }
        self
    }

    /// Sends at most `max` Event writes (creates and series updates) about one object per
    /// rolling minute (at least 1), or any number for `None`; past it, publications about
    /// the object send nothing (see the module docs). Applies to every clone. The windows of
    /// at most [`Recorder::max_cached`] objects are kept: past that the least recently
    /// written object's is forgotten, which can only let more through.
    #[must_use]
    pub fn max_per_object_per_minute(self, max: Option<usize>) -> Self {
        self.cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .limiter
            .per_minute = max.map(|m| m.max(1));
        self
    }

    /// How many publications the per-object bound held back so far.
    #[must_use]
    pub fn suppressed(&self) -> u64 {
        self.cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .suppressed
    }

    /// Who this recorder reports as.
    #[must_use]
    pub fn reporter(&self) -> &Reporter {
        &self.reporter
    }

    /// How many known events are remembered for series now.
    #[must_use]
    pub fn cached(&self) -> usize {
        self.cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entries
            .len()
    }

    /// Publishes `event` about the object `regarding` names: creates an Event, or, for a
    /// repeat within [`SERIES_WINDOW`], patches the existing one's series; or, past the
    /// per-object bound, only counts it (see the module docs).
    ///
    /// # Errors
    /// [`Error::Invalid`] before sending anything; [`Error::Create`] / [`Error::Series`]
    /// with the apiserver's answer.
    pub async fn publish(&self, event: &Event, regarding: &ObjectReference) -> Result<(), Error> {
        self.validate(event)?;
        let now = (self.clock)();
        let key = Key::new(event, regarding);
        let plan = {
            let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
            cache.expire(now);
            cache.plan(key.clone(), now, || self.generate(event, regarding, now))
        };
        match plan {
            Plan::Suppressed => {
                tracing::debug!(
                    reason = %event.reason,
                    object = regarding.name.as_deref().unwrap_or(""),
                    "event held back by the per-object bound"
                );
                Ok(())
            }
            Plan::Create { event, seq } => {
                let result = self
                    .events(&event)
                    .create(&PostParams::default(), &event)
                    .await;
                if let Err(e) = result {
                    // Forget it, so a repeat tries a create again rather than a patch.
                    let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
                    cache.forget(&key, seq);
                    return Err(Error::Create(e));
                }
                Ok(())
            }
            Plan::Series { mut event } => {
                let series = event.series.clone();
                let patch = serde_json::json!({ "series": series });
                let name = event.metadata.name.clone().unwrap_or_default();
                let api = self.events(&event);
                match api
                    .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                {
                    Ok(_) => Ok(()),
                    // Gone meanwhile (Events expire): create it again, series and all, as
                    // client-go does.
                    Err(e) if e.is_not_found() => {
                        event.metadata.resource_version = None;
                        api.create(&PostParams::default(), &event)
                            .await
                            .map(drop)
                            .map_err(Error::Create)
                    }
                    Err(e) => Err(Error::Series(e)),
                }
            }
        }
    }

    /// The apiserver's length limits on what is not cut to fit.
    fn validate(&self, event: &Event) -> Result<(), Error> {
        let instance = self.reporter.instance.as_deref();
        for (field, value) in [
            ("reason", Some(event.reason.as_str())),
            ("action", Some(event.action.as_str())),
            (
                "reportingController",
                Some(self.reporter.controller.as_str()),
            ),
            ("reportingInstance", instance),
        ] {
            if let Some(value) = value
                && (value.is_empty() || value.len() > MAX_FIELD_BYTES)
            {
                return Err(Error::Invalid {
                    field,
                    len: value.len(),
                    max: MAX_FIELD_BYTES,
                });
            }
        }
        Ok(())
    }

    /// The Events API of the namespace `event` lives in.
    fn events(&self, event: &K8sEvent) -> ApiClient<K8sEvent, T> {
        let namespace = event
            .metadata
            .namespace
            .as_deref()
            .unwrap_or(CLUSTER_SCOPED_NAMESPACE);
        ApiClient::namespaced(self.transport.clone(), namespace)
    }

    /// A new Event for the first occurrence of `event` (kube-runtime's `generate_event`).
    fn generate(
        &self,
        event: &Event,
        regarding: &ObjectReference,
        now: jiff::Timestamp,
    ) -> K8sEvent {
        let namespace = regarding
            .namespace
            .clone()
            .filter(|ns| !ns.is_empty())
            .unwrap_or_else(|| CLUSTER_SCOPED_NAMESPACE.to_owned());
        let object = regarding
            .name
            .as_deref()
            .unwrap_or(&self.reporter.controller);
        K8sEvent {
            action: Some(event.action.clone()),
            reason: Some(event.reason.clone()),
            event_time: Some(MicroTime(now)),
            regarding: Some(regarding.clone()),
            related: event.secondary.clone(),
            note: event
                .note
                .as_deref()
                .map(|n| truncate(n, MAX_NOTE_BYTES).to_owned()),
            metadata: ObjectMeta {
                namespace: Some(namespace),
                name: Some(format!("{object}.{:x}", now.as_nanosecond())),
                ..ObjectMeta::default()
            },
            reporting_controller: Some(self.reporter.controller.clone()),
            reporting_instance: Some(
                self.reporter
                    .instance
                    .clone()
                    .unwrap_or_else(|| self.reporter.controller.clone()),
            ),
            series: None,
            type_: Some(event.type_.as_str().to_owned()),
            ..K8sEvent::default()
        }
    }
}

/// The longest prefix of `s` of at most `max` bytes that ends at a character boundary.
fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// The object an `ObjectReference` names, for the cache key (kube-runtime's `Reference`:
/// apiVersion, kind, namespace, name, uid).
type RefKey = [Option<String>; 5];

fn ref_key(r: &ObjectReference) -> RefKey {
    [
        r.api_version.clone(),
        r.kind.clone(),
        r.namespace.clone(),
        r.name.clone(),
        r.uid.clone(),
    ]
}

/// What makes two publications the same event. The reporter is the recorder's own, so it is
/// not part of it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    regarding: RefKey,
    related: Option<RefKey>,
    reason: String,
    action: String,
    type_: EventType,
    note: Option<String>,
}

impl Key {
    fn new(event: &Event, regarding: &ObjectReference) -> Self {
        Key {
            regarding: ref_key(regarding),
            related: event.secondary.as_ref().map(ref_key),
            reason: event.reason.clone(),
            action: event.action.clone(),
            type_: event.type_,
            note: event
                .note
                .as_deref()
                .map(|n| truncate(n, MAX_NOTE_BYTES).to_owned()),
        }
    }
}

/// A known event: the Event as sent (with its series), when it was last seen, its place in
/// the age order, and whether it was sent at all (the per-object bound may have held its
/// create back).
struct Entry {
    event: K8sEvent,
    last_seen: jiff::Timestamp,
    seq: u64,
    written: bool,
}

/// What to send for one publication.
enum Plan {
    /// A new Event; `seq` is its cache entry's, to forget it if the create fails.
    Create { event: K8sEvent, seq: u64 },
    /// The Event with its series brought up to date.
    Series { event: K8sEvent },
    /// Nothing: the per-object bound holds it back.
    Suppressed,
}

/// Known events by key, with an age index (last seen, then insertion) for expiry and
/// eviction: both cost O(log n) per entry removed, never a walk of the whole cache.
struct Cache {
    entries: BTreeMap<Key, Entry>,
    by_age: BTreeMap<(jiff::Timestamp, u64), Key>,
    next_seq: u64,
    max: usize,
    limiter: Limiter,
    suppressed: u64,
}

impl Cache {
    fn new(max: usize) -> Self {
        Cache {
            entries: BTreeMap::new(),
            by_age: BTreeMap::new(),
            next_seq: 0,
            max,
            limiter: Limiter::new(Some(DEFAULT_MAX_PER_OBJECT_PER_MINUTE)),
            suppressed: 0,
        }
    }

    /// Drops the entries last seen [`SERIES_WINDOW`] or longer before `now`.
    fn expire(&mut self, now: jiff::Timestamp) {
        while let Some((&(seen, _), _)) = self.by_age.first_key_value() {
            if seen + SERIES_WINDOW > now {
                break;
            }
            self.evict_oldest();
        }
    }

    /// Evicts the least recently seen entries until at most `max` remain.
    fn evict_to(&mut self, max: usize) {
        while self.entries.len() > max {
            self.evict_oldest();
        }
    }

    fn evict_oldest(&mut self) {
        if let Some((_, key)) = self.by_age.pop_first() {
            self.entries.remove(&key);
        }
    }

    /// Counts one more occurrence of `key` at `now`, and says what to send: a new Event
    /// (from `generate`, remembered at once, so a concurrent repeat patches it), a series
    /// update of the known one, or nothing when the per-object bound is reached.
    fn plan(
        &mut self,
        key: Key,
        now: jiff::Timestamp,
        generate: impl FnOnce() -> K8sEvent,
    ) -> Plan {
        let seq = self.next_seq;
        self.next_seq += 1;
        let admitted = self.limiter.admit(&key.regarding, now, self.max);
        if !admitted {
            self.suppressed += 1;
        }
        if let Some(entry) = self.entries.get_mut(&key) {
            self.by_age.remove(&(entry.last_seen, entry.seq));
            let count = entry
                .event
                .series
                .as_ref()
                .map_or(2, |s| s.count.saturating_add(1));
            entry.event.series = Some(EventSeries {
                count,
                last_observed_time: MicroTime(now),
            });
            entry.last_seen = now;
            entry.seq = seq;
            self.by_age.insert((now, seq), key);
            return match (admitted, entry.written) {
                (false, _) => Plan::Suppressed,
                (true, true) => Plan::Series {
                    event: entry.event.clone(),
                },
                (true, false) => {
                    entry.written = true;
                    Plan::Create {
                        event: entry.event.clone(),
                        seq,
                    }
                }
            };
        }
        self.evict_to(self.max.saturating_sub(1));
        let event = generate();
        self.by_age.insert((now, seq), key.clone());
        self.entries.insert(
            key,
            Entry {
                event: event.clone(),
                last_seen: now,
                seq,
                written: admitted,
            },
        );
        if admitted {
            Plan::Create { event, seq }
        } else {
            Plan::Suppressed
        }
    }

    /// Forgets `key` if its entry is still the one numbered `seq`.
    fn forget(&mut self, key: &Key, seq: u64) {
        if let Some(entry) = self.entries.get(key)
            && entry.seq == seq
        {
            self.by_age.remove(&(entry.last_seen, entry.seq));
            self.entries.remove(key);
        }
    }
}

/// The writes about each object in the last [`RATE_WINDOW`], for the per-object bound.
struct Limiter {
    /// The bound; `None` lets everything through.
    per_minute: Option<usize>,
    windows: BTreeMap<RefKey, Window>,
    /// Objects by their last write (then a sequence number), to drop quiet windows and
    /// evict the least recently written past the bound on objects.
    by_last: BTreeMap<(jiff::Timestamp, u64), RefKey>,
    next_seq: u64,
}

/// One object's writes in the window: at most the bound, oldest first.
struct Window {
    writes: std::collections::VecDeque<jiff::Timestamp>,
    seq: u64,
}

impl Limiter {
    fn new(per_minute: Option<usize>) -> Self {
        Limiter {
            per_minute,
            windows: BTreeMap::new(),
            by_last: BTreeMap::new(),
            next_seq: 0,
        }
    }

    /// Whether a write about `object` at `now` is within the bound; if so, it is counted.
    /// At most `max_objects` windows are kept.
    fn admit(&mut self, object: &RefKey, now: jiff::Timestamp, max_objects: usize) -> bool {
        let Some(limit) = self.per_minute else {
            return true;
        };
        // Windows whose last write left the window hold nothing any more.
        while let Some((&(last, _), _)) = self.by_last.first_key_value() {
            if last + RATE_WINDOW > now {
                break;
            }
            if let Some((_, quiet)) = self.by_last.pop_first() {
                self.windows.remove(&quiet);
            }
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        let window = self
            .windows
            .entry(object.clone())
            .or_insert_with(|| Window {
                writes: std::collections::VecDeque::new(),
                seq,
            });
        while window
            .writes
            .front()
            .is_some_and(|&w| w + RATE_WINDOW <= now)
        {
            window.writes.pop_front();
        }
        if window.writes.len() >= limit {
            return false;
        }
        if let Some(&last) = window.writes.back() {
            self.by_last.remove(&(last, window.seq));
        }
        window.writes.push_back(now);
        window.seq = seq;
        self.by_last.insert((now, seq), object.clone());
        while self.windows.len() > max_objects.max(1) {
            if let Some((_, oldest)) = self.by_last.pop_first() {
                self.windows.remove(&oldest);
            } else {
                break;
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> jiff::Timestamp {
        jiff::Timestamp::from_second(1_767_225_600 + secs).unwrap()
    }

    fn key(reason: &str) -> Key {
        Key::new(
            &Event {
                type_: EventType::Normal,
                reason: reason.into(),
                note: Some("n".into()),
                action: "Act".into(),
                secondary: None,
            },
            &ObjectReference {
                name: Some("a".into()),
                ..ObjectReference::default()
            },
        )
    }

    fn blank() -> K8sEvent {
        K8sEvent::default()
    }

    fn count(plan: &Plan) -> Option<i32> {
        match plan {
            Plan::Create { .. } | Plan::Suppressed => None,
            Plan::Series { event } => event.series.as_ref().map(|s| s.count),
        }
    }

    #[test]
    fn a_repeat_counts_up_a_series() {
        let mut cache = Cache::new(8);
        assert_eq!(count(&cache.plan(key("A"), at(0), blank)), None);
        assert_eq!(count(&cache.plan(key("A"), at(1), blank)), Some(2));
        assert_eq!(count(&cache.plan(key("A"), at(2), blank)), Some(3));
        assert_eq!(count(&cache.plan(key("B"), at(3), blank)), None);
        assert_eq!(cache.entries.len(), 2);
    }

    #[test]
    fn an_entry_expires_six_minutes_after_it_was_last_seen() {
        let mut cache = Cache::new(8);
        cache.plan(key("A"), at(0), blank);
        cache.plan(key("A"), at(300), blank);
        cache.expire(at(300 + 359));
        assert_eq!(cache.entries.len(), 1, "seen 5:59 ago");
        cache.expire(at(300 + 360));
        assert_eq!(cache.entries.len(), 0, "seen 6:00 ago");
        assert!(cache.by_age.is_empty());
        assert_eq!(count(&cache.plan(key("A"), at(700), blank)), None);
    }

    #[test]
    fn the_bound_evicts_the_least_recently_seen() {
        let mut cache = Cache::new(2);
        cache.plan(key("A"), at(0), blank);
        cache.plan(key("B"), at(1), blank);
        cache.plan(key("A"), at(2), blank); // A is now the most recent
        cache.plan(key("C"), at(3), blank); // evicts B
        assert_eq!(cache.entries.len(), 2);
        assert!(cache.entries.contains_key(&key("A")));
        assert!(!cache.entries.contains_key(&key("B")));
        assert_eq!(cache.by_age.len(), 2);
        assert_eq!(
            count(&cache.plan(key("B"), at(4), blank)),
            None,
            "B starts over"
        );
    }

    #[test]
    fn a_failed_create_is_forgotten_but_not_a_newer_entry() {
        let mut cache = Cache::new(8);
        let Plan::Create { seq, .. } = cache.plan(key("A"), at(0), blank) else {
            panic!("a create");
        };
        cache.forget(&key("A"), seq);
        assert!(cache.entries.is_empty() && cache.by_age.is_empty());
        let Plan::Create { seq, .. } = cache.plan(key("A"), at(1), blank) else {
            panic!("a create");
        };
        cache.plan(key("A"), at(2), blank); // a concurrent repeat renumbered it
        cache.forget(&key("A"), seq);
        assert_eq!(cache.entries.len(), 1);
    }

    fn what(plan: &Plan) -> String {
        match plan {
            Plan::Create { event, .. } => match &event.series {
                Some(s) => format!("create count={}", s.count),
                None => "create".to_owned(),
            },
            Plan::Series { event } => {
                format!(
                    "series count={}",
                    event.series.as_ref().map_or(0, |s| s.count)
                )
            }
            Plan::Suppressed => "suppressed".to_owned(),
        }
    }

    #[test]
    fn the_per_object_bound_holds_writes_back_but_keeps_counting() {
        let mut cache = Cache::new(8);
        cache.limiter.per_minute = Some(2);
        let plans: Vec<String> = [
            (key("A"), 0),  // create
            (key("A"), 1),  // series 2
            (key("A"), 2),  // 3, held back
            (key("B"), 3),  // a new event about the same object, held back
            (key("A"), 60), // the first write left the window: series 4
            (key("B"), 61), // the second left it: B is created now, count 2
            (key("B"), 62), // bound reached again
        ]
        .into_iter()
        .map(|(k, t)| what(&cache.plan(k, at(t), blank)))
        .collect();
        assert_eq!(
            plans,
            [
                "create",
                "series count=2",
                "suppressed",
                "suppressed",
                "series count=4",
                "create count=2",
                "suppressed"
            ]
        );
        assert_eq!(cache.suppressed, 3);
    }

    #[test]
    fn the_per_object_bound_is_per_object_and_can_be_lifted() {
        let other = Key {
            regarding: [None, None, None, Some("b".into()), None],
            ..key("A")
        };
        let mut cache = Cache::new(8);
        cache.limiter.per_minute = Some(1);
        assert_eq!(what(&cache.plan(key("A"), at(0), blank)), "create");
        assert_eq!(what(&cache.plan(other.clone(), at(0), blank)), "create");
        assert_eq!(what(&cache.plan(key("A"), at(1), blank)), "suppressed");
        cache.limiter.per_minute = None;
        assert_eq!(what(&cache.plan(key("A"), at(2), blank)), "series count=3");
    }

    #[test]
    fn the_limiter_keeps_at_most_the_bound_on_objects_and_drops_quiet_ones() {
        let mut limiter = Limiter::new(Some(1));
        let object = |n: &str| -> RefKey { [None, None, None, Some(n.into()), None] };
        assert!(limiter.admit(&object("a"), at(0), 2));
        assert!(limiter.admit(&object("b"), at(1), 2));
        assert!(limiter.admit(&object("c"), at(2), 2)); // evicts a's window
        assert_eq!(limiter.windows.len(), 2);
        assert!(
            limiter.admit(&object("a"), at(3), 2),
            "a's window was forgotten"
        );
        assert!(!limiter.admit(&object("c"), at(4), 2));
        assert!(limiter.admit(&object("c"), at(62), 2), "a minute later");
        assert_eq!(
            limiter.windows.len(),
            2,
            "c's window went quiet and began again: {:?}",
            limiter.windows.keys().collect::<Vec<_>>()
        );
        assert_eq!(limiter.by_last.len(), limiter.windows.len());
    }

    #[test]
    fn notes_are_cut_at_a_character_boundary() {
        assert_eq!(truncate("abc", 1024), "abc");
        let long = "é".repeat(600); // 1200 bytes
        let cut = truncate(&long, MAX_NOTE_BYTES);
        assert_eq!(cut.len(), 1024);
        let odd = format!("a{}", "é".repeat(600));
        assert_eq!(truncate(&odd, MAX_NOTE_BYTES).len(), 1023);
    }

    #[test]
    fn the_debug_of_an_event_hides_its_note() {
        let event = Event {
            type_: EventType::Warning,
            reason: "R".into(),
            note: Some("password=hunter2".into()),
            action: "A".into(),
            secondary: None,
        };
        let shown = format!("{event:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("<16 bytes>"), "{shown}");
    }
}
