//! Label, annotation and container names, spelled once, and the ownership of the driver's
//! dependents.

use serde_json::{Value, json};

/// Spark's labels (`Constants.scala`).
pub mod labels {
    pub const SPARK_APP_ID: &str = "spark-app-selector";
    pub const SPARK_APP_NAME: &str = "spark-app-name";
    pub const SPARK_ROLE: &str = "spark-role";
    pub const SPARK_VERSION: &str = "spark-version";
    pub const DRIVER_ROLE: &str = "driver";
    pub const EXECUTOR_ROLE: &str = "executor";
    /// Ours: a label-safe digest of the submission id, to select one submission's objects.
    pub const SUBMISSION_ID_HASH: &str = "spark-submitter.io/submission-id-hash";
    /// Ours: marks the claim of a submission id and the retention record it becomes (a
    /// ConfigMap that outlives its driver pod), so the sweeper and the status look-ups tell it
    /// apart from a driver's own ConfigMaps.
    pub const RECORD: &str = "spark-submitter.io/record";
    /// The value of [`RECORD`] on the claim of a submission id whose driver has not ended.
    pub const RECORD_RESERVED: &str = "reserved";
    /// The value of [`RECORD`] on the record of a driver that succeeded.
    pub const RECORD_DRIVER_SUCCEEDED: &str = "driver-succeeded";
    /// The value of [`RECORD`] on the record of a driver killed through the submitter.
    pub const RECORD_DRIVER_KILLED: &str = "driver-killed";
    /// Ours, on a retention record: a label-safe digest of its driver's `namespace/pod`, to find
    /// the record of a driver by name.
    pub const RECORD_DRIVER_HASH: &str = "spark-submitter.io/driver-hash";
    /// Labels a driver may not set itself (`KubernetesDriverConf.labels`).
    pub const RESERVED: [&str; 4] = [SPARK_VERSION, SPARK_APP_ID, SPARK_APP_NAME, SPARK_ROLE];
}

/// Spark's container names and the env var that marks its driver container.
pub mod containers {
    /// The driver container, as Spark names it (`Constants.DEFAULT_DRIVER_CONTAINER_NAME`).
    pub const DRIVER: &str = "spark-kubernetes-driver";
    /// The executor container, as Spark 3+ names it.
    pub const EXECUTOR: &str = "spark-kubernetes-executor";
    /// The executor container, as Spark 2 named it; still recognised in user templates.
    pub const LEGACY_EXECUTOR: &str = "executor";
    /// The env var Spark's `BasicDriverFeatureStep` sets on the driver container only, whatever a
    /// template named that container: it marks the driver in a pod.
    pub const DRIVER_BIND_ADDRESS_ENV: &str = "SPARK_DRIVER_BIND_ADDRESS";
}

/// Our annotations.
pub mod annotations {
    /// The submission id exactly as the client sent it, on every object we create.
    pub const SUBMISSION_ID: &str = "spark-submitter.io/submission-id";
}

/// Adds to every object but the driver pod the `ownerReferences` Spark gives them: the pod as
/// controller (no `blockOwnerDeletion`), so the garbage collector removes them with it.
/// The builder leaves them out because the service creates these objects before the pod.
pub fn attach_owner(objects: &mut [Value], pod_name: &str, pod_uid: &str) {
    for object in objects.iter_mut() {
        if object.get("kind").and_then(Value::as_str) == Some("Pod") {
            continue;
        }
        if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            metadata.insert(
                "ownerReferences".to_owned(),
                json!([{
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "controller": true,
                    "name": pod_name,
                    "uid": pod_uid,
                }]),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_is_added_to_dependents_only() {
        let mut objects = vec![
            json!({"kind": "Pod", "metadata": {"name": "p"}}),
            json!({"kind": "ConfigMap", "metadata": {"name": "c"}}),
        ];
        attach_owner(&mut objects, "p", "uid-1");
        assert!(objects[0]["metadata"].get("ownerReferences").is_none());
        assert_eq!(objects[1]["metadata"]["ownerReferences"][0]["uid"], "uid-1");
        assert_eq!(
            objects[1]["metadata"]["ownerReferences"][0]["controller"],
            true
        );
    }
}
