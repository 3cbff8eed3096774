//! Reads a controller's health listener the way Prometheus and kubelet do: one HTTP/1.1 GET
//! per connection, and the exposition parsed with a real Prometheus text parser.
//!
//! Blocking, like the case bodies' calls to the environment: the listener runs on the
//! driver's own threads.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// The status and body of `GET path` at `addr`; panics (failing the case) on a transport
/// error or a response that is not HTTP.
#[must_use]
pub fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(10))
        .unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("a read timeout");
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .unwrap_or_else(|e| panic!("send GET {path}: {e}"));
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .unwrap_or_else(|e| panic!("read GET {path}: {e}"));
    let (head, body) = response
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("GET {path}: no HTTP head in {response:?}"));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("GET {path}: no status in {head:?}"));
    (status, body.to_owned())
}

/// One scrape of `/metrics`: the text as served and its samples as parsed.
#[derive(Debug)]
pub struct Scraped {
    /// The exposition, for failure messages.
    pub body: String,
    samples: Vec<prometheus_parse::Sample>,
}

impl Scraped {
    /// The value of the counter, gauge or untyped series `name` whose labels include
    /// `labels`; `None` when there is none.
    #[must_use]
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        self.samples
            .iter()
            .filter(|s| s.metric == name)
            .filter(|s| labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
            .find_map(|s| match s.value {
                prometheus_parse::Value::Counter(v)
                | prometheus_parse::Value::Gauge(v)
                | prometheus_parse::Value::Untyped(v) => Some(v),
                _ => None,
            })
    }
}

/// Scrapes `/metrics` at `addr`; panics unless it answers 200 with a parseable exposition.
#[must_use]
pub fn scrape(addr: SocketAddr) -> Scraped {
    let (status, body) = get(addr, "/metrics");
    assert_eq!(status, 200, "GET /metrics: {body}");
    let samples = prometheus_parse::Scrape::parse(body.lines().map(|l| Ok(l.to_owned())))
        .unwrap_or_else(|e| panic!("unparseable exposition ({e}):\n{body}"))
        .samples;
    Scraped { body, samples }
}
