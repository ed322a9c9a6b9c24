//! `status` of a SparkApplication: the widely used operator's fields with their JSON names, plus
//! a few of ours (marked) that make submission crash-safe and restarts explainable. New fields are
//! optional and skipped when empty, so more can be added (the fenced-restart `recoveryStatus`)
//! without touching existing objects.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The observed state of a SparkApplication.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SparkApplicationStatus {
    /// The Spark application id (`spark.app.id`) of the current run.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub spark_application_id: String,
    /// The id of the current submission; the submitter's idempotency key. Written to the API
    /// server before the submission is sent, so a retry after a crash reuses it.
    #[serde(
        rename = "submissionID",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub submission_id: String,
    /// When the last submission was attempted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_submission_attempt_time: Option<Time>,
    /// When the current run terminated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_time: Option<Time>,
    /// Information about the driver.
    #[serde(default)]
    #[schemars(transform = without_default)]
    pub driver_info: DriverInfo,
    /// The overall application state.
    #[serde(rename = "applicationState", default)]
    #[schemars(transform = without_default)]
    pub app_state: ApplicationState,
    /// The state of executors by executor pod name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub executor_state: BTreeMap<String, ExecutorState>,
    /// Ours: the submission id whose UI Service and Ingresses were made (they are made once per
    /// run, after its submission).
    #[serde(
        rename = "uiSubmissionID",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub ui_submission_id: String,
    /// Ours: how many executors of the current run are in each state (`executorState` counted),
    /// for `kubectl get` columns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executor_counts: Option<ExecutorCounts>,
    /// Runs attempted; reset when the spec changes.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub execution_attempts: i32,
    /// Submissions attempted in the current run; reset on rerun and when the spec changes.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub submission_attempts: i32,
    /// Ours: `submissionID` is persisted but its submission has not been answered yet. Only then
    /// may the operator send it; a crash in between resends the same id, which is idempotent.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub submission_pending: bool,
    /// Ours: digest of the spec the current run was submitted with (TTL excluded); a different
    /// digest means the spec changed and the run is invalidated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_hash: Option<String>,
    /// Ours: why the current run failed, which decides `OnInfrastructureFailure` restarts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<FailureReason>,
    /// Ours: conditions, such as the spec fields this operator does not honour.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Ours: fenced restarts (`spec.restartPolicy.recovery`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery_status: Option<RecoveryStatus>,
}

/// Ours: where fenced restarts stand.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RecoveryStatus {
    /// The epoch the current driver runs under; every older driver is fenced.
    pub epoch: u64,
    /// The run the progress belongs to. A spec change and the next run of an `Always`
    /// application start a new run, which restores nothing from the previous one; restarts after
    /// a failure stay in the run and resume from its last marker.
    #[serde(default)]
    pub run: u64,
    /// The epoch of the first driver of this run; absent until it is fenced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_start_epoch: Option<u64>,
    /// The epoch of the progress marker the current driver restores; absent when it starts
    /// from zero.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restored_from_epoch: Option<u64>,
    /// The sequence number (a stage, a batch) of that marker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restored_seq: Option<u64>,
}

/// Status is written only by the operator, which always writes these; an API-server default
/// would only add noise to objects the widely used operator wrote.
fn without_default(schema: &mut schemars::Schema) {
    schema.remove("default");
}

fn is_zero(n: &i32) -> bool {
    *n == 0
}

/// The state and, after a failure, why.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationState {
    pub state: ApplicationStateType,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub error_message: String,
}

/// The states of an application (see `state_machine` for the transitions).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum ApplicationStateType {
    /// Created, not submitted yet. The widely used operator writes this state as `""`; both read
    /// as NEW.
    #[default]
    #[serde(rename = "NEW", alias = "")]
    New,
    #[serde(rename = "SUBMITTED")]
    Submitted,
    #[serde(rename = "RUNNING")]
    Running,
    #[serde(rename = "COMPLETED")]
    Completed,
    #[serde(rename = "FAILED")]
    Failed,
    #[serde(rename = "SUBMISSION_FAILED")]
    SubmissionFailed,
    #[serde(rename = "PENDING_RERUN")]
    PendingRerun,
    #[serde(rename = "INVALIDATING")]
    Invalidating,
    #[serde(rename = "SUCCEEDING")]
    Succeeding,
    #[serde(rename = "FAILING")]
    Failing,
    /// `spec.suspend` was set: the driver is being deleted.
    #[serde(rename = "SUSPENDING")]
    Suspending,
    /// Suspended: no driver runs until `spec.suspend` is cleared.
    #[serde(rename = "SUSPENDED")]
    Suspended,
    /// `spec.suspend` was cleared: a new run is being submitted.
    #[serde(rename = "RESUMING")]
    Resuming,
    /// The driver's state cannot be told. A state this operator does not know also reads as
    /// UNKNOWN, so objects another operator wrote stay readable.
    #[serde(rename = "UNKNOWN", other)]
    Unknown,
}

impl ApplicationStateType {
    /// The name as written in the status.
    pub fn as_str(self) -> &'static str {
        match self {
            ApplicationStateType::New => "NEW",
            ApplicationStateType::Submitted => "SUBMITTED",
            ApplicationStateType::Running => "RUNNING",
            ApplicationStateType::Completed => "COMPLETED",
            ApplicationStateType::Failed => "FAILED",
            ApplicationStateType::SubmissionFailed => "SUBMISSION_FAILED",
            ApplicationStateType::PendingRerun => "PENDING_RERUN",
            ApplicationStateType::Invalidating => "INVALIDATING",
            ApplicationStateType::Succeeding => "SUCCEEDING",
            ApplicationStateType::Failing => "FAILING",
            ApplicationStateType::Suspending => "SUSPENDING",
            ApplicationStateType::Suspended => "SUSPENDED",
            ApplicationStateType::Resuming => "RESUMING",
            ApplicationStateType::Unknown => "UNKNOWN",
        }
    }

    /// COMPLETED and FAILED: nothing happens any more unless the spec changes (or TTL expires).
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            ApplicationStateType::Completed | ApplicationStateType::Failed
        )
    }
}

/// How many executors are in each state.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExecutorCounts {
    #[serde(default)]
    pub pending: u32,
    #[serde(default)]
    pub running: u32,
    #[serde(default)]
    pub completed: u32,
    #[serde(default)]
    pub failed: u32,
    #[serde(default)]
    pub unknown: u32,
}

impl ExecutorCounts {
    /// The counts of `states`.
    pub fn of(states: &BTreeMap<String, ExecutorState>) -> ExecutorCounts {
        let mut counts = ExecutorCounts::default();
        for state in states.values() {
            let slot = match state {
                ExecutorState::Pending => &mut counts.pending,
                ExecutorState::Running => &mut counts.running,
                ExecutorState::Completed => &mut counts.completed,
                ExecutorState::Failed => &mut counts.failed,
                ExecutorState::Unknown => &mut counts.unknown,
            };
            *slot = slot.saturating_add(1);
        }
        counts
    }
}

impl std::fmt::Display for ExecutorCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} pending, {} running, {} completed, {} failed",
            self.pending, self.running, self.completed, self.failed
        )?;
        if self.unknown > 0 {
            write!(f, ", {} unknown", self.unknown)?;
        }
        Ok(())
    }
}

/// The state of one executor pod.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum ExecutorState {
    #[serde(rename = "PENDING")]
    Pending,
    #[serde(rename = "RUNNING")]
    Running,
    #[serde(rename = "COMPLETED")]
    Completed,
    #[serde(rename = "FAILED")]
    Failed,
    #[serde(rename = "UNKNOWN", other)]
    Unknown,
}

/// Information about the driver.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct DriverInfo {
    #[serde(
        rename = "webUIServiceName",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub web_ui_service_name: String,
    #[serde(
        rename = "webUIAddress",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub web_ui_address: String,
    #[serde(rename = "webUIPort", default, skip_serializing_if = "is_zero")]
    pub web_ui_port: i32,
    #[serde(
        rename = "webUIIngressName",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub web_ui_ingress_name: String,
    #[serde(
        rename = "webUIIngressAddress",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub web_ui_ingress_address: String,
    #[serde(rename = "podName", default, skip_serializing_if = "String::is_empty")]
    pub pod_name: String,
}

/// Why a run (or its submission) failed. The split that matters is [`FailureReason::is_infrastructure`]:
/// the cluster failed the application, or the application failed itself.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum FailureReason {
    /// The driver container exited non-zero (or was OOM-killed): the application's own failure.
    ApplicationError,
    /// The driver pod was evicted (node pressure, preemption, API eviction).
    Evicted,
    /// The driver's node went away or shut down.
    NodeLost,
    /// The image could not be pulled before the driver start timeout.
    ImagePullFailure,
    /// The kubelet refused the pod (admission: out of cpu, node affinity, ...).
    AdmissionRejected,
    /// The driver did not start running within `driverStartTimeoutMillis`.
    DriverStartTimeout,
    /// The driver did not become Ready within `driverReadyTimeoutMillis`.
    DriverReadyTimeout,
    /// The driver pod disappeared (confirmed by a live read).
    DriverLost,
    /// Ours: the driver's recovery agent stopped heartbeating (a partitioned node, a hung pod).
    HeartbeatLost,
    /// The submitter refused the submission (bad arguments, invalid template, conflict).
    SubmissionRejected,
    /// The submitter could not be reached or was overloaded, after the client's own retries.
    SubmitterUnavailable,
    /// The spec uses a field this operator cannot honour for this application.
    UnsupportedSpec,
    /// `spec.sparkConf` sets a key the operator refuses (namespace, service account, master,
    /// image, credentials).
    RefusedSparkConf,
    /// Ours: the API server refused an object the run needs besides its driver (a PodGroup whose
    /// CRD is not installed, an Ingress the operator may not create, a quota).
    OwnedObjectRefused,
    /// Ours: a ResourceQuota of the namespace had no room for the driver's objects (the
    /// submitter's 429 `QUOTA_EXCEEDED`); nothing of the submission was left behind.
    QuotaExceeded,
}

impl FailureReason {
    /// Infrastructure failures are the ones `OnInfrastructureFailure` retries: the cluster
    /// failed to run the driver, the application code did not fail. A ready timeout is the
    /// application's (its session never came up), as the official Apache Spark operator has it.
    pub fn is_infrastructure(self) -> bool {
        matches!(
            self,
            FailureReason::Evicted
                | FailureReason::NodeLost
                | FailureReason::ImagePullFailure
                | FailureReason::AdmissionRejected
                | FailureReason::DriverStartTimeout
                | FailureReason::DriverLost
                | FailureReason::HeartbeatLost
                | FailureReason::SubmitterUnavailable
                | FailureReason::QuotaExceeded
        )
    }

    /// Classifies a failed driver pod from the pod's `status.reason` and the driver container's
    /// `terminated.reason`. Pod reasons are the kubelet's and the node lifecycle controller's.
    pub fn of_failed_pod(
        pod_reason: Option<&str>,
        container_reason: Option<&str>,
    ) -> FailureReason {
        match pod_reason {
            Some("Evicted" | "Preempting") => FailureReason::Evicted,
            Some("NodeLost" | "NodeShutdown" | "Terminated" | "Shutdown") => {
                FailureReason::NodeLost
            }
            Some(
                "UnexpectedAdmissionError"
                | "OutOfcpu"
                | "OutOfmemory"
                | "OutOfpods"
                | "NodeAffinity"
                | "NodeSelectorMismatching"
                | "InvalidNodeInfo",
            ) => FailureReason::AdmissionRejected,
            _ => match container_reason {
                Some("ContainerStatusUnknown") => FailureReason::NodeLost,
                _ => FailureReason::ApplicationError,
            },
        }
    }

    /// A container waiting reason that means the image cannot be pulled.
    pub fn is_image_pull_waiting_reason(reason: &str) -> bool {
        matches!(
            reason,
            "ErrImagePull" | "ImagePullBackOff" | "InvalidImageName" | "ErrImageNeverPull"
        )
    }

    /// The name as written in the status.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureReason::ApplicationError => "ApplicationError",
            FailureReason::Evicted => "Evicted",
            FailureReason::NodeLost => "NodeLost",
            FailureReason::ImagePullFailure => "ImagePullFailure",
            FailureReason::AdmissionRejected => "AdmissionRejected",
            FailureReason::DriverStartTimeout => "DriverStartTimeout",
            FailureReason::DriverReadyTimeout => "DriverReadyTimeout",
            FailureReason::DriverLost => "DriverLost",
            FailureReason::HeartbeatLost => "HeartbeatLost",
            FailureReason::SubmissionRejected => "SubmissionRejected",
            FailureReason::SubmitterUnavailable => "SubmitterUnavailable",
            FailureReason::UnsupportedSpec => "UnsupportedSpec",
            FailureReason::RefusedSparkConf => "RefusedSparkConf",
            FailureReason::OwnedObjectRefused => "OwnedObjectRefused",
            FailureReason::QuotaExceeded => "QuotaExceeded",
        }
    }
}
