//! The script both cluster test binaries run: one readable line per step, each request
//! and what it got.

#![allow(dead_code)]

use std::time::Duration;

use reconcile_core::Instant;
use reconcile_sim::cluster::{Cluster, ClusterConfig, Reply, WatchId};
use serde_json::{Value, json};

/// A scripted client of one cluster; every step appends one line.
pub struct Script {
    pub cluster: Cluster,
    pub now: Instant,
    pub lines: Vec<String>,
}

pub fn at(secs: u64) -> Instant {
    Instant::from_duration(Duration::from_secs(secs))
}

/// An object in a line: `name rv=N gen=N`, and what is notable about it.
pub fn object_line(v: &Value) -> String {
    let m = &v["metadata"];
    let mut s = format!(
        "{} rv={} gen={}",
        m["name"].as_str().unwrap_or("?"),
        m["resourceVersion"].as_str().unwrap_or("-"),
        m["generation"]
    );
    if let Some(f) = m["finalizers"].as_array().filter(|f| !f.is_empty()) {
        let f: Vec<&str> = f.iter().filter_map(Value::as_str).collect();
        s += &format!(" finalizers={}", f.join(","));
    }
    if let Some(t) = m["deletionTimestamp"].as_str() {
        s += &format!(" deleting@{t}");
    }
    if let Some(refs) = m["ownerReferences"].as_array() {
        let names: Vec<&str> = refs.iter().filter_map(|r| r["name"].as_str()).collect();
        s += &format!(" owners={}", names.join(","));
    }
    if let Some(mf) = m["managedFields"].as_array() {
        let managers: Vec<String> = mf
            .iter()
            .map(|e| {
                let sub = e["subresource"]
                    .as_str()
                    .map(|s| format!("/{s}"))
                    .unwrap_or_default();
                format!(
                    "{}:{}{sub}",
                    e["manager"].as_str().unwrap_or(""),
                    e["operation"].as_str().unwrap_or("")
                )
            })
            .collect();
        s += &format!(" managers=[{}]", managers.join(" "));
    }
    for part in ["spec", "data", "status"] {
        if let Some(p) = v.get(part) {
            s += &format!(" {part}={p}");
        }
    }
    s
}

pub fn body_line(code: u16, v: &Value) -> String {
    match v["kind"].as_str() {
        Some("Status") if v["status"] == "Success" => {
            format!("{code} Success {}", v["details"]["name"])
        }
        Some("Status") => format!(
            "{code} {}: {}",
            v["reason"].as_str().unwrap_or(""),
            v["message"].as_str().unwrap_or("")
        ),
        Some(k) if k.ends_with("List") => {
            let names: Vec<String> = v["items"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|i| {
                    let m = &i["metadata"];
                    match m["namespace"].as_str() {
                        Some(ns) => format!("{ns}/{}", m["name"].as_str().unwrap_or("")),
                        None => m["name"].as_str().unwrap_or("").to_owned(),
                    }
                })
                .collect();
            let mut s = format!(
                "{code} {k} rv={} [{}]",
                v["metadata"]["resourceVersion"].as_str().unwrap_or("?"),
                names.join(" ")
            );
            if v["metadata"]["continue"].is_string() {
                s += &format!(
                    " continue remaining={}",
                    v["metadata"]["remainingItemCount"]
                );
            }
            s
        }
        _ => format!("{code} {}", object_line(v)),
    }
}

pub fn frame_line(frame: &[u8]) -> String {
    let v: Value = serde_json::from_slice(frame).unwrap();
    let o = &v["object"];
    match v["type"].as_str().unwrap() {
        "ERROR" => format!("ERROR {} {}", o["code"], o["message"].as_str().unwrap()),
        "BOOKMARK" => {
            let end = if o["metadata"]["annotations"]["k8s.io/initial-events-end"] == "true" {
                " initial-events-end"
            } else {
                ""
            };
            format!(
                "BOOKMARK {}{end}",
                o["metadata"]["resourceVersion"].as_str().unwrap()
            )
        }
        t => format!(
            "{t} {} {}",
            o["metadata"]["name"].as_str().unwrap(),
            o["metadata"]["resourceVersion"].as_str().unwrap()
        ),
    }
}

impl Script {
    pub fn new() -> Self {
        Self::with(ClusterConfig {
            seed: 7,
            ..ClusterConfig::default()
        })
    }

    pub fn with(config: ClusterConfig) -> Self {
        Script {
            cluster: Cluster::with_builtins(config, Instant::ZERO),
            now: Instant::ZERO,
            lines: Vec::new(),
        }
    }

    pub fn at(&mut self, secs: u64) -> &mut Self {
        self.now = at(secs);
        self
    }

    pub fn note(&mut self, text: &str) {
        self.lines.push(format!("# {text}"));
    }

    pub fn request(&mut self, method: &str, uri: &str, content_type: &str, body: &str) -> Reply {
        let request = http::Request::builder()
            .method(method)
            .uri(uri)
            .header("content-type", content_type)
            .header("user-agent", "script/1.0")
            .body(body.as_bytes().to_vec())
            .unwrap();
        self.cluster.serve(self.now, &request)
    }

    /// Sends and logs one request; returns the JSON body.
    pub fn send(&mut self, method: &str, uri: &str, content_type: &str, body: &str) -> Value {
        let t = self.now.since_origin().as_secs();
        match self.request(method, uri, content_type, body) {
            Reply::Response(r) => {
                let v = r.json_body();
                self.lines.push(format!(
                    "t={t} {method} {uri} -> {}",
                    body_line(r.status, &v)
                ));
                v
            }
            Reply::Watch(id) => {
                self.lines
                    .push(format!("t={t} {method} {uri} -> watch {}", id.0));
                json!({"watch": id.0})
            }
        }
    }

    pub fn get(&mut self, uri: &str) -> Value {
        self.send("GET", uri, "application/json", "")
    }

    pub fn post(&mut self, uri: &str, body: Value) -> Value {
        self.send("POST", uri, "application/json", &body.to_string())
    }

    pub fn put(&mut self, uri: &str, body: Value) -> Value {
        self.send("PUT", uri, "application/json", &body.to_string())
    }

    pub fn patch(&mut self, uri: &str, kind: &str, body: Value) -> Value {
        let ct = match kind {
            "merge" => "application/merge-patch+json",
            "json" => "application/json-patch+json",
            "apply" => "application/apply-patch+yaml",
            "strategic" => "application/strategic-merge-patch+json",
            other => other,
        };
        self.send("PATCH", uri, ct, &body.to_string())
    }

    pub fn delete(&mut self, uri: &str, body: Value) -> Value {
        self.send("DELETE", uri, "application/json", &body.to_string())
    }

    pub fn watch(&mut self, uri: &str) -> WatchId {
        let v = self.get(uri);
        WatchId(v["watch"].as_u64().expect("a watch"))
    }

    pub fn poll(&mut self, id: WatchId) {
        let t = self.now.since_origin().as_secs();
        let poll = self.cluster.poll_watch(id, self.now);
        let frames: Vec<String> = poll.frames.iter().map(|f| frame_line(f)).collect();
        let end = if poll.ended { " (ended)" } else { "" };
        self.lines.push(format!(
            "t={t} poll watch {} -> [{}]{end}",
            id.0,
            frames.join(", ")
        ));
    }

    pub fn gc(&mut self) {
        let t = self.now.since_origin().as_secs();
        let actions = self.cluster.collect_garbage(self.now);
        if actions.is_empty() {
            self.lines.push(format!("t={t} gc: nothing"));
        }
        for a in actions {
            self.lines.push(format!("t={t} {a}"));
        }
    }

    pub fn text(&self) -> String {
        self.lines.join("\n")
    }
}

pub const CM: &str = "/api/v1/namespaces/default/configmaps";

pub fn widget_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}}}]}
    })
}
