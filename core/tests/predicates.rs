//! Predicates: an update a predicate rejects is cached but wakes nothing; new objects,
//! deletions and parent moves always wake. One line per step, pinned as a snapshot.

use std::fmt::Write as _;

use k8s_openapi::api::apps::v1::Deployment;
use reconcile_core::pod::PodView;
use reconcile_core::{
    Command, Config, Input, Instant, KeyMap, Object, ObjectKey, Outcome, Output, Predicate,
    ReconcileLoop, SourceEvent, StepLine, StreamId, Ticket,
};

fn deployment(name: &str, rv: u64, generation: i64, replicas: i32) -> Deployment {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": "ns", "resourceVersion": rv.to_string(),
                     "generation": generation, "labels": {"app": name}},
        "spec": {"selector": {}, "template": {}},
        "status": {"replicas": replicas},
    }))
    .unwrap()
}

struct Run<O: Object> {
    core: ReconcileLoop<O, ObjectKey>,
    log: String,
    stream: Option<StreamId>,
    running: Vec<Ticket>,
    reconciles: usize,
}

impl<O: Object + Send + Sync> Run<O> {
    fn new(predicate: Predicate<O>) -> Self {
        let config = Config::in_process(KeyMap::by_object()).predicate(predicate);
        Run {
            core: ReconcileLoop::new(config, Instant::ZERO).unwrap(),
            log: String::new(),
            stream: None,
            running: Vec::new(),
            reconciles: 0,
        }
    }

    fn step(&mut self, input: Input<O>, label: &str) -> &mut Self {
        self.core.handle_input(Instant::ZERO, input);
        let mut line = StepLine::new(Instant::ZERO, label);
        let next = loop {
            let output = self.core.poll_output();
            match &output {
                Output::Command(Command::OpenSource { stream }) => self.stream = Some(*stream),
                Output::Command(Command::Reconcile { ticket, .. }) => {
                    self.running.push(*ticket);
                    self.reconciles += 1;
                }
                Output::Timeout(deadline) => break *deadline,
                _ => {}
            }
            line.push(&output);
        };
        writeln!(self.log, "{}", line.finish(next)).unwrap();
        // Every reconcile finishes at once, so the next change can wake it again.
        for ticket in std::mem::take(&mut self.running) {
            self.core.handle_input(
                Instant::ZERO,
                Input::Reconciled {
                    ticket,
                    outcome: Outcome::Success,
                },
            );
            while !matches!(self.core.poll_output(), Output::Timeout(_)) {}
        }
        self
    }

    fn event(&mut self, event: SourceEvent<O>, label: &str) -> &mut Self {
        let stream = self.stream.unwrap();
        self.step(Input::SourceEvent { stream, event }, label)
    }
}

#[test]
fn the_generation_predicate_lets_spec_edits_through_and_keeps_status_writes_out() {
    let mut run = Run::new(Predicate::GenerationChanged);
    run.step(Input::Start, "start");
    run.event(
        SourceEvent::Replace(vec![deployment("d", 1, 1, 0)]),
        "replace d gen=1",
    );
    assert_eq!(run.reconciles, 1);
    run.event(
        SourceEvent::Upsert(deployment("d", 2, 1, 3)),
        "upsert d rv=2 gen=1 (status)",
    );
    assert_eq!(run.reconciles, 1, "a status write wakes nothing");
    let cached = run.core.store().iter().next().unwrap().1.clone();
    assert_eq!(
        cached.status.as_ref().and_then(|s| s.replicas),
        Some(3),
        "but the cache holds it"
    );
    run.event(
        SourceEvent::Upsert(deployment("d", 3, 2, 3)),
        "upsert d rv=3 gen=2 (spec)",
    );
    assert_eq!(run.reconciles, 2);
    run.event(
        SourceEvent::Upsert(deployment("e", 4, 1, 0)),
        "upsert e (new)",
    );
    run.event(SourceEvent::Delete(deployment("e", 5, 1, 0)), "delete e");
    assert_eq!(run.reconciles, 4, "new objects and deletions always wake");
    insta::assert_snapshot!(run.log);
}

fn pod(name: &str, rv: u64, label: &str, annotation: &str, phase: &str) -> PodView {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": "ns", "resourceVersion": rv.to_string(),
                     "labels": {"tier": label}, "annotations": {"note": annotation}},
        "status": {"phase": phase},
    }))
    .unwrap()
}

#[test]
fn labels_or_annotations_and_a_custom_function() {
    let mut run = Run::new(Predicate::Any(vec![
        Predicate::LabelsChanged,
        Predicate::AnnotationsChanged,
    ]));
    run.step(Input::Start, "start");
    run.event(
        SourceEvent::Replace(vec![pod("p", 1, "a", "x", "Pending")]),
        "replace",
    );
    run.event(
        SourceEvent::Upsert(pod("p", 2, "a", "x", "Running")),
        "phase only",
    );
    assert_eq!(run.reconciles, 1);
    run.event(
        SourceEvent::Upsert(pod("p", 3, "b", "x", "Running")),
        "label",
    );
    run.event(
        SourceEvent::Upsert(pod("p", 4, "b", "y", "Running")),
        "annotation",
    );
    assert_eq!(run.reconciles, 3);
    insta::assert_snapshot!(run.log);

    let mut run = Run::new(Predicate::custom(|old: &PodView, new: &PodView| {
        old.status.phase != new.status.phase
    }));
    run.step(Input::Start, "start");
    run.event(
        SourceEvent::Replace(vec![pod("p", 1, "a", "x", "Pending")]),
        "replace",
    );
    run.event(
        SourceEvent::Upsert(pod("p", 2, "b", "x", "Pending")),
        "label only",
    );
    assert_eq!(run.reconciles, 1);
    run.event(
        SourceEvent::Upsert(pod("p", 3, "b", "x", "Running")),
        "phase",
    );
    assert_eq!(run.reconciles, 2);
}
