//! Table-driven tests: every transition of the widely used operator's diagram, and ours.

use serde_json::{Value, json};

use super::*;
use crate::crd::ApplicationState;

const UID: &str = "uid-1";
const BASE: i64 = 1_750_000_000;

fn at(secs: i64) -> Timestamp {
    Timestamp::from_second(BASE + secs).unwrap()
}

fn t(secs: i64) -> Option<Time> {
    Some(Time(at(secs)))
}

fn spec(extra: Value) -> SparkApplicationSpec {
    let mut base = json!({
        "type": "Scala",
        "sparkVersion": "4.0.0",
        "mainClass": "Main",
        "mainApplicationFile": "local:///app.jar",
        "driver": {},
        "executor": {}
    });
    if let (Some(base), Some(extra)) = (base.as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            base.insert(k.clone(), v.clone());
        }
    }
    serde_json::from_value(base).unwrap()
}

/// The status of a run of `spec` submitted at t=0 as `uid-1-1`, in `state`.
fn run_status(spec: &SparkApplicationSpec, state: State) -> SparkApplicationStatus {
    SparkApplicationStatus {
        submission_id: format!("{UID}-1"),
        last_submission_attempt_time: t(0),
        driver_info: DriverInfo {
            pod_name: "pi-driver".into(),
            ..DriverInfo::default()
        },
        app_state: ApplicationState {
            state,
            error_message: String::new(),
        },
        execution_attempts: 1,
        submission_attempts: 1,
        spec_hash: Some(spec_hash(spec)),
        ..SparkApplicationStatus::default()
    }
}

fn driver(phase: DriverPhase) -> ObservedDriver {
    ObservedDriver {
        name: "pi-driver".into(),
        uid: "pod-uid".into(),
        submission_id: Some(format!("{UID}-1")),
        owned: true,
        terminating: false,
        spark_app_id: Some("spark-abc".into()),
        epoch: None,
        phase,
    }
}

fn failed(reason: FailureReason) -> DriverPhase {
    DriverPhase::Failed {
        exit_code: Some(1),
        reason,
        message: String::new(),
    }
}

fn running(ready: bool) -> DriverPhase {
    DriverPhase::Running {
        ready,
        started_at: Some(at(5)),
    }
}

fn pending() -> DriverPhase {
    DriverPhase::Pending {
        waiting_reason: None,
        blocked: None,
    }
}

fn synced(driver: Option<ObservedDriver>) -> Observed {
    Observed {
        cache_synced: true,
        driver,
        ..Observed::default()
    }
}

/// The submitter's acceptance of `submission_id` (driver `pi-driver`, Spark app `spark-123`), just
/// answered, with no driver in the cache yet.
fn answered(submission_id: &str) -> Observed {
    Observed {
        submission: Some(SubmissionOutcome::Accepted {
            submission_id: submission_id.into(),
            driver_pod_name: "pi-driver".into(),
            spark_app_id: "spark-123".into(),
        }),
        ..synced(None)
    }
}

fn decide_at(
    spec: &SparkApplicationSpec,
    status: Option<&SparkApplicationStatus>,
    observed: &Observed,
    now: i64,
) -> Decision {
    decide_with(spec, status, observed, now, &Settings::default())
}

fn decide_with(
    spec: &SparkApplicationSpec,
    status: Option<&SparkApplicationStatus>,
    observed: &Observed,
    now: i64,
    settings: &Settings,
) -> Decision {
    let view = AppView {
        name: "pi",
        namespace: "default",
        uid: UID,
        spec,
        status,
        settings,
    };
    decide(&view, observed, at(now))
}

/// Actions without payloads, for comparing whole action lists.
fn kinds(actions: &[Action]) -> Vec<String> {
    actions
        .iter()
        .map(|a| match a {
            Action::DeleteDriver { .. } => "DeleteDriver".to_owned(),
            Action::VerifyDriverAbsent { .. } => "VerifyDriverAbsent".to_owned(),
            Action::InspectPendingDriver { .. } => "InspectPendingDriver".to_owned(),
            Action::EnsureOwnedObjects => "EnsureOwnedObjects".to_owned(),
            Action::Submit { .. } => "Submit".to_owned(),
            Action::AdvanceEpoch { observed, run } => format!("AdvanceEpoch({observed}, {run})"),
            Action::WriteStatus => "WriteStatus".to_owned(),
            Action::RecordEvent { reason, .. } => format!("Event({reason})"),
            Action::DeleteApplication => "DeleteApplication".to_owned(),
            Action::Requeue(d) => format!("Requeue({}s)", d.as_secs()),
        })
        .collect()
}

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

fn on_failure() -> Value {
    json!({"restartPolicy": {"type": "OnFailure", "onFailureRetries": 2, "onFailureRetryInterval": 10,
        "onSubmissionFailureRetries": 2, "onSubmissionFailureRetryInterval": 20}})
}

fn terminated_at_0(s: &mut SparkApplicationStatus) {
    s.termination_time = t(0);
}

#[test]
fn transitions_of_the_state_diagram() {
    let cases = vec![
        Case {
            name: "SUBMITTED → RUNNING when the driver runs",
            spec: json!({}),
            state: State::Submitted,
            tweak: none,
            observed: synced(Some(driver(running(true)))),
            now: 1,
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

fn with_ui_service() -> Settings {
    let mut settings = Settings::default();
    settings.ui.ui_service = true;
    settings
}

fn ui_made() -> UiMade {
    UiMade {
        service: Some(("pi-ui-svc".into(), 4040, "10.0.0.7:4040".into())),
        ingress: None,
    }
}

#[test]
fn an_accepted_run_makes_its_ui_objects_before_anything_is_written_then_records_both_in_one_write()
{
    let spec = spec(json!({}));
    let settings = with_ui_service();
    let answer = answered("uid-1-1");
    let making = decide_with(&spec, None, &answer, 1, &settings);
    assert_eq!(
        making.actions,
        [Action::EnsureOwnedObjects],
        "no status write and no event until the objects have answered"
    );
    assert_eq!(making.status.app_state.state, State::Submitted);
    assert_eq!(
        making.status.spark_application_id, "spark-123",
        "the objects are made for the status as decided (an ingress URL may name the app id)"
    );

    let made = Observed {
        ui: Some(Ok(ui_made())),
        ..answer
    };
    let recording = decide_with(&spec, None, &made, 1, &settings);
    assert_eq!(
        kinds(&recording.actions),
        [
            "WriteStatus",
            "Event(SparkApplicationSubmitted)",
            "Requeue(10s)"
        ],
        "SUBMITTED and the UI record are one write"
    );
    let status = &recording.status;
    assert_eq!(status.app_state.state, State::Submitted);
    assert_eq!(status.submission_id, "uid-1-1");
    assert_eq!(status.ui_submission_id, "uid-1-1");
    assert_eq!(status.driver_info.web_ui_service_name, "pi-ui-svc");
    assert_eq!(status.driver_info.web_ui_address, "10.0.0.7:4040");
    assert_eq!(status.driver_info.web_ui_port, 4040);

    // The stored SUBMITTED makes nothing again.
    let again = decide_with(&spec, Some(status), &synced(None), 2, &settings);
    assert!(
        !again.actions.contains(&Action::EnsureOwnedObjects),
        "{:?}",
        again.actions
    );
}

#[test]
fn ui_objects_that_cannot_be_made_fail_the_accepted_run_in_its_first_write() {
    let spec = spec(json!({}));
    let settings = with_ui_service();
    let mut observed = answered("uid-1-1");
    observed.driver = Some(driver(pending()));
    observed.ui = Some(Err("the PodGroup CRD is not installed".into()));
    let decision = decide_with(&spec, None, &observed, 1, &settings);
    assert_eq!(
        kinds(&decision.actions),
        [
            "WriteStatus",
            "DeleteDriver",
            "Event(SparkApplicationSubmitted)",
            "Event(SparkApplicationObjectsFailed)",
            "Requeue(0s)"
        ]
    );
    assert_eq!(decision.status.app_state.state, State::Failing);
    assert_eq!(
        decision.status.failure_reason,
        Some(FailureReason::UnsupportedSpec)
    );
}

#[test]
fn a_status_change_is_not_held_for_the_ui_objects_when_something_else_must_follow_it() {
    // A run recorded without its UI (an earlier operator version): its executors changed and
    // its driver is missing from the cache, so the live read follows the stored change.
    let spec = spec(json!({}));
    let settings = with_ui_service();
    let status = run_status(&spec, State::Running);
    let mut observed = synced(None);
    observed.executors = vec![executor(
        "pi-exec-1",
        ExecutorState::Running,
        &format!("{UID}-1"),
    )];
    let decision = decide_with(&spec, Some(&status), &observed, 30, &settings);
    assert_eq!(
        kinds(&decision.actions),
        [
            "WriteStatus",
            "VerifyDriverAbsent",
            "EnsureOwnedObjects",
            "Event(SparkExecutorRunning)"
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
fn nothing_is_decided_before_the_cache_has_synced() {
    let spec = spec(json!({}));
    for state in [
        State::New,
        State::Submitted,
        State::Running,
        State::Completed,
    ] {
        let status = run_status(&spec, state);
        let decision = decide_at(&spec, Some(&status), &Observed::default(), 1000);
        assert_eq!(decision.status, status);
        assert_eq!(kinds(&decision.actions), ["Requeue(1s)"]);
    }
}

#[test]
fn driver_start_timeout_fails_the_run_as_an_infrastructure_failure() {
    let spec = spec(json!({"applicationTimeoutConfig": {"driverStartTimeoutMillis": 60000}}));
    let status = run_status(&spec, State::Submitted);
    let waiting = decide_at(&spec, Some(&status), &synced(Some(driver(pending()))), 30);
    // Pending past DRIVER_STUCK_AFTER: its events are read for what holds it.
    assert_eq!(
        kinds(&waiting.actions),
        ["WriteStatus", "InspectPendingDriver", "Requeue(30s)"]
    );

    let late = decide_at(&spec, Some(&status), &synced(Some(driver(pending()))), 60);
    // Without retries (policy Never), FAILED in the same write.
    assert_eq!(late.status.app_state.state, State::Failed);
    assert_eq!(
        late.status.failure_reason,
        Some(FailureReason::DriverStartTimeout)
    );
    assert_eq!(
        kinds(&late.actions),
        [
            "WriteStatus",
            "DeleteDriver",
            "Event(SparkDriverStartTimedOut)",
            "Event(SparkApplicationFailed)",
            "Requeue(0s)"
        ]
    );

    let image = synced(Some(driver(DriverPhase::Pending {
        waiting_reason: Some("ImagePullBackOff".into()),
        blocked: None,
    })));
    let late = decide_at(&spec, Some(&status), &image, 61);
    assert_eq!(
        late.status.failure_reason,
        Some(FailureReason::ImagePullFailure)
    );
    assert!(
        late.status
            .app_state
            .error_message
            .contains("ImagePullBackOff")
    );
}

#[test]
fn driver_ready_timeout_counts_from_the_container_start() {
    let spec = spec(json!({"applicationTimeoutConfig": {"driverReadyTimeoutMillis": 30000}}));
    let status = run_status(&spec, State::Running);
    let waiting = decide_at(
        &spec,
        Some(&status),
        &synced(Some(driver(running(false)))),
        20,
    );
    assert_eq!(kinds(&waiting.actions), ["WriteStatus", "Requeue(15s)"]);
    let ready = decide_at(
        &spec,
        Some(&status),
        &synced(Some(driver(running(true)))),
        500,
    );
    assert_eq!(ready.status.app_state.state, State::Running);
    let late = decide_at(
        &spec,
        Some(&status),
        &synced(Some(driver(running(false)))),
        35,
    );
    assert_eq!(late.status.app_state.state, State::Failed);
    assert_eq!(
        late.status.failure_reason,
        Some(FailureReason::DriverReadyTimeout)
    );
    assert_eq!(kinds(&late.actions)[..2], ["WriteStatus", "DeleteDriver"]);
}

#[test]
fn without_timeouts_a_pending_driver_waits_forever() {
    let spec = spec(json!({}));
    let status = run_status(&spec, State::Submitted);
    let decision = decide_at(
        &spec,
        Some(&status),
        &synced(Some(driver(pending()))),
        1_000_000,
    );
    assert_eq!(decision.status.app_state.state, State::Submitted);
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
        2,
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
fn retry_delay_is_linear_in_attempts() {
    assert_eq!(retry_delay(Some(10), 0), Duration::from_secs(10));
    assert_eq!(retry_delay(Some(10), 3), Duration::from_secs(30));
    assert_eq!(retry_delay(None, 2), Duration::from_secs(10));
    assert_eq!(
        retry_delay(Some(i64::MAX), i32::MAX),
        Duration::from_secs(i64::MAX as u64)
    );
}

#[test]
fn failed_driver_message_has_exit_code_and_reason() {
    let spec = spec(json!({}));
    let status = run_status(&spec, State::Running);
    let observed = synced(Some(driver(DriverPhase::Failed {
        exit_code: Some(137),
        reason: FailureReason::ApplicationError,
        message: "OOMKilled".into(),
    })));
    let decision = decide_at(&spec, Some(&status), &observed, 10);
    assert_eq!(
        decision.status.app_state.error_message,
        "driver container failed with ExitCode: 137, Reason: ApplicationError, OOMKilled"
    );
    assert_eq!(decision.status.termination_time, t(10));
}

mod recovery;

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

fn blocked(reason: &str, message: &str) -> PendingReason {
    PendingReason {
        reason: reason.into(),
        message: message.into(),
    }
}

fn pending_condition(status: &SparkApplicationStatus) -> Option<(&str, &str)> {
    status
        .conditions
        .iter()
        .find(|c| c.type_ == DRIVER_PENDING_CONDITION)
        .map(|c| (c.reason.as_str(), c.message.as_str()))
}

#[test]
fn a_driver_the_pod_says_is_held_shows_why_on_the_application_once() {
    let spec = spec(json!({}));
    let status = run_status(&spec, State::Submitted);
    let held = DriverPhase::Pending {
        waiting_reason: None,
        blocked: Some(blocked("Unschedulable", "0/3 nodes are available")),
    };
    let first = decide_at(&spec, Some(&status), &synced(Some(driver(held.clone()))), 1);
    assert_eq!(
        pending_condition(&first.status),
        Some(("Unschedulable", "0/3 nodes are available"))
    );
    assert_eq!(
        first.status.app_state.error_message,
        "Unschedulable: 0/3 nodes are available"
    );
    assert_eq!(first.status.app_state.state, State::Submitted);
    let warned: Vec<_> = first
        .actions
        .iter()
        .filter(|a| {
            matches!(a, Action::RecordEvent { event_type: EventType::Warning, reason, .. }
                if *reason == reasons::DRIVER_PENDING)
        })
        .collect();
    assert_eq!(warned.len(), 1, "{:?}", first.actions);
    // The same reason again: nothing new to say.
    let again = decide_at(&spec, Some(&first.status), &synced(Some(driver(held))), 2);
    assert!(kinds(&again.actions).is_empty(), "{:?}", again.actions);
    // It runs: the condition and its message go.
    let runs = decide_at(
        &spec,
        Some(&first.status),
        &synced(Some(driver(running(true)))),
        3,
    );
    assert_eq!(runs.status.app_state.state, State::Running);
    assert_eq!(pending_condition(&runs.status), None);
    assert!(runs.status.app_state.error_message.is_empty());
}

#[test]
fn a_driver_pending_without_a_reason_on_the_pod_has_its_events_read_after_a_while() {
    let spec = spec(json!({}));
    let mut status = run_status(&spec, State::Submitted);
    status.spark_application_id = "spark-abc".into();
    let early = decide_at(&spec, Some(&status), &synced(Some(driver(pending()))), 1);
    assert_eq!(kinds(&early.actions), ["Requeue(4s)"]);
    let late = decide_at(&spec, Some(&status), &synced(Some(driver(pending()))), 6);
    assert_eq!(kinds(&late.actions), ["InspectPendingDriver"]);
    // A Warning event names what holds it.
    let mut observed = synced(Some(driver(pending())));
    observed.driver_warning = Some(Some(blocked(
        "FailedMount",
        "MountVolume.SetUp failed for volume \"conf\" : configmap \"missing\" not found",
    )));
    let found = decide_at(&spec, Some(&status), &observed, 6);
    assert_eq!(
        kinds(&found.actions),
        ["WriteStatus", "Event(SparkDriverPending)", "Requeue(15s)"]
    );
    assert_eq!(pending_condition(&found.status).unwrap().0, "FailedMount");
    // None: look again later, without a write.
    observed.driver_warning = Some(None);
    let none = decide_at(&spec, Some(&status), &observed, 6);
    assert_eq!(kinds(&none.actions), ["Requeue(15s)"]);
}

fn executor(name: &str, state: ExecutorState, submission: &str) -> ObservedExecutor {
    ObservedExecutor {
        name: name.into(),
        submission_id: Some(submission.into()),
        state,
        exit_code: (state == ExecutorState::Failed).then_some(137),
        reason: (state == ExecutorState::Failed).then(|| "OOMKilled".into()),
        message: None,
    }
}

#[test]
fn executors_of_the_current_run_are_tracked_with_counts_and_an_event_per_change() {
    let spec = spec(json!({}));
    let mut status = run_status(&spec, State::Running);
    status.spark_application_id = "spark-abc".into();
    let current = format!("{UID}-1");
    let mut observed = synced(Some(driver(running(true))));
    observed.executors = vec![
        executor("pi-exec-1", ExecutorState::Running, &current),
        executor("pi-exec-2", ExecutorState::Failed, &current),
        // A previous run's executor is not this run's.
        executor("pi-exec-old", ExecutorState::Running, &format!("{UID}-0")),
    ];
    let first = decide_at(&spec, Some(&status), &observed, 10);
    let states: Vec<_> = first.status.executor_state.iter().collect();
    assert_eq!(
        states,
        [
            (&"pi-exec-1".to_owned(), &ExecutorState::Running),
            (&"pi-exec-2".to_owned(), &ExecutorState::Failed)
        ]
    );
    let counts = first.status.executor_counts.unwrap();
    assert_eq!((counts.running, counts.failed), (1, 1));
    assert_eq!(
        kinds(&first.actions),
        [
            "WriteStatus",
            "Event(SparkExecutorRunning)",
            "Event(SparkExecutorFailed)"
        ]
    );
    let failed_note = first
        .actions
        .iter()
        .find_map(|a| match a {
            Action::RecordEvent {
                reason, message, ..
            } if *reason == reasons::EXECUTOR_FAILED => Some(message.clone()),
            _ => None,
        })
        .unwrap();
    assert!(
        failed_note.contains("ExitCode: 137, Reason: OOMKilled"),
        "{failed_note}"
    );
    assert!(
        failed_note.contains("0 pending, 1 running, 0 completed, 1 failed"),
        "{failed_note}"
    );

    // The driver deleted its executors when it finished: they keep their last known state.
    let mut gone = synced(Some(driver(DriverPhase::Succeeded)));
    gone.executors.clear();
    let done = decide_at(&spec, Some(&first.status), &gone, 12);
    assert_eq!(done.status.executor_state, first.status.executor_state);
    assert_eq!(done.status.executor_counts, first.status.executor_counts);
    assert!(
        !kinds(&done.actions).iter().any(|k| k.contains("Executor")),
        "{:?}",
        done.actions
    );
}

#[test]
fn suspend_deletes_the_driver_then_resume_submits_a_new_run() {
    let suspended_spec = spec(json!({"suspend": true}));
    let mut status = run_status(&suspended_spec, State::Running);
    status.spark_application_id = "spark-abc".into();
    // Set while running: SUSPENDING.
    let first = decide_at(
        &suspended_spec,
        Some(&status),
        &synced(Some(driver(running(true)))),
        10,
    );
    assert_eq!(first.status.app_state.state, State::Suspending);
    assert!(kinds(&first.actions).contains(&"Event(SparkApplicationSuspending)".to_owned()));
    // The driver is deleted; while it goes the app stays SUSPENDING.
    let deleting = decide_at(
        &suspended_spec,
        Some(&first.status),
        &synced(Some(driver(running(true)))),
        11,
    );
    assert_eq!(kinds(&deleting.actions), ["DeleteDriver", "Requeue(2s)"]);
    // Gone: SUSPENDED, the run's status cleared.
    let gone = decide_at(&suspended_spec, Some(&first.status), &synced(None), 12);
    assert_eq!(gone.status.app_state.state, State::Suspended);
    assert!(gone.status.driver_info.pod_name.is_empty());
    assert!(kinds(&gone.actions).contains(&"Event(SparkApplicationSuspended)".to_owned()));
    // Nothing happens while suspend stays set.
    let still = decide_at(&suspended_spec, Some(&gone.status), &synced(None), 100);
    assert!(kinds(&still.actions).is_empty(), "{:?}", still.actions);
    // Cleared: RESUMING, then a new submission id is sent.
    let resumed_spec = spec(json!({"suspend": false}));
    let resuming = decide_at(&resumed_spec, Some(&gone.status), &synced(None), 101);
    assert_eq!(resuming.status.app_state.state, State::Resuming);
    assert_eq!(resuming.status.execution_attempts, 0);
    let sent = decide_at(&resumed_spec, Some(&resuming.status), &synced(None), 101);
    assert_eq!(
        sent.actions,
        [Action::Submit {
            submission_id: format!("{UID}-2")
        }]
    );
    // Terminal applications are not suspended.
    let done = run_status(&suspended_spec, State::Completed);
    let kept = decide_at(&suspended_spec, Some(&done), &synced(None), 5);
    assert_eq!(kept.status.app_state.state, State::Completed);
}
