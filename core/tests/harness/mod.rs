//! A tiny scripted driver for the core: feeds inputs, drains outputs, and renders one line per
//! step (`time  input  ->  outputs  | next deadline`) for snapshot tests.

#![allow(dead_code, missing_docs)]

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use reconcile_core::pod::PodView;
use reconcile_core::{
    Command, Config, Input, Instant, KeyMap, KeyMapError, ListResponse, Outcome, Output, OwnWrite,
    ReconcileLoop, RequestId, SourceEvent, SourceId, StepLine, StreamEnd, StreamId, Ticket,
    WatchParams,
};

pub fn by_cell(pod: &PodView) -> Result<String, KeyMapError> {
    KeyMap::by_label("cell").parent_of(pod)
}

pub fn kube_config() -> Config<PodView, String> {
    Config::kubernetes(
        WatchParams::namespaced("ns").labels("app=cell"),
        KeyMap::by_label("cell"),
    )
}

/// A pod object as JSON, with an optional cell label.
pub fn pod(name: &str, cell: Option<&str>, rv: u64) -> String {
    let labels = match cell {
        Some(c) => format!(r#"{{"app":"cell","cell":"{c}"}}"#),
        None => r#"{"app":"cell"}"#.to_owned(),
    };
    format!(
        r#"{{"metadata":{{"name":"{name}","namespace":"ns","uid":"uid-{name}","resourceVersion":"{rv}","labels":{labels}}},"status":{{"phase":"Running"}}}}"#
    )
}

pub fn frame(kind: &str, object: &str) -> String {
    format!(r#"{{"type":"{kind}","object":{object}}}"#)
}

pub fn list_body(rv: u64, items: &[String]) -> String {
    format!(
        r#"{{"kind":"PodList","apiVersion":"v1","metadata":{{"resourceVersion":"{rv}"}},"items":[{}]}}"#,
        items.join(",")
    )
}

/// One page of a paged LIST: `continue` is set when another page follows.
pub fn page_body(rv: u64, items: &[String], continue_token: Option<&str>) -> String {
    let cont = continue_token.map_or(String::new(), |c| format!(r#","continue":"{c}""#));
    format!(
        r#"{{"kind":"PodList","apiVersion":"v1","metadata":{{"resourceVersion":"{rv}"{cont}}},"items":[{}]}}"#,
        items.join(",")
    )
}

pub struct Scenario {
    pub core: ReconcileLoop<PodView, String>,
    pub now: Instant,
    pub log: String,
    pub list: Option<RequestId>,
    pub stream: Option<StreamId>,
    pub source: Option<StreamId>,
    /// Running reconciles by parent.
    pub running: BTreeMap<String, Ticket>,
    pub steps: usize,
}

impl Scenario {
    pub fn new(config: Config<PodView, String>) -> Self {
        Scenario {
            core: ReconcileLoop::new(config, Instant::ZERO).unwrap(),
            now: Instant::ZERO,
            log: String::new(),
            list: None,
            stream: None,
            source: None,
            running: BTreeMap::new(),
            steps: 0,
        }
    }

    pub fn at(&mut self, secs: f64) -> &mut Self {
        self.now = Instant::from_duration(Duration::from_secs_f64(secs));
        self
    }

    /// Feeds `input` without draining: a burst of inputs read in one go.
    pub fn feed(&mut self, input: Input<PodView>) -> &mut Self {
        self.core.handle_input(self.now, input);
        self
    }

    fn step(&mut self, input: &str) {
        self.steps += 1;
        assert!(self.steps < 10_000, "livelock: scenario ran too many steps");
        let mut line = StepLine::new(self.core.now(), input);
        let next = loop {
            let output = self.core.poll_output();
            match &output {
                Output::Command(c) => match c {
                    Command::List { req, .. } => self.list = Some(*req),
                    Command::Watch { stream, .. } => self.stream = Some(*stream),
                    Command::OpenSource { stream } => self.source = Some(*stream),
                    Command::Reconcile { ticket, parent, .. } => {
                        assert!(
                            self.running.insert(parent.clone(), *ticket).is_none(),
                            "{parent} reconciled twice at once"
                        );
                    }
                    _ => {}
                },
                Output::Event(_) => {}
                Output::Timeout(deadline) => break *deadline,
            }
            line.push(&output);
        };
        writeln!(self.log, "{}", line.finish(next)).unwrap();
    }

    pub fn start(&mut self) -> &mut Self {
        self.core.handle_input(self.now, Input::Start);
        self.step("start");
        self
    }

    pub fn stop(&mut self) -> &mut Self {
        self.core.handle_input(self.now, Input::Stop);
        self.step("stop");
        self
    }

    pub fn list_ok(&mut self, rv: u64, items: &[String]) -> &mut Self {
        let body = list_body(rv, items);
        let req = self.list.expect("no LIST issued");
        self.core.handle_input(
            self.now,
            Input::List {
                req,
                response: ListResponse::Response {
                    status: 200,
                    body: body.to_owned().into(),
                },
            },
        );
        self.step(&format!("list {req} 200 rv={rv} items={}", items.len()));
        self
    }

    /// Answers the LIST in flight with one page; `continue_token` is set when more follow.
    pub fn list_page(
        &mut self,
        rv: u64,
        items: &[String],
        continue_token: Option<&str>,
    ) -> &mut Self {
        let body = page_body(rv, items, continue_token);
        let req = self.list.expect("no LIST issued");
        self.core.handle_input(
            self.now,
            Input::List {
                req,
                response: ListResponse::Response {
                    status: 200,
                    body: body.into(),
                },
            },
        );
        let cont = continue_token.map_or(String::new(), |c| format!(" continue={c}"));
        self.step(&format!(
            "list {req} 200 rv={rv} items={}{cont}",
            items.len()
        ));
        self
    }

    pub fn list_status(&mut self, status: u16, body: &str) -> &mut Self {
        let req = self.list.expect("no LIST issued");
        self.core.handle_input(
            self.now,
            Input::List {
                req,
                response: ListResponse::Response {
                    status,
                    body: body.to_owned().into(),
                },
            },
        );
        self.step(&format!("list {req} HTTP {status}"));
        self
    }

    pub fn list_transport_error(&mut self) -> &mut Self {
        let req = self.list.expect("no LIST issued");
        let response = ListResponse::TransportError("connection refused".into());
        self.core
            .handle_input(self.now, Input::List { req, response });
        self.step(&format!("list {req} transport error"));
        self
    }

    pub fn line(&mut self, line: &str, label: &str) -> &mut Self {
        let stream = self.stream.expect("no WATCH issued");
        let line = line.to_owned().into();
        self.core
            .handle_input(self.now, Input::WatchLine { stream, line });
        self.step(&format!("{stream} {label}"));
        self
    }

    /// Feeds several watch lines read in one go, then drains once.
    pub fn burst(&mut self, lines: &[String], label: &str) -> &mut Self {
        let stream = self.stream.expect("no WATCH issued");
        for line in lines {
            let line = line.clone().into();
            self.core
                .handle_input(self.now, Input::WatchLine { stream, line });
        }
        self.step(&format!("{stream} {label}"));
        self
    }

    pub fn added(&mut self, name: &str, cell: Option<&str>, rv: u64) -> &mut Self {
        let l = frame("ADDED", &pod(name, cell, rv));
        self.line(
            &l,
            &format!("ADDED {name} cell={} rv={rv}", cell.unwrap_or("-")),
        )
    }

    pub fn modified(&mut self, name: &str, cell: Option<&str>, rv: u64) -> &mut Self {
        let l = frame("MODIFIED", &pod(name, cell, rv));
        self.line(
            &l,
            &format!("MODIFIED {name} cell={} rv={rv}", cell.unwrap_or("-")),
        )
    }

    pub fn deleted(&mut self, name: &str, cell: Option<&str>, rv: u64) -> &mut Self {
        let l = frame("DELETED", &pod(name, cell, rv));
        self.line(&l, &format!("DELETED {name} rv={rv}"))
    }

    pub fn bookmark(&mut self, rv: u64) -> &mut Self {
        let l = format!(
            r#"{{"type":"BOOKMARK","object":{{"kind":"Pod","apiVersion":"v1","metadata":{{"resourceVersion":"{rv}"}},"spec":{{"containers":null}},"status":{{}}}}}}"#
        );
        self.line(&l, &format!("BOOKMARK rv={rv}"))
    }

    /// The bookmark that ends a streaming list's initial events.
    pub fn initial_events_end(&mut self, rv: u64) -> &mut Self {
        let l = format!(
            r#"{{"type":"BOOKMARK","object":{{"kind":"Pod","apiVersion":"v1","metadata":{{"resourceVersion":"{rv}","annotations":{{"k8s.io/initial-events-end":"true"}}}},"spec":{{"containers":null}},"status":{{}}}}}}"#
        );
        self.line(&l, &format!("BOOKMARK rv={rv} initial-events-end"))
    }

    /// The WATCH in flight is answered with a non-200 status and `body`.
    pub fn watch_status(&mut self, code: u16, body: &str) -> &mut Self {
        self.watch_end(StreamEnd::HttpStatus {
            code,
            body: body.as_bytes().to_vec(),
        })
    }

    pub fn error_frame(&mut self, code: u16, reason: &str) -> &mut Self {
        let l = format!(
            r#"{{"type":"ERROR","object":{{"kind":"Status","apiVersion":"v1","metadata":{{}},"status":"Failure","message":"watch failed","reason":"{reason}","code":{code}}}}}"#
        );
        self.line(&l, &format!("ERROR {code} {reason}"))
    }

    pub fn watch_end(&mut self, end: StreamEnd) -> &mut Self {
        let stream = self.stream.expect("no WATCH issued");
        let label = match &end {
            StreamEnd::Clean => "end clean".to_owned(),
            StreamEnd::TransportError(e) => format!("end transport error ({e})"),
            StreamEnd::HttpStatus { code, .. } => format!("end HTTP {code}"),
        };
        self.core
            .handle_input(self.now, Input::WatchEnd { stream, end });
        self.step(&format!("{stream} {label}"));
        self
    }

    pub fn done(&mut self, parent: &str, outcome: Outcome) -> &mut Self {
        let ticket = self
            .running
            .remove(parent)
            .unwrap_or_else(|| panic!("{parent} is not running"));
        let label = match &outcome {
            Outcome::Success => "ok".to_owned(),
            Outcome::RequeueAfter(d) => format!("ok requeue-after={}s", d.as_secs_f64()),
            Outcome::Error(e) => format!("error ({e})"),
            Outcome::ErrorHandled {
                error,
                requeue_after: Some(d),
            } => format!("error ({error}) policy requeue-after={}s", d.as_secs_f64()),
            Outcome::ErrorHandled {
                error,
                requeue_after: None,
            } => format!("error ({error}) policy await-change"),
        };
        self.core
            .handle_input(self.now, Input::Reconciled { ticket, outcome });
        self.step(&format!("reconciled {parent} {ticket} {label}"));
        self
    }

    /// Completes `parent`'s run with success, reporting writes `(source, resourceVersion)`.
    pub fn ok_wrote(&mut self, parent: &str, writes: &[(u64, &str)]) -> &mut Self {
        let ticket = self
            .running
            .remove(parent)
            .unwrap_or_else(|| panic!("{parent} is not running"));
        let writes: Vec<OwnWrite> = writes
            .iter()
            .map(|(s, rv)| OwnWrite::new(SourceId::nth(*s), *rv))
            .collect();
        let label = writes
            .iter()
            .map(|w| format!("{}@{}", w.source, w.resource_version))
            .collect::<Vec<_>>()
            .join(",");
        self.core.handle_input(
            self.now,
            Input::ReconciledWrote {
                ticket,
                outcome: Outcome::Success,
                writes,
            },
        );
        self.step(&format!("reconciled {parent} {ticket} ok wrote=[{label}]"));
        self
    }

    /// Sets the running `parent`'s own deadline.
    pub fn run_timeout(&mut self, parent: &str, timeout: Option<Duration>) -> &mut Self {
        let ticket = *self
            .running
            .get(parent)
            .unwrap_or_else(|| panic!("{parent} is not running"));
        self.core
            .handle_input(self.now, Input::ReconcileTimeout { ticket, timeout });
        let label = timeout.map_or("none".to_owned(), |t| format!("{}s", t.as_secs_f64()));
        self.step(&format!("reconcile-timeout {parent} {ticket} {label}"));
        self
    }

    /// Forgets `parent`'s run, as a driver does on `CancelReconcile`.
    pub fn cancelled(&mut self, parent: &str) -> Ticket {
        self.running
            .remove(parent)
            .unwrap_or_else(|| panic!("{parent} is not running"))
    }

    /// Feeds a late outcome for a run the core cancelled.
    pub fn late_outcome(&mut self, ticket: Ticket) -> &mut Self {
        self.core.handle_input(
            self.now,
            Input::Reconciled {
                ticket,
                outcome: Outcome::Success,
            },
        );
        self.step(&format!("reconciled {ticket} ok (late)"));
        self
    }

    pub fn ok(&mut self, parent: &str) -> &mut Self {
        self.done(parent, Outcome::Success)
    }

    pub fn all_ok(&mut self) -> &mut Self {
        let parents: Vec<String> = self.running.keys().cloned().collect();
        for p in parents {
            self.ok(&p);
        }
        self
    }

    /// Completes running reconciles with success until none runs.
    pub fn settle(&mut self) -> &mut Self {
        for _ in 0..1000 {
            if self.running.is_empty() {
                return self;
            }
            self.all_ok();
        }
        panic!("reconciles never settled");
    }

    pub fn source_end(&mut self, error: Option<&str>) -> &mut Self {
        let stream = self.source.take().expect("no source opened");
        let label = format!("{stream} source end ({})", error.unwrap_or("clean"));
        let error = error.map(str::to_owned);
        self.core
            .handle_input(self.now, Input::SourceEnd { stream, error });
        self.step(&label);
        self
    }

    pub fn tick(&mut self) -> &mut Self {
        self.core.handle_input(self.now, Input::Timeout);
        self.step("timeout");
        self
    }

    /// Jumps to the next deadline and fires it.
    pub fn next_deadline(&mut self) -> &mut Self {
        let deadline = self.core.poll_timeout().expect("no deadline scheduled");
        self.now = deadline.at;
        self.tick()
    }

    pub fn source_event(&mut self, event: SourceEvent<PodView>, label: &str) -> &mut Self {
        let stream = self.source.expect("no source opened");
        self.core
            .handle_input(self.now, Input::SourceEvent { stream, event });
        self.step(&format!("{stream} source {label}"));
        self
    }

    /// The in-process source says its events so far reflect resourceVersion `rv`.
    pub fn source_cursor(&mut self, rv: u64) -> &mut Self {
        let stream = self.source.expect("no source opened");
        self.core.handle_input(
            self.now,
            Input::SourceCursor {
                stream,
                resource_version: rv.to_string(),
            },
        );
        self.step(&format!("{stream} source cursor {rv}"));
        self
    }

    pub fn members(&self, parent: &str) -> Vec<String> {
        self.core
            .members(&parent.to_owned())
            .map(|p| p.metadata.name.as_deref().unwrap_or_default().to_owned())
            .collect()
    }
}

pub fn pod_view(name: &str, cell: Option<&str>, rv: u64) -> PodView {
    serde_json::from_str(&pod(name, cell, rv)).unwrap()
}
