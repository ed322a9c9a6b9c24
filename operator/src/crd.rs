//! The `SparkApplication` custom resource (`sparkoperator.k8s.io/v1beta2`) and its CRD.
//!
//! The committed CRD is `operator/crd/sparkapplications.yaml`; a test keeps it equal to
//! [`crd_yaml`]. Regenerate it with
//! `cargo run -p operator -- crd > operator/crd/sparkapplications.yaml`.

mod scheduled;
mod spec;
mod status;

pub use scheduled::{
    ConcurrencyPolicy, ScheduleState, ScheduledSparkApplication, ScheduledSparkApplicationSpec,
    ScheduledSparkApplicationStatus,
};
pub use spec::{
    ApplicationTimeoutConfig, BatchSchedulerConfiguration, Dependencies, DeployMode,
    DriverIngressConfiguration, DriverSpec, DynamicAllocation, ExecutorSpec, GpuSpec,
    MonitoringSpec, NameKey, NamePath, Port, PrometheusSpec, RecoverySpec, RestartPolicy,
    RestartPolicyType, SecretInfo, SecretType, SparkApplication, SparkApplicationSpec,
    SparkApplicationType, SparkPodSpec, SparkUIConfiguration,
};
pub use status::{
    ApplicationState, ApplicationStateType, DriverInfo, ExecutorState, FailureReason,
    RecoveryStatus, SparkApplicationStatus,
};

use kube::CustomResourceExt;
use thiserror::Error;

/// Why the CRD could not be rendered.
#[derive(Debug, Error)]
pub enum CrdError {
    #[error("cannot render the CustomResourceDefinition as YAML")]
    Render(#[source] yaml_serde::Error),
}

impl CrdError {
    /// A stable name for logs and tests.
    pub fn kind(&self) -> &'static str {
        match self {
            CrdError::Render(_) => "render",
        }
    }
}

/// The CustomResourceDefinition as YAML, exactly as committed.
pub fn crd_yaml() -> Result<String, CrdError> {
    yaml_serde::to_string(&SparkApplication::crd()).map_err(CrdError::Render)
}

#[cfg(test)]
mod tests;
