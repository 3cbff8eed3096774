//! Exec credential plugins on reconcile-tokio (issue 31): kube ran them with no time limit,
//! three times while it built a client. The cluster URL is a closed `https://` port: a
//! request fails right after its credential is fetched, so how long it takes says how long
//! it waited for the plugin.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use reconcile_tokio::engine::{Transport, TransportError};
use reconcile_tokio::{KubeTransport, KubeTransportOptions};

/// A plugin running `body` (sh), in a directory of its own, which `$D` names.
fn plugin(name: &str, body: &str) -> (PathBuf, kube::Config) {
    let dir = std::env::temp_dir().join(format!(
        "reconcile-tokio-exec-{}-{name}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("plugin.sh");
    std::fs::write(&script, format!("#!/bin/sh\nD={}\n{body}", dir.display())).unwrap();
    let mut config = kube::Config::new("https://127.0.0.1:1".parse().unwrap());
    config.auth_info = serde_json::from_value(serde_json::json!({
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": "/bin/sh",
            "args": [script.display().to_string()],
            "interactiveMode": "Never"
        }
    }))
    .unwrap();
    (dir, config)
}

async fn send(transport: &KubeTransport) -> (Duration, TransportError) {
    let started = Instant::now();
    let request = http::Request::get("/api/v1/pods").body(Vec::new()).unwrap();
    let Err(error) = transport.send(request).await else {
        panic!("the closed port answered");
    };
    (started.elapsed(), error)
}

fn runs(dir: &std::path::Path) -> usize {
    std::fs::read_to_string(dir.join("runs"))
        .unwrap_or_default()
        .lines()
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_plugin_is_killed_at_the_timeout_and_the_client_is_built_at_once() {
    let (dir, config) = plugin("hung", "echo run >> $D/runs\nsleep 30\n");
    let started = Instant::now();
    let transport = KubeTransport::with_options(
        config,
        KubeTransportOptions::default().exec_timeout(Duration::from_millis(500)),
    )
    .unwrap();
    assert!(
        started.elapsed() < Duration::from_millis(400),
        "built at once"
    );
    let (took, error) = send(&transport).await;
    assert!(
        error.to_string().contains("did not finish within 500ms"),
        "{error}"
    );
    assert!(error.to_string().contains("/bin/sh"), "{error}");
    assert!(took < Duration::from_secs(3), "{took:?}");
    assert_eq!(runs(&dir), 1);
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_working_plugin_runs_once_across_construction_and_requests() {
    let (dir, config) = plugin(
        "once",
        "echo run >> $D/runs\necho '{\"kind\":\"ExecCredential\",\"status\":{\"token\":\"t\",\"expirationTimestamp\":\"2099-01-01T00:00:00Z\"}}'\n",
    );
    let transport = KubeTransport::from_config(config).unwrap();
    for _ in 0..3 {
        let (_, error) = send(&transport).await;
        assert!(!error.to_string().contains("exec auth"), "{error}");
    }
    assert_eq!(runs(&dir), 1);
    let _ = std::fs::remove_dir_all(dir);
}
