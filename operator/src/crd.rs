//! The `SparkApplication` and `ScheduledSparkApplication` custom resources
//! (`sparkoperator.k8s.io/v1beta2`), the `SparkConnect` one (`v1alpha1`), and their CRDs.
//!
//! The committed CRDs are `operator/crd/sparkapplications.yaml`,
//! `operator/crd/scheduledsparkapplications.yaml` and `operator/crd/sparkconnects.yaml`; a test
//! keeps them equal to [`crd_yaml`], [`scheduled_crd_yaml`] and [`connect_crd_yaml`].
//! `operator crd` prints them all, as one YAML stream ([`crds_yaml`]).

mod connect;
mod scheduled;
mod spec;
mod status;

pub use connect::{
    ConnectExecutorSpec, ConnectPodSpec, ServerSpec, ServerStatus, SparkConnect, SparkConnectSpec,
    SparkConnectState, SparkConnectStatus,
};
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
    ApplicationState, ApplicationStateType, DriverInfo, ExecutorCounts, ExecutorState,
    FailureReason, RecoveryStatus, SparkApplicationStatus,
};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use serde_json::Value;
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
    yaml_serde::to_string(&crd()).map_err(CrdError::Render)
}

/// The ScheduledSparkApplication CRD as YAML, exactly as committed.
pub fn scheduled_crd_yaml() -> Result<String, CrdError> {
    yaml_serde::to_string(&scheduled_crd()).map_err(CrdError::Render)
}

/// The SparkConnect CRD as YAML, exactly as committed.
pub fn connect_crd_yaml() -> Result<String, CrdError> {
    yaml_serde::to_string(&connect_crd()).map_err(CrdError::Render)
}

/// Every CRD of this operator, as one YAML stream (`operator crd`).
pub fn crds_yaml() -> Result<String, CrdError> {
    Ok(format!(
        "{}---\n{}---\n{}",
        crd_yaml()?,
        scheduled_crd_yaml()?,
        connect_crd_yaml()?
    ))
}

/// Every CRD of this operator, in the order `operator crd` prints them.
pub fn crds() -> Vec<CustomResourceDefinition> {
    vec![crd(), scheduled_crd(), connect_crd()]
}

/// The SparkConnect CRD (`v1alpha1`).
pub fn connect_crd() -> CustomResourceDefinition {
    adjusted(SparkConnect::crd())
}

/// The ScheduledSparkApplication CRD: its template is a SparkApplication spec, so it accepts
/// what [`crd`] accepts there.
pub fn scheduled_crd() -> CustomResourceDefinition {
    adjusted(ScheduledSparkApplication::crd())
}

/// A state the widely used operator writes that this one spells otherwise: `""` (its NEW). It
/// reads as NEW; the schema must accept it, or objects the other operator wrote could not be
/// stored.
pub const FOREIGN_STATES: [&str; 1] = [""];

/// The CustomResourceDefinition: the one derived from the types, made to accept what the widely
/// used operator's CRD accepts, so that its objects apply unchanged:
/// - `status.applicationState.state` also takes [`FOREIGN_STATES`];
/// - the `name` of a reference to a Secret or ConfigMap (`secretKeyRef`, `configMapRef`, ...)
///   is optional with default `""`, as the Kubernetes types declare it (their generated schema
///   marks it required).
pub fn crd() -> CustomResourceDefinition {
    adjusted(SparkApplication::crd())
}

fn adjusted(derived: CustomResourceDefinition) -> CustomResourceDefinition {
    let mut value =
        serde_json::to_value(&derived).expect("a CustomResourceDefinition always encodes as JSON");
    if let Some(versions) = value
        .pointer_mut("/spec/versions")
        .and_then(Value::as_array_mut)
    {
        for version in versions {
            if let Some(schema) = version.pointer_mut("/schema/openAPIV3Schema") {
                accept_foreign_states(schema);
                optional_reference_names(schema);
            }
        }
    }
    serde_json::from_value(value).unwrap_or(derived)
}

fn accept_foreign_states(schema: &mut Value) {
    let path = "/properties/status/properties/applicationState/properties/state/enum";
    if let Some(states) = schema.pointer_mut(path).and_then(Value::as_array_mut) {
        for state in FOREIGN_STATES {
            if !states.iter().any(|s| s == state) {
                states.push(Value::from(state));
            }
        }
    }
}

/// Every object schema whose `name` is a Kubernetes reference's ("Name of the referent").
fn optional_reference_names(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            let is_reference = map
                .get("properties")
                .and_then(|p| p.get("name"))
                .and_then(|n| n.get("description"))
                .and_then(Value::as_str)
                .is_some_and(|d| d.starts_with("Name of the referent"));
            if is_reference {
                if let Some(required) = map.get_mut("required").and_then(Value::as_array_mut) {
                    required.retain(|r| r != "name");
                }
                if map
                    .get("required")
                    .and_then(Value::as_array)
                    .is_some_and(Vec::is_empty)
                {
                    map.remove("required");
                }
                if let Some(name) = map
                    .get_mut("properties")
                    .and_then(|p| p.get_mut("name"))
                    .and_then(Value::as_object_mut)
                {
                    name.insert("default".to_owned(), Value::from(""));
                }
            }
            for child in map.values_mut() {
                optional_reference_names(child);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(optional_reference_names),
        _ => {}
    }
}

#[cfg(test)]
mod tests;
