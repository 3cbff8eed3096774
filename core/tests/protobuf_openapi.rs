//! Built-in types decode from protobuf into k8s-openapi's own types as from JSON: the LIST
//! and the WATCH captured from a real kube-apiserver (`testdata/apiserver-protobuf`) give the
//! same `Pod`s in protobuf as in JSON, field for field (issue 16).

mod captures;

use captures::{fixture, frames, list_rv, rv_of};
use k8s_openapi::api::core::v1::Pod;
use reconcile_core::WireFormat;
use reconcile_core::frame::parse_frame_as;
use reconcile_core::list::parse_list;

#[test]
fn a_real_protobuf_list_decodes_into_k8s_openapi_pods_as_its_json() {
    let pb = parse_list::<Pod>(&fixture("pod-list.pb")).expect("the protobuf list");
    let json = parse_list::<Pod>(&fixture("pod-list.json")).expect("the JSON list");
    assert!(!pb.items.is_empty() && pb.skipped.is_empty());
    assert_eq!(pb.resource_version, json.resource_version);
    for (pb, json) in pb.items.iter().zip(&json.items) {
        assert_eq!(
            serde_json::to_value(pb).unwrap(),
            serde_json::to_value(json).unwrap()
        );
    }
    assert_eq!(pb.items, json.items);
    // What JSON carries that a partial view does not: the whole spec and status.
    let pod = &pb.items[0];
    let spec = pod.spec.as_ref().expect("a spec");
    assert!(!spec.containers.is_empty());
    assert!(pod.metadata.creation_timestamp.is_some());
    assert!(pod.metadata.managed_fields.is_some());
}

#[test]
fn a_real_protobuf_watch_decodes_into_k8s_openapi_pods_as_its_json() {
    let rv = list_rv();
    let pb: Vec<_> = frames(&fixture("watch.pb"))
        .into_iter()
        .map(|f| parse_frame_as::<Pod>(f, WireFormat::Protobuf).unwrap())
        .filter(|e| rv_of(e) <= rv)
        .collect();
    let json_watch = fixture("watch.jsonl");
    let json: Vec<_> = json_watch
        .split(|b| *b == b'\n')
        .filter(|l| !l.trim_ascii().is_empty())
        .map(|l| parse_frame_as::<Pod>(l, WireFormat::Json).unwrap())
        .filter(|e| rv_of(e) <= rv)
        .collect();
    assert!(pb.len() >= 5, "{}", pb.len());
    assert_eq!(pb, json);
}

/// Compares the capture of one kind; returns how many objects it holds.
type Check = fn(&str) -> usize;

/// Decodes `kinds/<stem>.pb` and `kinds/<stem>.json` into `K` and compares.
fn same_kind<K>(stem: &str) -> usize
where
    K: reconcile_core::Object + PartialEq + std::fmt::Debug + serde::Serialize,
{
    let pb = parse_list::<K>(&fixture(&format!("kinds/{stem}.pb")))
        .unwrap_or_else(|e| panic!("{stem}.pb: {e}"));
    let json = parse_list::<K>(&fixture(&format!("kinds/{stem}.json")))
        .unwrap_or_else(|e| panic!("{stem}.json: {e}"));
    assert!(pb.skipped.is_empty(), "{stem}: {:?}", pb.skipped);
    assert!(!pb.items.is_empty(), "{stem}: nothing listed");
    assert_eq!(pb.items.len(), json.items.len(), "{stem}");
    for (pb, json) in pb.items.iter().zip(&json.items) {
        assert_eq!(
            serde_json::to_value(pb).unwrap(),
            serde_json::to_value(json).unwrap(),
            "{stem}"
        );
    }
    assert_eq!(pb.items, json.items, "{stem}");
    pb.items.len()
}

#[test]
fn real_protobuf_lists_of_34_kinds_decode_into_k8s_openapi_as_their_json() {
    use k8s_openapi::api::{
        admissionregistration, apps, autoscaling, batch, certificates, coordination, core,
        discovery, events, networking, policy, rbac, scheduling, storage,
    };
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions;
    use k8s_openapi::kube_aggregator::pkg::apis::apiregistration;
    let checks: &[(&str, Check)] = &[
        (
            "apiextensions-v1-customresourcedefinition",
            same_kind::<apiextensions::v1::CustomResourceDefinition>,
        ),
        (
            "apiregistration-v1-apiservice",
            same_kind::<apiregistration::v1::APIService>,
        ),
        (
            "admissionregistration-v1-validatingwebhookconfiguration",
            same_kind::<admissionregistration::v1::ValidatingWebhookConfiguration>,
        ),
        (
            "apps-v1-controllerrevision",
            same_kind::<apps::v1::ControllerRevision>,
        ),
        ("apps-v1-daemonset", same_kind::<apps::v1::DaemonSet>),
        ("apps-v1-deployment", same_kind::<apps::v1::Deployment>),
        ("apps-v1-replicaset", same_kind::<apps::v1::ReplicaSet>),
        ("apps-v1-statefulset", same_kind::<apps::v1::StatefulSet>),
        (
            "autoscaling-v2-horizontalpodautoscaler",
            same_kind::<autoscaling::v2::HorizontalPodAutoscaler>,
        ),
        ("batch-v1-cronjob", same_kind::<batch::v1::CronJob>),
        ("batch-v1-job", same_kind::<batch::v1::Job>),
        (
            "certificates-v1-certificatesigningrequest",
            same_kind::<certificates::v1::CertificateSigningRequest>,
        ),
        (
            "coordination-v1-lease",
            same_kind::<coordination::v1::Lease>,
        ),
        (
            "discovery-v1-endpointslice",
            same_kind::<discovery::v1::EndpointSlice>,
        ),
        ("events-v1-event", same_kind::<events::v1::Event>),
        (
            "networking-v1-ingress",
            same_kind::<networking::v1::Ingress>,
        ),
        (
            "networking-v1-networkpolicy",
            same_kind::<networking::v1::NetworkPolicy>,
        ),
        (
            "policy-v1-poddisruptionbudget",
            same_kind::<policy::v1::PodDisruptionBudget>,
        ),
        ("rbac-v1-clusterrole", same_kind::<rbac::v1::ClusterRole>),
        ("rbac-v1-role", same_kind::<rbac::v1::Role>),
        ("rbac-v1-rolebinding", same_kind::<rbac::v1::RoleBinding>),
        (
            "scheduling-v1-priorityclass",
            same_kind::<scheduling::v1::PriorityClass>,
        ),
        (
            "storage-v1-storageclass",
            same_kind::<storage::v1::StorageClass>,
        ),
        ("v1-configmap", same_kind::<core::v1::ConfigMap>),
        ("v1-event", same_kind::<core::v1::Event>),
        ("v1-limitrange", same_kind::<core::v1::LimitRange>),
        ("v1-namespace", same_kind::<core::v1::Namespace>),
        ("v1-node", same_kind::<core::v1::Node>),
        (
            "v1-persistentvolumeclaim",
            same_kind::<core::v1::PersistentVolumeClaim>,
        ),
        ("v1-pod", same_kind::<core::v1::Pod>),
        ("v1-resourcequota", same_kind::<core::v1::ResourceQuota>),
        ("v1-secret", same_kind::<core::v1::Secret>),
        ("v1-service", same_kind::<core::v1::Service>),
        ("v1-serviceaccount", same_kind::<core::v1::ServiceAccount>),
    ];
    // Every captured kind is checked: a new capture must be added here.
    let dir = format!(
        "{}/../testdata/apiserver-protobuf/kinds",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut captured: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.strip_suffix(".pb").map(str::to_owned)
        })
        .collect();
    captured.sort();
    let mut checked: Vec<&str> = checks.iter().map(|(stem, _)| *stem).collect();
    checked.sort_unstable();
    assert_eq!(captured, checked);
    for (stem, check) in checks {
        check(stem);
    }
}

#[test]
fn the_shapes_protobuf_writes_otherwise_read_as_json_has_them() {
    use k8s_openapi::api::{apps, coordination, core};
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    let list = |stem: &str| fixture(&format!("kinds/{stem}.pb"));
    // A pointer set to zero is kept; an inline struct (a Volume's source, a Probe's handler)
    // is flat; an empty struct is there; quantities and int-or-strings read as written.
    let deployments = parse_list::<apps::v1::Deployment>(&list("apps-v1-deployment")).unwrap();
    let spec = &deployments.items[0].spec;
    assert_eq!(spec.replicas, Some(0));
    assert_eq!(spec.revision_history_limit, Some(0));
    let rolling = spec
        .strategy
        .as_ref()
        .unwrap()
        .rolling_update
        .as_ref()
        .unwrap();
    assert_eq!(rolling.max_surge, Some(IntOrString::String("25%".into())));
    assert_eq!(rolling.max_unavailable, Some(IntOrString::Int(0)));
    let pod = spec.template.spec.as_ref().unwrap();
    let volumes = pod.volumes.as_ref().unwrap();
    assert!(volumes[0].empty_dir.is_some());
    assert_eq!(
        volumes[1].config_map.as_ref().unwrap().default_mode,
        Some(420)
    );
    let container = &pod.containers[0];
    let probe = container.liveness_probe.as_ref().unwrap();
    assert_eq!(
        probe.http_get.as_ref().unwrap().port,
        IntOrString::Int(8080)
    );
    let limits = container
        .resources
        .as_ref()
        .unwrap()
        .limits
        .as_ref()
        .unwrap();
    assert_eq!(limits["memory"].0, "1536Mi");
    // An empty env value is a value tagged omitempty: left out, as JSON leaves it.
    let env = container.env.as_ref().unwrap();
    assert_eq!(env[1].value, None);
    // MicroTime keeps its microseconds.
    let leases = parse_list::<coordination::v1::Lease>(&list("coordination-v1-lease")).unwrap();
    let acquired = leases.items[0].spec.as_ref().unwrap().acquire_time.as_ref();
    assert_eq!(
        acquired.unwrap().0.to_string(),
        "2026-01-02T03:04:05.123456Z"
    );
    // Bytes are base64 in JSON: a Secret's data decodes to its bytes.
    let secrets = parse_list::<core::v1::Secret>(&list("v1-secret")).unwrap();
    let data = secrets.items[0].data.as_ref().unwrap();
    assert_eq!(data["token"].0, b"s3cr3t");
    assert!(data["empty"].0.is_empty());
}

/// Decodes `metadata/<stem>-list.*` and the WATCH `metadata/<stem>-watch.*` (up to the
/// list's version) as `PartialObjectMeta<K>`, in protobuf and in JSON, and compares.
fn same_metadata<K>(stem: &str)
where
    kube_core::PartialObjectMeta<K>: reconcile_core::Object + std::fmt::Debug,
{
    use kube_core::PartialObjectMeta;
    let pb = parse_list::<PartialObjectMeta<K>>(&fixture(&format!("metadata/{stem}-list.pb")))
        .unwrap_or_else(|e| panic!("{stem}-list.pb: {e}"));
    let json = parse_list::<PartialObjectMeta<K>>(&fixture(&format!("metadata/{stem}-list.json")))
        .unwrap_or_else(|e| panic!("{stem}-list.json: {e}"));
    assert!(pb.skipped.is_empty(), "{stem}: {:?}", pb.skipped);
    assert!(!pb.items.is_empty(), "{stem}: nothing listed");
    assert_eq!(pb.resource_version, json.resource_version, "{stem}");
    let as_json = |items: &[PartialObjectMeta<K>]| -> Vec<serde_json::Value> {
        items
            .iter()
            .map(|o| serde_json::to_value(o).unwrap())
            .collect()
    };
    assert_eq!(as_json(&pb.items), as_json(&json.items), "{stem}");
    for item in &pb.items {
        // What protobuf leaves out of each item, and JSON writes.
        let types = item.types.as_ref().expect("typed");
        assert_eq!(types.kind, "PartialObjectMetadata", "{stem}");
        assert_eq!(types.api_version, "meta.k8s.io/v1", "{stem}");
        assert!(item.metadata.managed_fields.is_some(), "{stem}");
    }

    let until: u64 = pb.resource_version.parse().unwrap();
    let events = |wire: WireFormat, bytes: Vec<&[u8]>| -> Vec<serde_json::Value> {
        bytes
            .into_iter()
            .map(|f| parse_frame_as::<PartialObjectMeta<K>>(f, wire).unwrap())
            .filter(|e| rv_of(e) <= until)
            .map(|e| match e {
                reconcile_core::frame::WatchEvent::Added(o) => ("ADDED", o),
                reconcile_core::frame::WatchEvent::Modified(o) => ("MODIFIED", o),
                reconcile_core::frame::WatchEvent::Deleted(o) => ("DELETED", o),
                other => panic!("{stem}: {other:?}"),
            })
            .map(|(kind, o)| serde_json::json!([kind, o]))
            .collect()
    };
    let pb_watch = fixture(&format!("metadata/{stem}-watch.pb"));
    let json_watch = fixture(&format!("metadata/{stem}-watch.jsonl"));
    let json_lines = json_watch
        .split(|b| *b == b'\n')
        .filter(|l| !l.trim_ascii().is_empty())
        .collect();
    let pb_events = events(WireFormat::Protobuf, frames(&pb_watch));
    assert!(pb_events.len() >= 5, "{stem}: {}", pb_events.len());
    assert_eq!(pb_events, events(WireFormat::Json, json_lines), "{stem}");
}

#[test]
fn real_metadata_only_lists_and_watches_decode_from_protobuf_as_from_json() {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::{ConfigMap, Secret};
    same_metadata::<ConfigMap>("v1-configmap");
    same_metadata::<Secret>("v1-secret");
    same_metadata::<Deployment>("apps-v1-deployment");
    // A custom resource: served as JSON only, yet its metadata comes in protobuf.
    same_metadata::<kube_core::DynamicObject>("gadget");
}
