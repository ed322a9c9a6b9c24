//! The current run's executors in the status.

use super::*;

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
