//! Submitting: the id before the answer, the answer in one write, refusals before anything is
//! sent, a previous run's driver, reruns.

use super::*;

#[test]
fn a_new_app_sends_its_first_submission_before_storing_anything_and_stores_it_with_the_answer() {
    let spec = spec(json!({}));
    let first = decide_at(&spec, None, &synced(None), 0);
    assert_eq!(
        first.actions,
        [Action::Submit {
            submission_id: "uid-1-1".into()
        }],
        "no status write before the answer"
    );
    assert_eq!(first.status, SparkApplicationStatus::default());

    // The same stored status (an operator that died before the answer was stored) sends the
    // same id, which the submitter answers from the driver it made.
    assert_eq!(
        decide_at(&spec, None, &synced(None), 5).actions,
        first.actions
    );

    let answered = answered("uid-1-1");
    let second = decide_at(&spec, None, &answered, 1);
    assert_eq!(
        kinds(&second.actions),
        [
            "WriteStatus",
            "Event(SparkApplicationSubmitted)",
            "Requeue(10s)"
        ],
        "one write, holding the id and the answer"
    );
    let status = &second.status;
    assert_eq!(status.app_state.state, State::Submitted);
    assert_eq!(status.submission_id, "uid-1-1");
    assert!(!status.submission_pending);
    assert_eq!(status.submission_attempts, 1);
    assert_eq!(status.driver_info.pod_name, "pi-driver");
    assert_eq!(status.last_submission_attempt_time, t(1));
}

#[test]
fn a_stored_pending_submission_is_sent_again_with_its_stored_id() {
    // A status an earlier operator version stored before sending.
    let spec = spec(json!({}));
    let pending = SparkApplicationStatus {
        submission_id: "uid-1-1".into(),
        submission_pending: true,
        submission_attempts: 1,
        spec_hash: Some(spec_hash(&spec)),
        driver_info: DriverInfo {
            pod_name: "pi-driver".into(),
            ..DriverInfo::default()
        },
        ..SparkApplicationStatus::default()
    };
    let decision = decide_at(&spec, Some(&pending), &synced(None), 1);
    assert_eq!(
        decision.actions,
        [Action::Submit {
            submission_id: "uid-1-1".into()
        }]
    );
    assert_eq!(decision.status, pending);
}

#[test]
fn accepted_submission_moves_to_submitted() {
    let spec = spec(json!({}));
    let observed = answered("uid-1-1");
    let decision = decide_at(&spec, None, &observed, 1);
    assert_eq!(decision.status.app_state.state, State::Submitted);
    assert!(!decision.status.submission_pending);
    assert_eq!(decision.status.execution_attempts, 1);
    assert_eq!(decision.status.spark_application_id, "spark-123");
    assert_eq!(
        kinds(&decision.actions),
        [
            "WriteStatus",
            "Event(SparkApplicationSubmitted)",
            "Requeue(10s)"
        ]
    );
}

#[test]
fn rejected_submission_moves_to_submission_failed() {
    let spec = spec(json!({}));
    for (retryable, reason) in [
        (false, FailureReason::SubmissionRejected),
        (true, FailureReason::SubmitterUnavailable),
    ] {
        let observed = Observed {
            submission: Some(SubmissionOutcome::Rejected {
                submission_id: "uid-1-1".into(),
                message: "INVALID_SPARK_SUBMIT_ARGS: --class".into(),
                retryable,
            }),
            ..synced(None)
        };
        let decision = decide_at(&spec, None, &observed, 1);
        assert_eq!(decision.status.app_state.state, State::SubmissionFailed);
        assert_eq!(decision.status.failure_reason, Some(reason));
        assert_eq!(
            decision.status.app_state.error_message,
            "INVALID_SPARK_SUBMIT_ARGS: --class"
        );
        assert_eq!(decision.status.execution_attempts, 0);
        assert_eq!(
            kinds(&decision.actions),
            [
                "WriteStatus",
                "Event(SparkApplicationSubmissionFailed)",
                "Requeue(0s)"
            ]
        );
    }
}

#[test]
fn answer_to_another_submission_is_ignored() {
    let spec = spec(json!({}));
    let observed = Observed {
        submission: Some(SubmissionOutcome::Accepted {
            submission_id: "uid-1-0".into(),
            driver_pod_name: "x".into(),
            spark_app_id: "y".into(),
        }),
        ..synced(None)
    };
    let decision = decide_at(&spec, None, &observed, 1);
    assert_eq!(kinds(&decision.actions), ["Submit"]);
}

#[test]
fn crash_after_submit_resends_the_same_id_and_never_deletes_its_driver() {
    let spec = spec(json!({}));
    // The driver of the id about to be sent exists: the previous operator's Submit got through
    // and it died before storing the answer, so the stored status still says NEW.
    let observed = synced(Some(ObservedDriver {
        submission_id: Some("uid-1-1".into()),
        ..driver(pending())
    }));
    let decision = decide_at(&spec, None, &observed, 30);
    assert_eq!(
        decision.actions,
        [Action::Submit {
            submission_id: "uid-1-1".into()
        }]
    );
}

#[test]
fn previous_run_driver_is_deleted_but_a_foreign_pod_is_not() {
    let spec = spec(json!({}));
    // The last submission was `uid-1-2`; the cached driver is of `uid-1-1`.
    let stored = SparkApplicationStatus {
        submission_id: "uid-1-2".into(),
        ..SparkApplicationStatus::default()
    };
    let old = synced(Some(driver(failed(FailureReason::ApplicationError))));
    let decision = decide_at(&spec, Some(&stored), &old, 1);
    assert_eq!(kinds(&decision.actions), ["DeleteDriver", "Requeue(2s)"]);

    let foreign = synced(Some(ObservedDriver {
        owned: false,
        submission_id: None,
        ..driver(running(true))
    }));
    let decision = decide_at(&spec, Some(&stored), &foreign, 1);
    assert_eq!(kinds(&decision.actions), ["Submit"]);
}

#[test]
fn rerun_gets_a_new_submission_id_and_resets_the_run() {
    let spec = spec(on_failure());
    let mut status = run_status(&spec, State::Failing);
    status.termination_time = t(0);
    status.failure_reason = Some(FailureReason::ApplicationError);
    status.app_state.error_message = "boom".into();
    let rerun = decide_at(
        &spec,
        Some(&status),
        &synced(Some(driver(failed(FailureReason::ApplicationError)))),
        10,
    );
    let s = &rerun.status;
    assert_eq!(s.app_state.state, State::PendingRerun);
    assert_eq!((s.execution_attempts, s.submission_attempts), (1, 0));
    assert_eq!(s.termination_time, None);
    assert_eq!(s.failure_reason, None);
    assert!(s.app_state.error_message.is_empty());
    assert_eq!(
        rerun.actions[..2],
        [
            Action::WriteStatus,
            Action::DeleteDriver {
                name: "pi-driver".into(),
                uid: "pod-uid".into()
            }
        ]
    );

    let submit = decide_at(&spec, Some(s), &synced(None), 11);
    assert_eq!(
        submit.actions,
        [Action::Submit {
            submission_id: "uid-1-2".into()
        }]
    );
    let answered = answered("uid-1-2");
    let submitted = decide_at(&spec, Some(s), &answered, 12).status;
    assert_eq!(submitted.submission_id, "uid-1-2");
    assert_eq!(
        (submitted.execution_attempts, submitted.submission_attempts),
        (2, 1)
    );
}

#[test]
fn blocking_unsupported_field_fails_the_app_without_submitting() {
    let spec = spec(json!({"mode": "client", "restartPolicy": {"type": "Always"}}));
    let decision = decide_at(&spec, None, &synced(None), 0);
    assert_eq!(decision.status.app_state.state, State::Failed);
    assert_eq!(
        decision.status.failure_reason,
        Some(FailureReason::UnsupportedSpec)
    );
    assert!(
        decision
            .status
            .app_state
            .error_message
            .contains("spec.mode")
    );
    assert_eq!(
        kinds(&decision.actions),
        [
            "WriteStatus",
            "Event(UnsupportedFields)",
            "Event(SparkApplicationFailed)",
            "Requeue(0s)"
        ]
    );
    let condition = &decision.status.conditions[0];
    assert_eq!(condition.type_, "UnsupportedFields");
    assert_eq!(condition.status, "True");

    // Fixing the spec reruns it.
    let fixed = self::spec(json!({"mode": "cluster", "restartPolicy": {"type": "Always"}}));
    let rerun = decide_at(&fixed, Some(&decision.status), &synced(None), 1);
    assert_eq!(rerun.status.app_state.state, State::Invalidating);
}

#[test]
fn non_blocking_unsupported_field_is_reported_once_and_the_app_runs() {
    let spec = spec(json!({"executor": {"memoryLimit": "4g"}}));
    let first = decide_at(&spec, None, &synced(None), 0);
    // Recorded with the answer, not before the submission.
    assert_eq!(kinds(&first.actions), ["Submit"]);
    let answered = answered("uid-1-1");
    let submitted = decide_at(&spec, None, &answered, 1);
    assert_eq!(
        kinds(&submitted.actions),
        [
            "WriteStatus",
            "Event(UnsupportedFields)",
            "Event(SparkApplicationSubmitted)",
            "Requeue(10s)"
        ]
    );
    assert_eq!(submitted.status.app_state.state, State::Submitted);
    assert!(
        submitted.status.conditions[0]
            .message
            .contains("spec.executor.memoryLimit")
    );
    let later = decide_at(
        &spec,
        Some(&submitted.status),
        &synced(Some(driver(running(true)))),
        // Started at 5: RUNNING is written once it has run for RUNNING_SETTLE.
        7,
    );
    assert_eq!(
        kinds(&later.actions),
        ["WriteStatus", "Event(SparkDriverRunning)"],
        "reported once"
    );
    let first = submitted;

    // Once the field is removed, the condition goes.
    let status = run_status(&spec, State::Running);
    let mut status = SparkApplicationStatus {
        conditions: first.status.conditions.clone(),
        ..status
    };
    let plain = self::spec(json!({}));
    status.spec_hash = Some(spec_hash(&plain));
    let cleared = decide_at(
        &plain,
        Some(&status),
        &synced(Some(driver(running(true)))),
        5,
    );
    assert!(cleared.status.conditions.is_empty());
}

#[test]
fn submission_id_counter_follows_the_last_id() {
    assert_eq!(next_submission_id("u", ""), "u-1");
    assert_eq!(next_submission_id("u", "u-1"), "u-2");
    assert_eq!(next_submission_id("u", "u-41"), "u-42");
    // An id from the widely used operator (a UUID) starts our count afresh.
    assert_eq!(
        next_submission_id("u", "550e8400-e29b-41d4-a716-446655440000"),
        "u-1"
    );
}

#[test]
fn spark_conf_keys_that_escape_the_operator_fail_the_app_before_anything_is_submitted() {
    for (key, value) in [
        ("spark.kubernetes.namespace", "elsewhere"),
        (
            "spark.kubernetes.authenticate.driver.serviceAccountName",
            "admin",
        ),
        ("spark.kubernetes.authenticate.submission.oauthToken", "t"),
        ("spark.master", "local[*]"),
        ("spark.kubernetes.container.image", "evil:1"),
    ] {
        let spec = spec(json!({"sparkConf": {key: value}}));
        let decision = decide_at(&spec, None, &synced(None), 0);
        let status = &decision.status;
        assert_eq!(status.app_state.state, State::Failed, "{key}");
        assert_eq!(
            status.failure_reason,
            Some(FailureReason::RefusedSparkConf),
            "{key}"
        );
        assert!(
            status.submission_id.is_empty(),
            "no submission prepared for {key}"
        );
        let condition = status
            .conditions
            .iter()
            .find(|c| c.type_ == crate::sparkconf::CONDITION_TYPE)
            .unwrap_or_else(|| panic!("no condition for {key}"));
        assert!(condition.message.contains(key), "{}", condition.message);
        assert!(
            decision.actions.iter().any(|a| matches!(a,
                Action::RecordEvent { event_type: EventType::Warning, reason, .. }
                    if *reason == crate::sparkconf::REASON)),
            "a Warning event for {key}: {:?}",
            decision.actions
        );
        assert!(
            !decision
                .actions
                .iter()
                .any(|a| matches!(a, Action::Submit { .. } | Action::AdvanceEpoch { .. })),
            "{key}"
        );
    }
    // The application's own namespace is fine.
    let spec = spec(json!({"sparkConf": {"spark.kubernetes.namespace": "default"}}));
    let decision = decide_at(&spec, None, &synced(None), 0);
    assert_eq!(kinds(&decision.actions), ["Submit"]);
}

/// The submitter's 429 `QUOTA_EXCEEDED` for `submission_id`, quoting the API server.
fn over_quota(submission_id: &str) -> Observed {
    Observed {
        submission: Some(SubmissionOutcome::OverQuota {
            submission_id: submission_id.into(),
            message: QUOTA_MESSAGE.into(),
        }),
        ..synced(None)
    }
}

const QUOTA_MESSAGE: &str = "the namespace's resource quota has no room for the driver's pod; \
    submit again with the same submission id once it has: pods \"pi-driver\" is forbidden: \
    exceeded quota: compute, requested: pods=1, used: pods=1, limited: pods=1";

#[test]
fn a_quota_refusal_is_a_failed_submission_retried_until_on_submission_failure_retries_run_out() {
    // OnInfrastructureFailure retries it too: the cluster had no room, the application did
    // nothing wrong.
    let spec = spec(json!({"restartPolicy": {"type": "OnInfrastructureFailure",
        "onSubmissionFailureRetries": 1, "onSubmissionFailureRetryInterval": 10}}));
    let mut stored: Option<SparkApplicationStatus> = None;
    for (attempt, id, at) in [(1, "uid-1-1", 0), (2, "uid-1-2", 10)] {
        let sent = decide_at(&spec, stored.as_ref(), &synced(None), at);
        assert_eq!(
            sent.actions.last(),
            Some(&Action::Submit {
                submission_id: id.into()
            }),
            "attempt {attempt}: {:?}",
            sent.actions
        );
        let refused = decide_at(&spec, stored.as_ref(), &over_quota(id), at);
        let status = &refused.status;
        assert_eq!(status.app_state.state, State::SubmissionFailed);
        assert_eq!(status.failure_reason, Some(FailureReason::QuotaExceeded));
        assert_eq!(status.app_state.error_message, QUOTA_MESSAGE);
        assert_eq!(status.submission_attempts, attempt);
        assert_eq!(status.execution_attempts, 0, "no run was started");
        let warned = refused.actions.iter().any(|a| {
            matches!(a, Action::RecordEvent { event_type: EventType::Warning, reason, message }
                if *reason == reasons::SUBMISSION_FAILED && message.contains("exceeded quota: compute"))
        });
        assert!(
            warned,
            "a Warning event naming the quota: {:?}",
            refused.actions
        );
        stored = Some(refused.status);
        if attempt == 1 {
            // The retry waits the interval × attempts, as for a failed spark-submit.
            let waiting = decide_at(&spec, stored.as_ref(), &synced(None), 5);
            assert_eq!(kinds(&waiting.actions), ["Requeue(5s)"]);
        }
    }
    let failed = decide_at(&spec, stored.as_ref(), &synced(None), 1000);
    assert_eq!(failed.status.app_state.state, State::Failed);
    assert_eq!(
        failed.status.failure_reason,
        Some(FailureReason::QuotaExceeded)
    );
    assert_eq!(failed.status.app_state.error_message, QUOTA_MESSAGE);
    assert_eq!(
        kinds(&failed.actions),
        [
            "WriteStatus",
            "Event(SparkApplicationFailed)",
            "Requeue(0s)"
        ]
    );
}

/// A retryable refusal of `uid-1-1` (the submitter unavailable while it answered), after the
/// client's own retries.
fn lost_answer(driver: Option<ObservedDriver>) -> Observed {
    Observed {
        submission: Some(SubmissionOutcome::Rejected {
            submission_id: "uid-1-1".into(),
            message: "SUBMITTER_UNAVAILABLE: connection reset".into(),
            retryable: true,
        }),
        ..synced(driver)
    }
}

#[test]
fn a_lost_answer_whose_driver_is_already_cached_is_submitted_not_failed() {
    let spec = spec(json!({}));
    let running = driver(running(true));
    let decision = decide_at(&spec, None, &lost_answer(Some(running)), 1);
    assert_eq!(decision.status.app_state.state, State::Submitted);
    assert_eq!(decision.status.failure_reason, None);
    assert_eq!(decision.status.driver_info.pod_name, "pi-driver");
    assert_eq!(decision.status.spark_application_id, "spark-abc");
    assert_eq!(decision.status.execution_attempts, 1);
    assert_eq!(
        kinds(&decision.actions),
        [
            "WriteStatus",
            "Event(SparkApplicationSubmitted)",
            "Requeue(10s)"
        ]
    );

    // Without the driver in the cache, the attempt failed as before.
    let decision = decide_at(&spec, None, &lost_answer(None), 1);
    assert_eq!(decision.status.app_state.state, State::SubmissionFailed);
    assert_eq!(
        decision.status.failure_reason,
        Some(FailureReason::SubmitterUnavailable)
    );
}

#[test]
fn a_submission_failed_for_an_unavailable_submitter_follows_its_driver_once_cached_instead_of_retrying()
 {
    let spec = spec(json!({
        "restartPolicy": {"type": "OnFailure", "onSubmissionFailureRetries": 3,
                          "onSubmissionFailureRetryInterval": 5}
    }));
    let failed = decide_at(&spec, None, &lost_answer(None), 1).status;
    assert_eq!(failed.app_state.state, State::SubmissionFailed);

    // Before the retry is due, and after it: the driver of the lost answer is followed, not
    // replaced by a second submission (which would delete it first).
    for now in [2, 100] {
        let running = driver(running(true));
        let decision = decide_at(&spec, Some(&failed), &synced(Some(running)), now);
        assert_eq!(
            decision.status.app_state.state,
            State::Submitted,
            "at {now}"
        );
        assert_eq!(decision.status.submission_id, "uid-1-1");
        assert!(
            !decision
                .actions
                .iter()
                .any(|a| matches!(a, Action::Submit { .. } | Action::DeleteDriver { .. })),
            "{:?}",
            decision.actions
        );
    }

    // A driver of another submission, or one being deleted, is no proof: the retry goes on.
    for other in [
        ObservedDriver {
            submission_id: Some("uid-1-0".into()),
            ..driver(running(true))
        },
        ObservedDriver {
            terminating: true,
            ..driver(running(true))
        },
    ] {
        let decision = decide_at(&spec, Some(&failed), &synced(Some(other)), 2);
        assert_eq!(decision.status.app_state.state, State::SubmissionFailed);
    }

    // A refusal (bad arguments) made no driver whatever the cache holds.
    let refused = SparkApplicationStatus {
        failure_reason: Some(FailureReason::SubmissionRejected),
        ..failed.clone()
    };
    let running = driver(running(true));
    let decision = decide_at(&spec, Some(&refused), &synced(Some(running)), 2);
    assert_eq!(decision.status.app_state.state, State::SubmissionFailed);
}
