//! Server-side apply and `metadata.managedFields`, modelled as far as a typical operator
//! uses them.
//!
//! **Modelled**: every write records field ownership in `managedFields`, one entry per
//! manager, operation (`Apply` or `Update`) and subresource, with `fieldsType: FieldsV1`
//! and a `fieldsV1` tree of `f:` keys. An `Update` (create, PUT, merge or JSON patch)
//! takes the fields it changed from every other manager, silently. An apply
//! (`application/apply-patch+yaml`, a JSON body; `fieldManager` required) creates the
//! object when absent, sets every field it names, conflicts (409, worded as
//! structured-merge-diff words it) when another manager owns a field it sets to a different
//! value, unless `force=true`, which takes the field; two managers setting the same value
//! share it. Fields the manager applied before and no longer names are removed, unless
//! another manager owns them. An apply that changes nothing writes nothing.
//!
//! **Not modelled**: schemas. Every list is atomic (owned and replaced whole: no
//! `x-kubernetes-list-type: map` merge by key, so two managers cannot share a list of
//! containers); a map is never owned itself (no `.` entries), only its leaves; a `null`
//! in an applied object removes the field; `managedFields` sent in a body are ignored
//! (the server's are kept), and so is the `fieldValidation` parameter.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

/// A field path of map keys from the object's root.
pub(super) type Path = Vec<String>;

/// Which part of the object a write may own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Scope {
    /// The main resource; `.status` is out of scope when the kind has the subresource.
    Main { status_excluded: bool },
    /// The `/status` subresource: `.status` only.
    Status,
}

impl Scope {
    pub fn subresource(self) -> &'static str {
        match self {
            Scope::Main { .. } => "",
            Scope::Status => "status",
        }
    }

    fn includes(self, top: &str) -> bool {
        match self {
            Scope::Main { status_excluded } => {
                !(matches!(top, "apiVersion" | "kind") || (status_excluded && top == "status"))
            }
            Scope::Status => top == "status",
        }
    }
}

/// System metadata nobody owns.
fn system_meta(key: &str) -> bool {
    matches!(
        key,
        "name"
            | "namespace"
            | "uid"
            | "resourceVersion"
            | "generation"
            | "creationTimestamp"
            | "deletionTimestamp"
            | "deletionGracePeriodSeconds"
            | "managedFields"
            | "selfLink"
    )
}

/// One `managedFields` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Entry {
    pub manager: String,
    pub operation: &'static str,
    pub api_version: String,
    pub time: String,
    pub subresource: String,
    pub fields: BTreeSet<Path>,
}

impl Entry {
    pub fn is(&self, manager: &str, operation: &str, subresource: &str) -> bool {
        self.manager == manager && self.operation == operation && self.subresource == subresource
    }

    /// The manager as a conflict message names it (structured-merge-diff's `printManager`).
    pub fn printed(&self) -> String {
        let mut s = format!("{:?}", self.manager);
        if !self.subresource.is_empty() {
            s.push_str(&format!(" with subresource {:?}", self.subresource));
        }
        if self.operation == "Update" {
            s.push_str(&format!(" using {}", self.api_version));
        }
        s
    }
}

/// Leaf paths of `v` in `scope`: scalars and lists; `null`s and empty maps skipped (a map
/// is never owned itself).
pub(super) fn leaves(v: &Value, scope: Scope) -> BTreeSet<Path> {
    fn walk(v: &Value, path: &mut Path, out: &mut BTreeSet<Path>) {
        match v {
            Value::Null => {}
            Value::Object(m) => {
                for (k, child) in m {
                    if path.len() == 1 && path[0] == "metadata" && system_meta(k) {
                        continue;
                    }
                    path.push(k.clone());
                    walk(child, path, out);
                    path.pop();
                }
            }
            _ => {
                out.insert(path.clone());
            }
        }
    }
    let mut out = BTreeSet::new();
    if let Value::Object(m) = v {
        for (k, child) in m {
            if scope.includes(k) {
                let mut path = vec![k.clone()];
                walk(child, &mut path, &mut out);
            }
        }
    }
    out
}

pub(super) fn value_at<'a>(v: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(v, |at, k| at.get(k))
}

fn set_at(v: &mut Value, path: &[String], value: Value) {
    let Some((last, init)) = path.split_last() else {
        return;
    };
    let mut at = v;
    for k in init {
        if !at.is_object() {
            *at = Value::Object(Map::new());
        }
        let Value::Object(m) = at else { return };
        at = m
            .entry(k.clone())
            .or_insert_with(|| Value::Object(Map::new()));
    }
    if !at.is_object() {
        *at = Value::Object(Map::new());
    }
    if let Value::Object(m) = at {
        if value.is_null() {
            m.remove(last);
        } else {
            m.insert(last.clone(), value);
        }
    }
}

fn remove_at(v: &mut Value, path: &[String]) {
    let Some((last, init)) = path.split_last() else {
        return;
    };
    let mut at = v;
    for k in init {
        match at.get_mut(k) {
            Some(next) => at = next,
            None => return,
        }
    }
    if let Value::Object(m) = at {
        m.remove(last);
    }
}

/// Whether one path is the other or under it.
pub(super) fn overlaps(a: &[String], b: &[String]) -> bool {
    let n = a.len().min(b.len());
    a[..n] == b[..n]
}

/// `.spec.replicas`, as structured-merge-diff prints a path.
pub(super) fn printed_path(p: &[String]) -> String {
    p.iter().map(|k| format!(".{k}")).collect()
}

fn fields_v1(paths: &BTreeSet<Path>) -> Value {
    let mut root = Value::Object(Map::new());
    for p in paths {
        let keyed: Vec<String> = p.iter().map(|k| format!("f:{k}")).collect();
        set_at(&mut root, &keyed, json!({}));
    }
    root
}

fn from_fields_v1(v: &Value) -> BTreeSet<Path> {
    fn walk(v: &Value, path: &mut Path, out: &mut BTreeSet<Path>) {
        match v.as_object() {
            Some(m) if !m.is_empty() => {
                for (k, child) in m {
                    if let Some(k) = k.strip_prefix("f:") {
                        path.push(k.to_owned());
                        walk(child, path, out);
                        path.pop();
                    }
                }
            }
            _ if !path.is_empty() => {
                out.insert(path.clone());
            }
            _ => {}
        }
    }
    let mut out = BTreeSet::new();
    walk(v, &mut Vec::new(), &mut out);
    out
}

/// The entries of `metadata.managedFields`.
pub(super) fn read_entries(v: &Value) -> Vec<Entry> {
    let Some(list) =
        value_at(v, &["metadata".into(), "managedFields".into()]).and_then(Value::as_array)
    else {
        return Vec::new();
    };
    let text = |e: &Value, k: &str| e.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
    list.iter()
        .map(|e| Entry {
            manager: text(e, "manager"),
            operation: if text(e, "operation") == "Apply" {
                "Apply"
            } else {
                "Update"
            },
            api_version: text(e, "apiVersion"),
            time: text(e, "time"),
            subresource: text(e, "subresource"),
            fields: e.get("fieldsV1").map(from_fields_v1).unwrap_or_default(),
        })
        .collect()
}

/// Writes the entries (without empty ones) into `metadata.managedFields`, in the
/// apiserver's order: by operation (`Apply` first), then by time, then by manager and
/// subresource. Every time is the server's, in one RFC 3339 form to the second, so the
/// text orders as the instants do; a missing time sorts first, as Go's zero time does.
pub(super) fn write_entries(v: &mut Value, entries: &[Entry]) {
    let mut sorted: Vec<&Entry> = entries.iter().filter(|e| !e.fields.is_empty()).collect();
    sorted.sort_by(|p, q| {
        (p.operation, &p.time, &p.manager, &p.subresource).cmp(&(
            q.operation,
            &q.time,
            &q.manager,
            &q.subresource,
        ))
    });
    let list: Vec<Value> = sorted
        .into_iter()
        .map(|e| {
            let mut m = json!({
                "manager": e.manager, "operation": e.operation, "apiVersion": e.api_version,
                "time": e.time, "fieldsType": "FieldsV1", "fieldsV1": fields_v1(&e.fields),
            });
            if !e.subresource.is_empty() {
                m["subresource"] = e.subresource.clone().into();
            }
            m
        })
        .collect();
    if let Some(m) = super::store::meta_mut(v) {
        if list.is_empty() {
            m.remove("managedFields");
        } else {
            m.insert("managedFields".into(), Value::Array(list));
        }
    }
}

/// Who writes, for the ownership bookkeeping.
#[derive(Debug, Clone)]
pub(super) struct Writer<'a> {
    pub manager: &'a str,
    pub api_version: &'a str,
    pub time: &'a str,
    pub scope: Scope,
}

/// An `Update`: `writer` takes the fields that differ between `old` (`Null` on create) and
/// `new`; fields removed or taken leave every other entry. `new`'s entries are rewritten.
pub(super) fn record_update(old: &Value, new: &mut Value, writer: &Writer<'_>) {
    let mut entries = read_entries(old);
    let (before, after) = (leaves(old, writer.scope), leaves(new, writer.scope));
    let changed: Vec<&Path> = after
        .iter()
        .filter(|p| value_at(old, p) != value_at(new, p))
        .collect();
    let removed: Vec<&Path> = before.iter().filter(|p| !after.contains(*p)).collect();
    if changed.is_empty() && removed.is_empty() {
        write_entries(new, &entries);
        return;
    }
    let sub = writer.scope.subresource();
    for e in &mut entries {
        let before = e.fields.len();
        e.fields
            .retain(|q| !changed.iter().chain(&removed).any(|p| overlaps(p, q)));
        if e.fields.len() != before && e.is(writer.manager, "Update", sub) {
            e.time = writer.time.to_owned();
        }
    }
    if !changed.is_empty() {
        let i = match entries
            .iter()
            .position(|e| e.is(writer.manager, "Update", sub))
        {
            Some(i) => i,
            None => {
                entries.push(Entry {
                    manager: writer.manager.to_owned(),
                    operation: "Update",
                    api_version: writer.api_version.to_owned(),
                    time: String::new(),
                    subresource: sub.to_owned(),
                    fields: BTreeSet::new(),
                });
                entries.len() - 1
            }
        };
        let e = &mut entries[i];
        e.fields.extend(changed.into_iter().cloned());
        e.time = writer.time.to_owned();
        e.api_version = writer.api_version.to_owned();
    }
    write_entries(new, &entries);
}

/// An apply of `applied` onto `current` (`Null` when absent) by `writer`: the new object
/// with its entries, or the conflicts `(manager, path)` when not forced.
pub(super) fn apply(
    current: &Value,
    applied: &Value,
    writer: &Writer<'_>,
    force: bool,
) -> Result<Value, Vec<(String, String)>> {
    let sub = writer.scope.subresource();
    let mut entries = read_entries(current);
    let fields = leaves(applied, writer.scope);
    let mut conflicts = Vec::new();
    for p in &fields {
        if value_at(current, p) == value_at(applied, p) {
            continue;
        }
        for e in &mut entries {
            if e.is(writer.manager, "Apply", sub) {
                continue;
            }
            if e.fields.iter().any(|q| overlaps(p, q)) {
                if force {
                    e.fields.retain(|q| !overlaps(p, q));
                } else {
                    conflicts.push((e.printed(), printed_path(p)));
                }
            }
        }
    }
    if !conflicts.is_empty() {
        return Err(conflicts);
    }
    let mut new = current.clone();
    if !new.is_object() {
        new = Value::Object(Map::new());
    }
    let previous = entries
        .iter()
        .find(|e| e.is(writer.manager, "Apply", sub))
        .map(|e| e.fields.clone())
        .unwrap_or_default();
    for p in previous
        .iter()
        .filter(|p| !fields.iter().any(|f| overlaps(f, p)))
    {
        let owned_elsewhere = entries
            .iter()
            .filter(|e| !e.is(writer.manager, "Apply", sub))
            .any(|e| e.fields.iter().any(|q| overlaps(p, q)));
        if !owned_elsewhere {
            remove_at(&mut new, p);
        }
    }
    for p in &fields {
        set_at(
            &mut new,
            p,
            value_at(applied, p).cloned().unwrap_or(Value::Null),
        );
    }
    // Nulls name a field to clear: the manager stops owning it too.
    for p in leaves_with_nulls(applied, writer.scope) {
        remove_at(&mut new, &p);
    }
    match entries
        .iter_mut()
        .find(|e| e.is(writer.manager, "Apply", sub))
    {
        Some(e) if e.fields != fields => {
            e.fields = fields;
            e.time = writer.time.to_owned();
            e.api_version = writer.api_version.to_owned();
        }
        Some(_) => {}
        None => entries.push(Entry {
            manager: writer.manager.to_owned(),
            operation: "Apply",
            api_version: writer.api_version.to_owned(),
            time: writer.time.to_owned(),
            subresource: sub.to_owned(),
            fields,
        }),
    }
    write_entries(&mut new, &entries);
    Ok(new)
}

/// Paths whose applied value is `null`.
fn leaves_with_nulls(v: &Value, scope: Scope) -> Vec<Path> {
    fn walk(v: &Value, path: &mut Path, out: &mut Vec<Path>) {
        match v {
            Value::Null => out.push(path.clone()),
            Value::Object(m) => {
                for (k, child) in m {
                    path.push(k.clone());
                    walk(child, path, out);
                    path.pop();
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    if let Value::Object(m) = v {
        for (k, child) in m.iter().filter(|(k, _)| scope.includes(k)) {
            walk(child, &mut vec![k.clone()], &mut out);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAIN: Scope = Scope::Main {
        status_excluded: true,
    };

    fn writer(manager: &str) -> Writer<'_> {
        Writer {
            manager,
            api_version: "v1",
            time: "2026-01-01T00:00:00Z",
            scope: MAIN,
        }
    }

    #[test]
    fn leaves_skip_system_metadata_kind_and_status() {
        let v = json!({"apiVersion": "v1", "kind": "X", "metadata": {"name": "a", "labels": {"k": "v"}},
            "spec": {"list": [1], "empty": {}, "n": null}, "status": {"s": 1}});
        let got: Vec<String> = leaves(&v, MAIN).iter().map(|p| printed_path(p)).collect();
        assert_eq!(got, [".metadata.labels.k", ".spec.list"]);
        let got: Vec<String> = leaves(&v, Scope::Status)
            .iter()
            .map(|p| printed_path(p))
            .collect();
        assert_eq!(got, [".status.s"]);
    }

    #[test]
    fn fields_v1_round_trips() {
        let paths = leaves(&json!({"spec": {"a": 1, "b": {"c": [2]}}}), MAIN);
        assert_eq!(
            fields_v1(&paths),
            json!({"f:spec": {"f:a": {}, "f:b": {"f:c": {}}}})
        );
        assert_eq!(from_fields_v1(&fields_v1(&paths)), paths);
    }

    #[test]
    fn an_update_takes_changed_fields_from_an_applier_and_apply_then_conflicts() {
        let applied = json!({"spec": {"replicas": 1, "image": "a"}});
        let first = apply(&Value::Null, &applied, &writer("op"), false).unwrap();
        let mut edited = first.clone();
        edited["spec"]["replicas"] = 3.into();
        record_update(&first, &mut edited, &writer("kubectl"));
        let entries = read_entries(&edited);
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[1].printed(), "\"kubectl\" using v1");
        let err = apply(&edited, &applied, &writer("op"), false).unwrap_err();
        assert_eq!(
            err,
            [(
                "\"kubectl\" using v1".to_owned(),
                ".spec.replicas".to_owned()
            )]
        );
        let forced = apply(&edited, &applied, &writer("op"), true).unwrap();
        assert_eq!(forced["spec"]["replicas"], 1);
        assert_eq!(read_entries(&forced).len(), 1);
    }

    #[test]
    fn entries_are_written_by_operation_then_time_then_manager_then_subresource() {
        let later = Writer {
            time: "2026-01-01T00:00:05Z",
            ..writer("a-main")
        };
        let status = Writer {
            scope: Scope::Status,
            ..writer("a-main")
        };
        let old = json!({"spec": {"x": 1}, "status": {"s": 1}});
        let mut v = json!({"spec": {"x": 2}, "status": {"s": 1}});
        record_update(&old, &mut v, &later);
        let old = v.clone();
        v["status"]["s"] = 2.into();
        record_update(&old, &mut v, &status);
        let v = apply(&v, &json!({"spec": {"y": 1}}), &writer("z-applier"), false).unwrap();
        let order: Vec<String> = read_entries(&v)
            .iter()
            .map(|e| format!("{} {} {} {}", e.operation, e.time, e.manager, e.subresource))
            .collect();
        // The status entry was written first in time order though second in write order.
        assert_eq!(
            order,
            [
                "Apply 2026-01-01T00:00:00Z z-applier ",
                "Update 2026-01-01T00:00:00Z a-main status",
                "Update 2026-01-01T00:00:05Z a-main ",
            ]
        );
    }

    #[test]
    fn an_applier_dropping_a_field_removes_it_unless_shared() {
        let both = json!({"spec": {"a": 1, "b": 2}});
        let v = apply(&Value::Null, &both, &writer("x"), false).unwrap();
        let v = apply(&v, &json!({"spec": {"b": 2}}), &writer("y"), false).unwrap();
        let v = apply(&v, &json!({"spec": {}}), &writer("x"), false).unwrap();
        assert_eq!(v["spec"], json!({"b": 2}));
    }
}
