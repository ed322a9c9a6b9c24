//! The driver's dependents: Service, NetworkPolicy, ConfigMaps, and the spark.properties text.

use serde_json::{Map, Value, json};

use super::pod::{POD_TEMPLATE_KEY, SPARK_CONF_FILE, pod_template_config_map_name};
use super::{Plan, SparkLine, conf_keys, java};
use crate::conf::SparkConf;
use crate::keys;
use crate::meta::{annotations, labels};
use crate::naming::SubmissionId;

/// The resolved spark.properties entries: the submission's SparkConf with the submit time,
/// then what the feature steps add (later entries replace earlier ones).
pub(crate) fn properties(plan: &Plan<'_>, extra: &[(String, String)]) -> SparkConf {
    let mut conf = plan.conf.clone();
    conf.set(
        conf_keys::SUBMIT_TIME,
        plan.input.submit_time_ms.to_string(),
    );
    for (key, value) in extra {
        conf.set(key.as_str(), value.as_str());
    }
    conf
}

/// `Properties.store` of `conf` with Spark's comment line and a `Date.toString` line.
pub(crate) fn properties_text(plan: &Plan<'_>, conf: &SparkConf) -> String {
    let mut text = String::with_capacity(64 * (conf.len() + 2));
    text.push_str("#Java properties built from Kubernetes config map with name: ");
    text.push_str(&plan.conf_map_name);
    text.push_str("\n#");
    text.push_str(&java::date_to_string(plan.input.submit_time_ms));
    text.push('\n');
    for (key, value) in conf.iter() {
        java::push_property(&mut text, key, value);
    }
    text
}

fn string_map<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Map<String, Value> {
    pairs
        .into_iter()
        .map(|(k, v)| (k.to_owned(), Value::String(v.to_owned())))
        .collect()
}

/// `DriverServiceFeatureStep`'s headless Service.
pub(crate) fn service(plan: &Plan<'_>) -> Value {
    let conf = plan.conf;
    let mut metadata = Map::new();
    metadata.insert("name".into(), json!(plan.service_name));
    let service_annotations = string_map(conf.with_prefix(conf_keys::DRIVER_SERVICE_ANNOTATION));
    if !service_annotations.is_empty() {
        metadata.insert("annotations".into(), Value::Object(service_annotations));
    }
    let mut service_labels = Map::new();
    service_labels.insert(labels::SPARK_APP_ID.into(), json!(plan.app_id));
    service_labels.extend(string_map(
        conf.with_prefix(conf_keys::DRIVER_SERVICE_LABEL),
    ));
    metadata.insert("labels".into(), Value::Object(service_labels));

    let selector: Map<String, Value> = plan
        .driver_labels
        .iter()
        .map(|(k, v)| (k.clone(), json!(v)))
        .collect();
    let block_manager_port = conf
        .get(conf_keys::DRIVER_BLOCK_MANAGER_PORT)
        .and_then(|v| v.parse::<i32>().ok())
        .unwrap_or(7079);
    let port =
        |name: &str, number: i32| json!({"name": name, "port": number, "targetPort": number});
    let mut ports = vec![
        port("driver-rpc-port", plan.driver_port),
        port("blockmanager", block_manager_port),
        port("spark-ui", plan.ui_port),
    ];
    if let Some(number) = plan.connect_port {
        let mut connect = port("spark-connect", number);
        // Spark 4.2 marks the Connect port as gRPC.
        if plan.line >= SparkLine::V4_2 {
            connect["appProtocol"] = json!("grpc");
        }
        ports.push(connect);
    }
    let mut spec = json!({
        "clusterIP": "None",
        "ipFamilies": conf
            .get_or(conf_keys::SERVICE_IP_FAMILIES, "IPv4")
            .split(',')
            .collect::<Vec<_>>(),
        "ipFamilyPolicy": conf.get_or(conf_keys::SERVICE_IP_FAMILY_POLICY, "SingleStack"),
        "ports": ports,
        "selector": selector,
    });
    // spark.kubernetes.driver.service.publishNotReadyAddresses came with Spark 4.3.
    if plan.line >= SparkLine::V4_3 {
        let publish_not_ready = conf
            .get_bool_or(conf_keys::SERVICE_PUBLISH_NOT_READY, false)
            .unwrap_or(false);
        spec["publishNotReadyAddresses"] = json!(publish_not_ready);
    }
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata,
        "spec": spec,
    })
}

/// `NetworkPolicyFeatureStep`: executors accept traffic only from the application's pods.
pub(crate) fn network_policy(plan: &Plan<'_>) -> Value {
    json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {
            "labels": {labels::SPARK_APP_ID: plan.app_id},
            "name": format!("{}-policy", plan.prefix),
            "namespace": plan.namespace,
        },
        "spec": {
            "ingress": [{"from": [{"podSelector": {"matchLabels": {labels::SPARK_APP_ID: plan.app_id}}}]}],
            "podSelector": {"matchLabels": {
                labels::SPARK_APP_ID: plan.app_id,
                labels::SPARK_ROLE: labels::EXECUTOR_ROLE,
            }},
        },
    })
}

/// `PodTemplateConfigMapStep`: the executor template for the driver to read. Spark copies the
/// file's bytes; the wire carries JSON, so the same template is written back as YAML.
pub(crate) fn pod_template_config_map(plan: &Plan<'_>, template: &Value) -> Value {
    // A JSON value always serialises to YAML; JSON text (also valid YAML) is the fallback.
    let text = yaml_serde::to_string(template).unwrap_or_else(|_| template.to_string());
    json!({
        "apiVersion": "v1",
        "data": {POD_TEMPLATE_KEY: text},
        "immutable": true,
        "kind": "ConfigMap",
        "metadata": {"name": pod_template_config_map_name(plan)},
    })
}

/// `Client.run`'s spark-conf ConfigMap, mounted by the driver at /opt/spark/conf.
pub(crate) fn spark_conf_config_map(plan: &Plan<'_>, properties: &SparkConf) -> Value {
    json!({
        "apiVersion": "v1",
        "data": {
            SPARK_CONF_FILE: properties_text(plan, properties),
            keys::KUBERNETES_NAMESPACE: plan.namespace,
        },
        "immutable": true,
        "kind": "ConfigMap",
        "metadata": {"name": plan.conf_map_name, "namespace": plan.namespace},
    })
}

/// Our one addition to every object: the submission id (annotation, exact) and its digest
/// (label, for selection).
pub(crate) fn mark_submission(object: &mut Value, id: &SubmissionId) {
    let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let annotation_map = metadata
        .entry("annotations")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(map) = annotation_map {
        map.insert(annotations::SUBMISSION_ID.into(), json!(id.as_str()));
    }
    let label_map = metadata
        .entry("labels")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(map) = label_map {
        map.insert(labels::SUBMISSION_ID_HASH.into(), json!(id.label_value()));
    }
}
