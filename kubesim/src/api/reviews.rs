//! What the API server answers without storing anything: TokenRequest
//! (`serviceaccounts/NAME/token`), TokenReview, SelfSubjectReview (`kubectl auth whoami`) and the
//! access reviews (`kubectl auth can-i`).

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde_json::{Value, json};

use super::{AppState, Verb, json_response, method_not_allowed, parse_body};
use crate::api_error::{ApiError, cause};
use crate::auth::{BoundPod, IssueError, TokenSpec, UserInfo};
use crate::meta;
use crate::meta::At;
use crate::rbac::{self, RequestAttributes};
use crate::resources::ResourceType;

/// The echo of a review request with its `status`: what the API server returns (201).
fn answer(rt: &ResourceType, request: &Value, ns: &str, status: Value) -> Response {
    let mut metadata = json!({"creationTimestamp": null});
    if rt.namespaced {
        metadata["namespace"] = json!(ns);
    }
    let out = json!({
        "kind": rt.kind,
        "apiVersion": rt.api_version(),
        "metadata": metadata,
        "spec": request.get("spec").cloned().unwrap_or(json!({})),
        "status": status,
    });
    json_response(StatusCode::CREATED, &out)
}

fn check_kind(rt: &ResourceType, obj: &Value) -> Result<(), ApiError> {
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or(&rt.kind);
    let av = obj.get("apiVersion").and_then(Value::as_str);
    if kind != rt.kind || av.is_some_and(|v| v != rt.api_version()) {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({}) does not match the expected API version ({}) or kind {kind} does not match {}",
            av.unwrap_or(""),
            rt.api_version(),
            rt.kind
        )));
    }
    Ok(())
}

/// The attributes an access review asks about.
fn review_attributes(rt: &ResourceType, spec: &Value) -> Result<RequestAttributes, ApiError> {
    let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    match (
        spec.get("resourceAttributes"),
        spec.get("nonResourceAttributes"),
    ) {
        (Some(r), None) if r.is_object() => Ok(RequestAttributes {
            verb: s(r, "verb"),
            resource_request: true,
            api_group: s(r, "group"),
            api_version: s(r, "version"),
            namespace: s(r, "namespace"),
            resource: s(r, "resource"),
            subresource: s(r, "subresource"),
            name: s(r, "name"),
            ..RequestAttributes::default()
        }),
        (None, Some(n)) if n.is_object() => Ok(RequestAttributes {
            verb: s(n, "verb"),
            path: s(n, "path"),
            ..RequestAttributes::default()
        }),
        _ => Err(ApiError::invalid(
            &rt.group,
            &rt.kind,
            "",
            vec![cause(
                "FieldValueInvalid",
                "spec.resourceAttributes",
                "Invalid value: \"null\": exactly one of nonResourceAttributes or resourceAttributes must be specified",
            )],
        )),
    }
}

fn decision_status(state: &AppState, user: &UserInfo, attrs: &RequestAttributes) -> Value {
    let d = rbac::authorize(&state.store, user, attrs);
    let mut status = json!({"allowed": d.allowed});
    if !d.reason.is_empty() {
        status["reason"] = json!(d.reason);
    }
    status
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// `POST` of a review type.
pub fn create(
    state: &AppState,
    user: &UserInfo,
    rt: &ResourceType,
    verb: Verb,
    ns: &str,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<Response, ApiError> {
    if verb != Verb::Create {
        return Err(method_not_allowed(verb));
    }
    let request = parse_body(headers, body)?;
    check_kind(rt, &request)?;
    let spec = request.get("spec").cloned().unwrap_or(json!({}));
    let status = match rt.plural.as_str() {
        "selfsubjectreviews" => json!({"userInfo": user.to_json()}),
        "tokenreviews" => {
            let token = spec.get("token").and_then(Value::as_str).unwrap_or("");
            let mut audiences = strings(spec.get("audiences"));
            if audiences.is_empty() {
                audiences.push(crate::auth::ISSUER.to_string());
            }
            let reviewed = if token.starts_with(crate::node_token::PREFIX) {
                state
                    .auth
                    .authenticate(Some(format!("Bearer {token}").as_bytes()), None)
                    .ok()
            } else {
                state.auth.review(token, &audiences)
            };
            match reviewed {
                Some(u) => {
                    json!({"authenticated": true, "user": u.to_json(), "audiences": audiences})
                }
                None => json!({"user": {}, "error": "[invalid bearer token, token lookup failed]"}),
            }
        }
        "selfsubjectaccessreviews" => {
            let attrs = review_attributes(rt, &spec)?;
            decision_status(state, user, &attrs)
        }
        "subjectaccessreviews" | "localsubjectaccessreviews" => {
            let mut attrs = review_attributes(rt, &spec)?;
            if rt.namespaced {
                if attrs.namespace.is_empty() {
                    attrs.namespace = ns.to_string();
                } else if attrs.namespace != ns {
                    return Err(ApiError::bad_request(format!(
                        "spec.resourceAttributes.namespace must match namespace: {ns}"
                    )));
                }
            }
            let subject = UserInfo {
                name: spec
                    .get("user")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                uid: spec
                    .get("uid")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                groups: strings(spec.get("groups")),
                ..UserInfo::default()
            };
            decision_status(state, &subject, &attrs)
        }
        "selfsubjectrulesreviews" => {
            let namespace = spec.get("namespace").and_then(Value::as_str).unwrap_or("");
            let (rules, errors) = rbac::rules_for(&state.store, user, namespace);
            let (resource, non_resource): (Vec<Value>, Vec<Value>) = rules
                .into_iter()
                .partition(|r| r.get("nonResourceURLs").is_none());
            let non_resource: Vec<Value> = non_resource
                .into_iter()
                .map(|r| json!({"verbs": r.get("verbs"), "nonResourceURLs": r.get("nonResourceURLs")}))
                .collect();
            let mut status = json!({"resourceRules": resource, "nonResourceRules": non_resource, "incomplete": !errors.is_empty()});
            if !errors.is_empty() {
                status["evaluationError"] = json!(errors.join(", "));
            }
            status
        }
        other => {
            return Err(ApiError::no_route(&format!("{}/{other}", rt.group)));
        }
    };
    Ok(answer(rt, &request, ns, status))
}

/// `POST /api/v1/namespaces/NS/serviceaccounts/NAME/token`: a TokenRequest.
pub fn token_request(
    state: &AppState,
    ns: &str,
    name: &str,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<Response, ApiError> {
    let request = parse_body(headers, body)?;
    let spec = request.get("spec").cloned().unwrap_or(json!({}));
    let expiration = spec
        .get("expirationSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(crate::auth::DEFAULT_EXPIRATION_SECONDS);
    let bound = match spec.get("boundObjectRef").filter(|b| b.is_object()) {
        None => None,
        Some(b) => {
            let kind = b.get("kind").and_then(Value::as_str).unwrap_or("");
            let pod_name = b.get("name").and_then(Value::as_str).unwrap_or("");
            if kind != "Pod" {
                return Err(ApiError::invalid(
                    "authentication.k8s.io",
                    "TokenRequest",
                    name,
                    vec![cause(
                        "FieldValueNotSupported",
                        "spec.boundObjectRef.kind",
                        format!(
                            "Unsupported value: \"{kind}\": kubesim binds tokens to pods only: supported values: \"Pod\""
                        ),
                    )],
                ));
            }
            let pod = state
                .store
                .get_raw("", "pods", ns, pod_name)
                .ok_or_else(|| ApiError::not_found("", "pods", pod_name))?;
            let want_uid = b.get("uid").and_then(Value::as_str).unwrap_or("");
            if !want_uid.is_empty() && want_uid != meta::uid(&pod) {
                return Err(ApiError::conflict(
                    "",
                    "pods",
                    pod_name,
                    &format!(
                        "the UID in the bound object reference ({want_uid}) does not match the UID in record. The object might have been deleted and then recreated"
                    ),
                ));
            }
            Some(BoundPod {
                name: pod_name.to_string(),
                uid: meta::uid(&pod).to_string(),
                node: pod
                    .at("/spec/nodeName")
                    .and_then(Value::as_str)
                    .filter(|n| !n.is_empty())
                    .map(str::to_string),
            })
        }
    };
    let mut audiences = strings(spec.get("audiences"));
    if audiences.is_empty() {
        audiences.push(crate::auth::ISSUER.to_string());
    }
    let issued = state
        .auth
        .issue(&TokenSpec {
            namespace: ns.to_string(),
            service_account: name.to_string(),
            audiences: audiences.clone(),
            expiration_seconds: expiration,
            bound_pod: bound.clone(),
        })
        .map_err(|e| match e {
            IssueError::ServiceAccountNotFound { name } => {
                ApiError::not_found("", "serviceaccounts", &name)
            }
            IssueError::TooShort { seconds } => ApiError::invalid(
                "authentication.k8s.io",
                "TokenRequest",
                name,
                vec![cause(
                    "FieldValueInvalid",
                    "spec.expirationSeconds",
                    format!(
                        "Invalid value: {seconds}: may not specify a duration less than 10 minutes"
                    ),
                )],
            ),
        })?;
    let mut out_spec = json!({"audiences": audiences, "expirationSeconds": expiration});
    if let Some(b) = spec.get("boundObjectRef").filter(|b| b.is_object()) {
        let mut b = b.clone();
        if let Some(p) = &bound {
            b["uid"] = json!(p.uid);
        }
        out_spec["boundObjectRef"] = b;
    }
    Ok(json_response(
        StatusCode::CREATED,
        &json!({
            "kind": "TokenRequest",
            "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": name, "namespace": ns, "creationTimestamp": null},
            "spec": out_spec,
            "status": {"token": issued.token, "expirationTimestamp": issued.expiration_timestamp},
        }),
    ))
}
