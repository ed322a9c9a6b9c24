//! The run's owned objects: made before SUBMITTED is written, recorded with it.

use super::*;

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
