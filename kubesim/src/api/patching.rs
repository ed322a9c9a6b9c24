//! PATCH in its four forms (JSON patch, merge, strategic merge, server-side apply) and the
//! API server's answers when one fails.

use std::sync::Arc;

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde_json::{Value, json};

use super::query::Query;
use super::{
    AppState, check_fields, content_type, json_response, parse_yaml_or_json, with_warnings,
};
use crate::api_error::ApiError;
use crate::meta;
use crate::patch;
use crate::resources::ResourceType;
use crate::store::{Part, WriteOpts};

#[allow(clippy::too_many_arguments)]
pub(super) fn patch_object(
    state: &AppState,
    rt: &Arc<ResourceType>,
    ns: &str,
    name: &str,
    part: Part,
    q: &Query,
    headers: &HeaderMap,
    body: &Bytes,
    write: &WriteOpts,
) -> Result<Response, ApiError> {
    let store = &state.store;
    let content_type = content_type(headers);
    let now = meta::now_rfc3339();
    let bad = |e: &dyn std::fmt::Display| ApiError::bad_request(e.to_string());
    match content_type.as_str() {
        "application/apply-patch+yaml" | "application/apply-patch+json" => {
            let manager = q
                .get("fieldManager")
                .filter(|m| !m.is_empty())
                .ok_or_else(|| {
                    ApiError::bad_request(
                        "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
                    )
                })?
                .to_string();
            let force = q.flag("force");
            let mut applied = parse_yaml_or_json(body)?;
            if !applied.is_object() {
                return Err(ApiError::bad_request("apply patch must be an object"));
            }
            // Server-side apply is always strict about fields, whatever the directive.
            check_fields(
                rt,
                &Query::parse("fieldValidation=Strict"),
                &mut applied,
                true,
            )?;
            let applied_name = meta::name(&applied);
            if !applied_name.is_empty() && applied_name != name {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({applied_name}) does not match the name on the URL ({name})"
                )));
            }
            let (out, created) = store.upsert_shared(rt, ns, name, part, write, |cur| {
                let mut base = applied.clone();
                if cur.is_none() {
                    meta::metadata_mut(&mut base).insert("name".into(), json!(name));
                }
                let mut result = patch::apply(cur, &base, &manager, force, &now)
                    .map_err(|e| apply_error(rt, name, e))?;
                if cur.is_none() {
                    meta::metadata_mut(&mut result).insert("name".into(), json!(name));
                }
                Ok(result)
            })?;
            let code = if created {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            };
            Ok(json_response(code, &out))
        }
        "application/json-patch+json" => {
            let p: Value = serde_json::from_slice(body).map_err(|e| bad(&e))?;
            let out = store.modify_shared(rt, ns, name, part, write, |cur| {
                patch::json_patch(cur, &p).map_err(|e| patch_error(rt, name, e))
            })?;
            Ok(json_response(StatusCode::OK, &out))
        }
        "application/merge-patch+json" => {
            let mut p: Value = serde_json::from_slice(body).map_err(|e| bad(&e))?;
            if !p.is_object() {
                return Err(ApiError::bad_request("merge patch must be a JSON object"));
            }
            let warnings = check_fields(rt, q, &mut p, true)?;
            let out = store.modify_shared(rt, ns, name, part, write, |cur| {
                Ok(patch::merge_patch(cur, &p))
            })?;
            Ok(with_warnings(
                json_response(StatusCode::OK, &out),
                &warnings,
            ))
        }
        "application/strategic-merge-patch+json" if !rt.custom => {
            let mut p: Value = serde_json::from_slice(body).map_err(|e| bad(&e))?;
            let warnings = check_fields(rt, q, &mut p, true)?;
            let out = store.modify_shared(rt, ns, name, part, write, |cur| {
                patch::strategic_merge_patch(cur, &p).map_err(|e| patch_error(rt, name, e))
            })?;
            Ok(with_warnings(
                json_response(StatusCode::OK, &out),
                &warnings,
            ))
        }
        other => Err(ApiError {
            message: format!(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml{}; got {other:?}",
                if rt.custom {
                    ""
                } else {
                    ", application/strategic-merge-patch+json"
                }
            ),
            ..ApiError::unsupported_media_type(other)
        }),
    }
}

pub(crate) fn patch_error(rt: &ResourceType, name: &str, e: patch::PatchError) -> ApiError {
    ApiError {
        message: format!("{} \"{name}\": {e}", rt.qualified()),
        ..ApiError::invalid(&rt.group, &rt.kind, name, vec![])
    }
}

pub(super) fn apply_error(rt: &ResourceType, name: &str, e: patch::ApplyError) -> ApiError {
    match e {
        patch::ApplyError::Conflict { conflicts } => {
            let listed: Vec<String> = conflicts
                .iter()
                .map(|(m, f)| format!("conflict with \"{m}\": {f}"))
                .collect();
            let causes = conflicts
                .iter()
                .map(|(m, f)| {
                    crate::api_error::cause(
                        "FieldManagerConflict",
                        f.clone(),
                        format!("conflict with \"{m}\""),
                    )
                })
                .collect();
            ApiError {
                message: format!(
                    "Apply failed with {} conflict{}: {}",
                    conflicts.len(),
                    if conflicts.len() == 1 { "" } else { "s" },
                    listed.join(", ")
                ),
                ..ApiError::conflict(&rt.group, &rt.plural, name, "apply conflict")
            }
            .with_causes(causes)
        }
        other => ApiError::bad_request(other.to_string()),
    }
}
