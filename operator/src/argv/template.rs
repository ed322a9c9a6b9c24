//! The inline pod templates: the user's `template` (or an empty pod with Spark's container), with
//! what the widely used operator's mutating webhook patches into Spark's pods applied on top, and
//! an ownerReference to the SparkApplication. Spark loads a template as the base of the pod and
//! layers its own settings over it; the webhook patched after Spark, so the two fields Spark also
//! sets on the driver (the memory limit, `SPARK_CONF_DIR`) go to the submitter as its own confs
//! (see `super::build_submission`), and the executors' memory limit, which the driver sets, is
//! reported as unsupported.

use k8s_openapi::api::core::v1::Lifecycle;
use serde::Serialize;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use super::{BuildArgsError, Role};
use crate::crd::{Port, SparkApplicationSpec, SparkPodSpec};
use crate::labels;

/// Where the webhook mounts `spec.sparkConfigMap`, and the `SPARK_CONF_DIR` it sets.
pub(super) const SPARK_CONFIG_MAP_DIR: &str = "/etc/spark/conf";
const SPARK_CONFIG_MAP_VOLUME: &str = "spark-configmap-volume";
/// Where the webhook mounts `spec.hadoopConfigMap`. Spark mounts it too, at `/opt/hadoop/conf`,
/// with `HADOOP_CONF_DIR` pointing there (`spark.kubernetes.hadoop.configMapName`).
const HADOOP_CONFIG_MAP_DIR: &str = "/etc/hadoop/conf";
const HADOOP_CONFIG_MAP_VOLUME: &str = "hadoop-configmap-volume";

/// The SparkApplication the pods belong to.
pub(super) struct Owner<'a> {
    pub name: &'a str,
    pub uid: &'a str,
}

/// Role-specific fields that live outside `SparkPodSpec`.
struct RoleFields<'a> {
    role: Role,
    pod: &'a SparkPodSpec,
    lifecycle: Option<&'a Lifecycle>,
    ports: &'a [Port],
    priority_class_name: Option<&'a str>,
}

/// The driver's template: owned by the SparkApplication as its controller, so deleting the app
/// deletes the driver (and the driver's dependents with it).
pub(super) fn driver(
    spec: &SparkApplicationSpec,
    owner: &Owner<'_>,
) -> Result<Value, BuildArgsError> {
    let fields = RoleFields {
        role: Role::Driver,
        pod: &spec.driver.pod,
        lifecycle: spec.driver.lifecycle.as_deref(),
        ports: &spec.driver.ports,
        priority_class_name: spec.driver.priority_class_name.as_deref(),
    };
    build(spec, &fields, owner_reference(owner, true))
}

/// The executors' template: a non-controller ownerReference, so that other controllers (Kueue)
/// can see which application the executors belong to while the driver stays their controller.
pub(super) fn executor(
    spec: &SparkApplicationSpec,
    owner: &Owner<'_>,
) -> Result<Value, BuildArgsError> {
    let fields = RoleFields {
        role: Role::Executor,
        pod: &spec.executor.pod,
        lifecycle: spec.executor.lifecycle.as_deref(),
        ports: &spec.executor.ports,
        priority_class_name: spec.executor.priority_class_name.as_deref(),
    };
    build(spec, &fields, owner_reference(owner, false))
}

fn owner_reference(owner: &Owner<'_>, controller: bool) -> Value {
    let mut reference = json!({
        "apiVersion": "sparkoperator.k8s.io/v1beta2",
        "kind": "SparkApplication",
        "name": owner.name,
        "uid": owner.uid,
    });
    if controller {
        reference["controller"] = json!(true);
        reference["blockOwnerDeletion"] = json!(true);
    }
    reference
}

fn encode<T: Serialize>(field: &'static str, value: &T) -> Result<Value, BuildArgsError> {
    serde_json::to_value(value).map_err(|source| BuildArgsError::Encode { field, source })
}

/// `object[key]` as an object, created when absent.
fn object_at<'a>(
    object: &'a mut Map<String, Value>,
    key: &str,
    role: Role,
    reason: &'static str,
) -> Result<&'a mut Map<String, Value>, BuildArgsError> {
    object
        .entry(key)
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .ok_or(BuildArgsError::InvalidTemplate { role, reason })
}

/// `object[key]` as an array, created when absent.
fn array_at<'a>(
    object: &'a mut Map<String, Value>,
    key: &str,
    role: Role,
    reason: &'static str,
) -> Result<&'a mut Vec<Value>, BuildArgsError> {
    object
        .entry(key)
        .or_insert_with(|| Value::Array(Vec::new()))
        .as_array_mut()
        .ok_or(BuildArgsError::InvalidTemplate { role, reason })
}

fn build(
    spec: &SparkApplicationSpec,
    fields: &RoleFields<'_>,
    owner_reference: Value,
) -> Result<Value, BuildArgsError> {
    let role = fields.role;
    let pod = fields.pod;
    let mut template = match &pod.template {
        Some(template) => template.clone(),
        None => json!({}),
    };
    let root = template
        .as_object_mut()
        .ok_or(BuildArgsError::InvalidTemplate {
            role,
            reason: "it is not an object",
        })?;

    // Metadata: the owner, and the pod's labels and annotations (Spark also gets them as confs;
    // carrying them here too keeps them on the pod whatever the submitter does with confs).
    let metadata = object_at(root, "metadata", role, "metadata is not an object")?;
    let owners = array_at(
        metadata,
        "ownerReferences",
        role,
        "metadata.ownerReferences is not a list",
    )?;
    if !owners.contains(&owner_reference) {
        owners.push(owner_reference);
    }
    for (key, map) in [("labels", &pod.labels), ("annotations", &pod.annotations)] {
        if map.is_empty() {
            continue;
        }
        let target = object_at(
            metadata,
            key,
            role,
            "metadata labels or annotations are not a map",
        )?;
        for (k, v) in map {
            target.insert(k.clone(), Value::String(v.clone()));
        }
    }

    let pod_spec = object_at(root, "spec", role, "spec is not an object")?;
    let template_volumes: Vec<String> = pod_spec
        .get("volumes")
        .and_then(Value::as_array)
        .map(|volumes| {
            volumes
                .iter()
                .filter_map(|v| v.get("name").and_then(Value::as_str).map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();

    // The Spark container: the one Spark names, else the first, as the webhook picks it; a
    // template without containers gets Spark's.
    let containers = array_at(
        pod_spec,
        "containers",
        role,
        "spec.containers is not a list",
    )?;
    let wanted: &[&str] = match role {
        Role::Driver => &[labels::DRIVER_CONTAINER],
        Role::Executor => &[
            labels::LEGACY_EXECUTOR_CONTAINER,
            labels::EXECUTOR_CONTAINER,
        ],
    };
    if containers.is_empty() {
        let name = match role {
            Role::Driver => labels::DRIVER_CONTAINER,
            Role::Executor => labels::EXECUTOR_CONTAINER,
        };
        containers.push(json!({ "name": name }));
    }
    let index = containers
        .iter()
        .position(|c| {
            c.get("name")
                .and_then(Value::as_str)
                .is_some_and(|n| wanted.contains(&n))
        })
        .unwrap_or(0);

    let mut new_volumes: Vec<Value> = Vec::new();
    {
        let container =
            containers[index]
                .as_object_mut()
                .ok_or(BuildArgsError::InvalidTemplate {
                    role,
                    reason: "a container is not an object",
                })?;
        let bad_container = "a container field has the wrong type";
        if !pod.env.is_empty() {
            let env = array_at(container, "env", role, bad_container)?;
            for var in &pod.env {
                env.push(encode("env", var)?);
            }
        }
        if !pod.env_from.is_empty() {
            let env_from = array_at(container, "envFrom", role, bad_container)?;
            for source in &pod.env_from {
                env_from.push(encode("envFrom", source)?);
            }
        }
        // configMaps: a volume per ConfigMap, mounted read-only.
        for config_map in &pod.config_maps {
            let volume_name = config_map_volume_name(&config_map.name);
            new_volumes.push(json!({
                "name": volume_name,
                "configMap": {"name": config_map.name},
            }));
            array_at(container, "volumeMounts", role, bad_container)?.push(json!({
                "name": volume_name,
                "mountPath": config_map.path,
                "readOnly": true,
            }));
        }
        // sparkConfigMap and hadoopConfigMap where the webhook mounts them. SPARK_CONF_DIR: the
        // executors' Spark sets none, so the template's stands; the driver's Spark sets its own
        // last, so the submitter is asked to set this one instead (`build_submission`).
        for (config_map, volume_name, dir) in [
            (
                spec.spark_config_map.as_deref(),
                SPARK_CONFIG_MAP_VOLUME,
                SPARK_CONFIG_MAP_DIR,
            ),
            (
                spec.hadoop_config_map.as_deref(),
                HADOOP_CONFIG_MAP_VOLUME,
                HADOOP_CONFIG_MAP_DIR,
            ),
        ] {
            let Some(config_map) = config_map.filter(|c| !c.is_empty()) else {
                continue;
            };
            new_volumes.push(json!({
                "name": volume_name,
                "configMap": {"name": config_map},
            }));
            array_at(container, "volumeMounts", role, bad_container)?.push(json!({
                "name": volume_name,
                "mountPath": dir,
                "readOnly": true,
            }));
        }
        if role == Role::Executor
            && spec
                .spark_config_map
                .as_deref()
                .is_some_and(|c| !c.is_empty())
        {
            array_at(container, "env", role, bad_container)?
                .push(json!({"name": "SPARK_CONF_DIR", "value": SPARK_CONFIG_MAP_DIR}));
        }
        // volumeMounts of spec.volumes, each volume added once; local dirs went to confs.
        for mount in &pod.volume_mounts {
            if mount.name.starts_with(labels::LOCAL_DIR_VOLUME_PREFIX) {
                continue;
            }
            match spec.volumes.iter().find(|v| v.name == mount.name) {
                Some(volume) => {
                    let volume = encode("volumes", volume)?;
                    if !new_volumes.contains(&volume) {
                        new_volumes.push(volume);
                    }
                }
                // A volume the user's own template defines can be mounted as it is.
                None if template_volumes.contains(&mount.name) => {}
                None => {
                    return Err(BuildArgsError::VolumeNotFound {
                        role,
                        name: mount.name.clone(),
                    });
                }
            }
            array_at(container, "volumeMounts", role, bad_container)?
                .push(encode("volumeMounts", mount)?);
        }
        if !fields.ports.is_empty() {
            let ports = array_at(container, "ports", role, bad_container)?;
            for port in fields.ports {
                ports.push(json!({
                    "name": port.name,
                    "containerPort": port.container_port,
                    "protocol": port.protocol,
                }));
            }
        }
        if let Some(gpu) = pod
            .gpu
            .as_ref()
            .filter(|g| !g.name.is_empty() && g.quantity > 0)
        {
            let resources = object_at(container, "resources", role, bad_container)?;
            object_at(resources, "limits", role, bad_container)?
                .insert(gpu.name.clone(), json!(gpu.quantity.to_string()));
        }
        if let Some(context) = &pod.security_context {
            container.insert(
                "securityContext".into(),
                encode("securityContext", context)?,
            );
        }
        if let Some(lifecycle) = fields.lifecycle {
            container.insert("lifecycle".into(), encode("lifecycle", lifecycle)?);
        }
    }

    // Sidecars after the Spark container, unless the template already has the same one.
    for sidecar in &pod.sidecars {
        let sidecar = encode("sidecars", sidecar)?;
        if !containers.iter().any(|c| same_container(c, &sidecar)) {
            containers.push(sidecar);
        }
    }
    if !pod.init_containers.is_empty() {
        let init = array_at(
            pod_spec,
            "initContainers",
            role,
            "spec.initContainers is not a list",
        )?;
        for container in &pod.init_containers {
            let container = encode("initContainers", container)?;
            if !init.iter().any(|c| same_container(c, &container)) {
                init.push(container);
            }
        }
    }
    if !new_volumes.is_empty() {
        array_at(pod_spec, "volumes", role, "spec.volumes is not a list")?.extend(new_volumes);
    }
    if pod.host_network == Some(true) {
        pod_spec.insert("hostNetwork".into(), json!(true));
        pod_spec.insert("dnsPolicy".into(), json!("ClusterFirstWithHostNet"));
    }
    if !pod.host_aliases.is_empty() {
        let aliases = array_at(
            pod_spec,
            "hostAliases",
            role,
            "spec.hostAliases is not a list",
        )?;
        for alias in &pod.host_aliases {
            aliases.push(encode("hostAliases", alias)?);
        }
    }
    if let Some(dns) = &pod.dns_config {
        pod_spec.insert("dnsConfig".into(), encode("dnsConfig", dns)?);
    }
    if let Some(class) = fields.priority_class_name.filter(|c| !c.is_empty()) {
        // A class and a numeric priority together are refused by the API server.
        pod_spec.insert("priorityClassName".into(), json!(class));
        pod_spec.remove("priority");
        pod_spec.remove("preemptionPolicy");
    }
    if let Some(scheduler) = pod.scheduler_name.as_deref().filter(|s| !s.is_empty()) {
        pod_spec.insert("schedulerName".into(), json!(scheduler));
    }
    if !pod.node_selector.is_empty() {
        let selector = object_at(
            pod_spec,
            "nodeSelector",
            role,
            "spec.nodeSelector is not a map",
        )?;
        for (k, v) in &pod.node_selector {
            selector.insert(k.clone(), json!(v));
        }
    }
    if let Some(affinity) = &pod.affinity {
        pod_spec.insert("affinity".into(), encode("affinity", affinity)?);
    }
    if !pod.tolerations.is_empty() {
        let tolerations = array_at(
            pod_spec,
            "tolerations",
            role,
            "spec.tolerations is not a list",
        )?;
        for toleration in &pod.tolerations {
            tolerations.push(encode("tolerations", toleration)?);
        }
    }
    if let Some(context) = &pod.pod_security_context {
        pod_spec.insert(
            "securityContext".into(),
            encode("podSecurityContext", context)?,
        );
    }
    if let Some(seconds) = pod.termination_grace_period_seconds {
        pod_spec.insert("terminationGracePeriodSeconds".into(), json!(seconds));
    }
    if pod.share_process_namespace == Some(true) {
        pod_spec.insert("shareProcessNamespace".into(), json!(true));
    }
    Ok(template)
}

/// The webhook's duplicate test: same name and same image.
fn same_container(a: &Value, b: &Value) -> bool {
    a.get("name") == b.get("name") && a.get("image") == b.get("image")
}

/// `<configmap>-vol`, or, when that is too long for a volume name or has dots, the name with dots
/// dashed, cut to fit, and an 8-hex digest of the original for uniqueness.
pub(super) fn config_map_volume_name(config_map: &str) -> String {
    const MAX: usize = 63;
    const SUFFIX: &str = "-vol";
    let preferred = format!("{config_map}{SUFFIX}");
    if preferred.len() <= MAX && !preferred.contains('.') {
        return preferred;
    }
    let digest = Sha256::digest(config_map.as_bytes());
    let hash = submission::naming::hex(&digest[..4]);
    let suffix = format!("-{hash}{SUFFIX}");
    let prefix: String = config_map
        .replace('.', "-")
        .chars()
        .take(MAX - suffix.len())
        .collect();
    let prefix = prefix.trim_end_matches('-');
    format!("{prefix}{suffix}")
}
