//! Executors a ResourceQuota keeps out (docs/operator.md, "Executors a quota keeps out"): the
//! operator and a real submitter over mTLS against kubesim, whose quota admission refuses an
//! executor pod with the API server's 403. The test creates the executor pods as Spark's driver
//! does (its labels, owned by the driver pod); the application shows the condition
//! `ExecutorsPendingQuota` naming the quota and the executors missing, and loses it once the
//! quota has room and the executors are there.

use crate::e2e_support;

use e2e_support::{Env, WAIT, executor_pod};
use k8s_openapi::api::core::v1::{Pod, ResourceQuota};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::wait::await_condition;
use operator::crd::{ApplicationStateType as State, SparkApplication};
use operator::executor_quota::{CONDITION_TYPE, REASON};
use serde_json::json;

const QUOTA: &str = "compute";

/// A quota of `hard` in `default`.
async fn create_quota(env: &Env, name: &str, hard: serde_json::Value) {
    let api: Api<ResourceQuota> = Api::namespaced(env.client.clone(), "default");
    let quota = serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"hard": hard}}))
        .unwrap();
    api.create(&PostParams::default(), &quota).await.unwrap();
}

/// An administrator sets the quota's `pods` to `pods`.
async fn set_pods(env: &Env, pods: u32) {
    let quotas: Api<ResourceQuota> = Api::namespaced(env.client.clone(), "default");
    let hard = json!({"spec": {"hard": {"pods": pods.to_string()}}});
    quotas
        .patch(QUOTA, &PatchParams::default(), &Patch::Merge(hard))
        .await
        .unwrap();
}

/// Waits, on the application's watch events, until `probe` holds for it.
async fn watch_app(
    env: &Env,
    name: &str,
    what: &str,
    probe: impl Fn(&SparkApplication) -> bool,
) -> SparkApplication {
    let seen = tokio::time::timeout(
        WAIT,
        await_condition(env.apps(), name, |app: Option<&SparkApplication>| {
            app.is_some_and(&probe)
        }),
    )
    .await
    .unwrap_or_else(|_| panic!("timed out waiting for {name}: {what}"))
    .unwrap();
    seen.unwrap_or_else(|| panic!("{name} is gone while waiting for {what}"))
}

fn quota_condition(app: &SparkApplication) -> Option<(String, String, String)> {
    app.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == CONDITION_TYPE)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// An application of `executor.instances: 3` whose driver runs until deleted, running.
async fn running_app(env: &Env, name: &str) -> (SparkApplication, Pod) {
    env.create_app(
        name,
        json!({"executor": {"instances": 3},
               "driver": {"annotations": {"kubesim.io/run-seconds": "-1"}}}),
    )
    .await;
    let app = env.wait_for_state(name, State::Running).await;
    let driver = env.driver_pods(name).await.remove(0);
    (app, driver)
}

/// Creates executor `n` of `app` as its driver would; the API server's answer.
async fn create_executor(
    env: &Env,
    app: &SparkApplication,
    driver: &Pod,
    n: u32,
) -> Result<Pod, kube::Error> {
    let name = format!("{}-exec-{n}", app.metadata.name.as_deref().unwrap());
    let pod = executor_pod(app, driver, &name, json!({"kubesim.io/run-seconds": "-1"}));
    env.pods().create(&PostParams::default(), &pod).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn executors_a_full_quota_refuses_show_in_a_condition_until_the_quota_is_raised() {
    let env = Env::start().await;
    // Room for the driver and one executor.
    create_quota(&env, QUOTA, json!({"pods": "2"})).await;
    let _operator = env.operator().await;
    let (app, driver) = running_app(&env, "crowded").await;

    create_executor(&env, &app, &driver, 1).await.unwrap();
    for n in [2, 3] {
        match create_executor(&env, &app, &driver, n).await {
            Err(kube::Error::Api(status)) => {
                assert_eq!(status.code, 403, "{status:?}");
                assert!(
                    status.message.contains("exceeded quota: compute"),
                    "the API server's refusal: {}",
                    status.message
                );
            }
            other => panic!("executor {n} should be refused by the quota: {other:?}"),
        }
    }

    let held = watch_app(&env, "crowded", "the quota condition", |a| {
        quota_condition(a).is_some()
    })
    .await;
    let (status, reason, message) = quota_condition(&held).unwrap();
    assert_eq!((status.as_str(), reason.as_str()), ("True", REASON));
    assert!(
        message.starts_with("2 executors missing: exceeded quota: compute, requested: pods=1"),
        "{message}"
    );
    // Only the executor that exists is in the status: the refused ones never had a pod.
    let status = held.status.unwrap();
    assert_eq!(
        status.executor_state.keys().collect::<Vec<_>>(),
        ["crowded-exec-1"]
    );
    let counts = status.executor_counts.expect("one executor counted");
    assert_eq!(counts.pending + counts.running, 1, "{counts:?}");

    // An administrator raises the quota; the driver's next allocation round makes the two
    // executors it is missing, under new ids (Spark does not reuse a refused one).
    set_pods(&env, 4).await;
    for n in [4, 5] {
        create_executor(&env, &app, &driver, n).await.unwrap();
    }
    let whole = watch_app(&env, "crowded", "three executors and no condition", |a| {
        quota_condition(a).is_none()
            && a.status
                .as_ref()
                .is_some_and(|s| s.executor_state.len() == 3)
    })
    .await;
    assert_eq!(whole.status.unwrap().app_state.state, State::Running);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn executors_missing_while_no_quota_is_full_on_what_an_executor_uses_show_no_condition() {
    let env = Env::start().await;
    // Room for pods; full on PersistentVolumeClaims, which these executors do not use (the
    // driver needs its Service, so a full `services` would keep the driver out instead).
    create_quota(
        &env,
        QUOTA,
        json!({"pods": "10", "count/persistentvolumeclaims": "0"}),
    )
    .await;
    let _operator = env.operator().await;
    let (app, driver) = running_app(&env, "roomy").await;

    create_executor(&env, &app, &driver, 1).await.unwrap();
    // The status write that records the executor is the decision that saw it missing two more.
    let seen = watch_app(&env, "roomy", "its executor in the status", |a| {
        a.status
            .as_ref()
            .is_some_and(|s| s.executor_state.contains_key("roomy-exec-1"))
    })
    .await;
    assert_eq!(quota_condition(&seen), None);

    // The same application in a namespace whose quota is full on pods does get it: the
    // difference is the quota, not the missing executors.
    set_pods(&env, 2).await;
    let held = watch_app(&env, "roomy", "the quota condition", |a| {
        quota_condition(a).is_some()
    })
    .await;
    assert!(
        quota_condition(&held)
            .unwrap()
            .2
            .starts_with("2 executors missing: exceeded quota: compute"),
        "{held:?}"
    );
}
