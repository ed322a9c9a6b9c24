//! Following the driver: timeouts, a failed driver's message, what holds a pending driver.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use super::*;

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

/// SUBMITTED as the submitter's answer writes it: with the Spark application id the driver
/// carries.
fn submitted_with_app_id(spec: &SparkApplicationSpec) -> SparkApplicationStatus {
    let mut status = run_status(spec, State::Submitted);
    status.spark_application_id = "spark-abc".into();
    status
}

#[test]
fn a_driver_that_just_started_is_written_running_once_it_has_run_a_while() {
    let spec = spec(json!({}));
    let status = submitted_with_app_id(&spec);
    let started = synced(Some(driver(running(true))));
    // Started at t=5: nothing is written for RUNNING_SETTLE, and the app is looked at again
    // when it has passed.
    let early = decide_at(&spec, Some(&status), &started, 6);
    assert_eq!(early.status.app_state.state, State::Submitted);
    assert_eq!(kinds(&early.actions), ["Requeue(1s)"]);
    let settled = decide_at(&spec, Some(&status), &started, 7);
    assert_eq!(settled.status.app_state.state, State::Running);
    assert_eq!(
        kinds(&settled.actions),
        ["WriteStatus", "Event(SparkDriverRunning)"]
    );
}

#[test]
fn a_driver_that_ends_while_settling_is_one_write_from_submitted_to_completed() {
    let spec = spec(json!({}));
    let status = submitted_with_app_id(&spec);
    let early = decide_at(
        &spec,
        Some(&status),
        &synced(Some(driver(running(true)))),
        5,
    );
    assert!(!kinds(&early.actions).contains(&"WriteStatus".to_owned()));
    let ended = decide_at(
        &spec,
        Some(&status),
        &synced(Some(driver(DriverPhase::Succeeded))),
        6,
    );
    assert_eq!(ended.status.app_state.state, State::Completed);
    assert_eq!(
        kinds(&ended.actions),
        [
            "WriteStatus",
            "Event(SparkDriverCompleted)",
            "Event(SparkApplicationCompleted)",
            "Requeue(0s)"
        ]
    );
}

#[test]
fn running_is_written_at_once_without_a_start_time_or_with_a_pending_condition_to_clear() {
    let spec = spec(json!({}));
    let status = run_status(&spec, State::Submitted);
    let no_start = synced(Some(driver(DriverPhase::Running {
        ready: true,
        started_at: None,
    })));
    let decision = decide_at(&spec, Some(&status), &no_start, 5);
    assert_eq!(decision.status.app_state.state, State::Running);

    let mut held = status.clone();
    held.conditions.push(Condition {
        type_: DRIVER_PENDING_CONDITION.to_owned(),
        status: "True".to_owned(),
        reason: "Unschedulable".to_owned(),
        message: "0/1 nodes are available".to_owned(),
        last_transition_time: Time(at(1)),
        observed_generation: None,
    });
    let decision = decide_at(&spec, Some(&held), &synced(Some(driver(running(true)))), 5);
    assert_eq!(decision.status.app_state.state, State::Running);
    assert!(decision.status.conditions.is_empty(), "the condition goes");

    // A run already RUNNING (or UNKNOWN) follows its driver at once.
    let unknown = run_status(&spec, State::Unknown);
    let decision = decide_at(
        &spec,
        Some(&unknown),
        &synced(Some(driver(running(true)))),
        5,
    );
    assert_eq!(decision.status.app_state.state, State::Running);
}
