//! A run with a secondary source becomes a trace of the primary alone, saying so: this
//! format names no source, so the secondary's answers cannot be told apart in a replay.

use reconcile_core::pod::PodView;
use reconcile_core::{
    Command, Config, Input, Instant, KeyMap, ListResponse, ObjectKey, Output, ReconcileLoop,
    SourceId, WatchParams,
};
use reconcile_trace::{Record, Recorded, header_for, to_trace};

#[test]
fn a_secondary_sources_answers_are_left_out_and_the_header_says_so() {
    let config: Config<PodView, ObjectKey> =
        Config::kubernetes(WatchParams::namespaced("ns"), KeyMap::by_object())
            .owns::<PodView>(WatchParams::namespaced("ns").labels("role=child"), "Pod");
    let header = header_for("two sources", &config);
    let mut core = ReconcileLoop::new(config, Instant::ZERO).unwrap();
    core.handle_input(Instant::ZERO, Input::Start);
    let mut records: Vec<(Instant, Recorded<PodView, ObjectKey>)> = Vec::new();
    let mut lists = Vec::new();
    while let Output::Command(command) = core.poll_output() {
        if let Command::List { req, source, .. } = &command {
            lists.push((*req, *source));
        }
        records.push((Instant::ZERO, Recorded::Command(command)));
    }
    assert_eq!(lists.len(), 2, "one LIST per source");
    for (req, source) in lists {
        let body = if source == SourceId::PRIMARY {
            r#"{"metadata":{"resourceVersion":"1"},"items":[]}"#
        } else {
            r#"{"metadata":{"resourceVersion":"2"},"items":[{"metadata":{"name":"c","namespace":"ns"}}]}"#
        };
        let response = ListResponse::Response {
            status: 200,
            body: body.into(),
        };
        records.push((
            Instant::ZERO,
            Recorded::Input(Input::List { req, response }),
        ));
    }
    let trace = to_trace("t", header, &records);
    let lists: Vec<&Record> = trace
        .entries
        .iter()
        .map(|e| &e.record)
        .filter(|r| matches!(r, Record::List { .. }))
        .collect();
    assert_eq!(lists.len(), 1, "only the primary's LIST: {lists:?}");
    assert!(
        matches!(lists[0], Record::List { body, .. } if body.contains(r#""resourceVersion":"1""#))
    );
    let description = trace.header.description.unwrap_or_default();
    assert!(
        description.contains("secondary sources left out"),
        "{description}"
    );
}
