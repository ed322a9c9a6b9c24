//! The Rust client against a tiny scripted submitter over mTLS on 127.0.0.1: retries on
//! retryable codes only, honours Retry-After, treats 200 duplicates as success, waits for the
//! service, reads status look-ups. Sleeps are recorded, not waited.

use crate::service_support;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::json;
use service_support::{Ca, Dir, start, tls};
use submission::api::{ClientAction, DriverPhase, ErrorCode, SubmitRequest, SubmitResponse};
use submitter::envelope::{ApiError, ApiJson, router_fallbacks};
use submitter::tls::ClientAuth;
use submitter_client::{ClientConfig, SubmitterClient};

/// What the scripted server answers, in order; the last entry repeats.
#[derive(Clone)]
enum Step {
    Created,
    Duplicate,
    Fail(ApiError),
}

#[derive(Clone, Default)]
struct Script {
    steps: Arc<Mutex<VecDeque<Step>>>,
    seen: Arc<Mutex<Vec<String>>>,
}

async fn submit(
    State(script): State<Script>,
    ApiJson(request): ApiJson<SubmitRequest>,
) -> Response {
    script
        .seen
        .lock()
        .unwrap()
        .push(request.submission_id.clone());
    let step = {
        let mut steps = script.steps.lock().unwrap();
        if steps.len() > 1 {
            steps.pop_front()
        } else {
            steps.front().cloned()
        }
    };
    let answer = |status, duplicate| {
        let body = SubmitResponse {
            submission_id: request.submission_id.clone(),
            app_name: "spark-pi".into(),
            driver_pod_name: "spark-pi-driver".into(),
            namespace: "spark".into(),
            duplicate_submission: duplicate,
            ..SubmitResponse::default()
        };
        (status, Json(body)).into_response()
    };
    match step.expect("script is not empty") {
        Step::Created => answer(StatusCode::CREATED, false),
        Step::Duplicate => answer(StatusCode::OK, true),
        Step::Fail(error) => error
            .with_submission_id(request.submission_id)
            .into_response(),
    }
}

fn app(script: Script) -> Router {
    let router = Router::new()
        .route("/api/v1/spark-submit", post(submit))
        .route(
            "/api/v1/drivers/{namespace}/{pod}",
            get(
                |Path((namespace, pod)): Path<(String, String)>| async move {
                    Json(json!({
                        "namespace": namespace, "driver_pod_name": pod, "driver_pod_uid": "u",
                        "spark_app_id": "spark-1", "phase": "Succeeded", "pod_phase": "Running",
                        "container_state": "terminated", "exit_code": 0, "action": "Done"
                    }))
                },
            ),
        )
        .route(
            "/api/v1/spark-submit/{id}",
            get(|Path(id): Path<String>| async move {
                ApiError::new(ErrorCode::NotFound, "no such submission").with_submission_id(id)
            }),
        )
        .with_state(script);
    router_fallbacks(router)
}

struct Harness {
    client: SubmitterClient,
    script: Script,
    sleeps: Arc<Mutex<Vec<Duration>>>,
    _server: service_support::Server,
    _dir: Dir,
}

async fn harness(steps: Vec<Step>, max_retries: u32) -> Harness {
    let ca = Ca::new("test ca");
    let dir = Dir::new();
    let (transport, _) = tls(
        dir.server_files(&ca, &ca.server("server")),
        ClientAuth::Required,
    );
    let script = Script {
        steps: Arc::new(Mutex::new(steps.into())),
        ..Script::default()
    };
    let server = start(app(script.clone()), transport).await;
    let client_leaf = ca.client("operator.spark.svc", "spiffe://x/operator", "operator");
    let (ca_file, cert, key) = dir.client_files("operator", &ca, &client_leaf);
    let mut config = ClientConfig::new(format!(
        "https://127.0.0.1:{}/api/v1/spark-submit",
        server.addr.port()
    ));
    config.ca = Some(ca_file);
    config.cert = Some(cert);
    config.key = Some(key);
    config.max_retries = max_retries;
    config.initial_backoff = Duration::from_millis(100);
    config.request_timeout = Duration::from_secs(5);
    let sleeps = Arc::new(Mutex::new(Vec::new()));
    let recorder = sleeps.clone();
    let client = SubmitterClient::new(config)
        .unwrap()
        .with_jitter(Arc::new(|| 1.0))
        .with_sleep(Arc::new(move |delay| {
            recorder.lock().unwrap().push(delay);
            Box::pin(async {})
        }));
    Harness {
        client,
        script,
        sleeps,
        _server: server,
        _dir: dir,
    }
}

fn request() -> SubmitRequest {
    SubmitRequest {
        submission_id: "550e8400".into(),
        spark_submit_args: vec!["--master".into(), "k8s://https://kubernetes".into()],
        driver_pod_template: None,
        executor_pod_template: Some(json!({"spec": {}})),
    }
}

fn internal() -> Step {
    Step::Fail(ApiError::new(
        ErrorCode::InternalServerError,
        "kube said no",
    ))
}

#[tokio::test]
async fn retries_on_503_then_succeeds() {
    let overloaded = Step::Fail(ApiError::overloaded());
    let h = harness(vec![overloaded.clone(), overloaded, Step::Created], 5).await;
    let response = h.client.submit(&request()).await.unwrap();
    assert!(!response.duplicate_submission);
    assert_eq!(response.driver_ref(), "spark:spark-pi-driver");
    assert_eq!(*h.script.seen.lock().unwrap(), ["550e8400"; 3]);
    // The envelope's Retry-After (1 s) outweighs the 100/200 ms backoff.
    assert_eq!(*h.sleeps.lock().unwrap(), [Duration::from_secs(1); 2]);
}

#[tokio::test]
async fn retries_on_500_with_exponential_backoff() {
    let h = harness(vec![internal(), internal(), internal(), Step::Created], 5).await;
    h.client.submit(&request()).await.unwrap();
    let expected: Vec<_> = [100, 200, 400].map(Duration::from_millis).into();
    assert_eq!(*h.sleeps.lock().unwrap(), expected);
}

#[tokio::test]
async fn honours_retry_after() {
    let slow_down = Step::Fail(ApiError::overloaded().with_retry_after(Duration::from_secs(7)));
    let h = harness(vec![slow_down, Step::Created], 5).await;
    h.client.submit(&request()).await.unwrap();
    assert_eq!(*h.sleeps.lock().unwrap(), [Duration::from_secs(7)]);
}

#[tokio::test]
async fn stops_on_400() {
    let bad = Step::Fail(ApiError::new(
        ErrorCode::InvalidSparkSubmitArgs,
        "no --class",
    ));
    let h = harness(vec![bad, Step::Created], 5).await;
    let error = h.client.submit(&request()).await.unwrap_err();
    assert_eq!(error.kind(), "rejected");
    assert_eq!(error.code(), Some(ErrorCode::InvalidSparkSubmitArgs));
    assert_eq!(error.status(), Some(400));
    assert_eq!(h.script.seen.lock().unwrap().len(), 1);
    assert!(h.sleeps.lock().unwrap().is_empty());
}

#[tokio::test]
async fn stops_on_409_conflict() {
    let taken = Step::Fail(ApiError::new(ErrorCode::DriverPodAlreadyExists, "taken"));
    let h = harness(vec![taken], 5).await;
    let error = h.client.submit(&request()).await.unwrap_err();
    assert_eq!(error.code(), Some(ErrorCode::DriverPodAlreadyExists));
    assert_eq!(h.script.seen.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn gives_up_after_max_attempts_with_the_last_error() {
    let h = harness(vec![internal()], 3).await;
    let error = h.client.submit(&request()).await.unwrap_err();
    assert_eq!(error.code(), Some(ErrorCode::InternalServerError));
    assert_eq!(h.script.seen.lock().unwrap().len(), 3);
    assert_eq!(h.sleeps.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn duplicate_200_is_success() {
    let h = harness(vec![Step::Duplicate], 5).await;
    let response = h.client.submit(&request()).await.unwrap();
    assert!(response.duplicate_submission);
    assert_eq!(response.submission_id, "550e8400");
}

#[tokio::test]
async fn transport_errors_are_retried() {
    let h = harness(vec![Step::Created], 3).await;
    // A port nobody listens on (bound, then released).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut config = ClientConfig::new(format!("http://127.0.0.1:{port}"));
    config.max_retries = 3;
    let sleeps = h.sleeps.clone();
    let client = SubmitterClient::new(config)
        .unwrap()
        .with_sleep(Arc::new(move |delay| {
            sleeps.lock().unwrap().push(delay);
            Box::pin(async {})
        }));
    let error = client.submit(&request()).await.unwrap_err();
    assert_eq!(error.kind(), "send_request");
    assert_eq!(h.sleeps.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn wait_for_connection_takes_the_405_probe_answer_as_ready() {
    let h = harness(vec![Step::Created], 1).await;
    h.client
        .wait_for_connection(Duration::from_secs(5))
        .await
        .unwrap();
}

#[tokio::test]
async fn wait_for_connection_times_out_when_nobody_answers() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let client =
        SubmitterClient::new(ClientConfig::new(format!("http://127.0.0.1:{port}"))).unwrap();
    let error = client
        .wait_for_connection(Duration::from_millis(300))
        .await
        .unwrap_err();
    assert_eq!(error.kind(), "timed_out");
    assert!(error.last.is_some());
}

#[tokio::test]
async fn driver_status_is_read() {
    let h = harness(vec![Step::Created], 1).await;
    let status = h
        .client
        .driver_status("spark", "spark-pi-driver")
        .await
        .unwrap();
    assert_eq!(status.namespace, "spark");
    assert_eq!(status.driver_pod_name, "spark-pi-driver");
    assert_eq!(
        (status.phase, status.action),
        (DriverPhase::Succeeded, ClientAction::Done)
    );
    assert_eq!(status.exit_code, Some(0));
}

#[tokio::test]
async fn unknown_submission_is_a_not_found_rejection_echoing_the_id() {
    let h = harness(vec![Step::Created], 3).await;
    let error = h.client.submission_status("a b/c").await.unwrap_err();
    assert_eq!(error.code(), Some(ErrorCode::NotFound));
    let submitter_client::SubmitError::Rejected { submission_id, .. } = error else {
        unreachable!()
    };
    assert_eq!(submission_id, "a b/c");
    assert!(h.sleeps.lock().unwrap().is_empty());
}

#[tokio::test]
async fn client_without_certificate_cannot_submit() {
    let h = harness(vec![Step::Created], 1).await;
    let ca = h._dir.dir.path().join("operator-ca.crt");
    let mut config = ClientConfig::new(h.client.submit_url());
    config.ca = Some(ca);
    config.max_retries = 1;
    let client = SubmitterClient::new(config).unwrap();
    let error = client.submit(&request()).await.unwrap_err();
    assert_eq!(error.kind(), "send_request");
    assert!(h.script.seen.lock().unwrap().is_empty());
}
