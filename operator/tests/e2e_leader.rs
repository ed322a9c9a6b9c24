//! Two replicas behind leader election: only the leader reconciles, and when it dies the other
//! takes over once the lease expires.

mod e2e_support;

use e2e_support::{Env, wait_until};
use operator::crd::ApplicationStateType as State;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standby_takes_over_when_the_leader_dies() {
    let env = Env::start().await;
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
    let b = env.elected_operator("replica-b");
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
