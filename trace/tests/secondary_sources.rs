//! A run with a secondary source becomes a version 2 trace: the header names the secondary,
//! and every answer names its source.

use reconcile_core::pod::PodView;
use reconcile_core::{
    Command, Config, Input, Instant, KeyMap, ListResponse, ObjectKey, Output, ReconcileLoop,
    SourceId, WatchParams,
};
use reconcile_trace::{Record, Recorded, header_for, to_trace};

#[test]
fn every_answer_names_its_source_and_the_header_the_secondaries() {
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
    let lists: Vec<(u64, &Record)> = trace
        .entries
        .iter()
        .filter(|e| matches!(e.record, Record::List { .. }))
        .map(|e| (e.source_index(), &e.record))
        .collect();
    assert_eq!(lists.len(), 2, "{lists:?}");
    for (source, record) in lists {
        let rv = format!(r#""resourceVersion":"{}""#, source + 1);
        assert!(
            matches!(record, Record::List { body, .. } if body.contains(&rv)),
            "source {source}: {record:?}"
        );
    }
    assert_eq!(trace.header.secondaries.len(), 1);
    assert!(trace.to_jsonl().contains(r#""reconcile_sim_trace":2"#));
}
