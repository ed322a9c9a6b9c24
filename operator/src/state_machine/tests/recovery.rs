//! Fenced restarts in the state machine: fence → record the epoch → delete older drivers →
//! submit, heartbeat staleness, and the feature switched off.

use super::*;
use crate::recovery::RecoverySettings;

fn recovery_spec(retries: i32) -> SparkApplicationSpec {
    spec(json!({
        "restartPolicy": {
            "type": "OnFailure",
            "onFailureRetries": retries,
            "onFailureRetryInterval": 1,
            "recovery": {"heartbeatTimeoutSeconds": 10}
        }
    }))
}

fn settings() -> Settings {
    Settings {
        recovery: Some(RecoverySettings::default()),
        ..Settings::default()
    }
}

fn fenced(epoch: u64, latest: Option<(u64, u64)>) -> Observed {
    Observed {
        fence: Some(FenceOutcome { epoch, latest }),
        ..synced(None)
    }
}

fn epoch_driver(name: &str, epoch: u64, submission: &str, phase: DriverPhase) -> ObservedDriver {
    ObservedDriver {
        name: name.into(),
        uid: format!("{name}-uid"),
        submission_id: Some(submission.into()),
        epoch: Some(epoch),
        ..driver(phase)
    }
}

/// A run of `spec` under `epoch`, in `state`.
fn recovery_run(spec: &SparkApplicationSpec, state: State, epoch: u64) -> SparkApplicationStatus {
    let mut status = run_status(spec, state);
    status.driver_info.pod_name = format!("pi-driver-e{epoch}");
    // What a running driver's label reported.
    status.spark_application_id = "spark-abc".into();
    status.recovery_status = Some(RecoveryStatus {
        epoch,
        run: FIRST_RUN,
        run_start_epoch: Some(1),
        restored_from_epoch: None,
        restored_seq: None,
    });
    status
}

fn events(decision: &Decision) -> Vec<&'static str> {
    decision
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::RecordEvent { reason, .. } => Some(*reason),
            _ => None,
        })
        .collect()
}

#[test]
fn the_first_submission_fences_before_anything_is_written() {
    let spec = recovery_spec(2);
    let settings = settings();
    let first = decide_with(&spec, None, &synced(None), 0, &settings);
    assert_eq!(
        first.actions,
        vec![Action::AdvanceEpoch {
            observed: 0,
            run: FIRST_RUN
        }]
    );
    assert_eq!(first.status, SparkApplicationStatus::default());

    let answered = decide_with(&spec, None, &fenced(1, None), 0, &settings);
    let status = &answered.status;
    assert_eq!(status.recovery_status.as_ref().map(|r| r.epoch), Some(1));
    assert_eq!(status.driver_info.pod_name, "pi-driver-e1");
    assert!(status.submission_pending);
    assert_eq!(
        kinds(&answered.actions),
        [
            "WriteStatus",
            "Event(SparkApplicationEpochAdvanced)",
            "Requeue(0s)"
        ]
    );
    // No warning on a first run without a marker: there was nothing to lose.
    assert!(!events(&answered).contains(&reasons::RESTART_FROM_ZERO));

    let persisted = answered.status.clone();
    let submit = decide_with(&spec, Some(&persisted), &synced(None), 0, &settings);
    assert_eq!(
        submit.actions,
        vec![Action::Submit {
            submission_id: persisted.submission_id.clone()
        }]
    );
}

#[test]
fn a_crash_before_the_epoch_is_recorded_fences_the_same_observed_epoch_again() {
    let spec = recovery_spec(2);
    let settings = settings();
    let mut status = recovery_run(&spec, State::PendingRerun, 3);
    status.submission_pending = false;
    // The fence ran, the operator died before writing the status: the next decision asks the
    // store about epoch 3 again, which answers with the epoch already fenced (not a new one).
    for _ in 0..2 {
        let d = decide_with(&spec, Some(&status), &synced(None), 50, &settings);
        assert_eq!(
            d.actions,
            vec![Action::AdvanceEpoch {
                observed: 3,
                run: FIRST_RUN
            }]
        );
    }
}

#[test]
fn a_failed_driver_is_kept_until_the_fence_then_deleted_before_its_successor_is_submitted() {
    let spec = recovery_spec(2);
    let settings = settings();
    let old_id = format!("{UID}-1");
    let old = epoch_driver(
        "pi-driver-e1",
        1,
        &old_id,
        failed(FailureReason::ApplicationError),
    );

    // RUNNING → FAILING: the driver stays.
    let running = recovery_run(&spec, State::Running, 1);
    let failing = decide_with(
        &spec,
        Some(&running),
        &synced(Some(old.clone())),
        20,
        &settings,
    );
    assert_eq!(failing.status.app_state.state, State::Failing);
    assert!(!kinds(&failing.actions).contains(&"DeleteDriver".to_owned()));

    // FAILING → PENDING_RERUN after the interval: still no deletion (the fence comes first).
    let rerun = decide_with(
        &spec,
        Some(&failing.status),
        &synced(Some(old.clone())),
        40,
        &settings,
    );
    assert_eq!(rerun.status.app_state.state, State::PendingRerun);
    assert!(!kinds(&rerun.actions).contains(&"DeleteDriver".to_owned()));

    // PENDING_RERUN: fence epoch 1.
    let ask = decide_with(
        &spec,
        Some(&rerun.status),
        &synced(Some(old.clone())),
        40,
        &settings,
    );
    assert_eq!(
        ask.actions,
        vec![Action::AdvanceEpoch {
            observed: 1,
            run: FIRST_RUN
        }]
    );

    // The fence answered epoch 2 with a marker committed under epoch 1: record it.
    let observed = Observed {
        driver: Some(old.clone()),
        ..fenced(2, Some((1, 3)))
    };
    let record = decide_with(&spec, Some(&rerun.status), &observed, 40, &settings);
    let recovery = record.status.recovery_status.clone().unwrap();
    assert_eq!(recovery.epoch, 2);
    assert_eq!(recovery.restored_from_epoch, Some(1));
    assert_eq!(recovery.restored_seq, Some(3));
    assert_eq!(record.status.driver_info.pod_name, "pi-driver-e2");
    assert_ne!(record.status.submission_id, old_id);
    assert!(!kinds(&record.actions).contains(&"DeleteDriver".to_owned()));
    assert!(!kinds(&record.actions).contains(&"Submit".to_owned()));
    assert!(events(&record).contains(&reasons::EPOCH_ADVANCED));
    assert!(!events(&record).contains(&reasons::RESTART_FROM_ZERO));

    // Recorded: the old driver is now among the app's other drivers; delete it, then submit.
    let observed = Observed {
        other_drivers: vec![old.clone()],
        ..synced(None)
    };
    let submit = decide_with(&spec, Some(&record.status), &observed, 40, &settings);
    assert_eq!(
        submit.actions,
        vec![
            Action::DeleteDriver {
                name: old.name.clone(),
                uid: old.uid.clone()
            },
            Action::Submit {
                submission_id: record.status.submission_id.clone()
            }
        ]
    );
    assert!(
        submit.actions.is_sorted_by_key(Action::order),
        "listed in execution order: delete before submit"
    );
}

#[test]
fn a_zombie_already_terminating_does_not_hold_back_its_successor() {
    let spec = recovery_spec(2);
    let settings = settings();
    let mut status = recovery_run(&spec, State::PendingRerun, 2);
    status.submission_id = format!("{UID}-2");
    status.submission_pending = true;
    let zombie = ObservedDriver {
        terminating: true,
        ..epoch_driver("pi-driver-e1", 1, &format!("{UID}-1"), running(true))
    };
    let observed = Observed {
        other_drivers: vec![zombie],
        ..synced(None)
    };
    let d = decide_with(&spec, Some(&status), &observed, 40, &settings);
    assert_eq!(
        d.actions,
        vec![Action::Submit {
            submission_id: status.submission_id.clone()
        }]
    );
}

#[test]
fn a_rerun_without_any_committed_marker_warns_that_it_restarts_from_zero() {
    let spec = recovery_spec(2);
    let settings = settings();
    let mut status = recovery_run(&spec, State::PendingRerun, 1);
    status.submission_pending = false;
    let d = decide_with(&spec, Some(&status), &fenced(2, None), 40, &settings);
    assert!(events(&d).contains(&reasons::RESTART_FROM_ZERO));
    assert_eq!(
        d.status
            .recovery_status
            .as_ref()
            .unwrap()
            .restored_from_epoch,
        None
    );
}

#[test]
fn an_app_asking_for_recovery_fails_with_a_clear_message_when_the_feature_is_off() {
    let spec = recovery_spec(2);
    let d = decide_at(&spec, None, &synced(None), 0);
    assert_eq!(d.status.app_state.state, State::Failed);
    assert!(
        d.status
            .app_state
            .error_message
            .contains("fenced restarts disabled"),
        "{}",
        d.status.app_state.error_message
    );
    assert!(
        !kinds(&d.actions)
            .iter()
            .any(|k| k == "Submit" || k.starts_with("AdvanceEpoch"))
    );
}

#[test]
fn apps_without_recovery_never_fence() {
    let spec = spec(json!({"restartPolicy": {"type": "OnFailure", "onFailureRetries": 2}}));
    let d = decide_with(&spec, None, &synced(None), 0, &settings());
    assert_eq!(kinds(&d.actions), ["Submit"]);
    let answered = answered("uid-1-1");
    let d = decide_with(&spec, None, &answered, 0, &settings());
    assert_eq!(d.status.driver_info.pod_name, "pi-driver");
    assert!(d.status.recovery_status.is_none());
}

fn heartbeat(epoch: u64, secs: i64) -> Option<Option<Heartbeat>> {
    Some(Some(Heartbeat {
        epoch,
        at_ms: u64::try_from((BASE + secs) * 1000).unwrap(),
    }))
}

fn running_with(heartbeat: Option<Option<Heartbeat>>) -> Observed {
    Observed {
        heartbeat,
        ..synced(Some(epoch_driver(
            "pi-driver-e1",
            1,
            &format!("{UID}-1"),
            running(true),
        )))
    }
}

#[test]
fn a_fresh_heartbeat_keeps_the_driver_and_schedules_the_next_look() {
    let spec = recovery_spec(2);
    let status = recovery_run(&spec, State::Running, 1);
    let d = decide_with(
        &spec,
        Some(&status),
        &running_with(heartbeat(1, 98)),
        100,
        &settings(),
    );
    assert_eq!(d.status, status);
    assert_eq!(kinds(&d.actions), ["Requeue(5s)"]);
}

#[test]
fn a_stale_heartbeat_fails_the_run_without_deleting_the_driver_before_the_fence() {
    let spec = recovery_spec(2);
    let status = recovery_run(&spec, State::Running, 1);
    let d = decide_with(
        &spec,
        Some(&status),
        &running_with(heartbeat(1, 80)),
        100,
        &settings(),
    );
    assert_eq!(d.status.app_state.state, State::Failing);
    assert_eq!(d.status.failure_reason, Some(FailureReason::HeartbeatLost));
    assert!(events(&d).contains(&reasons::HEARTBEAT_LOST));
    assert!(!kinds(&d.actions).contains(&"DeleteDriver".to_owned()));
}

#[test]
fn a_heartbeat_of_an_older_epoch_does_not_count_for_the_current_driver() {
    let spec = recovery_spec(2);
    let status = recovery_run(&spec, State::Running, 1);
    // Epoch 0's heartbeat is recent, but the current driver (started at t=5) never beat.
    let d = decide_with(
        &spec,
        Some(&status),
        &running_with(heartbeat(0, 99)),
        100,
        &settings(),
    );
    assert_eq!(d.status.failure_reason, Some(FailureReason::HeartbeatLost));
    // Within the window after its start, no heartbeat yet is fine.
    let d = decide_with(
        &spec,
        Some(&status),
        &running_with(Some(None)),
        10,
        &settings(),
    );
    assert_eq!(d.status, status);
}

#[test]
fn a_node_that_stopped_reporting_is_judged_by_its_heartbeat_too() {
    let spec = recovery_spec(2);
    let status = recovery_run(&spec, State::Unknown, 1);
    let mut observed = running_with(heartbeat(1, 50));
    if let Some(d) = observed.driver.as_mut() {
        d.phase = DriverPhase::Unknown;
    }
    let d = decide_with(&spec, Some(&status), &observed, 100, &settings());
    assert_eq!(d.status.failure_reason, Some(FailureReason::HeartbeatLost));
}

#[test]
fn without_retries_left_a_driver_that_lost_its_heartbeat_is_deleted_when_the_app_fails() {
    let spec = recovery_spec(0);
    let mut status = recovery_run(&spec, State::Failing, 1);
    status.failure_reason = Some(FailureReason::HeartbeatLost);
    status.termination_time = t(100);
    let zombie = epoch_driver("pi-driver-e1", 1, &format!("{UID}-1"), running(true));
    let d = decide_with(
        &spec,
        Some(&status),
        &synced(Some(zombie)),
        101,
        &settings(),
    );
    assert_eq!(d.status.app_state.state, State::Failed);
    assert!(kinds(&d.actions).contains(&"DeleteDriver".to_owned()));
}

#[test]
fn a_heartbeat_not_read_in_this_reconcile_only_schedules_a_look() {
    let spec = recovery_spec(2);
    let status = recovery_run(&spec, State::Running, 1);
    let d = decide_with(&spec, Some(&status), &running_with(None), 100, &settings());
    assert_eq!(d.status, status);
    assert_eq!(kinds(&d.actions), ["Requeue(5s)"]);
}

#[test]
fn a_spec_change_starts_a_new_run_that_restores_nothing_from_the_old_one() {
    let spec = recovery_spec(2);
    let settings = settings();
    let mut running = recovery_run(&spec, State::Running, 2);
    running
        .recovery_status
        .as_mut()
        .unwrap()
        .restored_from_epoch = Some(1);
    let changed = recovery_spec(3);
    let invalidating = decide_with(&changed, Some(&running), &synced(None), 5, &settings);
    assert_eq!(invalidating.status.app_state.state, State::Invalidating);
    let rerun = decide_with(
        &changed,
        Some(&invalidating.status),
        &synced(None),
        5,
        &settings,
    );
    assert_eq!(rerun.status.app_state.state, State::PendingRerun);
    let recovery = rerun.status.recovery_status.clone().unwrap();
    assert_eq!((recovery.epoch, recovery.run), (2, FIRST_RUN + 1));
    assert_eq!(recovery.restored_from_epoch, None);

    // The fence is for the new run: the store starts it from nothing and fences the old one.
    let ask = decide_with(&changed, Some(&rerun.status), &synced(None), 5, &settings);
    assert_eq!(
        ask.actions,
        vec![Action::AdvanceEpoch {
            observed: 2,
            run: FIRST_RUN + 1
        }]
    );
    let record = decide_with(
        &changed,
        Some(&rerun.status),
        &fenced(3, None),
        5,
        &settings,
    );
    let recovery = record.status.recovery_status.clone().unwrap();
    assert_eq!(
        (recovery.epoch, recovery.run, recovery.run_start_epoch),
        (3, FIRST_RUN + 1, Some(3))
    );
    // Starting a new run from nothing is what was asked for: no warning.
    assert!(!events(&record).contains(&reasons::RESTART_FROM_ZERO));
}

#[test]
fn the_next_run_of_an_always_application_starts_from_nothing() {
    let spec = spec(json!({
        "restartPolicy": {"type": "Always", "recovery": {}}
    }));
    let settings = settings();
    let mut done = recovery_run(&spec, State::Succeeding, 2);
    done.termination_time = t(4);
    let rerun = decide_with(&spec, Some(&done), &synced(None), 5, &settings);
    assert_eq!(rerun.status.app_state.state, State::PendingRerun);
    let ask = decide_with(&spec, Some(&rerun.status), &synced(None), 5, &settings);
    assert_eq!(
        ask.actions,
        vec![Action::AdvanceEpoch {
            observed: 2,
            run: FIRST_RUN + 1
        }]
    );
    let record = decide_with(&spec, Some(&rerun.status), &fenced(3, None), 5, &settings);
    assert!(!events(&record).contains(&reasons::RESTART_FROM_ZERO));
}

#[test]
fn a_restart_after_a_failure_stays_in_its_run_and_resumes() {
    let spec = recovery_spec(2);
    let settings = settings();
    let mut failing = recovery_run(&spec, State::Failing, 2);
    failing.termination_time = t(0);
    let rerun = decide_with(&spec, Some(&failing), &synced(None), 50, &settings);
    assert_eq!(rerun.status.app_state.state, State::PendingRerun);
    let ask = decide_with(&spec, Some(&rerun.status), &synced(None), 50, &settings);
    assert_eq!(
        ask.actions,
        vec![Action::AdvanceEpoch {
            observed: 2,
            run: FIRST_RUN
        }]
    );
    let record = decide_with(
        &spec,
        Some(&rerun.status),
        &fenced(3, Some((2, 7))),
        50,
        &settings,
    );
    let recovery = record.status.recovery_status.clone().unwrap();
    assert_eq!(
        (
            recovery.run,
            recovery.run_start_epoch,
            recovery.restored_seq
        ),
        (FIRST_RUN, Some(1), Some(7))
    );
}
