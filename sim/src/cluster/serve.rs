//! The HTTP entry point: one `http::Request` (what the engine's `Transport` and kube's
//! `Request` builder send) in, a complete response or an open watch out. A script of
//! requests can so run against this and against a real apiserver alike.
//!
//! `dryRun=All` is a real dry run: the write is computed in full (uid, name, generation,
//! managedFields, conflicts) and answered, but nothing is stored. Any other `dryRun`
//! value is a 400. Responses are JSON, converted to metadata only when `Accept` asks
//! (`accept`).

use std::sync::Arc;

use bytes::Bytes;
use reconcile_core::Instant;
use serde_json::{Value, json};

use super::accept::{Conversion, negotiate};
use super::delete::Deleted;
use super::params::{
    DeleteOptions, ListOptions, PATCH_TYPES, Patch, PatchOptions, Propagation, WatchOptions,
    WriteOptions, dry_run_all,
};
use super::path::{Query, parse_path};
use super::read::Filter;
use super::status::ApiStatus;
use super::store::meta_str;
use super::watch::WatchId;
use super::{Cluster, KindId};

/// A complete response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// HTTP status code.
    pub status: u16,
    /// `Content-Type`.
    pub content_type: &'static str,
    /// The body.
    pub body: Bytes,
}

impl Response {
    fn json(status: u16, body: &Value) -> Self {
        Response {
            status,
            content_type: "application/json",
            body: Bytes::from(super::store::to_json_vec(body, 0)),
        }
    }

    fn error(status: &ApiStatus) -> Self {
        Response::json(status.code, &status.to_value())
    }

    /// The body as JSON, for tests (`Null` when it is not JSON).
    #[must_use]
    pub fn json_body(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
}

/// What a request gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// A complete response.
    Response(Response),
    /// A 200 `application/json` stream; pull its frames with [`Cluster::poll_watch`].
    Watch(WatchId),
}

/// What a request asks, once routed.
struct Routed {
    kind: KindId,
    namespace: Option<String>,
    name: Option<String>,
    status: bool,
}

impl Cluster {
    /// Serves one request at `now`. Never panics; every refusal is a `Status` body.
    pub fn serve(&mut self, now: Instant, request: &http::Request<Vec<u8>>) -> Reply {
        self.advance(now);
        match self.serve_inner(now, request) {
            Ok(reply) => reply,
            Err(status) => Reply::Response(Response::error(&status)),
        }
    }

    fn route(&self, path: &str) -> Result<Routed, ApiStatus> {
        let target = parse_path(path).ok_or_else(ApiStatus::no_resource)?;
        let kind = self
            .kind(&target.group, &target.plural)
            .filter(|k| self.descriptor(*k).version == target.version)
            .ok_or_else(ApiStatus::no_resource)?;
        let desc = self.descriptor(kind);
        let is_root_prefix = if target.group.is_empty() {
            path.starts_with("/api/")
        } else {
            path.starts_with("/apis/")
        };
        if !is_root_prefix || (target.namespace.is_some() && !desc.namespaced) {
            return Err(ApiStatus::no_resource());
        }
        let status = match target.subresource.as_deref() {
            None => false,
            Some("status") if desc.has_status_subresource => true,
            Some(_) => return Err(ApiStatus::no_resource()),
        };
        Ok(Routed {
            kind,
            namespace: target.namespace,
            name: target.name,
            status,
        })
    }

    fn serve_inner(
        &mut self,
        now: Instant,
        request: &http::Request<Vec<u8>>,
    ) -> Result<Reply, ApiStatus> {
        let body = request.body();
        if body.len() > self.config.max_request_bytes {
            return Err(ApiStatus::too_large(&format!(
                "limit is {}",
                self.config.max_request_bytes
            )));
        }
        let r = self.route(request.uri().path())?;
        let query =
            Query::parse(request.uri().query().unwrap_or("")).map_err(ApiStatus::bad_request)?;
        let bad = ApiStatus::bad_request;
        let dry_run = dry_run_all(query.get("dryRun")).map_err(bad)?;
        let header = |name: http::header::HeaderName| {
            request
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_owned()
        };
        // Without fieldManager the apiserver names the manager after the User-Agent's
        // product.
        let user_agent = header(http::header::USER_AGENT);
        let manager = query
            .get("fieldManager")
            .filter(|m| !m.is_empty())
            .map(str::to_owned)
            .or_else(|| {
                user_agent
                    .split('/')
                    .next()
                    .filter(|p| !p.is_empty())
                    .map(str::to_owned)
            });
        let conversion = negotiate(self.descriptor(r.kind), &header(http::header::ACCEPT))?;
        let ns = r.namespace.as_deref();
        let namespaced = self.descriptor(r.kind).namespaced;
        let method = request.method();
        let desc = self.col(r.kind).desc.clone();
        // Every answer but a `Status` is converted as `Accept` asked.
        // The stored object is rendered where it lies; only a conversion takes a copy.
        let reply = |code, v: Arc<Value>| match conversion {
            Conversion::Full => Ok(Reply::Response(Response::json(code, &v))),
            _ => {
                let v = conversion.object(&desc, Arc::unwrap_or_clone(v))?;
                Ok(Reply::Response(Response::json(code, &v)))
            }
        };
        let reply_list = |v: Value| {
            let v = conversion.list(&desc, v)?;
            Ok(Reply::Response(Response::json(200, &v)))
        };
        match (method.as_str(), r.name.as_deref()) {
            ("GET", None) if query.flag("watch").map_err(bad)? => {
                let options = WatchOptions {
                    label_selector: query.text("labelSelector"),
                    field_selector: query.text("fieldSelector"),
                    resource_version: query.get("resourceVersion").map(str::to_owned),
                    resource_version_match: query.get("resourceVersionMatch").map(str::to_owned),
                    allow_bookmarks: query.flag("allowWatchBookmarks").map_err(bad)?,
                    timeout: query
                        .number("timeoutSeconds")
                        .map_err(bad)?
                        .map(std::time::Duration::from_secs),
                    send_initial_events: query.opt_flag("sendInitialEvents").map_err(bad)?,
                    conversion,
                };
                self.watch(now, r.kind, ns, &options).map(Reply::Watch)
            }
            ("GET", None) => {
                let options = list_options(&query)?;
                reply_list(self.list(r.kind, ns, &options)?)
            }
            ("GET", Some(name)) if conversion.is_full() => Ok(Reply::Response(Response {
                status: 200,
                content_type: "application/json",
                body: self.get_json(r.kind, ns, name)?,
            })),
            ("GET", Some(name)) => reply(200, self.get_arc(r.kind, ns, name)?),
            ("POST", None) if !namespaced || ns.is_some() => {
                let body = parse_body(body)?;
                let options = WriteOptions {
                    field_manager: manager,
                    dry_run,
                };
                reply(201, self.create_shared(now, r.kind, ns, body, &options)?)
            }
            ("PUT", Some(name)) => {
                let body = parse_body(body)?;
                let options = WriteOptions {
                    field_manager: manager,
                    dry_run,
                };
                let v = self.replace_at(now, r.kind, ns, name, body, &options, r.status)?;
                reply(200, v)
            }
            ("PATCH", Some(name)) => {
                let content_type = header(http::header::CONTENT_TYPE);
                let media = content_type
                    .split(';')
                    .next()
                    .unwrap_or("")
                    .trim()
                    .to_owned();
                let parsed = || -> Result<Value, ApiStatus> {
                    serde_json::from_slice(body)
                        .map_err(|e| bad(format!("error decoding patch: {e}")))
                };
                let patch = match media.as_str() {
                    "application/merge-patch+json" => Patch::Merge(parsed()?),
                    "application/json-patch+json" => Patch::Json(parsed()?),
                    "application/apply-patch+yaml" => Patch::Apply(serde_json::from_slice(body).map_err(|e| {
                        bad(format!("error decoding YAML: {e} (only the JSON subset of YAML is modelled)"))
                    })?),
                    "application/strategic-merge-patch+json" if desc.is_typed() => {
                        Patch::Strategic(parsed()?)
                    }
                    _ if desc.is_typed() => return Err(ApiStatus::unsupported_media_type_route()),
                    _ => return Err(ApiStatus::unsupported_media_type(&PATCH_TYPES)),
                };
                let options = PatchOptions {
                    // Apply validates the parameter itself: the User-Agent does not stand in.
                    field_manager: if matches!(patch, Patch::Apply(_)) {
                        query.get("fieldManager").map(str::to_owned)
                    } else {
                        manager
                    },
                    force: query.flag("force").map_err(bad)?,
                    dry_run,
                };
                if options.force && !matches!(patch, Patch::Apply(_)) {
                    return Err(ApiStatus::invalid(
                        ("meta.k8s.io", "PatchOptions"),
                        "",
                        &[(
                            "force",
                            "FieldValueForbidden",
                            "Forbidden: may not be specified for non-apply patch".into(),
                        )],
                    ));
                }
                let creates =
                    matches!(patch, Patch::Apply(_)) && self.get_json(r.kind, ns, name).is_err();
                let v = self.patch_at(now, r.kind, ns, name, &patch, &options, r.status)?;
                reply(if creates && !dry_run { 201 } else { 200 }, v)
            }
            ("DELETE", name) if !r.status => {
                let mut options = DeleteOptions::from_body(body).map_err(bad)?;
                if let Some(p) = query.get("propagationPolicy").filter(|p| !p.is_empty()) {
                    options.propagation = Some(
                        Propagation::parse(p)
                            .ok_or_else(|| bad(format!("unsupported propagationPolicy {p:?}")))?,
                    );
                }
                options.dry_run |= dry_run;
                match name {
                    Some(name) => match self.delete(now, r.kind, ns, name, &options)? {
                        Deleted::Gone(last) => Ok(Reply::Response(Response::json(
                            200,
                            &self.success(r.kind, &last),
                        ))),
                        Deleted::Pending(v) => reply(200, Arc::new(v)),
                    },
                    None => reply_list(self.delete_collection(r.kind, ns, &query, &options)?),
                }
            }
            _ => Err(ApiStatus::method_not_allowed()),
        }
    }

    /// The `Status` a DELETE answers when the object is gone.
    fn success(&self, kind: KindId, last: &Value) -> Value {
        let desc = self.descriptor(kind);
        let mut details = json!({"name": meta_str(last, "name"), "kind": desc.plural, "uid": meta_str(last, "uid")});
        if !desc.group.is_empty() {
            details["group"] = desc.group.clone().into();
        }
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details})
    }

    /// DELETE on a collection: every selected object, as a list of what was deleted.
    fn delete_collection(
        &mut self,
        kind: KindId,
        namespace: Option<&str>,
        query: &Query,
        options: &DeleteOptions,
    ) -> Result<Value, ApiStatus> {
        let desc = self.descriptor(kind).clone();
        let filter = Filter::new(
            &desc,
            namespace,
            &query.text("labelSelector"),
            &query.text("fieldSelector"),
        )?;
        let keys: Vec<_> = self
            .col(kind)
            .objects
            .iter()
            .filter(|(k, s)| filter.matches_stored(k, &s.object))
            .map(|(k, _)| k.clone())
            .collect();
        let mut items = Vec::new();
        for key in keys {
            match self.delete_key(kind, &key, options)? {
                Deleted::Gone(v) | Deleted::Pending(v) => items.push(v),
            }
        }
        Ok(json!({
            "kind": format!("{}List", desc.kind), "apiVersion": desc.api_version(),
            "metadata": {"resourceVersion": self.rv.to_string()}, "items": items,
        }))
    }
}

fn parse_body(body: &[u8]) -> Result<Value, ApiStatus> {
    serde_json::from_slice(body).map_err(|e| {
        ApiStatus::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
    })
}

fn list_options(query: &Query) -> Result<ListOptions, ApiStatus> {
    Ok(ListOptions {
        label_selector: query.text("labelSelector"),
        field_selector: query.text("fieldSelector"),
        limit: query.number("limit").map_err(ApiStatus::bad_request)?,
        continue_token: query.get("continue").map(str::to_owned),
        resource_version: query.get("resourceVersion").map(str::to_owned),
        resource_version_match: query.get("resourceVersionMatch").map(str::to_owned),
    })
}
