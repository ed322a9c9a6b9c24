//! Quotas and limit ranges of the driver's namespace, enforced by kubesim as the API server's
//! ResourceQuota and LimitRanger admission do: a quota with no room is 429 `QUOTA_EXCEEDED`
//! with `Retry-After` and the API server's message naming the quota, whichever object it
//! refuses (the pod, the second ConfigMap, the Service after the pod), and leaves nothing
//! behind, so the same submission id creates the driver once the quota is raised; a LimitRange
//! (or a quota that needs resources stated) is the input's fault: 400 or 422 by the input that
//! set the resources, not retryable.

use crate::submit_support;

use http::{StatusCode, header};
use k8s_openapi::api::core::v1::{LimitRange, ResourceQuota};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use submit_support::{TestApp, args, built, request};

const NAMESPACE: &str = "default";

async fn create_quota(t: &TestApp, name: &str, hard: &Value) {
    let api: Api<ResourceQuota> = Api::namespaced(t.client(), NAMESPACE);
    let quota = serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"hard": hard}}))
        .unwrap();
    api.create(&PostParams::default(), &quota).await.unwrap();
}

/// The quota's `status.used`, as kubesim keeps it at every write.
async fn used(t: &TestApp, name: &str) -> Value {
    let api: Api<ResourceQuota> = Api::namespaced(t.client(), NAMESPACE);
    let quota = api.get(name).await.unwrap();
    serde_json::to_value(quota.status.and_then(|status| status.used)).unwrap()
}

/// Sets the quota's `hard` of `resource` to `value`.
async fn set_hard(t: &TestApp, name: &str, resource: &str, value: u64) {
    let api: Api<ResourceQuota> = Api::namespaced(t.client(), NAMESPACE);
    let patch = json!({"spec": {"hard": {resource: value.to_string()}}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .unwrap();
}

/// How many DELETEs of `plural` kubesim's journal holds.
fn deletes(t: &TestApp, plural: &str) -> usize {
    t.journal()
        .iter()
        .filter(|e| e.method == "DELETE" && e.path.contains(&format!("/{plural}/")))
        .count()
}

/// (case, the quota's resource, room left for the submission, the kind refused, the objects
/// created before it and rolled back, by plural)
type QuotaCase = (
    &'static str,
    &'static str,
    u64,
    &'static str,
    &'static [(&'static str, usize)],
);

#[tokio::test]
async fn a_quota_without_room_is_429_leaves_nothing_and_the_same_id_succeeds_once_raised() {
    // The pod after the id's claim and both ConfigMaps, the second ConfigMap after the claim and
    // the first, the Service after the pod and the ConfigMaps (the pod owns them only at the
    // end). The claim is a ConfigMap too, and here the submitter's namespace is the driver's, so
    // the quota counts it and the rollback deletes it.
    let cases: [QuotaCase; 3] = [
        ("pods exhausted", "pods", 0, "pods", &[("configmaps", 3)]),
        (
            "second ConfigMap over the count",
            "count/configmaps",
            2,
            "configmaps",
            &[("configmaps", 2)],
        ),
        (
            "Service after the pod",
            "count/services",
            0,
            "services",
            &[("pods", 1), ("configmaps", 3)],
        ),
    ];
    for (case, resource, room, refused_kind, rolled_back) in cases {
        let t = TestApp::start().await;
        let quota = "spark-jobs";
        // What the namespace holds already (`default` has the `kubernetes` Service), plus room.
        create_quota(&t, quota, &json!({resource: "100"})).await;
        let before = used(&t, quota).await;
        let in_use: u64 = before[resource].as_str().unwrap().parse().unwrap();
        set_hard(&t, quota, resource, in_use + room).await;
        let body = request("quota-1", &args(&[]));

        let refused = t.submit(&body).await;
        assert_eq!(
            refused.status,
            StatusCode::TOO_MANY_REQUESTS,
            "{case}: {}",
            refused.body
        );
        assert_eq!(refused.body["error_code"], "QUOTA_EXCEEDED", "{case}");
        assert_eq!(refused.body["status"], 429, "{case}");
        assert_eq!(refused.body["submission_id"], "quota-1", "{case}");
        let message = refused.body["message"].as_str().unwrap();
        assert!(
            message.contains(&format!("{refused_kind} \"")),
            "{case}: refused another object: {message}"
        );
        assert!(
            message.contains(&format!("exceeded quota: {quota}, requested: ")),
            "{case}: the API server's message naming the quota: {message}"
        );
        assert_eq!(refused.headers[header::RETRY_AFTER], "30", "{case}");

        // Nothing half-made: what was created before the refused object was rolled back, and
        // the quota counts nothing of it.
        for (plural, count) in rolled_back {
            assert_eq!(deletes(&t, plural), *count, "{case}: {plural} rolled back");
        }
        t.assert_nothing_left(&built(&body)).await;
        assert_eq!(used(&t, quota).await, before, "{case}");

        set_hard(&t, quota, resource, in_use + 10).await;
        let created = t.submit(&body).await;
        assert_eq!(
            created.status,
            StatusCode::CREATED,
            "{case}: {}",
            created.body
        );
        t.assert_complete(&built(&body)).await;
    }
}

/// (case, a LimitRange's spec or a quota's `{"hard": …}`, extra arguments, driver template,
/// status, code, what the API server's message says)
type InputCase<'a> = (
    &'a str,
    Value,
    Vec<&'a str>,
    Option<&'a Value>,
    StatusCode,
    &'a str,
    &'a str,
);

#[tokio::test]
async fn refused_resources_are_the_inputs_fault_named_by_the_input_that_set_them() {
    let driver_with_sidecar = json!({"spec": {"containers": [
        {"name": "spark-kubernetes-driver"},
        {"name": "sidecar", "image": "busybox:1.36", "resources": {"limits": {"cpu": "4"}}},
    ]}});
    let limit_range = json!({"limits": [{"type": "Container", "max": {"cpu": "1"}}]});
    let cases: [InputCase; 3] = [
        (
            "a cpu limit over the LimitRange's max from --conf",
            limit_range.clone(),
            vec!["--conf", "spark.kubernetes.driver.limit.cores=2"],
            None,
            StatusCode::BAD_REQUEST,
            "INVALID_SPARK_SUBMIT_ARGS",
            "maximum cpu usage per container is 1, but limit is 2",
        ),
        (
            "a sidecar's cpu limit over the LimitRange's max from the template",
            limit_range,
            vec![],
            Some(&driver_with_sidecar),
            StatusCode::UNPROCESSABLE_ENTITY,
            "INVALID_POD_TEMPLATE",
            "maximum cpu usage per container is 1, but limit is 4",
        ),
        (
            "a quota on limits.cpu the driver does not state",
            json!({"hard": {"limits.cpu": "8"}}),
            vec![],
            None,
            StatusCode::BAD_REQUEST,
            "INVALID_SPARK_SUBMIT_ARGS",
            "failed quota: spark-jobs: must specify limits.cpu",
        ),
    ];
    for (case, spec, extra, template, status, code, says) in cases {
        let t = TestApp::start().await;
        if spec.get("hard").is_some() {
            create_quota(&t, "spark-jobs", &spec["hard"]).await;
        } else {
            let api: Api<LimitRange> = Api::namespaced(t.client(), NAMESPACE);
            let range = serde_json::from_value(json!({"metadata": {"name": "caps"}, "spec": spec}))
                .unwrap();
            api.create(&PostParams::default(), &range).await.unwrap();
        }
        let mut body = request("limits-1", &args(&extra));
        if let Some(template) = template {
            body["driver_pod_template"] = template.clone();
        }
        let answer = t.submit(&body).await;
        assert_eq!(answer.status, status, "{case}: {}", answer.body);
        assert_eq!(answer.body["error_code"], code, "{case}");
        let message = answer.body["message"].as_str().unwrap().to_lowercase();
        assert!(message.contains(says), "{case}: {message}");
        assert!(
            answer.headers.get(header::RETRY_AFTER).is_none(),
            "{case}: not retryable"
        );
        t.assert_nothing_left(&built(&body)).await;
    }
}
