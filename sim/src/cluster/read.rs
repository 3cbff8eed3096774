//! GET and LIST: `resourceVersion` / `resourceVersionMatch` semantics, paging with `limit`
//! and `continue`, label and field selectors.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::kinds::KindDescriptor;
use super::params::ListOptions;
use super::status::ApiStatus;
use super::store::{Key, Object, labels, meta_str};
use super::{Cluster, KindId};
use crate::selector::Selector;

/// The message etcd3's store gives a continue token whose version was compacted.
const CONTINUE_EXPIRED: &str = "The provided continue parameter is too old to display a \
    consistent list result. You can start a new list without the continue parameter, or use \
    the continue token in this response to retrieve the remainder of the results. Continuing \
    with the provided token results in an inconsistent list - objects that were created, \
    modified, or deleted between the time the first chunk was returned and now may show up in \
    the list.";

/// A parsed field selector: `(field, equal?, value)`, every term must hold.
#[derive(Debug, Clone, Default)]
pub(super) struct FieldSelector(Vec<(String, bool, String)>);

impl FieldSelector {
    /// Parses `a=b,c!=d` for this kind: `metadata.name`, `metadata.namespace` and the
    /// kind's selectable fields; anything else is a 400, as the apiserver's field label
    /// conversion answers.
    pub fn parse(s: &str, desc: &KindDescriptor) -> Result<Self, ApiStatus> {
        let mut terms = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (field, equal, value) = if let Some((f, v)) = part.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = part.split_once("==") {
                (f, true, v)
            } else if let Some((f, v)) = part.split_once('=') {
                (f, true, v)
            } else {
                return Err(ApiStatus::bad_request(format!(
                    "invalid selector: '{s}'; can't understand '{part}'"
                )));
            };
            let field = field.trim();
            let known = field == "metadata.name"
                || field == "metadata.namespace"
                || desc.selectable_fields.iter().any(|f| f == field);
            if !known {
                return Err(ApiStatus::bad_request(
                    if desc.selectable_fields.is_empty() {
                        format!(
                            "{field:?} is not a known field selector: only \"metadata.name\", \
                         \"metadata.namespace\""
                        )
                    } else {
                        format!("field label not supported: {field}")
                    },
                ));
            }
            terms.push((field.to_owned(), equal, value.trim().to_owned()));
        }
        Ok(FieldSelector(terms))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn matches(&self, v: &Value) -> bool {
        self.0.iter().all(|(field, equal, value)| {
            let mut at = Some(v);
            for part in field.split('.') {
                at = at.and_then(|a| a.get(part));
            }
            let actual = match at {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Null) | None => String::new(),
                Some(other) => other.to_string(),
            };
            (actual == *value) == *equal
        })
    }
}

/// Label and field selectors together.
#[derive(Debug, Clone, Default)]
pub(super) struct Filter {
    pub labels: Selector,
    pub fields: FieldSelector,
    /// Only this namespace (`None`: all).
    pub namespace: Option<String>,
    /// Whether any selector was given (the apiserver then leaves `remainingItemCount` out).
    pub selective: bool,
}

impl Filter {
    pub fn new(
        desc: &KindDescriptor,
        namespace: Option<&str>,
        label_selector: &str,
        field_selector: &str,
    ) -> Result<Self, ApiStatus> {
        let labels = Selector::parse(label_selector)
            .map_err(|e| ApiStatus::bad_request(format!("unable to parse requirement: {e}")))?;
        let fields = FieldSelector::parse(field_selector, desc)?;
        Ok(Filter {
            selective: !label_selector.trim().is_empty() || !fields.is_empty(),
            labels,
            fields,
            namespace: namespace.filter(|_| desc.namespaced).map(str::to_owned),
        })
    }

    pub fn matches(&self, v: &Value) -> bool {
        self.namespace
            .as_deref()
            .is_none_or(|ns| meta_str(v, "namespace") == ns)
            && self.labels.matches(&labels(v))
            && self.fields.matches(v)
    }

    /// [`Filter::matches`] for an object stored under `key` (its namespace and name), which
    /// is parsed only when a selector must read it.
    pub fn matches_stored(&self, key: &Key, object: &Object) -> bool {
        self.in_namespace(key) && (!self.selective || self.matches(&object.value()))
    }

    /// Whether the object stored under `key` is in the filter's namespace.
    pub fn in_namespace(&self, key: &Key) -> bool {
        self.namespace.as_deref().is_none_or(|ns| key.0 == ns)
    }
}

/// Encodes a continue token as the apiserver does: base64url of
/// `{"v":"meta.k8s.io/v1","rv":N,"start":"<key>\u0000"}`.
pub(super) fn encode_continue(rv: u64, key: &Key) -> String {
    let start = if key.0.is_empty() {
        format!("{}\u{0}", key.1)
    } else {
        format!("{}/{}\u{0}", key.0, key.1)
    };
    let token = json!({"v": "meta.k8s.io/v1", "rv": rv, "start": start});
    base64url(token.to_string().as_bytes())
}

/// Decodes a continue token into its version and the key to start after.
fn decode_continue(token: &str) -> Result<(u64, Key), String> {
    let bytes = unbase64url(token).ok_or("illegal base64 data")?;
    let v: Value = serde_json::from_slice(&bytes).map_err(|e| e.to_string())?;
    if v.get("v").and_then(Value::as_str) != Some("meta.k8s.io/v1") {
        return Err("continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)".into());
    }
    let rv = v
        .get("rv")
        .and_then(Value::as_u64)
        .filter(|rv| *rv > 0)
        .ok_or("continue key is not valid: incorrect encoded start resourceVersion")?;
    let start = v.get("start").and_then(Value::as_str).unwrap_or("");
    let start = start.strip_suffix('\u{0}').unwrap_or(start);
    let key = match start.split_once('/') {
        Some((ns, name)) => (ns.to_owned(), name.to_owned()),
        None => (String::new(), start.to_owned()),
    };
    Ok((rv, key))
}

const B64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

fn base64url(data: &[u8]) -> String {
    let mut out = String::new();
    for chunk in data.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..=chunk.len() {
            out.push(char::from(B64[(n >> (18 - 6 * i) & 63) as usize]));
        }
    }
    out
}

fn unbase64url(s: &str) -> Option<Vec<u8>> {
    let s = s.trim_end_matches('=');
    let mut out = Vec::new();
    let (mut acc, mut bits) = (0u32, 0);
    for c in s.bytes() {
        let v = B64.iter().position(|b| *b == c)? as u32;
        acc = acc << 6 | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

/// `ListOptions.meta.k8s.io "" is invalid: …`, as `ValidateListOptions` answers.
pub(super) fn invalid_list_options(field: &str, kind: &str, detail: String) -> ApiStatus {
    ApiStatus::invalid(("meta.k8s.io", "ListOptions"), "", &[(field, kind, detail)])
}

/// A resourceVersion parameter as a number; a 400 as the storage answers it otherwise.
pub(super) fn parse_rv(rv: &str) -> Result<u64, ApiStatus> {
    rv.parse()
        .map_err(|_| ApiStatus::bad_request(format!("invalid resource version: {rv:?}")))
}

impl Cluster {
    /// GET: the object, or 404.
    ///
    /// # Errors
    /// [`ApiStatus::not_found`].
    pub fn get(
        &self,
        kind: KindId,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Value, ApiStatus> {
        self.current(kind, &self.key(kind, namespace, name))
    }

    pub(super) fn key(&self, kind: KindId, namespace: Option<&str>, name: &str) -> Key {
        let ns = if self.col(kind).desc.namespaced {
            namespace.unwrap_or("")
        } else {
            ""
        };
        (ns.to_owned(), name.to_owned())
    }

    /// GET's body when nothing is converted: the stored JSON itself, shared; a caller
    /// that decodes it decodes it in place.
    pub(crate) fn get_json(
        &self,
        kind: KindId,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<bytes::Bytes, ApiStatus> {
        let col = self.col(kind);
        col.objects
            .get(&self.key(kind, namespace, name))
            .map(|s| s.object.shared_json())
            .ok_or_else(|| ApiStatus::not_found(&col.desc, name))
    }

    pub(super) fn get_arc(
        &self,
        kind: KindId,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Arc<Value>, ApiStatus> {
        let col = self.col(kind);
        col.objects
            .get(&self.key(kind, namespace, name))
            .map(|s| Arc::new(s.object.value()))
            .ok_or_else(|| ApiStatus::not_found(&col.desc, name))
    }

    /// LIST: a `<Kind>List` body, in `namespace` or across all (`None`).
    ///
    /// # Errors
    /// 400 for a bad selector, resourceVersion or continue token; 422 for a bad
    /// combination of options; 410 `Expired` for a compacted version; 504 for a version
    /// not reached yet.
    pub fn list(
        &self,
        kind: KindId,
        namespace: Option<&str>,
        options: &ListOptions,
    ) -> Result<Value, ApiStatus> {
        let desc = &self.col(kind).desc;
        let rv_param = options.resource_version.as_deref().unwrap_or("");
        if let Some(m) = options
            .resource_version_match
            .as_deref()
            .filter(|m| !m.is_empty())
        {
            if rv_param.is_empty() {
                return Err(invalid_list_options(
                    "resourceVersionMatch",
                    "FieldValueForbidden",
                    "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided".into(),
                ));
            }
            if m != "Exact" && m != "NotOlderThan" {
                return Err(invalid_list_options(
                    "resourceVersionMatch",
                    "FieldValueNotSupported",
                    format!(
                        "Unsupported value: {m:?}: supported values: \"Exact\", \"NotOlderThan\", \"\""
                    ),
                ));
            }
            if m == "Exact" && rv_param == "0" {
                return Err(invalid_list_options(
                    "resourceVersionMatch",
                    "FieldValueForbidden",
                    "Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"".into(),
                ));
            }
        }
        let filter = Filter::new(
            desc,
            namespace,
            &options.label_selector,
            &options.field_selector,
        )?;
        let (list_rv, start, objects) =
            if let Some(token) = options.continue_token.as_deref().filter(|t| !t.is_empty()) {
                if !rv_param.is_empty() {
                    return Err(ApiStatus::bad_request(
                        "specifying resource version is not allowed when using continue",
                    ));
                }
                let (rv, start) = decode_continue(token)
                    .map_err(|e| ApiStatus::bad_request(format!("invalid continue token: {e}")))?;
                let Some(objects) = self.objects_at(kind, rv) else {
                    let mut gone = ApiStatus::expired(CONTINUE_EXPIRED);
                    gone.continue_token = Some(encode_continue(self.rv, &start));
                    return Err(gone);
                };
                (rv, Some(start), objects)
            } else {
                let exact = options.resource_version_match.as_deref() == Some("Exact");
                let wanted = match rv_param {
                    "" | "0" => None,
                    rv => Some(parse_rv(rv)?),
                };
                match wanted {
                    Some(n) if n > self.rv => {
                        return Err(ApiStatus::too_large_resource_version(n, self.rv));
                    }
                    Some(n) if exact => {
                        let objects = self.objects_at(kind, n).ok_or_else(|| {
                            ApiStatus::expired(format!(
                                "too old resource version: {n} ({})",
                                self.compacted
                            ))
                        })?;
                        (n, None, objects)
                    }
                    _ => {
                        let objects = self.objects_at(kind, self.rv).unwrap_or_default();
                        (self.rv, None, objects)
                    }
                }
            };
        let limit = options
            .limit
            .filter(|l| *l > 0)
            .map_or(usize::MAX, |l| usize::try_from(l).unwrap_or(usize::MAX));
        // A typed list's items are serialized without kind and apiVersion.
        let typed = desc.is_typed();
        let mut items = Vec::new();
        let mut last = None;
        let mut remaining = 0u64;
        for (key, object) in &objects {
            if start.as_ref().is_some_and(|s| key <= s) || !filter.in_namespace(key) {
                continue;
            }
            // Parsed once: for the selectors when there are any, else only when listed.
            let parsed = if filter.selective {
                let value = object.value();
                if !filter.matches(&value) {
                    continue;
                }
                Some(value)
            } else {
                None
            };
            if items.len() < limit {
                let mut item = parsed.unwrap_or_else(|| object.value());
                if typed && let Some(o) = item.as_object_mut() {
                    o.remove("kind");
                    o.remove("apiVersion");
                }
                items.push(item);
                last = Some(key.clone());
            } else {
                remaining += 1;
            }
        }
        let mut metadata = Map::new();
        metadata.insert("resourceVersion".into(), list_rv.to_string().into());
        if remaining > 0
            && let Some(last) = &last
        {
            metadata.insert("continue".into(), encode_continue(list_rv, last).into());
            if !filter.selective {
                metadata.insert("remainingItemCount".into(), remaining.into());
            }
        } else if !typed {
            // An unstructured list (a custom resource's) always carries `continue`.
            metadata.insert("continue".into(), "".into());
        }
        Ok(json!({
            "kind": format!("{}List", desc.kind),
            "apiVersion": desc.api_version(),
            "metadata": metadata,
            "items": items,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_tokens_round_trip_through_base64url() {
        let key = ("ns".to_owned(), "b".to_owned());
        let token = encode_continue(7, &key);
        assert_eq!(decode_continue(&token), Ok((7, key)));
        assert!(decode_continue("%%%").is_err());
        assert!(decode_continue(&base64url(b"{\"v\":\"x\"}")).is_err());
        assert_eq!(unbase64url(&base64url(b"abcde")).unwrap(), b"abcde");
    }
}
