//! Every transition of the widely used operator's diagram, and ours, as one table.

use super::*;

/// One transition: a spec, a persisted state (changed by `tweak`), an observation, a time, and
/// the expected state and actions.
struct Case {
    name: &'static str,
    spec: Value,
    state: State,
    tweak: fn(&mut SparkApplicationStatus),
    observed: Observed,
    now: i64,
    expect_state: State,
    expect_actions: &'static [&'static str],
}

fn none(_: &mut SparkApplicationStatus) {}

fn terminated_at_0(s: &mut SparkApplicationStatus) {
    s.termination_time = t(0);
}

#[test]
fn transitions_of_the_state_diagram() {
    let cases = vec![
        Case {
            name: "SUBMITTED → RUNNING when the driver has run for RUNNING_SETTLE",
            spec: json!({}),
            state: State::Submitted,
            tweak: none,
            // Started at 5.
            observed: synced(Some(driver(running(true)))),
            now: 7,
            expect_state: State::Running,
            expect_actions: &["WriteStatus", "Event(SparkDriverRunning)"],
        },
        Case {
            name: "SUBMITTED stays while the driver is pending",
            spec: json!({}),
            state: State::Submitted,
            tweak: |s| s.spark_application_id = "spark-abc".into(),
            observed: synced(Some(driver(pending()))),
            now: 1,
            expect_state: State::Submitted,
            // Its events are read once DRIVER_STUCK_AFTER (5 s) has passed.
            expect_actions: &["Requeue(4s)"],
        },
        Case {
            name: "SUBMITTED → COMPLETED in one write when the driver finishes before it was seen running",
            spec: json!({}),
            state: State::Submitted,
            tweak: none,
            observed: synced(Some(driver(DriverPhase::Succeeded))),
            now: 1,
            expect_state: State::Completed,
            expect_actions: &[
                "WriteStatus",
                "Event(SparkDriverCompleted)",
                "Event(SparkApplicationCompleted)",
                "Requeue(0s)",
            ],
        },
        Case {
            name: "SUBMITTED → FAILED (Never) in one write when the driver fails",
            spec: json!({}),
            state: State::Submitted,
            tweak: none,
            observed: synced(Some(driver(failed(FailureReason::ApplicationError)))),
            now: 1,
            expect_state: State::Failed,
            expect_actions: &[
                "WriteStatus",
                "Event(SparkDriverFailed)",
                "Event(SparkApplicationFailed)",
                "Requeue(0s)",
            ],
        },
        Case {
            name: "RUNNING → COMPLETED (Never) in one write, with SUCCEEDING's event",
            spec: json!({}),
            state: State::Running,
            tweak: none,
            observed: synced(Some(driver(DriverPhase::Succeeded))),
            now: 100,
            expect_state: State::Completed,
            expect_actions: &[
                "WriteStatus",
                "Event(SparkDriverCompleted)",
                "Event(SparkApplicationCompleted)",
                "Requeue(0s)",
            ],
        },
        Case {
            name: "RUNNING → PENDING_RERUN (Always) in one write, deleting the driver",
            spec: json!({"restartPolicy": {"type": "Always"}}),
            state: State::Running,
            tweak: none,
            observed: synced(Some(driver(DriverPhase::Succeeded))),
            now: 100,
            expect_state: State::PendingRerun,
            expect_actions: &[
                "WriteStatus",
                "DeleteDriver",
                "Event(SparkDriverCompleted)",
                "Event(SparkApplicationPendingRerun)",
                "Requeue(0s)",
            ],
        },
        Case {
            name: "RUNNING → FAILED (Never) in one write, with FAILING's event",
            spec: json!({}),
            state: State::Running,
            tweak: none,
            observed: synced(Some(driver(failed(FailureReason::ApplicationError)))),
            now: 100,
            expect_state: State::Failed,
            expect_actions: &[
                "WriteStatus",
                "Event(SparkDriverFailed)",
                "Event(SparkApplicationFailed)",
                "Requeue(0s)",
            ],
        },
        Case {
            name: "RUNNING → FAILING (OnFailure) stays there for the retry interval",
            spec: on_failure(),
            state: State::Running,
            tweak: none,
            observed: synced(Some(driver(failed(FailureReason::ApplicationError)))),
            now: 100,
            expect_state: State::Failing,
            expect_actions: &["WriteStatus", "Event(SparkDriverFailed)", "Requeue(0s)"],
        },
        Case {
            name: "RUNNING → UNKNOWN when the node stops reporting",
            spec: json!({}),
            state: State::Running,
            tweak: none,
            observed: synced(Some(driver(DriverPhase::Unknown))),
            now: 100,
            expect_state: State::Unknown,
            expect_actions: &["WriteStatus", "Event(SparkDriverUnknown)"],
        },
        Case {
            name: "UNKNOWN → RUNNING when it reports again",
            spec: json!({}),
            state: State::Unknown,
            tweak: none,
            observed: synced(Some(driver(running(true)))),
            now: 100,
            expect_state: State::Running,
            expect_actions: &["WriteStatus", "Event(SparkDriverRunning)"],
        },
        Case {
            name: "SUCCEEDING → COMPLETED (Never)",
            spec: json!({}),
            state: State::Succeeding,
            tweak: terminated_at_0,
            observed: synced(Some(driver(DriverPhase::Succeeded))),
            now: 1,
            expect_state: State::Completed,
            expect_actions: &[
                "WriteStatus",
                "Event(SparkApplicationCompleted)",
                "Requeue(0s)",
            ],
        },
        Case {
            name: "SUCCEEDING → COMPLETED (OnFailure)",
            spec: on_failure(),
            state: State::Succeeding,
            tweak: terminated_at_0,
            observed: synced(Some(driver(DriverPhase::Succeeded))),
            now: 1,
            expect_state: State::Completed,
            expect_actions: &[
                "WriteStatus",
                "Event(SparkApplicationCompleted)",
                "Requeue(0s)",
            ],
        },
        Case {
            name: "SUCCEEDING → PENDING_RERUN (Always), deleting the driver",
            spec: json!({"restartPolicy": {"type": "Always"}}),
            state: State::Succeeding,
            tweak: terminated_at_0,
            observed: synced(Some(driver(DriverPhase::Succeeded))),
            now: 1,
            expect_state: State::PendingRerun,
            expect_actions: &[
                "WriteStatus",
                "DeleteDriver",
                "Event(SparkApplicationPendingRerun)",
                "Requeue(0s)",
            ],
        },
        Case {
            name: "FAILING → FAILED (Never)",
            spec: json!({}),
            state: State::Failing,
            tweak: terminated_at_0,
            observed: synced(Some(driver(failed(FailureReason::ApplicationError)))),
            now: 1,
            expect_state: State::Failed,
            expect_actions: &[
                "WriteStatus",
                "Event(SparkApplicationFailed)",
                "Requeue(0s)",
            ],
        },
        Case {
            name: "FAILING waits onFailureRetryInterval × attempts before a rerun",
            spec: on_failure(),
            state: State::Failing,
            tweak: terminated_at_0,
            observed: synced(Some(driver(failed(FailureReason::ApplicationError)))),
            now: 4,
            expect_state: State::Failing,
            expect_actions: &["Requeue(6s)"],
        },
        Case {
            name: "FAILING → PENDING_RERUN (OnFailure, retries left, interval passed)",
            spec: on_failure(),
            state: State::Failing,
            tweak: terminated_at_0,
            observed: synced(Some(driver(failed(FailureReason::ApplicationError)))),
            now: 10,
            expect_state: State::PendingRerun,
            expect_actions: &[
                "WriteStatus",
                "DeleteDriver",
                "Event(SparkApplicationPendingRerun)",
                "Requeue(0s)",
            ],
        },
        Case {
            name: "FAILING → FAILED (OnFailure, retries exhausted)",
            spec: on_failure(),
            state: State::Failing,
            tweak: |s| {
                s.termination_time = t(0);
                s.execution_attempts = 3;
            },
            observed: synced(Some(driver(failed(FailureReason::ApplicationError)))),
            now: 1000,
            expect_state: State::Failed,
            expect_actions: &[
                "WriteStatus",
                "Event(SparkApplicationFailed)",
                "Requeue(0s)",
            ],
        },
        Case {
            name: "FAILING → PENDING_RERUN (Always, no limit)",
            spec: json!({"restartPolicy": {"type": "Always", "onFailureRetryInterval": 1}}),
            state: State::Failing,
            tweak: |s| {
                s.termination_time = t(0);
                s.execution_attempts = 50;
            },
            observed: synced(None),
            now: 50,
            expect_state: State::PendingRerun,
            expect_actions: &[
                "WriteStatus",
                "Event(SparkApplicationPendingRerun)",
                "Requeue(0s)",
            ],
        },
        Case {
            name: "PENDING_RERUN waits for the old driver to be deleted",
            spec: on_failure(),
            state: State::PendingRerun,
            tweak: none,
            observed: synced(Some(driver(failed(FailureReason::ApplicationError)))),
            now: 20,
            expect_state: State::PendingRerun,
            expect_actions: &["DeleteDriver", "Requeue(2s)"],
        },
        Case {
            name: "PENDING_RERUN does not delete twice while the old driver terminates",
            spec: on_failure(),
            state: State::PendingRerun,
            tweak: none,
            observed: synced(Some(ObservedDriver {
                terminating: true,
                ..driver(failed(FailureReason::ApplicationError))
            })),
            now: 20,
            expect_state: State::PendingRerun,
            expect_actions: &["Requeue(2s)"],
        },
        Case {
            name: "PENDING_RERUN sends the next submission once the driver is gone",
            spec: on_failure(),
            state: State::PendingRerun,
            tweak: none,
            observed: synced(None),
            now: 20,
            expect_state: State::PendingRerun,
            expect_actions: &["Submit"],
        },
        Case {
            name: "SUBMISSION_FAILED waits onSubmissionFailureRetryInterval × attempts",
            spec: on_failure(),
            state: State::SubmissionFailed,
            tweak: |s| s.execution_attempts = 0,
            observed: synced(None),
            now: 15,
            expect_state: State::SubmissionFailed,
            expect_actions: &["Requeue(5s)"],
        },
        Case {
            name: "SUBMISSION_FAILED sends a retry once the interval passed",
            spec: on_failure(),
            state: State::SubmissionFailed,
            tweak: |s| s.execution_attempts = 0,
            observed: synced(None),
            now: 20,
            expect_state: State::SubmissionFailed,
            expect_actions: &["Submit"],
        },
        Case {
            name: "SUBMISSION_FAILED → FAILED (retries exhausted)",
            spec: on_failure(),
            state: State::SubmissionFailed,
            tweak: |s| s.submission_attempts = 3,
            observed: synced(None),
            now: 1000,
            expect_state: State::Failed,
            expect_actions: &[
                "WriteStatus",
                "Event(SparkApplicationFailed)",
                "Requeue(0s)",
            ],
        },
        Case {
            name: "SUBMISSION_FAILED → FAILED (Never)",
            spec: json!({}),
            state: State::SubmissionFailed,
            tweak: none,
            observed: synced(None),
            now: 1,
            expect_state: State::Failed,
            expect_actions: &[
                "WriteStatus",
                "Event(SparkApplicationFailed)",
                "Requeue(0s)",
            ],
        },
        Case {
            name: "INVALIDATING → PENDING_RERUN, deleting the driver",
            spec: json!({}),
            state: State::Invalidating,
            tweak: none,
            observed: synced(Some(driver(running(true)))),
            now: 1,
            expect_state: State::PendingRerun,
            expect_actions: &[
                "WriteStatus",
                "DeleteDriver",
                "Event(SparkApplicationPendingRerun)",
                "Requeue(0s)",
            ],
        },
        Case {
            name: "COMPLETED stays without a TTL",
            spec: json!({}),
            state: State::Completed,
            tweak: terminated_at_0,
            observed: synced(Some(driver(failed(FailureReason::Evicted)))),
            now: 1_000_000,
            expect_state: State::Completed,
            expect_actions: &[],
        },
        Case {
            name: "COMPLETED waits out its TTL",
            spec: json!({"timeToLiveSeconds": 60}),
            state: State::Completed,
            tweak: terminated_at_0,
            observed: synced(None),
            now: 45,
            expect_state: State::Completed,
            expect_actions: &["Requeue(15s)"],
        },
        Case {
            name: "COMPLETED is deleted when its TTL expires",
            spec: json!({"timeToLiveSeconds": 60}),
            state: State::Completed,
            tweak: terminated_at_0,
            observed: synced(None),
            now: 60,
            expect_state: State::Completed,
            expect_actions: &["DeleteApplication"],
        },
        Case {
            name: "FAILED is deleted when its TTL expires",
            spec: json!({"timeToLiveSeconds": 0}),
            state: State::Failed,
            tweak: terminated_at_0,
            observed: synced(None),
            now: 1,
            expect_state: State::Failed,
            expect_actions: &["DeleteApplication"],
        },
        Case {
            name: "a missing driver is tolerated during the grace period",
            spec: json!({}),
            state: State::Submitted,
            tweak: none,
            observed: synced(None),
            now: 3,
            expect_state: State::Submitted,
            expect_actions: &["Requeue(7s)"],
        },
        Case {
            name: "after the grace period a missing driver is read live",
            spec: json!({}),
            state: State::Submitted,
            tweak: none,
            observed: synced(None),
            now: 11,
            expect_state: State::Submitted,
            expect_actions: &["VerifyDriverAbsent"],
        },
        Case {
            name: "a driver confirmed absent fails the run",
            spec: json!({}),
            state: State::Submitted,
            tweak: none,
            observed: Observed {
                driver_absent_verified: true,
                ..synced(None)
            },
            now: 11,
            expect_state: State::Failed,
            expect_actions: &[
                "WriteStatus",
                "Event(SparkDriverNotFound)",
                "Event(SparkApplicationFailed)",
                "Requeue(0s)",
            ],
        },
        Case {
            name: "a running driver that vanished is read live at once",
            spec: json!({}),
            state: State::Running,
            tweak: none,
            observed: synced(None),
            now: 3,
            expect_state: State::Running,
            expect_actions: &["VerifyDriverAbsent"],
        },
        Case {
            name: "a pod of another submission is not the driver",
            spec: json!({}),
            state: State::Running,
            tweak: none,
            observed: synced(Some(ObservedDriver {
                submission_id: Some("other".into()),
                ..driver(running(true))
            })),
            now: 3,
            expect_state: State::Running,
            expect_actions: &["VerifyDriverAbsent"],
        },
    ];

    for case in cases {
        let spec = spec(case.spec);
        let mut status = run_status(&spec, case.state);
        (case.tweak)(&mut status);
        let decision = decide_at(&spec, Some(&status), &case.observed, case.now);
        assert_eq!(
            decision.status.app_state.state, case.expect_state,
            "{}: state",
            case.name
        );
        assert_eq!(
            kinds(&decision.actions),
            case.expect_actions,
            "{}: actions",
            case.name
        );
    }
}
