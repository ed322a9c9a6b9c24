//! The HTTP service: `POST /api/v1/spark-submit` (+ `?dryRun=true`), the status look-ups, the
//! routes that operate a submission by its id (its driver's log, its kill, the list: in
//! [`operate`]), health, readiness and metrics.
//!
//! [`router`] holds the routes, handlers and envelope fallbacks, behind one check that the
//! request carries a verified identity (401 otherwise); [`app`] adds the one layer
//! stack, read top-down: request id, tracing, metrics, catch-panic (500 envelope), the client
//! identity's budget ([`crate::fairness`], 503 as below), load-shed +
//! concurrency limit (503 `SUBMITTER_OVERLOADED` with `Retry-After`), request timeout (503 as
//! well: a retry with the same id is safe), body limit (413). Health, readiness and metrics sit
//! outside the stack: probes and scrapes are neither traced nor shed under load, and probes need
//! no client certificate (`/metrics` needs one unless `anonymous_metrics`).
//!
//! The handlers are thin: a submission is one call to [`crate::submit::submit`], a look-up one
//! call to [`crate::status`], a log, kill or list one call to [`crate::logs`], [`crate::kill`]
//! or [`crate::list`], and every failure goes through [`crate::envelope`]'s mapping.

mod operate;
pub mod serve;

use std::any::Any;

use axum::error_handling::HandleErrorLayer;
use axum::extract::rejection::PathRejection;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use serde_json::{Value, json};
use std::time::Duration;
use tower::ServiceBuilder;
use tower::limit::GlobalConcurrencyLimitLayer;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::{DefaultOnResponse, TraceLayer};
use tracing::{Level, Span, info, instrument};

use crate::envelope::{self, ApiError, ApiJson, BODY_LIMIT_BYTES, handle_layer_error};
use crate::fairness::{Budgets, charged_identity};
use crate::policy::Access;
use crate::state::AppState;
use crate::submit::{self, Outcome};
use crate::tls::{CertificateRejection, PeerIdentity};
use submission::api::{DRIVERS_PATH, DriverStatus, LOG_SEGMENT, SUBMIT_PATH, SubmitRequest};
use submission::error_chain::error_chain;

/// Default limit on requests served at once (beyond it: 503).
pub const DEFAULT_MAX_CONCURRENCY: usize = 64;

/// Default time a request may take before the client gets a 503.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Limits of the layer stack.
#[derive(Debug, Clone)]
pub struct ServiceConfig {
    pub max_concurrency: usize,
    pub request_timeout: Duration,
    /// `/metrics` answers clients without a certificate (a Prometheus scrape); off: 401.
    pub anonymous_metrics: bool,
}

impl Default for ServiceConfig {
    fn default() -> ServiceConfig {
        ServiceConfig {
            max_concurrency: DEFAULT_MAX_CONCURRENCY,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            anonymous_metrics: false,
        }
    }
}

/// The routes, handlers and envelope fallbacks, without layers.
pub fn router(state: AppState) -> Router {
    let routes = Router::new()
        .route(SUBMIT_PATH, post(submit).get(operate::list))
        .route(
            &format!("{SUBMIT_PATH}/{{submission_id}}"),
            get(submission_status).delete(operate::kill_submission),
        )
        .route(
            &format!("{SUBMIT_PATH}/{{submission_id}}/{LOG_SEGMENT}"),
            get(operate::submission_log),
        )
        .route(
            &format!("{DRIVERS_PATH}/{{namespace}}/{{pod}}"),
            get(driver_status).delete(operate::kill_driver),
        )
        .route(
            &format!("{DRIVERS_PATH}/{{namespace}}/{{pod}}/{LOG_SEGMENT}"),
            get(operate::driver_log),
        );
    envelope::router_fallbacks(routes)
        // Every API answer needs an identity first: before the body is read, before anything.
        .layer(axum::middleware::from_fn_with_state(
            state.access.clone(),
            require_identity,
        ))
        .with_state(state)
}

/// 401 `UNAUTHENTICATED` in the envelope for a request without a verified identity, saying why
/// when a certificate was presented and failed verification (the TLS layer lets clients without
/// a certificate, or with a bad one, through, so they get this answer instead of a handshake
/// failure, which a client would retry forever).
async fn require_identity(
    State(access): State<Access>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let peer = request.extensions().get::<PeerIdentity>();
    match access.identified(peer) {
        Ok(()) => next.run(request).await,
        Err(error) => match request.extensions().get::<CertificateRejection>() {
            Some(rejection) => envelope::certificate_rejected(rejection).into_response(),
            None => envelope::policy_denied(&error).into_response(),
        },
    }
}

/// Admits the request under its identity's budget ([`crate::fairness`]), or answers 503
/// `SUBMITTER_OVERLOADED` with `Retry-After`.
async fn admit_identity(
    State(budgets): State<Budgets>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let identity = charged_identity(request.extensions().get::<PeerIdentity>()).to_owned();
    match budgets.try_admit(&identity, std::time::Instant::now()) {
        Ok(permit) => {
            let response = next.run(request).await;
            drop(permit);
            response
        }
        Err(refusal) => envelope::over_budget(&identity, &refusal).into_response(),
    }
}

/// Probes and metrics: outside tracing, limits and shedding. Probes answer without a client
/// certificate (a kubelet has none); `/metrics` only when `anonymous_metrics` says so.
fn health_routes(state: AppState, anonymous_metrics: bool) -> Router {
    let metrics = if anonymous_metrics {
        get(metrics_text)
    } else {
        get(metrics_text).layer(axum::middleware::from_fn_with_state(
            state.access.clone(),
            require_identity,
        ))
    };
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", metrics)
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
                // DEBUG: every API answer already has its INFO audit line (status, latency,
                // request id); a second line per request doubled the logging cost per request.
                .on_response(DefaultOnResponse::new().level(Level::DEBUG)),
        )
        .layer(axum::middleware::from_fn_with_state(
            state.metrics.clone(),
            crate::metrics::track,
        ))
        // Outside everything that can refuse a request, so refused attempts are audited too.
        .layer(axum::middleware::from_fn(crate::audit::record))
        .layer(CatchPanicLayer::custom(panic_response))
        // Per identity, before the global limit: a refused request never takes a global slot.
        .layer(axum::middleware::from_fn_with_state(
            state.fairness.clone(),
            admit_identity,
        ))
        .layer(HandleErrorLayer::new(handle_layer_error))
        .load_shed()
        // Global: one semaphore for every route, not one per route as a plain limit would give.
        .layer(GlobalConcurrencyLimitLayer::new(
            config.max_concurrency.max(1),
        ))
        .timeout(config.request_timeout)
        .layer(DefaultBodyLimit::max(BODY_LIMIT_BYTES));
    health_routes(state.clone(), config.anonymous_metrics).merge(router(state).layer(stack))
}

fn request_span(request: &axum::http::Request<axum::body::Body>) -> Span {
    let request_id = request
        .headers()
        .get("x-request-id")
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default();
    // `&str`, not Display: see the audit line.
    tracing::info_span!(
        "request",
        method = request.method().as_str(),
        path = request.uri().path(),
        request_id
    )
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
    // Status answers come from the caches: not ready until they hold a complete listing, nor
    // while a watch keeps failing (the cache then falls behind).
    if let Some(caches) = &state.caches {
        if !caches.synced() {
            return Err(envelope::not_ready(
                "watch caches have not synced yet".into(),
            ));
        }
        let failing = caches.failing_watches(std::time::Instant::now());
        if !failing.is_empty() {
            return Err(envelope::not_ready(format!(
                "watch of {} failing",
                failing.join(" and ")
            )));
        }
    }
    match state.kube.reachable().await {
        Ok(()) => Ok(Json(json!({"status": "ready"}))),
        Err(error) => Err(envelope::not_ready(format!(
            "Kubernetes API server unreachable: {}",
            error_chain(&error)
        ))),
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

#[instrument(skip_all, fields(submission_id = request.submission_id.as_str(), namespace, pod, dry_run))]
async fn submit(
    State(state): State<AppState>,
    identity: Option<Extension<PeerIdentity>>,
    uri: Uri,
    ApiJson(request): ApiJson<SubmitRequest>,
) -> Result<Response, ApiError> {
    let peer = identity.as_ref().map(|e| &e.0);
    crate::audit::note_submission_id(&request.submission_id);
    let outcome = submit::submit(&state, peer, uri.query(), &request)
        .await
        .map_err(|failure| {
            envelope::submit_failure(&failure).with_submission_id(&request.submission_id)
        })?;
    match &outcome {
        Outcome::Driver { body, .. } => crate::audit::note_driver(body),
        Outcome::DryRun(_) => crate::audit::note_dry_run(),
    }
    Ok(match outcome {
        Outcome::Driver {
            created: true,
            body,
        } => (StatusCode::CREATED, Json(body)).into_response(),
        Outcome::Driver {
            created: false,
            body,
        } => (StatusCode::OK, Json(body)).into_response(),
        Outcome::DryRun(list) => (StatusCode::OK, Json(list)).into_response(),
    })
}

#[instrument(skip_all, fields(namespace, pod))]
async fn driver_status(
    State(state): State<AppState>,
    identity: Option<Extension<PeerIdentity>>,
    path: Result<Path<(String, String)>, PathRejection>,
) -> Result<Json<DriverStatus>, ApiError> {
    let Path((namespace, pod)) = path.map_err(envelope::path_rejection)?;
    let peer = identity.as_ref().map(|e| &e.0);
    crate::status::driver_status(&state, peer, &namespace, &pod)
        .await
        .inspect(crate::audit::note_status)
        .map(Json)
        .map_err(|error| {
            info!(kind = error.kind(), "driver status not answered");
            envelope::lookup_failure(&error)
        })
}

#[instrument(skip_all, fields(submission_id))]
async fn submission_status(
    State(state): State<AppState>,
    identity: Option<Extension<PeerIdentity>>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Json<DriverStatus>, ApiError> {
    let Path(submission_id) = path.map_err(envelope::path_rejection)?;
    let peer = identity.as_ref().map(|e| &e.0);
    crate::status::submission_status(&state, peer, &submission_id)
        .await
        .inspect(crate::audit::note_status)
        .map(Json)
        .map_err(|error| {
            info!(kind = error.kind(), "submission status not answered");
            envelope::lookup_failure(&error).with_submission_id(submission_id)
        })
}
