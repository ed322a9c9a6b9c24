//! The handlers of the routes that operate a submission by its id: its driver's log
//! (`GET …/log`), its kill (`DELETE …`) and the caller's list (`GET /api/v1/spark-submit`).
//! Each is one call to its module, its failures mapped by the envelope.

use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use tracing::{info, instrument};

use crate::envelope::{self, ApiError};
use crate::state::AppState;
use crate::tls::PeerIdentity;
use submission::api::{DriverStatus, KillQuery, ListQuery, ListResponse, LogQuery, Target};

/// The `Content-Type` of a log: the API server's lines as they are.
const TEXT_PLAIN: &str = "text/plain; charset=utf-8";

type Identity = Option<Extension<PeerIdentity>>;

fn peer(identity: &Identity) -> Option<&PeerIdentity> {
    identity.as_ref().map(|e| &e.0)
}

fn by_submission(path: Result<Path<String>, PathRejection>) -> Result<Target, ApiError> {
    let Path(id) = path.map_err(envelope::path_rejection)?;
    Ok(Target::Submission(id))
}

fn by_driver(path: Result<Path<(String, String)>, PathRejection>) -> Result<Target, ApiError> {
    let Path((namespace, pod)) = path.map_err(envelope::path_rejection)?;
    Ok(Target::Driver { namespace, pod })
}

/// The error answer about `target`: its submission id echoed when it has one.
fn about(target: &Target, error: ApiError) -> ApiError {
    match target.submission_id() {
        Some(id) => error.with_submission_id(id),
        None => error,
    }
}

#[instrument(skip_all)]
pub(super) async fn list(
    State(state): State<AppState>,
    identity: Identity,
    query: Result<Query<ListQuery>, QueryRejection>,
) -> Result<Json<ListResponse>, ApiError> {
    let Query(query) = query.map_err(envelope::query_rejection)?;
    if let Some(namespace) = &query.namespace {
        crate::audit::note_namespace(namespace);
    }
    let page = crate::list::list(&state, peer(&identity), &query).map_err(|error| {
        info!(kind = error.kind(), "list not answered");
        envelope::list_failure(&error)
    })?;
    crate::audit::note_outcome("LISTED");
    Ok(Json(page))
}

#[instrument(skip_all)]
pub(super) async fn kill_submission(
    State(state): State<AppState>,
    identity: Identity,
    path: Result<Path<String>, PathRejection>,
    query: Result<Query<KillQuery>, QueryRejection>,
) -> Result<(StatusCode, Json<DriverStatus>), ApiError> {
    kill(&state, &identity, by_submission(path)?, query).await
}

#[instrument(skip_all)]
pub(super) async fn kill_driver(
    State(state): State<AppState>,
    identity: Identity,
    path: Result<Path<(String, String)>, PathRejection>,
    query: Result<Query<KillQuery>, QueryRejection>,
) -> Result<(StatusCode, Json<DriverStatus>), ApiError> {
    kill(&state, &identity, by_driver(path)?, query).await
}

/// 202 with the driver's status after the kill.
async fn kill(
    state: &AppState,
    identity: &Identity,
    target: Target,
    query: Result<Query<KillQuery>, QueryRejection>,
) -> Result<(StatusCode, Json<DriverStatus>), ApiError> {
    let Query(query) =
        query.map_err(|rejection| about(&target, envelope::query_rejection(rejection)))?;
    let status = crate::kill::kill(state, peer(identity), &target, &query)
        .await
        .map_err(|error| {
            info!(kind = error.kind(), %target, "kill not done");
            about(&target, envelope::kill_failure(&error))
        })?;
    crate::audit::note_status(&status);
    crate::audit::note_outcome("KILLED");
    Ok((StatusCode::ACCEPTED, Json(status)))
}

#[instrument(skip_all)]
pub(super) async fn submission_log(
    State(state): State<AppState>,
    identity: Identity,
    path: Result<Path<String>, PathRejection>,
    query: Result<Query<LogQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    log(&state, &identity, by_submission(path)?, query).await
}

#[instrument(skip_all)]
pub(super) async fn driver_log(
    State(state): State<AppState>,
    identity: Identity,
    path: Result<Path<(String, String)>, PathRejection>,
    query: Result<Query<LogQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    log(&state, &identity, by_driver(path)?, query).await
}

/// 200 `text/plain`, the body streaming the API server's log.
async fn log(
    state: &AppState,
    identity: &Identity,
    target: Target,
    query: Result<Query<LogQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(query) =
        query.map_err(|rejection| about(&target, envelope::query_rejection(rejection)))?;
    let opened = crate::logs::open(state, peer(identity), &target, &query)
        .await
        .map_err(|error| {
            info!(kind = error.kind(), %target, "log not opened");
            about(&target, envelope::log_failure(&error))
        })?;
    crate::audit::note_status(&opened.status);
    crate::audit::note_outcome("LOG");
    let mut response = opened.body.into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(TEXT_PLAIN));
    Ok(response)
}
