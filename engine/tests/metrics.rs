//! Metrics and health endpoints: the figures a controller publishes, encoded under
//! controller-runtime's names, parsed back with a real Prometheus text parser, and checked
//! against every query of kubebuilder's controller-runtime Grafana dashboard. On tokio with
//! paused time (see `support`), so reconcile durations are exact.

// Shared with the other suites; not every helper is used here.
#[allow(dead_code)]
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use reconcile_core::KeyMap;
use reconcile_core::pod::PodView;
use reconcile_engine::{Action, Controller, Endpoints, Reconcile, Source, default_error_policy};
use support::{NoTransport, paused, stop_cleanly, until, within};

fn pod(name: &str, cell: &str) -> PodView {
    serde_json::from_str(&format!(
        r#"{{"metadata":{{"name":"{name}","namespace":"ns","labels":{{"cell":"{cell}"}}}}}}"#
    ))
    .expect("a pod")
}

/// Takes 2 s of virtual time; cell `bad` fails, cell `later` asks to run again in an hour.
async fn reconcile(request: Reconcile<PodView, String>, _: Arc<()>) -> Result<Action, String> {
    tokio::time::sleep(Duration::from_secs(2)).await;
    match request.parent().as_str() {
        "bad" => Err("boom".into()),
        "later" => Ok(Action::requeue(Duration::from_secs(3600))),
        _ => Ok(Action::await_change()),
    }
}

/// Every series of a scrape, `name{labels}`, with histograms expanded to `_bucket` (with
/// `le`), as PromQL sees them.
fn series(body: &str) -> Vec<(String, BTreeMap<String, String>)> {
    let scrape = prometheus_parse::Scrape::parse(body.lines().map(|l| Ok(l.to_owned())))
        .expect("a valid Prometheus text exposition");
    let mut out = Vec::new();
    for sample in scrape.samples {
        let labels: BTreeMap<String, String> = sample
            .labels
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if let prometheus_parse::Value::Histogram(buckets) = &sample.value {
            assert!(!buckets.is_empty(), "{} has buckets", sample.metric);
            let mut with_le = labels.clone();
            with_le.insert("le".into(), "+Inf".into());
            out.push((format!("{}_bucket", sample.metric), with_le));
        } else {
            out.push((sample.metric, labels));
        }
    }
    out
}

/// The series a PromQL query reads (identifiers right before a `{` selector) and the labels
/// it groups or filters by, less the target labels Prometheus adds at scrape time.
fn query_needs(query: &str) -> (Vec<String>, BTreeSet<String>) {
    const TARGET: [&str; 4] = ["job", "namespace", "instance", "pod"];
    let bytes = query.as_bytes();
    let mut names = Vec::new();
    for (i, b) in bytes.iter().enumerate() {
        if *b == b'{' {
            let start = query[..i]
                .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
                .map_or(0, |p| p + 1);
            names.push(query[start..i].to_owned());
        }
    }
    let mut labels = BTreeSet::new();
    for part in query.split("by (").skip(1) {
        let list = part.split(')').next().unwrap_or_default();
        for label in list.split(',').map(str::trim) {
            if !TARGET.contains(&label) {
                labels.insert(label.to_owned());
            }
        }
    }
    (names, labels)
}

/// kubebuilder's `grafana/controller-runtime-metrics.json` (its optional Grafana plugin:
/// the stock dashboard for controller-runtime's metrics), every target expression verbatim,
/// plus the reconcile-time and max-concurrency queries dashboards commonly add. The extra
/// labels are those the panels' legends print (`{{controller}}`).
const DASHBOARD: [(&str, &[&str]); 13] = [
    (
        r#"controller_runtime_active_workers{job="$job", namespace="$namespace"}"#,
        &["controller"],
    ),
    (
        r#"sum(rate(controller_runtime_reconcile_total{job="$job", namespace="$namespace"}[5m])) by (instance, pod)"#,
        &["controller", "result"],
    ),
    (
        r#"sum(rate(controller_runtime_reconcile_errors_total{job="$job", namespace="$namespace"}[5m])) by (instance, pod)"#,
        &["controller"],
    ),
    (
        r#"workqueue_depth{job="$job", namespace="$namespace"}"#,
        &["name"],
    ),
    (
        r#"histogram_quantile(0.50, sum(rate(workqueue_queue_duration_seconds_bucket{job="$job", namespace="$namespace"}[5m])) by (instance, name, le))"#,
        &[],
    ),
    (
        r#"histogram_quantile(0.99, sum(rate(workqueue_queue_duration_seconds_bucket{job="$job", namespace="$namespace"}[5m])) by (instance, name, le))"#,
        &[],
    ),
    (
        r#"sum(rate(workqueue_adds_total{job="$job", namespace="$namespace"}[5m])) by (instance, name)"#,
        &[],
    ),
    (
        r#"rate(workqueue_unfinished_work_seconds{job="$job", namespace="$namespace"}[5m])"#,
        &["name"],
    ),
    (
        r#"histogram_quantile(0.90, sum(rate(workqueue_work_duration_seconds_bucket{job="$job", namespace="$namespace"}[5m])) by (instance, name, le))"#,
        &[],
    ),
    (
        r#"sum(rate(workqueue_retries_total{job="$job", namespace="$namespace"}[5m])) by (instance, name)"#,
        &[],
    ),
    (
        r#"histogram_quantile(0.99, sum(rate(controller_runtime_reconcile_time_seconds_bucket{job="$job"}[5m])) by (instance, pod, le, controller))"#,
        &[],
    ),
    (
        r#"controller_runtime_max_concurrent_reconciles{job="$job"}"#,
        &["controller"],
    ),
    (
        r#"workqueue_longest_running_processor_seconds{job="$job"}"#,
        &["name"],
    ),
];

#[tokio::test(start_paused = true)]
async fn every_dashboard_series_exists_with_its_labels_and_the_figures_add_up() {
    let controller: Controller<PodView, String, _, NoTransport> = Controller::with_runtime(
        paused().await,
        Source::in_process(),
        KeyMap::by_label("cell"),
    )
    .name("cells")
    .concurrency(2)
    // The failure's retry stays out of the figures below.
    .backoff(Duration::from_secs(600), Duration::from_secs(600));
    let handle = controller.handle();
    let endpoints = Endpoints::new().controller(&handle);
    let get = |path: &str| endpoints.respond(&http::Method::GET, path);
    assert_eq!(get("/readyz").status(), 503, "not ready before the sync");
    assert_eq!(get("/healthz").status(), 200);

    handle
        .replace(vec![pod("a", "ok"), pod("b", "bad"), pod("c", "later")])
        .await
        .expect("pushed");
    let task = tokio::spawn(controller.run(reconcile, default_error_policy, Arc::new(())));
    within("the sync", handle.synced()).await.expect("synced");
    until("three outcomes", || {
        handle.metrics().reconcile_time.count() >= 3
    })
    .await;

    assert_eq!(get("/readyz").status(), 200);
    let response = get("/metrics");
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()[http::header::CONTENT_TYPE],
        "text/plain; version=0.0.4; charset=utf-8"
    );
    let body = std::str::from_utf8(response.body())
        .expect("utf-8")
        .to_owned();
    let all = series(&body);

    for (query, legend) in DASHBOARD {
        let (names, mut labels) = query_needs(query);
        labels.extend(legend.iter().map(|l| (*l).to_owned()));
        assert!(!names.is_empty(), "{query} names a series");
        for name in names {
            let found = all.iter().any(|(n, l)| {
                *n == name
                    && labels.iter().all(|label| l.contains_key(label))
                    && l.get("controller").is_none_or(|c| c == "cells")
                    && l.get("name").is_none_or(|c| c == "cells")
            });
            assert!(found, "{query}: no {name} with {labels:?} in\n{body}");
        }
    }

    // The figures: three reconciles of 2 s each, one per result; the failure retried.
    let value = |name: &str, label: Option<(&str, &str)>| -> f64 {
        let line = body
            .lines()
            .find(|l| {
                l.starts_with(&format!("{name}{{"))
                    && label.is_none_or(|(k, v)| l.contains(&format!("{k}=\"{v}\"")))
            })
            .unwrap_or_else(|| panic!("{name} in\n{body}"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    assert_eq!(
        value(
            "controller_runtime_reconcile_total",
            Some(("result", "success"))
        ),
        1.0
    );
    assert_eq!(
        value(
            "controller_runtime_reconcile_total",
            Some(("result", "error"))
        ),
        1.0
    );
    assert_eq!(
        value(
            "controller_runtime_reconcile_total",
            Some(("result", "requeue_after"))
        ),
        1.0
    );
    assert!(value("controller_runtime_reconcile_errors_total", None) >= 1.0);
    assert!(value("workqueue_retries_total", None) >= 1.0);
    assert_eq!(
        value("controller_runtime_max_concurrent_reconciles", None),
        2.0
    );
    assert_eq!(value("workqueue_adds_total", None), 3.0);
    // 2 s runs: none within 1.75 s, all three within 2 s.
    assert_eq!(
        value(
            "controller_runtime_reconcile_time_seconds_bucket",
            Some(("le", "1.75"))
        ),
        0.0
    );
    assert_eq!(
        value(
            "controller_runtime_reconcile_time_seconds_bucket",
            Some(("le", "2"))
        ),
        3.0
    );
    // Two slots: the third cell waited for the first 2 s run.
    assert_eq!(value("workqueue_queue_duration_seconds_count", None), 3.0);
    assert_eq!(value("workqueue_queue_duration_seconds_sum", None), 2.0);
    assert_eq!(value("reconcile_loop_synced", None), 1.0);

    assert_eq!(get("/nope").status(), 404);
    assert_eq!(
        endpoints.respond(&http::Method::POST, "/metrics").status(),
        405
    );
    let head = endpoints.respond(&http::Method::HEAD, "/metrics");
    assert_eq!(head.status(), 200);
    assert!(head.body().is_empty());

    stop_cleanly(&handle, task).await;
    assert_eq!(
        get("/healthz").status(),
        500,
        "a stopped controller is not live"
    );
    assert_eq!(get("/readyz").status(), 503);
}
