//! The `scale` subresource of Deployments and ReplicaSets, served as `autoscaling/v1` `Scale`
//! (what `kubectl scale` and autoscalers read and write).

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde_json::{Value, json};

use super::{content_type, json_response, parse_body, patch_error};
use crate::api_error::{ApiError, cause};
use crate::meta;
use crate::meta::At;
use crate::patch;
use crate::resources::ResourceType;
use crate::store::{Part, Store, WriteOpts};

/// The label selector as the string form `Scale.status.selector` carries (requirements sorted
/// by key, as `metav1.LabelSelectorAsSelector` prints them).
pub fn selector_string(sel: &Value) -> String {
    let mut terms: Vec<(String, String)> = Vec::new();
    if let Some(m) = sel.get("matchLabels").and_then(Value::as_object) {
        for (k, v) in m {
            terms.push((k.clone(), format!("{k}={}", v.as_str().unwrap_or_default())));
        }
    }
    for e in sel
        .get("matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let key = e.get("key").and_then(Value::as_str).unwrap_or_default();
        let mut values: Vec<&str> = e
            .get("values")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        values.sort_unstable();
        let term = match e.get("operator").and_then(Value::as_str) {
            Some("In") => format!("{key} in ({})", values.join(",")),
            Some("NotIn") => format!("{key} notin ({})", values.join(",")),
            Some("Exists") => key.to_string(),
            Some("DoesNotExist") => format!("!{key}"),
            _ => continue,
        };
        terms.push((key.to_string(), term));
    }
    terms.sort();
    terms
        .into_iter()
        .map(|(_, t)| t)
        .collect::<Vec<_>>()
        .join(",")
}

/// The `Scale` view of a Deployment or ReplicaSet.
fn scale_of(obj: &Value) -> Value {
    let md = obj.get("metadata").cloned().unwrap_or(json!({}));
    let mut metadata = json!({});
    for key in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ] {
        if let Some(v) = md.get(key) {
            metadata[key] = v.clone();
        }
    }
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": metadata,
        "spec": {"replicas": obj.at("/spec/replicas").and_then(Value::as_i64).unwrap_or(1)},
        "status": {
            "replicas": obj.at("/status/replicas").and_then(Value::as_i64).unwrap_or(0),
            "selector": selector_string(obj.at("/spec/selector").unwrap_or(&Value::Null)),
        },
    })
}

/// `GET .../scale`.
pub fn get(store: &Store, rt: &ResourceType, ns: &str, name: &str) -> Result<Response, ApiError> {
    Ok(json_response(
        StatusCode::OK,
        &scale_of(&store.get(rt, ns, name)?),
    ))
}

/// Writes the replicas of a new `Scale` into its object.
fn apply_scale(
    rt: &ResourceType,
    name: &str,
    cur: &Value,
    scale: &Value,
) -> Result<Value, ApiError> {
    let replicas = scale.at("/spec/replicas").and_then(Value::as_i64);
    let Some(replicas) = replicas.filter(|r| *r >= 0 && *r <= i64::from(i32::MAX)) else {
        return Err(ApiError::invalid(
            "autoscaling",
            "Scale",
            name,
            vec![cause(
                "FieldValueInvalid",
                "spec.replicas",
                format!(
                    "Invalid value: {}: must be greater than or equal to 0",
                    scale.at("/spec/replicas").cloned().unwrap_or(Value::Null)
                ),
            )],
        ));
    };
    let want_rv = meta::meta_str(scale, "resourceVersion");
    if !want_rv.is_empty() && want_rv != meta::meta_str(cur, "resourceVersion") {
        return Err(ApiError::stale(&rt.group, &rt.plural, name));
    }
    let mut next = cur.clone();
    next["spec"]["replicas"] = json!(replicas);
    // The precondition was checked against the scale; the object's own version is current.
    Ok(next)
}

/// `PUT .../scale`.
pub fn update(
    store: &Store,
    rt: &ResourceType,
    ns: &str,
    name: &str,
    headers: &HeaderMap,
    body: &Bytes,
    write: &WriteOpts,
) -> Result<Response, ApiError> {
    let scale = parse_body(headers, body)?;
    let out = store.modify(rt, ns, name, Part::Main, write, |cur| {
        apply_scale(rt, name, cur, &scale)
    })?;
    Ok(json_response(StatusCode::OK, &scale_of(&out)))
}

/// `PATCH .../scale` (merge, strategic merge or JSON patch of the `Scale`).
pub fn patch(
    store: &Store,
    rt: &ResourceType,
    ns: &str,
    name: &str,
    headers: &HeaderMap,
    body: &Bytes,
    write: &WriteOpts,
) -> Result<Response, ApiError> {
    let ct = content_type(headers);
    let p: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("json: cannot decode patch: {e}")))?;
    let out = store.modify(rt, ns, name, Part::Main, write, |cur| {
        let current = scale_of(cur);
        let patched = match ct.as_str() {
            "application/merge-patch+json" => patch::merge_patch(&current, &p),
            "application/strategic-merge-patch+json" => {
                patch::strategic_merge_patch(&current, &p).map_err(|e| patch_error(rt, name, e))?
            }
            "application/json-patch+json" => {
                patch::json_patch(&current, &p).map_err(|e| patch_error(rt, name, e))?
            }
            other => return Err(ApiError::unsupported_media_type(other)),
        };
        apply_scale(rt, name, cur, &patched)
    })?;
    Ok(json_response(StatusCode::OK, &scale_of(&out)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_print_as_kubernetes_prints_them() {
        let sel = json!({"matchLabels": {"b": "2", "a": "1"},
            "matchExpressions": [{"key": "c", "operator": "In", "values": ["y", "x"]},
                                 {"key": "d", "operator": "DoesNotExist"}]});
        assert_eq!(selector_string(&sel), "a=1,b=2,c in (x,y),!d");
        assert_eq!(selector_string(&json!({})), "");
    }
}
