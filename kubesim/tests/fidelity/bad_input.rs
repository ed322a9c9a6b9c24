//! Bad input gets the class of error a real API server gives, and changes nothing.

use serde_json::Value;

use super::support::{Sim, start};

const CMS: &str = "/api/v1/namespaces/default/configmaps";
const JSON: Option<&str> = Some("application/json");
const APPLY: Option<&str> = Some("application/apply-patch+yaml");

/// One bad request and the `Status` it must get.
struct Case {
    what: &'static str,
    method: &'static str,
    path: &'static str,
    content_type: Option<&'static str>,
    body: &'static str,
    code: u16,
    reason: &'static str,
    /// The field the first `details.causes` entry must name, when the error carries causes.
    cause_field: Option<&'static str>,
}

const fn case(
    what: &'static str,
    method: &'static str,
    path: &'static str,
    content_type: Option<&'static str>,
    body: &'static str,
    code: u16,
    reason: &'static str,
) -> Case {
    Case {
        what,
        method,
        path,
        content_type,
        body,
        code,
        reason,
        cause_field: None,
    }
}

const CM_X: &str = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}"#;
const CM_FRESH: &str = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"fresh"}}"#;

/// Every case runs against a cluster holding ConfigMap `default/x` (data `a: "1"`) and a custom
/// resource `default/t` of kind `Thing` (`ex.io/v1`).
const CASES: &[Case] = &[
    case(
        "truncated JSON",
        "POST",
        CMS,
        JSON,
        "{\"metadata\": ",
        400,
        "BadRequest",
    ),
    case(
        "a JSON array as the object",
        "POST",
        CMS,
        JSON,
        "[1,2]",
        400,
        "BadRequest",
    ),
    case(
        "malformed YAML in an apply patch",
        "PATCH",
        "/api/v1/namespaces/default/configmaps/x?fieldManager=t",
        APPLY,
        "a: [unclosed",
        400,
        "BadRequest",
    ),
    case(
        "an apply patch without fieldManager",
        "PATCH",
        "/api/v1/namespaces/default/configmaps/x",
        APPLY,
        CM_X,
        400,
        "BadRequest",
    ),
    case(
        "an unknown core resource",
        "GET",
        "/api/v1/namespaces/default/widgets",
        None,
        "",
        404,
        "NotFound",
    ),
    case(
        "an unknown API group",
        "POST",
        "/apis/nope.io/v1/namespaces/default/things",
        JSON,
        "{}",
        404,
        "NotFound",
    ),
    Case {
        cause_field: Some("metadata.name"),
        ..case(
            "an invalid object name",
            "POST",
            CMS,
            JSON,
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"Bad_Name"}}"#,
            422,
            "Invalid",
        )
    },
    Case {
        cause_field: Some("spec.containers"),
        ..case(
            "a pod without containers",
            "POST",
            "/api/v1/namespaces/default/pods",
            JSON,
            r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[]}}"#,
            422,
            "Invalid",
        )
    },
    case(
        "a body sent as text/plain",
        "POST",
        CMS,
        Some("text/plain"),
        CM_FRESH,
        415,
        "UnsupportedMediaType",
    ),
    case(
        "a strategic merge patch of a custom resource",
        "PATCH",
        "/apis/ex.io/v1/namespaces/default/things/t",
        Some("application/strategic-merge-patch+json"),
        r#"{"spec":{"a":2}}"#,
        415,
        "UnsupportedMediaType",
    ),
    case(
        "a PUT with a stale resourceVersion",
        "PUT",
        "/api/v1/namespaces/default/configmaps/x",
        JSON,
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","resourceVersion":"1"},"data":{"a":"2"}}"#,
        409,
        "Conflict",
    ),
    case(
        "a merge patch with a stale resourceVersion",
        "PATCH",
        "/api/v1/namespaces/default/configmaps/x",
        Some("application/merge-patch+json"),
        r#"{"metadata":{"resourceVersion":"1"},"data":{"a":"3"}}"#,
        409,
        "Conflict",
    ),
    case(
        "a PUT whose body names another object",
        "PUT",
        "/api/v1/namespaces/default/configmaps/x",
        JSON,
        r#"{"metadata":{"name":"y"}}"#,
        400,
        "BadRequest",
    ),
    case(
        "a POST whose body names another namespace",
        "POST",
        CMS,
        JSON,
        r#"{"metadata":{"name":"z","namespace":"other"}}"#,
        400,
        "BadRequest",
    ),
    case(
        "a POST to a named object",
        "POST",
        "/api/v1/namespaces/default/configmaps/x",
        JSON,
        "{}",
        405,
        "MethodNotAllowed",
    ),
    case(
        "an unknown propagationPolicy",
        "DELETE",
        "/api/v1/namespaces/default/configmaps/x",
        JSON,
        r#"{"propagationPolicy":"Sideways"}"#,
        400,
        "BadRequest",
    ),
];

/// What the store holds: a list answer carries the store-wide resourceVersion, so any write,
/// to any type, changes it.
async fn snapshot(sim: &Sim) -> Value {
    let (code, list) = sim.raw("GET", CMS, None, "").await;
    assert_eq!(code, 200);
    list
}

async fn must_create(sim: &Sim, path: &str, body: &str) {
    let (code, v) = sim.raw("POST", path, JSON, body).await;
    assert_eq!(code, 201, "setup POST {path}: {v}");
}

#[tokio::test]
async fn bad_requests_get_the_api_servers_status_and_change_nothing() {
    let sim = start().await;
    must_create(&sim, CMS, r#"{"metadata":{"name":"x"},"data":{"a":"1"}}"#).await;
    must_create(
        &sim,
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        r#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"things.ex.io"},
        "spec":{"group":"ex.io","scope":"Namespaced","names":{"plural":"things","kind":"Thing"},
        "versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}"#,
    )
    .await;
    must_create(
        &sim,
        "/apis/ex.io/v1/namespaces/default/things",
        r#"{"apiVersion":"ex.io/v1","kind":"Thing","metadata":{"name":"t"},"spec":{"a":1}}"#,
    )
    .await;

    for c in CASES {
        let before = snapshot(&sim).await;
        let (code, status) = sim.raw(c.method, c.path, c.content_type, c.body).await;
        let what = c.what;
        assert_eq!(code, c.code, "{what}: {status}");
        assert_eq!(status["kind"], "Status", "{what}: {status}");
        assert_eq!(status["reason"], c.reason, "{what}: {status}");
        assert_eq!(status["code"], c.code, "{what}: {status}");
        if let Some(field) = c.cause_field {
            assert_eq!(
                status["details"]["causes"][0]["field"], field,
                "{what}: {status}"
            );
        }
        assert_eq!(snapshot(&sim).await, before, "{what} changed the store");
    }

    // The rejections were about the requests, not the objects: the same objects, sent right,
    // are accepted.
    let (code, _) = sim.raw("POST", CMS, JSON, CM_FRESH).await;
    assert_eq!(code, 201, "a ConfigMap sent as application/json is created");
    let (code, _) = sim
        .raw(
            "PATCH",
            "/apis/ex.io/v1/namespaces/default/things/t",
            Some("application/merge-patch+json"),
            r#"{"spec":{"a":2}}"#,
        )
        .await;
    assert_eq!(code, 200, "a merge patch of the custom resource is applied");
}
