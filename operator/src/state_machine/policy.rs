//! Restart policy: whether a failed run or submission is retried, and when.

use std::time::Duration;

use crate::crd::{RestartPolicyType, SparkApplicationSpec, SparkApplicationStatus};
use crate::defaults::DEFAULT_RETRY_INTERVAL_SECONDS;

/// A failed (FAILING) run is rerun: `Always`; `OnFailure` while `executionAttempts` ≤
/// `onFailureRetries`; `OnInfrastructureFailure` the same, and only for an infrastructure
/// failure. `Never`, or no `onFailureRetries`, does not retry.
pub fn should_retry_run(
    policy: RestartPolicyType,
    spec: &SparkApplicationSpec,
    status: &SparkApplicationStatus,
) -> bool {
    let within = || {
        spec.restart_policy
            .as_ref()
            .and_then(|p| p.on_failure_retries)
            .is_some_and(|retries| status.execution_attempts <= retries)
    };
    match policy {
        RestartPolicyType::Never => false,
        RestartPolicyType::Always => true,
        RestartPolicyType::OnFailure => within(),
        RestartPolicyType::OnInfrastructureFailure => {
            status.failure_reason.is_some_and(|r| r.is_infrastructure()) && within()
        }
    }
}

/// A failed submission (SUBMISSION_FAILED) is retried: `Always`; `OnFailure` while
/// `submissionAttempts` ≤ `onSubmissionFailureRetries`; `OnInfrastructureFailure` the same, and
/// only when the submitter was unavailable (a refusal would be refused again).
pub fn should_retry_submission(
    policy: RestartPolicyType,
    spec: &SparkApplicationSpec,
    status: &SparkApplicationStatus,
) -> bool {
    let within = || {
        spec.restart_policy
            .as_ref()
            .and_then(|p| p.on_submission_failure_retries)
            .is_some_and(|retries| status.submission_attempts <= retries)
    };
    match policy {
        RestartPolicyType::Never => false,
        RestartPolicyType::Always => true,
        RestartPolicyType::OnFailure => within(),
        RestartPolicyType::OnInfrastructureFailure => {
            status.failure_reason.is_some_and(|r| r.is_infrastructure()) && within()
        }
    }
}

/// The wait before a retry: the interval times the attempts so far (a linear backoff, as in the
/// widely used operator), at least one interval.
pub fn retry_delay(interval_seconds: Option<i64>, attempts: i32) -> Duration {
    let interval = interval_seconds
        .unwrap_or(DEFAULT_RETRY_INTERVAL_SECONDS)
        .max(0);
    let attempts = i64::from(attempts.max(1));
    Duration::from_secs(u64::try_from(interval.saturating_mul(attempts)).unwrap_or(0))
}
