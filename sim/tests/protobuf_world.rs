//! World mode on protobuf (issue 16): a run whose header asks for protobuf is served
//! protobuf LISTs, pages, WATCH frames, streaming lists and errors (and, every few requests,
//! JSON, as the apiserver answers custom resources), and must end exactly where its JSON
//! twin ends: the same objects decode the same, so the same steps, reconciles and cursor. A
//! secondary source's objects are served as protobuf `PartialObjectMetadata` (metadata
//! only, as client-go's metadata client asks), decoded by the simulator's metadata view.

use reconcile_core::WireFormat;
use reconcile_sim::explore::{
    Sources, ask_for_protobuf, generate_for, page_size_for, protobuf_for, run_listing,
    streaming_for,
};
use reconcile_sim::trace::Trace;

/// Seeds of the protobuf profiles, one-source and many-source, paged or not, with streaming
/// lists served, refused or not asked for, as the swarm draws them.
fn seeds() -> Vec<(u64, Sources)> {
    let mut picked = Vec::new();
    for sources in [Sources::One, Sources::Many] {
        picked.extend(
            (0..400u64)
                .filter(|&seed| {
                    let (trace, profile) = generate_for(seed, false, sources);
                    protobuf_for(seed, profile) && !trace.header.in_process
                })
                .take(6)
                .map(|seed| (seed, sources)),
        );
    }
    picked
}

#[test]
fn a_protobuf_world_run_ends_as_its_json_twin() {
    let picked = seeds();
    assert_eq!(picked.len(), 12);
    let mut json_answers = 0;
    for (seed, sources) in picked {
        let (json, profile) = generate_for(seed, false, sources);
        let mut protobuf = json.clone();
        ask_for_protobuf(&mut protobuf);
        let pages = page_size_for(seed, profile);
        let streaming = streaming_for(seed, profile);
        let a = run_listing(&json, false, pages, streaming);
        let b = run_listing(&protobuf, false, pages, streaming);
        let what = format!("seed {seed} ({profile}, pages {pages:?}, streaming {streaming:?})");
        assert!(a.violations.is_empty(), "{what}: {:?}", a.violations);
        assert!(b.violations.is_empty(), "{what}: {:?}", b.violations);
        assert!(
            b.paths.contains_key("world: protobuf WATCH")
                || b.paths.contains_key("world: protobuf streaming list"),
            "{what}: served no protobuf: {:?}",
            b.paths
        );
        assert!(!a.paths.keys().any(|p| p.contains("protobuf")), "{what}");
        // A secondary source is asked for, and served, metadata only in protobuf.
        assert_eq!(
            b.paths
                .contains_key("world: protobuf metadata (PartialObjectMetadata)"),
            sources == Sources::Many,
            "{what}: {:?}",
            b.paths
        );
        json_answers += b
            .paths
            .get("world: protobuf asked, answered in JSON")
            .copied()
            .unwrap_or(0);
        assert_eq!(
            (a.stats, a.cursor, a.steps, a.end),
            (b.stats, b.cursor, b.steps, b.end),
            "{what}"
        );
    }
    assert!(json_answers > 0, "no request was answered in JSON");
}

#[test]
fn a_protobuf_seeds_trace_replays_on_protobuf() {
    let (seed, sources) = seeds()[0];
    let (mut trace, profile) = generate_for(seed, false, sources);
    ask_for_protobuf(&mut trace);
    let pages = page_size_for(seed, profile);
    let streaming = streaming_for(seed, profile);
    let first = run_listing(&trace, false, pages, streaming);
    let written = Trace::parse("seed.min.jsonl", &trace.to_jsonl()).unwrap();
    assert_eq!(written.header.wire_format, WireFormat::Protobuf);
    let again = run_listing(&written, false, pages, streaming);
    assert!(again.paths.contains_key("world: protobuf WATCH"));
    assert_eq!(
        (first.stats, first.cursor, first.steps, first.paths),
        (again.stats, again.cursor, again.steps, again.paths)
    );
}
