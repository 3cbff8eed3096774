//! `reconcile-sim capture` on the real apiserver: a capture of Secrets while the case writes
//! them and forces a 410 by compaction; the capture must replay with no divergence, simulate
//! to the state the cluster ended in, and hold no Secret value.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::ByteString;
use reconcile_k8s_env::ApiServer;
use reconcile_sim::capture::{self, CaptureOptions};
use reconcile_sim::trace::Trace;
use reconcile_sim::{SimOptions, simulate};
use serde_json::{Value, json};

use crate::harness::{Case, DriverUnderTest};

/// The value planted in the Secrets; no form of it may reach the capture.
const SECRET_VALUE: &str = "reconcile-e2e-capture-s3cr3t-93a7d1";

/// Captures the Secrets of a namespace (selector `app=e2e`, 2 s watches) on the
/// watch-cache-off apiserver while the case creates, patches and deletes Secrets and
/// compacts etcd past the capture's cursor; then replays and simulates the file.
pub async fn a_capture_replays_without_divergence_and_holds_no_secret<D: DriverUnderTest>(
    case: Case<D>,
) {
    let _disrupt = case.env.disrupt();
    let ns = case.namespace();
    let api = case.env.client(ApiServer::Uncached);
    let collection = format!("/api/v1/namespaces/{ns}/secrets");
    let path = |name: &str| format!("{collection}/{name}");
    let encoded = match serde_json::to_value(ByteString(SECRET_VALUE.as_bytes().to_vec())) {
        Ok(Value::String(encoded)) => encoded,
        other => panic!("ByteString serializes as a base64 string, not {other:?}"),
    };
    let secret = |name: &str, app: &str| {
        json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": name,
                "labels": { "app": app },
                // What `kubectl apply` leaves behind: the whole object, value included.
                "annotations": {
                    "kubectl.kubernetes.io/last-applied-configuration":
                        format!("{{\"stringData\":{{\"password\":\"{SECRET_VALUE}\"}}}}"),
                },
            },
            "data": { "password": encoded },
            "stringData": { "token": SECRET_VALUE },
        })
    };
    let create = |object: &Value| {
        api.create(&collection, object)
            .unwrap_or_else(|e| panic!("{}: create in {collection}: {e}", case.name))
    };
    create(&secret("early", "e2e"));

    let out = crate::trace::path(D::NAME, case.name, 0);
    let _ = std::fs::remove_file(&out);
    let transport = D::connect(case.env.kubeconfig_path(ApiServer::Uncached))
        .await
        .unwrap_or_else(|e| panic!("{}: cannot connect: {e}", case.name));
    let mut opts = CaptureOptions::new("secrets".parse().expect("a resource name"), &out);
    opts.namespace = Some(ns.clone());
    opts.label_selector = Some("app=e2e".into());
    opts.watch_timeout = Some(2);
    let capture = capture::prepare(case.runtime.clone(), transport, &opts)
        .await
        .unwrap_or_else(|e| panic!("{}: {e}", case.name));
    assert_eq!(capture.resource().kind, "Secret");
    let counters = capture.counters();
    let stop = Arc::new(AtomicBool::new(false));
    let stopped = {
        let stop = Arc::clone(&stop);
        let runtime = case.runtime.clone();
        async move {
            while !stop.load(Ordering::SeqCst) {
                reconcile_engine::Runtime::sleep_until(
                    &runtime,
                    reconcile_engine::Runtime::now(&runtime) + Duration::from_millis(50),
                )
                .await;
            }
        }
    };
    let changes = async {
        let progress = || counters.snapshot();
        case.eventually("the capture listed and watches", || {
            let p = progress();
            (p.lists >= 1 && p.watches >= 1)
                .then_some(())
                .ok_or(format!("{p:?}"))
        })
        .await;
        create(&secret("late", "e2e"));
        api.merge_patch(
            &path("early"),
            &json!({"metadata": {"labels": {"rotated": "yes"}}}),
        )
        .unwrap_or_else(|e| panic!("patch early: {e}"));
        api.delete(&path("late"), None)
            .unwrap_or_else(|e| panic!("delete late: {e}"));
        case.eventually("three frames captured", || {
            let p = progress();
            (p.frames >= 3).then_some(()).ok_or(format!("{p:?}"))
        })
        .await;
        // Writes outside the selector move etcd's head past the cursor without a frame; a
        // compaction then makes the next WATCH from the cursor fail with 410.
        create(&secret("unselected", "other"));
        api.merge_patch(
            &path("unselected"),
            &json!({"metadata": {"labels": {"touched": "yes"}}}),
        )
        .unwrap_or_else(|e| panic!("patch unselected: {e}"));
        let revision = case
            .env
            .compact_etcd()
            .unwrap_or_else(|e| panic!("compact: {e}"));
        case.eventually("a relist after the compaction", || {
            let p = progress();
            (p.relists >= 1)
                .then_some(())
                .ok_or(format!("compacted at {revision}: {p:?}"))
        })
        .await;
        let before = progress().frames;
        create(&secret("after", "e2e"));
        case.eventually("a frame after the relist", || {
            let p = progress();
            (p.frames > before).then_some(()).ok_or(format!("{p:?}"))
        })
        .await;
        stop.store(true, Ordering::SeqCst);
    };
    let (summary, ()) = futures_lite::future::zip(capture.run_until(stopped), changes).await;
    let summary = summary.unwrap_or_else(|e| panic!("{}: capture: {e}", case.name));
    assert!(!summary.truncated);
    tracing::info!(path = %out.display(), progress = ?summary.progress, "captured");

    // Owner-only, and no form of the value anywhere in it.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&out)
            .expect("written")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{}: mode {mode:o}", out.display());
    }
    let text = std::fs::read_to_string(&out).expect("the capture");
    for needle in [SECRET_VALUE, encoded.as_str()] {
        assert!(
            !text.contains(needle),
            "{}: the capture holds {needle:?}",
            out.display()
        );
    }
    assert!(
        !text.contains("\"managedFields\":") && !text.contains("\\\"managedFields\\\""),
        "managedFields kept"
    );
    assert!(text.contains("<redacted>"), "nothing was masked?");
    // The 410 as it came: a WATCH answered 410 or an ERROR frame with code 410.
    assert!(
        text.lines().any(|l| (l.contains("\"record\":\"watch\"")
            || l.contains("\"record\":\"watch_end\""))
            && l.contains("\"status\":410"))
            || text.contains("\\\"code\\\":410"),
        "{}: no 410 in the capture",
        out.display()
    );

    // The conversation replays with no divergence, relist included.
    let replayed =
        crate::trace::replay(&out).unwrap_or_else(|e| panic!("{}: replay: {e}", case.name));
    assert!(replayed.stats.relists >= 1, "{:?}", replayed.stats);
    // And world mode, built from the capture, ends where the cluster did.
    let live: BTreeSet<String> = api
        .get(&format!("{collection}?labelSelector=app%3De2e"))
        .expect("list")["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|i| i["metadata"]["name"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(
        live,
        BTreeSet::from(["after".to_owned(), "early".to_owned()])
    );
    let trace = Trace::parse(&out.display().to_string(), &text).expect("a trace");
    let simulated = simulate(
        &trace,
        &SimOptions {
            check: true,
            settle: Duration::from_secs(30),
            ..SimOptions::default()
        },
    )
    .expect("a valid header");
    assert!(
        simulated.violations.is_empty(),
        "{:?}",
        simulated.violations
    );
    for (what, latest) in [
        ("replay", replayed.latest),
        ("simulate", crate::trace::latest_members(&simulated.output)),
    ] {
        let present: BTreeSet<String> = latest
            .iter()
            .filter(|(_, members)| !members.is_empty())
            .map(|(parent, _)| parent.rsplit('/').next().unwrap_or(parent).to_owned())
            .collect();
        assert_eq!(present, live, "{what}: the last reconciles' members");
    }
}

/// `reconcile-sim` itself, built next to this test binary (`target/debug`); built with cargo
/// when it is not there yet.
fn sim_binary() -> std::path::PathBuf {
    let dir = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent()?.parent().map(std::path::Path::to_path_buf))
        .expect("the test binary's directory");
    let bin = dir.join("reconcile-sim");
    let status = std::process::Command::new(env!("CARGO"))
        .args([
            "build",
            "-p",
            "reconcile-sim",
            "--features",
            "capture-cli",
            "--bin",
            "reconcile-sim",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .expect("cargo runs");
    assert!(
        status.success(),
        "cargo build -p reconcile-sim --features capture-cli: {status}"
    );
    assert!(bin.exists(), "{}", bin.display());
    bin
}

/// `reconcile-sim capture` stopped by SIGTERM and by SIGHUP (issue 31: it held the run in
/// memory and only SIGINT wrote a file; 143 and 129 left none): each ends with exit 0 and a
/// file that replays with no divergence, holds the Secret written while it ran, and no
/// form of its value.
pub async fn a_capture_stopped_by_sigterm_or_sighup_leaves_a_replayable_trace<
    D: DriverUnderTest,
>(
    case: Case<D>,
) {
    let ns = case.namespace();
    let api = case.env.client(ApiServer::Uncached);
    let collection = format!("/api/v1/namespaces/{ns}/secrets");
    let bin = sim_binary();
    for (n, signal) in [(1, "TERM"), (2, "HUP")] {
        let out = crate::trace::path(D::NAME, case.name, n);
        let _ = std::fs::remove_file(&out);
        let mut child = std::process::Command::new(&bin)
            .args([
                "capture",
                "secrets",
                "-n",
                &ns,
                "--watch-timeout",
                "2",
                "-o",
            ])
            .arg(&out)
            .env("KUBECONFIG", case.env.kubeconfig_path(ApiServer::Uncached))
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("reconcile-sim capture starts");
        // Streamed: the LIST and the WATCH are on disk while it runs.
        case.eventually("the capture's LIST and WATCH on disk", || {
            let text = std::fs::read_to_string(&out).unwrap_or_default();
            (text.contains("\"record\":\"list\"") && text.contains("\"record\":\"watch\""))
                .then_some(())
                .ok_or(format!("{} so far: {text}", out.display()))
        })
        .await;
        let name = format!("signalled-{n}");
        api.create(
            &collection,
            &json!({
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": { "name": name },
                "stringData": { "token": SECRET_VALUE },
            }),
        )
        .unwrap_or_else(|e| panic!("{}: create: {e}", case.name));
        case.eventually("the Secret's frame on disk", || {
            let text = std::fs::read_to_string(&out).unwrap_or_default();
            text.contains(&name)
                .then_some(())
                .ok_or(format!("{} so far: {text}", out.display()))
        })
        .await;
        let kill = std::process::Command::new("kill")
            .args([&format!("-{signal}"), &child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(kill.success());
        let status = case
            .eventually(&format!("the capture to exit on SIG{signal}"), || {
                child
                    .try_wait()
                    .map_err(|e| e.to_string())?
                    .ok_or_else(|| "still running".to_owned())
            })
            .await;
        assert_eq!(status.code(), Some(0), "SIG{signal}: {status}");
        let text = std::fs::read_to_string(&out).expect("the capture");
        assert!(text.contains(&name), "SIG{signal}: {text}");
        assert!(!text.contains(SECRET_VALUE), "SIG{signal}: {text}");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&out)
                .expect("written")
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600, "{}: mode {mode:o}", out.display());
        }
        crate::trace::replay(&out)
            .unwrap_or_else(|e| panic!("{}: SIG{signal}: replay: {e}", case.name));
    }
}
