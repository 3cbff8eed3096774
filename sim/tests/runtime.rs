//! The simulator's runtime and transport on their own: virtual time, the seeded order,
//! the typed ends of a run, and the transport's answers and watches.
#![cfg(feature = "runtime")]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_lite::StreamExt;
use reconcile_engine::{Runtime, Transport};
use reconcile_sim::runtime::{SimConfig, SimError, Simulation};

#[test]
fn an_hour_of_virtual_time_passes_at_once_and_the_clock_shows_it() {
    let sim = Simulation::new(SimConfig::seed(1));
    let runtime = sim.runtime();
    let start = std::time::Instant::now();
    let elapsed = sim
        .block_on(async move {
            let began = runtime.now();
            runtime.sleep(Duration::from_secs(3000)).await;
            runtime.now().duration_since(began)
        })
        .unwrap();
    assert_eq!(elapsed, Duration::from_secs(3000));
    assert_eq!(sim.now(), Duration::from_secs(3000));
    assert!(start.elapsed() < Duration::from_secs(5), "no real sleep");
}

/// Spawns `n` tasks that each note their number twice, with a yield between.
fn order(seed: u64, n: usize) -> Vec<usize> {
    let sim = Simulation::new(SimConfig::seed(seed));
    let runtime = sim.runtime();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let out = Arc::clone(&seen);
    sim.block_on(async move {
        let tasks: Vec<_> = (0..n)
            .map(|i| {
                let seen = Arc::clone(&out);
                runtime.spawn(Box::pin(async move {
                    seen.lock().unwrap().push(i);
                    futures_lite::future::yield_now().await;
                    seen.lock().unwrap().push(i);
                }))
            })
            .collect();
        drop(tasks);
    })
    .unwrap();
    seen.lock().unwrap().clone()
}

#[test]
fn the_seed_picks_the_order_of_ready_tasks() {
    assert_eq!(order(3, 6), order(3, 6));
    let orders: std::collections::BTreeSet<_> = (0..10).map(|s| order(s, 6)).collect();
    assert!(orders.len() > 1, "ten seeds, one order");
    assert_eq!(order(3, 6).len(), 12, "every task ran to its end");
}

#[test]
fn a_future_that_can_never_finish_is_a_deadlock_naming_what_it_waits_on() {
    let sim = Simulation::new(SimConfig::seed(1));
    let err = sim
        .block_on(futures_lite::future::pending::<()>())
        .unwrap_err();
    let SimError::Deadlock { blocked, .. } = &err else {
        panic!("{err}");
    };
    assert_eq!(blocked.len(), 1);
    assert_eq!(blocked[0].name, "main");
    let text = err.to_string();
    assert!(
        text.starts_with("deadlock at 0.000s: nothing left to do"),
        "{text}"
    );
    assert!(
        text.contains("main (spawned at 0.000s): waiting on something outside the simulator"),
        "{text}"
    );
}

#[test]
fn a_timer_past_the_horizon_ends_the_run_with_a_typed_error() {
    let sim = Simulation::new(SimConfig {
        horizon: Duration::from_secs(10),
        ..SimConfig::seed(1)
    });
    let runtime = sim.runtime();
    let err = sim
        .block_on(async move { runtime.sleep(Duration::from_secs(11)).await })
        .unwrap_err();
    assert!(matches!(err, SimError::Horizon { next, .. } if next == Duration::from_secs(11)));
    assert!(
        err.to_string().contains("waiting on a timer at 11.000s"),
        "{err}"
    );
}

#[test]
fn a_busy_loop_ends_at_the_step_budget() {
    let sim = Simulation::new(SimConfig {
        max_steps: 100,
        ..SimConfig::seed(1)
    });
    let err = sim
        .block_on(async {
            loop {
                futures_lite::future::yield_now().await;
            }
        })
        .unwrap_err();
    assert!(
        matches!(err, SimError::StepBudget { steps: 100, .. }),
        "{err}"
    );
}

#[test]
fn requests_are_answered_after_a_seeded_latency_and_watches_stream_writes() {
    let sim = Simulation::new(SimConfig::seed(5));
    let transport = sim.transport();
    let runtime = sim.runtime();
    let frames = sim
        .block_on(async move {
            let watch = http::Request::get(
                "/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=1&timeoutSeconds=5",
            )
            .body(Vec::new())
            .unwrap();
            let response = transport.send(watch).await.unwrap();
            assert_eq!(response.status(), 200);
            let mut body = response.into_body();
            let create = http::Request::post("/api/v1/namespaces/default/configmaps")
                .header("content-type", "application/json")
                .body(br#"{"metadata":{"name":"c"}}"#.to_vec())
                .unwrap();
            let created = transport.send(create).await.unwrap();
            assert_eq!(created.status(), 201);
            let mut frames = Vec::new();
            while let Some(chunk) = body.next().await {
                frames.push(String::from_utf8(chunk.unwrap().to_vec()).unwrap());
            }
            (frames, runtime.elapsed())
        })
        .unwrap();
    let (frames, ended) = frames;
    assert_eq!(frames.len(), 1, "{frames:?}");
    assert!(frames[0].contains(r#""type":"ADDED""#), "{frames:?}");
    assert!(
        ended >= Duration::from_secs(5),
        "the watch ran to its timeoutSeconds"
    );
    let log = sim.log_text();
    for part in [
        "configmaps?watch=true&resourceVersion=1&timeoutSeconds=5 -> watch#1",
        "POST /api/v1/namespaces/default/configmaps -> 201 rv=",
        "watch#1 ADDED ConfigMap default/c rv=",
        "watch#1 ended",
    ] {
        assert!(log.contains(part), "{part} missing from\n{log}");
    }
    let first = log.lines().next().unwrap();
    let ms: f64 = first
        .trim_start()
        .split('s')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        (0.001..=0.010).contains(&ms),
        "latency in 1..=10 ms: {first}"
    );
}
