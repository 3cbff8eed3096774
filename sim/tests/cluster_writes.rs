//! The simulated cluster's writes over HTTP: create, replace, patches, apply, `/status`,
//! finalizers, garbage collection; and kube-core's own requests.

mod cluster_script;

use cluster_script::{CM, Script, widget_crd};
use serde_json::{Value, json};

#[test]
fn create_generate_name_already_exists_and_replace_preconditions() {
    let mut s = Script::new();
    s.post(CM, json!({"metadata": {"name": "a"}, "data": {"k": "1"}}));
    s.post(CM, json!({"metadata": {"name": "a"}}));
    s.post(CM, json!({"metadata": {"generateName": "gen-"}}));
    s.post(CM, json!({"metadata": {"generateName": "gen-"}}));
    s.post(CM, json!({"metadata": {}}));
    s.post(CM, json!({"metadata": {"name": "Not_DNS"}}));
    s.post(
        "/api/v1/namespaces/nowhere/configmaps",
        json!({"metadata": {"name": "x"}}),
    );
    s.at(5).put(
        &format!("{CM}/a"),
        json!({"metadata": {"name": "a", "resourceVersion": "2"}, "data": {"k": "2"}}),
    );
    let current = s.get(&format!("{CM}/a"));
    let rv = current["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    s.put(
        &format!("{CM}/a"),
        json!({"metadata": {"name": "a", "resourceVersion": rv}, "data": {"k": "2"}}),
    );
    s.put(
        &format!("{CM}/a"),
        json!({"metadata": {"name": "a"}, "data": {"k": "3"}}),
    );
    s.put(
        &format!("{CM}/a"),
        json!({"metadata": {"name": "a"}, "data": {"k": "3"}}),
    );
    s.put(&format!("{CM}/a"), json!({"metadata": {"name": "b"}}));
    s.put(
        &format!("{CM}/missing"),
        json!({"metadata": {"name": "missing"}}),
    );
    s.get(&format!("{CM}/missing"));
    s.send(
        "POST",
        &format!("{CM}?dryRun=All"),
        "application/json",
        r#"{"metadata":{"name":"dry"}}"#,
    );
    s.get(&format!("{CM}/dry"));
    insta::assert_snapshot!(s.text());
}

#[test]
fn patches_merge_json_strategic_and_their_failures() {
    let mut s = Script::new();
    let a = format!("{CM}/a");
    s.post(
        CM,
        json!({"metadata": {"name": "a", "labels": {"x": "1"}}, "data": {"k": "1", "drop": "me"}}),
    );
    s.patch(&a, "merge", json!({"data": {"k": "2", "drop": null}}));
    s.patch(&a, "json", json!([{"op": "test", "path": "/data/k", "value": "2"}, {"op": "add", "path": "/data/n", "value": "3"}]));
    s.patch(
        &a,
        "json",
        json!([{"op": "test", "path": "/data/k", "value": "nope"}]),
    );
    s.patch(&a, "json", json!({"op": "add"}));
    s.patch(
        &a,
        "json",
        json!([{"op": "remove", "path": "/data/absent"}]),
    );
    s.patch(
        &a,
        "merge",
        json!({"metadata": {"resourceVersion": "2"}, "data": {"k": "stale"}}),
    );
    s.patch(&a, "strategic", json!({"data": {"k": "s"}}));
    s.patch(&a, "text/plain", json!({}));
    s.send("PATCH", &a, "application/merge-patch+json", "{not json");
    s.patch(&format!("{CM}/missing"), "merge", json!({"data": {}}));
    insta::assert_snapshot!(s.text());
}

#[test]
fn server_side_apply_creates_merges_conflicts_and_forces() {
    let mut s = Script::new();
    let uri = "/apis/apps/v1/namespaces/default/deployments/web";
    let applied = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {"replicas": 2, "paused": false}});
    s.patch(
        &format!("{uri}?fieldManager=operator"),
        "apply",
        applied.clone(),
    );
    s.patch(
        &format!("{uri}?fieldManager=operator"),
        "apply",
        applied.clone(),
    );
    s.patch(&format!("{uri}?fieldManager=hpa"), "apply", json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {"replicas": 5}}));
    s.patch(&format!("{uri}?fieldManager=hpa&force=true"), "apply", json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {"replicas": 5}}));
    s.patch(
        &format!("{uri}?fieldManager=kubectl-edit"),
        "merge",
        json!({"spec": {"paused": true}}),
    );
    s.patch(
        &format!("{uri}?fieldManager=operator"),
        "apply",
        applied.clone(),
    );
    s.patch(&format!("{uri}?fieldManager=operator"), "apply", json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {}}));
    s.patch(uri, "apply", applied.clone());
    s.patch(
        &format!("{uri}?fieldManager=x"),
        "apply",
        json!({"metadata": {"name": "web"}}),
    );
    s.patch(
        &format!("{uri}?fieldManager=x&force=true"),
        "merge",
        json!({}),
    );
    let managed = s.get(uri)["metadata"]["managedFields"].clone();
    s.lines.push(format!("managedFields: {managed}"));
    insta::assert_snapshot!(s.text());
}

#[test]
fn the_status_subresource_splits_spec_from_status_and_generation_follows_spec() {
    let mut s = Script::new();
    s.cluster.register_crd(&widget_crd()).unwrap();
    let w = "/apis/example.com/v1/namespaces/default/widgets";
    s.post(w, json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 1}, "status": {"ready": true}}));
    s.put(&format!("{w}/w"), json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 2}, "status": {"ready": true}}));
    s.patch(
        &format!("{w}/w"),
        "merge",
        json!({"metadata": {"labels": {"l": "v"}}}),
    );
    s.patch(
        &format!("{w}/w/status?fieldManager=ctl"),
        "merge",
        json!({"status": {"ready": true}, "spec": {"size": 99}}),
    );
    s.put(&format!("{w}/w/status"), json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 7}, "status": {"ready": false}}));
    s.patch(&format!("{w}/w/status?fieldManager=ctl"), "apply", json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "status": {"observed": 2}}));
    s.get(&format!("{w}/w/status"));
    s.patch(&format!("{CM}/x/status"), "merge", json!({}));
    insta::assert_snapshot!(s.text());
}

#[test]
fn finalizers_hold_a_deleted_object_until_the_last_one_goes() {
    let mut s = Script::new();
    let a = format!("{CM}/a");
    let created = s.post(
        CM,
        json!({"metadata": {"name": "a", "finalizers": ["example.com/cleanup"]}}),
    );
    let w = s.watch(&format!(
        "{CM}?watch=true&resourceVersion={}",
        created["metadata"]["resourceVersion"].as_str().unwrap()
    ));
    s.delete(&a, json!({"preconditions": {"uid": "not-the-uid"}}));
    s.delete(&a, json!({"preconditions": {"resourceVersion": "1"}}));
    s.at(3).delete(&a, json!({}));
    s.delete(&a, json!({}));
    s.patch(
        &a,
        "merge",
        json!({"metadata": {"finalizers": ["example.com/cleanup", "new"]}}),
    );
    s.patch(&a, "merge", json!({"data": {"still": "writable"}}));
    s.at(4).patch(
        &a,
        "json",
        json!([{"op": "remove", "path": "/metadata/finalizers/0"}]),
    );
    s.get(&a);
    s.delete(&a, json!({}));
    s.poll(w);
    insta::assert_snapshot!(s.text());
}

fn owner_ref(kind: &str, owner: &Value, block: bool) -> Value {
    json!({"apiVersion": owner["apiVersion"], "kind": kind, "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"],
        "controller": true, "blockOwnerDeletion": block})
}

/// A Deployment owning a ReplicaSet owning two pods.
fn family(s: &mut Script, block: bool) {
    let d = s.post(
        "/apis/apps/v1/namespaces/default/deployments",
        json!({"metadata": {"name": "d"}, "spec": {"replicas": 2}}),
    );
    let rs = s.post(
        "/apis/apps/v1/namespaces/default/replicasets",
        json!({"metadata": {"name": "rs", "ownerReferences": [owner_ref("Deployment", &d, block)]}}),
    );
    for p in ["p1", "p2"] {
        s.post("/api/v1/namespaces/default/pods", json!({"metadata": {"name": p, "ownerReferences": [owner_ref("ReplicaSet", &rs, block)]}}));
    }
}

#[test]
fn garbage_collection_in_background_foreground_and_orphan() {
    let mut s = Script::new();
    s.note("background: the owner goes now, the collector takes the dependents step by step");
    family(&mut s, false);
    s.delete("/apis/apps/v1/namespaces/default/deployments/d", json!({}));
    s.at(1).gc();
    s.gc();
    s.gc();
    s.get("/api/v1/namespaces/default/pods");

    s.note("foreground: the owner waits for its blocking dependents");
    family(&mut s, true);
    s.send(
        "DELETE",
        "/apis/apps/v1/namespaces/default/deployments/d?propagationPolicy=Foreground",
        "application/json",
        "",
    );
    s.at(2).gc();
    s.gc();
    s.gc();
    s.gc();
    s.get("/apis/apps/v1/namespaces/default/replicasets");

    s.note("orphan: the dependents stay without their owner reference");
    family(&mut s, false);
    s.delete(
        "/apis/apps/v1/namespaces/default/replicasets/rs",
        json!({"propagationPolicy": "Orphan"}),
    );
    s.at(3).gc();
    s.gc();
    s.get("/api/v1/namespaces/default/pods/p1");
    insta::assert_snapshot!(s.text());
}

#[test]
fn two_runs_of_one_script_give_identical_output() {
    let run = || {
        let mut s = Script::new();
        family(&mut s, true);
        s.delete(
            "/apis/apps/v1/namespaces/default/deployments/d",
            json!({"propagationPolicy": "Foreground"}),
        );
        s.gc();
        s.gc();
        s.post(CM, json!({"metadata": {"generateName": "g-"}}));
        s.text()
    };
    assert_eq!(run(), run());
}

/// kube's own request builder (what the engine's `ApiClient` and kube's `Api` send): every
/// request is understood and its answer decodes as the k8s-openapi type.
#[cfg(feature = "capture")]
#[test]
fn kube_core_requests_are_understood() {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube_core::params::{
        DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchParams,
    };
    use reconcile_core::Instant;
    use reconcile_sim::cluster::{Cluster, ClusterConfig, Reply};

    let mut cluster = Cluster::with_builtins(ClusterConfig::default(), Instant::ZERO);
    let r = kube_core::Request::new(CM);
    let send = |cluster: &mut Cluster, req: http::Request<Vec<u8>>| match cluster
        .serve(Instant::ZERO, &req)
    {
        Reply::Response(r) => (r.status, r.body),
        Reply::Watch(id) => (
            0,
            cluster.poll_watch(id, Instant::ZERO).frames.concat().into(),
        ),
    };
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "a"}, "data": {"k": "v"}})).unwrap();
    let (code, body) = send(
        &mut cluster,
        r.create(&PostParams::default(), serde_json::to_vec(&cm).unwrap())
            .unwrap(),
    );
    assert_eq!(code, 201);
    let created: ConfigMap = serde_json::from_slice(&body).unwrap();
    // The apiserver keeps no generation for ConfigMaps.
    assert_eq!(created.metadata.generation, None);
    let (code, body) = send(
        &mut cluster,
        r.list(&ListParams::default().labels("").limit(10)).unwrap(),
    );
    assert_eq!(code, 200);
    let list: k8s_openapi::List<ConfigMap> = serde_json::from_slice(&body).unwrap();
    assert_eq!(list.items.len(), 1);
    let patch = Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "w"}}));
    let (code, body) = send(
        &mut cluster,
        r.patch("a", &PatchParams::apply("op").force(), &patch)
            .unwrap(),
    );
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    let (code, body) = send(
        &mut cluster,
        r.patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"m": "1"}})),
        )
        .unwrap(),
    );
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    let (code, body) = send(&mut cluster, r.get("a", &Default::default()).unwrap());
    let got: ConfigMap = serde_json::from_slice(&body).unwrap();
    assert_eq!((code, got.data.unwrap().len()), (200, 2));
    let (code, frames) = send(
        &mut cluster,
        r.watch(&WatchParams::default().timeout(10), "0").unwrap(),
    );
    assert_eq!(code, 0);
    assert!(String::from_utf8_lossy(&frames).contains("\"ADDED\""));
    let (_, frames) = send(
        &mut cluster,
        r.watch(&WatchParams::streaming_lists(), "").unwrap(),
    );
    assert!(String::from_utf8_lossy(&frames).contains("initial-events-end"));
    let (code, body) = send(
        &mut cluster,
        r.delete("a", &DeleteParams::foreground()).unwrap(),
    );
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    let (code, _) = send(
        &mut cluster,
        r.delete("a", &DeleteParams::default()).unwrap(),
    );
    assert_eq!(code, 200);
    cluster.collect_garbage(Instant::ZERO);
    let (code, _) = send(&mut cluster, r.get("a", &Default::default()).unwrap());
    assert_eq!(code, 404);
}
