//! ResourceQuota and LimitRange through the API as kube-rs meets them: refusals with the API
//! server's 403 texts, LimitRange defaults filled in before the quota counts a pod, and usage
//! in the quota's status after a create and after a pod finishes.

use k8s_openapi::api::core::v1::{ConfigMap, LimitRange, Pod, ResourceQuota};
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

use super::support::{eventually, start};

fn object<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).unwrap()
}

fn pod(name: &str, run_seconds: &str, resources: Value) -> Pod {
    object(json!({
        "metadata": {"name": name, "annotations": {"kubesim.io/run-seconds": run_seconds}},
        "spec": {"restartPolicy": "Never",
                 "containers": [{"name": "main", "image": "busybox:1", "resources": resources}]},
    }))
}

/// The quota's `status.used` as JSON.
async fn used(quotas: &Api<ResourceQuota>, name: &str) -> Value {
    let q = quotas.get(name).await.unwrap();
    serde_json::to_value(q.status.unwrap().used.unwrap()).unwrap()
}

/// The 403 message of a refused create.
fn refusal<T: std::fmt::Debug>(r: Result<T, kube::Error>) -> String {
    match r {
        Err(kube::Error::Api(s)) if s.code == 403 && s.reason == "Forbidden" => s.message,
        other => panic!("expected a 403, got {other:?}"),
    }
}

#[tokio::test]
async fn quota_refuses_past_its_hard_limits_and_counts_pods_until_they_finish() {
    let sim = start().await;
    let quotas: Api<ResourceQuota> = Api::namespaced(sim.client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(sim.client.clone(), "default");
    let cms: Api<ConfigMap> = Api::namespaced(sim.client.clone(), "default");
    let limits: Api<LimitRange> = Api::namespaced(sim.client.clone(), "default");
    let pp = PostParams::default();
    let compute = object(json!({"metadata": {"name": "compute"}, "spec": {"hard": {
        "pods": "2", "requests.cpu": "1", "requests.memory": "1Gi", "limits.cpu": "2000m"}}}));
    quotas.create(&pp, &compute).await.unwrap();
    let objects = object(json!({"metadata": {"name": "objects"},
        "spec": {"hard": {"count/configmaps": "1"}}}));
    quotas.create(&pp, &objects).await.unwrap();
    let q = quotas.get("compute").await.unwrap();
    assert_eq!(
        serde_json::to_value(q.status.unwrap()).unwrap(),
        json!({"hard": {"limits.cpu": "2", "pods": "2", "requests.cpu": "1", "requests.memory": "1Gi"},
               "used": {"limits.cpu": "0", "pods": "0", "requests.cpu": "0", "requests.memory": "0"}})
    );

    let small = json!({"requests": {"cpu": "600m", "memory": "512Mi"}, "limits": {"cpu": "1"}});
    pods.create(&pp, &pod("first", "0.5", small.clone()))
        .await
        .unwrap();
    assert_eq!(
        used(&quotas, "compute").await,
        json!({"limits.cpu": "1", "pods": "1", "requests.cpu": "600m", "requests.memory": "512Mi"})
    );
    assert_eq!(
        refusal(pods.create(&pp, &pod("second", "-1", small.clone())).await),
        "pods \"second\" is forbidden: exceeded quota: compute, requested: requests.cpu=600m, \
         used: requests.cpu=600m, limited: requests.cpu=1"
    );
    assert_eq!(
        refusal(pods.create(&pp, &pod("bare", "-1", json!({}))).await),
        "pods \"bare\" is forbidden: failed quota: compute: must specify limits.cpu for: main; \
         requests.cpu for: main; requests.memory for: main"
    );

    // A finished pod gives its compute back: the same pod now fits.
    eventually(15, || async {
        let p = pods.get("first").await.ok()?;
        (p.status?.phase.as_deref() == Some("Succeeded")).then_some(())
    })
    .await;
    assert_eq!(
        used(&quotas, "compute").await,
        json!({"limits.cpu": "0", "pods": "0", "requests.cpu": "0", "requests.memory": "0"})
    );
    pods.create(&pp, &pod("second", "-1", small)).await.unwrap();

    // LimitRange defaults are filled in before the quota counts the pod; its max is enforced.
    let range = object(
        json!({"metadata": {"name": "defaults"}, "spec": {"limits": [{
        "type": "Container", "max": {"cpu": "1"},
        "defaultRequest": {"cpu": "100m", "memory": "64Mi"}}]}}),
    );
    limits.create(&pp, &range).await.unwrap();
    let created = pods
        .create(&pp, &pod("bare", "-1", json!({})))
        .await
        .unwrap();
    let resources =
        serde_json::to_value(created.spec.unwrap().containers[0].resources.clone()).unwrap();
    assert_eq!(
        resources,
        json!({"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "1"}})
    );
    assert_eq!(
        used(&quotas, "compute").await,
        json!({"limits.cpu": "2", "pods": "2", "requests.cpu": "700m", "requests.memory": "576Mi"})
    );
    assert_eq!(
        refusal(
            pods.create(&pp, &pod("big", "-1", json!({"limits": {"cpu": "4"}})))
                .await
        ),
        "pods \"big\" is forbidden: maximum cpu usage per Container is 1, but limit is 4"
    );

    // Object counts: the second ConfigMap is one too many.
    let cm = |name: &str| object::<ConfigMap>(json!({"metadata": {"name": name}}));
    cms.create(&pp, &cm("a")).await.unwrap();
    assert_eq!(
        refusal(cms.create(&pp, &cm("b")).await),
        "configmaps \"b\" is forbidden: exceeded quota: objects, requested: count/configmaps=1, \
         used: count/configmaps=1, limited: count/configmaps=1"
    );
    cms.delete("a", &Default::default()).await.unwrap();
    assert_eq!(
        used(&quotas, "objects").await,
        json!({"count/configmaps": "0"})
    );
    cms.create(&pp, &cm("b")).await.unwrap();
}
