//! `reconcile-sim capture` and its credentials (issue 31): an exec plugin runs under
//! `--exec-timeout` and is killed at it (on the real https apiserver of `reconcile-k8s-env`),
//! and insecure connection settings are warned about on stderr, as every driver-built
//! transport warns.
#![cfg(feature = "capture-cli")]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_reconcile-sim");

fn dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "reconcile-sim-capture-creds-{}-{name}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A kubeconfig (JSON, which is YAML) with one cluster and one user.
fn kubeconfig(dir: &Path, cluster: serde_json::Value, user: serde_json::Value) -> PathBuf {
    let config = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{ "name": "c", "cluster": cluster }],
        "users": [{ "name": "u", "user": user }],
        "contexts": [{ "name": "x", "context": { "cluster": "c", "user": "u", "namespace": "default" } }],
        "current-context": "x",
    });
    let path = dir.join("kubeconfig");
    std::fs::write(&path, config.to_string()).unwrap();
    path
}

/// `reconcile-sim capture pods --duration 3` with `KUBECONFIG` and no `RUST_LOG`.
fn capture(dir: &Path, kubeconfig: &Path, extra: &[&str]) -> (Duration, Output) {
    let started = Instant::now();
    let out = Command::new(BIN)
        .args(["capture", "pods", "--duration", "3", "-o"])
        .arg(dir.join("out.jsonl"))
        .args(extra)
        .env("KUBECONFIG", kubeconfig)
        .env_remove("RUST_LOG")
        .output()
        .expect("the binary runs");
    (started.elapsed(), out)
}

#[test]
fn insecure_settings_are_warned_about_on_stderr() {
    let dir = dir("insecure");
    let token = "f00dfeedf00dfeedf00dfeedf00dfeed";
    let config = kubeconfig(
        &dir,
        serde_json::json!({ "server": "https://127.0.0.1:1", "insecure-skip-tls-verify": true }),
        serde_json::json!({}),
    );
    let (_, out) = capture(&dir, &config, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a closed port: {stderr}");
    assert!(
        stderr.contains("insecure-skip-tls-verify is set for https://127.0.0.1:1"),
        "{stderr}"
    );
    let config = kubeconfig(
        &dir,
        serde_json::json!({ "server": "http://127.0.0.1:1" }),
        serde_json::json!({ "token": token }),
    );
    let (_, out) = capture(&dir, &config, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("a bearer token sent unencrypted to http://127.0.0.1:1"),
        "{stderr}"
    );
    assert!(!stderr.contains(token), "{stderr}");
    let _ = std::fs::remove_dir_all(dir);
}

/// Whether process `pid` is gone (or a zombie, waiting for its parent's reaper).
fn gone(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

#[test]
fn a_hung_exec_plugin_fails_the_capture_at_its_timeout_and_is_killed() {
    let Some(env) = reconcile_k8s_env::shared_or_skip("capture_hung_exec_plugin") else {
        return;
    };
    let dir = dir("hung");
    let script = dir.join("plugin.sh");
    // The shell and the sleep it starts both write their pids; neither may outlive the
    // capture.
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho $$ >> {d}/pids\nsleep 300 &\necho $! >> {d}/pids\nwait\n",
            d = dir.display()
        ),
    )
    .unwrap();
    let ca = dir.join("ca.crt");
    std::fs::write(&ca, env.ca_pem()).unwrap();
    let config = kubeconfig(
        &dir,
        serde_json::json!({
            "server": env.server_url(reconcile_k8s_env::ApiServer::Cached),
            "certificate-authority": ca.display().to_string(),
        }),
        serde_json::json!({ "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": "/bin/sh",
            "args": [script.display().to_string()],
            "env": [{ "name": "PLUGIN_SECRET", "value": "s3cr3t-in-the-env" }],
            "interactiveMode": "Never",
        }}),
    );
    let (took, out) = capture(&dir, &config, &["--exec-timeout", "1"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("\"/bin/sh\" did not finish within 1s and was killed"),
        "{stderr}"
    );
    assert!(!stderr.contains("s3cr3t-in-the-env"), "{stderr}");
    assert!(took < Duration::from_secs(3), "the bound is 1 s: {took:?}");
    let pids = std::fs::read_to_string(dir.join("pids")).unwrap();
    assert_eq!(pids.lines().count(), 2, "{pids:?}");
    let deadline = Instant::now() + Duration::from_secs(2);
    for pid in pids.lines() {
        while !gone(pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(gone(pid), "plugin process {pid} is still running");
    }
    let _ = std::fs::remove_dir_all(dir);
}
