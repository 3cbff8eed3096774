//! URL paths and query strings as the apiserver routes them.

use std::collections::BTreeMap;

/// What a path names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Target {
    pub group: String,
    pub version: String,
    pub namespace: Option<String>,
    pub plural: String,
    pub name: Option<String>,
    pub subresource: Option<String>,
}

/// Percent-decodes (`+` is a space only in query strings); `None` for bad escapes or
/// bytes that are not UTF-8.
pub(super) fn percent_decode(s: &str, plus_is_space: bool) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let hex = s.get(i + 1..i + 3)?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' if plus_is_space => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// `/api/v1[/namespaces/{ns}]/{plural}[/{name}[/{sub}]]` and
/// `/apis/{group}/{version}[/namespaces/{ns}]/{plural}[/{name}[/{sub}]]`.
pub(super) fn parse_path(path: &str) -> Option<Target> {
    let segments: Vec<String> = path
        .strip_prefix('/')?
        .split('/')
        .map(|s| percent_decode(s, false))
        .collect::<Option<_>>()?;
    if segments.iter().any(String::is_empty) {
        return None;
    }
    let (group, version, rest) = match segments.first()?.as_str() {
        "api" => (String::new(), segments.get(1)?.clone(), &segments[2..]),
        "apis" => (
            segments.get(1)?.clone(),
            segments.get(2)?.clone(),
            segments.get(3..)?,
        ),
        _ => return None,
    };
    // `namespaces/{ns}/{plural}…` unless it is the namespace itself or its subresource.
    let (namespace, rest) = match rest {
        [ns_word, ns, plural, ..]
            if ns_word == "namespaces" && !(rest.len() == 3 && plural == "status") =>
        {
            (Some(ns.clone()), &rest[2..])
        }
        _ => (None, rest),
    };
    let (plural, name, subresource) = match rest {
        [p] => (p.clone(), None, None),
        [p, n] => (p.clone(), Some(n.clone()), None),
        [p, n, s] => (p.clone(), Some(n.clone()), Some(s.clone())),
        _ => return None,
    };
    Some(Target {
        group,
        version,
        namespace,
        plural,
        name,
        subresource,
    })
}

/// A query string: the first value of each parameter, decoded.
#[derive(Debug, Clone, Default)]
pub(super) struct Query(BTreeMap<String, String>);

impl Query {
    pub fn parse(query: &str) -> Result<Self, String> {
        let mut map = BTreeMap::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let k = percent_decode(k, true).ok_or_else(|| format!("invalid query {pair:?}"))?;
            let v = percent_decode(v, true).ok_or_else(|| format!("invalid query {pair:?}"))?;
            map.entry(k).or_insert(v);
        }
        Ok(Query(map))
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    pub fn text(&self, key: &str) -> String {
        self.get(key).unwrap_or("").to_owned()
    }

    /// A boolean as Go's `strconv.ParseBool` reads it; absent is `false`.
    pub fn flag(&self, key: &str) -> Result<bool, String> {
        match self.get(key) {
            None | Some("") => Ok(false),
            Some("1" | "t" | "T" | "true" | "TRUE" | "True") => Ok(true),
            Some("0" | "f" | "F" | "false" | "FALSE" | "False") => Ok(false),
            Some(other) => Err(format!(
                "strconv.ParseBool: parsing {other:?}: invalid syntax"
            )),
        }
    }

    /// An optional boolean (`sendInitialEvents` is tri-state).
    pub fn opt_flag(&self, key: &str) -> Result<Option<bool>, String> {
        match self.get(key) {
            None | Some("") => Ok(None),
            Some(_) => self.flag(key).map(Some),
        }
    }

    /// A non-negative integer.
    pub fn number(&self, key: &str) -> Result<Option<u64>, String> {
        match self.get(key) {
            None | Some("") => Ok(None),
            Some(v) => v
                .parse()
                .map(Some)
                .map_err(|_| format!("strconv.ParseInt: parsing {v:?}: invalid syntax")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Parts = (
        String,
        Option<String>,
        String,
        Option<String>,
        Option<String>,
    );

    fn t(path: &str) -> Option<Parts> {
        parse_path(path).map(|t| (t.group, t.namespace, t.plural, t.name, t.subresource))
    }

    #[test]
    fn paths_name_group_namespace_resource_name_and_subresource() {
        let s = |x: &str| Some(x.to_owned());
        assert_eq!(
            t("/api/v1/pods"),
            Some((String::new(), None, "pods".into(), None, None))
        );
        assert_eq!(
            t("/api/v1/namespaces/ns/pods/p/status"),
            Some((String::new(), s("ns"), "pods".into(), s("p"), s("status")))
        );
        assert_eq!(
            t("/api/v1/namespaces/ns"),
            Some((String::new(), None, "namespaces".into(), s("ns"), None))
        );
        assert_eq!(
            t("/api/v1/namespaces/ns/status"),
            Some((
                String::new(),
                None,
                "namespaces".into(),
                s("ns"),
                s("status")
            ))
        );
        assert_eq!(
            t("/apis/apps/v1/namespaces/a/deployments/d"),
            Some(("apps".into(), s("a"), "deployments".into(), s("d"), None))
        );
        assert_eq!(
            t("/apis/example.com/v1/widgets"),
            Some(("example.com".into(), None, "widgets".into(), None, None))
        );
        for bad in [
            "",
            "/",
            "api/v1/pods",
            "/api",
            "/api/v1",
            "/apis/g",
            "/api/v1//pods",
            "/x/v1/pods",
            "/api/v1/a/b/c/d",
            "/api/v1/p%zz",
        ] {
            assert_eq!(t(bad), None, "{bad}");
        }
    }

    #[test]
    fn queries_decode_and_booleans_parse_as_go_does() {
        let q =
            Query::parse("labelSelector=app%3Dweb%2Ctier+in+(a)&watch=1&watch=0&limit=x").unwrap();
        assert_eq!(q.get("labelSelector"), Some("app=web,tier in (a)"));
        assert_eq!(q.flag("watch"), Ok(true));
        assert!(q.number("limit").is_err());
        assert!(Query::parse("a=%").is_err());
        assert!(Query::parse("a=1").unwrap().flag("a").is_ok());
        assert!(Query::parse("a=yes").unwrap().flag("a").is_err());
    }
}

/// What a request's path names, as the cluster serves it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    /// The kind.
    pub kind: crate::cluster::KindId,
    /// The namespace in the path.
    pub namespace: Option<String>,
    /// The object's name (none: the collection).
    pub name: Option<String>,
    /// `status`, say.
    pub subresource: Option<String>,
}

impl crate::cluster::Cluster {
    /// The kind, namespace, name and subresource a request path names; `None` for a path
    /// this cluster does not serve.
    #[must_use]
    pub fn locate(&self, path: &str) -> Option<Located> {
        let target = parse_path(path)?;
        let kind = self.kind(&target.group, &target.plural)?;
        Some(Located {
            kind,
            namespace: target.namespace,
            name: target.name,
            subresource: target.subresource,
        })
    }
}
