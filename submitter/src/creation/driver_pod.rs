//! What a submission's answer tells of the driver pod, read from the API server's answer, a
//! few fields of it, or the watch cache, so that the answers of every path agree.

use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;
use submission::pointer::{at, text};

use crate::kube_api::Head;

/// What the answer tells of the driver pod, as the API server or the watch cache has it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DriverPod {
    pub uid: String,
    /// `metadata.creationTimestamp`, RFC 3339 in seconds as Kubernetes writes it.
    pub created_at: Option<String>,
    /// The `spark-app-selector` label.
    pub spark_app_id: Option<String>,
}

/// Kubernetes' timestamp format (`metav1.Time`).
const TIME_FORMAT: &str = "%Y-%m-%dT%H:%M:%SZ";

/// A timestamp as the typed cache renders it, so answers from either path agree.
fn normalised_time(text: &str) -> String {
    text.parse::<k8s_openapi::jiff::Timestamp>()
        .ok()
        .map_or_else(
            || text.to_owned(),
            |at| at.strftime(TIME_FORMAT).to_string(),
        )
}

impl DriverPod {
    /// From the pod as JSON (an API server's answer).
    pub fn of_value(pod: &Value) -> DriverPod {
        let created_at = at(pod, "/metadata/creationTimestamp")
            .and_then(Value::as_str)
            .map(normalised_time);
        DriverPod {
            uid: text(pod, "/metadata/uid").to_owned(),
            created_at,
            spark_app_id: at(pod, "/metadata/labels")
                .and_then(|labels| labels.get(submission::meta::labels::SPARK_APP_ID))
                .and_then(Value::as_str)
                .map(str::to_owned),
        }
    }

    /// From the few fields read of an API server's answer.
    pub fn of_head(head: Head) -> DriverPod {
        let Head {
            uid,
            creation_timestamp,
            spark_app_id,
        } = head;
        DriverPod {
            uid,
            created_at: creation_timestamp.map(|text| normalised_time(&text)),
            spark_app_id,
        }
    }

    /// From a cached pod.
    pub fn of_pod(pod: &Pod) -> DriverPod {
        DriverPod {
            uid: pod.metadata.uid.clone().unwrap_or_default(),
            created_at: pod
                .metadata
                .creation_timestamp
                .as_ref()
                .map(|at| at.0.strftime(TIME_FORMAT).to_string()),
            spark_app_id: pod
                .metadata
                .labels
                .as_ref()
                .and_then(|labels| labels.get(submission::meta::labels::SPARK_APP_ID))
                .cloned(),
        }
    }
}
