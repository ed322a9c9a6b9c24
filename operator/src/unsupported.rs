//! Spec fields that are set but that this operator does not honour. The reconciler reports them
//! in a status condition and a Warning event (see `state_machine`), so nothing a user wrote is
//! dropped silently.
//!
//! What is unsupported follows from the submitter: it runs `spark-submit` server-side for
//! Kubernetes cluster mode, so client mode cannot be done. Maven packages need no client: Spark
//! resolves them again in the driver, which is where they are used. Features of the widely used
//! operator that create extra objects are built by the operator: the UI Service, Ingresses and
//! the driver PodDisruptionBudget (`crate::ui`), the monitoring ConfigMap (`crate::monitoring`)
//! and PodGroups (`crate::batch`); what its webhook patches into pods goes into the pod templates
//! or, for the two driver fields Spark sets after any template (the memory limit and
//! `SPARK_CONF_DIR`), into the submitter's own confs (`crate::argv`). What is left is the
//! executors' memory limit, which the driver's Spark sets when it creates them.

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
    gpu_field(&spec.driver.pod, &mut out, "spec.driver.gpu");
    gpu_field(&spec.executor.pod, &mut out, "spec.executor.gpu");
    if spec
        .executor
        .pod
        .memory_limit
        .as_deref()
        .is_some_and(|l| !l.trim().is_empty())
    {
        out.push(UnsupportedField {
            path: "spec.executor.memoryLimit",
            reason: "the driver's Spark creates the executor pods and sets their memory limit equal to the request (executor memory plus overhead) over any template, and only a mutating webhook could change it afterwards; raise executor.memoryOverhead to give executors that room",
            blocking: false,
        });
    }
    out
}

fn gpu_field(pod: &SparkPodSpec, out: &mut Vec<UnsupportedField>, gpu: &'static str) {
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
            (json!({"failureRetries": 3}), "spec.failureRetries", false),
            (json!({"retryInterval": 3}), "spec.retryInterval", false),
            (
                json!({"executor": {"memoryLimit": "2g"}}),
                "spec.executor.memoryLimit",
                false,
            ),
            (
                json!({"driver": {"gpu": {"name": "nvidia.com/gpu", "quantity": 0}}}),
                "spec.driver.gpu",
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
    fn fields_honoured_without_a_webhook_are_not_reported() {
        for honoured in [
            json!({"deps": {
                "packages": ["org.example:lib:1.0"],
                "repositories": ["file:///opt/repo"],
                "excludePackages": ["org.example:other"]
            }}),
            json!({"sparkConfigMap": "spark-conf"}),
            json!({"hadoopConfigMap": "hadoop-conf"}),
            json!({"driver": {"memoryLimit": "2g"}}),
            json!({"executor": {"memoryLimit": " "}}),
            json!({"driver": {"gpu": {"name": "nvidia.com/gpu", "quantity": 1}}}),
        ] {
            assert_eq!(
                unsupported_fields(&spec(honoured.clone())),
                [],
                "{honoured}"
            );
        }
    }

    #[test]
    fn message_names_every_field() {
        let found = unsupported_fields(&spec(
            json!({"mode": "client", "executor": {"memoryLimit": "4g"}}),
        ));
        let text = message(&found);
        assert!(text.contains("spec.mode ("), "{text}");
        assert!(text.contains("; spec.executor.memoryLimit ("), "{text}");
    }
}
