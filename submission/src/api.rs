//! Wire types of the submitter's HTTP API, exactly as the Go client of the contract
//! (`shared/seeds/004_…`) sends and reads them, plus the status look-up types.
//!
//! Pure: serde types and functions over them, no HTTP stack. The envelope module turns an
//! [`ErrorCode`] into an HTTP answer; the client module reads these types back.
//!
//! Unknown request fields are ignored, as Go's `encoding/json` ignores them: a newer client that
//! adds an optional field must still be served by an older submitter.

use serde::{Deserialize, Serialize};
use serde_json::Value;

mod code;
mod operate;
mod status;
mod target;

pub use code::{ErrorCode, UnknownErrorCode};
pub use operate::{
    DEFAULT_LIST_LIMIT, KillQuery, LOG_SEGMENT, ListQuery, ListResponse, LogQuery, MAX_LIST_LIMIT,
    QueryError,
};
pub use status::{
    ClientAction, ContainerState, DriverIdentity, DriverPhase, DriverStatus, PodPhase,
};
pub use target::{Target, path_segment};

/// The submission route; the Go client also probes it with a GET to wait for the service.
pub const SUBMIT_PATH: &str = "/api/v1/spark-submit";

/// Prefix of the `namespace/pod` status route: `/api/v1/drivers/{namespace}/{pod}`.
pub const DRIVERS_PATH: &str = "/api/v1/drivers";

/// `POST /api/v1/spark-submit` body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubmitRequest {
    /// Client-chosen idempotency key; a repeat with the same id never creates a second driver.
    pub submission_id: String,
    /// The `spark-submit` argument vector, verbatim.
    pub spark_submit_args: Vec<String>,
    /// Inline driver `PodTemplateSpec`, in place of `spark.kubernetes.driver.podTemplateFile`.
    /// Go omits a nil template and may send `null`; both read as `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver_pod_template: Option<Value>,
    /// Inline executor `PodTemplateSpec`, in place of `spark.kubernetes.executor.podTemplateFile`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executor_pod_template: Option<Value>,
}

/// 201 (created) or 200 (repeat, `duplicate_submission: true`) body.
///
/// Every field is always sent. Reading is lenient (missing fields default) because the Go client
/// reads it leniently too, and the Rust client should not fail a submission that succeeded.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SubmitResponse {
    pub submission_id: String,
    pub app_name: String,
    pub message: String,
    /// RFC 3339, UTC.
    pub submitted_at: String,
    pub spark_app_id: String,
    pub driver_pod_name: String,
    pub driver_pod_uid: String,
    pub namespace: String,
    pub duplicate_submission: bool,
}

impl SubmitResponse {
    /// The `namespace:pod` id an orchestrator keeps to reconnect after a crash.
    pub fn driver_ref(&self) -> String {
        format!("{}:{}", self.namespace, self.driver_pod_name)
    }
}

/// The one error body every non-2xx answer carries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorResponse {
    /// Echo of the request's id; empty when the request had none that could be read.
    pub submission_id: String,
    /// The HTTP status, repeated in the body as the contract shows.
    pub status: u16,
    pub error_code: ErrorCode,
    pub message: String,
    /// RFC 3339, UTC.
    pub timestamp: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn request_from_go_client_with_null_templates_and_unknown_field_is_read() {
        let body = json!({
            "submission_id": "550e8400",
            "spark_submit_args": ["--master", "k8s://x"],
            "driver_pod_template": null,
            "extra": 1
        });
        let request: SubmitRequest = serde_json::from_value(body).unwrap();
        assert_eq!(request.submission_id, "550e8400");
        assert_eq!(request.driver_pod_template, None);
        assert_eq!(request.executor_pod_template, None);
    }

    #[test]
    fn request_without_args_is_refused() {
        let body = json!({"submission_id": "a"});
        assert!(serde_json::from_value::<SubmitRequest>(body).is_err());
        let body = json!({"submission_id": "a", "spark_submit_args": null});
        assert!(serde_json::from_value::<SubmitRequest>(body).is_err());
    }

    #[test]
    fn request_omits_absent_templates_like_go_omitempty() {
        let request = SubmitRequest {
            submission_id: "a".into(),
            spark_submit_args: vec![],
            driver_pod_template: None,
            executor_pod_template: Some(json!({"spec": {}})),
        };
        let value = serde_json::to_value(&request).unwrap();
        assert_eq!(
            value,
            json!({"submission_id": "a", "spark_submit_args": [], "executor_pod_template": {"spec": {}}})
        );
    }

    #[test]
    fn response_has_exactly_the_contract_fields() {
        let value = serde_json::to_value(SubmitResponse::default()).unwrap();
        let mut keys: Vec<_> = value.as_object().unwrap().keys().cloned().collect();
        keys.sort();
        assert_eq!(
            keys,
            [
                "app_name",
                "driver_pod_name",
                "driver_pod_uid",
                "duplicate_submission",
                "message",
                "namespace",
                "spark_app_id",
                "submission_id",
                "submitted_at"
            ]
        );
    }

    #[test]
    fn error_body_has_the_contract_shape() {
        let body = ErrorResponse {
            submission_id: "id".into(),
            status: 422,
            error_code: ErrorCode::InvalidPodTemplate,
            message: "m".into(),
            timestamp: "2026-06-16T08:30:00Z".into(),
        };
        assert_eq!(
            serde_json::to_value(&body).unwrap(),
            json!({
                "submission_id": "id",
                "status": 422,
                "error_code": "INVALID_POD_TEMPLATE",
                "message": "m",
                "timestamp": "2026-06-16T08:30:00Z"
            })
        );
    }

    #[test]
    fn driver_ref_is_namespace_colon_pod() {
        let response = SubmitResponse {
            namespace: "spark".into(),
            driver_pod_name: "pi-driver".into(),
            ..SubmitResponse::default()
        };
        assert_eq!(response.driver_ref(), "spark:pi-driver");
    }
}
