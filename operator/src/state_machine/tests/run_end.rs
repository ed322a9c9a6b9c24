//! A run's end: spec changes, restart policies and their intervals, the time to live.

use super::*;

#[test]
fn spec_change_invalidates_any_state_and_resets_counters() {
    let old = spec(json!({}));
    let new = spec(json!({"arguments": ["more"]}));
    for state in [
        State::Running,
        State::Completed,
        State::Failed,
        State::SubmissionFailed,
    ] {
        let mut status = run_status(&old, state);
        status.termination_time = t(0);
        let decision = decide_at(&new, Some(&status), &synced(Some(driver(running(true)))), 5);
        assert_eq!(
            decision.status.app_state.state,
            State::Invalidating,
            "{state:?}"
        );
        assert_eq!(
            kinds(&decision.actions),
            [
                "WriteStatus",
                "Event(SparkApplicationSpecChanged)",
                "Requeue(0s)"
            ]
        );
        let next = decide_at(
            &new,
            Some(&decision.status),
            &synced(Some(driver(running(true)))),
            6,
        );
        let s = &next.status;
        assert_eq!(s.app_state.state, State::PendingRerun);
        assert_eq!((s.execution_attempts, s.submission_attempts), (0, 0));
        assert_eq!(s.spec_hash, None);
        assert_eq!(s.last_submission_attempt_time, None);
        // The id counter survives, so the next run's id is new.
        assert_eq!(s.submission_id, "uid-1-1");
    }
}

#[test]
fn ttl_and_suspend_changes_do_not_invalidate() {
    let old = spec(json!({}));
    let status = run_status(&old, State::Running);
    let new = spec(json!({"timeToLiveSeconds": 10, "suspend": false}));
    let decision = decide_at(&new, Some(&status), &synced(Some(driver(running(true)))), 5);
    assert_eq!(decision.status.app_state.state, State::Running);
    assert_eq!(spec_hash(&old), spec_hash(&new));
    assert_ne!(spec_hash(&old), spec_hash(&spec(json!({"image": "x"}))));
}

#[test]
fn terminal_states_use_the_operator_default_ttl() {
    let spec = spec(json!({}));
    let mut status = run_status(&spec, State::Failed);
    status.termination_time = t(0);
    let settings = Settings {
        default_ttl_seconds: Some(100),
        ..Settings::default()
    };
    let waiting = decide_with(&spec, Some(&status), &synced(None), 40, &settings);
    assert_eq!(kinds(&waiting.actions), ["Requeue(60s)"]);
    let expired = decide_with(&spec, Some(&status), &synced(None), 100, &settings);
    assert_eq!(kinds(&expired.actions), ["DeleteApplication"]);
}

#[test]
fn on_infrastructure_failure_retries_only_infrastructure_failures() {
    let spec =
        spec(json!({"restartPolicy": {"type": "OnInfrastructureFailure", "onFailureRetries": 2}}));
    let cases = [
        (FailureReason::Evicted, State::PendingRerun),
        (FailureReason::NodeLost, State::PendingRerun),
        (FailureReason::ImagePullFailure, State::PendingRerun),
        (FailureReason::DriverStartTimeout, State::PendingRerun),
        (FailureReason::DriverLost, State::PendingRerun),
        (FailureReason::ApplicationError, State::Failed),
        (FailureReason::DriverReadyTimeout, State::Failed),
    ];
    for (reason, expected) in cases {
        let mut status = run_status(&spec, State::Failing);
        status.termination_time = t(0);
        status.failure_reason = Some(reason);
        let decision = decide_at(&spec, Some(&status), &synced(None), 100);
        assert_eq!(decision.status.app_state.state, expected, "{reason:?}");
    }

    // A driver evicted while running is classified on the way to FAILING.
    let status = run_status(&spec, State::Running);
    let evicted = decide_at(
        &spec,
        Some(&status),
        &synced(Some(driver(failed(FailureReason::Evicted)))),
        10,
    );
    assert_eq!(evicted.status.failure_reason, Some(FailureReason::Evicted));
    assert!(evicted.status.app_state.error_message.contains("Evicted"));

    // Submission: only an unavailable submitter is retried.
    for (reason, expected) in [
        (FailureReason::SubmitterUnavailable, State::SubmissionFailed),
        (FailureReason::SubmissionRejected, State::Failed),
    ] {
        let mut status = run_status(&spec, State::SubmissionFailed);
        status.failure_reason = Some(reason);
        let spec = self::spec(
            json!({"restartPolicy": {"type": "OnInfrastructureFailure", "onSubmissionFailureRetries": 2}}),
        );
        status.spec_hash = Some(spec_hash(&spec));
        let decision = decide_at(&spec, Some(&status), &synced(None), 100);
        assert_eq!(decision.status.app_state.state, expected, "{reason:?}");
    }
}

#[test]
fn retry_delay_is_linear_in_attempts() {
    assert_eq!(retry_delay(Some(10), 0), Duration::from_secs(10));
    assert_eq!(retry_delay(Some(10), 3), Duration::from_secs(30));
    assert_eq!(retry_delay(None, 2), Duration::from_secs(10));
    assert_eq!(
        retry_delay(Some(i64::MAX), i32::MAX),
        Duration::from_secs(i64::MAX as u64)
    );
}
