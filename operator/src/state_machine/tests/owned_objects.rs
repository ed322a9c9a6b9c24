//! The run's owned objects: what the driver depends on before it is submitted, the UI objects
//! before SUBMITTED is written, and what a refusal of each does.

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
        refused: Vec::new(),
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
        [Action::EnsureUiObjects],
        "no status write and no event until the objects have answered"
    );
    assert_eq!(making.status.app_state.state, State::Submitted);
    assert_eq!(
        making.status.spark_application_id, "spark-123",
        "the objects are made for the status as decided (an ingress URL may name the app id)"
    );

    let made = Observed {
        ui: Some(ui_made()),
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
        !again.actions.contains(&Action::EnsureUiObjects),
        "{:?}",
        again.actions
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
            "EnsureUiObjects",
            "Event(SparkExecutorRunning)"
        ]
    );
}

fn refused(object: &str, required: bool) -> RefusedObject {
    RefusedObject {
        object: object.into(),
        message: "forbidden".into(),
        required,
    }
}

fn volcano() -> SparkApplicationSpec {
    spec(json!({"batchScheduler": "volcano"}))
}

#[test]
fn what_the_driver_depends_on_is_made_before_it_is_submitted_and_nothing_is_stored_before() {
    let spec = volcano();
    let first = decide_at(&spec, None, &synced(None), 0);
    assert_eq!(first.actions, [Action::EnsureDependencies]);
    assert_eq!(
        first.status,
        SparkApplicationStatus::default(),
        "nothing written"
    );

    let made = Observed {
        dependencies: Some(Ok(())),
        ..synced(None)
    };
    let second = decide_at(&spec, None, &made, 0);
    assert_eq!(
        second.actions,
        [Action::Submit {
            submission_id: "uid-1-1".into()
        }]
    );

    let answered = Observed {
        dependencies: Some(Ok(())),
        ..answered("uid-1-1")
    };
    let third = decide_at(&spec, None, &answered, 0);
    assert_eq!(
        kinds(&third.actions),
        [
            "WriteStatus",
            "Event(SparkApplicationSubmitted)",
            "Requeue(10s)"
        ],
        "the same writes as an application without dependencies"
    );

    // Without any, the submission goes at once.
    let yunikorn = super::spec(json!({"batchScheduler": "yunikorn"}));
    let plain = decide_at(&yunikorn, None, &synced(None), 0);
    assert_eq!(kinds(&plain.actions), ["Submit"]);
}

#[test]
fn a_refused_dependency_fails_the_submission_without_a_driver() {
    let spec = volcano();
    let mut observed = Observed {
        dependencies: Some(Err(refused("PodGroup spark-pi-pg", true))),
        ..synced(None)
    };
    // A predecessor may have sent this id and died before recording the answer: its driver, if
    // there is one, is stopped before the refusal is written.
    let stopping = decide_at(&spec, None, &observed, 0);
    assert_eq!(
        stopping.actions,
        [Action::StopDriver {
            name: "pi-driver".into(),
            submission_id: "uid-1-1".into()
        }]
    );
    assert_eq!(stopping.status, SparkApplicationStatus::default());
    observed.driver_stopped = true;
    let decision = decide_at(&spec, None, &observed, 0);
    assert_eq!(
        kinds(&decision.actions),
        [
            "WriteStatus",
            "Event(SparkApplicationObjectsFailed)",
            "Event(SparkApplicationSubmissionFailed)",
            "Requeue(0s)"
        ],
        "no Submit"
    );
    let status = &decision.status;
    assert_eq!(status.app_state.state, State::SubmissionFailed);
    assert_eq!(
        status.failure_reason,
        Some(FailureReason::OwnedObjectRefused)
    );
    assert!(
        status
            .app_state
            .error_message
            .starts_with("PodGroup spark-pi-pg: forbidden"),
        "{}",
        status.app_state.error_message
    );
    assert_eq!(
        (status.submission_attempts, status.execution_attempts),
        (1, 0)
    );

    // `Never`: FAILED, saying why.
    let failed = decide_at(&spec, Some(status), &synced(None), 1);
    assert_eq!(failed.status.app_state.state, State::Failed);
    assert_eq!(
        failed.status.app_state.error_message,
        status.app_state.error_message
    );
}

#[test]
fn a_refused_dependency_is_retried_as_a_submission_under_on_submission_failure_retries() {
    let spec = spec(
        json!({"batchScheduler": "volcano", "restartPolicy": {"type": "OnFailure",
        "onSubmissionFailureRetries": 1, "onSubmissionFailureRetryInterval": 20}}),
    );
    let observed = Observed {
        dependencies: Some(Err(refused("PodGroup spark-pi-pg", true))),
        driver_stopped: true,
        ..synced(None)
    };
    let first = decide_at(&spec, None, &observed, 0).status;
    let waiting = decide_at(&spec, Some(&first), &synced(None), 5);
    assert_eq!(kinds(&waiting.actions), ["Requeue(15s)"]);
    let due = decide_at(&spec, Some(&first), &synced(None), 20);
    assert_eq!(due.actions, [Action::EnsureDependencies]);
    let second = decide_at(&spec, Some(&first), &observed, 20).status;
    assert_eq!(second.submission_attempts, 2);
    let last = decide_at(&spec, Some(&second), &synced(None), 100);
    assert_eq!(last.status.app_state.state, State::Failed);
}

#[test]
fn a_stored_pending_submission_makes_its_dependencies_before_it_is_sent_again() {
    let spec = volcano();
    let pending = SparkApplicationStatus {
        submission_id: "uid-1-1".into(),
        submission_pending: true,
        submission_attempts: 1,
        spec_hash: Some(spec_hash(&spec)),
        ..SparkApplicationStatus::default()
    };
    let asking = decide_at(&spec, Some(&pending), &synced(None), 1);
    assert_eq!(asking.actions, [Action::EnsureDependencies]);
    let made = Observed {
        dependencies: Some(Ok(())),
        ..synced(None)
    };
    let sending = decide_at(&spec, Some(&pending), &made, 1);
    assert_eq!(
        sending.actions,
        [Action::Submit {
            submission_id: "uid-1-1".into()
        }]
    );
}

fn exposed() -> SparkApplicationSpec {
    spec(json!({"driverIngressOptions": [{"servicePort": 4040,
        "ingressURLFormat": "{{$appName}}.example.com"}]}))
}

#[test]
fn an_ingress_the_spec_asks_for_that_is_refused_fails_the_run_and_stops_its_driver_before_failed() {
    let spec = exposed();
    // The driver is not in the cache yet: it was created a moment ago.
    let observed = Observed {
        ui: Some(UiMade {
            refused: vec![refused("Ingress pi-ing-4040", true)],
            ..UiMade::default()
        }),
        ..answered("uid-1-1")
    };
    let failing = decide_at(&spec, None, &observed, 1);
    assert_eq!(
        kinds(&failing.actions),
        [
            "WriteStatus",
            "StopDriver",
            "Event(SparkApplicationSubmitted)",
            "Event(SparkApplicationObjectsFailed)",
            "Requeue(0s)"
        ]
    );
    assert!(failing.actions.contains(&Action::StopDriver {
        name: "pi-driver".into(),
        submission_id: "uid-1-1".into()
    }));
    let status = &failing.status;
    assert_eq!(status.app_state.state, State::Failing, "not FAILED yet");
    assert_eq!(
        status.failure_reason,
        Some(FailureReason::OwnedObjectRefused)
    );
    assert!(
        status
            .app_state
            .error_message
            .contains("Ingress pi-ing-4040"),
        "{}",
        status.app_state.error_message
    );

    // A later reconcile (the operator restarted) stops it again before anything else.
    let again = decide_at(&spec, Some(status), &synced(None), 2);
    assert_eq!(kinds(&again.actions), ["StopDriver", "Requeue(0s)"]);
    assert_eq!(again.status, *status);

    // Stopped: FAILED (`Never`).
    let stopped = Observed {
        driver_stopped: true,
        ..synced(None)
    };
    let failed = decide_at(&spec, Some(status), &stopped, 2);
    assert_eq!(failed.status.app_state.state, State::Failed);
    assert_eq!(
        kinds(&failed.actions),
        [
            "WriteStatus",
            "Event(SparkApplicationFailed)",
            "Requeue(0s)"
        ]
    );
}

#[test]
fn a_refused_ingress_run_under_on_failure_is_rerun_after_its_driver_is_stopped() {
    let spec = spec(json!({"driverIngressOptions": [{"servicePort": 4040}],
        "restartPolicy": {"type": "OnFailure", "onFailureRetries": 1, "onFailureRetryInterval": 10}}));
    let observed = Observed {
        ui: Some(UiMade {
            refused: vec![refused("Service pi-driver-4040", true)],
            ..UiMade::default()
        }),
        ..answered("uid-1-1")
    };
    let failing = decide_at(&spec, None, &observed, 0).status;
    let stopped = Observed {
        driver_stopped: true,
        ..synced(None)
    };
    let waiting = decide_at(&spec, Some(&failing), &stopped, 5);
    assert_eq!(kinds(&waiting.actions), ["Requeue(5s)"]);
    let rerun = decide_at(&spec, Some(&failing), &stopped, 10);
    assert_eq!(rerun.status.app_state.state, State::PendingRerun);
}

#[test]
fn ui_objects_the_operator_adds_that_are_refused_leave_the_run_going_with_a_condition() {
    let spec = spec(json!({}));
    let settings = with_ui_service();
    let observed = Observed {
        ui: Some(UiMade {
            refused: vec![refused("Service pi-ui-svc", false)],
            ..UiMade::default()
        }),
        ..answered("uid-1-1")
    };
    let decision = decide_with(&spec, None, &observed, 1, &settings);
    assert_eq!(
        kinds(&decision.actions),
        [
            "WriteStatus",
            "Event(SparkApplicationSubmitted)",
            "Event(SparkApplicationObjectsFailed)",
            "Requeue(10s)"
        ],
        "no StopDriver"
    );
    let status = &decision.status;
    assert_eq!(status.app_state.state, State::Submitted);
    assert_eq!(status.ui_submission_id, "uid-1-1");
    assert!(status.driver_info.web_ui_service_name.is_empty());
    let condition = status
        .conditions
        .iter()
        .find(|c| c.type_ == WEB_UI_CONDITION)
        .expect("the warning condition");
    assert_eq!(condition.message, "Service pi-ui-svc: forbidden");

    // The next run that gets its UI clears it.
    let mut rerun = status.clone();
    rerun.app_state.state = State::PendingRerun;
    let next = Observed {
        ui: Some(ui_made()),
        ..answered("uid-1-2")
    };
    let cleared = decide_with(&spec, Some(&rerun), &next, 50, &settings).status;
    assert_eq!(cleared.ui_submission_id, "uid-1-2");
    assert!(
        cleared
            .conditions
            .iter()
            .all(|c| c.type_ != WEB_UI_CONDITION),
        "{:?}",
        cleared.conditions
    );
}
