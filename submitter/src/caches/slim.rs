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
    let meta = Option::<Meta>::deserialize(deserializer)?.unwrap_or_default();
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
    env: Option<Vec<EnvVar>>,
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
                        env: c.env,
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
        pod
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
                {"name": "istio-proxy", "image": "proxy"},
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
