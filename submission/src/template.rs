//! Pod templates as Spark loads them (`KubernetesUtils.loadPodFromTemplate` and
//! `selectSparkContainer`): the template is the base the driver is built on, with the Spark
//! container taken out of it.
//!
//! A template arrives as JSON, either a `PodTemplateSpec` (`{metadata, spec}`, the wire contract)
//! or a whole `Pod`. It is checked against the Kubernetes schema the way fabric8 deserialises it
//! (wrong types fail, unknown fields are kept), and normalised the way fabric8 serialises it again
//! (nulls and empty lists dropped, quantities as strings), so the pod we build from it is the pod
//! Spark would send.

use serde::Deserialize;
use serde_json::{Map, Value};
use thiserror::Error;

/// The container name Spark gives the driver container when the template names none.
pub use crate::meta::containers::DRIVER as DEFAULT_DRIVER_CONTAINER_NAME;

/// Which template a problem was found in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TemplateRole {
    Driver,
    Executor,
}

impl std::fmt::Display for TemplateRole {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TemplateRole::Driver => "driver",
            TemplateRole::Executor => "executor",
        })
    }
}

/// Why a template is not a pod template Spark could build on.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TemplateError {
    #[error("{role} pod template is not YAML or JSON: {reason}")]
    Unparseable { role: TemplateRole, reason: String },
    #[error("{role} pod template must be a JSON object")]
    NotAnObject { role: TemplateRole },
    #[error("{role} pod template has kind {kind:?}, expected a Pod or a PodTemplateSpec")]
    WrongKind { role: TemplateRole, kind: String },
    #[error("{role} pod template has apiVersion {api_version:?}, expected v1")]
    WrongApiVersion {
        role: TemplateRole,
        api_version: String,
    },
    #[error("{role} pod template has no spec")]
    MissingSpec { role: TemplateRole },
    #[error("{role} pod template {field} is not valid: {reason}")]
    InvalidField {
        role: TemplateRole,
        field: &'static str,
        reason: String,
    },
    /// Spark only warns and takes the first container here; we refuse (see docs/submitter.md).
    #[error("{role} pod template has no container named {name:?} (from {conf_key})")]
    ContainerNotFound {
        role: TemplateRole,
        name: String,
        conf_key: &'static str,
    },
    #[error("{role} pod template has {count} containers named {name:?}")]
    DuplicateContainer {
        role: TemplateRole,
        name: String,
        count: usize,
    },
}

impl TemplateError {
    /// A stable name for metrics and tests.
    pub fn kind(&self) -> &'static str {
        match self {
            TemplateError::Unparseable { .. } => "template_unparseable",
            TemplateError::NotAnObject { .. } => "template_not_an_object",
            TemplateError::WrongKind { .. } => "template_wrong_kind",
            TemplateError::WrongApiVersion { .. } => "template_wrong_api_version",
            TemplateError::MissingSpec { .. } => "template_missing_spec",
            TemplateError::InvalidField { .. } => "template_invalid_field",
            TemplateError::ContainerNotFound { .. } => "template_container_not_found",
            TemplateError::DuplicateContainer { .. } => "template_duplicate_container",
        }
    }
}

/// A driver template split as Spark splits it: the pod without the Spark container, and that
/// container.
#[derive(Debug, Clone, PartialEq)]
pub struct SparkPod {
    /// `{metadata, spec, ...}` with `spec.containers` holding the other containers, in order.
    pub pod: Map<String, Value>,
    pub container: Map<String, Value>,
}

impl SparkPod {
    /// Spark's `SparkPod.initialPod()`: what the driver is built on without a template.
    pub fn initial() -> SparkPod {
        let mut pod = Map::new();
        pod.insert("metadata".into(), Value::Object(Map::new()));
        pod.insert("spec".into(), Value::Object(Map::new()));
        SparkPod {
            pod,
            container: Map::new(),
        }
    }
}

/// Reads a template file's text (YAML, or JSON, which is YAML) into the JSON the builder takes.
pub fn from_yaml(text: &str, role: TemplateRole) -> Result<Value, TemplateError> {
    yaml_serde::from_str(text).map_err(|e| TemplateError::Unparseable {
        role,
        reason: e.to_string(),
    })
}

/// Loads a driver template and selects the Spark container: the one named `container_name`,
/// else the first; with no containers, an empty one.
pub fn load_driver(
    template: &Value,
    container_name: Option<&str>,
) -> Result<SparkPod, TemplateError> {
    load(
        template,
        container_name,
        TemplateRole::Driver,
        "spark.kubernetes.driver.podTemplateContainerName",
    )
}

/// Checks an executor template the same way. Spark copies it into a ConfigMap unread at submit
/// time and only trips over it when the first executor is created; we refuse it up front.
pub fn check_executor(template: &Value, container_name: Option<&str>) -> Result<(), TemplateError> {
    load(
        template,
        container_name,
        TemplateRole::Executor,
        "spark.kubernetes.executor.podTemplateContainerName",
    )
    .map(|_| ())
}

fn load(
    template: &Value,
    container_name: Option<&str>,
    role: TemplateRole,
    conf_key: &'static str,
) -> Result<SparkPod, TemplateError> {
    let Value::Object(object) = template else {
        return Err(TemplateError::NotAnObject { role });
    };
    if let Some(kind) = object.get("kind").filter(|k| !k.is_null())
        && kind.as_str() != Some("Pod")
    {
        return Err(TemplateError::WrongKind {
            role,
            kind: kind.to_string(),
        });
    }
    if let Some(api_version) = object.get("apiVersion").filter(|v| !v.is_null())
        && api_version.as_str() != Some("v1")
    {
        return Err(TemplateError::WrongApiVersion {
            role,
            api_version: api_version.to_string(),
        });
    }
    let mut pod = object.clone();
    // fabric8 builds the Pod object anew; apiVersion and kind are set on the result.
    pod.remove("apiVersion");
    pod.remove("kind");
    normalise_object(&mut pod, None);

    let metadata = pod
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !metadata.is_object() {
        return Err(invalid(role, "metadata", "expected an object"));
    }
    k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta::deserialize(&*metadata)
        .map_err(|e| invalid(role, "metadata", e))?;

    // Spark reads spec.containers without a null check: no spec, no pod.
    let Some(Value::Object(spec)) = pod.get_mut("spec") else {
        return Err(TemplateError::MissingSpec { role });
    };
    let mut containers = match spec.remove("containers") {
        None => Vec::new(),
        Some(Value::Array(containers)) => containers,
        Some(_) => return Err(invalid(role, "spec.containers", "expected a list")),
    };
    let index = match container_name {
        Some(name) => {
            let matching: Vec<usize> = containers
                .iter()
                .enumerate()
                .filter(|(_, c)| c.get("name").and_then(Value::as_str) == Some(name))
                .map(|(i, _)| i)
                .collect();
            match matching.as_slice() {
                [i] => Some(*i),
                [] => {
                    return Err(TemplateError::ContainerNotFound {
                        role,
                        name: name.to_owned(),
                        conf_key,
                    });
                }
                _ => {
                    return Err(TemplateError::DuplicateContainer {
                        role,
                        name: name.to_owned(),
                        count: matching.len(),
                    });
                }
            }
        }
        None => (!containers.is_empty()).then_some(0),
    };
    let container = match index.map(|i| containers.remove(i)) {
        None => Map::new(),
        Some(Value::Object(container)) => container,
        Some(_) => return Err(invalid(role, "spec.containers", "expected objects")),
    };

    // The schema check sees the pod as it will be sent: the Spark container back in, with the
    // name it will get.
    let mut probe = container.clone();
    probe
        .entry("name")
        .or_insert_with(|| DEFAULT_DRIVER_CONTAINER_NAME.into());
    let mut all = containers.clone();
    all.push(Value::Object(probe));
    spec.insert("containers".into(), Value::Array(all));
    let checked = k8s_openapi::api::core::v1::PodSpec::deserialize(&*spec)
        .map_err(|e| invalid(role, "spec", e));
    if containers.is_empty() {
        spec.remove("containers");
    } else {
        spec.insert("containers".into(), Value::Array(containers));
    }
    checked?;
    Ok(SparkPod { pod, container })
}

fn invalid(role: TemplateRole, field: &'static str, reason: impl ToString) -> TemplateError {
    TemplateError::InvalidField {
        role,
        field,
        reason: reason.to_string(),
    }
}

/// Keys whose values are string maps in the Kubernetes model: fabric8 drops them when empty.
const MAP_FIELDS: &[&str] = &[
    "labels",
    "annotations",
    "nodeSelector",
    "limits",
    "requests",
    "overhead",
    "matchLabels",
    "volumeAttributes",
];

/// Keys whose values are quantities (or maps of quantities): fabric8 writes them as strings.
const QUANTITY_FIELDS: &[&str] = &["limits", "requests", "overhead", "sizeLimit", "storage"];

/// fabric8's serialisation of what it read: no nulls, no empty lists, no empty string maps,
/// quantities as strings.
fn normalise_object(object: &mut Map<String, Value>, _parent: Option<&str>) {
    object.retain(|key, value| {
        normalise_value(key, value);
        match value {
            Value::Null => false,
            Value::Array(items) => !items.is_empty(),
            Value::Object(map) => !(map.is_empty() && MAP_FIELDS.contains(&key.as_str())),
            _ => true,
        }
    });
}

fn normalise_value(key: &str, value: &mut Value) {
    if QUANTITY_FIELDS.contains(&key) {
        match value {
            Value::Number(n) => *value = Value::String(n.to_string()),
            Value::Object(map) => {
                for quantity in map.values_mut() {
                    if let Value::Number(n) = quantity {
                        *quantity = Value::String(n.to_string());
                    }
                }
            }
            _ => {}
        }
    }
    match value {
        Value::Object(map) => normalise_object(map, Some(key)),
        Value::Array(items) => {
            for item in items.iter_mut() {
                if let Value::Object(map) = item {
                    normalise_object(map, Some(key));
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn kind(result: Result<SparkPod, TemplateError>) -> &'static str {
        result.map(|_| ()).unwrap_err().kind()
    }

    #[test]
    fn first_container_is_the_spark_container_by_default() {
        let t = json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}]}});
        let pod = load_driver(&t, None).unwrap();
        assert_eq!(pod.container["name"], "a");
        assert_eq!(pod.pod["spec"]["containers"], json!([{"name": "b"}]));
    }

    #[test]
    fn named_container_is_taken_out_and_the_rest_keep_their_order() {
        let t = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"labels": {}},
            "spec": {"containers": [{"name": "a"}, {"name": "main"}, {"name": "c"}]}});
        let pod = load_driver(&t, Some("main")).unwrap();
        assert_eq!(pod.container["name"], "main");
        assert_eq!(
            pod.pod["spec"]["containers"],
            json!([{"name": "a"}, {"name": "c"}])
        );
        assert!(pod.pod.get("kind").is_none());
        assert!(pod.pod["metadata"].get("labels").is_none());
    }

    #[test]
    fn missing_named_container_is_refused() {
        let t = json!({"spec": {"containers": [{"name": "a"}]}});
        assert_eq!(
            kind(load_driver(&t, Some("x"))),
            "template_container_not_found"
        );
    }

    #[test]
    fn templates_that_are_not_pods_are_refused() {
        assert_eq!(
            kind(load_driver(&json!([]), None)),
            "template_not_an_object"
        );
        assert_eq!(
            kind(load_driver(&json!({"kind": "Service", "spec": {}}), None)),
            "template_wrong_kind"
        );
        assert_eq!(
            kind(load_driver(&json!({"metadata": {}}), None)),
            "template_missing_spec"
        );
        assert_eq!(
            kind(load_driver(&json!({"spec": {"containers": "x"}}), None)),
            "template_invalid_field"
        );
        assert_eq!(
            kind(load_driver(
                &json!({"spec": {"tolerations": [{"tolerationSeconds": "x"}]}}),
                None
            )),
            "template_invalid_field"
        );
        assert_eq!(
            kind(load_driver(
                &json!({"metadata": {"labels": 3}, "spec": {}}),
                None
            )),
            "template_invalid_field"
        );
    }

    #[test]
    fn quantities_become_strings_and_nulls_go() {
        let t = json!({"metadata": {"creationTimestamp": null}, "spec": {"containers": [
            {"resources": {"limits": {"nvidia.com/gpu": 1}}, "env": []}]}});
        let pod = load_driver(&t, None).unwrap();
        assert_eq!(
            Value::Object(pod.container),
            json!({"resources": {"limits": {"nvidia.com/gpu": "1"}}})
        );
        assert_eq!(pod.pod["metadata"], json!({}));
    }
}
