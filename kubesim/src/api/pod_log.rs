//! `GET /api/v1/namespaces/{ns}/pods/{name}/log`: a container's log, as the API server
//! relays it from the kubelet.

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::AppState;
use super::query::Query;
use crate::api_error::ApiError;

pub(super) fn pod_log(
    state: &AppState,
    ns: &str,
    name: &str,
    q: &Query,
) -> Result<Response, ApiError> {
    let pod = state
        .store
        .get_raw("", "pods", ns, name)
        .ok_or_else(|| ApiError::not_found("", "pods", name))?;
    let containers: Vec<String> = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|c| c.get("name").and_then(Value::as_str).map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let container = match q.get("container") {
        Some(c) => c.to_string(),
        None if containers.len() == 1 => containers[0].clone(),
        None => {
            return Err(ApiError::bad_request(format!(
                "a container name must be specified for pod {name}, choose one of: [{}]",
                containers.join(" ")
            )));
        }
    };
    match state.kubelet.logs(ns, name, &container) {
        Some(text) => {
            Ok((StatusCode::OK, [(header::CONTENT_TYPE, "text/plain")], text).into_response())
        }
        None => Err(ApiError::bad_request(format!(
            "container \"{container}\" in pod \"{name}\" is waiting to start: ContainerCreating"
        ))),
    }
}
