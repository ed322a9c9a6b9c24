//! What the watches decode of a pod and a ConfigMap: only the fields the caches keep
//! ([`submission::driver::trim_for_cache`] for pods, the trimmed data for ConfigMaps), the
//! rest of each event skipped unread. Above all `metadata.managedFields`, which the API server
//! sends with every object and which would otherwise be decoded field path by field path on
//! every event, only to be dropped.
//!
//! Each type converts into the typed object the caches store, equal to the full object
//! decoded and trimmed (tests below).

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    ConfigMap, Container, ContainerState, ContainerStatus, EnvVar, Pod, PodCondition, PodSpec,
    PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kube::Resource;
use serde::Deserialize;
use serde::de::{IgnoredAny, MapAccess, Visitor};
use submission::meta::containers::DRIVER_BIND_ADDRESS_ENV;

/// `ObjectMeta` without `managedFields`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Meta {
    annotations: Option<BTreeMap<String, String>>,
    creation_timestamp: Option<Time>,
    deletion_grace_period_seconds: Option<i64>,
    deletion_timestamp: Option<Time>,
    finalizers: Option<Vec<String>>,
    generate_name: Option<String>,
    generation: Option<i64>,
    labels: Option<BTreeMap<String, String>>,
    name: Option<String>,
    namespace: Option<String>,
    owner_references: Option<Vec<OwnerReference>>,
    resource_version: Option<String>,
    self_link: Option<String>,
    uid: Option<String>,
}

fn object_meta<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<ObjectMeta, D::Error> {
    let mut meta = Option::<Meta>::deserialize(deserializer)?.unwrap_or_default();
    // Kept for the object's life in the caches: no spare room (see `without_spare_capacity`).
    if let Some(owners) = meta.owner_references.as_mut() {
        owners.shrink_to_fit();
    }
    if let Some(finalizers) = meta.finalizers.as_mut() {
        finalizers.shrink_to_fit();
    }
    Ok(ObjectMeta {
        annotations: meta.annotations,
        creation_timestamp: meta.creation_timestamp,
        deletion_grace_period_seconds: meta.deletion_grace_period_seconds,
        deletion_timestamp: meta.deletion_timestamp,
        finalizers: meta.finalizers,
        generate_name: meta.generate_name,
        generation: meta.generation,
        labels: meta.labels,
        managed_fields: None,
        name: meta.name,
        namespace: meta.namespace,
        owner_references: meta.owner_references,
        resource_version: meta.resource_version,
        self_link: meta.self_link,
        uid: meta.uid,
    })
}

/// A pod as the pod cache keeps it.
#[derive(Debug, Clone, Deserialize)]
pub struct SlimPod {
    #[serde(default, deserialize_with = "object_meta")]
    metadata: ObjectMeta,
    spec: Option<SlimPodSpec>,
    status: Option<SlimPodStatus>,
}

#[derive(Debug, Clone, Deserialize)]
struct SlimPodSpec {
    #[serde(default)]
    containers: Vec<SlimContainer>,
}

#[derive(Debug, Clone, Deserialize)]
struct SlimContainer {
    #[serde(default)]
    name: String,
    /// Of the env, only the variables the cache keeps (the rest not copied out).
    env: Option<Vec<KeptEnvVar>>,
}

/// One env var, decoded only if it is the one [`submission::driver::trim_for_cache`] keeps,
/// the variable marking Spark's container: a driver has a dozen, each name and value
/// otherwise copied out only to be dropped.
#[derive(Debug, Clone)]
struct KeptEnvVar(Option<EnvVar>);

impl<'de> Deserialize<'de> for KeptEnvVar {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(KeptEnvVarVisitor)
    }
}

struct KeptEnvVarVisitor;

impl<'de> Visitor<'de> for KeptEnvVarVisitor {
    type Value = KeptEnvVar;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an env var")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<KeptEnvVar, A::Error> {
        // `None` until the name is read, then whether it is the kept variable. The name comes
        // first from the API server; a value before it is read in case.
        let mut kept: Option<bool> = None;
        let mut var = EnvVar::default();
        while let Some(field) = map.next_key::<EnvField>()? {
            match field {
                EnvField::Name => {
                    let name: String = map.next_value()?;
                    kept = Some(name == DRIVER_BIND_ADDRESS_ENV);
                    var.name = name;
                }
                EnvField::Value if kept != Some(false) => var.value = map.next_value()?,
                EnvField::ValueFrom if kept != Some(false) => var.value_from = map.next_value()?,
                EnvField::Value | EnvField::ValueFrom | EnvField::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(KeptEnvVar((kept == Some(true)).then_some(var)))
    }
}

/// The keys of an env var, told apart without copying them.
enum EnvField {
    Name,
    Value,
    ValueFrom,
    Other,
}

impl<'de> Deserialize<'de> for EnvField {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Key;
        impl Visitor<'_> for Key {
            type Value = EnvField;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an env var key")
            }

            fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<EnvField, E> {
                Ok(match key {
                    "name" => EnvField::Name,
                    "value" => EnvField::Value,
                    "valueFrom" => EnvField::ValueFrom,
                    _ => EnvField::Other,
                })
            }
        }
        deserializer.deserialize_str(Key)
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SlimPodStatus {
    phase: Option<String>,
    conditions: Option<Vec<PodCondition>>,
    reason: Option<String>,
    message: Option<String>,
    container_statuses: Option<Vec<SlimContainerStatus>>,
}

#[derive(Debug, Clone, Deserialize)]
struct SlimContainerStatus {
    #[serde(default)]
    name: String,
    state: Option<ContainerState>,
}

impl From<SlimPod> for Pod {
    fn from(pod: SlimPod) -> Pod {
        let mut pod = Pod {
            metadata: pod.metadata,
            spec: pod.spec.map(|spec| PodSpec {
                containers: spec
                    .containers
                    .into_iter()
                    .map(|c| Container {
                        name: c.name,
                        env: c
                            .env
                            .map(|env| env.into_iter().filter_map(|var| var.0).collect()),
                        ..Container::default()
                    })
                    .collect(),
                ..PodSpec::default()
            }),
            status: pod.status.map(|status| PodStatus {
                phase: status.phase,
                conditions: status.conditions,
                reason: status.reason,
                message: status.message,
                container_statuses: status.container_statuses.map(|statuses| {
                    statuses
                        .into_iter()
                        .map(|c| ContainerStatus {
                            name: c.name,
                            state: c.state,
                            ..ContainerStatus::default()
                        })
                        .collect()
                }),
                ..PodStatus::default()
            }),
        };
        // The one rule of what a cached pod holds (env and conditions it filters further).
        submission::driver::trim_for_cache(&mut pod);
        without_spare_capacity(&mut pod);
        pod
    }
}

/// Drops the spare room of a pod's lists. The cache keeps the decoded pod itself for the
/// driver's life (no copy, see [`super::store`]), and a decoded list has grown by doubling, a
/// filtered one kept its whole first allocation: about 2.6 KiB a driver, measured.
fn without_spare_capacity(pod: &mut Pod) {
    if let Some(spec) = pod.spec.as_mut() {
        spec.containers.shrink_to_fit();
        for container in &mut spec.containers {
            if let Some(env) = container.env.as_mut() {
                env.shrink_to_fit();
            }
        }
    }
    if let Some(status) = pod.status.as_mut() {
        if let Some(conditions) = status.conditions.as_mut() {
            conditions.shrink_to_fit();
        }
        if let Some(statuses) = status.container_statuses.as_mut() {
            statuses.shrink_to_fit();
        }
    }
}

/// A ConfigMap as the ConfigMap cache reads it (`binaryData` is never kept).
#[derive(Debug, Clone, Deserialize)]
pub struct SlimConfigMap {
    #[serde(default, deserialize_with = "object_meta")]
    metadata: ObjectMeta,
    data: Option<BTreeMap<String, String>>,
    immutable: Option<bool>,
}

impl From<SlimConfigMap> for ConfigMap {
    fn from(cm: SlimConfigMap) -> ConfigMap {
        ConfigMap {
            metadata: cm.metadata,
            data: cm.data,
            immutable: cm.immutable,
            binary_data: None,
        }
    }
}

/// The resource a slim type is decoded from: `K`'s, for every API path.
macro_rules! resource_of {
    ($slim:ty, $full:ty) => {
        impl Resource for $slim {
            type DynamicType = ();
            type Scope = <$full as Resource>::Scope;

            fn kind(dt: &()) -> Cow<'_, str> {
                <$full as Resource>::kind(dt)
            }
            fn group(dt: &()) -> Cow<'_, str> {
                <$full as Resource>::group(dt)
            }
            fn version(dt: &()) -> Cow<'_, str> {
                <$full as Resource>::version(dt)
            }
            fn api_version(dt: &()) -> Cow<'_, str> {
                <$full as Resource>::api_version(dt)
            }
            fn plural(dt: &()) -> Cow<'_, str> {
                <$full as Resource>::plural(dt)
            }
            fn meta(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

resource_of!(SlimPod, Pod);
resource_of!(SlimConfigMap, ConfigMap);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn managed_fields() -> serde_json::Value {
        json!([{"manager": "spark-submitter", "operation": "Update", "apiVersion": "v1",
                "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": {"f:labels": {"f:a": {}}}, "f:spec": {"f:containers": {}}}}])
    }

    #[test]
    fn a_slim_pod_is_the_full_pod_trimmed() {
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "d", "namespace": "ns", "uid": "u", "resourceVersion": "7",
                         "creationTimestamp": "2026-01-01T00:00:00Z", "generation": 1,
                         "deletionTimestamp": "2026-01-01T00:05:00Z", "finalizers": ["f"],
                         "labels": {"spark-app-selector": "spark-1"},
                         "annotations": {"spark-submitter.io/submission-id": "s"},
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "o", "uid": "ou"}],
                         "managedFields": managed_fields()},
            "spec": {"serviceAccountName": "spark", "nodeName": "n",
                     "containers": [
                {"name": "istio-proxy", "image": "proxy", "env": [{"value": "v", "name": "X", "x-unknown": 1}]},
                {"name": "sidecar", "env": [{"value": "first", "name": "SPARK_DRIVER_BIND_ADDRESS"}, {"name": "Y"}]},
                {"name": "spark-kubernetes-driver", "image": "spark", "args": ["driver"],
                 "env": [{"name": "A", "value": "1"},
                         {"name": "SPARK_DRIVER_BIND_ADDRESS", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
                 "resources": {"requests": {"memory": "1Gi"}}}],
                     "volumes": [{"name": "v", "emptyDir": {}}]},
            "status": {"phase": "Running", "podIP": "10.0.0.1", "reason": "r", "message": "m",
                       "conditions": [{"type": "Ready", "status": "True"}, {"type": "Initialized", "status": "True"},
                                      {"type": "PodScheduled", "status": "True"}],
                       "initContainerStatuses": [{"name": "agent", "image": "a", "imageID": "", "ready": true,
                                                  "restartCount": 0, "state": {"running": {}}}],
                       "containerStatuses": [
                {"name": "spark-kubernetes-driver", "image": "spark", "imageID": "", "ready": false, "restartCount": 0,
                 "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}
        });
        let mut whole: Pod = serde_json::from_value(pod.clone()).unwrap();
        submission::driver::trim_for_cache(&mut whole);
        let slim: SlimPod = serde_json::from_value(pod).unwrap();
        assert_eq!(Pod::from(slim), whole);
        let bare = json!({"metadata": {"name": "p"}});
        let mut whole: Pod = serde_json::from_value(bare.clone()).unwrap();
        submission::driver::trim_for_cache(&mut whole);
        assert_eq!(
            Pod::from(serde_json::from_value::<SlimPod>(bare).unwrap()),
            whole
        );
    }

    #[test]
    fn the_kept_env_var_is_whole_whatever_the_order_of_its_keys() {
        // Raw text: a `json!` map would sort the keys, and the name must come last here.
        let pod = r#"{"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "env": [
            {"value": "v", "name": "A"},
            {"valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}, "value": "x",
             "name": "SPARK_DRIVER_BIND_ADDRESS"}]}]}}"#;
        let mut whole: Pod = serde_json::from_str(pod).unwrap();
        submission::driver::trim_for_cache(&mut whole);
        let slim: SlimPod = serde_json::from_str(pod).unwrap();
        let slim = Pod::from(slim);
        assert_eq!(slim, whole);
        let env = &slim.spec.unwrap().containers[0].env;
        assert_eq!(
            env.as_ref().map(|env| env[0].value.as_deref()),
            Some(Some("x"))
        );
    }

    #[test]
    fn a_slim_config_map_is_the_full_one_without_managed_fields_or_binary_data() {
        let cm = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "ns", "uid": "u", "resourceVersion": "3",
                         "managedFields": managed_fields()},
            "data": {"spark.properties": "a=b\n"}, "binaryData": {"x": "AAAA"}, "immutable": true
        });
        let mut whole: ConfigMap = serde_json::from_value(cm.clone()).unwrap();
        whole.metadata.managed_fields = None;
        whole.binary_data = None;
        let slim: SlimConfigMap = serde_json::from_value(cm).unwrap();
        assert_eq!(ConfigMap::from(slim), whole);
    }
}
