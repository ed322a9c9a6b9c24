//! Spec fields that are set but that this operator does not honour. The reconciler reports them
//! in a status condition and a Warning event (see `state_machine`), so nothing a user wrote is
//! dropped silently.
//!
//! What is unsupported follows from the submitter: it runs `spark-submit` server-side for
//! Kubernetes cluster mode, so anything that needs the client machine (client mode, Maven
//! resolution) cannot be done, and features of the widely used operator that create extra
//! objects are built by the operator: the UI Service, Ingresses and the driver PodDisruptionBudget
//! (`crate::ui`), the monitoring ConfigMap (`crate::monitoring`) and PodGroups (`crate::batch`).

use crate::crd::{DeployMode, SparkApplicationSpec, SparkPodSpec};

/// The status condition type listing unsupported fields.
pub const CONDITION_TYPE: &str = "UnsupportedFields";

/// The reason of the condition and of the Warning event.
pub const REASON: &str = "UnsupportedFields";

/// One field that is set but not honoured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnsupportedField {
    /// JSON path from `spec`, e.g. `spec.monitoring`.
    pub path: &'static str,
    /// Why, in words a user can act on.
    pub reason: &'static str,
    /// The application cannot run as asked: it is failed instead of run without the field.
    pub blocking: bool,
}

/// The fields of `spec` that are set but not honoured, in a stable order.
pub fn unsupported_fields(spec: &SparkApplicationSpec) -> Vec<UnsupportedField> {
    let mut out = Vec::new();
    let mut push = |path, reason, blocking| {
        out.push(UnsupportedField {
            path,
            reason,
            blocking,
        })
    };
    if spec.mode == Some(DeployMode::Client) {
        push(
            "spec.mode",
            "client mode runs the driver in the submitting process; only cluster mode is supported",
            true,
        );
    }
    if spec.deps.as_ref().is_some_and(|d| !d.packages.is_empty()) {
        push(
            "spec.deps.packages",
            "Maven packages are resolved on the submitting machine; put the jars in the image or at a URL and use deps.jars",
            true,
        );
    }
    if spec.spark_config_map.is_some() {
        push(
            "spec.sparkConfigMap",
            "Spark sets SPARK_CONF_DIR to its own generated configuration, so another conf directory cannot be mounted over it",
            false,
        );
    }
    if spec.failure_retries.is_some() {
        push(
            "spec.failureRetries",
            "legacy field; use restartPolicy.onFailureRetries",
            false,
        );
    }
    if spec.retry_interval.is_some() {
        push(
            "spec.retryInterval",
            "legacy field; use restartPolicy.onFailureRetryInterval",
            false,
        );
    }
    pod_fields(
        &spec.driver.pod,
        &mut out,
        "spec.driver.memoryLimit",
        "spec.driver.gpu",
    );
    pod_fields(
        &spec.executor.pod,
        &mut out,
        "spec.executor.memoryLimit",
        "spec.executor.gpu",
    );
    out
}

fn pod_fields(
    pod: &SparkPodSpec,
    out: &mut Vec<UnsupportedField>,
    memory_limit: &'static str,
    gpu: &'static str,
) {
    if pod.memory_limit.is_some() {
        out.push(UnsupportedField {
            path: memory_limit,
            reason: "Spark sets the memory limit (memory plus overhead) over any template; raise memoryOverhead instead",
            blocking: false,
        });
    }
    if pod
        .gpu
        .as_ref()
        .is_some_and(|g| g.name.is_empty() || g.quantity <= 0)
    {
        out.push(UnsupportedField {
            path: gpu,
            reason: "a GPU needs a resource name and a positive quantity",
            blocking: false,
        });
    }
}

/// One line for the condition and the event: `path (reason); path (reason)`.
pub fn message(fields: &[UnsupportedField]) -> String {
    fields
        .iter()
        .map(|f| format!("{} ({})", f.path, f.reason))
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(extra: serde_json::Value) -> SparkApplicationSpec {
        let mut base = json!({
            "type": "Python",
            "sparkVersion": "4.0.0",
            "mainApplicationFile": "local:///opt/app.py",
            "driver": {},
            "executor": {}
        });
        if let (Some(base), Some(extra)) = (base.as_object_mut(), extra.as_object()) {
            for (k, v) in extra {
                base.insert(k.clone(), v.clone());
            }
        }
        serde_json::from_value(base).unwrap()
    }

    #[test]
    fn plain_spec_has_nothing_unsupported() {
        assert_eq!(unsupported_fields(&spec(json!({}))), []);
        assert_eq!(
            unsupported_fields(&spec(json!({"mode": "cluster", "suspend": false}))),
            []
        );
    }

    #[test]
    fn each_unsupported_field_is_reported_with_its_path() {
        let cases = [
            (json!({"mode": "client"}), "spec.mode", true),
            (
                json!({"deps": {"packages": ["org.example:lib:1.0"]}}),
                "spec.deps.packages",
                true,
            ),
            (
                json!({"sparkConfigMap": "conf"}),
                "spec.sparkConfigMap",
                false,
            ),
            (json!({"failureRetries": 3}), "spec.failureRetries", false),
            (json!({"retryInterval": 3}), "spec.retryInterval", false),
            (
                json!({"driver": {"memoryLimit": "2g"}}),
                "spec.driver.memoryLimit",
                false,
            ),
            (
                json!({"executor": {"gpu": {"name": "", "quantity": 1}}}),
                "spec.executor.gpu",
                false,
            ),
        ];
        for (extra, path, blocking) in cases {
            let found = unsupported_fields(&spec(extra.clone()));
            assert_eq!(found.len(), 1, "{extra}: {found:?}");
            assert_eq!(found[0].path, path);
            assert_eq!(found[0].blocking, blocking, "{path}");
        }
    }

    #[test]
    fn message_names_every_field() {
        let found = unsupported_fields(&spec(json!({"mode": "client", "sparkConfigMap": "x"})));
        let text = message(&found);
        assert!(text.contains("spec.mode ("), "{text}");
        assert!(text.contains("; spec.sparkConfigMap ("), "{text}");
    }
}
