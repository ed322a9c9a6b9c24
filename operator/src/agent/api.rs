//! The marker API on 127.0.0.1: thin axum handlers around [`super::state`]. Every answer that is
//! not a success carries the same [`ErrorBody`], fallbacks and body rejections included, and the
//! code-to-status mapping lives in [`status_of`] only.

use std::sync::Arc;
use submission::error_chain::ErrorChain;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::json;
use tracing::{error, info, instrument, warn};

use super::state::{CommitError, CommitRequest, ErrorBody, ErrorCode};
use super::{Shared, now_ms};
use crate::progress_store::ProgressStore;

/// The startup probe.
pub const READY_PATH: &str = "/v1/ready";
/// Read and commit markers.
pub const MARKER_PATH: &str = "/v1/marker";
/// The agent's status.
pub const STATUS_PATH: &str = "/v1/status";

/// The HTTP status of each wire code; the one place they are paired.
pub fn status_of(code: ErrorCode) -> StatusCode {
    match code {
        ErrorCode::BadRequest => StatusCode::BAD_REQUEST,
        ErrorCode::NotFound => StatusCode::NOT_FOUND,
        ErrorCode::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
        ErrorCode::Fenced | ErrorCode::StaleMarker => StatusCode::CONFLICT,
        ErrorCode::NotReady | ErrorCode::StoreUnavailable => StatusCode::SERVICE_UNAVAILABLE,
        ErrorCode::Internal => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

fn error_response(code: ErrorCode, body: ErrorBody) -> Response {
    (status_of(code), axum::Json(body)).into_response()
}

/// The routes, with the agent's shared state.
pub(super) fn router<S: ProgressStore + 'static>(shared: Arc<Shared<S>>) -> Router {
    Router::new()
        .route(READY_PATH, get(ready::<S>))
        .route(MARKER_PATH, get(read_marker::<S>).post(commit_marker::<S>))
        .route(STATUS_PATH, get(status::<S>))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(shared)
}

async fn ready<S: ProgressStore>(State(shared): State<Arc<Shared<S>>>) -> Response {
    if shared.state().is_ready() {
        (StatusCode::OK, axum::Json(json!({"ready": true}))).into_response()
    } else {
        let code = ErrorCode::NotReady;
        let body = json!({
            "ready": false,
            "error": code.as_str(),
            "message": "the agent is still restoring the latest marker",
        });
        (status_of(code), axum::Json(body)).into_response()
    }
}

async fn read_marker<S: ProgressStore>(State(shared): State<Arc<Shared<S>>>) -> Response {
    let view = shared.state().marker_view();
    match view {
        Ok(view) => (StatusCode::OK, axum::Json(view)).into_response(),
        Err(e) => error_response(e.code(), e.body()),
    }
}

async fn status<S: ProgressStore>(State(shared): State<Arc<Shared<S>>>) -> Response {
    let view = shared.state().status_view();
    (StatusCode::OK, axum::Json(view)).into_response()
}

#[instrument(skip_all, fields(app = %shared.app, epoch = shared.epoch))]
async fn commit_marker<S: ProgressStore>(
    State(shared): State<Arc<Shared<S>>>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    match commit(&shared, body).await {
        Ok(view) => (StatusCode::OK, axum::Json(view)).into_response(),
        Err(e) => {
            match &e {
                CommitError::Fenced { current, .. } => {
                    warn!(
                        current_epoch = current,
                        "commit refused: this agent is fenced"
                    );
                }
                CommitError::Store { seq, .. } => {
                    warn!(seq, error = %ErrorChain(&e), "commit failed in the store; the driver may retry");
                }
                CommitError::Corrupt { seq, .. } => {
                    error!(seq, error = %ErrorChain(&e), "commit failed: stored progress is unreadable");
                }
                _ => info!(kind = e.kind(), error = %e, "commit refused"),
            }
            error_response(e.code(), e.body())
        }
    }
}

async fn commit<S: ProgressStore>(
    shared: &Shared<S>,
    body: Result<Bytes, BytesRejection>,
) -> Result<super::state::CommitView, CommitError> {
    let body = body.map_err(|e| CommitError::BadRequest {
        reason: e.body_text(),
    })?;
    let request: CommitRequest =
        serde_json::from_slice(&body).map_err(|e| CommitError::BadRequest {
            reason: format!("expected {{\"seq\": <u64>, \"payload\": <string>}}: {e}"),
        })?;
    shared.state().admit_commit(&request)?;
    let Some(store) = shared.store.get() else {
        return Err(CommitError::NotReady);
    };
    let now = now_ms();
    let result = tokio::time::timeout(
        shared.store_timeout,
        store.commit(
            &shared.app,
            shared.epoch,
            request.seq,
            &request.payload,
            now,
        ),
    )
    .await;
    let mut state = shared.state();
    match result {
        Ok(Ok(())) => {
            info!(seq = request.seq, "committed marker");
            Ok(state.commit_landed(request, now))
        }
        Ok(Err(e)) => Err(state.commit_failed(request.seq, Some(e))),
        Err(_elapsed) => Err(state.commit_failed(request.seq, None)),
    }
}

async fn not_found() -> Response {
    error_response(
        ErrorCode::NotFound,
        ErrorBody::new(
            ErrorCode::NotFound,
            "no such route; the API is /v1/ready, /v1/marker and /v1/status",
        ),
    )
}

async fn method_not_allowed() -> Response {
    error_response(
        ErrorCode::MethodNotAllowed,
        ErrorBody::new(
            ErrorCode::MethodNotAllowed,
            "method not allowed on this route",
        ),
    )
}
