//! The `/sim/v1` control API: fault injection, request counters, watch drops, compaction, kills
//! and node partitions. Documented in docs/kubesim.md.

use axum::body::Bytes;
use axum::http::{Method, StatusCode};
use axum::response::Response;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{AppState, json_response};
use crate::control::{FaultRule, LatencyRule};

/// A failed control request (kept small: a `Response` is too large for an `Err`).
struct Fail(StatusCode, String);

fn fail(code: StatusCode, message: impl Into<String>) -> Fail {
    Fail(code, message.into())
}

fn body_or_empty<T: for<'de> Deserialize<'de>>(body: &Bytes) -> Result<T, Fail> {
    let raw: &[u8] = if body.is_empty() { b"{}" } else { body };
    serde_json::from_slice(raw)
        .map_err(|e| fail(StatusCode::BAD_REQUEST, format!("invalid body: {e}")))
}

/// Rules may be posted one at a time or as an array.
fn one_or_many<T: for<'de> Deserialize<'de>>(body: &Bytes) -> Result<Vec<T>, Fail> {
    let v: Value = body_or_empty(body)?;
    let items = match v {
        Value::Array(a) => a,
        other => vec![other],
    };
    items
        .into_iter()
        .map(|i| {
            serde_json::from_value(i)
                .map_err(|e| fail(StatusCode::BAD_REQUEST, format!("invalid rule: {e}")))
        })
        .collect()
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Kill {
    #[serde(default)]
    container: Option<String>,
    #[serde(default = "killed")]
    exit_code: i32,
}

fn killed() -> i32 {
    137
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Compact {
    #[serde(default)]
    drop_watches: bool,
}

/// Serves one control request; `rest` is the path after `/sim/v1`.
pub async fn handle(state: &AppState, method: &Method, rest: &str, body: &Bytes) -> Response {
    let segs: Vec<&str> = rest
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let result: Result<Response, Fail> = (|| match (method.as_str(), segs.as_slice()) {
        ("GET", ["requests"]) => Ok(json_response(
            StatusCode::OK,
            &json!(state.control.counts()),
        )),
        ("DELETE", ["requests"]) => {
            state.control.reset_counts();
            Ok(json_response(StatusCode::OK, &json!({"reset": true})))
        }
        ("GET", ["authz"]) => Ok(json_response(StatusCode::OK, &json!(state.control.authz()))),
        ("DELETE", ["authz"]) => {
            state.control.reset_authz();
            Ok(json_response(StatusCode::OK, &json!({"reset": true})))
        }
        ("GET", ["journal"]) => Ok(json_response(
            StatusCode::OK,
            &json!(state.control.journal()),
        )),
        ("DELETE", ["journal"]) => {
            state.control.clear_journal();
            Ok(json_response(StatusCode::OK, &json!({"cleared": true})))
        }
        ("GET", ["faults"]) => Ok(json_response(
            StatusCode::OK,
            &json!(state.control.faults()),
        )),
        ("POST", ["faults"]) => {
            let rules: Vec<FaultRule> = one_or_many(body)?;
            let n = rules.len();
            for r in rules {
                state.control.add_fault(r);
            }
            Ok(json_response(StatusCode::CREATED, &json!({"added": n})))
        }
        ("DELETE", ["faults"]) => {
            state.control.clear_faults();
            Ok(json_response(StatusCode::OK, &json!({"cleared": true})))
        }
        ("POST", ["latency"]) => {
            let rules: Vec<LatencyRule> = one_or_many(body)?;
            let n = rules.len();
            for r in rules {
                state.control.add_latency(r);
            }
            Ok(json_response(StatusCode::CREATED, &json!({"added": n})))
        }
        ("DELETE", ["latency"]) => {
            state.control.clear_latency();
            Ok(json_response(StatusCode::OK, &json!({"cleared": true})))
        }
        ("POST", ["watches", "drop"]) => {
            state.store.drop_watches();
            Ok(json_response(StatusCode::OK, &json!({"dropped": true})))
        }
        ("POST", ["compact"]) => {
            let c: Compact = body_or_empty(body)?;
            let rv = state.store.compact();
            if c.drop_watches {
                state.store.drop_watches();
            }
            Ok(json_response(
                StatusCode::OK,
                &json!({"compactedThrough": rv.to_string()}),
            ))
        }
        ("POST", ["pods", ns, name, "kill"]) => {
            let k: Kill = body_or_empty(body)?;
            match state
                .kubelet
                .kill(ns, name, k.container.as_deref(), k.exit_code)
            {
                Ok(()) => Ok(json_response(StatusCode::OK, &json!({"killed": name}))),
                Err(e) => Err(fail(
                    if e.kind() == "pod_not_found" || e.kind() == "container_not_found" {
                        StatusCode::NOT_FOUND
                    } else {
                        StatusCode::CONFLICT
                    },
                    e.to_string(),
                )),
            }
        }
        ("GET", ["nodes", node, "held"]) => Ok(json_response(
            StatusCode::OK,
            &json!({"node": node, "held": state.control.held(node)}),
        )),
        ("GET", ["nodes"]) => Ok(json_response(StatusCode::OK, &json!(state.kubelet.nodes()))),
        ("POST", ["nodes", node, action @ ("partition" | "heal")]) => {
            let known = if *action == "partition" {
                state.kubelet.partition(node)
            } else {
                state.kubelet.heal(node)
            };
            if known {
                Ok(json_response(
                    StatusCode::OK,
                    &json!({"node": node, "action": action}),
                ))
            } else {
                Err(fail(StatusCode::NOT_FOUND, format!("unknown node {node}")))
            }
        }
        _ => Err(fail(
            StatusCode::NOT_FOUND,
            format!("no control endpoint {method} /sim/v1{rest}"),
        )),
    })();
    result.unwrap_or_else(|Fail(code, message)| json_response(code, &json!({"error": message})))
}
