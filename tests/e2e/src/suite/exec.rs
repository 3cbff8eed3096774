//! Exec credential plugins on the real https apiserver (issue 31): a hung plugin fails the
//! request at the driver's exec timeout and is killed with everything it started, and a
//! working one runs once across the transport's construction and its first requests.
//! kube ran the plugin with no bound while it built the TLS config (both drivers, over
//! `https://`) and the client (tokio), and then again for requests.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use reconcile_engine::Transport;
use reconcile_k8s_env::{ApiServer, K8sEnv};
use serde_json::json;

use crate::harness::{Case, DriverUnderTest};

/// The exec timeout of these cases.
const EXEC_TIMEOUT: Duration = Duration::from_secs(1);

/// A directory of the case's own, emptied.
fn case_dir(driver: &str, case: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "reconcile-e2e-exec-{}-{driver}-{case}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a temp dir");
    dir
}

/// A kubeconfig for the watch-cache-on apiserver (`https://`, its CA) whose user runs
/// `body` as a `sh` script through `users[].user.exec`.
fn kubeconfig(env: &K8sEnv, dir: &Path, body: &str) -> PathBuf {
    let script = dir.join("plugin.sh");
    std::fs::write(&script, format!("#!/bin/sh\nD={}\n{body}", dir.display()))
        .expect("the plugin script");
    let ca = dir.join("ca.crt");
    std::fs::write(&ca, env.ca_pem()).expect("the CA");
    let config = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{ "name": "c", "cluster": {
            "server": env.server_url(ApiServer::Cached),
            "certificate-authority": ca.display().to_string(),
        }}],
        "users": [{ "name": "u", "user": { "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": "/bin/sh",
            "args": [script.display().to_string()],
            "interactiveMode": "Never",
        }}}],
        "contexts": [{ "name": "x", "context": { "cluster": "c", "user": "u" } }],
        "current-context": "x",
    });
    let path = dir.join("kubeconfig");
    std::fs::write(&path, config.to_string()).expect("the kubeconfig");
    path
}

fn get(path: &str) -> http::Request<Vec<u8>> {
    http::Request::get(path)
        .body(Vec::new())
        .expect("a request")
}

/// Whether process `pid` is gone (or a zombie, waiting to be reaped).
fn gone(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

/// A plugin that never answers (a shell waiting on a `sleep`, both writing their pids):
/// the transport is built at once, the first request fails at the exec timeout with an
/// error naming the command, and neither process outlives it.
pub async fn a_hung_exec_plugin_fails_at_its_timeout_and_is_killed<D: DriverUnderTest>(
    case: Case<D>,
) {
    let _steady = case.env.steady();
    let dir = case_dir(D::NAME, case.name);
    let config = kubeconfig(
        case.env,
        &dir,
        "echo $$ >> $D/pids\nsleep 300 &\necho $! >> $D/pids\nwait\n",
    );
    let started = Instant::now();
    let transport = D::connect_with_exec_timeout(&config, EXEC_TIMEOUT)
        .await
        .unwrap_or_else(|e| panic!("{}: cannot connect: {e}", case.name));
    let built = started.elapsed();
    assert!(
        built < Duration::from_millis(500),
        "{}: built in {built:?}",
        case.name
    );
    let started = Instant::now();
    let Err(error) = transport.send(get("/api/v1/namespaces")).await else {
        panic!("{}: a request went through with a hung plugin", case.name);
    };
    let took = started.elapsed();
    assert!(
        error
            .0
            .contains("\"/bin/sh\" did not finish within 1s and was killed"),
        "{}: {error}",
        case.name
    );
    assert!(
        took < EXEC_TIMEOUT + Duration::from_secs(1),
        "{}: failed after {took:?}",
        case.name
    );
    let pids = std::fs::read_to_string(dir.join("pids")).unwrap_or_default();
    assert_eq!(pids.lines().count(), 2, "{}: {pids:?}", case.name);
    let deadline = Instant::now() + Duration::from_secs(2);
    for pid in pids.lines() {
        while !gone(pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(gone(pid), "{}: plugin process {pid} still runs", case.name);
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// A plugin that answers with the environment's token (valid for years): the transport's
/// construction and three requests run it once.
pub async fn an_exec_plugin_runs_once_across_construction_and_first_requests<D: DriverUnderTest>(
    case: Case<D>,
) {
    let _steady = case.env.steady();
    let dir = case_dir(D::NAME, case.name);
    let credential = json!({
        "apiVersion": "client.authentication.k8s.io/v1",
        "kind": "ExecCredential",
        "status": { "token": case.env.token(), "expirationTimestamp": "2099-01-01T00:00:00Z" },
    });
    let config = kubeconfig(
        case.env,
        &dir,
        &format!("echo run >> $D/runs\necho '{credential}'\n"),
    );
    let transport = D::connect_with_exec_timeout(&config, Duration::from_secs(10))
        .await
        .unwrap_or_else(|e| panic!("{}: cannot connect: {e}", case.name));
    for path in [
        "/api/v1/namespaces",
        "/api/v1/namespaces/default/pods",
        "/version",
    ] {
        let response = transport
            .send(get(path))
            .await
            .unwrap_or_else(|e| panic!("{}: GET {path}: {e}", case.name));
        assert_eq!(response.status(), 200, "{}: GET {path}", case.name);
    }
    let runs = std::fs::read_to_string(dir.join("runs")).unwrap_or_default();
    assert_eq!(
        runs.lines().count(),
        1,
        "{}: the plugin ran {runs:?}",
        case.name
    );
    let _ = std::fs::remove_dir_all(dir);
}
