//! `SmolTransport` and the smol controller against a scripted HTTP/1.1 server on loopback:
//! base URI and auth from kube's layers, retries, the read-idle and connect timeouts, exec
//! plugins on smol's blocking pool, the gcp refusal, and a whole controller run (sync,
//! watch event, reconcile, stop from inside the reconcile). No tokio runtime anywhere;
//! every wait is bounded.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_lite::{AsyncReadExt, AsyncWriteExt, StreamExt};
use reconcile_core::pod::PodView;
use reconcile_core::{KeyMap, ObjectKey};
use reconcile_smol::engine::Transport;
use reconcile_smol::{
    Action, ClientError, Controller, Reconcile, SmolTransport, Source, TransportOptions,
    default_error_policy, smol,
};
use smol::net::{TcpListener, TcpStream};

/// What the scripted server saw of one request.
#[derive(Debug, Clone)]
struct Seen {
    head: String,
}

impl Seen {
    fn path(&self) -> &str {
        self.head.split(' ').nth(1).unwrap_or("")
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.eq_ignore_ascii_case(name).then(|| value.trim())
        })
    }
}

/// How the server answers the n-th request (0-based), given its head.
type Script = Arc<dyn Fn(usize, &Seen) -> Reply + Send + Sync>;

enum Reply {
    /// A complete response: status, extra headers, body.
    Full(u16, Vec<(&'static str, String)>, String),
    /// A chunked 200 that sends these lines, then stays open and silent.
    Stall(Vec<String>),
}

struct Server {
    url: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    _task: smol::Task<()>,
}

impl Server {
    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

async fn serve(script: Script) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let count = Arc::new(AtomicUsize::new(0));
    let log = Arc::clone(&seen);
    let task = smol::spawn(async move {
        // At most 64 connections per test.
        for _ in 0..64 {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let (script, log, count) = (Arc::clone(&script), Arc::clone(&log), Arc::clone(&count));
            smol::spawn(connection(stream, script, log, count)).detach();
        }
    });
    Server {
        url,
        seen,
        _task: task,
    }
}

async fn connection(
    mut stream: TcpStream,
    script: Script,
    log: Arc<Mutex<Vec<Seen>>>,
    count: Arc<AtomicUsize>,
) {
    // Keep-alive: at most 16 requests per connection.
    for _ in 0..16 {
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            if head.len() > 16 << 10 || stream.read(&mut byte).await.unwrap_or(0) == 0 {
                return;
            }
            head.push(byte[0]);
        }
        let seen = Seen {
            head: String::from_utf8_lossy(&head).into_owned(),
        };
        log.lock().unwrap().push(seen.clone());
        let n = count.fetch_add(1, Ordering::SeqCst);
        match script(n, &seen) {
            Reply::Full(status, headers, body) => {
                let mut out = format!("HTTP/1.1 {status} X\r\ncontent-length: {}\r\n", body.len());
                for (k, v) in headers {
                    out.push_str(&format!("{k}: {v}\r\n"));
                }
                out.push_str("\r\n");
                out.push_str(&body);
                if stream.write_all(out.as_bytes()).await.is_err() {
                    return;
                }
            }
            Reply::Stall(lines) => {
                let mut out =
                    "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ncontent-type: application/json\r\n\r\n"
                        .to_owned();
                for line in lines {
                    let chunk = format!("{line}\n");
                    out.push_str(&format!("{:x}\r\n{chunk}\r\n", chunk.len()));
                }
                let _ = stream.write_all(out.as_bytes()).await;
                // Silent until the client gives up (bounded).
                smol::Timer::after(Duration::from_secs(30)).await;
                return;
            }
        }
    }
}

fn config(url: &str) -> kube::Config {
    let mut config = kube::Config::new(url.parse().unwrap());
    config.default_namespace = "ns".into();
    config
}

fn get(path: &str) -> http::Request<Vec<u8>> {
    http::Request::get(path).body(Vec::new()).unwrap()
}

fn fast(options: TransportOptions) -> TransportOptions {
    TransportOptions {
        retry_base: Duration::from_millis(10),
        retry_cap: Duration::from_millis(50),
        ..options
    }
}

async fn body_text(response: http::Response<reconcile_smol::engine::BodyStream>) -> String {
    let mut body = response.into_body();
    let mut text = Vec::new();
    while let Some(chunk) = body.next().await {
        text.extend_from_slice(&chunk.unwrap());
    }
    String::from_utf8(text).unwrap()
}

#[test]
fn base_uri_and_bearer_token_come_from_kubes_layers() {
    smol::block_on(async {
        let server = serve(Arc::new(|_, _| Reply::Full(200, vec![], "{}".into()))).await;
        let mut config = config(&format!("{}/prefix", server.url));
        config.auth_info.token = Some("s3cret".to_owned().into());
        config.headers = vec![(
            http::HeaderName::from_static("x-extra"),
            http::HeaderValue::from_static("yes"),
        )];
        let transport = SmolTransport::from_config(config).unwrap();
        let response = transport.send(get("/api/v1/pods?limit=1")).await.unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(body_text(response).await, "{}");
        let seen = server.seen();
        assert_eq!(seen.len(), 1);
        assert_eq!(seen[0].path(), "/prefix/api/v1/pods?limit=1");
        assert_eq!(seen[0].header("authorization"), Some("Bearer s3cret"));
        assert_eq!(seen[0].header("x-extra"), Some("yes"));
    });
}

#[test]
fn a_503_is_retried_with_retry_after_and_the_retries_are_bounded() {
    smol::block_on(async {
        let server = serve(Arc::new(|n, _| {
            if n < 2 {
                Reply::Full(503, vec![("retry-after", "0".into())], "busy".into())
            } else {
                Reply::Full(200, vec![], "ok".into())
            }
        }))
        .await;
        let transport =
            SmolTransport::with_options(config(&server.url), fast(TransportOptions::default()))
                .unwrap();
        let response = transport.send(get("/api/v1/pods")).await.unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(server.seen().len(), 3);

        // Always busy: 1 + `retries` attempts, then the 503 itself is the answer.
        let busy = serve(Arc::new(|_, _| Reply::Full(503, vec![], "busy".into()))).await;
        let transport = SmolTransport::with_options(
            config(&busy.url),
            fast(TransportOptions {
                retries: 2,
                ..TransportOptions::default()
            }),
        )
        .unwrap();
        let response = transport.send(get("/api/v1/pods")).await.unwrap();
        assert_eq!(response.status(), 503);
        assert_eq!(busy.seen().len(), 3);
    });
}

#[test]
fn a_refused_connection_is_retried_then_reported_with_where() {
    smol::block_on(async {
        // Bind, learn the port, close: nothing listens there now.
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap().port()
        };
        let transport = SmolTransport::with_options(
            config(&format!("http://127.0.0.1:{port}")),
            fast(TransportOptions::default()),
        )
        .unwrap();
        let Err(error) = transport.send(get("/api/v1/pods")).await else {
            panic!("a response from nowhere");
        };
        let text = error.to_string();
        assert!(text.contains("GET /api/v1/pods"), "{text}");
        assert!(text.contains("TCP connect to 127.0.0.1"), "{text}");
    });
}

#[test]
fn a_silent_watch_ends_with_a_read_idle_error() {
    smol::block_on(async {
        let server = serve(Arc::new(|_, _| {
            Reply::Stall(vec![r#"{"type":"BOOKMARK","object":{}}"#.into()])
        }))
        .await;
        let transport = SmolTransport::with_options(
            config(&server.url),
            TransportOptions {
                watch_idle_margin: Duration::from_millis(300),
                ..TransportOptions::default()
            },
        )
        .unwrap();
        let started = Instant::now();
        let response = transport
            .send(get("/api/v1/pods?watch=true&timeoutSeconds=1"))
            .await
            .unwrap();
        let mut body = response.into_body();
        let first = body.next().await.expect("a first chunk").unwrap();
        assert!(first.starts_with(b"{\"type\":\"BOOKMARK\""));
        let error = body.next().await.expect("an error").unwrap_err();
        assert!(error.to_string().contains("read-idle timeout"), "{error}");
        assert!(
            body.next().await.is_none(),
            "the stream ends after its error"
        );
        let took = started.elapsed();
        assert!(
            took >= Duration::from_millis(1300) && took < Duration::from_secs(10),
            "idle limit was 1.3s, took {took:?}"
        );
    });
}

#[test]
fn a_tls_handshake_that_never_answers_hits_the_connect_timeout() {
    smol::block_on(async {
        // Accepts TCP and says nothing: the ClientHello never gets an answer.
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let _accept = smol::spawn(async move {
            let mut held = Vec::new();
            for _ in 0..8 {
                if let Ok((stream, _)) = listener.accept().await {
                    held.push(stream);
                }
            }
        });
        let mut config = config(&format!("https://{addr}"));
        config.accept_invalid_certs = true;
        let transport = SmolTransport::with_options(
            config,
            TransportOptions {
                connect_timeout: Duration::from_millis(300),
                retries: 0,
                ..TransportOptions::default()
            },
        )
        .unwrap();
        let started = Instant::now();
        let Err(error) = transport.send(get("/api/v1/pods")).await else {
            panic!("a response from nowhere");
        };
        assert!(
            error.to_string().contains("timed out after 300ms"),
            "{error}"
        );
        assert!(started.elapsed() < Duration::from_secs(10));
    });
}

/// Writes an exec plugin script that counts its runs in `dir/runs`, saves its
/// `KUBERNETES_EXEC_INFO` to `dir/info`, and prints a token `t<run>` expiring in
/// `expires_in` seconds (or fails when `expires_in` is `None`).
fn plugin(name: &str, expires_in: Option<i64>) -> (std::path::PathBuf, kube::Config) {
    let dir = std::env::temp_dir().join(format!("reconcile-smol-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("plugin.sh");
    let body = match expires_in {
        Some(secs) => {
            let at = jiff::Timestamp::now()
                .checked_add(jiff::SignedDuration::from_secs(secs))
                .unwrap();
            format!(
                "n=$(($(cat \"$D/runs\" 2>/dev/null || echo 0) + 1)); echo $n > \"$D/runs\"\n\
                 printf '%s' \"$KUBERNETES_EXEC_INFO\" > \"$D/info\"\n\
                 echo '{{\"kind\":\"ExecCredential\",\"status\":{{\"token\":\"t'$n'\",\"expirationTimestamp\":\"{at}\"}}}}'\n"
            )
        }
        None => "echo 'no credentials for you' >&2; exit 3\n".to_owned(),
    };
    std::fs::write(&script, format!("#!/bin/sh\nD={}\n{body}", dir.display())).unwrap();
    let mut config = config("http://127.0.0.1:1");
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

fn runs(dir: &std::path::Path) -> u32 {
    std::fs::read_to_string(dir.join("runs"))
        .map(|s| s.trim().parse().unwrap())
        .unwrap_or(0)
}

#[test]
fn an_exec_plugin_runs_on_smol_and_its_token_is_cached_until_near_expiry() {
    smol::block_on(async {
        let server = serve(Arc::new(|_, _| Reply::Full(200, vec![], "{}".into()))).await;

        // An hour of validity: one run serves every request.
        let (dir, mut config) = plugin("long", Some(3600));
        config.cluster_url = server.url.parse().unwrap();
        let transport = SmolTransport::from_config(config).unwrap();
        assert_eq!(runs(&dir), 0, "nothing runs before the first request");
        for _ in 0..3 {
            transport.send(get("/api/v1/pods")).await.unwrap();
        }
        assert_eq!(runs(&dir), 1);
        let info = std::fs::read_to_string(dir.join("info")).unwrap();
        assert!(
            info.contains(r#""kind":"ExecCredential""#) && info.contains(r#""interactive":false"#),
            "{info}"
        );

        // Thirty seconds of validity is inside the refresh margin: every request re-runs it.
        let (short, mut config) = plugin("short", Some(30));
        config.cluster_url = server.url.parse().unwrap();
        let transport = SmolTransport::from_config(config).unwrap();
        transport.send(get("/api/v1/pods")).await.unwrap();
        transport.send(get("/api/v1/pods")).await.unwrap();
        assert_eq!(runs(&short), 2);

        let tokens: Vec<Option<String>> = server
            .seen()
            .iter()
            .map(|s| s.header("authorization").map(str::to_owned))
            .collect();
        let t = |s: &str| Some(s.to_owned());
        assert_eq!(
            tokens,
            vec![
                t("Bearer t1"),
                t("Bearer t1"),
                t("Bearer t1"),
                t("Bearer t1"),
                t("Bearer t2")
            ]
        );
        let _ = std::fs::remove_dir_all(dir);
        let _ = std::fs::remove_dir_all(short);
    });
}

#[test]
fn a_failing_exec_plugin_fails_the_request_with_its_stderr() {
    smol::block_on(async {
        let server = serve(Arc::new(|_, _| Reply::Full(200, vec![], "{}".into()))).await;
        let (dir, mut config) = plugin("failing", None);
        config.cluster_url = server.url.parse().unwrap();
        let transport = SmolTransport::from_config(config).unwrap();
        let Err(error) = transport.send(get("/api/v1/pods")).await else {
            panic!("a request without credentials went out");
        };
        let text = error.to_string();
        assert!(
            text.contains("exec auth") && text.contains("no credentials for you"),
            "{text}"
        );
        assert!(server.seen().is_empty(), "nothing reached the server");
        let _ = std::fs::remove_dir_all(dir);
    });
}

#[test]
fn a_gcp_auth_provider_user_is_refused_with_a_clear_error() {
    let mut config = config("https://127.0.0.1:6443");
    config.auth_info = serde_json::from_value(serde_json::json!({
        "auth-provider": { "name": "gcp", "config": {} }
    }))
    .unwrap();
    let error = SmolTransport::from_config(config).unwrap_err();
    assert!(
        matches!(error, ClientError::RefreshingAuth { .. }),
        "{error}"
    );
    let text = error.to_string();
    assert!(text.contains("gcp") && text.contains("tokio"), "{text}");
}

const LIST: &str = r#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"10"},"items":[
  {"metadata":{"name":"p1","namespace":"ns","resourceVersion":"5","labels":{"cell":"a"}}}]}"#;

const ADDED: &str = r#"{"type":"ADDED","object":{"metadata":{"name":"p2","namespace":"ns","resourceVersion":"11","labels":{"cell":"a"}}}}"#;

#[test]
fn a_controller_on_smol_syncs_follows_the_watch_and_stops_from_inside_reconcile() {
    smol::block_on(async {
        let server = serve(Arc::new(|_, seen: &Seen| {
            if seen.path().contains("watch=true") {
                Reply::Stall(vec![ADDED.into()])
            } else {
                Reply::Full(200, vec![], LIST.into())
            }
        }))
        .await;
        let transport = SmolTransport::from_config(config(&server.url)).unwrap();
        let source = Source::pods(transport, Some("ns")).labels("cell");
        let controller = Controller::new(source, KeyMap::by_label("cell")).concurrency(2);
        let handle = controller.handle();
        // A reader on another smol task: waits for the first sync, then reads by key.
        let cache = handle.cache();
        let reader = smol::spawn(async move {
            cache.wait_until_ready().await.expect("synced");
            cache.get(&ObjectKey::new(Some("ns"), "p1")).is_some()
        });
        let calls: Arc<Mutex<Vec<Vec<String>>>> = Arc::default();
        let stopper = handle.clone();
        let run = controller.run(
            move |request: Reconcile<PodView, String>, calls: Arc<Mutex<Vec<Vec<String>>>>| {
                // The whole cache as of dispatch holds at least this cell's members.
                assert!(request.cache().len() >= request.members().len());
                let (_cell, members) = request.into_parts();
                let stopper = stopper.clone();
                async move {
                    assert!(
                        tokio::runtime::Handle::try_current().is_err(),
                        "a tokio runtime context inside reconcile"
                    );
                    let names: Vec<String> = members
                        .iter()
                        .filter_map(|p| p.metadata.name.as_deref().map(str::to_owned))
                        .collect();
                    let both = names.len() == 2;
                    calls.lock().unwrap().push(names);
                    if both {
                        // Stopping from inside a reconcile must not deadlock.
                        stopper.stop();
                    }
                    Ok::<_, std::convert::Infallible>(Action::await_change())
                }
            },
            default_error_policy,
            Arc::clone(&calls),
        );
        let ended = futures_lite::future::or(async { Some(run.await) }, async {
            smol::Timer::after(Duration::from_secs(20)).await;
            None
        })
        .await;
        let result = ended.expect("the controller did not stop within 20s");
        assert!(result.is_ok(), "{result:?}");
        assert!(handle.is_stopped());
        assert!(reader.await, "the reader found p1 once the cache was ready");
        assert_eq!(
            handle.cache().state().len(),
            2,
            "the reader's view at the end"
        );
        let calls = calls.lock().unwrap().clone();
        assert_eq!(
            calls.last().unwrap(),
            &vec!["p1".to_owned(), "p2".to_owned()]
        );
        let seen = server.seen();
        assert!(seen[0].path().contains("labelSelector=cell"), "{seen:?}");
        assert!(
            seen.iter().any(|s| s.path().contains("resourceVersion=10")),
            "the watch resumes from the list's version: {seen:?}"
        );
    });
}
