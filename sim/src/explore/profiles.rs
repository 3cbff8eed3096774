//! The fault profiles a seed picks from, and what else each seed draws from its own streams
//! (pages, streaming lists, protobuf, several sources), so that a seed's trace is the same
//! whatever else it draws.

use crate::rng::Rng;
use crate::simulate::StreamingLists;

use crate::explore::options::Sources;

/// The fault profiles a seed picks from.
pub const PROFILES: &[&str] = &[
    "calm",
    "watch-drops",
    "gone-frame",
    "gone-status",
    "too-large",
    "malformed-cursor",
    "malformed-nocursor",
    "restart",
    "compaction",
    "list-failures",
    "slow-reconciles",
    "failing-reconciles",
    "clock-jumps",
    "chaos",
];

/// The profiles of a seed whose controller has several sources (a primary, the children it
/// owns, and objects that name several owners): the same faults as [`PROFILES`], in the
/// same order, each fault hitting one source or every source.
pub const MANY_SOURCE_PROFILES: &[&str] = &[
    "sources/calm",
    "sources/watch-drops",
    "sources/gone-frame",
    "sources/gone-status",
    "sources/too-large",
    "sources/malformed-cursor",
    "sources/malformed-nocursor",
    "sources/restart",
    "sources/compaction",
    "sources/list-failures",
    "sources/slow-reconciles",
    "sources/failing-reconciles",
    "sources/clock-jumps",
    "sources/chaos",
];

/// The profiles (and their many-source forms) half of whose seeds also LIST in pages
/// ([`page_size_for`]): those whose faults (a compaction, a restart, a 410 storm, a failed
/// LIST) can fall between the pages of a listing and expire its continue token.
pub const PAGED_PROFILES: &[&str] = &[
    "gone-frame",
    "gone-status",
    "restart",
    "compaction",
    "list-failures",
    "chaos",
];

/// The LIST page size seed `seed` of `profile` runs with, if it pages: half the seeds of
/// [`PAGED_PROFILES`], with 1 to 3 objects a page, so that a listing of the few objects a
/// seed has spans several pages ([`crate::simulate::PAGE_DELAY`] each). Drawn from its own
/// generator, so a seed's trace is the same whether it pages or not.
#[must_use]
pub fn page_size_for(seed: u64, profile: &str) -> Option<u32> {
    let base = profile.strip_prefix("sources/").unwrap_or(profile);
    if !PAGED_PROFILES.contains(&base) {
        return None;
    }
    let mut rng = Rng::new(seed ^ 0x5041_4745_5349_5a45);
    rng.chance(50).then(|| *rng.pick(&[1, 2, 3]))
}

/// Whether seed `seed` of `profile` fetches its listings with streaming lists, and whether
/// its world serves or refuses them: of the seeds of [`PAGED_PROFILES`] (whose faults can
/// fall between the initial events, [`crate::simulate::INITIAL_EVENT_DELAY`] apart), 40 %
/// are served and 10 % refused (422, so every source falls back to LIST+WATCH). Drawn from
/// a generator of its own, so a seed's trace is the same either way.
#[must_use]
pub fn streaming_for(seed: u64, profile: &str) -> Option<StreamingLists> {
    let base = profile.strip_prefix("sources/").unwrap_or(profile);
    if !PAGED_PROFILES.contains(&base) {
        return None;
    }
    let mut rng = Rng::new(seed ^ 0x5354_5245_414d_494e);
    match rng.below(10) {
        0..=3 => Some(StreamingLists::Served),
        4 => Some(StreamingLists::Refused),
        _ => None,
    }
}

/// The profiles (and their many-source forms) 40 % of whose seeds run on protobuf
/// ([`protobuf_for`]): those whose faults meet the wire (every fault profile but the
/// reconcile-side ones).
pub const PROTOBUF_PROFILES: &[&str] = &[
    "watch-drops",
    "gone-frame",
    "gone-status",
    "too-large",
    "malformed-cursor",
    "malformed-nocursor",
    "restart",
    "compaction",
    "list-failures",
    "clock-jumps",
    "chaos",
];

/// Whether seed `seed` of `profile` asks for protobuf (`WireFormat::Protobuf`, issue 16):
/// 40 % of the seeds of [`PROTOBUF_PROFILES`], with paging and streaming lists as those are
/// drawn. The world then serves protobuf, and answers every
/// [`crate::simulate::JSON_ANSWER_EVERY`]-th request in JSON. Drawn from a generator of its
/// own, so a seed's trace is the same either way; the choice is written in the trace's header
/// (`wire_format`), so a minimized trace replays on protobuf.
#[must_use]
pub fn protobuf_for(seed: u64, profile: &str) -> bool {
    let base = profile.strip_prefix("sources/").unwrap_or(profile);
    if !PROTOBUF_PROFILES.contains(&base) {
        return false;
    }
    let mut rng = Rng::new(seed ^ 0x5052_4f54_4f42_5546);
    rng.chance(40)
}

/// Makes `trace` ask for protobuf: its primary source, and each secondary, which then asks
/// for metadata only (`PartialObjectMetadata`) in protobuf, as client-go's metadata client
/// does.
pub fn ask_for_protobuf(trace: &mut crate::trace::Trace) {
    trace.header.wire_format = reconcile_core::WireFormat::Protobuf;
    for secondary in &mut trace.header.secondaries {
        secondary.params.wire_format = reconcile_core::WireFormat::Protobuf;
    }
}

/// Whether seed `seed` builds a controller with several sources: drawn from its own stream,
/// so a one-source seed generates exactly the trace it always did.
#[must_use]
pub fn many_sources(seed: u64, sources: Sources) -> bool {
    match sources {
        Sources::One => false,
        Sources::Many => true,
        Sources::Both => Rng::new(seed ^ 0x6d61_6e79_2d73_7263).chance(50),
    }
}

/// The fault kinds a profile draws from (a many-source profile as its one-source twin).
pub(super) fn fault_kinds(profile: &str) -> &'static [&'static str] {
    match profile.strip_prefix("sources/").unwrap_or(profile) {
        "calm" => &[],
        "watch-drops" => &["watch_drop"],
        "gone-frame" | "gone-status" => &["gone"],
        "too-large" => &["too_large"],
        "malformed-cursor" => &["malformed_cursor"],
        "malformed-nocursor" => &["malformed_nocursor"],
        "restart" => &["restart"],
        "compaction" => &["compact", "watch_drop"],
        "list-failures" => &["list_fail", "gone"],
        "slow-reconciles" => &["slow"],
        "failing-reconciles" => &["fail"],
        "clock-jumps" => &["clock_jump"],
        _ => &[
            "watch_drop",
            "gone",
            "too_large",
            "malformed_cursor",
            "malformed_nocursor",
            "restart",
            "compact",
            "list_fail",
            "slow",
            "fail",
            "clock_jump",
        ],
    }
}
