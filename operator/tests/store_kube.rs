//! The Kubernetes backend against in-process kubesim, with injected conflicts and server errors.

use crate::store_support;

use kubesim::control::FaultRule;
use kubesim::{Cluster, ClusterConfig};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt;
use operator::crd::SparkApplication;
use operator::progress_store::kube::{KubeStore, MAX_ATTEMPTS, object_name};
use operator::progress_store::{AppKey, ProgressStore, Scope};
use store_support::*;

async fn store() -> (Cluster, KubeStore) {
    let cluster = Cluster::start(ClusterConfig::default())
        .await
        .expect("kubesim starts");
    // The suite's applications are no SparkApplications of this cluster: owned by them, their
    // progress would be collected at once (`owners_follow_the_scope_and_take_progress_along`
    // checks ownership with a real one).
    let store = KubeStore::without_owners(cluster.client().expect("client"));
    (cluster, store)
}

/// Fails the next `count` ConfigMap updates with `code`; `when` is `before` (no effect) or
/// `after` (applied, then the answer is lost).
fn fail_updates(cluster: &Cluster, count: u64, code: u16, when: &str) {
    let rule: FaultRule = serde_json::from_value(serde_json::json!({
        "verb": "update", "resource": "configmaps", "count": count, "code": code, "when": when,
    }))
    .expect("a valid fault rule");
    cluster.control.add_fault(rule);
}

store_support::conformance_cases!(store());

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_configmap_per_application_holds_the_state_and_belongs_to_it() {
    let (cluster, s) = store().await;
    let a = app("layout");
    let e = first_fence(&s, &a).await;
    s.commit(&a, e, 1, "p", 5).await.unwrap();
    s.heartbeat(&a, e, 6).await.unwrap();
    s.advance_epoch(&a, e).await.unwrap();
    let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(cluster.client().unwrap(), "default");
    let cm = api.get(&object_name(&a)).await.unwrap();
    let data = cm.data.unwrap();
    assert_eq!(data["epoch"], "2");
    assert_eq!(data["scope"], "uid-layout/1");
    let markers: serde_json::Value = serde_json::from_str(&data["markers"]).unwrap();
    assert_eq!(markers[0]["seq"], 1);
    assert_eq!(markers[0]["committedAtMs"], 5);
    let hb: serde_json::Value = serde_json::from_str(&data["heartbeat"]).unwrap();
    assert_eq!(hb, serde_json::json!({"epoch": 1, "atMs": 6}));
}

/// A SparkApplication in kubesim (its CRD installed), for what it owns.
async fn spark_application(cluster: &Cluster, name: &str) -> SparkApplication {
    let client = cluster.client().unwrap();
    let crds: kube::Api<CustomResourceDefinition> = kube::Api::all(client.clone());
    if crds
        .get_opt(&operator::crd::crd().name_any())
        .await
        .unwrap()
        .is_none()
    {
        crds.create(&Default::default(), &operator::crd::crd())
            .await
            .unwrap();
    }
    let app: SparkApplication = serde_json::from_value(serde_json::json!({
        "apiVersion": "sparkoperator.k8s.io/v1beta2",
        "kind": "SparkApplication",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"type": "Scala", "sparkVersion": "4.0.0", "mainApplicationFile": "local:///a.jar",
                 "driver": {}, "executor": {}},
    }))
    .unwrap();
    let apps: kube::Api<SparkApplication> = kube::Api::namespaced(client, "default");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        // The CRD is served once kubesim has established it.
        match apps.create(&Default::default(), &app).await {
            Ok(created) => return created,
            Err(e) => assert!(
                Instant::now() < deadline,
                "cannot create the SparkApplication: {e}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until `probe` holds, at most 20 s.
async fn until<F: std::future::Future<Output = bool>>(what: &str, probe: impl Fn() -> F) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !probe().await {
        assert!(Instant::now() < deadline, "{what} within 20s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owners_follow_the_scope_and_take_progress_along() {
    let (cluster, _) = store().await;
    let s = KubeStore::new(cluster.client().unwrap());
    let first = spark_application(&cluster, "owned").await;
    let key = |app: &SparkApplication| {
        AppKey::new(
            "default",
            "owned",
            Scope::new(app.metadata.uid.clone().unwrap(), 1),
        )
    };
    let e = first_fence(&s, &key(&first)).await;
    s.commit(&key(&first), e, 1, "p", 1).await.unwrap();
    let api: kube::Api<ConfigMap> = kube::Api::namespaced(cluster.client().unwrap(), "default");
    let owners = |cm: ConfigMap| {
        cm.metadata
            .owner_references
            .unwrap_or_default()
            .into_iter()
            .map(|o| (o.kind, o.name, o.uid))
            .collect::<Vec<_>>()
    };
    let name = object_name(&key(&first));
    assert_eq!(
        owners(api.get(&name).await.unwrap()),
        [(
            "SparkApplication".to_owned(),
            "owned".to_owned(),
            first.metadata.uid.clone().unwrap()
        )]
    );

    // Deleted and created again under the name before the collector came: the first fence of the
    // new object takes the object over, starting from nothing.
    let apps: kube::Api<SparkApplication> =
        kube::Api::namespaced(cluster.client().unwrap(), "default");
    apps.delete("owned", &kube::api::DeleteParams::orphan())
        .await
        .unwrap();
    until("the first application to be gone", || async {
        apps.get_opt("owned").await.unwrap().is_none()
    })
    .await;
    assert!(
        api.get_opt(&name).await.unwrap().is_some(),
        "its progress was orphaned, not collected"
    );
    let second = spark_application(&cluster, "owned").await;
    s.advance_epoch(&key(&second), 0).await.unwrap();
    assert_eq!(s.latest(&key(&second)).await.unwrap(), None);
    let cm = api.get(&name).await.unwrap();
    assert_eq!(
        owners(cm),
        [(
            "SparkApplication".to_owned(),
            "owned".to_owned(),
            second.metadata.uid.clone().unwrap()
        )]
    );

    // Deleting the application deletes its progress.
    apps.delete("owned", &Default::default()).await.unwrap();
    until("the progress to be collected", || async {
        api.get_opt(&name).await.unwrap().is_none()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_driver_write_before_the_first_fence_creates_nothing() {
    let (cluster, s) = store().await;
    let a = app("nothing-yet");
    assert_eq!(
        s.commit(&a, 1, 1, "p", 1).await.unwrap_err().kind(),
        "fenced"
    );
    let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(cluster.client().unwrap(), "default");
    assert!(api.get_opt(&object_name(&a)).await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conflicts_are_retried_and_a_stale_epoch_stays_fenced() {
    let (cluster, s) = store().await;
    let a = app("conflicts");
    let e = first_fence(&s, &a).await;
    s.commit(&a, e, 1, "one", 1).await.unwrap();
    s.advance_epoch(&a, e).await.unwrap();

    fail_updates(&cluster, 2, 409, "before");
    s.commit(&a, e + 1, 2, "two", 2).await.unwrap();
    assert!(
        cluster.control.faults().is_empty(),
        "both conflicts were met and retried"
    );

    fail_updates(&cluster, 2, 409, "before");
    let err = s.commit(&a, e, 3, "zombie", 3).await.unwrap_err();
    assert_eq!(err.kind(), "fenced");
    assert_eq!(
        cluster.control.faults().len(),
        1,
        "fenced without even trying to write"
    );
    cluster.control.clear_faults();
    assert_eq!(latest_seq(&s, &a).await, Some(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_errors_are_retried_and_a_stale_epoch_stays_fenced() {
    let (cluster, s) = store().await;
    let a = app("server-errors");
    let e = first_fence(&s, &a).await;
    s.commit(&a, e, 1, "one", 1).await.unwrap();

    // The update lands but its answer is lost: the retry finds its own marker and stops.
    fail_updates(&cluster, 1, 500, "after");
    s.commit(&a, e, 2, "two", 2).await.unwrap();
    assert_eq!(s.prune(&a, 10).await.unwrap(), 0);
    assert_eq!(
        s.prune(&a, 1).await.unwrap(),
        1,
        "exactly two markers, no duplicate"
    );

    // Same for the fence: a lost answer does not burn a second epoch.
    fail_updates(&cluster, 1, 500, "after");
    assert_eq!(s.advance_epoch(&a, e).await.unwrap(), e + 1);
    assert_eq!(s.epoch(&a).await.unwrap(), e + 1);

    fail_updates(&cluster, 2, 500, "before");
    assert_eq!(
        s.commit(&a, e, 9, "zombie", 9).await.unwrap_err().kind(),
        "fenced"
    );
    assert_eq!(s.heartbeat(&a, e, 9).await.unwrap_err().kind(), "fenced");
    cluster.control.clear_faults();
    let m = s.latest(&a).await.unwrap().unwrap();
    assert_eq!((m.epoch, m.seq), (e, 2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endless_conflicts_give_up_with_a_clear_kind() {
    let (cluster, s) = store().await;
    let a = app("endless");
    let e = first_fence(&s, &a).await;
    s.commit(&a, e, 1, "one", 1).await.unwrap();
    fail_updates(&cluster, u64::from(MAX_ATTEMPTS) + 5, 409, "before");
    let err = s.commit(&a, e, 2, "two", 2).await.unwrap_err();
    assert_eq!(err.kind(), "conflict_retries_exhausted");
    cluster.control.clear_faults();
    assert_eq!(latest_seq(&s, &a).await, Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forbidden_write_is_not_retried() {
    let (cluster, s) = store().await;
    let a = app("forbidden");
    let e = first_fence(&s, &a).await;
    s.commit(&a, e, 1, "one", 1).await.unwrap();
    fail_updates(&cluster, 1, 403, "before");
    let err = s.commit(&a, e, 2, "two", 2).await.unwrap_err();
    assert_eq!(err.kind(), "backend");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_writers_under_injected_conflicts_never_accept_a_stale_epoch() {
    let (cluster, s) = store().await;
    bounded(async {
        fail_updates(&cluster, 6, 409, "before");
        fail_updates(&cluster, 3, 500, "after");
        store_support::racing_zombies_after_the_fence_never_land(&s).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_object_is_reported_not_overwritten() {
    let (cluster, s) = store().await;
    let a = app("corrupt");
    let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(cluster.client().unwrap(), "default");
    let cm: k8s_openapi::api::core::v1::ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": {"name": object_name(&a)},
        "data": {"epoch": "seven"},
    }))
    .unwrap();
    api.create(&Default::default(), &cm).await.unwrap();
    assert_eq!(
        s.commit(&a, 0, 1, "p", 1).await.unwrap_err().kind(),
        "corrupt"
    );
    assert_eq!(s.advance_epoch(&a, 0).await.unwrap_err().kind(), "corrupt");
    let after = api.get(&object_name(&a)).await.unwrap();
    assert_eq!(after.data.unwrap()["epoch"], "seven");
}
