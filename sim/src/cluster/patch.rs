//! JSON merge patch (RFC 7386) and JSON patch (RFC 6902, with RFC 6901 pointers), written
//! out here: both are small, and owning them keeps every failure a value, never a panic.

use serde_json::{Map, Value};

/// The most operations a JSON patch may have (the apiserver's `maxJSONPatchOperations`).
pub const MAX_JSON_PATCH_OPERATIONS: usize = 10_000;

/// RFC 7386: an object patch merges key by key (`null` removes), anything else replaces.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    if let Value::Object(t) = target {
        for (k, v) in patch {
            if v.is_null() {
                t.remove(k);
            } else {
                merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
    }
}

/// Why a JSON patch failed (the apiserver answers 422 with a generic message for any of
/// these; the text is for tests and logs).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct JsonPatchError(pub String);

fn fail<T>(message: impl Into<String>) -> Result<T, JsonPatchError> {
    Err(JsonPatchError(message.into()))
}

/// An RFC 6901 pointer as its unescaped reference tokens.
fn tokens(pointer: &str) -> Result<Vec<String>, JsonPatchError> {
    if pointer.is_empty() {
        return Ok(Vec::new());
    }
    let Some(rest) = pointer.strip_prefix('/') else {
        return fail(format!("invalid JSON pointer {pointer:?}"));
    };
    rest.split('/')
        .map(|t| {
            let b = t.as_bytes();
            let bad_escape = b
                .iter()
                .enumerate()
                .any(|(i, c)| *c == b'~' && !matches!(b.get(i + 1), Some(b'0' | b'1')));
            if bad_escape {
                return fail(format!("invalid escape in {pointer:?}"));
            }
            Ok(t.replace("~1", "/").replace("~0", "~"))
        })
        .collect()
}

fn index(token: &str, len: usize, allow_end: bool) -> Result<usize, JsonPatchError> {
    if allow_end && token == "-" {
        return Ok(len);
    }
    // RFC 6901: no leading zeros, no sign.
    let ok = !token.is_empty()
        && token.bytes().all(|b| b.is_ascii_digit())
        && (token == "0" || !token.starts_with('0'));
    let i: usize = if ok {
        token
            .parse()
            .map_err(|_| JsonPatchError(format!("bad index {token:?}")))?
    } else {
        return fail(format!("bad index {token:?}"));
    };
    if i > len || (!allow_end && i == len) {
        return fail(format!("index {i} out of bounds"));
    }
    Ok(i)
}

fn get<'a>(doc: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(doc, |at, t| match at {
        Value::Object(m) => m.get(t),
        Value::Array(a) => index(t, a.len(), false).ok().and_then(|i| a.get(i)),
        _ => None,
    })
}

fn parent<'a>(
    doc: &'a mut Value,
    path: &[String],
) -> Result<(&'a mut Value, String), JsonPatchError> {
    let Some((last, init)) = path.split_last() else {
        return fail("the root has no parent");
    };
    let mut at = doc;
    for t in init {
        at = match at {
            Value::Object(m) => m.get_mut(t),
            Value::Array(a) => {
                let i = index(t, a.len(), false)?;
                a.get_mut(i)
            }
            _ => None,
        }
        .ok_or_else(|| JsonPatchError(format!("missing path element {t:?}")))?;
    }
    Ok((at, last.clone()))
}

fn add(doc: &mut Value, path: &[String], value: Value) -> Result<(), JsonPatchError> {
    if path.is_empty() {
        *doc = value;
        return Ok(());
    }
    let (p, last) = parent(doc, path)?;
    match p {
        Value::Object(m) => {
            m.insert(last, value);
            Ok(())
        }
        Value::Array(a) => {
            let i = index(&last, a.len(), true)?;
            a.insert(i, value);
            Ok(())
        }
        _ => fail("add into a scalar"),
    }
}

fn remove(doc: &mut Value, path: &[String]) -> Result<Value, JsonPatchError> {
    let (p, last) = parent(doc, path)?;
    match p {
        Value::Object(m) => m
            .remove(&last)
            .ok_or_else(|| JsonPatchError(format!("remove: missing {last:?}"))),
        Value::Array(a) => {
            let i = index(&last, a.len(), false)?;
            Ok(a.remove(i))
        }
        _ => fail("remove from a scalar"),
    }
}

/// RFC 6902: applies every operation in order to a copy; `doc` is changed only when all
/// succeed. `test` compares JSON values (numbers by value, as Go decodes them).
///
/// # Errors
/// [`JsonPatchError`] for a malformed operation, a missing path, or a failed `test`.
pub fn json_patch(doc: &mut Value, patch: &[Value]) -> Result<(), JsonPatchError> {
    let mut work = doc.clone();
    for op in patch {
        let field = |k: &str| op.get(k).and_then(Value::as_str);
        let Some(name) = field("op") else {
            return fail("operation without op");
        };
        let path = tokens(field("path").ok_or_else(|| JsonPatchError("missing path".into()))?)?;
        let value = || {
            op.get("value")
                .cloned()
                .ok_or_else(|| JsonPatchError(format!("{name} without value")))
        };
        let from =
            || tokens(field("from").ok_or_else(|| JsonPatchError(format!("{name} without from")))?);
        match name {
            "add" => add(&mut work, &path, value()?)?,
            "remove" => {
                if path.is_empty() {
                    return fail("remove the root");
                }
                remove(&mut work, &path)?;
            }
            "replace" => {
                let v = value()?;
                if path.is_empty() {
                    work = v;
                } else {
                    remove(&mut work, &path)?;
                    add(&mut work, &path, v)?;
                }
            }
            "move" => {
                let from = from()?;
                if path.len() > from.len() && path[..from.len()] == from[..] {
                    return fail("move into its own child");
                }
                let v = if from.is_empty() {
                    work.clone()
                } else {
                    remove(&mut work, &from)?
                };
                add(&mut work, &path, v)?;
            }
            "copy" => {
                let v = get(&work, &from()?)
                    .cloned()
                    .ok_or_else(|| JsonPatchError("copy from a missing path".into()))?;
                add(&mut work, &path, v)?;
            }
            "test" => {
                let v = value()?;
                let passes = match get(&work, &path) {
                    Some(at) => json_equal(at, &v),
                    // evanphx/json-patch, the apiserver's: a member missing from an object
                    // that exists tests equal to `null` (kube-runtime's finalizer helper
                    // adds the first finalizer after such a test).
                    None => v.is_null() && member_of_an_object(&work, &path),
                };
                if !passes {
                    return fail(format!(
                        "testing value {} failed",
                        field("path").unwrap_or("")
                    ));
                }
            }
            other => return fail(format!("unexpected kind of operation {other:?}")),
        }
    }
    *doc = work;
    Ok(())
}

/// Whether `path` names a member of an object that exists (whether or not the member does).
fn member_of_an_object(doc: &Value, path: &[String]) -> bool {
    path.split_last()
        .is_some_and(|(_, init)| get(doc, init).is_some_and(Value::is_object))
}

/// JSON equality with numbers compared by value (`1` equals `1.0`).
fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_equal(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_equal(v, w)))
        }
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patch_follows_the_rfc_7386_examples() {
        let cases = [
            (json!({"a": "b"}), json!({"a": "c"}), json!({"a": "c"})),
            (
                json!({"a": "b"}),
                json!({"b": "c"}),
                json!({"a": "b", "b": "c"}),
            ),
            (json!({"a": "b"}), json!({"a": null}), json!({})),
            (
                json!({"a": {"b": "c"}}),
                json!({"a": {"b": "d", "c": null}}),
                json!({"a": {"b": "d"}}),
            ),
            (
                json!({"a": [{"b": "c"}]}),
                json!({"a": [1]}),
                json!({"a": [1]}),
            ),
            (json!(["a", "b"]), json!(["c", "d"]), json!(["c", "d"])),
            (json!({"a": "foo"}), json!("bar"), json!("bar")),
            (
                json!({"e": null}),
                json!({"a": 1}),
                json!({"e": null, "a": 1}),
            ),
            (
                json!([1, 2]),
                json!({"a": "b", "c": null}),
                json!({"a": "b"}),
            ),
            (
                json!({}),
                json!({"a": {"bb": {"ccc": null}}}),
                json!({"a": {"bb": {}}}),
            ),
        ];
        for (mut target, patch, want) in cases {
            merge_patch(&mut target, &patch);
            assert_eq!(target, want, "{patch}");
        }
    }

    #[test]
    fn json_patch_follows_rfc_6902_and_leaves_the_document_alone_on_failure() {
        let mut doc = json!({"foo": ["bar", "baz"], "a~b": 1, "c/d": 2});
        let patch = json!([
            {"op": "add", "path": "/foo/1", "value": "qux"},
            {"op": "add", "path": "/foo/-", "value": "end"},
            {"op": "remove", "path": "/a~0b"},
            {"op": "replace", "path": "/c~1d", "value": 3},
            {"op": "copy", "from": "/foo/0", "path": "/first"},
            {"op": "move", "from": "/first", "path": "/moved"},
            {"op": "test", "path": "/c~1d", "value": 3.0},
        ]);
        json_patch(&mut doc, patch.as_array().unwrap()).unwrap();
        assert_eq!(
            doc,
            json!({"foo": ["bar", "qux", "baz", "end"], "c/d": 3, "moved": "bar"})
        );
        let before = doc.clone();
        for bad in [
            json!([{"op": "test", "path": "/c~1d", "value": 4}]),
            json!([{"op": "add", "path": "/x", "value": 1}, {"op": "remove", "path": "/nope"}]),
            json!([{"op": "replace", "path": "/foo/9", "value": 1}]),
            json!([{"op": "add", "path": "/foo/01", "value": 1}]),
            json!([{"op": "add", "path": "nope", "value": 1}]),
            json!([{"op": "jump", "path": "/x"}]),
            json!([{"path": "/x"}]),
            json!([{"op": "move", "from": "/foo", "path": "/foo/0"}]),
            json!([{"op": "add", "path": "/foo/0/deeper", "value": 1}]),
            json!([{"op": "remove", "path": ""}]),
        ] {
            assert!(
                json_patch(&mut doc, bad.as_array().unwrap()).is_err(),
                "{bad}"
            );
            assert_eq!(doc, before);
        }
        // A missing member tests equal to null, as in the apiserver's json-patch; a
        // missing parent, a missing array index or another value does not.
        json_patch(
            &mut doc,
            json!([{"op": "test", "path": "/absent", "value": null}])
                .as_array()
                .unwrap(),
        )
        .unwrap();
        for bad in [
            json!([{"op": "test", "path": "/absent", "value": 1}]),
            json!([{"op": "test", "path": "/absent/deeper", "value": null}]),
            json!([{"op": "test", "path": "/foo/9", "value": null}]),
            json!([{"op": "test", "path": "/c~1d", "value": null}]),
        ] {
            assert!(
                json_patch(&mut doc, bad.as_array().unwrap()).is_err(),
                "{bad}"
            );
        }
        assert_eq!(
            json_patch(
                &mut doc,
                json!([{"op": "test", "path": "/c~1d", "value": 4}])
                    .as_array()
                    .unwrap()
            ),
            Err(JsonPatchError("testing value /c~1d failed".into()))
        );
    }
}
