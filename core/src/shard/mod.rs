//! Sharding: a controller's parent keys split across replicas, one Kubernetes Lease per
//! shard, as a pure state machine beside the election.
//!
//! - **Shards.** A key's shard comes from the 64-bit FNV-1a hash of its text
//!   ([`ShardBy`]): shard `i` of `n` holds the hashes in `[⌈i·2⁶⁴/n⌉, ⌈(i+1)·2⁶⁴/n⌉)`. These
//!   are the ranges and the hash of the apiserver's `shardRange` (KEP-5866), so a shard of
//!   keys by namespace is also a server-side selection ([`ShardConfig::shard_selector`]).
//!   Whole keys, which no server selects on, are mixed after FNV-1a ([`mix64`]): FNV-1a's top
//!   bits hardly depend on a string's last bytes, so names that differ only at the end
//!   (`web-1`, `web-2`, ...) would crowd into a few ranges. Namespaces cannot be mixed
//!   without losing the server's selection; namespaces named alike may be spread unevenly.
//! - **One Lease per shard** (`<name>-shard-<i>`), each an ordinary election with the
//!   election's rules (expiry judged by local observation, a term that ends before anyone
//!   can take over). A replica dispatches a key only inside its term on the key's shard, so
//!   the safety argument of [`election`](crate::election) holds per shard unchanged.
//! - **One membership Lease per replica** (`<name>-member-<hash of identity>`), so that a
//!   replica that holds no shard yet is counted. Both kinds carry the label
//!   [`SHARD_SET_LABEL`], and one LIST per retry period reads them all.
//! - **Balance.** With `live` members seen, a replica holds at most `⌈n / live⌉` shards: it
//!   campaigns for free or expired shards below that (in an order of its own, a rendezvous
//!   hash of identity and shard, so replicas do not all race for the same one) and gives up
//!   the excess, the shards it ranks lowest, so only the excess moves.
//! - **Handover.** A shard given up stops dispatching at once, waits for that shard's running
//!   reconciles (at most [`ShardConfig::handover_drain`], then they are cancelled), and only
//!   then writes its Lease free. A shard whose term ends (a renewal failed past the renew
//!   deadline) cancels its running reconciles, or leaves them to finish with
//!   [`OnLost::Drain`], as the election does.
//!
//! Why a Lease per shard rather than a membership ring: the ring needs every replica to
//! agree on the membership before it may act, and two replicas that disagree for a moment
//! would both reconcile a key. With a Lease per shard the apiserver's optimistic concurrency
//! decides every handover, and disagreement about membership costs only balance for a
//! retry period, never safety.

mod selection;
mod table;

use std::borrow::Cow;
use std::time::Duration;

use crate::election::{ElectionConfig, ElectionConfigError, MAX_IDENTITY_BYTES, OnLost};
use crate::wire::object::ObjectKey;

pub(crate) use selection::{Ask, Selection};
pub(crate) use table::{ShardChange, ShardTable};

/// The label on every Lease of a shard set; its value is the set's name.
pub const SHARD_SET_LABEL: &str = "reconcile-loop.dev/shard-set";

/// The label that says what a Lease of a shard set is: `shard` or `member`.
pub const SHARD_ROLE_LABEL: &str = "reconcile-loop.dev/shard-role";

/// Shards in a set at most: each is a Lease renewed every retry period by its holder.
pub const MAX_SHARDS: u32 = 1024;

/// Replicas a table counts at most (membership Leases beyond it are ignored).
pub const MAX_MEMBERS: usize = 4096;

/// What part of a parent key is hashed into its shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ShardBy {
    /// The whole key, as it prints (`namespace/name` for an [`ObjectKey`]). Every key map
    /// works; the apiserver cannot select by it, so each replica caches every object.
    #[default]
    Key,
    /// The key's namespace (empty for a cluster-scoped key): every key of a namespace is in
    /// one shard. The apiserver can select on it (`object.metadata.namespace`), so a replica
    /// may list and watch only its shards' namespaces, provided each parent's members live
    /// in the parent's namespace.
    Namespace,
}

/// A parent key that can be placed in a shard: the text that is hashed.
///
/// The text must be the same on every replica and every version of the program, since two
/// replicas that placed one key differently could both reconcile it.
pub trait ShardKey {
    /// The text hashed for `by`.
    fn shard_text(&self, by: ShardBy) -> Cow<'_, str>;
}

impl ShardKey for ObjectKey {
    fn shard_text(&self, by: ShardBy) -> Cow<'_, str> {
        match by {
            ShardBy::Key => Cow::Borrowed(self.as_str()),
            ShardBy::Namespace => Cow::Borrowed(self.namespace().unwrap_or("")),
        }
    }
}

impl ShardKey for String {
    /// A `namespace/name` string, or a name (a label value, say) with no namespace.
    fn shard_text(&self, by: ShardBy) -> Cow<'_, str> {
        match by {
            ShardBy::Key => Cow::Borrowed(self),
            ShardBy::Namespace => Cow::Borrowed(self.split_once('/').map_or("", |(ns, _)| ns)),
        }
    }
}

/// 64-bit FNV-1a, as Go's `hash/fnv` and the apiserver's shard selector compute it.
#[must_use]
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// MurmurHash3's 64-bit finalizer: every input bit reaches every output bit.
#[must_use]
pub fn mix64(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// The shard of `hash` among `shards`: `⌊hash · shards / 2⁶⁴⌋`.
#[must_use]
pub fn shard_of_hash(hash: u64, shards: u32) -> u32 {
    let shard = (u128::from(hash) * u128::from(shards.max(1))) >> 64;
    u32::try_from(shard).unwrap_or(u32::MAX)
}

/// Shard `shard`'s hashes: `[start, end)`, `end` up to 2⁶⁴.
#[must_use]
pub fn shard_range(shard: u32, shards: u32) -> (u128, u128) {
    let bound = |i: u32| {
        // ⌈i · 2⁶⁴ / n⌉
        let n = u128::from(shards.max(1));
        (u128::from(i) << 64).div_ceil(n)
    };
    (bound(shard), bound(shard + 1))
}

/// The settings of a shard set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardConfig {
    /// The Leases' namespace.
    pub namespace: String,
    /// The set's name: Leases `<name>-shard-<i>` and `<name>-member-<hash>`, labelled
    /// [`SHARD_SET_LABEL`]` = <name>`.
    pub name: String,
    /// This replica's identity, unique per replica.
    pub identity: String,
    /// Shards in the set, 1 to [`MAX_SHARDS`]: fixed for the set's life, since changing it
    /// moves keys between shards.
    pub shards: u32,
    /// What of a key is hashed.
    pub by: ShardBy,
    /// Each Lease's duration (default 15 s).
    pub lease_duration: Duration,
    /// How long a shard is held without a successful renewal (default 10 s).
    pub renew_deadline: Duration,
    /// How often the table reads the Leases and renews (default 2 s).
    pub retry_period: Duration,
    /// On stop, the held shards and the membership are written free (default on).
    pub release_on_stop: bool,
    /// Running reconciles of a shard whose term ends: cancelled or left to finish.
    pub on_lost: OnLost,
    /// How long a shard given up to rebalance waits for its running reconciles before
    /// cancelling them (default 5 s); it stays held, and renewed, meanwhile.
    pub handover_drain: Duration,
    /// With [`ShardBy::Namespace`], the primary source asks the apiserver for the held
    /// shards' objects alone (KEP-5866's `shardSelector`), and lists again as shards move;
    /// an apiserver that ignores the parameter is detected and everything is cached
    /// (default on). Only a primary keyed by name or by owner is selected, since only then
    /// is a key's shard its objects' namespace's; any other key map caches everything.
    pub select_on_server: bool,
}

/// A shard setting out of bounds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShardConfigError {
    /// The shard count is 0 or above [`MAX_SHARDS`].
    #[error("shards must be 1 to {MAX_SHARDS}, got {0}")]
    Shards(u32),
    /// The set's name would not fit a Lease name.
    #[error("the shard set's name must be 1 to 200 bytes, got {0}")]
    Name(usize),
    /// An election setting, as every shard's Lease is an election.
    #[error(transparent)]
    Election(#[from] ElectionConfigError),
}

impl ShardConfig {
    /// `shards` shards of the set `namespace/name`, for `identity`, with the election's
    /// durations.
    #[must_use]
    pub fn new(namespace: &str, name: &str, identity: &str, shards: u32) -> Self {
        ShardConfig {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            identity: identity.to_owned(),
            shards,
            by: ShardBy::Key,
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            release_on_stop: true,
            on_lost: OnLost::Cancel,
            handover_drain: Duration::from_secs(5),
            select_on_server: true,
        }
    }

    /// Checks the shard count and name, and every Lease's election settings.
    ///
    /// # Errors
    /// The first setting out of bounds.
    pub fn validate(&self) -> Result<(), ShardConfigError> {
        if self.shards == 0 || self.shards > MAX_SHARDS {
            return Err(ShardConfigError::Shards(self.shards));
        }
        if self.name.is_empty() || self.name.len() > 200 {
            return Err(ShardConfigError::Name(self.name.len()));
        }
        if self.identity.len() > MAX_IDENTITY_BYTES {
            return Err(ElectionConfigError::Identity(self.identity.len()).into());
        }
        self.election(self.shard_lease(0)).validate()?;
        Ok(())
    }

    /// Shard `shard`'s Lease name.
    #[must_use]
    pub fn shard_lease(&self, shard: u32) -> String {
        format!("{}-shard-{shard}", self.name)
    }

    /// This replica's membership Lease name (identities need not be valid names).
    #[must_use]
    pub fn member_lease(&self) -> String {
        format!(
            "{}-member-{:016x}",
            self.name,
            fnv1a64(self.identity.as_bytes())
        )
    }

    /// The LIST's label selector: every Lease of this set.
    #[must_use]
    pub fn label_selector(&self) -> String {
        format!("{SHARD_SET_LABEL}={}", self.name)
    }

    /// The shard of a key.
    #[must_use]
    pub fn shard_of<K: ShardKey + ?Sized>(&self, key: &K) -> u32 {
        self.shard_of_text(&key.shard_text(self.by))
    }

    /// The shard of a key's text ([`ShardKey::shard_text`]).
    #[must_use]
    pub fn shard_of_text(&self, text: &str) -> u32 {
        let hash = fnv1a64(text.as_bytes());
        let hash = match self.by {
            // The apiserver's hash as it is, so that its ranges are the shards.
            ShardBy::Namespace => hash,
            // FNV-1a's top bits barely move with a key's last bytes (`o1`, `o2`, ... fell
            // into 3 of 16 ranges), so keys nobody selects on are mixed first.
            ShardBy::Key => mix64(hash),
        };
        shard_of_hash(hash, self.shards)
    }

    /// The apiserver's shard selector (KEP-5866's `shardSelector`, behind the
    /// `ShardedListAndWatch` gate) for the objects of `shards`, when keys are sharded by
    /// namespace; `None` for [`ShardBy::Key`], which the apiserver cannot select on, or for
    /// no shard.
    #[must_use]
    pub fn shard_selector(&self, shards: &[u32]) -> Option<String> {
        if self.by != ShardBy::Namespace || shards.is_empty() {
            return None;
        }
        let hex = |v: u128| {
            if v >> 64 == 0 {
                format!("'0x{v:016x}'")
            } else {
                format!("'0x{v:x}'")
            }
        };
        let parts: Vec<String> = shards
            .iter()
            .map(|&s| {
                let (start, end) = shard_range(s, self.shards);
                format!(
                    "shardRange(object.metadata.namespace, {}, {})",
                    hex(start),
                    hex(end)
                )
            })
            .collect();
        Some(parts.join(" || "))
    }

    fn election(&self, lease: String) -> ElectionConfig {
        ElectionConfig {
            namespace: self.namespace.clone(),
            name: lease,
            identity: self.identity.clone(),
            lease_duration: self.lease_duration,
            renew_deadline: self.renew_deadline,
            retry_period: self.retry_period,
            release_on_stop: self.release_on_stop,
            on_lost: self.on_lost,
        }
    }
}

/// What a replica knows about its shards, for handles and metrics.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Sharding {
    /// The shards this replica holds now (and may dispatch for), ascending.
    pub held: Vec<u32>,
    /// Of those, the shards being given up (no new dispatch; released once drained).
    pub releasing: Vec<u32>,
    /// Shards in the set.
    pub shards: u32,
    /// Replicas seen live, this one included.
    pub live: usize,
    /// The most shards this replica holds once balanced: `⌈shards / live⌉`.
    pub target: usize,
    /// Shards acquired here so far.
    pub acquired_total: u64,
    /// Shards given up or lost here so far.
    pub handovers_total: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_matches_go() {
        // Go: fnv.New64a() over "" and "a".
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn ranges_tile_the_hash_space_and_agree_with_shard_of() {
        for n in [1, 2, 3, 7, 16, 1024] {
            let mut next = 0u128;
            for i in 0..n {
                let (start, end) = shard_range(i, n);
                assert_eq!(start, next, "n={n} i={i}");
                assert!(end > start);
                next = end;
                let lo = u64::try_from(start).unwrap();
                let hi = u64::try_from(end - 1).unwrap();
                assert_eq!(shard_of_hash(lo, n), i, "n={n} i={i} start");
                assert_eq!(shard_of_hash(hi, n), i, "n={n} i={i} end");
            }
            assert_eq!(next, 1u128 << 64);
        }
    }

    #[test]
    fn the_selector_is_the_apiservers_grammar() {
        let mut config = ShardConfig::new("ops", "widgets", "a", 4);
        assert_eq!(config.shard_selector(&[0]), None, "keys are not selectable");
        config.by = ShardBy::Namespace;
        assert_eq!(
            config.shard_selector(&[0, 3]).unwrap(),
            "shardRange(object.metadata.namespace, '0x0000000000000000', '0x4000000000000000') || \
             shardRange(object.metadata.namespace, '0xc000000000000000', '0x10000000000000000')"
        );
    }

    #[test]
    fn keys_of_one_namespace_share_a_shard_when_sharded_by_namespace() {
        let mut config = ShardConfig::new("ops", "w", "a", 16);
        config.by = ShardBy::Namespace;
        let a = ObjectKey::new(Some("team-a"), "x");
        let b = ObjectKey::new(Some("team-a"), "y");
        assert_eq!(config.shard_of(&a), config.shard_of(&b));
        assert_eq!(config.shard_of(&a), config.shard_of(&"team-a/z".to_owned()));
        config.by = ShardBy::Key;
        assert_eq!(config.shard_of(&a), config.shard_of(&"team-a/x".to_owned()));
        let spread: std::collections::BTreeSet<u32> = (0..200)
            .map(|i| config.shard_of(&ObjectKey::new(Some("team-a"), &format!("o{i}"))))
            .collect();
        assert_eq!(spread.len(), 16, "200 keys reach every one of 16 shards");
    }

    #[test]
    fn bad_settings_are_refused() {
        let config = ShardConfig::new("ops", "w", "a", 0);
        assert_eq!(config.validate(), Err(ShardConfigError::Shards(0)));
        let config = ShardConfig::new("ops", "w", "a", MAX_SHARDS + 1);
        assert!(config.validate().is_err());
        let mut config = ShardConfig::new("ops", "w", "a", 3);
        config.renew_deadline = config.lease_duration;
        assert!(matches!(
            config.validate(),
            Err(ShardConfigError::Election(_))
        ));
        assert!(ShardConfig::new("ops", "w", "a", 3).validate().is_ok());
    }
}
