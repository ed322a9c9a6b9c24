//! The one error envelope of the service: every non-2xx answer, fallbacks and extractor
//! rejections included, is an [`ErrorResponse`] body with the contract's shape.
//!
//! This is the edge where errors become HTTP, and the only one: the failures of a submission
//! ([`submit_failure`]), of a status look-up ([`lookup_failure`]), of a log, a kill and a list
//! ([`log_failure`], [`kill_failure`], [`list_failure`]), of an identity over its budget
//! ([`over_budget`]) and of readiness ([`not_ready`]) are mapped here, extractors reject with [`ApiError`], `router_fallbacks`
//! answers unknown routes and methods with it, and `layer_error` turns load-shedding and
//! timeouts into it. Handlers only pass failures through these functions.
//!
//! 5xx answers carry a fixed, generic message; whatever detail the caller gave is logged instead,
//! so internal error text never reaches a client.

use std::time::{Duration, SystemTime};

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequest, Request};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::fairness::Refusal;
use crate::kill::KillError;
use crate::kube_api::CallError;
use crate::list::ListError;
use crate::log_streams;
use crate::logs::LogError;
use crate::policy::PolicyError;
use crate::status::LookupError;
use crate::submit::SubmitFailure;
use crate::submit::blame::{self, Forbidden, Origin};
use crate::submit::execute::SubmitDriverError;
use crate::tls::CertificateRejection;
use submission::api::{ErrorCode, ErrorResponse};
use submission::builder::{self, BuildError};
use submission::error_chain::error_chain;

/// The request body limit of the contract's service (413 beyond it).
pub const BODY_LIMIT_BYTES: usize = 1024 * 1024;

/// `Retry-After` sent with a 503 when the caller did not choose one.
pub const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(1);

/// `Retry-After` sent with a 429 `QUOTA_EXCEEDED`: a quota gets room when drivers and executors
/// finish or an administrator raises it, minutes rather than seconds; sooner only repeats the
/// refusal.
pub const QUOTA_RETRY_AFTER: Duration = Duration::from_secs(30);

/// Longest submission id echoed back from a body that could not be read as a request.
const MAX_ECHOED_ID_LEN: usize = 253;

const GENERIC_INTERNAL: &str = "internal server error";
const GENERIC_OVERLOADED: &str = "submitter at capacity; back off and retry";

/// An error answer: a code, a client-facing message, and the submission it concerns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub code: ErrorCode,
    /// Shown to the client for 4xx; logged and replaced by a generic text for 5xx.
    pub message: String,
    /// Empty when the request carried no readable id.
    pub submission_id: String,
    /// Sent as `Retry-After` (whole seconds, rounded up) on 503 and 429.
    pub retry_after: Option<Duration>,
}

impl ApiError {
    /// An error with `code` and `message`, for no particular submission yet.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> ApiError {
        ApiError {
            code,
            message: message.into(),
            submission_id: String::new(),
            retry_after: None,
        }
    }

    /// The same error, about `submission_id`.
    pub fn with_submission_id(mut self, submission_id: impl Into<String>) -> ApiError {
        self.submission_id = submission_id.into();
        self
    }

    /// The same error, asking the client to wait `delay` (sent on 503 and 429 only).
    pub fn with_retry_after(mut self, delay: Duration) -> ApiError {
        self.retry_after = Some(delay);
        self
    }

    /// 500 with the generic message.
    pub fn internal() -> ApiError {
        ApiError::new(ErrorCode::InternalServerError, GENERIC_INTERNAL)
    }

    /// 503 `SUBMITTER_OVERLOADED` with the default `Retry-After`.
    pub fn overloaded() -> ApiError {
        ApiError::new(ErrorCode::SubmitterOverloaded, GENERIC_OVERLOADED)
            .with_retry_after(DEFAULT_RETRY_AFTER)
    }

    /// The same, with `cause` for the log (the client gets the generic text).
    pub fn overloaded_because(cause: impl Into<String>) -> ApiError {
        ApiError::new(ErrorCode::SubmitterOverloaded, cause).with_retry_after(DEFAULT_RETRY_AFTER)
    }

    /// The body as sent at `now`: 5xx messages replaced by the generic text.
    pub fn body(&self, now: SystemTime) -> ErrorResponse {
        let message = match self.code {
            ErrorCode::InternalServerError => GENERIC_INTERNAL.to_owned(),
            ErrorCode::SubmitterOverloaded => GENERIC_OVERLOADED.to_owned(),
            _ => self.message.clone(),
        };
        ErrorResponse {
            submission_id: self.submission_id.clone(),
            status: self.code.http_status(),
            error_code: self.code,
            message,
            timestamp: rfc3339(now),
        }
    }

    /// The HTTP answer at `now` (the clock is a parameter so tests can fix it).
    pub fn into_response_at(self, now: SystemTime) -> Response {
        let status = StatusCode::from_u16(self.code.http_status())
            .expect("every ErrorCode maps to a valid status");
        // A 500 is a fault of ours; a 503 (shed, timed out, throttled) is the service working
        // as designed under load, so it is a warning.
        if self.code == ErrorCode::InternalServerError {
            tracing::error!(
                code = %self.code,
                submission_id = %self.submission_id,
                cause = %self.message,
                "answering with a server error"
            );
        } else if status.is_server_error() {
            tracing::warn!(
                code = %self.code,
                submission_id = %self.submission_id,
                cause = %self.message,
                "answering with a retryable server error"
            );
        }
        crate::audit::note_error(self.code.as_str(), &self.submission_id);
        let body = self.body(now);
        let mut response = (status, axum::Json(body)).into_response();
        if self.code.sends_retry_after() {
            let default = match self.code {
                ErrorCode::QuotaExceeded => QUOTA_RETRY_AFTER,
                _ => DEFAULT_RETRY_AFTER,
            };
            let seconds = retry_after_seconds(self.retry_after.unwrap_or(default));
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        self.into_response_at(SystemTime::now())
    }
}

/// Whole seconds for `Retry-After`, rounded up and at least 1, so "retry now" is never sent.
fn retry_after_seconds(delay: Duration) -> u64 {
    let seconds = delay.as_secs() + u64::from(delay.subsec_nanos() > 0);
    seconds.max(1)
}

/// RFC 3339 in UTC to the second, as the contract's examples show (`2026-06-16T08:30:00Z`).
pub fn rfc3339(now: SystemTime) -> String {
    OffsetDateTime::from(now)
        .replace_nanosecond(0)
        .ok()
        .and_then(|time| time.format(&Rfc3339).ok())
        // Only a clock beyond year 9999 gets here; an empty stamp beats failing the answer.
        .unwrap_or_default()
}

/// The 401/403 answer for a refused authorisation.
pub fn policy_denied(error: &PolicyError) -> ApiError {
    let code = match error {
        PolicyError::NoIdentity => ErrorCode::Unauthenticated,
        _ => ErrorCode::Forbidden,
    };
    ApiError::new(code, error.to_string())
}

/// 401 `UNAUTHENTICATED` for a client certificate that failed verification, naming the check
/// and nothing of the certificate.
pub fn certificate_rejected(rejection: &CertificateRejection) -> ApiError {
    ApiError::new(ErrorCode::Unauthenticated, rejection.to_string())
}

/// The answer for a submission that did not end with a driver.
pub fn submit_failure(failure: &SubmitFailure) -> ApiError {
    match failure {
        SubmitFailure::ReadDryRun { .. } => {
            ApiError::new(ErrorCode::BadRequest, failure.to_string())
        }
        SubmitFailure::BuildObjects { source } => build_error(source),
        SubmitFailure::Authorize { source } => policy_denied(source),
        SubmitFailure::CreateDriver { source, rejected } => driver_error(source, *rejected),
        SubmitFailure::DryRun { source, rejected } => driver_error(source, *rejected),
        SubmitFailure::BoundToAnotherDriver { namespace, pod } => bound(namespace, pod),
        SubmitFailure::CheckBinding { .. } => {
            ApiError::new(ErrorCode::InternalServerError, error_chain(failure))
        }
        SubmitFailure::TaskLost => {
            ApiError::new(ErrorCode::InternalServerError, failure.to_string())
        }
    }
}

/// The build error as the contract's code.
fn build_error(error: &BuildError) -> ApiError {
    let code = match error.error_code() {
        builder::ErrorCode::BadRequest => ErrorCode::BadRequest,
        builder::ErrorCode::InvalidSparkSubmitArgs => ErrorCode::InvalidSparkSubmitArgs,
        builder::ErrorCode::InvalidPodTemplate => ErrorCode::InvalidPodTemplate,
    };
    ApiError::new(code, error.message())
}

/// The answer for a creation (or dry run) the cluster did not let through; `rejected` says which
/// input a field the API server rejected came from.
fn driver_error(error: &SubmitDriverError, rejected: Option<Origin>) -> ApiError {
    // Only logged (5xx): without the API server's message, which may quote the client's input.
    let detail = error.loggable_cause();
    match error {
        SubmitDriverError::ConflictingObject { kind, name, .. } => ApiError::new(
            ErrorCode::DriverPodAlreadyExists,
            format!("{kind} {name} already exists for another submission"),
        ),
        SubmitDriverError::BoundToAnotherDriver { namespace, pod } => bound(namespace, pod),
        // Still being deleted: a retry soon creates it anew.
        SubmitDriverError::DriverPodTerminating { .. } => ApiError::overloaded_because(detail),
        // The claim lives in the service's own namespace: its failures are ours, never the
        // client's input.
        SubmitDriverError::ClaimId { source } => api_server_trouble(error, source),
        // Answered from the record before it could get here; a 500 if it ever does.
        SubmitDriverError::Ended { .. } => ApiError::new(ErrorCode::InternalServerError, detail),
        _ => {
            let what = error.object_kind().unwrap_or("object");
            match error.call_error().and_then(CallError::status) {
                Some(status) => {
                    api_server_answer(status.code, &status.message, what, rejected, detail)
                }
                // No answer, or no Status in it: ours to retry.
                None => ApiError::new(ErrorCode::InternalServerError, detail),
            }
        }
    }
}

/// 409 `SUBMISSION_ID_CONFLICT`: one submission id, one driver.
fn bound(namespace: &str, pod: &str) -> ApiError {
    ApiError::new(
        ErrorCode::SubmissionIdConflict,
        format!(
            "this submission id is already bound to driver {namespace}:{pod}; \
             submit another driver with a new submission id"
        ),
    )
}

/// An answer of the API server that failed the driver's `what`.
fn api_server_answer(
    code: u16,
    message: &str,
    what: &str,
    rejected: Option<Origin>,
    detail: String,
) -> ApiError {
    match code {
        400 | 422 => ApiError::new(
            input_code(rejected),
            format!("the Kubernetes API server rejected the driver's {what}: {message}"),
        ),
        403 => match blame::forbidden(message) {
            // Nothing is left behind (the attempt rolled back): the same id succeeds later.
            Forbidden::QuotaExceeded => ApiError::new(
                ErrorCode::QuotaExceeded,
                format!(
                    "the namespace's resource quota has no room for the driver's {what}; \
                     submit again with the same submission id once it has: {message}"
                ),
            ),
            // A LimitRange, or a quota that needs resources stated: the input must change.
            Forbidden::Resources => ApiError::new(
                input_code(rejected),
                format!(
                    "the Kubernetes API server refused the resources of the driver's {what}: {message}"
                ),
            ),
            Forbidden::Other => ApiError::new(
                ErrorCode::Forbidden,
                format!("the Kubernetes API server refused the driver's {what}: {message}"),
            ),
        },
        // A missing namespace: it comes from the arguments (spark.kubernetes.namespace).
        404 => ApiError::new(
            ErrorCode::InvalidSparkSubmitArgs,
            format!("cannot create the driver's {what}: {message}"),
        ),
        429 => ApiError::overloaded_because(detail),
        _ => ApiError::new(ErrorCode::InternalServerError, detail),
    }
}

/// The code naming the input to fix: the template's, or the arguments'.
fn input_code(rejected: Option<Origin>) -> ErrorCode {
    match rejected {
        Some(Origin::Template) => ErrorCode::InvalidPodTemplate,
        Some(Origin::Arguments) | None => ErrorCode::InvalidSparkSubmitArgs,
    }
}

/// 503 `SUBMITTER_OVERLOADED` for a request of `identity` over its budget, with the
/// `Retry-After` the budget asks for.
pub fn over_budget(identity: &str, refusal: &Refusal) -> ApiError {
    ApiError::overloaded_because(format!(
        "identity {identity:?} is over its budget ({})",
        refusal.kind()
    ))
    .with_retry_after(refusal.retry_after())
}

/// The answer for a status look-up that found nothing to report.
pub fn lookup_failure(error: &LookupError) -> ApiError {
    match error {
        LookupError::NotSynced => ApiError::overloaded_because(error.to_string()),
        // Not knowing is not "gone": the client retries, it never resubmits on this.
        LookupError::ReadLive(source) => {
            ApiError::overloaded_because(format!("{error}: {}", error_chain(source)))
        }
        LookupError::Denied(denied) => policy_denied(denied),
        LookupError::UnknownDriver { .. } | LookupError::UnknownSubmission { .. } => {
            ApiError::new(ErrorCode::NotFound, error.to_string())
        }
    }
}

/// The answer for a log that could not be opened.
pub fn log_failure(error: &LogError) -> ApiError {
    match error {
        LogError::Options(source) => ApiError::new(ErrorCode::BadRequest, source.to_string()),
        LogError::Locate(source) => lookup_failure(source),
        LogError::Gone { .. } => ApiError::new(ErrorCode::DriverGone, error.to_string()),
        LogError::Refused(refusal @ log_streams::Refusal::Full { .. }) => {
            ApiError::new(ErrorCode::TooManyLogStreams, refusal.to_string())
                .with_retry_after(log_streams::RETRY_AFTER)
        }
        LogError::Refused(refusal @ log_streams::Refusal::Closing) => {
            ApiError::overloaded_because(refusal.to_string())
        }
        // As the API server answers a bound pod whose container waits to start.
        LogError::NotScheduled { .. } => ApiError::new(ErrorCode::BadRequest, error.to_string()),
        LogError::Vanished { .. } => ApiError::new(ErrorCode::NotFound, error.to_string()),
        LogError::ReadPod { source, .. } => api_server_trouble(error, source),
        LogError::OpenLog { source, .. } => match source.status() {
            // The API server's word on the options (no previous instance, no such container,
            // not started yet): the client's to fix or to wait for.
            Some(status) if matches!(status.code, 400 | 422) => ApiError::new(
                ErrorCode::BadRequest,
                format!(
                    "the Kubernetes API server refused the log: {}",
                    status.message
                ),
            ),
            Some(status) if status.code == 404 => {
                ApiError::new(ErrorCode::NotFound, error.to_string())
            }
            _ => api_server_trouble(error, source),
        },
    }
}

/// The answer for a kill that did not happen.
pub fn kill_failure(error: &KillError) -> ApiError {
    match error {
        KillError::Options(source) => ApiError::new(ErrorCode::BadRequest, source.to_string()),
        KillError::Locate(source) => lookup_failure(source),
        KillError::OwnedByApplication { .. } => {
            ApiError::new(ErrorCode::DriverOwnedByApplication, error.to_string())
        }
        KillError::WriteRecord { source, .. } | KillError::DeletePod { source, .. } => {
            api_server_trouble(error, source)
        }
        KillError::Unrecordable { .. } => {
            ApiError::new(ErrorCode::InternalServerError, error.to_string())
        }
    }
}

/// A call to the API server that failed for reasons of the service or the cluster, not of the
/// client: throttled, unanswered or a 5xx are retryable 503s; anything else (a missing RBAC
/// grant of ours) is a 500. Either way the cause is logged, not sent.
fn api_server_trouble(error: &dyn std::error::Error, source: &CallError) -> ApiError {
    let detail = error_chain(error);
    match source.code() {
        None | Some(429) => ApiError::overloaded_because(detail),
        Some(code) if code >= 500 => ApiError::overloaded_because(detail),
        Some(_) => ApiError::new(ErrorCode::InternalServerError, detail),
    }
}

/// The answer for a list that could not be served.
pub fn list_failure(error: &ListError) -> ApiError {
    match error {
        ListError::Options(source) => ApiError::new(ErrorCode::BadRequest, source.to_string()),
        ListError::Continue => ApiError::new(ErrorCode::BadRequest, error.to_string()),
        ListError::Denied(denied) => policy_denied(denied),
        ListError::NotSynced => ApiError::overloaded_because(error.to_string()),
    }
}

/// 400 `BAD_REQUEST` for query parameters that could not be read (an unknown one, a boolean
/// that is not `true` or `false`, a number that is not one).
pub fn query_rejection(rejection: axum::extract::rejection::QueryRejection) -> ApiError {
    ApiError::new(ErrorCode::BadRequest, rejection.body_text())
}

/// `/readyz` when the service cannot serve yet (`why` is logged, not sent).
pub fn not_ready(why: String) -> ApiError {
    ApiError::overloaded_because(why)
}

/// Maps errors of the tower layers (`HandleErrorLayer`) to the envelope: load shedding and the
/// request timeout become 503 `SUBMITTER_OVERLOADED` with `Retry-After`, since both mean the
/// service could not take the request now and a retry with the same id is safe; anything else 500.
pub fn layer_error(error: tower::BoxError) -> ApiError {
    if error.is::<tower::load_shed::error::Overloaded>() {
        ApiError::overloaded_because("shed: the concurrency limit is reached")
    } else if error.is::<tower::timeout::error::Elapsed>() {
        ApiError::overloaded_because("the request timed out inside the service")
    } else {
        ApiError::new(ErrorCode::InternalServerError, error.to_string())
    }
}

/// [`layer_error`] as an async fn, to pass straight to `HandleErrorLayer::new`.
pub async fn handle_layer_error(error: tower::BoxError) -> ApiError {
    layer_error(error)
}

/// Answers unknown paths with 404 and known paths with a wrong method with 405, both in the
/// envelope. The Go client's readiness probe is a GET on the submit route: it gets a prompt 405.
pub fn router_fallbacks<S>(router: Router<S>) -> Router<S>
where
    S: Clone + Send + Sync + 'static,
{
    router
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
}

/// 404 `NOT_FOUND` for a path no route serves.
pub async fn not_found(method: Method, uri: Uri) -> ApiError {
    ApiError::new(
        ErrorCode::NotFound,
        format!("no route for {method} {}", uri.path()),
    )
}

/// 405 `METHOD_NOT_ALLOWED` for a method the route does not serve.
pub async fn method_not_allowed(method: Method, uri: Uri) -> ApiError {
    ApiError::new(
        ErrorCode::MethodNotAllowed,
        format!("method {method} is not allowed on {}", uri.path()),
    )
}

/// A JSON body extractor whose every rejection is in the envelope: wrong or missing
/// `Content-Type` → 415, body over the limit (`DefaultBodyLimit`) → 413, unreadable or
/// mistyped JSON and missing fields → 400; each echoes `submission_id` when the body is a JSON
/// object that has one. (A body that never arrives is cut by the request timeout: 503.)
#[derive(Debug, Clone)]
pub struct ApiJson<T>(pub T);

impl<T, S> FromRequest<S> for ApiJson<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        if !is_json_content_type(request.headers()) {
            // Still echo the id when the body reads as JSON: the client can match the answer.
            let id = Bytes::from_request(request, state)
                .await
                .ok()
                .and_then(|bytes| sniff_submission_id(&bytes));
            return Err(ApiError::new(
                ErrorCode::UnsupportedMediaType,
                "Content-Type must be application/json",
            )
            .with_submission_id(id.unwrap_or_default()));
        }
        let bytes = Bytes::from_request(request, state)
            .await
            .map_err(body_rejection)?;
        serde_json::from_slice(&bytes)
            .map(ApiJson)
            .map_err(|error| {
                ApiError::new(
                    ErrorCode::BadRequest,
                    format!("invalid request body: {error}"),
                )
                .with_submission_id(sniff_submission_id(&bytes).unwrap_or_default())
            })
    }
}

/// `application/json`, optionally with `charset=utf-8` (JSON is UTF-8; any other charset is a
/// media type we do not read).
pub fn is_json_content_type(headers: &HeaderMap) -> bool {
    let Some(value) = headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
    else {
        return false;
    };
    let mut parts = value.split(';');
    let essence = parts.next().unwrap_or_default().trim();
    if !essence.eq_ignore_ascii_case("application/json") {
        return false;
    }
    parts.all(|parameter| {
        let Some((name, value)) = parameter.split_once('=') else {
            return parameter.trim().is_empty();
        };
        name.trim().eq_ignore_ascii_case("charset")
            && value.trim().trim_matches('"').eq_ignore_ascii_case("utf-8")
    })
}

/// 400 `BAD_REQUEST` for path parameters that could not be read.
pub fn path_rejection(rejection: axum::extract::rejection::PathRejection) -> ApiError {
    ApiError::new(ErrorCode::BadRequest, rejection.body_text())
}

/// The envelope for a body that could not be read.
pub fn body_rejection(rejection: BytesRejection) -> ApiError {
    if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
        return ApiError::new(
            ErrorCode::PayloadTooLarge,
            format!("request body exceeds {BODY_LIMIT_BYTES} bytes"),
        );
    }
    // A body that never arrives is cut by the request timeout (503); what reaches here is a
    // body the client broke off.
    ApiError::new(ErrorCode::BadRequest, "request body could not be read")
}

/// The `submission_id` of a body that is JSON but not a valid request, to echo it in the error.
fn sniff_submission_id(bytes: &[u8]) -> Option<String> {
    let value: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    let id = value.get("submission_id")?.as_str()?;
    (id.chars().count() <= MAX_ECHOED_ID_LEN).then(|| id.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::extract::DefaultBodyLimit;
    use axum::routing::post;
    use http_body_util::BodyExt;
    use serde_json::{Value, json};
    use submission::api::SubmitRequest;
    use tower::ServiceExt;

    const SUBMIT: &str = "/api/v1/spark-submit";

    fn app() -> Router {
        let router = Router::new()
            .route(
                SUBMIT,
                post(|ApiJson(request): ApiJson<SubmitRequest>| async move {
                    axum::Json(json!({"submission_id": request.submission_id}))
                }),
            )
            .layer(DefaultBodyLimit::max(BODY_LIMIT_BYTES));
        router_fallbacks(router)
    }

    async fn send(request: Request) -> (StatusCode, HeaderMap, Value) {
        let response = app().oneshot(request).await.unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        (status, headers, serde_json::from_slice(&bytes).unwrap())
    }

    fn post_json(content_type: Option<&str>, body: impl Into<Body>) -> Request {
        let mut builder = Request::post(SUBMIT);
        if let Some(content_type) = content_type {
            builder = builder.header(header::CONTENT_TYPE, content_type);
        }
        builder.body(body.into()).unwrap()
    }

    fn assert_envelope(body: &Value, status: StatusCode, code: ErrorCode) {
        assert_eq!(body["status"], status.as_u16());
        assert_eq!(body["error_code"], code.as_str());
        assert!(body["message"].as_str().is_some_and(|m| !m.is_empty()));
        assert!(body["timestamp"].as_str().is_some_and(|t| t.ends_with('Z')));
        assert!(body["submission_id"].is_string());
    }

    #[tokio::test]
    async fn get_on_submit_route_is_405_in_the_envelope() {
        let (status, _, body) = send(Request::get(SUBMIT).body(Body::empty()).unwrap()).await;
        assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
        assert_envelope(&body, status, ErrorCode::MethodNotAllowed);
    }

    #[tokio::test]
    async fn unknown_path_is_404_in_the_envelope() {
        let (status, _, body) = send(Request::get("/nope").body(Body::empty()).unwrap()).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert_envelope(&body, status, ErrorCode::NotFound);
    }

    #[tokio::test]
    async fn wrong_or_missing_content_type_is_415() {
        for content_type in [
            None,
            Some("text/plain"),
            Some("application/json; charset=latin1"),
        ] {
            let (status, _, body) = send(post_json(content_type, "{}")).await;
            assert_eq!(
                status,
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "{content_type:?}"
            );
            assert_envelope(&body, status, ErrorCode::UnsupportedMediaType);
        }
    }

    #[tokio::test]
    async fn json_with_charset_is_accepted() {
        let body = json!({"submission_id": "a", "spark_submit_args": []}).to_string();
        for content_type in ["application/json", "Application/JSON; charset=\"UTF-8\""] {
            let (status, _, _) = send(post_json(Some(content_type), body.clone())).await;
            assert_eq!(status, StatusCode::OK, "{content_type}");
        }
    }

    #[tokio::test]
    async fn malformed_json_is_400() {
        let (status, _, body) = send(post_json(Some("application/json"), "{not json")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_envelope(&body, status, ErrorCode::BadRequest);
        assert_eq!(body["submission_id"], "");
    }

    #[tokio::test]
    async fn missing_field_is_400_echoing_the_submission_id() {
        let request = json!({"submission_id": "sub-1"}).to_string();
        let (status, _, body) = send(post_json(Some("application/json"), request)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_envelope(&body, status, ErrorCode::BadRequest);
        assert_eq!(body["submission_id"], "sub-1");
    }

    #[tokio::test]
    async fn oversized_body_is_413() {
        let big = format!(
            "{{\"submission_id\":\"a\",\"spark_submit_args\":[\"{}\"]}}",
            "x".repeat(BODY_LIMIT_BYTES)
        );
        let (status, _, body) = send(post_json(Some("application/json"), big)).await;
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
        assert_envelope(&body, status, ErrorCode::PayloadTooLarge);
    }

    #[test]
    fn overloaded_has_retry_after_and_generic_message() {
        let response = ApiError::new(ErrorCode::SubmitterOverloaded, "queue full: 17 waiting")
            .with_retry_after(Duration::from_millis(2500))
            .into_response_at(SystemTime::UNIX_EPOCH);
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(response.headers()[header::RETRY_AFTER], "3");
    }

    #[test]
    fn server_errors_hide_their_cause() {
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_781_598_600);
        let body = ApiError::new(ErrorCode::InternalServerError, "kube: connection reset")
            .with_submission_id("s")
            .body(at);
        assert_eq!(
            serde_json::to_value(&body).unwrap(),
            json!({
                "submission_id": "s", "status": 500, "error_code": "INTERNAL_SERVER_ERROR",
                "message": "internal server error", "timestamp": "2026-06-16T08:30:00Z"
            })
        );
    }

    #[test]
    fn client_errors_keep_their_message_and_have_no_retry_after() {
        let response = ApiError::new(ErrorCode::InvalidPodTemplate, "no containers")
            .with_retry_after(Duration::from_secs(5))
            .into_response_at(SystemTime::UNIX_EPOCH);
        assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
        assert!(response.headers().get(header::RETRY_AFTER).is_none());
    }

    #[test]
    fn every_code_answers_with_its_status() {
        for code in ErrorCode::ALL {
            let response = ApiError::new(code, "m").into_response_at(SystemTime::UNIX_EPOCH);
            assert_eq!(response.status().as_u16(), code.http_status());
            assert_eq!(
                response.headers().contains_key(header::RETRY_AFTER),
                code.sends_retry_after()
            );
        }
    }

    #[test]
    fn timestamps_are_utc_seconds() {
        let at = SystemTime::UNIX_EPOCH + Duration::from_millis(1_781_598_600_999);
        assert_eq!(rfc3339(at), "2026-06-16T08:30:00Z");
    }

    #[test]
    fn layer_errors_map_to_overloaded_or_internal() {
        let shed = layer_error(Box::new(tower::load_shed::error::Overloaded::new()));
        assert_eq!(shed.code, ErrorCode::SubmitterOverloaded);
        assert!(shed.retry_after.is_some());
        let slow = layer_error(Box::new(tower::timeout::error::Elapsed::new()));
        assert_eq!(slow.code, ErrorCode::SubmitterOverloaded);
        let other = layer_error("boom".into());
        assert_eq!(other.code, ErrorCode::InternalServerError);
    }

    /// What `f` logs, as the plain text formatter writes it.
    fn logs_of(f: impl FnOnce()) -> String {
        let buffer = crate::json_log::tests::Buffer::default();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(buffer.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, f);
        buffer.text()
    }

    #[test]
    fn shed_and_timed_out_requests_log_a_warning_not_an_error() {
        let logs = logs_of(|| {
            let shed = layer_error(Box::new(tower::load_shed::error::Overloaded::new()));
            let slow = layer_error(Box::new(tower::timeout::error::Elapsed::new()));
            for error in [shed, slow] {
                let _ = error.into_response_at(SystemTime::UNIX_EPOCH);
            }
        });
        assert_eq!(logs.matches(" WARN ").count(), 2, "{logs}");
        assert!(!logs.contains("ERROR"), "{logs}");
        let logs = logs_of(|| {
            let _ = ApiError::new(ErrorCode::InternalServerError, "boom")
                .into_response_at(SystemTime::UNIX_EPOCH);
        });
        assert!(logs.contains("ERROR"), "{logs}");
    }

    #[test]
    fn policy_denials_are_401_without_identity_else_403() {
        assert_eq!(
            policy_denied(&PolicyError::NoIdentity).code,
            ErrorCode::Unauthenticated
        );
        let denied = PolicyError::NamespaceDenied {
            namespace: "prod".into(),
        };
        assert_eq!(policy_denied(&denied).code, ErrorCode::Forbidden);
    }
}
