//! Simulator speed targets (issue 4): 10 simulated hours of an idle controller with the
//! default resync in under 50 ms of wall time, and replay at 500k frames/s or more.
//! Run with `cargo bench -p reconcile-sim`.

use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};

use bytes::Bytes;
use reconcile_core::pod::PodView;
use reconcile_core::{
    Command, Input, Instant, KeyBy, ListResponse, Outcome, Output, ReconcileLoop, StreamId,
};
use reconcile_sim::harness::Render;
use reconcile_sim::trace::{Entry, Header, Record, RecordedEnd, Trace};
use reconcile_sim::{ReplayOptions, SimOptions, replay, simulate};

const FRAMES: usize = 100_000;

fn pod(name: &str, cell: usize, rv: usize) -> String {
    format!(
        "{{\"metadata\":{{\"name\":\"{name}\",\"namespace\":\"default\",\"uid\":\"u-{name}\",\"resourceVersion\":\"{rv}\",\"labels\":{{\"app\":\"cell\",\"cell\":\"c{cell}\"}}}},\"spec\":{{\"nodeName\":\"node-1\"}},\"status\":{{\"phase\":\"Running\",\"podIP\":\"10.0.0.1\"}}}}"
    )
}

fn header() -> Header {
    Header {
        namespace: Some("default".into()),
        label_selector: Some("app=cell".into()),
        parent: KeyBy::Label("cell".into()),
        ..Header::default()
    }
}

/// An idle pool: 20 pods listed at the start, then ten hours of nothing.
fn idle_trace() -> Trace {
    let items: Vec<String> = (0..20)
        .map(|i| pod(&format!("p{i}"), i % 4, 10 + i))
        .collect();
    let list = format!(
        "{{\"kind\":\"PodList\",\"metadata\":{{\"resourceVersion\":\"40\"}},\"items\":[{}]}}",
        items.join(",")
    );
    let zero = Some(Instant::ZERO);
    Trace {
        name: "idle".into(),
        header: header(),
        entries: vec![
            Entry::new(
                zero,
                Record::List {
                    status: 200,
                    body: list.into(),
                    transport_error: None,
                },
            ),
            Entry::new(
                None,
                Record::Advance {
                    by: Duration::from_secs(10 * 3600),
                },
            ),
        ],
    }
}

/// One LIST, then FRAMES MODIFIED frames on one watch (100 pods over 10 parents).
fn busy_trace() -> Trace {
    let list =
        "{\"kind\":\"PodList\",\"metadata\":{\"resourceVersion\":\"1\"},\"items\":[]}".to_owned();
    let mut entries = vec![
        Entry::new(
            Some(Instant::ZERO),
            Record::List {
                status: 200,
                body: list.into(),
                transport_error: None,
            },
        ),
        Entry::new(
            None,
            Record::Watch {
                status: 200,
                body: String::new().into(),
                resource_version: None,
            },
        ),
    ];
    for i in 0..FRAMES {
        let kind = if i < 100 { "ADDED" } else { "MODIFIED" };
        let line = format!(
            "{{\"type\":\"{kind}\",\"object\":{}}}",
            pod(&format!("p{}", i % 100), i % 10, i + 2)
        );
        entries.push(Entry::new(None, Record::Frame { line: line.into() }));
    }
    entries.push(Entry::new(None, Record::WatchEnd(RecordedEnd::Clean)));
    Trace {
        name: "busy".into(),
        header: header(),
        entries,
    }
}

/// Drives the core directly: LIST, WATCH, every frame, every reconcile answered `Success`.
fn bare_core(trace: &Trace, lines: &[Bytes]) -> u64 {
    let config = reconcile_sim::harness::config(&trace.header).expect("valid header");
    let mut core = ReconcileLoop::new(config, Instant::ZERO).expect("valid config");
    let now = Instant::ZERO;
    core.handle_input(now, Input::Start);
    let Record::List { body, .. } = &trace.entries[0].record else {
        unreachable!("busy_trace starts with a LIST")
    };
    let mut stream = None;
    let mut reconciles = 0;
    let mut drain = |core: &mut ReconcileLoop<PodView, String>, stream: &mut Option<StreamId>| {
        let mut done = Vec::new();
        loop {
            match core.poll_output() {
                Output::Timeout(_) => break,
                Output::Command(Command::Watch { stream: s, .. }) => *stream = Some(s),
                Output::Command(Command::Reconcile { ticket, .. }) => done.push(ticket),
                Output::Command(Command::List { req, .. }) => {
                    let response = ListResponse::Response {
                        status: 200,
                        body: Bytes::copy_from_slice(body.as_bytes()),
                    };
                    core.handle_input(now, Input::List { req, response });
                }
                _ => {}
            }
        }
        for ticket in done {
            reconciles += 1;
            let outcome = Outcome::Success;
            core.handle_input(now, Input::Reconciled { ticket, outcome });
        }
    };
    drain(&mut core, &mut stream);
    drain(&mut core, &mut stream);
    let stream = stream.expect("watching");
    for line in lines {
        let line = line.clone();
        core.handle_input(now, Input::WatchLine { stream, line });
        let mut s = Some(stream);
        drain(&mut core, &mut s);
        drain(&mut core, &mut s);
    }
    reconciles
}

fn benches(c: &mut Criterion) {
    let idle = idle_trace();
    let opts = SimOptions {
        render: Render::Quiet,
        settle: Duration::ZERO,
        ..SimOptions::default()
    };
    let report = simulate(&idle, &opts).expect("valid header");
    assert!(report.end >= Instant::from_duration(Duration::from_secs(10 * 3600)));
    assert_eq!(
        report.stats.resyncs, 1,
        "the default 10 h resync fires once"
    );
    let mut group = c.benchmark_group("simulate");
    group.sample_size(20);
    group.bench_function("idle controller, 10 simulated hours", |b| {
        b.iter(|| simulate(&idle, &opts).expect("valid header"));
    });
    group.finish();

    let busy = busy_trace();
    let ropts = ReplayOptions {
        render: Render::Quiet,
        ..ReplayOptions::default()
    };
    let report = replay(&busy, &ropts).expect("valid header");
    assert_eq!(report.stats.frames, FRAMES as u64);
    // The floor: the bare core fed the same frames, each reconcile answered at once.
    let lines: Vec<Bytes> = busy
        .entries
        .iter()
        .filter_map(|e| match &e.record {
            Record::Frame { line } => Some(Bytes::copy_from_slice(line.as_bytes())),
            _ => None,
        })
        .collect();
    let mut group = c.benchmark_group("core alone");
    group.sample_size(10);
    group.throughput(Throughput::Elements(FRAMES as u64));
    group.bench_function("frames", |b| b.iter(|| bare_core(&busy, &lines)));
    group.finish();

    let mut group = c.benchmark_group("replay");
    group.sample_size(10);
    group.throughput(Throughput::Elements(FRAMES as u64));
    group.bench_function("frames", |b| {
        b.iter(|| replay(&busy, &ropts).expect("valid header"));
    });
    group.finish();
}

criterion_group!(sim, benches);
criterion_main!(sim);
