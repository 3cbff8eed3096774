//! Server-side shard selection (KEP-5866): which shards a replica asks the apiserver for,
//! and which of them its cache already holds.
//!
//! A replica whose keys are sharded by namespace lists and watches only its shards' objects
//! (`shardSelector`). When its shards move it lists only the shards it gained, and watches
//! every shard it holds from where its watch stood; until that listing is applied a newly
//! held shard is not *covered*: its keys are parked, never dispatched, since the cache
//! holds none of its objects yet and a reconcile would read them as deleted. A shard that
//! stays held stays covered across the move: its objects are as stale as any informer's,
//! not missing.
//!
//! The gained shards' listing is newer than the watch's resume point, so the watch replays
//! changes to those shards' objects that the listing already holds. They are *fresh*
//! until the watch passes the listing's version: a change to one of their objects at or
//! below that version is dropped, never applied over the newer listed state.
//!
//! An apiserver without the feature gate ignores the parameter and sends every object.
//! The first object outside the shards asked for shows it, on any path (a LIST, a streaming
//! list, a watch event): the replica then stops sending the selector and caches everything,
//! filtering on dispatch as an unselected replica does.

use std::collections::{BTreeMap, BTreeSet};

use super::ShardConfig;

/// What the selected sources are to ask for after a move of shards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Ask {
    /// Watch these shards' objects (`all`, the selector); list those of `gained` (the
    /// shards held but not covered), if any.
    Shards {
        /// The selector of every shard held.
        all: String,
        /// The selector of the held shards the cache does not cover yet.
        gained: Option<String>,
    },
    /// No shard is held: list nothing, and forget what is cached.
    Nothing,
}

/// The shards asked for and covered.
#[derive(Debug, Clone, Default)]
pub(crate) struct Selection {
    /// The shards the selected sources are asked for, ascending; empty while paused.
    asked: Vec<u32>,
    /// The shards the last applied listing holds.
    covered: BTreeSet<u32>,
    /// The apiserver sent an object outside the selection: it does not select.
    ignored: bool,
    /// The shards whose listing is newer than the watch's position, and that listing's
    /// version: changes to their objects up to it are already cached.
    fresh: BTreeMap<u32, u64>,
}

impl Selection {
    /// Asks for `held` (ascending) if that is not what is asked already. A shard no longer
    /// held is no longer covered at once; a new one only once its listing is applied.
    pub(crate) fn want(&mut self, config: &ShardConfig, held: &[u32]) -> Option<Ask> {
        if self.ignored || self.asked == held {
            return None;
        }
        debug_assert!(held.is_sorted(), "held shards are ascending");
        self.asked = held.to_vec();
        self.covered.retain(|s| held.binary_search(s).is_ok());
        self.fresh.retain(|s, _| held.binary_search(s).is_ok());
        let gained: Vec<u32> = held
            .iter()
            .copied()
            .filter(|s| !self.covered.contains(s))
            .collect();
        Some(match config.shard_selector(held) {
            Some(all) => Ask::Shards {
                all,
                gained: config.shard_selector(&gained),
            },
            None => Ask::Nothing,
        })
    }

    /// Whether the cache holds objects of `shard`, as a listing left them.
    pub(crate) fn is_covered(&self, shard: u32) -> bool {
        self.covered.contains(&shard)
    }

    /// The listing of the shards just covered (`newly`, from [`Selection::listed`]) is at
    /// `version`, newer than where the watch resumes.
    pub(crate) fn fresh(&mut self, newly: &[u32], version: u64) {
        for &shard in newly {
            self.fresh.insert(shard, version);
        }
    }

    /// Whether some shard is fresh: only then are watch events checked.
    pub(crate) fn has_fresh(&self) -> bool {
        !self.fresh.is_empty()
    }

    /// Whether a change at `version` to an object of `shard` is one the cache already
    /// holds from a newer listing.
    pub(crate) fn is_stale(&self, shard: u32, version: Option<u64>) -> bool {
        self.fresh
            .get(&shard)
            .is_some_and(|upto| version.is_some_and(|v| v <= *upto))
    }

    /// The watch has passed `version`: shards listed at or below it are fresh no more.
    /// `None`: the cache was listed whole, so nothing is.
    pub(crate) fn passed(&mut self, version: Option<u64>) {
        match version {
            Some(v) => self.fresh.retain(|_, upto| *upto > v),
            None => self.fresh.clear(),
        }
    }

    /// A listing asked with the current selection was applied: every shard asked for is
    /// covered. Gives the shards newly covered, whose parked keys may now run.
    pub(crate) fn listed(&mut self) -> Vec<u32> {
        let newly: Vec<u32> = self
            .asked
            .iter()
            .copied()
            .filter(|s| !self.covered.contains(s))
            .collect();
        self.covered.extend(newly.iter().copied());
        newly
    }

    /// Whether the cache holds `shard`'s objects.
    pub(crate) fn covers(&self, shard: u32) -> bool {
        self.ignored || self.covered.contains(&shard)
    }

    /// Whether an object in `shard` shows that the apiserver ignored the selector.
    pub(crate) fn outside(&self, shard: u32) -> bool {
        !self.ignored && self.asked.binary_search(&shard).is_err()
    }

    /// The apiserver does not select: from now on everything is asked and covered. Gives
    /// the shards asked until now, whose parked keys may now run.
    pub(crate) fn ignore(&mut self) -> Vec<u32> {
        self.ignored = true;
        self.fresh.clear();
        let newly = self.asked.clone();
        self.covered.clear();
        self.asked.clear();
        newly
    }

    /// Whether the apiserver was found to ignore the selector.
    pub(crate) fn is_ignored(&self) -> bool {
        self.ignored
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shard::ShardBy;

    fn config() -> ShardConfig {
        let mut c = ShardConfig::new("ns", "ctl", "r0", 4);
        c.by = ShardBy::Namespace;
        c
    }

    #[test]
    fn a_new_shard_is_covered_only_once_its_listing_is_applied() {
        let c = config();
        let mut s = Selection::default();
        assert!(matches!(
            s.want(&c, &[1]),
            Some(Ask::Shards {
                gained: Some(_),
                ..
            })
        ));
        assert!(!s.covers(1), "nothing listed yet");
        assert_eq!(s.listed(), [1]);
        assert!(s.covers(1));
        assert_eq!(s.want(&c, &[1]), None, "the same shards ask nothing");
        let Some(Ask::Shards {
            all,
            gained: Some(gained),
        }) = s.want(&c, &[1, 3])
        else {
            panic!("a new shard asks again")
        };
        assert_eq!(all.matches("shardRange(").count(), 2, "{all}");
        assert_eq!(
            gained,
            c.shard_selector(&[3]).unwrap(),
            "only the new shard is listed"
        );
        assert!(
            s.covers(1),
            "a shard still held stays covered while relisting"
        );
        assert!(!s.covers(3), "the new shard waits for its listing");
        assert_eq!(s.listed(), [3]);
        assert!(s.covers(3));
    }

    #[test]
    fn a_shard_let_go_is_uncovered_at_once_and_none_held_asks_nothing() {
        let c = config();
        let mut s = Selection::default();
        s.want(&c, &[0, 2]);
        s.listed();
        assert!(
            matches!(s.want(&c, &[2]), Some(Ask::Shards { gained: None, .. })),
            "letting a shard go lists nothing"
        );
        assert!(!s.covers(0));
        assert!(s.outside(0), "an object of shard 0 is outside now");
        assert_eq!(s.want(&c, &[]), Some(Ask::Nothing));
        assert!(!s.covers(2));
    }

    #[test]
    fn an_ignored_selector_covers_everything_and_asks_nothing_again() {
        let c = config();
        let mut s = Selection::default();
        s.want(&c, &[1]);
        assert!(s.outside(2));
        assert_eq!(s.ignore(), [1]);
        assert!(s.is_ignored());
        assert!(s.covers(0) && s.covers(3));
        assert!(!s.outside(2));
        assert_eq!(s.want(&c, &[0, 1]), None);
    }
}
