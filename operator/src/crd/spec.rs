//! `spec` of a SparkApplication, field for field as the widely used operator's
//! `sparkoperator.k8s.io/v1beta2` (`api/v1beta2/sparkapplication_types.go`), plus two optional
//! additions borrowed from the official Apache Spark operator: the `OnInfrastructureFailure`
//! restart policy and per-stage timeouts (`applicationTimeoutConfig`).
//!
//! Every field of the original is here, supported or not: a field missing from the schema would
//! be pruned by the API server on write, so we could not even tell the user we ignore it.
//! `crate::unsupported` lists the ones set but not honoured.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, Container, EnvFromSource, EnvVar, HostAlias, Lifecycle, PodDNSConfig,
    PodSecurityContext, SecurityContext, Toleration, Volume, VolumeMount,
};
use k8s_openapi::api::networking::v1::IngressTLS;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::status::SparkApplicationStatus;

/// The desired state: everything a `spark-submit` command line takes, plus restart and cleanup
/// policy.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "sparkoperator.k8s.io",
    version = "v1beta2",
    kind = "SparkApplication",
    singular = "sparkapplication",
    plural = "sparkapplications",
    shortname = "sparkapp",
    namespaced,
    status = "SparkApplicationStatus",
    derive = "PartialEq",
    doc = "SparkApplication is the Schema for the sparkapplications API",
    // Groups under k8s.io need this annotation or the API server refuses the CRD; the value is
    // the approval the widely used operator got for this very group.
    annotation(
        "api-approved.kubernetes.io",
        "https://github.com/kubeflow/spark-operator/pull/1298"
    ),
    // Raw JSON, one string per column: the structured form repeats `type_ = "string"`, which
    // clippy takes for a duplicated attribute.
    printcolumn = r#"{"name": "Suspend", "type": "boolean", "jsonPath": ".spec.suspend"}"#,
    printcolumn = r#"{"name": "Status", "type": "string", "jsonPath": ".status.applicationState.state"}"#,
    printcolumn = r#"{"name": "Attempts", "type": "string", "jsonPath": ".status.executionAttempts"}"#,
    printcolumn = r#"{"name": "Start", "type": "string", "jsonPath": ".status.lastSubmissionAttemptTime"}"#,
    printcolumn = r#"{"name": "Finish", "type": "string", "jsonPath": ".status.terminationTime"}"#,
    printcolumn = r#"{"name": "Executors", "type": "integer", "description": "Executors of the current run that are running", "jsonPath": ".status.executorCounts.running"}"#,
    printcolumn = r#"{"name": "Failed Executors", "type": "integer", "description": "Executors of the current run that failed", "jsonPath": ".status.executorCounts.failed"}"#,
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct SparkApplicationSpec {
    /// Type tells the type of the Spark application.
    #[serde(rename = "type")]
    pub app_type: SparkApplicationType,
    /// SparkVersion is the version of Spark the application uses.
    pub spark_version: String,
    /// Mode is the deployment mode of the Spark application. Only `cluster` is supported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<DeployMode>,
    /// ProxyUser specifies the user to impersonate when submitting the application
    /// (`--proxy-user`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy_user: Option<String>,
    /// Image is the container image for the driver and executors, unless they set their own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// ImagePullPolicy is the image pull policy for the driver and executors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pull_policy: Option<String>,
    /// ImagePullSecrets is the list of image-pull secrets.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub image_pull_secrets: Vec<String>,
    /// MainClass is the fully-qualified main class of a Java/Scala application.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub main_class: Option<String>,
    /// MainApplicationFile is the path to a bundled JAR, Python, or R file of the application.
    pub main_application_file: String,
    /// Arguments is a list of arguments to be passed to the application.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub arguments: Vec<String>,
    /// SparkConf carries Spark configuration properties as `--conf` would.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub spark_conf: BTreeMap<String, String>,
    /// HadoopConf carries Hadoop configuration properties; each is passed as `spark.hadoop.<key>`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub hadoop_conf: BTreeMap<String, String>,
    /// SparkConfigMap names a ConfigMap with Spark configuration files (log4j.properties, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spark_config_map: Option<String>,
    /// HadoopConfigMap names a ConfigMap with Hadoop configuration files (core-site.xml, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hadoop_config_map: Option<String>,
    /// Volumes is the list of Kubernetes volumes that the driver and executors can mount.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<Volume>,
    /// Driver is the driver specification.
    pub driver: DriverSpec,
    /// Executor is the executor specification.
    pub executor: ExecutorSpec,
    /// Deps captures all possible types of dependencies of a Spark application.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deps: Option<Dependencies>,
    /// RestartPolicy defines if and when the operator restarts an application.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_policy: Option<RestartPolicy>,
    /// NodeSelector is added to the driver and executor pods (`spark.kubernetes.node.selector.*`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// FailureRetries is a legacy field the widely used operator does not read either.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_retries: Option<i32>,
    /// RetryInterval is a legacy field the widely used operator does not read either.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_interval: Option<i64>,
    /// PythonVersion sets `spark.kubernetes.pyspark.pythonVersion`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["2", "3"]))]
    pub python_version: Option<String>,
    /// MemoryOverheadFactor sets `spark.kubernetes.memoryOverheadFactor`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_overhead_factor: Option<String>,
    /// Monitoring configures how monitoring is handled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monitoring: Option<MonitoringSpec>,
    /// BatchScheduler configures which batch scheduler will be used for scheduling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_scheduler: Option<String>,
    /// TimeToLiveSeconds: the SparkApplication is deleted this long after its termination.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_to_live_seconds: Option<i64>,
    /// BatchSchedulerOptions provides fine-grained control on batch scheduling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_scheduler_options: Option<BatchSchedulerConfiguration>,
    /// SparkUIOptions configures the Service and the Ingress that expose the Spark UI.
    #[serde(
        rename = "sparkUIOptions",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub spark_ui_options: Option<SparkUIConfiguration>,
    /// DriverIngressOptions configures Services and Ingresses to expose driver ports.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub driver_ingress_options: Vec<DriverIngressConfiguration>,
    /// DynamicAllocation configures Spark's dynamic allocation of executors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dynamic_allocation: Option<DynamicAllocation>,
    /// DriverPodDisruptionBudget asks for a PodDisruptionBudget protecting the driver.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver_pod_disruption_budget: Option<bool>,
    /// Suspend asks the operator not to run the application.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,
    /// Per-stage timeouts (ours, from the official Apache Spark operator). Unset: no timeout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub application_timeout_config: Option<ApplicationTimeoutConfig>,
}

/// The language of the application.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum SparkApplicationType {
    Java,
    Python,
    Scala,
    R,
}

/// Where the driver runs.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DeployMode {
    /// The driver runs in a pod of its own (the only mode a server-side submitter can do).
    Cluster,
    /// The driver runs inside the submitting process.
    Client,
}

/// Restart policy: `type` plus retry limits and intervals (seconds).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RestartPolicy {
    /// Type specifies the RestartPolicyType. Default `Never`.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub policy_type: Option<RestartPolicyType>,
    /// Times to retry a failed submission before giving up (OnFailure).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub on_submission_failure_retries: Option<i32>,
    /// Times to retry a failed run before giving up (OnFailure, OnInfrastructureFailure).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub on_failure_retries: Option<i32>,
    /// Seconds between retries of a failed submission, multiplied by the attempts so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub on_submission_failure_retry_interval: Option<i64>,
    /// Seconds between retries of a failed run, multiplied by the runs so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub on_failure_retry_interval: Option<i64>,
    /// Ours: fenced, progress-preserving restarts. Each retried run gets a new epoch; the old
    /// driver is fenced before it is deleted, and the new one resumes from the last committed
    /// progress marker (see docs/fenced-restart.md). Retries stay bounded by the fields above.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery: Option<RecoverySpec>,
}

/// Ours: opt-in fenced restarts for one application.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RecoverySpec {
    /// Turns fenced restarts on for this application (default true when `recovery` is set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// A running driver whose recovery agent has not heartbeated for this long (a partitioned
    /// node, a hung pod) is fenced and replaced. Default: the operator's setting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub heartbeat_timeout_seconds: Option<i64>,
}

impl RecoverySpec {
    /// Whether the application asks for fenced restarts.
    pub fn is_enabled(&self) -> bool {
        self.enabled.unwrap_or(true)
    }
}

/// When to restart a terminated application.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum RestartPolicyType {
    /// Never restart.
    Never,
    /// Restart after a failure, up to `onFailureRetries` times.
    OnFailure,
    /// Restart after every termination, success included.
    Always,
    /// Ours, from the official Apache Spark operator: restart only after a failure of the
    /// infrastructure (eviction, node loss, image pull, driver start timeout), never after the
    /// application itself failed; up to `onFailureRetries` times.
    OnInfrastructureFailure,
}

/// Per-stage timeouts, named as the official Apache Spark operator names them.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationTimeoutConfig {
    /// Longest time from submission until the driver container runs. Counts as an
    /// infrastructure failure (the cluster could not start it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub driver_start_timeout_millis: Option<i64>,
    /// Longest time from the driver container starting until the driver pod is Ready. Counts as
    /// an application failure (the Spark session did not come up).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub driver_ready_timeout_millis: Option<i64>,
}

/// What the driver and executor pods have in common.
///
/// The large Kubernetes structs that few applications set are boxed: unset they cost a pointer
/// rather than their whole size in every cached application (the watch cache holds thousands).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SparkPodSpec {
    /// A pod template for what Spark configuration cannot express. Kept schemaless, as the
    /// widely used operator keeps it: the submitter validates it against the Kubernetes schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "preserve_unknown_object")]
    pub template: Option<Value>,
    /// Cores maps to `spark.driver.cores` or `spark.executor.cores`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub cores: Option<i32>,
    /// CoreLimit is a hard limit on CPU cores for the pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub core_limit: Option<String>,
    /// Memory is the amount of memory to request for the pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<String>,
    /// MemoryLimit overrides the memory limit of the pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_limit: Option<String>,
    /// MemoryOverhead is the off-heap memory to allocate, in MiB unless a unit is given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_overhead: Option<String>,
    /// GPU specifies a GPU requirement for the pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<GpuSpec>,
    /// Image is the container image to use. Overrides `spec.image`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// ConfigMaps to mount into the pod.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub config_maps: Vec<NamePath>,
    /// Secrets to mount into the pod.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<SecretInfo>,
    /// Env carries the environment variables to add to the Spark container.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<EnvVar>,
    /// EnvVars carries environment variables. Deprecated: use `env`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env_vars: BTreeMap<String, String>,
    /// EnvFrom is a list of sources to populate environment variables of the Spark container.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env_from: Vec<EnvFromSource>,
    /// EnvSecretKeyRefs maps environment variable names to secret keys. Deprecated: use `env`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env_secret_key_refs: BTreeMap<String, NameKey>,
    /// Labels to add to the pod.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations to add to the pod.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// VolumeMounts of `spec.volumes` into the Spark container.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volume_mounts: Vec<VolumeMount>,
    /// Affinity of the pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Box<Affinity>>,
    /// Tolerations of the pod.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
    /// PodSecurityContext of the pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_security_context: Option<Box<PodSecurityContext>>,
    /// SecurityContext of the Spark container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_context: Option<Box<SecurityContext>>,
    /// SchedulerName of the pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduler_name: Option<String>,
    /// Sidecars run alongside the Spark container.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sidecars: Vec<Container>,
    /// InitContainers run to completion before the Spark container.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub init_containers: Vec<Container>,
    /// HostNetwork requests host networking for the pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_network: Option<bool>,
    /// NodeSelector of this pod only.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// DNS settings of the pod.
    #[serde(rename = "dnsConfig", default, skip_serializing_if = "Option::is_none")]
    pub dns_config: Option<Box<PodDNSConfig>>,
    /// Termination grace period of the pod, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_grace_period_seconds: Option<i64>,
    /// ServiceAccount the pod runs as.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account: Option<String>,
    /// HostAliases of the pod.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub host_aliases: Vec<HostAlias>,
    /// ShareProcessNamespace of the pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share_process_namespace: Option<bool>,
}

/// The driver: the common pod fields plus driver-only settings.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DriverSpec {
    #[serde(flatten)]
    pub pod: SparkPodSpec,
    /// PodName is the name of the driver pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(
        pattern = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
    ))]
    pub pod_name: Option<String>,
    /// CoreRequest maps to `spark.kubernetes.driver.request.cores`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub core_request: Option<String>,
    /// JavaOptions maps to `spark.driver.extraJavaOptions`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub java_options: Option<String>,
    /// Lifecycle of the driver container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifecycle: Option<Box<Lifecycle>>,
    /// KubernetesMaster the driver uses (`spark.kubernetes.driver.master`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes_master: Option<String>,
    /// Annotations of the driver's headless service.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub service_annotations: BTreeMap<String, String>,
    /// Labels of the driver's headless service.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub service_labels: BTreeMap<String, String>,
    /// Ports of the driver container.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<Port>,
    /// PriorityClassName of the driver pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,
}

/// The executors: the common pod fields plus executor-only settings.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExecutorSpec {
    #[serde(flatten)]
    pub pod: SparkPodSpec,
    /// Instances is the number of executors (`spark.executor.instances`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub instances: Option<i32>,
    /// CoreRequest maps to `spark.kubernetes.executor.request.cores`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub core_request: Option<String>,
    /// JavaOptions maps to `spark.executor.extraJavaOptions`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub java_options: Option<String>,
    /// Lifecycle of the executor container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifecycle: Option<Box<Lifecycle>>,
    /// DeleteOnTermination maps to `spark.kubernetes.executor.deleteOnTermination`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_on_termination: Option<bool>,
    /// Ports of the executor container.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<Port>,
    /// PriorityClassName of the executor pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,
}

/// Dependencies: comma-joined into `--jars`, `--files`, ... .
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Dependencies {
    /// JAR files the application depends on (`--jars`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub jars: Vec<String>,
    /// Files the application depends on (`--files`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<String>,
    /// Python files the application depends on (`--py-files`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub py_files: Vec<String>,
    /// Maven coordinates `groupId:artifactId:version` (`--packages`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub packages: Vec<String>,
    /// `groupId:artifactId` to exclude when resolving packages (`--exclude-packages`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude_packages: Vec<String>,
    /// Additional repositories to resolve packages from (`--repositories`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub repositories: Vec<String>,
    /// Archives extracted into the working directory of each executor (`--archives`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub archives: Vec<String>,
}

/// Dynamic allocation of executors.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DynamicAllocation {
    /// Enabled turns dynamic allocation on.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub enabled: bool,
    /// Initial number of executors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial_executors: Option<i32>,
    /// Lower bound of the number of executors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_executors: Option<i32>,
    /// Upper bound of the number of executors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_executors: Option<i32>,
    /// Shuffle file tracking, so no external shuffle service is needed. Default true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shuffle_tracking_enabled: Option<bool>,
    /// Timeout in milliseconds for executors holding shuffle data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shuffle_tracking_timeout: Option<i64>,
}

/// A ConfigMap and where to mount it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct NamePath {
    pub name: String,
    pub path: String,
}

/// A Secret, where to mount it, and what kind of credentials it holds.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretInfo {
    pub name: String,
    pub path: String,
    pub secret_type: SecretType,
}

/// The kind of a mounted secret; two kinds also set an environment variable.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum SecretType {
    /// A GCP service account key: sets `GOOGLE_APPLICATION_CREDENTIALS`.
    GCPServiceAccount,
    /// A Hadoop delegation token: sets `HADOOP_TOKEN_FILE_LOCATION`.
    HadoopDelegationToken,
    /// No special handling.
    Generic,
}

/// The name and key of a secret.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct NameKey {
    pub name: String,
    pub key: String,
}

/// A container port.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Port {
    pub name: String,
    pub protocol: String,
    pub container_port: i32,
}

/// A GPU requirement.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct GpuSpec {
    /// Resource name, such as `nvidia.com/gpu`.
    pub name: String,
    /// How many.
    pub quantity: i64,
}

/// Prometheus and metrics settings.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MonitoringSpec {
    pub expose_driver_metrics: bool,
    pub expose_executor_metrics: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics_properties: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics_properties_file: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prometheus: Option<PrometheusSpec>,
}

/// The Prometheus JMX exporter.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PrometheusSpec {
    pub jmx_exporter_jar: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1024, max = 49151))]
    pub port: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_file: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configuration: Option<String>,
}

/// Batch scheduler settings.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BatchSchedulerConfiguration {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub resources: BTreeMap<String, Quantity>,
}

/// The Spark UI's Service and Ingress.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SparkUIConfiguration {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_port: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_port_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_type: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub service_annotations: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub service_labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub ingress_annotations: BTreeMap<String, String>,
    #[serde(rename = "ingressTLS", default, skip_serializing_if = "Vec::is_empty")]
    pub ingress_tls: Vec<IngressTLS>,
}

/// A Service and Ingress for one driver port.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DriverIngressConfiguration {
    pub service_port: Option<i32>,
    pub service_port_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_type: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub service_annotations: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub service_labels: BTreeMap<String, String>,
    #[serde(
        rename = "ingressURLFormat",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub ingress_url_format: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub ingress_annotations: BTreeMap<String, String>,
    #[serde(rename = "ingressTLS", default, skip_serializing_if = "Vec::is_empty")]
    pub ingress_tls: Vec<IngressTLS>,
}

/// An object whose fields the API server keeps unvalidated.
pub(super) fn preserve_unknown_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
    })
}
