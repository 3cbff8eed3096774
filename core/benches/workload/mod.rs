//! The workload shared by the throughput benches: real-shaped pods, frames, and the runs.

#![allow(dead_code)]

use std::hint::black_box;
use std::time::{Duration, Instant as WallClock};

use reconcile_core::pod::PodView;
use reconcile_core::{
    Command, Config, Input, Instant, KeyMapError, ListResponse, Outcome, Output, ReconcileLoop,
    WatchParams,
};
use serde_json::Value;

/// The parent key: a cell name, inline when short.
pub type Key = compact_str::CompactString;

pub const PARENTS: usize = 10_000;

pub fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

pub fn templates() -> Vec<Value> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../testdata/real/k8s-openapi/v1-36_pod-list.body.json"
    );
    let body = std::fs::read(path).expect("the captured v1.36 pod list");
    let list: Value = serde_json::from_slice(&body).unwrap();
    list["items"].as_array().unwrap().clone()
}

pub fn pod_json(templates: &[Value], i: usize, rv: u64) -> Value {
    let mut pod = templates[i % templates.len()].clone();
    let meta = &mut pod["metadata"];
    meta["name"] = Value::from(format!("pod-{i:06}"));
    meta["namespace"] = Value::from("bench");
    meta["uid"] = Value::from(format!("00000000-0000-0000-0000-{i:012}"));
    meta["resourceVersion"] = Value::from(rv.to_string());
    meta["labels"]["cell"] = Value::from(format!("cell-{:05}", i % PARENTS));
    pod
}

pub fn list_body(templates: &[Value], pods: usize) -> Vec<u8> {
    let items: Vec<Value> = (0..pods)
        .map(|i| pod_json(templates, i, i as u64 + 1))
        .collect();
    let list = serde_json::json!({
        "kind": "PodList", "apiVersion": "v1",
        "metadata": {"resourceVersion": pods.to_string()},
        "items": items,
    });
    serde_json::to_vec(&list).unwrap()
}

/// Width of the resourceVersion stamped into every frame as it is used.
const RV_WIDTH: usize = 12;

/// Distinct frames, replayed in a cycle to reach the frame count. Each use stamps a fresh
/// resourceVersion into the frame (in place, the same cost for every variant), as the
/// apiserver gives every event its own: a cycled frame must not come back at the version
/// the cache already holds, which the store would take as no change.
pub struct FramePool {
    frames: Vec<Vec<u8>>,
    /// Where each frame's resourceVersion digits start.
    rv_at: Vec<usize>,
}

impl FramePool {
    /// Frame `n` of a run, stamped with a version of its own within the run (and past
    /// every version in the LIST, which are at most the pod count).
    pub fn frame(&mut self, n: usize) -> &[u8] {
        let i = n % self.frames.len();
        let frame = &mut self.frames[i];
        let mut rv = 1_000_000_000 + n as u64;
        for b in frame[self.rv_at[i]..self.rv_at[i] + RV_WIDTH]
            .iter_mut()
            .rev()
        {
            *b = b'0' + (rv % 10) as u8;
            rv /= 10;
        }
        frame
    }

    /// Frame `n` as the `Bytes` a driver hands the core, without a copy: the buffer is lent
    /// to the core and taken back once the core has dropped it (it never keeps a line).
    pub fn feed_frame(&mut self, n: usize, feed: impl FnOnce(bytes::Bytes)) {
        self.frame(n);
        let i = n % self.frames.len();
        let line = bytes::Bytes::from(std::mem::take(&mut self.frames[i]));
        feed(line.clone());
        self.frames[i] = line
            .try_into_mut()
            .map(Vec::from)
            .unwrap_or_else(|shared| shared.to_vec());
    }

    /// Average frame size.
    pub fn average_bytes(&self) -> usize {
        self.frames.iter().map(Vec::len).sum::<usize>() / self.frames.len().max(1)
    }
}

pub fn frame_pool(templates: &[Value], pods: usize, size: usize) -> FramePool {
    let mut rng = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let placeholder = "9".repeat(RV_WIDTH);
    let mut pool = FramePool {
        frames: Vec::with_capacity(size),
        rv_at: Vec::with_capacity(size),
    };
    for _ in 0..size {
        let pick = next() % 100;
        let i = (next() as usize) % pods;
        let mut object = match pick {
            0..98 => pod_json(templates, i, 0),
            _ => serde_json::json!({
                "kind": "Pod", "apiVersion": "v1",
                "metadata": {},
                "spec": {"containers": null}, "status": {}}),
        };
        object["metadata"]["resourceVersion"] = Value::from(placeholder.clone());
        // The apiserver writes `type` before `object`; a `json!` map would sort them.
        let kind = match pick {
            0..90 => "MODIFIED",
            90..94 => "ADDED",
            94..98 => "DELETED",
            _ => "BOOKMARK",
        };
        let frame = format!(r#"{{"type":"{kind}","object":{object}}}"#);
        let field = format!(r#""resourceVersion":"{placeholder}""#);
        let at = frame.find(&field).expect("the stamped field") + field.len() - RV_WIDTH - 1;
        pool.frames.push(frame.into_bytes());
        pool.rv_at.push(at);
    }
    pool
}

pub fn by_cell(pod: &PodView) -> Result<Key, KeyMapError> {
    pod.metadata
        .labels
        .get("cell")
        .map(Key::from)
        .ok_or_else(|| KeyMapError::new("no cell label"))
}

/// Drains the outputs. Reconciles complete at once when `complete`; otherwise their tickets are
/// kept for the caller, as a driver whose reconcile is still running would.
pub fn drain(
    core: &mut ReconcileLoop<PodView, Key>,
    now: Instant,
    complete: bool,
    running: &mut Vec<reconcile_core::Ticket>,
) -> Option<reconcile_core::StreamId> {
    let mut stream = None;
    loop {
        match core.poll_output() {
            Output::Command(Command::Reconcile {
                ticket, members, ..
            }) => {
                black_box(&members);
                if complete {
                    core.handle_input(
                        now,
                        Input::Reconciled {
                            ticket,
                            outcome: Outcome::Success,
                        },
                    );
                } else {
                    running.push(ticket);
                }
            }
            Output::Command(Command::Watch { stream: s, .. }) => stream = Some(s),
            Output::Command(_) | Output::Event(_) => {}
            Output::Timeout(_) => return stream,
        }
    }
}

pub fn synced_core(body: &[u8]) -> (ReconcileLoop<PodView, Key>, reconcile_core::StreamId) {
    let config = Config::kubernetes(WatchParams::namespaced("bench"), by_cell);
    let mut core = ReconcileLoop::new(config, Instant::ZERO).unwrap();
    core.handle_input(Instant::ZERO, Input::Start);
    let Output::Command(Command::List { req, .. }) = core.poll_output() else {
        unreachable!()
    };
    let body = bytes::Bytes::copy_from_slice(body);
    let response = ListResponse::Response { status: 200, body };
    core.handle_input(Instant::ZERO, Input::List { req, response });
    let stream = drain(&mut core, Instant::ZERO, true, &mut Vec::new()).expect("watch after sync");
    (core, stream)
}

/// How reconciles keep up with frames in a run.
#[derive(Clone, Copy)]
pub enum Reconciles {
    /// A reconcile takes as long as 100 frames: the queue dedups in between (parse + store +
    /// queue, the core's own cost).
    Busy,
    /// Every reconcile completes before the next frame, so each frame dispatches one with
    /// its member snapshot (the worst case for dispatch).
    Instant,
}

pub fn core_run(body: &[u8], pool: &mut FramePool, frames: usize, mode: Reconciles) -> Duration {
    let (mut core, stream) = synced_core(body);
    let mut running = Vec::new();
    let start = WallClock::now();
    for n in 0..frames {
        let now = Instant::from_nanos(n as u64);
        pool.feed_frame(n, |line| {
            core.handle_input(now, Input::WatchLine { stream, line })
        });
        match mode {
            Reconciles::Instant => {
                drain(&mut core, now, true, &mut running);
            }
            Reconciles::Busy => {
                drain(&mut core, now, false, &mut running);
                if n % 100 == 99 {
                    for ticket in running.drain(..) {
                        core.handle_input(
                            now,
                            Input::Reconciled {
                                ticket,
                                outcome: Outcome::Success,
                            },
                        );
                    }
                    drain(&mut core, now, false, &mut running);
                }
            }
        }
    }
    let elapsed = start.elapsed();
    assert_eq!(core.stats().frames_skipped, 0);
    black_box(core.store().len());
    elapsed
}

#[derive(serde::Deserialize)]
pub struct BareFrame {
    #[serde(rename = "type")]
    _type: String,
    #[serde(rename = "object")]
    _object: PodView,
}

pub fn bare_run(pool: &mut FramePool, frames: usize) -> Duration {
    let start = WallClock::now();
    for n in 0..frames {
        let frame: BareFrame = serde_json::from_slice(pool.frame(n)).unwrap();
        black_box(frame);
    }
    start.elapsed()
}

pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Throughput of the bare decode and of the core in both reconcile modes, interleaved per run
/// so that a change of load on the machine hits every variant alike. Prints the medians.
pub fn compare(body: &[u8], pool: &mut FramePool, frames: usize, runs: usize) {
    let (mut bare, mut busy, mut instant) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..runs {
        bare.push(frames as f64 / bare_run(pool, frames).as_secs_f64());
        busy.push(frames as f64 / core_run(body, pool, frames, Reconciles::Busy).as_secs_f64());
        instant
            .push(frames as f64 / core_run(body, pool, frames, Reconciles::Instant).as_secs_f64());
    }
    let ratio = |v: &[f64]| median(v.iter().zip(&bare).map(|(c, b)| c / b).collect());
    println!(
        "bare serde_json decode into PodView:           {:>8.0} frames/s",
        median(bare.clone())
    );
    println!(
        "core parse + store + queue (busy reconciler):  {:>8.0} frames/s  ({:.2}x bare)",
        median(busy.clone()),
        ratio(&busy)
    );
    println!(
        "core, a reconcile dispatched for every frame:  {:>8.0} frames/s  ({:.2}x bare)",
        median(instant.clone()),
        ratio(&instant)
    );
}

/// The generated inputs and sizes of one bench run.
pub struct Workload {
    /// The captured pods the others are cloned from.
    pub templates: Vec<Value>,
    /// The initial LIST body.
    pub body: Vec<u8>,
    /// Distinct watch frames, cycled, each use at a fresh version.
    pub pool: FramePool,
    /// Pods in the LIST.
    pub pods: usize,
    /// Frames per run.
    pub frames: usize,
    /// Runs to take the median of.
    pub runs: usize,
}

/// Builds the workload from the environment (`BENCH_PODS`, `BENCH_FRAMES`, `BENCH_RUNS`).
pub fn workload() -> Workload {
    let pods = env_usize("BENCH_PODS", 100_000);
    let frames = env_usize("BENCH_FRAMES", 1_000_000);
    let runs = env_usize("BENCH_RUNS", 3);
    let templates = templates();
    let body = list_body(&templates, pods);
    let pool = frame_pool(&templates, pods, 20_000.min(frames.max(1)));
    let avg_frame = pool.average_bytes();
    println!(
        "workload: {pods} pods / {PARENTS} parents, LIST {:.0} MB, {frames} frames (avg {avg_frame} B), median of {runs}",
        body.len() as f64 / 1e6
    );
    Workload {
        templates,
        body,
        pool,
        pods,
        frames,
        runs,
    }
}
