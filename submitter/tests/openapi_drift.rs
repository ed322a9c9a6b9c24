//! `openapi/spark-submit.yaml` against the code, so the document cannot drift unnoticed:
//! - every documented path is served by the service's `app()` (its documented methods answer a
//!   documented status, every other method 405), and no undocumented path under the served
//!   prefixes is (404 `NOT_FOUND`);
//! - the `error_code` enum is exactly `api::ErrorCode`'s wire strings, and each code's status is
//!   documented where it can be answered;
//! - each wire schema's properties, required set, types and enums are what the serde types
//!   produce (a fully populated and a minimal value, serialized).
//!
//! The live server is checked against the same document by
//! `tests/python/test_openapi_schemathesis.py`.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use axum::Router;
use axum::body::Body;
use http::{Method, Request, StatusCode, header};
use http_body_util::BodyExt;
use kubesim::{Cluster, ClusterConfig};
use serde::Serialize;
use serde_json::{Value, json};
use submission::api::{
    ClientAction, ContainerState, DriverPhase, DriverStatus, ErrorCode, ErrorResponse,
    ListResponse, PodPhase, SubmitRequest, SubmitResponse,
};
use submitter::policy::Access;
use submitter::service::{ServiceConfig, app};
use submitter::state::AppState;
use tower::ServiceExt;

const DOCUMENT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../openapi/spark-submit.yaml");

/// Methods probed on every path.
const METHODS: [Method; 5] = [
    Method::GET,
    Method::POST,
    Method::PUT,
    Method::PATCH,
    Method::DELETE,
];

fn document() -> Value {
    let text = std::fs::read_to_string(DOCUMENT).expect("openapi/spark-submit.yaml is readable");
    yaml_serde::from_str(&text).expect("openapi/spark-submit.yaml is YAML")
}

/// Follows a local `$ref` (`#/components/...`), repeatedly.
fn resolve<'a>(doc: &'a Value, mut value: &'a Value) -> &'a Value {
    while let Some(reference) = value.get("$ref").and_then(Value::as_str) {
        let pointer = reference
            .strip_prefix('#')
            .unwrap_or_else(|| panic!("only local $refs are used, not {reference}"));
        value = doc
            .pointer(pointer)
            .unwrap_or_else(|| panic!("dangling $ref {reference}"));
    }
    value
}

fn schema<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc.pointer(&format!("/components/schemas/{name}"))
        .unwrap_or_else(|| panic!("no schema {name} in the document"))
}

/// `(path template, method) -> documented response statuses`.
fn operations(doc: &Value) -> BTreeMap<(String, Method), BTreeSet<u16>> {
    let mut operations = BTreeMap::new();
    for (path, item) in doc["paths"].as_object().expect("paths is a map") {
        for (method, operation) in item.as_object().expect("a path item is a map") {
            let Ok(method) = method.to_uppercase().parse::<Method>() else {
                continue;
            };
            if !METHODS.contains(&method) {
                continue; // parameters, summary, ...
            }
            let statuses = operation["responses"]
                .as_object()
                .expect("an operation has responses")
                .keys()
                .map(|code| code.parse::<u16>().expect("statuses are numeric"))
                .collect();
            operations.insert((path.clone(), method), statuses);
        }
    }
    operations
}

/// A concrete path for a template: `{name}` becomes `drift-name`.
fn concrete(template: &str) -> String {
    template
        .split('/')
        .map(|segment| match segment.strip_prefix('{') {
            Some(name) => format!("drift-{}", name.trim_end_matches('}').replace('_', "-")),
            None => segment.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// Whether `path` matches a documented template (a `{param}` matches one non-empty segment).
fn documented(templates: &BTreeSet<String>, path: &str) -> bool {
    templates.iter().any(|template| {
        let want: Vec<_> = template.split('/').collect();
        let have: Vec<_> = path.split('/').collect();
        want.len() == have.len()
            && want
                .iter()
                .zip(&have)
                .all(|(w, h)| w == h || (w.starts_with('{') && !h.is_empty()))
    })
}

struct Service {
    _cluster: Cluster,
    app: Router,
}

async fn service() -> Service {
    let cluster = Cluster::start(ClusterConfig::default()).await.unwrap();
    let state = AppState::new(cluster.client().unwrap(), Access::InsecureDev(None));
    let app = app(state, &ServiceConfig::default());
    Service {
        _cluster: cluster,
        app,
    }
}

/// Status and JSON body (Null when not JSON) of one request through the app.
async fn call(app: &Router, method: Method, path: &str) -> (StatusCode, Value) {
    let mut request = Request::builder().method(method.clone()).uri(path);
    let body = if method == Method::GET {
        Body::empty()
    } else {
        // Valid JSON, invalid request: a served POST answers 400 without touching Kubernetes.
        request = request.header(header::CONTENT_TYPE, "application/json");
        Body::from("{}")
    };
    let response = app
        .clone()
        .oneshot(request.body(body).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

fn error_code(body: &Value) -> Option<&str> {
    body.get("error_code").and_then(Value::as_str)
}

#[tokio::test]
async fn every_documented_route_is_served_with_its_methods_and_no_other() {
    let doc = document();
    let operations = operations(&doc);
    let templates: BTreeSet<String> = operations.keys().map(|(path, _)| path.clone()).collect();
    assert!(templates.len() >= 8, "document lost routes: {templates:?}");
    let service = service().await;
    let mut failures = Vec::new();
    for template in &templates {
        let path = concrete(template);
        for method in METHODS {
            let (status, body) = call(&service.app, method.clone(), &path).await;
            match operations.get(&(template.clone(), method.clone())) {
                Some(statuses) => {
                    // An operation documented only with errors (the Go client's readiness GET)
                    // is served by its 405; every other documented operation must not be.
                    let served = statuses.iter().any(|s| (200..300).contains(s));
                    if (served && status == StatusCode::METHOD_NOT_ALLOWED)
                        || !statuses.contains(&status.as_u16())
                    {
                        failures.push(format!(
                            "{method} {path}: documented {statuses:?}, answered {status} {body}"
                        ));
                    }
                }
                None => {
                    if status != StatusCode::METHOD_NOT_ALLOWED
                        || error_code(&body) != Some("METHOD_NOT_ALLOWED")
                    {
                        failures.push(format!(
                            "{method} {path}: not documented, so 405 expected (is the route \
                             served?), answered {status} {body}"
                        ));
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test]
async fn no_undocumented_path_is_served() {
    let doc = document();
    let templates: BTreeSet<String> = operations(&doc)
        .keys()
        .map(|(path, _)| path.clone())
        .collect();
    // Around every documented path: its parents, a child, and a trailing slash; plus names an
    // API like this one might grow.
    let mut probes: BTreeSet<String> = [
        "/",
        "/api",
        "/api/v1",
        "/api/v2/spark-submit",
        "/api/v1/submissions",
        "/api/v1/status",
        "/api/v1/drivers",
        "/api/v1/spark-submit/drift-id/status",
        "/livez",
        "/version",
        "/openapi.yaml",
        "/openapi.json",
        "/debug/pprof",
    ]
    .iter()
    .map(|path| (*path).to_owned())
    .collect();
    for template in &templates {
        let path = concrete(template);
        probes.insert(format!("{path}/extra"));
        probes.insert(format!("{path}/"));
        let mut parent = path.as_str();
        while let Some((head, _)) = parent.rsplit_once('/') {
            if !head.is_empty() {
                probes.insert(head.to_owned());
            }
            parent = head;
        }
    }
    let service = service().await;
    let mut failures = Vec::new();
    for path in probes.iter().filter(|path| !documented(&templates, path)) {
        for method in [Method::GET, Method::POST] {
            let (status, body) = call(&service.app, method.clone(), path).await;
            if status != StatusCode::NOT_FOUND || error_code(&body) != Some("NOT_FOUND") {
                failures.push(format!(
                    "{method} {path}: undocumented, so 404 NOT_FOUND expected, answered {status} {body}"
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every `ErrorCode` variant. The match does not compile when a variant is added, which points
/// here: add it to the list (and to the document).
fn every_error_code() -> Vec<ErrorCode> {
    use ErrorCode::*;
    let codes = vec![
        BadRequest,
        InvalidSparkSubmitArgs,
        MethodNotAllowed,
        UnsupportedMediaType,
        DriverPodAlreadyExists,
        InvalidPodTemplate,
        InternalServerError,
        SubmitterOverloaded,
        Unauthenticated,
        Forbidden,
        NotFound,
        PayloadTooLarge,
        SubmissionIdConflict,
        DriverGone,
        DriverOwnedByApplication,
        TooManyLogStreams,
        QuotaExceeded,
    ];
    for code in &codes {
        match code {
            BadRequest
            | InvalidSparkSubmitArgs
            | MethodNotAllowed
            | UnsupportedMediaType
            | DriverPodAlreadyExists
            | InvalidPodTemplate
            | InternalServerError
            | SubmitterOverloaded
            | Unauthenticated
            | Forbidden
            | NotFound
            | PayloadTooLarge
            | SubmissionIdConflict
            | DriverGone
            | DriverOwnedByApplication
            | TooManyLogStreams
            | QuotaExceeded => {}
        }
    }
    codes
}

fn strings(value: &Value) -> BTreeSet<String> {
    value
        .as_array()
        .expect("an array")
        .iter()
        .map(|item| match item {
            Value::Null => "null".to_owned(),
            other => other.as_str().expect("enum values are strings").to_owned(),
        })
        .collect()
}

#[test]
fn error_code_enum_is_exactly_the_codes_of_the_code() {
    let doc = document();
    let documented = strings(&schema(&doc, "ErrorCode")["enum"]);
    let codes = every_error_code();
    let wire: BTreeSet<String> = codes.iter().map(|c| c.as_str().to_owned()).collect();
    assert_eq!(documented, wire);
    let listed: HashSet<ErrorCode> = ErrorCode::ALL.into_iter().collect();
    assert_eq!(
        listed,
        codes.iter().copied().collect(),
        "ErrorCode::ALL misses a variant"
    );
}

#[test]
fn every_error_status_is_documented_where_it_can_be_answered() {
    let doc = document();
    let operations = operations(&doc);
    // Where each code is answered: the submit route answers all but those of the routes that
    // operate a submission by its id.
    let submit = ("/api/v1/spark-submit", Method::POST);
    let kills = [
        ("/api/v1/spark-submit/{submission_id}", Method::DELETE),
        ("/api/v1/drivers/{namespace}/{pod}", Method::DELETE),
    ];
    let logs = [
        ("/api/v1/spark-submit/{submission_id}/log", Method::GET),
        ("/api/v1/drivers/{namespace}/{pod}/log", Method::GET),
    ];
    for code in every_error_code() {
        let answered_by: Vec<(&str, Method)> = match code {
            // NOT_FOUND is for the look-ups (and unknown paths), never the submit route.
            ErrorCode::NotFound => kills.iter().chain(&logs).cloned().collect(),
            ErrorCode::DriverOwnedByApplication => kills.to_vec(),
            ErrorCode::DriverGone | ErrorCode::TooManyLogStreams => logs.to_vec(),
            _ => vec![submit.clone()],
        };
        let status = code.http_status();
        for (path, method) in answered_by {
            let documented = &operations[&(path.to_owned(), method.clone())];
            assert!(
                documented.contains(&status),
                "{method} {path} lacks {status} ({code})"
            );
        }
    }
    for ((path, method), statuses) in &operations {
        // Every path answers other methods with 405; every route goes through the envelope.
        assert!(statuses.contains(&405), "{method} {path} lacks 405");
        for status in statuses.iter().filter(|s| **s >= 400) {
            let response = resolve(
                &doc,
                &doc["paths"][path][method.as_str().to_lowercase()]["responses"]
                    [status.to_string()],
            );
            let body = resolve(&doc, &response["content"]["application/json"]["schema"]);
            assert_eq!(
                body,
                schema(&doc, "ErrorResponse"),
                "{method} {path} {status} is not the error envelope"
            );
        }
    }
}

/// The JSON type name of a value, as OpenAPI 3.1 spells it.
fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The types a (resolved) property schema allows.
fn allowed_types(doc: &Value, property: &Value) -> BTreeSet<String> {
    let property = resolve(doc, property);
    match &property["type"] {
        Value::String(one) => [one.clone()].into(),
        Value::Array(many) => strings(&Value::Array(many.clone())),
        other => panic!("property without a type: {property} ({other})"),
    }
}

/// Checks `name` against a fully populated and a minimal value of its serde type: properties are
/// the full value's keys, required the minimal value's keys, and each value has a documented type.
fn check_schema(doc: &Value, name: &str, full: &impl Serialize, minimal: &impl Serialize) {
    let full = serde_json::to_value(full).unwrap();
    let minimal = serde_json::to_value(minimal).unwrap();
    let schema = schema(doc, name);
    let properties = schema["properties"].as_object().expect("properties");
    let documented: BTreeSet<&str> = properties.keys().map(String::as_str).collect();
    let produced: BTreeSet<&str> = full
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(documented, produced, "{name}: properties");
    let required: BTreeSet<String> = strings(&schema["required"]);
    let always: BTreeSet<String> = minimal.as_object().unwrap().keys().cloned().collect();
    assert_eq!(required, always, "{name}: required");
    for sample in [&full, &minimal] {
        for (key, value) in sample.as_object().unwrap() {
            let types = allowed_types(doc, &properties[key]);
            assert!(
                types.contains(json_type(value)),
                "{name}.{key}: documented {types:?}, serialized {value}"
            );
            if let Some(values) = resolve(doc, &properties[key]).get("enum") {
                let text = value.as_str().map_or("null".to_owned(), str::to_owned);
                assert!(
                    strings(values).contains(&text),
                    "{name}.{key}: {text} is not in the documented enum"
                );
            }
        }
    }
}

#[test]
fn submit_request_schema_is_the_wire_type() {
    let full = SubmitRequest {
        submission_id: "id".into(),
        spark_submit_args: vec!["--master".into()],
        driver_pod_template: Some(json!({"spec": {}})),
        executor_pod_template: Some(json!({"spec": {}})),
    };
    let minimal = SubmitRequest {
        driver_pod_template: None,
        executor_pod_template: None,
        ..full.clone()
    };
    check_schema(&document(), "SubmitRequest", &full, &minimal);
}

#[test]
fn submit_response_schema_is_the_wire_type() {
    let full = SubmitResponse {
        submission_id: "id".into(),
        app_name: "spark-pi".into(),
        message: "driver pod created".into(),
        submitted_at: "2026-06-16T08:30:00Z".into(),
        spark_app_id: "spark-1".into(),
        driver_pod_name: "spark-pi-driver".into(),
        driver_pod_uid: "uid".into(),
        namespace: "default".into(),
        duplicate_submission: true,
    };
    check_schema(
        &document(),
        "SubmitResponse",
        &full,
        &SubmitResponse::default(),
    );
}

#[test]
fn error_response_schema_is_the_wire_type() {
    let body = ErrorResponse {
        submission_id: "id".into(),
        status: 422,
        error_code: ErrorCode::InvalidPodTemplate,
        message: "m".into(),
        timestamp: "2026-06-16T08:30:00Z".into(),
    };
    check_schema(&document(), "ErrorResponse", &body, &body);
}

/// Every variant of the status enums; the matches stop compiling when one is added.
fn driver_phases() -> Vec<DriverPhase> {
    use DriverPhase::*;
    let all = vec![Pending, Running, Succeeded, Failed, Unknown];
    for phase in &all {
        match phase {
            Pending | Running | Succeeded | Failed | Unknown => {}
        }
    }
    all
}

fn pod_phases() -> Vec<PodPhase> {
    use PodPhase::*;
    let all = vec![Pending, Running, Succeeded, Failed, Unknown];
    for phase in &all {
        match phase {
            Pending | Running | Succeeded | Failed | Unknown => {}
        }
    }
    all
}

fn container_states() -> Vec<ContainerState> {
    use ContainerState::*;
    let all = vec![Waiting, Running, Terminated, Absent];
    for state in &all {
        match state {
            Waiting | Running | Terminated | Absent => {}
        }
    }
    all
}

fn client_actions() -> Vec<ClientAction> {
    use ClientAction::*;
    let all = vec![Reconnect, Done, Resubmit];
    for action in &all {
        match action {
            Reconnect | Done | Resubmit => {}
        }
    }
    all
}

fn wire<T: Serialize>(values: &[T]) -> BTreeSet<String> {
    values
        .iter()
        .map(|v| {
            serde_json::to_value(v)
                .unwrap()
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect()
}

#[test]
fn driver_status_schema_is_the_wire_type() {
    let doc = document();
    let full = DriverStatus {
        submission_id: Some("id".into()),
        namespace: "default".into(),
        driver_pod_name: "spark-pi-driver".into(),
        driver_pod_uid: "uid".into(),
        spark_app_id: "spark-1".into(),
        phase: DriverPhase::Failed,
        pod_phase: Some(PodPhase::Failed),
        container_state: ContainerState::Terminated,
        exit_code: Some(1),
        reason: Some("Error".into()),
        message: Some("m".into()),
        finished_at: Some("2026-06-16T08:30:00Z".into()),
        action: ClientAction::Resubmit,
    };
    let minimal = DriverStatus {
        submission_id: None,
        pod_phase: None,
        exit_code: None,
        reason: None,
        message: None,
        finished_at: None,
        ..full.clone()
    };
    check_schema(&doc, "DriverStatus", &full, &minimal);

    assert_eq!(
        strings(&schema(&doc, "DriverPhase")["enum"]),
        wire(&driver_phases())
    );
    assert_eq!(
        strings(&schema(&doc, "ContainerState")["enum"]),
        wire(&container_states())
    );
    assert_eq!(
        strings(&schema(&doc, "ClientAction")["enum"]),
        wire(&client_actions())
    );
    let mut pod_phase = wire(&pod_phases());
    pod_phase.insert("null".into()); // absent pod
    assert_eq!(
        strings(&schema(&doc, "DriverStatus")["properties"]["pod_phase"]["enum"]),
        pod_phase
    );
}

#[test]
fn list_response_schema_is_the_wire_type() {
    let status = DriverStatus {
        submission_id: Some("id".into()),
        namespace: "default".into(),
        driver_pod_name: "spark-pi-driver".into(),
        driver_pod_uid: "uid".into(),
        spark_app_id: "spark-1".into(),
        phase: DriverPhase::Running,
        pod_phase: Some(PodPhase::Running),
        container_state: ContainerState::Running,
        exit_code: None,
        reason: None,
        message: None,
        finished_at: None,
        action: ClientAction::Reconnect,
    };
    let full = ListResponse {
        items: vec![status],
        continue_token: Some("1.6162".into()),
    };
    check_schema(&document(), "ListResponse", &full, &ListResponse::default());
}

#[test]
fn document_is_openapi_3_1_with_unique_operation_ids() {
    let doc = document();
    assert!(doc["openapi"].as_str().unwrap().starts_with("3.1."));
    let mut ids = BTreeSet::new();
    for item in doc["paths"].as_object().unwrap().values() {
        for operation in item.as_object().unwrap().values() {
            if let Some(id) = operation.get("operationId").and_then(Value::as_str) {
                assert!(ids.insert(id.to_owned()), "operationId {id} twice");
            }
        }
    }
    assert_eq!(ids.len(), 11);
}
