//! A version 2 trace of a controller that owns children: replayed with every LIST, WATCH
//! and frame routed to the source it names, byte-identically on every run; and a world of
//! parents and children simulated, with a fault on one source, its invariants checked per
//! source.

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

/// Parents `a` and `b` (the primary) own children (S1) in a simulated world: a child deleted
/// behind the controller's back, a 410 on the children's source while the parents' keeps
/// streaming, a child re-owned while that source relists, a parent edited, then a parent
/// deleted and its child removed later, as the garbage collector would.
const WORLD: &str = r#"{"reconcile_sim_trace":2,"description":"parents owning children, simulated","namespace":"ns","label_selector":"role=parent","parent":"name","secondaries":[{"namespace":"ns","label_selector":"role=child","timeout_seconds":300,"parents_by":"owner:Pod"}]}
{"record":"frame","t":0,"event":{"type":"ADDED","object":{"metadata":{"name":"a","namespace":"ns","labels":{"role":"parent"}}}}}
{"record":"frame","t":0,"event":{"type":"ADDED","object":{"metadata":{"name":"b","namespace":"ns","labels":{"role":"parent"}}}}}
{"record":"frame","t":0,"source":1,"event":{"type":"ADDED","object":{"metadata":{"name":"a-1","namespace":"ns","labels":{"role":"child"},"ownerReferences":[{"apiVersion":"v1","kind":"Pod","name":"a","uid":"u-a","controller":true}]}}}}
{"record":"frame","t":1,"source":1,"event":{"type":"ADDED","object":{"metadata":{"name":"b-1","namespace":"ns","labels":{"role":"child"},"ownerReferences":[{"apiVersion":"v1","kind":"Pod","name":"b","uid":"u-b","controller":true}]}}}}
{"record":"frame","t":2,"source":1,"event":{"type":"DELETED","object":{"metadata":{"name":"a-1","namespace":"ns","labels":{"role":"child"}}}}}
{"record":"fault","t":3,"fault":"gone_storm","count":1,"source":1}
{"record":"frame","t":3.5,"source":1,"event":{"type":"MODIFIED","object":{"metadata":{"name":"b-1","namespace":"ns","labels":{"role":"child"},"ownerReferences":[{"apiVersion":"v1","kind":"Pod","name":"a","uid":"u-a","controller":true}]}}}}
{"record":"frame","t":3.5,"event":{"type":"MODIFIED","object":{"metadata":{"name":"b","namespace":"ns","labels":{"role":"parent","edited":"yes"}}}}}
{"record":"frame","t":10,"event":{"type":"DELETED","object":{"metadata":{"name":"a","namespace":"ns","labels":{"role":"parent"}}}}}
{"record":"frame","t":12,"source":1,"event":{"type":"DELETED","object":{"metadata":{"name":"b-1","namespace":"ns","labels":{"role":"child"}}}}}
"#;

fn checked(settle: u64) -> SimOptions {
    SimOptions {
        settle: std::time::Duration::from_secs(settle),
        check: true,
        ..SimOptions::default()
    }
}

#[test]
fn world_mode_simulates_parents_and_children_and_their_invariants_hold() {
    let trace = Trace::parse("owns-world.jsonl", WORLD).unwrap();
    let first = simulate(&trace, &checked(30)).unwrap();
    assert!(
        first.violations.is_empty(),
        "{:?}\n{}",
        first.violations,
        first.output
    );
    // The 410 relisted the children's source alone; the parents' watch streamed on.
    assert_eq!(first.stats.relists, 2, "{}", first.output);
    assert!(first.output.contains("relist S1 ("), "{}", first.output);
    assert!(!first.output.contains("relist ("), "{}", first.output);
    assert!(
        first
            .output
            .contains("frame W3 MODIFIED ns/b rv=4  ->  reconcile ns/b"),
        "the parents' stream kept going while S1 relisted:\n{}",
        first.output
    );
    // The relist found b-1 re-owned: it woke both its old and its new owner.
    let relisted = first
        .output
        .lines()
        .find(|l| l.contains("list L10 200"))
        .unwrap();
    assert!(relisted.contains("reconcile ns/a"), "{relisted}");
    let again = simulate(&trace, &checked(30)).unwrap();
    assert_eq!(first.output, again.output, "one trace, one output");
    insta::assert_snapshot!(first.output);
}

#[test]
fn a_change_lost_on_one_source_breaks_that_sources_invariants() {
    // An apiserver bug drops the garbage collector's deletion of b-1: the cache keeps a
    // ghost, and `a`'s last reconcile saw a child the world no longer has.
    let text = WORLD.replace(
        r#"{"record":"frame","t":12,"source":1"#,
        "{\"record\":\"fault\",\"t\":12,\"fault\":\"lose_change\",\"count\":1}\n{\"record\":\"frame\",\"t\":12,\"source\":1",
    );
    let trace = Trace::parse("owns-lost.jsonl", &text).unwrap();
    let report = simulate(&trace, &checked(30)).unwrap();
    let invariants: Vec<&str> = report.violations.iter().map(|v| v.invariant).collect();
    assert!(
        invariants.contains(&"source differs from the world at quiescence"),
        "{:?}",
        report.violations
    );
    let ghost = report
        .violations
        .iter()
        .find(|v| v.invariant == "source differs from the world at quiescence")
        .unwrap();
    assert!(
        ghost.detail.starts_with("S1: ghosts [\"ns/b-1\"]"),
        "{}",
        ghost.detail
    );
    assert!(
        invariants.contains(&"parent not reconciled after its last change"),
        "{:?}",
        report.violations
    );
}
