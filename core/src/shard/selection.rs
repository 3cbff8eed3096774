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
    /// Watch these shards' objects: the selector of every shard held. Each source lists
    /// the held shards it does not cover yet ([`Selection::gained`]).
    Shards(String),
    /// No shard is held: list nothing, and forget what is cached.
    Nothing,
}

/// One selected source's cache, as the selection sees it.
#[derive(Debug, Clone, Default)]
struct Cover {
    /// The shards the source's applied listings hold.
    covered: BTreeSet<u32>,
    /// The shards whose listing is newer than the source's watch position, with that
    /// listing's version: changes to their objects up to it are already cached.
    fresh: BTreeMap<u32, u64>,
}

/// The shards asked for, and covered by each selected source: the primary (source 0),
/// then each selected secondary.
#[derive(Debug, Clone)]
pub(crate) struct Selection {
    /// The shards the selected sources are asked for, ascending; empty while paused.
    asked: Vec<u32>,
    /// Per selected source.
    sources: Vec<Cover>,
    /// The apiserver sent an object outside the selection: it does not select.
    ignored: bool,
}

impl Selection {
    /// A selection over `sources` selected sources (the primary and the selected
    /// secondaries).
    pub(crate) fn new(sources: usize) -> Self {
        Selection {
            asked: Vec::new(),
            sources: vec![Cover::default(); sources.max(1)],
            ignored: false,
        }
    }

    /// Asks for `held` (ascending) if that is not what is asked already. A shard no longer
    /// held is no longer covered at once; a new one only once every selected source's
    /// listing of it is applied.
    pub(crate) fn want(&mut self, config: &ShardConfig, held: &[u32]) -> Option<Ask> {
        if self.ignored || self.asked == held {
            return None;
        }
        debug_assert!(held.is_sorted(), "held shards are ascending");
        self.asked = held.to_vec();
        for cover in &mut self.sources {
            cover.covered.retain(|s| held.binary_search(s).is_ok());
            cover.fresh.retain(|s, _| held.binary_search(s).is_ok());
        }
        Some(match config.shard_selector(held) {
            Some(all) => Ask::Shards(all),
            None => Ask::Nothing,
        })
    }

    /// The selector of the shards asked for that `source` does not cover yet: what it
    /// lists after a move. `None`: it covers them all.
    pub(crate) fn gained(&self, config: &ShardConfig, source: usize) -> Option<String> {
        let cover = &self.sources[source];
        let gained: Vec<u32> = self
            .asked
            .iter()
            .copied()
            .filter(|s| !cover.covered.contains(s))
            .collect();
        config.shard_selector(&gained)
    }

    /// Whether `source`'s cache holds objects of `shard`, as a listing left them.
    pub(crate) fn is_covered(&self, source: usize, shard: u32) -> bool {
        self.sources[source].covered.contains(&shard)
    }

    /// Whether some shard of `source` is fresh: only then are its watch events checked.
    pub(crate) fn has_fresh(&self, source: usize) -> bool {
        !self.sources[source].fresh.is_empty()
    }

    /// Whether a change at `version` to an object of `shard`, seen by `source`'s watch, is
    /// one its cache already holds from a newer listing.
    pub(crate) fn is_stale(&self, source: usize, shard: u32, version: Option<u64>) -> bool {
        self.sources[source]
            .fresh
            .get(&shard)
            .is_some_and(|upto| version.is_some_and(|v| v <= *upto))
    }

    /// `source`'s watch has passed `version`: shards listed at or below it are fresh no
    /// more.
    pub(crate) fn passed(&mut self, source: usize, version: u64) {
        self.sources[source].fresh.retain(|_, upto| *upto > version);
    }

    /// A listing by `source` asked with the current selection was applied: it covers every
    /// shard asked for. `gained_at`: the listing held only the shards it lacked, at that
    /// version, newer than where its watch resumes (`None`: a whole listing, so nothing
    /// of it is fresh). Gives the shards now covered by every selected source, whose
    /// parked keys may run.
    pub(crate) fn listed(&mut self, source: usize, gained_at: Option<u64>) -> Vec<u32> {
        let was: Vec<bool> = self.asked.iter().map(|&s| self.covers(s)).collect();
        let cover = &mut self.sources[source];
        match gained_at {
            Some(version) => {
                for &shard in &self.asked {
                    if !cover.covered.contains(&shard) {
                        cover.fresh.insert(shard, version);
                    }
                }
            }
            None => cover.fresh.clear(),
        }
        cover.covered.extend(self.asked.iter().copied());
        self.asked
            .iter()
            .zip(was)
            .filter(|&(&s, was)| !was && self.covers(s))
            .map(|(&s, _)| s)
            .collect()
    }

    /// Whether every selected source's cache holds `shard`'s objects.
    pub(crate) fn covers(&self, shard: u32) -> bool {
        self.ignored || self.sources.iter().all(|c| c.covered.contains(&shard))
    }

    /// Whether an object in `shard` shows that the apiserver ignored the selector.
    pub(crate) fn outside(&self, shard: u32) -> bool {
        !self.ignored && self.asked.binary_search(&shard).is_err()
    }

    /// The apiserver does not select: from now on everything is asked and covered. Gives
    /// the shards asked until now, whose parked keys may now run.
    pub(crate) fn ignore(&mut self) -> Vec<u32> {
        self.ignored = true;
        let newly = self.asked.clone();
        for cover in &mut self.sources {
            cover.covered.clear();
            cover.fresh.clear();
        }
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
        let mut s = Selection::new(1);
        assert!(matches!(s.want(&c, &[1]), Some(Ask::Shards(_))));
        assert!(!s.covers(1), "nothing listed yet");
        assert_eq!(s.listed(0, None), [1]);
        assert!(s.covers(1));
        assert_eq!(s.want(&c, &[1]), None, "the same shards ask nothing");
        let Some(Ask::Shards(all)) = s.want(&c, &[1, 3]) else {
            panic!("a new shard asks again")
        };
        assert_eq!(all.matches("shardRange(").count(), 2, "{all}");
        assert_eq!(
            s.gained(&c, 0),
            c.shard_selector(&[3]),
            "only the new shard is listed"
        );
        assert!(
            s.covers(1),
            "a shard still held stays covered while listing the new one"
        );
        assert!(!s.covers(3), "the new shard waits for its listing");
        assert_eq!(s.listed(0, Some(9)), [3]);
        assert!(s.covers(3));
        assert!(s.is_stale(0, 3, Some(9)) && !s.is_stale(0, 3, Some(10)));
        assert!(
            !s.is_stale(0, 1, Some(2)),
            "a shard held all along is not fresh"
        );
        s.passed(0, 9);
        assert!(!s.has_fresh(0) && !s.is_stale(0, 3, Some(9)));
    }

    #[test]
    fn a_shard_let_go_is_uncovered_at_once_and_none_held_asks_nothing() {
        let c = config();
        let mut s = Selection::new(1);
        s.want(&c, &[0, 2]);
        s.listed(0, None);
        assert!(matches!(s.want(&c, &[2]), Some(Ask::Shards(_))));
        assert_eq!(s.gained(&c, 0), None, "letting a shard go lists nothing");
        assert!(!s.covers(0));
        assert!(s.outside(0), "an object of shard 0 is outside now");
        assert_eq!(s.want(&c, &[]), Some(Ask::Nothing));
        assert!(!s.covers(2));
    }

    #[test]
    fn a_shard_is_covered_once_every_selected_source_listed_it() {
        let c = config();
        let mut s = Selection::new(2);
        s.want(&c, &[1, 2]);
        assert!(s.listed(0, None).is_empty(), "the secondary has not listed");
        assert!(!s.covers(1));
        assert_eq!(s.listed(1, None), [1, 2]);
        assert!(s.covers(1) && s.covers(2));
        s.want(&c, &[1, 2, 3]);
        assert_eq!(s.listed(1, Some(7)), Vec::<u32>::new());
        assert_eq!(s.gained(&c, 1), None);
        assert_eq!(s.gained(&c, 0), c.shard_selector(&[3]));
        assert!(s.is_stale(1, 3, Some(7)) && !s.is_stale(0, 3, Some(7)));
        assert_eq!(s.listed(0, Some(8)), [3]);
    }

    #[test]
    fn an_ignored_selector_covers_everything_and_asks_nothing_again() {
        let c = config();
        let mut s = Selection::new(1);
        s.want(&c, &[1]);
        assert!(s.outside(2));
        assert_eq!(s.ignore(), [1]);
        assert!(s.is_ignored());
        assert!(s.covers(0) && s.covers(3));
        assert!(!s.outside(2));
        assert_eq!(s.want(&c, &[0, 1]), None);
    }
}
