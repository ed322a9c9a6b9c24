//! Tests of `decide`: the fixtures every part's tests share, and one test per concern in
//! `tests/` (the transition table, submitting, the owned objects, the driver, a run's end,
//! executors, suspension, fenced restarts).

use serde_json::{Value, json};

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::*;
use crate::crd::{
    ApplicationState, DriverInfo, ExecutorState, FailureReason, RecoveryStatus,
    SparkApplicationSpec, SparkApplicationStatus,
};
use crate::fence::Heartbeat;

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
            Action::EnsureDependencies => "EnsureDependencies".to_owned(),
            Action::EnsureUiObjects => "EnsureUiObjects".to_owned(),
            Action::StopDriver { .. } => "StopDriver".to_owned(),
            Action::Submit { .. } => "Submit".to_owned(),
            Action::AdvanceEpoch { observed, run } => format!("AdvanceEpoch({observed}, {run})"),
            Action::WriteStatus => "WriteStatus".to_owned(),
            Action::RecordEvent { reason, .. } => format!("Event({reason})"),
            Action::DeleteApplication => "DeleteApplication".to_owned(),
            Action::Requeue(d) => format!("Requeue({}s)", d.as_secs()),
        })
        .collect()
}

fn on_failure() -> Value {
    json!({"restartPolicy": {"type": "OnFailure", "onFailureRetries": 2, "onFailureRetryInterval": 10,
        "onSubmissionFailureRetries": 2, "onSubmissionFailureRetryInterval": 20}})
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

mod driver;
mod executor_quota;
mod executor_state;
mod owned_objects;
mod recovery;
mod run_end;
mod submit;
mod suspend;
mod transitions;
