//! The `SparkConnect` custom resource, field for field as the widely used operator's
//! `sparkoperator.k8s.io/v1alpha1` (`api/v1alpha1/sparkconnect_types.go`): a Spark Connect
//! server pod, the executors its Spark asks for, and what the operator observed of both.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::spec::{DynamicAllocation, preserve_unknown_object};

/// A Spark Connect server and its executors.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "sparkoperator.k8s.io",
    version = "v1alpha1",
    kind = "SparkConnect",
    singular = "sparkconnect",
    plural = "sparkconnects",
    shortname = "sparkconn",
    namespaced,
    status = "SparkConnectStatus",
    derive = "PartialEq",
    doc = "SparkConnect is the Schema for the sparkconnections API.",
    annotation(
        "api-approved.kubernetes.io",
        "https://github.com/kubeflow/spark-operator/pull/1298"
    ),
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name": "Status", "type": "string", "jsonPath": ".status.state"}"#,
    printcolumn = r#"{"name": "PodName", "type": "string", "jsonPath": ".status.server.podName"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct SparkConnectSpec {
    /// SparkVersion is the version of Spark the spark connect use.
    pub spark_version: String,
    /// Image is the container image for the driver, executor, and init-container. Any custom
    /// container images for the driver, executor, or init-container takes precedence over this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// HadoopConf carries user-specified Hadoop configuration properties; the prefix
    /// `spark.hadoop.` is added where missing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hadoop_conf: Option<BTreeMap<String, String>>,
    /// SparkConf carries user-specified Spark configuration properties as they would use the
    /// "--conf" option in spark-submit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spark_conf: Option<BTreeMap<String, String>>,
    /// Server is the Spark connect server specification.
    pub server: ServerSpec,
    /// Executor is the Spark executor specification.
    pub executor: ConnectExecutorSpec,
    /// DynamicAllocation configures dynamic allocation of executors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dynamic_allocation: Option<DynamicAllocation>,
}

/// What the server pod and the executor pods have in common.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConnectPodSpec {
    /// Cores maps to `spark.driver.cores` or `spark.executor.cores`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub cores: Option<i32>,
    /// Memory is the amount of memory to request for the pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<String>,
    /// Template is a pod template for what Spark configuration cannot express. Kept
    /// schemaless, as the widely used operator keeps it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "preserve_unknown_object")]
    pub template: Option<Value>,
}

/// The Spark Connect server.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServerSpec {
    #[serde(flatten)]
    pub pod: ConnectPodSpec,
    /// Service exposes the Spark connect server: a Service whose name, labels, annotations and
    /// spec are used for the server's Service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "preserve_unknown_object")]
    pub service: Option<Value>,
}

/// The executors.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConnectExecutorSpec {
    #[serde(flatten)]
    pub pod: ConnectPodSpec,
    /// Instances is the number of executor instances.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub instances: Option<i32>,
}

/// What the operator observed.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SparkConnectStatus {
    /// The latest available observations of the SparkConnect's state (`ServerPodReady`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// State represents the current state of the SparkConnect.
    #[serde(default)]
    pub state: SparkConnectState,
    /// Server represents the current state of the SparkConnect server.
    #[serde(default)]
    pub server: ServerStatus,
    /// Executors counts the executor pods by their phase, lower case (`running`, `pending`...).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub executors: BTreeMap<String, i64>,
    /// StartTime is the time at which the controller started processing the SparkConnect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    /// LastUpdateTime is the time at which the controller last updated the SparkConnect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
}

/// The state of a SparkConnect, with the widely used operator's values.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum SparkConnectState {
    #[default]
    #[serde(rename = "")]
    New,
    Provisioning,
    Ready,
    NotReady,
    Failed,
}

/// Where the server runs.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServerStatus {
    /// PodName is the name of the pod that is running the Spark Connect server.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub pod_name: String,
    /// PodIP is the IP address of the pod that is running the Spark Connect server.
    #[serde(default, rename = "podIp", skip_serializing_if = "String::is_empty")]
    pub pod_ip: String,
    /// ServiceName is the name of the service that is exposing the Spark Connect server.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub service_name: String,
}
