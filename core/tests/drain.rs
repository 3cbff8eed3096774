//! A graceful stop (`Input::Drain`): sources close, nothing new starts, the running
//! reconciles finish and the loop then stops by itself; a stop while draining cancels the
//! rest. One line per step, pinned as snapshots.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use reconcile_core::pod::PodView;
use reconcile_core::{
    Command, Config, ElectionConfig, Input, Instant, KeyMap, LeaseRequest, LeaseResponse,
    Lifecycle, ObjectKey, Outcome, Output, ReconcileLoop, RequestId, SourceEvent, StepLine,
    StreamId, Ticket,
};

fn pod(name: &str) -> PodView {
    serde_json::from_str(&format!(
        r#"{{"metadata":{{"name":"{name}","namespace":"ns","resourceVersion":"1"}}}}"#
    ))
    .unwrap()
}

struct Run {
    core: ReconcileLoop<PodView, ObjectKey>,
    now: Instant,
    log: String,
    stream: Option<StreamId>,
    lease: Option<(RequestId, LeaseRequest)>,
    running: BTreeMap<String, Ticket>,
    cancelled: usize,
}

impl Run {
    fn new(config: Config<PodView, ObjectKey>) -> Self {
        Run {
            core: ReconcileLoop::new(config.concurrency(2), Instant::ZERO).unwrap(),
            now: Instant::ZERO,
            log: String::new(),
            stream: None,
            lease: None,
            running: BTreeMap::new(),
            cancelled: 0,
        }
    }

    fn step(&mut self, input: Input<PodView>, label: &str) -> &mut Self {
        self.core.handle_input(self.now, input);
        let mut line = StepLine::new(self.core.now(), label);
        let next = loop {
            let output = self.core.poll_output();
            match &output {
                Output::Command(Command::OpenSource { stream }) => self.stream = Some(*stream),
                Output::Command(Command::Lease { req, request, .. }) => {
                    self.lease = Some((*req, request.clone()));
                }
                Output::Command(Command::Reconcile { ticket, parent, .. }) => {
                    self.running.insert(parent.name().to_owned(), *ticket);
                }
                Output::Command(Command::CancelReconcile { ticket }) => {
                    self.cancelled += 1;
                    self.running.retain(|_, t| t != ticket);
                }
                Output::Timeout(deadline) => break *deadline,
                _ => {}
            }
            line.push(&output);
        };
        writeln!(self.log, "{}", line.finish(next)).unwrap();
        self
    }

    fn replace(&mut self, names: &[&str]) -> &mut Self {
        let stream = self.stream.unwrap();
        let event = SourceEvent::Replace(names.iter().map(|n| pod(n)).collect());
        self.step(Input::SourceEvent { stream, event }, "replace")
    }

    fn ok(&mut self, name: &str) -> &mut Self {
        let ticket = self.running.remove(name).unwrap();
        self.step(
            Input::Reconciled {
                ticket,
                outcome: Outcome::Success,
            },
            &format!("reconciled {name}"),
        )
    }

    fn lease_ok(&mut self, body: &str) -> &mut Self {
        let (req, _) = self.lease.take().unwrap();
        self.step(
            Input::Lease {
                req,
                response: LeaseResponse::Response {
                    status: 201,
                    body: body.to_owned().into(),
                },
            },
            "lease 201",
        )
    }
}

#[test]
fn draining_closes_the_sources_lets_running_reconciles_finish_then_stops() {
    let mut run = Run::new(Config::in_process(KeyMap::by_object()));
    run.step(Input::Start, "start").replace(&["p", "q", "r"]);
    assert_eq!(run.running.len(), 2);
    run.step(Input::Drain, "drain");
    assert_eq!(run.core.lifecycle(), Lifecycle::Draining);
    run.ok("p");
    assert!(
        !run.running.contains_key("r"),
        "nothing new starts while draining"
    );
    run.ok("q");
    assert_eq!(run.core.lifecycle(), Lifecycle::Stopped);
    assert_eq!(run.cancelled, 0);
    insta::assert_snapshot!(run.log);
}

#[test]
fn a_stop_while_draining_cancels_what_still_runs() {
    let mut run = Run::new(Config::in_process(KeyMap::by_object()));
    run.step(Input::Start, "start").replace(&["p", "q"]);
    run.step(Input::Drain, "drain").ok("p");
    run.step(Input::Stop, "stop");
    assert_eq!(run.cancelled, 1);
    assert_eq!(run.core.lifecycle(), Lifecycle::Stopped);
}

#[test]
fn an_idle_loop_drains_at_once() {
    let mut run = Run::new(Config::in_process(KeyMap::by_object()));
    run.step(Input::Start, "start");
    run.step(Input::Drain, "drain");
    assert_eq!(run.core.lifecycle(), Lifecycle::Stopped);
    assert!(run.log.contains("close-source"), "{}", run.log);
}

#[test]
fn a_draining_leader_keeps_its_term_and_releases_the_lease_when_done() {
    let config = Config::in_process(KeyMap::by_object())
        .leader_election(ElectionConfig::new("ns", "ctl", "a"));
    let mut run = Run::new(config);
    run.step(Input::Start, "start").replace(&["p"]);
    let (req, _) = run.lease.take().unwrap();
    run.step(
        Input::Lease {
            req,
            response: LeaseResponse::Response {
                status: 404,
                body: "{}".into(),
            },
        },
        "lease 404",
    );
    run.lease_ok(r#"{"metadata":{"resourceVersion":"1"},"spec":{"holderIdentity":"a","leaseDurationSeconds":15,"leaseTransitions":0}}"#);
    assert_eq!(run.running.len(), 1);
    run.step(Input::Drain, "drain");
    // The renewal still goes out while p runs.
    run.now = Instant::from_duration(Duration::from_secs(2));
    run.step(Input::Timeout, "timeout");
    assert!(
        matches!(run.lease, Some((_, LeaseRequest::Update { .. }))),
        "{}",
        run.log
    );
    run.lease_ok(r#"{"metadata":{"resourceVersion":"2"},"spec":{"holderIdentity":"a","leaseDurationSeconds":15,"leaseTransitions":0}}"#);
    run.ok("p");
    assert_eq!(run.core.lifecycle(), Lifecycle::Stopped);
    assert!(
        matches!(&run.lease, Some((_, LeaseRequest::Update { spec, .. })) if spec.holder.is_empty()),
        "released: {}",
        run.log
    );
    insta::assert_snapshot!(run.log);
}
