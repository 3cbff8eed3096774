//! With kwok as the kubelet: what only a node produces (Running, restarts, graceful
//! deletion, exits), plus the apiserver's bookmarks on a live watch.

use reconcile_k8s_env::pod_manifest;
use serde_json::{Value, json};

use crate::harness::{Case, DriverUnderTest, Opts, WAIT};
use crate::tap::{Frame, TapeExt};

/// A pod in the suite's selector and in `cell`, with kwok annotations.
fn pod(name: &str, cell: &str, annotations: &[(&str, &str)]) -> Value {
    let mut manifest = pod_manifest(name, &[("app", "e2e"), ("cell", cell)]);
    let annotations: serde_json::Map<String, Value> = annotations
        .iter()
        .map(|(k, v)| ((*k).to_owned(), json!(v)))
        .collect();
    manifest["metadata"]["annotations"] = Value::Object(annotations);
    manifest
}

fn create<D: DriverUnderTest>(case: &Case<D>, ns: &str, manifest: &Value) {
    case.api()
        .create_pod(ns, manifest)
        .unwrap_or_else(|e| panic!("create pod in {ns}: {e}"));
}

fn delete<D: DriverUnderTest>(case: &Case<D>, ns: &str, name: &str, grace: Option<u32>) {
    case.api()
        .delete_pod(ns, name, grace)
        .unwrap_or_else(|e| panic!("delete pod {ns}/{name}: {e}"));
}

fn patch<D: DriverUnderTest>(case: &Case<D>, ns: &str, name: &str, patch: &Value) {
    case.api()
        .patch_pod(ns, name, patch)
        .unwrap_or_else(|e| panic!("patch pod {ns}/{name}: {e}"));
}

fn all_ready(members: &[crate::observe::Member], n: usize) -> bool {
    members.len() == n && members.iter().all(|m| m.ready)
}

/// Pods start Pending; the cell is seen whole and ready only once kwok runs them.
pub async fn a_cell_is_seen_once_its_pods_are_running<D: DriverUnderTest>(case: Case<D>) {
    let _steady = case.env.steady();
    let ns = case.namespace();
    let under = case.start(&ns, Opts::default()).await;
    let delay = [("reconcile-k8s-env/start-delay", "2s")];
    create(&case, &ns, &pod("r1", "a", &delay));
    create(&case, &ns, &pod("r2", "a", &delay));
    let members = under
        .wait_cell_where("a", "two members, all Running and Ready", |m| {
            all_ready(m, 2)
        })
        .await;
    assert!(members.iter().all(|m| m.phase == "Running"), "{members:?}");
    let calls = under.observed.of("a");
    assert!(
        calls.iter().any(|c| c.members.iter().any(|m| !m.ready)),
        "a reconcile saw the pods before they ran: {calls:?}"
    );
    under.shutdown().await;
}

/// Deleting a running pod shrinks its cell.
pub async fn deleting_a_pod_shrinks_the_cell<D: DriverUnderTest>(case: Case<D>) {
    let _steady = case.env.steady();
    let ns = case.namespace();
    create(&case, &ns, &pod("s1", "a", &[]));
    create(&case, &ns, &pod("s2", "a", &[]));
    let under = case.start(&ns, Opts::default()).await;
    under
        .wait_cell_where("a", "two running members", |m| all_ready(m, 2))
        .await;
    delete(&case, &ns, "s2", Some(0));
    under.wait_cell("a", &["s1"]).await;
    under.shutdown().await;
}

/// A container restart (restartCount + 1) reaches reconcile; the pod stays in its cell.
pub async fn a_restarting_pod_is_observed<D: DriverUnderTest>(case: Case<D>) {
    let _steady = case.env.steady();
    let ns = case.namespace();
    create(&case, &ns, &pod("flaky", "a", &[]));
    let under = case.start(&ns, Opts::default()).await;
    under
        .wait_cell_where("a", "flaky running", |m| all_ready(m, 1))
        .await;
    patch(
        &case,
        &ns,
        "flaky",
        // kwok restarts the container until restartCount reaches the label's value.
        &json!({"metadata": {"labels": {"reconcile-k8s-env/restarts": "1"}}}),
    );
    under
        .wait_cell_where("a", "flaky restarted once", |m| {
            m.len() == 1 && m[0].restarts == 1 && m[0].phase == "Running"
        })
        .await;
    under.shutdown().await;
}

/// A graceful deletion keeps the pod (Terminating) in its cell until kwok has stopped its
/// containers and the pod is gone.
pub async fn a_gracefully_terminating_pod_stays_until_gone<D: DriverUnderTest>(case: Case<D>) {
    let _steady = case.env.steady();
    let ns = case.namespace();
    let slow = [("reconcile-k8s-env/shutdown-delay", "3s")];
    create(&case, &ns, &pod("slow", "a", &slow));
    create(&case, &ns, &pod("other", "a", &[]));
    let under = case.start(&ns, Opts::default()).await;
    under
        .wait_cell_where("a", "two running members", |m| all_ready(m, 2))
        .await;
    delete(&case, &ns, "slow", Some(30));
    under
        .wait_cell_where("a", "slow Terminating and still a member", |m| {
            m.iter().any(|p| p.name == "slow" && p.terminating)
        })
        .await;
    under.wait_cell("a", &["other"]).await;
    under.shutdown().await;
}

/// A pod whose container exits 0 becomes Succeeded and stays in its cell.
pub async fn a_pod_that_exits_stays_as_succeeded<D: DriverUnderTest>(case: Case<D>) {
    let _steady = case.env.steady();
    let ns = case.namespace();
    create(&case, &ns, &pod("job", "a", &[]));
    let under = case.start(&ns, Opts::default()).await;
    under
        .wait_cell_where("a", "job running", |m| all_ready(m, 1))
        .await;
    patch(
        &case,
        &ns,
        "job",
        &json!({"metadata": {"labels": {"reconcile-k8s-env/exit-code": "0"}}}),
    );
    let members = under
        .wait_cell_where("a", "job Succeeded", |m| {
            m.len() == 1 && m[0].phase == "Succeeded"
        })
        .await;
    assert!(
        !members[0].ready,
        "a Succeeded pod is not ready: {members:?}"
    );
    under.shutdown().await;
}

/// Deleting every pod (gracefully) empties the cell.
pub async fn deleting_every_pod_empties_the_cell<D: DriverUnderTest>(case: Case<D>) {
    let _steady = case.env.steady();
    let ns = case.namespace();
    for name in ["e1", "e2", "e3"] {
        create(&case, &ns, &pod(name, "a", &[]));
    }
    let under = case.start(&ns, Opts::default()).await;
    under
        .wait_cell_where("a", "three running members", |m| all_ready(m, 3))
        .await;
    for name in ["e1", "e2", "e3"] {
        delete(&case, &ns, name, None);
    }
    under.wait_cell("a", &[]).await;
    under.shutdown().await;
}

/// The watch cache sends a BOOKMARK shortly before a watch's deadline; its resourceVersion
/// becomes the cursor the next WATCH starts from.
pub async fn a_bookmark_carries_a_version_the_cursor_advances_to<D: DriverUnderTest>(
    case: Case<D>,
) {
    let _steady = case.env.steady();
    let ns = case.namespace();
    create(&case, &ns, &pod("b1", "a", &[]));
    let under = case
        .start(
            &ns,
            Opts {
                timeout_seconds: 10,
                ..Opts::default()
            },
        )
        .await;
    under
        .wait_cell_where("a", "b1 running", |m| all_ready(m, 1))
        .await;
    let tap = under.tap.clone();
    // The watch cache sends it about two seconds before each watch's deadline; on a busy
    // machine (the whole suite on two cores) several watches in a row have ended without
    // one, so this wait is longer than the others.
    let bookmark: Frame = under
        .eventually_within(3 * WAIT, "a BOOKMARK frame", || {
            tap.frames()
                .into_iter()
                .find(|f| f.kind == "BOOKMARK" && !f.resource_version.is_empty())
                .ok_or_else(|| format!("{} watch ends, no bookmark", tap.watch_ends()))
        })
        .await;
    // A later watch starts from a bookmark's version, one newer than every event seen
    // before that bookmark: only the bookmark can have moved the cursor there. Not
    // necessarily the first bookmark's: events that follow it on the same watch move the
    // cursor on (seen in CI: a bookmark at 225, then the next watch from 235).
    let first = bookmark.resource_version.clone();
    // A bookmark carries the watch cache's version, which any pod in the cluster moves. In a
    // quiet cluster it stays at this namespace's last event, and a watch from it proves
    // nothing (seen in CI: every watch from 208, the last event's version too). So a pod in
    // another namespace is written every few polls while this waits.
    let elsewhere = case.namespace();
    create(&case, &elsewhere, &pod("clock", "z", &[]));
    let mut polls = 0u32;
    under
        .eventually(
            &format!("a WATCH from a bookmark's version (the first: {first})"),
            || {
                polls += 1;
                if polls.is_multiple_of(4) {
                    let tick = json!({"metadata": {"annotations": {"tick": polls.to_string()}}});
                    patch(&case, &elsewhere, "clock", &tick);
                }
                let cursors = tap.watch_cursors();
                let mut newest_event = 0u64;
                let mut ahead = Vec::new();
                for frame in tap.frames() {
                    let Ok(rv) = frame.resource_version.parse::<u64>() else {
                        continue;
                    };
                    if frame.kind != "BOOKMARK" {
                        newest_event = newest_event.max(rv);
                    } else if rv > newest_event {
                        ahead.push(frame.resource_version);
                    }
                }
                if ahead.iter().any(|rv| cursors.contains(rv)) {
                    Ok(())
                } else {
                    Err(format!(
                        "watches sent from {cursors:?}; bookmarks ahead of every event: {ahead:?}"
                    ))
                }
            },
        )
        .await;
    under.shutdown().await;
}
