//! `GET /api/v1/namespaces/{ns}/pods/{name}/log`: a container's log, as the API server relays it
//! from the kubelet.
//!
//! The API server's part comes first: the options are validated (`ValidatePodLogOptions`, 422),
//! the container is chosen (`validateContainer`, 400), a pod without a node answers an empty
//! log; then the kubelet's refusals (`is waiting to start`, `previous terminated container ...
//! not found`) come back as 400 `BadRequest` with its text, and its answer is streamed as it is
//! read, chunked, for as long as a followed container runs.
//!
//! A partitioned node's kubelet cannot be dialled: a new request fails as the API server's
//! `LocationStreamer` fails (500, no reason, Go's `Get "URL": dial tcp ...: i/o timeout`), and
//! an open follow ends when the partition begins (the kubelet's reader stops; see
//! `kubelet::logs`).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::query::Query;
use super::{AppState, Streaming};
use crate::api_error::{ApiError, Cause, cause};
use crate::kubelet::{LogRequest, OpenLogError, ReadOptions};
use crate::meta;
use crate::meta::At;

pub(super) fn pod_log(
    state: &AppState,
    ns: &str,
    name: &str,
    q: &Query,
) -> Result<Response, ApiError> {
    let (follow, previous, read) = options(name, q, SystemTime::now())?;
    let pod = state
        .store
        .get_raw("", "pods", ns, name)
        .ok_or_else(|| ApiError::not_found("", "pods", name))?;
    let container = container_of(&pod, name, q.get("container"))?;
    let answer = |body: Body| {
        let mut r = (StatusCode::OK, [(header::CONTENT_TYPE, "text/plain")], body).into_response();
        r.extensions_mut().insert(Streaming);
        r
    };
    let Some(node) = pod
        .at("/spec/nodeName")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
    else {
        // The API server has no kubelet to ask: an empty log.
        return Ok(answer(Body::empty()));
    };
    if state.kubelet.is_partitioned(node) {
        let host = pod
            .at("/status/hostIP")
            .and_then(Value::as_str)
            .filter(|h| !h.is_empty())
            .unwrap_or(node);
        return Err(kubelet_unreachable(host, ns, name, &container, q));
    }
    let req = LogRequest {
        container,
        previous,
        follow,
        read,
    };
    let log = state
        .kubelet
        .open_log(ns, name, &req)
        .map_err(|e| match e {
            OpenLogError::PodNotFound { .. } => ApiError::not_found("", "pods", name),
            other => ApiError::bad_request(other.to_string()),
        })?;
    Ok(answer(Body::from_stream(log.into_stream())))
}

/// What the API server answers when it cannot dial the kubelet for a log: its
/// `LocationStreamer`'s transport error, which no layer classifies (500, no reason). The URL is
/// the one `LogLocation` builds: the kubelet's port, `/containerLogs/NS/POD/CONTAINER`, the
/// options in Go's `url.Values` order (by key).
fn kubelet_unreachable(host: &str, ns: &str, pod: &str, container: &str, q: &Query) -> ApiError {
    let query: Vec<String> = [
        "follow",
        "limitBytes",
        "previous",
        "sinceSeconds",
        "sinceTime",
        "tailLines",
        "timestamps",
    ]
    .iter()
    .filter_map(|key| match *key {
        "follow" | "previous" | "timestamps" => q.flag(key).then(|| format!("{key}=true")),
        // `url.Values.Encode` escapes a time's colons and offset sign.
        _ => q
            .get(key)
            .map(|v| format!("{key}={}", v.replace(':', "%3A").replace('+', "%2B"))),
    })
    .collect();
    let mut url = format!("https://{host}:{KUBELET_PORT}/containerLogs/{ns}/{pod}/{container}");
    if !query.is_empty() {
        url = format!("{url}?{}", query.join("&"));
    }
    ApiError::unclassified(format!(
        "Get {url:?}: dial tcp {host}:{KUBELET_PORT}: i/o timeout"
    ))
}

/// The kubelet's API port, where the API server sends log requests.
const KUBELET_PORT: u16 = 10250;

/// `PodLogOptions` from the query, validated as the API server validates them.
fn options(name: &str, q: &Query, now: SystemTime) -> Result<(bool, bool, ReadOptions), ApiError> {
    let int = |key: &str| -> Result<Option<i64>, ApiError> {
        q.get(key)
            .map(|v| {
                v.parse::<i64>().map_err(|_| {
                    ApiError::bad_request(format!(
                        "couldn't parse parameter {key:?} value {v:?} as an integer"
                    ))
                })
            })
            .transpose()
    };
    let tail = int("tailLines")?;
    let limit = int("limitBytes")?;
    let since_seconds = int("sinceSeconds")?;
    let since_time = q
        .get("sinceTime")
        .map(|v| {
            meta::parse_rfc3339(v)
                .and_then(|(secs, _)| u64::try_from(secs).ok())
                .map(|secs| UNIX_EPOCH + Duration::from_secs(secs))
                .ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "parsing time {v:?} as \"2006-01-02T15:04:05Z07:00\": cannot parse"
                    ))
                })
        })
        .transpose()?;
    let mut causes: Vec<Cause> = Vec::new();
    let invalid = |field: &str, value: i64, why: &str| {
        cause(
            "FieldValueInvalid",
            field,
            format!("Invalid value: {value}: {why}"),
        )
    };
    if let Some(t) = tail.filter(|t| *t < 0) {
        causes.push(invalid(
            "tailLines",
            t,
            "must be greater than or equal to 0",
        ));
    }
    if let Some(l) = limit.filter(|l| *l < 1) {
        causes.push(invalid("limitBytes", l, "must be greater than 0"));
    }
    match (since_seconds, since_time) {
        (Some(_), Some(_)) => causes.push(cause(
            "FieldValueForbidden",
            "",
            "Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified",
        )),
        (Some(s), None) if s < 1 => {
            causes.push(invalid("sinceSeconds", s, "must be greater than 0"));
        }
        _ => {}
    }
    if !causes.is_empty() {
        return Err(ApiError::invalid("", "PodLogOptions", name, causes));
    }
    let since = since_seconds
        .map(|s| now - Duration::from_secs(s.unsigned_abs()))
        .or(since_time);
    let read = ReadOptions {
        tail: tail.map(i64::unsigned_abs),
        since,
        limit_bytes: limit.map(i64::unsigned_abs),
        timestamps: q.flag("timestamps"),
    };
    Ok((q.flag("follow"), q.flag("previous"), read))
}

/// The container a request reads: the one it names, or the pod's only one.
fn container_of(pod: &Value, name: &str, asked: Option<&str>) -> Result<String, ApiError> {
    let names = |field: &str| -> Vec<String> {
        pod.at(&format!("/spec/{field}"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|c| c.get("name").and_then(Value::as_str).map(str::to_string))
            .collect()
    };
    let main = names("containers");
    match asked.filter(|c| !c.is_empty()) {
        Some(c) => {
            let known = ["initContainers", "containers", "ephemeralContainers"]
                .iter()
                .any(|field| names(field).iter().any(|n| n == c));
            if known {
                Ok(c.to_string())
            } else {
                Err(ApiError::bad_request(format!(
                    "container {c} is not valid for pod {name}"
                )))
            }
        }
        None if main.len() == 1 => Ok(main[0].clone()),
        None if main.is_empty() => Err(ApiError::bad_request(format!(
            "a container name must be specified for pod {name}"
        ))),
        None => {
            // Every container, init containers first, as the API server visits them.
            let all: Vec<String> = ["initContainers", "containers", "ephemeralContainers"]
                .iter()
                .flat_map(|field| names(field))
                .collect();
            Err(ApiError::bad_request(format!(
                "a container name must be specified for pod {name}, choose one of: [{}]",
                all.join(" ")
            )))
        }
    }
}

#[cfg(test)]
mod tests;
