//! The HTTP service: `POST /api/v1/spark-submit` (+ `?dryRun=true`), health, readiness and
//! metrics.
//!
//! [`router`] holds the routes, handlers and envelope fallbacks; [`app`] adds the one layer
//! stack, read top-down: request id, tracing, metrics, catch-panic (500 envelope), load-shed +
//! concurrency limit (503 `SUBMITTER_OVERLOADED` with `Retry-After`), request timeout (503 as
//! well: a retry with the same id is safe), body limit (413). Health, readiness and metrics sit
//! outside the stack: probes and scrapes are neither traced nor shed under load.
//!
//! A submission is: build (pure) → authorise (policy, before anything touches Kubernetes) →
//! observe → decide ([`plan`], pure) → execute ([`execute`]), the last three in a task shared by
//! concurrent duplicates ([`inflight`]). The error mapping to HTTP happens here, once.

pub mod execute;
pub mod inflight;
pub mod metrics;
pub mod serve;
pub mod sweep;

use std::any::Any;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use submission::error_chain::error_chain;

use axum::error_handling::HandleErrorLayer;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use serde_json::{Value, json};
use tower::ServiceBuilder;
use tower::limit::GlobalConcurrencyLimitLayer;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::{DefaultOnResponse, TraceLayer};
use tracing::{Level, Span, info, instrument, warn};

use crate::envelope::{self, ApiError, ApiJson, BODY_LIMIT_BYTES, handle_layer_error, rfc3339};
use crate::policy::Policy;
use crate::tls::PeerIdentity;
use submission::api::{ErrorCode, SUBMIT_PATH, SubmitRequest, SubmitResponse};
use submission::builder::{self, BuildError, DriverObjects};

use execute::{Failure, KubeApi, Submission, SubmitDriverError, Submitted};
use inflight::{InFlight, Key, TaskFailure};
use metrics::Metrics;

/// Default limit on requests served at once (beyond it: 503).
pub const DEFAULT_MAX_CONCURRENCY: usize = 64;

/// Default time a request may take before the client gets a 503.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Default time one API server call may take.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// The identity an `--insecure-dev` client gets (no certificates there): a policy entry for
/// `"*"` says what such clients may do.
pub const INSECURE_DEV_IDENTITY: &str = "*";

/// `SPARK_USER` when the submission names no `--proxy-user` (spark-submit uses the client's OS
/// user, which a server does not have).
pub const DEFAULT_SPARK_USER: &str = "root";

/// Limits of the layer stack.
#[derive(Debug, Clone)]
pub struct ServiceConfig {
    pub max_concurrency: usize,
    pub request_timeout: Duration,
}

impl Default for ServiceConfig {
    fn default() -> ServiceConfig {
        ServiceConfig {
            max_concurrency: DEFAULT_MAX_CONCURRENCY,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
        }
    }
}

/// Who may submit what.
#[derive(Debug, Clone)]
pub enum Access {
    /// mTLS: the client certificate's identities against the policy.
    Policy(Arc<Policy>),
    /// `--insecure-dev`: no certificates; every client is [`INSECURE_DEV_IDENTITY`], checked
    /// against the policy if one was given, else allowed everything.
    InsecureDev(Option<Arc<Policy>>),
}

/// Everything the handlers share.
#[derive(Debug, Clone)]
pub struct AppState {
    pub kube: KubeApi,
    pub access: Access,
    pub in_flight: InFlight,
    pub metrics: Arc<Metrics>,
    pub spark_user: Arc<str>,
    /// The watch caches the status look-ups read; `None`: look-ups answer 503 (not synced).
    pub caches: Option<sweep::WatchCaches>,
}

impl AppState {
    pub fn new(client: kube::Client, access: Access) -> AppState {
        AppState {
            kube: KubeApi::new(client, DEFAULT_CALL_TIMEOUT),
            access,
            in_flight: InFlight::default(),
            metrics: Arc::new(Metrics::new()),
            spark_user: Arc::from(DEFAULT_SPARK_USER),
            caches: None,
        }
    }

    /// The same state reading `caches` for status look-ups and readiness.
    pub fn with_caches(mut self, caches: sweep::WatchCaches) -> AppState {
        self.caches = Some(caches);
        self
    }

    /// The same state with another per-call timeout towards the API server.
    pub fn with_call_timeout(mut self, timeout: Duration) -> AppState {
        self.kube = KubeApi::new(self.kube.client().clone(), timeout);
        self
    }

    pub fn with_spark_user(mut self, spark_user: &str) -> AppState {
        self.spark_user = Arc::from(spark_user);
        self
    }
}

/// The routes, handlers and envelope fallbacks, without layers.
pub fn router(state: AppState) -> Router {
    let routes = Router::new().route(SUBMIT_PATH, post(submit));
    envelope::router_fallbacks(status_routes(routes)).with_state(state)
}

/// The status look-ups, `GET /api/v1/spark-submit/{submission_id}` and
/// `GET /api/v1/drivers/{namespace}/{pod}`, reading the watch caches (see [`crate::status`]).
fn status_routes(routes: Router<AppState>) -> Router<AppState> {
    crate::status::routes(routes)
}

/// Probes and metrics: outside tracing, limits and shedding.
fn health_routes(state: AppState) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
        .method_not_allowed_fallback(envelope::method_not_allowed)
        .with_state(state)
}

/// The router with the service's layer stack; see the module documentation.
pub fn app(state: AppState, config: &ServiceConfig) -> Router {
    let stack = ServiceBuilder::new()
        .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid))
        .layer(PropagateRequestIdLayer::x_request_id())
        .layer(
            TraceLayer::new_for_http()
                .make_span_with(request_span)
                .on_response(DefaultOnResponse::new().level(Level::INFO)),
        )
        .layer(axum::middleware::from_fn_with_state(
            state.metrics.clone(),
            metrics::track,
        ))
        .layer(CatchPanicLayer::custom(panic_response))
        .layer(HandleErrorLayer::new(handle_layer_error))
        .load_shed()
        // Global: one semaphore for every route, not one per route as a plain limit would give.
        .layer(GlobalConcurrencyLimitLayer::new(
            config.max_concurrency.max(1),
        ))
        .timeout(config.request_timeout)
        .layer(DefaultBodyLimit::max(BODY_LIMIT_BYTES));
    health_routes(state.clone()).merge(router(state).layer(stack))
}

fn request_span(request: &axum::http::Request<axum::body::Body>) -> Span {
    let request_id = request
        .headers()
        .get("x-request-id")
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default();
    tracing::info_span!("request", method = %request.method(), path = %request.uri().path(), request_id)
}

fn panic_response(_panic: Box<dyn Any + Send + 'static>) -> Response {
    // The payload may hold anything; the log says where, the client gets the generic 500.
    tracing::error!("request handler panicked");
    ApiError::internal().into_response()
}

async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

async fn readyz(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    // Status answers come from the caches: not ready until they hold a complete listing.
    if let Some(caches) = &state.caches
        && !crate::status::synced(caches)
    {
        return Err(ApiError::new(
            ErrorCode::SubmitterOverloaded,
            "watch caches have not synced yet",
        ));
    }
    match state.kube.reachable().await {
        Ok(()) => Ok(Json(json!({"status": "ready"}))),
        Err(error) => Err(ApiError::new(
            ErrorCode::SubmitterOverloaded,
            format!("Kubernetes API server unreachable: {}", error_chain(&error)),
        )),
    }
}

async fn metrics_text(State(state): State<AppState>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
        )],
        state.metrics.encode(),
    )
        .into_response()
}

/// `?dryRun=true|false` (absent: false). Anything else is a 400: a typo must not create.
fn dry_run_flag(uri: &Uri) -> Result<bool, ApiError> {
    let mut dry_run = false;
    for pair in uri.query().unwrap_or_default().split('&') {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        if key != "dryRun" {
            continue;
        }
        dry_run = match value {
            "true" | "All" => true,
            "false" => false,
            _ => {
                return Err(ApiError::new(
                    ErrorCode::BadRequest,
                    format!("dryRun must be true or false, not {value:?}"),
                ));
            }
        };
    }
    Ok(dry_run)
}

fn now_ms(now: SystemTime) -> i64 {
    now.duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
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

/// The service account the driver pod will run as: what Spark put in the pod (the conf
/// `spark.kubernetes.authenticate.driver.serviceAccountName` over the template's).
fn service_account(built: &DriverObjects) -> Option<&str> {
    let spec = built.pod().get("spec")?;
    spec.get("serviceAccountName")
        .or_else(|| spec.get("serviceAccount"))
        .and_then(Value::as_str)
        .filter(|name| !name.is_empty())
}

fn authorize(
    access: &Access,
    identity: Option<&PeerIdentity>,
    built: &DriverObjects,
) -> Result<(), ApiError> {
    let (policy, identities) = match access {
        Access::Policy(policy) => (
            policy,
            identity.map(|i| i.names.clone()).unwrap_or_default(),
        ),
        Access::InsecureDev(None) => return Ok(()),
        Access::InsecureDev(Some(policy)) => (policy, vec![INSECURE_DEV_IDENTITY.to_owned()]),
    };
    let namespace = &built.identity.namespace;
    policy
        .authorize(&identities, namespace, service_account(built))
        .map_err(|error| {
            warn!(kind = error.kind(), namespace = %namespace, identities = ?identities,
                "submission refused by the policy");
            envelope::policy_denied(&error)
        })
}

/// The HTTP answer for a submission that did not complete.
fn submit_error(error: &SubmitDriverError) -> ApiError {
    let detail = error_chain(error);
    match error {
        SubmitDriverError::ConflictingObject { kind, name, .. } => ApiError::new(
            ErrorCode::DriverPodAlreadyExists,
            format!("{kind} {name} already exists for another submission"),
        ),
        SubmitDriverError::DriverPodTerminating { .. } => {
            warn!(cause = %detail, "driver pod of this submission is still being deleted");
            ApiError::overloaded()
        }
        _ => {
            let status = error.call_error().and_then(|e| e.status());
            let what = error.object_kind().unwrap_or("object");
            match status.map(|s| (s.code, s.message.as_str())) {
                Some((400 | 422, message)) => ApiError::new(
                    ErrorCode::InvalidPodTemplate,
                    format!("the Kubernetes API server rejected the driver's {what}: {message}"),
                ),
                Some((403, message)) => ApiError::new(
                    ErrorCode::Forbidden,
                    format!("the Kubernetes API server refused the driver's {what}: {message}"),
                ),
                // A missing namespace: it comes from the arguments (spark.kubernetes.namespace).
                Some((404, message)) => ApiError::new(
                    ErrorCode::InvalidSparkSubmitArgs,
                    format!("cannot create the driver's {what}: {message}"),
                ),
                Some((429, _)) => {
                    warn!(cause = %detail, "the Kubernetes API server throttles us");
                    ApiError::overloaded()
                }
                _ => ApiError::new(ErrorCode::InternalServerError, detail),
            }
        }
    }
}

fn success(
    request: &SubmitRequest,
    built: &DriverObjects,
    submitted: &Submitted,
    duplicate: bool,
    now: SystemTime,
) -> Response {
    let pod = &submitted.pod;
    let label = |key: &str| {
        pod.pointer("/metadata/labels")
            .and_then(|labels| labels.get(key))
            .and_then(Value::as_str)
    };
    let body = SubmitResponse {
        submission_id: request.submission_id.clone(),
        app_name: built.identity.app_name.clone(),
        message: if duplicate {
            "duplicate submission: the existing driver pod is returned".into()
        } else {
            "driver pod created".into()
        },
        submitted_at: pod
            .pointer("/metadata/creationTimestamp")
            .and_then(Value::as_str)
            .map_or_else(|| rfc3339(now), str::to_owned),
        spark_app_id: label(submission::meta::labels::SPARK_APP_ID)
            .map_or_else(|| built.identity.app_id.clone(), str::to_owned),
        driver_pod_name: built.identity.driver_pod_name.clone(),
        driver_pod_uid: submitted.pod_uid().to_owned(),
        namespace: built.identity.namespace.clone(),
        duplicate_submission: duplicate,
    };
    let status = if duplicate {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    (status, Json(body)).into_response()
}

/// The retention record of this submission's finished driver, if the pod it names is the one
/// this submission builds. Any failure to read it means "no record": the normal path then
/// observes the pod itself, so nothing is lost by not knowing.
async fn finished_driver(
    state: &AppState,
    built: &DriverObjects,
    submission_id: &str,
) -> Option<crate::status::record::Record> {
    use crate::status::record;
    let ours = |r: &record::Record| {
        r.submission_id == submission_id
            && r.namespace == built.identity.namespace
            && r.pod == built.identity.driver_pod_name
    };
    // From the synced watch cache when there is one: no API call on the submission path. A
    // record reaches the cache milliseconds after the driver succeeds, long before its pod is
    // collected, so the cache's lag does not open a window for a second driver in practice.
    if let Some(caches) = state.caches.as_ref().filter(|c| crate::status::synced(c)) {
        return crate::status::retained(caches, &record::submission_key(submission_id))
            .into_iter()
            .find(ours);
    }
    let name = record::name(submission_id)?;
    let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(state.kube.client().clone(), &built.identity.namespace);
    let cm = api.get_opt(&name).await.ok()??;
    if !record::is_record(&cm) {
        return None;
    }
    record::read(&cm).filter(ours)
}

/// The 200 duplicate answer for a driver known only from its retention record.
fn retained_success(
    request: &SubmitRequest,
    built: &DriverObjects,
    record: &crate::status::record::Record,
) -> Response {
    let body = SubmitResponse {
        submission_id: request.submission_id.clone(),
        app_name: built.identity.app_name.clone(),
        message: "duplicate submission: the driver already succeeded and its pod was removed"
            .into(),
        submitted_at: record.finished_at.to_string(),
        spark_app_id: record.spark_app_id.clone(),
        driver_pod_name: record.pod.clone(),
        driver_pod_uid: record.uid.clone(),
        namespace: record.namespace.clone(),
        duplicate_submission: true,
    };
    (StatusCode::OK, Json(body)).into_response()
}

#[instrument(skip_all, fields(submission_id = %request.submission_id, namespace, pod, dry_run))]
async fn submit(
    State(state): State<AppState>,
    identity: Option<Extension<PeerIdentity>>,
    uri: Uri,
    ApiJson(request): ApiJson<SubmitRequest>,
) -> Result<Response, ApiError> {
    let id = request.submission_id.clone();
    let with_id = |error: ApiError| error.with_submission_id(id.clone());
    let dry_run = dry_run_flag(&uri).map_err(with_id)?;
    let now = SystemTime::now();
    let built = builder::build_from_argv(
        &request.spark_submit_args,
        request.driver_pod_template.as_ref(),
        request.executor_pod_template.as_ref(),
        &request.submission_id,
        now_ms(now),
        &state.spark_user,
    )
    .map_err(|error| {
        info!(kind = error.kind(), "submission refused by the builder");
        with_id(build_error(&error))
    })?;
    let span = Span::current();
    span.record("namespace", built.identity.namespace.as_str());
    span.record("pod", built.identity.driver_pod_name.as_str());
    span.record("dry_run", dry_run);
    authorize(&state.access, identity.as_ref().map(|e| &e.0), &built).map_err(with_id)?;

    if dry_run {
        let submission = Submission {
            api: &state.kube,
            objects: &built.objects,
            namespace: &built.identity.namespace,
            submission_id: &id,
        };
        let list = submission
            .dry_run()
            .await
            .map_err(|error| with_id(submit_error(&error)))?;
        return Ok((StatusCode::OK, Json(list)).into_response());
    }

    // A driver of this submission that succeeded and was then garbage-collected left a
    // retention record: answering from it keeps "never a second driver" true after the pod is
    // gone.
    if let Some(finished) = finished_driver(&state, &built, &id).await {
        state.metrics.duplicate();
        info!(
            uid = finished.uid.as_str(),
            "submission answered from its retention record"
        );
        return Ok(retained_success(&request, &built, &finished));
    }

    let key = Key {
        namespace: built.identity.namespace.clone(),
        pod: built.identity.driver_pod_name.clone(),
        submission_id: id.clone(),
    };
    let work = {
        let kube = state.kube.clone();
        let metrics = state.metrics.clone();
        let objects = built.objects.clone();
        let namespace = built.identity.namespace.clone();
        let submission_id = id.clone();
        async move {
            let outcome = Submission {
                api: &kube,
                objects: &objects,
                namespace: &namespace,
                submission_id: &submission_id,
            }
            .run()
            .await;
            if let Err(Failure {
                rolled_back: true, ..
            }) = &outcome
            {
                metrics.rollback();
            }
            outcome
        }
    };
    let (outcome, leader) = state.in_flight.join_or_start(key, work);
    match outcome.await {
        Ok(submitted) => {
            // A request that joined a running creation is a duplicate of it.
            let duplicate = !(leader && submitted.created);
            if duplicate {
                state.metrics.duplicate();
            }
            info!(duplicate, uid = submitted.pod_uid(), "submission answered");
            Ok(success(&request, &built, &submitted, duplicate, now))
        }
        Err(failure) => {
            let error = match failure.as_ref() {
                TaskFailure::Failed(failure) => {
                    warn!(kind = failure.error.kind(), rolled_back = failure.rolled_back,
                        error = %error_chain(&failure.error), "submission failed");
                    submit_error(&failure.error)
                }
                TaskFailure::Lost => ApiError::new(
                    ErrorCode::InternalServerError,
                    "the submission task stopped before finishing",
                ),
            };
            Err(with_id(error))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dry_run_flag_accepts_true_false_and_absent_only() {
        let flag = |uri: &str| dry_run_flag(&uri.parse().unwrap()).map_err(|e| e.code);
        assert_eq!(flag("/api/v1/spark-submit"), Ok(false));
        assert_eq!(flag("/api/v1/spark-submit?dryRun=true"), Ok(true));
        assert_eq!(flag("/api/v1/spark-submit?x=1&dryRun=false"), Ok(false));
        assert_eq!(
            flag("/api/v1/spark-submit?dryRun=yes"),
            Err(ErrorCode::BadRequest)
        );
    }
}
