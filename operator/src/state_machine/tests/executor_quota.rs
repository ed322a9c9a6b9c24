//! The condition `ExecutorsPendingQuota`: set while a full quota keeps the current run's
//! executors out, written once, and removed when they are there.

use super::*;
use crate::executor_quota::{CONDITION_TYPE, QuotaRoom, REASON};
use submission::quantity::Quantity;

fn pods_quota(hard: i64, used: i64) -> QuotaRoom {
    QuotaRoom {
        name: "compute".into(),
        namespace: "default".into(),
        hard: [("pods".to_owned(), Quantity::units(hard))].into(),
        used: [("pods".to_owned(), Quantity::units(used))].into(),
    }
}

fn observed(executors: usize, quota: QuotaRoom, phase: DriverPhase) -> Observed {
    let current = format!("{UID}-1");
    let mut observed = synced(Some(driver(phase)));
    observed.executors = (1..=executors)
        .map(|n| executor(&format!("pi-exec-{n}"), ExecutorState::Running, &current))
        .collect();
    observed.quotas = vec![quota];
    observed
}

fn condition(status: &SparkApplicationStatus) -> Option<&Condition> {
    status.conditions.iter().find(|c| c.type_ == CONDITION_TYPE)
}

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

#[test]
fn a_full_quota_sets_the_condition_once_and_a_steady_state_writes_nothing() {
    let spec = spec(json!({"executor": {"instances": 3}}));
    let mut status = run_status(&spec, State::Running);
    status.spark_application_id = "spark-abc".into();
    // The driver and one executor fill the quota.
    let seen = observed(1, pods_quota(2, 2), running(true));
    let first = decide_at(&spec, Some(&status), &seen, 10);
    let held = condition(&first.status).expect("the condition");
    assert_eq!(
        (held.status.as_str(), held.reason.as_str()),
        ("True", REASON)
    );
    assert_eq!(
        held.message,
        "2 executors missing: exceeded quota: compute, requested: pods=1, limited: pods=2"
    );
    assert_eq!(
        kinds(&first.actions),
        [
            "WriteStatus",
            "Event(SparkExecutorRunning)",
            "Event(ExceededQuota)"
        ]
    );
    // executorState has the one executor that exists, nothing for those never created.
    assert_eq!(first.status.executor_state.len(), 1);

    // Nothing changed: no write, no event.
    let again = decide_at(&spec, Some(&first.status), &seen, 20);
    assert_eq!(again.status, first.status);
    assert!(
        kinds(&again.actions)
            .iter()
            .all(|a| a.starts_with("Requeue")),
        "{:?}",
        again.actions
    );

    // The quota is raised and the executors come: the condition goes, in one write.
    let whole = observed(3, pods_quota(4, 4), running(true));
    let done = decide_at(&spec, Some(&first.status), &whole, 30);
    assert_eq!(condition(&done.status), None);
    assert_eq!(done.status.executor_state.len(), 3);
    assert_eq!(kinds(&done.actions)[0], "WriteStatus");
}

#[test]
fn no_condition_without_a_full_quota_a_running_driver_or_with_the_executors_there() {
    let spec = spec(json!({"executor": {"instances": 3}}));
    let status = run_status(&spec, State::Running);
    for (what, seen) in [
        (
            "the quota has room",
            observed(1, pods_quota(10, 2), running(true)),
        ),
        (
            "the executors are there",
            observed(3, pods_quota(4, 4), running(true)),
        ),
        (
            "the driver is not running yet",
            observed(0, pods_quota(1, 1), pending()),
        ),
    ] {
        let decision = decide_at(&spec, Some(&status), &seen, 10);
        assert_eq!(condition(&decision.status), None, "{what}");
    }
    // The run is over: a condition left from it goes.
    let mut held = decide_at(
        &spec,
        Some(&status),
        &observed(1, pods_quota(2, 2), running(true)),
        10,
    )
    .status;
    assert!(condition(&held).is_some());
    held.app_state.state = State::Completed;
    let after = decide_at(
        &spec,
        Some(&held),
        &observed(1, pods_quota(2, 2), DriverPhase::Succeeded),
        20,
    );
    assert_eq!(condition(&after.status), None);
}
