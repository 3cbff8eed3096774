//! Finds a resource type through the apiserver's discovery documents, over the engine's
//! [`Transport`]: `/api/v1` for the core group, `/apis` and `/apis/<group>/<version>` for the
//! others (what `kubectl api-resources` reads).
//!
//! A type is named as `kubectl` names it: a plural (`pods`), a plural with its group
//! (`deployments.apps`, `widgets.example.com`), or group/version/kind (`v1/Pod`,
//! `apps/v1/Deployment`).

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use futures_lite::StreamExt;
use serde::Deserialize;

use reconcile_engine::{Runtime, Transport};

/// How long a discovery request may take.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest discovery document read.
pub const MAX_DOCUMENT: usize = 16 << 20;
/// Most API groups searched for a plural.
pub const MAX_GROUPS: usize = 1_000;

/// A resource type as the user named it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResourceSpec {
    /// A plural name, with its group when given (`deployments.apps`).
    Plural {
        /// `deployments`.
        plural: String,
        /// `apps`; `None` searches the core group first, then every group.
        group: Option<String>,
    },
    /// Group, version and kind (`apps/v1/Deployment`; the core group is empty, `v1/Pod`).
    Gvk {
        /// The API group.
        group: String,
        /// The version.
        version: String,
        /// The kind.
        kind: String,
    },
}

/// Why a resource name or lookup failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DiscoveryError {
    /// The name does not parse.
    #[error("resource {given:?}: {message}")]
    Name {
        /// What was given.
        given: String,
        /// What is wrong.
        message: String,
    },
    /// A discovery request failed.
    #[error("discovery GET {path}: {message}")]
    Request {
        /// The path asked for.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// No such resource type.
    #[error("resource {0}: the apiserver serves no such type (kubectl api-resources lists them)")]
    NotFound(String),
}

impl FromStr for ResourceSpec {
    type Err = DiscoveryError;

    fn from_str(s: &str) -> Result<Self, DiscoveryError> {
        let err = |message: &str| DiscoveryError::Name {
            given: s.to_owned(),
            message: message.to_owned(),
        };
        let valid = |part: &str| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
        };
        let parts: Vec<&str> = s.split('/').collect();
        match parts.as_slice() {
            [name] => {
                let (plural, group) = match name.split_once('.') {
                    Some((p, g)) => (p, Some(g.to_owned())),
                    None => (*name, None),
                };
                if !valid(plural) || group.as_deref().is_some_and(|g| !valid(g)) {
                    return Err(err(
                        "expected a plural (pods, deployments.apps) or group/version/kind",
                    ));
                }
                Ok(ResourceSpec::Plural {
                    plural: plural.to_ascii_lowercase(),
                    group,
                })
            }
            [version, kind] | ["", version, kind] if valid(version) && valid(kind) => {
                Ok(ResourceSpec::Gvk {
                    group: String::new(),
                    version: (*version).to_owned(),
                    kind: (*kind).to_owned(),
                })
            }
            [group, version, kind] if valid(group) && valid(version) && valid(kind) => {
                Ok(ResourceSpec::Gvk {
                    group: (*group).to_owned(),
                    version: (*version).to_owned(),
                    kind: (*kind).to_owned(),
                })
            }
            _ => Err(err(
                "expected a plural (pods, deployments.apps) or group/version/kind (v1/Pod, apps/v1/Deployment)",
            )),
        }
    }
}

impl fmt::Display for ResourceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResourceSpec::Plural {
                plural,
                group: None,
            } => f.write_str(plural),
            ResourceSpec::Plural {
                plural,
                group: Some(g),
            } => write!(f, "{plural}.{g}"),
            ResourceSpec::Gvk {
                group,
                version,
                kind,
            } if group.is_empty() => write!(f, "{version}/{kind}"),
            ResourceSpec::Gvk {
                group,
                version,
                kind,
            } => write!(f, "{group}/{version}/{kind}"),
        }
    }
}

/// A resource type the apiserver serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedResource {
    /// The API group (empty for the core group).
    pub group: String,
    /// The version.
    pub version: String,
    /// The kind.
    pub kind: String,
    /// The plural, as it appears in URLs.
    pub plural: String,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
}

impl ResolvedResource {
    /// `v1` or `apps/v1`.
    #[must_use]
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

#[derive(Deserialize)]
struct ResourceList {
    #[serde(default)]
    resources: Vec<ApiResourceEntry>,
}

#[derive(Deserialize)]
struct ApiResourceEntry {
    name: String,
    kind: String,
    #[serde(default)]
    namespaced: bool,
    #[serde(default)]
    verbs: Vec<String>,
}

#[derive(Deserialize)]
struct GroupList {
    #[serde(default)]
    groups: Vec<Group>,
}

#[derive(Deserialize)]
struct Group {
    name: String,
    #[serde(rename = "preferredVersion")]
    preferred: Option<GroupVersion>,
    #[serde(default)]
    versions: Vec<GroupVersion>,
}

#[derive(Deserialize)]
struct GroupVersion {
    version: String,
}

async fn get<R: Runtime, T: Transport, D: for<'de> Deserialize<'de>>(
    runtime: &R,
    transport: &T,
    path: &str,
) -> Result<Option<D>, DiscoveryError> {
    let fail = |message: String| DiscoveryError::Request {
        path: path.to_owned(),
        message,
    };
    let request = http::Request::get(path)
        .header("accept", "application/json")
        .body(Vec::new())
        .map_err(|e| fail(e.to_string()))?;
    let deadline = runtime.now() + REQUEST_TIMEOUT;
    let timed_out = || fail(format!("no answer within {}s", REQUEST_TIMEOUT.as_secs()));
    let response = futures_lite::future::or(async { Some(transport.send(request).await) }, async {
        runtime.sleep_until(deadline).await;
        None
    })
    .await
    .ok_or_else(timed_out)?
    .map_err(|e| fail(e.to_string()))?;
    let status = response.status().as_u16();
    let mut body = response.into_body();
    let mut bytes = Vec::new();
    let read = async {
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| fail(e.to_string()))?;
            if bytes.len() + chunk.len() > MAX_DOCUMENT {
                return Err(fail(format!("document larger than {MAX_DOCUMENT} bytes")));
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(())
    };
    futures_lite::future::or(async { Some(read.await) }, async {
        runtime.sleep_until(deadline).await;
        None
    })
    .await
    .ok_or_else(timed_out)??;
    match status {
        200 => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| fail(format!("not a discovery document: {e}"))),
        404 => Ok(None),
        code => Err(fail(format!(
            "HTTP {code}: {}",
            String::from_utf8_lossy(&bytes[..bytes.len().min(300)])
        ))),
    }
}

fn group_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("/api/{version}")
    } else {
        format!("/apis/{group}/{version}")
    }
}

fn find(
    list: &ResourceList,
    group: &str,
    version: &str,
    matches: impl Fn(&ApiResourceEntry) -> bool,
) -> Option<ResolvedResource> {
    list.resources
        .iter()
        // Subresources (pods/log) are not collections.
        .filter(|r| !r.name.contains('/'))
        .filter(|r| r.verbs.is_empty() || r.verbs.iter().any(|v| v == "watch"))
        .find(|r| matches(r))
        .map(|r| ResolvedResource {
            group: group.to_owned(),
            version: version.to_owned(),
            kind: r.kind.clone(),
            plural: r.name.clone(),
            namespaced: r.namespaced,
        })
}

/// Looks `spec` up in the apiserver's discovery documents.
///
/// # Errors
/// A request failed, or no served type matches.
pub async fn resolve<R: Runtime, T: Transport>(
    runtime: &R,
    transport: &T,
    spec: &ResourceSpec,
) -> Result<ResolvedResource, DiscoveryError> {
    match spec {
        ResourceSpec::Gvk {
            group,
            version,
            kind,
        } => {
            let list: Option<ResourceList> =
                get(runtime, transport, &group_path(group, version)).await?;
            list.and_then(|l| find(&l, group, version, |r| &r.kind == kind))
                .ok_or_else(|| DiscoveryError::NotFound(spec.to_string()))
        }
        ResourceSpec::Plural { plural, group } => {
            let by_plural = |r: &ApiResourceEntry| &r.name == plural;
            if group.as_deref().is_none_or(str::is_empty)
                && let Some(core) = get::<_, _, ResourceList>(runtime, transport, "/api/v1").await?
                && let Some(found) = find(&core, "", "v1", by_plural)
            {
                return Ok(found);
            }
            let groups: GroupList = get(runtime, transport, "/apis")
                .await?
                .unwrap_or(GroupList { groups: Vec::new() });
            for g in groups.groups.iter().take(MAX_GROUPS) {
                if group.as_deref().is_some_and(|want| want != g.name) {
                    continue;
                }
                let Some(version) = g
                    .preferred
                    .as_ref()
                    .or_else(|| g.versions.first())
                    .map(|v| v.version.clone())
                else {
                    continue;
                };
                let list: Option<ResourceList> =
                    get(runtime, transport, &group_path(&g.name, &version)).await?;
                if let Some(found) = list.and_then(|l| find(&l, &g.name, &version, by_plural)) {
                    return Ok(found);
                }
            }
            Err(DiscoveryError::NotFound(spec.to_string()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_as_kubectl_writes_them() {
        assert_eq!(
            "pods".parse::<ResourceSpec>(),
            Ok(ResourceSpec::Plural {
                plural: "pods".into(),
                group: None
            })
        );
        assert_eq!(
            "widgets.example.com".parse::<ResourceSpec>(),
            Ok(ResourceSpec::Plural {
                plural: "widgets".into(),
                group: Some("example.com".into())
            })
        );
        assert_eq!(
            "v1/Secret".parse::<ResourceSpec>(),
            Ok(ResourceSpec::Gvk {
                group: String::new(),
                version: "v1".into(),
                kind: "Secret".into()
            })
        );
        assert_eq!(
            "apps/v1/Deployment"
                .parse::<ResourceSpec>()
                .map(|s| s.to_string()),
            Ok("apps/v1/Deployment".into())
        );
        for bad in ["", "a/b/c/d", "po ds", "/v1", "apps//Deployment", "pods."] {
            assert!(
                matches!(
                    bad.parse::<ResourceSpec>(),
                    Err(DiscoveryError::Name { .. })
                ),
                "{bad:?}"
            );
        }
    }
}
