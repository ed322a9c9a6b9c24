//! The objects a driver depends on exist before it, and an object that cannot be made leaves the
//! application's state and its driver in agreement (docs/operator.md, "Objects besides the
//! driver"): the operator and a real submitter over mTLS against kubesim, which refuses what a
//! real API server refuses (an unserved type, RBAC).

use crate::e2e_support;

use e2e_support::{Env, chart_operator_rules, install_pod_group_crd, wait_until};
use operator::crd::{ApplicationStateType as State, FailureReason};
use operator::state_machine::{WEB_UI_CONDITION, reasons};
use serde_json::{Value, json};

/// The index in kubesim's journal of the first POST whose path (without the query) ends with
/// `collection`.
fn first_post(env: &Env, collection: &str) -> Option<usize> {
    env.cluster.control.journal().iter().position(|e| {
        e.method == "POST" && e.path.split('?').next().unwrap_or("").ends_with(collection)
    })
}

/// The chart's rules without `resource`: what an operator may do whose installation forgot it.
fn rules_without(resource: &str) -> Value {
    let rules = chart_operator_rules();
    let kept: Vec<Value> = rules
        .as_array()
        .unwrap()
        .iter()
        .filter(|rule| rule["resources"] != json!([resource]))
        .cloned()
        .collect();
    assert!(kept.len() < rules.as_array().unwrap().len(), "{resource}");
    Value::Array(kept)
}

/// Starts the operator as its own service account with `rules` in `default`, watching only
/// `default`.
async fn operator_granted(env: &Env, rules: &Value) -> e2e_support::Operator {
    operator::controller::install_crd(&env.client)
        .await
        .unwrap();
    let client = env.operator_account(&["default"], rules).await;
    let mut config = env.run_config();
    config.namespaces = vec!["default".into()];
    config.install_crd = false;
    env.operator_as(client, config).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_pod_group_crd_no_driver_is_ever_created_and_the_application_fails_saying_why()
{
    let env = Env::start().await;
    let _operator = env.operator().await;
    env.create_app("grouped", json!({"batchScheduler": "volcano"}))
        .await;
    let failed = env.wait_for_state("grouped", State::Failed).await;
    let status = failed.status.unwrap();
    assert_eq!(
        status.failure_reason,
        Some(FailureReason::OwnedObjectRefused)
    );
    assert!(
        status
            .app_state
            .error_message
            .contains("podgroups.scheduling.volcano.sh"),
        "{}",
        status.app_state.error_message
    );
    assert_eq!(status.execution_attempts, 0);
    assert_eq!(env.pod_creations(), 0, "no driver pod was ever created");
    assert!(env.driver_pods("grouped").await.is_empty());
    assert_eq!(
        env.warnings("grouped", reasons::SUBMISSION_FAILED)
            .await
            .len(),
        1
    );
    assert_eq!(
        env.warnings("grouped", reasons::OWNED_OBJECTS_FAILED)
            .await
            .len(),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pod_group_is_created_before_the_driver_pod() {
    let env = Env::start().await;
    install_pod_group_crd(&env.client, "scheduling.x-k8s.io", "v1alpha1").await;
    let _operator = env.operator().await;
    env.create_app("gang", json!({"batchScheduler": "kube-scheduler"}))
        .await;
    env.wait_for_state("gang", State::Completed).await;
    let group = first_post(&env, "/podgroups").expect("the PodGroup was created");
    let driver = first_post(&env, "/pods").expect("the driver pod was created");
    assert!(
        group < driver,
        "the PodGroup (request {group}) comes before the driver pod (request {driver})"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ingress_the_operator_may_not_create_fails_the_run_and_its_driver_is_deleted_first() {
    let env = Env::start().await;
    let _operator = operator_granted(&env, &rules_without("ingresses")).await;
    env.create_app(
        "exposed",
        json!({
            // Runs until it is killed: only the operator stops it.
            "driver": {"annotations": {"kubesim.io/run-seconds": "-1"}},
            "driverIngressOptions": [{"servicePort": 4040,
                                      "ingressURLFormat": "{{$appName}}.example.com"}],
        }),
    )
    .await;
    let failed = env.wait_for_state("exposed", State::Failed).await;
    // Read at once: by the time FAILED is written, the driver is being deleted.
    let drivers = env.driver_pods("exposed").await;
    assert!(
        drivers
            .iter()
            .all(|pod| pod.metadata.deletion_timestamp.is_some()),
        "FAILED beside a running driver: {drivers:#?}"
    );
    assert_eq!(env.pod_creations(), 1, "the driver was made, then stopped");
    let status = failed.status.unwrap();
    assert_eq!(
        status.failure_reason,
        Some(FailureReason::OwnedObjectRefused)
    );
    assert!(
        status
            .app_state
            .error_message
            .contains("Ingress exposed-ing-4040"),
        "{}",
        status.app_state.error_message
    );
    assert_eq!(
        env.warnings("exposed", reasons::OWNED_OBJECTS_FAILED)
            .await
            .len(),
        1
    );
    let refused = env.cluster.control.authz().into_iter().any(|a| {
        a.user == "system:serviceaccount:default:spark-operator"
            && a.resource == "ingresses"
            && a.verb == "create"
            && !a.allowed
    });
    assert!(refused, "the API server refused the Ingress (RBAC)");
    // The deletion completes: nothing of the run keeps running.
    wait_until("the driver to be gone", || async {
        env.driver_pods("exposed").await.is_empty().then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ui_service_the_operator_may_not_create_leaves_the_run_going_with_a_warning_condition() {
    let env = Env::start().await;
    let _operator = operator_granted(&env, &rules_without("services")).await;
    env.create_app("plain", json!({})).await;
    let completed = env.wait_for_state("plain", State::Completed).await;
    let status = completed.status.unwrap();
    let condition = status
        .conditions
        .iter()
        .find(|c| c.type_ == WEB_UI_CONDITION)
        .expect("the warning condition");
    assert_eq!(condition.status, "True");
    assert!(
        condition.message.contains("Service plain-ui-svc"),
        "{}",
        condition.message
    );
    assert!(status.driver_info.web_ui_service_name.is_empty());
    assert_eq!(status.failure_reason, None);
    assert_eq!(
        env.warnings("plain", reasons::OWNED_OBJECTS_FAILED)
            .await
            .len(),
        1
    );
}
