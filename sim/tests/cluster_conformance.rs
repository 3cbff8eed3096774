//! The simulated cluster is a model of the real thing (issue 26, part 1): one script of
//! requests ([`script`]) is run against the real kube-apiserver of `reconcile-k8s-env`
//! (with its kube-controller-manager collecting garbage) and against
//! [`reconcile_sim::cluster::Cluster`], and the two transcripts are compared field by field
//! after the normalisations listed in [`Norm`]. Every difference still found is listed in
//! [`KNOWN`] with its reason (and in docs/alignment.md): a new one fails the test, and so does
//! a listed one that no longer occurs. [`the_comparison_fires_on_a_planted_difference`] shows
//! the comparison is not vacuous; it needs no environment.

use std::collections::BTreeMap;
use std::time::Duration;

use reconcile_core::Instant;
use reconcile_k8s_env::{ApiServer, K8sEnv, encode_query, shared_or_skip, wait_for};
use reconcile_sim::cluster::{Cluster, ClusterConfig, Reply};
use serde_json::{Value, json};

const GROUP: &str = "conformance.example.com";
/// The server-side `timeoutSeconds` of every watch of the script: a watch is read to its end.
const WATCH_SECONDS: u64 = 2;
/// The `timeoutSeconds` of a watch that asks for bookmarks: the watch cache sends one 2 s
/// before a watch's end (`nextBookmarkTime`), so the watch must last longer than that.
const BOOKMARK_WATCH_SECONDS: u64 = 4;
/// How long the real garbage collector may take to settle one step.
const SETTLE: Duration = Duration::from_secs(30);

/// The custom resource of the script, with a `/status` subresource; registered as is on
/// both sides (the real side needs a schema; the simulator ignores it).
fn crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("widgets.{GROUP}")},
        "spec": {"group": GROUP, "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    })
}

// ---------------------------------------------------------------------------------------
// The script

/// One step. Paths and bodies are templates: `{ns}` is the namespace, `{L.rv}`, `{L.uid}`,
/// `{L.name}` and `{L.continue}` (URL-encoded) what step `L`'s answer carried on that side.
enum Step {
    /// One request.
    Send {
        label: &'static str,
        method: &'static str,
        path: String,
        content_type: &'static str,
        body: Option<Value>,
        /// `Accept`: JSON, or metadata only.
        accept: &'static str,
    },
    /// A watch opened here and read to its end (`timeoutSeconds` is [`WATCH_SECONDS`]).
    Watch {
        label: &'static str,
        path: String,
        accept: &'static str,
    },
    /// The garbage collector's work: the simulator runs `collect_garbage` until it does
    /// nothing, the real side waits (bounded by [`SETTLE`]) until `done` holds of the
    /// probes' answers; then the probes' answers are compared.
    Settle {
        label: &'static str,
        probes: Vec<String>,
        done: fn(&[(u16, Value)]) -> bool,
    },
    /// etcd compacted to its latest revision (the simulator: `compact` to its latest);
    /// later steps go to the apiserver without a watch cache, whose reads go to etcd.
    Compact { label: &'static str },
}

fn send(
    label: &'static str,
    method: &'static str,
    path: &str,
    ct: &'static str,
    body: Option<Value>,
) -> Step {
    Step::Send {
        label,
        method,
        path: path.to_owned(),
        content_type: ct,
        body,
        accept: JSON,
    }
}
fn get(label: &'static str, path: &str) -> Step {
    send(label, "GET", path, "application/json", None)
}
fn post(label: &'static str, path: &str, body: Value) -> Step {
    send(label, "POST", path, "application/json", Some(body))
}
fn put(label: &'static str, path: &str, body: Value) -> Step {
    send(label, "PUT", path, "application/json", Some(body))
}
fn merge(label: &'static str, path: &str, body: Value) -> Step {
    send(
        label,
        "PATCH",
        path,
        "application/merge-patch+json",
        Some(body),
    )
}
fn json_patch(label: &'static str, path: &str, body: Value) -> Step {
    send(
        label,
        "PATCH",
        path,
        "application/json-patch+json",
        Some(body),
    )
}
fn strategic(label: &'static str, path: &str, body: Value) -> Step {
    send(
        label,
        "PATCH",
        path,
        "application/strategic-merge-patch+json",
        Some(body),
    )
}
fn apply(label: &'static str, path: &str, body: Value) -> Step {
    send(
        label,
        "PATCH",
        path,
        "application/apply-patch+yaml",
        Some(body),
    )
}
fn delete(label: &'static str, path: &str) -> Step {
    send(label, "DELETE", path, "application/json", None)
}
fn watch(label: &'static str, path: &str) -> Step {
    watch_as(label, path, JSON)
}
fn watch_as(label: &'static str, path: &str, accept: &'static str) -> Step {
    Step::Watch {
        label,
        path: path.to_owned(),
        accept,
    }
}
fn get_as(label: &'static str, path: &str, accept: &'static str) -> Step {
    Step::Send {
        label,
        method: "GET",
        path: path.to_owned(),
        content_type: JSON,
        body: None,
        accept,
    }
}

const JSON: &str = "application/json";
/// kube's `get_metadata` and `metadata_watcher`, and client-go's metadata client in JSON.
const META: &str = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
/// kube's `list_metadata`.
const META_LIST: &str = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";

const CM: &str = "/api/v1/namespaces/{ns}/configmaps";
const W: &str = "/apis/conformance.example.com/v1/namespaces/{ns}/widgets";
const SECRET: &str = "/api/v1/namespaces/{ns}/secrets";

fn cm(name: &str, labels: Value, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels}, "data": data})
}
fn widget(name: &str, labels: Value, spec: Value) -> Value {
    json!({"apiVersion": format!("{GROUP}/v1"), "kind": "Widget",
        "metadata": {"name": name, "labels": labels}, "spec": spec, "status": {"ready": false}})
}
fn owned_cm(name: &str, owner: &str, block: bool) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "ownerReferences": [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": owner, "uid": format!("{{{owner}.uid}}"), "blockOwnerDeletion": block}]}})
}

fn gone(probes: &[(u16, Value)]) -> bool {
    probes.iter().all(|(code, _)| *code == 404)
}
fn owner_gone_dependent_orphaned(probes: &[(u16, Value)]) -> bool {
    probes[0].0 == 404 && probes[1].0 == 200 && probes[1].1["metadata"]["ownerReferences"].is_null()
}

/// The script. `compaction`: whether the real side can compact etcd (the steps after
/// [`Step::Compact`] are left out on both sides when not).
fn script(compaction: bool) -> Vec<Step> {
    let cm_path = |name: &str| format!("{CM}/{name}");
    let w_path = |name: &str| format!("{W}/{name}");
    let mut s = vec![
        // An empty list: its resourceVersion is where the replaying watches start.
        get("start", CM),
        // ConfigMaps: no status subresource.
        post(
            "cm-create",
            CM,
            cm(
                "a",
                json!({"app": "web", "tier": "front"}),
                json!({"k": "v"}),
            ),
        ),
        post("cm-exists", CM, cm("a", json!({}), json!({}))),
        post(
            "cm-generate",
            CM,
            json!({"metadata": {"generateName": "gen-", "labels": {"app": "web"}}, "data": {"g": "1"}}),
        ),
        get("cm-get", &cm_path("a")),
        get("cm-get-404", &cm_path("missing")),
        put(
            "cm-put",
            &cm_path("a"),
            json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "resourceVersion": "{cm-create.rv}", "labels": {"app": "web", "tier": "front"}},
            "data": {"k": "v2"}}),
        ),
        put(
            "cm-put-stale",
            &cm_path("a"),
            json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "resourceVersion": "{cm-create.rv}"}, "data": {"k": "v3"}}),
        ),
        // The same content again, without a precondition: no write, no new resourceVersion.
        put(
            "cm-put-noop",
            &cm_path("a"),
            json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "labels": {"app": "web", "tier": "front"}}, "data": {"k": "v2"}}),
        ),
        merge(
            "cm-merge",
            &cm_path("a"),
            json!({"metadata": {"labels": {"patched": "yes"}}, "data": {"m": "1"}}),
        ),
        merge(
            "cm-merge-404",
            &cm_path("missing"),
            json!({"data": {"m": "1"}}),
        ),
        json_patch(
            "cm-json-patch",
            &cm_path("a"),
            json!([{"op": "add", "path": "/data/j", "value": "2"},
            {"op": "replace", "path": "/data/k", "value": "v4"}]),
        ),
        json_patch(
            "cm-json-patch-test-fails",
            &cm_path("a"),
            json!([{"op": "test", "path": "/data/k", "value": "nope"},
            {"op": "remove", "path": "/data/k"}]),
        ),
        // A member missing from an object tests equal to null: kube-runtime's finalizer
        // helper (and the engine's) adds the first finalizer after such a test.
        json_patch(
            "cm-json-patch-test-null-absent",
            &cm_path("a"),
            json!([{"op": "test", "path": "/metadata/finalizers", "value": null},
            {"op": "add", "path": "/data/t", "value": "1"}]),
        ),
        // Server-side apply.
        apply(
            "apply-create",
            &format!("{}?fieldManager=alice", cm_path("b")),
            json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "b", "labels": {"app": "db"}}, "data": {"x": "1", "y": "1"}}),
        ),
        apply(
            "apply-conflict",
            &format!("{}?fieldManager=bob", cm_path("b")),
            json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "b"}, "data": {"x": "2"}}),
        ),
        apply(
            "apply-force",
            &format!("{}?fieldManager=bob&force=true", cm_path("b")),
            json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "b"}, "data": {"x": "2"}}),
        ),
        apply(
            "apply-again-alice",
            &format!("{}?fieldManager=alice", cm_path("b")),
            json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "b", "labels": {"app": "db"}}, "data": {"y": "1"}}),
        ),
        // A Secret: `stringData` folded into `data` (overwriting a key of both) and never
        // stored; `data` is base64, stored canonical; `type` defaulted.
        post(
            "secret-create",
            SECRET,
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
            "data": {"a": "YQ==", "b": "Yg==", "n": "YW\nJj", "t": "YR=="},
            "stringData": {"b": "over", "c": "new"}}),
        ),
        get("secret-get", &format!("{SECRET}/s")),
        merge(
            "secret-merge-string-data",
            &format!("{SECRET}/s"),
            json!({"stringData": {"a": "patched"}}),
        ),
        put(
            "secret-put-string-data",
            &format!("{SECRET}/s"),
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
            "stringData": {"only": "this"}}),
        ),
        // A Secret's type is immutable; so is the data of one marked `immutable`, and the mark.
        merge(
            "secret-type-changed",
            &format!("{SECRET}/s"),
            json!({"type": "example.com/kind"}),
        ),
        post(
            "secret-immutable",
            SECRET,
            json!({"metadata": {"name": "im"}, "immutable": true, "stringData": {"k": "v"}}),
        ),
        merge(
            "secret-immutable-data",
            &format!("{SECRET}/im"),
            json!({"stringData": {"k": "w"}}),
        ),
        merge(
            "secret-immutable-unset",
            &format!("{SECRET}/im"),
            json!({"immutable": false}),
        ),
        merge(
            "secret-immutable-labels",
            &format!("{SECRET}/im"),
            json!({"metadata": {"labels": {"still": "writable"}}}),
        ),
        post(
            "cm-immutable",
            CM,
            json!({"metadata": {"name": "im"}, "immutable": true, "data": {"k": "v"}}),
        ),
        merge(
            "cm-immutable-data",
            &cm_path("im"),
            json!({"data": {"k": "w"}, "binaryData": {"b": "AA=="}}),
        ),
        post(
            "secret-string-data-number",
            SECRET,
            json!({"metadata": {"name": "t"}, "stringData": {"k": 1}}),
        ),
        post(
            "secret-string-data-not-a-map",
            SECRET,
            json!({"metadata": {"name": "t"}, "stringData": "x"}),
        ),
        post(
            "secret-data-not-base64",
            SECRET,
            json!({"metadata": {"name": "t"}, "data": {"k": "plain text"}}),
        ),
        post(
            "secret-null-values",
            SECRET,
            json!({"metadata": {"name": "nulls"}, "data": {"d": null}, "stringData": {"s": null}}),
        ),
        post(
            "secret-data-unpadded",
            SECRET,
            json!({"metadata": {"name": "t"}, "data": {"k": "YWJjZA"}}),
        ),
        json_patch(
            "secret-json-patch-not-base64",
            &format!("{SECRET}/s"),
            json!([{"op": "add", "path": "/data/z", "value": "!!"}]),
        ),
        apply(
            "secret-apply",
            &format!("{SECRET}/u?fieldManager=alice"),
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "u"},
            "stringData": {"k": "v"}}),
        ),
        apply(
            "secret-apply-again",
            &format!("{SECRET}/u?fieldManager=alice"),
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "u"},
            "stringData": {"k": "w", "l": "x"}}),
        ),
        // Strategic merge patch of a built-in: finalizers merge as a set, ownerReferences by
        // uid, maps as in a merge patch; the directives; 415 for a custom resource.
        post(
            "smp-create",
            CM,
            json!({"metadata": {"name": "smp", "labels": {"a": "1"}, "finalizers": ["example.com/a"]},
            "data": {"k": "v", "j": "w"}}),
        ),
        strategic(
            "smp-merge",
            &cm_path("smp"),
            json!({"metadata": {"finalizers": ["example.com/b", "example.com/a"], "labels": {"b": "2"}},
            "data": {"k": "v2", "j": null}}),
        ),
        strategic(
            "smp-owner",
            &cm_path("smp"),
            json!({"metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "a", "uid": "{cm-create.uid}"}]}}),
        ),
        strategic(
            "smp-second-owner",
            &cm_path("smp"),
            json!({"metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "b", "uid": "{apply-create.uid}"}]}}),
        ),
        strategic(
            "smp-owner-without-key",
            &cm_path("smp"),
            json!({"metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "c"}]}}),
        ),
        strategic(
            "smp-delete-owner",
            &cm_path("smp"),
            json!({"metadata": {"ownerReferences": [{"uid": "{cm-create.uid}", "$patch": "delete"}]}}),
        ),
        strategic(
            "smp-replace-labels",
            &cm_path("smp"),
            json!({"metadata": {"labels": {"$patch": "replace", "c": "3"}}}),
        ),
        strategic(
            "smp-delete-finalizers",
            &cm_path("smp"),
            json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["example.com/a", "example.com/b"]}}),
        ),
        strategic(
            "smp-not-an-object",
            &cm_path("smp"),
            json!(["not", "a", "map"]),
        ),
        send(
            "smp-unknown-patch-type",
            "PATCH",
            &cm_path("smp"),
            "text/plain",
            Some(json!({})),
        ),
        strategic(
            "smp-custom-resource",
            &w_path("w2"),
            json!({"spec": {"size": 6}}),
        ),
        // A CRD with /status: spec writes bump the generation, status writes do not.
        post(
            "w-create",
            W,
            widget("w1", json!({"color": "red"}), json!({"size": 1})),
        ),
        merge(
            "w-status",
            &format!("{}/status", w_path("w1")),
            json!({"status": {"ready": true}}),
        ),
        put(
            "w-status-put",
            &format!("{}/status", w_path("w1")),
            json!({"apiVersion": format!("{GROUP}/v1"), "kind": "Widget",
            "metadata": {"name": "w1", "resourceVersion": "{w-status.rv}"}, "spec": {"size": 99}, "status": {"ready": true, "seen": 1}}),
        ),
        merge("w-spec", &w_path("w1"), json!({"spec": {"size": 2}})),
        merge(
            "w-status-on-main",
            &w_path("w1"),
            json!({"status": {"ready": false}}),
        ),
        merge(
            "w-labels",
            &w_path("w1"),
            json!({"metadata": {"labels": {"color": "blue"}}}),
        ),
        put(
            "w-put-stale",
            &w_path("w1"),
            json!({"apiVersion": format!("{GROUP}/v1"), "kind": "Widget",
            "metadata": {"name": "w1", "resourceVersion": "{w-create.rv}"}, "spec": {"size": 3}}),
        ),
        post(
            "w2-create",
            W,
            widget("w2", json!({"color": "green"}), json!({"size": 5})),
        ),
        // Finalizers and deletionTimestamp.
        merge(
            "w-finalizer",
            &w_path("w1"),
            json!({"metadata": {"finalizers": [format!("{GROUP}/hold")]}}),
        ),
        delete("w-delete", &w_path("w1")),
        get("w-get-deleting", &w_path("w1")),
        merge(
            "w-new-finalizer-refused",
            &w_path("w1"),
            json!({"metadata": {"finalizers": [format!("{GROUP}/hold"), format!("{GROUP}/late")]}}),
        ),
        merge(
            "w-spec-while-deleting",
            &w_path("w1"),
            json!({"spec": {"size": 4}}),
        ),
        merge(
            "w-finalizer-removed",
            &w_path("w1"),
            json!({"metadata": {"finalizers": null}}),
        ),
        get("w-get-gone", &w_path("w1")),
        // Lists: paging, label and field selectors.
        post(
            "c1",
            CM,
            cm("c1", json!({"app": "web", "tier": "back"}), json!({})),
        ),
        post("c2", CM, cm("c2", json!({"app": "db"}), json!({}))),
        get("list-page-1", &format!("{CM}?limit=2")),
        get(
            "list-page-2",
            &format!("{CM}?limit=2&continue={{list-page-1.continue}}"),
        ),
        get(
            "list-page-3",
            &format!("{CM}?limit=2&continue={{list-page-2.continue}}"),
        ),
        get(
            "list-label",
            &format!("{CM}?labelSelector={}", encode_query("app=web,tier!=back")),
        ),
        get(
            "list-label-set",
            &format!("{CM}?labelSelector={}", encode_query("app in (db),!tier")),
        ),
        get(
            "list-field",
            &format!("{CM}?fieldSelector={}", encode_query("metadata.name=c1")),
        ),
        get(
            "list-field-not",
            &format!("{CM}?fieldSelector={}", encode_query("metadata.name!=a")),
        ),
        get(
            "list-field-unsupported",
            &format!("{CM}?fieldSelector={}", encode_query("data.k=v")),
        ),
        get(
            "w-list-field",
            &format!("{W}?fieldSelector={}", encode_query("metadata.name=w2")),
        ),
        // Metadata only, and content negotiation.
        get_as("meta-get", &cm_path("a"), META),
        get_as("meta-list", CM, META_LIST),
        get_as(
            "meta-list-v1beta1",
            &format!("{CM}?labelSelector={}", encode_query("app=db")),
            "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1beta1",
        ),
        get_as("meta-w-list", W, META_LIST),
        get_as("meta-w-get", &w_path("w2"), META),
        get_as("meta-list-as-object", CM, META),
        get_as("meta-get-as-list", &cm_path("a"), META_LIST),
        get_as("meta-w-list-as-object", W, META),
        get_as("accept-unserved", &cm_path("a"), "text/html"),
        get_as("accept-unserved-w", &w_path("w2"), "text/html"),
        get_as(
            "accept-unknown-conversion",
            &cm_path("a"),
            "application/json;as=Foo;g=meta.k8s.io;v=v1",
        ),
        get_as(
            "accept-second-clause",
            &cm_path("a"),
            "text/html, application/json;as=PartialObjectMetadata;g=apps;v=v1, application/json",
        ),
        // Garbage collection by kube-controller-manager: background, foreground, orphan.
        post("owner-bg", CM, cm("owner-bg", json!({}), json!({}))),
        post("dep-bg", CM, owned_cm("dep-bg", "owner-bg", false)),
        delete(
            "owner-bg-delete",
            &format!("{}?propagationPolicy=Background", cm_path("owner-bg")),
        ),
        Step::Settle {
            label: "gc-background",
            probes: vec![cm_path("owner-bg"), cm_path("dep-bg")],
            done: gone,
        },
        post("owner-fg", CM, cm("owner-fg", json!({}), json!({}))),
        post("dep-fg", CM, owned_cm("dep-fg", "owner-fg", true)),
        delete(
            "owner-fg-delete",
            &format!("{}?propagationPolicy=Foreground", cm_path("owner-fg")),
        ),
        Step::Settle {
            label: "gc-foreground",
            probes: vec![cm_path("owner-fg"), cm_path("dep-fg")],
            done: gone,
        },
        post("owner-or", CM, cm("owner-or", json!({}), json!({}))),
        post("dep-or", CM, owned_cm("dep-or", "owner-or", true)),
        delete(
            "owner-or-delete",
            &format!("{}?propagationPolicy=Orphan", cm_path("owner-or")),
        ),
        Step::Settle {
            label: "gc-orphan",
            probes: vec![cm_path("owner-or"), cm_path("dep-or")],
            done: owner_gone_dependent_orphaned,
        },
        // Watches replaying from an rv: each write's event, then (where asked) a bookmark.
        // Not asked of the label-selected ConfigMap watch: in a first run the real watch
        // cache sent it none within 4 s while the widget watch got its pre-timeout one
        // (not explained yet, see docs/alignment.md).
        watch(
            "watch-cm",
            &format!(
                "{CM}?watch=1&resourceVersion={{start.rv}}&labelSelector={}&timeoutSeconds={WATCH_SECONDS}",
                encode_query("app")
            ),
        ),
        watch(
            "watch-w",
            &format!(
                "{W}?watch=1&resourceVersion={{start.rv}}&allowWatchBookmarks=true&timeoutSeconds={BOOKMARK_WATCH_SECONDS}"
            ),
        ),
        watch(
            "watch-cm-field",
            &format!(
                "{CM}?watch=1&resourceVersion={{cm-create.rv}}&fieldSelector={}&timeoutSeconds={WATCH_SECONDS}",
                encode_query("metadata.name=b")
            ),
        ),
        // No resourceVersion: the current objects as ADDED first.
        watch(
            "watch-w-now",
            &format!("{W}?watch=1&timeoutSeconds={WATCH_SECONDS}"),
        ),
        watch_as(
            "watch-w-meta",
            &format!(
                "{W}?watch=1&resourceVersion={{start.rv}}&allowWatchBookmarks=true&timeoutSeconds={BOOKMARK_WATCH_SECONDS}"
            ),
            META,
        ),
        watch_as(
            "watch-cm-meta-now",
            &format!(
                "{CM}?watch=1&labelSelector={}&timeoutSeconds={WATCH_SECONDS}",
                encode_query("app=db")
            ),
            META,
        ),
        // A list conversion cannot hold one event's object.
        watch_as(
            "watch-cm-meta-list-now",
            &format!(
                "{CM}?watch=1&labelSelector={}&timeoutSeconds={WATCH_SECONDS}",
                encode_query("app=db")
            ),
            META_LIST,
        ),
        delete("w2-delete", &w_path("w2")),
    ];
    if compaction {
        s.extend([
            Step::Compact { label: "compact" },
            get(
                "list-exact-compacted",
                &format!("{CM}?resourceVersion={{cm-create.rv}}&resourceVersionMatch=Exact"),
            ),
            get(
                "list-continue-compacted",
                &format!("{CM}?limit=2&continue={{list-page-1.continue}}"),
            ),
            watch(
                "watch-compacted",
                &format!(
                    "{CM}?watch=1&resourceVersion={{cm-create.rv}}&timeoutSeconds={WATCH_SECONDS}"
                ),
            ),
        ]);
    }
    s
}

// ---------------------------------------------------------------------------------------
// Running it

/// One side of the comparison.
trait Side {
    /// One complete request: status and JSON body.
    fn send(&mut self, request: &http::Request<Vec<u8>>) -> (u16, Value);
    /// A watch read to its end: status and, for a 200, its events (`{type, object}`).
    fn watch(&mut self, request: &http::Request<Vec<u8>>) -> (u16, Value);
    /// Garbage collection settled, then the probes.
    fn settle(
        &mut self,
        probes: &[http::Request<Vec<u8>>],
        done: fn(&[(u16, Value)]) -> bool,
    ) -> Vec<(u16, Value)>;
    /// etcd compacted to the latest revision.
    fn compact(&mut self);
}

struct Sim {
    cluster: Cluster,
    now: Instant,
}

impl Sim {
    fn new(ns: &str) -> Self {
        let config = ClusterConfig {
            seed: 26,
            ..ClusterConfig::default()
        };
        let mut cluster = Cluster::with_builtins(config, Instant::ZERO);
        cluster.register_crd(&crd()).expect("the CRD registers");
        let mut sim = Sim {
            cluster,
            now: Instant::ZERO,
        };
        let (code, body) = sim.send(&request(
            "POST",
            "/api/v1/namespaces",
            "application/json",
            json!({"metadata": {"name": ns}}).to_string().into_bytes(),
        ));
        assert_eq!(code, 201, "{body}");
        sim
    }

    fn tick(&mut self, secs: u64) {
        self.now = Instant::from_duration(self.now.since_origin() + Duration::from_secs(secs));
    }
}

impl Side for Sim {
    fn send(&mut self, request: &http::Request<Vec<u8>>) -> (u16, Value) {
        self.tick(1);
        match self.cluster.serve(self.now, request) {
            Reply::Response(r) => (r.status, r.json_body()),
            Reply::Watch(_) => panic!("a watch from a plain request"),
        }
    }

    fn watch(&mut self, request: &http::Request<Vec<u8>>) -> (u16, Value) {
        self.tick(1);
        let id = match self.cluster.serve(self.now, request) {
            Reply::Response(r) => return (r.status, r.json_body()),
            Reply::Watch(id) => id,
        };
        let mut events = Vec::new();
        for _ in 0..100 {
            self.tick(BOOKMARK_WATCH_SECONDS + 1);
            let poll = self.cluster.poll_watch(id, self.now);
            events.extend(
                poll.frames
                    .iter()
                    .map(|f| serde_json::from_slice::<Value>(f).unwrap()),
            );
            if poll.ended {
                return (200, Value::Array(events));
            }
        }
        panic!("the watch did not end");
    }

    fn settle(
        &mut self,
        probes: &[http::Request<Vec<u8>>],
        _: fn(&[(u16, Value)]) -> bool,
    ) -> Vec<(u16, Value)> {
        for _ in 0..100 {
            self.tick(1);
            if self.cluster.collect_garbage(self.now).is_empty() {
                return probes.iter().map(|p| self.send(p)).collect();
            }
        }
        panic!("the collector did not settle");
    }

    fn compact(&mut self) {
        let rv = self.cluster.resource_version();
        self.cluster.compact(rv);
    }
}

struct Real<'a> {
    env: &'a K8sEnv,
    which: ApiServer,
}

fn parse(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(bytes).into_owned()))
}

impl Side for Real<'_> {
    fn send(&mut self, request: &http::Request<Vec<u8>>) -> (u16, Value) {
        let (code, body) = self
            .env
            .client(self.which)
            .send(request)
            .expect("an answer");
        (code, parse(&body))
    }

    fn watch(&mut self, request: &http::Request<Vec<u8>>) -> (u16, Value) {
        let client = self.env.client(self.which);
        let accept = request
            .headers()
            .get(http::header::ACCEPT)
            .and_then(|a| a.to_str().ok())
            .unwrap_or(JSON);
        let w = match client.watch_path_accepting(&request.uri().to_string(), accept) {
            Ok(w) => w,
            Err(reconcile_k8s_env::Error::Api { status, body, .. }) => {
                return (status, parse(body.as_bytes()));
            }
            Err(e) => panic!("{e}"),
        };
        let mut events = Vec::new();
        let deadline = std::time::Instant::now() + Duration::from_secs(BOOKMARK_WATCH_SECONDS + 20);
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match w.next(left).expect("the watch ends at its timeoutSeconds") {
                Some(e) => events.push(json!({"type": e.kind, "object": e.object})),
                None => return (200, Value::Array(events)),
            }
        }
    }

    fn settle(
        &mut self,
        probes: &[http::Request<Vec<u8>>],
        done: fn(&[(u16, Value)]) -> bool,
    ) -> Vec<(u16, Value)> {
        let mut last = Vec::new();
        let _ = wait_for(SETTLE, "the garbage collector", || {
            last = probes.iter().map(|p| self.send(p)).collect();
            if done(&last) {
                Ok(())
            } else {
                Err(format!("{last:?}"))
            }
        });
        last
    }

    fn compact(&mut self) {
        self.env.compact_etcd().expect("etcd compacts");
        self.which = ApiServer::Uncached;
    }
}

fn request(method: &str, uri: &str, content_type: &str, body: Vec<u8>) -> http::Request<Vec<u8>> {
    request_as(method, uri, content_type, body, JSON)
}

fn request_as(
    method: &str,
    uri: &str,
    content_type: &str,
    body: Vec<u8>,
    accept: &str,
) -> http::Request<Vec<u8>> {
    http::Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", content_type)
        .header("accept", accept)
        .header("user-agent", "conformance/1.0")
        .body(body)
        .unwrap()
}

/// What one step's answers carried, for the templates of later steps.
#[derive(Default)]
struct Vars(BTreeMap<String, String>);

impl Vars {
    fn fill(&self, template: &str) -> String {
        let mut out = template.to_owned();
        for (k, v) in &self.0 {
            out = out.replace(&format!("{{{k}}}"), v);
        }
        assert!(
            !out.contains("{ns}")
                && !out.contains(".rv}")
                && !out.contains(".uid}")
                && !out.contains(".continue}"),
            "an unfilled template: {out}"
        );
        out
    }

    fn keep(&mut self, label: &str, body: &Value) {
        let m = &body["metadata"];
        for (key, field) in [("rv", "resourceVersion"), ("uid", "uid"), ("name", "name")] {
            if let Some(v) = m[field].as_str() {
                self.0.insert(format!("{label}.{key}"), v.to_owned());
            }
        }
        if let Some(c) = m["continue"].as_str() {
            self.0.insert(format!("{label}.continue"), encode_query(c));
        }
    }
}

/// A transcript: per step, its label and normalised answer.
type Transcript = Vec<(String, Value)>;

fn run(side: &mut dyn Side, ns: &str, steps: &[Step]) -> Transcript {
    let mut vars = Vars::default();
    vars.0.insert("ns".into(), ns.to_owned());
    let mut norm = Norm::default();
    let mut out = Vec::new();
    for step in steps {
        let (label, outcome) = match step {
            Step::Send {
                label,
                method,
                path,
                content_type,
                body,
                accept,
            } => {
                let body = body
                    .as_ref()
                    .map(|b| vars.fill(&b.to_string()).into_bytes())
                    .unwrap_or_default();
                let (code, answer) = side.send(&request_as(
                    method,
                    &vars.fill(path),
                    content_type,
                    body,
                    accept,
                ));
                vars.keep(label, &answer);
                norm.begin(label);
                if let Some(g) = step_generated_name(step, &answer) {
                    norm.names.insert(g, format!("<{label}.name>"));
                }
                let write = *method != "GET";
                (
                    label,
                    json!({"code": code, "body": norm.body(&answer, write)}),
                )
            }
            Step::Watch {
                label,
                path,
                accept,
            } => {
                let (code, answer) =
                    side.watch(&request_as("GET", &vars.fill(path), "", Vec::new(), accept));
                norm.begin(label);
                let body = if code == 200 {
                    norm.events(&answer)
                } else {
                    norm.body(&answer, false)
                };
                (label, json!({"code": code, "body": body}))
            }
            Step::Settle {
                label,
                probes,
                done,
            } => {
                let probes: Vec<_> = probes
                    .iter()
                    .map(|p| request("GET", &vars.fill(p), "", Vec::new()))
                    .collect();
                let answers = side.settle(&probes, *done);
                norm.begin(label);
                let answers: Vec<Value> = answers
                    .iter()
                    .map(|(c, b)| json!({"code": c, "body": norm.body(b, false)}))
                    .collect();
                (label, Value::Array(answers))
            }
            Step::Compact { label } => {
                side.compact();
                (label, Value::Null)
            }
        };
        out.push(((*label).to_owned(), outcome));
    }
    out
}

/// The name the server generated, for a create with `generateName`.
fn step_generated_name(step: &Step, answer: &Value) -> Option<String> {
    let Step::Send {
        body: Some(body), ..
    } = step
    else {
        return None;
    };
    body["metadata"]["generateName"].as_str()?;
    answer["metadata"]["name"].as_str().map(str::to_owned)
}

// ---------------------------------------------------------------------------------------
// Normalising what legitimately differs

/// The normalisations, each with its reason:
///
/// 1. `metadata.uid` (and every uid that appears elsewhere: ownerReferences, `details.uid`,
///    messages): the simulator draws uids from its seed. Each becomes `uid#N`, numbered by
///    first appearance, so equal uids stay equal and different ones different.
/// 2. `metadata.resourceVersion` of objects: real ones are etcd revisions of a shared etcd.
///    Each becomes `rv@<step where first seen>[#k]`, so "this write made a new version" and
///    "this is the version step X made" are compared, not numbers. A write answered with a
///    new version that is lower than one already seen is marked `(went back)`.
/// 3. A list's and a bookmark's resourceVersion: the real one is the latest revision of the
///    whole etcd, which other writers (leases, kwok's nodes) move. It becomes `current`
///    when it is at least every version seen so far on that side, else `older`.
/// 4. `continue` tokens (of lists and of a 410's `Status`): each server has its own format
///    around a revision; a non-empty one becomes `<token>` (presence is compared).
/// 5. `creationTimestamp`, `deletionTimestamp`, `managedFields[].time`: wall clock against
///    virtual clock; `<time>` (presence is compared). `managedFields` are then ordered by
///    operation, manager and subresource, since their time decides part of their order.
/// 6. A name the server generated from `generateName`: random suffixes; `<label.name>`.
/// 7. The apiserver's `Status` for a watch that ended normally carries nothing; bookmarks
///    carry only a version: their object becomes `{kind, apiVersion, rv, annotations}`.
#[derive(Default)]
struct Norm {
    step: String,
    rvs: BTreeMap<String, String>,
    uids: BTreeMap<String, String>,
    names: BTreeMap<String, String>,
    max_rv: u64,
    new_in_step: usize,
}

impl Norm {
    fn rv(&mut self, rv: &str, write: bool) -> String {
        if let Some(l) = self.rvs.get(rv) {
            return l.clone();
        }
        let n: u64 = rv.parse().unwrap_or(0);
        self.new_in_step += 1;
        let mut label = format!("rv@{}#{}", self.step, self.new_in_step);
        if write && n < self.max_rv {
            label += " (went back)";
        }
        self.max_rv = self.max_rv.max(n);
        self.rvs.insert(rv.to_owned(), label.clone());
        label
    }

    fn latest(&mut self, rv: &str) -> &'static str {
        let n: u64 = rv.parse().unwrap_or(0);
        if n >= self.max_rv {
            self.max_rv = n;
            "current"
        } else {
            "older"
        }
    }

    fn uid(&mut self, uid: &str) -> String {
        let n = self.uids.len();
        self.uids
            .entry(uid.to_owned())
            .or_insert_with(|| format!("uid#{n}"))
            .clone()
    }

    fn begin(&mut self, step: &str) {
        step.clone_into(&mut self.step);
        self.new_in_step = 0;
    }

    fn body(&mut self, v: &Value, write: bool) -> Value {
        let mut v = v.clone();
        let kind = v["kind"].as_str().unwrap_or("").to_owned();
        if kind.ends_with("List") {
            if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
                if let Some(rv) = m
                    .get("resourceVersion")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                {
                    m.insert("resourceVersion".into(), self.latest(&rv).into());
                }
                if m.get("continue")
                    .and_then(Value::as_str)
                    .is_some_and(|c| !c.is_empty())
                {
                    m.insert("continue".into(), "<token>".into());
                }
            }
            if let Some(items) = v.get_mut("items").and_then(Value::as_array_mut) {
                for item in items {
                    self.object(item, false);
                }
            }
        } else if kind == "Status" {
            if v["metadata"]["continue"].is_string() {
                v["metadata"]["continue"] = "<token>".into();
            }
            if let Some(uid) = v["details"]["uid"].as_str().map(str::to_owned) {
                v["details"]["uid"] = self.uid(&uid).into();
            }
        } else if v.is_object() {
            self.object(&mut v, write);
        }
        self.strings(&mut v);
        v
    }

    fn object(&mut self, o: &mut Value, write: bool) {
        let Some(m) = o.get_mut("metadata").and_then(Value::as_object_mut) else {
            return;
        };
        if let Some(rv) = m
            .get("resourceVersion")
            .and_then(Value::as_str)
            .map(str::to_owned)
        {
            let l = self.rv(&rv, write);
            m.insert("resourceVersion".into(), l.into());
        }
        if let Some(uid) = m.get("uid").and_then(Value::as_str).map(str::to_owned) {
            let l = self.uid(&uid);
            m.insert("uid".into(), l.into());
        }
        for t in ["creationTimestamp", "deletionTimestamp"] {
            if m.get(t).is_some_and(Value::is_string) {
                m.insert(t.into(), "<time>".into());
            }
        }
        if let Some(mf) = m.get_mut("managedFields").and_then(Value::as_array_mut) {
            for e in mf.iter_mut() {
                if e.get("time").is_some() {
                    e["time"] = "<time>".into();
                }
            }
            // The apiserver orders entries by operation, then by the second of their time,
            // then by manager and subresource; with the times masked, whether two steps fell
            // in one wall-clock second is not compared, so neither is the order it decides.
            let key = |e: &Value| {
                ["operation", "manager", "subresource"]
                    .map(|k| e.get(k).and_then(Value::as_str).unwrap_or("").to_owned())
            };
            mf.sort_by_key(key);
        }
        if let Some(refs) = m.get_mut("ownerReferences").and_then(Value::as_array_mut) {
            for r in refs {
                if let Some(uid) = r["uid"].as_str().map(str::to_owned) {
                    r["uid"] = self.uid(&uid).into();
                }
            }
        }
    }

    fn events(&mut self, events: &Value) -> Value {
        let mut out = Vec::new();
        let mut last_new = 0;
        for e in events.as_array().into_iter().flatten() {
            let ty = e["type"].as_str().unwrap_or("");
            let o = &e["object"];
            if ty == "BOOKMARK" {
                let rv = o["metadata"]["resourceVersion"].as_str().unwrap_or("");
                let at_least_last = rv.parse::<u64>().unwrap_or(0) >= last_new;
                let bookmark = json!({"type": ty, "object": {
                    "kind": o["kind"], "apiVersion": o["apiVersion"],
                    "resourceVersion": if at_least_last { "not before the last event" } else { "BEFORE the last event" },
                    "annotations": o["metadata"]["annotations"]}});
                // How many bookmarks saying the same thing in a row is the apiserver's
                // timing (its periodic bookmark can land next to the one before the
                // watch's timeout, one run in several), not behaviour: one stands for a run.
                if out.last() != Some(&bookmark) {
                    out.push(bookmark);
                }
            } else {
                last_new = last_new.max(
                    o["metadata"]["resourceVersion"]
                        .as_str()
                        .and_then(|r| r.parse().ok())
                        .unwrap_or(0),
                );
                out.push(json!({"type": ty, "object": self.body(o, false)}));
            }
        }
        Value::Array(out)
    }

    /// Known uids and generated names wherever they appear in text.
    fn strings(&self, v: &mut Value) {
        match v {
            Value::String(s) => {
                for (from, to) in self.uids.iter().chain(&self.names) {
                    if s.contains(from.as_str()) {
                        *s = s.replace(from.as_str(), to);
                    }
                }
            }
            Value::Array(a) => a.iter_mut().for_each(|x| self.strings(x)),
            Value::Object(o) => {
                let entries = std::mem::take(o);
                for (mut k, mut x) in entries {
                    for (from, to) in self.uids.iter().chain(&self.names) {
                        if k.contains(from.as_str()) {
                            k = k.replace(from.as_str(), to);
                        }
                    }
                    self.strings(&mut x);
                    o.insert(k, x);
                }
            }
            _ => {}
        }
    }
}

// ---------------------------------------------------------------------------------------
// Comparing

/// The differences the comparison still finds, each with its reason (the same rows are in
/// docs/alignment.md, the simulated cluster's section): `(step, pointer, values, reason)`,
/// each a pattern in which `*` stands for any text, matched against a difference's step
/// label, its JSON pointer and its `sim=… real=…` text, each in whole.
const KNOWN: &[(&str, &str, &str, &str)] = &[
    (
        "*",
        "*/managedFields/*/fieldsV1/*/.",
        "sim=null real={}",
        "managedFields: an Update owns each map it creates (a `.` entry); the simulator owns leaves only",
    ),
    (
        "*",
        "*/managedFields/*/fieldsV1/f:metadata/f:finalizers/v:*",
        "sim=null real={}",
        "managedFields: finalizers is a set-list (`v:` entries); the simulator's lists are atomic",
    ),
    (
        "*",
        "*/managedFields/*/fieldsV1/f:metadata/f:ownerReferences/k:*",
        "sim=null real={}",
        "managedFields: ownerReferences is a list keyed by uid (`k:` entries); the simulator's lists are atomic",
    ),
    (
        "*",
        "*/data",
        "sim={} real=null",
        "an empty ConfigMap `data` is dropped by the typed (omitempty) round trip; the simulator stores objects as sent",
    ),
    (
        "*",
        "*/metadata/labels",
        "sim={} real=null",
        "empty `metadata.labels` are dropped by ObjectMeta's omitempty; the simulator stores metadata as sent",
    ),
    (
        "w-new-finalizer-refused",
        "/body/details/causes",
        "*",
        "for a custom resource the apiserver lists the finalizer cause twice (metadata validated by the generic and the CR strategy); the simulator once",
    ),
    (
        "secret-json-patch-not-base64",
        "*/message",
        "*",
        "the patched object quoted in the message: the apiserver keeps the stored field order (and its own uids and times), the simulator renders keys sorted",
    ),
    (
        "*-compacted",
        "*/message",
        "sim=\"too old resource version: * (*)\" real=\"The resourceVersion for the provided * is too old.\"",
        "a compacted version is worded as the watch cache words it; the script reads it from the apiserver without a watch cache (etcd3's wording)",
    ),
];

fn diff(at: &str, sim: &Value, real: &Value, out: &mut Vec<String>) {
    match (sim, real) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for k in keys {
                let p = format!("{at}/{}", k.replace('~', "~0").replace('/', "~1"));
                diff(
                    &p,
                    a.get(k).unwrap_or(&Value::Null),
                    b.get(k).unwrap_or(&Value::Null),
                    out,
                );
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                diff(&format!("{at}/{i}"), x, y, out);
            }
        }
        (a, b) if a != b => out.push(format!("{at}: sim={a} real={b}")),
        _ => {}
    }
}

/// Every difference between the transcripts, as `label/pointer: sim=… real=…`.
fn differences(sim: &Transcript, real: &Transcript) -> Vec<String> {
    assert_eq!(sim.len(), real.len(), "both ran the same script");
    let mut out = Vec::new();
    for ((label, a), (label_b, b)) in sim.iter().zip(real) {
        assert_eq!(label, label_b);
        diff(label, a, b, &mut out);
    }
    out
}

/// Whether `text` matches `pattern`, in which `*` stands for any text.
fn glob(pattern: &str, text: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == text,
        Some((head, rest)) => {
            text.starts_with(head)
                && (0..=text.len() - head.len()).any(|i| {
                    text.is_char_boundary(head.len() + i) && glob(rest, &text[head.len() + i..])
                })
        }
    }
}

type Known<'k> = (&'k str, &'k str, &'k str, &'k str);

/// The differences not in `known`, and the reasons of the entries of `known` that matched
/// nothing.
fn unexplained<'k>(diffs: &[String], known: &[Known<'k>]) -> (Vec<String>, Vec<&'k str>) {
    let matches = |d: &str, (step, pointer, values, _): &Known<'_>| {
        let (at, vals) = d.split_once(": ").unwrap_or((d, ""));
        let (label, ptr) = at
            .split_once('/')
            .map_or((at, String::new()), |(l, p)| (l, format!("/{p}")));
        glob(step, label) && glob(pointer, &ptr) && glob(values, vals)
    };
    let new = diffs
        .iter()
        .filter(|d| !known.iter().any(|k| matches(d, k)))
        .cloned()
        .collect();
    let stale = known
        .iter()
        .filter(|k| !diffs.iter().any(|d| matches(d, k)))
        .map(|k| k.3)
        .collect();
    (new, stale)
}

fn pretty(t: &Transcript) -> String {
    t.iter()
        .map(|(l, v)| format!("== {l}\n{}", serde_json::to_string_pretty(v).unwrap()))
        .collect::<Vec<_>>()
        .join("\n")
}

fn transcript_text(t: &Transcript) -> String {
    t.iter()
        .map(|(l, v)| format!("{l}: {v}"))
        .collect::<Vec<_>>()
        .join("\n")
}

// ---------------------------------------------------------------------------------------
// The tests

fn real_side_setup(env: &K8sEnv) -> String {
    let api = env.client(ApiServer::Cached);
    match api.create(
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        &crd(),
    ) {
        Ok(_) => {}
        Err(e) if e.http_status() == Some(409) => {}
        Err(e) => panic!("creating the CRD: {e}"),
    }
    let path = format!("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.{GROUP}");
    wait_for(
        Duration::from_secs(30),
        "the CRD to be Established",
        || match api.get(&path) {
            Ok(crd) if reconcile_k8s_env::condition_true(&crd, "Established") => Ok(()),
            Ok(crd) => Err(format!("conditions {}", crd["status"]["conditions"])),
            Err(e) => Err(e.to_string()),
        },
    )
    .unwrap();
    let ns = env.unique_namespace("conformance").unwrap();
    // Both apiservers serve the new kind before the script starts.
    for which in env.apiservers() {
        let c = env.client(which);
        wait_for(Duration::from_secs(30), "widgets to be served", || {
            c.get(&format!("/apis/{GROUP}/v1/namespaces/{ns}/widgets"))
                .map(drop)
                .map_err(|e| e.to_string())
        })
        .unwrap();
    }
    ns
}

#[test]
fn the_simulated_cluster_answers_the_script_as_the_real_apiserver_does() {
    let Some(env) =
        shared_or_skip("the_simulated_cluster_answers_the_script_as_the_real_apiserver_does")
    else {
        return;
    };
    let started = std::time::Instant::now();
    // The script compacts etcd.
    let _disrupt = env.disrupt();
    let compaction = env.etcd_url().is_some() && env.try_client(ApiServer::Uncached).is_ok();
    if !compaction {
        eprintln!(
            "the compaction steps are left out: this environment cannot compact etcd (reused cluster)"
        );
    }
    let ns = real_side_setup(env);
    let steps = script(compaction);
    let real = run(
        &mut Real {
            env,
            which: ApiServer::Cached,
        },
        &ns,
        &steps,
    );
    let sim = run(&mut Sim::new(&ns), &ns, &steps);
    let diffs = differences(&sim, &real);
    let (new, stale) = unexplained(&diffs, KNOWN);
    eprintln!(
        "conformance script: {} steps, {} known differences, {:?}",
        steps.len(),
        diffs.len(),
        started.elapsed()
    );
    if !new.is_empty() || !stale.is_empty() {
        let dir = std::env::temp_dir();
        for (name, t) in [("real", &real), ("sim", &sim)] {
            let path = dir.join(format!("cluster-conformance-{name}.txt"));
            let _ = std::fs::write(&path, pretty(t));
            eprintln!("{name} transcript: {}", path.display());
        }
        panic!(
            "the simulated cluster differs from the real apiserver.\n\nNEW differences:\n{}\n\nKNOWN differences that no longer occur:\n{}\n\nREAL transcript:\n{}\n\nSIM transcript:\n{}",
            new.join("\n"),
            stale.join("\n"),
            transcript_text(&real),
            transcript_text(&sim)
        );
    }
}

#[test]
fn the_comparison_fires_on_a_planted_difference() {
    let steps = script(true);
    let a = run(&mut Sim::new("planted"), "planted", &steps);
    let mut b = run(&mut Sim::new("planted"), "planted", &steps);
    assert_eq!(
        differences(&a, &b),
        Vec::<String>::new(),
        "the simulator is deterministic"
    );
    let at = |t: &Transcript, label: &str| t.iter().position(|(l, _)| l == label).unwrap();
    // Planted: a create that did not conflict, a spec write that did not bump the
    // generation, and a watch that lost its last event.
    let i = at(&b, "cm-exists");
    b[i].1["code"] = 201.into();
    let i = at(&b, "w-spec");
    b[i].1["body"]["metadata"]["generation"] = 1.into();
    let i = at(&b, "watch-w");
    let events = b[i].1["body"].as_array_mut().unwrap();
    events.remove(events.len() - 2);
    let diffs = differences(&a, &b);
    assert_eq!(diffs.len(), 3, "{diffs:#?}");
    assert!(
        diffs[0].starts_with("cm-exists/code: sim=409 real=201"),
        "{diffs:#?}"
    );
    assert!(
        diffs[1].starts_with("w-spec/body/metadata/generation: sim=2 real=1"),
        "{diffs:#?}"
    );
    assert!(diffs[2].starts_with("watch-w/body: sim=["), "{diffs:#?}");
    // A known difference explains its own and nothing else; one that matches nothing is stale.
    let known = [
        (
            "w-spec",
            "/body/metadata/generation",
            "sim=2 real=1",
            "planted",
        ),
        (
            "w-*",
            "/body/metadata/generation",
            "sim=1 real=2",
            "the values differ",
        ),
        ("cm-get", "/code", "*", "never happens"),
    ];
    let (new, stale) = unexplained(&diffs, &known);
    assert_eq!(new.len(), 2, "{new:#?}");
    assert_eq!(stale, ["the values differ", "never happens"]);
    assert!(glob(
        "*/fieldsV1/*/.",
        "/body/metadata/managedFields/0/fieldsV1/f:data/."
    ));
    assert!(!glob("*/data", "/body/data/k"));
}
