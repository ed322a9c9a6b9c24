//! Two replicas behind leader election: only the leader reconciles, and when it dies the other
//! takes over once the lease expires.

use crate::e2e_support;

use std::time::Duration;

use e2e_support::{Env, LEASE_DURATION, Operator, wait_until, wait_within};
use operator::crd::ApplicationStateType as State;
use operator::crd::SparkApplicationStatus;
use serde_json::json;

/// Starts `replica-a`, waits until it leads with synced caches, then starts `replica-b`.
async fn leader_and_standby(env: &Env) -> (Operator, Operator) {
    let a = env.elected_operator("replica-a");
    wait_until("replica-a to lead", || async {
        (env.lease_holder().await.as_deref() == Some("replica-a")).then_some(())
    })
    .await;
    let health = a.health.clone();
    wait_until("the leader's caches to sync", || {
        let ready = health.ready();
        async move { ready.then_some(()) }
    })
    .await;
    (a, env.elected_operator("replica-b"))
}

/// The status fields a handover must not touch: the run's identity and its attempt counters.
fn run_identity(status: &SparkApplicationStatus) -> impl PartialEq + std::fmt::Debug + use<> {
    (
        status.submission_id.clone(),
        status.spark_application_id.clone(),
        status.driver_info.pod_name.clone(),
        status.execution_attempts,
        status.submission_attempts,
        status.last_submission_attempt_time.clone(),
        status.spec_hash.clone(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standby_takes_over_when_the_leader_dies() {
    let env = Env::start().await;
    let (a, b) = leader_and_standby(&env).await;
    env.create_app("first", json!({})).await;
    env.wait_for_state("first", State::Completed).await;
    // The standby never opened its watches: it reconciles nothing.
    assert!(!b.health.apps.synced() && !b.health.pods.synced());
    assert_eq!(env.lease_holder().await.as_deref(), Some("replica-a"));

    drop(a);
    wait_until("replica-b to take over", || async {
        (env.lease_holder().await.as_deref() == Some("replica-b")).then_some(())
    })
    .await;
    env.create_app("second", json!({})).await;
    env.wait_for_state("second", State::Completed).await;
    assert!(b.health.ready());
}

/// Killing the leader while an application runs: the standby takes over within the lease
/// duration (plus a margin for its retry period and a loaded machine), adopts the running driver
/// instead of submitting again, keeps the status the old leader wrote, and still drives the app
/// to COMPLETED when the driver exits 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_leader_adopts_a_running_application_without_resubmitting() {
    let env = Env::start().await;
    let (a, b) = leader_and_standby(&env).await;
    env.create_app(
        "long",
        json!({"driver": {"annotations": {"kubesim.io/run-seconds": "-1"}}}),
    )
    .await;
    let running = env
        .wait_for_app(
            "long",
            "the leader to have it RUNNING with a driver",
            |app| {
                app.status.as_ref().is_some_and(|s| {
                    s.app_state.state == State::Running
                        && !s.submission_id.is_empty()
                        && !s.spark_application_id.is_empty()
                        && !s.driver_info.pod_name.is_empty()
                })
            },
        )
        .await
        .status
        .unwrap();
    assert_eq!(running.execution_attempts, 1);
    assert!(!running.submission_pending);
    let before = run_identity(&running);
    let driver = running.driver_info.pod_name.clone();
    let drivers = env.driver_pods("long").await;
    assert_eq!(drivers.len(), 1);
    assert_eq!(drivers[0].metadata.name.as_deref(), Some(driver.as_str()));
    let driver_uid = drivers[0].metadata.uid.clone();
    let journaled = env.pod_creations();
    let created = env.pod_create_requests();
    assert_eq!((journaled, created), (1, 1), "one driver pod, nothing else");
    // The standby never opened its watches: it reconciled nothing.
    assert!(!b.health.apps.synced() && !b.health.pods.synced());

    drop(a);
    wait_within(
        "replica-b to take over within the lease duration",
        LEASE_DURATION + Duration::from_secs(3),
        || async { (env.lease_holder().await.as_deref() == Some("replica-b")).then_some(()) },
    )
    .await;
    let health = b.health.clone();
    wait_until("the new leader's caches to sync", || {
        let ready = health.ready();
        async move { ready.then_some(()) }
    })
    .await;
    let app = env.apps().get("long").await.unwrap();
    let status = app.status.unwrap();
    assert_eq!(status.app_state.state, State::Running);
    assert_eq!(run_identity(&status), before);

    // The new leader finishes the run it inherited.
    env.cluster
        .kubelet
        .kill("default", &driver, None, 0)
        .unwrap();
    let done = env.wait_for_state("long", State::Completed).await;
    let status = done.status.unwrap();
    assert_eq!(run_identity(&status), before, "status lost or rewritten");
    assert!(!status.submission_pending);
    let drivers = env.driver_pods("long").await;
    assert_eq!(drivers.len(), 1, "exactly one driver pod for the app");
    assert_eq!(drivers[0].metadata.uid, driver_uid, "the original driver");
    assert_eq!(
        env.pod_creations(),
        journaled,
        "no pod created after the handover"
    );
    assert_eq!(env.pod_create_requests(), created, "no pod create sent");
    assert_eq!(env.lease_holder().await.as_deref(), Some("replica-b"));
}

/// The chart renders the Lease (so that `helm uninstall` removes it) with no holder and, once
/// stored, possibly no spec at all: a replica takes it over instead of trying to create it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_made_ahead_without_a_holder_is_taken_over() {
    let env = Env::start().await;
    let leases: kube::Api<k8s_openapi::api::coordination::v1::Lease> =
        kube::Api::namespaced(env.client.clone(), "default");
    let made_ahead =
        serde_json::from_value(json!({"metadata": {"name": e2e_support::LEASE}})).expect("a Lease");
    leases
        .create(&kube::api::PostParams::default(), &made_ahead)
        .await
        .expect("the Lease is created");
    let _a = env.elected_operator("replica-a");
    wait_until("replica-a to lead", || async {
        (env.lease_holder().await.as_deref() == Some("replica-a")).then_some(())
    })
    .await;
}
