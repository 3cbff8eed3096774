//! The inputs every peer sees: real-shaped pods cloned from the captured v1.36 pod list, and
//! the watch frames that follow the LIST.
//!
//! The shapes follow `core/benches/throughput.rs` (issue 2): about 8 KB of JSON per pod,
//! managedFields included; 90% MODIFIED, 4% ADDED, 4% DELETED, 2% BOOKMARK; frames written
//! with `"type"` before `"object"`, as the apiserver writes them. One extra pod, the
//! *sentinel* (label `cell=sentinel`), is modified by the very last frame
//! (`bench/phase: end`): a peer has processed every frame once it reconciles that state.
//!
//! The two-source scenario (issue 13, [`owned_pair`]) serves ReplicaSets and the pods they
//! own, 10 pods to a ReplicaSet: the same pods, each with a controller owner reference to
//! the ReplicaSet of its cell, and ReplicaSets shaped from the captured coredns pod's (a
//! ReplicaSet owns it in the capture). Each collection ends with its own sentinel's last
//! frame; the sentinel ReplicaSet owns the sentinel pod.

use serde_json::Value;

use crate::BenchError;

/// The namespace every object lives in.
pub const NAMESPACE: &str = "bench";
/// The label selector every peer uses (the `cell` label's existence).
pub const SELECTOR: &str = "cell";
/// Name of the pod whose last frame marks the end of a run.
pub const SENTINEL: &str = "sentinel";
/// Annotation on the sentinel: `start` in the LIST, `end` in the last frame.
pub const PHASE_ANNOTATION: &str = "bench/phase";
/// Pods per parent (`cell` label value).
pub const PODS_PER_CELL: usize = 10;

/// The kind of a served collection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource {
    /// `v1` Pods.
    Pods,
    /// `apps/v1` ReplicaSets.
    ReplicaSets,
}

impl Resource {
    /// The collection's URL path in `namespace`.
    #[must_use]
    pub fn path(self, namespace: &str) -> String {
        match self {
            Resource::Pods => format!("/api/v1/namespaces/{namespace}/pods"),
            Resource::ReplicaSets => format!("/apis/apps/v1/namespaces/{namespace}/replicasets"),
        }
    }

    /// The plural, as in the URL.
    #[must_use]
    pub fn plural(self) -> &'static str {
        match self {
            Resource::Pods => "pods",
            Resource::ReplicaSets => "replicasets",
        }
    }

    /// `kind` of one object.
    #[must_use]
    pub fn kind(self) -> &'static str {
        match self {
            Resource::Pods => "Pod",
            Resource::ReplicaSets => "ReplicaSet",
        }
    }

    /// `apiVersion` of its objects and lists.
    #[must_use]
    pub fn api_version(self) -> &'static str {
        match self {
            Resource::Pods => "v1",
            Resource::ReplicaSets => "apps/v1",
        }
    }

    /// What the apiserver writes as a bookmark's object: the kind's empty object, as Go
    /// serializes it, with only `metadata` filled in.
    fn empty_object_rest(self) -> &'static str {
        match self {
            Resource::Pods => r#""spec":{"containers":null},"status":{}"#,
            Resource::ReplicaSets => {
                r#""spec":{"selector":null,"template":{"metadata":{},"spec":{"containers":null}}},"status":{"replicas":0}"#
            }
        }
    }
}

/// The pod templates of the captured v1.36 pod list.
///
/// # Errors
/// The trace is missing or is not a pod list.
pub fn templates() -> Result<Vec<Value>, BenchError> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../testdata/real/k8s-openapi/v1-36_pod-list.body.json"
    );
    let body = std::fs::read(path).map_err(|e| BenchError::Input(format!("{path}: {e}")))?;
    let list: Value =
        serde_json::from_slice(&body).map_err(|e| BenchError::Input(format!("{path}: {e}")))?;
    match list["items"].as_array() {
        Some(items) if !items.is_empty() => Ok(items.clone()),
        _ => Err(BenchError::Input(format!("{path}: no items"))),
    }
}

/// Pod `i` (`pod-000042`, cell `cell-00004`) at resourceVersion `rv`.
#[must_use]
pub fn pod(templates: &[Value], i: usize, rv: u64) -> Value {
    let mut pod = templates[i % templates.len()].clone();
    let meta = &mut pod["metadata"];
    meta["name"] = Value::from(format!("pod-{i:06}"));
    meta["namespace"] = Value::from(NAMESPACE);
    meta["uid"] = Value::from(format!("00000000-0000-0000-0000-{i:012}"));
    meta["resourceVersion"] = Value::from(rv.to_string());
    meta["labels"]["cell"] = Value::from(format!("cell-{:05}", i / PODS_PER_CELL));
    pod
}

/// The sentinel pod in `phase` (`start` or `end`).
#[must_use]
pub fn sentinel(templates: &[Value], phase: &str, rv: u64) -> Value {
    let mut pod = pod(templates, 0, rv);
    let meta = &mut pod["metadata"];
    meta["name"] = Value::from(SENTINEL);
    meta["uid"] = Value::from("00000000-0000-0000-0001-000000000000");
    meta["labels"]["cell"] = Value::from(SENTINEL);
    meta["annotations"][PHASE_ANNOTATION] = Value::from(phase);
    pod
}

/// One watch line of a pod, `type` before `object`; see [`frame_of`].
#[must_use]
pub fn frame(kind: &str, object: &Value) -> Vec<u8> {
    frame_of(Resource::Pods, kind, object)
}

/// One watch line, `type` before `object` (a `json!` map would sort the keys). A watch
/// event's object carries `kind` and `apiVersion` first, as the apiserver writes it, while
/// LIST items (and the captured ones) carry neither; they are added here when missing.
#[must_use]
pub fn frame_of(resource: Resource, kind: &str, object: &Value) -> Vec<u8> {
    let mut out = format!(r#"{{"type":"{kind}","object":"#).into_bytes();
    let body = object.to_string();
    push_typed_object(&mut out, resource, body.as_bytes());
    out.push(b'}');
    out
}

/// Appends `object` (serialized JSON) with the resource's `kind` and `apiVersion` in front
/// when it has no `kind`.
pub fn push_typed_object(out: &mut Vec<u8>, resource: Resource, object: &[u8]) {
    if object.starts_with(b"{\"kind\"") || object.len() < 2 {
        out.extend_from_slice(object);
    } else {
        // Pieces, not `format!`: a streaming list calls this once per item.
        out.extend_from_slice(br#"{"kind":""#);
        out.extend_from_slice(resource.kind().as_bytes());
        out.extend_from_slice(br#"","apiVersion":""#);
        out.extend_from_slice(resource.api_version().as_bytes());
        out.extend_from_slice(br#"","#);
        out.extend_from_slice(&object[1..]);
    }
}

/// A pod bookmark frame at `rv`; see [`bookmark_of`].
#[must_use]
pub fn bookmark(rv: u64, initial_events_end: bool) -> Vec<u8> {
    bookmark_of(Resource::Pods, rv, initial_events_end)
}

/// A bookmark frame at `rv`, optionally the streaming list's initial-events-end marker.
#[must_use]
pub fn bookmark_of(resource: Resource, rv: u64, initial_events_end: bool) -> Vec<u8> {
    // The apiserver leaves `annotations` out unless it has one to send.
    let annotations = if initial_events_end {
        r#","annotations":{"k8s.io/initial-events-end":"true"}"#
    } else {
        ""
    };
    let (kind, api_version, rest) = (
        resource.kind(),
        resource.api_version(),
        resource.empty_object_rest(),
    );
    format!(
        r#"{{"type":"BOOKMARK","object":{{"kind":"{kind}","apiVersion":"{api_version}","metadata":{{"resourceVersion":"{rv}"{annotations}}},{rest}}}}}"#
    )
    .into_bytes()
}

/// Width of the resourceVersion stamped into every served frame.
const RV_WIDTH: usize = 12;

/// What a frame leaves of its collection's object `index`: present or deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Effect {
    index: usize,
    present: bool,
}

/// One collection a replay serves: its LIST, then the frames of its WATCH.
#[derive(Debug, Clone)]
pub struct Workload {
    /// What the collection holds.
    pub resource: Resource,
    /// The LIST's items, serialized: the objects, then the sentinel.
    pub items: Items,
    /// The LIST's `metadata.resourceVersion`.
    pub list_rv: u64,
    /// A pool of distinct frames, cycled to reach `frames`; each is served with a version of
    /// its own, stamped at `rv_at`.
    pub pool: Vec<Vec<u8>>,
    /// Where each pool frame's resourceVersion digits start.
    rv_at: Vec<usize>,
    /// What each pool frame does to the collection (`None`: a bookmark).
    effects: Vec<Option<Effect>>,
    /// How many frames follow the LIST (the sentinel's last frame included).
    pub frames: usize,
    /// The version of every frame but the last when the collection shares the apiserver's
    /// version sequence with another; `None`: frame `n` is at `list_rv + 1 + n`.
    versions: Option<Vec<u64>>,
    /// The sentinel's last frame.
    pub last: Vec<u8>,
}

/// The fixed xorshift generator every workload draws from: every run is the same.
fn xorshift() -> impl FnMut() -> u64 {
    let mut rng = 0x9e37_79b9_7f4a_7c15_u64;
    move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    }
}

/// `size` distinct frames over `objects` objects of `resource` (built by `object` at a
/// version), drawn with `next`: 90% MODIFIED, 4% ADDED, 4% DELETED, 2% BOOKMARK. Each
/// carries a placeholder version of the stamped width; returns the frames, where their
/// version digits start, and what each does.
#[allow(clippy::type_complexity)]
fn frame_pool(
    resource: Resource,
    size: usize,
    objects: usize,
    object: impl Fn(usize, u64) -> Value,
    next: &mut impl FnMut() -> u64,
) -> (Vec<Vec<u8>>, Vec<usize>, Vec<Option<Effect>>) {
    let placeholder = 10u64.pow(RV_WIDTH as u32) - 1;
    let field = format!(r#""resourceVersion":"{placeholder}""#);
    let mut pool = Vec::with_capacity(size);
    let mut rv_at = Vec::with_capacity(size);
    let mut effects = Vec::with_capacity(size);
    for _ in 0..size {
        let pick = next() % 100;
        let index = (next() as usize) % objects;
        let (frame, effect) = match pick {
            0..90 => (
                frame_of(resource, "MODIFIED", &object(index, placeholder)),
                Some(true),
            ),
            90..94 => (
                frame_of(resource, "ADDED", &object(index, placeholder)),
                Some(true),
            ),
            94..98 => (
                frame_of(resource, "DELETED", &object(index, placeholder)),
                Some(false),
            ),
            _ => (bookmark_of(resource, placeholder, false), None),
        };
        let at = find(&frame, field.as_bytes()).map_or(0, |at| at + field.len() - RV_WIDTH - 1);
        pool.push(frame);
        rv_at.push(at);
        effects.push(effect.map(|present| Effect { index, present }));
    }
    (pool, rv_at, effects)
}

impl Workload {
    /// `pods` real-shaped pods plus the sentinel, then `frames` frames drawn from a pool of
    /// at most `pool` distinct ones (a fixed xorshift seed: every run is the same).
    #[must_use]
    pub fn new(templates: &[Value], pods: usize, frames: usize, pool: usize) -> Self {
        let pods = pods.max(1);
        let list_rv = pods as u64 + 1;
        let start = serde_json::to_vec(&sentinel(templates, "start", list_rv)).unwrap_or_default();
        let items = Items::pods(templates, pods, start);
        let mut next = xorshift();
        let size = pool.min(frames.saturating_sub(1)).max(1);
        let (pool, rv_at, effects) = frame_pool(
            Resource::Pods,
            size,
            pods,
            |i, rv| pod(templates, i, rv),
            &mut next,
        );
        let last = frame(
            "MODIFIED",
            &sentinel(templates, "end", list_rv + frames as u64 + 1),
        );
        Workload {
            resource: Resource::Pods,
            items,
            list_rv,
            pool,
            rv_at,
            effects,
            frames: frames.max(1),
            versions: None,
            last,
        }
    }

    /// Frame `n` of the run (`n < frames`) into `buf`; the last one is the sentinel's. A
    /// cycled frame is stamped with a resourceVersion of its own (zero-padded), as the
    /// apiserver gives every event a version of its own: served twice at one version, a frame
    /// would be no change to a cache that already holds it.
    pub fn frame_into(&self, n: usize, buf: &mut Vec<u8>) {
        buf.clear();
        if n + 1 >= self.frames {
            buf.extend_from_slice(&self.last);
            return;
        }
        let i = n % self.pool.len();
        buf.extend_from_slice(&self.pool[i]);
        let mut rv = match &self.versions {
            Some(versions) => versions[n],
            None => self.list_rv + 1 + n as u64,
        };
        let at = self.rv_at[i];
        for b in buf[at..at + RV_WIDTH].iter_mut().rev() {
            *b = b'0' + (rv % 10) as u8;
            rv /= 10;
        }
    }

    /// Objects in the collection once every frame is applied (the sentinel included): what a
    /// cache that processed them all holds.
    #[must_use]
    pub fn final_objects(&self) -> usize {
        let mut present = vec![true; self.items.len()];
        for n in 0..self.frames.saturating_sub(1) {
            if let Some(effect) = self.effects[n % self.effects.len()] {
                present[effect.index] = effect.present;
            }
        }
        present.into_iter().filter(|p| *p).count()
    }

    /// Bytes of the LIST items, over their count.
    #[must_use]
    pub fn average_item_bytes(&self) -> usize {
        self.items.bytes(0..self.items.len()) / self.items.len().max(1)
    }

    /// Bytes of a served frame, on average over the pool.
    #[must_use]
    pub fn average_frame_bytes(&self) -> usize {
        self.pool.iter().map(Vec::len).sum::<usize>() / self.pool.len().max(1)
    }
}

/// Name of ReplicaSet `c`: the cell its pods are labelled with.
#[must_use]
pub fn cell_name(c: usize) -> String {
    format!("cell-{c:05}")
}

fn replica_set_uid(c: usize) -> String {
    format!("00000000-0000-0000-0002-{c:012}")
}

/// The sentinel ReplicaSet's uid (the sentinel pod's owner).
const SENTINEL_RS_UID: &str = "00000000-0000-0000-0003-000000000000";

/// The `metadata.ownerReferences` of a pod whose controller is ReplicaSet `name`.
fn owned_by(name: &str, uid: &str) -> Value {
    serde_json::json!([{
        "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": name, "uid": uid,
        "controller": true, "blockOwnerDeletion": true,
    }])
}

/// Pod `i` of the two-source scenario: [`pod`], with ReplicaSet `cell-…` (its cell) as
/// its controller owner instead of the template's.
#[must_use]
pub fn owned_pod(templates: &[Value], i: usize, rv: u64) -> Value {
    let mut pod = pod(templates, i, rv);
    let c = i / PODS_PER_CELL;
    pod["metadata"]["ownerReferences"] = owned_by(&cell_name(c), &replica_set_uid(c));
    pod
}

/// ReplicaSet `c` (`cell-00004`, owning pods 40 to 49) at `rv`, shaped as kube-controller-
/// manager writes one: the captured coredns pod's spec as its template (a ReplicaSet owns
/// that pod), a Deployment as its owner, managedFields for spec and status.
#[must_use]
pub fn replica_set(templates: &[Value], c: usize, rv: u64) -> Value {
    // The first captured pod with a ReplicaSet owner; the first pod if none has one.
    let template = templates
        .iter()
        .find(|p| p["metadata"]["ownerReferences"][0]["kind"] == "ReplicaSet")
        .unwrap_or(&templates[0]);
    let name = cell_name(c);
    let hash = template["metadata"]["labels"]["pod-template-hash"]
        .as_str()
        .unwrap_or("589f44dc88");
    let mut labels = template["metadata"]["labels"].clone();
    labels["cell"] = Value::from(name.as_str());
    let mut spec = template["spec"].clone();
    if let Some(spec) = spec.as_object_mut() {
        // Set on the pod by the scheduler and admission, not in the ReplicaSet's template.
        for field in ["nodeName", "priority", "preemptionPolicy"] {
            spec.remove(field);
        }
    }
    // kube-controller-manager's fields: the template's spec fields as it wrote them on the pod.
    let pod_spec_fields = template["metadata"]["managedFields"]
        .as_array()
        .and_then(|entries| {
            entries
                .iter()
                .find(|e| e["manager"] == "kube-controller-manager")
        })
        .map_or(Value::Null, |e| e["fieldsV1"]["f:spec"].clone());
    let label_fields = serde_json::json!({
        ".": {}, "f:cell": {}, "f:k8s-app": {}, "f:pod-template-hash": {},
    });
    let created = template["metadata"]["creationTimestamp"].clone();
    let deployment_uid = format!("00000000-0000-0000-0004-{c:012}");
    serde_json::json!({
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "uid": replica_set_uid(c),
            "resourceVersion": rv.to_string(),
            "generation": 1,
            "creationTimestamp": created,
            "labels": labels,
            "annotations": {
                "deployment.kubernetes.io/desired-replicas": PODS_PER_CELL.to_string(),
                "deployment.kubernetes.io/max-replicas": (PODS_PER_CELL + PODS_PER_CELL / 4 + 1).to_string(),
                "deployment.kubernetes.io/revision": "1",
            },
            "ownerReferences": [{
                "apiVersion": "apps/v1", "kind": "Deployment", "name": name,
                "uid": deployment_uid, "controller": true, "blockOwnerDeletion": true,
            }],
            "managedFields": [
                {
                    "manager": "kube-controller-manager", "operation": "Update",
                    "apiVersion": "apps/v1", "time": created, "fieldsType": "FieldsV1",
                    "fieldsV1": {
                        "f:metadata": {
                            "f:annotations": {
                                ".": {},
                                "f:deployment.kubernetes.io/desired-replicas": {},
                                "f:deployment.kubernetes.io/max-replicas": {},
                                "f:deployment.kubernetes.io/revision": {},
                            },
                            "f:labels": label_fields,
                            "f:ownerReferences": {
                                ".": {},
                                format!("k:{{\"uid\":\"{deployment_uid}\"}}"): {},
                            },
                        },
                        "f:spec": {
                            "f:replicas": {},
                            "f:selector": {},
                            "f:template": {
                                "f:metadata": {"f:labels": label_fields},
                                "f:spec": pod_spec_fields,
                            },
                        },
                    },
                },
                {
                    "manager": "kube-controller-manager", "operation": "Update",
                    "apiVersion": "apps/v1", "time": created, "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:status": {
                        "f:availableReplicas": {}, "f:fullyLabeledReplicas": {},
                        "f:observedGeneration": {}, "f:readyReplicas": {}, "f:replicas": {},
                    }},
                    "subresource": "status",
                },
            ],
        },
        "spec": {
            "replicas": PODS_PER_CELL,
            "selector": {"matchLabels": {"cell": name, "pod-template-hash": hash}},
            "template": {"metadata": {"labels": labels}, "spec": spec},
        },
        "status": {
            "replicas": PODS_PER_CELL,
            "fullyLabeledReplicas": PODS_PER_CELL,
            "readyReplicas": PODS_PER_CELL,
            "availableReplicas": PODS_PER_CELL,
            "observedGeneration": 1,
        },
    })
}

/// The sentinel ReplicaSet in `phase`: it owns the sentinel pod.
#[must_use]
pub fn sentinel_replica_set(templates: &[Value], phase: &str, rv: u64) -> Value {
    let mut rs = replica_set(templates, 0, rv);
    let meta = &mut rs["metadata"];
    meta["name"] = Value::from(SENTINEL);
    meta["uid"] = Value::from(SENTINEL_RS_UID);
    meta["labels"]["cell"] = Value::from(SENTINEL);
    meta["annotations"][PHASE_ANNOTATION] = Value::from(phase);
    rs["spec"]["selector"]["matchLabels"]["cell"] = Value::from(SENTINEL);
    rs["spec"]["template"]["metadata"]["labels"]["cell"] = Value::from(SENTINEL);
    rs
}

/// The sentinel pod of the two-source scenario in `phase`, owned by the sentinel ReplicaSet.
#[must_use]
pub fn owned_sentinel(templates: &[Value], phase: &str, rv: u64) -> Value {
    let mut pod = sentinel(templates, phase, rv);
    pod["metadata"]["ownerReferences"] = owned_by(SENTINEL, SENTINEL_RS_UID);
    pod
}

/// The two-source scenario (issue 13): `parents` ReplicaSets and the `parents ×
/// PODS_PER_CELL` pods they own, each collection with its sentinel, then `frames` frames over
/// both. Every frame picks one of the objects at random, so the collections get frames in
/// proportion to their sizes (10 pod frames to one ReplicaSet frame), under one version
/// sequence, as the apiserver's; each collection's last frame is its sentinel's.
///
/// Returns the ReplicaSets, then the pods.
#[must_use]
pub fn owned_pair(
    templates: &[Value],
    parents: usize,
    frames: usize,
    pool: usize,
) -> [Workload; 2] {
    let parents = parents.max(1);
    let children = parents * PODS_PER_CELL;
    let frames = frames.max(2);
    let mut pods: Vec<Vec<u8>> = (0..children)
        .map(|i| serde_json::to_vec(&owned_pod(templates, i, i as u64 + 1)).unwrap_or_default())
        .collect();
    let mut replica_sets: Vec<Vec<u8>> = (0..parents)
        .map(|c| {
            let rv = (children + c) as u64 + 1;
            serde_json::to_vec(&replica_set(templates, c, rv)).unwrap_or_default()
        })
        .collect();
    let list_rv = (children + parents) as u64 + 2;
    replica_sets.push(
        serde_json::to_vec(&sentinel_replica_set(templates, "start", list_rv - 1))
            .unwrap_or_default(),
    );
    pods.push(serde_json::to_vec(&owned_sentinel(templates, "start", list_rv)).unwrap_or_default());
    let mut next = xorshift();
    // Every frame but the two sentinels' goes to the collection of the object it picks.
    let (mut rs_versions, mut pod_versions) = (Vec::new(), Vec::new());
    for n in 0..frames - 2 {
        let rv = list_rv + 1 + n as u64;
        if (next() as usize) % (parents + children) < parents {
            rs_versions.push(rv);
        } else {
            pod_versions.push(rv);
        }
    }
    let (rs_pool, rs_rv_at, rs_effects) = frame_pool(
        Resource::ReplicaSets,
        pool.min(rs_versions.len()).max(1),
        parents,
        |c, rv| replica_set(templates, c, rv),
        &mut next,
    );
    let (pod_pool, pod_rv_at, pod_effects) = frame_pool(
        Resource::Pods,
        pool.min(pod_versions.len()).max(1),
        children,
        |i, rv| owned_pod(templates, i, rv),
        &mut next,
    );
    let end = list_rv + frames as u64 - 1;
    let rs_last = frame_of(
        Resource::ReplicaSets,
        "MODIFIED",
        &sentinel_replica_set(templates, "end", end),
    );
    let pod_last = frame("MODIFIED", &owned_sentinel(templates, "end", end + 1));
    [
        Workload {
            resource: Resource::ReplicaSets,
            items: Items::Stored(replica_sets),
            list_rv,
            pool: rs_pool,
            rv_at: rs_rv_at,
            effects: rs_effects,
            frames: rs_versions.len() + 1,
            versions: Some(rs_versions),
            last: rs_last,
        },
        Workload {
            resource: Resource::Pods,
            items: Items::Stored(pods),
            list_rv,
            pool: pod_pool,
            rv_at: pod_rv_at,
            effects: pod_effects,
            frames: pod_versions.len() + 1,
            versions: Some(pod_versions),
            last: pod_last,
        },
    ]
}

/// A LIST's items, serialized. The pods of the one-source scenario are written on demand
/// from one serialized copy of each template, so that a million pods (8.5 GB of JSON) cost
/// the replay server no more memory than ten; the two-source scenario's are stored.
#[derive(Debug, Clone)]
pub enum Items {
    /// Every item, serialized.
    Stored(Vec<Vec<u8>>),
    /// Pods `0..count` as [`pod`] makes them at version `i + 1`, then the sentinel.
    Pods {
        /// Each template, split where the per-pod values go.
        templates: Vec<PodTemplate>,
        /// Pods before the sentinel.
        count: usize,
        /// The sentinel, serialized.
        sentinel: Vec<u8>,
    },
}

/// One template pod, serialized, split around the values [`pod`] sets.
#[derive(Debug, Clone)]
pub struct PodTemplate {
    /// Literal bytes, then the field that follows them (`None` after the last piece).
    pieces: Vec<(Vec<u8>, Option<PodField>)>,
    /// Bytes of the literal pieces.
    fixed: usize,
}

/// A value [`pod`] sets per pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PodField {
    Name,
    Uid,
    Version,
    Cell,
}

impl PodField {
    /// Placeholders no captured pod contains, and what each stands for.
    const ALL: [(PodField, &'static str); 4] = [
        (PodField::Name, "@@bench-name@@"),
        (PodField::Uid, "@@bench-uid@@"),
        (PodField::Version, "@@bench-rv@@"),
        (PodField::Cell, "@@bench-cell@@"),
    ];

    /// Writes the value of pod `i` (at version `i + 1`).
    fn write(self, i: usize, out: &mut Vec<u8>) {
        use std::io::Write as _;
        let _ = match self {
            PodField::Name => write!(out, "pod-{i:06}"),
            PodField::Uid => write!(out, "00000000-0000-0000-0000-{i:012}"),
            PodField::Version => write!(out, "{}", i as u64 + 1),
            PodField::Cell => write!(out, "cell-{:05}", i / PODS_PER_CELL),
        };
    }

    /// Bytes [`PodField::write`] writes.
    fn len(self, i: usize) -> usize {
        let digits = |n: u64, min: usize| (n.checked_ilog10().unwrap_or(0) as usize + 1).max(min);
        match self {
            PodField::Name => 4 + digits(i as u64, 6),
            PodField::Uid => 24 + digits(i as u64, 12),
            PodField::Version => digits(i as u64 + 1, 1),
            PodField::Cell => 5 + digits((i / PODS_PER_CELL) as u64, 5),
        }
    }
}

impl PodTemplate {
    /// Template `t`, serialized with placeholders and split at them.
    fn new(templates: &[Value], t: usize) -> Self {
        let mut pod = templates[t].clone();
        let meta = &mut pod["metadata"];
        meta["name"] = Value::from(PodField::ALL[0].1);
        meta["namespace"] = Value::from(NAMESPACE);
        meta["uid"] = Value::from(PodField::ALL[1].1);
        meta["resourceVersion"] = Value::from(PodField::ALL[2].1);
        meta["labels"]["cell"] = Value::from(PodField::ALL[3].1);
        let mut rest = serde_json::to_vec(&pod).unwrap_or_default();
        let mut pieces = Vec::new();
        loop {
            let next = PodField::ALL
                .iter()
                .filter_map(|(field, mark)| {
                    Some((find(&rest, mark.as_bytes())?, *field, mark.len()))
                })
                .min_by_key(|(at, _, _)| *at);
            match next {
                Some((at, field, len)) => {
                    let tail = rest.split_off(at + len);
                    rest.truncate(at);
                    pieces.push((std::mem::replace(&mut rest, tail), Some(field)));
                }
                None => {
                    pieces.push((rest, None));
                    break;
                }
            }
        }
        let fixed = pieces.iter().map(|(lit, _)| lit.len()).sum();
        PodTemplate { pieces, fixed }
    }
}

impl Items {
    /// `count` pods from `templates`, then `sentinel`.
    #[must_use]
    pub fn pods(templates: &[Value], count: usize, sentinel: Vec<u8>) -> Self {
        Items::Pods {
            templates: (0..templates.len().min(count))
                .map(|t| PodTemplate::new(templates, t))
                .collect(),
            count,
            sentinel,
        }
    }

    /// How many items (the sentinel included).
    #[must_use]
    pub fn len(&self) -> usize {
        match self {
            Items::Stored(items) => items.len(),
            Items::Pods { count, .. } => count + 1,
        }
    }

    /// Whether there is no item.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends item `i` (`i < len`) to `out`.
    pub fn write(&self, i: usize, out: &mut Vec<u8>) {
        match self {
            Items::Stored(items) => out.extend_from_slice(&items[i]),
            Items::Pods {
                count, sentinel, ..
            } if i >= *count => out.extend_from_slice(sentinel),
            Items::Pods { templates, .. } => {
                for (literal, field) in &templates[i % templates.len()].pieces {
                    out.extend_from_slice(literal);
                    if let Some(field) = field {
                        field.write(i, out);
                    }
                }
            }
        }
    }

    /// Item `i`, serialized.
    #[must_use]
    pub fn item(&self, i: usize) -> Vec<u8> {
        let mut out = Vec::new();
        self.write(i, &mut out);
        out
    }

    /// Bytes of the items in `range`, without writing them.
    #[must_use]
    pub fn bytes(&self, range: std::ops::Range<usize>) -> usize {
        match self {
            Items::Stored(items) => items[range].iter().map(Vec::len).sum(),
            Items::Pods {
                templates,
                count,
                sentinel,
            } => range
                .map(|i| {
                    if i >= *count {
                        return sentinel.len();
                    }
                    let template = &templates[i % templates.len()];
                    template.fixed
                        + template
                            .pieces
                            .iter()
                            .filter_map(|(_, field)| Some(field.as_ref()?.len(i)))
                            .sum::<usize>()
                })
                .sum(),
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_write_type_before_object_and_end_with_the_sentinel() {
        let templates = templates().unwrap();
        let w = Workload::new(&templates, 20, 10, 4);
        assert_eq!(w.items.len(), 21);
        assert!(w.average_item_bytes() > 4000, "real-shaped pods");
        let mut buf = Vec::new();
        let mut versions = std::collections::BTreeSet::new();
        for n in 0..w.frames {
            w.frame_into(n, &mut buf);
            assert!(buf.starts_with(br#"{"type":""#));
            let frame: Value = serde_json::from_slice(&buf).unwrap();
            let rv = frame["object"]["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .to_owned();
            assert!(versions.insert(rv), "every frame has a version of its own");
        }
        w.frame_into(9, &mut buf);
        let last: Value = serde_json::from_slice(&buf).unwrap();
        assert_eq!(last["object"]["kind"], "Pod");
        let mark: Value = serde_json::from_slice(&bookmark(7, true)).unwrap();
        assert_eq!(mark["object"]["metadata"]["resourceVersion"], "7");
        assert_eq!(last["object"]["metadata"]["name"], SENTINEL);
        assert_eq!(
            last["object"]["metadata"]["annotations"][PHASE_ANNOTATION],
            "end"
        );
    }

    /// Applies every frame of `w` to the set of names its LIST holds, by parsing them: the
    /// reference [`Workload::final_objects`] is checked against.
    fn applied(w: &Workload) -> usize {
        let name = |o: &Value| {
            o["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        };
        let mut held: std::collections::BTreeSet<String> = (0..w.items.len())
            .map(|i| name(&serde_json::from_slice(&w.items.item(i)).unwrap()))
            .collect();
        let mut buf = Vec::new();
        for n in 0..w.frames {
            w.frame_into(n, &mut buf);
            let frame: Value = serde_json::from_slice(&buf).unwrap();
            match frame["type"].as_str().unwrap() {
                "ADDED" | "MODIFIED" => held.insert(name(&frame["object"])),
                "DELETED" => held.remove(&name(&frame["object"])),
                _ => false,
            };
        }
        held.len()
    }

    #[test]
    fn replica_sets_own_ten_pods_each_and_frames_split_under_one_version_sequence() {
        let templates = templates().unwrap();
        let [replica_sets, pods] = owned_pair(&templates, 30, 2_000, 500);
        assert_eq!(replica_sets.resource, Resource::ReplicaSets);
        assert_eq!(replica_sets.items.len(), 31, "30 and the sentinel");
        assert_eq!(pods.items.len(), 301, "300 and the sentinel");
        assert!(
            replica_sets.average_item_bytes() > 4000,
            "real-shaped ReplicaSets"
        );
        let names: std::collections::BTreeSet<String> = (0..replica_sets.items.len())
            .map(|i| {
                let rs: Value = serde_json::from_slice(&replica_sets.items.item(i)).unwrap();
                rs["metadata"]["name"].as_str().unwrap().to_owned()
            })
            .collect();
        for i in 0..pods.items.len() {
            let pod: Value = serde_json::from_slice(&pods.items.item(i)).unwrap();
            let owner = &pod["metadata"]["ownerReferences"][0];
            assert_eq!(owner["kind"], "ReplicaSet");
            assert_eq!(owner["controller"], true);
            assert!(names.contains(owner["name"].as_str().unwrap()));
        }
        assert_eq!(replica_sets.frames + pods.frames, 2_000);
        assert!(
            pods.frames > 8 * replica_sets.frames,
            "about 10 pod frames to one ReplicaSet frame: {} and {}",
            pods.frames,
            replica_sets.frames
        );
        let mut versions = std::collections::BTreeSet::new();
        let mut buf = Vec::new();
        for w in [&replica_sets, &pods] {
            let mut previous = w.list_rv;
            for n in 0..w.frames {
                w.frame_into(n, &mut buf);
                let frame: Value = serde_json::from_slice(&buf).unwrap();
                assert_eq!(frame["object"]["kind"], w.resource.kind());
                let rv: u64 = frame["object"]["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap()
                    .parse()
                    .unwrap();
                assert!(rv > previous, "versions grow along a watch");
                assert!(versions.insert(rv), "no two frames share a version");
                previous = rv;
            }
            let last: Value = serde_json::from_slice(&buf).unwrap();
            assert_eq!(last["object"]["metadata"]["name"], SENTINEL);
            assert_eq!(
                last["object"]["metadata"]["annotations"][PHASE_ANNOTATION],
                "end"
            );
            assert_eq!(w.final_objects(), applied(w));
        }
        let last_pod: Value = serde_json::from_slice(&buf).unwrap();
        assert_eq!(
            last_pod["object"]["metadata"]["ownerReferences"][0]["name"],
            SENTINEL
        );
        let typed: k8s_openapi::api::apps::v1::ReplicaSet =
            serde_json::from_slice(&replica_sets.items.item(0)).unwrap();
        assert_eq!(typed.spec.replicas, Some(PODS_PER_CELL as i32));
    }

    #[test]
    fn templated_pods_are_byte_for_byte_what_serde_writes() {
        let templates = templates().unwrap();
        let items = Items::pods(&templates, 1_000_001, b"{}".to_vec());
        for i in (0..40).chain([99_999, 100_000, 999_999, 1_000_000]) {
            let expected = serde_json::to_vec(&pod(&templates, i, i as u64 + 1)).unwrap();
            assert_eq!(
                String::from_utf8(items.item(i)).unwrap(),
                String::from_utf8(expected.clone()).unwrap(),
                "pod {i}"
            );
            assert_eq!(items.bytes(i..i + 1), expected.len(), "pod {i}");
        }
        assert_eq!(items.len(), 1_000_002);
        assert_eq!(items.item(1_000_001), b"{}");
    }

    #[test]
    fn the_single_source_final_state_matches_its_frames() {
        let templates = templates().unwrap();
        let w = Workload::new(&templates, 50, 3_000, 400);
        assert_eq!(w.final_objects(), applied(&w));
    }
}
