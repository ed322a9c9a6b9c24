//! SparkConnect, as the widely used operator builds it (its
//! `internal/controller/sparkconnect/`), in pure functions: from a [`SparkConnect`] to the
//! ConfigMap of the executor pod template, the server pod and its Service; from what was observed
//! of the server pod and the executors to the status.
//!
//! The server pod runs Spark's `start-connect-server.sh` through `bash -c`, in client mode
//! against the API server (`--master`, the operator's own), with the pod's IP as the driver
//! host: its Spark asks the API server for executors itself, with the pod's service account, as
//! a Spark driver does. The operator creates the three objects, owned by the SparkConnect, and
//! reports; it never creates executors.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapVolumeSource, Container, EnvVar, EnvVarSource, ExecAction, KeyToPath,
    Lifecycle, LifecycleHandler, ObjectFieldSelector, Pod, PodSpec, PodTemplateSpec, Probe,
    Service, ServicePort, ServiceSpec, TCPSocketAction, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, OwnerReference, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::ObjectMeta;
use kube::{Resource, ResourceExt};
use submission::meta::containers::{DRIVER as DRIVER_CONTAINER, EXECUTOR as EXECUTOR_CONTAINER};
use submission::meta::labels::{EXECUTOR_ROLE, SPARK_ROLE, SPARK_VERSION};
use thiserror::Error;

use crate::crd::{SparkConnect, SparkConnectState, SparkConnectStatus};
use crate::labels::{
    CONNECT_NAME, CONNECT_SERVER_ROLE, CREATED_BY_LABEL, LAUNCHED_BY_SPARK_OPERATOR,
};
use crate::names::DRIVER_POD_NAME_CONF;

/// The Spark Connect server's gRPC port.
pub const CONNECT_PORT: i32 = 15002;
/// The driver's RPC port (`spark.driver.port`).
pub const DRIVER_RPC_PORT: i32 = 7078;
/// The driver's block manager port (`spark.driver.blockManager.port`).
pub const BLOCK_MANAGER_PORT: i32 = 7079;
/// The Spark UI's port.
pub const WEB_UI_PORT: i32 = 4040;

/// The ConfigMap key of the executor pod template, and its file name in the server pod.
pub const EXECUTOR_TEMPLATE_FILE: &str = "executor-pod-template.yaml";
/// Where the server pod has the executor pod template.
pub const EXECUTOR_TEMPLATE_PATH: &str = "/tmp/spark/executor-pod-template.yaml";
/// The volume of the ConfigMap in the server pod.
pub const CONF_VOLUME: &str = "spark-conf";

/// The condition type the status carries.
pub const SERVER_POD_READY: &str = "ServerPodReady";
/// Its reasons.
pub const REASON_READY: &str = "ServerPodReady";
pub const REASON_NOT_READY: &str = "ServerPodNotReady";

/// Why a SparkConnect's objects cannot be built: the spec, not the cluster, is at fault.
#[derive(Debug, Error)]
pub enum BuildError {
    #[error("the SparkConnect has no name, namespace or uid")]
    ReadMetadata,
    #[error("image is not specified for the {role}: set spec.image or the {role} template's image")]
    NoImage { role: &'static str },
    #[error("spec.{role}.template is not a pod template")]
    ParseTemplate {
        role: &'static str,
        #[source]
        source: serde_json::Error,
    },
    #[error("spec.server.service is not a Service")]
    ParseService(#[source] serde_json::Error),
    #[error("cannot write the executor pod template as YAML")]
    RenderTemplate(#[source] yaml_serde::Error),
}

impl BuildError {
    /// A stable name for logs, metrics and tests.
    pub fn kind(&self) -> &'static str {
        match self {
            BuildError::ReadMetadata => "read_metadata",
            BuildError::NoImage { .. } => "no_image",
            BuildError::ParseTemplate { .. } => "parse_template",
            BuildError::ParseService(_) => "parse_service",
            BuildError::RenderTemplate(_) => "render_template",
        }
    }
}

/// The objects of one SparkConnect, in the order they are created: the pod mounts the
/// ConfigMap, the Service selects the pod.
#[derive(Debug, Clone, PartialEq)]
pub struct Objects {
    pub config_map: ConfigMap,
    pub server: Pod,
    pub service: Service,
}

/// The ConfigMap's name.
pub fn config_map_name(conn: &SparkConnect) -> String {
    format!("{}-conf", conn.name_any())
}

/// The server pod's name (also Spark's `spark.kubernetes.driver.pod.name`).
pub fn server_pod_name(conn: &SparkConnect) -> String {
    format!("{}-server", conn.name_any())
}

/// The server Service's name: the one `spec.server.service` names, else `<name>-server`.
pub fn service_name(conn: &SparkConnect) -> String {
    conn.spec
        .server
        .service
        .as_ref()
        .and_then(|s| s.pointer("/metadata/name"))
        .and_then(serde_json::Value::as_str)
        .filter(|name| !name.is_empty())
        .map_or_else(|| server_pod_name(conn), str::to_owned)
}

/// Labels of every object the operator creates for `conn`.
pub fn common_labels(conn: &SparkConnect) -> BTreeMap<String, String> {
    BTreeMap::from([
        (CREATED_BY_LABEL.to_owned(), "true".to_owned()),
        (CONNECT_NAME.to_owned(), conn.name_any()),
    ])
}

/// Labels of the server pod, which its Service selects.
pub fn server_selector(conn: &SparkConnect) -> BTreeMap<String, String> {
    BTreeMap::from([
        (LAUNCHED_BY_SPARK_OPERATOR.to_owned(), "true".to_owned()),
        (CONNECT_NAME.to_owned(), conn.name_any()),
        (SPARK_ROLE.to_owned(), CONNECT_SERVER_ROLE.to_owned()),
        (SPARK_VERSION.to_owned(), conn.spec.spark_version.clone()),
    ])
}

/// Whether `pod` is an executor of the SparkConnect named `name` (Spark labels its executors
/// with the labels the server's conf asks for).
pub fn is_executor_of(name: &str, pod: &Pod) -> bool {
    let labels = pod.labels();
    labels.get(CONNECT_NAME).map(String::as_str) == Some(name)
        && labels.get(LAUNCHED_BY_SPARK_OPERATOR).map(String::as_str) == Some("true")
        && labels.get(SPARK_ROLE).map(String::as_str) == Some(EXECUTOR_ROLE)
}

/// Builds the three objects; `master` is the `k8s://…` URL the server's Spark talks to.
pub fn build(conn: &SparkConnect, master: &str) -> Result<Objects, BuildError> {
    let owner = owner_reference(conn)?;
    let namespace = conn.namespace().ok_or(BuildError::ReadMetadata)?;
    Ok(Objects {
        config_map: config_map(conn, &namespace, &owner)?,
        server: server_pod(conn, master, &namespace, &owner)?,
        service: service(conn, &namespace, &owner)?,
    })
}

fn owner_reference(conn: &SparkConnect) -> Result<OwnerReference, BuildError> {
    Ok(OwnerReference {
        api_version: SparkConnect::api_version(&()).into_owned(),
        kind: SparkConnect::kind(&()).into_owned(),
        name: conn.metadata.name.clone().ok_or(BuildError::ReadMetadata)?,
        uid: conn.metadata.uid.clone().ok_or(BuildError::ReadMetadata)?,
        controller: Some(true),
        block_owner_deletion: Some(true),
    })
}

fn meta(name: String, namespace: &str, owner: &OwnerReference) -> ObjectMeta {
    ObjectMeta {
        name: Some(name),
        namespace: Some(namespace.to_owned()),
        owner_references: Some(vec![owner.clone()]),
        ..ObjectMeta::default()
    }
}

fn template(
    value: Option<&serde_json::Value>,
    role: &'static str,
) -> Result<Option<PodTemplateSpec>, BuildError> {
    value
        .map(|v| {
            serde_json::from_value(v.clone())
                .map_err(|source| BuildError::ParseTemplate { role, source })
        })
        .transpose()
}

/// The ConfigMap holding the executor pod template, as the server's Spark reads it.
fn config_map(
    conn: &SparkConnect,
    namespace: &str,
    owner: &OwnerReference,
) -> Result<ConfigMap, BuildError> {
    // The raw template, so fields newer than our Kubernetes types reach Spark too. The key is
    // written even without a template: the pod mounts it by subPath.
    let text = yaml_serde::to_string(&conn.spec.executor.pod.template)
        .map_err(BuildError::RenderTemplate)?;
    let mut metadata = meta(config_map_name(conn), namespace, owner);
    metadata.labels = Some(common_labels(conn));
    Ok(ConfigMap {
        metadata,
        data: Some(BTreeMap::from([(EXECUTOR_TEMPLATE_FILE.to_owned(), text)])),
        ..ConfigMap::default()
    })
}

/// The index of the container named `name`, else the first.
fn container_index(containers: &[Container], name: &str) -> usize {
    containers.iter().position(|c| c.name == name).unwrap_or(0)
}

/// The image of the executors: `spec.image`, unless the executor template's Spark container
/// names one.
fn executor_image(conn: &SparkConnect) -> Result<String, BuildError> {
    let from_template = template(conn.spec.executor.pod.template.as_ref(), "executor")?
        .and_then(|t| t.spec)
        .and_then(|spec| {
            let index = container_index(&spec.containers, EXECUTOR_CONTAINER);
            spec.containers.into_iter().nth(index)?.image
        })
        .filter(|image| !image.is_empty());
    from_template
        .or_else(|| conn.spec.image.clone().filter(|i| !i.is_empty()))
        .ok_or(BuildError::NoImage { role: "executor" })
}

/// `'key=value'` for bash, whatever the value holds.
fn quoted_conf(key: &str, value: &str) -> String {
    format!("'{}'", format!("{key}={value}").replace('\'', r#"'"'"'"#))
}

/// The `start-connect-server.sh` command line the server container runs through `bash -c`.
pub fn server_args(conn: &SparkConnect, master: &str) -> Result<Vec<String>, BuildError> {
    let name = conn.name_any();
    let namespace = conn.namespace().ok_or(BuildError::ReadMetadata)?;
    let executor_image = executor_image(conn)?;
    let mut args: Vec<String> = vec![
        "${SPARK_HOME}/sbin/start-connect-server.sh".into(),
        "--master".into(),
        quoted_value(master),
    ];
    let mut conf = |key: &str, value: &str| {
        args.push("--conf".into());
        args.push(quoted_conf(key, value));
    };
    conf("spark.kubernetes.namespace", &namespace);
    conf("spark.kubernetes.container.image", &executor_image);
    conf("spark.kubernetes.executor.container.image", &executor_image);
    // The user's confs first, so that what the operator sets below wins (the last --conf does).
    for (key, value) in conn.spec.spark_conf.iter().flatten() {
        if key != DRIVER_POD_NAME_CONF {
            conf(key, value);
        }
    }
    for (key, value) in conn.spec.hadoop_conf.iter().flatten() {
        match key.strip_prefix("spark.hadoop.") {
            Some(_) => conf(key, value),
            None => conf(&format!("spark.hadoop.{key}"), value),
        }
    }
    // The server is the driver.
    let driver_label = |key: &str| format!("spark.kubernetes.driver.label.{key}");
    conf(&driver_label(LAUNCHED_BY_SPARK_OPERATOR), "true");
    conf(&driver_label(CONNECT_NAME), &name);
    for (key, value) in conn.labels() {
        conf(&driver_label(key), value);
    }
    if let Some(cores) = conn.spec.server.pod.cores {
        conf("spark.driver.cores", &cores.to_string());
    }
    if let Some(memory) = &conn.spec.server.pod.memory {
        conf("spark.driver.memory", memory);
    }
    conf("spark.driver.bindAddress", "0.0.0.0");
    // The pod's IP, in brackets when it is IPv6: evaluated by bash in the container.
    args.push("--conf".into());
    args.push(
        r#"spark.driver.host=$(host=${POD_IP}; if [[ $host == *:* ]] && [[ $host != \[* ]]; then echo "[$host]"; else echo "$host"; fi)"#
            .into(),
    );
    let mut conf = |key: &str, value: &str| {
        args.push("--conf".into());
        args.push(quoted_conf(key, value));
    };
    // Spark 4.1 and newer hand executors the driver's bind address unless told not to; here
    // that is 0.0.0.0, so the host above must be what they dial. Older Sparks ignore it.
    conf("spark.kubernetes.executor.useDriverPodIP", "false");
    conf("spark.driver.port", &DRIVER_RPC_PORT.to_string());
    conf(
        "spark.driver.blockManager.port",
        &BLOCK_MANAGER_PORT.to_string(),
    );
    conf(DRIVER_POD_NAME_CONF, &server_pod_name(conn));
    // Its executors.
    let executor_label = |key: &str| format!("spark.kubernetes.executor.label.{key}");
    conf(&executor_label(LAUNCHED_BY_SPARK_OPERATOR), "true");
    conf(&executor_label(CONNECT_NAME), &name);
    for (key, value) in conn.labels() {
        conf(&executor_label(key), value);
    }
    let executor = &conn.spec.executor;
    if let Some(instances) = executor.instances {
        conf("spark.executor.instances", &instances.to_string());
    }
    if let Some(cores) = executor.pod.cores {
        conf("spark.executor.cores", &cores.to_string());
    }
    if let Some(memory) = &executor.pod.memory {
        conf("spark.executor.memory", memory);
    }
    conf("spark.kubernetes.executor.podNamePrefix", &name);
    if executor.pod.template.is_some() {
        conf(
            "spark.kubernetes.executor.podTemplateFile",
            EXECUTOR_TEMPLATE_PATH,
        );
        conf(
            "spark.kubernetes.executor.podTemplateContainerName",
            EXECUTOR_CONTAINER,
        );
    }
    if let Some(dynamic) = conn.spec.dynamic_allocation.as_ref().filter(|d| d.enabled) {
        conf("spark.dynamicAllocation.enabled", "true");
        if let Some(n) = dynamic.initial_executors {
            conf("spark.dynamicAllocation.initialExecutors", &n.to_string());
        }
        if let Some(n) = dynamic.min_executors {
            conf("spark.dynamicAllocation.minExecutors", &n.to_string());
        }
        if let Some(n) = dynamic.max_executors {
            conf("spark.dynamicAllocation.maxExecutors", &n.to_string());
        }
        conf(
            "spark.dynamicAllocation.shuffleTracking.enabled",
            &dynamic.shuffle_tracking_enabled.unwrap_or(true).to_string(),
        );
        if let Some(timeout) = dynamic.shuffle_tracking_timeout {
            conf(
                "spark.dynamicAllocation.shuffleTracking.timeout",
                &timeout.to_string(),
            );
        }
    }
    Ok(args)
}

fn quoted_value(value: &str) -> String {
    format!("'{}'", value.replace('\'', r#"'"'"'"#))
}

fn tcp_probe(initial_delay: Option<i32>, failure_threshold: i32) -> Probe {
    Probe {
        tcp_socket: Some(TCPSocketAction {
            port: IntOrString::Int(CONNECT_PORT),
            host: None,
        }),
        initial_delay_seconds: initial_delay,
        period_seconds: Some(10),
        timeout_seconds: Some(1),
        failure_threshold: Some(failure_threshold),
        ..Probe::default()
    }
}

/// The server pod: the server template as given, its Spark container running the server.
fn server_pod(
    conn: &SparkConnect,
    master: &str,
    namespace: &str,
    owner: &OwnerReference,
) -> Result<Pod, BuildError> {
    let template = template(conn.spec.server.pod.template.as_ref(), "server")?.unwrap_or_default();
    let template_meta = template.metadata.unwrap_or_default();
    let mut spec: PodSpec = template.spec.unwrap_or_default();
    if spec.containers.is_empty() {
        spec.containers.push(Container {
            name: DRIVER_CONTAINER.to_owned(),
            ..Container::default()
        });
    }
    let index = container_index(&spec.containers, DRIVER_CONTAINER);
    let container = &mut spec.containers[index];
    if container.image.as_deref().is_none_or(str::is_empty) {
        container.image = Some(
            conn.spec
                .image
                .clone()
                .filter(|i| !i.is_empty())
                .ok_or(BuildError::NoImage { role: "server" })?,
        );
    }
    container.command = Some(vec!["bash".into(), "-c".into()]);
    container.args = Some(vec![server_args(conn, master)?.join(" ")]);
    // The template's own probes win.
    if container.startup_probe.is_none() {
        container.startup_probe = Some(tcp_probe(Some(5), 30));
    }
    if container.readiness_probe.is_none() {
        container.readiness_probe = Some(tcp_probe(None, 3));
    }
    let env = container.env.get_or_insert_with(Vec::new);
    env.push(EnvVar {
        name: "POD_IP".into(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: "status.podIP".into(),
                api_version: None,
            }),
            ..EnvVarSource::default()
        }),
        value: None,
    });
    // The server stays in the foreground: it is the container's process.
    env.push(EnvVar {
        name: "SPARK_NO_DAEMONIZE".into(),
        value: Some("true".into()),
        value_from: None,
    });
    container
        .volume_mounts
        .get_or_insert_with(Vec::new)
        .push(VolumeMount {
            name: CONF_VOLUME.into(),
            sub_path: Some(EXECUTOR_TEMPLATE_FILE.into()),
            mount_path: EXECUTOR_TEMPLATE_PATH.into(),
            read_only: Some(true),
            ..VolumeMount::default()
        });
    container.lifecycle = Some(Lifecycle {
        pre_stop: Some(LifecycleHandler {
            exec: Some(ExecAction {
                command: Some(vec![
                    "bash".into(),
                    "-c".into(),
                    "${SPARK_HOME}/sbin/stop-connect-server.sh".into(),
                ]),
            }),
            ..LifecycleHandler::default()
        }),
        ..Lifecycle::default()
    });
    spec.volumes.get_or_insert_with(Vec::new).push(Volume {
        name: CONF_VOLUME.into(),
        config_map: Some(ConfigMapVolumeSource {
            name: config_map_name(conn),
            items: Some(vec![KeyToPath {
                key: EXECUTOR_TEMPLATE_FILE.into(),
                path: EXECUTOR_TEMPLATE_FILE.into(),
                mode: None,
            }]),
            ..ConfigMapVolumeSource::default()
        }),
        ..Volume::default()
    });
    let mut metadata = meta(server_pod_name(conn), namespace, owner);
    let mut labels = template_meta.labels.unwrap_or_default();
    labels.extend(server_selector(conn));
    metadata.labels = Some(labels);
    metadata.annotations = template_meta.annotations;
    Ok(Pod {
        metadata,
        spec: Some(spec),
        status: None,
    })
}

fn port(name: &str, number: i32, app_protocol: &str) -> ServicePort {
    ServicePort {
        name: Some(name.to_owned()),
        port: number,
        target_port: Some(IntOrString::Int(number)),
        protocol: Some("TCP".to_owned()),
        app_protocol: Some(app_protocol.to_owned()),
        ..ServicePort::default()
    }
}

/// The server's Service: `spec.server.service` if given (its namespace ignored), with the
/// server's ports and selector.
fn service(
    conn: &SparkConnect,
    namespace: &str,
    owner: &OwnerReference,
) -> Result<Service, BuildError> {
    let given: Service = conn
        .spec
        .server
        .service
        .clone()
        .map(serde_json::from_value)
        .transpose()
        .map_err(BuildError::ParseService)?
        .unwrap_or_default();
    let mut metadata = meta(service_name(conn), namespace, owner);
    let mut labels = given.metadata.labels.unwrap_or_default();
    labels.extend(common_labels(conn));
    metadata.labels = Some(labels);
    metadata.annotations = given.metadata.annotations;
    let mut spec: ServiceSpec = given.spec.unwrap_or_default();
    spec.ports = Some(vec![
        port("driver-rpc", DRIVER_RPC_PORT, "tcp"),
        port("blockmanager", BLOCK_MANAGER_PORT, "tcp"),
        port("web-ui", WEB_UI_PORT, "http"),
        port("spark-connect-server", CONNECT_PORT, "grpc"),
    ]);
    spec.selector
        .get_or_insert_with(BTreeMap::new)
        .extend(server_selector(conn));
    Ok(Service {
        metadata,
        spec: Some(spec),
        status: None,
    })
}

/// What the controller observed of a SparkConnect's pods.
#[derive(Debug, Default)]
pub struct Observed<'a> {
    /// The server pod, when it exists.
    pub server: Option<&'a Pod>,
    /// Its executors ([`is_executor_of`]).
    pub executors: Vec<&'a Pod>,
    /// The Service exists (created now or before).
    pub service: bool,
    /// Why the objects could not be built, if they could not.
    pub build_error: Option<String>,
}

fn pod_phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending")
}

fn pod_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

/// Sets the condition of `new`'s type: its transition time moves only when its status does.
fn set_condition(conditions: &mut Vec<Condition>, mut new: Condition) {
    match conditions.iter_mut().find(|c| c.type_ == new.type_) {
        Some(old) => {
            if old.status == new.status {
                new.last_transition_time = old.last_transition_time.clone();
            }
            *old = new;
        }
        None => conditions.push(new),
    }
}

/// The status from what was observed, or `None` when it would not change (nothing to write).
/// `lastUpdateTime` moves only with a change.
pub fn status(
    conn: &SparkConnect,
    observed: &Observed<'_>,
    now: Timestamp,
) -> Option<SparkConnectStatus> {
    let old = conn.status.clone().unwrap_or_default();
    let mut new = old.clone();
    if new.start_time.is_none() {
        new.start_time = Some(Time(now));
    }
    let (state, ready, message) = match (&observed.build_error, observed.server) {
        (Some(error), _) => (SparkConnectState::Failed, false, error.clone()),
        (None, None) => (
            SparkConnectState::Provisioning,
            false,
            "Server pod is not created yet".to_owned(),
        ),
        (None, Some(pod)) => {
            let pod_message = pod
                .status
                .as_ref()
                .and_then(|s| s.message.clone())
                .unwrap_or_default();
            if matches!(pod_phase(pod), "Failed" | "Succeeded") {
                (
                    SparkConnectState::Failed,
                    false,
                    format!("Server pod has ended: {pod_message}"),
                )
            } else if pod_ready(pod) {
                (
                    SparkConnectState::Ready,
                    true,
                    "Server pod is ready".to_owned(),
                )
            } else {
                (
                    SparkConnectState::NotReady,
                    false,
                    format!("Server pod is not ready: {pod_message}"),
                )
            }
        }
    };
    new.state = state;
    set_condition(
        &mut new.conditions,
        Condition {
            type_: SERVER_POD_READY.to_owned(),
            status: if ready { "True" } else { "False" }.to_owned(),
            reason: if ready {
                REASON_READY
            } else {
                REASON_NOT_READY
            }
            .to_owned(),
            message,
            last_transition_time: Time(now),
            observed_generation: conn.metadata.generation,
        },
    );
    if let Some(pod) = observed.server {
        new.server.pod_name = pod.name_any();
        new.server.pod_ip = pod
            .status
            .as_ref()
            .and_then(|s| s.pod_ip.clone())
            .unwrap_or_default();
    }
    if observed.service {
        new.server.service_name = service_name(conn);
    }
    let mut executors = BTreeMap::new();
    for pod in &observed.executors {
        *executors
            .entry(pod_phase(pod).to_lowercase())
            .or_insert(0_i64) += 1;
    }
    new.executors = executors;
    // `new` carries the old update time still: equal means nothing happened.
    if new == old {
        return None;
    }
    new.last_update_time = Some(Time(now));
    Some(new)
}

#[cfg(test)]
mod tests;
