//! A version 2 trace of a controller that owns children: replayed with every LIST, WATCH
//! and frame routed to the source it names, byte-identically on every run. World mode,
//! which holds one kind, refuses it rather than wait at the sync barrier forever.

use reconcile_sim::replay::DIVERGENCE;
use reconcile_sim::trace::Trace;
use reconcile_sim::{ReplayOptions, SimOptions, replay, simulate};

const TRACE: &str = r#"{"reconcile_sim_trace":2,"description":"parents owning children","namespace":"ns","label_selector":"role=parent","parent":"name","secondaries":[{"namespace":"ns","label_selector":"role=child","timeout_seconds":300,"parents_by":"owner:Pod"}]}
{"record":"list","t":0.1,"status":200,"body":{"metadata":{"resourceVersion":"10"},"items":[{"metadata":{"name":"a","namespace":"ns","resourceVersion":"5","labels":{"role":"parent"}}},{"metadata":{"name":"b","namespace":"ns","resourceVersion":"6","labels":{"role":"parent"}}}]}}
{"record":"list","t":0.2,"source":1,"status":200,"body":{"metadata":{"resourceVersion":"20"},"items":[{"metadata":{"name":"a-1","namespace":"ns","resourceVersion":"11","labels":{"role":"child"},"ownerReferences":[{"apiVersion":"v1","kind":"Pod","name":"a","uid":"u-a","controller":true}]}}]}}
{"record":"watch","t":0.3,"resource_version":"10"}
{"record":"watch","t":0.3,"source":1,"resource_version":"20"}
{"record":"frame","t":1,"source":1,"event":{"type":"ADDED","object":{"metadata":{"name":"b-1","namespace":"ns","resourceVersion":"21","labels":{"role":"child"},"ownerReferences":[{"apiVersion":"v1","kind":"Pod","name":"b","uid":"u-b","controller":true}]}}}}
{"record":"frame","t":2,"source":1,"event":{"type":"DELETED","object":{"metadata":{"name":"a-1","namespace":"ns","resourceVersion":"22","labels":{"role":"child"},"ownerReferences":[{"apiVersion":"v1","kind":"Pod","name":"a","uid":"u-a","controller":true}]}}}}
{"record":"frame","t":3,"event":{"type":"MODIFIED","object":{"metadata":{"name":"b","namespace":"ns","resourceVersion":"23","labels":{"role":"parent"}}}}}
{"record":"watch_end","t":4,"source":1,"error":"connection reset"}
"#;

#[test]
fn a_two_source_trace_replays_without_divergence_and_the_same_every_time() {
    let trace = Trace::parse("owns.jsonl", TRACE).unwrap();
    let first = replay(&trace, &ReplayOptions::default()).unwrap();
    assert!(
        first.violations.iter().all(|v| v.invariant != DIVERGENCE),
        "{:?}\n{}",
        first.violations,
        first.output
    );
    // Each reconcile line ends with the children it was handed: S1=n.
    for expected in [
        "reconcile ns/a R5 attempt=1 members=[a] S1=1",
        "members=[b] S1=0",
        "members=[b] S1=1",
        "members=[a] S1=0",
    ] {
        assert!(
            first.output.contains(expected),
            "{expected}:\n{}",
            first.output
        );
    }
    assert_eq!(first.stats.lists, 2, "one LIST per source");
    let second = replay(&trace, &ReplayOptions::default()).unwrap();
    assert_eq!(first.output, second.output, "one trace, one output");
    insta::assert_snapshot!(first.output);
}

#[test]
fn world_mode_refuses_a_trace_with_secondaries() {
    let trace = Trace::parse("owns.jsonl", TRACE).unwrap();
    let report = simulate(&trace, &SimOptions::default()).unwrap();
    assert_eq!(report.violations.len(), 1);
    assert!(
        report.violations[0].detail.contains("replay it instead"),
        "{:?}",
        report.violations
    );
}
