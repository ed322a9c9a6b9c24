//! Suspending and resuming.

use super::*;

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
