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

/// `DriverServiceFeatureStep`'s headless Service. Built by moving each part into place:
/// `json!` would copy every interpolated map and list through the serializer.
pub(crate) fn service(plan: &Plan<'_>) -> Value {
    let conf = plan.conf;
    let mut metadata = Map::new();
    metadata.insert("name".into(), Value::String(plan.service_name.clone()));
    let service_annotations = string_map(conf.with_prefix(conf_keys::DRIVER_SERVICE_ANNOTATION));
    if !service_annotations.is_empty() {
        metadata.insert("annotations".into(), Value::Object(service_annotations));
    }
    let mut service_labels = Map::new();
    service_labels.insert(
        labels::SPARK_APP_ID.into(),
        Value::String(plan.app_id.clone()),
    );
    service_labels.extend(string_map(
        conf.with_prefix(conf_keys::DRIVER_SERVICE_LABEL),
    ));
    metadata.insert("labels".into(), Value::Object(service_labels));

    let selector = string_map(
        plan.driver_labels
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str())),
    );
    let block_manager_port = conf
        .get(conf_keys::DRIVER_BLOCK_MANAGER_PORT)
        .and_then(|v| v.parse::<i32>().ok())
        .unwrap_or(7079);
    let port = |name: &str, number: i32| {
        let mut port = Map::new();
        port.insert("name".into(), Value::String(name.to_owned()));
        port.insert("port".into(), Value::from(number));
        port.insert("targetPort".into(), Value::from(number));
        port
    };
    let mut ports = vec![
        Value::Object(port("driver-rpc-port", plan.driver_port)),
        Value::Object(port("blockmanager", block_manager_port)),
        Value::Object(port("spark-ui", plan.ui_port)),
    ];
    if let Some(number) = plan.connect_port {
        let mut connect = port("spark-connect", number);
        // Spark 4.2 marks the Connect port as gRPC.
        if plan.line >= SparkLine::V4_2 {
            connect.insert("appProtocol".into(), Value::String("grpc".into()));
        }
        ports.push(Value::Object(connect));
    }
    let ip_families = conf
        .get_or(conf_keys::SERVICE_IP_FAMILIES, "IPv4")
        .split(',')
        .map(|family| Value::String(family.to_owned()))
        .collect();
    let mut spec = Map::new();
    spec.insert("clusterIP".into(), Value::String("None".into()));
    spec.insert("ipFamilies".into(), Value::Array(ip_families));
    spec.insert(
        "ipFamilyPolicy".into(),
        Value::String(
            conf.get_or(conf_keys::SERVICE_IP_FAMILY_POLICY, "SingleStack")
                .to_owned(),
        ),
    );
    spec.insert("ports".into(), Value::Array(ports));
    spec.insert("selector".into(), Value::Object(selector));
    // spark.kubernetes.driver.service.publishNotReadyAddresses came with Spark 4.3.
    if plan.line >= SparkLine::V4_3 {
        let publish_not_ready = conf
            .get_bool_or(conf_keys::SERVICE_PUBLISH_NOT_READY, false)
            .unwrap_or(false);
        spec.insert(
            "publishNotReadyAddresses".into(),
            Value::Bool(publish_not_ready),
        );
    }
    let mut service = Map::new();
    service.insert("apiVersion".into(), Value::String("v1".into()));
    service.insert("kind".into(), Value::String("Service".into()));
    service.insert("metadata".into(), Value::Object(metadata));
    service.insert("spec".into(), Value::Object(spec));
    Value::Object(service)
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
