//! The exec credential plugin's bounds (issue 17): a timeout, no lock held while it runs, a
//! bounded read of its output, a redacted hint from its stderr; and the insecure-setting
//! warnings. The cluster URL is a closed port: a request fails right after its credential
//! is fetched, so how long a request takes says how long it waited for the plugin.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use reconcile_smol::engine::transport::InsecureSetting;
use reconcile_smol::engine::{Transport, TransportError};
use reconcile_smol::{SmolTransport, TransportOptions};

/// A plugin running `body` (sh), in a directory of its own; `D` names the directory.
fn plugin(name: &str, body: &str) -> (PathBuf, kube::Config) {
    let dir =
        std::env::temp_dir().join(format!("reconcile-smol-exec-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("plugin.sh");
    std::fs::write(&script, format!("#!/bin/sh\nD={}\n{body}", dir.display())).unwrap();
    let mut config = kube::Config::new("http://127.0.0.1:1".parse().unwrap());
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

fn transport(config: kube::Config, exec_timeout: Duration) -> SmolTransport {
    SmolTransport::with_options(
        config,
        TransportOptions {
            retries: 0,
            exec_timeout,
            ..TransportOptions::default()
        },
    )
    .unwrap()
}

async fn send(transport: &SmolTransport) -> (Duration, TransportError) {
    let started = Instant::now();
    let request = http::Request::get("/api/v1/pods").body(Vec::new()).unwrap();
    let Err(error) = transport.send(request).await else {
        panic!("the closed port answered");
    };
    (started.elapsed(), error)
}

fn token(expires_in: i64) -> String {
    let at = jiff::Timestamp::now()
        .checked_add(jiff::SignedDuration::from_secs(expires_in))
        .unwrap();
    format!(r#"{{"kind":"ExecCredential","status":{{"token":"t","expirationTimestamp":"{at}"}}}}"#)
}

#[test]
fn a_hung_plugin_is_killed_at_the_timeout() {
    smol::block_on(async {
        let (dir, config) = plugin("hung", "sleep 30\n");
        let transport = transport(config, Duration::from_millis(500));
        let (took, error) = send(&transport).await;
        assert!(
            error.to_string().contains("did not finish within 500ms"),
            "{error}"
        );
        assert!(took < Duration::from_secs(10), "{took:?}");
        let _ = std::fs::remove_dir_all(dir);
    });
}

#[test]
fn over_https_a_hung_plugin_is_bounded_too_and_runs_once() {
    smol::block_on(async {
        // kube's `rustls_client_config` ran the plugin, with no bound, while the transport
        // was built for an https:// cluster; then the request path ran it once more.
        let (dir, mut config) = plugin("https-hung", "echo run >> $D/runs\nsleep 30\n");
        config.cluster_url = "https://127.0.0.1:1".parse().unwrap();
        let started = Instant::now();
        let transport = transport(config, Duration::from_millis(500));
        assert!(
            started.elapsed() < Duration::from_millis(400),
            "built at once"
        );
        let (took, error) = send(&transport).await;
        assert!(
            error.to_string().contains("did not finish within 500ms"),
            "{error}"
        );
        assert!(took < Duration::from_secs(3), "{took:?}");
        let runs = std::fs::read_to_string(dir.join("runs")).unwrap_or_default();
        assert_eq!(runs.lines().count(), 1, "{runs:?}");
        let _ = std::fs::remove_dir_all(dir);
    });
}

#[test]
fn over_https_a_working_plugin_runs_once_for_tls_and_requests() {
    smol::block_on(async {
        let (dir, mut config) = plugin(
            "https-once",
            &format!("echo run >> $D/runs\necho '{}'\n", token(3600)),
        );
        config.cluster_url = "https://127.0.0.1:1".parse().unwrap();
        let transport = transport(config, Duration::from_secs(5));
        for _ in 0..3 {
            let (_, error) = send(&transport).await;
            assert!(!error.to_string().contains("exec auth"), "{error}");
        }
        let runs = std::fs::read_to_string(dir.join("runs")).unwrap_or_default();
        assert_eq!(runs.lines().count(), 1, "{runs:?}");
        let _ = std::fs::remove_dir_all(dir);
    });
}

#[test]
fn a_refresh_in_progress_does_not_hold_up_requests_with_a_valid_token() {
    smol::block_on(async {
        // The first run's token is valid for 30 s, inside the 60 s refresh margin, so the
        // next request refreshes it; that run takes 3 s.
        let body = format!(
            "if [ -e \"$D/ran\" ]; then sleep 3; fi\ntouch \"$D/ran\"\necho '{}'\n",
            token(30)
        );
        let (dir, config) = plugin("slow-refresh", &body);
        let transport = transport(config, Duration::from_secs(20));
        let (took, error) = send(&transport).await;
        assert!(error.to_string().contains("127.0.0.1:1"), "{error}");
        assert!(took < Duration::from_secs(2), "first run {took:?}");
        let refreshing = {
            let transport = transport.clone();
            smol::spawn(async move { send(&transport).await })
        };
        smol::Timer::after(Duration::from_millis(300)).await;
        // While the refresh runs: the still-valid token goes out at once.
        let (took, error) = send(&transport).await;
        assert!(error.to_string().contains("127.0.0.1:1"), "{error}");
        assert!(
            took < Duration::from_secs(1),
            "waited {took:?} for the refresh"
        );
        let (took, _) = refreshing.await;
        assert!(took >= Duration::from_secs(3), "{took:?}");
        let _ = std::fs::remove_dir_all(dir);
    });
}

#[test]
fn a_plugin_with_runaway_output_is_stopped_at_the_bound() {
    smol::block_on(async {
        // 2 MiB on stdout, then it would sit there for 30 s.
        let (dir, config) = plugin(
            "runaway",
            "head -c 2097152 /dev/zero | tr '\\0' x\nsleep 30\n",
        );
        let transport = transport(config, Duration::from_secs(20));
        let (took, error) = send(&transport).await;
        assert!(error.to_string().contains("output exceeds"), "{error}");
        assert!(took < Duration::from_secs(10), "{took:?}");
        let _ = std::fs::remove_dir_all(dir);
    });
}

#[test]
fn runaway_output_from_something_the_plugin_started_stops_it_all() {
    smol::block_on(async {
        // The writer runs in a subshell that outlives a stop of the plugin's own process
        // and then holds its pipes for 30 s: only stopping the plugin's group ends it.
        let (dir, config) = plugin(
            "runaway-child",
            "( echo $(exec sh -c 'echo $PPID') > \"$D/pid\"; \
               head -c 2097152 /dev/zero | tr '\\0' x; sleep 30 ) &\nwait\n",
        );
        let transport = transport(config, Duration::from_secs(20));
        let (took, error) = send(&transport).await;
        assert!(error.to_string().contains("output exceeds"), "{error}");
        assert!(took < Duration::from_secs(10), "{took:?}");
        let pid = std::fs::read_to_string(dir.join("pid")).unwrap();
        let stat = PathBuf::from(format!("/proc/{}/stat", pid.trim()));
        // Gone, or dead and not yet reaped by whoever adopted it.
        let dead = || std::fs::read_to_string(&stat).map_or(true, |s| s.contains(") Z "));
        let since = Instant::now();
        while !dead() && since.elapsed() < Duration::from_secs(5) {
            smol::Timer::after(Duration::from_millis(20)).await;
        }
        assert!(dead(), "the subshell {} outlived the stop", pid.trim());
        let _ = std::fs::remove_dir_all(dir);
    });
}

#[test]
fn a_plugin_that_leaves_something_holding_its_pipes_is_not_waited_for() {
    smol::block_on(async {
        // The plugin answers and exits; what it left behind keeps its pipes open for 30 s.
        let body = format!("sleep 30 &\necho '{}'\n", token(3600));
        let (dir, config) = plugin("lingering", &body);
        let transport = transport(config, Duration::from_secs(20));
        let (took, error) = send(&transport).await;
        // The credential was used: the request reached the (closed) cluster port.
        assert!(error.to_string().contains("127.0.0.1:1"), "{error}");
        assert!(took < Duration::from_secs(10), "{took:?}");
        let _ = std::fs::remove_dir_all(dir);
    });
}

#[test]
fn a_failed_plugins_stderr_reaches_the_error_only_as_a_redacted_hint() {
    smol::block_on(async {
        let (dir, config) = plugin(
            "leaky",
            "head -c 100000 /dev/zero | tr '\\0' y >&2\n\
             echo >&2\n\
             echo 'debug: password=hunter2' >&2\n\
             echo 'refused: token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl is revoked' >&2\n\
             exit 4\n",
        );
        let transport = transport(config, Duration::from_secs(20));
        let (_, error) = send(&transport).await;
        let text = error.to_string();
        assert!(
            text.contains("refused: token [redacted] is revoked"),
            "{text}"
        );
        assert!(!text.contains("eyJ") && !text.contains("hunter2"), "{text}");
        assert!(!text.contains("yyyy"), "{text}");
        assert!(text.len() < 400, "{} bytes: {text}", text.len());
        let _ = std::fs::remove_dir_all(dir);
    });
}

#[test]
fn insecure_settings_are_named_when_the_transport_is_built() {
    let mut config = kube::Config::new("http://127.0.0.1:1".parse().unwrap());
    let plain = SmolTransport::from_config(config.clone()).unwrap();
    assert!(
        plain.insecure().is_empty(),
        "no credentials, nothing to leak"
    );
    config.auth_info.token = Some("sekret".to_owned().into());
    let with_token = SmolTransport::from_config(config).unwrap();
    assert_eq!(
        with_token.insecure(),
        [InsecureSetting::CredentialsOverHttp {
            cluster: "http://127.0.0.1:1/".into(),
            credential: "a bearer token",
        }]
    );
    assert!(!with_token.insecure()[0].to_string().contains("sekret"));

    let mut config = kube::Config::new("https://127.0.0.1:1".parse().unwrap());
    config.accept_invalid_certs = true;
    let skip = SmolTransport::from_config(config).unwrap();
    assert!(
        matches!(skip.insecure(), [InsecureSetting::SkipTlsVerify { .. }]),
        "{:?}",
        skip.insecure()
    );
}

#[test]
fn requests_waiting_on_a_failing_refresh_share_its_failure() {
    smol::block_on(async {
        let (dir, config) = plugin(
            "shared-failure",
            "echo x >> \"$D/runs\"\nsleep 1\necho 'backend unavailable' >&2\nexit 2\n",
        );
        let transport = transport(config, Duration::from_secs(20));
        let requests: Vec<_> = (0..3)
            .map(|_| {
                let transport = transport.clone();
                smol::spawn(async move { send(&transport).await })
            })
            .collect();
        for request in requests {
            let (_, error) = request.await;
            assert!(error.to_string().contains("backend unavailable"), "{error}");
        }
        let runs = std::fs::read_to_string(dir.join("runs")).unwrap();
        assert_eq!(runs.lines().count(), 1, "the plugin ran once for all three");
        let _ = std::fs::remove_dir_all(dir);
    });
}
