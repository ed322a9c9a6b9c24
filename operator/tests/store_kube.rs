//! The Kubernetes backend against in-process kubesim, with injected conflicts and server errors.

mod store_support;

use kubesim::control::FaultRule;
use kubesim::{Cluster, ClusterConfig};
use operator::progress_store::ProgressStore;
use operator::progress_store::kube::{KubeStore, MAX_ATTEMPTS, object_name};
use store_support::*;

async fn store() -> (Cluster, KubeStore) {
    let cluster = Cluster::start(ClusterConfig::default())
        .await
        .expect("kubesim starts");
    let store = KubeStore::new(cluster.client().expect("client"));
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
async fn one_configmap_per_application_holds_the_state() {
    let (cluster, s) = store().await;
    let a = app("layout");
    s.commit(&a, 0, 1, "p", 5).await.unwrap();
    s.heartbeat(&a, 0, 6).await.unwrap();
    s.advance_epoch(&a, 0).await.unwrap();
    let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(cluster.client().unwrap(), "default");
    let cm = api.get(&object_name(&a)).await.unwrap();
    let data = cm.data.unwrap();
    assert_eq!(data["epoch"], "1");
    let markers: serde_json::Value = serde_json::from_str(&data["markers"]).unwrap();
    assert_eq!(markers[0]["seq"], 1);
    assert_eq!(markers[0]["committedAtMs"], 5);
    let hb: serde_json::Value = serde_json::from_str(&data["heartbeat"]).unwrap();
    assert_eq!(hb, serde_json::json!({"epoch": 0, "atMs": 6}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conflicts_are_retried_and_a_stale_epoch_stays_fenced() {
    let (cluster, s) = store().await;
    let a = app("conflicts");
    s.commit(&a, 0, 1, "one", 1).await.unwrap();
    s.advance_epoch(&a, 0).await.unwrap();

    fail_updates(&cluster, 2, 409, "before");
    s.commit(&a, 1, 2, "two", 2).await.unwrap();
    assert!(
        cluster.control.faults().is_empty(),
        "both conflicts were met and retried"
    );

    fail_updates(&cluster, 2, 409, "before");
    let err = s.commit(&a, 0, 3, "zombie", 3).await.unwrap_err();
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
    s.commit(&a, 0, 1, "one", 1).await.unwrap();

    // The update lands but its answer is lost: the retry finds its own marker and stops.
    fail_updates(&cluster, 1, 500, "after");
    s.commit(&a, 0, 2, "two", 2).await.unwrap();
    assert_eq!(s.prune(&a, 10).await.unwrap(), 0);
    assert_eq!(
        s.prune(&a, 1).await.unwrap(),
        1,
        "exactly two markers, no duplicate"
    );

    // Same for the fence: a lost answer does not burn a second epoch.
    fail_updates(&cluster, 1, 500, "after");
    assert_eq!(s.advance_epoch(&a, 0).await.unwrap(), 1);
    assert_eq!(s.epoch(&a).await.unwrap(), 1);

    fail_updates(&cluster, 2, 500, "before");
    assert_eq!(
        s.commit(&a, 0, 9, "zombie", 9).await.unwrap_err().kind(),
        "fenced"
    );
    assert_eq!(s.heartbeat(&a, 0, 9).await.unwrap_err().kind(), "fenced");
    cluster.control.clear_faults();
    let m = s.latest(&a).await.unwrap().unwrap();
    assert_eq!((m.epoch, m.seq), (0, 2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endless_conflicts_give_up_with_a_clear_kind() {
    let (cluster, s) = store().await;
    let a = app("endless");
    s.commit(&a, 0, 1, "one", 1).await.unwrap();
    fail_updates(&cluster, u64::from(MAX_ATTEMPTS) + 5, 409, "before");
    let err = s.commit(&a, 0, 2, "two", 2).await.unwrap_err();
    assert_eq!(err.kind(), "conflict_retries_exhausted");
    cluster.control.clear_faults();
    assert_eq!(latest_seq(&s, &a).await, Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forbidden_write_is_not_retried() {
    let (cluster, s) = store().await;
    let a = app("forbidden");
    s.commit(&a, 0, 1, "one", 1).await.unwrap();
    fail_updates(&cluster, 1, 403, "before");
    let err = s.commit(&a, 0, 2, "two", 2).await.unwrap_err();
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
