//! A loopback HTTP/1.1 server replaying a recorded apiserver conversation for one run.
//!
//! It answers what each peer asks, the way kube-apiserver would:
//! - a LIST, whole or paginated (`limit` + `continue`, honoured unless `resourceVersion=0`,
//!   which the watch cache serves whole);
//! - a streaming list (`watch=true&sendInitialEvents=true`, client-go's default since
//!   1.35): every item as ADDED, then the `k8s.io/initial-events-end` bookmark;
//! - a WATCH: the first one after the initial state gets the run's frames, the sentinel's
//!   last; every watch then stays open, silent, until its `timeoutSeconds` (at most
//!   [`IDLE_CAP`]) or the server stops.
//!
//! The time the first frame is written is the run's throughput clock start. Bounded: at most
//! [`MAX_CONNECTIONS`] connections, 64 KiB of request head, 30 s per read.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use crate::BenchError;
use crate::workload::{NAMESPACE, Workload, bookmark, push_typed_object};

/// Most connections served at once.
pub const MAX_CONNECTIONS: usize = 64;
/// Longest an idle watch is held open.
pub const IDLE_CAP: Duration = Duration::from_secs(120);
const MAX_HEAD: usize = 64 << 10;

/// Whether the run streams frames after the initial state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Only the initial state: for time to sync and memory.
    Sync,
    /// The initial state, then the workload's frames.
    Throughput,
}

#[derive(Debug, Default)]
struct State {
    first_frame: Option<SystemTime>,
    requests: BTreeMap<String, usize>,
}

struct Shared {
    workload: Arc<Workload>,
    mode: Mode,
    stop: AtomicBool,
    frames_claimed: AtomicBool,
    connections: AtomicUsize,
    state: Mutex<State>,
}

impl Shared {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A running replay server; dropping it stops it.
pub struct ReplayServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for ReplayServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplayServer")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl ReplayServer {
    /// Serves `workload` on a free loopback port.
    ///
    /// # Errors
    /// The port could not be bound.
    pub fn start(workload: Arc<Workload>, mode: Mode) -> Result<Self, BenchError> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            workload,
            mode,
            stop: AtomicBool::new(false),
            frames_claimed: AtomicBool::new(false),
            connections: AtomicUsize::new(0),
            state: Mutex::new(State::default()),
        });
        let accept = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("replay-accept".into())
            .spawn(move || accept_loop(&listener, &accept))?;
        Ok(ReplayServer { addr, shared })
    }

    /// `http://127.0.0.1:port`.
    #[must_use]
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// When the first frame after the initial state was written.
    #[must_use]
    pub fn first_frame(&self) -> Option<SystemTime> {
        self.shared.state().first_frame
    }

    /// Requests served so far, by kind (`list`, `list-page`, `watch-list`, `watch`, ...).
    #[must_use]
    pub fn requests(&self) -> BTreeMap<String, usize> {
        self.shared.state().requests.clone()
    }
}

impl Drop for ReplayServer {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
    }
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>) {
    while !shared.stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((stream, _)) => {
                if shared.connections.load(Ordering::SeqCst) >= MAX_CONNECTIONS {
                    continue; // dropped: the client sees a reset
                }
                shared.connections.fetch_add(1, Ordering::SeqCst);
                let conn = Arc::clone(shared);
                let spawned = std::thread::Builder::new()
                    .name("replay-conn".into())
                    .spawn(move || {
                        let _ = serve(stream, &conn);
                        conn.connections.fetch_sub(1, Ordering::SeqCst);
                    });
                if spawned.is_err() {
                    shared.connections.fetch_sub(1, Ordering::SeqCst);
                }
            }
            Err(_) => std::thread::sleep(Duration::from_millis(2)),
        }
    }
}

/// The parsed request line: path and query parameters.
#[derive(Debug, Default)]
struct Request {
    path: String,
    query: BTreeMap<String, String>,
    close: bool,
}

impl Request {
    fn param(&self, name: &str) -> Option<&str> {
        self.query.get(name).map(String::as_str)
    }
}

fn read_request(reader: &mut BufReader<TcpStream>) -> std::io::Result<Option<Request>> {
    let mut head = 0;
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Ok(None);
    }
    let target = line.split_whitespace().nth(1).unwrap_or("/").to_owned();
    let mut close = false;
    loop {
        let mut header = String::new();
        let n = reader.read_line(&mut header)?;
        head += n;
        if n == 0 || header == "\r\n" || header == "\n" || head > MAX_HEAD {
            break;
        }
        close |= header.to_ascii_lowercase().starts_with("connection: close");
    }
    if std::env::var_os("REPLAY_DEBUG").is_some() {
        eprintln!("{:?} {target}", SystemTime::now());
    }
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    let query = query
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    Ok(Some(Request {
        path: path.to_owned(),
        query,
        close,
    }))
}

fn serve(stream: TcpStream, shared: &Shared) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    stream.set_nodelay(true)?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut out = BufWriter::with_capacity(256 << 10, stream);
    // Keep-alive: LISTs may share a connection; a watch ends it.
    for _ in 0..10_000 {
        if shared.stop.load(Ordering::SeqCst) {
            return Ok(());
        }
        let Some(req) = read_request(&mut reader)? else {
            return Ok(());
        };
        let collection = format!("/api/v1/namespaces/{NAMESPACE}/pods");
        if req.path != collection {
            count(shared, "not-found");
            let body = br#"{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}"#;
            write_response(&mut out, 404, body)?;
            continue;
        }
        if req.param("watch") == Some("true") || req.param("watch") == Some("1") {
            return watch(&mut out, &req, shared);
        }
        list(&mut out, &req, shared)?;
        if req.close {
            return Ok(());
        }
    }
    Ok(())
}

fn count(shared: &Shared, kind: &str) {
    *shared.state().requests.entry(kind.to_owned()).or_default() += 1;
}

fn write_response(out: &mut impl Write, status: u16, body: &[u8]) -> std::io::Result<()> {
    write!(
        out,
        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )?;
    out.write_all(body)?;
    out.flush()
}

fn list(out: &mut impl Write, req: &Request, shared: &Shared) -> std::io::Result<()> {
    let items = &shared.workload.items;
    let whole = req.param("resourceVersion") == Some("0");
    let limit = req
        .param("limit")
        .and_then(|l| l.parse::<usize>().ok())
        .filter(|&l| l > 0 && !whole);
    let offset = req
        .param("continue")
        .and_then(|c| c.parse::<usize>().ok())
        .unwrap_or(0)
        .min(items.len());
    let end = limit.map_or(items.len(), |l| (offset + l).min(items.len()));
    count(shared, if limit.is_some() { "list-page" } else { "list" });
    let cont = if end < items.len() {
        end.to_string()
    } else {
        String::new()
    };
    let page = &items[offset..end];
    let mut body = Vec::with_capacity(page.iter().map(|i| i.len() + 1).sum::<usize>() + 128);
    write!(
        body,
        r#"{{"kind":"PodList","apiVersion":"v1","metadata":{{"resourceVersion":"{}","continue":"{cont}"}},"items":["#,
        shared.workload.list_rv
    )?;
    for (i, item) in page.iter().enumerate() {
        if i > 0 {
            body.push(b',');
        }
        body.extend_from_slice(item);
    }
    body.extend_from_slice(b"]}");
    write_response(out, 200, &body)
}

fn chunk(out: &mut impl Write, line: &[u8]) -> std::io::Result<()> {
    write!(out, "{:x}\r\n", line.len() + 1)?;
    out.write_all(line)?;
    out.write_all(b"\n\r\n")
}

fn watch(out: &mut impl Write, req: &Request, shared: &Shared) -> std::io::Result<()> {
    out.write_all(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n",
    )?;
    let workload = &shared.workload;
    let streaming_list = req.param("sendInitialEvents") == Some("true");
    if streaming_list {
        count(shared, "watch-list");
        let mut line = Vec::new();
        for item in &workload.items {
            // Items are whole objects: wrap each one as an ADDED frame, `type` first.
            line.clear();
            line.extend_from_slice(br#"{"type":"ADDED","object":"#);
            push_typed_object(&mut line, item);
            line.push(b'}');
            chunk(out, &line)?;
        }
        chunk(out, &bookmark(workload.list_rv, true))?;
        out.flush()?;
    } else {
        count(shared, "watch");
    }
    let live = streaming_list
        || req
            .param("resourceVersion")
            .is_some_and(|rv| !rv.is_empty());
    if shared.mode == Mode::Throughput
        && live
        && !shared.frames_claimed.swap(true, Ordering::SeqCst)
    {
        shared.state().first_frame = Some(SystemTime::now());
        let mut frame = Vec::new();
        for n in 0..workload.frames {
            workload.frame_into(n, &mut frame);
            chunk(out, &frame)?;
        }
        out.flush()?;
    }
    let timeout = req
        .param("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .map_or(IDLE_CAP, Duration::from_secs)
        .min(IDLE_CAP);
    let began = std::time::Instant::now();
    while began.elapsed() < timeout && !shared.stop.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(20));
    }
    out.write_all(b"0\r\n\r\n")?;
    out.flush()
}

#[cfg(test)]
mod tests {
    use std::io::{Read as _, Write as _};

    use super::*;

    fn get(server: &ReplayServer, query: &str) -> String {
        let mut stream = TcpStream::connect(server.addr).unwrap();
        write!(
            stream,
            "GET /api/v1/namespaces/{NAMESPACE}/pods?{query} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        response
    }

    #[test]
    fn list_pages_by_limit_and_continue_and_serves_whole_at_version_zero() {
        let templates = crate::workload::templates().unwrap();
        let workload = Arc::new(Workload::new(&templates, 4, 1, 1));
        let server = ReplayServer::start(workload, Mode::Sync).unwrap();
        let first = get(&server, "limit=2");
        assert!(first.contains(r#""continue":"2""#), "{}", &first[..200]);
        let last = get(&server, "limit=2&continue=4");
        assert!(last.contains(r#""continue":"""#));
        let whole = get(&server, "limit=2&resourceVersion=0");
        assert_eq!(
            whole.matches(r#""namespace":"bench""#).count(),
            5,
            "four pods and the sentinel"
        );
        assert_eq!(
            server.requests(),
            BTreeMap::from([("list".into(), 1), ("list-page".into(), 2)])
        );
    }
}
