//! Protobuf into k8s-openapi's types on the real apiserver (issue 16): objects of many
//! built-in kinds, each with the shapes that protobuf writes differently from JSON (inline
//! structs, `IntOrString`, `Quantity`, `Time` and `MicroTime`, raw JSON, `bytes`, maps, Go
//! slices, pointers set to zero, empty structs), are listed in JSON and, at the same
//! resourceVersion, in protobuf; both decode with the core's list decoder into the same
//! values. With `RECONCILE_WRITE_PROTOBUF_FIXTURES=1` the bodies are kept in
//! `testdata/apiserver-protobuf/kinds`, which the core's tests decode without an apiserver.

use std::fmt::Debug;

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::apps::v1::{
    ControllerRevision, DaemonSet, Deployment, ReplicaSet, StatefulSet,
};
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{
    ConfigMap, Event, LimitRange, Namespace, Node, PersistentVolumeClaim, Pod, ResourceQuota,
    Secret, Service, ServiceAccount,
};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::{Ingress, NetworkPolicy};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, Role, RoleBinding};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use reconcile_core::Object;
use reconcile_core::list::parse_list;
use reconcile_k8s_env::{ApiServer, Client, keep_capture, resource_version, shared_or_skip};
use serde_json::{Value, json};

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
const ACCEPT: &str = "application/vnd.kubernetes.protobuf, application/json";
const LABEL: &str = "reconcile-loop.dev/protobuf-kinds";

/// Lists `collection` (narrowed to this run's objects) in JSON, then in protobuf at the
/// same resourceVersion, and checks that both decode to the same `K`s, at least `min`.
fn same_in_both<K>(api: &Client, collection: &str, selector: &str, file: &str, min: usize)
where
    K: Object + PartialEq + Debug + serde::Serialize,
{
    let path = format!("{collection}?labelSelector={selector}");
    let listed = api.get(&path).unwrap();
    let rv = resource_version(&listed).to_owned();
    let exact = format!("{path}&resourceVersion={rv}&resourceVersionMatch=Exact");
    let (status, _, json_body) = api.get_bytes(&exact, "application/json").unwrap();
    assert_eq!(
        status,
        200,
        "{file}: {}",
        String::from_utf8_lossy(&json_body)
    );
    let (status, content_type, pb_body) = api.get_bytes(&exact, ACCEPT).unwrap();
    assert_eq!(status, 200, "{file}");
    assert!(content_type.starts_with(PROTOBUF), "{file}: {content_type}");
    let from_json = parse_list::<K>(&json_body).unwrap_or_else(|e| panic!("{file} JSON: {e}"));
    let from_pb = parse_list::<K>(&pb_body).unwrap_or_else(|e| panic!("{file} protobuf: {e}"));
    assert!(from_pb.skipped.is_empty(), "{file}: {:?}", from_pb.skipped);
    assert!(
        from_pb.items.len() >= min,
        "{file}: {} listed",
        from_pb.items.len()
    );
    assert_eq!(
        from_pb.resource_version, from_json.resource_version,
        "{file}"
    );
    for (pb, json) in from_pb.items.iter().zip(&from_json.items) {
        // As JSON first, for a readable difference.
        assert_eq!(
            serde_json::to_value(pb).unwrap(),
            serde_json::to_value(json).unwrap(),
            "{file}"
        );
    }
    assert_eq!(from_pb.items, from_json.items, "{file}");
    keep_capture("kinds", &format!("{file}.pb"), &pb_body);
    keep_capture("kinds", &format!("{file}.json"), &json_body);
}

fn meta(name: &str, run: &str) -> Value {
    json!({"name": name, "labels": {LABEL: run, "app": "web"}, "annotations": {"note": "protobuf"}})
}

/// A pod template with the shapes JSON and protobuf write differently.
fn template(run: &str) -> Value {
    json!({
        "metadata": {"labels": {"app": "web", LABEL: run}},
        "spec": {
            "containers": [{
                "name": "app",
                "image": "registry.invalid/app:1",
                "ports": [{"name": "web", "containerPort": 8080}],
                "env": [
                    {"name": "A", "value": "x"},
                    {"name": "EMPTY", "value": ""},
                    {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
                ],
                "resources": {
                    "requests": {"cpu": "100m", "memory": "64Mi"},
                    "limits": {"cpu": "1", "memory": "1.5Gi"}
                },
                "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 5},
                "readinessProbe": {"tcpSocket": {"port": "web"}, "initialDelaySeconds": 0},
                "lifecycle": {"preStop": {"exec": {"command": ["sh", "-c", "sleep 1"]}}},
                "volumeMounts": [{"name": "scratch", "mountPath": "/tmp"}],
                "securityContext": {"runAsNonRoot": true, "runAsUser": 1000, "privileged": false}
            }],
            "volumes": [
                {"name": "scratch", "emptyDir": {}},
                {"name": "cfg", "configMap": {"name": "cfg", "defaultMode": 420, "optional": false}},
                {"name": "sized", "emptyDir": {"medium": "Memory", "sizeLimit": "16Mi"}}
            ],
            "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}
                ]}]
            }}},
            "nodeSelector": {"disk": "ssd"},
            "terminationGracePeriodSeconds": 0
        }
    })
}

fn create(api: &Client, path: &str, object: &Value) {
    api.create(path, object)
        .unwrap_or_else(|e| panic!("create in {path}: {e}\n{object:#}"));
}

/// A PEM certificate signing request (the apiserver checks that it parses).
fn csr_pem() -> String {
    let key = rcgen::KeyPair::generate().unwrap();
    let params = rcgen::CertificateParams::new(vec!["protobuf.invalid".to_owned()]).unwrap();
    params.serialize_request(&key).unwrap().pem().unwrap()
}

#[test]
#[allow(clippy::too_many_lines)] // one object of each kind, then one comparison of each
fn built_in_kinds_decode_from_protobuf_into_k8s_openapi_as_from_json() {
    let Some(env) =
        shared_or_skip("built_in_kinds_decode_from_protobuf_into_k8s_openapi_as_from_json")
    else {
        return;
    };
    let _steady = env.steady();
    let ns = env.unique_namespace("protobuf-kinds").unwrap();
    let api = env.client(ApiServer::Cached);
    let run = ns.as_str();
    let sel = format!("{LABEL}%3D{run}");
    let core = format!("/api/v1/namespaces/{ns}");
    let apps = format!("/apis/apps/v1/namespaces/{ns}");

    create(
        api,
        &format!("{core}/configmaps"),
        &json!({
            "metadata": meta("cfg", run),
            "data": {"a": "1", "empty": ""},
            "binaryData": {"bin": "AAEC/w=="},
            "immutable": false
        }),
    );
    create(
        api,
        &format!("{core}/secrets"),
        &json!({
            "metadata": meta("token", run), "type": "Opaque",
            "data": {"token": "czNjcjN0", "empty": ""}
        }),
    );
    create(
        api,
        &format!("{core}/services"),
        &json!({
            "metadata": meta("web", run),
            "spec": {
                "selector": {"app": "web"},
                "ports": [
                    {"name": "http", "port": 80, "targetPort": 8080},
                    {"name": "named", "port": 81, "targetPort": "web", "protocol": "UDP"}
                ],
                "sessionAffinity": "ClientIP",
                "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 60}}
            }
        }),
    );
    create(
        api,
        &format!("{core}/serviceaccounts"),
        &json!({
            "metadata": meta("robot", run), "automountServiceAccountToken": false
        }),
    );
    create(
        api,
        &format!("{core}/persistentvolumeclaims"),
        &json!({
            "metadata": meta("data", run),
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
        }),
    );
    create(
        api,
        &format!("{core}/resourcequotas"),
        &json!({
            "metadata": meta("quota", run),
            "spec": {"hard": {"pods": "10", "requests.cpu": "2", "requests.memory": "1e3"}}
        }),
    );
    create(
        api,
        &format!("{core}/limitranges"),
        &json!({
            "metadata": meta("limits", run),
            "spec": {"limits": [{"type": "Container", "default": {"cpu": "500m"},
                                 "defaultRequest": {"cpu": "0.1"}, "maxLimitRequestRatio": {"cpu": "10"}}]}
        }),
    );
    create(
        api,
        &format!("{core}/events"),
        &json!({
            "metadata": meta("web.1", run),
            "involvedObject": {"kind": "Pod", "name": "web-0", "namespace": ns, "apiVersion": "v1"},
            "reason": "Started", "message": "started", "type": "Normal", "count": 2,
            "firstTimestamp": "2026-01-02T03:04:05Z", "lastTimestamp": "2026-01-02T03:05:05Z",
            "source": {"component": "protobuf-test"}
        }),
    );
    create(
        api,
        &format!("{core}/pods"),
        &json!({
            "metadata": meta("web-0", run), "spec": template(run)["spec"]
        }),
    );
    create(
        api,
        &format!("{apps}/deployments"),
        &json!({
            "metadata": meta("web", run),
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": {"app": "web"}},
                "template": template(run),
                "strategy": {"type": "RollingUpdate",
                             "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 0}},
                "revisionHistoryLimit": 0,
                "progressDeadlineSeconds": 60
            }
        }),
    );
    create(
        api,
        &format!("{apps}/replicasets"),
        &json!({
            "metadata": meta("web-1", run),
            "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "web"}}, "template": template(run)}
        }),
    );
    create(
        api,
        &format!("{apps}/statefulsets"),
        &json!({
            "metadata": meta("db", run),
            "spec": {
                "replicas": 0, "serviceName": "db",
                "selector": {"matchLabels": {"app": "web"}},
                "template": template(run),
                "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
                    "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "2Gi"}}}}],
                "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
                "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Delete"}
            }
        }),
    );
    create(
        api,
        &format!("{apps}/daemonsets"),
        &json!({
            "metadata": meta("agent", run),
            "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": template(run),
                     "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "10%"}}}
        }),
    );
    create(
        api,
        &format!("{apps}/controllerrevisions"),
        &json!({
            "metadata": meta("agent-1", run),
            "data": {"spec": {"template": {"x": [1, 2.5, "three", null, true]}}},
            "revision": 1
        }),
    );
    create(
        api,
        &format!("/apis/batch/v1/namespaces/{ns}/jobs"),
        &json!({
            "metadata": meta("once", run),
            "spec": {"backoffLimit": 0, "suspend": true, "completions": 1, "parallelism": 1,
                     "template": {"metadata": {"labels": {LABEL: run}}, "spec": {
                         "restartPolicy": "Never",
                         "containers": [{"name": "c", "image": "registry.invalid/job:1"}]}}}
        }),
    );
    create(
        api,
        &format!("/apis/batch/v1/namespaces/{ns}/cronjobs"),
        &json!({
            "metadata": meta("nightly", run),
            "spec": {"schedule": "0 3 * * *", "suspend": true, "concurrencyPolicy": "Forbid",
                     "jobTemplate": {"spec": {"template": {"spec": {
                         "restartPolicy": "OnFailure",
                         "containers": [{"name": "c", "image": "registry.invalid/job:1"}]}}}}}
        }),
    );
    create(
        api,
        &format!("/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"),
        &json!({
            "metadata": meta("leader", run),
            "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15, "leaseTransitions": 0,
                     "acquireTime": "2026-01-02T03:04:05.123456Z",
                     "renewTime": "2026-01-02T03:04:06.000001Z"}
        }),
    );
    create(
        api,
        &format!("/apis/events.k8s.io/v1/namespaces/{ns}/events"),
        &json!({
            "metadata": meta("web.2", run),
            "eventTime": "2026-01-02T03:04:05.654321Z",
            "reportingController": "reconcile-loop.dev/test", "reportingInstance": "test-1",
            "action": "Reconcile", "reason": "Synced", "type": "Normal", "note": "in protobuf",
            "regarding": {"kind": "Pod", "name": "web-0", "namespace": ns, "apiVersion": "v1"}
        }),
    );
    create(
        api,
        &format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles"),
        &json!({
            "metadata": meta("reader", run),
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]
        }),
    );
    create(
        api,
        &format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings"),
        &json!({
            "metadata": meta("reader", run),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "robot", "namespace": ns}]
        }),
    );
    create(
        api,
        &format!("/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies"),
        &json!({
            "metadata": meta("web", run),
            "spec": {"podSelector": {}, "policyTypes": ["Ingress"],
                     "ingress": [{"ports": [{"port": 80, "protocol": "TCP"}, {"port": "web"}],
                                  "from": [{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"]}}]}]}
        }),
    );
    create(
        api,
        &format!("/apis/networking.k8s.io/v1/namespaces/{ns}/ingresses"),
        &json!({
            "metadata": meta("web", run),
            "spec": {"rules": [{"host": "web.invalid", "http": {"paths": [{"path": "/", "pathType": "Prefix",
                     "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]}
        }),
    );
    create(
        api,
        &format!("/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets"),
        &json!({
            "metadata": meta("web", run),
            "spec": {"minAvailable": "50%", "selector": {"matchLabels": {"app": "web"}}}
        }),
    );
    create(
        api,
        &format!("/apis/autoscaling/v2/namespaces/{ns}/horizontalpodautoscalers"),
        &json!({
            "metadata": meta("web", run),
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                     "minReplicas": 1, "maxReplicas": 3,
                     "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                         "target": {"type": "Utilization", "averageUtilization": 50}}}]}
        }),
    );
    create(
        api,
        &format!("/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices"),
        &json!({
            "metadata": meta("web-abc", run), "addressType": "IPv4",
            "endpoints": [{"addresses": ["10.0.0.1"], "conditions": {"ready": true, "serving": false}}],
            "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]
        }),
    );
    // Cluster-scoped, named after the run.
    let cluster = |name: &str| format!("{run}-{name}");
    create(
        api,
        "/apis/scheduling.k8s.io/v1/priorityclasses",
        &json!({
            "metadata": meta(&cluster("high"), run), "value": 0, "globalDefault": false,
            "description": "protobuf test"
        }),
    );
    create(
        api,
        "/apis/storage.k8s.io/v1/storageclasses",
        &json!({
            "metadata": meta(&cluster("fast"), run), "provisioner": "example.invalid/disk",
            "parameters": {"type": "ssd"}, "reclaimPolicy": "Retain",
            "allowVolumeExpansion": false, "volumeBindingMode": "WaitForFirstConsumer"
        }),
    );
    create(
        api,
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        &json!({
            "metadata": meta(&cluster("reader"), run),
            "rules": [{"nonResourceURLs": ["/healthz"], "verbs": ["get"]}]
        }),
    );
    create(
        api,
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
        &json!({
            "metadata": meta(&cluster("inert"), run),
            "webhooks": [{
                "name": "inert.example.invalid",
                "clientConfig": {"url": "https://127.0.0.1:1/", "caBundle": "AAEC/w=="},
                "rules": [{"apiGroups": ["example.invalid"], "apiVersions": ["v1"],
                           "operations": ["CREATE"], "resources": ["nothing"]}],
                "failurePolicy": "Ignore", "sideEffects": "None", "admissionReviewVersions": ["v1"],
                "timeoutSeconds": 1
            }]
        }),
    );
    create(
        api,
        "/apis/certificates.k8s.io/v1/certificatesigningrequests",
        &json!({
            "metadata": meta(&cluster("csr"), run),
            "spec": {"request": base64(csr_pem().as_bytes()), "signerName": "example.invalid/signer",
                     "usages": ["digital signature", "client auth"], "expirationSeconds": 600}
        }),
    );

    // Served outside k8s.io/api: a CRD with a rich schema (nested properties, int-or-string,
    // defaults and enums as raw JSON, items and additionalProperties as schema unions,
    // numbers as doubles, CEL rules), and an APIService (deleted as soon as it is listed:
    // an unavailable aggregated API would slow discovery for the environment).
    let group = format!("{run}.protobuf.invalid");
    create(
        api,
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        &json!({
            "metadata": meta(&format!("widgets.{group}"), run),
            "spec": {
                "group": group,
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget",
                          "listKind": "WidgetList", "shortNames": ["wd"], "categories": ["all"]},
                "scope": "Namespaced",
                "versions": [{
                    "name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                        "spec": {
                            "type": "object", "required": ["size"],
                            "properties": {
                                "size": {"type": "integer", "minimum": 1, "maximum": 10, "default": 3},
                                "port": {"x-kubernetes-int-or-string": true,
                                         "anyOf": [{"type": "integer"}, {"type": "string"}]},
                                "mode": {"type": "string", "enum": ["a", "b"], "default": "a"},
                                "tags": {"type": "array", "items": {"type": "string"},
                                         "x-kubernetes-list-type": "set", "maxItems": 5},
                                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                                "ratio": {"type": "number", "format": "double", "multipleOf": 0.5}
                            },
                            "x-kubernetes-validations": [{"rule": "self.size <= 10", "message": "too big"}]
                        },
                        "status": {"type": "object", "properties": {
                            "ready": {"type": "boolean"}, "replicas": {"type": "integer"}}}
                    }}},
                    "subresources": {"status": {}, "scale": {
                        "specReplicasPath": ".spec.size", "statusReplicasPath": ".status.replicas"}},
                    "additionalPrinterColumns": [{"name": "Size", "type": "integer", "jsonPath": ".spec.size"}]
                }]
            }
        }),
    );
    // Another group than the CRD's: the apiserver registers a local APIService for that one.
    let aggregated = format!("api.{group}");
    create(
        api,
        "/apis/apiregistration.k8s.io/v1/apiservices",
        &json!({
            "metadata": meta(&format!("v1.{aggregated}"), run),
            "spec": {"group": aggregated, "version": "v1", "groupPriorityMinimum": 1000,
                     "versionPriority": 15, "caBundle": "AAEC/w==",
                     "service": {"namespace": ns, "name": "web", "port": 443}}
        }),
    );
    same_in_both::<APIService>(
        api,
        "/apis/apiregistration.k8s.io/v1/apiservices",
        &sel,
        "apiregistration-v1-apiservice",
        1,
    );
    api.delete(
        &format!("/apis/apiregistration.k8s.io/v1/apiservices/v1.{aggregated}"),
        Some(0),
    )
    .unwrap();
    same_in_both::<CustomResourceDefinition>(
        api,
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        &sel,
        "apiextensions-v1-customresourcedefinition",
        1,
    );
    api.delete(
        &format!("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.{group}"),
        Some(0),
    )
    .unwrap();

    let apis = |group: &str| format!("/apis/{group}/namespaces/{ns}");
    same_in_both::<ConfigMap>(api, &format!("{core}/configmaps"), &sel, "v1-configmap", 1);
    same_in_both::<Secret>(api, &format!("{core}/secrets"), &sel, "v1-secret", 1);
    same_in_both::<Service>(api, &format!("{core}/services"), &sel, "v1-service", 1);
    same_in_both::<ServiceAccount>(
        api,
        &format!("{core}/serviceaccounts"),
        &sel,
        "v1-serviceaccount",
        1,
    );
    same_in_both::<PersistentVolumeClaim>(
        api,
        &format!("{core}/persistentvolumeclaims"),
        &sel,
        "v1-persistentvolumeclaim",
        1,
    );
    same_in_both::<ResourceQuota>(
        api,
        &format!("{core}/resourcequotas"),
        &sel,
        "v1-resourcequota",
        1,
    );
    same_in_both::<LimitRange>(
        api,
        &format!("{core}/limitranges"),
        &sel,
        "v1-limitrange",
        1,
    );
    same_in_both::<Event>(api, &format!("{core}/events"), &sel, "v1-event", 1);
    same_in_both::<Pod>(api, &format!("{core}/pods"), &sel, "v1-pod", 1);
    same_in_both::<Deployment>(
        api,
        &format!("{apps}/deployments"),
        &sel,
        "apps-v1-deployment",
        1,
    );
    same_in_both::<ReplicaSet>(
        api,
        &format!("{apps}/replicasets"),
        &sel,
        "apps-v1-replicaset",
        1,
    );
    same_in_both::<StatefulSet>(
        api,
        &format!("{apps}/statefulsets"),
        &sel,
        "apps-v1-statefulset",
        1,
    );
    same_in_both::<DaemonSet>(
        api,
        &format!("{apps}/daemonsets"),
        &sel,
        "apps-v1-daemonset",
        1,
    );
    same_in_both::<ControllerRevision>(
        api,
        &format!("{apps}/controllerrevisions"),
        &sel,
        "apps-v1-controllerrevision",
        1,
    );
    same_in_both::<Job>(
        api,
        &format!("{}/jobs", apis("batch/v1")),
        &sel,
        "batch-v1-job",
        1,
    );
    same_in_both::<CronJob>(
        api,
        &format!("{}/cronjobs", apis("batch/v1")),
        &sel,
        "batch-v1-cronjob",
        1,
    );
    same_in_both::<Lease>(
        api,
        &format!("{}/leases", apis("coordination.k8s.io/v1")),
        &sel,
        "coordination-v1-lease",
        1,
    );
    same_in_both::<k8s_openapi::api::events::v1::Event>(
        api,
        &format!("{}/events", apis("events.k8s.io/v1")),
        &sel,
        "events-v1-event",
        1,
    );
    same_in_both::<Role>(
        api,
        &format!("{}/roles", apis("rbac.authorization.k8s.io/v1")),
        &sel,
        "rbac-v1-role",
        1,
    );
    same_in_both::<RoleBinding>(
        api,
        &format!("{}/rolebindings", apis("rbac.authorization.k8s.io/v1")),
        &sel,
        "rbac-v1-rolebinding",
        1,
    );
    same_in_both::<NetworkPolicy>(
        api,
        &format!("{}/networkpolicies", apis("networking.k8s.io/v1")),
        &sel,
        "networking-v1-networkpolicy",
        1,
    );
    same_in_both::<Ingress>(
        api,
        &format!("{}/ingresses", apis("networking.k8s.io/v1")),
        &sel,
        "networking-v1-ingress",
        1,
    );
    same_in_both::<PodDisruptionBudget>(
        api,
        &format!("{}/poddisruptionbudgets", apis("policy/v1")),
        &sel,
        "policy-v1-poddisruptionbudget",
        1,
    );
    same_in_both::<HorizontalPodAutoscaler>(
        api,
        &format!("{}/horizontalpodautoscalers", apis("autoscaling/v2")),
        &sel,
        "autoscaling-v2-horizontalpodautoscaler",
        1,
    );
    same_in_both::<EndpointSlice>(
        api,
        &format!("{}/endpointslices", apis("discovery.k8s.io/v1")),
        &sel,
        "discovery-v1-endpointslice",
        1,
    );
    same_in_both::<PriorityClass>(
        api,
        "/apis/scheduling.k8s.io/v1/priorityclasses",
        &sel,
        "scheduling-v1-priorityclass",
        1,
    );
    same_in_both::<StorageClass>(
        api,
        "/apis/storage.k8s.io/v1/storageclasses",
        &sel,
        "storage-v1-storageclass",
        1,
    );
    same_in_both::<ClusterRole>(
        api,
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        &sel,
        "rbac-v1-clusterrole",
        1,
    );
    same_in_both::<ValidatingWebhookConfiguration>(
        api,
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
        &sel,
        "admissionregistration-v1-validatingwebhookconfiguration",
        1,
    );
    same_in_both::<CertificateSigningRequest>(
        api,
        "/apis/certificates.k8s.io/v1/certificatesigningrequests",
        &sel,
        "certificates-v1-certificatesigningrequest",
        1,
    );
    // Objects the environment made: its kwok node (capacity, conditions, addresses) and
    // the namespaces (no label narrows those: every one is listed).
    same_in_both::<Node>(api, "/api/v1/nodes", "", "v1-node", 1);
    same_in_both::<Namespace>(
        api,
        "/api/v1/namespaces",
        &format!("kubernetes.io/metadata.name%3D{ns}"),
        "v1-namespace",
        1,
    );

    for path in [
        "/apis/scheduling.k8s.io/v1/priorityclasses",
        "/apis/storage.k8s.io/v1/storageclasses",
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
        "/apis/certificates.k8s.io/v1/certificatesigningrequests",
    ] {
        let name = path.rsplit('/').next().unwrap();
        let suffix = match name {
            "priorityclasses" => "high",
            "storageclasses" => "fast",
            "clusterroles" => "reader",
            "validatingwebhookconfigurations" => "inert",
            _ => "csr",
        };
        api.delete(&format!("{path}/{}", cluster(suffix)), Some(0))
            .unwrap();
    }
    api.delete_namespace(&ns).unwrap();
}

fn base64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}
