//! Bad input gets the class of error a real API server gives, and changes nothing.

use serde_json::Value;

use super::support::{Sim, start};

const CMS: &str = "/api/v1/namespaces/default/configmaps";

/// Everything stored, as a comparable snapshot (resourceVersion included).
async fn snapshot(sim: &Sim) -> Value {
    let (code, list) = sim.raw("GET", CMS, None, "").await;
    assert_eq!(code, 200);
    list
}

async fn assert_rejected(
    sim: &Sim,
    method: &str,
    path: &str,
    ct: Option<&str>,
    body: &str,
    code: u16,
    reason: &str,
) {
    let before = snapshot(sim).await;
    let (got, status) = sim.raw(method, path, ct, body).await;
    assert_eq!(got, code, "{method} {path} {body}: {status}");
    assert_eq!(status["kind"], "Status", "{status}");
    assert_eq!(status["reason"], reason, "{status}");
    assert_eq!(status["code"], code);
    assert_eq!(
        snapshot(sim).await,
        before,
        "{method} {path} changed the store"
    );
}

#[tokio::test]
async fn malformed_json_is_bad_request() {
    let sim = start().await;
    assert_rejected(
        &sim,
        "POST",
        CMS,
        Some("application/json"),
        "{\"metadata\": ",
        400,
        "BadRequest",
    )
    .await;
    assert_rejected(
        &sim,
        "POST",
        CMS,
        Some("application/json"),
        "[1,2]",
        400,
        "BadRequest",
    )
    .await;
}

#[tokio::test]
async fn malformed_yaml_apply_is_bad_request() {
    let sim = start().await;
    let path = format!("{CMS}/x?fieldManager=t");
    assert_rejected(
        &sim,
        "PATCH",
        &path,
        Some("application/apply-patch+yaml"),
        "a: [unclosed",
        400,
        "BadRequest",
    )
    .await;
}

#[tokio::test]
async fn apply_without_field_manager_is_bad_request() {
    let sim = start().await;
    let body = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}"#;
    assert_rejected(
        &sim,
        "PATCH",
        &format!("{CMS}/x"),
        Some("application/apply-patch+yaml"),
        body,
        400,
        "BadRequest",
    )
    .await;
}

#[tokio::test]
async fn unknown_resource_is_not_found() {
    let sim = start().await;
    assert_rejected(
        &sim,
        "GET",
        "/api/v1/namespaces/default/widgets",
        None,
        "",
        404,
        "NotFound",
    )
    .await;
    assert_rejected(
        &sim,
        "POST",
        "/apis/nope.io/v1/namespaces/default/things",
        Some("application/json"),
        "{}",
        404,
        "NotFound",
    )
    .await;
}

#[tokio::test]
async fn invalid_name_is_invalid_with_a_cause() {
    let sim = start().await;
    let body = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"Bad_Name"}}"#;
    assert_rejected(
        &sim,
        "POST",
        CMS,
        Some("application/json"),
        body,
        422,
        "Invalid",
    )
    .await;
    let (_, status) = sim.raw("POST", CMS, Some("application/json"), body).await;
    assert_eq!(status["details"]["causes"][0]["field"], "metadata.name");
}

#[tokio::test]
async fn pod_without_containers_is_invalid() {
    let sim = start().await;
    let body =
        r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[]}}"#;
    let (code, status) = sim
        .raw(
            "POST",
            "/api/v1/namespaces/default/pods",
            Some("application/json"),
            body,
        )
        .await;
    assert_eq!((code, status["reason"].as_str()), (422, Some("Invalid")));
    let (code, _) = sim
        .raw("GET", "/api/v1/namespaces/default/pods/p", None, "")
        .await;
    assert_eq!(code, 404);
}

#[tokio::test]
async fn wrong_content_type_is_unsupported_media_type() {
    let sim = start().await;
    let body = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}"#;
    assert_rejected(
        &sim,
        "POST",
        CMS,
        Some("text/plain"),
        body,
        415,
        "UnsupportedMediaType",
    )
    .await;
    let (code, _) = sim.raw("POST", CMS, Some("application/json"), body).await;
    assert_eq!(
        code, 201,
        "the same body with the right content type is accepted"
    );
}

#[tokio::test]
async fn strategic_merge_on_custom_resources_is_unsupported() {
    let sim = start().await;
    let crd = r#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"things.ex.io"},
        "spec":{"group":"ex.io","scope":"Namespaced","names":{"plural":"things","kind":"Thing"},
        "versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}"#;
    let (code, _) = sim
        .raw(
            "POST",
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            Some("application/json"),
            crd,
        )
        .await;
    assert_eq!(code, 201);
    let (code, _) = sim
        .raw(
            "POST",
            "/apis/ex.io/v1/namespaces/default/things",
            Some("application/json"),
            r#"{"apiVersion":"ex.io/v1","kind":"Thing","metadata":{"name":"t"},"spec":{"a":1}}"#,
        )
        .await;
    assert_eq!(code, 201);
    let (code, status) = sim
        .raw(
            "PATCH",
            "/apis/ex.io/v1/namespaces/default/things/t",
            Some("application/strategic-merge-patch+json"),
            r#"{"spec":{"a":2}}"#,
        )
        .await;
    assert_eq!(
        (code, status["reason"].as_str()),
        (415, Some("UnsupportedMediaType"))
    );
}

#[tokio::test]
async fn wrong_resource_version_is_conflict() {
    let sim = start().await;
    let (code, _) = sim
        .raw(
            "POST",
            CMS,
            Some("application/json"),
            r#"{"metadata":{"name":"x"},"data":{"a":"1"}}"#,
        )
        .await;
    assert_eq!(code, 201);
    let body = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","resourceVersion":"1"},"data":{"a":"2"}}"#;
    assert_rejected(
        &sim,
        "PUT",
        &format!("{CMS}/x"),
        Some("application/json"),
        body,
        409,
        "Conflict",
    )
    .await;
    let merge = r#"{"metadata":{"resourceVersion":"1"},"data":{"a":"3"}}"#;
    assert_rejected(
        &sim,
        "PATCH",
        &format!("{CMS}/x"),
        Some("application/merge-patch+json"),
        merge,
        409,
        "Conflict",
    )
    .await;
}

#[tokio::test]
async fn mismatched_names_and_namespaces_are_bad_requests() {
    let sim = start().await;
    sim.raw(
        "POST",
        CMS,
        Some("application/json"),
        r#"{"metadata":{"name":"x"}}"#,
    )
    .await;
    let body = r#"{"metadata":{"name":"y"}}"#;
    assert_rejected(
        &sim,
        "PUT",
        &format!("{CMS}/x"),
        Some("application/json"),
        body,
        400,
        "BadRequest",
    )
    .await;
    let body = r#"{"metadata":{"name":"z","namespace":"other"}}"#;
    assert_rejected(
        &sim,
        "POST",
        CMS,
        Some("application/json"),
        body,
        400,
        "BadRequest",
    )
    .await;
}

#[tokio::test]
async fn unsupported_method_is_method_not_allowed() {
    let sim = start().await;
    assert_rejected(
        &sim,
        "POST",
        &format!("{CMS}/x"),
        Some("application/json"),
        "{}",
        405,
        "MethodNotAllowed",
    )
    .await;
}

#[tokio::test]
async fn invalid_propagation_policy_is_bad_request() {
    let sim = start().await;
    sim.raw(
        "POST",
        CMS,
        Some("application/json"),
        r#"{"metadata":{"name":"x"}}"#,
    )
    .await;
    let body = r#"{"propagationPolicy":"Sideways"}"#;
    assert_rejected(
        &sim,
        "DELETE",
        &format!("{CMS}/x"),
        Some("application/json"),
        body,
        400,
        "BadRequest",
    )
    .await;
}
