//! Leader election, one candidate at a time, the Lease answered by hand: each scenario
//! renders one line per step and is pinned as a snapshot. The source is in-process, so the
//! lines show the election and the reconciles alone.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use reconcile_core::pod::PodView;
use reconcile_core::{
    Command, Config, ConfigError, ElectionConfig, Input, Instant, KeyMap, LeaseRequest,
    LeaseResponse, ObjectKey, OnLost, Outcome, Output, ReconcileLoop, RequestId, SourceEvent,
    StepLine, StreamId, Ticket,
};

fn pod(name: &str, rv: u64) -> PodView {
    serde_json::from_str(&format!(
        r#"{{"metadata":{{"name":"{name}","namespace":"ns","resourceVersion":"{rv}"}}}}"#
    ))
    .unwrap()
}

/// A Lease as the apiserver returns it.
fn lease(rv: u64, holder: &str, transitions: u32) -> String {
    let holder = if holder.is_empty() {
        "null".to_owned()
    } else {
        format!("\"{holder}\"")
    };
    format!(
        r#"{{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{{"name":"ctl","namespace":"ns","resourceVersion":"{rv}"}},"spec":{{"holderIdentity":{holder},"leaseDurationSeconds":15,"acquireTime":"2026-12-01T00:00:00.000000Z","renewTime":"2026-12-01T00:00:00.000000Z","leaseTransitions":{transitions}}}}}"#
    )
}

struct Run {
    core: ReconcileLoop<PodView, ObjectKey>,
    now: Instant,
    log: String,
    stream: Option<StreamId>,
    lease: Option<(RequestId, LeaseRequest)>,
    running: BTreeMap<String, Ticket>,
    dispatches: Vec<(Instant, String)>,
    cancelled: Vec<Ticket>,
}

impl Run {
    fn new(on_lost: OnLost) -> Self {
        let mut election = ElectionConfig::new("ns", "ctl", "a");
        election.on_lost = on_lost;
        let config = Config::in_process(KeyMap::by_object()).leader_election(election);
        Run {
            core: ReconcileLoop::new(config, Instant::ZERO).unwrap(),
            now: Instant::ZERO,
            log: String::new(),
            stream: None,
            lease: None,
            running: BTreeMap::new(),
            dispatches: Vec::new(),
            cancelled: Vec::new(),
        }
    }

    fn at(&mut self, secs: u64) -> &mut Self {
        self.now = Instant::from_duration(Duration::from_secs(secs));
        self
    }

    fn step(&mut self, input: &str) -> &mut Self {
        let mut line = StepLine::new(self.core.now(), input);
        let next = loop {
            let output = self.core.poll_output();
            match &output {
                Output::Command(Command::OpenSource { stream }) => self.stream = Some(*stream),
                Output::Command(Command::Lease { req, request, .. }) => {
                    self.lease = Some((*req, request.clone()));
                }
                Output::Command(Command::Reconcile { ticket, parent, .. }) => {
                    self.running.insert(parent.name().to_owned(), *ticket);
                    self.dispatches
                        .push((self.core.now(), parent.name().to_owned()));
                }
                Output::Command(Command::CancelReconcile { ticket }) => {
                    self.cancelled.push(*ticket);
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

    fn feed(&mut self, input: Input<PodView>) {
        self.core.handle_input(self.now, input);
    }

    fn start(&mut self) -> &mut Self {
        self.feed(Input::Start);
        self.step("start")
    }

    fn objects(&mut self, pods: &[&str]) -> &mut Self {
        let stream = self.stream.expect("source open");
        let event = SourceEvent::Replace(pods.iter().map(|p| pod(p, 1)).collect());
        self.feed(Input::SourceEvent { stream, event });
        self.step(&format!("replace {}", pods.join(",")))
    }

    fn upsert(&mut self, name: &str, rv: u64) -> &mut Self {
        let stream = self.stream.expect("source open");
        let event = SourceEvent::Upsert(pod(name, rv));
        self.feed(Input::SourceEvent { stream, event });
        self.step(&format!("upsert {name} rv={rv}"))
    }

    /// Answers the pending Lease request.
    fn answer(&mut self, status: u16, body: &str) -> &mut Self {
        let Some((req, _)) = self.lease.take() else {
            panic!("no lease request is pending:\n{}", self.log)
        };
        self.feed(Input::Lease {
            req,
            response: LeaseResponse::Response {
                status,
                body: body.to_owned().into(),
            },
        });
        self.step(&format!("lease {req} {status}"))
    }

    fn unreachable(&mut self) -> &mut Self {
        let (req, _) = self.lease.take().expect("a lease request is pending");
        self.feed(Input::Lease {
            req,
            response: LeaseResponse::TransportError("connection refused".into()),
        });
        self.step(&format!("lease {req} connection refused"))
    }

    fn pending(&self) -> &LeaseRequest {
        &self.lease.as_ref().expect("a lease request is pending").1
    }

    fn tick(&mut self) -> &mut Self {
        let deadline = self.core.poll_timeout().expect("a deadline").at;
        self.now = deadline;
        self.feed(Input::Timeout);
        self.step("timeout")
    }

    fn ok(&mut self, parent: &str) -> &mut Self {
        let ticket = self.running.remove(parent).expect("running");
        self.feed(Input::Reconciled {
            ticket,
            outcome: Outcome::Success,
        });
        self.step(&format!("reconciled {parent} {ticket} ok"))
    }

    fn stop(&mut self) -> &mut Self {
        self.feed(Input::Stop);
        self.step("stop")
    }
}

#[test]
fn a_candidate_creates_the_lease_leads_renews_and_steps_down_at_its_renew_deadline() {
    let mut run = Run::new(OnLost::Cancel);
    run.start().objects(&["p"]);
    assert!(run.dispatches.is_empty(), "no reconcile before leading");
    assert_eq!(run.pending(), &LeaseRequest::Get);
    run.answer(404, "{}");
    assert!(matches!(run.pending(), LeaseRequest::Create(spec) if spec.holder == "a"));
    run.answer(201, &lease(1, "a", 0));
    assert_eq!(run.dispatches.len(), 1, "leading: the queued parent runs");
    run.ok("p");
    // Renewals go straight to an update of the version it wrote.
    run.tick();
    assert!(
        matches!(run.pending(), LeaseRequest::Update { resource_version, spec } if resource_version == "1" && spec.transitions == 0)
    );
    run.answer(200, &lease(2, "a", 0));
    // From here every renewal fails; the last good one was sent at +2 s, so the term ends
    // at +12 s, while another candidate can take over no sooner than +17 s.
    run.tick()
        .unreachable()
        .tick()
        .answer(500, "{}")
        .tick()
        .unreachable();
    run.tick().unreachable().tick();
    assert_eq!(run.now, Instant::from_duration(Duration::from_secs(12)));
    let leadership = run.core.leadership().unwrap();
    assert!(!leadership.leading);
    run.at(13).upsert("p", 2);
    assert_eq!(run.dispatches.len(), 1, "no reconcile after the term ended");
    insta::assert_snapshot!(run.log);
}

#[test]
fn a_standby_waits_out_the_lease_from_when_it_saw_it_change_and_takes_over() {
    let mut run = Run::new(OnLost::Cancel);
    run.start().objects(&["p"]);
    // Held by b, first seen at 0.
    run.answer(200, &lease(5, "b", 3));
    assert_eq!(run.core.leadership().unwrap().holder.as_deref(), Some("b"));
    // b renews at +4 (a new version): the clock starts again from there.
    run.tick().answer(200, &lease(5, "b", 3));
    run.tick().answer(200, &lease(6, "b", 3));
    // b is silent from now on: expired at 4 + 15 = 19 s by a's own clock.
    for _ in 0..7 {
        run.tick();
        assert_eq!(run.pending(), &LeaseRequest::Get, "{}", run.log);
        run.answer(200, &lease(6, "b", 3));
    }
    assert_eq!(run.now, Instant::from_duration(Duration::from_secs(18)));
    run.tick().answer(200, &lease(6, "b", 3));
    assert!(
        matches!(run.pending(), LeaseRequest::Update { resource_version, spec } if resource_version == "6" && spec.holder == "a" && spec.transitions == 4 && spec.acquire_time.is_none()),
        "{:?}",
        run.pending()
    );
    run.answer(200, &lease(7, "a", 4));
    assert_eq!(run.dispatches.len(), 1);
    insta::assert_snapshot!(run.log);
}

#[test]
fn a_conflict_sends_the_next_try_back_to_a_read() {
    let mut run = Run::new(OnLost::Cancel);
    run.start().objects(&["p"]);
    run.answer(200, &lease(1, "", 0));
    // Free: take it; someone else wrote first.
    assert!(matches!(run.pending(), LeaseRequest::Update { .. }));
    run.answer(409, r#"{"kind":"Status","code":409,"reason":"Conflict"}"#);
    run.tick();
    assert_eq!(run.pending(), &LeaseRequest::Get);
    run.answer(200, &lease(2, "c", 1));
    run.tick();
    assert_eq!(
        run.pending(),
        &LeaseRequest::Get,
        "held by c: still reading"
    );
    assert!(run.dispatches.is_empty());
    insta::assert_snapshot!(run.log);
}

#[test]
fn losing_the_term_cancels_running_reconciles_and_they_run_again_in_the_next() {
    let mut run = Run::new(OnLost::Cancel);
    run.start()
        .objects(&["p"])
        .answer(404, "{}")
        .answer(201, &lease(1, "a", 0));
    assert_eq!(run.running.len(), 1);
    // Every renewal fails: at +10 s the term ends and the running reconcile is abandoned.
    for _ in 0..4 {
        run.tick().unreachable();
    }
    run.tick();
    assert_eq!(run.cancelled.len(), 1, "{}", run.log);
    assert!(run.running.is_empty());
    // The next term runs it again.
    run.tick().answer(200, &lease(1, "a", 0));
    assert!(matches!(run.pending(), LeaseRequest::Update { .. }));
    run.answer(200, &lease(2, "a", 0));
    assert_eq!(run.dispatches.len(), 2, "{}", run.log);
    insta::assert_snapshot!(run.log);
}

#[test]
fn draining_lets_running_reconciles_finish_but_starts_none() {
    let mut run = Run::new(OnLost::Drain);
    run.start()
        .objects(&["p", "q"])
        .answer(404, "{}")
        .answer(201, &lease(1, "a", 0));
    assert_eq!(run.dispatches.len(), 1, "one at a time");
    for _ in 0..4 {
        run.tick().unreachable();
    }
    run.tick();
    assert!(run.cancelled.is_empty());
    run.ok("p");
    assert_eq!(run.dispatches.len(), 1, "q waits for the next term");
}

#[test]
fn a_leader_releases_the_lease_on_stop() {
    let mut run = Run::new(OnLost::Cancel);
    run.start()
        .objects(&["p"])
        .answer(404, "{}")
        .answer(201, &lease(1, "a", 2));
    run.stop();
    assert!(
        matches!(run.pending(), LeaseRequest::Update { resource_version, spec } if resource_version == "1" && spec.holder.is_empty() && spec.lease_duration_seconds == 1 && spec.transitions == 2),
        "{:?}",
        run.pending()
    );
    insta::assert_snapshot!(run.log);
}

#[test]
fn settings_are_checked_as_client_go_checks_them() {
    let bad = |f: fn(&mut ElectionConfig)| {
        let mut e = ElectionConfig::new("ns", "ctl", "a");
        f(&mut e);
        ReconcileLoop::<PodView, ObjectKey>::new(
            Config::in_process(KeyMap::by_object()).leader_election(e),
            Instant::ZERO,
        )
        .unwrap_err()
    };
    assert!(matches!(
        bad(|e| e.renew_deadline = Duration::from_secs(15)),
        ConfigError::Election(_)
    ));
    assert!(matches!(
        bad(|e| e.retry_period = Duration::from_secs(9)),
        ConfigError::Election(_)
    ));
    assert!(matches!(
        bad(|e| e.identity.clear()),
        ConfigError::Election(_)
    ));
    let e = ElectionConfig::new("ns", "ctl", "a");
    assert!((e.drift_bound() - 0.2).abs() < 1e-9);
}

#[test]
fn a_lease_body_that_is_not_a_lease_fails_the_try_and_nothing_panics() {
    let mut run = Run::new(OnLost::Cancel);
    run.start().objects(&["p"]);
    for body in [
        "",
        "[]",
        "{\"metadata\":{}}",
        "{\"spec\":{\"leaseTransitions\":-1}}",
    ] {
        run.answer(200, body);
        let failed = run.log.lines().last().unwrap().contains("failed");
        assert!(failed, "{body}: {}", run.log);
        run.tick();
    }
    assert!(run.dispatches.is_empty());
}
