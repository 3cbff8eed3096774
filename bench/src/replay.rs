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
//! It serves one collection per [`Workload`], each at its own path (pods, or ReplicaSets and
//! pods for the two-source scenario); a request for any other path gets a 404. With several
//! collections, no frame is written before every collection has a live watch, so the clock
//! starts on a peer that has synced every source and is watching them all.
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
use crate::workload::{NAMESPACE, Workload, bookmark_of, push_typed_object};

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

/// One served collection.
struct Collection {
    path: String,
    workload: Arc<Workload>,
    /// A live watch has taken this collection's frames.
    frames_claimed: AtomicBool,
}

struct Shared {
    collections: Vec<Collection>,
    mode: Mode,
    stop: AtomicBool,
    /// Collections whose frames a live watch has taken.
    claimed: AtomicUsize,
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
        Self::start_all(vec![workload], mode)
    }

    /// Serves every collection of `workloads` (each at its resource's path in
    /// [`NAMESPACE`]) on a free loopback port.
    ///
    /// # Errors
    /// The port could not be bound.
    pub fn start_all(workloads: Vec<Arc<Workload>>, mode: Mode) -> Result<Self, BenchError> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let collections = workloads
            .into_iter()
            .map(|workload| Collection {
                path: workload.resource.path(NAMESPACE),
                workload,
                frames_claimed: AtomicBool::new(false),
            })
            .collect();
        let shared = Arc::new(Shared {
            collections,
            mode,
            stop: AtomicBool::new(false),
            claimed: AtomicUsize::new(0),
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

    /// Requests served so far, by kind (`list`, `list-page`, `watch-list`, `watch`, ...),
    /// followed by the collection (`list pods`) when the server has several.
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
        let Some(collection) = shared.collections.iter().find(|c| c.path == req.path) else {
            count(shared, None, "not-found");
            let body = br#"{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}"#;
            write_response(&mut out, 404, body)?;
            if req.close {
                return Ok(());
            }
            continue;
        };
        if req.param("watch") == Some("true") || req.param("watch") == Some("1") {
            return watch(&mut out, &req, shared, collection);
        }
        list(&mut out, &req, shared, collection)?;
        if req.close {
            return Ok(());
        }
    }
    Ok(())
}

/// Counts one request of `kind`, naming the collection when there are several.
fn count(shared: &Shared, collection: Option<&Collection>, kind: &str) {
    let key = match collection {
        Some(c) if shared.collections.len() > 1 => {
            format!("{kind} {}", c.workload.resource.plural())
        }
        _ => kind.to_owned(),
    };
    *shared.state().requests.entry(key).or_default() += 1;
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

fn list(
    out: &mut impl Write,
    req: &Request,
    shared: &Shared,
    collection: &Collection,
) -> std::io::Result<()> {
    let workload = &collection.workload;
    let items = &workload.items;
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
    let kind = if limit.is_some() { "list-page" } else { "list" };
    count(shared, Some(collection), kind);
    let cont = if end < items.len() {
        end.to_string()
    } else {
        String::new()
    };
    let mut head = Vec::with_capacity(256);
    write!(
        head,
        r#"{{"kind":"{}List","apiVersion":"{}","metadata":{{"resourceVersion":"{}","continue":"{cont}"}},"items":["#,
        workload.resource.kind(),
        workload.resource.api_version(),
        workload.list_rv
    )?;
    // Written item by item, never whole: a million pods are 8.5 GB of JSON.
    let length = head.len() + items.bytes(offset..end) + (end - offset).saturating_sub(1) + 2;
    write!(
        out,
        "HTTP/1.1 200 X\r\nContent-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
    )?;
    out.write_all(&head)?;
    let mut item = Vec::new();
    for i in offset..end {
        item.clear();
        if i > offset {
            item.push(b',');
        }
        items.write(i, &mut item);
        out.write_all(&item)?;
    }
    out.write_all(b"]}")?;
    out.flush()
}

fn chunk(out: &mut impl Write, line: &[u8]) -> std::io::Result<()> {
    write!(out, "{:x}\r\n", line.len() + 1)?;
    out.write_all(line)?;
    out.write_all(b"\n\r\n")
}

fn watch(
    out: &mut impl Write,
    req: &Request,
    shared: &Shared,
    collection: &Collection,
) -> std::io::Result<()> {
    out.write_all(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n",
    )?;
    let workload = &collection.workload;
    let resource = workload.resource;
    let streaming_list = req.param("sendInitialEvents") == Some("true");
    if streaming_list {
        count(shared, Some(collection), "watch-list");
        let (mut line, mut item) = (Vec::new(), Vec::new());
        for i in 0..workload.items.len() {
            // Items are whole objects: wrap each one as an ADDED frame, `type` first.
            item.clear();
            workload.items.write(i, &mut item);
            line.clear();
            line.extend_from_slice(br#"{"type":"ADDED","object":"#);
            push_typed_object(&mut line, resource, &item);
            line.push(b'}');
            chunk(out, &line)?;
        }
        chunk(out, &bookmark_of(resource, workload.list_rv, true))?;
    } else {
        count(shared, Some(collection), "watch");
    }
    // The response head (and a streaming list's initial state) goes out now, whether or
    // not frames follow: a peer may wait for it before opening its other watches.
    out.flush()?;
    let live = streaming_list
        || req
            .param("resourceVersion")
            .is_some_and(|rv| !rv.is_empty());
    if shared.mode == Mode::Throughput
        && live
        && !collection.frames_claimed.swap(true, Ordering::SeqCst)
    {
        shared.claimed.fetch_add(1, Ordering::SeqCst);
        // Every collection's frames start together, once each has a live watch.
        while shared.claimed.load(Ordering::SeqCst) < shared.collections.len() {
            if shared.stop.load(Ordering::SeqCst) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        shared
            .state()
            .first_frame
            .get_or_insert_with(SystemTime::now);
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
    use std::io::{BufRead as _, Read as _, Write as _};

    use super::*;

    fn get(server: &ReplayServer, query: &str) -> String {
        get_at(
            server,
            &format!("/api/v1/namespaces/{NAMESPACE}/pods"),
            query,
        )
    }

    fn get_at(server: &ReplayServer, path: &str, query: &str) -> String {
        let mut stream = TcpStream::connect(server.addr).unwrap();
        write!(
            stream,
            "GET {path}?{query} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        response
    }

    /// Opens a WATCH of `path` from the list's version and reads its response head.
    fn open_watch(server: &ReplayServer, path: &str) -> BufReader<TcpStream> {
        let mut stream = TcpStream::connect(server.addr).unwrap();
        write!(
            stream,
            "GET {path}?watch=true&resourceVersion=1&timeoutSeconds=1 HTTP/1.1\r\nHost: x\r\n\r\n"
        )
        .unwrap();
        let mut reader = BufReader::new(stream);
        let mut line = String::new();
        while line != "\r\n" {
            line.clear();
            reader.read_line(&mut line).unwrap();
        }
        reader
    }

    /// The next chunk of a chunked body: one watch line.
    fn next_line(reader: &mut BufReader<TcpStream>) -> String {
        let mut size = String::new();
        reader.read_line(&mut size).unwrap();
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        let mut crlf = String::new();
        reader.read_line(&mut crlf).unwrap();
        line
    }

    #[test]
    fn two_collections_are_served_at_their_paths_and_their_frames_start_together() {
        let templates = crate::workload::templates().unwrap();
        let [replica_sets, pods] = crate::workload::owned_pair(&templates, 3, 40, 10);
        let frames = (replica_sets.frames, pods.frames);
        let server = ReplayServer::start_all(
            vec![Arc::new(replica_sets), Arc::new(pods)],
            Mode::Throughput,
        )
        .unwrap();
        let rs_path = format!("/apis/apps/v1/namespaces/{NAMESPACE}/replicasets");
        let list = get_at(&server, &rs_path, "");
        assert!(list.contains(r#""kind":"ReplicaSetList","apiVersion":"apps/v1""#));
        assert_eq!(list.matches(r#""kind":"Deployment""#).count(), 4);
        assert!(get_at(&server, "/api/v1/namespaces/bench/configmaps", "").contains(" 404 "));
        let mut rs_watch = open_watch(&server, &rs_path);
        assert_eq!(
            server.first_frame(),
            None,
            "no frame before every collection has a live watch"
        );
        let mut pod_watch = open_watch(&server, &format!("/api/v1/namespaces/{NAMESPACE}/pods"));
        for (reader, kind, count) in [
            (&mut rs_watch, "ReplicaSet", frames.0),
            (&mut pod_watch, "Pod", frames.1),
        ] {
            for _ in 0..count {
                let frame: serde_json::Value = serde_json::from_str(&next_line(reader)).unwrap();
                assert_eq!(frame["object"]["kind"], kind);
            }
        }
        assert!(server.first_frame().is_some());
        assert_eq!(
            server.requests(),
            BTreeMap::from([
                ("list replicasets".into(), 1),
                ("not-found".into(), 1),
                ("watch pods".into(), 1),
                ("watch replicasets".into(), 1),
            ])
        );
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
