//! The `ScheduledSparkApplication` custom resource, field for field as the widely used operator's
//! `sparkoperator.k8s.io/v1beta2` (`api/v1beta2/scheduledsparkapplication_types.go`): a cron
//! schedule, a SparkApplication template, and the bookkeeping of past runs.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::spec::SparkApplicationSpec;

/// When and how to run SparkApplications made from a template.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "sparkoperator.k8s.io",
    version = "v1beta2",
    kind = "ScheduledSparkApplication",
    singular = "scheduledsparkapplication",
    plural = "scheduledsparkapplications",
    shortname = "scheduledsparkapp",
    namespaced,
    status = "ScheduledSparkApplicationStatus",
    derive = "PartialEq",
    doc = "ScheduledSparkApplication is the Schema for the scheduledsparkapplications API",
    annotation(
        "api-approved.kubernetes.io",
        "https://github.com/kubeflow/spark-operator/pull/1298"
    ),
    printcolumn = r#"{"name": "Schedule", "type": "string", "jsonPath": ".spec.schedule"}"#,
    printcolumn = r#"{"name": "TimeZone", "type": "string", "jsonPath": ".spec.timeZone"}"#,
    printcolumn = r#"{"name": "Suspend", "type": "string", "jsonPath": ".spec.suspend"}"#,
    printcolumn = r#"{"name": "Last Run", "type": "date", "jsonPath": ".status.lastRun"}"#,
    printcolumn = r#"{"name": "Last Run Name", "type": "string", "jsonPath": ".status.lastRunName"}"#,
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ScheduledSparkApplicationSpec {
    /// Schedule is a cron schedule on which the application should run.
    pub schedule: String,
    /// TimeZone is the time zone in which the cron schedule will be interpreted in: `Local`
    /// (the default), `UTC`, or an IANA location name such as `America/New_York`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
    /// Template is a template from which SparkApplication instances can be created.
    pub template: SparkApplicationSpec,
    /// Suspend is a flag telling the controller to suspend subsequent runs of the application
    /// if set to true. Defaults to false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,
    /// ConcurrencyPolicy is the policy governing concurrent SparkApplication runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency_policy: Option<ConcurrencyPolicy>,
    /// SuccessfulRunHistoryLimit is the number of past successful runs of the application to
    /// keep. Defaults to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub successful_run_history_limit: Option<i32>,
    /// FailedRunHistoryLimit is the number of past failed runs of the application to keep.
    /// Defaults to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_run_history_limit: Option<i32>,
}

/// Whether runs may overlap.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum ConcurrencyPolicy {
    /// Runs may overlap.
    #[default]
    Allow,
    /// A run that is due while the previous one has not finished is skipped.
    Forbid,
    /// A run that is due while the previous one has not finished replaces it.
    Replace,
}

/// What the schedule did and will do.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScheduledSparkApplicationStatus {
    /// LastRun is the time when the last run of the application started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run: Option<Time>,
    /// NextRun is the time when the next run of the application will start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_run: Option<Time>,
    /// LastRunName is the name of the SparkApplication for the most recent run of the
    /// application.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub last_run_name: String,
    /// PastSuccessfulRunNames keeps the names of SparkApplications for past successful runs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub past_successful_run_names: Vec<String>,
    /// PastFailedRunNames keeps the names of SparkApplications for past failed runs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub past_failed_run_names: Vec<String>,
    /// ScheduleState is the current scheduling state of the application.
    #[serde(default)]
    pub schedule_state: ScheduleState,
    /// Reason tells why the ScheduledSparkApplication is in the particular ScheduleState.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// The `metadata.generation` the status was computed for (ours): a spec change recomputes
    /// the next run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// The scheduling state, with the widely used operator's values.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum ScheduleState {
    #[default]
    #[serde(rename = "")]
    New,
    Validating,
    Scheduled,
    FailedValidation,
}
