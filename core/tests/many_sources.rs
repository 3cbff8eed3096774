//! One loop, two sources: parents (the primary) and the children they own (a secondary,
//! `Config::owns`). Each scenario renders one line per step and is pinned as a snapshot;
//! every reconcile's line ends with `S1=n`, the children it was handed at dispatch.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use reconcile_core::pod::PodView;
use reconcile_core::{
    Command, Config, ConfigError, Input, Instant, KeyMap, ListResponse, ObjectKey, Outcome, Output,
    Predicate, ReconcileLoop, RequestId, SourceId, StepLine, StreamId, Ticket, Transform,
    WatchParams,
};

const PRIMARY: SourceId = SourceId::PRIMARY;

fn children() -> SourceId {
    SourceId::nth(1)
}

/// A parent: a pod labelled `role=parent`.
fn parent(name: &str, rv: u64) -> String {
    format!(
        r#"{{"metadata":{{"name":"{name}","namespace":"ns","resourceVersion":"{rv}","labels":{{"role":"parent"}}}}}}"#
    )
}

/// A child controlled by the parent `owner` (kind `Pod`, as the parents are pods here).
fn child(name: &str, owner: &str, rv: u64) -> String {
    format!(
        r#"{{"metadata":{{"name":"{name}","namespace":"ns","resourceVersion":"{rv}","labels":{{"role":"child"}},"ownerReferences":[{{"apiVersion":"v1","kind":"Pod","name":"{owner}","uid":"u-{owner}","controller":true}}]}}}}"#
    )
}

/// A child as [`child`] makes it, with a `tier` label and a status phase.
fn child_in(name: &str, owner: &str, rv: u64, tier: &str, phase: &str) -> String {
    format!(
        r#"{{"metadata":{{"name":"{name}","namespace":"ns","resourceVersion":"{rv}","labels":{{"role":"child","tier":"{tier}"}},"ownerReferences":[{{"apiVersion":"v1","kind":"Pod","name":"{owner}","uid":"u-{owner}","controller":true}}]}},"status":{{"phase":"{phase}"}}}}"#
    )
}

fn frame(kind: &str, object: &str) -> String {
    format!(r#"{{"type":"{kind}","object":{object}}}"#)
}

fn list_body(rv: u64, items: &[String]) -> String {
    format!(
        r#"{{"kind":"PodList","apiVersion":"v1","metadata":{{"resourceVersion":"{rv}"}},"items":[{}]}}"#,
        items.join(",")
    )
}

/// A driver for the scenarios: answers each source's LIST and WATCH by hand.
struct Run {
    core: ReconcileLoop<PodView, ObjectKey>,
    now: Instant,
    log: String,
    lists: BTreeMap<SourceId, RequestId>,
    streams: BTreeMap<SourceId, StreamId>,
    running: BTreeMap<String, Ticket>,
    /// Every dispatch: parent, its members, its children.
    dispatched: Vec<(String, Vec<String>, Vec<String>)>,
}

impl Run {
    fn new() -> Self {
        Self::with(|config| config)
    }

    /// A run whose config is the scenarios' one, changed by `change`.
    fn with(change: impl FnOnce(Config<PodView, ObjectKey>) -> Config<PodView, ObjectKey>) -> Self {
        let config = Config::kubernetes(
            WatchParams::namespaced("ns").labels("role=parent"),
            KeyMap::by_object(),
        )
        .owns::<PodView>(WatchParams::namespaced("ns").labels("role=child"), "Pod");
        let config = change(config);
        Run {
            core: ReconcileLoop::new(config, Instant::ZERO).unwrap(),
            now: Instant::ZERO,
            log: String::new(),
            lists: BTreeMap::new(),
            streams: BTreeMap::new(),
            running: BTreeMap::new(),
            dispatched: Vec::new(),
        }
    }

    fn timeout(&mut self) -> &mut Self {
        self.feed(Input::Timeout);
        self.step("timeout")
    }

    fn at(&mut self, secs: u64) -> &mut Self {
        self.now = Instant::from_duration(std::time::Duration::from_secs(secs));
        self
    }

    fn step(&mut self, input: &str) -> &mut Self {
        let mut line = StepLine::new(self.core.now(), input);
        let next = loop {
            let output = self.core.poll_output();
            match &output {
                Output::Command(Command::List { req, source, .. }) => {
                    self.lists.insert(*source, *req);
                }
                Output::Command(Command::Watch { stream, source, .. }) => {
                    self.streams.insert(*source, *stream);
                }
                Output::Command(Command::Reconcile {
                    ticket,
                    parent,
                    members,
                    related,
                    ..
                }) => {
                    let name = parent.name().to_owned();
                    assert!(
                        self.running.insert(name.clone(), *ticket).is_none(),
                        "{name} reconciled twice at once"
                    );
                    let names = |pods: &[std::sync::Arc<PodView>]| -> Vec<String> {
                        pods.iter()
                            .filter_map(|p| p.metadata.name.as_deref().map(str::to_owned))
                            .collect()
                    };
                    let kids = related[0].downcast::<PodView>().expect("children are pods");
                    self.dispatched
                        .push((name, names(&members.to_vec()), names(&kids)));
                }
                Output::Timeout(deadline) => break *deadline,
                _ => {}
            }
            line.push(&output);
        };
        writeln!(self.log, "{}", line.finish(next)).unwrap();
        self
    }

    fn feed(&mut self, input: Input<PodView>) {
        self.core.handle_input(self.now, input);
    }

    fn start(&mut self) -> &mut Self {
        self.feed(Input::Start);
        self.step("start")
    }

    fn list(&mut self, source: SourceId, rv: u64, items: &[String]) -> &mut Self {
        let req = self.lists[&source];
        let body = list_body(rv, items).into();
        self.feed(Input::List {
            req,
            response: ListResponse::Response { status: 200, body },
        });
        self.step(&format!(
            "list {req} ({source}) 200 rv={rv} items={}",
            items.len()
        ))
    }

    fn frame(&mut self, source: SourceId, kind: &str, object: &str, label: &str) -> &mut Self {
        let stream = self.streams[&source];
        self.feed(Input::WatchLine {
            stream,
            line: frame(kind, object).into(),
        });
        self.step(&format!("{stream} ({source}) {kind} {label}"))
    }

    /// Several frames of several sources read in one go, then one drain.
    fn burst(&mut self, frames: &[(SourceId, &str, String)], label: &str) -> &mut Self {
        for (source, kind, object) in frames {
            let stream = self.streams[source];
            self.feed(Input::WatchLine {
                stream,
                line: frame(kind, object).into(),
            });
        }
        self.step(label)
    }

    fn gone(&mut self, source: SourceId) -> &mut Self {
        let stream = self.streams[&source];
        let status = r#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Expired","code":410}}"#;
        self.feed(Input::WatchLine {
            stream,
            line: status.into(),
        });
        self.step(&format!("{stream} ({source}) ERROR 410"))
    }

    fn tick(&mut self) -> &mut Self {
        let deadline = self.core.poll_timeout().expect("a deadline").at;
        self.now = deadline;
        self.feed(Input::Timeout);
        self.step("timeout")
    }

    fn ok(&mut self, parent: &str) -> &mut Self {
        let ticket = self
            .running
            .remove(parent)
            .unwrap_or_else(|| panic!("{parent} is not running"));
        self.feed(Input::Reconciled {
            ticket,
            outcome: Outcome::Success,
        });
        self.step(&format!("reconciled {parent} {ticket} ok"))
    }

    fn last_dispatch_of(&self, parent: &str) -> (Vec<String>, Vec<String>) {
        let (_, members, kids) = self
            .dispatched
            .iter()
            .rev()
            .find(|(p, _, _)| p == parent)
            .unwrap_or_else(|| panic!("{parent} never dispatched"));
        (members.clone(), kids.clone())
    }
}

#[test]
fn no_reconcile_before_every_source_synced_and_each_sees_its_children() {
    let mut r = Run::new();
    r.start()
        .at(1)
        .list(PRIMARY, 10, &[parent("a", 5), parent("b", 6)]);
    assert!(
        r.dispatched.is_empty(),
        "the children's source has not synced"
    );
    r.at(2).list(
        children(),
        20,
        &[
            child("a-1", "a", 11),
            child("a-2", "a", 12),
            child("b-1", "b", 13),
        ],
    );
    assert_eq!(r.core.stats().lists, 2);
    assert_eq!(
        r.last_dispatch_of("a"),
        (vec!["a".into()], vec!["a-1".into(), "a-2".into()])
    );
    r.ok("a").ok("b");
    insta::assert_snapshot!(r.log);
}

#[test]
fn children_deleted_reowned_and_an_owner_deleted() {
    let mut r = Run::new();
    r.start()
        .list(PRIMARY, 10, &[parent("a", 5), parent("b", 6)])
        .list(
            children(),
            20,
            &[child("a-1", "a", 11), child("b-1", "b", 12)],
        )
        .ok("a")
        .ok("b");
    // A child deleted behind the controller's back wakes its owner, which sees it gone.
    r.at(1)
        .frame(children(), "DELETED", &child("a-1", "a", 21), "a-1")
        .ok("a");
    assert_eq!(r.last_dispatch_of("a"), (vec!["a".into()], vec![]));
    // A child re-owned wakes both owners.
    r.at(2)
        .frame(
            children(),
            "MODIFIED",
            &child("b-1", "a", 22),
            "b-1 now owned by a",
        )
        .ok("a")
        .ok("b");
    assert_eq!(r.last_dispatch_of("a").1, ["b-1"]);
    assert!(r.last_dispatch_of("b").1.is_empty());
    // The owner deleted: its reconcile runs with no object, its children still listed
    // until the garbage collector removes them.
    r.at(3)
        .frame(PRIMARY, "DELETED", &parent("a", 23), "a")
        .ok("a");
    assert_eq!(r.last_dispatch_of("a"), (vec![], vec!["b-1".into()]));
    insta::assert_snapshot!(r.log);
}

#[test]
fn wakes_from_both_sources_while_a_parent_runs_give_one_follow_up() {
    let mut r = Run::new();
    r.start()
        .list(PRIMARY, 10, &[parent("a", 5)])
        .list(children(), 20, &[child("a-1", "a", 11)]);
    assert!(r.running.contains_key("a"));
    r.at(1).burst(
        &[
            (PRIMARY, "MODIFIED", parent("a", 30)),
            (children(), "ADDED", child("a-2", "a", 31)),
            (children(), "MODIFIED", child("a-1", "a", 32)),
        ],
        "3 frames from 2 sources while a runs",
    );
    r.ok("a");
    let runs = r.dispatched.iter().filter(|(p, _, _)| p == "a").count();
    assert_eq!(runs, 2, "one follow-up for every wake while it ran");
    assert_eq!(r.last_dispatch_of("a").1, ["a-1", "a-2"]);
    insta::assert_snapshot!(r.log);
}

#[test]
fn a_410_on_one_source_relists_it_alone_and_wakes_only_what_changed() {
    let mut r = Run::new();
    r.start()
        .list(PRIMARY, 10, &[parent("a", 5), parent("b", 6)])
        .list(
            children(),
            20,
            &[child("a-1", "a", 11), child("b-1", "b", 12)],
        )
        .ok("a")
        .ok("b");
    let primary_stream = r.streams[&PRIMARY];
    r.at(1).gone(children());
    // The primary keeps streaming on its own cursor meanwhile.
    r.frame(PRIMARY, "MODIFIED", &parent("b", 40), "b").ok("b");
    assert_eq!(
        r.streams[&PRIMARY], primary_stream,
        "the primary's watch untouched"
    );
    r.tick();
    // The relist finds b-1 gone and a-1 unchanged: only b wakes.
    let before = r.dispatched.len();
    r.list(children(), 50, &[child("a-1", "a", 11)]);
    let woken: Vec<&str> = r.dispatched[before..]
        .iter()
        .map(|(p, _, _)| p.as_str())
        .collect();
    assert_eq!(woken, ["b"]);
    assert_eq!(r.core.cursor(), Some("40"), "the primary's cursor kept");
    r.ok("b");
    insta::assert_snapshot!(r.log);
}

#[test]
fn a_reconcile_all_trigger_queues_every_parent_once() {
    let mut r = Run::new();
    r.start()
        .list(PRIMARY, 10, &[parent("a", 5), parent("b", 6)])
        .list(children(), 20, &[child("a-1", "a", 11)])
        .ok("a")
        .ok("b");
    let before = r.dispatched.len();
    r.at(1);
    r.feed(Input::ReconcileAll);
    r.feed(Input::ReconcileAll);
    r.step("reconcile-all trigger, twice").ok("a").ok("b");
    let woken: Vec<&str> = r.dispatched[before..]
        .iter()
        .map(|(p, _, _)| p.as_str())
        .collect();
    assert_eq!(woken, ["a", "b"]);
    insta::assert_snapshot!(r.log);
}

#[test]
fn a_reconcile_on_trigger_queues_the_parent_of_one_object_only() {
    let mut r = Run::new();
    r.start()
        .list(PRIMARY, 10, &[parent("a", 5), parent("b", 6)])
        .list(children(), 20, &[child("a-1", "a", 11)])
        .ok("a")
        .ok("b");
    let before = r.dispatched.len();
    r.at(1);
    r.feed(Input::ReconcileOn {
        object: ObjectKey::new(Some("ns"), "b"),
    });
    r.feed(Input::ReconcileOn {
        object: ObjectKey::new(Some("ns"), "b"),
    });
    r.step("reconcile-on ns/b, twice").ok("b");
    // A key the primary cache lacks queues nothing (a child's included: it is no primary).
    r.at(2);
    r.feed(Input::ReconcileOn {
        object: ObjectKey::new(Some("ns"), "gone"),
    });
    r.feed(Input::ReconcileOn {
        object: ObjectKey::new(Some("ns"), "a-1"),
    });
    r.step("reconcile-on ns/gone and the child ns/a-1");
    let woken: Vec<&str> = r.dispatched[before..]
        .iter()
        .map(|(p, _, _)| p.as_str())
        .collect();
    assert_eq!(woken, ["b"]);
    insta::assert_snapshot!(r.log);
}

#[test]
fn a_predicate_on_the_children_keeps_their_status_writes_from_waking_the_owner() {
    let mut r = Run::with(|config| config.secondary_predicate(Predicate::<PodView>::LabelsChanged));
    r.start()
        .list(PRIMARY, 10, &[parent("a", 5), parent("b", 6)])
        .list(children(), 20, &[child_in("a-1", "a", 11, "x", "Pending")])
        .ok("a")
        .ok("b");
    let before = r.dispatched.len();
    // A phase change of a child is cached but wakes nothing.
    r.at(1).frame(
        children(),
        "MODIFIED",
        &child_in("a-1", "a", 21, "x", "Running"),
        "a-1 phase Running",
    );
    assert_eq!(
        r.dispatched.len(),
        before,
        "a filtered update wakes nothing"
    );
    // A label change wakes its owner, which sees the phase cached before it too.
    r.at(2).frame(
        children(),
        "MODIFIED",
        &child_in("a-1", "a", 22, "y", "Running"),
        "a-1 tier y",
    );
    assert_eq!(r.dispatched.len(), before + 1);
    r.ok("a");
    // A new owner always wakes both, whatever the predicate says.
    r.at(3).frame(
        children(),
        "MODIFIED",
        &child_in("a-1", "b", 23, "y", "Running"),
        "a-1 re-owned by b",
    );
    assert_eq!(r.last_dispatch_of("a"), (vec!["a".into()], vec![]));
    r.ok("a").ok("b");
    assert_eq!(
        r.last_dispatch_of("b"),
        (vec!["b".into()], vec!["a-1".into()])
    );
    insta::assert_snapshot!(r.log);
}

/// `object` with an annotation `note=big` added to its metadata.
fn annotated(object: &str) -> String {
    object.replacen(
        r#""metadata":{"#,
        r#""metadata":{"annotations":{"note":"big"},"#,
        1,
    )
}

fn drop_annotations(o: &mut PodView) {
    o.metadata.annotations = reconcile_core::StringMap::new();
}

#[test]
fn transforms_change_every_object_before_either_cache_holds_it() {
    let mut r = Run::with(|config| {
        config
            .secondary_transform(Transform::new(drop_annotations))
            .transform(Transform::new(drop_annotations))
    });
    r.start()
        .list(PRIMARY, 10, &[annotated(&parent("a", 5))])
        .list(children(), 20, &[annotated(&child("a-1", "a", 11))])
        .ok("a");
    r.at(1)
        .frame(PRIMARY, "ADDED", &annotated(&parent("b", 12)), "b added")
        .frame(
            children(),
            "ADDED",
            &annotated(&child("b-1", "b", 21)),
            "b-1 added",
        )
        .ok("b");
    let primary: Vec<_> = r
        .core
        .store()
        .iter()
        .map(|(_, o, _)| Arc::clone(o))
        .collect();
    let kids = r
        .core
        .secondary_objects(children())
        .expect("configured")
        .downcast::<PodView>()
        .expect("pods");
    assert_eq!((primary.len(), kids.len()), (2, 2));
    for pod in primary.iter().chain(&kids) {
        assert!(pod.metadata.annotations.is_empty(), "{pod:?}");
    }
    // Without the transforms the same objects keep their annotation: the check can fail.
    let mut plain = Run::new();
    plain
        .start()
        .list(PRIMARY, 10, &[annotated(&parent("a", 5))])
        .list(children(), 20, &[annotated(&child("a-1", "a", 11))]);
    let (_, held, _) = plain.core.store().iter().next().expect("cached");
    assert_eq!(held.metadata.annotations.get("note"), Some("big"));
}

#[test]
fn a_secondary_transform_over_the_wrong_type_or_without_a_secondary_is_a_config_error() {
    let params = || WatchParams::namespaced("ns");
    let without = Config::<PodView, ObjectKey>::kubernetes(params(), KeyMap::by_object())
        .secondary_transform(Transform::new(drop_annotations));
    assert_eq!(without.validate(), Err(ConfigError::NoSecondary));
    let wrong = Config::<PodView, ObjectKey>::kubernetes(params(), KeyMap::by_object())
        .owns::<PodView>(params(), "Pod")
        .secondary_transform(Transform::new(
            |_: &mut k8s_openapi::api::core::v1::ConfigMap| {},
        ));
    let error = wrong.validate().unwrap_err();
    assert!(
        matches!(error, ConfigError::TransformType { .. }),
        "{error}"
    );
    assert!(error.to_string().contains("ConfigMap"), "{error}");
}

#[test]
fn a_secondary_predicate_over_the_wrong_type_or_without_a_secondary_is_a_config_error() {
    let params = || WatchParams::namespaced("ns");
    let without = Config::<PodView, ObjectKey>::kubernetes(params(), KeyMap::by_object())
        .secondary_predicate(Predicate::<PodView>::LabelsChanged);
    assert_eq!(without.validate(), Err(ConfigError::NoSecondary));
    let wrong = Config::<PodView, ObjectKey>::kubernetes(params(), KeyMap::by_object())
        .owns::<PodView>(params(), "Pod")
        .secondary_predicate(Predicate::<k8s_openapi::api::core::v1::ConfigMap>::LabelsChanged);
    let error = wrong.validate().unwrap_err();
    assert!(
        matches!(error, ConfigError::PredicateType { .. }),
        "{error}"
    );
    assert!(error.to_string().contains("ConfigMap"), "{error}");
    assert!(ReconcileLoop::new(wrong, Instant::ZERO).is_err());
}

#[test]
fn a_debounced_parent_runs_once_its_changes_pause_for_the_period() {
    let mut r = Run::with(|config| config.debounce(Some(std::time::Duration::from_secs(5))));
    r.start()
        .list(PRIMARY, 10, &[parent("a", 5), parent("b", 6)])
        .list(children(), 20, &[]);
    // The first listing is held too: both run 5 s after it.
    assert!(r.dispatched.is_empty());
    r.at(5).timeout().ok("a").ok("b");
    assert_eq!(r.dispatched.len(), 2);
    // A burst on `a`, 2 s apart: each change pushes the run back; `b` changes once.
    r.at(10)
        .frame(PRIMARY, "MODIFIED", &parent("a", 30), "a modified")
        .at(11)
        .frame(PRIMARY, "MODIFIED", &parent("b", 31), "b modified")
        .at(12)
        .frame(PRIMARY, "MODIFIED", &parent("a", 32), "a modified")
        .at(14)
        .frame(PRIMARY, "MODIFIED", &parent("a", 33), "a modified");
    assert_eq!(r.dispatched.len(), 2, "nothing runs inside the window");
    r.at(16).timeout().ok("b");
    assert_eq!(r.dispatched.len(), 3);
    r.at(19).timeout().ok("a");
    let after: Vec<&str> = r.dispatched[2..]
        .iter()
        .map(|(p, _, _)| p.as_str())
        .collect();
    assert_eq!(
        after,
        ["b", "a"],
        "one run each, at the end of its own window"
    );
    insta::assert_snapshot!(r.log);
}
