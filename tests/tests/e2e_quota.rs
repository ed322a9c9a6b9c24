//! A ResourceQuota without room for the driver (docs/operator.md, "A quota without room for the
//! driver"): the operator and a real submitter over mTLS against kubesim, whose quota admission
//! refuses the driver pod with the API server's 403 text. The submitter answers 429
//! `QUOTA_EXCEEDED`; the operator counts a failed submission attempt under
//! `onSubmissionFailureRetries`, with the API server's message in the status and an event, and
//! the same application runs once the quota has room.

use crate::e2e_support;

use e2e_support::{Env, wait_until};
use k8s_openapi::api::core::v1::ResourceQuota;
use kube::api::{Api, Patch, PatchParams, PostParams};
use operator::crd::{ApplicationStateType as State, FailureReason, SparkApplication};
use operator::state_machine::reasons;
use serde_json::json;

const QUOTA: &str = "compute";

/// A quota of `requests.cpu` in `default`: the driver asks for one core.
async fn create_quota(env: &Env, cpu: &str) {
    let api: Api<ResourceQuota> = Api::namespaced(env.client.clone(), "default");
    let quota = serde_json::from_value(json!({
        "metadata": {"name": QUOTA},
        "spec": {"hard": {"requests.cpu": cpu}},
    }))
    .unwrap();
    api.create(&PostParams::default(), &quota).await.unwrap();
}

/// Waits until `name`'s last submission attempt was refused by the quota.
async fn wait_for_quota_refusal(env: &Env, name: &str) -> SparkApplication {
    env.wait_for_app(name, "a quota refusal", |app| {
        app.status.as_ref().is_some_and(|s| {
            s.app_state.state == State::SubmissionFailed
                && s.failure_reason == Some(FailureReason::QuotaExceeded)
        })
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_application_the_quota_has_no_room_for_fails_after_its_submission_retries_naming_the_quota()
 {
    let env = Env::start().await;
    create_quota(&env, "500m").await;
    let _operator = env.operator().await;
    env.create_app(
        "crowded",
        json!({"restartPolicy": {"type": "OnFailure", "onSubmissionFailureRetries": 1,
                                 "onSubmissionFailureRetryInterval": 1}}),
    )
    .await;

    let refused = wait_for_quota_refusal(&env, "crowded").await;
    let message = refused.status.unwrap().app_state.error_message;
    assert!(
        message.contains("exceeded quota: compute") && message.contains("requests.cpu"),
        "the API server's message, naming the quota: {message}"
    );

    let failed = env.wait_for_state("crowded", State::Failed).await;
    let status = failed.status.unwrap();
    assert_eq!(status.failure_reason, Some(FailureReason::QuotaExceeded));
    assert_eq!(
        status.submission_attempts, 2,
        "the first attempt and its one retry"
    );
    assert_eq!(status.execution_attempts, 0);
    assert!(
        status
            .app_state
            .error_message
            .contains("exceeded quota: compute"),
        "{}",
        status.app_state.error_message
    );
    assert!(env.driver_pods("crowded").await.is_empty());
    let warnings = env.warnings("crowded", reasons::SUBMISSION_FAILED).await;
    assert!(
        warnings.iter().any(|e| e
            .note
            .as_deref()
            .is_some_and(|note| note.contains("exceeded quota: compute"))),
        "a Warning event naming the quota: {warnings:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_application_runs_once_its_quota_is_raised_before_its_retries_run_out() {
    let env = Env::start().await;
    create_quota(&env, "500m").await;
    let _operator = env.operator().await;
    env.create_app(
        "patient",
        json!({"restartPolicy": {"type": "OnFailure", "onSubmissionFailureRetries": 5,
                                 "onSubmissionFailureRetryInterval": 1}}),
    )
    .await;
    wait_for_quota_refusal(&env, "patient").await;

    // An administrator raises the quota.
    let quotas: Api<ResourceQuota> = Api::namespaced(env.client.clone(), "default");
    let raised = json!({"spec": {"hard": {"requests.cpu": "4"}}});
    quotas
        .patch(QUOTA, &PatchParams::default(), &Patch::Merge(raised))
        .await
        .unwrap();

    let completed = env.wait_for_state("patient", State::Completed).await;
    let status = completed.status.unwrap();
    assert!(status.submission_attempts >= 2, "{status:?}");
    assert_eq!(status.execution_attempts, 1);
    assert_eq!(status.failure_reason, None);
    assert!(status.app_state.error_message.is_empty());
    wait_until("the driver to exist", || async {
        (!env.driver_pods("patient").await.is_empty()).then_some(())
    })
    .await;
}
