//! Strategic merge patch (`application/strategic-merge-patch+json`) for the built-in kinds,
//! as apimachinery's `strategicpatch` applies it: maps merge as in a JSON merge patch, and a
//! list merges by the Go field's patch strategy. A list with a merge key merges element by
//! element on that key, a list of scalars with the `merge` strategy is a set, and any other
//! list is replaced. The directives are `$patch: replace | delete | merge` (on a map or as a
//! list element), `$retainKeys`, `$deleteFromPrimitiveList/<field>` and
//! `$setElementOrder/<field>`. A merged list comes out in `normalizeElementOrder`'s order:
//! the patch's elements in the patch's order, the server's others where they stood, a
//! new element ahead of a server one (checked against the real apiserver by the
//! conformance script's `smp-*` steps).
//!
//! The strategies come from [`list_strategy`], a table of the list fields of the kinds this
//! cluster serves from Go types (the `patchStrategy` / `patchMergeKey` tags of k8s.io/api).
//! A custom resource has no Go type, so the apiserver answers it 415, and so does this.

use serde_json::{Map, Value};

use super::status::go_json_type;

/// How a list field merges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ListStrategy {
    /// No strategy: the patch's list replaces the object's.
    Replace,
    /// `patchStrategy:"merge"` with `patchMergeKey`: elements matched on this field.
    MergeByKey(&'static str),
    /// `patchStrategy:"merge"` on a list of scalars: a set, in order of arrival.
    Set,
}

/// Why a strategic merge patch cannot be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum StrategicError {
    /// The patch is JSON but not an object (its JSON type named as Go's decoder names it):
    /// a 400.
    #[error("the patch is a JSON {0}, not an object")]
    NotAnObject(&'static str),
    /// The patch does not fit the object (apimachinery's own error, which the apiserver
    /// answers as a 500 with no reason).
    #[error("{0}")]
    Other(String),
}

fn other<T>(message: String) -> Result<T, StrategicError> {
    Err(StrategicError::Other(message))
}

/// The deepest nesting a patch is followed to (bounds the recursion).
const MAX_DEPTH: usize = 64;

/// The longest list a merge takes, on either side: elements are matched pairwise, so this
/// bounds one list's merge to a few million comparisons.
pub(super) const MAX_MERGED_LIST: usize = 4096;

/// Applies `patch` to `target`, an object of `kind` (`Pod`, `Deployment`, …).
pub(super) fn strategic_merge(
    kind: &str,
    target: &mut Value,
    patch: &Value,
) -> Result<(), StrategicError> {
    let Value::Object(patch) = patch else {
        return Err(StrategicError::NotAnObject(go_json_type(patch)));
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let mut path = Vec::new();
    if let Value::Object(t) = target
        && merge_map(kind, t, patch, &mut path)? == Outcome::Delete
    {
        t.clear();
    }
    Ok(())
}

/// What a map patch asks of the map it merges into.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Keep,
    Delete,
}

fn merge_map(
    kind: &str,
    original: &mut Map<String, Value>,
    patch: &Map<String, Value>,
    path: &mut Vec<String>,
) -> Result<Outcome, StrategicError> {
    if path.len() > MAX_DEPTH {
        return other(format!("the patch nests deeper than {MAX_DEPTH} levels"));
    }
    match patch.get("$patch") {
        None => {}
        Some(Value::String(d)) if d == "merge" => {}
        Some(Value::String(d)) if d == "replace" => {
            *original = cleaned(kind, patch, path)?;
            return Ok(Outcome::Keep);
        }
        Some(Value::String(d)) if d == "delete" => return Ok(Outcome::Delete),
        Some(d) => {
            return other(format!(
                "Unknown patch type: {}, expected one of: replace, delete, merge",
                go_text(d)
            ));
        }
    }
    if let Some(keys) = patch.get("$retainKeys") {
        let Some(keys) = keys.as_array() else {
            return other("$retainKeys must be a list".into());
        };
        let keep: Vec<&str> = keys.iter().filter_map(Value::as_str).collect();
        original.retain(|k, _| keep.contains(&k.as_str()));
    }
    for (key, value) in patch {
        if let Some(field) = key.strip_prefix("$deleteFromPrimitiveList/") {
            let Some(gone) = value.as_array() else {
                return other(format!("{key} must be a list"));
            };
            if let Some(Value::Array(list)) = original.get_mut(field) {
                list.retain(|v| !gone.contains(v));
            }
        }
    }
    for (key, value) in patch {
        if key.starts_with('$') {
            continue;
        }
        path.push(key.clone());
        match value {
            Value::Null => {
                original.remove(key);
            }
            Value::Object(p) => {
                let mut into = match original.remove(key) {
                    Some(Value::Object(m)) => m,
                    _ => Map::new(),
                };
                if merge_map(kind, &mut into, p, path)? == Outcome::Keep {
                    original.insert(key.clone(), Value::Object(into));
                }
            }
            Value::Array(p) => {
                let mut into = match original.remove(key) {
                    Some(Value::Array(a)) => a,
                    _ => Vec::new(),
                };
                let order = patch
                    .get(&format!("$setElementOrder/{key}"))
                    .and_then(Value::as_array)
                    .map(Vec::as_slice);
                merge_list(kind, &mut into, p, order, path)?;
                original.insert(key.clone(), Value::Array(into));
            }
            scalar => {
                original.insert(key.clone(), scalar.clone());
            }
        }
        path.pop();
    }
    // An order for a list the patch leaves alone: only the order changes.
    for (key, order) in patch {
        if let Some(field) = key.strip_prefix("$setElementOrder/")
            && !patch.contains_key(field)
        {
            let Some(order) = order.as_array() else {
                return other(format!("{key} must be a list"));
            };
            path.push(field.to_owned());
            let strategy = list_strategy(kind, path);
            path.pop();
            if let Some(Value::Array(list)) = original.get_mut(field) {
                if list.len() > MAX_MERGED_LIST || order.len() > MAX_MERGED_LIST {
                    return other(format!(
                        "{key} orders more than {MAX_MERGED_LIST} elements, the most the simulated cluster merges"
                    ));
                }
                let before = list.clone();
                *list = in_order(std::mem::take(list), order, &before, strategy);
            }
        }
    }
    Ok(Outcome::Keep)
}

/// A patch map as a fresh value: merged into nothing, so its directives are applied
/// rather than stored.
fn cleaned(
    kind: &str,
    patch: &Map<String, Value>,
    path: &mut Vec<String>,
) -> Result<Map<String, Value>, StrategicError> {
    let mut rest = patch.clone();
    rest.remove("$patch");
    let mut out = Map::new();
    merge_map(kind, &mut out, &rest, path)?;
    Ok(out)
}

fn merge_list(
    kind: &str,
    original: &mut Vec<Value>,
    patch: &[Value],
    order: Option<&[Value]>,
    path: &mut Vec<String>,
) -> Result<(), StrategicError> {
    let strategy = list_strategy(kind, path);
    if strategy != ListStrategy::Replace
        && (original.len() > MAX_MERGED_LIST || patch.len() > MAX_MERGED_LIST)
    {
        return other(format!(
            "the list {} has more than {MAX_MERGED_LIST} elements, the most the simulated cluster merges",
            path.join(".")
        ));
    }
    let is_directive = |v: &Value, d: &str| {
        v.as_object()
            .and_then(|m| m.get("$patch"))
            .and_then(Value::as_str)
            == Some(d)
    };
    // A `{"$patch": "replace"}` element replaces the list with the other elements.
    let replace = patch.iter().any(|v| is_directive(v, "replace"));
    if replace || strategy == ListStrategy::Replace {
        let mut out = Vec::with_capacity(patch.len());
        for item in patch.iter().filter(|v| !is_directive(v, "replace")) {
            out.push(fresh(kind, item, path)?);
        }
        *original = out;
        return Ok(());
    }
    let before = original.clone();
    match strategy {
        ListStrategy::Replace => unreachable!("handled above"),
        ListStrategy::Set => {
            for item in patch {
                if !original.contains(item) {
                    original.push(item.clone());
                }
            }
        }
        ListStrategy::MergeByKey(merge_key) => {
            for item in patch {
                let Value::Object(p) = item else {
                    return other(format!(
                        "the list {} merges on {merge_key}, but an element is not an object: {}",
                        path.join("."),
                        go_text(item)
                    ));
                };
                let Some(key) = p.get(merge_key) else {
                    return other(format!(
                        "map: {} does not contain declared merge key: {merge_key}",
                        go_text(item)
                    ));
                };
                let at = original.iter().position(|o| o.get(merge_key) == Some(key));
                if is_directive(item, "delete") {
                    original.retain(|o| o.get(merge_key) != Some(key));
                    continue;
                }
                match at {
                    Some(i) => {
                        let mut into = match std::mem::take(&mut original[i]) {
                            Value::Object(m) => m,
                            _ => Map::new(),
                        };
                        if merge_map(kind, &mut into, p, path)? == Outcome::Keep {
                            original[i] = Value::Object(into);
                        } else {
                            original.remove(i);
                        }
                    }
                    None => original.push(fresh(kind, item, path)?),
                }
            }
        }
    }
    // The patch's elements in the patch's order (or `$setElementOrder`'s), the server's
    // others where they stood, as `normalizeElementOrder` arranges them.
    let patch_order: Vec<Value> = match order {
        Some(o) => o.to_vec(),
        None => patch
            .iter()
            .filter(|v| !is_directive(v, "delete"))
            .cloned()
            .collect(),
    };
    *original = in_order(std::mem::take(original), &patch_order, &before, strategy);
    Ok(())
}

/// apimachinery's `normalizeElementOrder`: the merged elements named in `patch_order`
/// sorted by it, the others in their `server_order` order, then the two interleaved as
/// `mergeSortedSlice` does (a server element goes first only when both it and the next
/// patch element stood in the server's list, it before).
fn in_order(
    merged: Vec<Value>,
    patch_order: &[Value],
    server_order: &[Value],
    strategy: ListStrategy,
) -> Vec<Value> {
    let same = |a: &Value, b: &Value| match strategy {
        ListStrategy::MergeByKey(k) => a.get(k).is_some() && a.get(k) == b.get(k),
        _ => a == b,
    };
    let index = |list: &[Value], v: &Value| list.iter().position(|x| same(x, v));
    let (mut from_patch, server_only): (Vec<Value>, Vec<Value>) = merged
        .into_iter()
        .partition(|v| index(patch_order, v).is_some());
    from_patch.sort_by_key(|v| index(patch_order, v));
    let mut out = Vec::with_capacity(from_patch.len() + server_only.len());
    let (mut left, mut right) = (
        server_only.into_iter().peekable(),
        from_patch.into_iter().peekable(),
    );
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(l), Some(r)) => matches!(
                (index(server_order, l), index(server_order, r)),
                (Some(li), Some(ri)) if li < ri
            ),
        };
        let next = if take_left { left.next() } else { right.next() };
        out.extend(next);
    }
    out
}

/// A patch value as stored when nothing was there: maps merged into nothing.
fn fresh(kind: &str, item: &Value, path: &mut Vec<String>) -> Result<Value, StrategicError> {
    match item {
        Value::Object(m) => {
            let mut out = Map::new();
            merge_map(kind, &mut out, m, path)?;
            Ok(Value::Object(out))
        }
        other => Ok(other.clone()),
    }
}

/// A decoded JSON value as Go's `%v` prints it (`map[k:v k2:v2]`, `[a b]`, `<nil>`), for the
/// messages apimachinery builds with it.
fn go_text(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => s.clone(),
        Value::Array(a) => format!("[{}]", a.iter().map(go_text).collect::<Vec<_>>().join(" ")),
        Value::Object(m) => format!(
            "map[{}]",
            m.iter()
                .map(|(k, v)| format!("{k}:{}", go_text(v)))
                .collect::<Vec<_>>()
                .join(" ")
        ),
    }
}

/// The patch strategy of the list at `path` (object keys from the top; list elements
/// do not add a step) in an object of `kind`.
fn list_strategy(kind: &str, path: &[String]) -> ListStrategy {
    use ListStrategy::{MergeByKey, Replace, Set};
    let p: Vec<&str> = path.iter().map(String::as_str).collect();
    // ObjectMeta, at the top and in a pod template.
    let meta = match p.as_slice() {
        ["metadata", rest @ ..] => Some(rest),
        ["spec", "template", "metadata", rest @ ..]
            if matches!(kind, "Deployment" | "ReplicaSet") =>
        {
            Some(rest)
        }
        _ => None,
    };
    if let Some(rest) = meta {
        return match rest {
            ["finalizers"] => Set,
            ["ownerReferences"] => MergeByKey("uid"),
            _ => Replace,
        };
    }
    let pod_spec = match (kind, p.as_slice()) {
        ("Pod", ["spec", rest @ ..]) => Some(rest),
        ("Deployment" | "ReplicaSet", ["spec", "template", "spec", rest @ ..]) => Some(rest),
        _ => None,
    };
    if let Some(rest) = pod_spec {
        return match rest {
            ["containers" | "initContainers" | "ephemeralContainers"] => MergeByKey("name"),
            [
                "containers" | "initContainers" | "ephemeralContainers",
                field,
            ] => match *field {
                "env" => MergeByKey("name"),
                "ports" => MergeByKey("containerPort"),
                "volumeMounts" => MergeByKey("mountPath"),
                "volumeDevices" => MergeByKey("devicePath"),
                _ => Replace,
            },
            ["volumes" | "imagePullSecrets" | "resourceClaims" | "schedulingGates"] => {
                MergeByKey("name")
            }
            ["hostAliases"] => MergeByKey("ip"),
            ["topologySpreadConstraints"] => MergeByKey("topologyKey"),
            _ => Replace,
        };
    }
    match (kind, p.as_slice()) {
        (_, ["status", "conditions"]) if kind != "Event" && kind != "Lease" => MergeByKey("type"),
        ("Pod", ["status", "podIPs" | "hostIPs"]) => MergeByKey("ip"),
        ("Service", ["spec", "ports"]) => MergeByKey("port"),
        _ => Replace,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn patched(kind: &str, mut target: Value, patch: Value) -> Value {
        strategic_merge(kind, &mut target, &patch).unwrap();
        target
    }

    #[test]
    fn containers_merge_by_name_and_env_by_name() {
        let pod = json!({"spec": {"containers": [
            {"name": "app", "image": "a:1", "env": [{"name": "A", "value": "1"}]},
            {"name": "side", "image": "s:1"}]}});
        let out = patched(
            "Pod",
            pod,
            json!({"spec": {"containers": [
                {"name": "app", "image": "a:2", "env": [{"name": "B", "value": "2"}]},
                {"name": "new", "image": "n:1"},
                {"name": "side", "$patch": "delete"}]}}),
        );
        assert_eq!(
            out,
            json!({"spec": {"containers": [
                {"name": "app", "image": "a:2", "env": [{"name": "B", "value": "2"}, {"name": "A", "value": "1"}]},
                {"name": "new", "image": "n:1"}]}})
        );
    }

    /// New elements come before the server's own unless both stood in the server's list;
    /// this is the order the real apiserver answers (the conformance script's `smp-*`).
    #[test]
    fn a_deployments_template_and_metadata_lists() {
        let d = json!({"metadata": {"finalizers": ["a"], "ownerReferences": [{"uid": "1", "name": "x"}]},
            "spec": {"template": {"spec": {"volumes": [{"name": "v", "emptyDir": {}}], "tolerations": [{"key": "k"}]}}}});
        let out = patched(
            "Deployment",
            d,
            json!({"metadata": {"finalizers": ["b", "a"], "ownerReferences": [{"uid": "2", "name": "y"}]},
                "spec": {"template": {"spec": {"volumes": [{"name": "w", "emptyDir": {}}], "tolerations": [{"key": "t"}]}}}}),
        );
        assert_eq!(
            out,
            json!({"metadata": {"finalizers": ["b", "a"], "ownerReferences": [{"uid": "2", "name": "y"}, {"uid": "1", "name": "x"}]},
                "spec": {"template": {"spec": {"volumes": [{"name": "w", "emptyDir": {}}, {"name": "v", "emptyDir": {}}], "tolerations": [{"key": "t"}]}}}})
        );
    }

    #[test]
    fn directives() {
        let cm = json!({"metadata": {"finalizers": ["a", "b", "c"], "labels": {"x": "1", "y": "2"}}, "data": {"k": "v", "j": "w"}});
        let out = patched(
            "ConfigMap",
            cm.clone(),
            json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["b"], "labels": {"$patch": "replace", "z": "3"}},
                "data": {"$retainKeys": ["k"], "k": "v2"}}),
        );
        assert_eq!(
            out,
            json!({"metadata": {"finalizers": ["a", "c"], "labels": {"z": "3"}}, "data": {"k": "v2"}})
        );
        let out = patched(
            "ConfigMap",
            cm.clone(),
            json!({"data": {"$patch": "delete"}}),
        );
        assert_eq!(out.get("data"), None);
        let out = patched(
            "ConfigMap",
            cm,
            json!({"metadata": {"finalizers": [{"$patch": "replace"}, "z"], "$setElementOrder/finalizers": ["z"]}}),
        );
        assert_eq!(out["metadata"]["finalizers"], json!(["z"]));
        let pod = json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}]}});
        let out = patched(
            "Pod",
            pod,
            json!({"spec": {"$setElementOrder/containers": [{"name": "b"}, {"name": "a"}]}}),
        );
        assert_eq!(
            out,
            json!({"spec": {"containers": [{"name": "b"}, {"name": "a"}]}})
        );
    }

    #[test]
    fn bad_patches_are_errors_never_panics() {
        let mut pod = json!({"spec": {"containers": [{"name": "a"}]}});
        for bad in [
            json!([1]),
            json!({"spec": {"containers": [{"image": "no-name"}]}}),
            json!({"spec": {"containers": ["text"]}}),
            json!({"$patch": "explode"}),
            json!({"data": {"$retainKeys": "k"}}),
        ] {
            assert!(strategic_merge("Pod", &mut pod, &bad).is_err(), "{bad}");
        }
        assert_eq!(
            strategic_merge("Pod", &mut pod, &json!(["x"])),
            Err(StrategicError::NotAnObject("array"))
        );
        assert_eq!(
            strategic_merge(
                "Pod",
                &mut pod,
                &json!({"spec": {"containers": [{"image": "i", "n": 1}]}})
            ),
            Err(StrategicError::Other(
                "map: map[image:i n:1] does not contain declared merge key: name".into()
            ))
        );
        let long: Vec<Value> = (0..=MAX_MERGED_LIST)
            .map(|i| json!(format!("f{i}")))
            .collect();
        assert!(
            strategic_merge(
                "ConfigMap",
                &mut json!({}),
                &json!({"metadata": {"finalizers": long}})
            )
            .is_err()
        );
        let mut deep = json!(null);
        for _ in 0..100 {
            deep = json!({ "d": deep });
        }
        assert!(strategic_merge("ConfigMap", &mut json!({}), &deep).is_err());
    }
}
